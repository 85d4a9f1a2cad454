//! End-to-end tests of the local process primitives against real processes.
//!
//! Every spawned process is wrapped in a [`Guard`] that SIGKILLs its group on drop if
//! it is still ours and alive, so a failing assertion never leaves sleepers behind.
//! Every wait is bounded.

use std::collections::BTreeMap;
use std::fs;
use std::net::{IpAddr, Ipv4Addr, TcpListener};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::time::{Duration, Instant};

use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use srt::exec::process::{
    lease_holders, lease_identity, liveness, members, port_is_free, processes_with_env_marker,
    read_lease, spawn_detached, tail_file, terminate, Liveness, ProcessError, ProcessIdentity,
    ProcessSpec, TerminateOutcome,
};

const WAIT: Duration = Duration::from_secs(10);

/// Kills the group on drop if the identity is still alive and ours.
struct Guard(ProcessIdentity);

impl Drop for Guard {
    fn drop(&mut self) {
        if liveness(&self.0) == Liveness::Alive {
            let _ = killpg(Pid::from_raw(self.0.pgid as i32), Signal::SIGKILL);
        }
    }
}

/// Fields of /proc/<pid>/stat, parsed independently of the library.
#[derive(Debug)]
struct Stat {
    state: char,
    ppid: u32,
    pgrp: u32,
    session: u32,
    start_time: u64,
}

fn stat(pid: u32) -> Option<Stat> {
    let raw = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = &raw[raw.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split(' ').collect();
    Some(Stat {
        state: f[0].chars().next()?,
        ppid: f[1].parse().ok()?,
        pgrp: f[2].parse().ok()?,
        session: f[3].parse().ok()?,
        start_time: f[19].parse().ok()?,
    })
}

fn all_pids() -> Vec<u32> {
    fs::read_dir("/proc")
        .unwrap()
        .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
        .collect()
}

/// Non-zombie processes in process group `pgid`.
fn live_group_members(pgid: u32) -> Vec<u32> {
    all_pids()
        .into_iter()
        .filter(|&p| stat(p).is_some_and(|s| s.pgrp == pgid && s.state != 'Z'))
        .collect()
}

fn environ(pid: u32) -> Vec<String> {
    fs::read(format!("/proc/{pid}/environ"))
        .unwrap_or_default()
        .split(|&b| b == 0)
        .filter(|e| !e.is_empty())
        .map(|e| String::from_utf8_lossy(e).into_owned())
        .collect()
}

fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + WAIT;
    while !cond() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn sh(dir: &Path, name: &str, script: &str) -> ProcessSpec {
    let mut spec = ProcessSpec::new("sh", dir.join("logs").join(format!("{name}.log")));
    spec.args = vec!["-c".into(), script.into()];
    spec
}

fn log_contains(spec: &ProcessSpec, needle: &str) -> bool {
    fs::read_to_string(&spec.log_path)
        .unwrap_or_default()
        .contains(needle)
}

#[tokio::test]
async fn detached_child_logs_lives_and_terminates_quickly() {
    let dir = tempfile::tempdir().unwrap();
    let spec = sh(dir.path(), "hi", "echo hi; echo oops >&2; sleep 30");
    let id = spawn_detached(&spec).unwrap();
    let _guard = Guard(id.clone());

    wait_for("log output", || log_contains(&spec, "oops"));
    let log = fs::read_to_string(&spec.log_path).unwrap();
    assert!(log.contains("hi\n"), "{log:?}");
    let mode = fs::metadata(&spec.log_path).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);

    assert_eq!(liveness(&id), Liveness::Alive);
    let st = stat(id.pid).expect("child is visible in /proc");
    assert_ne!(st.ppid, std::process::id(), "child must not be ours");
    assert_eq!(st.session, id.pid, "child must lead its own session");
    assert_eq!(st.pgrp, id.pid);
    assert_eq!(id.pgid, id.pid);
    assert_eq!(st.start_time, id.start_time);
    assert_eq!(
        id.host,
        nix::unistd::gethostname().unwrap().to_string_lossy()
    );
    // stdin is /dev/null.
    let stdin = fs::read_link(format!("/proc/{}/fd/0", id.pid)).unwrap();
    assert_eq!(stdin, Path::new("/dev/null"));

    let started = Instant::now();
    let outcome = terminate(&id, Duration::from_secs(5)).await.unwrap();
    assert_eq!(outcome, TerminateOutcome::Exited);
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "took {:?}",
        started.elapsed()
    );
    assert_eq!(liveness(&id), Liveness::Exited);
    assert!(live_group_members(id.pgid).is_empty());

    // Terminating again finds nothing to do.
    assert_eq!(
        terminate(&id, Duration::from_secs(1)).await.unwrap(),
        TerminateOutcome::AlreadyGone
    );
}

