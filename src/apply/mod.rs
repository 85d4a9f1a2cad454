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

pub mod gate;

use crate::exec::Executor;
use crate::graph::{Kind, ResourceGraph, Target};
use crate::launch::LaunchPlan;
use crate::plan::{Action, Plan};
use crate::recipe::HealthCheck;
use crate::state::{ResourceState, State, StateLock, StateStore, Status};
use futures::stream::{FuturesUnordered, StreamExt};
use futures::FutureExt;
use std::collections::{BTreeMap, HashMap};
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
    Failed {
        /// Address.
        address: String,
        /// Error, possibly with a log tail.
        error: String,
    },
    /// A resource was skipped because a dependency failed or apply was interrupted.
    Skipped {
        /// Address.
        address: String,
        /// Why.
        because: String,
    },
}

/// What apply did.
#[derive(Clone, Debug, Default)]
pub struct Outcome {
    /// Processes started for new resources.
    pub created: usize,
    /// Resources replaced.
    pub replaced: usize,
    /// Resources destroyed.
    pub destroyed: usize,
    /// Gates and checks that passed.
    pub checked: usize,
    /// Failures: (address, error).
    pub failed: Vec<(String, String)>,
    /// Skipped addresses.
    pub skipped: Vec<String>,
    /// Apply was interrupted.
    pub interrupted: bool,
}

/// Everything apply needs.
pub struct Apply<'a> {
    /// The launch plan the graph was lowered from.
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

/// Wrap state for [`Apply::run`].
pub fn shared(state: State) -> Shared {
    Arc::new(Mutex::new(state))
}

fn save(store: &StateStore, lock: &StateLock, state: &mut State) -> Result<(), String> {
    store
        .save(lock, state)
        .map(|_| ())
        .map_err(|e| format!("saving state: {e}"))
}

/// Record the current records of `addresses` (an append to the state journal: its cost
/// is those records, not the whole state).
fn append(
    store: &StateStore,
    lock: &StateLock,
    state: &mut State,
    addresses: &[&str],
) -> Result<(), String> {
    store
        .append(lock, state, addresses)
        .map_err(|e| format!("saving state: {e}"))
}

