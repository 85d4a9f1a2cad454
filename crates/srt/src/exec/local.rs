//! The embedded default executor: every process on this machine, detached, with its
//! output in `<state dir>/<deployment>/logs/<address>.log`.
//!
//! All nodes of the plan map to this one host (127.0.0.1), so the launch plan is built
//! with [`HostLayout::Shared`] and per-node port kinds never collide. The executor runs
//! the processes it is handed as they are: under `--simulate` those already run the
//! project's vLLM simulator (`workflow::prepare` swaps the program through
//! [`crate::engine::Engine::simulate`]); the executor only knows the mode, which it
//! hashes into every process spec ([`Executor::execution`]).

use super::process::{self, Liveness, ProcessSpec, TerminateOutcome};
use super::{ExecError, Executor, Started};
use crate::launch::HostLayout;
use crate::launch::{Bindings, LaunchProcess, ProcessKind};
use crate::plan::Observation;
use crate::state::Runtime;
use futures::future::BoxFuture;
use std::io::Write;
use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};
use std::time::Duration;

pub use crate::launch::env::{DEPLOYMENT_MARKER, DIR_MARKER, RESOURCE_MARKER};

/// srt's markers, added to the environment of every process it launches.
pub(super) fn mark_env(
    env: &mut std::collections::BTreeMap<String, String>,
    deployment: &str,
    dir: &Path,
    address: &str,
) {
    env.insert(DEPLOYMENT_MARKER.into(), deployment.to_string());
    env.insert(DIR_MARKER.into(), dir.display().to_string());
    env.insert(RESOURCE_MARKER.into(), address.to_string());
}

/// Stops a recorded local process: through its lease; when the lease is gone, only if
/// its environment carries this deployment's markers. A process srt cannot prove is
/// its own is never signalled and the stop fails, so its record stays.
pub(super) async fn stop_recorded(
    id: process::ProcessIdentity,
    grace: Duration,
    deployment: &str,
    dir: &Path,
) -> Result<(), ExecError> {
    legacy_marked(&id, deployment)?;
    // Exited, killed, already gone, or someone else's process now: nothing of ours is
    // left to stop.
    if process::terminate(&id, grace).await? != TerminateOutcome::LeaseMissing {
        return Ok(());
    }
    let marked = process::has_env_marker(id.pid, DEPLOYMENT_MARKER, deployment)
        && process::has_env_marker(id.pid, DIR_MARKER, &dir.display().to_string());
    if !marked {
        return Err(ExecError::Unproven {
            pid: id.pid,
            lease: id.lease.unwrap_or_default(),
        });
    }
    let unleased = process::ProcessIdentity { lease: None, ..id };
    process::terminate(&unleased, grace).await?;
    Ok(())
}

/// Runs processes on this machine.
pub struct LocalExecutor {
    deployment: String,
    dir: PathBuf,
    bindings: Bindings,
    simulate: bool,
    grace: Duration,
}

impl LocalExecutor {
    /// An executor for `deployment` whose files live under `dir` (`<state dir>/<name>`),
    /// with `nodes` symbolic nodes; `simulate` when the processes it is handed run the
    /// simulator (a mode hashed into every process spec).
    pub fn new(deployment: &str, dir: &Path, nodes: usize, simulate: bool) -> Self {
        // Absolute, so that leases, logs and the files programs read (nginx resolves a
        // relative `-c` against its own prefix) mean the same thing from any directory.
        let dir = std::path::absolute(dir).unwrap_or_else(|_| dir.to_path_buf());
        let dir = dir.as_path();
        let run_dir = dir.join("run");
        LocalExecutor {
            deployment: deployment.to_string(),
            dir: dir.to_path_buf(),
            bindings: Bindings {
                node_ips: vec!["127.0.0.1".to_string(); nodes.max(1)],
                run_dir: run_dir.display().to_string(),
                node_hosts: vec![process::this_host(); nodes.max(1)],
            },
            simulate,
            grace: Duration::from_secs(10),
        }
    }

    /// The same executor with node `i` reached at `ips[i]`: one host answering on
    /// several (loopback) addresses, so that a cluster-sized plan's addresses resolve to
    /// distinct listeners (the plan benchmark's Routers).
    pub fn with_node_ips(mut self, ips: Vec<String>) -> Self {
        self.bindings.node_ips = ips;
        self
    }

    /// Set the stop grace period.
    pub fn with_grace(mut self, grace: Duration) -> Self {
        self.grace = grace;
        self
    }

