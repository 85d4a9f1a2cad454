//! The node agent of a SLURM allocation: one `srt slurm-agent` task per node, started
//! by the allocation itself, that launches the `srun` clients of its node's steps.
//!
//! A step lives as long as its `srun` client. With one client per process on the
//! machine running srt, that machine would hold every step's life (and about 10 MB per
//! step); the agent moves the clients into the allocation, on the node of their step,
//! so the machine running srt holds none and may go away while the deployment serves.
//!
//! The agent and srt talk through a directory on the filesystem the nodes share,
//! `<deployment dir>/agents/<job>/<node>/`, every part of it the user's alone (0700
//! directories, 0600 files, checked by the agent before it reads anything):
//!
//! * `hello.json` ([`Hello`]): written by the agent when it starts and rewritten every
//!   [`BEAT`]: its host, the devices SLURM gave the node, the node's IPv4 address on
//!   the profile's interface, and the TCP ports in LISTEN state there.
//! * `in/<address>.json` ([`Request`]): a launch, written by srt. srt stages it under a
//!   hidden name when apply starts the process and renames it in place only once the
//!   launch is recorded ([`commit`]), so an apply killed in between launches nothing
//!   its state does not know of. The agent removes the request before it acts on it:
//!   the environment (tokens included) stays on disk only until the launch.
//! * `out/<address>.json` ([`Outcome`]): what became of the launch: the client's pid,
//!   or why it could not start, and whether the client has ended.
//!
//! The scheduler stays the source of truth for steps: srt finds, observes and cancels
//! them by name in `squeue` and `scancel`, as before; the agent only owns the clients.

use super::process::{self, Liveness, ProcessIdentity, ProcessSpec};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::io;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// How often the agent rewrites its hello.
pub const BEAT: Duration = Duration::from_secs(1);

/// How often it looks for requests.
const POLL: Duration = Duration::from_millis(50);

/// The folder of a deployment directory holding its agents' directories.
pub const AGENTS_DIR: &str = "agents";

/// The directory of one allocation's agents.
pub fn job_dir(dir: &Path, job: u64) -> PathBuf {
    dir.join(AGENTS_DIR).join(job.to_string())
}

/// The directory of the agent of `node` in allocation `job`.
pub fn node_dir(dir: &Path, job: u64, node: &str) -> PathBuf {
    job_dir(dir, job).join(node)
}

/// What an agent says of itself and its node, every [`BEAT`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hello {
    /// The agent's pid on its node.
    pub pid: u32,
    /// The node's hostname.
    pub host: String,
    /// When this hello was written (milliseconds since the epoch, the node's clock).
    pub beat_ms: u64,
    /// The value of the profile's devices variable (`CUDA_VISIBLE_DEVICES`), if set.
    pub devices: Option<String>,
    /// The node's IPv4 address on the profile's interface, when one is named.
    pub ip: Option<String>,
    /// Why that address could not be read.
    pub ip_error: Option<String>,
    /// TCP ports in LISTEN state on the node.
    pub listening: BTreeSet<u16>,
}

/// A launch srt asks of an agent.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Request {
    /// This launch's id, repeated in its [`Outcome`].
    pub launch: String,
    /// The resource's address.
    pub address: String,
    /// The client's program.
    pub program: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// The client's whole environment (the agent's own is not passed on).
    pub env: BTreeMap<String, String>,
    /// Where the client's output is appended.
    pub log_path: PathBuf,
}

/// What became of a launch.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Outcome {
    /// The [`Request::launch`] it answers.
    pub launch: String,
    /// The client, once it runs.
    pub client: Option<ProcessIdentity>,
    /// Why it did not start.
    pub error: Option<String>,
    /// Whether the client has ended.
    pub ended: bool,
}

fn millis_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

impl Hello {
    /// How long ago (by this machine's clock) the hello was written.
    pub fn age(&self) -> Duration {
        Duration::from_millis(millis_now().saturating_sub(self.beat_ms))
    }
}

fn request_path(node_dir: &Path, address: &str) -> PathBuf {
    node_dir.join("in").join(format!("{address}.json"))
}

fn staged_path(node_dir: &Path, address: &str) -> PathBuf {
    node_dir.join("in").join(format!(".{address}.staged"))
}

fn stop_path(node_dir: &Path, address: &str) -> PathBuf {
    node_dir.join("in").join(format!("{address}.stop"))
}

fn claimed_path(node_dir: &Path, address: &str) -> PathBuf {
    node_dir.join("claimed").join(format!("{address}.json"))
}

