//! `srt plan --explain` and plan reasons, on a recorded deployment built in memory: the
//! changed hash inputs are named with before/after values, secrets only as digests.

use srt::graph::{self, ResourceGraph};
use srt::launch::{self, build::HostLayout, BuildOptions};
use srt::plan::{self, Action, PlanOptions, Reason};
use srt::recipe::{load_str, Source};
use srt::state::{ResourceState, State, Status};
use std::collections::BTreeMap;

fn lower(text: &str) -> ResourceGraph {
    let source = Source {
        name: "r.yaml".into(),
        text: text.into(),
    };
    let recipe = load_str(&source, "r").unwrap();
    let lp = launch::build(
        &recipe,
        &BuildOptions {
            nodes: None,
            hosts: HostLayout::Shared,
        },
    )
    .unwrap();
    graph::lower(
        &lp,
        &serde_json::json!({"executor": "local", "simulate": true}),
    )
    .unwrap()
}

/// State as if `g` had been applied.
fn applied(g: &ResourceGraph) -> State {
    let mut s = State::new("local-disagg");
    for r in &g.resources {
        s.resources.insert(
            r.address.clone(),
            ResourceState {
                kind: r.kind.name().into(),
                hash: r.hash.clone(),
                dependencies: r.deps.clone(),
                spec: r.spec.clone(),
                status: Status::Running,
                runtime: None,
                node: None,
                ports: BTreeMap::new(),
                log_path: None,
                error: None,
            },
        );
    }
    s
}

fn base() -> String {
    std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/examples/local-disagg.yaml"
    ))
    .unwrap()
}

fn changed() -> String {
    let b = base();
    let c = b.replace(
        "    args:\n      data-parallel-size: 2\nhealth_check",
        "    args:\n      data-parallel-size: 2\n      max-model-len: 1024\n    env:\n      HF_TOKEN: hunter2\nhealth_check",
    );
    assert_ne!(b, c);
    c
}

#[test]
fn unchanged_recipe_plans_nothing() {
    let g = lower(&base());
    let p = plan::diff(
        &g,
        &applied(&g),
        &BTreeMap::new(),
        "h",
        &PlanOptions::default(),
    );
    assert!(!p.has_changes());
    assert!(plan::render::render(&p).starts_with("No changes."));
}

#[test]
fn decode_change_replaces_decode_and_router_only_with_reasons() {
    let before = lower(&base());
    let state = applied(&before);
    let after = lower(&changed());
    let p = plan::diff(
        &after,
        &state,
        &BTreeMap::new(),
        "h",
        &PlanOptions::default(),
    );
    let replaced: Vec<&str> = p
        .changes
        .iter()
        .filter(|c| c.action == Action::Replace)
        .map(|c| c.address.as_str())
        .collect();
    assert_eq!(replaced, ["worker.decode[0].node[0]", "router[0]"]);
    let decode = p.change("worker.decode[0].node[0]").unwrap();
    assert_eq!(
        decode.reasons,
        vec![Reason::SpecChanged {
            fields: vec!["argv".into(), "env.HF_TOKEN".into()]
        }]
    );
    let router = p.change("router[0]").unwrap();
    assert_eq!(
        router.reasons,
        vec![Reason::DependencyChanged {
            dependencies: vec!["worker.decode[0].node[0]".into()]
        }]
    );
    let text = plan::render::explain(&p, &state, &after);
    assert!(text.contains("{+--max-model-len+}"), "{text}");
    assert!(
        text.contains("spec.env.HF_TOKEN: (absent) -> \"blake3:"),
        "{text}"
    );
    assert!(
        text.contains("dependency worker.decode[0].node[0]: hash"),
        "{text}"
    );
    for out in [text, plan::render::render(&p), plan::render::json(&p)] {
        assert!(!out.contains("hunter2"), "secret leaked:\n{out}");
    }
}

#[test]
fn a_changed_secret_replaces_its_workers() {
    let one = lower(&changed());
    let state = applied(&one);
    let two = lower(&changed().replace("hunter2", "hunter3"));
    let p = plan::diff(&two, &state, &BTreeMap::new(), "h", &PlanOptions::default());
    let decode = p.change("worker.decode[0].node[0]").unwrap();
    assert_eq!(decode.action, Action::Replace);
    assert_eq!(
        decode.reasons,
        vec![Reason::SpecChanged {
            fields: vec!["env.HF_TOKEN".into()]
        }]
    );
    assert_eq!(
        p.change("worker.prefill[0].node[0]").unwrap().action,
        Action::NoOp
    );
}