    /// The log file of a resource.
    pub fn log_path(&self, address: &str) -> PathBuf {
        crate::state::log_file(&self.dir, address)
    }
}

/// The GPUs of this host, and where they were counted: `SRT_LOCAL_GPUS` when set (an
/// explicit count), else the devices `CUDA_VISIBLE_DEVICES` lists, else the NVIDIA
/// device files (`/dev/nvidia0`, ...), else ROCm's render nodes (`/dev/dri/renderD*`,
/// with `/dev/kfd`).
pub fn host_gpus() -> (u32, String) {
    host_gpus_from(
        std::env::var("SRT_LOCAL_GPUS").ok().as_deref(),
        std::env::var("CUDA_VISIBLE_DEVICES").ok().as_deref(),
        Path::new("/dev"),
    )
}

fn host_gpus_from(explicit: Option<&str>, visible: Option<&str>, dev: &Path) -> (u32, String) {
    if let Some(n) = explicit.and_then(|v| v.trim().parse().ok()) {
        return (n, "SRT_LOCAL_GPUS".into());
    }
    if let Some(list) = visible {
        let n = list.split(',').filter(|d| !d.trim().is_empty()).count() as u32;
        return (n, format!("CUDA_VISIBLE_DEVICES={list}"));
    }
    let count = |dir: &Path, keep: &dyn Fn(&str) -> bool| {
        std::fs::read_dir(dir)
            .into_iter()
            .flatten()
            .flatten()
            .filter(|e| e.file_name().to_str().is_some_and(keep))
            .count() as u32
    };
    let nvidia = count(dev, &|n| {
        n.strip_prefix("nvidia")
            .is_some_and(|i| !i.is_empty() && i.bytes().all(|b| b.is_ascii_digit()))
    });
    if nvidia > 0 {
        return (nvidia, format!("{}/nvidia*", dev.display()));
    }
    if dev.join("kfd").exists() {
        let rocm = count(&dev.join("dri"), &|n| n.starts_with("renderD"));
        return (rocm, format!("{}/dri/renderD*", dev.display()));
    }
    (0, format!("no GPU device in {}", dev.display()))
}

/// The lease file of a resource in a deployment directory (see
/// [`process::read_lease`]): one per address, shared by its launches, so a survivor of
/// an earlier launch is still found through it.
pub fn lease_path(dir: &Path, address: &str) -> PathBuf {
    crate::state::lease_file(dir, address)
}

/// The folder of a deployment directory holding the lease files.
pub const LEASES: &str = crate::state::LEASES_DIR;

/// Every lease file of a deployment directory: (address, path), sorted.
pub fn lease_files(dir: &Path) -> Vec<(String, PathBuf)> {
    let mut out: Vec<(String, PathBuf)> = std::fs::read_dir(dir.join(LEASES))
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let name = e.file_name().to_str()?.strip_suffix(".lease")?.to_string();
            Some((name, e.path()))
        })
        .collect();
    out.sort();
    out
}

/// Refuse to launch `address` while a process of an earlier launch still runs: the
/// lease would then name two processes. Cheap (the recorded leader and its group);
/// the thorough search is [`super::Executor::leased`], run by every plan.
pub(super) fn check_no_survivor(lease: &Path, address: &str) -> Result<(), ExecError> {
    let Some(id) = process::lease_identity(lease) else {
        return Ok(());
    };
    let live = process::members(&id);
    if live.is_empty() {
        return Ok(());
    }
    Err(ExecError::EarlierLaunchRuns {
        address: address.to_string(),
        pids: live,
    })
}

/// The signed leases of a deployment directory, by address.
pub(super) fn signed_leases(dir: &Path) -> Vec<(String, process::ProcessIdentity)> {
    lease_files(dir)
        .into_iter()
        .filter_map(|(address, path)| Some((address, process::lease_identity(&path)?)))
        .collect()
}

/// For a state record written before leases existed: the process must carry srt's
/// deployment marker in its environment, or it is not signalled.
pub(super) fn legacy_marked(
    id: &process::ProcessIdentity,
    deployment: &str,
) -> Result<(), ExecError> {
    if id.lease.is_some() || process::liveness(id) != Liveness::Alive {
        return Ok(());
    }
    if process::has_env_marker(id.pid, DEPLOYMENT_MARKER, deployment) {
        return Ok(());
    }
    Err(ExecError::NotOurs {
        pid: id.pid,
        marker: DEPLOYMENT_MARKER,
        deployment: deployment.to_string(),
    })
}

