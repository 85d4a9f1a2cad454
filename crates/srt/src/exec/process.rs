//! Local process primitives for the embedded executor (Linux only).
//!
//! * [`spawn_detached`] starts a program that outlives `srt` and its terminal: it runs
//!   in a new session (so it leads its own process group), reads stdin from
//!   `/dev/null` and appends stdout+stderr to a log file.
//! * [`ProcessIdentity`] pins a process down by pid **and** start time (and host), so a
//!   pid recycled by the kernel is never mistaken for ours; [`liveness`] and
//!   [`terminate`] check it before looking at or signalling anything.
//! * [`terminate`] stops the whole process group: SIGTERM, a grace period, SIGKILL.
//! * Helpers: [`port_is_free`], [`tail_file`], [`tail_excerpt`], [`processes_with_env_marker`].
//!
//! # Spawn and reap design
//!
//! The spawned program must not stay our child: if it were, every worker that exits
//! while `srt` runs would linger as a zombie until `srt` reaped it, and it would die
//! with (or be reaped by) whoever holds it. So the launch is a double fork:
//!
//! 1. `std::process::Command::spawn` forks an *intermediate* child. std sets up stdio
//!    (`/dev/null`, the log file), the working directory and then runs our `pre_exec`
//!    hook in that child.
//! 2. The hook forks again. The *intermediate* writes the grandchild's pid and a copy of
//!    its `/proc/<pid>/stat` into a handshake pipe and `_exit`s without ever returning
//!    to std. The *grandchild* calls `setsid()` (new session, new process group with
//!    pgid = pid, no controlling terminal), resets its signal mask and the termination
//!    signals to their defaults, marks every inherited descriptor close-on-exec, and
//!    returns to std, which applies the environment and `execvp`s the program.
//! 3. The parent (`srt`) reads the handshake and `wait()`s for the intermediate, so no
//!    zombie is left behind. The grandchild is an orphan adopted by init (or the
//!    nearest subreaper), which reaps it when it exits.
//!
//! Exec failures are not lost: std reports a failed `execvp` in the grandchild through
//! its own close-on-exec channel, whose write end the grandchild inherited, and `spawn`
//! returns that error (after reaping the intermediate). `spawn` only returns success
//! once every copy of that channel is closed, i.e. after the grandchild has exec'd.
//!
//! The start time is read by the intermediate *before* it exits. At that moment the
//! grandchild is still its unreaped child, so `/proc/<pid>/stat` exists even if the
//! program already died; the parent reading it later could race with init reaping a
//! short-lived program (and, in theory, with pid reuse).
//!
//! ## Why this is safe in a multi-threaded (tokio) process
//!
//! After `fork` in a multi-threaded process only async-signal-safe operations are
//! allowed until `exec`: another thread may have held the allocator lock or any mutex
//! at the instant of the fork. Everything the hook does is a raw system call wrapper
//! (`fork`, `setsid`, `sigprocmask`, `sigaction`, `open`, `read`, `close`, `write`,
//! `syscall(close_range)`, `_exit`) plus arithmetic on stack buffers: no allocation, no
//! locks, no panics, no formatting. The second `fork` happens in the intermediate, which
//! is single-threaded; `fork` is on the POSIX.1-2008 async-signal-safe list, and glibc
//! reinitialises its internal fork-related locks (allocator arenas, stdio list, atfork
//! list) in the child of the first fork, so they are consistent for the second one.
//! glibc's `fork` also runs `pthread_atfork` handlers; the only one in the current
//! dependency tree (rand 0.8's reseeding counter, pulled in by zeromq) just bumps an
//! atomic, which is async-signal-safe. A dependency that registers a handler doing
//! more would need a look here.
//! `Command` with `pre_exec` was preferred over a hand-written `fork`/`execve` because
//! std already does the delicate parts (stdio `dup2`, `chdir`, environment capture
//! under its environment lock, PATH lookup, exec-error reporting) with the same
//! discipline.
//!
//! The parent never calls `waitpid(-1)`, so it cannot steal exit statuses from tokio's
//! child reaper or anyone else; it only waits for the intermediate's own pid.
//!
//! ## Zombies that are not ours
//!
//! If init does not reap orphans (some container init processes don't), an exited
//! program stays a zombie under init. [`liveness`] reports a zombie as
//! [`Liveness::Exited`], and group membership checks ignore zombies.

use std::collections::BTreeMap;
use std::fs::{self, File};
use std::io::{self, Read, Seek, SeekFrom};
use std::net::{IpAddr, TcpListener};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use crate::files;
use nix::errno::Errno;
use nix::fcntl::OFlag;
use nix::libc;
use nix::sys::signal::{kill, killpg, Signal};
use nix::unistd::Pid;
use serde::{Deserialize, Serialize};

/// How often [`terminate`] first re-checks whether everything is gone.
const POLL_INTERVAL: Duration = Duration::from_millis(20);

/// The longest interval between two such checks (each scans `/proc`).
const MAX_POLL_INTERVAL: Duration = Duration::from_millis(200);

/// How long [`terminate`] waits for the group to disappear after SIGKILL.
const KILL_WAIT: Duration = Duration::from_secs(5);

/// Bytes of `/proc/<pid>/stat` the intermediate sends back. A stat line has 52 numeric
/// fields plus a comm of at most 15 bytes; the start time (field 22) is always within
/// the first few hundred bytes.
const STAT_MAX: usize = 1536;

/// Handshake frame: pid (i32), stat length (u32), stat bytes. Smaller than PIPE_BUF,
/// so the single `write` is atomic.
const FRAME_MAX: usize = 8 + STAT_MAX;

/// What to run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessSpec {
    /// Program to execute; looked up in the child's `PATH` unless it contains a `/`.
    pub program: String,
    /// Arguments, not including the program name.
    pub args: Vec<String>,
    /// Variables set on top of the inherited environment (applied after `env_remove`,
    /// so a key present in both ends up set).
    pub env: BTreeMap<String, String>,
    /// Variables removed from the inherited environment (e.g. `VLLM_PORT`).
    pub env_remove: Vec<String>,
    /// Working directory; the current one when `None`. Must exist.
    pub cwd: Option<PathBuf>,
    /// stdout and stderr are appended here. Parent directories are created and the
    /// file is made mode 0600 (logs can contain tokens and prompts).
    pub log_path: PathBuf,
    /// The process's lease file (see [`read_lease`]): created before the fork, written
    /// by the process itself before it execs, and held open by it (and by any child
    /// that inherits its descriptors) whatever it renames itself to.
    pub lease: Option<PathBuf>,
}

