//! The SLURM executor: one allocation (an `sbatch` job holding the nodes), every process
//! a named job step in it, launched on its node by srt's agent there.
//!
//! * **Allocation.** `sbatch --nodes N --gres=gpu:G --job-name srt-<deployment>
//!   --wrap 'exec srun --overlap --ntasks-per-node 1 ... srt slurm-agent ...'`: the
//!   batch script runs one node agent per node ([`super::agent`]) as the allocation's
//!   first step, and the job lives as long as they do. (Or the job of `SLURM_JOB_ID`,
//!   adopted and never cancelled: srt starts the agents' step in it.) srt waits for
//!   RUNNING (bounded; a pending reason that cannot resolve, like `PartitionConfig`,
//!   fails at once), reads the node list (`scontrol show hostnames`) and waits for
//!   every agent's hello, which gives its node's IPv4 address on the profile's
//!   interface and the GPUs SLURM exposes there. Job id, nodes and IPs are recorded in
//!   state; `<nodeN-ip>` placeholders resolve against them.
//! * **Steps.** `srun --jobid J --overlap --nodes 1 --ntasks 1 --nodelist NODE
//!   --job-name <deployment>.<address> --export=ALL -- argv`: srt hands the command and
//!   its environment to the agent of the step's first node (a private file on the
//!   shared state directory, staged before the launch is recorded and handed over
//!   after), which starts the `srun` client there, detached. The environment reaches
//!   the step through the client's environment, never a command line. The step id is
//!   found by name in `squeue --steps` and recorded with the launch's id. Output goes
//!   through the client into the resource's log file. Nothing of a step runs on the
//!   machine running srt, which may go away while the deployment serves.
//! * **Stop.** `scancel --ctld --signal=TERM J.S`, wait up to the grace period, then
//!   `scancel --ctld J.S`. A launch whose step was never listed is taken back from the
//!   agent, or its client ended by it. The deployment's allocation is cancelled with
//!   `scancel J` unless it was adopted (then srt stops the agents it started).
//! * **Refresh.** `squeue -j J` (job state) and `squeue --steps -j J` (live steps), no
//!   accounting needed; a missing step, a missing job, or a job without its agents is
//!   drift. Snapshots are reused for a second so gates polling every process do not
//!   hammer the controller.
//!
//! * **Scheduler commands** (`sbatch`, `squeue`, `scontrol`, `scancel`) run through
//!   `tokio::process` under `tokio::time::timeout` (60 s; a command that does not
//!   answer is killed): waiting for the scheduler never holds one of the runtime's two
//!   threads. So every [`Executor`] method that may ask the scheduler or wait for an
//!   agent is async: `allocate`, `confirm`, `stop`, and also `observe`, `check_ports`
//!   and `restore`; the synchronous callers (plan's refresh, `srt status` and `srt
//!   list`, the restore before a command) drive them on a current-thread runtime of
//!   their own (`workflow::block_on`). The one synchronous method that does work,
//!   `start`, runs no scheduler command: it stages the launch for the agent
//!   (milliseconds, under apply's state mutex), and `confirm` then hands it over and
//!   waits for the step without blocking.
//!
//! Why agents rather than a client per step where srt runs: see `docs/slurm.md`.

use super::local::{mark_env, write_files};
use super::process::{self, Liveness, ProcessIdentity, ProcessSpec};
use super::{ExecError, Executor, OnSubmitted, Started};
use crate::cluster::{
    slurm_duration, slurm_time, Allocations, ContainerRuntime, GpuRequest, SlurmProfile,
};
use crate::launch::render::command_lines;
use crate::launch::HostLayout;
use crate::launch::{AllocationSpec, Bindings, LaunchPlan, LaunchProcess, Ranks};
use crate::plan::Observation;
use crate::state::{Client, Runtime, State, Status};
use futures::future::BoxFuture;
use serde_json::{json, Value};
use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Mutex, RwLock};
use std::time::{Duration, Instant};

/// How long after the allocation runs its agents have to say hello.
const AGENT_WAIT: Duration = Duration::from_secs(60);
/// An agent whose last hello is older than this is not running.
const AGENT_SILENT: Duration = Duration::from_secs(10);

/// The longest a single scheduler command may take.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(60);
/// How long a `squeue` snapshot is reused by refresh and gate liveness checks.
const SNAPSHOT_TTL: Duration = Duration::from_secs(1);
/// How long to wait for a cancelled step or job to leave `squeue`.
const GONE_WAIT: Duration = Duration::from_secs(30);
/// The least time between two reads of the scheduler: however many steps wait for one
/// (confirmed, stopped), srt asks it at most this often.
const READ_GAP: Duration = Duration::from_millis(200);

/// How long the first stop of a wave waits for the others, to signal them with one
/// `scancel`.
const CANCEL_WINDOW: Duration = Duration::from_millis(20);

/// A step waiting to be signalled, and who to tell how it went.
struct Cancel {
    target: String,
    done: tokio::sync::oneshot::Sender<Result<(), String>>,
}

/// How long a step's `srun` client may linger once its step is gone.
const CLIENT_WAIT: Duration = Duration::from_secs(5);
/// Pending reasons the scheduler will not resolve by itself: fail at once instead of
/// waiting out the timeout. The text explains the reason code.
const HOPELESS: &[(&str, &str)] = &[
    (
        "PartitionConfig",
        "the request does not fit the partition: more nodes, GPUs or time than it offers",
    ),
    (
        "PartitionNodeLimit",
        "more nodes than the partition allows per job",
    ),
    (
        "PartitionTimeLimit",
        "a time limit above the partition's maximum",
    ),
    ("PartitionInactive", "the partition is inactive"),
    ("BadConstraints", "constraints no node satisfies"),
    ("InvalidAccount", "the account is not valid"),
    ("InvalidQOS", "the QOS is not valid"),
    (
        "AccountNotAllowed",
        "the account may not use this partition",
    ),
    ("QOSNotAllowed", "the QOS may not use this partition"),
    (
        "DependencyNeverSatisfied",
        "a dependency that can never be satisfied",
    ),
    (
        "QOSMaxNodePerJobLimit",
        "more nodes than the QOS allows per job",
    ),
    ("QOSMaxGRESPerJob", "more GPUs than the QOS allows per job"),
    (
        "QOSMaxWallDurationPerJobLimit",
        "a time limit above the QOS maximum",
    ),
    (
        "AssocMaxNodesPerJobLimit",
        "more nodes than the association allows per job",
    ),
    (
        "AssocMaxWallDurationPerJobLimit",
        "a time limit above the association's maximum",
    ),
];

/// What srt knows about an allocation once it exists.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Facts {
    job_id: u64,
    /// The plan nodes it holds, in the order of `nodes`.
    slots: Vec<usize>,
    /// Their hosts.
    nodes: Vec<String>,
    /// Their IPv4 addresses.
    ips: Vec<String>,
    adopted: bool,
}

impl Facts {
    /// The host of plan node `n`, when this allocation holds it.
    fn host(&self, n: usize) -> Option<&String> {
        let at = self.slots.iter().position(|&s| s == n)?;
        self.nodes.get(at)
    }
}

/// One look at a job in `squeue`.
#[derive(Clone, Debug)]
struct Snapshot {
    at: Instant,
    /// Job state (`RUNNING`, ...); `None` when the scheduler does not list the job.
    state: Option<String>,
    /// Why it is in that state (`Resources`, `None`, ...).
    reason: String,
    /// What is left of its time limit when looked at; `None` without one.
    time_left: Option<Duration>,
    /// Its time limit; `None` without one.
    time_limit: Option<Duration>,
    /// Live steps: (step id, name).
    steps: Vec<(u64, String)>,
}

impl Snapshot {
    /// What is left of the job's time limit now.
    fn left(&self) -> Option<Duration> {
        self.time_left.map(|l| l.saturating_sub(self.at.elapsed()))
    }

    fn step_by_name(&self, name: &str) -> Option<u64> {
        // A name is reused only after its step was stopped; the newest one is ours.
        self.steps
            .iter()
            .filter(|(_, n)| n == name)
            .map(|(id, _)| *id)
            .max()
    }
}

/// Runs processes as job steps of one SLURM allocation.
pub struct SlurmExecutor {
    profile: SlurmProfile,
    deployment: String,
    dir: PathBuf,
    gpus_per_node: u32,
    gpu_type: Option<String>,
    simulate: bool,
    adopt: Option<u64>,
    /// The allocations known, by address.
    facts: RwLock<BTreeMap<String, Facts>>,
    /// Allocations' earlier jobs that processes not moved yet may still run in (their
    /// replacements were created first): how those processes' addresses resolve.
    deposed: RwLock<Vec<Facts>>,
    snapshots: Mutex<HashMap<u64, Snapshot>>,
    /// The batch output of each job srt submitted or read back, by job id.
    batch_logs: Mutex<HashMap<u64, PathBuf>>,
    /// Held while the scheduler is read, with when the last read began: a caller that
    /// needs a fresh look while another reads takes that one's, and reads are at least
    /// [`READ_GAP`] apart.
    reading: tokio::sync::Mutex<Option<Instant>>,
    /// Steps to signal, gathered for one `scancel` of them all, by signal.
    cancels: Mutex<HashMap<&'static str, Vec<Cancel>>>,
    /// Launches this executor staged and has not handed over yet (by launch id): on
    /// their way while it runs; one staged by an apply that is gone never happens.
    staged: Mutex<BTreeSet<String>>,
}

/// A launch srt hands to the agent of a step's first node (what a step runtime records).
#[derive(Clone, Copy, Debug)]
struct Launch<'a> {
    job: u64,
    node: &'a str,
    address: &'a str,
    id: &'a str,
}

impl SlurmExecutor {
    /// An executor for `deployment` whose files live under `dir` (`<state dir>/<name>`,
    /// on a filesystem the nodes share), needing `gpus_per_node` GPUs on each node. `adopt` is the job id of an existing allocation to use
    /// (`SLURM_JOB_ID`); `simulate` when the processes it is handed run the simulator
    /// (a mode hashed into every process spec).
    pub fn new(
        profile: SlurmProfile,
        deployment: &str,
        dir: &Path,
        gpus_per_node: u32,
        simulate: bool,
        adopt: Option<u64>,
    ) -> Self {
        let dir = if dir.is_absolute() {
            dir.to_path_buf()
        } else {
            std::env::current_dir()
                .map(|c| c.join(dir))
                .unwrap_or_else(|_| dir.to_path_buf())
        };
        SlurmExecutor {
            profile,
            deployment: deployment.to_string(),
            dir,
            gpus_per_node,
            gpu_type: None,
            simulate,
            adopt,
            facts: RwLock::new(BTreeMap::new()),
            deposed: RwLock::new(Vec::new()),
            snapshots: Mutex::new(HashMap::new()),
            batch_logs: Mutex::new(HashMap::new()),
            reading: tokio::sync::Mutex::new(None),
            cancels: Mutex::new(HashMap::new()),
            staged: Mutex::new(BTreeSet::new()),
        }
    }

    /// Request GPUs of this model (the recipe's `resources.gpu_type`):
    /// `--gres gpu:TYPE:G` or `--gpus-per-node TYPE:G`.
    pub fn with_gpu_type(mut self, gpu_type: Option<String>) -> Self {
        self.gpu_type = gpu_type;
        self
    }

    /// The log file of a resource.
    pub fn log_path(&self, address: &str) -> PathBuf {
        crate::state::log_file(&self.dir, address)
    }

    /// The allocation holding plan node `n`.
    fn holding(&self, n: usize) -> Result<Facts, ExecError> {
        self.facts
            .read()
            .expect("facts lock")
            .values()
            .find(|f| f.slots.contains(&n))
            .cloned()
            .ok_or(ExecError::AllocationUnknown)
    }