/// A local runtime for a process identity.
pub(super) fn local_runtime(id: process::ProcessIdentity) -> Runtime {
    Runtime::Local {
        pid: id.pid,
        start_time: id.start_time,
        pgid: id.pgid,
        host: id.host,
        lease: id.lease,
    }
}

/// Write the generated files a process reads (and nginx's temp directories) under the
/// run directory, placeholders resolved. Shared with executors whose nodes see this
/// filesystem.
pub(super) fn write_files(bindings: &Bindings, p: &LaunchProcess) -> Result<(), ExecError> {
    let create = |dir: &Path| {
        crate::files::private_dir(dir).map_err(|error| ExecError::File {
            action: "create",
            path: dir.to_path_buf(),
            error,
        })
    };
    for (path, content) in &p.files {
        let path = PathBuf::from(bindings.resolve(path));
        if let Some(parent) = path.parent() {
            create(parent)?;
        }
        crate::files::write_atomic(&path, bindings.resolve(content).as_bytes()).map_err(
            |error| ExecError::File {
                action: "write",
                path: path.clone(),
                error,
            },
        )?;
    }
    if let ProcessKind::Component(c) = p.kind {
        for dir in c.scratch_dirs {
            create(&PathBuf::from(&bindings.run_dir).join(dir))?;
        }
    }
    for dir in &p.wrap.dirs {
        create(&PathBuf::from(bindings.resolve(dir)))?;
    }
    // srt's copy of each script, what the process runs: what was read and hashed.
    for setup in &p.wrap.setup {
        let path = PathBuf::from(bindings.resolve(&setup.path));
        if let Some(parent) = path.parent() {
            create(parent)?;
        }
        crate::files::write_atomic(&path, setup.text.as_bytes()).map_err(|error| {
            ExecError::File {
                action: "write",
                path: path.clone(),
                error,
            }
        })?;
    }
    Ok(())
}

/// The program `name` shipped next to the running `srt` (an engine's simulator), if
/// present: in its directory, or the one above (a test binary under `deps/`).
pub fn next_to_srt(name: &str) -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let dir = exe.parent()?;
    [dir.join(name), dir.parent()?.join(name)]
        .into_iter()
        .find(|p| p.is_file())
}

/// Whether a recorded local process is still the one that was started (a read of
/// `/proc`, no waiting).
fn observe_local(runtime: &Runtime) -> Observation {
    let Some(id) = super::local_identity(runtime) else {
        return Observation::Gone("recorded on another executor".into());
    };
    match process::observe(&id) {
        (Liveness::Alive, true) => Observation::Gone(format!(
            "process {} is stopped (SIGSTOP or a debugger) and serves nothing",
            id.pid
        )),
        (Liveness::Alive, false) => Observation::Alive,
        (Liveness::Exited, _) => Observation::Gone(super::exited(&id)),
        (Liveness::Reused, _) => Observation::Gone(format!(
            "process {} is gone (its pid now belongs to another program)",
            id.pid
        )),
    }
}

/// Refuse when a port of `p` is bound on this host.
fn ports_free(p: &LaunchProcess) -> Result<(), ExecError> {
    let any = IpAddr::V4(Ipv4Addr::UNSPECIFIED);
    for (kind, block) in &p.ports {
        for i in 0..block.count {
            let port = block.base + i;
            if !process::port_is_free(any, port) {
                return Err(ExecError::port_taken(
                    port,
                    kind,
                    &p.address,
                    "on this host".into(),
                ));
            }
        }
    }
    Ok(())
}

impl Executor for LocalExecutor {
    fn bindings(&self) -> Bindings {
        self.bindings.clone()
    }

    fn host_layout(&self) -> HostLayout {
        HostLayout::Shared
    }

    fn execution(&self) -> serde_json::Value {
        serde_json::json!({ "executor": "local", "simulate": self.simulate })
    }

    fn runs_programs_here(&self) -> bool {
        true
    }

