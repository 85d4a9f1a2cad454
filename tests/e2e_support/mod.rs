//! Helpers for the end-to-end tests: the real Router's `PATH` ([`tools_path`]), scratch
//! directories that destroy their deployments ([`Cleanup`], [`Env`]), and for the
//! hardening tests (`e2e_hardening`, `e2e_secrets`, `e2e_signals`) running `srt` in a
//! scratch directory, reading state and finding the deployment's processes.
//!
//! Every scenario uses its own deployment name (`hard-...`), so the process scans never
//! see another test's processes. Scenarios share the local executor's fixed ports, so
//! each test binary runs them one at a time under [`serial`].
#![allow(dead_code)]

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

static SERIAL: Mutex<()> = Mutex::new(());

/// Hold this for the whole scenario.
pub fn serial() -> MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// The crate root.
pub fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// `PATH` with the project's pinned `vllm-router` first.
pub fn tools_path() -> String {
    let dir = std::env::var_os("SRT_TOOLS_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| repo().join(".tools"))
        .join("bin");
    assert!(
        dir.join("vllm-router").exists(),
        "the real vllm-router is not installed in {}: run scripts/install-router.sh (the test command does)",
        dir.display()
    );
    format!(
        "{}:{}",
        dir.display(),
        std::env::var("PATH").unwrap_or_default()
    )
}

/// An example recipe with its `name:` replaced, so the deployment is this test's own.
pub fn example_named(example: &str, name: &str) -> String {
    let text = std::fs::read_to_string(repo().join("examples").join(example)).unwrap();
    let mut out = String::new();
    let mut replaced = false;
    for line in text.lines() {
        if line.starts_with("name: ") {
            out.push_str(&format!("name: {name}\n"));
            replaced = true;
        } else {
            out.push_str(line);
            out.push('\n');
        }
    }
    assert!(replaced, "{example} has no top-level name");
    out
}

/// A scratch directory where `srt` runs (state in `./.srt`).
pub struct Env {
    pub dir: tempfile::TempDir,
    path: String,
    /// Simulator startup delay for workers started by this environment.
    pub startup_delay_ms: std::cell::Cell<u64>,
}

impl Default for Env {
    fn default() -> Self {
        Self::new()
    }
}

impl Env {
    pub fn new() -> Env {
        Env {
            dir: tempfile::tempdir().unwrap(),
            path: tools_path(),
            startup_delay_ms: std::cell::Cell::new(200),
        }
    }

    pub fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_srt"));
        c.args(args)
            .current_dir(self.dir.path())
            .env("PATH", &self.path)
            .env(
                "SRT_SIM_STARTUP_DELAY_MS",
                self.startup_delay_ms.get().to_string(),
            )
            .env_remove("SRT_STATE_DIR")
            .env_remove("SRT_SIMULATE")
            .stdin(Stdio::null());
        c
    }

    pub fn srt(&self, args: &[&str]) -> Output {
        self.command(args).output().unwrap()
    }

    pub fn spawn(&self, args: &[&str]) -> Child {
        self.command(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    }

    /// Run and require success; returns stdout + stderr.
    pub fn ok(&self, args: &[&str]) -> String {
        let out = self.srt(args);
        let text = text(&out);
        assert!(
            out.status.success(),
            "srt {args:?} failed ({:?}):\n{text}",
            out.status.code()
        );
        text
    }

    pub fn recipe(&self, file: &str, text: &str) -> String {
        let p = self.dir.path().join(file);
        std::fs::write(&p, text).unwrap();
        p.display().to_string()
    }

    pub fn deployment_dir(&self, deployment: &str) -> PathBuf {
        self.dir.path().join(".srt").join(deployment)
    }

    pub fn state_path(&self, deployment: &str) -> PathBuf {
        self.deployment_dir(deployment).join("state.json")
    }

    /// The deployment's state as srt reads it (`state.json` with the journal replayed).
    pub fn state(&self, deployment: &str) -> serde_json::Value {
        let state = srt::state::StateStore::new(self.deployment_dir(deployment))
            .load()
            .unwrap()
            .expect("the deployment has state");
        serde_json::to_value(state).unwrap()
    }

    pub fn write_state(&self, deployment: &str, state: &serde_json::Value) {
        std::fs::write(
            self.state_path(deployment),
            serde_json::to_string_pretty(state).unwrap() + "\n",
        )
        .unwrap();
    }

    pub fn pid(&self, deployment: &str, address: &str) -> u32 {
        self.state(deployment)["resources"][address]["runtime"]["pid"]
            .as_u64()
            .unwrap_or_else(|| panic!("no pid for {address}")) as u32
    }

    /// Apply (simulated, auto-approved) and require success.
    pub fn apply(&self, recipe: &str) -> String {
        self.ok(&["apply", "-f", recipe, "--simulate", "--auto-approve"])
    }

    /// Destroy and check that nothing of the deployment is left running.
    pub fn destroy(&self, deployment: &str) {
        let out = self.ok(&["destroy", deployment, "--auto-approve"]);
        assert!(
            out.contains("Destroy complete") || out.contains("No changes"),
            "{out}"
        );
        wait_for("every process of the deployment to exit", || {
            live_processes(deployment).is_empty()
        });
    }
}

impl Drop for Env {
    /// A failed scenario must not leave processes holding the ports the next one needs:
    /// destroy every deployment this directory holds state for.
    fn drop(&mut self) {
        if std::thread::panicking() {
            destroy_all(self.dir.path());
        }
    }
}

/// Destroy every deployment the scratch directory `dir` holds state for.
pub fn destroy_all(dir: &Path) {
    for entry in std::fs::read_dir(dir.join(".srt"))
        .into_iter()
        .flatten()
        .flatten()
    {
        let name = entry.file_name().to_string_lossy().into_owned();
        let _ = Command::new(env!("CARGO_BIN_EXE_srt"))
            .args(["destroy", &name, "--auto-approve"])
            .current_dir(dir)
            .env("PATH", tools_path())
            .env_remove("SRT_STATE_DIR")
            .env_remove("SRT_SIMULATE")
            .stdin(Stdio::null())
            .output();
    }
}

/// Destroys the deployments of a scratch dir when dropped, so a failed test leaves no
/// process holding the shared ports for the tests after it.
pub struct Cleanup<'a>(pub &'a Path);

