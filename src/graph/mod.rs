//! The resource graph: the launch plan lowered to a DAG of resources with Merkle hashes.
//!
//! Resources are port blocks (`ports.<process>`), processes (workers, Routers, nginx),
//! gates and the smoke check, plus, on executors that have one (SLURM), the
//! `allocation` every port block and process runs on. An edge `a -> b` means `b` depends on `a`: `b` starts after
//! `a`, and `b`'s hash covers `a`'s hash, so a change cascades exactly to what depends on
//! it. Hashes are blake3 over canonical JSON (sorted maps, no floats) of the spec,
//! followed by the dependencies' hashes in address order. Sensitive env values enter the
//! spec as digests, so a changed secret changes the hash without being stored.

pub mod render;

use crate::launch::{LaunchPlan, LaunchProcess};
use crate::secrets;
use petgraph::graph::{DiGraph, NodeIndex};
use serde::Serialize;
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashMap};

/// What a resource is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// The nodes everything runs on (a SLURM job). Replacing it replaces every resource
    /// that depends on it, whatever their hashes.
    Allocation,
    /// A block of ports a process will bind, checked free before launch.
    Ports,
    /// An engine worker process.
    Worker,
    /// A Router process.
    Router,
    /// nginx.
    Nginx,
    /// A readiness gate, re-checked every apply.
    Gate,
    /// The smoke completion, re-checked every apply.
    Smoke,
    /// The recipe's load benchmark, run every apply after the smoke check.
    Benchmark,
}

impl Kind {
    /// Name used in state and output.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Allocation => "allocation",
            Kind::Ports => "ports",
            Kind::Worker => "worker",
            Kind::Router => "router",
            Kind::Nginx => "nginx",
            Kind::Gate => "gate",
            Kind::Smoke => "smoke",
            Kind::Benchmark => "benchmark",
        }
    }

    /// Processes are started and stopped; the other kinds are checks.
    pub fn is_process(self) -> bool {
        matches!(self, Kind::Worker | Kind::Router | Kind::Nginx)
    }

    /// Checks re-run on every apply.
    pub fn is_check(self) -> bool {
        matches!(self, Kind::Gate | Kind::Smoke | Kind::Benchmark)
    }

    /// Replacing a resource of this kind replaces its direct dependents too (they run
    /// on it, so they cannot survive it).
    pub fn replaces_dependents(self) -> bool {
        matches!(self, Kind::Allocation)
    }
}

/// What a resource refers to in the launch plan.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// `plan.processes[i]` (its port block or the process itself).
    Process(usize),
    /// `plan.gates[i]`.
    Gate(usize),
    /// The executor's allocation.
    Allocation,
}

/// One resource.
#[derive(Clone, Debug)]
pub struct Resource {
    /// Stable address.
    pub address: String,
    /// Kind.
    pub kind: Kind,
    /// Canonical spec (secrets as digests).
    pub spec: Value,
    /// Direct dependencies, sorted: the hash covers all of them.
    pub deps: Vec<String>,
    /// The dependencies (a sorted subset of `deps`) this resource does not wait for:
    /// it starts alongside them (see [`LaunchProcess::watches`]). The others order
    /// apply: a resource starts once they are done.
    pub watches: Vec<String>,
    /// Merkle hash, hex.
    pub hash: String,
    /// Node index, when placed.
    pub node: Option<usize>,
    /// What it refers to.
    pub target: Target,
}

/// The DAG.
#[derive(Debug)]
pub struct ResourceGraph {
    /// Resources in a topological order (dependencies first).
    pub resources: Vec<Resource>,
    /// Address -> position in `resources`.
    pub index: HashMap<String, usize>,
    /// The petgraph view (node weights are positions in `resources`).
    pub dag: DiGraph<usize, ()>,
}

/// The graph is malformed (a bug in lowering, reported rather than panicking).
#[derive(Debug, thiserror::Error, miette::Diagnostic)]
pub enum GraphError {
    /// An edge names an unknown resource.
    #[error("resource `{from}` depends on unknown resource `{to}`")]
    #[diagnostic(code(srt::graph::dangling))]
    Dangling {
        /// Dependent.
        from: String,
        /// Missing dependency.
        to: String,
    },
    /// A cycle.
    #[error("dependency cycle through `{0}`")]
    #[diagnostic(code(srt::graph::cycle))]
    Cycle(String),
    /// Two resources share an address.
    #[error("two resources share the address `{0}`")]
    #[diagnostic(code(srt::graph::duplicate))]
    Duplicate(String),
}

/// Address of the allocation resource.
pub const ALLOCATION: &str = "allocation";

