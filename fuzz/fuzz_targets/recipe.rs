//! Fuzz the recipe loader and everything downstream of it that needs no machine:
//! YAML text -> recipe -> launch plan (both host layouts) -> rendered text and JSON ->
//! resource graph. Must never panic, hang or blow the stack; every diagnostic must
//! point inside the text and render; every rendered command must parse back to its
//! argv.
#![no_main]

use libfuzzer_sys::fuzz_target;
use srt::launch::build::HostLayout;
use srt::launch::{build, render, BuildOptions};
use srt::recipe::{load_str, Problem, Source};

fn check_diagnostics(source: &Source, problems: Vec<Problem>) {
    assert!(!problems.is_empty(), "an error without a problem");
    for p in &problems {
        let end = p.span.offset() + p.span.len();
        assert!(
            end <= source.text.len(),
            "{}: span {:?} outside a {}-byte text",
            p.code,
            p.span,
            source.text.len()
        );
    }
    let err = source.error(problems);
    let mut out = String::new();
    miette::GraphicalReportHandler::new_themed(miette::GraphicalTheme::unicode_nocolor())
        .with_width(100)
        .render_report(&mut out, &err)
        .expect("a diagnostic renders");
}

fuzz_target!(|data: &[u8]| {
    let source = Source {
        name: "fuzz.yaml".into(),
        text: String::from_utf8_lossy(data).into_owned(),
    };
    let recipe = match load_str(&source, "fuzz") {
        Ok(r) => r,
        Err(e) => return check_diagnostics(&source, e.problems),
    };
    for hosts in [HostLayout::Distinct, HostLayout::Shared] {
        let plan = match build(&recipe, &BuildOptions { nodes: None, hosts }) {
            Ok(plan) => plan,
            Err(problems) => return check_diagnostics(&source, problems),
        };
        let text = render::render(&plan);
        assert_eq!(text, render::render(&plan));
        let _ = render::json(&plan);
        for p in &plan.processes {
            let line = render::command_line(&p.argv);
            assert_eq!(shlex::split(&line).as_ref(), Some(&p.argv), "{line}");
        }
        srt::graph::lower(&plan, &serde_json::json!({"executor": "fuzz"}))
            .expect("a built plan lowers to a graph");
    }
});