    fn start(&self, p: &LaunchProcess) -> Result<Started, ExecError> {
        write_files(&self.bindings, p)?;
        let resolve = |w: &str| self.bindings.resolve(w);
        let scripts: Vec<String> = p.wrap.setup.iter().map(|s| resolve(&s.path)).collect();
        let program = p.command().map(resolve).collect();
        let argv = p.wrap.command(&scripts, program, resolve);
        let log_path = self.log_path(&p.address);
        // A marker per launch, so a log that spans several incarnations shows where the
        // current one starts.
        if let Some(parent) = log_path.parent() {
            let _ = crate::files::private_dir(parent);
        }
        if let Ok(mut f) = crate::files::open_append(&log_path) {
            let _ = writeln!(f, "--- srt: starting {} ---", p.address);
        }
        let mut spec = ProcessSpec::new(argv[0].clone(), &log_path);
        spec.args = argv[1..].to_vec();
        spec.env = p
            .env
            .iter()
            .map(|(k, v)| (k.clone(), self.bindings.resolve(v)))
            .collect();
        mark_env(&mut spec.env, &self.deployment, &self.dir, &p.address);
        spec.env_remove = p.env_unset.clone();
        let lease = lease_path(&self.dir, &p.address);
        check_no_survivor(&lease, &p.address)?;
        spec.lease = Some(lease);
        let id = process::spawn_detached(&spec)?;
        Ok(Started {
            runtime: Runtime::Local {
                pid: id.pid,
                start_time: id.start_time,
                pgid: id.pgid,
                host: id.host,
                lease: id.lease,
            },
            log_path,
        })
    }

    fn leases(&self) -> Vec<(String, process::ProcessIdentity)> {
        signed_leases(&self.dir)
    }

    fn leased_runtime(&self, _address: &str, id: process::ProcessIdentity) -> Option<Runtime> {
        Some(local_runtime(id))
    }

    fn observe<'a>(&'a self, runtime: &'a Runtime) -> BoxFuture<'a, Observation> {
        Box::pin(std::future::ready(observe_local(runtime)))
    }

    /// Each process's `/proc` entry read once, on several threads when there are many.
    fn observe_all<'a>(&'a self, runtimes: &'a [&'a Runtime]) -> BoxFuture<'a, Vec<Observation>> {
        let work = vec![1; runtimes.len()];
        let seen = crate::parallel::map_slices(&work, |range| {
            runtimes[range].iter().map(|rt| observe_local(rt)).collect()
        });
        Box::pin(std::future::ready(seen))
    }

    fn stop<'a>(&'a self, runtime: &'a Runtime) -> BoxFuture<'a, Result<(), ExecError>> {
        Box::pin(async move {
            let Some(id) = super::local_identity(runtime) else {
                return Ok(());
            };
            stop_recorded(id, self.grace, &self.deployment, &self.dir).await
        })
    }

    fn check_ports<'a>(&'a self, p: &'a LaunchProcess) -> BoxFuture<'a, Result<(), ExecError>> {
        Box::pin(std::future::ready(ports_free(p)))
    }

    fn log_tail(&self, address: &str, lines: usize) -> Option<String> {
        process::tail_excerpt(&self.log_path(address), lines).ok()
    }

    fn reload<'a>(
        &'a self,
        runtime: &'a Runtime,
        p: &'a LaunchProcess,
    ) -> BoxFuture<'a, Result<(), ExecError>> {
        Box::pin(async move {
            let not_running = || ExecError::NotRunning {
                address: p.address.clone(),
            };
            let id = super::local_identity(runtime).ok_or_else(not_running)?;
            legacy_marked(&id, &self.deployment)?;
            write_files(&self.bindings(), p)?;
            if process::signal_leader(&id, nix::sys::signal::Signal::SIGHUP)? {
                Ok(())
            } else {
                Err(not_running())
            }
        })
    }

    fn restore<'a>(
        &'a self,
        state: &'a crate::state::State,
    ) -> BoxFuture<'a, Result<(), ExecError>> {
        Box::pin(std::future::ready(self.refuse_foreign(state)))
    }
}

