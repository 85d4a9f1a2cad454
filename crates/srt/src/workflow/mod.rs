//! The workflows behind `srt plan`, `srt apply` and `srt destroy`: load the recipe, build
//! the launch plan for the executor, lower it to the graph, open the deployment's state,
//! refresh it, and diff. The CLI only parses arguments and prints.

pub mod health;
pub mod live;
pub mod migrate;
pub mod status;

use crate::assemble::{assemble, BuildOptions};
use crate::cluster::{ClusterProfile, ProfileError};
use crate::exec::Executor;
use crate::graph::{self, ResourceGraph};
use crate::launch::{self, LaunchPlan};
use crate::plan::{self, Observation, Plan, PlanOptions};
use crate::recipe::{self, Problem, Recipe, RecipeError, Source};
use crate::state::{State, StateError, StateLock, StateStore};
use crate::term::plural;
use futures::StreamExt;
use std::collections::{BTreeMap, BTreeSet};
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
    /// The executor refused or failed (e.g. state recorded on SLURM without a SLURM
    /// profile, a scheduler that does not answer).
    #[error(transparent)]
    #[diagnostic(transparent)]
    Exec(#[from] crate::exec::ExecError),
    /// Programs the plan would start are not on this machine: nothing was started.
    #[error(transparent)]
    #[diagnostic(transparent)]
    MissingPrograms(#[from] MissingPrograms),
    /// The benchmark the plan would run has no tokenizer here: nothing was started.
    #[error(transparent)]
    #[diagnostic(transparent)]
    MissingTokenizer(#[from] MissingTokenizer),
    /// The benchmark the plan would run wraps its prompts in a chat template its
    /// tokenizer lacks (or that does not render): nothing was started.
    #[error(transparent)]
    #[diagnostic(transparent)]
    ChatTemplate(#[from] UnusableChatTemplate),
    /// Ports a first apply would bind are in use here: nothing was started.
    #[error(transparent)]
    #[diagnostic(transparent)]
    PortsTaken(#[from] PortsTaken),
    /// Anything else.
    #[error("{0}")]
    #[diagnostic(code(srt::error))]
    Other(String),
}

/// Ports the processes of a first apply would bind that something already holds on
/// this host, each with what to do ([`crate::exec::ExecError::port_taken`]).
#[derive(Debug, thiserror::Error)]
#[error("{}; nothing was started", ports_headline(.0.len()))]
pub struct PortsTaken(pub Vec<crate::exec::ExecError>);

impl miette::Diagnostic for PortsTaken {
    fn code<'a>(&'a self) -> Option<Box<dyn std::fmt::Display + 'a>> {
        Some(Box::new("srt::exec::port_taken"))
    }
    fn related<'a>(&'a self) -> Option<Box<dyn Iterator<Item = &'a dyn miette::Diagnostic> + 'a>> {
        Some(Box::new(
            self.0.iter().map(|e| e as &dyn miette::Diagnostic),
        ))
    }
}

/// The programs a plan would start that are missing here, refused before anything
/// starts: one line each in the help, with how to get it.
#[derive(Debug, thiserror::Error)]
#[error(
    "{} this apply would start {} not on PATH; nothing was started",
    plural(.0.len(), "program", "programs"),
    if .0.len() == 1 { "is" } else { "are" }
)]
pub struct MissingPrograms(pub Vec<MissingProgram>);

impl miette::Diagnostic for MissingPrograms {
    fn code<'a>(&'a self) -> Option<Box<dyn std::fmt::Display + 'a>> {
        Some(Box::new("srt::missing_program"))
    }
    fn help<'a>(&'a self) -> Option<Box<dyn std::fmt::Display + 'a>> {
        Some(Box::new(
            self.0
                .iter()
                .map(MissingProgram::to_string)
                .collect::<Vec<_>>()
                .join("\n"),
        ))
    }
}

/// The benchmark a plan would run cannot find its tokenizer where srt runs (the
/// client runs here, whatever the executor): refused before anything starts, rather
/// than failing once every worker is up.
#[derive(Debug, thiserror::Error)]
#[error("the benchmark this apply would run has no tokenizer; nothing was started")]
pub struct MissingTokenizer(pub String);

impl miette::Diagnostic for MissingTokenizer {
    fn code<'a>(&'a self) -> Option<Box<dyn std::fmt::Display + 'a>> {
        Some(Box::new("srt::bench::tokenizer"))
    }
    fn help<'a>(&'a self) -> Option<Box<dyn std::fmt::Display + 'a>> {
        Some(Box::new(&self.0))
    }
}

/// Why the benchmark `plan` would run (created or checked again) has no tokenizer here.
pub fn missing_tokenizer(p: &Prepared, plan: &Plan) -> Option<MissingTokenizer> {
    let spec = benchmark_to_run(p, plan)?;
    crate::bench::find_tokenizer(&spec.tokenizer)
        .err()
        .map(MissingTokenizer)
}

