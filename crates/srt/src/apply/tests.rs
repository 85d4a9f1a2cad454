//! Apply's walk, in process, against the fake executor ([`crate::exec::fake`]): the
//! order of starts and stops, the parallelism bound, what a failure skips,
//! cancellation, and what the state records around a launch.

use super::{Apply, Cancel, Event, Failure, LogTail, Outcome};
use crate::exec::fake::{Behaviour, Call, FakeExecutor};
use crate::exec::Executor;
use crate::graph::{self, ResourceGraph};
use crate::launch::{LaunchPlan, LaunchProcess, NodeSlot, ProcessKind};
use crate::plan::{self, Action, Orphan, Plan, PlanOptions};
use crate::recipe::HealthCheck;
use crate::state::{ResourceState, State, StateLock, StateStore, Status};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

const SLOW: Duration = Duration::from_millis(40);

fn process(
    address: &str,
    kind: ProcessKind,
    depends_on: &[&str],
    watches: &[&str],
) -> LaunchProcess {
    let strings = |xs: &[&str]| {
        xs.iter()
            .map(std::string::ToString::to_string)
            .collect::<Vec<_>>()
    };
    LaunchProcess {
        depends_on: strings(depends_on),
        watches: strings(watches).into(),
        ..LaunchProcess::bare(address, kind, ["prog", address].into())
    }
}

fn worker(address: &str, depends_on: &[&str]) -> LaunchProcess {
    process(address, ProcessKind::Worker, depends_on, &[])
}

/// A launch plan of `processes` on one node, no gates.
fn launch(processes: Vec<LaunchProcess>) -> LaunchPlan {
    let (mut plan, _) = crate::workflow::empty("t");
    plan.nodes = vec![NodeSlot {
        index: 0,
        name: "node0".into(),
        ip: "<node0-ip>".into(),
        gpus: 0,
    }];
    plan.processes = processes;
    plan
}

/// A deployment directory with a saved (empty) state, its lock held.
struct Deployment {
    _dir: tempfile::TempDir,
    store: StateStore,
    lock: StateLock,
}

fn deployment() -> Deployment {
    let dir = tempfile::tempdir().unwrap();
    let store = StateStore::new(dir.path().join("t"));
    let lock = store.lock("test", None).unwrap();
    store.save(&lock, &mut State::new("t")).unwrap();
    Deployment {
        _dir: dir,
        store,
        lock,
    }
}

impl Deployment {
    /// The resources of `state` as a load of this deployment gives them back: with the
    /// log paths derived from its directory in place of the (fake) executor's.
    fn as_loaded(&self, state: &State) -> BTreeMap<String, ResourceState> {
        let dir = std::path::absolute(self.store.dir()).unwrap();
        let mut resources = state.resources.clone();
        for (address, r) in &mut resources {
            if r.log_path.is_some() {
                r.log_path = Some(crate::state::log_file(&dir, address));
            }
        }
        resources
    }
}

/// What one run of apply did: its outcome, its events, and the state it saved.
struct Ran {
    outcome: Outcome,
    events: Vec<Event>,
    state: State,
}

async fn run_plan(
    d: &Deployment,
    launch: &LaunchPlan,
    graph: &ResourceGraph,
    plan: &Plan,
    exec: &dyn Executor,
    parallelism: usize,
    cancel: Cancel,
) -> Ran {
    let events = Mutex::new(Vec::new());
    let sink = |e: Event| events.lock().unwrap().push(e);
    let apply = Apply {
        launch,
        graph,
        plan,
        exec,
        store: &d.store,
        lock: &d.lock,
        parallelism,
        at_once: false,
        health: HealthCheck {
            timeout_secs: 1,
            interval_secs: 1,
            unhealthy_grace_secs: 1,
        },
        cancel,
        events: &sink,
    };
    let shared = super::shared(d.store.load().unwrap().unwrap());
    let outcome = apply.run(&shared).await;
    let state = shared.lock().unwrap().clone();
    Ran {
        outcome,
        events: events.into_inner().unwrap(),
        state,
    }
}

/// Plan `processes` against what `d` records, and apply it.
async fn apply(
    d: &Deployment,
    processes: Vec<LaunchProcess>,
    exec: &FakeExecutor,
    parallelism: usize,
    cancel: Cancel,
) -> Ran {
    apply_launch(d, &launch(processes), exec, parallelism, cancel).await
}

/// Plan `launch` against what `d` records, and apply it.
async fn apply_launch(
    d: &Deployment,
    launch: &LaunchPlan,
    exec: &FakeExecutor,
    parallelism: usize,
    cancel: Cancel,
) -> Ran {
    let graph = graph::lower(launch, &exec.execution()).unwrap();
    let state = d.store.load().unwrap().unwrap();
    let plan = plan::diff(
        &graph,
        &state,
        &BTreeMap::new(),
        "h",
        &PlanOptions::default(),
    );
    run_plan(d, launch, &graph, &plan, exec, parallelism, cancel).await
}

