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
//!
//! Executors are built in one place, from the cluster profile: [`for_profile`] (plan and
//! apply, for a recipe) and [`for_state`] (destroy, status and list, for what a state
//! records). Outside this module and [`crate::state`], nothing matches on the executor
//! kind or on [`Runtime`]'s variants: runtimes describe themselves
//! ([`Runtime::describe`], [`Runtime::age`], [`Runtime::process_key`]).

pub mod agent;
mod error;
#[cfg(test)]
pub(crate) mod fake;
pub mod local;
pub mod process;
pub mod slurm;

pub use error::ExecError;

use crate::cluster::ClusterProfile;
use crate::launch::HostLayout;
use crate::launch::{AllocationSpec, Bindings, LaunchPlan, LaunchProcess};
use crate::plan::Observation;
use crate::state::{Runtime, State};
use futures::future::BoxFuture;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// What an executor is built for: one deployment and what its recipe asks of the nodes.
#[derive(Clone, Debug)]
pub struct Deployment<'a> {
    /// The deployment's name.
    pub name: &'a str,
    /// Its directory (`<state dir>/<name>`): logs, leases, generated files.
    pub dir: &'a Path,
    /// Nodes the launch plan places processes on.
    pub nodes: usize,
    /// GPUs per node the recipe places (0: none asked, as for destroy).
    pub gpus_per_node: u32,
    /// The recipe's GPU model (`resources.gpu_type`), requested from a scheduler.
    pub gpu_type: Option<String>,
    /// Whether the processes the executor is handed run the simulator (`--simulate`).
    pub simulate: bool,
    /// How long a stopped local process gets between TERM and KILL.
    pub grace: Duration,
    /// An existing allocation to run in (`SLURM_JOB_ID`), never cancelled by srt.
    pub adopt: Option<u64>,
}

impl<'a> Deployment<'a> {
    /// A deployment as read back from state: nothing asked of the nodes, nothing
    /// simulated, the default grace.
    pub fn recorded(name: &'a str, dir: &'a Path) -> Self {
        Deployment {
            name,
            dir,
            nodes: 1,
            gpus_per_node: 0,
            gpu_type: None,
            simulate: false,
            grace: Duration::from_secs(10),
            adopt: None,
        }
    }
}

/// The executor a cluster profile selects, for `deployment`. Refuses a recipe that
/// places more GPUs per node than the profile says the cluster's nodes have, and, on
/// the local executor without the simulator, a multi-node recipe whose nodes need more
/// devices than this host has (its nodes map onto distinct devices of the host, see
/// [`crate::launch::BuildContext::host_devices`]).
pub fn for_profile(
    profile: &ClusterProfile,
    deployment: &Deployment<'_>,
) -> Result<Box<dyn Executor>, ExecError> {
    let d = deployment;
    Ok(match profile {
        ClusterProfile::Local => {
            let needed = d.nodes as u32 * d.gpus_per_node;
            if !d.simulate && d.nodes > 1 && needed > 0 {
                let (have, found) = local::host_gpus();
                if have < needed {
                    return Err(ExecError::HostGpus {
                        nodes: d.nodes,
                        gpus_per_node: d.gpus_per_node,
                        last: needed - 1,
                        have,
                        found,
                    });
                }
            }
            Box::new(
                local::LocalExecutor::new(d.name, d.dir, d.nodes, d.simulate).with_grace(d.grace),
            )
        }
        ClusterProfile::Slurm(s) => {
            if let Some(have) = s.gpus_per_node.filter(|h| *h < d.gpus_per_node) {
                return Err(ExecError::TooManyGpus {
                    recipe: d.gpus_per_node,
                    profile: have,
                });
            }
            Box::new(
                slurm::SlurmExecutor::new(
                    (**s).clone(),
                    d.name,
                    d.dir,
                    d.gpus_per_node,
                    d.simulate,
                    d.adopt,
                )
                .with_gpu_type(d.gpu_type.clone()),
            )
        }
    })
}

