//! Cluster profiles: which executor runs a deployment and the facts it needs about the
//! cluster (partition, account, time limit, GPUs per node, the network interface whose
//! address workers advertise, container runtime, extra `sbatch`/`srun` options).
//!
//! A profile is a small YAML file, chosen with `--cluster FILE` (or `SRT_CLUSTER`), else
//! `srt-cluster.yaml` in the current directory when it exists, else none: the local
//! executor. The reference is `docs/slurm.md`.
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
//!
//! [`ClusterProfile`] is tagged by `executor`: `local` (the default, no other key) or
//! `slurm` with the keys of [`SlurmProfile`]. The file is read with the recipes' YAML 1.2
//! reader ([`crate::recipe::yaml`], a spanned tree), and every problem is a diagnostic
//! pointing at the offending key or value in the file, all of them at once, like a
//! recipe's: an unknown key (with "did you mean"), a key of the SLURM executor in a local
//! profile, a wrong type, a bad value.

pub mod srtslurm;

use crate::getopt::{self, Item, OptionCatalog, ReadError};
use crate::recipe::diag::{did_you_mean, Problem};
use crate::recipe::yaml::{self, Key, Node, Value};
use crate::recipe::Source;
use miette::{Diagnostic, LabeledSpan, NamedSource, SourceSpan};
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

/// The profile file looked up in the current directory when no `--cluster` is given.
pub const CONVENTIONAL_FILE: &str = "srt-cluster.yaml";

/// The executors a profile can name, as written after `executor:`.
pub const EXECUTORS: &[&str] = &["local", "slurm"];

/// A cluster profile: the executor and its settings.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum ClusterProfile {
    /// `executor: local` (and no profile at all): every process on this machine.
    #[default]
    Local,
    /// `executor: slurm`: processes as job steps of one SLURM allocation.
    Slurm(Box<SlurmProfile>),
}

/// How the allocation asks SLURM for GPUs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum GpuRequest {
    /// `--gres=gpu:G` (the default; works on every SLURM with GRES).
    #[default]
    Gres,
    /// `--gpus-per-node=G` (cons_tres clusters that prefer it).
    GpusPerNode,
    /// No GPU request (clusters that schedule whole nodes and do not track GPUs).
    None,
}

impl GpuRequest {
    /// Every value, as written in a profile.
    pub const NAMES: &'static [&'static str] = &["gres", "gpus-per-node", "none"];

    /// The value as written in a profile.
    pub fn name(self) -> &'static str {
        match self {
            GpuRequest::Gres => "gres",
            GpuRequest::GpusPerNode => "gpus-per-node",
            GpuRequest::None => "none",
        }
    }
}

/// How a deployment's nodes are held in SLURM jobs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Allocations {
    /// One job per group of nodes that must share one (an endpoint's nodes, nodes
    /// several endpoints share; `launch::LaunchPlan::node_groups`): growing adds jobs
    /// for the new nodes, and a lost or ended job replaces only what ran on it.
    #[default]
    Split,
    /// One job for every node of the deployment (srtctl's way): growing it, or losing
    /// it, replaces everything.
    Single,
}

impl Allocations {
    /// Every value, as written in a profile.
    pub const NAMES: &'static [&'static str] = &["split", "single"];

    /// The value as written in a profile.
    pub fn name(self) -> &'static str {
        match self {
            Allocations::Split => "split",
            Allocations::Single => "single",
        }
    }
}

/// The container runtime processes run in.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ContainerRuntime {
    /// Processes run on the node directly.
    #[default]
    None,
    /// NVIDIA pyxis/enroot: `srun --container-image=IMAGE` plus `flags`.
    Pyxis,
}

impl ContainerRuntime {
    /// Every value, as written in a profile.
    pub const NAMES: &'static [&'static str] = &["none", "pyxis"];
}

/// Container settings.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Container {
    /// The runtime.
    pub runtime: ContainerRuntime,
    /// Extra `srun` flags for containerized steps (e.g. `--container-mounts=...`).
    pub flags: Vec<String>,
}

/// A duration written as SLURM writes and reads times (`squeue %L`, `--time`):
/// `minutes`, `minutes:seconds`, `hours:minutes:seconds`, `days-hours`,
/// `days-hours:minutes`, `days-hours:minutes:seconds`. `None` for `UNLIMITED`,
/// `NOT_SET`, `INVALID` or anything else.
pub fn slurm_duration(text: &str) -> Option<std::time::Duration> {
    let text = text.trim();
    let (days, rest) = match text.split_once('-') {
        Some((d, r)) => (d.parse::<u64>().ok()?, Some(r)),
        None => (0, None),
    };
    let parts: Vec<u64> = rest
        .unwrap_or(text)
        .split(':')
        .map(|p| p.parse::<u64>().ok())
        .collect::<Option<Vec<u64>>>()?;
    let seconds = match (rest.is_some(), parts.as_slice()) {
        (false, [m]) => m * 60,
        (false, [m, s]) => m * 60 + s,
        (false, [h, m, s]) => h * 3600 + m * 60 + s,
        (true, [h]) => h * 3600,
        (true, [h, m]) => h * 3600 + m * 60,
        (true, [h, m, s]) => h * 3600 + m * 60 + s,
        _ => return None,
    };
    Some(std::time::Duration::from_secs(days * 86_400 + seconds))
}

/// A duration as `squeue` shows it: `1-02:03:04`, `2:03:04`, `3:04`.
pub fn slurm_time(d: std::time::Duration) -> String {
    let s = d.as_secs();
    let (days, h, m, s) = (s / 86_400, s % 86_400 / 3600, s % 3600 / 60, s % 60);
    match (days, h) {
        (0, 0) => format!("{m}:{s:02}"),
        (0, _) => format!("{h}:{m:02}:{s:02}"),
        _ => format!("{days}-{h:02}:{m:02}:{s:02}"),
    }
}

