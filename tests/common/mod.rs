//! Helpers shared by the integration tests: load an example, build its launch plan,
//! and read facts out of command lines.
#![allow(dead_code)]

use srt::assemble::{assemble as build, BuildOptions};
use srt::launch::HostLayout;
use srt::launch::{Argv, LaunchPlan, LaunchProcess, ProcessKind};
use srt::recipe::Source;
use std::path::{Path, PathBuf};

/// The crate root.
pub(crate) fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Every `examples/**/*.yaml`, sorted.
pub(crate) fn examples() -> Vec<PathBuf> {
    fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                walk(&path, out);
            } else if path.extension().is_some_and(|e| e == "yaml") {
                out.push(path);
            }
        }
    }
    let mut out = Vec::new();
    walk(&root().join("examples"), &mut out);
    out.sort();
    assert!(!out.is_empty(), "no examples found");
    out
}

/// Load a recipe file (path relative to the crate root, or absolute), panicking with the
/// rendered diagnostic when it does not load.
pub(crate) fn recipe(path: impl AsRef<Path>) -> (Source, srt::recipe::Recipe) {
    let path = root().join(path);
    let given = path.strip_prefix(root()).unwrap_or(&path).to_path_buf();
    let text = std::fs::read_to_string(&path).unwrap();
    let stem = path.file_stem().unwrap().to_string_lossy().into_owned();
    // Named as given (relative to the repository, where tests run), as the CLI names a
    // recipe: a recipe's scripts are read relative to its directory.
    let source = Source {
        name: given.display().to_string(),
        text,
    };
    // Read as the commands read it: a sweep's first point that fits its GPUs.
    let read = srt::assemble::load_fitting(
        &source,
        &stem,
        &srt::recipe::Selection::default(),
        &BuildOptions::default(),
        |_| (),
    );
    match read {
        Ok(r) => (source, r),
        Err(e) => panic!("{} does not load:\n{}", path.display(), render_diag(&e)),
    }
}

/// Build the launch plan of a recipe file with explicit options.
pub(crate) fn plan_with(
    path: impl AsRef<Path>,
    nodes: Option<usize>,
    hosts: HostLayout,
) -> LaunchPlan {
    let (source, recipe) = recipe(path.as_ref());
    let options = BuildOptions { nodes, hosts };
    match build(&recipe, &options) {
        Ok(plan) => plan,
        Err(problems) => panic!(
            "{} does not build:\n{}",
            path.as_ref().display(),
            render_diag(&source.error(problems))
        ),
    }
}

/// Build the launch plan of a recipe file with default options.
pub(crate) fn plan(path: impl AsRef<Path>) -> LaunchPlan {
    plan_with(path, None, HostLayout::Distinct)
}

/// A diagnostic as the snapshots show it: unicode, no colour, 100 columns.
pub(crate) fn render_diag(diag: &dyn miette::Diagnostic) -> String {
    let mut out = String::new();
    miette::GraphicalReportHandler::new_themed(miette::GraphicalTheme::unicode_nocolor())
        .with_width(100)
        .render_report(&mut out, diag)
        .unwrap();
    out
}

/// The checks every invalid-input corpus makes of a file's first problem: its code, the
/// text its span covers, and a phrase in its message, label or help. `shown` is the
/// rendered report, printed when a check fails.
pub(crate) fn assert_problem(
    file: &str,
    text: &str,
    p: &srt::recipe::Problem,
    (code, span_text, mentions): (&str, &str, &str),
    shown: &str,
) {
    assert_eq!(p.code, code, "{file}:\n{shown}");
    let start = p.span.offset();
    assert_eq!(
        &text[start..start + p.span.len()],
        span_text,
        "{file}: span {:?} does not cover the offending text\n{shown}",
        p.span
    );
    let words = format!(
        "{} {} {}",
        p.message,
        p.label,
        p.help.clone().unwrap_or_default()
    );
    assert!(
        words.contains(mentions),
        "{file}: `{mentions}` not in {words:?}"
    );
}

/// Worker processes.
pub(crate) fn workers(plan: &LaunchPlan) -> Vec<&LaunchProcess> {
    plan.processes
        .iter()
        .filter(|p| p.kind == ProcessKind::Worker)
        .collect()
}

/// Router processes.
pub(crate) fn routers(plan: &LaunchPlan) -> Vec<&LaunchProcess> {
    plan.processes
        .iter()
        .filter(|p| p.kind.name() == "router")
        .collect()
}

/// The nginx process, if any.
pub(crate) fn nginx(plan: &LaunchPlan) -> Option<&LaunchProcess> {
    plan.processes.iter().find(|p| p.kind.name() == "nginx")
}

/// A process by address.
pub(crate) fn process<'a>(plan: &'a LaunchPlan, address: &str) -> &'a LaunchProcess {
    plan.processes
        .iter()
        .find(|p| p.address == address)
        .unwrap_or_else(|| panic!("no process {address}"))
}

/// Whether `flag` occurs in argv.
pub(crate) fn has(argv: &Argv, flag: &str) -> bool {
    argv.contains(flag)
}

/// How many times `flag` occurs.
pub(crate) fn count(argv: &Argv, flag: &str) -> usize {
    argv.iter().filter(|a| *a == flag).count()
}

/// The values after each occurrence of `flag`, up to the next `--flag`.
pub(crate) fn occurrences<'a>(argv: &'a Argv, flag: &str) -> Vec<Vec<&'a str>> {
    let tokens: Vec<&str> = argv.iter().collect();
    let mut out = Vec::new();
    for (i, a) in tokens.iter().enumerate() {
        if *a == flag {
            out.push(
                tokens[i + 1..]
                    .iter()
                    .take_while(|t| !t.starts_with("--"))
                    .copied()
                    .collect(),
            );
        }
    }
    out
}

/// The single value of `flag` (panics when absent, repeated or not single-valued).
pub(crate) fn value<'a>(argv: &'a Argv, flag: &str) -> &'a str {
    let occ = occurrences(argv, flag);
    assert_eq!(
        occ.len(),
        1,
        "{flag} occurs {} times in {argv:?}",
        occ.len()
    );
    assert_eq!(occ[0].len(), 1, "{flag} has values {:?}", occ[0]);
    occ[0][0]
}

/// The first port of a process's `kind` block.
pub(crate) fn port(p: &LaunchProcess, kind: &str) -> u16 {
    p.ports
        .get(kind)
        .unwrap_or_else(|| panic!("{} has no {kind} port: {:?}", p.address, p.ports))
        .base
}

/// The advertised URL of a worker.
pub(crate) fn url(p: &LaunchProcess) -> &str {
    p.worker
        .as_ref()
        .and_then(|w| w.advertised_url.as_deref())
        .unwrap_or_else(|| panic!("{} is not advertised", p.address))
}

/// Every advertised worker URL, in process order.
pub(crate) fn advertised(plan: &LaunchPlan) -> Vec<&str> {
    workers(plan)
        .into_iter()
        .filter_map(|w| w.worker.as_ref()?.advertised_url.as_deref())
        .collect()
}
