//! Plan and state benchmarks at cluster scale: `cargo bench --bench plan`.
//!
//! For generated recipes of several shapes (see [`recipe_text`]: P/D with hybrid-LB
//! prefill, P/D with single-node DP8 prefill, one TP8 replica per node, one single-GPU
//! replica per GPU) on 8, 64, 512 and 4096 nodes x 8 GPUs it measures (median of
//! repeated runs, wall clock):
//!
//! - **plan**: a plan from scratch, as `srt plan` does it on a cluster: recipe text ->
//!   launch plan (one host per node) -> resource graph -> diff against an empty state ->
//!   human plan text (streamed, as `srt plan` writes it);
//! - **re-plan**: the same against the full state of the deployment, read from disk,
//!   with every recorded process refreshed (a live pid, so every probe reads `/proc`)
//!   and every Router's worker list read (each Router is a listener of this process on
//!   its node's loopback address, answering `GET /workers` with its members, as
//!   vllm-router does): the path of a no-op `srt plan`;
//! - **one role**: re-plan after one flag of one role changed (every worker of that
//!   role, the Routers and nginx are replaced, with word diffs of their command lines);
//! - **one role, records only**: the same with `--refresh=false`: the state read, no
//!   process or Router probed;
//! - **save** / **load**: the state file of the full deployment written (atomically,
//!   fsynced, with its backup) and read back;
//! - **peak**: the peak resident memory of the plan phase (VmHWM of one plan: each
//!   shape and size measured in its own child process, reset before the plan phase),
//!   and of the whole run.
//!
//! A recipe srt refuses (a port kind exhausted, a limit) is reported as `refused` with
//! srt's message.
//!
//! Options (after `--`): `--smoke` (8 and 64 nodes, one run each: a check that the
//! benchmark still runs; the default when run without `--bench`, i.e. by `cargo test
//! --all-targets`), `--sizes 8,64`, `--shapes pd,agg-tp1`, `--reps N`, `--phases`
//! (median time of each phase: recipe, launch plan, graph, state read, refresh, diff,
//! render), and `--before BIN` (another build of this benchmark, run alternately with
//! this one on every shape and size: before/after figures from one run).

/// srt's allocator (`srt_cli::alloc`), so that the figures are srt's.
#[global_allocator]
static ALLOC: srt_cli::alloc::Allocator = mimalloc::MiMalloc;

use srt::assemble::BuildOptions;
use srt::exec::local::LocalExecutor;
use srt::graph::{self, ResourceGraph};
use srt::launch::HostLayout;
use srt::launch::{self, LaunchPlan};
use srt::plan::{self, Plan, PlanOptions};
use srt::recipe::{self, Source};
use srt::state::{ResourceState, Runtime, State, StateStore, Status};
use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;
use std::time::{Duration, Instant};

const DEFAULT_SIZES: &[usize] = &[8, 64, 512, 4096];

/// The recipe shapes measured (`--shapes pd,agg-tp1`; all by default).
const SHAPES: &[&str] = &["pd", "pd-dp8", "agg-tp8", "agg-tp1"];

