//! Apply: execute a plan against the world, saving state before and after every launch.
//!
//! Phase 1 stops what is destroyed or replaced, dependents first and independent ones in
//! parallel (destroy-before-create: a replaced process reuses its ports). Phase 2 walks the graph in topological order,
//! running independent resources in parallel (bounded by `parallelism`); a resource
//! waits for its dependencies except the ones it watches (a Router starts alongside its
//! workers, see `graph::Resource::watches`): port blocks
//! are checked free, processes started detached, gates polled. A failure skips only its
//! descendants; independent branches finish. Every launch is recorded as `pending`
//! before it starts and `running` (with its runtime identity) right after, under the
//! state mutex, so an interrupted apply never loses a process. Processes ready together
//! share those two saves; check results (port blocks, gates) are saved with the next
//! launch and at the end.

mod gate;
mod members;
mod record;
mod rollout;
#[cfg(test)]
mod tests;

use crate::exec::Executor;
use crate::graph::{Kind, ResourceGraph, Target};
use crate::launch::LaunchPlan;
use crate::plan::{Action, Plan};
use crate::recipe::HealthCheck;
use crate::state::{ResourceState, State, StateError, StateLock, StateStore, Status};
use futures::stream::{FuturesUnordered, StreamExt};
use futures::FutureExt;
use record::{Recorder, Stopped, Unrecorded};
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// Cancellation shared with the signal handler.
#[derive(Clone, Default, Debug)]
pub struct Cancel {
    flag: Arc<AtomicBool>,
    notify: Arc<tokio::sync::Notify>,
}

impl Cancel {
    /// Request cancellation: start nothing new, stop waiting in gates.
    pub fn trigger(&self) {
        self.flag.store(true, Ordering::SeqCst);
        self.notify.notify_waiters();
    }

    /// Whether cancellation was requested.
    pub fn is_cancelled(&self) -> bool {
        self.flag.load(Ordering::SeqCst)
    }

    /// Resolves once cancelled.
    pub async fn cancelled(&self) {
        loop {
            let notified = self.notify.notified();
            if self.is_cancelled() {
                return;
            }
            notified.await;
        }
    }
}

/// Progress events, for the CLI to print.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Event {
    /// Work on a resource started.
    Started {
        /// Address.
        address: String,
        /// What is done.
        action: &'static str,
    },
    /// A resource finished.
    Done {
        /// Address.
        address: String,
        /// What was done.
        action: &'static str,
        /// Detail (pid, duration).
        detail: String,
    },
    /// A gate is still waiting.
    Waiting {
        /// Address.
        address: String,
        /// For what.
        detail: String,
    },
    /// A resource failed.
    Failed(Failure),
    /// A resource was skipped because a dependency failed or apply was interrupted.
    Skipped {
        /// Address.
        address: String,
        /// Why.
        because: String,
    },
}

/// A resource that failed: why, and the output of the process that explains it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failure {
    /// The failed resource.
    pub address: String,
    /// What went wrong (one line or a few).
    pub error: String,
    /// The end of the log of the process whose output explains the failure: the failed
    /// process itself, or the process that died while a gate waited.
    pub log: Option<LogTail>,
    /// What to check or do about it, when srt knows.
    pub help: Option<String>,
}

/// The last lines of a process's log, from its latest start only.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LogTail {
    /// Whose log.
    pub of: String,
    /// Its last lines, oldest first.
    pub lines: Vec<String>,
}

/// Lines of a log shown with a failure.
const FAILURE_LOG_LINES: usize = 20;

/// Why a step failed, inside the walk: the message, and the process whose log explains
/// it when that is not the failed resource itself.
#[derive(Clone, Debug)]
pub(crate) struct StepError {
    message: String,
    culprit: Option<String>,
    /// What to check or do about it.
    help: Option<String>,
    /// Not a failure: the step did not run (a roll stopped by an earlier failure, an
    /// interrupt).
    skipped: bool,
}

impl StepError {
    /// A failure explained by the log of the process at `culprit`.
    pub(crate) fn caused_by(message: String, culprit: String) -> StepError {
        StepError {
            message,
            culprit: Some(culprit),
            help: None,
            skipped: false,
        }
    }

    /// A failure with what to check about it.
    pub(crate) fn with_help(message: String, help: String) -> StepError {
        StepError {
            help: Some(help),
            ..StepError::from(message)
        }
    }

    /// The step did not run, because of `why`.
    pub(crate) fn skip(why: &str) -> StepError {
        StepError {
            message: why.to_string(),
            culprit: None,
            help: None,
            skipped: true,
        }
    }
}

impl From<String> for StepError {
    fn from(message: String) -> StepError {
        StepError {
            message,
            culprit: None,
            help: None,
            skipped: false,
        }
    }
}

impl From<&str> for StepError {
    fn from(message: &str) -> StepError {
        StepError::from(message.to_string())
    }
}

type StepResult = Result<String, StepError>;

/// What apply did.
#[derive(Clone, Debug, Default)]
pub struct Outcome {
    /// Resources created (processes, their port blocks, memberships), counted as the
    /// plan counts them.
    pub created: usize,
    /// Resources replaced.
    pub replaced: usize,
    /// Resources updated in place (memberships, nginx reloads).
    pub updated: usize,
    /// Resources destroyed.
    pub destroyed: usize,
    /// Processes no record tracked (found through their leases), stopped.
    pub untracked: usize,
    /// Gates and checks that passed.
    pub checked: usize,
    /// What failed, in the order it failed.
    pub failed: Vec<Failure>,
    /// Skipped addresses.
    pub skipped: Vec<String>,
    /// Apply was interrupted.
    pub interrupted: bool,
    /// A state write failed because the filesystem holding the state is full: what
    /// those failures name was done (stopped, for a destroy), only not recorded.
    pub no_space: bool,
}