impl ProcessSpec {
    /// A spec with no arguments, no environment changes and the current directory.
    pub fn new(program: impl Into<String>, log_path: impl Into<PathBuf>) -> Self {
        ProcessSpec {
            program: program.into(),
            args: Vec::new(),
            env: BTreeMap::new(),
            env_remove: Vec::new(),
            cwd: None,
            log_path: log_path.into(),
            lease: None,
        }
    }
}

/// Who a spawned process is, so a reused pid is never mistaken for ours.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct ProcessIdentity {
    /// Process id.
    pub pid: u32,
    /// Process group id; equal to `pid` for processes started by [`spawn_detached`].
    pub pgid: u32,
    /// `/proc/<pid>/stat` field 22: start time in clock ticks since boot.
    pub start_time: u64,
    /// Hostname of the machine the process runs on.
    pub host: String,
    /// The lease file the process was started with ([`ProcessSpec::lease`]): the mark
    /// [`terminate`] checks before any signal, and how its descendants are found.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lease: Option<PathBuf>,
}

/// Whether the process an identity describes is still running.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Liveness {
    /// Running (or stopped), with the recorded start time.
    Alive,
    /// Gone, or a zombie waiting to be reaped.
    Exited,
    /// The pid exists but belongs to another process (different start time), or the
    /// identity was recorded on another host, where this pid means nothing.
    Reused,
}

/// What [`terminate`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TerminateOutcome {
    /// The group exited after SIGTERM, within the grace period.
    Exited,
    /// The grace period ran out; the group was SIGKILLed and is gone.
    Killed,
    /// Nothing was running any more; no signal was sent.
    AlreadyGone,
    /// The pid belongs to someone else now (or to another host); no signal was sent.
    NotOurs,
    /// The process runs, but its lease file is gone and it holds no lease signed by
    /// itself: it cannot be told apart from a stranger with the recorded pid and start
    /// time, so no signal was sent. The caller may prove it another way (srt's markers
    /// in its environment).
    LeaseMissing,
}

/// Failures of the local process primitives.
#[derive(Debug, thiserror::Error, miette::Diagnostic)]
pub enum ProcessError {
    /// The machine's hostname could not be read.
    #[error("cannot read this machine's hostname: {error}")]
    #[diagnostic(code(srt::process::hostname))]
    Hostname {
        /// The underlying error.
        error: Errno,
    },

    /// The log file (or its directory) could not be created or opened.
    #[error("cannot open log file {}: {error}", path.display())]
    #[diagnostic(
        code(srt::process::log_file),
        help("check that the directory is writable")
    )]
    LogFile {
        /// The log file.
        path: PathBuf,
        /// The underlying error.
        error: io::Error,
    },

    /// The lease file could not be created.
    #[error("cannot create the lease file {} for `{program}`: {error}", path.display())]
    #[diagnostic(
        code(srt::process::lease),
        help("check that the state directory is writable")
    )]
    Lease {
        /// The program that was to be started.
        program: String,
        /// The lease file.
        path: PathBuf,
        /// The underlying error.
        error: io::Error,
    },

    /// The requested working directory is missing.
    #[error("working directory {} for `{program}` does not exist or is not a directory", path.display())]
    #[diagnostic(code(srt::process::cwd))]
    Cwd {
        /// The program that was to be started.
        program: String,
        /// The missing directory.
        path: PathBuf,
    },

    /// The program could not be started (not found, not executable, fork failed...).
    #[error("failed to start `{program}`: {error}")]
    #[diagnostic(
        code(srt::process::spawn),
        help("check that the program is installed, executable and on PATH")
    )]
    Spawn {
        /// The program that was to be started.
        program: String,
        /// The underlying error, as reported by the forked child.
        error: io::Error,
    },

    /// The program started, but its pid or start time could not be obtained.
    #[error("started `{program}` but lost track of it: {detail}")]
    #[diagnostic(code(srt::process::handshake))]
    Handshake {
        /// The program that was started.
        program: String,
        /// What went wrong.
        detail: String,
    },

    /// The identity's process group is not the process's own, so signalling the group
    /// could hit processes that are not ours.
    #[error("refusing to signal pid {pid}: its recorded process group {pgid} is not its own")]
    #[diagnostic(
        code(srt::process::invalid_identity),
        help("only identities returned by spawn_detached can be terminated")
    )]
    InvalidIdentity {
        /// Recorded pid.
        pid: u32,
        /// Recorded process group id.
        pgid: u32,
    },

    /// Sending a signal failed for a reason other than the group being gone.
    #[error("cannot send {signal} to process group {pgid}: {error}")]
    #[diagnostic(code(srt::process::signal))]
    Signal {
        /// The process group.
        pgid: u32,
        /// The signal.
        signal: Signal,
        /// The underlying error.
        error: Errno,
    },

    /// The group survived SIGKILL (typically stuck in uninterruptible I/O).
    #[error("process group {pgid} is still alive {waited:?} after SIGKILL")]
    #[diagnostic(
        code(srt::process::unkillable),
        help("a process in uninterruptible sleep (state D, e.g. in a GPU driver) cannot die until the kernel call returns")
    )]
    StillAlive {
        /// The process group.
        pgid: u32,
        /// How long we waited after SIGKILL.
        waited: Duration,
    },
}