    /// The hosts of `nodes`, all in one allocation (a step spans one job's nodes), and
    /// that allocation; `address` names the process asking.
    fn placed(&self, address: &str, nodes: &[usize]) -> Result<(Facts, Vec<String>), ExecError> {
        let first = nodes.first().copied().unwrap_or(0);
        let facts = self.holding(first)?;
        let hosts = nodes
            .iter()
            .map(|&n| {
                facts.host(n).cloned().ok_or_else(|| ExecError::NoSuchNode {
                    address: address.to_string(),
                    node: n,
                    nodes: facts.nodes.len(),
                })
            })
            .collect::<Result<Vec<String>, ExecError>>()?;
        Ok((facts, hosts))
    }

    /// Learn allocation `address`: the job it had before, if another, is deposed.
    fn set_facts(&self, address: &str, facts: Facts) {
        let before = self
            .facts
            .write()
            .expect("facts lock")
            .insert(address.to_string(), facts.clone());
        if let Some(old) = before.filter(|b| b.job_id != facts.job_id) {
            self.depose(old);
        }
    }

    fn depose(&self, facts: Facts) {
        let mut deposed = self.deposed.write().expect("deposed lock");
        if !deposed.iter().any(|d| d.job_id == facts.job_id) {
            deposed.push(facts);
        }
    }

    /// Forget the allocation that is job `job`.
    fn forget_job(&self, job: u64) {
        self.facts
            .write()
            .expect("facts lock")
            .retain(|_, f| f.job_id != job);
        self.deposed
            .write()
            .expect("deposed lock")
            .retain(|f| f.job_id != job);
    }

    fn invalidate(&self, job: u64) {
        self.snapshots.lock().expect("snapshots").remove(&job);
    }

    /// `squeue` of `job`, reused for [`SNAPSHOT_TTL`] unless `fresh`. A look reads
    /// every job of the deployment srt knows of at once, in two scheduler calls however
    /// many there are: refresh and gates cost the controller the same for one
    /// allocation or hundreds.
    ///
    /// A fresh look is one taken after the call began; callers that want one while
    /// another reads wait for that read and share it, so that steps confirmed or stopped
    /// together (a launch batch, a roll, a destroy) cost the same few reads.
    async fn snapshot(&self, job: u64, fresh: bool) -> Result<Snapshot, ExecError> {
        let asked = Instant::now();
        let young = |s: &Snapshot| match fresh {
            true => s.at >= asked,
            false => s.at.elapsed() < SNAPSHOT_TTL,
        };
        let cached = |young: &dyn Fn(&Snapshot) -> bool| {
            let cache = self.snapshots.lock().expect("snapshots");
            cache.get(&job).filter(|s| young(s)).cloned()
        };
        if let Some(s) = cached(&young) {
            return Ok(s);
        }
        let mut last = self.reading.lock().await;
        // Read by whoever held the lock meanwhile.
        if let Some(s) = cached(&young) {
            return Ok(s);
        }
        if let Some(wait) = last.and_then(|t| READ_GAP.checked_sub(t.elapsed())) {
            tokio::time::sleep(wait).await;
        }
        *last = Some(Instant::now());
        let mut jobs = self.known_jobs();
        jobs.insert(job);
        let looks = read_jobs(&jobs).await?;
        let mut cache = self.snapshots.lock().expect("snapshots");
        cache.extend(looks);
        Ok(cache[&job].clone())
    }

    /// The live steps of `job`, as a fresh look lists them.
    async fn live_steps(&self, job: u64) -> Result<Vec<(u64, String)>, ExecError> {
        Ok(self.snapshot(job, true).await?.steps)
    }