/// The executor that can manage what `state` records, for `srt destroy`, `status` and
/// `list`: the profile's, except that state recording SLURM jobs gets the SLURM
/// executor whatever the profile (it finds the jobs in the state, no profile needed).
pub fn for_state(
    profile: &ClusterProfile,
    deployment: &str,
    dir: &Path,
    state: &State,
) -> Box<dyn Executor> {
    let on_slurm = state
        .resources
        .values()
        .any(|r| matches!(r.runtime, Some(Runtime::Slurm { .. })));
    let fallback;
    let profile = match profile {
        ClusterProfile::Local if on_slurm => {
            fallback = ClusterProfile::Slurm(Box::default());
            &fallback
        }
        p => p,
    };
    // As many nodes as the records name (`node3` is the fourth), so that every URL a
    // record holds resolves.
    let nodes = state
        .resources
        .values()
        .filter_map(|r| {
            r.node
                .as_deref()?
                .strip_prefix("node")?
                .parse::<usize>()
                .ok()
        })
        .max()
        .map_or(1, |n| n + 1);
    let mut d = Deployment::recorded(deployment, dir);
    d.nodes = nodes;
    for_profile(profile, &d).expect("no GPUs asked: no refusal")
}

/// The scheduler commands a launch plan runs as under `profile`, for `srt render`: the
/// SLURM allocation's `sbatch` and every process's `srun`. `None` without a scheduler.
pub fn scheduler_commands(plan: &LaunchPlan, profile: &ClusterProfile) -> Option<String> {
    profile.slurm().map(|s| slurm::render(plan, s))
}

/// Called by [`Executor::allocate`] as soon as the allocation has an identity (a job id)
/// and before waiting for it, so that an interrupted apply still has it recorded.
pub type OnSubmitted<'a> = &'a (dyn Fn(&Runtime) -> Result<(), ExecError> + Sync);

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
            lease,
        } => Some(process::ProcessIdentity {
            pid: *pid,
            pgid: *pgid,
            start_time: *start_time,
            host: host.clone(),
            lease: lease.clone(),
        }),
        Runtime::Slurm { .. } => None,
    }
}

/// The drift detail of a process whose leader exited: naming what of it still runs
/// (its children, which the next stop ends too).
pub(crate) fn exited(id: &process::ProcessIdentity) -> String {
    let left = process::members(id);
    if left.is_empty() {
        format!("process {} exited", id.pid)
    } else {
        format!(
            "process {} exited; {} of its processes still run (pid {})",
            id.pid,
            left.len(),
            left.iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        )
    }
}