fn outcome_path(node_dir: &Path, address: &str) -> PathBuf {
    node_dir.join("out").join(format!("{address}.json"))
}

fn write_json<T: Serialize>(path: &Path, value: &T) -> io::Result<()> {
    if let Some(parent) = path.parent() {
        crate::files::private_dir(parent)?;
    }
    let bytes = serde_json::to_vec(value).map_err(io::Error::other)?;
    crate::files::write_atomic(path, &bytes)
}

fn read_json<T: for<'de> Deserialize<'de>>(path: &Path) -> io::Result<Option<T>> {
    match crate::files::read(path) {
        Ok(bytes) => serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|e| io::Error::new(io::ErrorKind::InvalidData, e)),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e),
    }
}

/// srt's side: write a launch under its hidden name, for [`commit`] to hand over.
pub fn stage(node_dir: &Path, request: &Request) -> io::Result<()> {
    write_json(&staged_path(node_dir, &request.address), request)
}

/// srt's side: hand a staged launch to the agent.
pub fn commit(node_dir: &Path, address: &str) -> io::Result<()> {
    std::fs::rename(
        staged_path(node_dir, address),
        request_path(node_dir, address),
    )
}

/// A stop srt asks of an agent: end the client of launch `launch` (one whose step
/// never appeared, e.g. an `srun` waiting for resources), so that it never starts it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Stop {
    /// The [`Request::launch`] whose client to end.
    pub launch: String,
}

/// srt's side: ask the agent to end the client of launch `launch` of `address`.
pub fn request_stop(node_dir: &Path, address: &str, launch: &str) -> io::Result<()> {
    write_json(
        &stop_path(node_dir, address),
        &Stop {
            launch: launch.to_string(),
        },
    )
}

/// srt's side: take back a launch the agent has not picked up yet (staged or handed
/// over); whether one was there.
pub fn withdraw(node_dir: &Path, address: &str) -> bool {
    let staged = std::fs::remove_file(staged_path(node_dir, address)).is_ok();
    let pending = std::fs::remove_file(request_path(node_dir, address)).is_ok();
    staged || pending
}

/// Whether the agent has taken a launch of `address` and not yet said what became of
/// it (the few milliseconds it takes to start the client).
pub fn claimed(node_dir: &Path, address: &str) -> bool {
    claimed_path(node_dir, address).exists()
}

/// Whether launch `launch` of `address`, handed over, is on its way or running: not
/// picked up yet, being started, or started with a client the agent has not seen end.
/// (A launch only staged is on its way only while the apply that staged it runs: the
/// caller knows.)
pub fn launching(node_dir: &Path, address: &str, launch: &str) -> bool {
    let waiting = [
        request_path(node_dir, address),
        claimed_path(node_dir, address),
    ];
    waiting.iter().any(|p| p.exists())
        || outcome(node_dir, address, launch)
            .ok()
            .flatten()
            .is_some_and(|o| o.client.is_some() && !o.ended)
}

/// The agent's last hello, if it wrote one.
pub fn hello(node_dir: &Path) -> io::Result<Option<Hello>> {
    read_json(&node_dir.join("hello.json"))
}

/// The outcome of launch `launch` of `address`, once the agent wrote it.
pub fn outcome(node_dir: &Path, address: &str, launch: &str) -> io::Result<Option<Outcome>> {
    Ok(read_json::<Outcome>(&outcome_path(node_dir, address))?.filter(|o| o.launch == launch))
}

/// What the agent is started with.
#[derive(Clone, Debug)]
pub struct AgentOptions {
    /// `<deployment dir>/agents`.
    pub agents: PathBuf,
    /// The allocation's job id.
    pub job: u64,
    /// This node's name in the allocation.
    pub node: String,
    /// The interface whose IPv4 address the node advertises.
    pub interface: Option<String>,
    /// The variable SLURM sets to the node's GPUs.
    pub devices_env: String,
}

/// A launch the agent keeps an eye on.
struct Launched {
    outcome: Outcome,
    address: String,
}