impl LocalExecutor {
    /// Refuse state that records SLURM jobs: this executor would lose track of them.
    fn refuse_foreign(&self, state: &crate::state::State) -> Result<(), ExecError> {
        // A SLURM deployment seen without its profile: refuse rather than plan to
        // replace (and lose track of) its job.
        let job = state.resources.values().find_map(|r| match &r.runtime {
            Some(Runtime::Slurm { job_id, .. }) => Some(*job_id),
            _ => None,
        });
        match job {
            Some(job) => Err(ExecError::ForeignState {
                deployment: self.deployment.clone(),
                job,
            }),
            None => Ok(()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A process that closes every inherited descriptor (its lease among them) and
    /// waits; `marked` gives it this deployment's markers.
    fn unleased_sleeper(dir: &Path, marked: bool) -> process::ProcessIdentity {
        let mut spec = ProcessSpec::new("python3", dir.join("logs/p.log"));
        spec.args = vec![
            "-c".into(),
            "import os, time; os.closerange(3, 4096); time.sleep(60)".into(),
        ];
        if marked {
            mark_env(&mut spec.env, "d", dir, "p");
        }
        spec.lease = Some(lease_path(dir, "p"));
        let id = process::spawn_detached(&spec).unwrap();
        std::fs::remove_dir_all(dir.join(LEASES)).unwrap();
        let fds =
            |pid: u32| std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, Iterator::count);
        let started = std::time::Instant::now();
        while fds(id.pid) > 3 && started.elapsed() < Duration::from_secs(10) {
            std::thread::sleep(Duration::from_millis(20));
        }
        id
    }

    #[tokio::test]
    async fn a_process_without_its_lease_is_stopped_only_when_its_markers_prove_it() {
        let t = tempfile::tempdir().unwrap();
        let stranger = unleased_sleeper(t.path(), false);
        let grace = Duration::from_secs(2);
        let err = stop_recorded(stranger.clone(), grace, "d", t.path())
            .await
            .unwrap_err();
        assert!(matches!(err, ExecError::Unproven { .. }), "{err}");
        assert_eq!(
            process::liveness(&stranger),
            Liveness::Alive,
            "never signalled"
        );
        let ours = unleased_sleeper(t.path(), true);
        stop_recorded(ours.clone(), grace, "d", t.path())
            .await
            .unwrap();
        assert_ne!(process::liveness(&ours), Liveness::Alive);
        // The stranger, stopped by hand.
        let unleased = process::ProcessIdentity {
            lease: None,
            ..stranger
        };
        process::terminate(&unleased, grace).await.unwrap();
    }

    #[test]
    fn host_gpus_are_counted_from_the_override_the_visible_list_or_the_devices() {
        let dev = tempfile::tempdir().unwrap();
        let d = dev.path();
        assert_eq!(host_gpus_from(Some("8"), Some("0"), d).0, 8);
        assert_eq!(host_gpus_from(None, Some("0,1,2"), d).0, 3);
        assert_eq!(host_gpus_from(None, Some(""), d).0, 0);
        assert_eq!(host_gpus_from(None, None, d).0, 0);
        for f in ["nvidia0", "nvidia1", "nvidiactl", "nvidia-uvm"] {
            std::fs::write(d.join(f), "").unwrap();
        }
        assert_eq!(host_gpus_from(None, None, d).0, 2);
    }

    /// A relative `--state-dir` still gives programs absolute paths: nginx resolves a
    /// relative `-c` against its own prefix (`/usr/share/nginx/...`), not against the
    /// directory srt runs in.
    #[test]
    fn a_relative_state_dir_binds_an_absolute_run_dir() {
        let exec = LocalExecutor::new("d", Path::new(".srt/d"), 2, true);
        let nginx = crate::frontend::nginx::process(
            0,
            8000,
            &["<node1-ip>:8180".to_string()],
            &crate::recipe::Nginx::default(),
        );
        let b = exec.bindings();
        let conf = b.resolve(&nginx.argv[4]);
        assert!(Path::new(&conf).is_absolute(), "{conf}");
        assert!(conf.ends_with(".srt/d/run/nginx.conf"), "{conf}");
        let (path, text) = nginx.files.iter().next().unwrap();
        assert_eq!(b.resolve(path), conf);
        for line in b.resolve(text).lines() {
            let line = line.trim();
            for directive in ["pid ", "client_body_temp_path ", "proxy_temp_path "] {
                if let Some(p) = line.strip_prefix(directive) {
                    assert!(Path::new(p.trim_end_matches(';')).is_absolute(), "{line}");
                }
            }
        }
    }

    /// The log tail a failure report shows is bounded: a worker whose log ends in a
    /// 100 MB line without a newline made apply print 104 MB.
    #[test]
    fn a_log_tail_is_bounded_in_bytes() {
        use std::io::Write;
        let dir = tempfile::tempdir().unwrap();
        let exec = LocalExecutor::new("d", dir.path(), 1, true);
        let log = exec.log_path("worker.agg[0]");
        std::fs::create_dir_all(log.parent().unwrap()).unwrap();
        let mut f = std::fs::File::create(&log).unwrap();
        f.write_all(b"--- srt: starting worker.agg[0] ---\n")
            .unwrap();
        f.write_all(&vec![b'z'; 8 << 20]).unwrap();
        drop(f);
        let tail = exec.log_tail("worker.agg[0]", 20).unwrap();
        assert!(tail.len() < 64 * 1024, "{} bytes", tail.len());
        assert!(tail.contains("[... cut: "), "marked");
    }
}