    /// `scancel --ctld [--signal=SIGNAL] TARGET`, sent with the other targets asked
    /// within [`CANCEL_WINDOW`] as one command: stopping many steps at once (a roll, a
    /// destroy) costs the controller one call per wave, not one per step.
    async fn scancel(&self, signal: Option<&'static str>, target: String) -> Result<(), ExecError> {
        let key = signal.unwrap_or("KILL");
        let (tx, rx) = tokio::sync::oneshot::channel();
        let leads = {
            let mut queue = self.cancels.lock().expect("cancels");
            let waiting = queue.entry(key).or_default();
            waiting.push(Cancel { target, done: tx });
            waiting.len() == 1
        };
        if leads {
            tokio::time::sleep(CANCEL_WINDOW).await;
            let batch = self
                .cancels
                .lock()
                .expect("cancels")
                .remove(key)
                .unwrap_or_default();
            let mut args = vec!["--ctld".to_string()];
            if let Some(s) = signal {
                args.push(format!("--signal={s}"));
            }
            args.extend(batch.iter().map(|c| c.target.clone()));
            let result = run("scancel", &args).await.map(|_| ());
            // scancel goes on past a target it cannot signal (a step already gone) but
            // does not say which: each is then sent alone, for its own answer.
            let alone = result.is_err() && batch.len() > 1;
            let flags: Vec<String> = args
                .iter()
                .filter(|a| a.starts_with("--"))
                .cloned()
                .collect();
            for c in batch {
                let own = match alone {
                    true => {
                        let one = [flags.clone(), vec![c.target.clone()]].concat();
                        run("scancel", &one)
                            .await
                            .map(|_| ())
                            .map_err(|e| e.to_string())
                    }
                    false => result.as_ref().map(|_| ()).map_err(ToString::to_string),
                };
                let _ = c.done.send(own);
            }
        }
        match rx.await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(said)) => Err(ExecError::Scancel { said }),
            Err(_) => Err(ExecError::Scancel {
                said: "the batch it was in was dropped".into(),
            }),
        }
    }

    /// The jobs srt knows of this deployment: its allocations', their deposed ones,
    /// and those it looked at.
    fn known_jobs(&self) -> BTreeSet<u64> {
        let facts = self.facts.read().expect("facts lock");
        let deposed = self.deposed.read().expect("deposed lock");
        let looked = self.snapshots.lock().expect("snapshots");
        facts
            .values()
            .chain(deposed.iter())
            .map(|f| f.job_id)
            .chain(looked.keys().copied())
            .collect()
    }

    fn step_name(&self, address: &str) -> String {
        step_name(&self.deployment, address)
    }

    /// The agent's command, with the `srt` the nodes run (the running one, or the one
    /// beside a test binary) and this deployment's agents' directory.
    fn agent_argv(&self) -> Result<Vec<String>, ExecError> {
        let srt = super::local::next_to_srt("srt").ok_or(ExecError::NoAgentBinary)?;
        Ok(agent_argv(
            &srt.display().to_string(),
            &self.agents_dir().display().to_string(),
            &self.profile,
        ))
    }

    fn agents_dir(&self) -> PathBuf {
        self.dir.join(super::agent::AGENTS_DIR)
    }

    fn node_dir(&self, job: u64, node: &str) -> PathBuf {
        super::agent::node_dir(&self.dir, job, node)
    }

    /// The runtime of a step whose `srun` client a lease names, for a launch that was
    /// never recorded: stopping it cancels the step by its name, then ends the client.
    fn step_runtime(&self, address: &str, client: ProcessIdentity) -> Runtime {
        // Only an adopted allocation has clients where srt runs (its agents').
        let job_id = self
            .facts
            .read()
            .expect("facts lock")
            .values()
            .find(|f| f.adopted)
            .map_or(0, |f| f.job_id);
        Runtime::Slurm {
            job_id,
            step_id: None,
            step_name: Some(self.step_name(address)),
            nodes: Vec::new(),
            node_ips: Vec::new(),
            adopted: false,
            client: Some(client_of(client)),
            launch: None,
            slots: Vec::new(),
        }
    }

    /// The spec of an allocation holding plan nodes `nodes`: what is asked of the
    /// scheduler for it.
    fn allocation_spec(&self, nodes: &[usize]) -> Value {
        json!({
            "adopt_job_id": self.adopt,
            "nodes": nodes,
            "gpus_per_node": self.gpus_per_node,
            "gpu_type": self.gpu_type,
            "gpu_request": self.profile.gpu_request.name(),
            "partition": self.profile.partition,
            "account": self.profile.account,
            "time_limit": self.profile.time_limit,
            "sbatch_options": self.profile.sbatch_options,
            "network_interface": self.profile.network_interface,
        })
    }

    /// Submit allocation `address` of `nodes` nodes; returns its job id.
    async fn submit(&self, address: &str, nodes: usize) -> Result<u64, ExecError> {
        let log = self.log_path(address);
        if let Some(dir) = log.parent() {
            crate::files::private_dir(dir).map_err(|error| ExecError::File {
                action: "create",
                path: dir.to_path_buf(),
                error,
            })?;
        }
        // The batch output of an earlier allocation is kept beside, never shown as
        // this one's: a submission that fails writes nothing.
        match std::fs::rename(&log, log.with_extension("previous.log")) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(error) => {
                return Err(ExecError::File {
                    action: "move aside",
                    path: log,
                    error,
                })
            }
        }
        let args = sbatch_args(
            &self.profile,
            &self.deployment,
            nodes,
            &gpu_count(self.gpu_type.as_deref(), self.gpus_per_node),
            &log.display().to_string(),
            &self.agent_argv()?,
        );
        let out = run("sbatch", &args).await.map_err(|e| match e {
            ExecError::SchedulerUnreachable { .. } => {
                ExecError::during("cannot submit the allocation", e)
            }
            e => ExecError::during("sbatch refused the allocation", e),
        })?;
        let id = out.trim().split(';').next().unwrap_or_default();
        let job = id.parse::<u64>().map_err(|_| ExecError::NoJobId {
            output: out.trim().to_string(),
        })?;
        self.batch_logs.lock().expect("batch logs").insert(job, log);
        Ok(job)
    }

    /// Wait until `job` (allocation `address`) runs, bounded by the profile's
    /// allocation timeout.
    async fn wait_running(&self, address: &str, job: u64) -> Result<(), ExecError> {
        let timeout = Duration::from_secs(self.profile.allocation_timeout_seconds);
        let deadline = Instant::now() + timeout;
        let mut interval = Duration::from_millis(100);
        loop {
            // A scheduler that does not answer for a moment is waited out like a
            // pending job, within the same bound. Allocations waited for together
            // share each look.
            let state = match self.snapshot(job, true).await {
                Ok(s) => s.state.map(|state| JobInfo {
                    state,
                    reason: s.reason,
                    nodes: String::new(),
                }),
                Err(e) if Instant::now() >= deadline => return Err(e),
                Err(_) => {
                    tokio::time::sleep(interval).await;
                    continue;
                }
            };
            match state {
                Some(j) if j.state == "RUNNING" => return Ok(()),
                Some(j) if matches!(j.state.as_str(), "PENDING" | "CONFIGURING") => {
                    if let Some((_, why)) = HOPELESS.iter().find(|(r, _)| *r == j.reason) {
                        return Err(ExecError::AllocationHopeless {
                            job,
                            reason: j.reason,
                            why,
                        });
                    }
                    if Instant::now() >= deadline {
                        return Err(ExecError::AllocationTimeout {
                            job,
                            waited: timeout,
                            reason: j.reason,
                        });
                    }
                }
                Some(j) => {
                    return Err(ExecError::AllocationEnded {
                        job,
                        ended: Some((j.state, j.reason)),
                        log: self.log_path(address),
                    })
                }
                None => {
                    return Err(ExecError::AllocationEnded {
                        job,
                        ended: None,
                        log: self.log_path(address),
                    })
                }
            }
            tokio::time::sleep(interval).await;
            interval = interval.mul_f32(1.5).min(Duration::from_secs(1));
        }
    }

    /// The first `count` nodes of a running job.
    async fn job_nodes(&self, job: u64, count: usize) -> Result<Vec<String>, ExecError> {
        let info = job_state(job)
            .await?
            .ok_or_else(|| ExecError::JobUnusable {
                job,
                detail: "is not known to SLURM".into(),
            })?;
        if info.state != "RUNNING" {
            return Err(ExecError::JobUnusable {
                job,
                detail: format!(
                    "is not running (state {}, reason `{}`)",
                    info.state, info.reason
                ),
            });
        }
        let mut nodes: Vec<String> = run(
            "scontrol",
            &["show".into(), "hostnames".into(), info.nodes.clone()],
        )
        .await?
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .map(str::to_string)
        .collect();
        if nodes.len() < count {
            return Err(ExecError::JobUnusable {
                job,
                detail: format!(
                    "has {} node(s) ({}) but the deployment needs {count}",
                    nodes.len(),
                    info.nodes,
                ),
            });
        }
        nodes.truncate(count);
        Ok(nodes)
    }

    /// Start the agents of an adopted allocation (a submitted one starts its own, from
    /// its batch script): one client where srt runs, for every node.
    fn start_agents(&self, job: u64, nodes: &[String]) -> Result<Client, ExecError> {
        let mut spec = ProcessSpec::new("srun", self.log_path(AGENT));
        spec.args = agent_step(
            Some(job),
            &self.deployment,
            nodes.len(),
            Some(&nodes.join(",")),
        );
        spec.args.push("--".into());
        spec.args.extend(self.agent_argv()?);
        spec.env_remove
            .push(self.profile.visible_devices_env.clone());
        let lease = super::local::lease_path(&self.dir, AGENT);
        super::local::check_no_survivor(&lease, AGENT)?;
        spec.lease = Some(lease);
        Ok(client_of(process::spawn_detached(&spec)?))
    }

    /// Wait for every node's agent to say hello; the nodes' IPv4 addresses, once the
    /// GPUs each exposes are checked.
    async fn wait_agents(&self, job: u64, nodes: &[String]) -> Result<Vec<String>, ExecError> {
        let deadline = Instant::now() + AGENT_WAIT;
        let mut ips = Vec::with_capacity(nodes.len());
        for node in nodes {
            let dir = self.node_dir(job, node);
            let hello = loop {
                match super::agent::hello(&dir) {
                    Ok(Some(h)) if h.age() < AGENT_SILENT => break h,
                    _ if Instant::now() >= deadline => {
                        return Err(self.agent_silent(
                            job,
                            node,
                            format!("did not start within {}s", AGENT_WAIT.as_secs()),
                        ))
                    }
                    _ => tokio::time::sleep(Duration::from_millis(100)).await,
                }
            };
            self.check_devices(job, node, &hello)?;
            ips.push(match &self.profile.network_interface {
                Some(iface) => hello.ip.clone().ok_or_else(|| ExecError::Node {
                    node: node.clone(),
                    detail: format!(
                        "node {node} has no IPv4 address on interface `{iface}` (network_interface in the cluster profile): {}",
                        hello.ip_error.as_deref().unwrap_or_default()
                    ),
                })?,
                None => resolve_ipv4(node).await?,
            });
        }
        Ok(ips)
    }

    fn agent_silent(&self, job: u64, node: &str, detail: String) -> ExecError {
        ExecError::AgentSilent {
            node: node.to_string(),
            job,
            detail,
            log: self.agents_log(job),
        }
    }

    /// Where the agents of job `job` write: the allocation's batch output (the agents
    /// of an adopted allocation, started by srt: their own log).
    fn agents_log(&self, job: u64) -> PathBuf {
        if self.adopt.is_some() {
            return self.log_path(AGENT);
        }
        let logs = self.batch_logs.lock().expect("batch logs");
        logs.get(&job)
            .cloned()
            .unwrap_or_else(|| self.log_path("allocation"))
    }

    /// The node's agent's last hello, refused when it is older than [`AGENT_SILENT`].
    fn live_hello(&self, job: u64, node: &str) -> Result<super::agent::Hello, ExecError> {
        match super::agent::hello(&self.node_dir(job, node)) {
            Ok(Some(h)) if h.age() < AGENT_SILENT => Ok(h),
            Ok(Some(h)) => Err(self.agent_silent(
                job,
                node,
                format!("has not been heard of for {}s", h.age().as_secs()),
            )),
            Ok(None) => Err(self.agent_silent(job, node, "never said hello".into())),
            Err(error) => Err(ExecError::File {
                action: "read",
                path: self.node_dir(job, node).join("hello.json"),
                error,
            }),
        }
    }

    /// The node's agent's next hello, written after this call began: what it lists is
    /// no older than the call (a port freed by a step just stopped is not seen taken).
    /// Told apart by its beat, not by the clocks of this machine and the node.
    async fn next_hello(&self, job: u64, node: &str) -> Result<super::agent::Hello, ExecError> {
        let seen = self.live_hello(job, node)?.beat_ms;
        let deadline = Instant::now() + AGENT_SILENT;
        loop {
            tokio::time::sleep(Duration::from_millis(100)).await;
            let hello = self.live_hello(job, node)?;
            if hello.beat_ms != seen {
                return Ok(hello);
            }
            if Instant::now() >= deadline {
                return Err(self.agent_silent(
                    job,
                    node,
                    format!("wrote no new hello within {}s", AGENT_SILENT.as_secs()),
                ));
            }
        }
    }

    /// What the agent says of a launch whose step is not listed yet: an error when it
    /// could not start the client, the client ended, or the agent went silent.
    fn launch_progress(
        &self,
        name: &str,
        l: Launch<'_>,
        tail: &dyn Fn() -> String,
    ) -> Result<(), ExecError> {
        let dir = self.node_dir(l.job, l.node);
        match super::agent::outcome(&dir, l.address, l.id) {
            Ok(Some(o)) if o.error.is_some() => Err(ExecError::AgentLaunch {
                name: name.to_string(),
                node: l.node.to_string(),
                error: o.error.unwrap_or_default(),
            }),
            Ok(Some(o)) if o.ended => Err(ExecError::StepEnded {
                name: name.to_string(),
                tail: tail(),
            }),
            Ok(Some(_)) => Ok(()),
            // Not picked up yet: the agent must still be there to pick it up.
            Ok(None) | Err(_) => self.live_hello(l.job, l.node).map(|_| ()),
        }
    }

    /// The launch a step runtime records (handed to the agent of its first node).
    fn launch_of<'r>(&self, runtime: &'r Runtime) -> Option<Launch<'r>> {
        let Runtime::Slurm {
            job_id,
            step_name: Some(name),
            nodes,
            launch: Some(id),
            ..
        } = runtime
        else {
            return None;
        };
        Some(Launch {
            job: *job_id,
            node: nodes.first()?,
            address: self.address_of(name)?,
            id,
        })
    }

    /// Whether launch `l`, its step not listed yet, is on its way: still with the agent,
    /// or its client runs.
    fn launching(&self, l: Launch<'_>) -> bool {
        self.staged.lock().expect("staged").contains(l.id)
            || super::agent::launching(&self.node_dir(l.job, l.node), l.address, l.id)
    }

    /// Stop what became of launch `l`, whose step was never seen: take it back if the
    /// agent has not taken it yet; else wait (bounded) for the agent to say what it
    /// started, and have it end a client whose step is not listed (an `srun` still
    /// waiting to start it), then stop the step by name if there is one.
    async fn stop_launch(&self, l: Launch<'_>, name: &str) -> Result<(), ExecError> {
        let dir = self.node_dir(l.job, l.node);
        if super::agent::withdraw(&dir, l.address) {
            return Ok(());
        }
        let deadline = Instant::now() + AGENT_SILENT;
        let outcome = loop {
            match super::agent::outcome(&dir, l.address, l.id) {
                Ok(Some(o)) => break Some(o),
                _ if super::agent::claimed(&dir, l.address) && Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                _ => break None,
            }
        };
        let running = outcome.is_some_and(|o| o.client.is_some() && !o.ended);
        if running && !self.live_steps(l.job).await?.iter().any(|(_, n)| n == name) {
            super::agent::request_stop(&dir, l.address, l.id).map_err(|error| ExecError::File {
                action: "write",
                path: dir.join("in"),
                error,
            })?;
            let deadline = Instant::now() + AGENT_SILENT;
            while self.launching(l) && Instant::now() < deadline {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
        self.stop_step(l.job, None, name, None).await
    }

    /// The resource address a step of this deployment is named after.
    fn address_of<'n>(&self, name: &'n str) -> Option<&'n str> {
        name.strip_prefix(self.deployment.as_str())?
            .strip_prefix('.')
    }

    /// The node must expose at least the recipe's GPUs in the devices variable.
    fn check_devices(
        &self,
        job: u64,
        node: &str,
        hello: &super::agent::Hello,
    ) -> Result<(), ExecError> {
        let var = &self.profile.visible_devices_env;
        let Some(devices) = hello.devices.as_deref() else {
            return Ok(());
        };
        if self.profile.gpu_request == GpuRequest::None {
            return Ok(());
        }
        let count = devices.split(',').filter(|d| !d.trim().is_empty()).count();
        if count < self.gpus_per_node as usize {
            return Err(ExecError::Node {
                node: node.to_string(),
                detail: format!(
                    "node {node} of job {job} exposes {count} GPU(s) in {var} ({devices:?}) but the recipe places {} per node",
                    self.gpus_per_node
                ),
            });
        }
        Ok(())
    }

    /// Cancel a job srt submitted and wait (bounded) for it to leave the queue.
    async fn cancel_job(&self, job: u64) -> Result<(), ExecError> {
        match run("scancel", &[job.to_string()]).await {
            Ok(_) => {}
            // Already purged by the controller: nothing left to cancel.
            Err(e) if invalid_job(&e) => {}
            Err(e) => return Err(ExecError::during(format!("cancelling job {job}"), e)),
        }
        let deadline = Instant::now() + GONE_WAIT;
        loop {
            match self.snapshot(job, true).await.map(|s| s.state) {
                Ok(None) => break,
                Ok(Some(state))
                    if !matches!(
                        state.as_str(),
                        "RUNNING" | "PENDING" | "CONFIGURING" | "COMPLETING" | "SUSPENDED"
                    ) =>
                {
                    break
                }
                _ if Instant::now() >= deadline => break,
                _ => tokio::time::sleep(Duration::from_millis(200)).await,
            }
        }
        self.invalidate(job);
        self.forget_agents(job);
        Ok(())
    }

    /// Remove the directory of a job's agents once they are gone.
    fn forget_agents(&self, job: u64) {
        let _ = std::fs::remove_dir_all(super::agent::job_dir(&self.dir, job));
    }

    /// Wait until step `job.step` is no longer listed, up to `wait`.
    async fn wait_step_gone(&self, job: u64, step: u64, wait: Duration) -> Result<bool, ExecError> {
        let deadline = Instant::now() + wait;
        let mut interval = Duration::from_millis(50);
        loop {
            if !self
                .live_steps(job)
                .await?
                .iter()
                .any(|(id, _)| *id == step)
            {
                return Ok(true);
            }
            if Instant::now() >= deadline {
                return Ok(false);
            }
            tokio::time::sleep(interval).await;
            interval = interval.mul_f32(1.5).min(Duration::from_millis(500));
        }
    }

    async fn stop_step(
        &self,
        job: u64,
        step: Option<u64>,
        name: &str,
        client: Option<&Client>,
    ) -> Result<(), ExecError> {
        let live = self.live_steps(job).await?;
        let step = match step {
            Some(id) => live.iter().any(|(s, _)| *s == id).then_some(id),
            None => live
                .iter()
                .filter(|(_, n)| n == name)
                .map(|(id, _)| *id)
                .max(),
        };
        if let Some(id) = step {
            let target = format!("{job}.{id}");
            let grace = Duration::from_secs(self.profile.stop_grace_seconds);
            let term = self.scancel(Some("TERM"), target.clone()).await;
            if !self.wait_step_gone(job, id, grace).await? {
                // The step may end between the two looks; only a step still listed
                // afterwards is an error, reported with what scancel said.
                let kill = self.scancel(None, target.clone()).await;
                if !self.wait_step_gone(job, id, GONE_WAIT).await? {
                    let said: Vec<String> = [term.err(), kill.err()]
                        .into_iter()
                        .flatten()
                        .map(|e| e.to_string())
                        .collect();
                    return Err(ExecError::StepStillRunning {
                        target,
                        waited: GONE_WAIT,
                        said: if said.is_empty() {
                            String::new()
                        } else {
                            format!(" ({})", said.join("; "))
                        },
                    });
                }
            }
        }
        if let Some(c) = client {
            end_client(c).await;
        }
        self.invalidate(job);
        Ok(())
    }

    /// What [`Executor::restore`] does: learn the recorded allocations and read the
    /// scheduler.
    async fn read_back(&self, state: &State) -> Result<(), ExecError> {
        for (address, r) in &state.resources {
            // Processes not moved yet still run in an allocation's deposed jobs.
            for facts in r.deposed.iter().filter_map(facts_of) {
                self.depose(facts);
            }
            if r.kind != crate::graph::Kind::Allocation || r.status != Status::Running {
                continue;
            }
            let Some(facts) = r.runtime.as_ref().and_then(facts_of) else {
                continue;
            };
            if let Some(log) = &r.log_path {
                self.batch_logs
                    .lock()
                    .expect("batch logs")
                    .insert(facts.job_id, log.clone());
            }
            self.set_facts(address, facts);
        }
        // Read the scheduler now, so that refresh works on a current snapshot and a
        // scheduler that does not answer fails the command instead of looking like drift.
        let mut jobs: BTreeSet<u64> = state
            .resources
            .values()
            .filter_map(|r| match &r.runtime {
                Some(Runtime::Slurm { job_id, .. }) => Some(*job_id),
                _ => None,
            })
            .collect();
        if jobs.is_empty() {
            return Ok(());
        }
        jobs.extend(self.known_jobs());
        let looks = read_jobs(&jobs)
            .await
            .map_err(|e| ExecError::during("cannot read the SLURM scheduler", e))?;
        self.snapshots.lock().expect("snapshots").extend(looks);
        Ok(())
    }

    /// Why a job seen in `snap` is due for renewal: less than the profile's
    /// `renew_before` left of its time limit (and that limit longer than it: a job that
    /// starts due would be renewed forever).
    fn due(&self, snap: &Snapshot) -> Option<String> {
        let renew = self.profile.renew_before?;
        let left = snap.left()?;
        let limit = snap.time_limit?;
        (left < renew && limit > renew).then(|| {
            format!(
                "{} left of its time limit {}, under renew_before {}",
                slurm_time(left),
                slurm_time(limit),
                slurm_time(renew)
            )
        })
    }

    /// What [`Executor::observe`] does.
    async fn look(&self, runtime: &Runtime) -> Observation {
        let (job_id, step_id, step_name, client) = match runtime {
            Runtime::Local { pid, .. } => {
                let id = super::local_identity(runtime).expect("a local runtime");
                return match process::liveness(&id) {
                    Liveness::Alive => Observation::Alive,
                    _ => Observation::Gone(format!("process {pid} exited")),
                };
            }
            Runtime::Slurm {
                job_id,
                step_id,
                step_name,
                client,
                ..
            } => (*job_id, *step_id, step_name.as_deref(), client.as_ref()),
        };
        // A scheduler that does not answer is not drift: restore() already failed the
        // command if it did not answer at the start.
        let Ok(snap) = self.snapshot(job_id, false).await else {
            return Observation::Alive;
        };
        match snap.state.as_deref() {
            Some("RUNNING") => {}
            Some(state) => return Observation::Gone(format!("job {job_id} is {state}")),
            None => return Observation::Gone(format!("job {job_id} is gone")),
        }
        let Some(name) = step_name else {
            // The allocation serves only while its agents run: without them no step of
            // it can start.
            let agents = self.step_name(AGENT);
            if snap.step_by_name(&agents).is_none() {
                return Observation::Gone(format!(
                    "the srt agents of job {job_id} are not running (step `{agents}`)"
                ));
            }
            return match self.due(&snap) {
                Some(why) => Observation::Renew(why),
                None => Observation::Alive,
            };
        };
        let found = match step_id {
            Some(id) => snap.steps.iter().any(|(s, _)| *s == id),
            None => {
                snap.step_by_name(name).is_some()
                    || client.is_some_and(client_alive)
                    || self.launch_of(runtime).is_some_and(|l| self.launching(l))
            }
        };
        if found {
            Observation::Alive
        } else {
            let id = step_id
                .map(|s| format!("{job_id}.{s}"))
                .unwrap_or_else(|| job_id.to_string());
            Observation::Gone(format!("step {id} (`{name}`) is no longer running"))
        }
    }
}

