//! `srt plan --explain` and plan reasons, on a recorded deployment built in memory: the
//! changed hash inputs are named with before/after values, secrets only as digests.

use srt::assemble::BuildOptions;
use srt::graph::{self, ResourceGraph, Spec};
use srt::launch::HostLayout;
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
    let lp = srt::assemble::assemble(
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
        s.resources
            .insert(r.address.clone(), ResourceState::of(r, Status::Running));
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
    // Its workers are on its command line: the plan says it must restart, and why.
    assert_eq!(
        router.reasons,
        vec![Reason::MustRestart {
            dependencies: vec!["worker.decode[0].node[0]".into()],
            why: "vllm-router 0.1.17 cannot add prefill/decode workers at run time: they are on its command line, so a change of them restarts it and requests fail until it serves again (2-3 s measured); smg (`frontend.type: smg`) adds and removes prefill/decode workers without a restart".into()
        }]
    );
    assert!(
        plan::render::render(&p).contains("because it must restart: vllm-router 0.1.17 cannot add prefill/decode workers at run time"),
        "{}",
        plan::render::render(&p)
    );
    let text = plan::render::explain(&p, &state, &after);
    assert!(text.contains("{+--max-model-len 1024+}"), "{text}");
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

/// `--explain` shortens long values at a character boundary (a multibyte character at
/// byte 160 used to panic), and tolerates short or odd hashes from a hand-edited state.
#[test]
fn explain_survives_multibyte_values_and_odd_recorded_hashes() {
    let value = format!("{}é{}", "a".repeat(158), "ü".repeat(40));
    let with_env = |v: &str| {
        base().replace(
            "    args:\n      data-parallel-size: 2\nhealth_check",
            &format!("    args:\n      data-parallel-size: 2\n    env:\n      NOTE: \"{v}\"\nhealth_check"),
        )
    };
    let before = lower(&with_env("short"));
    let mut state = applied(&before);
    for (i, r) in state.resources.values_mut().enumerate() {
        r.hash = ["", "é", "abc", "ü".repeat(20).as_str()][i % 4].to_string();
    }
    let after = lower(&with_env(&value));
    let p = plan::diff(
        &after,
        &state,
        &BTreeMap::new(),
        "h",
        &PlanOptions::default(),
    );
    let text = plan::render::explain(&p, &state, &after);
    assert!(text.contains("spec.env.NOTE: \"short\" -> \"aaa"), "{text}");
    assert!(text.contains("..."), "{text}");
}

/// A deployment applied when the side channels and `VLLM_PORT` ranges never repeated
/// within a deployment: `seed/disagg-nixl.yaml` on a cluster had decode[0] (node1) on
/// side-channel base 5404 and `VLLM_PORT` 20050 (the golden files before ports were
/// counted per host). Its next plan moves them to 5400 and 20000 and says why.
#[test]
fn ports_moved_by_per_host_counting_are_named_with_their_values() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/examples/seed/disagg-nixl.yaml"
    ))
    .unwrap();
    let source = Source {
        name: "disagg-nixl.yaml".into(),
        text,
    };
    let recipe = load_str(&source, "disagg-nixl").unwrap();
    let lp = srt::assemble::assemble(
        &recipe,
        &BuildOptions {
            nodes: None,
            hosts: HostLayout::Distinct,
        },
    )
    .unwrap();
    let g = graph::lower(&lp, &serde_json::json!({"executor": "slurm"})).unwrap();
    // The recorded deployment: the same graph, but decode[0] as the old allocation had it.
    let mut state = applied(&g);
    let worker = "worker.decode[0].node[0]";
    let block = "ports.worker.decode[0].node[0]";
    {
        let w = state.resources.get_mut(worker).unwrap();
        let mut spec = w.spec.value();
        assert_eq!(spec["env"]["VLLM_NIXL_SIDE_CHANNEL_PORT"], "5400");
        spec["env"]["VLLM_NIXL_SIDE_CHANNEL_PORT"] = "5404".into();
        spec["env"]["VLLM_PORT"] = "20050".into();
        spec["ports"]["nixl"]["base"] = 5404.into();
        spec["ports"]["vllm_scan"]["base"] = 20050.into();
        w.spec = Spec::of(&spec);
        w.hash = "old-worker".into();
        let b = state.resources.get_mut(block).unwrap();
        let mut spec = b.spec.value();
        spec["ports"]["nixl"]["base"] = 5404.into();
        spec["ports"]["vllm_scan"]["base"] = 20050.into();
        b.spec = Spec::of(&spec);
        b.hash = "old-block".into();
    }
    let p = plan::diff(&g, &state, &BTreeMap::new(), "h", &PlanOptions::default());
    assert_eq!(
        p.change(block).unwrap().reasons,
        vec![Reason::SpecChanged {
            fields: vec!["ports".into()]
        }]
    );
    assert_eq!(
        p.change(worker).unwrap().reasons,
        vec![
            Reason::SpecChanged {
                fields: vec![
                    "env.VLLM_NIXL_SIDE_CHANNEL_PORT".into(),
                    "env.VLLM_PORT".into(),
                    "ports".into()
                ]
            },
            Reason::DependencyChanged {
                dependencies: vec![block.into()]
            }
        ]
    );
    let rendered = plan::render::render(&p);
    assert!(
        rendered
            .contains("its spec changed: env.VLLM_NIXL_SIDE_CHANNEL_PORT, env.VLLM_PORT, ports"),
        "{rendered}"
    );
    let explained = plan::render::explain(&p, &state, &g);
    for line in [
        "spec.env.VLLM_NIXL_SIDE_CHANNEL_PORT: \"5404\" -> \"5400\"",
        "spec.env.VLLM_PORT: \"20050\" -> \"20000\"",
        "\"nixl\":{\"base\":5404,\"count\":4}",
    ] {
        assert!(explained.contains(line), "{line} in\n{explained}");
    }
    // Nothing else moves. (In a real deployment the Router's recorded hash covered the
    // old worker hash too, so it is replaced with `dependencies changed`; this state
    // kept the new one.)
    let replaced: Vec<&str> = p
        .changes
        .iter()
        .filter(|c| c.action == Action::Replace)
        .map(|c| c.address.as_str())
        .collect();
    assert_eq!(replaced, [block, worker], "{rendered}");
}