/// The agent: runs until killed (the allocation's end), handing each request of its
/// directory to a detached client and reporting on it. Fails at once when its
/// directory is not the user's alone; after that, only a kill ends it.
pub fn run(options: &AgentOptions) -> io::Result<()> {
    crate::files::private_dir(&options.agents)?;
    let dir = options
        .agents
        .join(options.job.to_string())
        .join(&options.node);
    for sub in ["in", "claimed", "out", "leases"] {
        crate::files::private_dir(&dir.join(sub))?;
    }
    // Requests left by an earlier job of the same id (a rebuilt controller counts
    // from 1 again) were never meant for this one.
    for sub in ["in", "claimed"] {
        for entry in std::fs::read_dir(dir.join(sub))?.flatten() {
            let _ = std::fs::remove_file(entry.path());
        }
    }
    let mut launched: Vec<Launched> = Vec::new();
    let mut last_beat: Option<std::time::Instant> = None;
    loop {
        for request in pending(&dir) {
            let outcome = launch(&dir, &request);
            report(write_json(&outcome_path(&dir, &request.address), &outcome));
            // Only now: until its outcome is written, the claim says it is on its way.
            let _ = std::fs::remove_file(claimed_path(&dir, &request.address));
            if outcome.client.is_some() {
                launched.retain(|l| l.address != request.address);
                launched.push(Launched {
                    outcome,
                    address: request.address.clone(),
                });
            }
        }
        for stop in stops(&dir) {
            if let Some(l) = launched.iter().find(|l| l.outcome.launch == stop.launch) {
                let id = l.outcome.client.as_ref().expect("a launched client");
                if let Err(e) = process::signal_leader(id, nix::sys::signal::Signal::SIGTERM) {
                    eprintln!("srt agent: stopping {}: {e}", l.address);
                }
            }
        }
        if last_beat.is_none_or(|t| t.elapsed() >= BEAT) {
            for l in &mut launched {
                let id = l.outcome.client.as_ref().expect("a launched client");
                if process::liveness(id) != Liveness::Alive {
                    l.outcome.ended = true;
                    report(write_json(&outcome_path(&dir, &l.address), &l.outcome));
                }
            }
            launched.retain(|l| !l.outcome.ended);
            report(write_json(&dir.join("hello.json"), &look_around(options)));
            last_beat = Some(std::time::Instant::now());
        }
        std::thread::sleep(POLL);
    }
}

/// A write the agent could not make is said on its output; the agent goes on (its
/// end would end the allocation), and srt sees what is missing as a silent agent.
fn report(written: io::Result<()>) {
    if let Err(e) = written {
        eprintln!("srt agent: {e}");
    }
}

/// The requests handed over, each claimed by moving it out of `in/` (srt withdraws a
/// launch by removing it there, so exactly one of the two gets it) and read; the claim
/// stays until the launch's outcome is written.
fn pending(dir: &Path) -> Vec<Request> {
    claim::<Request>(dir, "json")
        .into_iter()
        .map(|(request, _)| request)
        .collect()
}

/// The stops asked, each claimed, read and its claim removed.
fn stops(dir: &Path) -> Vec<Stop> {
    claim::<Stop>(dir, "stop")
        .into_iter()
        .map(|(stop, claimed)| {
            let _ = std::fs::remove_file(claimed);
            stop
        })
        .collect()
}

/// The files of `in/` ending in `.extension` (not the hidden, staged ones), in name
/// order, each moved to `claimed/` and read, with where it now is. A file that is not
/// the user's alone is removed unread.
fn claim<T: for<'de> Deserialize<'de>>(dir: &Path, extension: &str) -> Vec<(T, PathBuf)> {
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir.join("in"))
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.extension().is_some_and(|x| x == extension)
                && !p
                    .file_name()
                    .is_some_and(|n| n.to_string_lossy().starts_with('.'))
        })
        .collect();
    paths.sort();
    paths
        .into_iter()
        .filter_map(|path| {
            let claimed = dir.join("claimed").join(path.file_name()?);
            std::fs::rename(&path, &claimed).ok()?;
            match private_file::<T>(&claimed) {
                Ok(value) => Some((value, claimed)),
                Err(e) => {
                    let _ = std::fs::remove_file(&claimed);
                    eprintln!("srt agent: ignored {}: {e}", path.display());
                    None
                }
            }
        })
        .collect()
}

/// A file srt wrote for the agent, read only when nobody else may read it.
fn private_file<T: for<'de> Deserialize<'de>>(path: &Path) -> io::Result<T> {
    let meta = std::fs::symlink_metadata(path)?;
    if meta.permissions().mode() & 0o077 != 0 {
        return Err(io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!(
                "mode {:o}: others may read it",
                meta.permissions().mode() & 0o7777
            ),
        ));
    }
    read_json(path)?.ok_or_else(|| io::Error::from(io::ErrorKind::NotFound))
}

