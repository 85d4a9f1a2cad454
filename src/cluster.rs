//! Cluster profiles: which executor runs a deployment and the facts it needs about the
//! cluster (partition, account, time limit, GPUs per node, the network interface whose
//! address workers advertise, container runtime, extra `sbatch`/`srun` options).
//!
//! A profile is a small YAML file, chosen with `--cluster FILE` (or `SRT_CLUSTER`), else
//! `srt-cluster.yaml` in the current directory when it exists, else none: the local
//! executor. Unknown keys are refused. The reference is `docs/slurm.md`.
//!
//! ```yaml
//! executor: slurm
//! partition: gpu
//! account: llm-serving
//! time_limit: "12:00:00"
//! gpus_per_node: 8
//! network_interface: ib0
//! container:
//!   runtime: pyxis
//!   flags: ["--container-mounts=/models:/models"]
//! ```

use serde::Deserialize;
use std::path::{Path, PathBuf};

/// The profile file looked up in the current directory when no `--cluster` is given.
pub const CONVENTIONAL_FILE: &str = "srt-cluster.yaml";

/// Which executor runs the deployment.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ExecutorKind {
    /// Every process on this machine (the default).
    #[default]
    Local,
    /// Processes as job steps of one SLURM allocation.
    Slurm,
}

/// How the allocation asks SLURM for GPUs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum GpuRequest {
    /// `--gres=gpu:G` (the default; works on every SLURM with GRES).
    #[default]
    Gres,
    /// `--gpus-per-node=G` (cons_tres clusters that prefer it).
    GpusPerNode,
    /// No GPU request (clusters that schedule whole nodes and do not track GPUs).
    None,
}

/// The container runtime processes run in.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ContainerRuntime {
    /// Processes run on the node directly.
    #[default]
    None,
    /// NVIDIA pyxis/enroot: `srun --container-image=IMAGE` plus `flags`.
    Pyxis,
}

/// Container settings.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Container {
    /// The runtime.
    #[serde(default)]
    pub runtime: ContainerRuntime,
    /// Extra `srun` flags for containerized steps (e.g. `--container-mounts=...`).
    #[serde(default)]
    pub flags: Vec<String>,
}

/// A cluster profile.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClusterProfile {
    /// The executor.
    #[serde(default)]
    pub executor: ExecutorKind,
    /// `sbatch --partition`; the cluster's default partition when absent.
    #[serde(default)]
    pub partition: Option<String>,
    /// `sbatch --account`.
    #[serde(default)]
    pub account: Option<String>,
    /// `sbatch --time` (SLURM syntax, e.g. `"04:00:00"` or `"1-00:00:00"`).
    #[serde(default)]
    pub time_limit: Option<String>,
    /// GPUs each node of the cluster has. The allocation asks for the recipe's
    /// `resources.gpus_per_node`; a recipe wanting more than this is refused.
    #[serde(default)]
    pub gpus_per_node: Option<u32>,
    /// How GPUs are requested.
    #[serde(default)]
    pub gpu_request: GpuRequest,
    /// The interface whose IPv4 address workers advertise and the Router is reached at
    /// (e.g. `ib0`). When absent, node names are resolved on the machine running srt.
    #[serde(default)]
    pub network_interface: Option<String>,
    /// The variable SLURM sets to the GPUs a step may use (`CUDA_VISIBLE_DEVICES`,
    /// `ROCR_VISIBLE_DEVICES`, ...). srt checks it on every node of the allocation and
    /// never exports its own value of it into steps.
    #[serde(default = "default_visible_devices")]
    pub visible_devices_env: String,
    /// Container runtime.
    #[serde(default)]
    pub container: Container,
    /// Extra `sbatch` options for the allocation (e.g. `--exclusive`, `--qos=high`).
    #[serde(default)]
    pub sbatch_options: Vec<String>,
    /// Extra `srun` options for every step (e.g. `--cpus-per-task=16`).
    #[serde(default)]
    pub srun_options: Vec<String>,
    /// How long to wait for the allocation to start running.
    #[serde(default = "default_allocation_timeout")]
    pub allocation_timeout_seconds: u64,
    /// How long to wait for a launched step to appear in `squeue`.
    #[serde(default = "default_step_timeout")]
    pub step_start_timeout_seconds: u64,
    /// Between `scancel --signal=TERM` and `scancel` of a step.
    #[serde(default = "default_grace")]
    pub stop_grace_seconds: u64,
}

