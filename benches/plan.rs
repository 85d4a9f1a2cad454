//! Plan and state benchmarks at cluster scale: `cargo bench --bench plan`.
//!
//! For generated prefill/decode recipes of 8, 64, 512 and 4096 nodes x 8 GPUs it measures
//! (median of repeated runs, wall clock):
//!
//! - **plan**: a plan from scratch, as `srt plan` does it on a cluster: recipe text ->
//!   launch plan (one host per node) -> resource graph -> diff against an empty state ->
//!   human plan text;
//! - **re-plan**: the same against the full state of the deployment, read from disk,
//!   with every recorded process refreshed (a live pid, so every probe reads `/proc`):
//!   the path of a no-op `srt plan`;
//! - **one role**: re-plan after one decode flag changed (every decode worker, the
//!   Routers and nginx are replaced, with word diffs of their command lines);
//! - **save** / **load**: the state file of the full deployment written (atomically,
//!   fsynced, with its backup) and read back;
//! - **peak**: the peak resident memory of the plan phase (VmHWM, each size measured in
//!   its own child process, reset before the plan phase), and of the whole run.
//!
//! Options (after `--`): `--smoke` (8 and 64 nodes, one run each: a check that the
//! benchmark still runs; the default when run without `--bench`, i.e. by `cargo test
//! --all-targets`), `--sizes 8,64`, `--reps N`, and `--phases` (median time of each
//! phase: recipe, launch plan, graph, state read, refresh, diff, render).

use srt::exec::local::LocalExecutor;
use srt::graph::{self, ResourceGraph};
use srt::launch::build::HostLayout;
use srt::launch::{self, BuildOptions, LaunchPlan};
use srt::plan::{self, Plan, PlanOptions};
use srt::recipe::{self, Source};
use srt::state::{ResourceState, Runtime, State, StateStore, Status};
use std::collections::BTreeMap;
use std::process::Command;
use std::time::{Duration, Instant};

const DEFAULT_SIZES: &[usize] = &[8, 64, 512, 4096];

/// A P/D recipe of `nodes` nodes x 8 GPUs: prefill on half the nodes as DP8 x TP2
/// hybrid-LB endpoints of 2 nodes (one API server per node), decode on the other half as
/// DP2 x TP16 endpoints whose replicas span 2 nodes (4 nodes each, only the leader is
/// routable); NIXL between them; nginx in front of ten Routers (the frontend defaults).
fn recipe_text(nodes: usize, decode_max_len: u32) -> String {
    assert!(
        nodes >= 8 && nodes.is_multiple_of(8),
        "sizes are multiples of 8"
    );
    format!(
        "schema: 2
name: bench-{nodes}
model:
  path: /models/bench
  served_name: bench
resources:
  gpus_per_node: 8
engine:
  type: vllm
  connector: nixl
roles:
  prefill:
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
      max-model-len: {decode_max_len}
    env:
      HF_TOKEN: hf_not_a_real_token
health_check:
  timeout_seconds: 1800
  interval_seconds: 10
",
        pn = nodes / 2,
        pw = nodes / 4,
        dn = nodes / 2,
        dw = nodes / 8,
    )
}

struct Prepared {
    launch: LaunchPlan,
    graph: ResourceGraph,
    recipe_hash: String,
}

/// Phases of one plan, timed.
const PHASES: &[&str] = &[
    "recipe", "launch", "graph", "state", "refresh", "diff", "render",
];

/// Times of the phases of one plan.
#[derive(Default)]
struct Phases([Duration; 7]);

impl Phases {
    fn total(&self) -> Duration {
        self.0.iter().sum()
    }
}

/// Recipe text -> launch plan -> graph, as `ops::prepare` does, with one host per node
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
    let launch = launch::build(
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
    let recipe_hash = srt::ops::desired_hash(&graph);
    phases.0[2] = t.elapsed();
    Prepared {
        launch,
        graph,
        recipe_hash,
    }
}