/// Starts `spec` detached from `srt`: new session and process group (pgid = pid),
/// stdin from `/dev/null`, stdout and stderr appended to `spec.log_path`, not a child
/// of the calling process (see the module docs for the double fork).
///
/// Blocks only until the program has been exec'd (a few milliseconds). A program that
/// cannot be executed yields [`ProcessError::Spawn`] naming it.
pub fn spawn_detached(spec: &ProcessSpec) -> Result<ProcessIdentity, ProcessError> {
    let host = hostname()?;
    if let Some(cwd) = &spec.cwd {
        if !cwd.is_dir() {
            return Err(ProcessError::Cwd {
                program: spec.program.clone(),
                path: cwd.clone(),
            });
        }
    }
    let log = open_log(&spec.log_path)?;
    let log_err = log.try_clone().map_err(|error| ProcessError::LogFile {
        path: spec.log_path.clone(),
        error,
    })?;
    let (report_r, report_w) =
        nix::unistd::pipe2(OFlag::O_CLOEXEC).map_err(|errno| ProcessError::Spawn {
            program: spec.program.clone(),
            error: io::Error::from(errno),
        })?;

    let lease = spec
        .lease
        .as_deref()
        .map(|path| open_lease(path, &spec.program))
        .transpose()?;
    let lease_fd = lease.as_ref().map_or(-1, std::os::fd::AsRawFd::as_raw_fd);

    let mut cmd = Command::new(&spec.program);
    cmd.args(&spec.args)
        .stdin(Stdio::null())
        .stdout(log)
        .stderr(log_err);
    for key in &spec.env_remove {
        cmd.env_remove(key);
    }
    cmd.envs(&spec.env);
    if let Some(cwd) = &spec.cwd {
        cmd.current_dir(cwd);
    }
    let report_fd = report_w.as_raw_fd();
    // SAFETY: the hook only performs async-signal-safe system calls on stack data and
    // never unwinds; see `fork_hook` and the module docs.
    unsafe {
        cmd.pre_exec(move || fork_hook(report_fd, lease_fd));
    }

    let spawned = cmd.spawn();
    // Close our copies of the log descriptors and of the handshake write end, so the
    // handshake read sees EOF if the intermediate dies without reporting.
    drop(cmd);
    drop(report_w);
    drop(lease);
    let mut intermediate = spawned.map_err(|error| ProcessError::Spawn {
        program: spec.program.clone(),
        error,
    })?;
    let report = read_handshake(File::from(report_r));
    // Reap the intermediate whatever the handshake said; it has exited or is about to.
    // An error here (ECHILD if SIGCHLD is ignored process-wide) leaves nothing to reap.
    let _ = intermediate.wait();

    let (pid, stat) = report.map_err(|detail| ProcessError::Handshake {
        program: spec.program.clone(),
        detail,
    })?;
    let start_time = parse_stat(&stat)
        .or_else(|| read_stat(pid))
        .map(|s| s.start_time)
        .ok_or_else(|| ProcessError::Handshake {
            program: spec.program.clone(),
            detail: format!("cannot read the start time of pid {pid} from /proc"),
        })?;
    Ok(ProcessIdentity {
        pid,
        pgid: pid,
        start_time,
        host,
        lease: spec.lease.clone(),
    })
}

/// Whether the process `id` describes is running, gone, or its pid now names another
/// process. A zombie counts as [`Liveness::Exited`]; an identity from another host, or
/// whose lease names another process, is [`Liveness::Reused`] (the local pid is not
/// that process).
pub fn liveness(id: &ProcessIdentity) -> Liveness {
    observe(id).0
}

/// [`liveness`], and whether a live process is stopped (SIGSTOP, a debugger: alive, but
/// serving nothing until continued), from one read of `/proc`: what refresh asks of
/// every recorded process.
pub fn observe(id: &ProcessIdentity) -> (Liveness, bool) {
    match probe_stat(id) {
        (Probe::Running, _) if mark(id) == Mark::Mismatch => (Liveness::Reused, false),
        (Probe::Running, stat) => (
            Liveness::Alive,
            stat.is_some_and(|s| matches!(s.state, b'T' | b't')),
        ),
        (Probe::Zombie | Probe::Missing, _) => (Liveness::Exited, false),
        (Probe::Foreign, _) => (Liveness::Reused, false),
    }
}

/// Send `signal` to the leader of `id` if it is alive and provably ours (its lease
/// names it); `Ok(false)` when it is not running or not ours, and nothing was sent.
pub fn signal_leader(
    id: &ProcessIdentity,
    signal: nix::sys::signal::Signal,
) -> Result<bool, ProcessError> {
    if !valid_ids(id) || !same_host(id) || liveness(id) != Liveness::Alive {
        return Ok(false);
    }
    // A legacy identity (no lease) is checked by its caller (its environment marker).
    if !matches!(mark(id), Mark::Signed | Mark::None) {
        return Ok(false);
    }
    match nix::sys::signal::kill(nix::unistd::Pid::from_raw(id.pid as i32), signal) {
        Ok(()) => Ok(true),
        Err(Errno::ESRCH) => Ok(false),
        Err(error) => Err(ProcessError::Signal {
            pgid: id.pid,
            signal,
            error,
        }),
    }
}

/// The live processes that belong to `id`: every member of its process group or session
/// that started no earlier than it. Once the leader has exited its number stays
/// reserved by the kernel while any member of its group or session lives, so members
/// found by that number are the leader's own children, never a later process's.
/// Zombies are not counted; the leader is included while it runs.
pub fn members(id: &ProcessIdentity) -> Vec<u32> {
    if !valid_ids(id) || !same_host(id) {
        return Vec::new();
    }
    let mut pids: Vec<u32> = proc_pids()
        .filter(|&pid| {
            read_stat(pid).is_some_and(|s| {
                (s.pgrp == id.pgid || s.session == id.pgid)
                    && !s.is_dead()
                    && s.start_time >= id.start_time
            })
        })
        .collect();
    pids.sort_unstable();
    pids
}

/// What still runs of `id`: its live members (see [`members`]), or when none, the
/// processes holding its lease (a descendant that left the session; finding them
/// reads every process's descriptors, so it is asked only when nothing else lives).
pub fn survivors(id: &ProcessIdentity) -> Vec<u32> {
    let live = members(id);
    if !live.is_empty() {
        return live;
    }
    match (&id.lease, mark(id)) {
        (Some(path), Mark::Signed) => lease_holders(path)
            .into_iter()
            .filter(|&pid| read_stat(pid).is_some_and(|s| s.start_time >= id.start_time))
            .collect(),
        _ => Vec::new(),
    }
}