/// Position of the first call matching `f`.
fn at(calls: &[Call], what: &str, f: impl Fn(&Call) -> bool) -> usize {
    calls
        .iter()
        .position(f)
        .unwrap_or_else(|| panic!("no {what} in {calls:#?}"))
}

fn started(calls: &[Call], address: &str) -> usize {
    at(
        calls,
        &format!("start of {address}"),
        |c| matches!(c, Call::Start(a, _) if a == address),
    )
}

fn confirmed(calls: &[Call], address: &str) -> usize {
    at(
        calls,
        &format!("confirm of {address}"),
        |c| matches!(c, Call::Confirmed(a) if a == address),
    )
}

fn ports_checked(calls: &[Call], address: &str) -> usize {
    at(
        calls,
        &format!("port check of {address}"),
        |c| matches!(c, Call::Ports(a) if a == address),
    )
}

/// A file and the worker that reads it, through apply twice (the file's text
/// changed) and then a destroy.
#[tokio::test]
async fn a_file_is_written_before_its_reader_and_its_change_replaces_the_reader() {
    let d = deployment();
    let run = tempfile::tempdir().unwrap();
    let path = run.path().join("config/decode.yaml");
    let file = |text: &str| crate::launch::LaunchFile {
        address: "file.decode".into(),
        path: format!("{}/config/decode.yaml", crate::launch::RUN_DIR),
        content: text.into(),
    };
    let go = |text: &str, files: bool| {
        let mut launch = launch(if files {
            vec![worker("w", &["file.decode"])]
        } else {
            Vec::new()
        });
        if files {
            launch.files = vec![file(text)];
        }
        launch
    };
    let exec = FakeExecutor::new().run_dir(run.path());
    for (text, replaced) in [("a: 1\n", false), ("a: 2\n", true)] {
        let launch = go(text, true);
        let graph = graph::lower(&launch, &exec.execution()).unwrap();
        let state = d.store.load().unwrap().unwrap();
        let plan = plan::diff(
            &graph,
            &state,
            &BTreeMap::new(),
            "h",
            &PlanOptions::default(),
        );
        let worker = plan.changes.iter().find(|c| c.address == "w").unwrap();
        assert_eq!(worker.action == Action::Replace, replaced, "{plan:?}");
        let ran = run_plan(&d, &launch, &graph, &plan, &exec, 4, Cancel::default()).await;
        assert!(ran.outcome.failed.is_empty(), "{:?}", ran.outcome.failed);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), text);
        assert_eq!(ran.state.resources["file.decode"].kind, graph::Kind::File);
    }
    // Destroyed with its reader: the file is gone.
    let ran = apply_launch(&d, &go("", false), &exec, 4, Cancel::default()).await;
    assert!(ran.outcome.failed.is_empty(), "{:?}", ran.outcome.failed);
    assert!(!path.exists());
    assert!(ran.state.resources.is_empty(), "{:?}", ran.state.resources);
}

/// The pipeline of a disaggregated deployment: a leader and its follower, another
/// worker, a Router watching the workers, nginx watching the Router.
fn pipeline() -> Vec<LaunchProcess> {
    vec![
        worker("w.leader", &[]),
        worker("w.follower", &["w.leader"]),
        worker("w.other", &[]),
        process(
            "router",
            ProcessKind::Component(&crate::frontend::ROUTER),
            &[],
            &["w.leader", "w.follower", "w.other"],
        ),
        process(
            "nginx",
            ProcessKind::Component(&crate::frontend::nginx::NGINX),
            &[],
            &["router"],
        ),
    ]
}

#[tokio::test]
async fn create_order_follows_dependencies_but_not_watched_edges() {
    let d = deployment();
    let exec = FakeExecutor::new().confirm_delay(&["w.leader"], SLOW);
    let ran = apply(&d, pipeline(), &exec, 8, Cancel::default()).await;
    assert!(ran.outcome.failed.is_empty(), "{:?}", ran.outcome.failed);
    // Five processes, each with its port block: apply counts every resource it creates,
    // as the plan does.
    assert_eq!(ran.outcome.created, 10);
    let calls = exec.calls();
    // A port block is checked before its process starts.
    for p in pipeline() {
        assert!(ports_checked(&calls, &p.address) < started(&calls, &p.address));
    }
    // The follower waits for its leader to be confirmed running...
    assert!(confirmed(&calls, "w.leader") < started(&calls, "w.follower"));
    // ...but the Router and nginx start alongside what they watch.
    assert!(started(&calls, "router") < confirmed(&calls, "w.leader"));
    assert!(started(&calls, "nginx") < confirmed(&calls, "w.leader"));
    for p in pipeline() {
        let r = &ran.state.resources[&p.address];
        assert_eq!(r.status, Status::Running, "{}", p.address);
        assert!(r.runtime.is_some(), "{}", p.address);
    }
}