/// A whole plan: prepare, read the state (`None`: an empty one), refresh, diff, render.
fn plan_once(
    text: &str,
    store: Option<&StateStore>,
    deployment: &str,
    exec: &LocalExecutor,
) -> (Phases, Prepared, Plan) {
    let mut phases = Phases::default();
    let p = prepare(text, &mut phases);
    let t = Instant::now();
    let state = match store {
        Some(store) => store.load().expect("load").expect("state exists"),
        None => State::new(deployment),
    };
    phases.0[3] = t.elapsed();
    let t = Instant::now();
    let observed = srt::ops::refresh(&state, exec);
    phases.0[4] = t.elapsed();
    let t = Instant::now();
    let plan = plan::diff(
        &p.graph,
        &state,
        &observed,
        &p.recipe_hash,
        &PlanOptions::default(),
    );
    phases.0[5] = t.elapsed();
    let t = Instant::now();
    let text = plan::render::render(&plan);
    std::hint::black_box(text.len());
    phases.0[6] = t.elapsed();
    (phases, p, plan)
}

/// Median total and median of each phase over `reps` plans.
fn time_plans(
    reps: usize,
    mut f: impl FnMut() -> (Phases, Prepared, Plan),
) -> (Duration, Phases, Prepared, Plan) {
    let mut runs = Vec::with_capacity(reps);
    let mut last = None;
    for _ in 0..reps {
        let (phases, p, plan) = f();
        runs.push(phases);
        last = Some((p, plan));
    }
    let total = median(runs.iter().map(Phases::total).collect());
    let mut each = Phases::default();
    for (i, slot) in each.0.iter_mut().enumerate() {
        *slot = median(runs.iter().map(|r| r.0[i]).collect());
    }
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
            graph::Target::Gate(_) | graph::Target::Allocation => (BTreeMap::new(), None),
        };
        let process = r.kind.is_process();
        state.resources.insert(
            r.address.clone(),
            ResourceState {
                kind: r.kind.name().to_string(),
                hash: r.hash.clone(),
                dependencies: r.deps.clone(),
                spec: r.spec.clone(),
                status: Status::Running,
                runtime: process.then(|| runtime.clone()),
                node,
                ports,
                log_path: process
                    .then(|| format!(".srt/{deployment}/logs/{}.log", r.address).into()),
                error: None,
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

/// One size, measured in this (child) process; prints one `result` line.
fn child(nodes: usize, reps: usize, show_phases: bool) {
    let text = recipe_text(nodes, 32768);
    let changed = recipe_text(nodes, 16384);
    let dir = tempfile::tempdir().expect("temp dir");
    let deployment = format!("bench-{nodes}");
    let exec = LocalExecutor::new(&deployment, dir.path(), 1, None);

    // Plan from scratch (peak memory of this phase alone).
    reset_peak();
    let base_kib = peak_kib();
    let (t_plan, ph_plan, prepared, created) =
        time_plans(reps, || plan_once(&text, None, &deployment, &exec));
    let plan_kib = peak_kib();
    let summary = created.summary();
    assert_eq!(
        summary.create + summary.check,
        prepared.graph.resources.len()
    );
    drop(created);

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
        store.append(&lock, &mut state, &batch).expect("append")
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
    let (t_replan, ph_replan, _, noop) =
        time_plans(reps, || plan_once(&text, Some(&store), &deployment, &exec));
    assert!(
        !noop.has_changes(),
        "a re-plan of the applied recipe is a no-op"
    );

    // One role changed: every decode worker (and what routes to them) is replaced.
    let (t_role, ph_role, _, role) = time_plans(reps, || {
        plan_once(&changed, Some(&store), &deployment, &exec)
    });
    let replaced = role.summary().replace;
    assert!(replaced > 0, "the decode change replaces resources");
    drop(lock);

    if show_phases {
        for (name, ph) in [
            ("plan", &ph_plan),
            ("re-plan", &ph_replan),
            ("one role", &ph_role),
        ] {
            let parts: Vec<String> = PHASES
                .iter()
                .zip(ph.0.iter())
                .map(|(p, d)| format!("{p} {:.1}", d.as_secs_f64() * 1000.0))
                .collect();
            println!("phases nodes={nodes} {name}: {}", parts.join(", "));
        }
    }
    println!(
        "result nodes={nodes} resources={} processes={} replaced={replaced} plan_us={} replan_us={} role_us={} save_us={} load_us={} append_us={} replay_load_us={} state_bytes={state_bytes} plan_peak_kib={} base_kib={base_kib} peak_kib={}",
        noop.changes.len(),
        noop.changes.iter().filter(|c| plan::kind_is_process(&c.kind)).count(),
        t_plan.as_micros(),
        t_replan.as_micros(),
        t_role.as_micros(),
        t_save.as_micros(),
        t_load.as_micros(),
        t_append.as_micros(),
        t_replay.as_micros(),
        plan_kib,
        peak_kib(),
    );
}

/// Runs `f`; a boundary for instruction counting (`valgrind --tool=callgrind
/// --collect-atstart=no --toggle-collect='*measured*'`).
#[inline(never)]
fn measured<T>(f: impl FnOnce() -> T) -> T {
    std::hint::black_box(f())
}

/// One operation once, for an instruction count: `--count NODES WHAT` with WHAT one of
/// `plan`, `replan`, `role`, `save`, `load`, `destroy`, `resolve` (or `hash`: print digests of the outputs).
/// The setup (state on disk) is not counted.
fn count_one(nodes: usize, what: &str) {
    let text = recipe_text(nodes, 32768);
    let dir = tempfile::tempdir().expect("temp dir");
    let deployment = format!("bench-{nodes}");
    let exec = LocalExecutor::new(&deployment, dir.path(), 1, None);
    let store = StateStore::new(dir.path().join(&deployment));
    let lock = store.lock("bench", None).expect("lock");
    let mut state = {
        let prepared = prepare(&text, &mut Phases::default());
        full_state(&prepared, &deployment)
    };
    store.save(&lock, &mut state).expect("first save");
    match what {
        "plan" => drop(measured(|| plan_once(&text, None, &deployment, &exec))),
        "replan" => drop(measured(|| {
            plan_once(&text, Some(&store), &deployment, &exec)
        })),
        "role" => {
            let changed = recipe_text(nodes, 16384);
            drop(measured(|| {
                plan_once(&changed, Some(&store), &deployment, &exec)
            }))
        }
        "save" => {
            state.recipe_hash = Some("changed".into());
            measured(|| store.save(&lock, &mut state).expect("save"));
        }
        "load" => drop(measured(|| store.load().expect("load"))),
        // `srt destroy`'s plan: every recorded resource, dependents first.
        "destroy" => {
            let state = store.load().expect("load").expect("state exists");
            let (_, graph) = srt::ops::empty(&deployment);
            let plan = measured(|| {
                let observed = srt::ops::refresh(&state, &exec);
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
            };
            let bytes = measured(|| {
                let mut bytes = 0;
                for p in &prepared.launch.processes {
                    for a in p.argv.iter().chain(p.env.values()) {
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
            let (_, p, plan) = plan_once(&text, None, &deployment, &exec);
            let rendered = plan::render::render(&plan);
            let launch = launch::render::json(&p.launch);
            let changed = recipe_text(nodes, 16384);
            let (_, _, role) = plan_once(&changed, Some(&store), &deployment, &exec);
            let (_, _, noop) = plan_once(&text, Some(&store), &deployment, &exec);
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
            panic!("--count NODES plan|replan|role|save|load|destroy|resolve|hash, not {other}")
        }
    }
}

struct Row {
    nodes: usize,
    fields: BTreeMap<String, f64>,
}

impl Row {
    fn get(&self, k: &str) -> f64 {
        self.fields.get(k).copied().unwrap_or(f64::NAN)
    }
}

fn parse_row(line: &str) -> Option<Row> {
    let rest = line.strip_prefix("result ")?;
    let fields: BTreeMap<String, f64> = rest
        .split_whitespace()
        .filter_map(|kv| {
            let (k, v) = kv.split_once('=')?;
            Some((k.to_string(), v.parse().ok()?))
        })
        .collect();
    Some(Row {
        nodes: fields.get("nodes").copied()? as usize,
        fields,
    })
}

fn ms(us: f64) -> String {
    format!("{:.1}", us / 1000.0)
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let arg = |name: &str| {
        args.iter()
            .position(|a| a == name)
            .and_then(|i| args.get(i + 1))
            .cloned()
    };
    // `cargo bench` passes `--bench`; without it (`cargo test --all-targets`, the test
    // suite) the benchmark only checks that it still runs.
    let smoke = args.iter().any(|a| a == "--smoke") || !args.iter().any(|a| a == "--bench");
    if let Some(n) = arg("--count") {
        let i = args.iter().position(|a| a == "--count").expect("present");
        let what = args.get(i + 2).map(String::as_str).unwrap_or("plan");
        count_one(n.parse().expect("--count NODES WHAT"), what);
        return;
    }
    if let Some(n) = arg("--child") {
        let reps = arg("--reps").and_then(|r| r.parse().ok()).unwrap_or(5);
        let phases = args.iter().any(|a| a == "--phases");
        child(n.parse().expect("--child NODES"), reps, phases);
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
    let reps: usize = arg("--reps")
        .and_then(|r| r.parse().ok())
        .unwrap_or(if smoke { 1 } else { 7 });
    let exe = std::env::current_exe().expect("current exe");
    let mut rows = Vec::new();
    for &nodes in &sizes {
        // Each size in its own process, so that its peak memory is its own.
        let mut cmd = Command::new(&exe);
        cmd.args(["--child", &nodes.to_string(), "--reps", &reps.to_string()]);
        if args.iter().any(|a| a == "--phases") {
            cmd.arg("--phases");
        }
        let out = cmd.output().expect("run benchmark child");
        let stdout = String::from_utf8_lossy(&out.stdout);
        if !out.status.success() {
            eprintln!("{stdout}{}", String::from_utf8_lossy(&out.stderr));
            panic!("benchmark of {nodes} nodes failed");
        }
        for line in stdout.lines().filter(|l| l.starts_with("phases ")) {
            println!("{}", &line["phases ".len()..]);
        }
        rows.extend(stdout.lines().filter_map(parse_row));
    }
    println!(
        "srt plan benchmark: median of {reps} run(s) per figure, times in ms, memory in MiB\n"
    );
    println!(
        "| nodes x 8 GPUs | resources | processes | plan | re-plan | one role (replaced) | state save | state load | append 10 records | load with journal | state file MiB | plan peak MiB | run peak MiB |"
    );
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for r in &rows {
        println!(
            "| {} | {} | {} | {} | {} | {} ({}) | {} | {} | {} | {} | {:.1} | {:.0} | {:.0} |",
            r.nodes,
            r.get("resources"),
            r.get("processes"),
            ms(r.get("plan_us")),
            ms(r.get("replan_us")),
            ms(r.get("role_us")),
            r.get("replaced"),
            ms(r.get("save_us")),
            ms(r.get("load_us")),
            ms(r.get("append_us")),
            ms(r.get("replay_load_us")),
            r.get("state_bytes") / 1048576.0,
            r.get("plan_peak_kib") / 1024.0,
            r.get("peak_kib") / 1024.0,
        );
    }
    if rows.len() > 1 {
        // Growth exponent k between consecutive sizes: time ~ resources^k (1 is linear;
        // n log n shows as slightly above 1; 2 is quadratic).
        println!("\nGrowth exponent between consecutive sizes (time ~ resources^k):\n");
        println!("| sizes | plan | re-plan | one role | save | load |");
        println!("|---|---:|---:|---:|---:|---:|");
        for w in rows.windows(2) {
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
}