/// Stops everything `id` started: its process group, its session (vLLM's EngineCore
/// and workers, the resource tracker) and any process still holding its lease, even
/// when the leader itself is already gone (killed from outside). SIGTERM (followed by
/// SIGCONT, so stopped members see it), then up to `grace` for all of them to exit,
/// then SIGKILL and a bounded wait. Once nothing is left the lease file is removed.
///
/// Nothing is signalled unless it is provably ours: the identity's lease must be
/// signed by exactly this pid and start time (a state file pointed at an unrelated
/// process fails this), a running leader must match the recorded start time, and
/// members are found only through numbers the kernel keeps reserved for the leader.
/// A pid now used by another program yields [`TerminateOutcome::NotOurs`].
pub async fn terminate(
    id: &ProcessIdentity,
    grace: Duration,
) -> Result<TerminateOutcome, ProcessError> {
    if !valid_ids(id) || !same_host(id) {
        return Ok(TerminateOutcome::NotOurs);
    }
    if id.pgid != id.pid {
        return Err(ProcessError::InvalidIdentity {
            pid: id.pid,
            pgid: id.pgid,
        });
    }
    let leader = probe(id);
    match (mark(id), leader) {
        (Mark::Mismatch, _) => return Ok(TerminateOutcome::NotOurs),
        // The lease file is gone but "our" process runs, and does not hold its lease
        // open either: it cannot be told apart from a stranger with the same pid and
        // start time recorded by hand.
        (Mark::Missing, Probe::Running) if !holds_own_lease(id) => {
            return Ok(TerminateOutcome::LeaseMissing)
        }
        _ => {}
    }
    // Descendants that left the session but kept the lease open, found once (a scan of
    // every descriptor of every process is the expensive look).
    let holders: Vec<(u32, u64)> = match (&id.lease, mark(id)) {
        (Some(path), Mark::Signed) => lease_holders(path)
            .into_iter()
            .filter_map(|pid| read_stat(pid).map(|s| (pid, s.start_time)))
            .filter(|&(_, t)| t >= id.start_time)
            .collect(),
        _ => Vec::new(),
    };
    let live = |id: &ProcessIdentity| -> Vec<u32> {
        // A reused leader pid means our group and session are gone (their numbers
        // were freed), so only lease holders may remain.
        let mut pids = if probe(id) == Probe::Foreign {
            Vec::new()
        } else {
            members(id)
        };
        for &(pid, t) in &holders {
            if read_stat(pid).is_some_and(|s| s.start_time == t && !s.is_dead()) {
                pids.push(pid);
            }
        }
        pids.sort_unstable();
        pids.dedup();
        pids
    };
    let mut targets = live(id);
    if targets.is_empty() {
        remove_lease(id);
        return Ok(if leader == Probe::Foreign {
            TerminateOutcome::NotOurs
        } else {
            TerminateOutcome::AlreadyGone
        });
    }
    signal_all(id, &targets, Signal::SIGTERM)?;
    // A stopped member (SIGSTOP, job control) would hold SIGTERM pending until the grace
    // runs out; wake it so it can act on the TERM now.
    signal_all(id, &targets, Signal::SIGCONT)?;
    let deadline = Instant::now() + grace;
    let mut interval = POLL_INTERVAL;
    loop {
        targets = live(id);
        if targets.is_empty() {
            remove_lease(id);
            return Ok(TerminateOutcome::Exited);
        }
        let now = Instant::now();
        if now >= deadline {
            break;
        }
        tokio::time::sleep(interval.min(deadline - now)).await;
        interval = (interval * 2).min(MAX_POLL_INTERVAL);
    }
    signal_all(id, &targets, Signal::SIGKILL)?;
    let killed_at = Instant::now();
    loop {
        if live(id).is_empty() {
            remove_lease(id);
            return Ok(TerminateOutcome::Killed);
        }
        if killed_at.elapsed() >= KILL_WAIT {
            return Err(ProcessError::StillAlive {
                pgid: id.pgid,
                waited: killed_at.elapsed(),
            });
        }
        tokio::time::sleep(POLL_INTERVAL).await;
    }
}

/// Send `signal` to the group of `id` (one call reaches members forked since the last
/// look) and to each of `targets` outside it. A target that exited meanwhile is fine.
fn signal_all(id: &ProcessIdentity, targets: &[u32], signal: Signal) -> Result<(), ProcessError> {
    signal_group(id.pgid, signal)?;
    for &pid in targets {
        match kill(Pid::from_raw(pid as i32), signal) {
            Ok(()) | Err(Errno::ESRCH) => {}
            Err(error) => {
                return Err(ProcessError::Signal {
                    pgid: pid,
                    signal,
                    error,
                })
            }
        }
    }
    Ok(())
}

/// Remove the lease file of `id` once nothing of it runs, if it still names `id` (a
/// newer launch's lease is left alone).
fn remove_lease(id: &ProcessIdentity) {
    if let (Some(path), Mark::Signed | Mark::Missing) = (&id.lease, mark(id)) {
        let _ = fs::remove_file(path);
    }
}

/// Whether a TCP server could bind `ip:port` right now (tries `TcpListener::bind`, as
/// the server would, and drops the listener at once).
pub fn port_is_free(ip: IpAddr, port: u16) -> bool {
    TcpListener::bind((ip, port)).is_ok()
}

/// The last `lines` lines of the file at `path` (lossily decoded as UTF-8), like
/// `tail -n`. Reads backwards from the end in chunks, so a large log costs only as much
/// as the lines returned. A final newline does not count as an extra empty line.
pub fn tail_file(path: &Path, lines: usize) -> io::Result<String> {
    tail_file_chunked(path, lines, 64 * 1024)
}

fn tail_file_chunked(path: &Path, lines: usize, chunk: usize) -> io::Result<String> {
    let mut file = files::open_read(path)?;
    let len = file.metadata()?.len();
    if lines == 0 || len == 0 {
        return Ok(String::new());
    }
    // Scan [0, end) backwards for newlines; a newline that is the file's last byte
    // terminates the last line rather than starting a new one.
    let mut last = [0u8; 1];
    file.seek(SeekFrom::Start(len - 1))?;
    file.read_exact(&mut last)?;
    let end = if last[0] == b'\n' { len - 1 } else { len };

    let mut start = 0u64;
    let mut found = 0usize;
    let mut pos = end;
    let mut buf = vec![0u8; chunk.max(1)];
    'scan: while pos > 0 {
        let n = (pos.min(buf.len() as u64)) as usize;
        pos -= n as u64;
        file.seek(SeekFrom::Start(pos))?;
        file.read_exact(&mut buf[..n])?;
        for i in (0..n).rev() {
            if buf[i] == b'\n' {
                found += 1;
                if found == lines {
                    start = pos + i as u64 + 1;
                    break 'scan;
                }
            }
        }
    }

    file.seek(SeekFrom::Start(start))?;
    let mut out = Vec::with_capacity((len - start) as usize);
    file.take(len - start).read_to_end(&mut out)?;
    Ok(match String::from_utf8(out) {
        Ok(s) => s,
        Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
    })
}

/// Bytes of one log line a report shows ([`tail_excerpt`]); the rest is cut, marked.
pub const EXCERPT_LINE_BYTES: usize = 2048;

/// The last `lines` lines of the log at `path` as a report shows them: each line cut to
/// [`EXCERPT_LINE_BYTES`], from at most the last `lines x EXCERPT_LINE_BYTES` bytes of
/// the file, so a log that ends in one endless line costs no more than a short one (a
/// 100 MB line once made apply print 104 MB). A line cut is marked `[... cut]`; a line
/// whose start lies before that window is marked `[...]` at its start.
pub fn tail_excerpt(path: &Path, lines: usize) -> io::Result<String> {
    let mut file = files::open_read(path)?;
    let len = file.metadata()?.len();
    let window = (lines as u64).saturating_mul(EXCERPT_LINE_BYTES as u64);
    let start = len.saturating_sub(window);
    // Whether the window starts a line: the byte before it ends one.
    let mut before = [b'\n'];
    if start > 0 {
        file.seek(SeekFrom::Start(start - 1))?;
        file.read_exact(&mut before)?;
    }
    let mut bytes = Vec::with_capacity((len - start) as usize);
    file.take(len - start).read_to_end(&mut bytes)?;
    let text = String::from_utf8_lossy(&bytes);
    let body = text.strip_suffix('\n').unwrap_or(&text);
    if lines == 0 || body.is_empty() {
        return Ok(String::new());
    }
    let all: Vec<&str> = body.split('\n').collect();
    let first = all.len().saturating_sub(lines);
    let mut out = String::new();
    for (i, line) in all.iter().enumerate().skip(first) {
        if i == 0 && before[0] != b'\n' {
            out.push_str("[...] ");
        }
        out.push_str(&cut_line(line, EXCERPT_LINE_BYTES));
        out.push('\n');
    }
    Ok(out)
}