#[tokio::test]
async fn at_most_parallelism_resources_are_in_flight() {
    let names: Vec<String> = (0..9).map(|i| format!("w{i}")).collect();
    let processes: Vec<LaunchProcess> = names.iter().map(|n| worker(n, &[])).collect();
    let addresses: Vec<&str> = names.iter().map(String::as_str).collect();
    for parallelism in [1, 3] {
        let d = deployment();
        let exec = FakeExecutor::new().confirm_delay(&addresses, Duration::from_millis(15));
        let ran = apply(&d, processes.clone(), &exec, parallelism, Cancel::default()).await;
        assert!(ran.outcome.failed.is_empty(), "{:?}", ran.outcome.failed);
        // Nine processes and their port blocks.
        assert_eq!(ran.outcome.created, 18);
        assert_eq!(
            exec.max_in_flight(),
            parallelism,
            "parallelism {parallelism}: {:#?}",
            exec.calls()
        );
    }
}

#[tokio::test]
async fn a_failed_start_skips_only_its_descendants() {
    let d = deployment();
    let processes = vec![
        worker("a", &[]),
        worker("a.child", &["a"]),
        worker("a.grandchild", &["a.child"]),
        worker("b", &[]),
        worker("b.child", &["b"]),
        process(
            "router",
            ProcessKind::Component(&crate::frontend::ROUTER),
            &[],
            &["a", "b"],
        ),
    ];
    let exec = FakeExecutor::new().with(
        "a",
        Behaviour {
            start_fails: Some("cannot start a".into()),
            log: Some(
                "--- srt: starting a ---\nan earlier run\n--- srt: starting a ---\nbad flag --x\n"
                    .into(),
            ),
            ..Default::default()
        },
    );
    let ran = apply(&d, processes, &exec, 4, Cancel::default()).await;
    // The failure carries the failed process's own log, from its latest start only.
    assert_eq!(
        ran.outcome.failed,
        [Failure {
            address: "a".into(),
            error: "cannot start a".into(),
            log: Some(LogTail {
                of: "a".into(),
                lines: vec!["--- srt: starting a ---".into(), "bad flag --x".into()],
            }),
            help: None,
        }]
    );
    let mut skipped = ran.outcome.skipped.clone();
    skipped.sort();
    assert_eq!(skipped, ["a.child", "a.grandchild"]);
    // The independent branch finished, and the Router (which only watches `a`) started.
    // Those three, and all six port blocks (a port block depends on nothing).
    assert_eq!(ran.outcome.created, 9);
    for a in ["b", "b.child", "router"] {
        assert_eq!(ran.state.resources[a].status, Status::Running, "{a}");
    }
    let failed = &ran.state.resources["a"];
    assert_eq!(failed.status, Status::Failed);
    assert_eq!(failed.error.as_deref(), Some("cannot start a"));
    assert!(failed.runtime.is_none());
    assert!(!ran.state.resources.contains_key("a.child"));
    assert!(ran.events.iter().any(|e| matches!(e,
        Event::Skipped { address, because } if address == "a.grandchild" && because == "`a.child` did not complete")));
    // What apply saved is what it holds.
    assert_eq!(
        d.store.load().unwrap().unwrap().resources,
        d.as_loaded(&ran.state)
    );
}

#[tokio::test]
async fn a_failed_confirm_skips_its_descendants_and_keeps_the_runtime() {
    let d = deployment();
    let processes = vec![
        worker("a", &[]),
        worker("a.child", &["a"]),
        worker("b", &[]),
    ];
    let exec = FakeExecutor::new().with(
        "a",
        Behaviour {
            confirm_fails: Some("step did not start".into()),
            ..Default::default()
        },
    );
    let ran = apply(&d, processes, &exec, 4, Cancel::default()).await;
    assert_eq!(ran.outcome.skipped, ["a.child"]);
    let a = &ran.state.resources["a"];
    assert_eq!(a.status, Status::Failed);
    // Kept, so the next apply stops whatever may still run.
    assert!(a.runtime.is_some());
    assert_eq!(ran.state.resources["b"].status, Status::Running);
}