/// Address of a process's port block.
pub fn ports_address(process: &str) -> String {
    format!("ports.{process}")
}

fn env_spec(plan: &LaunchPlan, env: &BTreeMap<String, String>) -> Value {
    let map: serde_json::Map<String, Value> = env
        .iter()
        .map(|(k, v)| {
            let v = if plan.is_sensitive(k) {
                secrets::digest(v)
            } else {
                v.clone()
            };
            (k.clone(), Value::String(v))
        })
        .collect();
    Value::Object(map)
}

/// The canonical spec of a process. `execution` carries how the executor runs it (e.g.
/// simulated), so switching execution modes replaces the process.
fn process_spec(plan: &LaunchPlan, p: &LaunchProcess, execution: &Value) -> Value {
    json!({
        "argv": p.argv,
        "container_image": p.container_image,
        "devices": p.devices,
        "env": env_spec(plan, &p.env),
        "env_unset": p.env_unset,
        "execution": execution,
        "files": p.files,
        "kind": p.kind.name(),
        "node": p.node,
        "ports": p.ports,
    })
}

/// Canonical JSON: object keys sorted (serde_json's default map is ordered by insertion
/// with `preserve_order`, so sort explicitly).
pub fn canonical(v: &Value) -> String {
    let mut out = Vec::new();
    write_canonical(&mut out, v);
    String::from_utf8(out).expect("JSON is UTF-8")
}

/// Append the canonical JSON of `v` to `out`, serializing in place (no sorted copy of
/// the value is built: specs of Routers list every worker, and this runs per resource).
fn write_canonical(out: &mut Vec<u8>, v: &Value) {
    serde_json::to_writer(out, &Sorted(v)).expect("a JSON value serializes");
}

/// A view of a JSON value that serializes every object's keys in sorted order: the one
/// canonical form, for hashes here and for specs recorded in state.
pub struct Sorted<'a>(pub &'a Value);

impl Serialize for Sorted<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::{SerializeMap, SerializeSeq};
        match self.0 {
            Value::Object(map) => {
                let mut entries: Vec<(&String, &Value)> = map.iter().collect();
                entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
                let mut m = s.serialize_map(Some(entries.len()))?;
                for (k, v) in entries {
                    m.serialize_entry(k, &Sorted(v))?;
                }
                m.end()
            }
            Value::Array(items) => {
                let mut seq = s.serialize_seq(Some(items.len()))?;
                for v in items {
                    seq.serialize_element(&Sorted(v))?;
                }
                seq.end()
            }
            scalar => scalar.serialize(s),
        }
    }
}

/// Lower a launch plan to the resource graph.
pub fn lower(plan: &LaunchPlan, execution: &Value) -> Result<ResourceGraph, GraphError> {
    lower_with(plan, execution, None)
}

/// Lower a launch plan to the resource graph. With `allocation` (the executor's
/// allocation spec), an [`ALLOCATION`] resource is added and every port block and
/// process depends on it, so its hash cascades to everything that runs on it.
pub fn lower_with(
    plan: &LaunchPlan,
    execution: &Value,
    allocation: Option<&Value>,
) -> Result<ResourceGraph, GraphError> {
    let mut pending: Vec<Resource> =
        Vec::with_capacity(plan.processes.len() * 2 + plan.gates.len() + 1);
    let base_deps: Vec<String> = match allocation {
        Some(spec) => {
            pending.push(Resource {
                address: ALLOCATION.to_string(),
                kind: Kind::Allocation,
                spec: spec.clone(),
                deps: Vec::new(),
                watches: Vec::new(),
                hash: String::new(),
                node: None,
                target: Target::Allocation,
            });
            vec![ALLOCATION.to_string()]
        }
        None => Vec::new(),
    };
    for (i, p) in plan.processes.iter().enumerate() {
        let ports_addr = ports_address(&p.address);
        pending.push(Resource {
            address: ports_addr.clone(),
            kind: Kind::Ports,
            spec: json!({ "node": p.node, "ports": p.ports }),
            deps: base_deps.clone(),
            watches: Vec::new(),
            hash: String::new(),
            node: Some(p.node),
            target: Target::Process(i),
        });
        let kind = match p.kind {
            crate::launch::ProcessKind::Worker => Kind::Worker,
            crate::launch::ProcessKind::Router => Kind::Router,
            crate::launch::ProcessKind::Nginx => Kind::Nginx,
        };
        let mut deps = p.depends_on.clone();
        deps.extend(p.watches.iter().cloned());
        deps.push(ports_addr);
        deps.extend(base_deps.iter().cloned());
        deps.sort();
        deps.dedup();
        let mut watches: Vec<String> = p
            .watches
            .iter()
            .filter(|w| !p.depends_on.contains(w))
            .cloned()
            .collect();
        watches.sort();
        watches.dedup();
        pending.push(Resource {
            address: p.address.clone(),
            kind,
            spec: process_spec(plan, p, execution),
            deps,
            watches,
            hash: String::new(),
            node: Some(p.node),
            target: Target::Process(i),
        });
    }
    for (i, g) in plan.gates.iter().enumerate() {
        let mut deps = g.depends_on.clone();
        deps.sort();
        deps.dedup();
        pending.push(Resource {
            address: g.address.clone(),
            kind: match g.probe {
                crate::launch::Probe::Completion { .. } => Kind::Smoke,
                crate::launch::Probe::Benchmark { .. } => Kind::Benchmark,
                _ => Kind::Gate,
            },
            spec: serde_json::to_value(&g.probe).expect("probe serializes"),
            deps,
            watches: Vec::new(),
            hash: String::new(),
            node: None,
            target: Target::Gate(i),
        });
    }
    order_and_hash(pending)
}