#[tokio::test]
async fn term_ignoring_process_is_killed_after_grace() {
    let dir = tempfile::tempdir().unwrap();
    let spec = sh(dir.path(), "stubborn", "trap '' TERM; echo ready; sleep 30");
    let id = spawn_detached(&spec).unwrap();
    let _guard = Guard(id.clone());
    wait_for("trap installed", || log_contains(&spec, "ready"));

    let grace = Duration::from_millis(400);
    let started = Instant::now();
    let outcome = terminate(&id, grace).await.unwrap();
    let took = started.elapsed();
    assert_eq!(outcome, TerminateOutcome::Killed);
    assert!(took >= grace, "killed before the grace ran out: {took:?}");
    assert!(took < grace + Duration::from_secs(3), "took {took:?}");
    assert_eq!(liveness(&id), Liveness::Exited);
    assert!(live_group_members(id.pgid).is_empty());
}

#[tokio::test]
async fn the_whole_group_goes() {
    let dir = tempfile::tempdir().unwrap();
    let spec = sh(
        dir.path(),
        "group",
        "sleep 30 & sleep 30 & echo spawned; wait",
    );
    let id = spawn_detached(&spec).unwrap();
    let _guard = Guard(id.clone());
    wait_for("three group members", || {
        live_group_members(id.pgid).len() >= 3
    });
    let members = live_group_members(id.pgid);

    let outcome = terminate(&id, Duration::from_secs(5)).await.unwrap();
    assert_eq!(outcome, TerminateOutcome::Exited);
    for pid in members {
        let gone = stat(pid).is_none_or(|s| s.state == 'Z' || s.pgrp != id.pgid);
        assert!(gone, "group member {pid} survived");
    }
}

#[tokio::test]
async fn reused_pid_is_never_signalled() {
    let dir = tempfile::tempdir().unwrap();
    let spec = sh(dir.path(), "bystander", "sleep 30");
    let real = spawn_detached(&spec).unwrap();
    let _guard = Guard(real.clone());

    // Same pid and group, wrong start time: someone else's process as far as we know.
    let fake = ProcessIdentity {
        start_time: real.start_time + 1,
        ..real.clone()
    };
    assert_eq!(liveness(&fake), Liveness::Reused);
    assert_eq!(
        terminate(&fake, Duration::from_millis(100)).await.unwrap(),
        TerminateOutcome::NotOurs
    );
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(liveness(&real), Liveness::Alive, "bystander was signalled");

    // Our own pid with a wrong start time: also not ours, and we are still here.
    let me = stat(std::process::id()).unwrap();
    let fake_me = ProcessIdentity {
        pid: std::process::id(),
        pgid: std::process::id(),
        start_time: me.start_time + 1,
        host: real.host.clone(),
        lease: None,
    };
    assert_eq!(liveness(&fake_me), Liveness::Reused);
    assert_eq!(
        terminate(&fake_me, Duration::from_millis(100))
            .await
            .unwrap(),
        TerminateOutcome::NotOurs
    );

    assert_eq!(
        terminate(&real, Duration::from_secs(5)).await.unwrap(),
        TerminateOutcome::Exited
    );
}

#[test]
fn missing_program_is_a_spawn_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let spec = ProcessSpec::new("srt-no-such-program-7f3a", dir.path().join("missing.log"));
    let err = spawn_detached(&spec).unwrap_err();
    match &err {
        ProcessError::Spawn { program, error } => {
            assert_eq!(program, "srt-no-such-program-7f3a");
            assert_eq!(error.kind(), std::io::ErrorKind::NotFound);
        }
        other => panic!("expected Spawn, got {other:?}"),
    }
    let msg = err.to_string();
    assert!(msg.contains("srt-no-such-program-7f3a"), "{msg}");

    // A path that is not executable fails the same way.
    let not_exec = dir.path().join("data.txt");
    fs::write(&not_exec, "x").unwrap();
    let spec = ProcessSpec::new(not_exec.to_str().unwrap(), dir.path().join("ne.log"));
    assert!(matches!(
        spawn_detached(&spec),
        Err(ProcessError::Spawn { .. })
    ));
}