#[tokio::test]
async fn state_records_pending_before_the_start_and_running_after() {
    let d = deployment();
    let store = d.store.clone();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let log = seen.clone();
    let exec = FakeExecutor::new().on_start(move |address| {
        // What is on disk at the moment the executor starts the process.
        let on_disk = store.load().unwrap().unwrap();
        let r = &on_disk.resources[address];
        log.lock()
            .unwrap()
            .push((address.to_string(), r.status, r.runtime.is_some()));
    });
    let ran = apply(
        &d,
        vec![worker("a", &[]), worker("b", &["a"])],
        &exec,
        2,
        Cancel::default(),
    )
    .await;
    assert!(ran.outcome.failed.is_empty());
    assert_eq!(
        *seen.lock().unwrap(),
        [
            ("a".to_string(), Status::Pending, false),
            ("b".to_string(), Status::Pending, false)
        ]
    );
    let saved = d.store.load().unwrap().unwrap();
    for a in ["a", "b"] {
        let r = &saved.resources[a];
        assert_eq!(r.status, Status::Running, "{a}");
        assert!(r.runtime.is_some() && r.log_path.is_some(), "{a}");
    }
    // The port blocks' checks are recorded too.
    assert_eq!(saved.resources["ports.a"].status, Status::Running);
}

/// Each process's record keeps the probe it was applied with, which status and refresh
/// run again: a worker's own (one its frontend lists), a Router's `GET /health` on its
/// public port; a process that serves nothing itself and a port block keep none.
#[tokio::test]
async fn each_process_records_the_probe_it_was_applied_with() {
    let d = deployment();
    let exec = FakeExecutor::new();
    let listed = crate::launch::Probe::JsonItems {
        urls: vec!["http://<node0-ip>:8000".into()],
        path: "/health".into(),
        lists: Vec::new(),
    };
    let mut registered = agg_workers(2);
    registered[0].worker.as_mut().unwrap().health = Some(listed.clone());
    let router = LaunchProcess {
        ports: BTreeMap::from([(
            crate::ports::PUBLIC.to_string(),
            crate::ports::PortBlock {
                base: 8000,
                count: 1,
            },
        )]),
        ..process(
            "router[0]",
            ProcessKind::Component(&crate::frontend::ROUTER),
            &[],
            &[],
        )
    };
    registered.push(router);
    let ran = apply(&d, registered, &exec, 4, Cancel::default()).await;
    assert!(ran.outcome.failed.is_empty(), "{:?}", ran.outcome.failed);
    let saved = d.store.load().unwrap().unwrap();
    let health = |a: &str| saved.resources[a].health.clone();
    assert_eq!(health("w0"), Some(listed));
    assert_eq!(
        health("router[0]"),
        Some(crate::launch::Probe::Http {
            urls: vec!["http://<node0-ip>:8000".into()],
            path: "/health".into(),
        })
    );
    assert_eq!(health("w1"), None, "w1 serves nothing itself");
    assert_eq!(health("ports.router[0]"), None);
}

#[tokio::test]
async fn cancellation_starts_nothing_new_and_records_what_ran() {
    let d = deployment();
    let cancel = Cancel::default();
    let trigger = cancel.clone();
    let exec = FakeExecutor::new().on_start(move |address| {
        if address == "b" {
            trigger.trigger();
        }
    });
    let processes = vec![
        worker("a", &[]),
        worker("b", &["a"]),
        worker("c", &["b"]),
        worker("d", &["c"]),
    ];
    let ran = apply(&d, processes, &exec, 1, cancel).await;
    assert!(ran.outcome.interrupted);
    // `b` was being started when the interrupt came: it finishes; nothing after it runs.
    // Two processes; port blocks are checked ahead of their processes.
    assert_eq!(ran.outcome.created, 6);
    // `c` and `d` are skipped (their port blocks too, unless already checked).
    let skipped = &ran.outcome.skipped;
    assert!(skipped.iter().any(|a| a == "c") && skipped.iter().any(|a| a == "d"));
    assert!(
        skipped
            .iter()
            .all(|a| ["c", "d", "ports.c", "ports.d"].contains(&a.as_str())),
        "{skipped:?}"
    );
    assert!(ran.events.iter().any(|e| matches!(e,
        Event::Skipped { address, because } if address == "c" && because == "apply was interrupted")));
    assert!(!exec
        .calls()
        .iter()
        .any(|c| matches!(c, Call::Start(a, _) if a == "c" || a == "d")));
    let saved = d.store.load().unwrap().unwrap();
    assert_eq!(saved.resources["a"].status, Status::Running);
    assert_eq!(saved.resources["b"].status, Status::Running);
    assert!(!saved.resources.contains_key("c"));
}

/// State as if `processes` had been applied, their runtimes handed out by `exec`.
fn recorded(d: &Deployment, processes: &[LaunchProcess], exec: &FakeExecutor) {
    let launch = launch(processes.to_vec());
    let graph = graph::lower(&launch, &exec.execution()).unwrap();
    let mut state = d.store.load().unwrap().unwrap();
    for r in &graph.resources {
        state.resources.insert(
            r.address.clone(),
            ResourceState {
                runtime: r.kind.is_process().then(|| exec.runtime(&r.address)),
                ..ResourceState::of(r, Status::Running)
            },
        );
    }
    d.store.save(&d.lock, &mut state).unwrap();
}