/// What an allocation's runtime records of it, when it is one.
fn facts_of(runtime: &Runtime) -> Option<Facts> {
    let Runtime::Slurm {
        job_id,
        step_name: None,
        nodes,
        node_ips,
        adopted,
        slots,
        ..
    } = runtime
    else {
        return None;
    };
    Some(Facts {
        job_id: *job_id,
        slots: if slots.is_empty() {
            (0..nodes.len()).collect()
        } else {
            slots.clone()
        },
        nodes: nodes.clone(),
        ips: node_ips.clone(),
        adopted: *adopted,
    })
}

/// A job as `squeue` lists it.
struct JobInfo {
    state: String,
    reason: String,
    nodes: String,
}

/// `squeue -h -j J -o '%T|%r|%N'`; `None` when the scheduler does not list the job.
async fn job_state(job: u64) -> Result<Option<JobInfo>, ExecError> {
    match run(
        "squeue",
        &[
            "-h".into(),
            "-j".into(),
            job.to_string(),
            "-o".into(),
            "%T|%r|%N".into(),
        ],
    )
    .await
    {
        Ok(out) => Ok(out.lines().find(|l| !l.trim().is_empty()).map(|l| {
            let mut f = l.trim().splitn(3, '|');
            JobInfo {
                state: f.next().unwrap_or_default().to_string(),
                reason: f.next().unwrap_or_default().to_string(),
                nodes: f.next().unwrap_or_default().to_string(),
            }
        })),
        Err(e) if invalid_job(&e) => Ok(None),
        Err(e) => Err(e),
    }
}

/// One look at each of `jobs`: `squeue -j J1,J2,...` for their states and time left,
/// and `squeue --steps -j J1,J2,...` for their live steps (a job the scheduler no longer
/// lists has neither).
async fn read_jobs(jobs: &BTreeSet<u64>) -> Result<HashMap<u64, Snapshot>, ExecError> {
    let list = jobs
        .iter()
        .map(u64::to_string)
        .collect::<Vec<_>>()
        .join(",");
    let states = squeue(&["-h", "-j", &list, "-o", "%i|%T|%L|%l|%r"]).await?;
    let steps = squeue(&["--steps", "-h", "-j", &list, "-o", "%i %j"]).await?;
    let at = Instant::now();
    let mut looks: HashMap<u64, Snapshot> = jobs
        .iter()
        .map(|&j| {
            let snap = Snapshot {
                at,
                state: None,
                reason: String::new(),
                time_left: None,
                time_limit: None,
                steps: parse_steps(j, &steps),
            };
            (j, snap)
        })
        .collect();
    for line in states.lines() {
        let mut f = line.trim().splitn(5, '|');
        let (Some(id), Some(state)) = (f.next(), f.next()) else {
            continue;
        };
        if let Some(snap) = id.parse::<u64>().ok().and_then(|j| looks.get_mut(&j)) {
            snap.state = Some(state.to_string());
            snap.time_left = f.next().and_then(slurm_duration);
            snap.time_limit = f.next().and_then(slurm_duration);
            snap.reason = f.next().unwrap_or_default().to_string();
        }
    }
    Ok(looks)
}

/// `squeue` with `args`; a job list the scheduler no longer knows at all is no output.
async fn squeue(args: &[&str]) -> Result<String, ExecError> {
    let args: Vec<String> = args.iter().map(ToString::to_string).collect();
    match run("squeue", &args).await {
        Err(e) if invalid_job(&e) => Ok(String::new()),
        other => other,
    }
}

fn parse_steps(job: u64, out: &str) -> Vec<(u64, String)> {
    out.lines()
        .filter_map(|l| {
            let (id, name) = l.trim().split_once(' ').unwrap_or((l.trim(), ""));
            let (j, s) = id.split_once('.')?;
            if j.parse::<u64>().ok()? != job {
                return None;
            }
            Some((s.parse::<u64>().ok()?, name.trim().to_string()))
        })
        .collect()
}

/// The first IPv4 address a node name resolves to on this machine.
async fn resolve_ipv4(node: &str) -> Result<String, ExecError> {
    let failed = |detail: String| ExecError::Node {
        node: node.to_string(),
        detail,
    };
    tokio::net::lookup_host((node, 0))
        .await
        .map_err(|e| {
            failed(format!(
                "cannot resolve node {node}: {e}; set network_interface in the cluster profile"
            ))
        })?
        .find(std::net::SocketAddr::is_ipv4)
        .map(|a| a.ip().to_string())
        .ok_or_else(|| {
            failed(format!(
                "node {node} has no IPv4 address; set network_interface in the cluster profile"
            ))
        })
}

/// Whether a scheduler command failed because the job is unknown (already purged).
fn invalid_job(e: &ExecError) -> bool {
    e.scheduler_words()
        .is_some_and(|w| w.contains("Invalid job id"))
}

/// Wait for a step's `srun` client to exit (it does once its step is gone), then make
/// sure. Killing the client is safe only now: a client killed while its step runs
/// (whole process group, SIGKILL) would orphan the step.
async fn end_client(c: &Client) {
    let id = client_identity(c);
    let deadline = Instant::now() + CLIENT_WAIT;
    while process::liveness(&id) == Liveness::Alive && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    if process::liveness(&id) == Liveness::Alive {
        let _ = process::terminate(&id, Duration::from_secs(2)).await;
    }
}

/// The environment a client started here with `spec` would have: srt's own, less
/// `env_remove`, plus `env`.
fn client_env(spec: &ProcessSpec) -> std::collections::BTreeMap<String, String> {
    let mut env: std::collections::BTreeMap<String, String> = std::env::vars()
        .filter(|(k, _)| !spec.env_remove.contains(k))
        .collect();
    env.extend(spec.env.clone());
    env
}

fn client_alive(c: &Client) -> bool {
    process::liveness(&client_identity(c)) == Liveness::Alive
}

/// The recorded form of a step client's identity.
fn client_of(id: ProcessIdentity) -> Client {
    Client {
        pid: id.pid,
        start_time: id.start_time,
        pgid: id.pgid,
        host: id.host,
        lease: id.lease,
    }
}

/// The identity of a step's `srun` client on the submitting machine.
fn client_identity(c: &Client) -> ProcessIdentity {
    ProcessIdentity {
        pid: c.pid,
        pgid: c.pgid,
        start_time: c.start_time,
        host: c.host.clone(),
        lease: c.lease.clone(),
    }
}