fn default_visible_devices() -> String {
    "CUDA_VISIBLE_DEVICES".into()
}
fn default_allocation_timeout() -> u64 {
    300
}
fn default_step_timeout() -> u64 {
    60
}
fn default_grace() -> u64 {
    10
}

impl Default for ClusterProfile {
    fn default() -> Self {
        ClusterProfile {
            executor: ExecutorKind::Local,
            partition: None,
            account: None,
            time_limit: None,
            gpus_per_node: None,
            gpu_request: GpuRequest::Gres,
            network_interface: None,
            visible_devices_env: default_visible_devices(),
            container: Container::default(),
            sbatch_options: Vec::new(),
            srun_options: Vec::new(),
            allocation_timeout_seconds: default_allocation_timeout(),
            step_start_timeout_seconds: default_step_timeout(),
            stop_grace_seconds: default_grace(),
        }
    }
}

/// A profile that cannot be read or is invalid.
#[derive(Debug, thiserror::Error, miette::Diagnostic)]
#[error("cluster profile {}: {message}", path.display())]
#[diagnostic(
    code(srt::cluster::profile),
    help("see docs/slurm.md for the cluster profile reference")
)]
pub struct ProfileError {
    /// The file.
    pub path: PathBuf,
    /// What is wrong.
    pub message: String,
}

impl ClusterProfile {
    /// Parse profile text; `path` names it in errors.
    pub fn parse(text: &str, path: &Path) -> Result<ClusterProfile, ProfileError> {
        let err = |message: String| ProfileError {
            path: path.to_path_buf(),
            message,
        };
        if text.trim().is_empty() {
            return Ok(ClusterProfile::default());
        }
        let profile: ClusterProfile =
            serde_saphyr::from_str(text).map_err(|e| err(e.to_string()))?;
        profile.validate().map_err(err)?;
        Ok(profile)
    }

    /// Read and parse a profile file.
    pub fn load(path: &Path) -> Result<ClusterProfile, ProfileError> {
        let text = std::fs::read_to_string(path).map_err(|e| ProfileError {
            path: path.to_path_buf(),
            message: format!("cannot read it: {e}"),
        })?;
        Self::parse(&text, path)
    }

    /// The profile for a command: `explicit` (`--cluster`/`SRT_CLUSTER`), else
    /// [`CONVENTIONAL_FILE`] in `cwd` when it exists, else the local default.
    pub fn resolve(explicit: Option<&Path>, cwd: &Path) -> Result<ClusterProfile, ProfileError> {
        if let Some(p) = explicit {
            return Self::load(p);
        }
        let conventional = cwd.join(CONVENTIONAL_FILE);
        if conventional.is_file() {
            return Self::load(&conventional);
        }
        Ok(ClusterProfile::default())
    }

