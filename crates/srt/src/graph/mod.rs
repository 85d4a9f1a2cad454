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
use std::hash::BuildHasherDefault;

/// What a resource is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, serde::Deserialize)]
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
    /// The workers one Router routes to, kept current through its admin API: updated in
    /// place, never replaced.
    Membership,
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
            Kind::Membership => "membership",
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

impl std::fmt::Display for Kind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// What a resource refers to in the launch plan.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// `plan.processes[i]` (its port block or the process itself).
    Process(usize),
    /// `plan.gates[i]`.
    Gate(usize),
    /// `plan.memberships[i]`.
    Membership(usize),
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
    /// Resources this one is applied after without depending on them: its hash does not
    /// cover theirs (a membership is applied once its workers are started, and a
    /// replaced worker does not change it). Sorted.
    pub after: Vec<String>,
    /// Why this resource restarts when a dependency changes, when that is a limit of
    /// the program rather than a change of its own (a Router whose workers are on its
    /// command line): the plan says so.
    pub restart_note: Option<String>,
    /// What stopping this process costs that srt cannot avoid (a worker that registered
    /// itself stays routed for a while): the plan says so when it is replaced or
    /// destroyed.
    pub leave_note: Option<String>,
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
fn process_spec(plan: &LaunchPlan, p: &LaunchProcess, execution: &Value, ports: Value) -> Value {
    // The Value `json!` would make of these fields, built directly: `json!` serializes
    // every field again (a deep copy of the env, execution and ports values).
    let strings = |v: &[String]| Value::Array(v.iter().cloned().map(Value::String).collect());
    let mut spec = serde_json::Map::with_capacity(10);
    spec.insert("argv".into(), strings(&p.argv));
    spec.insert(
        "container_image".into(),
        p.container_image.clone().map_or(Value::Null, Value::String),
    );
    spec.insert(
        "devices".into(),
        Value::Array(p.devices.iter().map(|&d| Value::from(d)).collect()),
    );
    spec.insert("env".into(), env_spec(plan, &p.env));
    spec.insert("env_unset".into(), strings(&p.env_unset));
    spec.insert("execution".into(), execution.clone());
    spec.insert(
        "files".into(),
        Value::Object(
            p.files
                .iter()
                .map(|(k, v)| (k.clone(), Value::String(v.clone())))
                .collect(),
        ),
    );
    spec.insert("kind".into(), Value::from(p.kind.name()));
    spec.insert("node".into(), Value::from(p.node));
    spec.insert("ports".into(), ports);
    Value::Object(spec)
}

/// A process's ports as its spec holds them (`{kind: {"base": .., "count": ..}}`, what
/// serde makes of the map), built directly: it is in two specs of every process.
fn ports_spec(ports: &BTreeMap<String, crate::ports::PortBlock>) -> Value {
    let map: serde_json::Map<String, Value> = ports
        .iter()
        .map(|(kind, b)| {
            let mut block = serde_json::Map::with_capacity(2);
            block.insert("base".into(), Value::from(b.base));
            block.insert("count".into(), Value::from(b.count));
            (kind.clone(), Value::Object(block))
        })
        .collect();
    Value::Object(map)
}

/// The spec of a membership: its Router, how to reach it, and its members.
pub fn membership_spec(plan: &LaunchPlan, m: &crate::launch::Membership) -> Value {
    let members: Vec<Value> = m
        .members
        .iter()
        .map(|w| json!({ "url": w.url, "worker": w.worker }))
        .collect();
    json!({
        "admin_url": m.admin_url,
        "frontend": plan.frontend,
        "members": members,
        "router": m.router,
    })
}

/// Canonical JSON: object keys sorted (serde_json's default map is ordered by insertion
/// with `preserve_order`, so sort explicitly).
pub fn canonical(v: &Value) -> String {
    let mut out = Vec::new();
    write_canonical(&mut out, v);
    String::from_utf8(out).expect("JSON is UTF-8")
}