/// The benchmark a plan would run wraps its prompts in the model's chat template
/// (`use_chat_template`), and its tokenizer has none, or one that does not render a
/// prompt: refused before anything starts, as a missing tokenizer is.
#[derive(Debug, thiserror::Error)]
#[error("the benchmark this apply would run cannot wrap its prompts in the model's chat template (`benchmark.use_chat_template: true`); nothing was started")]
pub struct UnusableChatTemplate(pub crate::bench::ChatTemplateError);

impl miette::Diagnostic for UnusableChatTemplate {
    fn code<'a>(&'a self) -> Option<Box<dyn std::fmt::Display + 'a>> {
        Some(Box::new("srt::bench::chat_template"))
    }
    fn help<'a>(&'a self) -> Option<Box<dyn std::fmt::Display + 'a>> {
        Some(Box::new(self.0.with_help()))
    }
}

/// Why the chat template of the benchmark `plan` would run cannot be used here (a
/// benchmark without its tokenizer is [`missing_tokenizer`]'s).
pub fn unusable_chat_template(p: &Prepared, plan: &Plan) -> Option<UnusableChatTemplate> {
    let spec = benchmark_to_run(p, plan).filter(|s| s.use_chat_template)?;
    let tokenizer = crate::bench::find_tokenizer(&spec.tokenizer).ok()?;
    crate::bench::check_chat_template(&tokenizer, spec.custom_tokenizer)
        .err()
        .map(UnusableChatTemplate)
}

/// The benchmark `plan` would run (created or checked again).
fn benchmark_to_run<'a>(p: &'a Prepared, plan: &Plan) -> Option<&'a crate::bench::Spec> {
    let runs = |address: &str| {
        plan.changes.iter().any(|c| {
            c.address == address && !matches!(c.action, plan::Action::NoOp | plan::Action::Destroy)
        })
    };
    p.runnable().gates.iter().find_map(|g| match &g.probe {
        launch::Probe::Benchmark(spec) if runs(&g.address) => Some(spec),
        _ => None,
    })
}

fn ports_headline(processes: usize) -> String {
    if processes == 1 {
        "a port this apply needs is in use".to_string()
    } else {
        format!("ports of {processes} processes this apply would start are in use")
    }
}

/// A program a plan would start that is not on this machine's `PATH` (or not an
/// executable file, when given as a path). Only checked where the processes run here
/// ([`Executor::runs_programs_here`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MissingProgram {
    /// The program, as the command line names it.
    pub program: String,
    /// Processes that would run it, first few by address.
    pub addresses: Vec<String>,
    /// How many processes would run it.
    pub count: usize,
    /// How to get it, from the component that runs it.
    pub hint: &'static str,
    /// The `PATH` the processes' recipe `env` sets, when it does: the program was
    /// looked for there (as the process would), not on srt's own `PATH`.
    pub env_path: Option<String>,
}

impl std::fmt::Display for MissingProgram {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let more = self.count.saturating_sub(self.addresses.len());
        write!(
            f,
            "`{}` (run by {}{}): ",
            self.program,
            self.addresses.join(", "),
            if more > 0 {
                format!(" and {more} more")
            } else {
                String::new()
            },
        )?;
        match &self.env_path {
            Some(path) => write!(
                f,
                "not on the PATH the recipe's `env` sets for it (`PATH: {path}`); correct that `PATH` (or remove it: processes then get srt's own), or name the program by its full path"
            ),
            None => f.write_str(self.hint),
        }
    }
}

/// The programs `plan` would start (processes it creates or replaces) that this machine
/// does not have, one entry per program, in the order first met. Empty when the
/// executor runs processes elsewhere (a SLURM node has its own `PATH` and containers).
pub fn missing_programs(p: &Prepared, plan: &Plan) -> Vec<MissingProgram> {
    if !p.exec.runs_programs_here() {
        return Vec::new();
    }
    let starting: std::collections::BTreeSet<&str> = plan
        .changes
        .iter()
        .filter(|c| matches!(c.action, plan::Action::Create | plan::Action::Replace))
        .map(|c| c.address.as_str())
        .collect();
    let search_path = std::env::var_os("PATH").unwrap_or_default();
    let mut missing: Vec<MissingProgram> = Vec::new();
    // Looked up once per program and search path (a process may set its own PATH).
    let mut found: BTreeMap<(String, std::ffi::OsString), bool> = BTreeMap::new();
    for process in &p.runnable().processes {
        if !starting.contains(process.address.as_str()) {
            continue;
        }
        // The profiler it runs under, if any, then its program.
        let profiler = process
            .wrap
            .prefix
            .first()
            .map(|w| (w.as_str(), PROFILER_HINT));
        let program = process
            .argv
            .program()
            .map(|w| (w, install_hint(&p.recipe, process.kind)));
        for (program, hint) in profiler.into_iter().chain(program) {
            let path = process
                .env
                .get("PATH")
                .map_or_else(|| search_path.clone(), std::ffi::OsString::from);
            let present = *found
                .entry((program.to_owned(), path.clone()))
                .or_insert_with(|| program_exists(program, &path));
            if present {
                continue;
            }
            if let Some(m) = missing.iter_mut().find(|m| m.program == program) {
                m.count += 1;
                if m.addresses.len() < 3 {
                    m.addresses.push(process.address.clone());
                }
                continue;
            }
            missing.push(MissingProgram {
                program: program.to_owned(),
                addresses: vec![process.address.clone()],
                count: 1,
                hint,
                env_path: process.env.get("PATH").cloned(),
            });
        }
    }
    missing
}

