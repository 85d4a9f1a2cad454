//! The embedded default executor: every process on this machine, detached, with its
//! output in `<state dir>/<deployment>/logs/<address>.log`.
//!
//! All nodes of the plan map to this one host (127.0.0.1), so the launch plan is built
//! with [`HostLayout::Shared`] and per-node port kinds never collide. With `simulate`,
//! worker processes run the project's vLLM simulator with exactly the argv `vllm` would
//! get (the program is swapped, nothing else).

use super::process::{self, Liveness, ProcessSpec, TerminateOutcome};
use super::{Executor, Started};
use crate::launch::build::HostLayout;
use crate::launch::{Bindings, LaunchProcess, ProcessKind};
use crate::plan::Observation;
use crate::state::Runtime;
use futures::future::BoxFuture;
use std::io::Write;
use std::net::{IpAddr, Ipv4Addr};
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Environment variable naming the deployment in every launched process (to find orphans).
pub const DEPLOYMENT_MARKER: &str = "SRT_DEPLOYMENT";
/// Environment variable naming the resource address in every launched process.
pub const RESOURCE_MARKER: &str = "SRT_RESOURCE";

/// Runs processes on this machine.
pub struct LocalExecutor {
    deployment: String,
    dir: PathBuf,
    bindings: Bindings,
    simulator: Option<PathBuf>,
    grace: Duration,
}

impl LocalExecutor {
    /// An executor for `deployment` whose files live under `dir` (`<state dir>/<name>`),
    /// with `nodes` symbolic nodes. `simulator` is the vLLM simulator binary, when workers
    /// are simulated.
    pub fn new(deployment: &str, dir: &Path, nodes: usize, simulator: Option<PathBuf>) -> Self {
        let run_dir = dir.join("run");
        LocalExecutor {
            deployment: deployment.to_string(),
            dir: dir.to_path_buf(),
            bindings: Bindings {
                node_ips: vec!["127.0.0.1".to_string(); nodes.max(1)],
                run_dir: run_dir.display().to_string(),
            },
            simulator,
            grace: Duration::from_secs(10),
        }
    }

    /// Set the stop grace period.
    pub fn with_grace(mut self, grace: Duration) -> Self {
        self.grace = grace;
        self
    }

    /// The log file of a resource.
    pub fn log_path(&self, address: &str) -> PathBuf {
        self.dir.join("logs").join(format!("{address}.log"))
    }
}

/// Write the generated files a process reads (and nginx's temp directories) under the
/// run directory, placeholders resolved. Shared with executors whose nodes see this
/// filesystem.
pub(super) fn write_files(bindings: &Bindings, p: &LaunchProcess) -> Result<(), String> {
    for (path, content) in &p.files {
        let path = PathBuf::from(bindings.resolve(path));
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)
                .map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
        }
        crate::state::write_private_atomic(&path, bindings.resolve(content).as_bytes())
            .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    }
    if p.kind == ProcessKind::Nginx {
        for sub in ["body", "proxy", "fastcgi", "uwsgi", "scgi"] {
            let d = PathBuf::from(&bindings.run_dir).join("nginx-tmp").join(sub);
            std::fs::create_dir_all(&d)
                .map_err(|e| format!("cannot create {}: {e}", d.display()))?;
        }
    }
    Ok(())
}

/// The simulator binary next to the running `srt` (`srt-vllm-sim`), if present.
pub fn default_simulator() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let dir = exe.parent()?;
    [dir.join("srt-vllm-sim"), dir.parent()?.join("srt-vllm-sim")]
        .into_iter()
        .find(|p| p.is_file())
}

impl Executor for LocalExecutor {
    fn bindings(&self) -> Bindings {
        self.bindings.clone()
    }

    fn host_layout(&self) -> HostLayout {
        HostLayout::Shared
    }

    fn execution(&self) -> serde_json::Value {
        serde_json::json!({ "executor": "local", "simulate": self.simulator.is_some() })
    }