/// Append the canonical JSON of `v` to `out`: the bytes `serde_json::to_writer` writes
/// for [`Sorted`]`(v)`, written directly (no sorted copy of the value is built, and no
/// serializer state machine runs per value: specs of Routers list every worker, and this
/// runs per resource). Strings that need no escape are copied as they are; the others,
/// and numbers, are written by serde_json itself.
fn write_canonical(out: &mut Vec<u8>, v: &Value) {
    match v {
        Value::Null => out.extend_from_slice(b"null"),
        Value::Bool(true) => out.extend_from_slice(b"true"),
        Value::Bool(false) => out.extend_from_slice(b"false"),
        Value::Number(n) => serde_json::to_writer(out, n).expect("a number serializes"),
        Value::String(s) => write_str(out, s),
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_canonical(out, item);
            }
            out.push(b']');
        }
        Value::Object(map) => {
            out.push(b'{');
            let mut write = |i: usize, k: &String, v: &Value| {
                if i > 0 {
                    out.push(b',');
                }
                write_str(out, k);
                out.push(b':');
                write_canonical(out, v);
            };
            // Specs are mostly built with their keys in order already.
            if map.keys().is_sorted() {
                for (i, (k, v)) in map.iter().enumerate() {
                    write(i, k, v);
                }
            } else {
                let mut entries: Vec<(&String, &Value)> = map.iter().collect();
                entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
                for (i, (k, v)) in entries.into_iter().enumerate() {
                    write(i, k, v);
                }
            }
            out.push(b'}');
        }
    }
}

/// A JSON string as serde_json writes it.
fn write_str(out: &mut Vec<u8>, s: &str) {
    // serde_json escapes `"`, `\` and the control characters below 0x20, nothing else.
    if s.bytes().any(|b| b < 0x20 || b == b'"' || b == b'\\') {
        serde_json::to_writer(out, s).expect("a string serializes");
    } else {
        out.reserve(s.len() + 2);
        out.push(b'"');
        out.extend_from_slice(s.as_bytes());
        out.push(b'"');
    }
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

/// FxHash (rustc's): a multiply-rotate hash of a few instructions per word, for the
/// address lookups of one lowering (never iterated, so the order cannot show).
#[derive(Default)]
struct AddressHasher(u64);

impl std::hash::Hasher for AddressHasher {
    fn write(&mut self, bytes: &[u8]) {
        for chunk in bytes.chunks(8) {
            let mut word = [0u8; 8];
            word[..chunk.len()].copy_from_slice(chunk);
            self.write_u64(u64::from_le_bytes(word));
        }
    }

    fn write_u8(&mut self, i: u8) {
        self.write_u64(u64::from(i));
    }

    fn write_u64(&mut self, i: u64) {
        self.0 = (self.0.rotate_left(5) ^ i).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }

    fn finish(&self) -> u64 {
        self.0
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
                after: Vec::new(),
                restart_note: None,
                leave_note: None,
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
        let ports = ports_spec(&p.ports);
        pending.push(Resource {
            address: ports_addr.clone(),
            kind: Kind::Ports,
            spec: Value::Object(serde_json::Map::from_iter([
                ("node".to_string(), Value::from(p.node)),
                ("ports".to_string(), ports.clone()),
            ])),
            deps: base_deps.clone(),
            watches: Vec::new(),
            after: Vec::new(),
            restart_note: None,
            leave_note: None,
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
            spec: process_spec(plan, p, execution, ports),
            deps,
            watches,
            after: Vec::new(),
            restart_note: plan
                .memberships
                .iter()
                .find(|m| m.router == p.address && m.mode == crate::launch::MembershipMode::Static)
                .and_then(|m| m.note.clone()),
            leave_note: plan
                .memberships
                .iter()
                .filter(|m| m.mode == crate::launch::MembershipMode::Discovery)
                .find(|m| m.members.iter().any(|w| w.worker == p.address))
                .and_then(|m| m.note.clone()),
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
                crate::launch::Probe::Benchmark(_) => Kind::Benchmark,
                _ => Kind::Gate,
            },
            spec: serde_json::to_value(&g.probe).expect("probe serializes"),
            deps,
            watches: Vec::new(),
            after: Vec::new(),
            restart_note: None,
            leave_note: None,
            hash: String::new(),
            node: None,
            target: Target::Gate(i),
        });
    }
    for (i, m) in plan.memberships.iter().enumerate() {
        if m.mode != crate::launch::MembershipMode::Managed {
            continue;
        }
        let mut after: Vec<String> = m.members.iter().map(|w| w.worker.clone()).collect();
        after.sort();
        after.dedup();
        pending.push(Resource {
            address: m.address.clone(),
            kind: Kind::Membership,
            spec: membership_spec(plan, m),
            deps: vec![m.router.clone()],
            watches: Vec::new(),
            after,
            restart_note: None,
            leave_note: None,
            hash: String::new(),
            node: None,
            target: Target::Membership(i),
        });
    }
    order_and_hash(pending)
}