/// Run a scheduler command with a timeout; its stdout, or an error carrying the
/// scheduler's own words (stderr, then stdout, one line). The command runs under tokio
/// (`tokio::process`): waiting for it never holds a runtime thread, and a command that
/// does not answer within [`COMMAND_TIMEOUT`] is killed (dropping the child kills it).
async fn run(program: &str, args: &[String]) -> Result<String, ExecError> {
    let child = tokio::process::Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|error| ExecError::SchedulerMissing {
            program: program.to_string(),
            error,
        })?;
    let out = match tokio::time::timeout(COMMAND_TIMEOUT, child.wait_with_output()).await {
        Ok(Ok(out)) => out,
        Ok(Err(e)) => {
            return Err(ExecError::SchedulerFailed {
                program: program.to_string(),
                status: "failed".into(),
                words: e.to_string(),
            })
        }
        Err(_) => {
            return Err(ExecError::SchedulerTimeout {
                program: program.to_string(),
                timeout: COMMAND_TIMEOUT,
            })
        }
    };
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    if out.status.success() {
        return Ok(stdout);
    }
    let stderr = String::from_utf8_lossy(&out.stderr);
    let words: Vec<&str> = stderr
        .lines()
        .chain(stdout.lines())
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let status = out
        .status
        .code()
        .map(|c| format!("exit {c}"))
        .unwrap_or_else(|| "killed".into());
    let words = words.join("; ");
    let program = program.to_string();
    if unreachable(&words) {
        return Err(ExecError::SchedulerUnreachable {
            program,
            status,
            words,
        });
    }
    Err(ExecError::SchedulerFailed {
        program,
        status,
        words,
    })
}

/// Whether a scheduler command's words say it never reached the scheduler: no
/// configuration to find it, no munge daemon to sign the request, or no controller
/// answering.
fn unreachable(words: &str) -> bool {
    const SIGNS: [&str; 6] = [
        "Could not establish a configuration source",
        "Munge encode failed",
        "munge.socket",
        "Protocol authentication error",
        "Unable to contact slurm controller",
        "Zero Bytes were transmitted or received",
    ];
    SIGNS.iter().any(|s| words.contains(s))
}

/// The name of a resource's step: `<deployment>.<address>`.
pub fn step_name(deployment: &str, address: &str) -> String {
    format!("{deployment}.{address}")
}

/// The GPUs per node as SLURM counts them: `G`, or `TYPE:G` for a GPU model.
pub fn gpu_count(gpu_type: Option<&str>, gpus_per_node: u32) -> String {
    match gpu_type {
        Some(t) => format!("{t}:{gpus_per_node}"),
        None => gpus_per_node.to_string(),
    }
}

/// `sbatch` arguments for the allocation; `gpus` is [`gpu_count`], `log` the batch
/// script's output file, `agent` the agent's command ([`agent_argv`]), which the batch
/// script runs as one step of a task per node.
pub fn sbatch_args(
    profile: &SlurmProfile,
    deployment: &str,
    nodes: usize,
    gpus: &str,
    log: &str,
    agent: &[String],
) -> Vec<String> {
    let mut a = vec![
        "--parsable".to_string(),
        "--job-name".into(),
        format!("srt-{deployment}"),
        "--nodes".into(),
        nodes.to_string(),
    ];
    match profile.gpu_request {
        GpuRequest::Gres => a.extend(["--gres".to_string(), format!("gpu:{gpus}")]),
        GpuRequest::GpusPerNode => a.extend(["--gpus-per-node".to_string(), gpus.to_string()]),
        GpuRequest::None => {}
    }
    if let Some(p) = &profile.partition {
        a.extend(["--partition".to_string(), p.clone()]);
    }
    if let Some(x) = &profile.account {
        a.extend(["--account".to_string(), x.clone()]);
    }
    if let Some(t) = &profile.time_limit {
        a.extend(["--time".to_string(), t.clone()]);
    }
    // The job only holds the nodes: no environment of srt's (it may hold tokens) is
    // stored with it, and a failed node ends it instead of requeueing it elsewhere.
    a.extend(["--export".to_string(), "NONE".into()]);
    a.push("--no-requeue".into());
    a.extend(["--output".to_string(), log.to_string()]);
    a.extend(profile.sbatch_options.iter().cloned());
    let mut step = vec!["exec".to_string(), "srun".into()];
    step.extend(agent_step(None, deployment, nodes, None));
    step.push("--".into());
    step.extend(agent.iter().cloned());
    let script = step
        .iter()
        .map(|w| crate::launch::render::quote(w))
        .collect::<Vec<_>>()
        .join(" ");
    a.extend(["--wrap".to_string(), script]);
    a
}

/// The `srun` arguments of the agents' step: one task on each of `nodes` nodes (of
/// `job` and on `nodelist` when srt starts it in an adopted allocation; the batch
/// script's own job otherwise), beside the steps it launches.
fn agent_step(
    job: Option<u64>,
    deployment: &str,
    nodes: usize,
    nodelist: Option<&str>,
) -> Vec<String> {
    let mut a = Vec::new();
    if let Some(job) = job {
        a.extend(["--jobid".to_string(), job.to_string()]);
    }
    a.extend([
        "--overlap".to_string(),
        "--nodes".into(),
        nodes.to_string(),
        "--ntasks".into(),
        nodes.to_string(),
        "--ntasks-per-node".into(),
        "1".into(),
    ]);
    if let Some(list) = nodelist {
        a.extend(["--nodelist".to_string(), list.to_string()]);
    }
    a.extend([
        "--job-name".to_string(),
        step_name(deployment, AGENT),
        "--export".into(),
        "ALL".into(),
    ]);
    a
}

/// The agent's command: `srt slurm-agent` with where its directories are and what it
/// reads of its node.
pub fn agent_argv(srt: &str, agents: &str, profile: &SlurmProfile) -> Vec<String> {
    let mut a = vec![
        srt.to_string(),
        "slurm-agent".into(),
        "--dir".into(),
        agents.to_string(),
        "--devices-env".into(),
        profile.visible_devices_env.clone(),
    ];
    if let Some(iface) = &profile.network_interface {
        a.extend(["--interface".to_string(), iface.clone()]);
    }
    a
}

/// The nodes of each job: one per group of nodes that must share one (`groups`), or
/// one for them all (the profile says `single`, or the job is adopted).
fn job_groups(mode: Allocations, adopted: bool, groups: Vec<Vec<usize>>) -> Vec<Vec<usize>> {
    if mode == Allocations::Split && !adopted {
        return groups;
    }
    let mut all: Vec<usize> = groups.into_iter().flatten().collect();
    all.sort_unstable();
    vec![all]
}

/// The name the agents' step goes by, after the deployment's (a name no resource
/// address can have).
const AGENT: &str = "srt-agent";

/// The `srun` arguments every step shares: one task of `job` on `node`, named `name`,
/// beside the allocation's other steps.
fn step_placement(job: &str, node: &str, name: &str) -> Vec<String> {
    placement(job, node, name, None)
}

/// [`step_placement`] for a step on `nodelist` (host names, comma-separated): one
/// task on one node, or the ranks of an MPI job (`ranks`), wired by its MPI plugin and
/// allowed more tasks than a node has CPUs, as srtctl launches them.
fn placement(job: &str, nodelist: &str, name: &str, ranks: Option<&Ranks>) -> Vec<String> {
    let (nodes, tasks) = ranks.map_or((1, 1), |r| (r.nodes.len(), r.tasks));
    let mut a = vec!["--jobid".into(), job.to_string(), "--overlap".into()];
    if let Some(r) = ranks {
        a.push(format!("--mpi={}", r.mpi));
        a.push("--oversubscribe".into());
    }
    a.extend([
        "--nodes".into(),
        nodes.to_string(),
        "--ntasks".into(),
        tasks.to_string(),
        "--nodelist".into(),
        nodelist.to_string(),
        "--job-name".into(),
        name.to_string(),
    ]);
    a
}

/// `srun` arguments that run `argv` as step `name` of `job` on `node`; `image` is the
/// container image when the profile's runtime runs containers.
pub fn srun_args(
    profile: &SlurmProfile,
    job: &str,
    node: &str,
    name: &str,
    image: Option<&str>,
    argv: impl IntoIterator<Item = impl AsRef<str>>,
) -> Vec<String> {
    step_srun(profile, step_placement(job, node, name), image, argv)
}

/// [`srun_args`] at `placement` (what [`placement`] returns).
fn step_srun(
    profile: &SlurmProfile,
    placement: Vec<String>,
    image: Option<&str>,
    argv: impl IntoIterator<Item = impl AsRef<str>>,
) -> Vec<String> {
    let mut a = placement;
    a.extend(["--export".to_string(), "ALL".to_string()]);
    if let (ContainerRuntime::Pyxis, Some(image)) = (profile.container.runtime, image) {
        a.extend(["--container-image".to_string(), image.to_string()]);
        a.extend(profile.container.flags.iter().cloned());
    }
    a.extend(profile.srun_options.iter().cloned());
    a.push("--".into());
    a.extend(argv.into_iter().map(|t| t.as_ref().to_owned()));
    a
}

/// The `srun` arguments of process `p`'s step (`run_dir` its resolved run directory,
/// `resolve` its placeholders): [`srun_args`] with what runs around its program. In a
/// container (pyxis and an image) the step mounts the recipe's mounts, and the run
/// directory where srt's copies of its scripts and its profiler's output are, and runs
/// the scripts that are not `host_setup`; else every script runs in the step.
pub fn step_args(
    profile: &SlurmProfile,
    (job, node, name): (&str, &str, &str),
    p: &LaunchProcess,
    run_dir: &str,
    resolve: &dyn Fn(&str) -> String,
) -> Vec<String> {
    let image = p.container_image.as_deref();
    let contained = in_container(profile, image);
    let inner: Vec<String> = p
        .wrap
        .setup
        .iter()
        .filter(|s| !(contained && s.on_host))
        .map(|s| resolve(&s.path))
        .collect();
    let program = p.command().map(resolve).collect();
    let command = p.wrap.command(&inner, program, resolve);
    let at = placement(job, node, name, p.ranks.as_ref());
    let mut a = step_srun(profile, at, image, command);
    let mut mounts = p.wrap.mounts.clone();
    // The run directory holds srt's copies of the scripts, the profiler's output and
    // the files srt writes for the program (a path under it on its command line).
    let names_run_dir = p.argv.iter().any(|w| w.contains(crate::launch::RUN_DIR));
    if contained && (!inner.is_empty() || !p.wrap.dirs.is_empty() || names_run_dir) {
        mounts.push(format!("{run_dir}:{run_dir}"));
    }
    if contained && !mounts.is_empty() {
        let end = a.iter().position(|w| w == "--").unwrap_or(a.len());
        a.insert(end, format!("--container-mounts={}", mounts.join(",")));
    }
    a
}

/// The `host_setup` scripts of `p` that must run outside its container (resolved),
/// when its step runs in one: they run as a step of their own first.
pub fn host_scripts(
    profile: &SlurmProfile,
    p: &LaunchProcess,
    resolve: &dyn Fn(&str) -> String,
) -> Vec<String> {
    if !in_container(profile, p.container_image.as_deref()) {
        return Vec::new();
    }
    p.wrap
        .setup
        .iter()
        .filter(|s| s.on_host)
        .map(|s| resolve(&s.path))
        .collect()
}

/// The name of the step that runs step `name`'s `host_setup` before it.
fn host_setup_step(name: &str) -> String {
    format!("{name}.host_setup")
}

fn in_container(profile: &SlurmProfile, image: Option<&str>) -> bool {
    profile.container.runtime == ContainerRuntime::Pyxis && image.is_some()
}

