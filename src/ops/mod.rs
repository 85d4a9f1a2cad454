//! Operations behind `srt plan`, `srt apply` and `srt destroy`: load the recipe, build
//! the launch plan for the executor, lower it to the graph, open the deployment's state,
//! refresh it, and diff. The CLI only parses arguments and prints.

pub mod status;

use crate::cluster::{ClusterProfile, ExecutorKind, ProfileError};
use crate::exec::local::{default_simulator, LocalExecutor};
use crate::exec::slurm::SlurmExecutor;
use crate::exec::Executor;
use crate::graph::{self, ResourceGraph};
use crate::launch::{self, BuildOptions, LaunchPlan};
use crate::plan::{self, Observation, Plan, PlanOptions};
use crate::recipe::{self, Recipe, RecipeError, Source};
use crate::state::{State, StateError, StateLock, StateStore};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Failures of an operation, each with its exit code.
#[derive(Debug, thiserror::Error, miette::Diagnostic)]
pub enum OpError {
    /// The recipe is invalid.
    #[error(transparent)]
    #[diagnostic(transparent)]
    Recipe(#[from] RecipeError),
    /// State problems (corrupt, newer, locked).
    #[error(transparent)]
    #[diagnostic(transparent)]
    State(#[from] StateError),
    /// A malformed graph (a bug).
    #[error(transparent)]
    #[diagnostic(transparent)]
    Graph(#[from] graph::GraphError),
    /// Saved plan problems.
    #[error(transparent)]
    #[diagnostic(transparent)]
    PlanFile(#[from] plan::file::PlanFileError),
    /// The cluster profile cannot be read or is invalid.
    #[error(transparent)]
    #[diagnostic(transparent)]
    Cluster(#[from] ProfileError),
    /// Anything else.
    #[error("{0}")]
    #[diagnostic(code(srt::error))]
    Other(String),
}

impl OpError {
    /// The documented exit code.
    pub fn exit_code(&self) -> i32 {
        match self {
            OpError::Recipe(_) => crate::exit::INVALID_RECIPE,
            OpError::State(StateError::Locked { .. }) => crate::exit::LOCKED,
            OpError::State(_) => crate::exit::STATE,
            OpError::PlanFile(plan::file::PlanFileError::Stale { .. }) => crate::exit::STALE_PLAN,
            _ => crate::exit::ERROR,
        }
    }
}

/// Where deployments keep state: `<state dir>/<name>/`.
pub fn deployment_dir(state_dir: &Path, name: &str) -> PathBuf {
    state_dir.join(name)
}

/// Everything needed to plan and apply one recipe.
pub struct Prepared {
    /// The recipe source (for diagnostics and saved plans).
    pub source: Source,
    /// The recipe.
    pub recipe: Recipe,
    /// Its launch plan, for this executor.
    pub launch: LaunchPlan,
    /// Its resource graph.
    pub graph: ResourceGraph,
    /// The deployment's state store.
    pub store: StateStore,
    /// The executor.
    pub exec: Box<dyn Executor>,
    /// Hash of the desired graph (addresses and hashes).
    pub recipe_hash: String,
    /// Options used.
    pub nodes: Option<usize>,
    /// Whether workers are simulated.
    pub simulate: bool,
}

/// Options for [`prepare`].
#[derive(Clone, Debug)]
pub struct PrepareOptions {
    /// State directory (`.srt`).
    pub state_dir: PathBuf,
    /// Nodes available.
    pub nodes: Option<usize>,
    /// Run workers as the vLLM simulator.
    pub simulate: bool,
    /// Stop grace period.
    pub grace: Duration,
    /// The cluster profile given with `--cluster` / `SRT_CLUSTER`; when `None`,
    /// `srt-cluster.yaml` in the current directory if it exists, else local.
    pub cluster: Option<PathBuf>,
}

/// The cluster profile for a command (see [`ClusterProfile::resolve`]).
pub fn cluster_profile(explicit: Option<&Path>) -> Result<ClusterProfile, OpError> {
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    Ok(ClusterProfile::resolve(explicit, &cwd)?)
}

/// The profile with the recipe's own scheduler settings (`slurm:` in the recipe:
/// `time_limit`, `partition`, `account`) in place of the profile's.
pub fn effective_profile(mut profile: ClusterProfile, recipe: &Recipe) -> ClusterProfile {
    let s = &recipe.slurm;
    for (from, to) in [
        (&s.time_limit, &mut profile.time_limit),
        (&s.partition, &mut profile.partition),
        (&s.account, &mut profile.account),
    ] {
        if from.is_some() {
            to.clone_from(from);
        }
    }
    profile
}

/// The job id of the allocation `srt` runs in, if any (`SLURM_JOB_ID`).
pub fn enclosing_job() -> Option<u64> {
    std::env::var("SLURM_JOB_ID").ok()?.trim().parse().ok()
}

/// Load, lower and hash a recipe from text.
pub fn prepare(
    source: Source,
    default_name: &str,
    options: &PrepareOptions,
) -> Result<Prepared, OpError> {
    let recipe = recipe::load_str(&source, default_name)?;
    let simulator = if options.simulate {
        Some(default_simulator().ok_or_else(|| {
            OpError::Other("--simulate needs the `srt-vllm-sim` binary next to `srt`".into())
        })?)
    } else {
        None
    };
    let profile = effective_profile(cluster_profile(options.cluster.as_deref())?, &recipe);
    let dir = deployment_dir(&options.state_dir, &recipe.name.value);
    // Node count first (the executor's bindings need it), then the plan for its host layout.
    let probe = launch::build(
        &recipe,
        &BuildOptions {
            nodes: options.nodes,
            ..Default::default()
        },
    )
    .map_err(|p| source.error(p))?;
    let exec: Box<dyn Executor> = match profile.executor {
        ExecutorKind::Local => Box::new(
            LocalExecutor::new(&recipe.name.value, &dir, probe.nodes.len(), simulator)
                .with_grace(options.grace),
        ),
        ExecutorKind::Slurm => {
            let gpus = recipe.resources.gpus_per_node.value;
            if let Some(have) = profile.gpus_per_node.filter(|h| *h < gpus) {
                return Err(OpError::Other(format!(
                    "the recipe places {gpus} GPUs per node but the cluster profile says nodes have {have} (`gpus_per_node`)"
                )));
            }
            Box::new(
                SlurmExecutor::new(
                    profile,
                    &recipe.name.value,
                    &dir,
                    probe.nodes.len(),
                    gpus,
                    simulator,
                    enclosing_job(),
                )
                .with_gpu_type(recipe.resources.gpu_type.clone()),
            )
        }
    };
    let launch = launch::build(
        &recipe,
        &BuildOptions {
            nodes: options.nodes,
            hosts: exec.host_layout(),
        },
    )
    .map_err(|p| source.error(p))?;
    let graph = graph::lower_with(&launch, &exec.execution(), exec.allocation().as_ref())?;
    let recipe_hash = desired_hash(&graph);
    Ok(Prepared {
        store: StateStore::new(dir),
        source,
        recipe,
        launch,
        graph,
        exec,
        recipe_hash,
        nodes: options.nodes,
        simulate: options.simulate,
    })
}

/// Read a recipe file and prepare it.
pub fn prepare_file(path: &Path, options: &PrepareOptions) -> Result<Prepared, OpError> {
    let (source, loaded) = recipe::load_file(path);
    loaded?;
    let stem = path
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    prepare(source, &stem, options)
}

/// blake3 over every desired resource's address and hash, in address order.
pub fn desired_hash(graph: &ResourceGraph) -> String {
    let mut pairs: Vec<(&str, &str)> = graph
        .resources
        .iter()
        .map(|r| (r.address.as_str(), r.hash.as_str()))
        .collect();
    pairs.sort_unstable();
    let mut h = blake3::Hasher::new();
    for (a, x) in pairs {
        h.update(a.as_bytes());
        h.update(b"=");
        h.update(x.as_bytes());
        h.update(b"\n");
    }
    h.finalize().to_hex().to_string()
}

/// Load state, creating it (with its lineage) when absent so every plan has a lineage.
pub fn load_or_create(
    store: &StateStore,
    deployment: &str,
    lock: &StateLock,
) -> Result<State, OpError> {
    match store.load()? {
        Some(s) => Ok(s),
        None => {
            let mut s = State::new(deployment);
            store.save(lock, &mut s)?;
            Ok(s)
        }
    }
}

/// Let the executor learn what state records (the allocation's nodes) and refuse state
/// it cannot manage. Call before [`make_plan`] or [`refresh`].
pub fn restore(exec: &dyn Executor, state: &State) -> Result<(), OpError> {
    exec.restore(state).map_err(OpError::Other)
}

/// The executor that can stop what `state` records (for `srt destroy`): SLURM when the
/// profile says so or anything recorded runs on SLURM, else local.
pub fn executor_for_state(
    profile: ClusterProfile,
    deployment: &str,
    dir: &Path,
    state: &State,
) -> Box<dyn Executor> {
    let on_slurm = state
        .resources
        .values()
        .any(|r| matches!(r.runtime, Some(crate::state::Runtime::Slurm { .. })));
    if on_slurm || profile.executor == ExecutorKind::Slurm {
        Box::new(SlurmExecutor::new(
            profile, deployment, dir, 1, 0, None, None,
        ))
    } else {
        Box::new(LocalExecutor::new(deployment, dir, 1, None))
    }
}

/// Probe every recorded process.
pub fn refresh(state: &State, exec: &dyn Executor) -> BTreeMap<String, Observation> {
    state
        .resources
        .iter()
        .filter_map(|(a, r)| {
            let rt = r.runtime.as_ref()?;
            Some((a.clone(), exec.observe(rt)))
        })
        .collect()
}

/// Refresh and diff.
pub fn make_plan(p: &Prepared, state: &State, options: &PlanOptions) -> Plan {
    let observed = refresh(state, &*p.exec);
    plan::diff(&p.graph, state, &observed, &p.recipe_hash, options)
}

/// An empty launch plan and graph for `deployment` (what `destroy` converges to).
pub fn empty(deployment: &str) -> (LaunchPlan, ResourceGraph) {
    let launch = LaunchPlan {
        format_version: launch::FORMAT_VERSION,
        deployment: deployment.to_string(),
        frontend: String::new(),
        served_model_name: String::new(),
        precision: None,
        gpu_type: None,
        nodes: Vec::new(),
        processes: Vec::new(),
        gates: Vec::new(),
        public_url: String::new(),
        leases: Vec::new(),
        sensitive_env: Vec::new(),
    };
    let graph = graph::lower(&launch, &serde_json::Value::Null).expect("empty graph");
    (launch, graph)
}