/// The settings of `executor: slurm`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SlurmProfile {
    /// `sbatch --partition`; the cluster's default partition when absent.
    pub partition: Option<String>,
    /// `sbatch --account`.
    pub account: Option<String>,
    /// `sbatch --time` (SLURM syntax, e.g. `"04:00:00"` or `"1-00:00:00"`).
    pub time_limit: Option<String>,
    /// GPUs each node of the cluster has. The allocation asks for the recipe's
    /// `resources.gpus_per_node`; a recipe wanting more than this is refused.
    pub gpus_per_node: Option<u32>,
    /// How GPUs are requested.
    pub gpu_request: GpuRequest,
    /// How the deployment's nodes are held in jobs.
    pub allocations: Allocations,
    /// An allocation with less than this left of its time limit is renewed: a new job
    /// is created and what runs on the old one moves over, rolling, before it ends.
    pub renew_before: Option<std::time::Duration>,
    /// The interface whose IPv4 address workers advertise and the Router is reached at
    /// (e.g. `ib0`). When absent, node names are resolved on the machine running srt.
    pub network_interface: Option<String>,
    /// The variable SLURM sets to the GPUs a step may use (`CUDA_VISIBLE_DEVICES`,
    /// `ROCR_VISIBLE_DEVICES`, ...). srt checks it on every node of the allocation and
    /// never exports its own value of it into steps.
    pub visible_devices_env: String,
    /// Container runtime.
    pub container: Container,
    /// Extra `sbatch` options for the allocation (e.g. `--exclusive`, `--qos=high`).
    pub sbatch_options: Vec<String>,
    /// Extra `srun` options for every step (e.g. `--cpus-per-task=16`).
    pub srun_options: Vec<String>,
    /// How long to wait for the allocation to start running.
    pub allocation_timeout_seconds: u64,
    /// How long to wait for a launched step to appear in `squeue`.
    pub step_start_timeout_seconds: u64,
    /// Between `scancel --signal=TERM` and `scancel` of a step.
    pub stop_grace_seconds: u64,
    /// Aliases of a recipe's `model.path` (srtctl's `model_paths`).
    pub model_paths: std::collections::BTreeMap<String, String>,
    /// Aliases of the images a recipe names (srtctl's `containers`): `model.container`,
    /// `frontend.container_image`, nginx's image.
    pub containers: std::collections::BTreeMap<String, String>,
    /// Directories a recipe's `setup_script` or `host_setup` written as a relative path
    /// is looked up in, in order, when it is not beside the recipe (srtctl's
    /// `configs/` and `configs/patches/`, from `srtslurm.yaml`'s `srtctl_root`).
    /// Relative ones are relative to the profile file's directory.
    pub script_dirs: Vec<PathBuf>,
}

impl Default for SlurmProfile {
    fn default() -> Self {
        SlurmProfile {
            partition: None,
            account: None,
            time_limit: None,
            gpus_per_node: None,
            gpu_request: GpuRequest::Gres,
            allocations: Allocations::Split,
            renew_before: None,
            network_interface: None,
            visible_devices_env: "CUDA_VISIBLE_DEVICES".into(),
            container: Container::default(),
            sbatch_options: Vec::new(),
            srun_options: Vec::new(),
            allocation_timeout_seconds: 300,
            step_start_timeout_seconds: 60,
            stop_grace_seconds: 10,
            model_paths: Default::default(),
            containers: Default::default(),
            script_dirs: Vec::new(),
        }
    }
}

/// The keys of `executor: slurm`, in the order of the reference.
pub const SLURM_KEYS: &[&str] = &[
    "partition",
    "account",
    "time_limit",
    "gpus_per_node",
    "gpu_request",
    "allocations",
    "renew_before",
    "network_interface",
    "visible_devices_env",
    "container",
    "sbatch_options",
    "srun_options",
    "allocation_timeout_seconds",
    "step_start_timeout_seconds",
    "stop_grace_seconds",
    "model_paths",
    "containers",
    "script_dirs",
];

/// The keys of `container:`.
const CONTAINER_KEYS: &[&str] = &["runtime", "flags"];

/// Options srt sets itself on `sbatch` or `srun`, each with where it takes it from
/// (`exec/slurm.rs` renders them; a test there keeps this list equal to what it
/// renders). Each is refused in `sbatch_options`, `srun_options` and `container.flags`
/// by the option an entry resolves to (`-wn8` is `--nodelist`).
const MANAGED_OPTIONS: &[(&str, &str)] = &[
    (
        "--account",
        "from the profile key `account` (or the recipe's `slurm.account`): set that instead",
    ),
    (
        "--container-image",
        "from the recipe's `model.container` or `frontend.container_image` when `container.runtime` is `pyxis`",
    ),
    (
        "--export",
        "itself: NONE for the allocation, ALL for steps (a process's environment is the recipe's `env`)",
    ),
    (
        "--gpus-per-node",
        "from the recipe's GPUs per node with `gpu_request: gpus-per-node`",
    ),
    (
        "--gres",
        "from the recipe's GPUs per node with `gpu_request: gres`",
    ),
    (
        "--job-name",
        "from the deployment's name and each process's address",
    ),
    ("--jobid", "to the deployment's allocation"),
    (
        "--no-requeue",
        "itself: a failed node ends the allocation",
    ),
    ("--nodelist", "from each process's placement"),
    ("--nodes", "from the recipe's node count (one per step)"),
    ("--ntasks", "itself: one task per step"),
    (
        "--ntasks-per-node",
        "itself: the node agents' step runs one task per node",
    ),
    (
        "--output",
        "itself: the allocation's log, and each step's output goes to its process's log",
    ),
    ("--overlap", "itself: steps share the allocation"),
    ("--parsable", "itself: it reads the job id"),
    (
        "--partition",
        "from the profile key `partition` (or the recipe's `slurm.partition`): set that instead",
    ),
    (
        "--time",
        "from the profile key `time_limit` (or the recipe's `slurm.time_limit`): set that instead",
    ),
    (
        "--wrap",
        "itself: the allocation's script runs srt's node agents",
    ),
];

/// The options srt sets itself on `sbatch` or `srun` (long names, dashes included).
pub fn managed_options() -> impl Iterator<Item = &'static str> {
    MANAGED_OPTIONS.iter().map(|(name, _)| *name)
}

/// Where srt takes a managed option from, or `None` when a profile may set it.
fn managed_by(option: &str) -> Option<&'static str> {
    MANAGED_OPTIONS
        .iter()
        .find(|(name, _)| *name == option)
        .map(|(_, from)| *from)
}

/// `srun`'s options, dumped from the pinned SLURM by `scripts/slurm-option-catalogs.sh`.
pub fn srun_catalog() -> &'static OptionCatalog {
    static CATALOG: OnceLock<OptionCatalog> = OnceLock::new();
    CATALOG.get_or_init(|| {
        OptionCatalog::from_json(include_str!("../exec/catalog/srun-22.05.8-4+deb12u3.json"))
            .expect("the srun catalog is valid JSON")
    })
}

/// `sbatch`'s options, dumped like [`srun_catalog`].
pub fn sbatch_catalog() -> &'static OptionCatalog {
    static CATALOG: OnceLock<OptionCatalog> = OnceLock::new();
    CATALOG.get_or_init(|| {
        OptionCatalog::from_json(include_str!(
            "../exec/catalog/sbatch-22.05.8-4+deb12u3.json"
        ))
        .expect("the sbatch catalog is valid JSON")
    })
}

/// Where a list of profile options goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum OptionsFor {
    /// `sbatch_options`: the allocation's `sbatch`.
    Sbatch,
    /// `srun_options`: every step's `srun`.
    Srun,
    /// `container.flags`: every containerized step's `srun`, options of the container
    /// plugin (which adds options srun's own catalog does not have).
    Container,
}

impl OptionsFor {
    fn catalog(self) -> &'static OptionCatalog {
        match self {
            OptionsFor::Sbatch => sbatch_catalog(),
            OptionsFor::Srun | OptionsFor::Container => srun_catalog(),
        }
    }
}