impl Outcome {
    /// Record a failed state write of `addresses`' records.
    fn unrecorded(&mut self, addresses: &[String], error: &StateError) {
        self.no_space |= error.is_no_space();
        for address in addresses {
            self.failed.push(Failure {
                address: address.clone(),
                error: format!("saving state: {error}"),
                log: None,
                help: None,
            });
        }
    }
}

/// Everything apply needs.
pub struct Apply<'a> {
    /// The launch plan whose processes the executor starts: the one the graph was
    /// lowered from, or that plan transformed for the run mode (`--simulate`:
    /// `workflow::simulated`). Records take their specs and hashes from the graph.
    pub launch: &'a LaunchPlan,
    /// The desired graph.
    pub graph: &'a ResourceGraph,
    /// The plan to execute.
    pub plan: &'a Plan,
    /// The executor.
    pub exec: &'a dyn Executor,
    /// Where state is saved.
    pub store: &'a StateStore,
    /// The lock held for this operation.
    pub lock: &'a StateLock,
    /// Max resources worked on at once.
    pub parallelism: usize,
    /// Replace every changed process at once (stopped first, then started together, as
    /// when their allocation is replaced) instead of rolling them while the deployment
    /// serves: a sweep's points, between which it serves no traffic.
    pub at_once: bool,
    /// Readiness budget.
    pub health: HealthCheck,
    /// Cancellation.
    pub cancel: Cancel,
    /// Progress sink.
    pub events: &'a (dyn Fn(Event) + Sync),
}

/// A finished stop: the target's position, when it started, and the result.
type StopResult = (usize, Instant, Result<(), String>);

/// State shared between apply and a signal handler that must save it before exiting.
pub type Shared = Arc<Mutex<State>>;

/// Phase 1's targets in a dependents-first order, and per target: its runtime, its kind,
/// whether it is destroyed (else stopped for a replacement), the targets it depends on.
struct Stops {
    order: Vec<String>,
    runtimes: Vec<Option<crate::state::Runtime>>,
    /// An allocation's deposed runtimes, released with it.
    deposed: Vec<Vec<crate::state::Runtime>>,
    kinds: Vec<Kind>,
    /// A file resource's recorded spec (where it is), for removing it.
    specs: Vec<Option<crate::graph::spec::Spec>>,
    destroyed: Vec<bool>,
    dependencies: Vec<Vec<usize>>,
}

/// The front door first: a Router stops before the workers it routes to (they do not
/// depend on each other, but requests come in through it).
fn front_door_first(
    s: &State,
    position: &HashMap<&str, usize>,
    dependencies: &mut [Vec<usize>],
    waiting: &mut [usize],
) {
    for r in s.resources.values().filter(|r| r.kind == Kind::Membership) {
        let Some(&router) = r
            .spec
            .get_str("router")
            .and_then(|a| position.get(a.as_str()))
        else {
            continue;
        };
        for (_, worker) in crate::plan::members_of(&r.spec) {
            if let Some(&j) = position.get(worker.as_str()) {
                dependencies[router].push(j);
                waiting[j] += 1;
            }
        }
    }
}

/// A running step of the create phase: its resource's position and result.
type Step<'s> = futures::future::LocalBoxFuture<'s, (usize, StepResult)>;

/// The create phase's walk over the graph's ordering edges: what each resource still
/// waits for, what is ready, and why a resource will be skipped.
struct Walk {
    indegree: Vec<usize>,
    children: Vec<Vec<usize>>,
    /// Why a resource is skipped, once one it waits for did not complete.
    blocked: Vec<Option<String>>,
    ready: std::collections::VecDeque<usize>,
}

impl Walk {
    fn new(indegree: Vec<usize>, children: Vec<Vec<usize>>) -> Walk {
        let n = indegree.len();
        Walk {
            ready: (0..n).filter(|&i| indegree[i] == 0).collect(),
            blocked: vec![None; n],
            indegree,
            children,
        }
    }

    /// `i` is settled (done, failed, skipped, nothing to do): what waited only for it
    /// is ready.
    fn release(&mut self, i: usize) {
        for &c in &self.children[i] {
            self.indegree[c] -= 1;
            if self.indegree[c] == 0 {
                self.ready.push_back(c);
            }
        }
    }

    /// What waits for `i` is skipped, for `why` (unless it already has a reason).
    fn block(&mut self, i: usize, why: impl Fn(usize) -> String) {
        for &c in &self.children[i] {
            self.blocked[c].get_or_insert_with(|| why(c));
        }
    }
}

/// Wrap state for [`Apply::run`].
pub fn shared(state: State) -> Shared {
    Arc::new(Mutex::new(state))
}

