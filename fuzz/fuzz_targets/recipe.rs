//! Fuzz the recipe loader and everything downstream of it that needs no machine:
//! YAML text -> recipe -> launch plan (both host layouts) -> rendered text and JSON ->
//! resource graph. Must never panic, hang or blow the stack; every diagnostic must
//! point inside the text and render; every rendered command must parse back to its
//! argv; the spec fields a plan finds changed between the two layouts' graphs are
//! exactly those whose values differ.
#![no_main]

use libfuzzer_sys::fuzz_target;
use srt::assemble::{assemble as build, BuildOptions};
use srt::graph::spec::differing_fields;
use srt::launch::render;
use srt::launch::HostLayout;
use srt::recipe::{load_str, Problem, RecipeError, Source};

/// Every problem points inside the text it is drawn against, and the report renders.
fn check_error(err: &RecipeError) {
    assert!(!err.problems.is_empty(), "an error without a problem");
    let text = err.source_code.inner();
    for p in &err.problems {
        check_span(p, text);
    }
    let mut out = String::new();
    miette::GraphicalReportHandler::new_themed(miette::GraphicalTheme::unicode_nocolor())
        .with_width(100)
        .render_report(&mut out, err)
        .expect("a diagnostic renders");
}

fn check_span(p: &Problem, text: &str) {
    let end = p.span.offset() + p.span.len();
    assert!(
        end <= text.len(),
        "{}: span {:?} outside a {}-byte text",
        p.code,
        p.span,
        text.len()
    );
}

/// Problems found after loading point into the recipe's own text; shown, they point
/// into the text as displayed (control characters escaped, secrets masked).
fn check_problems(source: &Source, problems: Vec<Problem>) {
    for p in &problems {
        check_span(p, &source.text);
    }
    check_error(&source.error(problems));
}

/// The fields [`differing_fields`] finds between two specs of one address (as a plan
/// compares a record with its desired resource) are those whose JSON values differ.
fn check_differing(before: &str, after: &str) {
    use serde_json::Value;
    let (Ok(Value::Object(b)), Ok(Value::Object(a))) = (
        serde_json::from_str::<Value>(before),
        serde_json::from_str::<Value>(after),
    ) else {
        return;
    };
    let found: Vec<String> = differing_fields(before, after)
        .expect("two objects")
        .into_iter()
        .map(|(key, ..)| key.into_owned())
        .collect();
    let keys: std::collections::BTreeSet<&String> = b.keys().chain(a.keys()).collect();
    let expected: Vec<String> = keys
        .into_iter()
        .filter(|k| b.get(*k) != a.get(*k))
        .cloned()
        .collect();
    assert_eq!(found, expected, "{before} -> {after}");
}

fuzz_target!(|data: &[u8]| {
    let source = Source {
        name: "fuzz.yaml".into(),
        text: String::from_utf8_lossy(data).into_owned(),
    };
    let recipe = match load_str(&source, "fuzz") {
        Ok(r) => r,
        Err(e) => return check_error(&e),
    };
    let mut graphs = Vec::new();
    for hosts in [HostLayout::Distinct, HostLayout::Shared] {
        let plan = match build(&recipe, &BuildOptions { nodes: None, hosts }) {
            Ok(plan) => plan,
            Err(problems) => return check_problems(&source, problems),
        };
        let text = render::render(&plan);
        assert_eq!(text, render::render(&plan));
        let _ = render::json(&plan);
        for p in &plan.processes {
            let line = render::command_line(&p.argv);
            assert_eq!(
                shlex::split(&line).as_ref(),
                Some(&p.argv.to_vec()),
                "{line}"
            );
        }
        let graph = srt::graph::lower(&plan, &serde_json::json!({"executor": "fuzz"}))
            .expect("a built plan lowers to a graph");
        graphs.push(graph);
    }
    // The same recipe on one host and on one host per node: the same addresses, with
    // ports and hosts that differ.
    if let [distinct, shared] = &graphs[..] {
        for r in &distinct.resources {
            if let Some(other) = shared.get(&r.address) {
                check_differing(r.spec.as_str(), other.spec.as_str());
            }
        }
    }
});