/// The recipe of `shape` on `nodes` nodes x 8 GPUs (`max_len`: the changed role's
/// `max-model-len`, 32768 for the deployment, 16384 for the "one role" change):
///
/// - `pd`: prefill on half the nodes as DP8 x TP2 hybrid-LB endpoints of 2 nodes (one
///   API server per node), decode on the other half as DP2 x TP16 endpoints whose
///   replicas span 2 nodes (4 nodes each, only the leader is routable); NIXL between
///   them; nginx in front of ten Routers (the frontend defaults). One process per node.
/// - `pd-dp8`: P/D with single-node DP8 endpoints (one API server per node running eight
///   engine cores, eight NIXL side channels each) on both halves of the nodes (the
///   Router takes one node-local DP size for all).
/// - `agg-tp8`: one aggregated TP8 replica per node (many single-node replicas, each
///   with its own `VLLM_PORT` range).
/// - `agg-tp1`: one aggregated single-GPU replica per GPU: eight processes per node, the
///   most processes a deployment of `nodes` x 8 GPUs can have.
fn recipe_text(shape: &str, nodes: usize, max_len: u32) -> String {
    assert!(
        nodes >= 8 && nodes.is_multiple_of(8),
        "sizes are multiples of 8"
    );
    let roles = match shape {
        "pd" => format!(
            "  prefill:
    nodes: {pn}
    workers: {pw}
    args:
      data-parallel-size: 8
      tensor-parallel-size: 2
      max-model-len: 32768
      enable-expert-parallel: true
  decode:
    nodes: {dn}
    workers: {dw}
    args:
      data-parallel-size: 2
      tensor-parallel-size: 16
      max-model-len: {max_len}
    env:
      HF_TOKEN: hf_not_a_real_token
",
            pn = nodes / 2,
            pw = nodes / 4,
            dn = nodes / 2,
            dw = nodes / 8,
        ),
        "pd-dp8" => format!(
            "  prefill:
    nodes: {half}
    workers: {half}
    args:
      data-parallel-size: 8
      max-model-len: 32768
      enable-expert-parallel: true
  decode:
    nodes: {half}
    workers: {half}
    args:
      data-parallel-size: 8
      max-model-len: {max_len}
    env:
      HF_TOKEN: hf_not_a_real_token
",
            half = nodes / 2,
        ),
        "agg-tp8" => format!(
            "  agg:
    nodes: {nodes}
    workers: {nodes}
    args:
      tensor-parallel-size: 8
      max-model-len: {max_len}
    env:
      HF_TOKEN: hf_not_a_real_token
"
        ),
        "agg-tp1" => format!(
            "  agg:
    nodes: {nodes}
    workers: {w}
    gpus: 1
    args:
      max-model-len: {max_len}
    env:
      HF_TOKEN: hf_not_a_real_token
",
            w = nodes * 8
        ),
        other => panic!("unknown shape `{other}` (known: {})", SHAPES.join(", ")),
    };
    let connector = if shape.starts_with("pd") {
        "nixl"
    } else {
        "none"
    };
    // The `pd` recipe keeps the name (and so the digests) it had before the other shapes.
    let name = match shape {
        "pd" => format!("bench-{nodes}"),
        _ => format!("bench-{shape}-{nodes}"),
    };
    format!(
        "schema: 2
name: {name}
model:
  path: /models/bench
  served_name: bench
resources:
  gpus_per_node: 8
engine:
  type: vllm
  connector: {connector}
roles:
{roles}health_check:
  timeout_seconds: 1800
  interval_seconds: 10
"
    )
}

struct Prepared {
    launch: LaunchPlan,
    graph: ResourceGraph,
    recipe_hash: String,
}

impl srt::workflow::live::Desired for Prepared {
    fn graph(&self) -> &ResourceGraph {
        &self.graph
    }

    fn recipe_hash(&self) -> &str {
        &self.recipe_hash
    }
}

/// Phases of one plan, timed.
const PHASES: &[&str] = &[
    "recipe", "launch", "graph", "state", "refresh", "diff", "render",
];

/// Times of the phases of one plan, its wall-clock time (the state is read and
/// refreshed while the launch plan and graph are built, and diffed while it is
/// refreshed, as `srt plan` does: the phases overlap), and the CPU time of all its
/// threads (what it costs a machine with no idle core).
#[derive(Default)]
struct Phases([Duration; 7], Duration, Duration);

impl Phases {
    fn total(&self) -> Duration {
        self.1
    }

    /// `T ms (phase T, ..., cpu T)`, in ms.
    fn shown(&self) -> String {
        format!(
            "{:.1} ms ({})",
            self.total().as_secs_f64() * 1e3,
            self.each()
        )
    }

    /// `phase T, ..., cpu T`, in ms.
    fn each(&self) -> String {
        let each: Vec<String> = PHASES
            .iter()
            .copied()
            .zip(self.0)
            .chain([("cpu", self.2)])
            .map(|(name, t)| format!("{name} {:.1}", t.as_secs_f64() * 1e3))
            .collect();
        each.join(", ")
    }
}

/// The CPU time (user and system) this process's threads have used so far.
fn cpu_time() -> Duration {
    use nix::sys::resource::{getrusage, UsageWho};
    let usage = getrusage(UsageWho::RUSAGE_SELF).expect("getrusage");
    let of = |t: nix::sys::time::TimeVal| {
        Duration::from_secs(t.tv_sec().unsigned_abs())
            + Duration::from_micros(t.tv_usec().unsigned_abs())
    };
    of(usage.user_time()) + of(usage.system_time())
}

/// Recipe text -> launch plan -> graph, as `workflow::prepare` does, with one host per node
/// (a cluster executor's layout: the local executor's single host runs out of per-node
/// ports long before 4096 nodes).
fn prepare(text: &str, phases: &mut Phases) -> Prepared {
    let t = Instant::now();
    let source = Source {
        name: "bench.yaml".into(),
        text: text.to_string(),
    };
    let recipe = recipe::load_str(&source, "bench").expect("bench recipe loads");
    phases.0[0] = t.elapsed();
    let t = Instant::now();
    let launch = srt::assemble::assemble(
        &recipe,
        &BuildOptions {
            nodes: None,
            hosts: HostLayout::Distinct,
        },
    )
    .unwrap_or_else(|p| panic!("bench recipe builds: {:?}", source.error(p)));
    phases.0[1] = t.elapsed();
    let t = Instant::now();
    let execution = serde_json::json!({ "executor": "bench", "simulate": false });
    let graph = graph::lower(&launch, &execution).expect("bench graph lowers");
    let recipe_hash = srt::workflow::desired_hash(&graph);
    phases.0[2] = t.elapsed();
    Prepared {
        launch,
        graph,
        recipe_hash,
    }
}