/// Build the DAG, order it topologically (Kahn), and compute Merkle hashes in that order.
fn order_and_hash(pending: Vec<Resource>) -> Result<ResourceGraph, GraphError> {
    let mut dag: DiGraph<usize, ()> = DiGraph::with_capacity(pending.len(), pending.len() * 2);
    let mut by_addr: HashMap<&str, NodeIndex> = HashMap::with_capacity(pending.len());
    for (i, r) in pending.iter().enumerate() {
        let n = dag.add_node(i);
        if by_addr.insert(r.address.as_str(), n).is_some() {
            return Err(GraphError::Duplicate(r.address.clone()));
        }
    }
    for (i, r) in pending.iter().enumerate() {
        for d in &r.deps {
            let from = *by_addr
                .get(d.as_str())
                .ok_or_else(|| GraphError::Dangling {
                    from: r.address.clone(),
                    to: d.clone(),
                })?;
            dag.add_edge(from, NodeIndex::new(i), ());
        }
    }
    let order = petgraph::algo::toposort(&dag, None)
        .map_err(|c| GraphError::Cycle(pending[dag[c.node_id()]].address.clone()))?;
    drop(by_addr);
    let mut slots: Vec<Option<Resource>> = pending.into_iter().map(Some).collect();
    let mut resources: Vec<Resource> = Vec::with_capacity(slots.len());
    let mut index: HashMap<String, usize> = HashMap::with_capacity(slots.len());
    let mut position = vec![0usize; slots.len()];
    // The hashed bytes of one resource, built in one reused buffer and hashed at once.
    let mut preimage = Vec::new();
    for n in order {
        let orig = dag[n];
        let mut r = slots[orig].take().expect("each node once");
        preimage.clear();
        preimage.extend_from_slice(r.kind.name().as_bytes());
        preimage.push(0);
        write_canonical(&mut preimage, &r.spec);
        for d in &r.deps {
            let dep = &resources[index[d]];
            preimage.push(0);
            preimage.extend_from_slice(d.as_bytes());
            preimage.push(b'=');
            preimage.extend_from_slice(dep.hash.as_bytes());
        }
        r.hash = blake3::hash(&preimage).to_hex().to_string();
        position[orig] = resources.len();
        index.insert(r.address.clone(), resources.len());
        resources.push(r);
    }
    for w in dag.node_weights_mut() {
        *w = position[*w];
    }
    Ok(ResourceGraph {
        resources,
        index,
        dag,
    })
}

impl Resource {
    /// Whether this resource watches `dep` (starts alongside it) rather than waiting
    /// for it.
    pub fn is_watched(&self, dep: &String) -> bool {
        self.watches.binary_search(dep).is_ok()
    }

    /// The dependencies apply waits for before starting this resource: `deps` without
    /// `watches`.
    pub fn waits_for(&self) -> impl Iterator<Item = &String> {
        self.deps.iter().filter(|d| !self.is_watched(d))
    }
}

impl ResourceGraph {
    /// A resource by address.
    pub fn get(&self, address: &str) -> Option<&Resource> {
        self.index.get(address).map(|&i| &self.resources[i])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_sorts_keys_at_every_depth() {
        // Built in reverse order: serde_json keeps insertion order (preserve_order).
        let v = json!({"b": 1, "a": {"d": [{"z": 1, "y": "\"q\""}], "c": null}});
        assert_eq!(
            canonical(&v),
            r#"{"a":{"c":null,"d":[{"y":"\"q\"","z":1}]},"b":1}"#
        );
    }
}