/// What the step's client runs when `host` scripts must run outside the container
/// first: a shell that runs them as a step `<name>.host_setup` on the same node, then
/// becomes the step's `srun` (`srun_step`, its arguments).
fn host_setup_client(
    (job, node, name): (&str, &str, &str),
    ranks: Option<&Ranks>,
    host: &[String],
    srun_step: Vec<String>,
) -> Vec<String> {
    // On every node of an MPI job, once.
    let once = ranks.map(|r| Ranks {
        tasks: r.nodes.len() as u32,
        ..r.clone()
    });
    let mut setup = placement(job, node, &host_setup_step(name), once.as_ref());
    setup.extend(["--export".to_string(), "ALL".into(), "--".into()]);
    setup.extend(crate::launch::wrap::Wrap::default().command(
        host,
        vec!["true".into()],
        |w: &str| w.to_string(),
    ));
    let mut out = vec![
        "-c".to_string(),
        format!(
            "srun {} && exec srun \"$@\"",
            crate::launch::render::command_line(&setup)
        ),
        crate::launch::wrap::SETUP_SHELL_NAME.to_string(),
    ];
    out.extend(srun_step);
    out
}

/// The SLURM commands a launch plan runs as (`srt render --cluster FILE`): the
/// allocation's `sbatch` and each process's `srun`, with `<job-id>`, `<nodeN-host>`
/// and `<state-dir>` placeholders.
pub fn render(plan: &LaunchPlan, profile: &SlurmProfile) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "# SLURM commands (executor slurm)");
    let gpus = gpu_count(
        plan.gpu_type.as_deref(),
        plan.nodes.first().map(|n| n.gpus).unwrap_or(0),
    );
    let agents = format!(
        "<state-dir>/{}/{}",
        plan.deployment,
        super::agent::AGENTS_DIR
    );
    let groups = job_groups(profile.allocations, false, plan.node_groups());
    let mut job_of = vec![String::new(); plan.nodes.len().max(1)];
    for nodes in &groups {
        let address = crate::graph::allocation_address(nodes[0]);
        let _ = writeln!(out);
        let held: Vec<String> = nodes.iter().map(|&n| crate::launch::node_name(n)).collect();
        let _ = writeln!(out, "## {address} (holds {})", held.join(", "));
        let log = format!("<state-dir>/{}/logs/{address}.log", plan.deployment);
        let mut sbatch = vec!["sbatch".to_string()];
        sbatch.extend(sbatch_args(
            profile,
            &plan.deployment,
            nodes.len(),
            &gpus,
            &log,
            &agent_argv("<srt>", &agents, profile),
        ));
        write_lines(&mut out, &sbatch);
        for &n in nodes {
            if n >= job_of.len() {
                job_of.resize(n + 1, String::new());
            }
            job_of[n] = format!("<{address}-job-id>");
        }
    }
    let _ = writeln!(out);
    let _ = writeln!(
        out,
        "# every step below is launched by the agent of its (first) node, not by srt"
    );
    for p in &plan.processes {
        let _ = writeln!(out);
        let _ = writeln!(out, "## {}", p.address);
        let host = p
            .nodes()
            .iter()
            .map(|n| format!("<node{n}-host>"))
            .collect::<Vec<_>>()
            .join(",");
        let name = step_name(&plan.deployment, &p.address);
        let at = (job_of[p.node].as_str(), host.as_str(), name.as_str());
        let keep = |w: &str| w.to_string();
        let scripts = host_scripts(profile, p, &keep);
        let step = step_args(profile, at, p, crate::launch::RUN_DIR, &keep);
        let srun = match scripts.is_empty() {
            true => [vec!["srun".to_string()], step].concat(),
            false => [
                vec!["bash".to_string()],
                host_setup_client(at, p.ranks.as_ref(), &scripts, step),
            ]
            .concat(),
        };
        write_lines(&mut out, &srun);
    }
    out
}

fn write_lines(out: &mut String, argv: &[String]) {
    let lines = command_lines(argv);
    let last = lines.len().saturating_sub(1);
    for (i, line) in lines.iter().enumerate() {
        let indent = if i == 0 { "  " } else { "    " };
        let cont = if i < last { " \\" } else { "" };
        let _ = writeln!(out, "{indent}{line}{cont}");
    }
}

impl Executor for SlurmExecutor {
    fn bindings(&self) -> Bindings {
        let facts = self.facts.read().expect("facts lock");
        let size = facts
            .values()
            .flat_map(|f| f.slots.iter().map(|s| s + 1))
            .max()
            .unwrap_or(0);
        // A node no known allocation holds keeps its placeholders.
        let mut node_ips: Vec<String> = (0..size).map(crate::launch::node_ip).collect();
        let mut node_hosts: Vec<String> = (0..size).map(crate::launch::node_host).collect();
        for f in facts.values() {
            for (at, &slot) in f.slots.iter().enumerate() {
                if let (Some(ip), Some(host)) = (f.ips.get(at), f.nodes.get(at)) {
                    node_ips[slot] = ip.clone();
                    node_hosts[slot] = host.clone();
                }
            }
        }
        Bindings {
            node_ips,
            run_dir: self.dir.join("run").display().to_string(),
            node_hosts,
        }
    }

    fn bindings_for(&self, runtime: Option<&Runtime>) -> Bindings {
        let mut b = self.bindings();
        let Some(Runtime::Slurm { job_id, .. }) = runtime else {
            return b;
        };
        let deposed = self.deposed.read().expect("deposed lock");
        if let Some(f) = deposed.iter().find(|f| f.job_id == *job_id) {
            for (at, &slot) in f.slots.iter().enumerate() {
                if let (Some(ip), Some(host)) = (f.ips.get(at), f.nodes.get(at)) {
                    if b.node_ips.len() <= slot {
                        b.node_ips.resize_with(slot + 1, Default::default);
                        b.node_hosts.resize_with(slot + 1, Default::default);
                    }
                    b.node_ips[slot] = ip.clone();
                    b.node_hosts[slot] = host.clone();
                }
            }
        }
        b
    }

    fn host_layout(&self) -> HostLayout {
        HostLayout::Distinct
    }

    fn runs_containers(&self) -> bool {
        self.profile.container.runtime == ContainerRuntime::Pyxis && !self.simulate
    }

    fn execution(&self) -> Value {
        let container = match self.profile.container.runtime {
            ContainerRuntime::Pyxis if !self.simulate => {
                json!({ "runtime": "pyxis", "flags": self.profile.container.flags })
            }
            _ => Value::Null,
        };
        json!({
            "executor": "slurm",
            "simulate": self.simulate,
            "container": container,
            "srun_options": self.profile.srun_options,
            "visible_devices_env": self.profile.visible_devices_env,
        })
    }

    fn allocates(&self) -> bool {
        true
    }

    fn allocations(&self, groups: Vec<Vec<usize>>) -> Vec<AllocationSpec> {
        job_groups(self.profile.allocations, self.adopt.is_some(), groups)
            .into_iter()
            .map(|nodes| AllocationSpec {
                spec: self.allocation_spec(&nodes),
                nodes,
            })
            .collect()
    }

