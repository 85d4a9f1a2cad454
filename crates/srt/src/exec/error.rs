//! What an executor reports when it cannot do what apply, plan or destroy asked:
//! [`ExecError`], one variant per failure, each a miette diagnostic with its own code.
//!
//! The messages are the ones users (and the end-to-end tests) read in apply's progress
//! lines and summaries, which render these errors as text; a failure of the scheduler
//! carries the scheduler's own words ([`ExecError::SchedulerFailed`]). Failures that add
//! context to another (the command that failed, the job that was cancelled after it)
//! hold the inner error as `cause` and print it inline, so a report shows one sentence
//! rather than the same words twice.

use super::process::ProcessError;
use std::path::PathBuf;
use std::time::Duration;

/// A failure reported by an executor.
#[derive(Debug, thiserror::Error, miette::Diagnostic)]
pub enum ExecError {
    /// A local process could not be spawned, signalled or killed (see [`ProcessError`]).
    #[error(transparent)]
    #[diagnostic(transparent)]
    Process(#[from] ProcessError),

    /// A file a process needs (a generated config, a log directory) could not be
    /// written.
    #[error("cannot {action} {}: {error}", path.display())]
    #[diagnostic(
        code(srt::exec::file),
        help("check that the state directory is writable")
    )]
    File {
        /// `create` or `write`.
        action: &'static str,
        /// The file or directory.
        path: PathBuf,
        /// The underlying error.
        error: std::io::Error,
    },

    /// A port of a process is already bound where it is to run.
    #[error("port {port} ({kind}) of `{address}` is already in use {place}")]
    #[diagnostic(code(srt::exec::port_taken))]
    PortTaken {
        /// The port.
        port: u16,
        /// Its kind (`http`, `nixl`, ...).
        kind: String,
        /// The process it belongs to.
        address: String,
        /// `on this host`, `on node n1`.
        place: String,
        /// What to do: the recipe key that moves the port, or how to find its holder
        /// ([`ExecError::port_taken`]).
        #[help]
        hint: String,
    },

    /// A process of an earlier launch of the same resource still runs: a new launch
    /// would leave its lease naming two processes.
    #[error(
        "a process of an earlier launch of `{address}` still runs (pid {}); the next plan shows it and apply stops it",
        list(pids)
    )]
    #[diagnostic(code(srt::exec::earlier_launch))]
    EarlierLaunchRuns {
        /// The resource.
        address: String,
        /// What of it still runs.
        pids: Vec<u32>,
    },

    /// A recorded process that srt cannot prove is its own: it is never signalled.
    #[error(
        "process {pid} was recorded without a lease (an older srt) and does not carry {marker}={deployment}: not signalled; stop it by hand if it is this deployment's"
    )]
    #[diagnostic(code(srt::exec::not_ours))]
    NotOurs {
        /// The recorded pid.
        pid: u32,
        /// The marker variable looked for.
        marker: &'static str,
        /// The deployment it should name.
        deployment: String,
    },

    /// A recorded process that still runs but whose lease is gone, and whose environment
    /// does not prove it is this deployment's: it is never signalled, and stays recorded.
    #[error(
        "process {pid} still runs but its lease {} is gone, and its environment does not show it is this deployment's: not signalled, kept in state",
        lease.display()
    )]
    #[diagnostic(
        code(srt::exec::unproven),
        help("if it is this deployment's, stop it by hand (`kill -TERM -{pid}`: its process group), then run the command again; srt forgets it once it is gone")
    )]
    Unproven {
        /// The recorded pid.
        pid: u32,
        /// Where its lease was.
        lease: PathBuf,
    },

    /// The recipe places more GPUs on a node than the cluster's nodes have.
    #[error(
        "the recipe places {recipe} GPUs per node but the cluster profile says nodes have {profile} (`gpus_per_node`)"
    )]
    #[diagnostic(code(srt::exec::gpus_per_node))]
    TooManyGpus {
        /// The recipe's `resources.gpus_per_node`.
        recipe: u32,
        /// The profile's `gpus_per_node`.
        profile: u32,
    },

    /// A multi-node recipe on the local executor whose nodes need more GPUs than this
    /// host has: their processes would share devices.
    #[error(
        "the recipe's {nodes} nodes of {gpus_per_node} GPUs run on this one host as devices 0-{last}, but it has {have} GPU(s) ({found})"
    )]
    #[diagnostic(
        code(srt::exec::host_gpus),
        help("run it with --simulate, or on a cluster (--cluster); set SRT_LOCAL_GPUS=N if the host has N GPUs that srt did not find")
    )]
    HostGpus {
        /// Nodes of the plan.
        nodes: usize,
        /// The recipe's GPUs per node.
        gpus_per_node: u32,
        /// The highest device index the nodes map to.
        last: u32,
        /// GPUs found on the host.
        have: u32,
        /// Where they were counted.
        found: String,
    },

    /// State recorded by another executor, which this one cannot manage.
    #[error(
        "deployment `{deployment}` runs on SLURM (job {job}) but no SLURM cluster profile is in use; pass it with --cluster FILE (or SRT_CLUSTER)"
    )]
    #[diagnostic(code(srt::exec::foreign_state))]
    ForeignState {
        /// The deployment.
        deployment: String,
        /// The job its state records.
        job: u64,
    },

    /// A process to reload in place is not running.
    #[error("`{address}` is not running: it cannot be reloaded in place")]
    #[diagnostic(code(srt::exec::not_running))]
    NotRunning {
        /// The resource.
        address: String,
    },
    /// This executor cannot reload processes in place.
    #[error("this executor cannot reload `{address}` in place")]
    #[diagnostic(code(srt::exec::no_reload))]
    NoReload {
        /// The resource.
        address: String,
    },
    /// The executor has no allocation to create (a bug: the graph has none then).
    #[error("this executor has no allocation")]
    #[diagnostic(code(srt::exec::no_allocation))]
    NoAllocation,

    /// A process or check needs the allocation before it exists or was read back.
    #[error("the SLURM allocation is not known yet")]
    #[diagnostic(code(srt::exec::allocation_unknown))]
    AllocationUnknown,

    /// A process placed on a node the allocation does not have.
    #[error("`{address}` runs on node {node} but the allocation has {nodes} node(s)")]
    #[diagnostic(code(srt::exec::no_such_node))]
    NoSuchNode {
        /// The process.
        address: String,
        /// Its node index.
        node: usize,
        /// The allocation's node count.
        nodes: usize,
    },

    /// A scheduler command could not be run at all.
    #[error("cannot run `{program}`: {error} (is SLURM installed and on PATH?)")]
    #[diagnostic(code(srt::exec::scheduler_missing))]
    SchedulerMissing {
        /// `sbatch`, `squeue`, ...
        program: String,
        /// Why it could not be started.
        error: std::io::Error,
    },

    /// A scheduler command did not finish in time (it was killed).
    #[error("`{program}` did not answer within {}s", timeout.as_secs())]
    #[diagnostic(code(srt::exec::scheduler_timeout))]
    SchedulerTimeout {
        /// The command.
        program: String,
        /// How long it was given.
        timeout: Duration,
    },

    /// A scheduler command could not reach the scheduler: `slurmctld` or `munged` is
    /// not running (or not reachable from here). Nothing was submitted.
    #[error(
        "the SLURM scheduler is not reachable: `{program}` {status}: {words}; start munged and slurmctld (the project's test cluster on this machine: `scripts/slurm-cluster.sh start`, as root)"
    )]
    #[diagnostic(code(srt::exec::scheduler_unreachable))]
    SchedulerUnreachable {
        /// The command.
        program: String,
        /// `exit 1`.
        status: String,
        /// What it printed.
        words: String,
    },

    /// A scheduler command failed: its exit status and its own words (stderr, then
    /// stdout, one line).
    #[error("`{program}` {status}: {words}")]
    #[diagnostic(code(srt::exec::scheduler))]
    SchedulerFailed {
        /// The command.
        program: String,
        /// `exit 1`, `killed`.
        status: String,
        /// What it printed.
        words: String,
    },

    /// What the executor was doing when a scheduler command failed.
    #[error("{context}: {cause}")]
    #[diagnostic(code(srt::exec::scheduler))]
    During {
        /// `sbatch refused the allocation`, `cancelling job 12`, ...
        context: String,
        /// The failure.
        cause: Box<ExecError>,
    },

    /// `sbatch` succeeded but printed no job id.
    #[error("sbatch printed no job id: {output:?}")]
    #[diagnostic(code(srt::exec::allocation))]
    NoJobId {
        /// What it printed.
        output: String,
    },

    /// The allocation is pending for a reason the scheduler will not resolve.
    #[error(
        "job {job} cannot start: the scheduler keeps it pending with reason `{reason}` ({why})"
    )]
    #[diagnostic(code(srt::exec::allocation))]
    AllocationHopeless {
        /// The job.
        job: u64,
        /// The scheduler's reason code.
        reason: String,
        /// What the code means.
        why: &'static str,
    },

    /// The allocation is still pending after the profile's timeout.
    #[error(
        "job {job} is still pending after {}s (scheduler reason: `{reason}`); raise allocation_timeout_seconds in the cluster profile to wait longer",
        waited.as_secs()
    )]
    #[diagnostic(code(srt::exec::allocation))]
    AllocationTimeout {
        /// The job.
        job: u64,
        /// How long srt waited.
        waited: Duration,
        /// The scheduler's pending reason.
        reason: String,
    },

    /// The allocation ended (or vanished) before it ran.
    #[error("job {job} {} (see {})", ended_text(ended), log.display())]
    #[diagnostic(code(srt::exec::allocation))]
    AllocationEnded {
        /// The job.
        job: u64,
        /// Its final state and reason, when the scheduler still lists it.
        ended: Option<(String, String)>,
        /// Its batch output.
        log: PathBuf,
    },

    /// The job is not (or no longer) usable as the allocation.
    #[error("job {job} {detail}")]
    #[diagnostic(code(srt::exec::allocation))]
    JobUnusable {
        /// The job.
        job: u64,
        /// `is not known to SLURM`, `is not running (...)`, `has 1 node(s) ...`.
        detail: String,
    },

    /// The adopted allocation (`SLURM_JOB_ID`) cannot be used.
    #[error("cannot use the allocation of SLURM_JOB_ID={job}: {cause}")]
    #[diagnostic(code(srt::exec::allocation))]
    Adopted {
        /// The job.
        job: u64,
        /// Why.
        cause: Box<ExecError>,
    },

    /// Creating the allocation failed and the job srt submitted was cancelled.
    #[error("{cause}; cancelled job {job}")]
    #[diagnostic(code(srt::exec::allocation))]
    AllocationCancelled {
        /// The job.
        job: u64,
        /// What failed.
        cause: Box<ExecError>,
    },

    /// Creating the allocation failed and cancelling the job failed too.
    #[error("{cause}; {cancel}")]
    #[diagnostic(code(srt::exec::allocation))]
    AllocationLeft {
        /// What failed.
        cause: Box<ExecError>,
        /// Why the job could not be cancelled.
        cancel: Box<ExecError>,
    },

    /// A node of the allocation does not offer what the recipe needs, or its address
    /// cannot be learnt.
    #[error("{detail}")]
    #[diagnostic(code(srt::exec::node))]
    Node {
        /// The node.
        node: String,
        /// What is wrong (naming the node).
        detail: String,
    },

    /// A launched step's job is no longer running.
    #[error("job {job} is not running any more{tail}")]
    #[diagnostic(code(srt::exec::step))]
    JobGone {
        /// The job.
        job: u64,
        /// The step's log tail, if any (starts with a newline).
        tail: String,
    },

    /// A step's `srun` client exited before the step was seen.
    #[error("srun exited: step `{name}` ended at once or never started{tail}")]
    #[diagnostic(code(srt::exec::step))]
    StepEnded {
        /// The step name.
        name: String,
        /// Its log tail.
        tail: String,
    },

    /// The `srt` binary the nodes' agents run is not where srt looks for it.
    #[error("cannot find the `srt` binary for the allocation's node agents")]
    #[diagnostic(
        code(srt::exec::agent_binary),
        help("run srt from its installed path (the nodes must see it at the same path)")
    )]
    NoAgentBinary,

    /// A node's agent did not say hello in time, or stopped saying it.
    #[error("the srt agent of node {node} in job {job} {detail}; its output is in {}", log.display())]
    #[diagnostic(
        code(srt::exec::agent),
        help("the nodes must see the state directory and the `srt` binary at the paths srt runs with")
    )]
    AgentSilent {
        /// The node.
        node: String,
        /// The allocation.
        job: u64,
        /// What it did or did not do.
        detail: String,
        /// The allocation's batch output (where the agents write).
        log: PathBuf,
    },

    /// A node's agent could not launch a step's client.
    #[error("the srt agent of node {node} could not launch `{name}`: {error}")]
    #[diagnostic(code(srt::exec::agent))]
    AgentLaunch {
        /// The step name.
        name: String,
        /// The node.
        node: String,
        /// The agent's words.
        error: String,
    },

    /// A step did not appear in `squeue` in time.
    #[error("step `{name}` did not start within {}s{last_error}{tail}", timeout.as_secs())]
    #[diagnostic(
        code(srt::exec::step),
        help("raise step_start_timeout_seconds in the cluster profile if the cluster is slow to start steps")
    )]
    StepNotStarted {
        /// The step name.
        name: String,
        /// The bound.
        timeout: Duration,
        /// ` (last scheduler error: ...)` when the scheduler failed meanwhile.
        last_error: String,
        /// Its log tail.
        tail: String,
    },

    /// `scancel` of a batch of steps failed.
    #[error("scancel: {said}")]
    #[diagnostic(code(srt::exec::scheduler))]
    Scancel {
        /// What it said.
        said: String,
    },

    /// A step survived `scancel`.
    #[error("step {target} is still running {}s after scancel{said}", waited.as_secs())]
    #[diagnostic(code(srt::exec::step))]
    StepStillRunning {
        /// `J.S`.
        target: String,
        /// How long srt waited after the last scancel.
        waited: Duration,
        /// ` (what scancel said)`, when it said anything.
        said: String,
    },

    /// The caller could not record what the executor reported (the state save behind
    /// [`super::OnSubmitted`]).
    #[error("{0}")]
    #[diagnostic(code(srt::exec::record))]
    Record(String),
}

