//! Helpers for the end-to-end tests: the real Router's `PATH` ([`tools_path`]), scratch
//! directories that destroy their deployments ([`Cleanup`], [`Env`]), running `srt` in
//! a scratch directory, reading state and finding the deployment's processes.
//!
//! **Isolation.** As root (the test command runs as root), every [`Env`] gets its own
//! network namespace ([`Netns`]): `srt` and everything it starts run inside it, so each
//! scenario has the fixed ports (8000, 6100, ...) to itself, scenarios run in parallel,
//! and nothing else on the machine can take their ports. The test reaches them through
//! [`Env::in_netns`] (a thread that joins the namespace). Without root there is one
//! namespace, and [`serial`] runs the scenarios of a test binary one at a time.
//!
//! Every scenario uses its own deployment name (`hard-...`), so the process scans never
//! see another test's processes.
#![allow(dead_code)]

pub(crate) mod etcd;
pub(crate) mod load;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::{Duration, Instant};

static SERIAL: Mutex<()> = Mutex::new(());

/// Hold this for the whole scenario: without network namespaces (not root), scenarios
/// share the fixed ports and run one at a time; with them, `None`.
pub(crate) fn serial() -> Option<MutexGuard<'static, ()>> {
    if Netns::available() {
        return None;
    }
    Some(
        SERIAL
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner),
    )
}

/// A private network namespace with its loopback up, deleted on drop (after killing
/// whatever still runs in it).
pub(crate) struct Netns(String);

impl Netns {
    /// Whether this process may create network namespaces (root with `ip`).
    pub(crate) fn available() -> bool {
        nix::unistd::geteuid().is_root()
            && Command::new("ip")
                .arg("-V")
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
    }

    /// A fresh namespace, or `None` when [`Netns::available`] is false.
    pub(crate) fn new(tag: &str) -> Option<Netns> {
        static COUNTER: AtomicUsize = AtomicUsize::new(0);
        if !Self::available() {
            return None;
        }
        let n = COUNTER.fetch_add(1, Ordering::SeqCst);
        let name = format!("srt-{}-{tag}-{n}", std::process::id());
        let _ = Command::new("ip")
            .args(["netns", "del", &name])
            .stderr(Stdio::null())
            .status();
        let ip = |args: &[&str]| {
            let status = Command::new("ip").args(args).status().unwrap();
            assert!(status.success(), "ip {args:?} failed");
        };
        ip(&["netns", "add", &name]);
        ip(&["-n", &name, "link", "set", "lo", "up"]);
        Some(Netns(name))
    }

    /// The namespace's name.
    pub(crate) fn name(&self) -> &str {
        &self.0
    }

    /// Processes in the namespace.
    pub(crate) fn pids(&self) -> Vec<u32> {
        let out = Command::new("ip")
            .args(["netns", "pids", &self.0])
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout)
            .split_whitespace()
            .filter_map(|p| p.parse().ok())
            .collect()
    }

    /// Each process in the namespace with its command line, one per line.
    pub(crate) fn describe(&self) -> String {
        self.pids()
            .iter()
            .map(|p| {
                let cmd = std::fs::read(format!("/proc/{p}/cmdline")).unwrap_or_default();
                let cmd: String = String::from_utf8_lossy(&cmd).replace('\0', " ");
                format!("  {p}: {cmd}")
            })
            .collect::<Vec<_>>()
            .join("\n")
    }

    /// Wait until nothing runs in the namespace; the survivors if some remain.
    pub(crate) fn drained(&self) -> Result<(), String> {
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if self.pids().is_empty() {
                return Ok(());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Err(self.describe())
    }

    /// `cmd`, run inside the namespace (its program, arguments, environment and
    /// directory kept).
    pub(crate) fn wrap(&self, cmd: &Command) -> Command {
        let mut c = Command::new("nsenter");
        c.arg(format!("--net=/var/run/netns/{}", self.0))
            .arg("--")
            .arg(cmd.get_program())
            .args(cmd.get_args());
        if let Some(dir) = cmd.get_current_dir() {
            c.current_dir(dir);
        }
        for (k, v) in cmd.get_envs() {
            match v {
                Some(v) => c.env(k, v),
                None => c.env_remove(k),
            };
        }
        c
    }

    /// Run `f` on a thread that joined the namespace: what it connects to or binds is
    /// the namespace's.
    pub(crate) fn enter<R: Send>(&self, f: impl FnOnce() -> R + Send) -> R {
        let path = format!("/var/run/netns/{}", self.0);
        std::thread::scope(|scope| {
            scope
                .spawn(move || {
                    let ns = std::fs::File::open(&path).unwrap();
                    nix::sched::setns(ns, nix::sched::CloneFlags::CLONE_NEWNET).unwrap();
                    f()
                })
                .join()
                .unwrap()
        })
    }
}