/// The order processes were stopped in (by address), with the calls.
fn stops(exec: &FakeExecutor) -> (Vec<String>, Vec<Call>) {
    let calls = exec.calls();
    let order = calls
        .iter()
        .filter_map(|c| match c {
            Call::StopBegin(pid) => exec.address_of(*pid),
            _ => None,
        })
        .collect();
    (order, calls)
}

fn stop_began(exec: &FakeExecutor, calls: &[Call], address: &str) -> usize {
    at(
        calls,
        &format!("stop of {address}"),
        |c| matches!(c, Call::StopBegin(pid) if exec.address_of(*pid).as_deref() == Some(address)),
    )
}

fn stop_ended(exec: &FakeExecutor, calls: &[Call], address: &str) -> usize {
    at(
        calls,
        &format!("end of the stop of {address}"),
        |c| matches!(c, Call::StopEnd(pid) if exec.address_of(*pid).as_deref() == Some(address)),
    )
}

#[tokio::test]
async fn destroy_stops_dependents_before_dependencies_in_parallel() {
    let d = deployment();
    let exec = FakeExecutor::new().stop_delay(Duration::from_millis(20));
    recorded(&d, &pipeline(), &exec);
    let (empty, graph) = crate::workflow::empty("t");
    let state = d.store.load().unwrap().unwrap();
    let plan = plan::diff(
        &graph,
        &state,
        &BTreeMap::new(),
        "",
        &PlanOptions {
            destroy: true,
            ..Default::default()
        },
    );
    let ran = run_plan(&d, &empty, &graph, &plan, &exec, 4, Cancel::default()).await;
    assert!(ran.outcome.failed.is_empty(), "{:?}", ran.outcome.failed);
    assert_eq!(
        ran.outcome.destroyed, 10,
        "5 processes and their port blocks"
    );
    assert!(ran.state.resources.is_empty());
    assert!(d.store.load().unwrap().unwrap().resources.is_empty());
    let (order, calls) = stops(&exec);
    assert_eq!(order.len(), 5, "{calls:#?}");
    // Whatever depends on a process (recorded dependencies, watched ones included) is
    // gone before it is stopped: nginx, then the Router, then the workers.
    for (dependent, dependency) in [
        ("nginx", "router"),
        ("router", "w.leader"),
        ("router", "w.other"),
        ("w.follower", "w.leader"),
    ] {
        assert!(
            stop_ended(&exec, &calls, dependent) < stop_began(&exec, &calls, dependency),
            "{dependent} before {dependency}: {order:?}"
        );
    }
    // Independent stops overlap: the follower and the other worker together.
    assert!(exec.max_stopping() >= 2, "{calls:#?}");
    assert!(exec.max_stopping() <= 4);
}

#[tokio::test]
async fn stops_are_bounded_by_parallelism() {
    let d = deployment();
    let processes: Vec<LaunchProcess> = (0..6).map(|i| worker(&format!("w{i}"), &[])).collect();
    let exec = FakeExecutor::new().stop_delay(Duration::from_millis(10));
    recorded(&d, &processes, &exec);
    let (empty, graph) = crate::workflow::empty("t");
    let state = d.store.load().unwrap().unwrap();
    let plan = plan::diff(
        &graph,
        &state,
        &BTreeMap::new(),
        "",
        &PlanOptions {
            destroy: true,
            ..Default::default()
        },
    );
    let ran = run_plan(&d, &empty, &graph, &plan, &exec, 2, Cancel::default()).await;
    assert_eq!(ran.outcome.destroyed, 12);
    assert_eq!(exec.max_stopping(), 2);
}