/// A plan as `srt plan` makes it.
const REFRESHED: PlanOptions = PlanOptions {
    replace: BTreeSet::new(),
    destroy: false,
    skip_refresh: false,
};

/// A plan against the records alone (`srt plan --refresh=false`).
const RECORDS: PlanOptions = PlanOptions {
    replace: BTreeSet::new(),
    destroy: false,
    skip_refresh: true,
};

/// A whole plan: prepare, read the state (`None`: an empty one), refresh, diff, render.
fn plan_once(
    text: &str,
    store: Option<&StateStore>,
    deployment: &str,
    exec: &LocalExecutor,
    options: &PlanOptions,
) -> (Phases, Prepared, Plan) {
    let (start, cpu) = (Instant::now(), cpu_time());
    let mut phases = Phases::default();
    // As `srt plan` does (`workflow::Setup::plan_live`): the state read and refreshed on
    // a thread of its own, the graph here, the diff as soon as both exist.
    let (p, live) = srt::workflow::live::plan_live(
        || Ok(prepare(text, &mut phases)),
        || {
            let state = match store {
                Some(store) => store.load().expect("load").expect("state exists"),
                None => State::new(deployment),
            };
            Ok(((), state))
        },
        exec,
        Some(Duration::from_secs(10)),
        options,
    )
    .expect("bench plan");
    let live = live.expect("bench state read");
    phases.0[3] = live.times.read;
    phases.0[4] = live.times.refresh;
    phases.0[5] = live.times.diff;
    let plan = live.plan;
    let t = Instant::now();
    // Streamed as `srt plan` writes it (to its output, line by line), not held whole.
    let mut text = Written(0);
    plan::render::render_to(&plan, &mut text).expect("a count cannot fail");
    std::hint::black_box(text.0);
    phases.0[6] = t.elapsed();
    phases.1 = start.elapsed();
    phases.2 = cpu_time() - cpu;
    (phases, p, plan)
}

/// A sink for the plan text that counts what it is given.
struct Written(usize);

impl std::fmt::Write for Written {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        self.0 += std::hint::black_box(s).len();
        Ok(())
    }
}

/// Median total and median of each phase over `reps` plans.
fn time_plans(
    reps: usize,
    mut f: impl FnMut() -> (Phases, Prepared, Plan),
) -> (Duration, Phases, Prepared, Plan) {
    let mut runs = Vec::with_capacity(reps);
    let mut last: Option<(Prepared, Plan)> = None;
    for _ in 0..reps {
        // The previous run's plan is dropped first: the peak is that of one plan.
        drop(last.take());
        let (phases, p, plan) = f();
        runs.push(phases);
        last = Some((p, plan));
    }
    let total = median(runs.iter().map(Phases::total).collect());
    let mut each = Phases::default();
    for (i, slot) in each.0.iter_mut().enumerate() {
        *slot = median(runs.iter().map(|r| r.0[i]).collect());
    }
    each.2 = median(runs.iter().map(|r| r.2).collect());
    let (p, plan) = last.expect("at least one run");
    (total, each, p, plan)
}

/// This process's identity, so that every recorded process refreshes as alive (and
/// refresh does its full work: one `/proc` read per process).
fn own_runtime() -> Runtime {
    let stat = std::fs::read_to_string("/proc/self/stat").expect("/proc/self/stat");
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .expect("stat has a comm")
        .1
        .split_whitespace()
        .collect();
    Runtime::Local {
        pid: std::process::id(),
        start_time: fields[19].parse().expect("start time"),
        pgid: fields[2].parse().expect("pgrp"),
        host: nix::unistd::gethostname()
            .expect("hostname")
            .to_string_lossy()
            .into_owned(),
        lease: None,
    }
}

/// The state a successful apply of `p` leaves (every resource running, as apply records it).
fn full_state(p: &Prepared, deployment: &str) -> State {
    let runtime = own_runtime();
    let mut state = State::new(deployment);
    state.recipe_hash = Some(p.recipe_hash.clone());
    for r in &p.graph.resources {
        let (ports, node) = match r.target {
            graph::Target::Process(i) => {
                let proc_ = &p.launch.processes[i];
                (
                    proc_
                        .ports
                        .iter()
                        .map(|(k, b)| (k.clone(), b.base))
                        .collect(),
                    Some(p.launch.nodes[proc_.node].name.clone()),
                )
            }
            graph::Target::Gate(_)
            | graph::Target::Allocation(_)
            | graph::Target::Membership(_)
            | graph::Target::File(_) => (BTreeMap::new(), None),
        };
        let process = r.kind.is_process();
        state.resources.insert(
            r.address.clone(),
            ResourceState {
                runtime: process.then(|| runtime.clone()),
                node,
                ports,
                log_path: process
                    .then(|| format!(".srt/{deployment}/logs/{}.log", r.address).into()),
                ..ResourceState::of(r, Status::Running)
            },
        );
    }
    state
}

fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

fn time<T>(reps: usize, mut f: impl FnMut() -> T) -> (Duration, T) {
    let mut times = Vec::with_capacity(reps);
    let mut last = None;
    for _ in 0..reps {
        let t = Instant::now();
        let out = f();
        times.push(t.elapsed());
        last = Some(out);
    }
    (median(times), last.expect("at least one run"))
}

/// Peak resident set (VmHWM) of this process, in KiB.
fn peak_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// Reset VmHWM to the current RSS (Linux: `5` to `/proc/self/clear_refs`).
fn reset_peak() {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
}

/// The executor a plan refreshes through: one loopback address per node of the recipe
/// (counted without building the plan, so that a plan measured next is the only one
/// this process has built, as in `srt plan`).
fn executor(text: &str, deployment: &str, dir: &std::path::Path) -> LocalExecutor {
    let source = Source {
        name: "bench.yaml".into(),
        text: text.to_string(),
    };
    let recipe = recipe::load_str(&source, "bench").expect("bench recipe loads");
    let nodes = srt::assemble::node_count(
        &recipe,
        &BuildOptions {
            nodes: None,
            hosts: HostLayout::Distinct,
        },
    )
    .unwrap_or_else(|p| panic!("bench recipe builds: {:?}", source.error(p)));
    let ips: Vec<String> = (0..nodes)
        .map(|i| format!("127.1.{}.{}", i / 256, i % 256))
        .collect();
    LocalExecutor::new(deployment, dir, ips.len(), false).with_node_ips(ips)
}

/// Every Router of `launch` as a listener of this process on its node's loopback
/// address, answering `GET /workers` with its members, as vllm-router does: what a
/// re-plan reads.
fn serve_routers(launch: &LaunchPlan, exec: &LocalExecutor) {
    let bindings = srt::exec::Executor::bindings(exec);
    for m in &launch.memberships {
        let url = bindings.resolve(&m.admin_url);
        let addr = url.trim_start_matches("http://").to_string();
        let workers: Vec<serde_json::Value> = m
            .members
            .iter()
            .map(|w| serde_json::json!({ "url": bindings.resolve(&w.url) }))
            .collect();
        let body = serde_json::json!({ "workers": workers }).to_string();
        let listener = std::net::TcpListener::bind(&addr)
            .unwrap_or_else(|e| panic!("a Router's listener at {addr}: {e}"));
        std::thread::spawn(move || serve_workers(listener, body));
    }
}

/// Answers every request on `listener` with `body` (a Router's `GET /workers`).
fn serve_workers(listener: std::net::TcpListener, body: String) {
    use std::io::{Read, Write};
    let head = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
        body.len()
    );
    for stream in listener.incoming() {
        let Ok(mut stream) = stream else { continue };
        let mut request = Vec::new();
        let mut buf = [0u8; 4096];
        while !request.windows(4).any(|w| w == b"\r\n\r\n") {
            match stream.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => request.extend_from_slice(&buf[..n]),
            }
        }
        let _ = stream
            .write_all(head.as_bytes())
            .and_then(|()| stream.write_all(body.as_bytes()));
    }
}

/// The deployment name of [`recipe_text`].
fn deployment_name(shape: &str, nodes: usize) -> String {
    match shape {
        "pd" => format!("bench-{nodes}"),
        _ => format!("bench-{shape}-{nodes}"),
    }
}

/// Why the recipe is refused (`srt plan` would stop there), or `None` when it builds.
fn refusal(text: &str) -> Option<String> {
    let source = Source {
        name: "bench.yaml".into(),
        text: text.to_string(),
    };
    let recipe = match recipe::load_str(&source, "bench") {
        Ok(r) => r,
        Err(e) => {
            return Some(
                e.problems
                    .iter()
                    .map(|p| p.message.clone())
                    .collect::<Vec<_>>()
                    .join("; "),
            )
        }
    };
    let options = BuildOptions {
        nodes: None,
        hosts: HostLayout::Distinct,
    };
    let problems = srt::assemble::assemble(&recipe, &options).err()?;
    Some(
        problems
            .iter()
            .map(|p| p.message.clone())
            .collect::<Vec<_>>()
            .join("; "),
    )
}