/// Before a first apply (nothing of the deployment recorded yet, so no port belongs to
/// a process the plan stops first) on an executor that runs processes here: the ports
/// of every process to start that are already bound, one per process. Apply checks each
/// process's ports again right before starting it; this check only keeps a port in use
/// from being found after other processes have started.
pub fn taken_ports(p: &Prepared, plan: &Plan, state: &State) -> Vec<crate::exec::ExecError> {
    let first = state.resources.is_empty()
        && plan.orphans.is_empty()
        && plan.changes.iter().all(|c| {
            matches!(
                c.action,
                plan::Action::Create | plan::Action::Check | plan::Action::NoOp
            )
        });
    if !first || !p.exec.runs_programs_here() {
        return Vec::new();
    }
    let starting: std::collections::BTreeSet<&str> = plan
        .changes
        .iter()
        .filter(|c| c.action == plan::Action::Create)
        .map(|c| c.address.as_str())
        .collect();
    let checks = p
        .runnable()
        .processes
        .iter()
        .filter(|process| starting.contains(process.address.as_str()))
        .map(|process| p.exec.check_ports(process));
    block_on(futures::future::join_all(checks))
        .into_iter()
        .filter_map(Result::err)
        .filter(|e| matches!(e, crate::exec::ExecError::PortTaken { .. }))
        .collect()
}

/// How to get the program of a process of `kind`, from the component that renders it.
/// How to get the profiler a recipe's `profiling` runs workers under.
const PROFILER_HINT: &str =
    "install NVIDIA Nsight Systems (`nsys` on PATH), or profile with `profiling.type: torch`";

fn install_hint(recipe: &Recipe, kind: launch::ProcessKind) -> &'static str {
    match kind {
        launch::ProcessKind::Worker => crate::engine::lookup(&recipe.engine.kind.value)
            .map_or("install the engine's program", |e| e.install_hint()),
        launch::ProcessKind::Component(c) => c.install_hint.unwrap_or_else(|| {
            crate::frontend::lookup(&recipe.frontend.kind.value)
                .map_or("install the frontend's program", |f| f.install_hint())
        }),
    }
}