/// A profile that cannot be read or is invalid.
#[derive(Debug, thiserror::Error, Diagnostic)]
pub enum ProfileError {
    /// The file cannot be read (missing, unreadable, not UTF-8).
    #[error("cluster profile {}: cannot read it: {error}", path.display())]
    #[diagnostic(
        code(srt::cluster::read),
        help("see docs/slurm.md for the cluster profile reference")
    )]
    Read {
        /// The file.
        path: PathBuf,
        /// The underlying error.
        error: std::io::Error,
    },
    /// The profile is invalid: every problem, pointing into the file.
    #[error(transparent)]
    #[diagnostic(transparent)]
    Invalid(InvalidProfile),
}

/// Every problem found in one profile file, rendered against its text.
#[derive(Debug, thiserror::Error)]
#[error("{}", headline(.problems))]
pub struct InvalidProfile {
    /// The profile text (control characters escaped) and file name.
    pub source_code: NamedSource<String>,
    /// Every problem, in source order.
    pub problems: Vec<Problem>,
}

fn headline(problems: &[Problem]) -> String {
    match problems {
        [one] => one.message.clone(),
        many => format!("{} problems in cluster profile", many.len()),
    }
}

impl Diagnostic for InvalidProfile {
    fn code<'a>(&'a self) -> Option<Box<dyn fmt::Display + 'a>> {
        match self.problems.as_slice() {
            [one] => Some(Box::new(one.code)),
            _ => Some(Box::new("srt::cluster::invalid")),
        }
    }
    fn help<'a>(&'a self) -> Option<Box<dyn fmt::Display + 'a>> {
        match self.problems.as_slice() {
            [one] => one.help(),
            _ => Some(Box::new(
                "see docs/slurm.md for the cluster profile reference",
            )),
        }
    }
    fn source_code(&self) -> Option<&dyn miette::SourceCode> {
        Some(&self.source_code)
    }
    fn labels(&self) -> Option<Box<dyn Iterator<Item = LabeledSpan> + '_>> {
        match self.problems.as_slice() {
            [one] => one.labels(),
            _ => None,
        }
    }
    fn related<'a>(&'a self) -> Option<Box<dyn Iterator<Item = &'a dyn Diagnostic> + 'a>> {
        match self.problems.as_slice() {
            [_] => None,
            many => Some(Box::new(many.iter().map(|p| p as &dyn Diagnostic))),
        }
    }
}

impl ClusterProfile {
    /// Parse profile text; `path` names it in diagnostics. Blank text (or only
    /// comments) is the local profile.
    pub fn parse(text: &str, path: &Path) -> Result<ClusterProfile, ProfileError> {
        let mut profile = Self::check(text).map_err(|problems| {
            let shown = Source {
                name: path.display().to_string(),
                text: text.to_string(),
            }
            .error(problems);
            ProfileError::Invalid(InvalidProfile {
                source_code: shown.source_code,
                problems: shown.problems,
            })
        })?;
        if let (ClusterProfile::Slurm(s), Some(dir)) = (&mut profile, path.parent()) {
            for d in &mut s.script_dirs {
                if d.is_relative() {
                    let joined = dir.join(&*d);
                    *d = std::path::absolute(&joined).unwrap_or(joined);
                }
            }
        }
        Ok(profile)
    }

    /// [`parse`](Self::parse), with the problems as found (spans into `text`).
    pub fn check(text: &str) -> Result<ClusterProfile, Vec<Problem>> {
        if text.trim().is_empty() {
            return Ok(ClusterProfile::Local);
        }
        let root = yaml::parse(text).map_err(|e| {
            vec![yaml::syntax_problem(
                &e,
                text,
                "srt::cluster::syntax",
                "srt::cluster::duplicate_key",
            )]
        })?;
        if root.value == Value::Null {
            return Ok(ClusterProfile::Local);
        }
        let tagged: Vec<Problem> = yaml::tags(text)
            .into_iter()
            .map(|t| {
                Problem::new(
                    "srt::cluster::yaml_tag",
                    t.span,
                    format!("YAML tag `{}` is not allowed in a cluster profile", t.tag),
                )
                .label("tagged value")
                .help("remove the tag: srt reads plain YAML 1.2 values")
            })
            .collect();
        if !tagged.is_empty() {
            return Err(tagged);
        }
        let mut checker = Checker::default();
        let root = if srtslurm::is_srtslurm(&root) {
            let (translated, refused) = srtslurm::translate(&root);
            checker.problems.extend(refused);
            translated
        } else {
            root
        };
        let profile = checker.profile(&root);
        match profile {
            Some(p) if checker.problems.is_empty() => Ok(p),
            _ => Err(checker.problems),
        }
    }

    /// Read and parse a profile file.
    pub fn load(path: &Path) -> Result<ClusterProfile, ProfileError> {
        let text = std::fs::read_to_string(path).map_err(|error| ProfileError::Read {
            path: path.to_path_buf(),
            error,
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
        match srtctl_file(cwd) {
            Some(path) => Self::load(&path),
            None => Ok(ClusterProfile::default()),
        }
    }

    /// A recipe's aliases resolved as srtctl resolves them against its cluster file:
    /// `model.path` by `model_paths`, the images it names by `containers`; and its
    /// scripts not beside it found in `script_dirs`.
    /// Each resolution is a located note of the recipe.
    pub fn resolve_aliases(&self, recipe: &mut crate::recipe::Recipe) {
        let Some(s) = self.slurm() else {
            return;
        };
        let mut notes = Vec::new();
        if let Some(path) = s.model_paths.get(&recipe.model.path.value) {
            notes.push(alias_note(
                &recipe.model.path.value,
                path,
                "model_paths",
                recipe.model.path.span,
            ));
            recipe.model.path.value = path.clone();
        }
        let at = recipe.model.path.span;
        for (image, key) in [
            (&mut recipe.model.container, "model.container"),
            (
                &mut recipe.frontend.container_image,
                "frontend.container_image",
            ),
            (&mut recipe.frontend.nginx.image, "frontend.nginx.image"),
        ] {
            let Some(named) = image.as_ref() else {
                continue;
            };
            if let Some(to) = s.containers.get(named) {
                notes.push(alias_note(named, to, &format!("containers ({key})"), at));
                *image = Some(to.clone());
            }
        }
        let rt = &mut recipe.runtime;
        for script in [&mut rt.setup_script, &mut rt.host_setup]
            .into_iter()
            .flatten()
        {
            notes.extend(s.find_script(script));
        }
        recipe.notes.extend(notes);
    }

    /// The executor's name, as written after `executor:`.
    pub fn executor(&self) -> &'static str {
        match self {
            ClusterProfile::Local => "local",
            ClusterProfile::Slurm(_) => "slurm",
        }
    }

    /// The SLURM settings, when the profile runs on SLURM.
    pub fn slurm(&self) -> Option<&SlurmProfile> {
        match self {
            ClusterProfile::Slurm(s) => Some(s),
            ClusterProfile::Local => None,
        }
    }

    /// The profile with a recipe's own scheduler settings (each `Some` replaces the
    /// profile's value); no change for executors without a scheduler.
    pub fn with_scheduler_settings(
        mut self,
        time_limit: Option<&str>,
        partition: Option<&str>,
        account: Option<&str>,
    ) -> ClusterProfile {
        if let ClusterProfile::Slurm(s) = &mut self {
            for (from, to) in [
                (time_limit, &mut s.time_limit),
                (partition, &mut s.partition),
                (account, &mut s.account),
            ] {
                if let Some(v) = from {
                    *to = Some(v.to_string());
                }
            }
        }
        self
    }
}

/// srtctl's cluster file where srtctl finds it: `$SRTSLURM_CONFIG`, else
/// `srtslurm.yaml` in `cwd`, its parent or its grandparent.
fn srtctl_file(cwd: &Path) -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("SRTSLURM_CONFIG") {
        return Some(PathBuf::from(path));
    }
    cwd.ancestors()
        .take(3)
        .map(|d| d.join(srtslurm::FILE))
        .find(|p| p.is_file())
}