#[tokio::test]
async fn env_set_and_remove_reach_the_child() {
    // A variable the test process surely has, so its removal is observable.
    std::env::set_var("SRT_PROC_TEST_INHERITED", "from-parent");
    std::env::set_var("SRT_PROC_TEST_OVERRIDDEN", "old");
    let dir = tempfile::tempdir().unwrap();
    let mut spec = sh(dir.path(), "env", "sleep 30");
    spec.env = BTreeMap::from([
        (
            "SRT_PROC_TEST_SET".to_string(),
            "value with spaces".to_string(),
        ),
        ("SRT_PROC_TEST_OVERRIDDEN".to_string(), "new".to_string()),
    ]);
    spec.env_remove = vec!["SRT_PROC_TEST_INHERITED".to_string()];
    spec.cwd = Some(dir.path().to_path_buf());
    let id = spawn_detached(&spec).unwrap();
    let _guard = Guard(id.clone());

    let env = environ(id.pid);
    assert!(!env.is_empty(), "could not read the child's environment");
    assert!(env.contains(&"SRT_PROC_TEST_SET=value with spaces".to_string()));
    assert!(env.contains(&"SRT_PROC_TEST_OVERRIDDEN=new".to_string()));
    assert!(
        !env.iter()
            .any(|e| e.starts_with("SRT_PROC_TEST_INHERITED=")),
        "{env:?}"
    );
    // The rest of the environment is inherited.
    assert!(env.iter().any(|e| e.starts_with("PATH=")));
    let cwd = fs::read_link(format!("/proc/{}/cwd", id.pid)).unwrap();
    assert_eq!(cwd, dir.path().canonicalize().unwrap());

    terminate(&id, Duration::from_secs(5)).await.unwrap();
}

#[test]
fn short_lived_child_exits_without_a_zombie_under_us() {
    let dir = tempfile::tempdir().unwrap();
    let spec = ProcessSpec::new("true", dir.path().join("true.log"));
    let id = spawn_detached(&spec).unwrap();
    assert!(id.start_time > 0);
    wait_for("exit", || liveness(&id) == Liveness::Exited);
    if let Some(st) = stat(id.pid) {
        // Possibly a zombie, but then one that init (or a subreaper) owns.
        assert_ne!(st.ppid, std::process::id());
    }
    // No zombie children of ours at all (other tests' launcher processes are reaped
    // within milliseconds, so wait for a quiet moment).
    let me = std::process::id();
    wait_for("no zombie children", || {
        !all_pids()
            .into_iter()
            .any(|p| stat(p).is_some_and(|s| s.ppid == me && s.state == 'Z'))
    });
}

#[test]
fn spawning_appends_to_an_existing_log() {
    let dir = tempfile::tempdir().unwrap();
    let first = sh(dir.path(), "append", "echo first");
    let id = spawn_detached(&first).unwrap();
    wait_for("first exit", || liveness(&id) == Liveness::Exited);
    let second = sh(dir.path(), "append", "echo second");
    let id = spawn_detached(&second).unwrap();
    wait_for("second exit", || liveness(&id) == Liveness::Exited);
    wait_for("both lines", || log_contains(&second, "second"));
    assert_eq!(
        fs::read_to_string(&second.log_path).unwrap(),
        "first\nsecond\n"
    );
}

#[test]
fn port_is_free_tracks_a_listener() {
    let listener = TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
    let port = listener.local_addr().unwrap().port();
    let ip = IpAddr::V4(Ipv4Addr::LOCALHOST);
    assert!(!port_is_free(ip, port));
    drop(listener);
    assert!(port_is_free(ip, port));
}

#[test]
fn tail_of_a_big_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("big.log");
    let body: String = (0..10_000).map(|i| format!("line {i}\n")).collect();
    fs::write(&path, &body).unwrap();
    assert_eq!(
        tail_file(&path, 3).unwrap(),
        "line 9997\nline 9998\nline 9999\n"
    );
    assert_eq!(tail_file(&path, 1).unwrap(), "line 9999\n");
    let last_1000 = tail_file(&path, 1000).unwrap();
    assert_eq!(last_1000.lines().count(), 1000);
    assert!(last_1000.starts_with("line 9000\n"));
    assert_eq!(tail_file(&path, 20_000).unwrap(), body);
    assert_eq!(tail_file(&path, 0).unwrap(), "");
}