    fn allocate<'a>(
        &'a self,
        address: &'a str,
        slots: &'a [usize],
        submitted: OnSubmitted<'a>,
    ) -> BoxFuture<'a, Result<Started, ExecError>> {
        Box::pin(async move {
            let (job, adopted) = match self.adopt {
                Some(job) => (job, true),
                None => (self.submit(address, slots.len()).await?, false),
            };
            let base = Runtime::Slurm {
                job_id: job,
                step_id: None,
                step_name: None,
                nodes: Vec::new(),
                node_ips: Vec::new(),
                adopted,
                client: None,
                launch: None,
                slots: slots.to_vec(),
            };
            let mut agents = None;
            let result: Result<(Vec<String>, Vec<String>), ExecError> = async {
                submitted(&base)?;
                if !adopted {
                    self.wait_running(address, job).await?;
                }
                let nodes = self.job_nodes(job, slots.len()).await.map_err(|e| {
                    if adopted {
                        ExecError::Adopted {
                            job,
                            cause: Box::new(e),
                        }
                    } else {
                        e
                    }
                })?;
                if adopted {
                    agents = Some(self.start_agents(job, &nodes)?);
                }
                let ips = self.wait_agents(job, &nodes).await?;
                Ok((nodes, ips))
            }
            .await;
            let (nodes, ips) = match result {
                Ok(x) => x,
                Err(e) if !adopted => {
                    return Err(match self.cancel_job(job).await {
                        Ok(()) => ExecError::AllocationCancelled {
                            job,
                            cause: Box::new(e),
                        },
                        Err(c) => ExecError::AllocationLeft {
                            cause: Box::new(e),
                            cancel: Box::new(c),
                        },
                    })
                }
                Err(e) => {
                    if let Some(c) = &agents {
                        let _ = self
                            .stop_step(job, None, &self.step_name(AGENT), Some(c))
                            .await;
                    }
                    return Err(e);
                }
            };
            self.set_facts(
                address,
                Facts {
                    job_id: job,
                    slots: slots.to_vec(),
                    nodes: nodes.clone(),
                    ips: ips.clone(),
                    adopted,
                },
            );
            self.invalidate(job);
            Ok(Started {
                runtime: Runtime::Slurm {
                    job_id: job,
                    step_id: None,
                    step_name: None,
                    nodes,
                    node_ips: ips,
                    adopted,
                    client: agents,
                    launch: None,
                    slots: slots.to_vec(),
                },
                log_path: self.log_path(address),
            })
        })
    }

    fn restore<'a>(&'a self, state: &'a State) -> BoxFuture<'a, Result<(), ExecError>> {
        Box::pin(self.read_back(state))
    }

    fn allocation_notes(&self, state: &State) -> Vec<crate::plan::Note> {
        let looks = self.snapshots.lock().expect("snapshots");
        state
            .resources
            .iter()
            .filter(|(_, r)| r.kind == crate::graph::Kind::Allocation)
            .filter_map(|(address, r)| {
                let rt = r.runtime.as_ref()?;
                let Runtime::Slurm { job_id, .. } = rt else {
                    return None;
                };
                let snap = looks.get(job_id).filter(|s| s.state.is_some())?;
                let left = match (snap.left(), snap.time_limit) {
                    (Some(left), Some(limit)) => {
                        format!("{} left of {}", slurm_time(left), slurm_time(limit))
                    }
                    _ => "no time limit".to_string(),
                };
                let renew = match (self.profile.renew_before, snap.time_limit) {
                    (Some(r), Some(limit)) if limit > r => {
                        format!(", renewed with {} left", slurm_time(r))
                    }
                    _ => String::new(),
                };
                Some(crate::plan::Note {
                    address: address.clone(),
                    detail: format!("{}: {left}{renew}", rt.describe()),
                })
            })
            .collect()
    }

    fn start(&self, p: &LaunchProcess) -> Result<Started, ExecError> {
        let (facts, hosts) = self.placed(&p.address, &p.nodes())?;
        let nodelist = hosts.join(",");
        let node = &nodelist;
        let bindings = self.bindings();
        write_files(&bindings, p)?;
        let name = self.step_name(&p.address);
        let log_path = self.log_path(&p.address);
        let resolve = |w: &str| bindings.resolve(w);
        let job = facts.job_id.to_string();
        let at = (job.as_str(), node.as_str(), name.as_str());
        let step = step_args(&self.profile, at, p, &bindings.run_dir, &resolve);
        let host = host_scripts(&self.profile, p, &resolve);
        let mut spec;
        if host.is_empty() {
            spec = ProcessSpec::new("srun", &log_path);
            spec.args = step;
        } else {
            spec = ProcessSpec::new("bash", &log_path);
            spec.args = host_setup_client(at, p.ranks.as_ref(), &host, step);
        }
        spec.env = p
            .env
            .iter()
            .map(|(k, v)| (k.clone(), bindings.resolve(v)))
            .collect();
        mark_env(&mut spec.env, &self.deployment, &self.dir, &p.address);
        spec.env_remove = p.env_unset.clone();
        spec.env_remove
            .push(self.profile.visible_devices_env.clone());
        // The client runs on the node, launched by its agent, with the environment it
        // would have had here.
        let request = super::agent::Request {
            launch: uuid::Uuid::new_v4().to_string(),
            address: p.address.clone(),
            env: client_env(&spec),
            program: spec.program,
            args: spec.args,
            log_path: log_path.clone(),
        };
        let dir = self.node_dir(facts.job_id, &hosts[0]);
        super::agent::stage(&dir, &request).map_err(|error| ExecError::File {
            action: "write",
            path: dir.join("in"),
            error,
        })?;
        self.staged
            .lock()
            .expect("staged")
            .insert(request.launch.clone());
        Ok(Started {
            runtime: Runtime::Slurm {
                job_id: facts.job_id,
                step_id: None,
                step_name: Some(name),
                nodes: hosts,
                node_ips: Vec::new(),
                adopted: false,
                client: None,
                launch: Some(request.launch),
                slots: Vec::new(),
            },
            log_path,
        })
    }

    fn leases(&self) -> Vec<(String, ProcessIdentity)> {
        super::local::signed_leases(&self.dir)
    }

    fn leased_runtime(&self, address: &str, id: ProcessIdentity) -> Option<Runtime> {
        // Known once restore() read the allocations; without one there is no step.
        if self.facts.read().expect("facts lock").is_empty() {
            return None;
        }
        Some(self.step_runtime(address, id))
    }

    fn confirm<'a>(&'a self, started: &'a Started) -> BoxFuture<'a, Result<Runtime, ExecError>> {
        Box::pin(async move {
            let Runtime::Slurm {
                job_id,
                step_name: Some(name),
                client,
                ..
            } = &started.runtime
            else {
                return Ok(started.runtime.clone());
            };
            let launch = self.launch_of(&started.runtime);
            if let Some(l) = launch {
                let dir = self.node_dir(l.job, l.node);
                let handed = super::agent::commit(&dir, l.address);
                self.staged.lock().expect("staged").remove(l.id);
                handed.map_err(|error| ExecError::File {
                    action: "hand over",
                    path: dir.join("in"),
                    error,
                })?;
            }
            let timeout = Duration::from_secs(self.profile.step_start_timeout_seconds);
            let mut deadline = Instant::now() + timeout;
            // While its host setup runs (a step of its own), the step is not late: its
            // start timeout counts from the end of the host setup.
            let setup = host_setup_step(name);
            let mut interval = Duration::from_millis(30);
            let tail = || {
                process::tail_excerpt(&started.log_path, 10)
                    .map(|t| {
                        format!(
                            "\n--- last lines of {} ---\n{}",
                            started.log_path.display(),
                            t.trim_end()
                        )
                    })
                    .unwrap_or_default()
            };
            let mut last_error = String::new();
            loop {
                match self.snapshot(*job_id, true).await {
                    Ok(snap) => {
                        if let Some(id) = snap.step_by_name(name) {
                            let mut runtime = started.runtime.clone();
                            if let Runtime::Slurm { step_id, .. } = &mut runtime {
                                *step_id = Some(id);
                            }
                            return Ok(runtime);
                        }
                        if snap.step_by_name(&setup).is_some() {
                            deadline = Instant::now() + timeout;
                        }
                        if snap.state.as_deref() != Some("RUNNING") {
                            return Err(ExecError::JobGone {
                                job: *job_id,
                                tail: tail(),
                            });
                        }
                    }
                    Err(e) => last_error = format!(" (last scheduler error: {e})"),
                }
                if let Some(c) = client {
                    if !client_alive(c) {
                        return Err(ExecError::StepEnded {
                            name: name.clone(),
                            tail: tail(),
                        });
                    }
                }
                if let Some(l) = launch {
                    self.launch_progress(name, l, &tail)?;
                }
                if Instant::now() >= deadline {
                    if let Some(c) = client {
                        end_client(c).await;
                    }
                    if let Some(l) = launch {
                        let _ = self.stop_launch(l, name).await;
                    }
                    return Err(ExecError::StepNotStarted {
                        name: name.clone(),
                        timeout,
                        last_error,
                        tail: tail(),
                    });
                }
                tokio::time::sleep(interval).await;
                interval = interval.mul_f32(1.5).min(Duration::from_millis(500));
            }
        })
    }

    fn observe<'a>(&'a self, runtime: &'a Runtime) -> BoxFuture<'a, Observation> {
        Box::pin(self.look(runtime))
    }

    fn stop<'a>(&'a self, runtime: &'a Runtime) -> BoxFuture<'a, Result<(), ExecError>> {
        Box::pin(async move {
            match runtime {
                Runtime::Local { .. } => {
                    let id = super::local_identity(runtime).expect("a local runtime");
                    let grace = Duration::from_secs(self.profile.stop_grace_seconds);
                    super::local::stop_recorded(id, grace, &self.deployment, &self.dir).await
                }
                Runtime::Slurm {
                    job_id,
                    step_name: None,
                    adopted,
                    client,
                    ..
                } => {
                    self.forget_job(*job_id);
                    if *adopted {
                        // Never cancel an allocation srt did not submit: stop the
                        // agents srt started in it.
                        let name = self.step_name(AGENT);
                        self.stop_step(*job_id, None, &name, client.as_ref())
                            .await?;
                        self.forget_agents(*job_id);
                        return Ok(());
                    }
                    self.cancel_job(*job_id).await
                }
                Runtime::Slurm {
                    job_id,
                    step_id,
                    step_name: Some(name),
                    client,
                    ..
                } => match (step_id, self.launch_of(runtime)) {
                    // Never seen listed: whatever became of its launch.
                    (None, Some(l)) => self.stop_launch(l, name).await,
                    _ => {
                        self.stop_step(*job_id, *step_id, name, client.as_ref())
                            .await
                    }
                },
            }
        })
    }

    fn check_ports<'a>(&'a self, p: &'a LaunchProcess) -> BoxFuture<'a, Result<(), ExecError>> {
        Box::pin(async move {
            let (facts, hosts) = self.placed(&p.address, &[p.node])?;
            let node = &hosts[0];
            let listening = self.next_hello(facts.job_id, node).await?.listening;
            for (kind, block) in &p.ports {
                for i in 0..block.count {
                    let port = block.base + i;
                    if listening.contains(&port) {
                        return Err(ExecError::port_taken(
                            port,
                            kind,
                            &p.address,
                            format!("on node {node}"),
                        ));
                    }
                }
            }
            Ok(())
        })
    }

    fn log_tail(&self, address: &str, lines: usize) -> Option<String> {
        process::tail_excerpt(&self.log_path(address), lines).ok()
    }

    /// Rewrite the process's files (on the shared run directory) and signal its step
    /// with SIGHUP through the scheduler.
    fn reload<'a>(
        &'a self,
        runtime: &'a Runtime,
        p: &'a LaunchProcess,
    ) -> BoxFuture<'a, Result<(), ExecError>> {
        Box::pin(async move {
            let not_running = || ExecError::NotRunning {
                address: p.address.clone(),
            };
            let Runtime::Slurm {
                job_id,
                step_name: Some(name),
                step_id,
                ..
            } = runtime
            else {
                return Err(not_running());
            };
            let live = self.live_steps(*job_id).await?;
            let step = match step_id {
                Some(id) => live.iter().any(|(s, _)| s == id).then_some(*id),
                None => live
                    .iter()
                    .filter(|(_, n)| n == name)
                    .map(|(id, _)| *id)
                    .max(),
            }
            .ok_or_else(not_running)?;
            write_files(&self.bindings(), p)?;
            self.scancel(Some("HUP"), format!("{job_id}.{step}")).await
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cluster::{managed_options, sbatch_catalog, srun_catalog};
    use crate::getopt::{self, Item, OptionCatalog};

    #[test]
    fn a_scheduler_that_is_down_is_told_from_a_refused_job() {
        // What sbatch 24.11 printed here: no slurm.conf yet; munged stopped; slurmctld
        // stopped.
        for words in [
            "sbatch: error: resolve_ctls_from_dns_srv: res_nsearch error: Unknown host; sbatch: error: fetch_config: DNS SRV lookup failed; sbatch: error: _establish_config_source: failed to fetch config; sbatch: fatal: Could not establish a configuration source",
            "sbatch: error: If munged is up, restart with --num-threads=10; sbatch: error: Munge encode failed: Failed to access \"/run/munge/munge.socket.2\": No such file or directory (Did you start munged?); sbatch: error: slurm_send_node_msg: auth_g_create: REQUEST_SUBMIT_BATCH_JOB has authentication error; sbatch: error: Batch job submission failed: Protocol authentication error",
            "sbatch: error: Batch job submission failed: Unable to contact slurm controller (connect failure)",
        ] {
            assert!(unreachable(words), "{words}");
        }
        for words in [
            "sbatch: error: Batch job submission failed: Requested node configuration is not available",
            "sbatch: error: invalid partition specified: gpu",
        ] {
            assert!(!unreachable(words), "{words}");
        }
    }

    /// A relative `--state-dir` still gives programs absolute paths: nginx resolves a
    /// relative `-c` against its own prefix, and steps start in the job's directory.
    #[test]
    fn a_relative_state_dir_binds_an_absolute_run_dir() {
        let exec = SlurmExecutor::new(
            SlurmProfile::default(),
            "d",
            Path::new(".srt/d"),
            1,
            true,
            None,
        );
        let conf = exec.bindings().resolve("<run-dir>/nginx.conf");
        assert!(Path::new(&conf).is_absolute(), "{conf}");
        assert!(conf.ends_with(".srt/d/run/nginx.conf"), "{conf}");
    }

    #[test]
    fn steps_parse_skips_batch_and_other_jobs() {
        let out = "12.0 d.router[0]\n12.batch batch\n12.3 d.worker.agg[0].node[0]\n13.1 x\n12.extern extern\n";
        assert_eq!(
            parse_steps(12, out),
            vec![
                (0, "d.router[0]".to_string()),
                (3, "d.worker.agg[0].node[0]".to_string())
            ]
        );
    }

    /// The options of a command line srt renders, by the names the program reads them
    /// as; each must be written in full (an exact name of the catalog).
    fn options_read(catalog: &OptionCatalog, args: &[String]) -> BTreeSet<String> {
        let mut names = BTreeSet::new();
        for reading in getopt::read(catalog, args) {
            match reading.item {
                Ok(Item::Option { name, written }) => {
                    assert_eq!(
                        name, written,
                        "{}: srt writes options in full",
                        catalog.program
                    );
                    names.insert(name);
                }
                Ok(Item::Value { .. }) => {}
                Ok(Item::End | Item::Operand) => break,
                Err(e) => panic!("{}: {e} in {args:?}", catalog.program),
            }
        }
        names
    }

    /// Every option srt renders on `sbatch` or `srun`, with every optional setting on.
    fn rendered_options() -> BTreeSet<String> {
        let mut profile = SlurmProfile {
            partition: Some("p".into()),
            account: Some("a".into()),
            time_limit: Some("1:00:00".into()),
            ..Default::default()
        };
        let mut names = BTreeSet::new();
        for request in [GpuRequest::Gres, GpuRequest::GpusPerNode, GpuRequest::None] {
            profile.gpu_request = request;
            let sbatch = sbatch_args(&profile, "d", 2, "4", "log", &[]);
            names.extend(options_read(sbatch_catalog(), &sbatch));
        }
        let argv = ["true"];
        let plain = srun_args(&profile, "7", "n1", "d.x", Some("img"), argv);
        names.extend(options_read(srun_catalog(), &plain));
        let agents = agent_step(Some(7), "d", 2, Some("n1,n2"));
        names.extend(options_read(srun_catalog(), &agents));
        // The container runtime's options are its plugin's, not in srun's own catalog.
        profile.container.runtime = ContainerRuntime::Pyxis;
        let contained = srun_args(&profile, "7", "n1", "d.x", Some("img"), argv);
        names.extend(
            contained
                .iter()
                .filter(|a| a.starts_with("--") && !plain.contains(a))
                .cloned(),
        );
        names
    }

    /// The options a profile may not set are exactly those srt renders.
    #[test]
    fn the_managed_options_are_what_srt_renders() {
        let managed: BTreeSet<String> = managed_options().map(String::from).collect();
        assert_eq!(rendered_options(), managed);
    }

    /// A containerized worker with both scripts, run through a stand-in `srun` that
    /// logs its arguments and runs what follows its `--`: the client runs the host
    /// setup as its own step first (no container), then becomes the worker's step,
    /// which mounts the run directory and runs `setup_script` before the program; a
    /// failed host setup starts no step.
    #[test]
    fn a_containerized_step_runs_its_host_setup_as_a_step_before_it() {
        use crate::launch::wrap::Setup;
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("log");
        let bin = dir.path().join("bin");
        std::fs::create_dir(&bin).unwrap();
        let fake = format!(
            "#!/bin/sh\necho \"srun $*\" >> {}\nwhile [ \"$1\" != -- ]; do shift; done\nshift\nexec \"$@\"\n",
            log.display()
        );
        std::fs::write(bin.join("srun"), fake).unwrap();
        std::fs::set_permissions(
            bin.join("srun"),
            std::os::unix::fs::PermissionsExt::from_mode(0o755),
        )
        .unwrap();
        let script = |name: &str, body: &str| {
            let path = dir.path().join(name);
            std::fs::write(&path, body).unwrap();
            path.display().to_string()
        };
        let setup = |key: &'static str, on_host: bool, path: String| Setup {
            key,
            on_host,
            source: String::new(),
            path,
            digest: String::new(),
            text: std::sync::Arc::from(""),
        };
        let mut profile = SlurmProfile::default();
        profile.container.runtime = ContainerRuntime::Pyxis;
        let run = |host_body: &str| {
            let _ = std::fs::remove_file(&log);
            let mut p = LaunchProcess::bare(
                "worker.agg[0].node[0]",
                crate::launch::ProcessKind::Worker,
                crate::launch::Argv::from([
                    "sh",
                    "-c",
                    &format!("echo program >> {}", log.display()),
                ]),
            );
            p.container_image = Some("img".into());
            p.wrap.setup = vec![
                setup("host_setup", true, script("host.sh", host_body)),
                setup(
                    "setup_script",
                    false,
                    script("inner.sh", &format!("echo inner >> {}\n", log.display())),
                ),
            ];
            let at = ("7", "n1", "d.worker.agg[0].node[0]");
            let id = |w: &str| w.to_string();
            let host = host_scripts(&profile, &p, &id);
            let step = step_args(&profile, at, &p, "/run/d", &id);
            let status = std::process::Command::new("bash")
                .args(host_setup_client(at, None, &host, step))
                .env(
                    "PATH",
                    format!("{}:{}", bin.display(), std::env::var("PATH").unwrap()),
                )
                .status()
                .unwrap();
            (status, std::fs::read_to_string(&log).unwrap_or_default())
        };
        let (status, text) = run(&format!("echo host >> {}\n", log.display()));
        assert!(status.success(), "{text}");
        let lines: Vec<&str> = text.lines().collect();
        assert!(
            lines[0].contains("--job-name d.worker.agg[0].node[0].host_setup --export ALL -- bash"),
            "{text}"
        );
        assert!(!lines[0].contains("--container"), "{text}");
        assert_eq!(lines[1], "host");
        assert!(
            lines[2].contains("--container-image img --container-mounts=/run/d:/run/d -- bash"),
            "{text}"
        );
        assert_eq!(lines[3..], ["inner", "program"]);
        let (status, text) = run("exit 4\n");
        assert_eq!(status.code(), Some(4));
        assert_eq!(text.lines().count(), 1, "{text}");
    }

    #[test]
    fn sbatch_and_srun_lines() {
        let mut profile = SlurmProfile {
            partition: Some("gpu".into()),
            time_limit: Some("1:00:00".into()),
            sbatch_options: vec!["--exclusive".into()],
            srun_options: vec!["--cpus-per-task=4".into()],
            ..Default::default()
        };
        let agent = agent_argv("/opt/srt", "/s/d/agents", &profile);
        let a = sbatch_args(&profile, "d", 2, "4", "/s/d/logs/allocation.log", &agent);
        assert_eq!(
            a.join(" "),
            "--parsable --job-name srt-d --nodes 2 --gres gpu:4 --partition gpu --time 1:00:00 \
             --export NONE --no-requeue --output /s/d/logs/allocation.log --exclusive \
             --wrap exec srun --overlap --nodes 2 --ntasks 2 --ntasks-per-node 1 \
             --job-name d.srt-agent --export ALL -- /opt/srt slurm-agent --dir /s/d/agents \
             --devices-env CUDA_VISIBLE_DEVICES"
        );
        let argv = vec!["vllm".to_string(), "serve".into()];
        let s = srun_args(&profile, "7", "n2", "d.router[0]", Some("img"), &argv);
        assert_eq!(
            s.join(" "),
            "--jobid 7 --overlap --nodes 1 --ntasks 1 --nodelist n2 --job-name d.router[0] \
             --export ALL --cpus-per-task=4 -- vllm serve"
        );
        profile.container.runtime = ContainerRuntime::Pyxis;
        profile.container.flags = vec!["--container-mounts=/m:/m".into()];
        let s = srun_args(
            &profile,
            "7",
            "n2",
            "d.router[0]",
            Some("nvcr.io/x:1"),
            &argv,
        );
        assert!(
            s.join(" ").contains(
                "--export ALL --container-image nvcr.io/x:1 --container-mounts=/m:/m --cpus-per-task=4 -- vllm"
            ),
            "{s:?}"
        );
        let s = srun_args(&profile, "7", "n2", "d.router[0]", None, &argv);
        assert!(!s.iter().any(|x| x.starts_with("--container")), "{s:?}");
        profile.gpu_request = GpuRequest::GpusPerNode;
        assert!(sbatch_args(&profile, "d", 1, &gpu_count(None, 8), "l", &[])
            .join(" ")
            .contains("--gpus-per-node 8"));
        assert!(
            sbatch_args(&profile, "d", 1, &gpu_count(Some("h100"), 8), "l", &[])
                .join(" ")
                .contains("--gpus-per-node h100:8")
        );
        profile.gpu_request = GpuRequest::Gres;
        assert!(
            sbatch_args(&profile, "d", 1, &gpu_count(Some("h100"), 8), "l", &[])
                .join(" ")
                .contains("--gres gpu:h100:8")
        );
        profile.gpu_request = GpuRequest::None;
        assert!(
            !sbatch_args(&profile, "d", 1, &gpu_count(None, 8), "l", &[])
                .join(" ")
                .contains("--g")
        );
    }

    /// How the installed `program` reads `args` (a guard option after them ends its
    /// parse before it does anything): the first line of its complaint.
    fn program_reads(conf: &Path, program: &str, args: &[&str]) -> String {
        let out = std::process::Command::new(program)
            .args(args)
            .arg("--srt-probe-guard")
            .env("SLURM_CONF", conf)
            .stdin(Stdio::null())
            .output()
            .expect("run the SLURM client");
        let text = String::from_utf8_lossy(&out.stderr).into_owned();
        text.lines().next().unwrap_or_default().to_string()
    }

    /// Whether srt's reading of `args` (one option, with its value) and the program's
    /// agree: the same option accepted, or the same refusal.
    fn agrees(catalog: &OptionCatalog, args: &[&str], program: &str) -> bool {
        let guard_reached = program.contains("unrecognized option '--srt-probe-guard'");
        match &getopt::read(catalog, args)[0].item {
            Ok(Item::Option { .. }) => guard_reached,
            Err(getopt::ReadError::Ambiguous { .. }) => program.contains("is ambiguous"),
            Err(getopt::ReadError::Unknown { .. }) => {
                !guard_reached
                    && (program.contains("unrecognized option")
                        || program.contains("invalid option"))
            }
            Err(getopt::ReadError::UnexpectedValue { .. }) => {
                program.contains("doesn't allow an argument")
            }
            other => panic!("{args:?}: not probed here: {other:?}"),
        }
    }

    /// The checked-in catalogs are the installed SLURM's: same version, the same
    /// readings of the spellings the guard depends on, and the dump script finds no
    /// difference. Skipped when SLURM's clients are not installed.
    #[test]
    fn the_catalogs_match_the_installed_slurm() {
        let dir = tempfile::tempdir().unwrap();
        let conf = dir.path().join("slurm.conf");
        std::fs::write(&conf, "ClusterName=srt-test\nSlurmctldHost=localhost\n").unwrap();
        let installed = |p: &str| {
            std::process::Command::new(p)
                .arg("--version")
                .env("SLURM_CONF", &conf)
                .output()
                .ok()
        };
        let (Some(srun), Some(_)) = (installed("srun"), installed("sbatch")) else {
            eprintln!("skipped: srun/sbatch are not installed (scripts/install-deps.sh slurm)");
            return;
        };
        let version = String::from_utf8_lossy(&srun.stdout).into_owned();
        let cases: [(&OptionCatalog, &[&[&str]]); 2] = [
            (
                srun_catalog(),
                &[
                    &["--nodel=n7"],
                    &["--jobi=99"],
                    &["--ntask=8"],
                    &["-N2"],
                    &["-n4"],
                    &["-wn8"],
                    &["-vN2"],
                    &["-N", "2"],
                    &["--cpus-per-task=4"],
                    &["--exclusive"],
                    &["--mem", "4G"],
                    &["-c4"],
                    &["--exclu=x"],
                    &["--cpu_bind=cores"],
                    &["--nodelsit=n1"],
                    &["--label=yes"],
                    &["--comment", "--nodelist=n1"],
                ],
            ),
            (
                sbatch_catalog(),
                &[
                    &["--job-nam="],
                    &["--nodeli=n1"],
                    &["--wr=true"],
                    &["--export=ALL"],
                    &["--par"],
                    &["-pdebug"],
                    &["--qos=high"],
                    &["--no-requeue=x"],
                ],
            ),
        ];
        for (catalog, probes) in cases {
            assert!(
                version.trim_end().ends_with(&catalog.version),
                "installed {version:?}, catalog {}: regenerate it with scripts/slurm-option-catalogs.sh",
                catalog.version
            );
            for args in probes {
                let theirs = program_reads(&conf, &catalog.program, args);
                assert!(
                    agrees(catalog, args, &theirs),
                    "{} {args:?}: {theirs}",
                    catalog.program
                );
            }
        }
        if installed("python3").is_none() {
            eprintln!("skipped the full check: python3 is not installed");
            return;
        }
        let script =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../../scripts/slurm-option-catalogs.sh");
        let check = std::process::Command::new("bash")
            .arg(&script)
            .arg("--check")
            .output()
            .unwrap();
        assert!(
            check.status.success(),
            "{}",
            String::from_utf8_lossy(&check.stderr)
        );
    }
}