/// Start a request's client, detached, with exactly the request's environment.
fn launch(dir: &Path, request: &Request) -> Outcome {
    let lease = dir
        .join("leases")
        .join(format!("{}.lease", request.address));
    let started = earlier_launch(&lease).and_then(|()| {
        let mut spec = ProcessSpec::new(&request.program, &request.log_path);
        spec.args = request.args.clone();
        spec.env = request.env.clone();
        spec.env_remove = std::env::vars_os()
            .filter_map(|(k, _)| k.into_string().ok())
            .filter(|k| !request.env.contains_key(k))
            .collect();
        spec.lease = Some(lease.clone());
        process::spawn_detached(&spec).map_err(|e| e.to_string())
    });
    match started {
        Ok(id) => Outcome {
            launch: request.launch.clone(),
            client: Some(id),
            error: None,
            ended: false,
        },
        Err(error) => Outcome {
            launch: request.launch.clone(),
            client: None,
            error: Some(error),
            ended: true,
        },
    }
}

/// An earlier launch of the same address whose client still runs is not launched over.
fn earlier_launch(lease: &Path) -> Result<(), String> {
    let Some(id) = process::lease_identity(lease) else {
        return Ok(());
    };
    let live = process::members(&id);
    if live.is_empty() {
        return Ok(());
    }
    Err(format!(
        "an earlier launch of it still runs on this node (pids {live:?})"
    ))
}

/// This node, as the hello tells it.
fn look_around(options: &AgentOptions) -> Hello {
    let (ip, ip_error) = match &options.interface {
        None => (None, None),
        Some(iface) => match interface_ipv4(iface) {
            Ok(ip) => (Some(ip), None),
            Err(e) => (None, Some(e)),
        },
    };
    Hello {
        pid: std::process::id(),
        host: process::hostname().unwrap_or_default(),
        beat_ms: millis_now(),
        devices: std::env::var(&options.devices_env).ok(),
        ip,
        ip_error,
        listening: listening_ports(),
    }
}