#[tokio::test]
async fn env_marker_finds_the_spawned_child() {
    let dir = tempfile::tempdir().unwrap();
    let marker = format!("test-{}-{}", std::process::id(), line!());
    let mut spec = sh(dir.path(), "marker", "sleep 30 & sleep 30");
    spec.env
        .insert("SRT_DEPLOYMENT".to_string(), marker.clone());
    let id = spawn_detached(&spec).unwrap();
    let _guard = Guard(id.clone());

    wait_for("marked processes", || {
        processes_with_env_marker("SRT_DEPLOYMENT", &marker).len() >= 2
    });
    let found = processes_with_env_marker("SRT_DEPLOYMENT", &marker);
    assert!(found.contains(&id.pid), "{found:?} lacks {}", id.pid);
    assert!(processes_with_env_marker("SRT_DEPLOYMENT", "other").is_empty());
    // A prefix of the value must not match.
    assert!(processes_with_env_marker("SRT_DEPLOYMENT", &marker[..4]).is_empty());

    terminate(&id, Duration::from_secs(5)).await.unwrap();
    wait_for("markers gone", || {
        processes_with_env_marker("SRT_DEPLOYMENT", &marker).is_empty()
    });
}

#[tokio::test]
async fn stopped_process_still_exits_on_term() {
    let dir = tempfile::tempdir().unwrap();
    // A single process: stopping a shell mid-fork could leave it in vfork wait (D).
    let mut spec = ProcessSpec::new("sleep", dir.path().join("stopped.log"));
    spec.args = vec!["30".into()];
    let id = spawn_detached(&spec).unwrap();
    let _guard = Guard(id.clone());
    killpg(Pid::from_raw(id.pgid as i32), Signal::SIGSTOP).unwrap();
    wait_for("stopped", || {
        live_group_members(id.pgid)
            .iter()
            .all(|&p| stat(p).is_some_and(|s| s.state == 'T'))
    });

    let started = Instant::now();
    let outcome = terminate(&id, Duration::from_secs(5)).await.unwrap();
    assert_eq!(outcome, TerminateOutcome::Exited);
    assert!(started.elapsed() < Duration::from_secs(2));
}

/// Not a test on its own: when `SRT_PROC_TEST_HELPER_LOG` is set (by
/// `child_outlives_the_process_that_spawned_it`), spawn a sleeper, print its identity
/// as JSON and return, so the spawning process exits while the sleeper keeps running.
#[test]
fn helper_spawn_and_exit() {
    let Ok(log) = std::env::var("SRT_PROC_TEST_HELPER_LOG") else {
        return;
    };
    let mut spec = ProcessSpec::new("sleep", log);
    spec.args = vec!["30".into()];
    let id = spawn_detached(&spec).unwrap();
    println!("IDENTITY {}", serde_json::to_string(&id).unwrap());
}