impl SlurmProfile {
    /// `script` looked up in [`SlurmProfile::script_dirs`] when it is written as a
    /// relative path and is not beside the recipe: the first directory holding it
    /// wins, with a located note. Only found here: it is read (and its owner and
    /// permissions checked) when the launch plan is built.
    fn find_script(&self, script: &mut crate::recipe::runtime::ScriptRef) -> Option<Problem> {
        let written = Path::new(&script.written.value);
        if written.is_absolute() || script.path.exists() {
            return None;
        }
        let found = self
            .script_dirs
            .iter()
            .map(|d| d.join(written))
            .find(|p| p.is_file())?;
        let note = Problem::warning(
            "srt::recipe::script_dir",
            script.written.span,
            format!(
                "`{}` is not beside the recipe: it is {} (the cluster profile's script_dirs)",
                script.written.value,
                found.display()
            ),
        )
        .label("found in a script directory");
        script.path = found;
        Some(note)
    }
}

fn alias_note(alias: &str, to: &str, table: &str, span: SourceSpan) -> Problem {
    Problem::warning(
        "srt::recipe::alias",
        span,
        format!("`{alias}` is `{to}` (the cluster profile's {table})"),
    )
    .label("an alias")
}

/// A recipe's scheduler options (`sbatch_directives` for `sbatch`, else `srun_options`
/// for every step's `srun`; each entry an option as srt renders it, at its key), read
/// exactly as a profile's `sbatch_options` and `srun_options` are: the problems,
/// located in the recipe, with the recipe's codes (`srt::recipe::managed_option`...).
pub fn recipe_options(
    entries: &[crate::recipe::Sp<String>],
    key: &str,
    sbatch: bool,
) -> Vec<Problem> {
    let mut checker = Checker::default();
    let words = |container: bool| -> Vec<(SourceSpan, String)> {
        entries
            .iter()
            .filter(|e| !sbatch && is_container_option(&e.value) == container)
            .map(|e| (e.span, e.value.clone()))
            .collect()
    };
    if sbatch {
        let all = entries.iter().map(|e| (e.span, e.value.clone())).collect();
        checker.read_options(all, key, OptionsFor::Sbatch);
    } else {
        checker.read_options(words(false), key, OptionsFor::Srun);
        checker.read_options(words(true), key, OptionsFor::Container);
    }
    for p in &mut checker.problems {
        p.code = match p.code {
            "srt::cluster::managed_option" => "srt::recipe::managed_option",
            "srt::cluster::unknown_option" => "srt::recipe::unknown_option",
            "srt::cluster::ambiguous_option" => "srt::recipe::ambiguous_option",
            "srt::cluster::option_value" => "srt::recipe::option_value",
            _ => "srt::recipe::option",
        };
    }
    checker.problems
}

/// Whether a recipe's `srun_options` entry is an option of the container plugin
/// (pyxis' `--container-remap-root`, ...), which srun's own catalog does not have: it
/// joins the profile's `container.flags`, so only containerized steps get it.
pub fn is_container_option(word: &str) -> bool {
    word.starts_with("--container-")
}

impl ClusterProfile {
    /// The profile with a recipe's scheduler options (`sbatch_directives`,
    /// `srun_options`, checked by [`recipe_options`]) after its own: `sbatch` and
    /// `srun` take the last value of an option, so the recipe's wins, as its `slurm:`
    /// settings do; the container plugin's options join `container.flags`. No change
    /// for executors without a scheduler.
    pub fn with_recipe_options(mut self, sbatch: &[String], srun: &[String]) -> ClusterProfile {
        if let ClusterProfile::Slurm(s) = &mut self {
            s.sbatch_options.extend(sbatch.iter().cloned());
            let (container, steps): (Vec<&String>, Vec<&String>) =
                srun.iter().partition(|w| is_container_option(w));
            s.srun_options.extend(steps.into_iter().cloned());
            s.container.flags.extend(container.into_iter().cloned());
        }
        self
    }
}

/// Walks the spanned tree, collecting every problem.
#[derive(Default)]
struct Checker {
    problems: Vec<Problem>,
}

impl Checker {
    fn push(&mut self, p: Problem) {
        self.problems.push(p);
    }

    fn type_error(&mut self, node: &Node, key: &str, expected: &str) {
        self.push(
            Problem::new(
                "srt::cluster::type",
                node.span,
                format!("`{key}` must be {expected}, found {}", node.value.kind()),
            )
            .label(format!("expected {expected}")),
        );
    }

    fn bad_value(&mut self, node: &Node, message: String, help: String) {
        self.push(
            Problem::new("srt::cluster::value", node.span, message)
                .label("invalid value")
                .help(help),
        );
    }