/// One shape and size, measured in this (child) process; prints one `result` line.
fn child(shape: &str, nodes: usize, reps: usize, show_phases: bool) {
    let text = recipe_text(shape, nodes, 32768);
    let changed = recipe_text(shape, nodes, 16384);
    let dir = tempfile::tempdir().expect("temp dir");
    let deployment = deployment_name(shape, nodes);
    let exec = executor(&text, &deployment, dir.path());

    // Plan from scratch (peak memory of this phase alone).
    reset_peak();
    let base_kib = peak_kib();
    let (t_plan, ph_plan, prepared, created) = time_plans(reps, || {
        plan_once(&text, None, &deployment, &exec, &REFRESHED)
    });
    let plan_kib = peak_kib();
    let summary = created.summary();
    assert_eq!(
        summary.create + summary.check,
        prepared.graph.resources.len()
    );
    drop(created);
    serve_routers(&prepared.launch, &exec);

    // The state a full apply leaves, saved and loaded.
    let store = StateStore::new(dir.path().join(&deployment));
    let lock = store.lock("bench", None).expect("lock");
    let mut state = full_state(&prepared, &deployment);
    store.save(&lock, &mut state).expect("first save");
    let mut flip = false;
    let (t_save, _) = time(reps, || {
        // Change one field so that every save really writes.
        flip = !flip;
        state.recipe_hash = Some(if flip { "a".into() } else { "b".into() });
        store.save(&lock, &mut state).expect("save")
    });
    let state_bytes = std::fs::metadata(store.state_path()).map_or(0, |m| m.len());
    let (t_load, _) = time(reps, || store.load().expect("load").expect("state exists"));
    // What apply records per launch batch: ten records, appended to the journal.
    let batch: Vec<String> = state.resources.keys().take(10).cloned().collect();
    let batch: Vec<&str> = batch.iter().map(String::as_str).collect();
    let (t_append, _) = time(reps, || {
        for a in &batch {
            let r = state.resources.get_mut(*a).expect("recorded");
            r.status = if r.status == Status::Running {
                Status::Pending
            } else {
                Status::Running
            };
        }
        store.append(&lock, &mut state, &batch).expect("append");
    });
    let (t_replay, _) = time(reps, || store.load().expect("load").expect("state exists"));
    for a in &batch {
        state.resources.get_mut(*a).expect("recorded").status = Status::Running;
    }
    state.recipe_hash = Some(prepared.recipe_hash.clone());
    store.save(&lock, &mut state).expect("save");
    drop(state);
    drop(prepared);

    // Re-plan against the full state, read from disk: nothing to change.
    let (t_replan, ph_replan, _, noop) = time_plans(reps, || {
        plan_once(&text, Some(&store), &deployment, &exec, &REFRESHED)
    });
    assert!(
        !noop.has_changes(),
        "a re-plan of the applied recipe is a no-op, not {:?}",
        noop.changes
            .iter()
            .filter(|c| c.action != plan::Action::NoOp && c.action != plan::Action::Check)
            .take(3)
            .collect::<Vec<_>>()
    );

    // One role changed: every decode worker (and what routes to them) is replaced.
    let (t_role, ph_role, _, role) = time_plans(reps, || {
        plan_once(&changed, Some(&store), &deployment, &exec, &REFRESHED)
    });
    let replaced = role.summary().replace;
    assert!(replaced > 0, "the decode change replaces resources");
    // The same, against the records alone (`--refresh=false`).
    let (t_records, ph_records, _, records) = time_plans(reps, || {
        plan_once(&changed, Some(&store), &deployment, &exec, &RECORDS)
    });
    assert_eq!(records.changes, role.changes);
    drop(lock);

    if show_phases {
        for (name, ph) in [
            ("plan", &ph_plan),
            ("re-plan", &ph_replan),
            ("one role", &ph_role),
            ("one role, records only", &ph_records),
        ] {
            println!("phases {shape} nodes={nodes} {name}: {}", ph.each());
        }
    }
    println!(
        "result shape={shape} nodes={nodes} resources={} processes={} replaced={replaced} plan_us={} replan_us={} role_us={} role_records_us={} save_us={} load_us={} append_us={} replay_load_us={} state_bytes={state_bytes} plan_peak_kib={} base_kib={base_kib} peak_kib={} plan_cpu_us={} replan_cpu_us={} role_cpu_us={} role_records_cpu_us={}",
        noop.changes.len(),
        noop.changes.iter().filter(|c| c.kind.is_process()).count(),
        t_plan.as_micros(),
        t_replan.as_micros(),
        t_role.as_micros(),
        t_records.as_micros(),
        t_save.as_micros(),
        t_load.as_micros(),
        t_append.as_micros(),
        t_replay.as_micros(),
        plan_kib,
        peak_kib(),
        ph_plan.2.as_micros(),
        ph_replan.2.as_micros(),
        ph_role.2.as_micros(),
        ph_records.2.as_micros(),
    );
}

/// Runs `f`; a boundary for instruction counting (`valgrind --tool=callgrind
/// --collect-atstart=no --toggle-collect='*measured*'`).
#[inline(never)]
fn measured<T>(f: impl FnOnce() -> T) -> T {
    std::hint::black_box(f())
}

