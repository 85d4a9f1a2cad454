//! Operations behind `srt plan`, `srt apply` and `srt destroy`: load the recipe, build
//! the launch plan for the executor, lower it to the graph, open the deployment's state,
//! refresh it, and diff. The CLI only parses arguments and prints.

use crate::exec::local::{default_simulator, LocalExecutor};
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
    pub exec: LocalExecutor,
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
    let exec = LocalExecutor::new(&recipe.name.value, &dir, probe.nodes.len(), simulator)
        .with_grace(options.grace);
    let launch = launch::build(
        &recipe,
        &BuildOptions {
            nodes: options.nodes,
            hosts: exec.host_layout(),
        },
    )
    .map_err(|p| source.error(p))?;
    let graph = graph::lower(&launch, &exec.execution())?;
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
    let observed = refresh(state, &p.exec);
    plan::diff(&p.graph, state, &observed, &p.recipe_hash, options)
}

/// An empty launch plan and graph for `deployment` (what `destroy` converges to).
pub fn empty(deployment: &str) -> (LaunchPlan, ResourceGraph) {
    let launch = LaunchPlan {
        format_version: launch::FORMAT_VERSION,
        deployment: deployment.to_string(),
        frontend: String::new(),
        served_model_name: String::new(),
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