/// SIGKILL `pid`, as a crash or the OOM killer would.
pub(crate) fn sigkill(pid: u32) -> nix::Result<()> {
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
}

impl Drop for Netns {
    fn drop(&mut self) {
        for pid in self.pids() {
            let _ = sigkill(pid);
        }
        let _ = Command::new("ip")
            .args(["netns", "del", &self.0])
            .stderr(Stdio::null())
            .status();
    }
}

/// The crate root.
pub(crate) fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

/// Where the project's install scripts put tools (`SRT_TOOLS_DIR`, else `.tools`).
pub(crate) fn tools_dir() -> PathBuf {
    std::env::var_os("SRT_TOOLS_DIR").map_or_else(|| repo().join(".tools"), PathBuf::from)
}

/// `PATH` with the project's pinned `vllm-router` first.
pub(crate) fn tools_path() -> String {
    let dir = tools_dir().join("bin");
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
pub(crate) fn example_named(example: &str, name: &str) -> String {
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

/// A scratch directory where `srt` runs (state in `./.srt`), in its own network
/// namespace when the machine allows it (see the module docs).
pub(crate) struct Env {
    pub dir: tempfile::TempDir,
    path: String,
    /// Simulator startup delay for workers started by this environment.
    pub startup_delay_ms: std::cell::Cell<u64>,
    /// The scenario's network namespace (declared last: dropped after the deployments
    /// are destroyed).
    pub netns: Option<Netns>,
}

impl Default for Env {
    fn default() -> Self {
        Self::new()
    }
}

impl Env {
    /// An environment whose `PATH` starts with the Dynamo venv's `bin` (its `python3`
    /// imports `dynamo`).
    ///
    /// # Panics
    /// When `scripts/install-dynamo.sh` has not run (the test command runs it).
    pub(crate) fn dynamo() -> Env {
        let venv = tools_dir().join("dynamo-venv").join("bin");
        assert!(
            venv.join("python3").exists(),
            "ai-dynamo is not installed in {}: run scripts/install-dynamo.sh (the test command does)",
            tools_dir().display()
        );
        let mut env = Env::new();
        env.path = format!("{}:{}", venv.display(), env.path);
        env
    }

    pub(crate) fn new() -> Env {
        Env {
            dir: tempfile::tempdir().unwrap(),
            path: tools_path(),
            startup_delay_ms: std::cell::Cell::new(200),
            netns: Netns::new("e2e"),
        }
    }

    /// `srt args` in the scratch directory (and the namespace).
    pub(crate) fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_srt"));
        c.args(args)
            .current_dir(self.dir.path())
            .env("PATH", &self.path)
            .env(
                "SRT_SIM_STARTUP_DELAY_MS",
                self.startup_delay_ms.get().to_string(),
            )
            .env_remove("SRT_STATE_DIR")
            .env_remove("SRT_SIMULATE");
        let mut c = match &self.netns {
            Some(ns) => ns.wrap(&c),
            None => c,
        };
        c.stdin(Stdio::null());
        c
    }

    /// Run `f` where this scenario's ports are (its namespace, if it has one).
    pub(crate) fn in_netns<R: Send>(&self, f: impl FnOnce() -> R + Send) -> R {
        match &self.netns {
            Some(ns) => ns.enter(f),
            None => f(),
        }
    }

    /// A completion through `url`, from inside the scenario's namespace.
    pub(crate) fn completion(&self, url: &str) -> serde_json::Value {
        self.in_netns(|| completion(url))
    }

    /// A streamed completion through `url`, from inside the scenario's namespace.
    pub(crate) fn streamed_completion(&self, url: &str) -> String {
        self.in_netns(|| streamed_completion(url))
    }

    /// `GET url` as JSON, from inside the scenario's namespace.
    pub(crate) fn get(&self, url: &str) -> serde_json::Value {
        self.in_netns(|| get(url))
    }

    /// `POST url` (no body), from inside the scenario's namespace: its status.
    pub(crate) fn post(&self, url: &str) -> u16 {
        self.in_netns(|| {
            with_client(|c| async move { c.post(url).send().await.unwrap().status().as_u16() })
        })
    }

    pub(crate) fn srt(&self, args: &[&str]) -> Output {
        self.command(args).output().unwrap()
    }

    /// Run srt, require exit code `code`, and return what it printed.
    pub(crate) fn exits(&self, args: &[&str], code: i32) -> String {
        let out = self.srt(args);
        let shown = text(&out);
        assert_eq!(out.status.code(), Some(code), "srt {args:?}: {shown}");
        shown
    }

    pub(crate) fn spawn(&self, args: &[&str]) -> Child {
        self.command(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    }

    /// Run and require success; returns stdout alone (for `--json` output).
    pub(crate) fn stdout(&self, args: &[&str]) -> String {
        let out = self.srt(args);
        assert!(
            out.status.success(),
            "srt {args:?} failed ({:?}):\n{}",
            out.status.code(),
            text(&out)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// Run and require success; returns stdout + stderr.
    pub(crate) fn ok(&self, args: &[&str]) -> String {
        let out = self.srt(args);
        let text = text(&out);
        assert!(
            out.status.success(),
            "srt {args:?} failed ({:?}):\n{text}",
            out.status.code()
        );
        text
    }

    pub(crate) fn recipe(&self, file: &str, text: &str) -> String {
        let p = self.dir.path().join(file);
        std::fs::write(&p, text).unwrap();
        p.display().to_string()
    }

    pub(crate) fn deployment_dir(&self, deployment: &str) -> PathBuf {
        self.dir.path().join(".srt").join(deployment)
    }

    pub(crate) fn state_path(&self, deployment: &str) -> PathBuf {
        self.deployment_dir(deployment).join("state.json")
    }

    /// The deployment's state as srt reads it (`state.json` with the journal replayed).
    pub(crate) fn state(&self, deployment: &str) -> serde_json::Value {
        let state = srt::state::StateStore::new(self.deployment_dir(deployment))
            .load()
            .unwrap()
            .expect("the deployment has state");
        serde_json::to_value(state).unwrap()
    }

    pub(crate) fn write_state(&self, deployment: &str, state: &serde_json::Value) {
        std::fs::write(
            self.state_path(deployment),
            serde_json::to_string_pretty(state).unwrap() + "\n",
        )
        .unwrap();
    }

    pub(crate) fn pid(&self, deployment: &str, address: &str) -> u32 {
        self.state(deployment)["resources"][address]["runtime"]["pid"]
            .as_u64()
            .unwrap_or_else(|| panic!("no pid for {address}")) as u32
    }

    /// Apply (simulated, auto-approved) and require success.
    pub(crate) fn apply(&self, recipe: &str) -> String {
        self.ok(&["apply", "-f", recipe, "--simulate", "--auto-approve"])
    }

    /// Destroy and check that nothing of the deployment is left running.
    pub(crate) fn destroy(&self, deployment: &str) {
        let out = self.ok(&["destroy", deployment, "--auto-approve"]);
        assert!(
            out.contains("Destroy complete") || out.contains("No changes"),
            "{out}"
        );
        wait_for("every process of the deployment to exit", || {
            self.processes(deployment).is_empty()
        });
    }

    /// Live processes of this scenario's deployment: those carrying its directory's
    /// marker, so that a scenario running beside it with a deployment of the same name
    /// (each in its own network namespace) is not counted.
    pub(crate) fn processes(&self, deployment: &str) -> Vec<u32> {
        let dir = self.deployment_dir(deployment).display().to_string();
        srt::exec::process::processes_with_env_marker(srt::exec::local::DIR_MARKER, &dir)
            .into_iter()
            .filter(|&pid| alive(pid))
            .collect()
    }

    /// The live processes of this scenario's `address` in `deployment`.
    pub(crate) fn processes_of(&self, deployment: &str, address: &str) -> Vec<u32> {
        self.processes(deployment)
            .into_iter()
            .filter(|&pid| {
                srt::exec::process::has_env_marker(pid, srt::exec::local::RESOURCE_MARKER, address)
            })
            .collect()
    }
}

impl Drop for Env {
    /// A failed scenario must not leave processes behind: destroy every deployment this
    /// directory holds state for (its namespace goes next, killing what is left).
    fn drop(&mut self) {
        if std::thread::panicking() {
            for name in deployments(self.dir.path()) {
                self.print_logs(&name);
                let _ = self
                    .command(&["destroy", &name, "--auto-approve"])
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .status();
            }
        }
    }
}

impl Env {
    /// The last lines of every recorded process's log, to stderr: what a failed
    /// scenario's programs said, before its directory is removed.
    fn print_logs(&self, deployment: &str) {
        let Ok(state) = srt::state::StateStore::new(self.deployment_dir(deployment)).load() else {
            return;
        };
        let state = serde_json::to_value(state).unwrap_or_default();
        let Some(resources) = state["resources"].as_object() else {
            return;
        };
        for (address, resource) in resources {
            if resource["runtime"]["pid"].is_null() {
                continue;
            }
            let Ok(out) = self.command(&["logs", deployment, address]).output() else {
                continue;
            };
            let text = String::from_utf8_lossy(&out.stdout);
            let lines: Vec<&str> = text.lines().collect();
            eprintln!(
                "--- {deployment} {address} (last 40 lines) ---\n{}",
                lines[lines.len().saturating_sub(40)..].join("\n")
            );
            // A program that logs every request fills its tail with the last ones:
            // what went wrong earlier is in its warnings and errors.
            let flagged: Vec<&str> = lines
                .iter()
                .copied()
                .filter(|l| l.contains("WARN") || l.contains("ERROR"))
                .collect();
            if !flagged.is_empty() {
                eprintln!(
                    "--- {deployment} {address} (last 40 of {} warning and error lines) ---\n{}",
                    flagged.len(),
                    flagged[flagged.len().saturating_sub(40)..].join("\n")
                );
            }
        }
    }
}

/// The deployments a scratch directory holds state for.
fn deployments(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir.join(".srt"))
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect()
}

/// Destroy every deployment the scratch directory `dir` holds state for (outside any
/// namespace: for tests that run `srt` themselves, see [`Cleanup`]).
pub(crate) fn destroy_all(dir: &Path) {
    for name in deployments(dir) {
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
pub(crate) struct Cleanup<'a>(pub &'a Path);

impl Drop for Cleanup<'_> {
    fn drop(&mut self) {
        destroy_all(self.0);
    }
}

/// A 4-token completion through `url` (a Router, nginx or worker), which must succeed.
pub(crate) fn completion(url: &str) -> serde_json::Value {
    let body = serde_json::json!({"model": "tiny", "prompt": "hello", "max_tokens": 4});
    serde_json::from_str(&post_completion(url, &body)).unwrap()
}

/// A streamed 8-token completion through `url`, which must succeed and end its stream:
/// its server-sent events.
pub(crate) fn streamed_completion(url: &str) -> String {
    let body = serde_json::json!({
        "model": "tiny", "prompt": "hello there", "max_tokens": 8, "stream": true
    });
    let events = post_completion(url, &body);
    assert!(
        events.starts_with("data: ") && events.trim_end().ends_with("data: [DONE]"),
        "{events}"
    );
    events
}

/// `POST url/v1/completions` with `body`, which must succeed: the answer's body.
fn post_completion(url: &str, body: &serde_json::Value) -> String {
    with_client(|c| async move {
        let r = c
            .post(format!("{url}/v1/completions"))
            .json(body)
            .send()
            .await
            .unwrap();
        assert!(r.status().is_success(), "completion failed: {}", r.status());
        r.text().await.unwrap()
    })
}

/// `GET url` as JSON (any status).
pub(crate) fn get(url: &str) -> serde_json::Value {
    with_client(|c| async move { c.get(url).send().await.unwrap().json().await.unwrap() })
}

/// `f` with an HTTP client (20 s timeout, no proxy), run to its end on a runtime of its
/// own: what the tests' requests share.
pub(crate) fn with_client<T, F: std::future::Future<Output = T>>(
    f: impl FnOnce(reqwest::Client) -> F,
) -> T {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(20))
        .no_proxy()
        .build()
        .unwrap();
    rt.block_on(f(client))
}

/// stdout then stderr, lossily.
pub(crate) fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Poll `cond` every 20 ms for up to 30 s.
pub(crate) fn wait_for(what: &str, mut cond: impl FnMut() -> bool) {
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
pub(crate) fn stat(pid: u32) -> Option<(char, u32, u64)> {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = s.rsplit(')').next()?;
    let f: Vec<&str> = rest.split_whitespace().collect();
    Some((
        f.first()?.chars().next()?,
        f.get(2)?.parse().ok()?,
        f.get(19)?.parse().ok()?,
    ))
}

/// The words of process `pid`'s command line.
pub(crate) fn cmdline(pid: u32) -> Vec<String> {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .unwrap()
        .split(|b| *b == 0)
        .filter(|w| !w.is_empty())
        .map(|w| String::from_utf8_lossy(w).into_owned())
        .collect()
}

/// The value after `flag` in `words`.
pub(crate) fn at<'a>(words: &'a [String], flag: &str) -> Option<&'a str> {
    let i = words.iter().position(|w| w == flag)?;
    words.get(i + 1).map(String::as_str)
}

/// Whether `pid` is a live (non-zombie) process.
pub(crate) fn alive(pid: u32) -> bool {
    stat(pid).is_some_and(|(state, _, _)| state != 'Z' && state != 'X')
}

/// Live processes carrying the deployment's marker in their environment.
pub(crate) fn live_processes(deployment: &str) -> Vec<u32> {
    srt::exec::process::processes_with_env_marker(srt::exec::local::DEPLOYMENT_MARKER, deployment)
        .into_iter()
        .filter(|&pid| alive(pid))
        .collect()
}

/// Every live process of the deployment is in the process group of a process the
/// state records (whatever its status): nothing runs that srt lost track of.
pub(crate) fn assert_all_recorded(env: &Env, deployment: &str) {
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
pub(crate) fn assert_no_orphans(env: &Env, deployment: &str) {
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
pub(crate) fn collect(child: Child) -> Output {
    child.wait_with_output().unwrap()
}

/// Wait for a child with a deadline, killing it on timeout.
pub(crate) fn wait_child(child: &mut Child, limit: Duration) -> std::process::ExitStatus {
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
pub(crate) fn files_under(dir: &Path) -> Vec<PathBuf> {
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
pub(crate) fn signal(pid: u32, signal: nix::sys::signal::Signal) {
    let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), signal);
}
