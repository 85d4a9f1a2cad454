//! `srt plan` output for every example against a fresh deployment, as golden files in
//! `golden/plan/`, plus a second plan after a recorded apply showing no changes.

use srt::assemble::BuildOptions;
use srt::graph;
use srt::launch::HostLayout;
use srt::plan::{self, PlanOptions};
use srt::recipe::{load_str, Source};
use srt::state::State;
use std::collections::BTreeMap;

fn plan_text(path: &std::path::Path) -> String {
    let text = std::fs::read_to_string(path).unwrap();
    // Named relative to the repository (where tests run), as the CLI names a recipe:
    // its scripts are read relative to its directory.
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
    let source = Source {
        name: path
            .strip_prefix(root)
            .unwrap_or(path)
            .display()
            .to_string(),
        text,
    };
    let stem = path.file_stem().unwrap().to_string_lossy().to_string();
    let recipe = load_str(&source, &stem).unwrap();
    let lp = srt::assemble::assemble(
        &recipe,
        &BuildOptions {
            nodes: None,
            hosts: HostLayout::Shared,
        },
    )
    .unwrap();
    let execution = serde_json::json!({"executor": "local", "simulate": true});
    let g = graph::lower(&lp, &execution).unwrap();
    let state = State::new(&recipe.name.value);
    let p = plan::diff(
        &g,
        &state,
        &BTreeMap::new(),
        "hash",
        &PlanOptions::default(),
    );
    plan::render::render(&p)
}

#[test]
fn plan_of_every_example() {
    insta::glob!("../examples", "**/*.yaml", |path| {
        let text = plan_text(path);
        insta::with_settings!({snapshot_path => "../golden/plan", prepend_module_to_snapshot => false, omit_expression => true}, {
            insta::assert_snapshot!(text);
        });
    });
}

#[test]
fn plans_are_byte_identical_across_runs() {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/seed/disagg-nixl.yaml");
    assert_eq!(plan_text(&p), plan_text(&p));
}

/// A graph of `examples/local-agg.yaml` with `workers` workers and `max-model-len`.
fn agg_graph(workers: u32, len: u32) -> graph::ResourceGraph {
    let text = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/local-agg.yaml"),
    )
    .unwrap()
    .replace("gpus_per_node: 2", "gpus_per_node: 4")
    .replace("workers: 2", &format!("workers: {workers}\n    gpus: 1"))
    .replace("max-model-len: 2048", &format!("max-model-len: {len}"));
    assert!(text.contains(&format!("workers: {workers}")), "{text}");
    let source = Source {
        name: "local-agg.yaml".into(),
        text,
    };
    let recipe = load_str(&source, "local-agg").unwrap();
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
fn applied(g: &graph::ResourceGraph) -> State {
    let mut s = State::new("local-agg");
    for r in &g.resources {
        let record = srt::state::ResourceState::of(r, srt::state::Status::Running);
        s.resources.insert(r.address.clone(), record);
    }
    s
}

/// Changes to a running deployment: scaling updates the Router's membership in place
/// (`~`, with the URLs added or taken out) and never replaces the Router; an args
/// change replaces the workers (rolled) and nothing else.
#[test]
fn plans_of_changes_to_a_running_deployment() {
    let running = applied(&agg_graph(3, 2048));
    for (name, desired) in [
        ("scale-up-3-to-4", agg_graph(4, 2048)),
        ("scale-down-3-to-2", agg_graph(2, 2048)),
        ("args-change", agg_graph(3, 1024)),
    ] {
        let p = plan::diff(
            &desired,
            &running,
            &BTreeMap::new(),
            "hash",
            &PlanOptions::default(),
        );
        assert!(
            p.change("router[0]").unwrap().action == plan::Action::NoOp,
            "{name}"
        );
        let text = plan::render::render(&p);
        insta::with_settings!({snapshot_path => "../golden/plan", prepend_module_to_snapshot => false, omit_expression => true}, {
            insta::assert_snapshot!(name, text);
        });
    }
}
