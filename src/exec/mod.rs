//! Executors: the machinery that turns an applied plan into running processes.
//!
//! [`Executor`] is the seam apply talks to: start a process of the launch plan, observe
//! or stop a recorded one, check its ports, and provide the concrete values for the
//! plan's placeholders ([`crate::launch::Bindings`]). The embedded default is
//! [`local::LocalExecutor`], built on the primitives in [`process`];
//! [`slurm::SlurmExecutor`] runs processes as job steps of one SLURM allocation.
//!
//! Bindings are dynamic: an executor with an allocation learns node names and IPs only
//! once the allocation exists ([`Executor::allocate`]) or is read back from state
//! ([`Executor::restore`]), so [`Executor::bindings`] returns a snapshot.

pub mod local;
pub mod process;
pub mod slurm;

use crate::launch::build::HostLayout;
use crate::launch::{Bindings, LaunchProcess};
use crate::plan::Observation;
use crate::state::{Runtime, State};
use futures::future::BoxFuture;
use std::path::PathBuf;

/// Called by [`Executor::allocate`] as soon as the allocation has an identity (a job id)
/// and before waiting for it, so that an interrupted apply still has it recorded.
pub type OnSubmitted<'a> = &'a (dyn Fn(&Runtime) -> Result<(), String> + Sync);

/// A started process.
#[derive(Clone, Debug)]
pub struct Started {
    /// How to find it again.
    pub runtime: Runtime,
    /// Where its output goes.
    pub log_path: PathBuf,
}

/// The identity of a process recorded as a local runtime (a local executor's process, or
/// a SLURM deployment's submit-side process); `None` for SLURM jobs and steps.
pub(crate) fn local_identity(runtime: &Runtime) -> Option<process::ProcessIdentity> {
    match runtime {
        Runtime::Local {
            pid,
            start_time,
            pgid,
            host,
        } => Some(process::ProcessIdentity {
            pid: *pid,
            pgid: *pgid,
            start_time: *start_time,
            host: host.clone(),
        }),
        Runtime::Slurm { .. } => None,
    }
}

/// Runs and observes processes for apply.
pub trait Executor: Send + Sync {
    /// Placeholder values (node IPs, run directory), as known now.
    fn bindings(&self) -> Bindings;
    /// How nodes map to hosts for port allocation.
    fn host_layout(&self) -> HostLayout;
    /// How processes are run, hashed into every process spec (switching modes replaces them).
    fn execution(&self) -> serde_json::Value;
    /// Start one process of the launch plan, detached.
    fn start(&self, process: &LaunchProcess) -> Result<Started, String>;
    /// Is a recorded process still the one we started?
    fn observe(&self, runtime: &Runtime) -> Observation;
    /// Stop a recorded process (TERM, grace, KILL). Never signals a process that is not ours.
    fn stop<'a>(&'a self, runtime: &'a Runtime) -> BoxFuture<'a, Result<(), String>>;
    /// Refuse before launch when one of the process's ports is taken.
    fn check_ports(&self, process: &LaunchProcess) -> Result<(), String>;
    /// The last lines of a resource's log.
    fn log_tail(&self, address: &str, lines: usize) -> Option<String>;

    /// The canonical spec of the allocation this executor runs everything on, if it has
    /// one. `graph::lower_with` turns it into the `allocation` resource.
    fn allocation(&self) -> Option<serde_json::Value> {
        None
    }

    /// Create (or adopt) the allocation and learn its nodes, so that [`bindings`]
    /// resolve. `submitted` is called once the allocation has an identity, before
    /// waiting for it. On error nothing of the allocation is left running.
    ///
    /// [`bindings`]: Executor::bindings
    fn allocate<'a>(
        &'a self,
        submitted: OnSubmitted<'a>,
    ) -> BoxFuture<'a, Result<Started, String>> {
        let _ = submitted;
        Box::pin(async { Err("this executor has no allocation".to_string()) })
    }

    /// Learn what the state records (the allocation's nodes and IPs) before refresh or
    /// apply. Refuses state this executor cannot manage, naming what to do.
    fn restore(&self, state: &State) -> Result<(), String> {
        let _ = state;
        Ok(())
    }

    /// After [`start`](Executor::start) was recorded: wait until the process is
    /// confirmed running and return its complete runtime (e.g. the SLURM step id).
    fn confirm<'a>(&'a self, started: &'a Started) -> BoxFuture<'a, Result<Runtime, String>> {
        Box::pin(async move { Ok(started.runtime.clone()) })
    }
}