#[tokio::test]
async fn child_outlives_the_process_that_spawned_it() {
    let dir = tempfile::tempdir().unwrap();
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "helper_spawn_and_exit",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("SRT_PROC_TEST_HELPER_LOG", dir.path().join("helper.log"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{out:?}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let json = stdout
        .lines()
        .find_map(|l| l.split_once("IDENTITY ").map(|(_, json)| json))
        .unwrap_or_else(|| panic!("no identity in {out:?}"));
    let id: ProcessIdentity = serde_json::from_str(json).unwrap();
    let _guard = Guard(id.clone());

    // The spawning process is gone (output() waited for it); the sleeper is not.
    assert_eq!(liveness(&id), Liveness::Alive);
    assert_eq!(
        terminate(&id, Duration::from_secs(5)).await.unwrap(),
        TerminateOutcome::Exited
    );
}

/// The lease is signed by the process itself before it execs (its pid and start time),
/// and held open whatever it renames itself to.
#[tokio::test]
async fn the_lease_is_signed_before_exec_and_held_whatever_the_name() {
    let dir = tempfile::tempdir().unwrap();
    let lease = dir.path().join("leases/x.lease");
    // `exec -a` renames the program, as vllm-router and vLLM's engines retitle.
    let mut spec = ProcessSpec::new("bash", dir.path().join("renamed.log"));
    spec.args = vec!["-c".into(), "exec -a not-srt-anything sleep 30".into()];
    spec.lease = Some(lease.clone());
    let id = spawn_detached(&spec).unwrap();
    let _guard = Guard(id.clone());
    assert_eq!(id.lease.as_deref(), Some(lease.as_path()));
    let signed = read_lease(&lease).unwrap().expect("signed");
    assert_eq!((signed.pid, signed.start_time), (id.pid, id.start_time));
    assert_eq!(lease_identity(&lease).unwrap(), id);
    wait_for("the rename", || {
        fs::read(format!("/proc/{}/cmdline", id.pid))
            .is_ok_and(|c| c.starts_with(b"not-srt-anything"))
    });
    assert_eq!(lease_holders(&lease), vec![id.pid]);
    let mode = fs::metadata(&lease).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    assert_eq!(
        terminate(&id, Duration::from_secs(5)).await.unwrap(),
        TerminateOutcome::Exited
    );
    assert!(!lease.exists(), "the lease outlived its process");
}

/// Children of a process killed from outside (vLLM's EngineCore and workers when the
/// API server dies) are stopped with it: the whole session, even without its leader.
#[tokio::test]
async fn children_of_a_dead_leader_are_stopped() {
    let dir = tempfile::tempdir().unwrap();
    let mut spec = sh(
        dir.path(),
        "parent",
        // One child stays in the group; one moves to its own group, as a program that
        // calls setpgid would; both stay in the session.
        "sleep 300 & (set -m; sleep 301 &) ; echo spawned; wait",
    );
    spec.lease = Some(dir.path().join("leases/parent.lease"));
    let id = spawn_detached(&spec).unwrap();
    let _guard = Guard(id.clone());
    // The two sleeps (the subshell that starts the second exits at once).
    let sleeps = || -> Vec<u32> {
        members(&id)
            .into_iter()
            .filter(|p| {
                fs::read_to_string(format!("/proc/{p}/comm")).is_ok_and(|c| c.trim() == "sleep")
            })
            .collect()
    };
    wait_for("the children", || sleeps().len() == 2);
    let children = sleeps();
    // Kill the leader alone, from outside.
    nix::sys::signal::kill(Pid::from_raw(id.pid as i32), Signal::SIGKILL).unwrap();
    wait_for("the leader's death", || liveness(&id) != Liveness::Alive);
    for &c in &children {
        assert!(
            stat(c).is_some_and(|s| s.state != 'Z'),
            "child {c} died with the leader"
        );
    }
    let outcome = terminate(&id, Duration::from_secs(5)).await.unwrap();
    assert_eq!(outcome, TerminateOutcome::Exited);
    for c in children {
        assert!(stat(c).is_none_or(|s| s.state == 'Z'), "child {c} survived");
    }
    assert!(members(&id).is_empty());
}

/// A state file pointed at an unrelated process is refused before any signal: its
/// lease (written by the process srt started) names another pid and start time.
#[tokio::test]
async fn an_identity_the_lease_does_not_name_is_never_signalled() {
    let dir = tempfile::tempdir().unwrap();
    let lease = dir.path().join("leases/ours.lease");
    let mut ours = sh(dir.path(), "ours", "sleep 30");
    ours.lease = Some(lease.clone());
    let ours = spawn_detached(&ours).unwrap();
    let _g1 = Guard(ours.clone());
    // An unrelated process, started by someone else (not through spawn_detached).
    let mut other = std::process::Command::new("setsid")
        .args(["sleep", "30"])
        .spawn()
        .unwrap();
    let other_pid = other.id();
    wait_for("the bystander", || {
        stat(other_pid).is_some_and(|s| s.session == other_pid)
    });
    let forged = ProcessIdentity {
        pid: other_pid,
        pgid: other_pid,
        start_time: stat(other_pid).unwrap().start_time,
        host: ours.host.clone(),
        lease: Some(lease.clone()),
    };
    assert_eq!(liveness(&forged), Liveness::Reused);
    assert_eq!(
        terminate(&forged, Duration::from_millis(200))
            .await
            .unwrap(),
        TerminateOutcome::NotOurs
    );
    // A forged identity pointing at a lease that does not exist: nothing is sent, and
    // the caller is told the lease is gone (it then looks for srt's markers, which the
    // bystander does not carry).
    let no_lease = ProcessIdentity {
        lease: Some(dir.path().join("leases/none.lease")),
        ..forged.clone()
    };
    assert_eq!(
        terminate(&no_lease, Duration::from_millis(200))
            .await
            .unwrap(),
        TerminateOutcome::LeaseMissing
    );
    std::thread::sleep(Duration::from_millis(100));
    assert!(
        other.try_wait().unwrap().is_none(),
        "the bystander was signalled"
    );
    let _ = other.kill();
    let _ = other.wait();
    assert_eq!(liveness(&ours), Liveness::Alive);
    assert_eq!(
        terminate(&ours, Duration::from_secs(5)).await.unwrap(),
        TerminateOutcome::Exited
    );
}