    /// One of `choices`, with "did you mean" for a near miss.
    fn choice(&mut self, node: &Node, key: &str, choices: &[&'static str]) -> Option<&'static str> {
        let Value::Str(s) = &node.value else {
            self.type_error(node, key, &format!("one of {}", choices.join(", ")));
            return None;
        };
        if let Some(c) = choices.iter().copied().find(|c| c == s) {
            return Some(c);
        }
        let help = match did_you_mean(s, choices.iter().copied()) {
            Some(near) => format!("did you mean `{near}`?"),
            None => format!("expected one of: {}", choices.join(", ")),
        };
        self.push(
            Problem::new(
                if key == "executor" {
                    "srt::cluster::executor"
                } else {
                    "srt::cluster::value"
                },
                node.span,
                format!("`{key}` must be one of {}, found `{s}`", choices.join(", ")),
            )
            .label("unknown value")
            .help(help),
        );
        None
    }

    fn unknown_key(&mut self, key: &Key, path: &str, allowed: &[&str]) {
        let help = match did_you_mean(&key.name, allowed.iter().copied()) {
            Some(near) => format!("did you mean `{near}`?"),
            None => format!("expected one of: {}", allowed.join(", ")),
        };
        self.push(
            Problem::new(
                "srt::cluster::unknown_key",
                key.span,
                format!("unknown key `{path}{}` in the cluster profile", key.name),
            )
            .label("unknown key")
            .help(help),
        );
    }

    fn profile(&mut self, root: &Node) -> Option<ClusterProfile> {
        let Value::Map(entries) = &root.value else {
            // A block collection's span is empty: point at its first character.
            let span = SourceSpan::new(root.span.offset().into(), root.span.len().max(1));
            self.push(
                Problem::new(
                    "srt::cluster::type",
                    span,
                    format!(
                        "a cluster profile is a mapping of keys, found {}",
                        root.value.kind()
                    ),
                )
                .label("expected a mapping")
                .help("start with `executor: slurm` (or `executor: local`); see docs/slurm.md"),
            );
            return None;
        };
        let executor = match entries.iter().find(|(k, _)| k.name == "executor") {
            None => "local",
            Some((_, n)) if n.value == Value::Null => "local",
            Some((_, n)) => self.choice(n, "executor", EXECUTORS)?,
        };
        let mut all: Vec<&str> = vec!["executor"];
        all.extend(SLURM_KEYS);
        if executor == "local" {
            for (k, _) in entries.iter().filter(|(k, _)| k.name != "executor") {
                if SLURM_KEYS.contains(&k.name.as_str()) {
                    self.push(
                        Problem::new(
                            "srt::cluster::slurm_only",
                            k.span,
                            format!(
                                "`{}` is a setting of the SLURM executor, but this profile runs locally",
                                k.name
                            ),
                        )
                        .label("SLURM setting")
                        .help(
                            "add `executor: slurm` to run on SLURM, or remove the key \
                             (a local profile has no other key)",
                        ),
                    );
                } else {
                    self.unknown_key(k, "", &all);
                }
            }
            return Some(ClusterProfile::Local);
        }
        let mut p = SlurmProfile::default();
        let mut renew_at = None;
        for (key, node) in entries {
            let k = key.name.as_str();
            if node.value == Value::Null && k != "executor" {
                continue; // absent: the default
            }
            match k {
                "executor" => {}
                "partition" => p.partition = self.word(node, k),
                "account" => p.account = self.word(node, k),
                "time_limit" => p.time_limit = self.word(node, k),
                "network_interface" => p.network_interface = self.word(node, k),
                "gpus_per_node" => {
                    p.gpus_per_node = self.integer(node, k, 1, u32::MAX.into()).map(|v| v as u32);
                }
                "gpu_request" => {
                    p.gpu_request = match self.choice(node, k, GpuRequest::NAMES) {
                        Some("gpus-per-node") => GpuRequest::GpusPerNode,
                        Some("none") => GpuRequest::None,
                        _ => GpuRequest::Gres,
                    }
                }
                "renew_before" => {
                    p.renew_before = self.duration(node, k);
                    renew_at = Some(node.span);
                }
                "allocations" => {
                    p.allocations = match self.choice(node, k, Allocations::NAMES) {
                        Some("single") => Allocations::Single,
                        _ => Allocations::Split,
                    }
                }
                "visible_devices_env" => {
                    if let Some(v) = self.variable(node, k) {
                        p.visible_devices_env = v;
                    }
                }
                "container" => p.container = self.container(node),
                "sbatch_options" => p.sbatch_options = self.options(node, k, OptionsFor::Sbatch),
                "srun_options" => p.srun_options = self.options(node, k, OptionsFor::Srun),
                "allocation_timeout_seconds" => {
                    p.allocation_timeout_seconds = self
                        .integer(node, k, 1, i64::MAX)
                        .unwrap_or(p.allocation_timeout_seconds);
                }
                "step_start_timeout_seconds" => {
                    p.step_start_timeout_seconds = self
                        .integer(node, k, 1, i64::MAX)
                        .unwrap_or(p.step_start_timeout_seconds);
                }
                "stop_grace_seconds" => {
                    p.stop_grace_seconds = self
                        .integer(node, k, 0, i64::MAX)
                        .unwrap_or(p.stop_grace_seconds);
                }
                "model_paths" => p.model_paths = self.aliases(node, k),
                "containers" => p.containers = self.aliases(node, k),
                "script_dirs" => p.script_dirs = self.dirs(node, k),
                _ => self.unknown_key(key, "", &all),
            }
        }
        let limit = p.time_limit.as_deref().and_then(slurm_duration);
        if let (Some(at), Some(renew), Some(limit)) = (renew_at, p.renew_before, limit) {
            if renew >= limit {
                self.push(
                    Problem::new(
                        "srt::cluster::range",
                        at,
                        format!(
                            "`renew_before` ({}) must be shorter than `time_limit` ({}): every allocation would be renewed as soon as it runs",
                            slurm_time(renew),
                            slurm_time(limit)
                        ),
                    )
                    .label("not shorter than the time limit"),
                );
            }
        }
        Some(ClusterProfile::Slurm(Box::new(p)))
    }

    /// A list of directories (non-empty strings).
    fn dirs(&mut self, node: &Node, key: &str) -> Vec<PathBuf> {
        let Value::Seq(items) = &node.value else {
            self.type_error(node, key, "a list of directories");
            return Vec::new();
        };
        items
            .iter()
            .filter_map(|item| self.path(item, key))
            .collect()
    }

    fn path(&mut self, node: &Node, key: &str) -> Option<PathBuf> {
        let s = self.string(node, key)?;
        if s.is_empty() || s.contains(['\n', '\0']) {
            self.bad_value(
                node,
                format!("`{key}` holds an empty or multi-line path"),
                "write a directory path".into(),
            );
            return None;
        }
        Some(PathBuf::from(s))
    }

    /// A mapping of alias to what it stands for, both strings.
    fn aliases(&mut self, node: &Node, key: &str) -> std::collections::BTreeMap<String, String> {
        let Value::Map(entries) = &node.value else {
            self.type_error(node, key, "a mapping of aliases");
            return Default::default();
        };
        entries
            .iter()
            .filter_map(|(k, v)| {
                Some((
                    k.name.clone(),
                    self.string(v, &format!("{key}.{}", k.name))?,
                ))
            })
            .collect()
    }

    fn string(&mut self, node: &Node, key: &str) -> Option<String> {
        match &node.value {
            Value::Str(s) => Some(s.clone()),
            _ => {
                self.type_error(node, key, "a string");
                None
            }
        }
    }

    /// A scheduler value passed as one argument: non-empty, one line, no spaces.
    fn word(&mut self, node: &Node, key: &str) -> Option<String> {
        let s = self.string(node, key)?;
        if s.is_empty() || s.contains(['\n', '\0']) || s.chars().any(char::is_whitespace) {
            self.bad_value(
                node,
                format!("`{key}` must be a non-empty single word, found {s:?}"),
                "SLURM names and durations have no spaces, e.g. `gpu` or `\"04:00:00\"`".into(),
            );
            return None;
        }
        Some(s)
    }

    /// A duration in SLURM's syntax (`"00:30:00"`, `"30"` minutes, `"1-00:00:00"`).
    fn duration(&mut self, node: &Node, key: &str) -> Option<std::time::Duration> {
        let s = match &node.value {
            Value::Int(_) => {
                self.type_error(node, key, "a SLURM duration as a string, e.g. \"00:30:00\"");
                return None;
            }
            _ => self.string(node, key)?,
        };
        let d = slurm_duration(&s).filter(|d| !d.is_zero());
        if d.is_none() {
            self.bad_value(
                node,
                format!("`{key}` must be a SLURM duration, found {s:?}"),
                "SLURM's syntax: \"MM\", \"MM:SS\", \"HH:MM:SS\", \"D-HH\", \"D-HH:MM\" or \"D-HH:MM:SS\", e.g. \"00:30:00\"".into(),
            );
        }
        d
    }

    fn variable(&mut self, node: &Node, key: &str) -> Option<String> {
        let s = self.string(node, key)?;
        if s.is_empty() || !s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
            self.bad_value(
                node,
                format!("`{key}` must be a variable name, not {s:?}"),
                "e.g. `CUDA_VISIBLE_DEVICES` or `ROCR_VISIBLE_DEVICES`".into(),
            );
            return None;
        }
        Some(s)
    }

    fn integer(&mut self, node: &Node, key: &str, min: i64, max: i64) -> Option<u64> {
        match &node.value {
            Value::Int(v) if (min..=max).contains(v) => Some(*v as u64),
            Value::Int(v) => {
                let bound = if max == i64::MAX {
                    format!("at least {min}")
                } else {
                    format!("between {min} and {max}")
                };
                self.push(
                    Problem::new(
                        "srt::cluster::range",
                        node.span,
                        format!("`{key}` must be {bound}, found {v}"),
                    )
                    .label("out of range"),
                );
                None
            }
            _ => {
                self.type_error(node, key, "an integer");
                None
            }
        }
    }

    fn container(&mut self, node: &Node) -> Container {
        let mut c = Container::default();
        let Value::Map(entries) = &node.value else {
            self.type_error(node, "container", "a mapping");
            return c;
        };
        for (key, value) in entries {
            if value.value == Value::Null {
                continue;
            }
            match key.name.as_str() {
                "runtime" => {
                    if let Some(r) =
                        self.choice(value, "container.runtime", ContainerRuntime::NAMES)
                    {
                        c.runtime = match r {
                            "pyxis" => ContainerRuntime::Pyxis,
                            _ => ContainerRuntime::None,
                        };
                    }
                }
                "flags" => {
                    c.flags = self.options(value, "container.flags", OptionsFor::Container);
                }
                _ => self.unknown_key(key, "container.", CONTAINER_KEYS),
            }
        }
        c
    }

    /// A list of options, read as the program reads them: every entry an option (or
    /// the value of the one before it), none that srt sets itself.
    fn options(&mut self, node: &Node, key: &str, to: OptionsFor) -> Vec<String> {
        let Value::Seq(items) = &node.value else {
            self.type_error(node, key, "a list of options");
            return Vec::new();
        };
        let entries: Vec<(SourceSpan, String)> = self
            .option_strings(items, key)
            .into_iter()
            .map(|(n, o)| (n.span, o))
            .collect();
        self.read_options(entries, key, to)
    }

    /// Options already split into entries (each at its span), read as
    /// [`options`](Self::options) reads a profile's list; the entries kept.
    fn read_options(
        &mut self,
        entries: Vec<(SourceSpan, String)>,
        key: &str,
        to: OptionsFor,
    ) -> Vec<String> {
        let words: Vec<&str> = entries.iter().map(|(_, o)| o.as_str()).collect();
        let mut refused = vec![false; entries.len()];
        for reading in getopt::read(to.catalog(), &words) {
            let at = reading.index;
            if refused[at] {
                continue;
            }
            if matches!(reading.item, Ok(Item::End | Item::Operand)) {
                // What follows would be the program's command, not options.
                refused[at..].fill(true);
            }
            refused[at] = self.refuses(entries[at].0, key, words[at], reading.item, to);
        }
        entries
            .into_iter()
            .zip(refused)
            .filter(|(_, refused)| !refused)
            .map(|((_, o), _)| o)
            .collect()
    }

    /// The string entries of a list of options; the others, and strings no option can
    /// be (empty, a newline or NUL), are reported.
    fn option_strings<'n>(&mut self, items: &'n [Node], key: &str) -> Vec<(&'n Node, String)> {
        let mut entries = Vec::new();
        for item in items {
            match &item.value {
                Value::Str(o) if o.is_empty() || o.contains(['\n', '\0']) => {
                    self.not_an_option(item.span, key, o);
                }
                Value::Str(o) => entries.push((item, o.clone())),
                _ => self.type_error(item, key, "a list of options (strings)"),
            }
        }
        entries
    }