#[tokio::test]
async fn untracked_processes_are_stopped_first_then_replacements_stop_and_start() {
    let d = deployment();
    let exec = FakeExecutor::new().stop_delay(Duration::from_millis(5));
    let before = vec![worker("a", &[]), worker("b", &[])];
    recorded(&d, &before, &exec);
    // `a` changes (replaced), `b` stays; a leftover process of `c` runs untracked.
    let mut after = before.clone();
    after[0].argv.push("--changed");
    let launch = launch(after);
    let graph = graph::lower(&launch, &exec.execution()).unwrap();
    let state = d.store.load().unwrap().unwrap();
    let mut plan = plan::diff(
        &graph,
        &state,
        &BTreeMap::new(),
        "h",
        &PlanOptions::default(),
    );
    assert_eq!(plan.change("a").unwrap().action, Action::Replace);
    assert_eq!(
        plan.change("b").map_or(Action::NoOp, |c| c.action),
        Action::NoOp
    );
    let orphan = exec.runtime("c");
    plan.orphans.push(Orphan {
        address: "c".into(),
        pids: vec![1],
        runtime: orphan.clone(),
    });
    let old_a = state.resources["a"].runtime.clone().unwrap();
    let ran = run_plan(&d, &launch, &graph, &plan, &exec, 4, Cancel::default()).await;
    assert!(ran.outcome.failed.is_empty(), "{:?}", ran.outcome.failed);
    assert_eq!((ran.outcome.untracked, ran.outcome.replaced), (1, 1));
    let (order, calls) = stops(&exec);
    assert_eq!(order, ["c", "a"], "{calls:#?}");
    // The untracked process is gone before anything else is stopped, and the old `a`
    // before the new one starts (it reuses its ports).
    assert!(stop_ended(&exec, &calls, "c") < stop_began(&exec, &calls, "a"));
    assert!(stop_ended(&exec, &calls, "a") < started(&calls, "a"));
    assert!(!calls
        .iter()
        .any(|c| matches!(c, Call::Start(x, _) if x == "b")));
    let new_a = ran.state.resources["a"].runtime.clone().unwrap();
    assert_ne!(new_a, old_a);
    assert_eq!(ran.state.resources["a"].status, Status::Running);
}

/// `n` workers of role `agg`, one endpoint each.
fn agg_workers(n: u32) -> Vec<LaunchProcess> {
    (0..n)
        .map(|e| LaunchProcess {
            worker: Some(crate::launch::WorkerInfo {
                role: crate::recipe::RoleKind::Agg,
                endpoint: e,
                node_rank: 0,
                advertised_url: None,
                local_dp: 1,
                bootstrap_port: None,
                kv_connector: None,
                health: None,
                simulated: None,
                headless: false,
            }),
            ..worker(&format!("w{e}"), &[])
        })
        .collect()
}

/// Record `before` as applied, then roll to `before` with a changed command line
/// (`rollout` as given), refresh having found `down` exited.
async fn roll(
    d: &Deployment,
    before: &[LaunchProcess],
    exec: &FakeExecutor,
    down: &[&str],
    rollout: crate::launch::RolloutPlan,
) -> Ran {
    recorded(d, before, exec);
    let mut after = before.to_vec();
    for p in &mut after {
        p.argv.push("--v2");
    }
    let mut launch = launch(after);
    launch.rollout = rollout;
    let graph = graph::lower(&launch, &exec.execution()).unwrap();
    let state = d.store.load().unwrap().unwrap();
    let observed: BTreeMap<String, plan::Observation> = down
        .iter()
        .map(|a| {
            (
                a.to_string(),
                plan::Observation::Gone("process exited".into()),
            )
        })
        .collect();
    let plan = plan::diff(&graph, &state, &observed, "h", &PlanOptions::default());
    for p in &launch.processes {
        assert_eq!(plan.change(&p.address).unwrap().action, Action::Replace);
    }
    run_plan(d, &launch, &graph, &plan, exec, 8, Cancel::default()).await
}

fn rollout(max_unavailable: u32, min_ready_seconds: u64) -> crate::launch::RolloutPlan {
    crate::launch::RolloutPlan {
        max_unavailable: crate::recipe::Amount::Count(max_unavailable),
        drain_seconds: 0,
        min_ready_seconds,
    }
}

fn failed_addresses(ran: &Ran) -> Vec<&str> {
    ran.outcome
        .failed
        .iter()
        .map(|f| f.address.as_str())
        .collect()
}

/// Issue 26, item 4: two of three workers exited and the new version fails at start.
/// The two down endpoints are replaced first (they cost no availability) and fail; the
/// live one is never stopped, and serves on.
#[tokio::test]
async fn a_failing_change_never_stops_the_last_live_endpoint() {
    let d = deployment();
    let mut exec = FakeExecutor::new();
    for a in ["w0", "w1", "w2"] {
        exec = exec.with(
            a,
            Behaviour {
                start_fails: Some("v2 does not start".into()),
                ..Default::default()
            },
        );
    }
    let before = agg_workers(3);
    let ran = roll(&d, &before, &exec, &["w1", "w2"], rollout(1, 0)).await;
    let (stopped, calls) = stops(&exec);
    assert!(!stopped.iter().any(|a| a == "w0"), "{calls:#?}");
    assert!(
        !calls
            .iter()
            .any(|c| matches!(c, Call::Start(a, _) if a == "w0")),
        "{calls:#?}"
    );
    let mut failed = failed_addresses(&ran);
    failed.sort_unstable();
    assert_eq!(failed, ["w1", "w2"]);
    assert!(ran.outcome.skipped.iter().any(|a| a == "w0"));
    assert!(ran.events.iter().any(|e| matches!(e,
        Event::Skipped { address, because } if address == "w0" && because.contains("keeps serving"))));
    let w0 = &ran.state.resources["w0"];
    assert_eq!(w0.status, Status::Running);
    assert!(w0.runtime.is_some());
}