fn ended_text(ended: &Option<(String, String)>) -> String {
    match ended {
        Some((state, reason)) => {
            format!("ended before it ran: state {state}, reason `{reason}`")
        }
        None => "disappeared before it ran".to_string(),
    }
}

fn list(pids: &[u32]) -> String {
    pids.iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

impl ExecError {
    /// A port of `address` is bound already `place`, with what to do about it: the
    /// public port is the recipe's `frontend.port`; the others srt counts from each
    /// kind's base on every host, so the way out is to stop what holds it.
    pub fn port_taken(port: u16, kind: &str, address: &str, place: String) -> Self {
        let find = format!("`ss -ltnp 'sport = :{port}'` names the process that holds it");
        let hint = match kind {
            crate::ports::PUBLIC => format!(
                "the public port is `frontend.port` in the recipe: pick a free one, or stop what listens on it ({find})"
            ),
            crate::ports::DISCOVERY => format!(
                "the worker-discovery port is fixed at {}; stop what listens on it ({find})",
                crate::ports::DISCOVERY_PORT
            ),
            _ => format!(
                "srt takes `{kind}` ports in order from the kind's base on each host (no recipe key moves them): stop what listens on it ({find}), or destroy the deployment that holds it"
            ),
        };
        ExecError::PortTaken {
            port,
            kind: kind.to_string(),
            address: address.to_string(),
            place,
            hint,
        }
    }

    /// Wrap a failure with what the executor was doing.
    pub(crate) fn during(context: impl Into<String>, cause: ExecError) -> ExecError {
        ExecError::During {
            context: context.into(),
            cause: Box::new(cause),
        }
    }

    /// The scheduler's own words, when this is (or wraps) a failed scheduler command.
    pub fn scheduler_words(&self) -> Option<&str> {
        match self {
            ExecError::SchedulerFailed { words, .. }
            | ExecError::SchedulerUnreachable { words, .. } => Some(words),
            ExecError::During { cause, .. }
            | ExecError::Adopted { cause, .. }
            | ExecError::AllocationCancelled { cause, .. }
            | ExecError::AllocationLeft { cause, .. } => cause.scheduler_words(),
            _ => None,
        }
    }
}