    /// Reports what the reading of entry `word` shows wrong; true when it did.
    fn refuses(
        &mut self,
        span: SourceSpan,
        key: &str,
        word: &str,
        reading: Result<Item, ReadError>,
        to: OptionsFor,
    ) -> bool {
        match reading {
            Ok(Item::Option { name, written }) => self.managed(span, word, &name, &written, to),
            Ok(Item::Value { .. }) => false,
            Ok(Item::End | Item::Operand) => {
                self.options_end(span, key, word, to);
                true
            }
            Err(ReadError::Unknown { written, .. }) if to == OptionsFor::Container => {
                // An option of the container plugin: only its own name is known.
                self.managed(span, word, &written, &written, to)
            }
            Err(e) => {
                self.refused_option(span, key, e, to);
                true
            }
        }
    }

    fn not_an_option(&mut self, span: SourceSpan, key: &str, o: &str) {
        self.push(
            Problem::new(
                "srt::cluster::option",
                span,
                format!(
                    "`{key}` entries are options starting with `-`, like `--qos=high`; got {o:?}"
                ),
            )
            .label("not an option")
            .help("write each option as one string, e.g. `--exclusive` or `--cpus-per-task=16`"),
        );
    }

    /// An operand, or `--`: the program's options end there, and what follows would be
    /// its command (or script) before srt's own.
    fn options_end(&mut self, span: SourceSpan, key: &str, word: &str, to: OptionsFor) {
        if word != "--" {
            return self.not_an_option(span, key, word);
        }
        let program = &to.catalog().program;
        self.push(
            Problem::new(
                "srt::cluster::option",
                span,
                format!("`--` in `{key}` ends {program}'s options; srt ends them itself"),
            )
            .label("ends the options")
            .help("remove it: srt puts the command after its own `--`"),
        );
    }