/// Down endpoints go first, all at once; then the live ones, one at a time (the
/// default `max_unavailable: 1`), each once the one before it rolled.
#[tokio::test]
async fn down_endpoints_are_replaced_before_live_ones() {
    let d = deployment();
    let exec = FakeExecutor::new().confirm_delay(&["w0", "w1", "w2", "w3"], SLOW);
    let before = agg_workers(4);
    let ran = roll(&d, &before, &exec, &["w1", "w3"], rollout(1, 0)).await;
    assert!(ran.outcome.failed.is_empty(), "{:?}", ran.outcome.failed);
    assert_eq!(ran.outcome.replaced, 4);
    let calls = exec.calls();
    for down in ["w1", "w3"] {
        for live in ["w0", "w2"] {
            assert!(
                confirmed(&calls, down) < stop_began(&exec, &calls, live),
                "{down} before {live}: {calls:#?}"
            );
        }
    }
    // The down ones together; the live ones one after the other.
    assert!(
        started(&calls, "w3") < confirmed(&calls, "w1"),
        "{calls:#?}"
    );
    let (first, second) = if started(&calls, "w0") < started(&calls, "w2") {
        ("w0", "w2")
    } else {
        ("w2", "w0")
    };
    assert!(
        confirmed(&calls, first) < stop_began(&exec, &calls, second),
        "{calls:#?}"
    );
}

/// Issue 26, item 5: a version that dies 100 ms after it became healthy. The first
/// unit is held for `min_ready_seconds`, dies meanwhile, and the roll halts: it is
/// recorded as failed, the other endpoints were never taken out.
#[tokio::test]
async fn a_version_that_dies_after_it_became_healthy_halts_after_one_unit() {
    let d = deployment();
    let mut exec = FakeExecutor::new();
    for a in ["w0", "w1", "w2"] {
        exec = exec.with(
            a,
            Behaviour {
                dies_after: Some(Duration::from_millis(100)),
                log: Some(format!("--- srt: starting {a} ---\nEngineDeadError\n")),
                ..Default::default()
            },
        );
    }
    let before = agg_workers(3);
    let ran = roll(&d, &before, &exec, &[], rollout(1, 1)).await;
    let failed = failed_addresses(&ran);
    assert_eq!(failed.len(), 1, "{:?}", ran.outcome.failed);
    let dead = failed[0];
    let failure = &ran.outcome.failed[0];
    assert!(
        failure.error.contains("rolled, then went down")
            && failure.error.contains("min_ready_seconds")
            && failure.error.contains(&format!("srt logs t {dead}")),
        "{}",
        failure.error
    );
    assert_eq!(failure.log.as_ref().unwrap().of, dead);
    let (stopped, calls) = stops(&exec);
    assert_eq!(stopped, [dead], "{calls:#?}");
    let record = &ran.state.resources[dead];
    assert_eq!(record.status, Status::Failed);
    assert!(record.error.as_ref().unwrap().contains("went down"));
    for other in ["w0", "w1", "w2"].into_iter().filter(|a| *a != dead) {
        assert!(ran.outcome.skipped.iter().any(|a| a == other), "{other}");
        assert_eq!(ran.state.resources[other].status, Status::Running);
    }
    // What apply saved is what it holds, so the next plan replaces the failed one.
    assert_eq!(
        d.store.load().unwrap().unwrap().resources,
        d.as_loaded(&ran.state)
    );
}

/// A rolled unit that went down after its hold is found before the next unit is taken
/// out: with two out at a time, `w0` (held 0 s) dies while `w2` rolls, and `w3` is
/// never stopped.
#[tokio::test]
async fn rolled_units_are_checked_again_before_the_next_is_taken_out() {
    let d = deployment();
    let exec = FakeExecutor::new()
        .with(
            "w0",
            Behaviour {
                dies_after: Some(Duration::from_millis(150)),
                ..Default::default()
            },
        )
        .confirm_delay(&["w1", "w2"], Duration::from_millis(400));
    let before = agg_workers(4);
    let ran = roll(&d, &before, &exec, &[], rollout(2, 0)).await;
    let (stopped, calls) = stops(&exec);
    assert!(started(&calls, "w0") < started(&calls, "w1"), "{calls:#?}");
    assert!(!stopped.iter().any(|a| a == "w3"), "{calls:#?}");
    let failure = ran
        .outcome
        .failed
        .iter()
        .find(|f| f.error.contains("was not taken out"))
        .unwrap_or_else(|| panic!("{:?}", ran.outcome.failed));
    assert!(
        failure.error.contains("`w0` rolled, then went down"),
        "{}",
        failure.error
    );
    assert_eq!(ran.state.resources["w0"].status, Status::Failed);
    assert_eq!(ran.state.resources["w3"].status, Status::Running);
}