impl Apply<'_> {
    /// The record of resource `i` with `status`: for a process and its port block,
    /// its node and ports; for a process, the probe that shows it serves.
    fn new_record(&self, i: usize, status: Status) -> ResourceState {
        let r = &self.graph.resources[i];
        let Target::Process(p) = r.target else {
            return ResourceState::of(r, status);
        };
        let process = &self.launch.processes[p];
        ResourceState {
            node: Some(self.launch.nodes[process.node].name.clone()),
            ports: process
                .ports
                .iter()
                .map(|(k, b)| (k.clone(), b.base))
                .collect(),
            health: r
                .kind
                .is_process()
                .then(|| process.health_probe())
                .flatten(),
            ..ResourceState::of(r, status)
        }
    }

    /// The plan's action per address, looked up once (a scan of the plan per resource
    /// would be quadratic).
    fn actions(&self) -> HashMap<&str, Action> {
        let mut map = HashMap::with_capacity(self.plan.changes.len());
        for c in &self.plan.changes {
            // The first change of an address wins, as `Plan::change` finds it.
            map.entry(c.address.as_str()).or_insert(c.action);
        }
        map
    }

    /// Run the plan. `state` is updated and saved as resources complete.
    pub async fn run(&self, state: &Shared) -> Outcome {
        let mut outcome = Outcome::default();
        let rec = Recorder::new(state, self.store, self.lock, self.graph);
        self.stop_phase(&rec, &mut outcome).await;
        if !self.cancel.is_cancelled() {
            self.create_phase(&rec, &mut outcome).await;
            self.release_deposed(&rec, &mut outcome).await;
            // Check results are saved with the next launch; whatever came after the
            // last one is saved here.
            if let Err(e) = rec.save() {
                outcome.unrecorded(&["state".into()], &e);
            }
        }
        outcome.interrupted = self.cancel.is_cancelled();
        outcome
    }

    /// Stop what is destroyed or replaced, in parallel (bounded by `parallelism`): a
    /// resource is stopped once every recorded resource that depends on it and is being
    /// stopped has stopped (a Router before its workers). Stops that finish together are
    /// recorded with one state save; a crash before it leaves them recorded as running,
    /// which the next refresh reports as drift.
    async fn stop_phase(&self, rec: &Recorder<'_>, outcome: &mut Outcome) {
        self.stop_untracked(outcome).await;
        let (stops, mut waiting) = self.plan_stops(rec);
        let mut ready: std::collections::VecDeque<usize> = (0..stops.order.len())
            .filter(|&i| waiting[i] == 0)
            .collect();
        let mut running: FuturesUnordered<futures::future::LocalBoxFuture<'_, StopResult>> =
            FuturesUnordered::new();
        let mut started = vec![false; stops.order.len()];
        let parallelism = self.parallelism.max(1);
        loop {
            while running.len() < parallelism && !self.cancel.is_cancelled() {
                let Some(i) = ready.pop_front() else { break };
                if std::mem::replace(&mut started[i], true) {
                    continue;
                }
                running.push(self.stop_one(rec, &stops, i));
            }
            if running.is_empty() && ready.is_empty() && !self.cancel.is_cancelled() {
                // Nothing left can be released: what remains is in a recorded cycle (a
                // hand-edited state). Stop it anyway, in `destroy_order`'s order.
                if let Some(i) = started.iter().position(|s| !s) {
                    ready.push_back(i);
                    continue;
                }
            }
            let Some(first) = running.next().await else {
                break;
            };
            let mut finished = vec![first];
            while let Some(Some(more)) = running.next().now_or_never() {
                finished.push(more);
            }
            let stopped = self.stops_finished(&stops, finished, &mut waiting, &mut ready, outcome);
            self.record_stops(rec, &stops, &stopped, outcome);
        }
    }

    /// What phase 1 stops: what is destroyed, and what is replaced but does not roll.
    fn stop_targets(&self) -> Vec<&String> {
        // Replaced processes roll in the create phase (unless their allocation goes).
        let rolling = self.rolling();
        let rolls = |a: &str| self.graph.position(a).is_some_and(|i| rolling[i]);
        self.plan
            .changes
            .iter()
            .filter(|c| match c.action {
                Action::Destroy => true,
                // Its replacement comes first; it is released after the walk.
                Action::Replace if c.create_first => false,
                Action::Replace => !rolls(&c.address),
                _ => false,
            })
            .map(|c| &c.address)
            .collect()
    }

    /// The recorded targets in a dependents-first order, and per target how many
    /// targets depend on it and are not stopped yet.
    fn plan_stops(&self, rec: &Recorder<'_>) -> (Stops, Vec<usize>) {
        let targets = self.stop_targets();
        let actions = self.actions();
        rec.read(|s| {
            let recorded: Vec<&String> = targets
                .into_iter()
                .filter(|a| s.resources.contains_key(*a))
                .collect();
            let order = crate::plan::destroy_order(s, &recorded);
            let position: HashMap<&str, usize> = order
                .iter()
                .enumerate()
                .map(|(i, a)| (a.as_str(), i))
                .collect();
            let mut dependencies: Vec<Vec<usize>> = vec![Vec::new(); order.len()];
            let mut waiting = vec![0usize; order.len()];
            for (i, a) in order.iter().enumerate() {
                for d in &s.resources[a].dependencies {
                    if let Some(&j) = position.get(d.as_str()) {
                        dependencies[i].push(j);
                        waiting[j] += 1;
                    }
                }
            }
            front_door_first(s, &position, &mut dependencies, &mut waiting);
            let stops = Stops {
                runtimes: order
                    .iter()
                    .map(|a| s.resources[a].runtime.clone())
                    .collect(),
                deposed: order
                    .iter()
                    .map(|a| s.resources[a].deposed.clone())
                    .collect(),
                kinds: order.iter().map(|a| s.resources[a].kind).collect(),
                specs: order
                    .iter()
                    .map(|a| {
                        let r = &s.resources[a];
                        (r.kind == Kind::File).then(|| r.spec.clone())
                    })
                    .collect(),
                destroyed: order
                    .iter()
                    .map(|a| actions.get(a.as_str()).copied().unwrap_or(Action::Destroy))
                    .map(|a| a == Action::Destroy)
                    .collect(),
                dependencies,
                order,
            };
            (stops, waiting)
        })
    }

    /// Start stopping target `i`: a worker leaves its Routers and finishes its requests
    /// first.
    fn stop_one<'s>(
        &'s self,
        rec: &'s Recorder<'_>,
        stops: &'s Stops,
        i: usize,
    ) -> futures::future::LocalBoxFuture<'s, StopResult> {
        (self.events)(Event::Started {
            address: stops.order[i].clone(),
            action: "stopping",
        });
        let runtime = &stops.runtimes[i];
        let address = &stops.order[i];
        let worker = stops.kinds[i] == Kind::Worker;
        Box::pin(async move {
            let t = Instant::now();
            if worker && runtime.is_some() {
                let withdrawn = match self.withdraw(rec, address).await {
                    Ok(w) => w,
                    Err(e) => return (i, t, Err(e.message)),
                };
                let urls: Vec<String> = withdrawn.iter().map(|w| w.url.clone()).collect();
                self.drain(address, &urls, runtime.as_ref()).await;
            }
            let mut result = match runtime {
                Some(rt) => self.exec.stop(rt).await.map_err(|e| e.to_string()),
                None if stops.destroyed[i] => match &stops.specs[i] {
                    Some(spec) => self.remove_file(spec),
                    None => Ok(()),
                },
                None => Ok(()),
            };
            for rt in &stops.deposed[i] {
                if let Err(e) = self.exec.stop(rt).await {
                    result = result.and(Err(format!("releasing {}: {e}", rt.describe())));
                }
            }
            (i, t, result)
        })
    }

    /// Stops that finished: the failures reported, what each one depended on released.
    /// Those that stopped, and when each started.
    fn stops_finished(
        &self,
        stops: &Stops,
        finished: Vec<StopResult>,
        waiting: &mut [usize],
        ready: &mut std::collections::VecDeque<usize>,
        outcome: &mut Outcome,
    ) -> Vec<(usize, Instant)> {
        let mut stopped = Vec::with_capacity(finished.len());
        for (i, t, result) in finished {
            match result {
                Ok(()) => stopped.push((i, t)),
                Err(e) => self.fail(
                    outcome,
                    Failure {
                        address: stops.order[i].clone(),
                        error: format!("stopping: {e}"),
                        log: None,
                        help: None,
                    },
                ),
            }
            // What it depends on may stop even if it failed to: the dependency does
            // not need it gone, only not to outlive it unnecessarily.
            for &j in &stops.dependencies[i] {
                waiting[j] -= 1;
                if waiting[j] == 0 {
                    ready.push_back(j);
                }
            }
        }
        stopped
    }

    /// Record stops that finished together with one append, then report them.
    fn record_stops(
        &self,
        rec: &Recorder<'_>,
        stops: &Stops,
        stopped: &[(usize, Instant)],
        outcome: &mut Outcome,
    ) {
        if stopped.is_empty() {
            return;
        }
        let recorded: Vec<Stopped<'_>> = stopped
            .iter()
            .map(|&(i, _)| Stopped {
                address: &stops.order[i],
                destroyed: stops.destroyed[i],
                router: matches!(stops.kinds[i], Kind::Component(_)),
            })
            .collect();
        if let Err(e) = &rec.stopped(&recorded) {
            let addresses: Vec<String> = stopped
                .iter()
                .map(|&(i, _)| stops.order[i].clone())
                .collect();
            outcome.unrecorded(&addresses, e);
        }
        for &(i, t) in stopped {
            let destroyed = stops.destroyed[i];
            if destroyed {
                outcome.destroyed += 1;
            }
            (self.events)(Event::Done {
                address: stops.order[i].clone(),
                action: if destroyed { "destroyed" } else { "stopped" },
                detail: format!("{:.1}s", t.elapsed().as_secs_f64()),
            });
        }
    }

    /// Stop the processes no record tracks (the plan's orphans), at most `parallelism`
    /// at once. They have no record, so nothing is saved; a failure is reported and the
    /// next plan finds them again.
    async fn stop_untracked(&self, outcome: &mut Outcome) {
        let mut pending = self.plan.orphans.iter();
        let mut running = FuturesUnordered::new();
        loop {
            while running.len() < self.parallelism.max(1) && !self.cancel.is_cancelled() {
                let Some(o) = pending.next() else { break };
                (self.events)(Event::Started {
                    address: o.address.clone(),
                    action: "stopping untracked process",
                });
                running.push(async move {
                    let result = self.exec.stop(&o.runtime).await;
                    (o, Instant::now(), result.map_err(|e| e.to_string()))
                });
            }
            let Some((o, t, result)) = running.next().await else {
                break;
            };
            match result {
                Ok(()) => {
                    outcome.untracked += 1;
                    (self.events)(Event::Done {
                        address: o.address.clone(),
                        action: "stopped untracked process",
                        detail: format!("{:.1}s", t.elapsed().as_secs_f64()),
                    });
                }
                Err(e) => self.fail(
                    outcome,
                    Failure {
                        address: o.address.clone(),
                        error: format!("stopping an untracked process: {e}"),
                        log: None,
                        help: None,
                    },
                ),
            }
        }
    }

    /// Start what the plan creates, replaces, updates and checks, in the order of the
    /// graph's ordering edges (`start_order`), at most `parallelism` at once: process
    /// launches ready together go as one batch, a replaced unit rolls in its turn, a
    /// failure skips only what waits for it.
    async fn create_phase(&self, rec: &Recorder<'_>, outcome: &mut Outcome) {
        let rolling = self.rolling();
        let actions = self.create_actions(&rolling);
        let rolled: Vec<Action> = actions
            .iter()
            .zip(&rolling)
            .map(|(&a, &rolls)| if rolls { a } else { Action::NoOp })
            .collect();
        let roll = self.plan_roll(&rolled);
        let (indegree, children) = self.start_order(&actions, &roll);
        let mut walk = Walk::new(indegree, children);
        let mut running: FuturesUnordered<Step<'_>> = FuturesUnordered::new();
        // Process launches ready in the same round are started as one batch (one intent
        // save, the launches, one identity save); results of everything else arrive
        // through `running`.
        let mut launches: Vec<(usize, Action)> = Vec::new();
        // Finished checks (port blocks, gates) whose records are not on disk yet.
        let mut unsaved: Vec<usize> = Vec::new();
        let mut done: std::collections::VecDeque<(usize, StepResult)> = Default::default();
        let parallelism = self.parallelism.max(1);
        loop {
            while running.len() + launches.len() < parallelism {
                let Some(i) = walk.ready.pop_front() else {
                    break;
                };
                if let Some(because) = self.skipped_because(&walk, i) {
                    self.skip(i, because, &mut walk, outcome);
                } else if actions[i] == Action::NoOp {
                    walk.release(i);
                } else if let Some(step) = self.start(rec, &roll, i, actions[i]) {
                    running.push(step);
                } else {
                    launches.push((i, actions[i]));
                }
            }
            if !launches.is_empty() {
                self.launch_ready(rec, &launches, &mut unsaved, &mut running, &mut done);
                launches.clear();
            }
            if done.is_empty() {
                let Some(first) = running.next().await else {
                    break;
                };
                done.push_back(first);
                // Take every other result already there, so that what they unblock
                // starts together.
                while let Some(Some(more)) = running.next().now_or_never() {
                    done.push_back(more);
                }
            }
            while let Some((i, result)) = done.pop_front() {
                if !self.graph.resources[i].kind.is_process() {
                    // Its check result is in memory: recorded with the next launch.
                    unsaved.push(i);
                }
                self.finished(i, result, actions[i], &roll, &mut walk, outcome);
            }
        }
    }

    /// The plan's action per graph position (`NoOp` for what it does not change), and
    /// an update of each unchanged membership that lists a worker replaced without
    /// rolling: stopped in phase 1, it left its Routers ([`Apply::withdraw`]), and the
    /// membership puts it back once it is up again (a roll does both itself).
    /// `rolling` is [`Apply::rolling`], which the caller has.
    fn create_actions(&self, rolling: &[bool]) -> Vec<Action> {
        let by_address = self.actions();
        let rejoin: std::collections::HashSet<&str> = self
            .graph
            .resources
            .iter()
            .zip(rolling)
            .filter(|(r, &rolls)| {
                r.kind == Kind::Worker
                    && !rolls
                    && by_address.get(r.address.as_str()) == Some(&Action::Replace)
            })
            .map(|(r, _)| r.address.as_str())
            .collect();
        self.graph
            .resources
            .iter()
            .map(|r| {
                match by_address
                    .get(r.address.as_str())
                    .copied()
                    .unwrap_or(Action::NoOp)
                {
                    Action::NoOp
                        if r.kind == Kind::Membership
                            && !rejoin.is_empty()
                            && crate::plan::members_of(&r.spec)
                                .iter()
                                .any(|(_, w)| rejoin.contains(w.as_str())) =>
                    {
                        Action::Update
                    }
                    a => a,
                }
            })
            .collect()
    }

    /// Why `i` is skipped instead of started: one it waits for did not complete, or
    /// apply was interrupted.
    fn skipped_because(&self, walk: &Walk, i: usize) -> Option<String> {
        walk.blocked[i].clone().or_else(|| {
            self.cancel
                .is_cancelled()
                .then(|| "apply was interrupted".to_string())
        })
    }

    /// Skip `i`, and with it what waits for it.
    fn skip(&self, i: usize, because: String, walk: &mut Walk, outcome: &mut Outcome) {
        let address = self.graph.resources[i].address.clone();
        (self.events)(Event::Skipped {
            address: address.clone(),
            because,
        });
        outcome.skipped.push(address.clone());
        walk.block(i, |_| format!("`{address}` did not complete"));
        walk.release(i);
    }

    /// Start resource `i`: its unit's roll, a membership sync, a reload in place, a
    /// check. `None` for a process launch, which goes with the round's batch.
    fn start<'s>(
        &'s self,
        rec: &'s Recorder<'_>,
        roll: &'s rollout::Roll,
        i: usize,
        action: Action,
    ) -> Option<Step<'s>> {
        let kind = self.graph.resources[i].kind;
        if let Some(&u) = roll.unit_of.get(&i) {
            let leads = roll.leader(i).is_some();
            return Some(Box::pin(async move {
                if leads {
                    (i, self.roll_unit(rec, roll, &roll.units[u]).await)
                } else {
                    // Replaced with its unit's leader, which it waited for.
                    (i, Ok("replaced with its endpoint".to_string()))
                }
            }));
        }
        if kind == Kind::Allocation && action == Action::Update {
            // Its deposed runtimes are released after the walk, once nothing runs there.
            return Some(Box::pin(async move { (i, Ok("kept".to_string())) }));
        }
        if kind == Kind::Membership || action == Action::Update {
            (self.events)(Event::Started {
                address: self.graph.resources[i].address.clone(),
                action: verb_ing(action, kind),
            });
            return Some(Box::pin(async move {
                let result = if kind == Kind::Membership {
                    self.sync_members(rec, i).await
                } else {
                    self.reload_in_place(rec, i).await
                };
                (i, result)
            }));
        }
        if kind.is_process() {
            return None;
        }
        Some(Box::pin(
            async move { (i, self.run_one(rec, i, action).await) },
        ))
    }

    /// Launch the processes ready this round as one batch: each one started is then
    /// confirmed in `running`, a failed start is `done`.
    fn launch_ready<'s>(
        &'s self,
        rec: &'s Recorder<'_>,
        launches: &[(usize, Action)],
        unsaved: &mut Vec<usize>,
        running: &mut FuturesUnordered<Step<'s>>,
        done: &mut std::collections::VecDeque<(usize, StepResult)>,
    ) {
        for (i, started) in self.launch_batch(rec, launches, unsaved) {
            match started {
                Err(e) => done.push_back((i, Err(e.into()))),
                // Identity recorded: wait (without the state mutex) until the
                // executor confirms the process runs, e.g. its SLURM step id.
                Ok(st) => running.push(Box::pin(async move {
                    (i, self.confirm_launch(rec, i, st).await)
                })),
            }
        }
    }

    /// A step finished: counted and reported; a failure (or a skip) blocks what waits
    /// for it; either way, what waited only for it is ready.
    fn finished(
        &self,
        i: usize,
        result: StepResult,
        action: Action,
        roll: &rollout::Roll,
        walk: &mut Walk,
        outcome: &mut Outcome,
    ) {
        let address = self.graph.resources[i].address.clone();
        match result {
            Ok(detail) => self.succeeded(i, action, detail, outcome),
            Err(error) if error.skipped => {
                (self.events)(Event::Skipped {
                    address: address.clone(),
                    because: error.message.clone(),
                });
                outcome.skipped.push(address.clone());
                walk.block(i, |_| format!("`{address}` did not complete"));
            }
            Err(error) => {
                let own = self.graph.resources[i].kind.is_process();
                let culprit = error.culprit.or(own.then(|| address.clone()));
                let failure = Failure {
                    address: address.clone(),
                    error: error.message,
                    log: culprit.and_then(|c| self.log_tail(&c)),
                    help: error.help,
                };
                self.fail(outcome, failure);
                walk.block(i, |c| {
                    roll.kept_serving(c, i)
                        .unwrap_or_else(|| format!("`{address}` failed"))
                });
            }
        }
        walk.release(i);
    }

    /// A step that succeeded: counted as the plan counts it, and reported.
    fn succeeded(&self, i: usize, action: Action, detail: String, outcome: &mut Outcome) {
        match action {
            // Every resource counts, as the plan counts them.
            Action::Create => outcome.created += 1,
            Action::Replace => outcome.replaced += 1,
            Action::Update => outcome.updated += 1,
            Action::Check => outcome.checked += 1,
            _ => {}
        }
        let r = &self.graph.resources[i];
        (self.events)(Event::Done {
            address: r.address.clone(),
            action: verb(action, r.kind),
            detail,
        });
    }

    /// What each resource waits for in the create phase, as in-degrees and children: its
    /// dependencies except those it watches (a Router starts alongside its workers), and
    /// its `after` resources. A replaced process that watches others waits for them
    /// when they are replaced too (a Router restarts once, after its workers rolled). A
    /// unit's members wait for its leader, and the leader for everything they wait for.
    fn start_order(
        &self,
        actions: &[Action],
        roll: &rollout::Roll,
    ) -> (Vec<usize>, Vec<Vec<usize>>) {
        let n = self.graph.resources.len();
        let mut waits: Vec<Vec<usize>> = self
            .graph
            .resources
            .iter()
            .enumerate()
            .map(|(i, r)| {
                let at = |d: &String| {
                    self.graph
                        .position(d)
                        .expect("a dependency is in the graph")
                };
                let mut w: Vec<usize> = r.waits_for().map(at).collect();
                if actions[i] == Action::Replace {
                    w.extend(
                        r.watches()
                            .map(at)
                            .filter(|&d| actions[d] == Action::Replace),
                    );
                }
                w
            })
            .collect();
        for unit in &roll.units {
            let leader = unit.members[0];
            let mut all: Vec<usize> = Vec::new();
            for &m in &unit.members {
                all.extend(
                    waits[m]
                        .iter()
                        .copied()
                        .filter(|d| !unit.members.contains(d)),
                );
            }
            for &m in &unit.members[1..] {
                waits[m] = vec![leader];
            }
            waits[leader] = all;
        }
        // A role's units that are down are replaced before its serving ones.
        for (leader, down) in roll.down_first() {
            waits[leader].extend(down);
        }
        let mut indegree = vec![0usize; n];
        let mut children: Vec<Vec<usize>> = vec![Vec::new(); n];
        for (i, w) in waits.iter_mut().enumerate() {
            w.sort_unstable();
            w.dedup();
            indegree[i] = w.len();
            for &d in w.iter() {
                children[d].push(i);
            }
        }
        (indegree, children)
    }

    /// Start processes together. Their intent (`pending`) records are saved once before
    /// the first starts, and their identities once after the last started, all under
    /// one hold of the state mutex: an interrupt never sees a started process without
    /// its identity, and a crash leaves at worst `pending` records (replaced by the next
    /// plan). A batch is at most `parallelism` launches.
    fn launch_batch(
        &self,
        rec: &Recorder<'_>,
        batch: &[(usize, Action)],
        unsaved: &mut Vec<usize>,
    ) -> Vec<(usize, Result<crate::exec::Started, String>)> {
        // Executor errors are rendered as text from here on: in events, the outcome and
        // the state record.
        let address = |i: usize| self.graph.resources[i].address.as_str();
        for &(i, action) in batch {
            let r = &self.graph.resources[i];
            (self.events)(Event::Started {
                address: r.address.clone(),
                action: verb_ing(action, r.kind),
            });
        }
        let records: Vec<(String, ResourceState)> = batch
            .iter()
            .map(|&(i, _)| (address(i).to_string(), self.new_record(i, Status::Pending)))
            .collect();
        // The intents go with the check results that came before them (a port block's
        // before its process).
        let checks: Vec<&str> = unsaved.iter().map(|&i| address(i)).collect();
        let start = |k: usize| {
            let Target::Process(p) = self.graph.resources[batch[k].0].target else {
                return None;
            };
            let started = self.exec.start(&self.launch.processes[p]);
            Some(started.map_err(|e| e.to_string()))
        };
        let all = |e: String| batch.iter().map(|&(i, _)| (i, Err(e.clone()))).collect();
        match rec.launched(records, &checks, start) {
            Ok(results) => {
                unsaved.clear();
                batch
                    .iter()
                    .zip(results)
                    .map(|(&(i, _), r)| {
                        (i, r.unwrap_or_else(|| Err("unsupported resource".into())))
                    })
                    .collect()
            }
            Err(Unrecorded::Intents(e)) => all(e),
            Err(Unrecorded::Identities(e)) => {
                unsaved.clear();
                all(e)
            }
        }
    }

    /// Wait for the executor to confirm a started process; record the completed runtime
    /// (saved only when it changed, so local launches keep their batched saves) or the
    /// failure (the runtime stays recorded so the next apply stops what may still run).
    async fn confirm_launch(
        &self,
        rec: &Recorder<'_>,
        i: usize,
        started: crate::exec::Started,
    ) -> StepResult {
        let address = &self.graph.resources[i].address;
        let confirmed = self.exec.confirm(&started).await.map_err(|e| e.to_string());
        match confirmed {
            Ok(runtime) => {
                let detail = runtime.describe();
                if runtime != started.runtime {
                    rec.update(address, |r| r.runtime = Some(runtime))?;
                }
                Ok(detail)
            }
            Err(e) => {
                rec.failed(address, &e)?;
                Err(e.into())
            }
        }
    }

    async fn run_one(&self, rec: &Recorder<'_>, i: usize, action: Action) -> StepResult {
        let r = &self.graph.resources[i];
        (self.events)(Event::Started {
            address: r.address.clone(),
            action: verb_ing(action, r.kind),
        });
        let t = Instant::now();
        match (r.kind, r.target) {
            (Kind::Ports, Target::Process(p)) => {
                let process = &self.launch.processes[p];
                let result = self
                    .exec
                    .check_ports(process)
                    .await
                    .map_err(|e| e.to_string());
                let mut record = self.new_record(
                    i,
                    if result.is_ok() {
                        Status::Running
                    } else {
                        Status::Failed
                    },
                );
                record.error = result.as_ref().err().cloned();
                // Saved with its process's launch (or at the end): a lost port check
                // only costs a re-check.
                rec.checked(&r.address, record);
                Ok(result.map(|_| "free".to_string())?)
            }
            (Kind::Allocation, _) => Ok(self.allocate(rec, i).await?),
            (Kind::File, Target::File(f)) => {
                let result = self.write_file(&self.launch.files[f]);
                let mut record = self.new_record(
                    i,
                    if result.is_ok() {
                        Status::Running
                    } else {
                        Status::Failed
                    },
                );
                record.error = result.as_ref().err().cloned();
                // Saved with its first reader's launch (or at the end): a file written
                // but not recorded is written again by the next apply.
                rec.checked(&r.address, record);
                Ok(result?)
            }
            (_, Target::Gate(g)) => {
                let gate = &self.launch.gates[g];
                let result = gate::run(self, rec, gate).await;
                let mut record = self.new_record(
                    i,
                    if result.is_ok() {
                        Status::Running
                    } else {
                        Status::Failed
                    },
                );
                record.error = result.as_ref().err().map(|e| e.message.clone());
                if !(self.cancel.is_cancelled() && result.is_err()) {
                    // Saved with the next launch or at the end: gates are re-checked by
                    // every apply.
                    rec.checked(&r.address, record);
                }
                result.map(|d| format!("{d} in {:.2}s", t.elapsed().as_secs_f64()))
            }
            _ => Err("unsupported resource".into()),
        }
    }

    /// Write `file` where its readers find it (the executor's run directory), atomically.
    fn write_file(&self, file: &crate::launch::LaunchFile) -> Result<String, String> {
        let path = PathBuf::from(self.exec.bindings().resolve(&file.path));
        if let Some(dir) = path.parent() {
            crate::files::private_dir(dir)
                .map_err(|e| format!("creating {}: {e}", dir.display()))?;
        }
        crate::files::write_atomic(&path, file.content.as_bytes())
            .map_err(|e| format!("writing {}: {e}", path.display()))?;
        Ok(path.display().to_string())
    }

    /// Remove a destroyed file resource's file (`spec`, its record's): nothing reads it
    /// any more.
    fn remove_file(&self, spec: &crate::graph::spec::Spec) -> Result<(), String> {
        let Some(path) = spec.get_str("path") else {
            return Ok(());
        };
        let path = PathBuf::from(self.exec.bindings().resolve(&path));
        match std::fs::remove_file(&path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                Err(format!("removing {}: {e}", path.display()))
            }
            _ => Ok(()),
        }
    }

    /// Report a failure and record it in the outcome.
    fn fail(&self, outcome: &mut Outcome, failure: Failure) {
        (self.events)(Event::Failed(failure.clone()));
        outcome.failed.push(failure);
    }

    /// The end of `address`'s log since its latest start, if it has any output.
    fn log_tail(&self, address: &str) -> Option<LogTail> {
        let text = self.exec.log_tail(address, FAILURE_LOG_LINES)?;
        // Only this run's output: the log keeps earlier runs above a start header.
        let latest = match text.rfind("--- srt: starting ") {
            Some(i) => &text[i..],
            None => &text,
        };
        let lines: Vec<String> = latest.lines().map(str::to_string).collect();
        (!lines.iter().all(|l| l.trim().is_empty())).then(|| LogTail {
            of: address.to_string(),
            lines,
        })
    }
}