    /// Refuses option `name` (written `written` in entry `word`) if srt sets it; true
    /// when it did.
    fn managed(
        &mut self,
        span: SourceSpan,
        word: &str,
        name: &str,
        written: &str,
        to: OptionsFor,
    ) -> bool {
        let Some(from) = managed_by(name) else {
            return false;
        };
        let program = &to.catalog().program;
        let message = if written == name {
            format!("`{word}` is set by srt from the recipe and the allocation; remove it")
        } else {
            format!("`{word}` is `{name}` to {program}, which is set by srt from the recipe and the allocation; remove it")
        };
        self.push(
            Problem::new("srt::cluster::managed_option", span, message)
                .label(format!("srt sets `{name}`"))
                .help(format!("srt sets `{name}` {from}")),
        );
        true
    }

    /// An entry the program would refuse.
    fn refused_option(&mut self, span: SourceSpan, key: &str, error: ReadError, to: OptionsFor) {
        let c = to.catalog();
        let what = format!("{} {}", c.program, c.package_version);
        let problem = match &error {
            ReadError::Unknown {
                written,
                suggestion,
                ..
            } => {
                let help = match (suggestion, written.split_once(char::is_whitespace)) {
                    (Some(s), Some((name, value))) => format!(
                        "one entry is one argument: write `{name}={}`, or `{name}` and `{}` as two entries (did you mean `{s}`?)",
                        value.trim(), value.trim()
                    ),
                    (Some(s), None) => format!("did you mean `{s}`?"),
                    (None, _) => format!("{what} has no such option (`{} --help` lists them)", c.program),
                };
                Problem::new(
                    "srt::cluster::unknown_option",
                    span,
                    format!("`{key}`: {error}, which would refuse it"),
                )
                .label(format!("not an option of {what}"))
                .help(help)
            }
            ReadError::Ambiguous { candidates, .. } => Problem::new(
                "srt::cluster::ambiguous_option",
                span,
                format!("`{key}`: {error}; {} would refuse it", c.program),
            )
            .label("ambiguous")
            .help(format!(
                "write the option in full: one of {}",
                candidates.join(", ")
            )),
            ReadError::MissingValue { name, .. } => Problem::new(
                "srt::cluster::option_value",
                span,
                format!(
                    "`{key}`: {error}, and nothing follows it: {} would take srt's next argument",
                    c.program
                ),
            )
            .label("no value")
            .help(format!(
                "write `{name}=VALUE`, or the value as the next entry"
            )),
            ReadError::UnexpectedValue { name, .. } => Problem::new(
                "srt::cluster::option_value",
                span,
                format!("`{key}`: {error}; {} would refuse it", c.program),
            )
            .label("a value for a switch")
            .help(format!("write `{name}` alone")),
        };
        self.push(problem);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slurm_durations_read_and_write_as_slurm_does() {
        let d = |s: &str| slurm_duration(s).map(|d| d.as_secs());
        assert_eq!(d("30"), Some(1800));
        assert_eq!(d("4:59"), Some(299));
        assert_eq!(d("01:02:03"), Some(3723));
        assert_eq!(d("2-03"), Some(2 * 86_400 + 3 * 3600));
        assert_eq!(d("1-00:10"), Some(86_400 + 600));
        assert_eq!(d("1-00:00:05"), Some(86_405));
        for bad in ["UNLIMITED", "NOT_SET", "", "1:2:3:4", "a:b", "half an hour"] {
            assert_eq!(d(bad), None, "{bad}");
        }
        let t = |secs| slurm_time(std::time::Duration::from_secs(secs));
        assert_eq!(
            (t(299), t(3723), t(86_405)),
            ("4:59".into(), "1:02:03".into(), "1-00:00:05".into())
        );
    }

    fn parse(text: &str) -> Result<ClusterProfile, String> {
        ClusterProfile::parse(text, Path::new("p.yaml")).map_err(|e| e.to_string())
    }

    fn slurm(text: &str) -> SlurmProfile {
        parse(text)
            .unwrap()
            .slurm()
            .cloned()
            .expect("a SLURM profile")
    }

    #[test]
    fn defaults_are_local() {
        assert_eq!(parse("").unwrap(), ClusterProfile::default());
        assert_eq!(parse("# nothing\n").unwrap(), ClusterProfile::Local);
        assert_eq!(parse("executor: local\n").unwrap(), ClusterProfile::Local);
        assert_eq!(parse("executor: local\n").unwrap().executor(), "local");
        assert_eq!(
            slurm("executor: slurm\n"),
            SlurmProfile::default(),
            "every SLURM key is optional"
        );
    }

    #[test]
    fn full_profile_parses() {
        let p = slurm(
            "executor: slurm\npartition: gpu\naccount: a\ntime_limit: \"1:00:00\"\ngpus_per_node: 8\n\
             gpu_request: gpus-per-node\nnetwork_interface: ib0\nvisible_devices_env: ROCR_VISIBLE_DEVICES\n\
             container:\n  runtime: pyxis\n  flags: [\"--container-mounts=/m:/m\"]\n\
             sbatch_options: [\"--exclusive\"]\nsrun_options: [\"--cpus-per-task=4\"]\n\
             allocation_timeout_seconds: 30\nstep_start_timeout_seconds: 5\nstop_grace_seconds: 2\n",
        );
        assert_eq!(p.partition.as_deref(), Some("gpu"));
        assert_eq!(p.gpus_per_node, Some(8));
        assert_eq!(p.gpu_request, GpuRequest::GpusPerNode);
        assert_eq!(p.visible_devices_env, "ROCR_VISIBLE_DEVICES");
        assert_eq!(p.container.runtime, ContainerRuntime::Pyxis);
        assert_eq!(p.container.flags, ["--container-mounts=/m:/m"]);
        assert_eq!(p.sbatch_options, ["--exclusive"]);
        assert_eq!(p.allocation_timeout_seconds, 30);
        assert_eq!(p.step_start_timeout_seconds, 5);
        assert_eq!(p.stop_grace_seconds, 2);
        // A null value is the default, as if the key were absent.
        assert_eq!(slurm("executor: slurm\npartition: ~\n").partition, None);
    }

    #[test]
    fn unknown_keys_and_bad_values_are_refused() {
        let e = parse("executor: slurm\npartiton: gpu\n").unwrap_err();
        assert!(e.contains("partiton"), "{e}");
        assert!(parse("executor: kubernetes\n").is_err());
        let s = "executor: slurm\n";
        assert!(parse(&format!("{s}container:\n  runtime: docker\n")).is_err());
        assert!(parse(&format!("{s}container:\n  image: x\n")).is_err());
        let e = parse(&format!("{s}sbatch_options: [\"exclusive\"]\n")).unwrap_err();
        assert!(e.contains("starting with `-`"), "{e}");
        let e = parse(&format!("{s}srun_options: [\"--nodelist=n1\"]\n")).unwrap_err();
        assert!(e.contains("set by srt"), "{e}");
        assert!(parse(&format!("{s}partition: \"a b\"\n")).is_err());
        assert!(parse(&format!("{s}gpus_per_node: 0\n")).is_err());
        assert!(parse(&format!("{s}visible_devices_env: \"A=B\"\n")).is_err());
        assert!(parse(&format!("{s}allocation_timeout_seconds: 0\n")).is_err());
        // A SLURM key in a local profile (explicit or by default) is refused, not ignored.
        let e = parse("executor: local\npartition: gpu\n").unwrap_err();
        assert!(e.contains("setting of the SLURM executor"), "{e}");
        assert!(parse("partition: gpu\n").is_err());
    }

    /// The problems of `executor: slurm` with `key: LIST`: each one's code and the
    /// text its span covers.
    fn option_problems(key: &str, list: &str) -> Vec<(&'static str, String)> {
        let text = format!("executor: slurm\n{key}: {list}\n");
        match ClusterProfile::check(&text) {
            Ok(_) => Vec::new(),
            Err(problems) => problems
                .iter()
                .map(|p| {
                    let span = &text[p.span.offset()..p.span.offset() + p.span.len()];
                    (p.code, span.to_string())
                })
                .collect(),
        }
    }

    #[test]
    fn managed_options_are_refused_however_they_are_spelled() {
        for (key, entry) in [
            ("srun_options", "--nodel=n7"),
            ("srun_options", "--jobi=99"),
            ("srun_options", "-N2"),
            ("srun_options", "-n4"),
            ("srun_options", "-wn8"),
            ("srun_options", "-lwn8"),
            ("srun_options", "--nodelist=n1"),
            ("srun_options", "--overl"),
            ("sbatch_options", "--job-nam="),
            ("sbatch_options", "--nodeli=n1"),
            ("sbatch_options", "--wr=true"),
            ("sbatch_options", "--export=ALL"),
            ("sbatch_options", "-pdebug"),
            ("sbatch_options", "--parsable"),
            ("container.flags", "--nodel=n7"),
            ("container.flags", "-wn8"),
            ("container.flags", "--container-image=x"),
        ] {
            let (key, list) = match key.split_once('.') {
                Some((outer, inner)) => (outer.to_string(), format!("{{{inner}: [\"{entry}\"]}}")),
                None => (key.to_string(), format!("[\"{entry}\"]")),
            };
            assert_eq!(
                option_problems(&key, &list),
                [("srt::cluster::managed_option", format!("\"{entry}\""))],
                "{key}: {entry}"
            );
        }
        let e = parse("executor: slurm\nsrun_options: [\"-wn8\"]\n").unwrap_err();
        assert!(e.contains("`-wn8` is `--nodelist` to srun"), "{e}");
    }

    #[test]
    fn options_srun_and_sbatch_accept_are_accepted() {
        let p = slurm(
            "executor: slurm\nsrun_options: [\"--cpus-per-task=4\", \"--exclusive\", \"--mem\", \"4G\", \"-c4\", \"--cpu_bind=cores\"]\n\
             sbatch_options: [\"--exclusive\", \"--qos=high\", \"-q\", \"high\", \"--comment\", \"--nodelist=n1\"]\n\
             container:\n  flags: [\"--container-mounts=/m:/m\", \"--no-container-mount-home\"]\n",
        );
        assert_eq!(p.srun_options.len(), 6);
        // A required argument's value is not an option, however it looks.
        assert_eq!(p.sbatch_options[5], "--nodelist=n1");
        assert_eq!(p.container.flags.len(), 2);
    }

    #[test]
    fn options_srun_would_refuse_are_located_errors() {
        let s = "srun_options";
        // The pinned srun reads `--ntask` as a prefix of six options, not `--ntasks`.
        assert_eq!(
            option_problems(s, "[\"--ntask=8\"]"),
            [("srt::cluster::ambiguous_option", "\"--ntask=8\"".into())]
        );
        assert_eq!(
            option_problems(s, "[\"--exclu=x\"]"),
            [("srt::cluster::ambiguous_option", "\"--exclu=x\"".into())]
        );
        assert_eq!(
            option_problems(s, "[\"--nodelsit=n1\"]"),
            [("srt::cluster::unknown_option", "\"--nodelsit=n1\"".into())]
        );
        assert_eq!(
            option_problems(s, "[\"--mem\"]"),
            [("srt::cluster::option_value", "\"--mem\"".into())]
        );
        assert_eq!(
            option_problems(s, "[\"--label=yes\"]"),
            [("srt::cluster::option_value", "\"--label=yes\"".into())]
        );
        assert_eq!(
            option_problems(s, "[\"--\", \"-N2\"]"),
            [("srt::cluster::option", "\"--\"".into())]
        );
        assert_eq!(
            option_problems(s, "[\"hostname\", \"-N2\"]"),
            [("srt::cluster::option", "\"hostname\"".into())]
        );
        let e = parse("executor: slurm\nsrun_options: [\"--exclu=x\"]\n").unwrap_err();
        assert!(e.contains("--exclude, --exclusive"), "{e}");
        let problems =
            ClusterProfile::check("executor: slurm\nsrun_options: [\"--mem 4G\"]\n").unwrap_err();
        let help = problems[0].help.as_deref().unwrap();
        assert!(help.contains("`--mem=4G`"), "{help}");
    }

    #[test]
    fn every_problem_is_reported_with_its_span() {
        let text = "executor: slurm\ngpus_per_node: x\npartiton: gpu\nstop_grace_seconds: -1\n";
        let problems = ClusterProfile::check(text).unwrap_err();
        let shown: Vec<(&str, &str)> = problems
            .iter()
            .map(|p| {
                (
                    p.code,
                    &text[p.span.offset()..p.span.offset() + p.span.len()],
                )
            })
            .collect();
        assert_eq!(
            shown,
            [
                ("srt::cluster::type", "x"),
                ("srt::cluster::unknown_key", "partiton"),
                ("srt::cluster::range", "-1"),
            ]
        );
        assert_eq!(
            problems[1].help.as_deref(),
            Some("did you mean `partition`?")
        );
    }

    #[test]
    fn recipe_scheduler_settings_win() {
        let p = parse("executor: slurm\npartition: gpu\ntime_limit: \"1:00:00\"\n")
            .unwrap()
            .with_scheduler_settings(Some("2:00:00"), None, Some("acct"));
        let s = p.slurm().unwrap();
        assert_eq!(s.time_limit.as_deref(), Some("2:00:00"));
        assert_eq!(s.partition.as_deref(), Some("gpu"));
        assert_eq!(s.account.as_deref(), Some("acct"));
        assert_eq!(
            ClusterProfile::Local.with_scheduler_settings(Some("1:00:00"), None, None),
            ClusterProfile::Local
        );
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
            ClusterProfile::resolve(None, dir.path())
                .unwrap()
                .executor(),
            "slurm"
        );
        let other = dir.path().join("other.yaml");
        std::fs::write(&other, "executor: local\n").unwrap();
        assert_eq!(
            ClusterProfile::resolve(Some(&other), dir.path()).unwrap(),
            ClusterProfile::Local
        );
        let missing = ClusterProfile::resolve(Some(&dir.path().join("nope.yaml")), dir.path());
        assert!(missing.unwrap_err().to_string().contains("cannot read"));
    }
}