/// One operation once, for an instruction count: `--count NODES WHAT` with WHAT one of
/// `plan`, `replan`, `role`, `save`, `load`, `destroy`, `resolve` (or `hash`: print digests
/// of the outputs; `recipe`: print the recipe, to run `srt plan` on it).
/// The setup (state on disk) is not counted. `plan`, `replan` and `role` also print
/// their phases' times to stderr, `plan` with the process's peak memory (VmHWM).
fn count_one(shape: &str, nodes: usize, what: &str) {
    let text = recipe_text(shape, nodes, 32768);
    if what == "recipe" {
        print!("{text}");
        return;
    }
    let dir = tempfile::tempdir().expect("temp dir");
    let deployment = deployment_name(shape, nodes);
    let exec = executor(&text, &deployment, dir.path());
    if what == "plan" {
        // From scratch: no state to set up (and nothing else in this process's heap, for
        // a heap profiler).
        let (phases, prepared, plan) =
            measured(|| plan_once(&text, None, &deployment, &exec, &REFRESHED));
        eprintln!("plan {}, peak {} KiB", phases.shown(), peak_kib());
        drop((prepared, plan));
        return;
    }
    let store = StateStore::new(dir.path().join(&deployment));
    let lock = store.lock("bench", None).expect("lock");
    let mut state = {
        let prepared = prepare(&text, &mut Phases::default());
        serve_routers(&prepared.launch, &exec);
        full_state(&prepared, &deployment)
    };
    store.save(&lock, &mut state).expect("first save");
    match what {
        "replan" => {
            let (phases, ..) =
                measured(|| plan_once(&text, Some(&store), &deployment, &exec, &REFRESHED));
            eprintln!("re-plan {}", phases.shown());
        }
        "role" => {
            let changed = recipe_text(shape, nodes, 16384);
            let (phases, ..) =
                measured(|| plan_once(&changed, Some(&store), &deployment, &exec, &REFRESHED));
            eprintln!("one role {}", phases.shown());
        }
        "role-records" => {
            let changed = recipe_text(shape, nodes, 16384);
            let (phases, ..) =
                measured(|| plan_once(&changed, Some(&store), &deployment, &exec, &RECORDS));
            eprintln!("one role, records only {}", phases.shown());
        }
        "save" => {
            state.recipe_hash = Some("changed".into());
            measured(|| store.save(&lock, &mut state).expect("save"));
        }
        "load" => drop(measured(|| store.load().expect("load"))),
        // `srt destroy`'s plan: every recorded resource, dependents first.
        "destroy" => {
            let state = store.load().expect("load").expect("state exists");
            let (_, graph) = srt::workflow::empty(&deployment);
            let plan = measured(|| {
                let observed =
                    srt::workflow::refresh(&state, &exec, Some(std::time::Duration::from_secs(10)));
                let options = PlanOptions {
                    destroy: true,
                    ..Default::default()
                };
                plan::diff(&graph, &state, &observed, "", &options)
            });
            assert_eq!(plan.summary().destroy, state.resources.len());
        }
        // What an executor does when it starts every process: resolve each argv token
        // and env value against the node IPs.
        "resolve" => {
            let prepared = prepare(&text, &mut Phases::default());
            let bindings = launch::Bindings {
                node_ips: (0..prepared.launch.nodes.len())
                    .map(|i| format!("10.{}.{}.{}", i >> 16, (i >> 8) & 255, i & 255))
                    .collect(),
                run_dir: "/run/bench".into(),
                node_hosts: Vec::new(),
            };
            let bytes = measured(|| {
                let mut bytes = 0;
                for p in &prepared.launch.processes {
                    for a in p.argv.iter().chain(p.env.values().map(String::as_str)) {
                        bytes += bindings.resolve(a).len();
                    }
                }
                bytes
            });
            println!("resolved {bytes} bytes");
        }
        // The desired-graph hash and the plan text's digest: equal before and after an
        // optimisation, or the optimisation changed the output.
        "hash" => {
            let (_, p, plan) = plan_once(&text, None, &deployment, &exec, &REFRESHED);
            let rendered = plan::render::render(&plan);
            let launch = launch::render::json(&p.launch);
            let changed = recipe_text(shape, nodes, 16384);
            let (_, _, role) = plan_once(&changed, Some(&store), &deployment, &exec, &REFRESHED);
            let (_, _, noop) = plan_once(&text, Some(&store), &deployment, &exec, &REFRESHED);
            let digest = |text: &str| blake3::hash(text.as_bytes()).to_hex();
            println!(
                "nodes={nodes} graph={} plan_text={} launch_json={} role_text={} role_json={} noop_text={}",
                p.recipe_hash,
                digest(&rendered),
                digest(&launch),
                digest(&plan::render::render(&role)),
                // Without the state's lineage, a fresh UUID every run.
                digest(&plan::render::json(&role).replace(&role.lineage, "")),
                digest(&plan::render::render(&noop)),
            );
        }
        other => {
            panic!("--count NODES plan|replan|role|role-records|save|load|destroy|resolve|hash, not {other}")
        }
    }
}

