//! The library's top-level modules form no import cycle: each module's `crate::<module>`
//! paths (outside comments) name only modules that do not, directly or through others,
//! name it back. docs/architecture.md draws the same layers.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Every top-level module of the library and the other top-level modules it names.
fn module_graph(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut graph = BTreeMap::new();
    for entry in std::fs::read_dir(src).unwrap() {
        let path = entry.unwrap().path();
        let file = path.file_name().unwrap().to_string_lossy().into_owned();
        if file == "lib.rs" {
            continue;
        }
        let name = file.trim_end_matches(".rs").to_string();
        let mut deps = BTreeSet::new();
        for f in rust_files(&path) {
            for line in std::fs::read_to_string(&f).unwrap().lines() {
                if line.trim_start().starts_with("//") {
                    continue;
                }
                for (i, _) in line.match_indices("crate::") {
                    let rest = &line[i + "crate::".len()..];
                    let m: String = rest
                        .chars()
                        .take_while(|c| c.is_ascii_lowercase() || *c == '_')
                        .collect();
                    if !m.is_empty() && m != name {
                        deps.insert(m);
                    }
                }
            }
        }
        graph.insert(name, deps);
    }
    graph
}

fn rust_files(path: &Path) -> Vec<std::path::PathBuf> {
    if path.is_file() {
        return vec![path.to_path_buf()];
    }
    let mut out = Vec::new();
    for e in std::fs::read_dir(path).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            out.extend(rust_files(&p));
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
    out
}

/// A cycle through `start`, if there is one.
fn cycle_from(graph: &BTreeMap<String, BTreeSet<String>>, start: &str) -> Option<Vec<String>> {
    let mut stack = vec![(start.to_string(), vec![start.to_string()])];
    let mut seen = BTreeSet::new();
    while let Some((at, path)) = stack.pop() {
        for next in graph.get(&at).into_iter().flatten() {
            if next == start {
                let mut cycle = path.clone();
                cycle.push(start.to_string());
                return Some(cycle);
            }
            if graph.contains_key(next) && seen.insert(next.clone()) {
                let mut p = path.clone();
                p.push(next.clone());
                stack.push((next.clone(), p));
            }
        }
    }
    None
}

#[test]
fn the_library_modules_have_no_import_cycle() {
    let graph = module_graph(&common::root().join("crates/srt/src"));
    assert!(graph.len() > 15, "{graph:?}");
    let cycles: Vec<String> = graph
        .keys()
        .filter_map(|m| cycle_from(&graph, m))
        .map(|c| c.join(" -> "))
        .collect();
    assert!(cycles.is_empty(), "import cycles:\n{}", cycles.join("\n"));
}

/// What docs/architecture.md says modules must not know, held: engines and frontends
/// never name each other (they meet in `launch`'s model, put together by `assemble`),
/// nor `assemble`; `exec` never names `apply` or `workflow`.
#[test]
fn the_seams_keep_their_modules_apart() {
    let graph = module_graph(&common::root().join("crates/srt/src"));
    let apart = [
        ("engine", "frontend"),
        ("frontend", "engine"),
        ("engine", "assemble"),
        ("frontend", "assemble"),
        ("exec", "apply"),
        ("exec", "workflow"),
    ];
    let crossed: Vec<String> = apart
        .iter()
        .filter(|(module, other)| graph[*module].contains(*other))
        .map(|(module, other)| format!("`{module}` names `crate::{other}`"))
        .collect();
    assert!(crossed.is_empty(), "{}", crossed.join("\n"));
    // Not vacuous: the modules exist and name others.
    for (module, _) in apart {
        assert!(
            graph[module].contains("launch"),
            "{module}: {:?}",
            graph[module]
        );
    }
}

/// The check is not vacuous: it finds a cycle where there is one.
#[test]
fn a_cycle_is_found() {
    let mut graph = BTreeMap::new();
    graph.insert("a".to_string(), BTreeSet::from(["b".to_string()]));
    graph.insert("b".to_string(), BTreeSet::from(["c".to_string()]));
    graph.insert("c".to_string(), BTreeSet::from(["a".to_string()]));
    graph.insert("d".to_string(), BTreeSet::from(["a".to_string()]));
    assert_eq!(
        cycle_from(&graph, "a"),
        Some(vec!["a".into(), "b".into(), "c".into(), "a".into()])
    );
    assert_eq!(cycle_from(&graph, "d"), None);
}