impl Drop for Cleanup<'_> {
    fn drop(&mut self) {
        destroy_all(self.0);
    }
}

/// stdout then stderr, lossily.
pub fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Poll `cond` every 20 ms for up to 30 s.
pub fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
    let start = Instant::now();
    while !cond() {
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "timed out: {what}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `/proc/<pid>/stat` fields after the command: (state, pgrp, start time).
pub fn stat(pid: u32) -> Option<(char, u32, u64)> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = s.rsplit(')').next()?;
    let f: Vec<&str> = rest.split_whitespace().collect();
    Some((
        f.first()?.chars().next()?,
        f.get(2)?.parse().ok()?,
        f.get(19)?.parse().ok()?,
    ))
}

/// Whether `pid` is a live (non-zombie) process.
pub fn alive(pid: u32) -> bool {
    stat(pid).is_some_and(|(state, _, _)| state != 'Z' && state != 'X')
}

/// Live processes carrying the deployment's marker in their environment.
pub fn live_processes(deployment: &str) -> Vec<u32> {
    srt::exec::process::processes_with_env_marker(srt::exec::local::DEPLOYMENT_MARKER, deployment)
        .into_iter()
        .filter(|&pid| alive(pid))
        .collect()
}

/// Every live process of the deployment is in the process group of a process the
/// state records (whatever its status): nothing runs that srt lost track of.
pub fn assert_all_recorded(env: &Env, deployment: &str) {
    let recorded: BTreeSet<u32> = env.state(deployment)["resources"]
        .as_object()
        .unwrap()
        .values()
        .filter_map(|r| r["runtime"]["pid"].as_u64())
        .map(|p| p as u32)
        .collect();
    for pid in live_processes(deployment) {
        let (_, pgrp, _) = stat(pid).unwrap_or(('X', 0, 0));
        assert!(
            recorded.contains(&pgrp) || !alive(pid),
            "orphan: pid {pid} (group {pgrp}) of {deployment} is not recorded in state; recorded: {recorded:?}"
        );
    }
}

/// No orphan: every live process of the deployment is in the process group of a
/// process the state records as running, and every such recorded process is alive.
pub fn assert_no_orphans(env: &Env, deployment: &str) {
    let state = env.state(deployment);
    let mut recorded = BTreeSet::new();
    for (address, r) in state["resources"].as_object().unwrap() {
        if let Some(pid) = r["runtime"]["pid"].as_u64() {
            let pid = pid as u32;
            if r["status"] == "running" {
                assert!(
                    alive(pid),
                    "{address} (pid {pid}) is recorded running but gone"
                );
            }
            recorded.insert(pid);
        }
    }
    for pid in live_processes(deployment) {
        let (_, pgrp, _) = stat(pid).unwrap_or(('X', 0, 0));
        assert!(
            recorded.contains(&pgrp) || !alive(pid),
            "orphan: pid {pid} (group {pgrp}) of {deployment} is not recorded in state; recorded: {recorded:?}"
        );
    }
}

/// Read a child's remaining output after it exited.
pub fn collect(child: Child) -> Output {
    child.wait_with_output().unwrap()
}

/// Wait for a child with a deadline, killing it on timeout.
pub fn wait_child(child: &mut Child, limit: Duration) -> std::process::ExitStatus {
    let start = Instant::now();
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            return status;
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            panic!("srt did not exit within {limit:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Every regular file under `dir`, recursively.
pub fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for entry in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = entry.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// Send `signal` to `pid`.
pub fn signal(pid: u32, signal: nix::sys::signal::Signal) {
    let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), signal);
}
