//! srtctl's runtime keys: what runs around every process (`setup_script`, `host_setup`,
//! `profiling`), what its container sees (`container_mounts`, `extra_mount`), what its
//! scheduler is asked (`sbatch_directives`, `srun_options`), the environment of every
//! worker (`environment`), and what the deployment declares it runs (`identity`).
//! Loaded by `load::runtime`; what each becomes is `launch::wrap`'s, the SLURM
//! executor's and the assembly's.

use super::model::{RoleKind, Sp};
use miette::SourceSpan;
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// The runtime keys of a recipe, defaults applied (every list empty, nothing set).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RuntimeKeys {
    /// `host_setup`: a script run on the node, outside any container, before the
    /// program of every worker process.
    pub host_setup: Option<ScriptRef>,
    /// `setup_script`: a script run where the program runs (in its container), before
    /// the program of every worker process.
    pub setup_script: Option<ScriptRef>,
    /// `container_mounts` then `extra_mount`: bind mounts of every containerized process.
    pub mounts: Vec<Sp<Mount>>,
    /// `sbatch_directives` as `sbatch` options (`--mem=0`, `--exclusive`), each at its
    /// entry.
    pub sbatch_directives: Vec<Sp<String>>,
    /// `srun_options` as `srun` options, each at its entry.
    pub srun_options: Vec<Sp<String>>,
    /// `environment`: variables of every worker process, set after the role's `env`
    /// (`{node}` and `{node_id}` expanded per process, as in role `env`).
    pub environment: BTreeMap<String, String>,
    /// Where each `environment` key is written.
    pub environment_spans: BTreeMap<String, SourceSpan>,
    /// Span of the `environment` key, when written.
    pub environment_span: Option<SourceSpan>,
    /// `identity`: what the deployment declares it runs; recorded, never launched.
    pub identity: Option<Identity>,
    /// `profiling`: the profiler every worker of the profiled roles runs under.
    pub profiling: Option<Profiling>,
    /// `enable_config_dump: true` (its span): each worker's Dynamo wrapper writes its
    /// resolved configuration (`--dump-config-to`) under the run directory.
    pub config_dump: Option<SourceSpan>,
}

/// A script a key names: as written, and the file it resolves to (relative to the
/// recipe's directory).
#[derive(Clone, Debug, PartialEq)]
pub struct ScriptRef {
    /// The key (`setup_script`, `host_setup`).
    pub key: &'static str,
    /// The value as written, at its span.
    pub written: Sp<String>,
    /// The file: `written` when absolute, else joined to the recipe's directory.
    pub path: PathBuf,
}

/// One bind mount, pyxis' `SRC:DST[:FLAGS]`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mount {
    /// The path on the node.
    pub host: String,
    /// Where the container sees it.
    pub container: String,
    /// Mount flags (`ro`, `rw`, `+`-separated as pyxis takes them), when written.
    pub flags: Option<String>,
}

impl Mount {
    /// The mount as `--container-mounts` takes one: `SRC:DST[:FLAGS]`.
    pub fn render(&self) -> String {
        match &self.flags {
            Some(f) => format!("{}:{}:{f}", self.host, self.container),
            None => format!("{}:{}", self.host, self.container),
        }
    }
}

/// `identity:` (srtctl's virtual identity): the model, image and framework versions the
/// deployment declares it runs. Recorded in state and shown by `srt status`; it starts
/// nothing and is in no process's hash.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct Identity {
    /// `identity.model`: the model's repository and revision.
    #[serde(default, skip_serializing_if = "IdentityModel::is_empty")]
    pub model: IdentityModel,
    /// `identity.container.image`: the image to pull to reproduce the run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub container_image: Option<String>,
    /// `identity.frameworks`: framework name -> version.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub frameworks: BTreeMap<String, String>,
}

/// `identity.model`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, serde::Deserialize)]
pub struct IdentityModel {
    /// Hugging Face repository (`org/name`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub repo: Option<String>,
    /// Its git revision.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revision: Option<String>,
}

impl IdentityModel {
    fn is_empty(&self) -> bool {
        self.repo.is_none() && self.revision.is_none()
    }
}

impl Identity {
    /// One line: `model=org/name@rev image=... vllm=0.32.0`.
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        if let Some(repo) = &self.model.repo {
            match &self.model.revision {
                Some(rev) => parts.push(format!("model={repo}@{rev}")),
                None => parts.push(format!("model={repo}")),
            }
        } else if let Some(rev) = &self.model.revision {
            parts.push(format!("model@{rev}"));
        }
        if let Some(image) = &self.container_image {
            parts.push(format!("image={image}"));
        }
        parts.extend(self.frameworks.iter().map(|(k, v)| format!("{k}={v}")));
        parts.join(" ")
    }
}

/// Which profiler.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProfilerKind {
    /// NVIDIA Nsight Systems: the program runs under `nsys profile`, capturing between
    /// the engine's profiler start and stop.
    Nsys,
    /// The engine's own PyTorch profiler, writing traces to a directory.
    Torch,
}

impl ProfilerKind {
    /// The recipe's name for it.
    pub fn name(self) -> &'static str {
        match self {
            ProfilerKind::Nsys => "nsys",
            ProfilerKind::Torch => "torch",
        }
    }
}

/// `profiling:`.
#[derive(Clone, Debug, PartialEq)]
pub struct Profiling {
    /// Span of the `profiling` key.
    pub span: SourceSpan,
    /// `type`.
    pub kind: Sp<ProfilerKind>,
    /// `extra_nsys_args`: words added to `nsys profile` before its output.
    pub extra_nsys_args: Vec<Sp<String>>,
    /// The profiled roles' steps (`prefill`, `decode`, `aggregated` for `agg`).
    pub phases: Vec<Phase>,
}

impl Profiling {
    /// The phase of `role`, if it is profiled.
    pub fn phase(&self, role: RoleKind) -> Option<&Phase> {
        self.phases.iter().find(|p| p.role == role)
    }
}

/// One profiled role: the engine steps the capture spans.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Phase {
    /// The role.
    pub role: RoleKind,
    /// Span of its key (`profiling.prefill`).
    pub span: SourceSpan,
    /// The step capture starts at.
    pub start_step: u32,
    /// The step it stops at (after `start_step`).
    pub stop_step: u32,
}