struct Row {
    shape: String,
    nodes: usize,
    /// Which build measured it: `after` (this one) or `before` (`--before BIN`).
    build: &'static str,
    fields: BTreeMap<String, f64>,
    /// Why the recipe was refused, when it was.
    refused: Option<String>,
}

impl Row {
    fn get(&self, k: &str) -> f64 {
        self.fields.get(k).copied().unwrap_or(f64::NAN)
    }
}

/// `key=value` words after the first.
fn fields(rest: &str) -> BTreeMap<String, String> {
    rest.split_whitespace()
        .filter_map(|kv| {
            let (k, v) = kv.split_once('=')?;
            Some((k.to_string(), v.trim_end_matches(':').to_string()))
        })
        .collect()
}

fn parse_row(line: &str, build: &'static str) -> Option<Row> {
    if let Some(rest) = line.strip_prefix("refused ") {
        let (head, why) = rest.split_once(": ").unwrap_or((rest, ""));
        let f = fields(head);
        return Some(Row {
            shape: f.get("shape")?.clone(),
            nodes: f.get("nodes")?.parse().ok()?,
            build,
            fields: BTreeMap::new(),
            refused: Some(why.to_string()),
        });
    }
    let rest = line.strip_prefix("result ")?;
    let f = fields(rest);
    Some(Row {
        // A build from before the shapes measured only `pd`, without a shape field.
        shape: f.get("shape").cloned().unwrap_or_else(|| "pd".into()),
        nodes: f.get("nodes")?.parse().ok()?,
        build,
        fields: f
            .iter()
            .filter_map(|(k, v)| Some((k.clone(), v.parse().ok()?)))
            .collect(),
        refused: None,
    })
}

/// Microseconds as milliseconds; `-` for a figure the build did not report (an older
/// `--before` build).
fn ms(us: f64) -> String {
    if us.is_nan() {
        return "-".into();
    }
    format!("{:.1}", us / 1000.0)
}

/// Run one child (`exe --child SHAPE NODES`) and collect its rows.
fn run_child(
    exe: &std::path::Path,
    build: &'static str,
    shape: &str,
    nodes: usize,
    reps: usize,
    phases: bool,
) -> Vec<Row> {
    // Whether srt builds the recipe at all, in a process of its own (what it allocates
    // would count in the measured child's peak otherwise).
    let out = Command::new(exe)
        .args(["--refusal", &nodes.to_string(), "--shape", shape])
        .output()
        .expect("run refusal check");
    let stdout = String::from_utf8_lossy(&out.stdout);
    if let Some(row) = stdout.lines().find_map(|l| parse_row(l, build)) {
        return vec![row];
    }
    let mut cmd = Command::new(exe);
    cmd.args([
        "--child",
        &nodes.to_string(),
        "--shape",
        shape,
        "--reps",
        &reps.to_string(),
    ]);
    if phases {
        cmd.arg("--phases");
    }
    let out = cmd.output().expect("run benchmark child");
    let stdout = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        eprintln!("{stdout}{}", String::from_utf8_lossy(&out.stderr));
        panic!("benchmark of {shape} at {nodes} nodes ({build}) failed");
    }
    for line in stdout.lines().filter(|l| l.starts_with("phases ")) {
        println!("{build} {}", &line["phases ".len()..]);
    }
    stdout.lines().filter_map(|l| parse_row(l, build)).collect()
}

