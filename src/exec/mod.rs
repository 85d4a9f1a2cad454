//! Executors: the machinery that turns an applied plan into running processes.
//!
//! [`Executor`] is the seam apply talks to: start a process of the launch plan, observe
//! or stop a recorded one, check its ports, and provide the concrete values for the
//! plan's placeholders ([`crate::launch::Bindings`]). The embedded default is
//! [`local::LocalExecutor`], built on the primitives in [`process`].

pub mod local;
pub mod process;

use crate::launch::build::HostLayout;
use crate::launch::{Bindings, LaunchProcess};
use crate::plan::Observation;
use crate::state::Runtime;
use futures::future::BoxFuture;
use std::path::PathBuf;

/// A started process.
#[derive(Clone, Debug)]
pub struct Started {
    /// How to find it again.
    pub runtime: Runtime,
    /// Where its output goes.
    pub log_path: PathBuf,
}

/// Runs and observes processes for apply.
pub trait Executor: Send + Sync {
    /// Placeholder values (node IPs, run directory).
    fn bindings(&self) -> &Bindings;
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
}
