//! `sensitive_env`: variables a recipe marks as secrets are treated like the default
//! sensitive names: masked in the rendered plan (text and JSON), recorded as a digest in
//! the resource spec (so in state), and a changed value still changes the hash.

mod common;

use srt::assemble::{assemble as build, BuildOptions};
use srt::launch::HostLayout;
use srt::launch::{render, LaunchPlan};
use srt::recipe::{load_str, Source};

const VALUE: &str = "postgres://srt:pw-0001@db/x";

fn recipe(marked: &str, value: &str) -> String {
    format!(
        "\
name: marked
{marked}
frontend:
  enable_multiple_frontends: false
  env:
    DATABASE_URL: \"{value}\"
roles:
  agg:
    nodes: 1
    workers: 1
    gpus: 1
    env:
      DATABASE_URL: \"{value}\"
      PLAIN: visible
"
    )
}

fn plan(text: &str) -> LaunchPlan {
    let source = Source {
        name: "marked.yaml".into(),
        text: text.into(),
    };
    let r = load_str(&source, "marked").unwrap_or_else(|e| panic!("{}", common::render_diag(&e)));
    build(
        &r,
        &BuildOptions {
            nodes: None,
            hosts: HostLayout::Shared,
        },
    )
    .unwrap()
}

fn specs(plan: &LaunchPlan) -> Vec<(String, String, serde_json::Value)> {
    srt::graph::lower(plan, &serde_json::json!({"executor": "local"}))
        .unwrap()
        .resources
        .into_iter()
        .map(|r| (r.address, r.hash, r.spec.value()))
        .collect()
}

#[test]
fn marked_variables_are_masked_and_digested_like_the_default_list() {
    let p = plan(&recipe("sensitive_env: [DATABASE_URL]", VALUE));
    assert_eq!(p.sensitive_env, ["DATABASE_URL"]);
    let text = render::render(&p);
    let json = render::json(&p);
    for shown in [&text, &json] {
        assert!(!shown.contains(VALUE), "{shown}");
        assert!(shown.contains("visible"), "{shown}");
    }
    assert!(text.contains("DATABASE_URL=(sensitive)"), "{text}");
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["sensitive_env"], serde_json::json!(["DATABASE_URL"]));
    let specs = specs(&p);
    let processes: Vec<_> = specs
        .iter()
        .filter(|(_, _, s)| s["env"].is_object())
        .collect();
    assert_eq!(processes.len(), 2, "a worker and the Router");
    for (address, _, spec) in processes {
        let recorded = spec["env"]["DATABASE_URL"].as_str().unwrap();
        assert!(recorded.starts_with("blake3:"), "{address}: {recorded}");
        assert!(!spec.to_string().contains(VALUE), "{address}");
    }
}

#[test]
fn without_the_mark_the_value_is_plain_and_the_json_has_no_field() {
    let p = plan(&recipe("", VALUE));
    assert!(render::render(&p).contains(VALUE));
    let v: serde_json::Value = serde_json::from_str(&render::json(&p)).unwrap();
    assert!(v.get("sensitive_env").is_none());
}

#[test]
fn a_changed_marked_value_changes_the_hashes_of_its_users() {
    let a = specs(&plan(&recipe("sensitive_env: [DATABASE_URL]", VALUE)));
    let b = specs(&plan(&recipe(
        "sensitive_env: [DATABASE_URL]",
        "postgres://other",
    )));
    let changed: Vec<&str> = a
        .iter()
        .zip(&b)
        .filter(|(x, y)| x.1 != y.1)
        .map(|(x, _)| x.0.as_str())
        .collect();
    assert!(changed.contains(&"worker.agg[0].node[0]"), "{changed:?}");
    assert!(changed.contains(&"router[0]"), "{changed:?}");
}

#[test]
fn bad_sensitive_env_is_refused_with_a_span() {
    for (marked, code, at) in [
        (
            "sensitive_env: DATABASE_URL",
            "srt::recipe::type",
            "DATABASE_URL",
        ),
        ("sensitive_env: [1X]", "srt::recipe::env_name", "1X"),
        ("sensitive_env: [[A]]", "srt::recipe::type", "["),
    ] {
        let text = recipe(marked, VALUE);
        let source = Source {
            name: "marked.yaml".into(),
            text: text.clone(),
        };
        let err = load_str(&source, "marked").expect_err(marked);
        assert_eq!(err.problems.len(), 1, "{marked}: {:?}", err.problems);
        let p = &err.problems[0];
        assert_eq!(p.code, code, "{marked}");
        let start = p.span.offset();
        assert_eq!(&text[start..start + p.span.len()], at, "{marked}");
    }
}

/// No diagnostic shows a secret value: not in the excerpt, not in a message, whether
/// the error is next to the secret, on it, or a syntax error the tree never saw.
#[test]
fn diagnostics_never_show_secret_values() {
    const TOKEN: &str = "hf_Zq7secretvalue0123456789";
    let cases = [
        // A typo next to the token.
        format!("roles:\n  agg:\n    nodes: 1\n    workers: 1\n    gpus: 1\n    env:\n      HF_TOKEN: {TOKEN}\n    argz: {{}}\n"),
        // An error on the secret's own key (a variable srt manages) and its value.
        format!("sensitive_env: [VLLM_PORT]\nroles:\n  agg:\n    nodes: 1\n    workers: 1\n    gpus: 1\n    env:\n      VLLM_PORT: \"{TOKEN}\"\n"),
        // A secret-like flag: refused, and its value masked.
        format!("roles:\n  agg:\n    nodes: 1\n    workers: 1\n    gpus: 1\n    args:\n      api-key: {TOKEN}\n"),
        // A value made a secret by `sensitive_env`, with an option-like value.
        format!("sensitive_env: [MY_SETTING]\nroles:\n  agg:\n    nodes: 1\n    workers: 1\n    gpus: 1\n    env:\n      MY_SETTING: \"-{TOKEN}\"\n    argz: 1\n"),
        // A syntax error on the token's line: no tree, the line is still masked.
        format!("roles:\n  agg:\n    env:\n      HF_TOKEN: {TOKEN} : [\n"),
    ];
    for text in cases {
        let source = Source {
            name: "secret.yaml".into(),
            text: text.clone(),
        };
        let err = match load_str(&source, "secret") {
            Err(e) => e,
            Ok(r) => {
                source.error(build(&r, &BuildOptions::default()).expect_err("the case is invalid"))
            }
        };
        let shown = common::render_diag(&err);
        assert!(!shown.contains(TOKEN), "{text}\nshows the token:\n{shown}");
        assert!(
            !shown.contains(&TOKEN[4..20]),
            "{text}\nshows part of the token:\n{shown}"
        );
        assert!(
            shown.contains("****"),
            "{text}\nthe excerpt has no mask:\n{shown}"
        );
    }
}