/// `line`, cut to at most `max` bytes (at a character boundary) and marked when cut.
fn cut_line(line: &str, max: usize) -> std::borrow::Cow<'_, str> {
    if line.len() <= max {
        return line.into();
    }
    let mut at = max;
    while !line.is_char_boundary(at) {
        at -= 1;
    }
    format!("{} [... cut: {} bytes more]", &line[..at], line.len() - at).into()
}

/// Whether process `pid`'s environment (as it was at exec) contains exactly
/// `key=value`. False when unreadable, or overwritten (a process that retitles itself
/// reuses that memory).
pub fn has_env_marker(pid: u32, key: &str, value: &str) -> bool {
    let needle = format!("{key}={value}").into_bytes();
    fs::read(format!("/proc/{pid}/environ"))
        .map(|env| env.split(|&b| b == 0).any(|entry| entry == needle))
        .unwrap_or(false)
}

/// Pids of all processes (readable by us) whose environment contains exactly
/// `key=value`, in ascending order. Zombies have no environment and never match.
pub fn processes_with_env_marker(key: &str, value: &str) -> Vec<u32> {
    let needle = format!("{key}={value}").into_bytes();
    let mut pids: Vec<u32> = proc_pids()
        .filter(|pid| {
            fs::read(format!("/proc/{pid}/environ"))
                .map(|env| env.split(|&b| b == 0).any(|entry| entry == needle))
                .unwrap_or(false)
        })
        .collect();
    pids.sort_unstable();
    pids
}

// ---------------------------------------------------------------------------------
// Spawn internals
// ---------------------------------------------------------------------------------

/// Runs in the intermediate child (forked by std), after std has set up stdio and the
/// working directory. Forks the real process; the intermediate reports and exits, the
/// grandchild prepares itself and returns `Ok` so std execs the program in it.
///
/// Async-signal-safe only: raw system calls and stack buffers, no allocation.
fn fork_hook(report_fd: RawFd, lease_fd: RawFd) -> io::Result<()> {
    // SAFETY: plain fork(2) in the single-threaded intermediate (see module docs).
    match unsafe { libc::fork() } {
        -1 => Err(io::Error::last_os_error()),
        0 => prepare_grandchild(lease_fd),
        child => report_and_exit(report_fd, child),
    }
}

/// In the grandchild, before exec: own session and process group, default signal
/// state for termination, no inherited descriptors beyond stdio and the lease, which
/// it signs with its own `/proc/self/stat` line (pid, start time, session) and keeps
/// open through exec.
fn prepare_grandchild(lease_fd: RawFd) -> io::Result<()> {
    // SAFETY: async-signal-safe calls on stack-allocated, zero-initialised structs.
    unsafe {
        if libc::setsid() == -1 {
            return Err(io::Error::last_os_error());
        }
        // std leaves the caller's signal mask in place; a blocked SIGTERM in the
        // program would defeat `terminate`.
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        if libc::sigprocmask(libc::SIG_SETMASK, &set, std::ptr::null_mut()) == -1 {
            return Err(io::Error::last_os_error());
        }
        // Ignored dispositions survive exec; handlers are reset by exec anyway.
        let mut dfl: libc::sigaction = std::mem::zeroed();
        dfl.sa_sigaction = libc::SIG_DFL;
        for sig in [libc::SIGHUP, libc::SIGINT, libc::SIGQUIT, libc::SIGTERM] {
            if libc::sigaction(sig, &dfl, std::ptr::null_mut()) == -1 {
                return Err(io::Error::last_os_error());
            }
        }
        // Descriptors leaked without close-on-exec (say, a listening socket opened by
        // a library) must not end up held by a long-lived server. Best effort: needs
        // Linux 5.11; std's exec-error channel is already close-on-exec.
        libc::syscall(
            libc::SYS_close_range,
            3 as libc::c_uint,
            libc::c_uint::MAX,
            libc::CLOSE_RANGE_CLOEXEC as libc::c_uint,
        );
        if lease_fd >= 0 {
            // Signed before exec: from here on the lease names this process, so there is
            // no moment at which it runs without a record that finds it.
            let mut stat = [0u8; STAT_MAX];
            let n = read_stat_raw(libc::getpid(), &mut stat);
            if n == 0 || !write_all_raw(lease_fd, &stat[..n]) {
                return Err(io::Error::other("cannot sign the lease file"));
            }
            if libc::fcntl(lease_fd, libc::F_SETFD, 0) == -1 {
                return Err(io::Error::last_os_error());
            }
        }
    }
    Ok(())
}

/// `write(2)` until done, retrying on EINTR; async-signal-safe.
fn write_all_raw(fd: RawFd, mut buf: &[u8]) -> bool {
    while !buf.is_empty() {
        // SAFETY: writing from a live buffer to a descriptor the caller owns.
        let r = unsafe { libc::write(fd, buf.as_ptr().cast(), buf.len()) };
        if r > 0 {
            buf = &buf[r as usize..];
        } else if r == -1 && io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
            continue;
        } else {
            return false;
        }
    }
    true
}

/// In the intermediate: send the grandchild's pid and stat line to the parent, then
/// `_exit` (no destructors, no atexit handlers, no return into std's exec path).
fn report_and_exit(report_fd: RawFd, child: libc::pid_t) -> ! {
    let mut frame = [0u8; FRAME_MAX];
    frame[..4].copy_from_slice(&child.to_ne_bytes());
    let stat_len = read_stat_raw(child, &mut frame[8..]);
    frame[4..8].copy_from_slice(&(stat_len as u32).to_ne_bytes());
    let total = 8 + stat_len;
    let code = if write_all_raw(report_fd, &frame[..total]) {
        0
    } else {
        1
    };
    // SAFETY: terminates the intermediate immediately, which is the intent.
    unsafe { libc::_exit(code) }
}