    fn validate(&self) -> Result<(), String> {
        let option = |what: &str, v: &str| -> Result<(), String> {
            if v.is_empty() || v.contains(['\n', '\0']) {
                return Err(format!("`{what}` must be a non-empty single-line string"));
            }
            Ok(())
        };
        for (what, v) in [
            ("partition", &self.partition),
            ("account", &self.account),
            ("time_limit", &self.time_limit),
            ("network_interface", &self.network_interface),
        ] {
            if let Some(v) = v {
                option(what, v)?;
                if v.chars().any(char::is_whitespace) {
                    return Err(format!("`{what}` must not contain spaces: {v:?}"));
                }
            }
        }
        if self.gpus_per_node == Some(0) {
            return Err("`gpus_per_node` must be at least 1".into());
        }
        if self.visible_devices_env.is_empty()
            || !self
                .visible_devices_env
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_')
        {
            return Err(format!(
                "`visible_devices_env` must be a variable name, not {:?}",
                self.visible_devices_env
            ));
        }
        for (what, list) in [
            ("sbatch_options", &self.sbatch_options),
            ("srun_options", &self.srun_options),
            ("container.flags", &self.container.flags),
        ] {
            for o in list {
                option(what, o)?;
                if !o.starts_with('-') {
                    return Err(format!(
                        "`{what}` entries are options starting with `-`, like `--qos=high`; got {o:?}"
                    ));
                }
            }
        }
        for managed in [
            "--jobid",
            "--nodelist",
            "--job-name",
            "--nodes",
            "--ntasks",
            "--wrap",
        ] {
            for o in self.sbatch_options.iter().chain(&self.srun_options) {
                if o == managed || o.starts_with(&format!("{managed}=")) {
                    return Err(format!(
                        "`{o}` is set by srt from the recipe and the allocation; remove it"
                    ));
                }
            }
        }
        if self.allocation_timeout_seconds == 0 || self.step_start_timeout_seconds == 0 {
            return Err("timeouts must be at least 1 second".into());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<ClusterProfile, String> {
        ClusterProfile::parse(text, Path::new("p.yaml")).map_err(|e| e.to_string())
    }

    #[test]
    fn defaults_are_local() {
        assert_eq!(parse("").unwrap(), ClusterProfile::default());
        assert_eq!(
            parse("executor: local\n").unwrap().executor,
            ExecutorKind::Local
        );
    }

    #[test]
    fn full_profile_parses() {
        let p = parse(
            "executor: slurm\npartition: gpu\naccount: a\ntime_limit: \"1:00:00\"\ngpus_per_node: 8\n\
             gpu_request: gpus-per-node\nnetwork_interface: ib0\nvisible_devices_env: ROCR_VISIBLE_DEVICES\n\
             container:\n  runtime: pyxis\n  flags: [\"--container-mounts=/m:/m\"]\n\
             sbatch_options: [\"--exclusive\"]\nsrun_options: [\"--cpus-per-task=4\"]\n\
             allocation_timeout_seconds: 30\nstep_start_timeout_seconds: 5\nstop_grace_seconds: 2\n",
        )
        .unwrap();
        assert_eq!(p.executor, ExecutorKind::Slurm);
        assert_eq!(p.gpu_request, GpuRequest::GpusPerNode);
        assert_eq!(p.container.runtime, ContainerRuntime::Pyxis);
        assert_eq!(p.container.flags, ["--container-mounts=/m:/m"]);
        assert_eq!(p.stop_grace_seconds, 2);
    }

    #[test]
    fn unknown_keys_and_bad_values_are_refused() {
        let e = parse("executor: slurm\npartiton: gpu\n").unwrap_err();
        assert!(e.contains("partiton"), "{e}");
        assert!(parse("executor: kubernetes\n").is_err());
        assert!(parse("container:\n  runtime: docker\n").is_err());
        assert!(parse("container:\n  image: x\n").is_err());
        let e = parse("sbatch_options: [\"exclusive\"]\n").unwrap_err();
        assert!(e.contains("starting with `-`"), "{e}");
        let e = parse("srun_options: [\"--nodelist=n1\"]\n").unwrap_err();
        assert!(e.contains("set by srt"), "{e}");
        assert!(parse("partition: \"a b\"\n").is_err());
        assert!(parse("gpus_per_node: 0\n").is_err());
        assert!(parse("visible_devices_env: \"A=B\"\n").is_err());
    }

    #[test]
    fn resolve_prefers_explicit_then_convention() {
        let dir = tempfile::tempdir().unwrap();
        assert_eq!(
            ClusterProfile::resolve(None, dir.path()).unwrap(),
            ClusterProfile::default()
        );
        std::fs::write(dir.path().join(CONVENTIONAL_FILE), "executor: slurm\n").unwrap();
        assert_eq!(
            ClusterProfile::resolve(None, dir.path()).unwrap().executor,
            ExecutorKind::Slurm
        );
        let other = dir.path().join("other.yaml");
        std::fs::write(&other, "executor: local\n").unwrap();
        assert_eq!(
            ClusterProfile::resolve(Some(&other), dir.path())
                .unwrap()
                .executor,
            ExecutorKind::Local
        );
        let missing = ClusterProfile::resolve(Some(&dir.path().join("nope.yaml")), dir.path());
        assert!(missing.unwrap_err().to_string().contains("cannot read"));
    }
}
