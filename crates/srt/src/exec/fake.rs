//! A fake executor for in-process tests of apply's walk (test builds only).
//!
//! It starts nothing: [`FakeExecutor::start`] hands out a made-up local runtime, and
//! every call is recorded in order ([`Call`]), with how many resources were in flight
//! at once. Each address can be told to fail or to take time ([`Behaviour`]); a hook
//! runs on every start (to trigger cancellation, or to look at the state on disk at
//! that moment).

use super::{ExecError, Executor, Started};
use crate::launch::HostLayout;
use crate::launch::{Bindings, LaunchProcess};
use crate::plan::Observation;
use crate::state::Runtime;
use futures::future::BoxFuture;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Duration;

/// One call the executor received, in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Call {
    /// `check_ports` of a process began (the process's address, not its block's).
    Ports(String),
    /// `start` of a process (its pid, when it succeeded).
    Start(String, Option<u32>),
    /// `confirm` of a process returned.
    Confirmed(String),
    /// `stop` of a runtime began (the pid of the runtime).
    StopBegin(u32),
    /// `stop` of a runtime returned.
    StopEnd(u32),
}

/// How the executor treats one address.
#[derive(Clone, Debug, Default)]
pub(crate) struct Behaviour {
    /// `start` fails with this message.
    pub start_fails: Option<String>,
    /// `confirm` takes this long.
    pub confirm_delay: Duration,
    /// `confirm` fails with this message (after its delay).
    pub confirm_fails: Option<String>,
    /// `confirm` finds the process already over, as a scheduler that never listed a
    /// short step does ([`ExecError::StepEnded`]).
    pub ended_before_seen: bool,
    /// `check_ports` takes this long.
    pub ports_delay: Duration,
    /// The process's log, as `log_tail` returns it.
    pub log: Option<String>,
    /// Refresh finds the process gone, for this reason (else alive).
    pub gone: Option<String>,
    /// A process this executor started exits this long after its start: `observe`
    /// finds it gone from then on (processes recorded by a test never die this way).
    pub dies_after: Option<Duration>,
}

#[derive(Default)]
struct Inner {
    calls: Vec<Call>,
    /// Resources being worked on now: port checks, and processes from `start` until
    /// `confirm` returns.
    in_flight: usize,
    max_in_flight: usize,
    stopping: usize,
    max_stopping: usize,
    next_pid: u32,
    /// Address of each pid handed out.
    pids: HashMap<u32, String>,
    /// Processes observed (refresh's probes).
    observed: usize,
    /// When each pid was started by `start`.
    started_at: HashMap<u32, std::time::Instant>,
}

/// Called with the address on every `start`, before the runtime is handed out.
type Hook = Box<dyn Fn(&str) + Send + Sync>;

/// Records what apply asks; starts nothing.
#[derive(Default)]
pub(crate) struct FakeExecutor {
    inner: Mutex<Inner>,
    behaviour: HashMap<String, Behaviour>,
    /// How long every stop takes.
    stop_delay: Duration,
    on_start: Option<Hook>,
    /// The run directory its bindings name (files are written there).
    run_dir: Option<String>,
}

impl FakeExecutor {
    pub(crate) fn new() -> Self {
        FakeExecutor {
            inner: Mutex::new(Inner {
                next_pid: 1000,
                ..Default::default()
            }),
            ..Default::default()
        }
    }

    /// Treat `address` as `b` says.
    pub(crate) fn with(mut self, address: &str, b: Behaviour) -> Self {
        self.behaviour.insert(address.to_string(), b);
        self
    }

    /// Every confirm takes `delay` (unless an address says otherwise).
    pub(crate) fn confirm_delay(mut self, addresses: &[&str], delay: Duration) -> Self {
        for a in addresses {
            self.behaviour
                .entry(a.to_string())
                .or_default()
                .confirm_delay = delay;
        }
        self
    }

    /// Bind the run directory to `dir` (a test's temporary directory), where apply
    /// writes the plan's files.
    pub(crate) fn run_dir(mut self, dir: &std::path::Path) -> Self {
        self.run_dir = Some(dir.display().to_string());
        self
    }

    /// Every stop takes `delay`.
    pub(crate) fn stop_delay(mut self, delay: Duration) -> Self {
        self.stop_delay = delay;
        self
    }

    /// Run `hook` on every start.
    pub(crate) fn on_start(mut self, hook: impl Fn(&str) + Send + Sync + 'static) -> Self {
        self.on_start = Some(Box::new(hook));
        self
    }

    /// Every call so far, in order.
    pub(crate) fn calls(&self) -> Vec<Call> {
        self.inner.lock().unwrap().calls.clone()
    }

    /// How many times a process was observed (refresh probes each recorded one).
    pub(crate) fn observed(&self) -> usize {
        self.inner.lock().unwrap().observed
    }

    /// The most resources that were in flight at once (port checks and launches).
    pub(crate) fn max_in_flight(&self) -> usize {
        self.inner.lock().unwrap().max_in_flight
    }

    /// The most stops that were in flight at once.
    pub(crate) fn max_stopping(&self) -> usize {
        self.inner.lock().unwrap().max_stopping
    }

    /// The address a pid was handed out for.
    pub(crate) fn address_of(&self, pid: u32) -> Option<String> {
        self.inner.lock().unwrap().pids.get(&pid).cloned()
    }