/// Reads `/proc/<pid>/stat` into `buf` without allocating; returns the byte count
/// (0 on failure). The file is one line: a read that ends with its newline has all of
/// it (no second read to see the end), so a probe costs three system calls.
fn read_stat_raw(pid: libc::pid_t, buf: &mut [u8]) -> usize {
    let mut path = [0u8; 32];
    let mut len = 0;
    for &b in b"/proc/" {
        path[len] = b;
        len += 1;
    }
    let mut digits = [0u8; 10];
    let mut n = pid as u32;
    let mut d = 0;
    loop {
        digits[d] = b'0' + (n % 10) as u8;
        d += 1;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    while d > 0 {
        d -= 1;
        path[len] = digits[d];
        len += 1;
    }
    for &b in b"/stat\0" {
        path[len] = b;
        len += 1;
    }
    // SAFETY: `path` is NUL-terminated; reads go into the caller's buffer bounds.
    unsafe {
        let fd = libc::open(path.as_ptr().cast(), libc::O_RDONLY | libc::O_CLOEXEC);
        if fd == -1 {
            return 0;
        }
        let mut got = 0;
        while got < buf.len() {
            let r = libc::read(fd, buf[got..].as_mut_ptr().cast(), buf.len() - got);
            if r > 0 {
                got += r as usize;
                if buf[got - 1] == b'\n' {
                    break;
                }
            } else if r == -1 && io::Error::last_os_error().raw_os_error() == Some(libc::EINTR) {
                continue;
            } else {
                break;
            }
        }
        libc::close(fd);
        got
    }
}

/// Reads the intermediate's report: (pid, stat bytes). Errors are human-readable.
fn read_handshake(mut pipe: File) -> Result<(u32, Vec<u8>), String> {
    let mut head = [0u8; 8];
    pipe.read_exact(&mut head)
        .map_err(|e| format!("no pid came back from the launcher process ({e})"))?;
    let pid = i32::from_ne_bytes(head[..4].try_into().expect("4 bytes"));
    let len = u32::from_ne_bytes(head[4..].try_into().expect("4 bytes")) as usize;
    if pid <= 0 || len > STAT_MAX {
        return Err(format!(
            "malformed launcher report (pid {pid}, {len} stat bytes)"
        ));
    }
    let mut stat = vec![0u8; len];
    pipe.read_exact(&mut stat)
        .map_err(|e| format!("truncated launcher report for pid {pid} ({e})"))?;
    Ok((pid as u32, stat))
}

fn open_log(path: &Path) -> Result<File, ProcessError> {
    let err = |error| ProcessError::LogFile {
        path: path.to_path_buf(),
        error,
    };
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        files::private_dir(dir).map_err(err)?;
    }
    files::open_append(path).map_err(err)
}

/// The first line of a lease file, written by srt before the fork; the process appends
/// its own `/proc/self/stat` line.
const LEASE_HEADER: &[u8] = b"srt-lease 1\n";

/// Create (or truncate: every launch of one resource shares the file, so a survivor of
/// an earlier launch still holds it) the lease file, close-on-exec in srt itself so no
/// other launch inherits it.
fn open_lease(path: &Path, program: &str) -> Result<File, ProcessError> {
    let err = |error: io::Error| ProcessError::Lease {
        program: program.to_string(),
        path: path.to_path_buf(),
        error,
    };
    if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
        files::private_dir(dir).map_err(err)?;
    }
    let mut file = files::open_truncate(path).map_err(err)?;
    std::io::Write::write_all(&mut file, LEASE_HEADER).map_err(err)?;
    Ok(file)
}

/// What a lease file says about the process that signed it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lease {
    /// The process's pid (its process group and session id too).
    pub pid: u32,
    /// Its start time (clock ticks since boot).
    pub start_time: u64,
}

/// Read a lease file: `Ok(None)` when it is absent, or the process never signed it (a
/// launch interrupted before the fork, or a spawn that failed).
pub fn read_lease(path: &Path) -> io::Result<Option<Lease>> {
    let bytes = match files::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    Ok(parse_lease(&bytes))
}

/// What a lease's bytes say, `None` when unsigned.
fn parse_lease(bytes: &[u8]) -> Option<Lease> {
    let body = bytes.strip_prefix(LEASE_HEADER)?;
    let pid = body
        .iter()
        .take_while(|b| b.is_ascii_digit())
        .fold(0u64, |n, b| {
            n.saturating_mul(10).saturating_add(u64::from(b - b'0'))
        });
    let stat = parse_stat(body)?;
    let pid = u32::try_from(pid).ok().filter(|&p| p > 1)?;
    Some(Lease {
        pid,
        start_time: stat.start_time,
    })
}

/// Whether the leader of `id` still holds its lease open, signed by itself: the proof
/// of identity that is left when the lease file was removed from the directory (the
/// process keeps the descriptor whatever it renames itself to, and the content stays
/// readable through `/proc/<pid>/fd`).
fn holds_own_lease(id: &ProcessIdentity) -> bool {
    let Some(name) = id.lease.as_deref().and_then(Path::file_name) else {
        return false;
    };
    let deleted = format!("{} (deleted)", name.to_string_lossy());
    let Ok(fds) = fs::read_dir(format!("/proc/{}/fd", id.pid)) else {
        return false;
    };
    fds.flatten().any(|fd| {
        let names_it = fs::read_link(fd.path()).is_ok_and(|target| {
            target
                .file_name()
                .is_some_and(|n| n == name || n.to_string_lossy() == deleted)
        });
        names_it
            && fs::read(fd.path())
                .ok()
                .and_then(|bytes| parse_lease(&bytes))
                .is_some_and(|l| l.pid == id.pid && l.start_time == id.start_time)
    })
}

/// The identity a lease file records, on this host, or `None` when unsigned.
pub fn lease_identity(path: &Path) -> Option<ProcessIdentity> {
    let lease = read_lease(path).ok()??;
    Some(ProcessIdentity {
        pid: lease.pid,
        pgid: lease.pid,
        start_time: lease.start_time,
        host: hostname().ok()?,
        lease: Some(path.to_path_buf()),
    })
}

/// Pids of the live processes holding the lease file open (the process srt started and
/// any descendant that kept its descriptors), whatever their names. Found through
/// `/proc/<pid>/fd`, compared by device and inode.
pub fn lease_holders(path: &Path) -> Vec<u32> {
    use std::os::unix::fs::MetadataExt;
    let Ok(meta) = fs::metadata(path) else {
        return Vec::new();
    };
    let (dev, ino) = (meta.dev(), meta.ino());
    let mut pids: Vec<u32> = proc_pids()
        .filter(|pid| {
            let Ok(fds) = fs::read_dir(format!("/proc/{pid}/fd")) else {
                return false;
            };
            fds.flatten()
                .any(|fd| fs::metadata(fd.path()).is_ok_and(|m| m.dev() == dev && m.ino() == ino))
        })
        .filter(|&pid| read_stat(pid).is_some_and(|s| !s.is_dead()))
        .collect();
    pids.sort_unstable();
    pids
}