fn main() {
    srt_cli::alloc::configure();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arg = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    let shape = arg("--shape").unwrap_or_else(|| "pd".into());
    // `cargo bench` passes `--bench`; without it (`cargo test --all-targets`, the test
    // suite) the benchmark only checks that it still runs.
    let smoke = args.iter().any(|a| a == "--smoke") || !args.iter().any(|a| a == "--bench");
    if let Some(n) = arg("--count") {
        let i = args.iter().position(|a| a == "--count").expect("present");
        let what = args.get(i + 2).map_or("plan", String::as_str);
        count_one(&shape, n.parse().expect("--count NODES WHAT"), what);
        return;
    }
    let phases = args.iter().any(|a| a == "--phases");
    if let Some(n) = arg("--refusal") {
        let nodes: usize = n.parse().expect("--refusal NODES");
        if let Some(why) = refusal(&recipe_text(&shape, nodes, 32768)) {
            println!("refused shape={shape} nodes={nodes}: {why}");
        }
        return;
    }
    if let Some(n) = arg("--child") {
        let reps = arg("--reps").and_then(|r| r.parse().ok()).unwrap_or(5);
        child(&shape, n.parse().expect("--child NODES"), reps, phases);
        return;
    }
    let sizes: Vec<usize> = match arg("--sizes") {
        Some(s) => s
            .split(',')
            .map(|n| n.trim().parse().expect("--sizes 8,64"))
            .collect(),
        None if smoke => vec![8, 64],
        None => DEFAULT_SIZES.to_vec(),
    };
    let shapes: Vec<String> = match arg("--shapes") {
        Some(s) => s.split(',').map(|s| s.trim().to_string()).collect(),
        None => SHAPES
            .iter()
            .map(std::string::ToString::to_string)
            .collect(),
    };
    let reps: usize = arg("--reps")
        .and_then(|r| r.parse().ok())
        .unwrap_or(if smoke { 1 } else { 7 });
    let exe = std::env::current_exe().expect("current exe");
    // `--before BIN`: another build of this benchmark, run alternately with this one
    // (same shapes and sizes, one child each), so both are measured side by side.
    let before = arg("--before").map(std::path::PathBuf::from);
    let mut rows = Vec::new();
    for shape in &shapes {
        for &nodes in &sizes {
            // Each size in its own process, so that its peak memory is its own.
            if let Some(b) = &before {
                rows.extend(run_child(b, "before", shape, nodes, reps, phases));
            }
            rows.extend(run_child(&exe, "after", shape, nodes, reps, phases));
        }
    }
    println!(
        "srt plan benchmark: median of {reps} run(s) per figure, times in ms, memory in MiB\n"
    );
    let builds: &[&str] = if before.is_some() {
        &["before", "after"]
    } else {
        &["after"]
    };
    for shape in &shapes {
        println!("{shape}:\n");
        println!(
            "| nodes x 8 GPUs | build | resources | processes | plan | re-plan | one role (replaced) | one role, records only | state save | state load | append 10 records | load with journal | state file MiB | plan peak MiB | run peak MiB |"
        );
        println!("|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
        for r in rows.iter().filter(|r| &r.shape == shape) {
            if let Some(why) = &r.refused {
                println!("| {} | {} | refused: {why} ||||||||||||", r.nodes, r.build);
                continue;
            }
            println!(
                "| {} | {} | {} | {} | {} | {} | {} ({}) | {} | {} | {} | {} | {} | {:.1} | {:.0} | {:.0} |",
                r.nodes,
                r.build,
                r.get("resources"),
                r.get("processes"),
                ms(r.get("plan_us")),
                ms(r.get("replan_us")),
                ms(r.get("role_us")),
                r.get("replaced"),
                ms(r.get("role_records_us")),
                ms(r.get("save_us")),
                ms(r.get("load_us")),
                ms(r.get("append_us")),
                ms(r.get("replay_load_us")),
                r.get("state_bytes") / 1048576.0,
                r.get("plan_peak_kib") / 1024.0,
                r.get("peak_kib") / 1024.0,
            );
        }
        // What each plan's threads used in all: a re-plan reads (and refreshes) the
        // state beside the graph, on a core a plan from scratch leaves idle, so its
        // wall-clock time cannot be below half of this on two cores.
        println!("\nCPU time of {shape}, all threads (ms):\n");
        println!("| nodes x 8 GPUs | build | plan | re-plan | one role | one role, records only |");
        println!("|---:|---|---:|---:|---:|---:|");
        for r in rows
            .iter()
            .filter(|r| &r.shape == shape && r.refused.is_none())
        {
            println!(
                "| {} | {} | {} | {} | {} | {} |",
                r.nodes,
                r.build,
                ms(r.get("plan_cpu_us")),
                ms(r.get("replan_cpu_us")),
                ms(r.get("role_cpu_us")),
                ms(r.get("role_records_cpu_us")),
            );
        }
        for build in builds {
            let measured: Vec<&Row> = rows
                .iter()
                .filter(|r| &r.shape == shape && r.build == *build && r.refused.is_none())
                .collect();
            if measured.len() < 2 {
                continue;
            }
            // Growth exponent k between consecutive sizes: time ~ resources^k (1 is
            // linear; n log n shows as slightly above 1; 2 is quadratic).
            println!("\nGrowth exponent of {shape} ({build}) between consecutive sizes (time ~ resources^k):\n");
            println!("| sizes | plan | re-plan | one role | save | load |");
            println!("|---|---:|---:|---:|---:|---:|");
            for w in measured.windows(2) {
                let n = w[1].get("resources") / w[0].get("resources");
                let k = |key: &str| (w[1].get(key) / w[0].get(key)).ln() / n.ln();
                println!(
                    "| {} -> {} | {:.2} | {:.2} | {:.2} | {:.2} | {:.2} |",
                    w[0].nodes,
                    w[1].nodes,
                    k("plan_us"),
                    k("replan_us"),
                    k("role_us"),
                    k("save_us"),
                    k("load_us"),
                );
            }
        }
        println!();
    }
}
