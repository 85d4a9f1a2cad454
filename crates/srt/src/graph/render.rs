//! The resource DAG as Graphviz dot, Mermaid, or indented text, grouped by node.
//! Watched dependencies (hashed, not waited for) are dashed edges.

use super::{Kind, Resource, ResourceGraph};
use std::collections::BTreeMap;
use std::fmt::Write;

/// Output formats of `srt graph`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// Graphviz dot (render with `dot -Tpng`).
    Dot,
    /// Mermaid flowchart (renders in Markdown viewers).
    Mermaid,
    /// Plain text: per node, each resource and what it depends on.
    Text,
}

fn by_node(g: &ResourceGraph, node_names: &[String]) -> (BTreeMap<usize, Vec<usize>>, Vec<usize>) {
    let mut nodes: BTreeMap<usize, Vec<usize>> = BTreeMap::new();
    let mut free = Vec::new();
    for (i, r) in g.resources.iter().enumerate() {
        match r.node {
            Some(n) if n < node_names.len() => nodes.entry(n).or_default().push(i),
            _ => free.push(i),
        }
    }
    (nodes, free)
}

fn shape(kind: Kind) -> &'static str {
    match kind {
        Kind::Allocation => "cylinder",
        Kind::Ports => "note",
        Kind::Worker => "box",
        Kind::Component(_) => "box3d",
        Kind::Gate | Kind::Smoke | Kind::Benchmark => "diamond",
        Kind::Membership => "ellipse",
        Kind::File => "folder",
    }
}

/// Text format: one line per dependency; a watched one is marked, since apply does not
/// wait for it.
fn dep_lines(out: &mut String, r: &Resource) {
    for d in &r.deps {
        let mark = if r.is_watched(d) {
            " (watched: starts alongside)"
        } else {
            ""
        };
        let _ = writeln!(out, "    <- {d}{mark}");
    }
    for d in r.after.iter() {
        let _ = writeln!(out, "    <- {d} (after: not a dependency)");
    }
}

/// Render the graph. `node_names` labels the per-node clusters.
pub fn render(g: &ResourceGraph, node_names: &[String], format: Format) -> String {
    let (nodes, free) = by_node(g, node_names);
    let mut out = String::new();
    match format {
        Format::Dot => {
            out.push_str(
                "digraph srt {\n  rankdir=LR;\n  node [fontname=\"monospace\", fontsize=10];\n",
            );
            for (n, members) in &nodes {
                let _ = writeln!(
                    out,
                    "  subgraph \"cluster_{}\" {{\n    label=\"{}\";\n    style=rounded;",
                    node_names[*n], node_names[*n]
                );
                for &i in members {
                    let r = &g.resources[i];
                    let _ = writeln!(out, "    \"{}\" [shape={}];", r.address, shape(r.kind));
                }
                out.push_str("  }\n");
            }
            for &i in &free {
                let r = &g.resources[i];
                let _ = writeln!(out, "  \"{}\" [shape={}];", r.address, shape(r.kind));
            }
            for r in &g.resources {
                for d in &r.deps {
                    let style = if r.is_watched(d) {
                        " [style=dashed]"
                    } else {
                        ""
                    };
                    let _ = writeln!(out, "  \"{d}\" -> \"{}\"{style};", r.address);
                }
                for d in r.after.iter() {
                    let _ = writeln!(out, "  \"{d}\" -> \"{}\" [style=dotted];", r.address);
                }
            }
            out.push_str("}\n");
        }
        Format::Mermaid => {
            out.push_str("flowchart LR\n");
            let id = |i: usize| format!("r{i}");
            for (n, members) in &nodes {
                let _ = writeln!(out, "  subgraph {}", node_names[*n]);
                for &i in members {
                    let _ = writeln!(out, "    {}[\"{}\"]", id(i), g.resources[i].address);
                }
                out.push_str("  end\n");
            }
            for &i in &free {
                let _ = writeln!(out, "  {}{{\"{}\"}}", id(i), g.resources[i].address);
            }
            for (i, r) in g.resources.iter().enumerate() {
                for d in &r.deps {
                    let arrow = if r.is_watched(d) { "-.->" } else { "-->" };
                    let _ = writeln!(
                        out,
                        "  {} {arrow} {}",
                        id(g.position(d).expect("a dependency is in the graph")),
                        id(i)
                    );
                }
                for d in r.after.iter() {
                    let _ = writeln!(
                        out,
                        "  {} -.- {}",
                        id(g.position(d).expect("a dependency is in the graph")),
                        id(i)
                    );
                }
            }
        }
        Format::Text => {
            for (n, members) in &nodes {
                let _ = writeln!(out, "{}:", node_names[*n]);
                for &i in members {
                    let r = &g.resources[i];
                    let _ = writeln!(out, "  {} ({})", r.address, r.kind.name());
                    dep_lines(&mut out, r);
                }
            }
            if !free.is_empty() {
                out.push_str("checks:\n");
                for &i in &free {
                    let r = &g.resources[i];
                    let _ = writeln!(out, "  {} ({})", r.address, r.kind.name());
                    dep_lines(&mut out, r);
                }
            }
        }
    }
    out
}