/// Runs and observes processes for apply.
pub trait Executor: Send + Sync {
    /// Placeholder values (node IPs, run directory), as known now.
    fn bindings(&self) -> Bindings;
    /// The placeholder values a recorded process was started under (`runtime`, its
    /// record's): [`bindings`](Self::bindings), but for the nodes of an allocation
    /// replaced since, the values of the one it still runs in. What resolves a recorded
    /// process's own addresses (its URL in a Router, its health probe).
    fn bindings_for(&self, runtime: Option<&Runtime>) -> Bindings {
        let _ = runtime;
        self.bindings()
    }
    /// How nodes map to hosts for port allocation.
    fn host_layout(&self) -> HostLayout;
    /// How processes are run, hashed into every process spec (switching modes replaces them).
    fn execution(&self) -> serde_json::Value;
    /// Whether processes run on this machine with its `PATH`, so that a program missing
    /// here is missing for them (checked before anything starts). A scheduler's nodes
    /// have their own `PATH` and containers: nothing to check here.
    fn runs_programs_here(&self) -> bool {
        false
    }
    /// Whether the processes it is handed with an image run in a container (the
    /// SLURM executor with pyxis, outside `--simulate`): else a process's mounts mean
    /// nothing to it.
    fn runs_containers(&self) -> bool {
        false
    }
    /// Start one process of the launch plan, detached.
    fn start(&self, process: &LaunchProcess) -> Result<Started, ExecError>;
    /// Is a recorded process still the one we started? (SLURM asks the scheduler, at
    /// most once a second per job.)
    fn observe<'a>(&'a self, runtime: &'a Runtime) -> BoxFuture<'a, Observation>;
    /// [`observe`](Self::observe) of each of `runtimes`, in order: refresh asks it of
    /// every recorded process at once.
    fn observe_all<'a>(&'a self, runtimes: &'a [&'a Runtime]) -> BoxFuture<'a, Vec<Observation>> {
        Box::pin(async move {
            let mut seen = Vec::with_capacity(runtimes.len());
            for runtime in runtimes {
                seen.push(self.observe(runtime).await);
            }
            seen
        })
    }
    /// Stop a recorded process (TERM, grace, KILL). Never signals a process that is not ours.
    fn stop<'a>(&'a self, runtime: &'a Runtime) -> BoxFuture<'a, Result<(), ExecError>>;
    /// Refuse before launch when one of the process's ports is taken (SLURM looks on
    /// the node, with a short step).
    fn check_ports<'a>(
        &'a self,
        process: &'a LaunchProcess,
    ) -> BoxFuture<'a, Result<(), ExecError>>;
    /// The last lines of a resource's log, bounded as [`process::tail_excerpt`] bounds
    /// them (a report shows them).
    fn log_tail(&self, address: &str, lines: usize) -> Option<String>;

    /// Reload a running process in place: write its generated files again and send it
    /// SIGHUP (nginx re-reads its configuration; its old workers finish their
    /// requests). Never signals a process that is not ours.
    fn reload<'a>(
        &'a self,
        runtime: &'a Runtime,
        process: &'a LaunchProcess,
    ) -> BoxFuture<'a, Result<(), ExecError>> {
        let _ = runtime;
        Box::pin(async move {
            Err(ExecError::NoReload {
                address: process.address.clone(),
            })
        })
    }

    /// Whether it holds nodes in allocations (a scheduler's jobs), which scheduler
    /// options shape.
    fn allocates(&self) -> bool {
        false
    }

    /// The allocations it holds the plan's nodes in, given `groups`, the smallest sets
    /// of nodes that must share one ([`LaunchPlan::node_groups`]): each a resource of
    /// the graph (`graph::lower_with`). None for an executor without allocations.
    fn allocations(&self, groups: Vec<Vec<usize>>) -> Vec<AllocationSpec> {
        let _ = groups;
        Vec::new()
    }

    /// Create (or adopt) allocation `address`, holding plan nodes `nodes`, and learn
    /// its hosts, so that [`bindings`] resolve for them. `submitted` is called once the
    /// allocation has an identity, before waiting for it. On error nothing of the
    /// allocation is left running.
    ///
    /// [`bindings`]: Executor::bindings
    fn allocate<'a>(
        &'a self,
        address: &'a str,
        nodes: &'a [usize],
        submitted: OnSubmitted<'a>,
    ) -> BoxFuture<'a, Result<Started, ExecError>> {
        let _ = (address, nodes, submitted);
        Box::pin(async { Err(ExecError::NoAllocation) })
    }

    /// What it can say of each allocation `state` records, for the plan (its job, hosts
    /// and what is left of its time limit), as (address, detail), from what refresh
    /// read: no more scheduler calls.
    fn allocation_notes(&self, state: &State) -> Vec<crate::plan::Note> {
        let _ = state;
        Vec::new()
    }

    /// Learn what the state records (the allocation's nodes and IPs) before refresh or
    /// apply. Refuses state this executor cannot manage, naming what to do.
    fn restore<'a>(&'a self, state: &'a State) -> BoxFuture<'a, Result<(), ExecError>> {
        let _ = state;
        Box::pin(async { Ok(()) })
    }

    /// The signed lease of every process this executor launched for the deployment, by
    /// address (reading files only: which of them still run is for the caller to ask,
    /// [`process::survivors`]).
    fn leases(&self) -> Vec<(String, process::ProcessIdentity)> {
        Vec::new()
    }

    /// The runtime to record (and stop by) for a process found through its lease, or
    /// `None` when this executor cannot manage it.
    fn leased_runtime(&self, address: &str, id: process::ProcessIdentity) -> Option<Runtime> {
        let _ = (address, id);
        None
    }

    /// After [`start`](Executor::start) was recorded: wait until the process is
    /// confirmed running and return its complete runtime (e.g. the SLURM step id).
    fn confirm<'a>(&'a self, started: &'a Started) -> BoxFuture<'a, Result<Runtime, ExecError>> {
        Box::pin(async move { Ok(started.runtime.clone()) })
    }
}