impl Apply<'_> {
    /// Release what replacements created first deposed: every earlier runtime of an
    /// allocation in which no recorded process runs any more (one whose processes did
    /// not all move, a halted roll, keeps it for the next apply).
    async fn release_deposed(&self, rec: &Recorder<'_>, outcome: &mut Outcome) {
        let free: Vec<(String, crate::state::Runtime)> = rec.read(|s| {
            let busy: std::collections::HashSet<String> = s
                .resources
                .values()
                .filter_map(|r| r.runtime.as_ref()?.inside())
                .collect();
            s.resources
                .iter()
                .flat_map(|(a, r)| r.deposed.iter().map(move |d| (a, d)))
                .filter(|(_, d)| d.allocation_id().is_some_and(|id| !busy.contains(&id)))
                .map(|(a, d)| (a.clone(), d.clone()))
                .collect()
        });
        for (address, runtime) in free {
            (self.events)(Event::Started {
                address: address.clone(),
                action: "releasing its deposed runtime",
            });
            let t = Instant::now();
            match self.exec.stop(&runtime).await {
                Ok(()) => {
                    let saved = rec.update(&address, |r| r.deposed.retain(|d| d != &runtime));
                    if let Err(error) = saved {
                        self.fail(
                            outcome,
                            Failure {
                                address,
                                error,
                                log: None,
                                help: None,
                            },
                        );
                        continue;
                    }
                    (self.events)(Event::Done {
                        address,
                        action: "released",
                        detail: format!(
                            "{}, in {:.1}s",
                            runtime.describe(),
                            t.elapsed().as_secs_f64()
                        ),
                    });
                }
                Err(e) => self.fail(
                    outcome,
                    Failure {
                        address,
                        error: format!("releasing {}: {e}", runtime.describe()),
                        log: None,
                        help: None,
                    },
                ),
            }
        }
    }

    /// Create the executor's allocation. Its identity is recorded as soon as it exists;
    /// on failure or interrupt it is cancelled and recorded as failed without an
    /// identity, so nothing is left half-recorded.
    async fn allocate(&self, rec: &Recorder<'_>, i: usize) -> Result<String, String> {
        let address = &self.graph.resources[i].address;
        let nodes: &[usize] = match self.graph.resources[i].target {
            Target::Allocation(k) => &self.graph.allocations[k],
            _ => &[],
        };
        let prior = rec.read(|s| s.resources.get(address).cloned());
        rec.record(address, |s| {
            let mut record = self.new_record(i, Status::Pending);
            // A live allocation replaced by one created first: its runtime is deposed,
            // released once nothing runs in it any more.
            if let Some(prior) = &prior {
                record.deposed = prior.deposed.clone();
                if prior.status == Status::Running {
                    record.deposed.extend(prior.runtime.clone());
                }
            }
            s.resources.insert(address.clone(), record);
        })?;
        let submitted = |runtime: &crate::state::Runtime| {
            rec.record(address, |s| {
                if let Some(r) = s.resources.get_mut(address) {
                    r.runtime = Some(runtime.clone());
                }
            })
            .map_err(crate::exec::ExecError::Record)
        };
        let result = tokio::select! {
            r = self.exec.allocate(address, nodes, &submitted) => r.map_err(|e| e.to_string()),
            _ = self.cancel.cancelled() => Err("interrupted while waiting for the allocation".to_string()),
        };
        match result {
            Ok(started) => {
                let detail = started.runtime.describe();
                rec.record(address, |s| {
                    if let Some(r) = s.resources.get_mut(address) {
                        r.status = Status::Running;
                        r.runtime = Some(started.runtime.clone());
                        r.log_path = Some(started.log_path.clone());
                    }
                })?;
                Ok(detail)
            }
            Err(e) => {
                let recorded = rec.runtime(address);
                // An interrupted wait leaves a submitted job behind: cancel it now.
                let kept = match &recorded {
                    Some(rt) => self.exec.stop(rt).await.err().map(|_| rt.clone()),
                    None => None,
                };
                // The live allocation it was to replace keeps serving, as recorded.
                let live = prior.filter(|p| p.status == Status::Running && kept.is_none());
                rec.record(address, |s| match live {
                    Some(prior) => {
                        s.resources.insert(address.clone(), prior);
                    }
                    None => {
                        if let Some(r) = s.resources.get_mut(address) {
                            r.status = Status::Failed;
                            r.runtime = kept;
                            r.error = Some(e.clone());
                        }
                    }
                })?;
                Err(e)
            }
        }
    }
}

fn verb(action: Action, kind: Kind) -> &'static str {
    match (action, kind) {
        (Action::Check, _) => "passed",
        (Action::Update, Kind::Membership) => "updated",
        (Action::Update, _) => "reloaded",
        (_, Kind::Ports) => "checked",
        (Action::Replace, Kind::File) => "rewritten",
        (_, Kind::File) => "written",
        (Action::Replace, Kind::Allocation) => "reallocated",
        (_, Kind::Allocation) => "allocated",
        (Action::Replace, _) => "replaced",
        (Action::Create, Kind::Membership) => "members added",
        _ => "started",
    }
}

fn verb_ing(action: Action, kind: Kind) -> &'static str {
    match (action, kind) {
        (Action::Check, _) => "checking",
        (Action::Update, Kind::Membership) => "updating members",
        (Action::Update, _) => "reloading",
        (Action::Create, Kind::Membership) => "adding members",
        (_, Kind::Ports) => "checking ports",
        (_, Kind::File) => "writing",
        (_, Kind::Allocation) => "allocating",
        (Action::Replace, _) => "replacing",
        _ => "starting",
    }
}