/// Whether the lease file of `id` (when it has one) was signed by exactly this process.
/// An identity without a lease has no mark to check.
fn mark(id: &ProcessIdentity) -> Mark {
    let Some(path) = &id.lease else {
        return Mark::None;
    };
    match read_lease(path) {
        Ok(Some(l)) if l.pid == id.pid && l.start_time == id.start_time => Mark::Signed,
        Ok(None) => Mark::Missing,
        _ => Mark::Mismatch,
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mark {
    /// The lease names this process.
    Signed,
    /// The lease names another process: the identity is not ours.
    Mismatch,
    /// No lease file, or unsigned (removed after a completed stop).
    Missing,
    /// The identity records no lease (a state written before leases existed).
    None,
}

pub(crate) fn hostname() -> Result<String, ProcessError> {
    nix::unistd::gethostname()
        .map(|h| h.to_string_lossy().into_owned())
        .map_err(|error| ProcessError::Hostname { error })
}

// ---------------------------------------------------------------------------------
// /proc inspection
// ---------------------------------------------------------------------------------

/// The fields of `/proc/<pid>/stat` this module uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct ProcStat {
    /// Field 3: R, S, D, Z, T, X, ...
    state: u8,
    /// Field 5.
    pgrp: u32,
    /// Field 6.
    session: u32,
    /// Field 22, clock ticks since boot.
    start_time: u64,
}

impl ProcStat {
    fn is_dead(&self) -> bool {
        matches!(self.state, b'Z' | b'X' | b'x')
    }
}

/// Parses a stat line. The comm field (2) is in parentheses and may itself contain
/// spaces and parentheses, so fields are counted from the *last* `)`.
fn parse_stat(raw: &[u8]) -> Option<ProcStat> {
    let close = raw.iter().rposition(|&b| b == b')')?;
    let rest = std::str::from_utf8(raw.get(close + 1..)?).ok()?;
    // rest[0] is field 3.
    let fields: Vec<&str> = rest.split_ascii_whitespace().take(20).collect();
    let field = |n: usize| fields.get(n - 3).copied();
    Some(ProcStat {
        state: *field(3)?.as_bytes().first()?,
        pgrp: field(5)?.parse().ok()?,
        session: field(6)?.parse().ok()?,
        start_time: field(22)?.parse().ok()?,
    })
}

fn read_stat(pid: u32) -> Option<ProcStat> {
    let pid = libc::pid_t::try_from(pid).ok().filter(|&p| p > 0)?;
    let mut buf = [0u8; STAT_MAX];
    let n = read_stat_raw(pid, &mut buf);
    parse_stat(&buf[..n])
}

fn proc_pids() -> impl Iterator<Item = u32> {
    fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<u32>().ok())
}

/// What `/proc` says about an identity's leader.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Probe {
    /// Ours and running.
    Running,
    /// Ours, exited, not yet reaped (still pins the pid and the group id).
    Zombie,
    /// No such pid.
    Missing,
    /// The pid is someone else's, or the identity is from another host, or invalid.
    Foreign,
}

fn valid_ids(id: &ProcessIdentity) -> bool {
    // pid 0 and 1 are never ours, and values beyond i32 cannot be real pids; refusing
    // them also keeps kill(0|-1, ...) out of reach.
    id.pid > 1 && id.pid <= i32::MAX as u32 && id.pgid > 1 && id.pgid <= i32::MAX as u32
}

/// This machine's host name, read once (`localhost` when it cannot be read).
pub fn this_host() -> String {
    static HOST: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    HOST.get_or_init(|| hostname().unwrap_or_else(|_| "localhost".into()))
        .clone()
}

/// Whether `id` was recorded on this host. The host name is read once per run: refresh
/// asks this of every recorded process.
fn same_host(id: &ProcessIdentity) -> bool {
    static HOST: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    HOST.get_or_init(|| hostname().ok())
        .as_deref()
        .is_some_and(|h| h == id.host)
}

fn probe(id: &ProcessIdentity) -> Probe {
    probe_stat(id).0
}

/// [`probe`], with the stat it read (when it read one).
fn probe_stat(id: &ProcessIdentity) -> (Probe, Option<ProcStat>) {
    if !valid_ids(id) || !same_host(id) {
        return (Probe::Foreign, None);
    }
    let stat = read_stat(id.pid);
    let probe = match &stat {
        None => Probe::Missing,
        Some(s) if s.start_time != id.start_time => Probe::Foreign,
        Some(s) if s.is_dead() => Probe::Zombie,
        Some(_) => Probe::Running,
    };
    (probe, stat)
}