/// Whether `program` names an executable file: a path as given, a bare name on `path`.
fn program_exists(program: &str, path: &std::ffi::OsStr) -> bool {
    use std::os::unix::fs::PermissionsExt;
    let executable = |p: &Path| {
        std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    if program.contains('/') {
        return executable(Path::new(program));
    }
    std::env::split_paths(path).any(|dir| executable(&dir.join(program)))
}

impl OpError {
    /// The documented exit code.
    pub fn exit_code(&self) -> i32 {
        match self {
            OpError::Recipe(_) => crate::exit::INVALID_RECIPE,
            OpError::State(StateError::Locked { .. }) => crate::exit::LOCKED,
            OpError::State(e) if e.is_no_space() => crate::exit::NO_SPACE,
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
    /// Its launch plan, for this executor: what the graph is lowered from (and what
    /// golden files and hashes show, `vllm serve` even under `--simulate`).
    pub launch: LaunchPlan,
    /// Under `--simulate`, the launch plan whose processes the executor starts: the
    /// simulator standing in for every worker's engine ([`simulated`]).
    pub simulated: Option<LaunchPlan>,
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

impl Prepared {
    /// The launch plan apply hands to the executor: [`Prepared::simulated`] under
    /// `--simulate`, else the launch plan itself.
    pub fn runnable(&self) -> &LaunchPlan {
        self.simulated.as_ref().unwrap_or(&self.launch)
    }
}

/// The launch plan as run under `--simulate`: every worker process runs `simulator`
/// in place of its engine's program ([`Engine::simulate`]), or what its runtime
/// simulates it with ([`WorkerInfo::simulated`]), and no process runs in a
/// container (the simulator and the Router run on the node directly) or under a
/// profiler (`profiling`'s `nsys` prefix; its setup scripts still run).
///
/// Only the processes handed to the executor are transformed: the graph is lowered
/// from the plan itself, so hashes, state and golden files are the same as without
/// the simulator; the mode reaches every process's hash through the executor's
/// [`Executor::execution`] (`"simulate": true`), so switching it replaces them.
///
/// [`Engine::simulate`]: crate::engine::Engine::simulate
/// [`WorkerInfo::simulated`]: crate::launch::WorkerInfo::simulated
pub fn simulated(
    plan: &LaunchPlan,
    engine: &dyn crate::engine::Engine,
    stand_ins: &StandIns,
) -> LaunchPlan {
    let mut run = plan.clone();
    for p in &mut run.processes {
        let own = p.worker.as_ref().and_then(|w| w.simulated.clone());
        match own {
            // A runtime's own simulated engine (Dynamo's mocker).
            Some(argv) => p.argv = argv,
            None if p.kind == launch::ProcessKind::Worker => engine.simulate(p, &stand_ins.engine),
            None => {}
        }
        // Every rank of an MPI job runs the rank stand-in in place of its launcher:
        // rank 0 serves, the others wait for it.
        if let Some(r) = &mut p.ranks {
            r.launcher = vec![stand_ins.ranks.display().to_string()];
        }
        p.container_image = None;
        // A profiler of the engine's GPU work has nothing to capture in the simulator.
        p.wrap.prefix.clear();
    }
    run
}

/// The simulators `--simulate` runs, found next to `srt`: the engine's (empty when
/// every worker brings its runtime's own simulated engine) and the rank stand-in of an
/// MPI job (`srt-rank-sim`; empty when no process has ranks). An empty path is never
/// run.
#[derive(Debug, Default)]
pub struct StandIns {
    /// The engine's simulator ([`crate::engine::Engine::simulator`]).
    pub engine: PathBuf,
    /// `srt-rank-sim`.
    pub ranks: PathBuf,
}

/// The stand-in binary `name` next to `srt`, for `what` (a message's words).
fn next_to_srt(name: &str, what: &str) -> Result<PathBuf, OpError> {
    crate::exec::local::next_to_srt(name).ok_or_else(|| {
        OpError::Other(format!(
            "--simulate needs the `{name}` binary next to `srt` ({what})"
        ))
    })
}

/// The simulators the workers of `launch` need ([`StandIns`]).
fn stand_ins(launch: &LaunchPlan, engine: &dyn crate::engine::Engine) -> Result<StandIns, OpError> {
    let mut out = StandIns::default();
    let needs_engine = launch.processes.iter().any(|p| {
        p.kind == launch::ProcessKind::Worker
            && p.worker.as_ref().is_none_or(|w| w.simulated.is_none())
    });
    if needs_engine {
        let what = format!("the {} engine's simulator", engine.name());
        let name = engine.simulator().ok_or_else(|| {
            OpError::Other(format!(
                "--simulate has no stand-in for {} outside its runtime",
                engine.name()
            ))
        })?;
        out.engine = next_to_srt(name, &what)?;
    }
    if launch.processes.iter().any(|p| p.ranks.is_some()) {
        out.ranks = next_to_srt("srt-rank-sim", "the stand-in for an MPI job's ranks")?;
    }
    Ok(out)
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
    /// Which recipe of an srtctl override file (`--variant`).
    pub selection: recipe::Selection,
}

/// The cluster profile for a command (see [`ClusterProfile::resolve`]).
pub fn cluster_profile(explicit: Option<&Path>) -> Result<ClusterProfile, OpError> {
    let cwd = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("."));
    Ok(ClusterProfile::resolve(explicit, &cwd)?)
}

/// The profile with the recipe's own scheduler settings (`slurm:` in the recipe:
/// `time_limit`, `partition`, `account`) in place of the profile's.
pub fn effective_profile(profile: ClusterProfile, recipe: &Recipe) -> ClusterProfile {
    let s = &recipe.slurm;
    let words = |v: &[crate::recipe::Sp<String>]| -> Vec<String> {
        v.iter().map(|w| w.value.clone()).collect()
    };
    let rt = &recipe.runtime;
    profile
        .with_scheduler_settings(
            s.time_limit.as_deref(),
            s.partition.as_deref(),
            s.account.as_deref(),
        )
        .with_recipe_options(&words(&rt.sbatch_directives), &words(&rt.srun_options))
}

/// What the recipe asks of an executor that does not do it, as warnings at the keys:
/// scheduler options without a scheduler (the local executor), mounts where no process
/// runs in a container (the local executor, no container runtime, `--simulate`). The
/// same recipe runs locally and on a cluster, so these are not errors.
pub fn ignored_runtime_keys(recipe: &Recipe, exec: &dyn Executor) -> Vec<Problem> {
    let rt = &recipe.runtime;
    let mut out = Vec::new();
    if !exec.allocates() {
        for (entries, key) in [
            (&rt.sbatch_directives, "sbatch_directives"),
            (&rt.srun_options, "srun_options"),
        ] {
            if let Some(first) = entries.first() {
                out.push(
                    Problem::warning(
                        "srt::recipe::runtime_key_unused",
                        first.span,
                        format!("`{key}` is for a scheduler, and this executor has none: not applied"),
                    )
                    .label("not applied here")
                    .help("the local executor runs every process on this machine; the SLURM executor (a cluster profile with `executor: slurm`) passes these options"),
                );
            }
        }
    }
    if !exec.runs_containers() {
        if let Some(first) = rt.mounts.first() {
            out.push(
                Problem::warning(
                    "srt::recipe::runtime_key_unused",
                    first.span,
                    "this executor runs no container: the mounts are not applied, processes see this machine's paths",
                )
                .label("not applied here")
                .help("mounts are applied by the SLURM executor with `container.runtime: pyxis`, to processes with an image (not under --simulate)"),
            );
        }
    }
    out
}

/// The job id of the allocation `srt` runs in, if any (`SLURM_JOB_ID`).
pub fn enclosing_job() -> Option<u64> {
    std::env::var("SLURM_JOB_ID").ok()?.trim().parse().ok()
}

/// A recipe read, with its executor and state store: where both halves of a plan start.
/// [`Setup::lower`] builds the desired graph; reading and refreshing the state needs only
/// the executor and the store, so [`Setup::lower_while`] does both at once.
pub struct Setup {
    /// The recipe source (for diagnostics and saved plans).
    pub source: Source,
    /// The recipe.
    pub recipe: Recipe,
    /// The deployment's state store.
    pub store: StateStore,
    /// The executor.
    pub exec: Box<dyn Executor>,
    /// Whether workers run as their engine's simulator (`--simulate`).
    simulate: bool,
    /// Nodes available (`--nodes`).
    nodes: Option<usize>,
}

/// What [`Setup::lower`] adds to a [`Setup`].
struct Lowered {
    launch: LaunchPlan,
    simulated: Option<LaunchPlan>,
    graph: ResourceGraph,
    recipe_hash: String,
}

impl live::Desired for Lowered {
    fn graph(&self) -> &ResourceGraph {
        &self.graph
    }

    fn recipe_hash(&self) -> &str {
        &self.recipe_hash
    }
}

/// Read a recipe from text and make its executor.
pub fn setup(
    source: Source,
    default_name: &str,
    options: &PrepareOptions,
) -> Result<Setup, OpError> {
    let profile = cluster_profile(options.cluster.as_deref())?;
    let recipe = crate::assemble::load_fitting(
        &source,
        default_name,
        &options.selection,
        &BuildOptions {
            nodes: options.nodes,
            ..Default::default()
        },
        |r| profile.resolve_aliases(r),
    )?;
    // Node count first (the executor's bindings need it), then the plan for its host layout.
    let nodes = node_count(&source, &recipe, options.nodes)?;
    let exec = executor(&recipe, nodes, options)?;
    Ok(Setup::of(source, recipe, exec, options))
}

/// The cluster profile's aliases in `recipe` resolved (what `setup` does to a recipe it
/// reads; a sweep's points are read by their command and resolved so too).
pub fn resolve_aliases(recipe: &mut Recipe, options: &PrepareOptions) -> Result<(), OpError> {
    let profile = effective_profile(cluster_profile(options.cluster.as_deref())?, recipe);
    profile.resolve_aliases(recipe);
    Ok(())
}

/// The nodes `recipe`'s launch plan has, with `nodes` available (`--nodes`).
pub fn node_count(
    source: &Source,
    recipe: &Recipe,
    nodes: Option<usize>,
) -> Result<usize, OpError> {
    Ok(crate::assemble::node_count(
        recipe,
        &BuildOptions {
            nodes,
            ..Default::default()
        },
    )
    .map_err(|p| source.error(p))?)
}

/// The executor of `recipe`'s deployment, for `nodes` nodes.
pub fn executor(
    recipe: &Recipe,
    nodes: usize,
    options: &PrepareOptions,
) -> Result<Box<dyn Executor>, OpError> {
    let profile = effective_profile(cluster_profile(options.cluster.as_deref())?, recipe);
    let dir = deployment_dir(&options.state_dir, &recipe.name.value);
    Ok(crate::exec::for_profile(
        &profile,
        &crate::exec::Deployment {
            name: &recipe.name.value,
            dir: &dir,
            nodes,
            gpus_per_node: recipe.resources.gpus_per_node.value,
            gpu_type: recipe.resources.gpu_type.clone(),
            simulate: options.simulate,
            grace: options.grace,
            adopt: enclosing_job(),
        },
    )?)
}

impl Setup {
    /// A recipe read already, with the executor of its deployment: a sweep's points
    /// share one ([`executor`], made once for the largest point), each planned and
    /// applied in turn.
    pub fn of(
        source: Source,
        recipe: Recipe,
        exec: Box<dyn Executor>,
        options: &PrepareOptions,
    ) -> Setup {
        Setup {
            store: StateStore::new(deployment_dir(&options.state_dir, &recipe.name.value)),
            source,
            recipe,
            exec,
            simulate: options.simulate,
            nodes: options.nodes,
        }
    }
}

/// Read a recipe file and make its executor.
pub fn setup_file(path: &Path, options: &PrepareOptions) -> Result<Setup, OpError> {
    let (source, loaded) = recipe::load_file_selected(path, &options.selection);
    loaded?;
    setup(source, &recipe::load::default_name(path), options)
}

impl Setup {
    /// The launch plan, graph and hash of the recipe.
    pub fn lower(self) -> Result<Prepared, OpError> {
        let lowered = self.lowered()?;
        Ok(self.with(lowered))
    }

    /// [`lower`](Self::lower) while `meanwhile` runs on a thread of its own (a plan reads
    /// and refreshes the state there: at cluster scale that takes about as long as the
    /// graph, and neither needs the other). A recipe the graph refuses is the error,
    /// whatever `meanwhile` gave.
    ///
    /// The graph is built on this thread, where the plan is made next: the allocator
    /// reuses what lowering freed (built on another thread, a plan from scratch peaked
    /// 130 MiB higher at 24,576 nodes).
    pub fn lower_while<T: Send>(
        self,
        meanwhile: impl FnOnce(&Setup) -> T + Send,
    ) -> Result<(Prepared, T), OpError> {
        let (lowered, other) = std::thread::scope(|s| {
            let other = s.spawn(|| meanwhile(&self));
            let lowered = self.lowered();
            let other = other
                .join()
                .unwrap_or_else(|panic| std::panic::resume_unwind(panic));
            (lowered, other)
        });
        Ok((self.with(lowered?), other))
    }

    /// Lower while `read` (lock, load, restore) runs on another thread, then recover,
    /// refresh and plan with `options`, the diff overlapping refresh: see [`live`].
    /// Gives the prepared recipe and, unless reading failed, what `read` returned besides
    /// the state, the state (with the identities recovered from leases) and the plan
    /// (with the orphans found). A lowering error comes first, as with
    /// [`Setup::lower_while`].
    pub fn plan_live<R: Send>(
        self,
        read: impl FnOnce(&Setup) -> Result<(R, State), OpError> + Send,
        options: &PlanOptions,
    ) -> Result<(Prepared, live::Planned<R>), OpError> {
        let grace = Some(self.unhealthy_grace());
        let (lowered, live) = live::plan_live(
            || self.lowered(),
            || read(&self),
            &*self.exec,
            grace,
            options,
        )?;
        let read = live.map(|l| (l.read, l.state, l.plan));
        Ok((self.with(lowered), read))
    }

    /// How long a live worker may fail `/health` before refresh calls it drift.
    pub fn unhealthy_grace(&self) -> Duration {
        Duration::from_secs(self.recipe.health_check.unhealthy_grace_secs)
    }

    fn lowered(&self) -> Result<Lowered, OpError> {
        let (recipe, source, exec) = (&self.recipe, &self.source, &self.exec);
        let launch = assemble(
            recipe,
            &BuildOptions {
                nodes: self.nodes,
                hosts: exec.host_layout(),
            },
        )
        .map_err(|p| source.error(p))?;
        let mut launch = launch;
        launch
            .warnings
            .extend(ignored_runtime_keys(recipe, &**exec));
        let allocations = exec.allocations(launch.node_groups());
        let graph = graph::lower_with(&launch, &exec.execution(), &allocations)?;
        let recipe_hash = desired_hash(&graph);
        let simulated = match self.simulate {
            true => {
                let engine = crate::engine::lookup(&recipe.engine.kind.value).ok_or_else(|| {
                    OpError::Other(format!("unknown engine `{}`", recipe.engine.kind.value))
                })?;
                Some(simulated(&launch, engine, &stand_ins(&launch, engine)?))
            }
            false => None,
        };
        Ok(Lowered {
            launch,
            simulated,
            graph,
            recipe_hash,
        })
    }

    fn with(self, lowered: Lowered) -> Prepared {
        Prepared {
            simulate: self.simulate,
            nodes: self.nodes,
            store: self.store,
            source: self.source,
            recipe: self.recipe,
            exec: self.exec,
            launch: lowered.launch,
            simulated: lowered.simulated,
            graph: lowered.graph,
            recipe_hash: lowered.recipe_hash,
        }
    }
}

/// Load, lower and hash a recipe from text ([`setup`], then [`Setup::lower`]).
pub fn prepare(
    source: Source,
    default_name: &str,
    options: &PrepareOptions,
) -> Result<Prepared, OpError> {
    setup(source, default_name, options)?.lower()
}

/// Read a recipe file and prepare it.
pub fn prepare_file(path: &Path, options: &PrepareOptions) -> Result<Prepared, OpError> {
    setup_file(path, options)?.lower()
}

/// blake3 over every desired resource's address and hash, in address order.
pub fn desired_hash(graph: &ResourceGraph) -> String {
    let mut pairs: Vec<(&str, &str)> = graph
        .resources
        .iter()
        .map(|r| (r.address.as_str(), r.hash.as_str()))
        .collect();
    pairs.sort_unstable();
    // Hashed at once: four small updates per resource cost more than the copy.
    let mut text = Vec::with_capacity(pairs.iter().map(|(a, x)| a.len() + x.len() + 2).sum());
    for (a, x) in pairs {
        text.extend_from_slice(a.as_bytes());
        text.push(b'=');
        text.extend_from_slice(x.as_bytes());
        text.push(b'\n');
    }
    blake3::hash(&text).to_hex().to_string()
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
/// it cannot manage. Call before [`observe`] or [`refresh`]. Synchronous: it drives the
/// executor on a runtime of its own, so call it outside one (as the commands do).
pub fn restore(exec: &dyn Executor, state: &State) -> Result<(), OpError> {
    Ok(block_on(exec.restore(state))?)
}

/// Run a future to completion on a current-thread runtime of its own: the synchronous
/// operations (plan's refresh, restore, status and list) drive the executor's async
/// methods with it. Must not be called from inside a runtime.
pub fn block_on<F: std::future::Future>(future: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime")
        .block_on(future)
}

/// The executor that can manage what `state` records (for `srt destroy`, `status`,
/// `list`): see [`crate::exec::for_state`].
pub fn executor_for_state(
    profile: ClusterProfile,
    deployment: &str,
    dir: &Path,
    state: &State,
) -> Box<dyn Executor> {
    crate::exec::for_state(&profile, deployment, dir, state)
}

/// Find what launches left running, through the executor's leases: a record whose
/// identity was never saved (an apply killed between the fork and the save) gets the
/// identity its lease names, so the plan can replace it and apply can stop it; the
/// processes that no record tracks are returned, for apply or destroy to stop.
///
/// Cheap when nothing was lost: a lease naming a recorded process is matched by its
/// pid and start time without looking at `/proc`.
pub fn recover(state: &mut State, exec: &dyn Executor) -> Vec<plan::Orphan> {
    let mut orphans = Vec::new();
    for (address, id) in exec.leases() {
        let tracked = state
            .resources
            .values()
            .filter_map(|r| r.runtime.as_ref())
            .any(|rt| rt.process_key() == Some((id.pid, id.start_time)));
        if tracked {
            continue;
        }
        let pids = crate::exec::process::survivors(&id);
        if pids.is_empty() {
            continue;
        }
        let Some(runtime) = exec.leased_runtime(&address, id) else {
            continue;
        };
        match state.resources.get_mut(&address) {
            // Launched, never recorded: the record takes the lease's identity.
            Some(r) if r.runtime.is_none() => r.runtime = Some(runtime),
            _ => orphans.push(plan::Orphan {
                address,
                pids,
                runtime,
            }),
        }
    }
    orphans
}

/// Remove the lease files of a deployment directory that name nothing alive (unsigned
/// ones left by failed spawns, signed ones whose processes are gone): what a finished
/// destroy leaves clean.
pub fn clean_leases(dir: &Path) {
    for (_, path) in crate::exec::local::lease_files(dir) {
        let alive = crate::exec::process::lease_identity(&path)
            .is_some_and(|id| !crate::exec::process::survivors(&id).is_empty());
        if !alive {
            let _ = std::fs::remove_file(&path);
        }
    }
    let _ = std::fs::remove_dir(dir.join(crate::exec::local::LEASES));
}

/// Probe every recorded process through the executor. With `unhealthy_grace`, each
/// live worker's health probe too, the one its record holds (see [`health::failing`]): a
/// worker that accepts connections but does not answer `/health` for that long, or
/// that its frontend answers without listing it for that long, is drift, so the plan
/// replaces it instead of apply waiting on it.
pub fn refresh(
    state: &State,
    exec: &dyn Executor,
    unhealthy_grace: Option<Duration>,
) -> BTreeMap<String, Observation> {
    block_on(refresh_async(state, exec, unhealthy_grace))
}

/// [`refresh`], for callers already on a runtime.
pub async fn refresh_async(
    state: &State,
    exec: &dyn Executor,
    unhealthy_grace: Option<Duration>,
) -> BTreeMap<String, Observation> {
    let (addresses, runtimes): (Vec<&String>, Vec<&crate::state::Runtime>) = state
        .resources
        .iter()
        .filter_map(|(a, r)| Some((a, r.runtime.as_ref()?)))
        .unzip();
    let seen = exec.observe_all(&runtimes).await;
    let mut observed: BTreeMap<String, Observation> =
        addresses.into_iter().cloned().zip(seen).collect();
    let bindings = exec.bindings();
    // What each live Router routes to, against its membership record. Every Router's
    // record lists every worker: each distinct list is resolved once.
    let http = reqwest::Client::builder()
        .timeout(Duration::from_secs(5))
        .no_proxy()
        .build()
        .expect("http client");
    let mut lists: BTreeMap<&str, std::sync::Arc<[String]>> = BTreeMap::new();
    let mut routers = Vec::new();
    for (a, r) in &state.resources {
        if r.kind != crate::graph::Kind::Membership || r.status != crate::state::Status::Running {
            continue;
        }
        let [router, frontend, admin_url] = r.spec.get_strs(["router", "frontend", "admin_url"]);
        let router_alive = router
            .and_then(|router| observed.get(&router))
            .is_some_and(Observation::is_alive);
        if !router_alive {
            continue;
        }
        let text = r
            .spec
            .fields()
            .into_iter()
            .find(|(k, _)| k == "members")
            .map_or("", |(_, t)| t);
        let recorded = lists
            .entry(text)
            .or_insert_with(|| {
                let urls = plan::members_of(&r.spec).into_iter();
                let urls: BTreeSet<String> = urls.map(|(u, _)| bindings.resolve(&u)).collect();
                urls.into_iter().collect()
            })
            .clone();
        let (http, bindings) = (&http, &bindings);
        routers.push(async move {
            let drift = match (frontend, admin_url) {
                (Some(f), Some(u)) => membership_drift(&f, &u, bindings, http, &recorded).await,
                _ => None,
            };
            (a, drift)
        });
    }
    // The live workers' health probes, at the same time.
    let probes: Vec<(&String, std::borrow::Cow<'_, launch::Probe>)> = match unhealthy_grace {
        None => Vec::new(),
        Some(_) => observed
            .iter()
            .filter(|(_, o)| o.is_alive())
            .filter_map(|(a, _)| {
                let (address, r) = state.resources.get_key_value(a)?;
                if r.kind != crate::graph::Kind::Worker {
                    return None;
                }
                Some((address, status::health_probe(r, &bindings)?))
            })
            .collect(),
    };
    let grace = unhealthy_grace.unwrap_or_default();
    let resolve = |s: &str| bindings.resolve(s);
    let answers = crate::probe::Answers::default();
    let (http, resolve, answers) = (&http, &resolve, &answers);
    let checks = probes.iter().map(|(a, probe)| async move {
        let found = health::failing(probe, resolve, (http, answers), grace).await;
        ((*a).clone(), found)
    });
    // Bounded: one connection per worker at once would take one file descriptor and one
    // local port each (32,768 workers ran out of both, and the probes that could not
    // connect were judged unhealthy).
    let (drifted, found): (Vec<_>, Vec<(String, Option<String>)>) = futures::join!(
        futures::future::join_all(routers),
        futures::stream::iter(checks)
            .buffer_unordered(PROBES_IN_FLIGHT)
            .collect()
    );
    for (address, detail) in drifted {
        if let Some(detail) = detail {
            observed.insert(address.clone(), Observation::Gone(detail));
        }
    }
    for (address, detail) in found {
        if let Some(detail) = detail {
            observed.insert(address, Observation::Gone(detail));
        }
    }
    observed
}

/// How a Router's worker list differs from its membership record, if it does: a Router
/// that restarted behind srt's back, or an edit through its admin API by someone else.
/// `frontend` and `admin_url` are the record's; `recorded` its member URLs, resolved,
/// sorted and each once.
async fn membership_drift(
    frontend: &str,
    admin_url: &str,
    bindings: &crate::launch::Bindings,
    http: &reqwest::Client,
    recorded: &[String],
) -> Option<String> {
    let admin = crate::frontend::lookup(frontend)?.admin()?;
    let router = bindings.resolve(admin_url);
    let mut live = match admin.list(http, &router).await {
        Ok(urls) => urls,
        Err(e) => return Some(format!("cannot list its Router's workers: {e}")),
    };
    live.sort_unstable();
    live.dedup();
    let (missing, extra) = plan::sorted_differences(recorded, &live);
    if missing.is_empty() && extra.is_empty() {
        return None;
    }
    let list = |v: &[&String]| v.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ");
    let mut parts = Vec::new();
    if !missing.is_empty() {
        parts.push(format!("its Router lost {}", list(&missing)));
    }
    if !extra.is_empty() {
        parts.push(format!("its Router also routes to {}", list(&extra)));
    }
    Some(parts.join("; "))
}

/// Health probes refresh keeps in flight at once.
const PROBES_IN_FLIGHT: usize = 256;

/// An empty launch plan and graph for `deployment` (what `destroy` converges to).
pub fn empty(deployment: &str) -> (LaunchPlan, ResourceGraph) {
    let launch = LaunchPlan::empty(deployment);
    let graph = graph::lower(&launch, &serde_json::Value::Null).expect("empty graph");
    (launch, graph)
}