/// The IPv4 address of `iface`, as `ip -4 -o addr show dev IFACE` prints it.
fn interface_ipv4(iface: &str) -> Result<String, String> {
    let out = std::process::Command::new("ip")
        .args(["-4", "-o", "addr", "show", "dev", iface])
        .output()
        .map_err(|e| format!("cannot run `ip`: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    text.lines()
        .find_map(|l| {
            let after = l.split("inet ").nth(1)?;
            let ip = after.split(['/', ' ']).next()?;
            ip.parse::<std::net::Ipv4Addr>().ok().map(|a| a.to_string())
        })
        .ok_or_else(|| {
            format!(
                "no IPv4 address on interface `{iface}`: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            )
        })
}

/// Ports in LISTEN state in `/proc/net/tcp` and `tcp6`.
fn listening_ports() -> BTreeSet<u16> {
    let mut text = String::new();
    for table in ["/proc/net/tcp", "/proc/net/tcp6"] {
        text.push_str(&std::fs::read_to_string(table).unwrap_or_default());
    }
    parse_listening(&text)
}

/// The local ports of the LISTEN (`0A`) lines of `/proc/net/tcp{,6}`.
pub fn parse_listening(text: &str) -> BTreeSet<u16> {
    text.lines()
        .filter_map(|line| {
            let mut fields = line.split_whitespace();
            let local = fields.nth(1)?;
            let state = fields.nth(1)?;
            if state != "0A" {
                return None;
            }
            let port = local.rsplit(':').next()?;
            u16::from_str_radix(port, 16).ok()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn options(root: &Path) -> AgentOptions {
        AgentOptions {
            agents: root.join("agents"),
            job: 7,
            node: "n1".into(),
            interface: None,
            devices_env: "SRT_TEST_DEVICES".into(),
        }
    }

    fn scratch() -> PathBuf {
        let d = std::env::temp_dir().join(format!("srt-agent-{}", uuid::Uuid::new_v4().simple()));
        crate::files::private_dir(&d).unwrap();
        d
    }

    fn request(root: &Path, address: &str, script: &str) -> Request {
        Request {
            launch: uuid::Uuid::new_v4().to_string(),
            address: address.into(),
            program: "sh".into(),
            args: vec!["-c".into(), script.into()],
            env: BTreeMap::from([
                ("PATH".into(), std::env::var("PATH").unwrap_or_default()),
                ("SRT_TOKEN".into(), "secret".into()),
            ]),
            log_path: root.join(format!("{address}.log")),
        }
    }

    fn wait_for<T>(mut f: impl FnMut() -> Option<T>) -> T {
        for _ in 0..200 {
            if let Some(v) = f() {
                return v;
            }
            std::thread::sleep(Duration::from_millis(25));
        }
        panic!("timed out");
    }

    #[test]
    fn a_committed_launch_runs_with_exactly_its_environment_and_its_end_is_reported() {
        let root = scratch();
        let opts = options(&root);
        crate::files::private_dir(&opts.agents).unwrap();
        let agent = {
            let opts = opts.clone();
            std::thread::spawn(move || run(&opts))
        };
        let node = node_dir(&root, 7, "n1");
        let hello = wait_for(|| hello(&node).ok().flatten());
        assert_eq!(hello.pid, std::process::id());
        std::env::set_var("SRT_AGENT_OWN_VARIABLE", "1");
        let r = request(
            &root,
            "worker.agg[0]",
            "echo \"token=$SRT_TOKEN own=${SRT_AGENT_OWN_VARIABLE-unset}\"; sleep 0.3",
        );
        stage(&node, &r).unwrap();
        // Staged is not handed over: nothing runs until the commit.
        std::thread::sleep(Duration::from_millis(200));
        assert_eq!(outcome(&node, &r.address, &r.launch).unwrap(), None);
        commit(&node, &r.address).unwrap();
        let started = wait_for(|| outcome(&node, &r.address, &r.launch).ok().flatten());
        assert!(started.client.is_some(), "{started:?}");
        assert!(
            !request_path(&node, &r.address).exists(),
            "the request (with its environment) is removed once read"
        );
        let ended = wait_for(|| {
            outcome(&node, &r.address, &r.launch)
                .ok()
                .flatten()
                .filter(|o| o.ended)
        });
        assert!(ended.error.is_none());
        let log = std::fs::read_to_string(&r.log_path).unwrap();
        assert_eq!(log.trim(), "token=secret own=unset");
        assert!(!agent.is_finished());
    }

    #[test]
    fn a_request_others_may_read_is_removed_unread() {
        let root = scratch();
        let node = node_dir(&root, 7, "n1");
        let r = request(&root, "router[0]", "true");
        stage(&node, &r).unwrap();
        commit(&node, &r.address).unwrap();
        crate::files::private_dir(&node.join("claimed")).unwrap();
        let path = request_path(&node, &r.address);
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert!(pending(&node).is_empty());
        assert!(!path.exists());
        assert!(!claimed(&node, &r.address));
    }

    #[test]
    fn a_claimed_launch_cannot_be_withdrawn_and_is_on_its_way_until_its_outcome() {
        let root = scratch();
        let node = node_dir(&root, 7, "n1");
        crate::files::private_dir(&node.join("claimed")).unwrap();
        let r = request(&root, "router[0]", "true");
        stage(&node, &r).unwrap();
        assert!(!launching(&node, &r.address, &r.launch), "staged only");
        commit(&node, &r.address).unwrap();
        assert!(launching(&node, &r.address, &r.launch), "handed over");
        let taken = pending(&node);
        assert_eq!(taken, vec![r.clone()]);
        assert!(!withdraw(&node, &r.address), "the agent has it");
        assert!(claimed(&node, &r.address));
        assert!(launching(&node, &r.address, &r.launch), "claimed");
        std::fs::remove_file(claimed_path(&node, &r.address)).unwrap();
        assert!(!launching(&node, &r.address, &r.launch), "no outcome: gone");
    }

    #[test]
    fn a_launch_that_cannot_exec_says_why() {
        let root = scratch();
        let node = node_dir(&root, 7, "n1");
        crate::files::private_dir(&node.join("leases")).unwrap();
        let mut r = request(&root, "router[0]", "true");
        r.program = "/nonexistent/srun".into();
        let o = launch(&node, &r);
        assert!(o.client.is_none() && o.ended);
        assert!(o.error.unwrap().contains("/nonexistent/srun"));
    }

    #[test]
    fn a_withdrawn_launch_is_never_handed_over() {
        let root = scratch();
        let node = node_dir(&root, 7, "n1");
        let r = request(&root, "router[0]", "true");
        stage(&node, &r).unwrap();
        assert!(withdraw(&node, &r.address));
        assert!(commit(&node, &r.address).is_err());
        assert!(pending(&node).is_empty());
    }

    #[test]
    fn an_agent_in_a_directory_others_may_write_does_not_start() {
        let root = scratch();
        let opts = options(&root);
        crate::files::private_dir(&opts.agents).unwrap();
        std::fs::set_permissions(&opts.agents, std::fs::Permissions::from_mode(0o777)).unwrap();
        assert!(run(&opts).is_err());
    }

    #[test]
    fn listening_ports_parse() {
        let text = "  sl  local_address rem_address   st\n   0: 0100007F:1F90 00000000:0000 0A 0\n   1: 0100007F:1F91 0100007F:9C40 01 0\n";
        assert_eq!(parse_listening(text), BTreeSet::from([8080]));
    }
}