/// Sends `signal` to the group; `Ok(false)` if the group no longer exists.
fn signal_group(pgid: u32, signal: Signal) -> Result<bool, ProcessError> {
    match killpg(Pid::from_raw(pgid as i32), signal) {
        Ok(()) => Ok(true),
        Err(Errno::ESRCH) => Ok(false),
        Err(error) => Err(ProcessError::Signal {
            pgid,
            signal,
            error,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn parse_stat_handles_odd_comm() {
        let line = b"4242 (we ird) (x) S 1 4242 4242 0 -1 4194560 1 0 0 0 0 0 0 0 20 0 1 0 987654 1000 10 18446744073709551615\n";
        let s = parse_stat(line).expect("parses");
        assert_eq!(s.state, b'S');
        assert_eq!(s.pgrp, 4242);
        assert_eq!(s.start_time, 987654);
        assert!(parse_stat(b"garbage").is_none());
        assert!(parse_stat(b"1 (x) S 1 2").is_none());
    }

    #[test]
    fn own_stat_matches_raw_reader() {
        let me = std::process::id();
        let mut buf = [0u8; STAT_MAX];
        let n = read_stat_raw(me as libc::pid_t, &mut buf);
        assert!(n > 0);
        let raw = parse_stat(&buf[..n]).expect("raw stat parses");
        let via_fs = read_stat(me).expect("fs stat parses");
        assert_eq!(raw.start_time, via_fs.start_time);
        assert_eq!(raw.pgrp, via_fs.pgrp);
        assert_eq!(read_stat_raw(i32::MAX, &mut buf), 0);
    }

    #[test]
    fn probe_rejects_dangerous_ids() {
        let me = read_stat(std::process::id()).unwrap();
        let host = hostname().unwrap();
        for (pid, pgid) in [
            (0, 0),
            (1, 1),
            (std::process::id(), 0),
            (u32::MAX, u32::MAX),
        ] {
            let id = ProcessIdentity {
                pid,
                pgid,
                start_time: me.start_time,
                host: host.clone(),
                lease: None,
            };
            assert_eq!(probe(&id), Probe::Foreign, "pid {pid} pgid {pgid}");
        }
        let other_host = ProcessIdentity {
            pid: std::process::id(),
            pgid: me.pgrp,
            start_time: me.start_time,
            host: format!("{host}-elsewhere"),
            lease: None,
        };
        assert_eq!(liveness(&other_host), Liveness::Reused);
        let ours = ProcessIdentity { host, ..other_host };
        assert_eq!(liveness(&ours), Liveness::Alive);
    }

    fn tail_reference(content: &str, lines: usize) -> String {
        let body = content.strip_suffix('\n').unwrap_or(content);
        if lines == 0 || content.is_empty() {
            return String::new();
        }
        let parts: Vec<&str> = body.split('\n').collect();
        let kept = parts[parts.len().saturating_sub(lines)..].join("\n");
        if content.ends_with('\n') {
            kept + "\n"
        } else {
            kept
        }
    }

    #[test]
    fn tail_matches_reference_across_chunk_boundaries() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.log");
        let contents = [
            "",
            "\n",
            "\n\n\n",
            "one",
            "one\n",
            "a\nbb\nccc\ndddd\neeeee",
            "a\nbb\nccc\ndddd\neeeee\n",
            "x\n\ny\n\n",
            "long line without breaks that spans chunks\nshort\n",
        ];
        for content in contents {
            fs::File::create(&path)
                .unwrap()
                .write_all(content.as_bytes())
                .unwrap();
            for chunk in [1, 2, 3, 7, 64 * 1024] {
                for lines in 0..8 {
                    assert_eq!(
                        tail_file_chunked(&path, lines, chunk).unwrap(),
                        tail_reference(content, lines),
                        "content {content:?} chunk {chunk} lines {lines}"
                    );
                }
            }
        }
    }

    /// A log that ends in a 10 MB line without a newline: the excerpt is a few KiB,
    /// its lines cut and marked; short lines come through whole.
    #[test]
    fn excerpts_are_bounded_whatever_the_lines() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("long.log");
        let mut f = fs::File::create(&path).unwrap();
        f.write_all(b"first\nsecond\n").unwrap();
        f.write_all(&vec![b'x'; 10 << 20]).unwrap();
        drop(f);
        let out = tail_excerpt(&path, 20).unwrap();
        assert!(out.len() <= 20 * (EXCERPT_LINE_BYTES + 64), "{}", out.len());
        assert!(
            out.starts_with("[...] xxx") && out.contains("[... cut: "),
            "{}",
            &out[..80]
        );
        assert_eq!(out.lines().count(), 1);
        fs::write(&path, "a\nbb\n\nccc\n").unwrap();
        assert_eq!(tail_excerpt(&path, 2).unwrap(), "\nccc\n");
        assert_eq!(tail_excerpt(&path, 9).unwrap(), "a\nbb\n\nccc\n");
        assert_eq!(tail_excerpt(&path, 0).unwrap(), "");
        let long = format!("{}\u{e9}tail\nshort\n", "y".repeat(EXCERPT_LINE_BYTES - 1));
        fs::write(&path, &long).unwrap();
        let out = tail_excerpt(&path, 2).unwrap();
        assert_eq!(out.lines().nth(1), Some("short"));
        assert!(
            out.lines()
                .next()
                .unwrap()
                .ends_with("y [... cut: 6 bytes more]"),
            "{out}"
        );
    }

    #[test]
    fn tail_is_lossy_on_invalid_utf8() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bin.log");
        fs::write(&path, b"ok\n\xff\xfe bad\n").unwrap();
        assert_eq!(tail_file(&path, 1).unwrap(), "\u{fffd}\u{fffd} bad\n");
        assert!(tail_file(&dir.path().join("missing"), 3).is_err());
    }

    #[test]
    fn log_file_is_private_and_appended() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("a/b/c.log");
        fs::create_dir_all(path.parent().unwrap()).unwrap();
        fs::write(&path, "before\n").unwrap();
        fs::set_permissions(&path, fs::Permissions::from_mode(0o644)).unwrap();
        let mut f = open_log(&path).unwrap();
        f.write_all(b"after\n").unwrap();
        assert_eq!(fs::read_to_string(&path).unwrap(), "before\nafter\n");
        let mode = fs::metadata(&path).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o600);
    }

    #[test]
    fn missing_cwd_is_reported_before_spawning() {
        let dir = tempfile::tempdir().unwrap();
        let mut spec = ProcessSpec::new("true", dir.path().join("x.log"));
        spec.cwd = Some(dir.path().join("nope"));
        let err = spawn_detached(&spec).unwrap_err();
        assert!(matches!(err, ProcessError::Cwd { .. }), "{err}");
        assert!(err.to_string().contains("nope"), "{err}");
    }

    #[tokio::test]
    async fn group_tracking_survives_leader_exit() {
        // The leader exits on TERM at once; a member ignoring TERM keeps the group
        // alive, so terminate must wait out the grace and SIGKILL it.
        let dir = tempfile::tempdir().unwrap();
        let mut spec = ProcessSpec::new("sh", dir.path().join("g.log"));
        spec.args = vec![
            "-c".into(),
            "(trap '' TERM; echo ignoring; exec sleep 30) & exec sleep 31".into(),
        ];
        let id = spawn_detached(&spec).unwrap();
        let deadline = Instant::now() + Duration::from_secs(5);
        while !fs::read_to_string(&spec.log_path)
            .unwrap_or_default()
            .contains("ignoring")
        {
            // Only once this is printed is TERM ignored in the member.
            assert!(Instant::now() < deadline, "member never ignored TERM");
            std::thread::sleep(Duration::from_millis(10));
        }
        // Wait until both sleeps exist in the group.
        let members = || {
            proc_pids()
                .filter(|&p| read_stat(p).is_some_and(|s| s.pgrp == id.pgid && !s.is_dead()))
                .count()
        };
        while members() < 2 {
            assert!(Instant::now() < deadline, "group never had two members");
            std::thread::sleep(Duration::from_millis(10));
        }
        let started = Instant::now();
        let outcome = terminate(&id, Duration::from_millis(300)).await.unwrap();
        assert_eq!(outcome, TerminateOutcome::Killed);
        assert!(started.elapsed() >= Duration::from_millis(300));
        assert_eq!(members(), 0);
        assert!(super::members(&id).is_empty());
    }
}
