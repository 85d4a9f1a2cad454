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
pub mod spec;

pub use spec::{canonical, Spec};

use crate::launch::{LaunchPlan, LaunchProcess};
use crate::secrets;
use petgraph::graph::{DiGraph, NodeIndex};
use serde::Serialize;
use serde_json::Value;
use spec::ObjectWriter;
use std::collections::{BTreeMap, HashMap};
use std::hash::BuildHasherDefault;
use std::sync::Arc;

/// What a resource is. Recorded by its name ([`Kind::name`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// The nodes everything runs on (a SLURM job). Replacing it replaces every resource
    /// that depends on it, whatever their hashes.
    Allocation,
    /// A block of ports a process will bind, checked free before launch.
    Ports,
    /// An engine worker process.
    Worker,
    /// A process of a frontend-owned component (a Router, nginx, a discovery service).
    Component(&'static crate::launch::Component),
    /// The workers one Router routes to, kept current through its admin API: updated in
    /// place, never replaced.
    Membership,
    /// A readiness gate, re-checked every apply.
    Gate,
    /// The smoke completion, re-checked every apply.
    Smoke,
    /// The recipe's load benchmark, run every apply after the smoke check.
    Benchmark,
    /// A file srt writes for the processes that read it (an engine's config file):
    /// they depend on it, so its content is in their hashes.
    File,
}

