//! Golden launch plans: `srt render` of every example, reviewed and committed in
//! `golden/`, plus proof that rendering is deterministic and host-independent.
//!
//! Regenerate after an intended change with `INSTA_UPDATE=always cargo test --test golden`
//! (or `cargo insta review`), then read the diff.

mod common;

use srt::launch::render::{json, render};
use std::path::Path;

/// One golden file per example: `golden/launch_plan@<path under examples>.snap`.
#[test]
fn launch_plan() {
    insta::glob!("../examples", "**/*.yaml", |path| {
        let plan = common::plan(path);
        insta::with_settings!({
            snapshot_path => "../golden",
            prepend_module_to_snapshot => false,
            omit_expression => true,
        }, {
            insta::assert_snapshot!(render(&plan));
        });
    });
}

/// Every example has a golden file and every golden file an example, so a removed or
/// renamed example does not leave a stale file behind.
#[test]
fn no_orphan_golden_files() {
    let root = common::root();
    let mut expected: Vec<String> = common::examples()
        .iter()
        .map(|p| {
            let rel = p.strip_prefix(root.join("examples")).unwrap();
            format!(
                "launch_plan@{}.snap",
                rel.to_string_lossy().replace(['/', '\\'], "__")
            )
        })
        .collect();
    expected.sort();
    let mut found: Vec<String> = std::fs::read_dir(root.join("golden"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|f| f.ends_with(".snap"))
        .collect();
    found.sort();
    assert_eq!(found, expected);
}

fn render_both(path: &Path) -> (String, String) {
    let plan = common::plan(path);
    (render(&plan), json(&plan))
}

/// Two independent loads and builds of the same recipe render byte-identical text
/// and JSON.
#[test]
fn rendering_is_deterministic() {
    for path in common::examples() {
        let (text1, json1) = render_both(&path);
        let (text2, json2) = render_both(&path);
        assert_eq!(text1, text2, "{}: text differs", path.display());
        assert_eq!(json1, json2, "{}: JSON differs", path.display());
        let value: serde_json::Value = serde_json::from_str(&json1).unwrap();
        assert_eq!(value["format_version"], 3);
    }
}

/// `true` when `needle` occurs in `haystack` as a whole word (not inside a longer
/// identifier), so a short host name does not match inside `vllm`.
fn contains_word(haystack: &str, needle: &str) -> bool {
    haystack.match_indices(needle).any(|(i, _)| {
        let before = haystack[..i].chars().next_back();
        let after = haystack[i + needle.len()..].chars().next();
        let ident = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
        !ident(before) && !ident(after)
    })
}

/// Nothing about the machine that renders the plan leaks into it: IPs, directories and
/// hosts are placeholders resolved at apply time.
#[test]
fn rendering_has_no_host_values() {
    let cwd = std::env::current_dir().unwrap();
    let mut needles: Vec<String> = vec![
        cwd.to_string_lossy().into_owned(),
        common::root().to_string_lossy().into_owned(),
        std::env::temp_dir().to_string_lossy().into_owned(),
        "/tmp".into(),
    ];
    if let Ok(home) = std::env::var("HOME") {
        if home.len() > 1 {
            needles.push(format!("{home}/"));
        }
    }
    let hostname = nix::unistd::gethostname()
        .ok()
        .and_then(|h| h.into_string().ok())
        .filter(|h| !h.is_empty() && h != "localhost");
    for path in common::examples() {
        let (text, json) = render_both(&path);
        for output in [&text, &json] {
            for needle in &needles {
                assert!(
                    !output.contains(needle.as_str()),
                    "{}: output contains `{needle}`",
                    path.display()
                );
            }
            if let Some(h) = &hostname {
                assert!(
                    !contains_word(output, h),
                    "{}: output contains the host name `{h}`",
                    path.display()
                );
            }
            // Concrete addresses never appear; node IPs are placeholders.
            assert!(!output.contains("127.0.0.1"), "{}", path.display());
        }
    }
}

#[test]
fn word_matching_ignores_identifiers() {
    assert!(contains_word("ssh vm now", "vm"));
    assert!(contains_word("http://vm:8000", "vm"));
    assert!(!contains_word("vllm serve", "vm"));
    assert!(!contains_word("kvm_x", "vm"));
}

fn keys(v: &serde_json::Value) -> Vec<&str> {
    v.as_object()
        .unwrap_or_else(|| panic!("not an object: {v}"))
        .keys()
        .map(String::as_str)
        .collect()
}

/// The JSON field names and order of format 3, as documented in
/// `docs/launch-plan-json.md`: renaming or removing one must bump `format_version`.
#[test]
fn json_format_3_fields() {
    let mut probe_types = std::collections::BTreeSet::new();
    let mut memberships = 0;
    for path in common::examples() {
        let (_, json) = render_both(&path);
        let v: serde_json::Value = serde_json::from_str(&json).unwrap();
        assert_eq!(v["format_version"], 3);
        // Optional, additive fields (present only when the recipe sets them).
        let mut top: Vec<&str> = keys(&v);
        top.retain(|k| {
            !matches!(
                *k,
                "precision" | "gpu_type" | "identity" | "memberships" | "warnings" | "files"
            )
        });
        assert_eq!(
            top,
            [
                "format_version",
                "deployment",
                "engine",
                "frontend",
                "served_model_name",
                "nodes",
                "processes",
                "gates",
                "rollout",
                "public_url",
                "leases"
            ]
        );
        assert_eq!(
            keys(&v["rollout"]),
            ["max_unavailable", "drain_seconds", "min_ready_seconds"]
        );
        for m in v["memberships"].as_array().into_iter().flatten() {
            let mut k = keys(m);
            k.retain(|k| *k != "note");
            assert_eq!(k, ["address", "router", "admin_url", "mode", "members"]);
            for member in m["members"].as_array().unwrap() {
                let mut want = vec!["worker", "url", "role"];
                if !member["kv_connector"].is_null() {
                    want.push("kv_connector");
                }
                assert_eq!(keys(member), want);
            }
            memberships += 1;
        }
        for n in v["nodes"].as_array().unwrap() {
            assert_eq!(keys(n), ["index", "name", "ip", "gpus"]);
        }
        for p in v["processes"].as_array().unwrap() {
            // What runs around the program: only when the recipe's runtime keys ask.
            let mut k = keys(p);
            if let Some(ranks) = p.get("ranks") {
                k.retain(|k| *k != "ranks");
                assert_eq!(keys(ranks), ["tasks", "nodes", "mpi", "launcher"]);
            }
            if let Some(wrap) = p.get("wrap") {
                k.retain(|k| *k != "wrap");
                for key in keys(wrap) {
                    assert!(
                        ["setup", "prefix", "dirs", "mounts"].contains(&key),
                        "{key}"
                    );
                }
            }
            assert_eq!(
                k,
                [
                    "address",
                    "kind",
                    "node",
                    "devices",
                    "ports",
                    "env",
                    "env_unset",
                    "argv",
                    "files",
                    "depends_on",
                    "watches",
                    "worker",
                    "container_image"
                ]
            );
            for block in p["ports"].as_object().unwrap().values() {
                assert_eq!(keys(block), ["base", "count"]);
            }
            match p["kind"].as_str().unwrap() {
                "worker" => {
                    let mut want = vec![
                        "role",
                        "endpoint",
                        "node_rank",
                        "advertised_url",
                        "local_dp",
                        "bootstrap_port",
                    ];
                    if !p["worker"]["kv_connector"].is_null() {
                        want.push("kv_connector");
                    }
                    // A follower node says so; a worker with a health probe of its
                    // own (under a frontend's runtime, or an SGLang follower's
                    // stand-in health server) says it, and one under a runtime also
                    // what runs in its place under `--simulate`.
                    for optional in ["headless", "health", "simulated"] {
                        let v = &p["worker"][optional];
                        if !v.is_null() && *v != false {
                            want.push(optional);
                        }
                    }
                    assert_eq!(keys(&p["worker"]), want);
                }
                "router" | "nginx" | "frontend" | "etcd" | "nats" => assert!(p["worker"].is_null()),
                other => panic!("unknown process kind {other}"),
            }
        }
        for g in v["gates"].as_array().unwrap() {
            assert_eq!(keys(g), ["address", "description", "probe", "depends_on"]);
            let probe = &g["probe"];
            let t = probe["type"].as_str().unwrap().to_string();
            let want: &[&str] = match t.as_str() {
                "json_counts" => {
                    for c in probe["counts"].as_array().unwrap() {
                        assert_eq!(keys(c), ["name", "pointers", "at_least"]);
                    }
                    &["type", "urls", "path", "counts"]
                }
                "http" => &["type", "urls", "path"],
                "json_items" => {
                    for l in probe["lists"].as_array().unwrap() {
                        assert_eq!(keys(l), ["name", "array", "fields", "at_least"]);
                        for f in l["fields"].as_array().unwrap() {
                            assert_eq!(keys(f), ["pointer", "value", "prefix"]);
                        }
                    }
                    &["type", "urls", "path", "lists"]
                }
                "completion" => &["type", "url", "model"],
                "command" if probe.get("image").is_some() => {
                    &["type", "node", "argv", "env", "image", "status"]
                }
                "command" => &["type", "node", "argv", "env", "status"],
                "benchmark" => {
                    assert_eq!(
                        keys(&probe["dataset"]),
                        ["name", "isl", "osl", "range_ratio", "prefix_len"]
                    );
                    assert_eq!(keys(&probe["goodput"]), ["ttft_ms", "tpot_ms", "e2el_ms"]);
                    &[
                        "type",
                        "url",
                        "model",
                        "tokenizer",
                        "endpoint",
                        "dataset",
                        "concurrencies",
                        "num_prompts_mult",
                        "num_warmup_mult",
                        "request_rate",
                        "max_duration_seconds",
                        "max_failed_fraction",
                        "ignore_eos",
                        "seed",
                        "percentiles",
                        "goodput",
                    ]
                }
                other => panic!("unknown probe type {other}"),
            };
            assert_eq!(keys(probe), want);
            probe_types.insert(t);
        }
        for l in v["leases"].as_array().unwrap() {
            assert_eq!(keys(l), ["host", "kind", "block", "owner"]);
        }
    }
    assert_eq!(
        probe_types.into_iter().collect::<Vec<_>>(),
        [
            "benchmark",
            "command",
            "completion",
            "http",
            "json_counts",
            "json_items"
        ]
    );
    assert!(memberships > 5, "{memberships}");
}