/// A sweep's point (`Apply::at_once`): every replaced endpoint is stopped before any
/// starts again, where a roll (the same plan without it, `max_unavailable: 1`) takes
/// them out one after the other, each started again before the next stops.
#[tokio::test]
async fn at_once_stops_every_replaced_endpoint_before_starting_any() {
    for at_once in [true, false] {
        let d = deployment();
        let exec = FakeExecutor::new().confirm_delay(&["w0", "w1", "w2"], SLOW);
        let before = agg_workers(3);
        recorded(&d, &before, &exec);
        let mut after = before.clone();
        for p in &mut after {
            p.argv.push("--v2");
        }
        let mut launch = launch(after);
        launch.rollout = rollout(1, 0);
        let graph = graph::lower(&launch, &exec.execution()).unwrap();
        let state = d.store.load().unwrap().unwrap();
        let plan = plan::diff(
            &graph,
            &state,
            &BTreeMap::new(),
            "h",
            &PlanOptions::default(),
        );
        let sink = |_: Event| {};
        let apply = Apply {
            launch: &launch,
            graph: &graph,
            plan: &plan,
            exec: &exec,
            store: &d.store,
            lock: &d.lock,
            parallelism: 8,
            at_once,
            health: HealthCheck {
                timeout_secs: 1,
                interval_secs: 1,
                unhealthy_grace_secs: 1,
            },
            cancel: Cancel::default(),
            events: &sink,
        };
        let outcome = apply.run(&super::shared(state)).await;
        assert!(outcome.failed.is_empty(), "{:?}", outcome.failed);
        assert_eq!(outcome.replaced, 3);
        let calls = exec.calls();
        let last_stop = ["w0", "w1", "w2"]
            .iter()
            .map(|a| stop_ended(&exec, &calls, a))
            .max()
            .unwrap();
        let first_start = ["w0", "w1", "w2"]
            .iter()
            .map(|a| started(&calls, a))
            .min()
            .unwrap();
        assert_eq!(
            last_stop < first_start,
            at_once,
            "at_once {at_once}: {calls:#?}"
        );
    }
}

/// A `custom` benchmark whose command was over before its scheduler listed it is
/// judged by the status it wrote, even one a shared filesystem shows a moment late,
/// and a status an earlier run left never stands for a run that wrote none.
#[tokio::test]
async fn a_command_over_before_it_was_seen_is_judged_by_the_status_it_wrote() {
    use crate::launch::{CommandRun, Gate, Probe, RUN_DIR};
    for (writes, late, outcome) in [
        (Some("0"), false, None),
        (Some("0"), true, None),
        (Some("3"), false, Some("the command exited 3")),
        (None, false, Some("without writing its exit status")),
    ] {
        let d = deployment();
        let run = tempfile::tempdir().unwrap();
        let status = run.path().join("benchmark.status");
        std::fs::write(&status, "0\n").unwrap();
        let exec = FakeExecutor::new()
            .run_dir(run.path())
            .with(
                "benchmark.command",
                Behaviour {
                    ended_before_seen: true,
                    ..Default::default()
                },
            )
            .on_start(move |address| {
                if let (Some(code), "benchmark.command") = (writes, address) {
                    let status = status.clone();
                    let write = move || std::fs::write(&status, format!("{code}\n")).unwrap();
                    match late {
                        false => write(),
                        true => {
                            std::thread::spawn(move || {
                                std::thread::sleep(Duration::from_millis(600));
                                write();
                            });
                        }
                    }
                }
            });
        let mut launch = launch(Vec::new());
        launch.gates = vec![Gate {
            address: "benchmark".into(),
            description: "a command exits 0".into(),
            probe: Probe::Command(CommandRun {
                node: 0,
                argv: vec!["true".into()],
                env: BTreeMap::new(),
                image: None,
                status: format!("{RUN_DIR}/benchmark.status"),
            }),
            depends_on: Vec::new(),
        }];
        let ran = apply_launch(&d, &launch, &exec, 4, Cancel::default()).await;
        let failed: Vec<&str> = ran
            .outcome
            .failed
            .iter()
            .map(|f| f.error.as_str())
            .collect();
        match outcome {
            None => assert_eq!((failed.len(), ran.outcome.checked), (0, 1), "{failed:?}"),
            Some(text) => assert!(
                failed.len() == 1 && failed[0].contains(text),
                "{writes:?}: {failed:?}"
            ),
        }
    }
}