    fn start(&self, p: &LaunchProcess) -> Result<Started, String> {
        write_files(&self.bindings, p)?;
        let mut argv: Vec<String> = p.argv.iter().map(|a| self.bindings.resolve(a)).collect();
        if p.kind == ProcessKind::Worker {
            if let Some(sim) = &self.simulator {
                argv[0] = sim.display().to_string();
            }
        }
        let log_path = self.log_path(&p.address);
        // A marker per launch, so a log that spans several incarnations shows where the
        // current one starts.
        if let Some(parent) = log_path.parent() {
            let _ = std::fs::create_dir_all(parent);
        }
        if let Ok(mut f) = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .open(&log_path)
        {
            let _ = writeln!(f, "--- srt: starting {} ---", p.address);
        }
        let mut spec = ProcessSpec::new(argv[0].clone(), &log_path);
        spec.args = argv[1..].to_vec();
        spec.env = p
            .env
            .iter()
            .map(|(k, v)| (k.clone(), self.bindings.resolve(v)))
            .collect();
        spec.env
            .insert(DEPLOYMENT_MARKER.into(), self.deployment.clone());
        spec.env.insert(RESOURCE_MARKER.into(), p.address.clone());
        spec.env_remove = p.env_unset.clone();
        let id = process::spawn_detached(&spec).map_err(|e| e.to_string())?;
        Ok(Started {
            runtime: Runtime::Local {
                pid: id.pid,
                start_time: id.start_time,
                pgid: id.pgid,
                host: id.host,
            },
            log_path,
        })
    }

    fn observe(&self, runtime: &Runtime) -> Observation {
        let Some(id) = super::local_identity(runtime) else {
            return Observation::Gone("recorded on another executor".into());
        };
        match process::liveness(&id) {
            Liveness::Alive => Observation::Alive,
            Liveness::Exited => Observation::Gone(format!("process {} exited", id.pid)),
            Liveness::Reused => Observation::Gone(format!(
                "process {} is gone (its pid now belongs to another program)",
                id.pid
            )),
        }
    }

    fn stop<'a>(&'a self, runtime: &'a Runtime) -> BoxFuture<'a, Result<(), String>> {
        Box::pin(async move {
            let Some(id) = super::local_identity(runtime) else {
                return Ok(());
            };
            match process::terminate(&id, self.grace).await {
                Ok(
                    TerminateOutcome::Exited
                    | TerminateOutcome::Killed
                    | TerminateOutcome::AlreadyGone
                    | TerminateOutcome::NotOurs,
                ) => Ok(()),
                Err(e) => Err(e.to_string()),
            }
        })
    }

    fn check_ports(&self, p: &LaunchProcess) -> Result<(), String> {
        let any = IpAddr::V4(Ipv4Addr::UNSPECIFIED);
        for (kind, block) in &p.ports {
            for i in 0..block.count {
                let port = block.base + i;
                if !process::port_is_free(any, port) {
                    return Err(format!(
                        "port {port} ({kind}) of `{}` is already in use on this host",
                        p.address
                    ));
                }
            }
        }
        Ok(())
    }

    fn log_tail(&self, address: &str, lines: usize) -> Option<String> {
        process::tail_file(&self.log_path(address), lines).ok()
    }

    fn restore(&self, state: &crate::state::State) -> Result<(), String> {
        // A SLURM deployment seen without its profile: refuse rather than plan to
        // replace (and lose track of) its job.
        let job = state.resources.values().find_map(|r| match &r.runtime {
            Some(Runtime::Slurm { job_id, .. }) => Some(*job_id),
            _ => None,
        });
        match job {
            Some(job) => Err(format!(
                "deployment `{}` runs on SLURM (job {job}) but no SLURM cluster profile is in use; pass it with --cluster FILE (or SRT_CLUSTER)",
                self.deployment
            )),
            None => Ok(()),
        }
    }
}