impl Apply<'_> {
    fn record(
        &self,
        state: &Shared,
        address: &str,
        f: impl FnOnce(&mut State),
    ) -> Result<(), String> {
        let mut s = state.lock().expect("state mutex");
        f(&mut s);
        append(self.store, self.lock, &mut s, &[address])
    }

    fn new_record(&self, i: usize, status: Status) -> ResourceState {
        let r = &self.graph.resources[i];
        let (ports, node) = match r.target {
            Target::Process(p) => {
                let proc_ = &self.launch.processes[p];
                (
                    proc_
                        .ports
                        .iter()
                        .map(|(k, b)| (k.clone(), b.base))
                        .collect(),
                    Some(self.launch.nodes[proc_.node].name.clone()),
                )
            }
            Target::Gate(_) | Target::Allocation => (BTreeMap::new(), None),
        };
        ResourceState {
            kind: r.kind.name().to_string(),
            hash: r.hash.clone(),
            dependencies: r.deps.clone(),
            spec: r.spec.clone(),
            status,
            runtime: None,
            node,
            ports,
            log_path: None,
            error: None,
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
        self.stop_phase(state, &mut outcome).await;
        if !self.cancel.is_cancelled() {
            self.create_phase(state, &mut outcome).await;
            // Check results are saved with the next launch; whatever came after the
            // last one is saved here.
            let mut s = state.lock().expect("state mutex");
            if let Err(e) = save(self.store, self.lock, &mut s) {
                outcome.failed.push(("state".into(), e));
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
    async fn stop_phase(&self, state: &Shared, outcome: &mut Outcome) {
        let targets: Vec<&String> = self
            .plan
            .changes
            .iter()
            .filter(|c| matches!(c.action, Action::Destroy | Action::Replace))
            .map(|c| &c.address)
            .collect();
        // Per target (in a dependents-first order): its runtime, the targets it depends
        // on, and how many targets depend on it and are not stopped yet.
        let (order, runtimes, dependencies, mut waiting) = {
            let s = state.lock().expect("state mutex");
            let recorded: Vec<&String> = targets
                .into_iter()
                .filter(|a| s.resources.contains_key(*a))
                .collect();
            let order = crate::plan::destroy_order(&s, &recorded);
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
            let runtimes: Vec<Option<crate::state::Runtime>> = order
                .iter()
                .map(|a| s.resources[a].runtime.clone())
                .collect();
            (order, runtimes, dependencies, waiting)
        };
        let actions = self.actions();
        let action_of = |i: usize| {
            actions
                .get(order[i].as_str())
                .copied()
                .unwrap_or(Action::Destroy)
        };
        let mut ready: std::collections::VecDeque<usize> =
            (0..order.len()).filter(|&i| waiting[i] == 0).collect();
        let mut running: FuturesUnordered<futures::future::LocalBoxFuture<'_, StopResult>> =
            FuturesUnordered::new();
        let mut started = vec![false; order.len()];
        let parallelism = self.parallelism.max(1);
        loop {
            while running.len() < parallelism && !self.cancel.is_cancelled() {
                let Some(i) = ready.pop_front() else { break };
                if std::mem::replace(&mut started[i], true) {
                    continue;
                }
                (self.events)(Event::Started {
                    address: order[i].clone(),
                    action: "stopping",
                });
                let runtime = &runtimes[i];
                running.push(Box::pin(async move {
                    let t = Instant::now();
                    let result = match runtime {
                        Some(rt) => self.exec.stop(rt).await,
                        None => Ok(()),
                    };
                    (i, t, result)
                }));
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
            let mut stopped = Vec::with_capacity(finished.len());
            for (i, t, result) in finished {
                match result {
                    Ok(()) => stopped.push((i, t)),
                    Err(e) => {
                        (self.events)(Event::Failed {
                            address: order[i].clone(),
                            error: format!("stopping: {e}"),
                        });
                        outcome.failed.push((order[i].clone(), e));
                    }
                }
                // What it depends on may stop even if it failed to: the dependency does
                // not need it gone, only not to outlive it unnecessarily.
                for &j in &dependencies[i] {
                    waiting[j] -= 1;
                    if waiting[j] == 0 {
                        ready.push_back(j);
                    }
                }
            }
            if stopped.is_empty() {
                continue;
            }
            let saved = {
                let mut s = state.lock().expect("state mutex");
                for &(i, _) in &stopped {
                    if action_of(i) == Action::Destroy {
                        s.resources.remove(&order[i]);
                    } else if let Some(r) = s.resources.get_mut(&order[i]) {
                        // Stopped for replacement: if apply stops here, the next plan
                        // replaces it.
                        r.status = Status::Tainted;
                        r.runtime = None;
                    }
                }
                let addresses: Vec<&str> =
                    stopped.iter().map(|&(i, _)| order[i].as_str()).collect();
                append(self.store, self.lock, &mut s, &addresses)
            };
            for (i, t) in stopped {
                let destroyed = action_of(i) == Action::Destroy;
                if let Err(e) = &saved {
                    outcome.failed.push((order[i].clone(), e.clone()));
                }
                if destroyed {
                    outcome.destroyed += 1;
                }
                (self.events)(Event::Done {
                    address: order[i].clone(),
                    action: if destroyed { "destroyed" } else { "stopped" },
                    detail: format!("{:.1}s", t.elapsed().as_secs_f64()),
                });
            }
        }
    }

    async fn create_phase(&self, state: &Shared, outcome: &mut Outcome) {
        let n = self.graph.resources.len();
        // Start order: what each resource waits for (a Router does not wait for the
        // workers it watches; it starts alongside them).
        let mut indegree: Vec<usize> = vec![0; n];
        let mut children: Vec<Vec<usize>> = vec![Vec::new(); n];
        for (i, r) in self.graph.resources.iter().enumerate() {
            for d in r.waits_for() {
                indegree[i] += 1;
                children[self.graph.index[d]].push(i);
            }
        }
        let by_address = self.actions();
        let actions: Vec<Action> = self
            .graph
            .resources
            .iter()
            .map(|r| {
                by_address
                    .get(r.address.as_str())
                    .copied()
                    .unwrap_or(Action::NoOp)
            })
            .collect();
        let mut blocked: Vec<Option<String>> = vec![None; n];
        let mut ready: std::collections::VecDeque<usize> =
            (0..n).filter(|&i| indegree[i] == 0).collect();
        let mut running: FuturesUnordered<
            futures::future::LocalBoxFuture<'_, (usize, Result<String, String>)>,
        > = FuturesUnordered::new();
        // Process launches ready in the same round are started as one batch (one intent
        // save, the launches, one identity save); results of everything else arrive
        // through `running`.
        let mut launches: Vec<(usize, Action)> = Vec::new();
        // Finished checks (port blocks, gates) whose records are not on disk yet.
        let mut unsaved: Vec<usize> = Vec::new();
        let mut done: std::collections::VecDeque<(usize, Result<String, String>)> =
            Default::default();
        let parallelism = self.parallelism.max(1);
        loop {
            while running.len() + launches.len() < parallelism {
                let Some(i) = ready.pop_front() else { break };
                let address = self.graph.resources[i].address.clone();
                if let Some(because) = blocked[i].clone().or_else(|| {
                    self.cancel
                        .is_cancelled()
                        .then(|| "apply was interrupted".to_string())
                }) {
                    (self.events)(Event::Skipped {
                        address: address.clone(),
                        because: because.clone(),
                    });
                    outcome.skipped.push(address.clone());
                    for &c in &children[i] {
                        blocked[c].get_or_insert_with(|| format!("`{address}` did not complete"));
                        indegree[c] -= 1;
                        if indegree[c] == 0 {
                            ready.push_back(c);
                        }
                    }
                    continue;
                }
                if actions[i] == Action::NoOp {
                    for &c in &children[i] {
                        indegree[c] -= 1;
                        if indegree[c] == 0 {
                            ready.push_back(c);
                        }
                    }
                    continue;
                }
                let action = actions[i];
                if self.graph.resources[i].kind.is_process() {
                    launches.push((i, action));
                    continue;
                }
                running.push(Box::pin(async move {
                    (i, self.run_one(state, i, action).await)
                }));
            }
            if !launches.is_empty() {
                for (i, started) in self.launch_batch(state, &launches, &mut unsaved) {
                    match started {
                        Err(e) => done.push_back((i, Err(e))),
                        // Identity recorded: wait (without the state mutex) until the
                        // executor confirms the process runs, e.g. its SLURM step id.
                        Ok(st) => running.push(Box::pin(async move {
                            (i, self.confirm_launch(state, i, st).await)
                        })),
                    }
                }
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
                let address = self.graph.resources[i].address.clone();
                if !self.graph.resources[i].kind.is_process() {
                    // Its check result is in memory: recorded with the next launch.
                    unsaved.push(i);
                }
                match result {
                    Ok(detail) => {
                        match actions[i] {
                            Action::Create if self.graph.resources[i].kind.is_process() => {
                                outcome.created += 1
                            }
                            Action::Replace if self.graph.resources[i].kind.is_process() => {
                                outcome.replaced += 1
                            }
                            Action::Check => outcome.checked += 1,
                            _ => {}
                        }
                        (self.events)(Event::Done {
                            address: address.clone(),
                            action: verb(actions[i], self.graph.resources[i].kind),
                            detail,
                        });
                    }
                    Err(error) => {
                        (self.events)(Event::Failed {
                            address: address.clone(),
                            error: error.clone(),
                        });
                        outcome.failed.push((address.clone(), error));
                        for &c in &children[i] {
                            blocked[c].get_or_insert_with(|| format!("`{address}` failed"));
                        }
                    }
                }
                for &c in &children[i] {
                    indegree[c] -= 1;
                    if indegree[c] == 0 {
                        ready.push_back(c);
                    }
                }
            }
        }
    }

    /// Start processes together. Their intent (`pending`) records are saved once before
    /// the first starts, and their identities once after the last started, all under
    /// one hold of the state mutex: an interrupt never sees a started process without
    /// its identity, and a crash leaves at worst `pending` records (replaced by the next
    /// plan). A batch is at most `parallelism` launches.
    fn launch_batch(
        &self,
        state: &Shared,
        batch: &[(usize, Action)],
        unsaved: &mut Vec<usize>,
    ) -> Vec<(usize, Result<crate::exec::Started, String>)> {
        let address = |i: usize| self.graph.resources[i].address.as_str();
        let launched: Vec<&str> = batch.iter().map(|&(i, _)| address(i)).collect();
        for &(i, action) in batch {
            let r = &self.graph.resources[i];
            (self.events)(Event::Started {
                address: r.address.clone(),
                action: verb_ing(action, r.kind),
            });
        }
        let mut s = state.lock().expect("state mutex");
        for &(i, _) in batch {
            let address = self.graph.resources[i].address.clone();
            s.resources
                .insert(address, self.new_record(i, Status::Pending));
        }
        // The intents, with the check results that came before them (a port block's
        // before its process).
        let intents: Vec<&str> = unsaved
            .iter()
            .map(|&i| address(i))
            .chain(launched.iter().copied())
            .collect();
        if let Err(e) = append(self.store, self.lock, &mut s, &intents) {
            return batch.iter().map(|&(i, _)| (i, Err(e.clone()))).collect();
        }
        unsaved.clear();
        let mut results = Vec::with_capacity(batch.len());
        for &(i, _) in batch {
            let r = &self.graph.resources[i];
            let Target::Process(p) = r.target else {
                results.push((i, Err("unsupported resource".into())));
                continue;
            };
            let started = self.exec.start(&self.launch.processes[p]);
            let rec = s.resources.get_mut(&r.address).expect("just inserted");
            let result = match started {
                Ok(st) => {
                    rec.status = Status::Running;
                    rec.runtime = Some(st.runtime.clone());
                    rec.log_path = Some(st.log_path.clone());
                    Ok(st)
                }
                Err(e) => {
                    rec.status = Status::Failed;
                    rec.error = Some(e.clone());
                    Err(e)
                }
            };
            results.push((i, result));
        }
        if let Err(e) = append(self.store, self.lock, &mut s, &launched) {
            return results
                .into_iter()
                .map(|(i, _)| (i, Err(e.clone())))
                .collect();
        }
        results
    }

    /// Wait for the executor to confirm a started process; record the completed runtime
    /// (saved only when it changed, so local launches keep their batched saves) or the
    /// failure (the runtime stays recorded so the next apply stops what may still run).
    async fn confirm_launch(
        &self,
        state: &Shared,
        i: usize,
        started: crate::exec::Started,
    ) -> Result<String, String> {
        let address = &self.graph.resources[i].address;
        let confirmed = self.exec.confirm(&started).await;
        let mut s = state.lock().expect("state mutex");
        match confirmed {
            Ok(runtime) => {
                let detail = describe(&runtime);
                if runtime != started.runtime {
                    if let Some(rec) = s.resources.get_mut(address) {
                        rec.runtime = Some(runtime);
                    }
                    append(self.store, self.lock, &mut s, &[address])?;
                }
                Ok(detail)
            }
            Err(e) => {
                if let Some(rec) = s.resources.get_mut(address) {
                    rec.status = Status::Failed;
                    rec.error = Some(e.clone());
                }
                append(self.store, self.lock, &mut s, &[address])?;
                Err(e)
            }
        }
    }

    async fn run_one(&self, state: &Shared, i: usize, action: Action) -> Result<String, String> {
        let r = &self.graph.resources[i];
        (self.events)(Event::Started {
            address: r.address.clone(),
            action: verb_ing(action, r.kind),
        });
        let t = Instant::now();
        match (r.kind, r.target) {
            (Kind::Ports, Target::Process(p)) => {
                let process = &self.launch.processes[p];
                let result = self.exec.check_ports(process);
                let mut rec = self.new_record(
                    i,
                    if result.is_ok() {
                        Status::Running
                    } else {
                        Status::Failed
                    },
                );
                rec.error = result.as_ref().err().cloned();
                // Saved with its process's launch (or at the end): a lost port check
                // only costs a re-check.
                state
                    .lock()
                    .expect("state mutex")
                    .resources
                    .insert(r.address.clone(), rec);
                result.map(|_| "free".to_string())
            }
            (Kind::Allocation, _) => self.allocate(state, i).await,
            (_, Target::Gate(g)) => {
                let gate = &self.launch.gates[g];
                let result = gate::run(self, state, gate).await;
                let mut rec = self.new_record(
                    i,
                    if result.is_ok() {
                        Status::Running
                    } else {
                        Status::Failed
                    },
                );
                rec.error = result.as_ref().err().cloned();
                if !(self.cancel.is_cancelled() && result.is_err()) {
                    // Saved with the next launch or at the end: gates are re-checked by
                    // every apply.
                    state
                        .lock()
                        .expect("state mutex")
                        .resources
                        .insert(r.address.clone(), rec);
                }
                result.map(|d| format!("{d} in {:.2}s", t.elapsed().as_secs_f64()))
            }
            _ => Err("unsupported resource".into()),
        }
    }
}

impl Apply<'_> {
    /// Create the executor's allocation. Its identity is recorded as soon as it exists;
    /// on failure or interrupt it is cancelled and recorded as failed without an
    /// identity, so nothing is left half-recorded.
    async fn allocate(&self, state: &Shared, i: usize) -> Result<String, String> {
        let address = &self.graph.resources[i].address;
        self.record(state, address, |s| {
            s.resources
                .insert(address.clone(), self.new_record(i, Status::Pending));
        })?;
        let submitted = |runtime: &crate::state::Runtime| {
            self.record(state, address, |s| {
                if let Some(r) = s.resources.get_mut(address) {
                    r.runtime = Some(runtime.clone());
                }
            })
        };
        let result = tokio::select! {
            r = self.exec.allocate(&submitted) => r,
            _ = self.cancel.cancelled() => Err("interrupted while waiting for the allocation".to_string()),
        };
        match result {
            Ok(started) => {
                let detail = describe(&started.runtime);
                self.record(state, address, |s| {
                    if let Some(r) = s.resources.get_mut(address) {
                        r.status = Status::Running;
                        r.runtime = Some(started.runtime.clone());
                        r.log_path = Some(started.log_path.clone());
                    }
                })?;
                Ok(detail)
            }
            Err(e) => {
                let recorded = state
                    .lock()
                    .expect("state mutex")
                    .resources
                    .get(address)
                    .and_then(|r| r.runtime.clone());
                // An interrupted wait leaves a submitted job behind: cancel it now.
                let kept = match &recorded {
                    Some(rt) => self.exec.stop(rt).await.err().map(|_| rt.clone()),
                    None => None,
                };
                self.record(state, address, |s| {
                    if let Some(r) = s.resources.get_mut(address) {
                        r.status = Status::Failed;
                        r.runtime = kept;
                        r.error = Some(e.clone());
                    }
                })?;
                Err(e)
            }
        }
    }
}

/// A short description of a runtime for progress lines.
fn describe(runtime: &crate::state::Runtime) -> String {
    match runtime {
        crate::state::Runtime::Local { pid, .. } => format!("pid {pid}"),
        crate::state::Runtime::Slurm {
            job_id,
            step_id: Some(step),
            nodes,
            ..
        } => format!("step {job_id}.{step} on {}", nodes.join(",")),
        crate::state::Runtime::Slurm { job_id, nodes, .. } => {
            format!("job {job_id} on {}", nodes.join(","))
        }
    }
}

fn verb(action: Action, kind: Kind) -> &'static str {
    match (action, kind) {
        (Action::Check, _) => "passed",
        (_, Kind::Ports) => "checked",
        (Action::Replace, Kind::Allocation) => "reallocated",
        (_, Kind::Allocation) => "allocated",
        (Action::Replace, _) => "replaced",
        _ => "started",
    }
}

fn verb_ing(action: Action, kind: Kind) -> &'static str {
    match (action, kind) {
        (Action::Check, _) => "checking",
        (_, Kind::Ports) => "checking ports",
        (_, Kind::Allocation) => "allocating",
        (Action::Replace, _) => "replacing",
        _ => "starting",
    }
}