    /// A runtime as this executor hands them out, for state built by a test.
    pub(crate) fn runtime(&self, address: &str) -> Runtime {
        let mut inner = self.inner.lock().unwrap();
        inner.next_pid += 1;
        let pid = inner.next_pid;
        inner.pids.insert(pid, address.to_string());
        fake_runtime(pid)
    }

    fn behaviour(&self, address: &str) -> Behaviour {
        self.behaviour.get(address).cloned().unwrap_or_default()
    }

    fn begin(&self, call: Call) {
        let mut inner = self.inner.lock().unwrap();
        inner.calls.push(call);
        inner.in_flight += 1;
        inner.max_in_flight = inner.max_in_flight.max(inner.in_flight);
    }

    fn end(&self, call: Option<Call>) {
        let mut inner = self.inner.lock().unwrap();
        inner.calls.extend(call);
        inner.in_flight -= 1;
    }
}

fn fake_runtime(pid: u32) -> Runtime {
    Runtime::Local {
        pid,
        start_time: 1,
        pgid: pid,
        host: "fake".into(),
        lease: None,
    }
}

fn pid_of(runtime: &Runtime) -> u32 {
    runtime.process_key().map_or(0, |(pid, _)| pid)
}

impl Executor for FakeExecutor {
    fn bindings(&self) -> Bindings {
        Bindings {
            node_ips: vec!["127.0.0.1".into()],
            run_dir: self.run_dir.clone().unwrap_or_else(|| "/fake/run".into()),
            node_hosts: vec!["fake".into()],
        }
    }

    fn host_layout(&self) -> HostLayout {
        HostLayout::Shared
    }

    fn execution(&self) -> serde_json::Value {
        serde_json::json!({ "executor": "fake" })
    }

    fn start(&self, p: &LaunchProcess) -> Result<Started, ExecError> {
        if let Some(hook) = &self.on_start {
            hook(&p.address);
        }
        if let Some(message) = self.behaviour(&p.address).start_fails {
            self.inner
                .lock()
                .unwrap()
                .calls
                .push(Call::Start(p.address.clone(), None));
            return Err(ExecError::Record(message));
        }
        let runtime = self.runtime(&p.address);
        self.inner
            .lock()
            .unwrap()
            .started_at
            .insert(pid_of(&runtime), std::time::Instant::now());
        self.begin(Call::Start(p.address.clone(), Some(pid_of(&runtime))));
        Ok(Started {
            runtime,
            log_path: PathBuf::from(format!("/fake/logs/{}.log", p.address)),
        })
    }

    fn confirm<'a>(&'a self, started: &'a Started) -> BoxFuture<'a, Result<Runtime, ExecError>> {
        Box::pin(async move {
            let address = self
                .address_of(pid_of(&started.runtime))
                .unwrap_or_default();
            let b = self.behaviour(&address);
            tokio::time::sleep(b.confirm_delay).await;
            self.end(Some(Call::Confirmed(address.clone())));
            match b.confirm_fails {
                Some(message) => Err(ExecError::Record(message)),
                None if b.ended_before_seen => Err(ExecError::StepEnded {
                    name: address,
                    tail: String::new(),
                }),
                None => Ok(started.runtime.clone()),
            }
        })
    }

    fn observe<'a>(&'a self, runtime: &'a Runtime) -> BoxFuture<'a, Observation> {
        let pid = pid_of(runtime);
        let started_at = {
            let mut inner = self.inner.lock().unwrap();
            inner.observed += 1;
            inner.started_at.get(&pid).copied()
        };
        let b = self.address_of(pid).map(|a| self.behaviour(&a));
        let died = b
            .as_ref()
            .and_then(|b| b.dies_after)
            .zip(started_at)
            .filter(|(after, at)| at.elapsed() >= *after)
            .map(|_| format!("process {pid} exited (code 1)"));
        let gone = b.and_then(|b| b.gone).or(died);
        Box::pin(async move { gone.map_or(Observation::Alive, Observation::Gone) })
    }

    fn stop<'a>(&'a self, runtime: &'a Runtime) -> BoxFuture<'a, Result<(), ExecError>> {
        Box::pin(async move {
            let pid = pid_of(runtime);
            {
                let mut inner = self.inner.lock().unwrap();
                inner.calls.push(Call::StopBegin(pid));
                inner.stopping += 1;
                inner.max_stopping = inner.max_stopping.max(inner.stopping);
            }
            tokio::time::sleep(self.stop_delay).await;
            let mut inner = self.inner.lock().unwrap();
            inner.calls.push(Call::StopEnd(pid));
            inner.stopping -= 1;
            Ok(())
        })
    }

    fn check_ports<'a>(&'a self, p: &'a LaunchProcess) -> BoxFuture<'a, Result<(), ExecError>> {
        Box::pin(async move {
            self.begin(Call::Ports(p.address.clone()));
            tokio::time::sleep(self.behaviour(&p.address).ports_delay).await;
            self.end(None);
            Ok(())
        })
    }

    fn log_tail(&self, address: &str, lines: usize) -> Option<String> {
        let log = self.behaviour(address).log?;
        let all: Vec<&str> = log.lines().collect();
        Some(all[all.len().saturating_sub(lines)..].join("\n"))
    }
}