/// A topological order (Kahn's) that, among the resources whose dependencies are
/// placed, always takes the one declared first: `agg[0]` before `agg[1]`, a role's
/// resources in the launch plan's order. `None` when the graph has a cycle.
fn declared_order(dag: &DiGraph<usize, ()>) -> Option<Vec<NodeIndex>> {
    use std::cmp::Reverse;
    let mut indegree: Vec<usize> = dag
        .node_indices()
        .map(|n| {
            dag.neighbors_directed(n, petgraph::Direction::Incoming)
                .count()
        })
        .collect();
    let mut ready: std::collections::BinaryHeap<Reverse<usize>> = indegree
        .iter()
        .enumerate()
        .filter(|(_, d)| **d == 0)
        .map(|(i, _)| Reverse(i))
        .collect();
    let mut order = Vec::with_capacity(indegree.len());
    while let Some(Reverse(i)) = ready.pop() {
        let n = NodeIndex::new(i);
        order.push(n);
        for m in dag.neighbors_directed(n, petgraph::Direction::Outgoing) {
            indegree[m.index()] -= 1;
            if indegree[m.index()] == 0 {
                ready.push(Reverse(m.index()));
            }
        }
    }
    (order.len() == indegree.len()).then_some(order)
}

/// Build the DAG, order it topologically (Kahn), and compute Merkle hashes in that order.
fn order_and_hash(pending: Vec<Resource>) -> Result<ResourceGraph, GraphError> {
    let edges: usize = pending.iter().map(|r| r.deps.len() + r.after.len()).sum();
    let mut dag: DiGraph<usize, ()> = DiGraph::with_capacity(pending.len(), edges);
    let mut by_addr: HashMap<&str, NodeIndex, BuildHasherDefault<AddressHasher>> =
        HashMap::with_capacity_and_hasher(pending.len(), Default::default());
    for (i, r) in pending.iter().enumerate() {
        let n = dag.add_node(i);
        if by_addr.insert(r.address.as_str(), n).is_some() {
            return Err(GraphError::Duplicate(r.address.clone()));
        }
    }
    // Each resource's dependencies as positions in `pending`, in `deps` order: hashing
    // reads their hashes from these instead of looking every address up again.
    let mut dep_at: Vec<u32> = Vec::with_capacity(edges);
    let mut dep_start: Vec<u32> = Vec::with_capacity(pending.len() + 1);
    for (i, r) in pending.iter().enumerate() {
        dep_start.push(dep_at.len() as u32);
        for d in &r.deps {
            let from = *by_addr
                .get(d.as_str())
                .ok_or_else(|| GraphError::Dangling {
                    from: r.address.clone(),
                    to: d.clone(),
                })?;
            dag.add_edge(from, NodeIndex::new(i), ());
            dep_at.push(from.index() as u32);
        }
        // Order-only edges: in the graph (apply's order, cycles), not in the hash.
        for d in &r.after {
            let from = *by_addr
                .get(d.as_str())
                .ok_or_else(|| GraphError::Dangling {
                    from: r.address.clone(),
                    to: d.clone(),
                })?;
            dag.add_edge(from, NodeIndex::new(i), ());
        }
    }
    dep_start.push(dep_at.len() as u32);
    let order = declared_order(&dag).ok_or_else(|| {
        let cycle = petgraph::algo::toposort(&dag, None)
            .err()
            .map_or(0, |c| dag[c.node_id()]);
        GraphError::Cycle(pending[cycle].address.clone())
    })?;
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
        let deps = &dep_at[dep_start[orig] as usize..dep_start[orig + 1] as usize];
        for (d, &at) in r.deps.iter().zip(deps) {
            let dep = &resources[position[at as usize]];
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

    /// The resources apply waits for before starting this resource: `deps` without
    /// `watches`, and `after`.
    pub fn waits_for(&self) -> impl Iterator<Item = &String> {
        self.deps
            .iter()
            .filter(|d| !self.is_watched(d))
            .chain(&self.after)
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
    use serde_json::json;

    /// The direct writer writes what serde_json writes for the sorted view.
    #[test]
    fn canonical_is_serde_json_of_the_sorted_view() {
        let values = [
            json!(null),
            json!({"b": [1, -2, 3.5, 1e300, true, false, null], "a": "plain"}),
            json!({"z": {"y": {"x": "deep"}, "a": []}, "": {}, "A": "\u{0}\u{1f}\u{7f}"}),
            json!([
                "quote \" back \\ slash",
                "tab\tnew\nline\r\u{8}\u{c}",
                "é€😀",
                ""
            ]),
            json!({"argv": ["vllm", "serve", "--x", "{\"k\": 1}"], "env": {"B": "2", "A": "1"}}),
            json!(u64::MAX),
            json!(i64::MIN),
            json!(0.1),
        ];
        for v in &values {
            let expected = serde_json::to_string(&Sorted(v)).unwrap();
            assert_eq!(canonical(v), expected);
        }
    }

    #[test]
    fn process_spec_is_what_json_makes_of_the_fields() {
        let plan = crate::launch::LaunchPlan {
            format_version: 3,
            deployment: "d".into(),
            engine: "vllm".into(),
            frontend: "vllm-router".into(),
            served_model_name: "m".into(),
            precision: None,
            gpu_type: None,
            nodes: Vec::new(),
            processes: Vec::new(),
            gates: Vec::new(),
            memberships: Vec::new(),
            rollout: Default::default(),
            public_url: String::new(),
            leases: Vec::new(),
            sensitive_env: vec!["HF_TOKEN".into()],
            warnings: Vec::new(),
        };
        let mut p = LaunchProcess {
            address: "worker.agg[0].node[0]".into(),
            kind: crate::launch::ProcessKind::Worker,
            node: 3,
            devices: vec![0, 1],
            ports: BTreeMap::from([(
                "http".to_string(),
                crate::ports::PortBlock {
                    base: 6100,
                    count: 1,
                },
            )]),
            env: BTreeMap::from([
                ("HF_TOKEN".to_string(), "secret".to_string()),
                ("A".to_string(), "1".to_string()),
            ]),
            env_unset: vec!["VLLM_PORT".into()],
            argv: vec!["vllm".into(), "serve".into(), "--x".into()],
            files: BTreeMap::from([("f.conf".to_string(), "body".to_string())]),
            depends_on: Vec::new(),
            watches: Vec::new(),
            worker: None,
            container_image: Some("img".into()),
        };
        let execution = json!({"executor": "local", "simulate": true});
        for image in [Some("img".to_string()), None] {
            p.container_image = image;
            let expected = json!({
                "argv": p.argv,
                "container_image": p.container_image,
                "devices": p.devices,
                "env": env_spec(&plan, &p.env),
                "env_unset": p.env_unset,
                "execution": execution,
                "files": p.files,
                "kind": p.kind.name(),
                "node": p.node,
                "ports": p.ports,
            });
            let built = process_spec(&plan, &p, &execution, ports_spec(&p.ports));
            assert_eq!(built, expected);
            assert_eq!(canonical(&built), canonical(&expected));
        }
    }

    #[test]
    fn ports_spec_is_what_serde_makes_of_the_map() {
        let mut ports = BTreeMap::new();
        for (kind, base, count) in [
            ("nixl", 5400, 8),
            ("http", 6100, 1),
            ("vllm_scan", 20000, 50),
        ] {
            ports.insert(kind.to_string(), crate::ports::PortBlock { base, count });
        }
        assert_eq!(ports_spec(&ports), serde_json::to_value(&ports).unwrap());
        assert_eq!(ports_spec(&BTreeMap::new()), json!({}));
    }

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