impl Kind {
    /// Name used in state and output.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Allocation => "allocation",
            Kind::Ports => "ports",
            Kind::Worker => "worker",
            Kind::Component(c) => c.name,
            Kind::Membership => "membership",
            Kind::Gate => "gate",
            Kind::Smoke => "smoke",
            Kind::Benchmark => "benchmark",
            Kind::File => "file",
        }
    }

    /// The kind named `name` (as [`Kind::name`] writes it), of any frontend.
    pub fn named(name: &str) -> Option<Kind> {
        const FIXED: [Kind; 8] = [
            Kind::Allocation,
            Kind::Ports,
            Kind::Worker,
            Kind::Membership,
            Kind::Gate,
            Kind::Smoke,
            Kind::Benchmark,
            Kind::File,
        ];
        FIXED
            .into_iter()
            .find(|k| k.name() == name)
            .or_else(|| crate::frontend::component(name).map(Kind::Component))
    }

    /// Processes are started and stopped; the other kinds are checks.
    pub fn is_process(self) -> bool {
        matches!(self, Kind::Worker | Kind::Component(_))
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

impl Serialize for Kind {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl<'de> serde::Deserialize<'de> for Kind {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Kind, D::Error> {
        let name = std::borrow::Cow::<'de, str>::deserialize(d)?;
        Kind::named(&name).ok_or_else(|| {
            serde::de::Error::custom(format!(
                "unknown resource kind `{name}` (a frontend this srt does not have)"
            ))
        })
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
    /// `plan.files[i]`.
    File(usize),
    /// The executor's allocation holding the nodes `ResourceGraph::allocations[i]`.
    Allocation(usize),
}

/// One resource.
#[derive(Clone, Debug)]
pub struct Resource {
    /// Stable address.
    pub address: String,
    /// Kind.
    pub kind: Kind,
    /// Canonical spec (secrets as digests): the bytes the hash covers.
    pub spec: Spec,
    /// Direct dependencies, sorted: the hash covers all of them.
    pub deps: Vec<String>,
    /// The dependencies this resource does not wait for, as positions in `deps`
    /// (sorted): it starts alongside them (see [`LaunchProcess::watches`]). The others
    /// order apply: a resource starts once they are done. Positions, not addresses: a
    /// Router watches every worker it routes to.
    watched: Vec<u32>,
    /// The position in the graph's `resources` of each of `deps`, in `deps` order (set
    /// when the graph is built): a plan asks of every worker a Router lists whether it
    /// changed, and reads a position where it would look an address up.
    dep_positions: Vec<u32>,
    /// Resources this one is applied after without depending on them: its hash does not
    /// cover theirs (a membership is applied once its workers are started, and a
    /// replaced worker does not change it). Sorted.
    pub after: Arc<[String]>,
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
    index: AddressIndex,
    /// The petgraph view (node weights are positions in `resources`).
    pub dag: DiGraph<usize, ()>,
    /// The plan nodes each allocation holds (by [`Target::Allocation`] index).
    pub allocations: Vec<Vec<usize>>,
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

/// Address of the allocation resource whose first node is `first`: named after it, so
/// that adding or removing other allocations leaves its address alone.
pub fn allocation_address(first: usize) -> String {
    format!("allocation[{first}]")
}

/// Address of a process's port block.
pub fn ports_address(process: &str) -> String {
    format!("ports.{process}")
}

/// The canonical spec of a process, written directly from its fields (what `json!` of
/// them would give, canonicalized). `execution` carries how the executor runs it (e.g.
/// simulated), so switching execution modes replaces the process. Sensitive env values
/// enter as digests.
fn process_spec(
    plan: &LaunchPlan,
    p: &LaunchProcess,
    execution: &Value,
    ports: &[u8],
    scratch: &mut Vec<u8>,
) -> Spec {
    scratch.clear();
    let mut o = ObjectWriter::new(scratch);
    o.strs("argv", p.argv.iter());
    o.key("container_image");
    match &p.container_image {
        Some(image) => spec::write_str(o.out, image),
        None => o.out.extend_from_slice(b"null"),
    }
    o.key("devices");
    o.out.push(b'[');
    for (i, &d) in p.devices.iter().enumerate() {
        if i > 0 {
            o.out.push(b',');
        }
        spec::write_uint(o.out, d as u64);
    }
    o.out.push(b']');
    o.key("env");
    let mut env = ObjectWriter::new(o.out);
    for (k, v) in &p.env {
        if plan.is_sensitive(k) {
            env.str(k, &secrets::digest(v));
        } else {
            env.str(k, v);
        }
    }
    env.end();
    o.strs("env_unset", p.env_unset.iter().map(String::as_str));
    o.key("execution");
    spec::write_canonical(o.out, execution);
    o.key("files");
    let mut files = ObjectWriter::new(o.out);
    for (k, v) in &p.files {
        files.str(k, v);
    }
    files.end();
    o.str("kind", p.kind.name());
    o.uint("node", p.node as u64);
    o.key("ports");
    o.out.extend_from_slice(ports);
    // Only for an MPI job: a process of one task keeps the hash it had.
    if let Some(r) = &p.ranks {
        o.key("ranks");
        spec::write_canonical(o.out, &serde_json::to_value(r).expect("ranks serialize"));
    }
    // Only when there is one: a process without a wrap keeps the hash it had.
    if !p.wrap.is_empty() {
        o.key("wrap");
        wrap_spec(o.out, &p.wrap);
    }
    o.end();
    Spec::copy_of(scratch)
}

/// What runs around a process's program, as its spec holds it: every field of the
/// wrap but a script's source and contents (its digest stands for them), each field
/// only when it is not empty.
fn wrap_spec(out: &mut Vec<u8>, w: &crate::launch::wrap::Wrap) {
    let mut o = ObjectWriter::new(out);
    let nonempty = |v: &[String]| !v.is_empty();
    if nonempty(&w.dirs) {
        o.strs("dirs", w.dirs.iter().map(String::as_str));
    }
    if nonempty(&w.mounts) {
        o.strs("mounts", w.mounts.iter().map(String::as_str));
    }
    if nonempty(&w.prefix) {
        o.strs("prefix", w.prefix.iter().map(String::as_str));
    }
    if !w.setup.is_empty() {
        o.key("setup");
        o.out.push(b'[');
        for (i, s) in w.setup.iter().enumerate() {
            if i > 0 {
                o.out.push(b',');
            }
            let mut one = ObjectWriter::new(o.out);
            one.str("digest", &s.digest);
            one.str("key", s.key);
            one.key("on_host");
            one.out
                .extend_from_slice(if s.on_host { b"true" } else { b"false" });
            one.str("path", &s.path);
            one.end();
        }
        o.out.push(b']');
    }
    o.end();
}

/// A process's ports as its specs hold them (`{kind: {"base": .., "count": ..}}`, what
/// serde makes of the map), canonical: they are in two specs of every process.
fn ports_json(ports: &BTreeMap<String, crate::ports::PortBlock>, out: &mut Vec<u8>) {
    out.clear();
    let mut o = ObjectWriter::new(out);
    for (kind, b) in ports {
        o.key(kind);
        let mut block = ObjectWriter::new(o.out);
        block.uint("base", u64::from(b.base));
        block.uint("count", u64::from(b.count));
        block.end();
    }
    o.end();
}

/// The spec of a port block: its node and its ports.
fn ports_block_spec(node: usize, ports: &[u8], scratch: &mut Vec<u8>) -> Spec {
    scratch.clear();
    let mut o = ObjectWriter::new(scratch);
    o.uint("node", node as u64);
    o.key("ports");
    o.out.extend_from_slice(ports);
    o.end();
    Spec::copy_of(scratch)
}

/// The spec of a membership: its Router, how to reach it, and its members.
pub fn membership_spec(plan: &LaunchPlan, m: &crate::launch::Membership) -> Spec {
    let mut members = Vec::with_capacity(64 * m.members.len() + 2);
    members_json(&m.members, &mut members);
    membership_spec_with(plan, m, &members)
}

/// A membership's members as its spec holds them (a JSON array of `{url, worker}`).
fn members_json(members: &[crate::launch::Member], out: &mut Vec<u8>) {
    out.push(b'[');
    for (i, w) in members.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        let mut member = ObjectWriter::new(out);
        member.str("url", &w.url);
        member.str("worker", &w.worker);
        member.end();
    }
    out.push(b']');
}

/// The spec of a membership whose members are `members` (from [`members_json`]).
fn membership_spec_with(plan: &LaunchPlan, m: &crate::launch::Membership, members: &[u8]) -> Spec {
    let mut out = Vec::with_capacity(members.len() + 256);
    let mut o = ObjectWriter::new(&mut out);
    o.str("admin_url", &m.admin_url);
    o.str("frontend", &plan.frontend);
    o.key("members");
    o.out.extend_from_slice(members);
    o.str("router", &m.router);
    o.end();
    Spec::copy_of(&out)
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
    lower_with(plan, execution, &[])
}

/// Lower a launch plan to the resource graph. Each of `allocations` (the executor's,
/// none for one without) is a resource ([`allocation_address`]); a port block depends on
/// the allocation of its node, a process on those of every node it runs on or names
/// ([`LaunchProcess::nodes_named`]), so an allocation's hash cascades to everything
/// that runs on it or reaches it.
pub fn lower_with(
    plan: &LaunchPlan,
    execution: &Value,
    allocations: &[crate::launch::AllocationSpec],
) -> Result<ResourceGraph, GraphError> {
    let mut pending: Vec<Resource> =
        Vec::with_capacity(plan.processes.len() * 2 + plan.gates.len() + allocations.len());
    let mut holders = Holders::default();
    for (k, a) in allocations.iter().enumerate() {
        let address = allocation_address(a.nodes.first().copied().unwrap_or(0));
        for &n in &a.nodes {
            holders.set(n, &address);
        }
        pending.push(Resource::new(
            address,
            Kind::Allocation,
            Spec::of(&a.spec),
            Vec::new(),
            Target::Allocation(k),
        ));
    }
    for (i, f) in plan.files.iter().enumerate() {
        pending.push(Resource::new(
            f.address.clone(),
            Kind::File,
            file_spec(f),
            Vec::new(),
            Target::File(i),
        ));
    }
    let threads = crate::parallel::threads_for(plan.processes.len());
    pending.extend(lower_processes(plan, execution, &holders, threads));
    for (i, g) in plan.gates.iter().enumerate() {
        let mut deps = g.depends_on.clone();
        deps.sort();
        deps.dedup();
        let kind = match g.probe {
            crate::launch::Probe::Completion { .. } => Kind::Smoke,
            crate::launch::Probe::Benchmark(_) | crate::launch::Probe::Command(_) => {
                Kind::Benchmark
            }
            _ => Kind::Gate,
        };
        let mut probe = serde_json::to_value(&g.probe).expect("probe serializes");
        if let Some(env) = probe.get_mut("env").and_then(|e| e.as_object_mut()) {
            // A command's secrets are recorded as their digests, as a process's are.
            for (k, v) in env.iter_mut() {
                if plan.is_sensitive(k) {
                    *v = secrets::digest(v.as_str().unwrap_or_default()).into();
                }
            }
        }
        let spec = Spec::of(&probe);
        pending.push(Resource::new(
            g.address.clone(),
            kind,
            spec,
            deps,
            Target::Gate(i),
        ));
    }
    // Every Router's membership lists the same workers: their order and their JSON are
    // made once.
    struct Shared<'a> {
        members: &'a Arc<[crate::launch::Member]>,
        after: Arc<[String]>,
        json: Vec<u8>,
    }
    let mut shared: Option<Shared<'_>> = None;
    for (i, m) in plan.memberships.iter().enumerate() {
        if m.mode != crate::launch::MembershipMode::Managed {
            continue;
        }
        if !shared
            .as_ref()
            .is_some_and(|s| Arc::ptr_eq(s.members, &m.members))
        {
            let mut after: Vec<String> = m.members.iter().map(|w| w.worker.clone()).collect();
            after.sort_unstable();
            after.dedup();
            let mut json = Vec::with_capacity(64 * m.members.len() + 2);
            members_json(&m.members, &mut json);
            shared = Some(Shared {
                members: &m.members,
                after: after.into(),
                json,
            });
        }
        let Shared {
            after,
            json: members,
            ..
        } = shared.as_ref().expect("set above");
        pending.push(Resource {
            after: after.clone(),
            ..Resource::new(
                m.address.clone(),
                Kind::Membership,
                membership_spec_with(plan, m, members),
                vec![m.router.clone()],
                Target::Membership(i),
            )
        });
    }
    let mut graph = order_and_hash(pending)?;
    graph.allocations = allocations.iter().map(|a| a.nodes.clone()).collect();
    Ok(graph)
}

/// The allocation holding each node, by node index (none without allocations).
#[derive(Default)]
struct Holders(Vec<Option<Arc<str>>>);

impl Holders {
    fn set(&mut self, node: usize, address: &str) {
        if self.0.len() <= node {
            self.0.resize(node + 1, None);
        }
        self.0[node] = Some(address.into());
    }

    /// The allocations holding `nodes`, in node order (repeats left for the caller to
    /// drop).
    fn of(&self, nodes: impl IntoIterator<Item = usize>) -> Vec<String> {
        if self.0.is_empty() {
            return Vec::new();
        }
        nodes
            .into_iter()
            .filter_map(|n| self.0.get(n)?.as_deref().map(str::to_string))
            .collect()
    }
}

/// A file's spec: where it is written and what it holds.
fn file_spec(f: &crate::launch::LaunchFile) -> Spec {
    Spec::of(&serde_json::json!({"content": f.content, "path": f.path}))
}

/// The port block and process resources of every process, in the launch plan's order.
/// Each depends on nothing but its process, so `threads` threads lower a slice of the
/// processes each, and the slices are joined back in order: the result is the same
/// whatever the number of threads.
fn lower_processes(
    plan: &LaunchPlan,
    execution: &Value,
    holders: &Holders,
    threads: usize,
) -> Vec<Resource> {
    crate::parallel::in_ranges(slices(&plan.processes, threads), |range| {
        process_resources(plan, execution, holders, range)
    })
}

/// `processes` cut into `n` consecutive slices of about equal work: a process's work
/// grows with its argv and the processes it watches (a Router lists every worker).
fn slices(processes: &[LaunchProcess], n: usize) -> Vec<std::ops::Range<usize>> {
    let work: Vec<usize> = processes
        .iter()
        .map(|p| 1 + p.argv.len() + p.watches.len())
        .collect();
    crate::parallel::by_work(&work, n)
}

/// The port block and the process resource of each process in `range`, in order.
fn process_resources(
    plan: &LaunchPlan,
    execution: &Value,
    holders: &Holders,
    range: std::ops::Range<usize>,
) -> Vec<Resource> {
    let mut out = Vec::with_capacity(range.len() * 2);
    // Specs are written into one reused buffer and copied out at their size: a fresh
    // buffer per spec is a large allocation each time, which makes the allocator
    // consolidate its free lists every time.
    let (mut scratch, mut ports) = (Vec::with_capacity(4096), Vec::with_capacity(256));
    // The last watch list seen, sorted.
    let mut sorted_watches: Option<(&Arc<[String]>, Vec<&String>)> = None;
    for i in range {
        let p = &plan.processes[i];
        let ports_addr = ports_address(&p.address);
        ports_json(&p.ports, &mut ports);
        let mut on = holders.of([p.node]);
        on.dedup();
        out.push(Resource {
            node: Some(p.node),
            ..Resource::new(
                ports_addr.clone(),
                Kind::Ports,
                ports_block_spec(p.node, &ports, &mut scratch),
                on,
                Target::Process(i),
            )
        });
        let kind = match p.kind {
            crate::launch::ProcessKind::Worker => Kind::Worker,
            crate::launch::ProcessKind::Component(c) => Kind::Component(c),
        };
        // Every Router shares one watch list: sorted once.
        if !sorted_watches
            .as_ref()
            .is_some_and(|(list, _)| Arc::ptr_eq(list, &p.watches))
        {
            let mut sorted: Vec<&String> = p.watches.iter().collect();
            sorted.sort_unstable();
            sorted.dedup();
            sorted_watches = Some((&p.watches, sorted));
        }
        let watches = &sorted_watches.as_ref().expect("set above").1;
        let mut waits: Vec<String> = p.depends_on.clone();
        waits.push(ports_addr);
        if !holders.0.is_empty() {
            waits.extend(holders.of(p.nodes_named()));
        }
        let (deps, watched) = deps_of(waits, watches, &p.depends_on);
        out.push(Resource {
            watched,
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
            node: Some(p.node),
            ..Resource::new(
                p.address.clone(),
                kind,
                process_spec(plan, p, execution, &ports, &mut scratch),
                deps,
                Target::Process(i),
            )
        });
    }
    out
}

/// A process's dependencies, sorted and deduplicated: what it waits for (`waits`, any
/// order) and what it watches (`watches`, sorted and deduplicated), merged in one walk;
/// with the positions in them of the watched ones it does not also wait for (those in
/// `depends_on`).
fn deps_of(
    mut waits: Vec<String>,
    watches: &[&String],
    depends_on: &[String],
) -> (Vec<String>, Vec<u32>) {
    waits.sort_unstable();
    waits.dedup();
    if watches.is_empty() {
        return (waits, Vec::new());
    }
    let mut deps = Vec::with_capacity(waits.len() + watches.len());
    let mut watched = Vec::with_capacity(watches.len());
    let mut waits = waits.into_iter().peekable();
    for &w in watches {
        while let Some(d) = waits.next_if(|d| d < w) {
            deps.push(d);
        }
        if !depends_on.contains(w) {
            watched.push(deps.len() as u32);
        }
        deps.push(waits.next_if(|d| d == w).unwrap_or_else(|| w.clone()));
    }
    deps.extend(waits);
    (deps, watched)
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
        for d in r.after.iter() {
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
    let hashes = merkle_hashes(&pending, &order, &dag, &dep_at, &dep_start);
    let mut slots: Vec<Option<Resource>> = pending.into_iter().map(Some).collect();
    let mut resources: Vec<Resource> = Vec::with_capacity(slots.len());
    let mut index = AddressIndex::with_capacity(slots.len());
    let mut position = vec![0usize; slots.len()];
    for (n, hash) in order.into_iter().zip(hashes) {
        let orig = dag[n];
        let mut r = slots[orig].take().expect("each node once");
        r.hash = hash;
        position[orig] = resources.len();
        resources.push(r);
        index.insert(&resources, resources.len() - 1);
    }
    for (orig, &at) in position.iter().enumerate() {
        let (start, end) = (dep_start[orig] as usize, dep_start[orig + 1] as usize);
        resources[at].dep_positions = dep_at[start..end]
            .iter()
            .map(|&d| position[d as usize] as u32)
            .collect();
    }
    for w in dag.node_weights_mut() {
        *w = position[*w];
    }
    Ok(ResourceGraph {
        resources,
        index,
        dag,
        allocations: Vec::new(),
    })
}

/// Each resource's Merkle hash, in `order` (topological): blake3 of its kind, its spec
/// and its dependencies' addresses and hashes (`dep_at[dep_start[i]..dep_start[i + 1]]`
/// are the positions in `pending` of resource `i`'s `deps`). Resources are hashed level
/// by level (a level's dependencies are all in earlier levels), each level on several
/// threads when it is large; the hashes are the same whatever the threads.
fn merkle_hashes(
    pending: &[Resource],
    order: &[NodeIndex],
    dag: &DiGraph<usize, ()>,
    dep_at: &[u32],
    dep_start: &[u32],
) -> Vec<String> {
    let deps_of = |i: usize| &dep_at[dep_start[i] as usize..dep_start[i + 1] as usize];
    let mut level = vec![0u32; pending.len()];
    let mut levels: Vec<Vec<usize>> = Vec::new();
    for &n in order {
        let i = dag[n];
        let l = deps_of(i)
            .iter()
            .map(|&d| level[d as usize] + 1)
            .max()
            .unwrap_or(0);
        level[i] = l;
        if levels.len() <= l as usize {
            levels.resize_with(l as usize + 1, Vec::new);
        }
        levels[l as usize].push(i);
    }
    let mut hashes = vec![String::new(); pending.len()];
    for members in levels {
        let work: Vec<usize> = members
            .iter()
            .map(|&i| pending[i].spec.as_str().len() + 80 * deps_of(i).len())
            .collect();
        let done = crate::parallel::map_slices(&work, |range| {
            // The hashed bytes of one resource, built in one reused buffer and hashed at
            // once.
            let mut preimage = Vec::new();
            members[range]
                .iter()
                .map(|&i| {
                    let r = &pending[i];
                    preimage.clear();
                    preimage.extend_from_slice(r.kind.name().as_bytes());
                    preimage.push(0);
                    preimage.extend_from_slice(r.spec.as_str().as_bytes());
                    for (d, &at) in r.deps.iter().zip(deps_of(i)) {
                        preimage.push(0);
                        preimage.extend_from_slice(d.as_bytes());
                        preimage.push(b'=');
                        preimage.extend_from_slice(hashes[at as usize].as_bytes());
                    }
                    blake3::hash(&preimage).to_hex().to_string()
                })
                .collect()
        });
        for (&i, hash) in members.iter().zip(done) {
            hashes[i] = hash;
        }
    }
    order
        .iter()
        .map(|&n| std::mem::take(&mut hashes[dag[n]]))
        .collect()
}

impl Resource {
    /// A resource waiting for all of `deps`, with no notes, no node and no hash yet
    /// (lowering hashes every resource once the graph is ordered).
    fn new(address: String, kind: Kind, spec: Spec, deps: Vec<String>, target: Target) -> Self {
        Resource {
            address,
            kind,
            spec,
            deps,
            watched: Vec::new(),
            dep_positions: Vec::new(),
            after: Default::default(),
            restart_note: None,
            leave_note: None,
            hash: String::new(),
            node: None,
            target,
        }
    }

    /// Each of [`deps`](Self::deps) with its position in the graph's `resources`, in
    /// `deps` order (none before the graph is built).
    pub fn dependencies(&self) -> impl Iterator<Item = (&String, usize)> {
        debug_assert_eq!(
            self.dep_positions.len(),
            self.deps.len(),
            "{}",
            self.address
        );
        self.deps
            .iter()
            .zip(self.dep_positions.iter().map(|&at| at as usize))
    }

    /// Whether this resource watches `dep` (starts alongside it) rather than waiting
    /// for it.
    pub fn is_watched(&self, dep: &str) -> bool {
        self.deps
            .binary_search_by(|d| d.as_str().cmp(dep))
            .is_ok_and(|i| self.watched.binary_search(&(i as u32)).is_ok())
    }

    /// The dependencies this resource watches (starts alongside) rather than waits for,
    /// in address order.
    pub fn watches(&self) -> impl Iterator<Item = &String> {
        self.watched.iter().map(|&i| &self.deps[i as usize])
    }

    /// The resources apply waits for before starting this resource: `deps` without
    /// the watched ones, and `after`.
    pub fn waits_for(&self) -> impl Iterator<Item = &String> {
        let mut watched = self.watched.iter().peekable();
        self.deps
            .iter()
            .enumerate()
            .filter(move |(i, _)| watched.next_if_eq(&&(*i as u32)).is_none())
            .map(|(_, d)| d)
            .chain(self.after.iter())
    }
}

/// Positions in a graph's `resources` by address. The table holds positions only and
/// hashes the address each one points at, so no address is stored twice.
#[derive(Debug, Default)]
struct AddressIndex(hashbrown::HashTable<u32>);

fn address_hash(address: &str) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = AddressHasher::default();
    address.hash(&mut h);
    h.finish()
}

impl AddressIndex {
    fn with_capacity(n: usize) -> Self {
        AddressIndex(hashbrown::HashTable::with_capacity(n))
    }

    /// Add `resources[at]` (its address is not in the index yet).
    fn insert(&mut self, resources: &[Resource], at: usize) {
        let hash = address_hash(&resources[at].address);
        self.0.insert_unique(hash, at as u32, |&i| {
            address_hash(&resources[i as usize].address)
        });
    }

    fn get(&self, resources: &[Resource], address: &str) -> Option<usize> {
        self.0
            .find(address_hash(address), |&i| {
                resources[i as usize].address == address
            })
            .map(|&i| i as usize)
    }
}

impl ResourceGraph {
    /// A resource by address.
    pub fn get(&self, address: &str) -> Option<&Resource> {
        self.position(address).map(|i| &self.resources[i])
    }

    /// The position of a resource in `resources`, by address.
    pub fn position(&self, address: &str) -> Option<usize> {
        self.index.get(&self.resources, address)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn empty_plan() -> LaunchPlan {
        LaunchPlan {
            engine: "vllm".into(),
            frontend: "vllm-router".into(),
            served_model_name: "m".into(),
            sensitive_env: vec!["HF_TOKEN".into()],
            ..LaunchPlan::empty("d")
        }
    }

    #[test]
    fn membership_spec_is_what_json_makes_of_the_fields() {
        let m = crate::launch::Membership {
            address: "members.router[0]".into(),
            router: "router[0]".into(),
            admin_url: "http://<node1-ip>:8180".into(),
            mode: crate::launch::MembershipMode::Managed,
            note: None,
            members: ["a", "b\"quoted\""]
                .iter()
                .enumerate()
                .map(|(i, w)| crate::launch::Member {
                    worker: format!("worker.{w}"),
                    url: format!("http://<node{i}-ip>:6100"),
                    role: crate::recipe::RoleKind::Agg,
                    kv_connector: None,
                    bootstrap_port: None,
                })
                .collect(),
        };
        let plan = empty_plan();
        for members in [m.members.clone(), Vec::new().into()] {
            let m = crate::launch::Membership {
                members,
                ..m.clone()
            };
            let expected = json!({
                "router": m.router,
                "members": m.members.iter().map(|w| json!({"worker": w.worker, "url": w.url})).collect::<Vec<_>>(),
                "frontend": plan.frontend,
                "admin_url": m.admin_url,
            });
            let built = membership_spec(&plan, &m);
            assert_eq!(built.as_str(), canonical(&expected));
            assert!(built == expected);
        }
    }

    #[test]
    fn process_spec_is_what_json_makes_of_the_fields() {
        let plan = empty_plan();
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
            argv: ["vllm", "serve", "--x"].into(),
            files: BTreeMap::from([("f.conf".to_string(), "body".to_string())]),
            depends_on: Vec::new(),
            watches: Default::default(),
            worker: None,
            container_image: Some("img".into()),
            wrap: Default::default(),
            ranks: None,
        };
        let execution = json!({"executor": "local", "simulate": true});
        for image in [Some("img".to_string()), None] {
            p.container_image = image;
            let expected = json!({
                "argv": p.argv,
                "container_image": p.container_image,
                "devices": p.devices,
                "env": {"A": "1", "HF_TOKEN": secrets::digest("secret")},
                "env_unset": p.env_unset,
                "execution": execution,
                "files": p.files,
                "kind": p.kind.name(),
                "node": p.node,
                "ports": p.ports,
            });
            let mut ports = Vec::new();
            ports_json(&p.ports, &mut ports);
            let built = process_spec(&plan, &p, &execution, &ports, &mut Vec::new());
            assert_eq!(built.as_str(), canonical(&expected));
            assert_eq!(built.value(), expected);
        }
    }

    /// A wrap's spec is what `json!` of its hashed fields canonicalizes to: no source,
    /// no contents, no empty field.
    #[test]
    fn a_wrap_spec_holds_digests_not_sources() {
        use crate::launch::wrap::{Setup, Wrap};
        let setup = |source: &str, digest: &str| Setup {
            key: "setup_script",
            on_host: false,
            source: source.into(),
            path: "<run-dir>/setup/setup_script.sh".into(),
            digest: digest.into(),
            text: std::sync::Arc::from("echo\n"),
        };
        let mut w = Wrap {
            setup: vec![setup("a.sh", "blake3:1")],
            mounts: vec!["/a:/b".into()],
            ..Default::default()
        };
        let written = |w: &Wrap| {
            let mut out = Vec::new();
            wrap_spec(&mut out, w);
            String::from_utf8(out).unwrap()
        };
        let expected = json!({
            "mounts": ["/a:/b"],
            "setup": [{"digest": "blake3:1", "key": "setup_script", "on_host": false, "path": "<run-dir>/setup/setup_script.sh"}],
        });
        assert_eq!(written(&w), canonical(&expected));
        let before = written(&w);
        w.setup[0].source = "elsewhere.sh".into();
        assert_eq!(written(&w), before);
        w.setup[0].digest = "blake3:2".into();
        assert_ne!(written(&w), before);
    }

    /// A plan of `n` processes with argvs of different lengths, the last two watching
    /// all the others (as Routers do).
    fn plan_of(n: usize) -> LaunchPlan {
        let mut plan = empty_plan();
        for i in 0..n {
            let router = i + 2 >= n;
            let address = if router {
                format!("router[{}]", n - i)
            } else {
                format!("worker.agg[{i}].node[0]")
            };
            let watches: Vec<String> = match router {
                true => plan
                    .processes
                    .iter()
                    .take(n - 2)
                    .map(|p| p.address.clone())
                    .collect(),
                false => Vec::new(),
            };
            let kind = match router {
                true => crate::launch::ProcessKind::Component(&crate::frontend::ROUTER),
                false => crate::launch::ProcessKind::Worker,
            };
            let argv = (0..i % 13).map(|k| format!("--a{k}")).collect();
            plan.processes.push(LaunchProcess {
                node: i % 7,
                devices: vec![(i % 8) as u32],
                ports: BTreeMap::from([(
                    "http".to_string(),
                    crate::ports::PortBlock {
                        base: 6100 + i as u16,
                        count: 1,
                    },
                )]),
                env: BTreeMap::from([("HF_TOKEN".to_string(), format!("t{i}"))]),
                depends_on: match i % 3 {
                    1 if !router => vec![format!("worker.agg[{}].node[0]", i - 1)],
                    _ => Vec::new(),
                },
                watches: watches.into(),
                ..LaunchProcess::bare(&address, kind, argv)
            });
        }
        plan
    }

    #[test]
    fn processes_lower_the_same_on_any_number_of_threads() {
        let plan = plan_of(50);
        let execution = json!({"executor": "local"});
        let mut base = Holders::default();
        for n in 0..50 {
            base.set(n, &allocation_address(n / 4 * 4));
        }
        let key = |r: &Resource| {
            (
                r.address.clone(),
                r.spec.as_str().to_owned(),
                r.deps.clone(),
                r.watched.clone(),
                r.target,
            )
        };
        let one: Vec<_> = lower_processes(&plan, &execution, &base, 1)
            .iter()
            .map(key)
            .collect();
        assert_eq!(one.len(), 100);
        for threads in [2, 3, 7, 60] {
            let many: Vec<_> = lower_processes(&plan, &execution, &base, threads)
                .iter()
                .map(key)
                .collect();
            assert_eq!(many, one, "{threads} threads");
        }
    }

    #[test]
    fn each_dependency_comes_with_its_position() {
        let plan = plan_of(2 * crate::parallel::FROM + 3);
        let graph = lower(&plan, &json!({"executor": "local"})).unwrap();
        let mut edges = 0;
        for r in &graph.resources {
            let named: Vec<&String> = r.dependencies().map(|(d, _)| d).collect();
            assert_eq!(named, r.deps.iter().collect::<Vec<_>>(), "{}", r.address);
            for (d, at) in r.dependencies() {
                assert_eq!(&graph.resources[at].address, d, "{}", r.address);
                assert_eq!(graph.position(d), Some(at));
                edges += 1;
            }
        }
        assert!(edges > graph.resources.len(), "{edges} edges");
    }

    /// The hash as the module documents it, one resource at a time: what the hashing by
    /// levels on several threads must give.
    #[test]
    fn hashes_are_the_merkle_hashes_whatever_the_threads() {
        let plan = plan_of(2 * crate::parallel::FROM + 3);
        let graph = lower(&plan, &json!({"executor": "local"})).unwrap();
        let mut known: HashMap<&str, String> = HashMap::new();
        for r in &graph.resources {
            let mut preimage = format!("{}\0{}", r.kind.name(), r.spec.as_str());
            for d in &r.deps {
                preimage.push_str(&format!("\0{d}={}", known[d.as_str()]));
            }
            let hash = blake3::hash(preimage.as_bytes()).to_hex().to_string();
            assert_eq!(r.hash, hash, "{}", r.address);
            known.insert(&r.address, hash);
        }
        assert_eq!(known.len(), 2 * plan.processes.len());
    }

    #[test]
    fn slices_cover_every_process_once_by_work() {
        let plan = plan_of(50);
        for n in 1..=8 {
            let slices = slices(&plan.processes, n);
            assert_eq!(slices.len(), n);
            assert_eq!(slices[0].start, 0);
            assert_eq!(slices[n - 1].end, 50);
            assert!(slices.windows(2).all(|w| w[0].end == w[1].start));
        }
        // Each slice holds about its share of the work: at most one process more.
        let work = |p: &LaunchProcess| 1 + p.argv.len() + p.watches.len();
        let total: usize = plan.processes.iter().map(work).sum();
        let most = plan.processes.iter().map(work).max().unwrap();
        for n in 1..=8 {
            for range in slices(&plan.processes, n) {
                let done: usize = plan.processes[range.clone()].iter().map(work).sum();
                assert!(
                    done <= total / n + most,
                    "{n} slices: {range:?} has {done} of {total}"
                );
            }
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
        let canonical_of = |ports: &BTreeMap<String, crate::ports::PortBlock>| {
            let mut out = Vec::new();
            ports_json(ports, &mut out);
            String::from_utf8(out).unwrap()
        };
        assert_eq!(
            canonical_of(&ports),
            canonical(&serde_json::to_value(&ports).unwrap())
        );
        assert_eq!(canonical_of(&BTreeMap::new()), "{}");
        let block = ports_block_spec(7, canonical_of(&ports).as_bytes(), &mut Vec::new());
        assert_eq!(
            block.as_str(),
            canonical(&json!({"ports": ports, "node": 7}))
        );
    }

    #[test]
    fn watched_dependencies_are_positions_in_deps() {
        let strings = |xs: &[&str]| xs.iter().map(|x| (*x).to_string()).collect::<Vec<_>>();
        // Waits unsorted and repeated; one watched also waited for, one only watched.
        let watches = strings(&["b", "c", "e"]);
        let watches: Vec<&String> = watches.iter().collect();
        let (deps, watched) = deps_of(
            strings(&["d", "a", "c", "a", "b"]),
            &watches,
            &strings(&["c"]),
        );
        assert_eq!(deps, ["a", "b", "c", "d", "e"]);
        assert_eq!(watched, [1, 4]);
        let (none, watched_none) = deps_of(strings(&["b", "a"]), &[], &[]);
        assert_eq!((none, watched_none), (strings(&["a", "b"]), Vec::new()));
        let r = Resource {
            watched,
            after: vec!["f".into()].into(),
            ..Resource::new(
                "router".into(),
                Kind::Component(&crate::frontend::ROUTER),
                Spec::of(&json!({})),
                deps,
                Target::Allocation(0),
            )
        };
        assert_eq!(r.watches().collect::<Vec<_>>(), ["b", "e"]);
        assert_eq!(r.waits_for().collect::<Vec<_>>(), ["a", "c", "d", "f"]);
        assert!(r.is_watched("b") && r.is_watched("e"));
        assert!(!r.is_watched("a") && !r.is_watched("c") && !r.is_watched("z"));
    }

    #[test]
    fn every_address_is_found_at_its_position() {
        let mut plan = empty_plan();
        for i in 0..300 {
            plan.gates.push(crate::launch::Gate {
                address: format!("gate[{i}]"),
                description: String::new(),
                depends_on: if i > 0 {
                    vec![format!("gate[{}]", i - 1)]
                } else {
                    Vec::new()
                },
                probe: crate::launch::Probe::Http {
                    urls: vec![format!("http://<node0-ip>:{i}")],
                    path: "/health".into(),
                },
            });
        }
        let g = lower(&plan, &Value::Null).unwrap();
        for (i, r) in g.resources.iter().enumerate() {
            assert_eq!(g.position(&r.address), Some(i));
            assert_eq!(g.get(&r.address).map(|x| &x.address), Some(&r.address));
        }
        assert_eq!(g.position("gate[300]"), None);
        assert_eq!(g.position(""), None);
    }
}
