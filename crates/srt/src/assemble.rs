//! Recipe -> launch plan: the one place that knows the registries of engines and
//! frontends. It checks the recipe's cross-cutting rules (the role mix, limits),
//! allocates endpoints ([`crate::topology`]), then lets the engine build each endpoint's
//! workers and the frontend build what serves them, both through the narrow
//! [`BuildContext`]. Engines and frontends depend only on that context and the launch
//! model, never on each other or on this module.

use crate::bench;
use crate::catalog::Resolution;
use crate::engine::{self, Engine};
use crate::frontend::{self, Frontend, Layout, WrapperFlags};
use crate::launch::{
    node_ip, node_name, BuildContext, DiscoveryTarget, Gate, HostLayout, LaunchPlan, LaunchProcess,
    NodeSlot, Probe, RolloutPlan, FORMAT_VERSION,
};
use crate::launch::{ConnectorChoice, WorkerFeature, WorkerRuntime};
use crate::ports::{PortBlock, PortScope, DISCOVERY, PUBLIC};
use crate::recipe::diag::{did_you_mean, Problem};
use crate::recipe::keys;
use crate::recipe::{Arg, ArgValue, Args, Nodes, Recipe, RoleKind};
use crate::topology::{self, Topology};
use std::borrow::Cow;

mod command_bench;
mod eval_bench;
mod fit;
mod runtime;
mod slow_down;
mod trace_bench;

pub use fit::{load_fitting, misfit, Misfit};

/// Options for [`assemble`].
#[derive(Clone, Debug, Default)]
pub struct BuildOptions {
    /// Nodes available (`None`: exactly as many as the roles need).
    pub nodes: Option<usize>,
    /// Host layout.
    pub hosts: HostLayout,
}

/// A recipe that passed the checks, with its endpoints allocated: what building the
/// launch plan starts from.
struct Checked {
    engine: &'static dyn Engine,
    frontend: &'static dyn Frontend,
    connectors: Vec<ConnectorChoice>,
    features: Vec<(RoleKind, WorkerFeature)>,
    warnings: Vec<Problem>,
    topo: Topology,
}

/// Build the launch plan of `recipe`. All problems found are returned together.
pub fn assemble(recipe: &Recipe, options: &BuildOptions) -> Result<LaunchPlan, Vec<Problem>> {
    let recipe = args_as_read(recipe);
    let (recipe, own) = wrapper_split(&recipe);
    let recipe = runtime::with_environment(spelled_out(recipe));
    let checked = check(&recipe, options, &own)?;
    build(&recipe, options, checked, &own)
}

/// `recipe` with each role's `args` as its engine reads them ([`engine::ArgsForm`]):
/// an engine that reads a config file gets no flags (nor a flag's problems, nor an
/// `args.connector`); one that reads flags keeps them with their problems, which
/// [`check`] reports. Borrowed as it is for a flag-reading (or unknown) engine.
fn args_as_read(recipe: &Recipe) -> Cow<'_, Recipe> {
    let form = engine::lookup(&recipe.engine.kind.value).map(Engine::args_form);
    if form != Some(engine::ArgsForm::Config) {
        return Cow::Borrowed(recipe);
    }
    let mut config_only = recipe.clone();
    for role in &mut config_only.roles {
        role.args = Args::default();
        role.flag_problems.clear();
        role.connector = None;
    }
    Cow::Owned(config_only)
}

/// `recipe` with every flag written as an abbreviation (a unique prefix, which the
/// program's parser reads as that flag) spelled out in full, in the role args (by the
/// engine's catalog) and `frontend.args` (by the frontend's), each with a located
/// warning among the recipe's notes: what checks, reads and renders the args after this
/// sees each flag by its name. Borrowed as it is when there is none.
fn spelled_out(recipe: Cow<'_, Recipe>) -> Cow<'_, Recipe> {
    let engine = engine::lookup(&recipe.engine.kind.value).and_then(|e| e.args_catalog(&recipe));
    let frontend = frontend::lookup(&recipe.frontend.kind.value).map(Frontend::catalog);
    let roles: Vec<_> = recipe
        .roles
        .iter()
        .map(|r| {
            let path = format!("roles.{}.args", r.kind.name());
            engine.and_then(|c| crate::catalog::spell_out(c, &r.args, &path))
        })
        .collect();
    let front =
        frontend.and_then(|c| crate::catalog::spell_out(c, &recipe.frontend.args, "frontend.args"));
    if front.is_none() && roles.iter().all(Option::is_none) {
        return recipe;
    }
    let mut spelled = recipe.into_owned();
    for (role, new) in spelled.roles.iter_mut().zip(roles) {
        if let Some((args, warnings)) = new {
            role.args = args;
            spelled.notes.extend(warnings);
        }
    }
    if let Some((args, warnings)) = front {
        spelled.frontend.args = args;
        spelled.notes.extend(warnings);
    }
    Cow::Owned(spelled)
}

/// The role args a runtime's wrapper program reads itself (`python3 -m dynamo.vllm`'s
/// own flags), taken out of what the engine checks and renders.
#[derive(Default)]
struct WrapperArgs {
    flags: Option<WrapperFlags>,
    roles: Vec<(RoleKind, Args)>,
}

impl WrapperArgs {
    /// `role`'s wrapper flags, rendered by the wrapper's catalog, sorted by name.
    fn rendered(&self, role: RoleKind) -> Vec<String> {
        let (Some(flags), Some((_, args))) =
            (self.flags, self.roles.iter().find(|(k, _)| *k == role))
        else {
            return Vec::new();
        };
        let mut pairs: Vec<(String, ArgValue)> = args
            .0
            .iter()
            .map(|a| (a.key.clone(), a.value.clone()))
            .collect();
        pairs.sort_by(|a, b| a.0.cmp(&b.0));
        crate::catalog::render(Some(flags.catalog), &pairs)
    }

    /// Each wrapper arg, checked against the wrapper's catalog and what srt manages.
    fn check(&self, problems: &mut Vec<Problem>) {
        let Some(flags) = self.flags else { return };
        for (role, args) in &self.roles {
            crate::catalog::check_args(
                flags.catalog,
                args,
                &format!("roles.{}.args", role.name()),
                &|flag| (flags.managed_by)(flag),
                problems,
            );
        }
    }
}

/// `recipe` without the role args its frontend's runtime wrapper reads itself (a flag
/// its catalog knows by its exact name: its parser takes no abbreviation), and those
/// args. The recipe is borrowed as it is when there are none.
fn wrapper_split(recipe: &Recipe) -> (Cow<'_, Recipe>, WrapperArgs) {
    let flags = (|| {
        let engine = engine::lookup(&recipe.engine.kind.value)?;
        let frontend = frontend::lookup(&recipe.frontend.kind.value)?;
        let program = engine.runtime_wrapper(frontend.worker_runtime()?).ok()?;
        frontend.wrapper_flags(program)
    })();
    let Some(flags) = flags else {
        return (Cow::Borrowed(recipe), WrapperArgs::default());
    };
    let owns = |a: &Arg| matches!(flags.catalog.resolve(&a.key), Resolution::Exact(..));
    if !recipe.roles.iter().any(|r| r.args.0.iter().any(owns)) {
        let own = WrapperArgs {
            flags: Some(flags),
            roles: Vec::new(),
        };
        return (Cow::Borrowed(recipe), own);
    }
    let mut engine_only = recipe.clone();
    let mut roles = Vec::new();
    for role in &mut engine_only.roles {
        let (own, rest): (Vec<Arg>, Vec<Arg>) = role.args.0.drain(..).partition(owns);
        role.args = Args(rest);
        roles.push((role.kind, Args(own)));
    }
    (
        Cow::Owned(engine_only),
        WrapperArgs {
            flags: Some(flags),
            roles,
        },
    )
}

/// The number of nodes the launch plan of `recipe` has, with the problems [`assemble`]
/// finds before it builds any process (a launch plan's size is its processes: this
/// builds none).
pub fn node_count(recipe: &Recipe, options: &BuildOptions) -> Result<usize, Vec<Problem>> {
    let recipe = args_as_read(recipe);
    let (recipe, own) = wrapper_split(&recipe);
    let recipe = runtime::with_environment(spelled_out(recipe));
    Ok(check(&recipe, options, &own)?.topo.node_count)
}

/// The recipe's checks, then the endpoints allocated.
fn check(
    recipe: &Recipe,
    options: &BuildOptions,
    own: &WrapperArgs,
) -> Result<Checked, Vec<Problem>> {
    // What the loader did to the file (a variant chosen, v1 re-spelled) is said with
    // the recipe's other warnings.
    let mut problems = recipe.notes.clone();
    let engine = lookup_engine(recipe, &mut problems);
    let frontend = lookup_frontend(recipe, &mut problems);
    if recipe.roles.is_empty() {
        // The loader refuses this; a hand-built Recipe must not reach the allocator,
        // which has no node to put the frontend on.
        problems.push(
            Problem::new(
                "srt::recipe::no_roles",
                recipe.name.span,
                "the recipe declares no role",
            )
            .label("this deployment")
            .help("add `roles.agg`, or `roles.prefill` and `roles.decode`"),
        );
        return Err(problems);
    }
    check_roles(recipe, &mut problems);
    problems.extend(
        recipe
            .roles
            .iter()
            .flat_map(|r| r.flag_problems.iter().cloned()),
    );
    problems.extend(recipe.sweep.as_ref().map(crate::recipe::sweep::read_as));
    crate::launch::env::check(recipe, &mut problems);
    problems.extend(
        recipe
            .benchmark
            .as_ref()
            .and_then(crate::recipe::BenchmarkRun::serving)
            .and_then(benchmark_too_slow),
    );
    let (Some(engine), Some(frontend)) = (engine, frontend) else {
        return Err(problems);
    };
    match &recipe.benchmark {
        Some(crate::recipe::BenchmarkRun::Eval(e)) => {
            problems.extend(eval_bench::problems(recipe, e, engine));
        }
        Some(crate::recipe::BenchmarkRun::Trace(t)) => {
            problems.extend(trace_bench::problems(recipe, t));
        }
        _ => {}
    }
    check_engine_keys(recipe, engine, &mut problems);
    engine.validate(recipe, &mut problems);
    own.check(&mut problems);
    runtime::config_dump_check(
        recipe,
        own.flags.map(|f| f.catalog),
        &own.roles,
        &mut problems,
    );
    check_sections(recipe, frontend, &mut problems);
    check_services_node(recipe, frontend, &mut problems);
    crate::catalog::check_args(
        frontend.args_catalog(recipe),
        &recipe.frontend.args,
        "frontend.args",
        &|flag| frontend.managed_by(flag),
        &mut problems,
    );
    let connectors = connectors(recipe, engine, &mut problems);
    check_discovery(frontend, &connectors, &mut problems);
    check_pd_protocol(frontend, engine, &connectors, &mut problems);
    frontend.validate(recipe, &connectors, &mut problems);
    let features = worker_features(recipe, engine, frontend, &mut problems);
    if let Some(runtime) = frontend.worker_runtime() {
        if let Err(why) = engine.runtime_wrapper(runtime) {
            problems.push(
                Problem::new("srt::recipe::runtime", recipe.engine.kind.span, why)
                    .label("this engine")
                    .help(format!(
                        "frontend `{}` runs its workers under the `{runtime}` runtime; choose an engine that has a wrapper for it, or another frontend",
                        frontend.name()
                    )),
            );
        }
    }
    runtime::check(recipe, &mut problems);
    runtime::environment_problems(recipe, &mut problems);
    if problems.iter().any(|p| !p.is_warning()) {
        return Err(problems);
    }
    crate::recipe::limits::check(recipe, options.nodes)?;
    let topo = topology::allocate(recipe, options.nodes)?;
    Ok(Checked {
        engine,
        frontend,
        connectors,
        features,
        warnings: problems,
        topo,
    })
}

/// The launch plan of a checked recipe.
fn build(
    recipe: &Recipe,
    options: &BuildOptions,
    checked: Checked,
    own: &WrapperArgs,
) -> Result<LaunchPlan, Vec<Problem>> {
    let Checked {
        engine,
        frontend,
        connectors,
        features,
        mut warnings,
        topo,
    } = checked;
    let mut ctx = BuildContext::new(
        &recipe.model,
        &recipe.health_check,
        topo.node_count,
        topo.gpus_per_node,
        options.hosts,
    );
    let layout = frontend.layout(recipe, &topo);
    if layout.routers.is_empty() {
        return Err(vec![Problem::new(
            "srt::recipe::frontend",
            recipe.frontend.kind.span,
            format!(
                "frontend `{}` placed no Router process for this topology",
                recipe.frontend.kind.value
            ),
        )
        .label("this frontend")]);
    }
    if let (Some(span), None) = (recipe.frontend.nginx.span, layout.nginx_node) {
        warnings.push(
            Problem::warning(
                "srt::recipe::nginx_unused",
                span,
                "`frontend.nginx` is set but this layout runs no nginx",
            )
            .label("not used")
            .help("nginx runs only with `enable_multiple_frontends: true` and more than one worker node; remove `nginx`, or enable multiple frontends"),
        );
    }
    reserve_public(recipe, frontend, &layout, &mut ctx)?;
    if connectors.iter().any(|c| c.discovery) {
        reserve_discovery(recipe, frontend, &layout, &mut ctx)?;
    }
    let infra = frontend
        .infrastructure(&mut ctx, recipe, &layout)
        .map_err(|p| vec![p])?;
    ctx.set_services(infra.services.clone());
    let runtime = infra.runtime.as_deref();
    let workers = workers(recipe, engine, &topo, &features, (runtime, own), &mut ctx)?;
    warnings.extend(idle_gpus(recipe, engine, &topo));
    let parts = frontend
        .build(&mut ctx, recipe, &layout, &workers, &connectors)
        .map_err(|p| vec![p])?;
    warnings.extend(parts.warnings);
    let mut gates = infra.gates;
    gates.extend(parts.gates);
    let mut processes = infra.processes;
    processes.extend(workers);
    processes.extend(parts.processes);
    gates.extend(checks(
        recipe,
        engine,
        &parts.public_url,
        &gates,
        &processes,
        &mut warnings,
    ));
    runtime::apply(recipe, engine, &mut processes)?;
    let too_large = crate::launch::env::check_processes(recipe, &processes);
    if !too_large.is_empty() {
        return Err(too_large);
    }
    processes.iter_mut().for_each(LaunchProcess::compact);
    let (leases, files) = ctx.finish();
    Ok(LaunchPlan {
        format_version: FORMAT_VERSION,
        deployment: recipe.name.value.clone(),
        engine: engine.name().to_string(),
        frontend: frontend.name().to_string(),
        served_model_name: recipe.model.served_name.clone(),
        precision: recipe.model.precision.clone(),
        gpu_type: recipe.resources.gpu_type.clone(),
        identity: recipe.runtime.identity.clone(),
        nodes: (0..topo.node_count)
            .map(|i| NodeSlot {
                index: i,
                name: node_name(i),
                ip: node_ip(i),
                gpus: topo.gpus_per_node,
            })
            .collect(),
        processes,
        files,
        gates,
        memberships: parts.memberships,
        rollout: RolloutPlan {
            max_unavailable: recipe.rollout.max_unavailable,
            drain_seconds: recipe.rollout.drain_secs,
            min_ready_seconds: recipe.rollout.min_ready_secs,
        },
        public_url: parts.public_url,
        leases,
        sensitive_env: recipe.sensitive_env.clone(),
        warnings,
    })
}

/// A warning per role whose workers are given GPUs their parallel sizes leave idle
/// ([`Engine::gpus_used`]): srt runs them as srtctl does, and says so.
fn idle_gpus(recipe: &Recipe, engine: &dyn Engine, topo: &Topology) -> Vec<Problem> {
    recipe
        .roles
        .iter()
        .filter_map(|role| {
            let endpoint = topo.role(role.kind).next()?;
            let given = endpoint.total_gpus();
            let used = engine.gpus_used(recipe, role, endpoint)?;
            (used < given).then(|| {
                let name = role.kind.name();
                let idle = match given - used {
                    1 => "1 GPU".to_string(),
                    n => format!("{n} GPUs"),
                };
                Problem::warning(
                    "srt::recipe::idle_gpus",
                    role.gpus.as_ref().map_or(role.span, |g| g.span),
                    format!(
                        "each `{name}` worker is given {given} GPUs but its parallel sizes use {used}: `{}` runs on the first {used}, leaving {idle} idle, as under srtctl",
                        engine.name(),
                    ),
                )
                .label(format!("{idle} idle per worker"))
                .help(format!(
                    "set `gpus: {used}` on the role to leave them free, or raise the parallel sizes to use {given}"
                ))
            })
        })
        .collect()
}

fn lookup_engine(recipe: &Recipe, problems: &mut Vec<Problem>) -> Option<&'static dyn Engine> {
    let kind = &recipe.engine.kind;
    let found = engine::lookup(&kind.value);
    if found.is_none() {
        let names = engine::ENGINES.iter().map(|e| e.name());
        problems.push(unknown(
            "srt::recipe::engine",
            kind.span,
            format!("unknown engine `{}`", kind.value),
            "unknown engine",
            &kind.value,
            names,
        ));
    }
    found
}

/// A node of their own for the frontend's services needs a frontend that runs some.
fn check_services_node(recipe: &Recipe, frontend: &dyn Frontend, problems: &mut Vec<Problem>) {
    if frontend.runs_services() {
        return;
    }
    if let Some(mb) = &recipe.nats_max_payload_mb {
        problems.push(
            Problem::warning(
                "srt::recipe::nats_unread",
                mb.span,
                format!(
                    "`infra.nats_max_payload_mb` is not read: frontend `{}` runs no nats-server",
                    frontend.name()
                ),
            )
            .label("unread")
            .help("remove it"),
        );
    }
    let Some(span) = recipe.services_node else {
        return;
    };
    problems.push(
        Problem::new(
            "srt::recipe::services_node",
            span,
            format!(
                "frontend `{}` runs no etcd or NATS: a node of their own would hold nothing",
                frontend.name()
            ),
        )
        .label("a node for services this frontend does not run")
        .help("remove `infra.etcd_nats_dedicated_node` (srtctl reserved the node anyway; srt does not allocate a node for nothing)"),
    );
}

/// Every `engine:` key is one the recipe's engine declares; one another engine declares
/// says whose it is.
fn check_engine_keys(recipe: &Recipe, engine: &dyn Engine, problems: &mut Vec<Problem>) {
    let declared: Vec<&str> = engine.keys().iter().map(|k| k.name).collect();
    for arg in &recipe.engine.keys.entries {
        if let Some(key) = engine.keys().iter().find(|k| k.name == arg.key) {
            let path = format!("engine.{}", arg.key);
            problems.extend(keys::value_problem(&path, key, &arg.value, arg.value_span));
            continue;
        }
        let owner = engine::ENGINES
            .iter()
            .find(|e| e.keys().iter().any(|k| k.name == arg.key));
        let problem = match owner {
            Some(other) => Problem::new(
                "srt::recipe::engine_key",
                arg.key_span,
                format!(
                    "`engine.{}` is a key of the `{}` engine, and this recipe's engine is `{}`",
                    arg.key,
                    other.name(),
                    engine.name()
                ),
            )
            .label("another engine's key")
            .help(format!(
                "remove it (the `{}` engine reads: type, {})",
                engine.name(),
                declared.join(", ")
            )),
            None => {
                let p = Problem::new(
                    "srt::recipe::unknown_key",
                    arg.key_span,
                    format!("unknown key `engine.{}`", arg.key),
                )
                .label("unknown key");
                let names = std::iter::once("type").chain(declared.iter().copied());
                match did_you_mean(&arg.key, names.clone()) {
                    Some(s) => p.help(format!("did you mean `{s}`?")),
                    None => p.help(format!(
                        "expected one of: {}",
                        names.collect::<Vec<_>>().join(", ")
                    )),
                }
            }
        };
        problems.push(problem);
    }
}

/// Each owned section of the recipe belongs to its frontend, and holds only the keys
/// that frontend declares. Another frontend's section configures nothing here: a
/// warning (srtctl ignores it too, so its recipes carry some).
fn check_sections(recipe: &Recipe, frontend: &dyn Frontend, problems: &mut Vec<Problem>) {
    for (name, section) in &recipe.sections {
        match frontend.section().filter(|s| s.name == name) {
            Some(own) => problems.extend(crate::recipe::keys::unknown_section_keys(
                name, own.keys, section,
            )),
            None => {
                let owner = frontend::FRONTENDS
                    .iter()
                    .find(|f| f.section().is_some_and(|s| s.name == name))
                    .map_or("another frontend", |f| f.name());
                problems.push(
                    Problem::warning(
                        "srt::recipe::section_owner",
                        section.key_span,
                        format!(
                            "`{name}:` configures the `{owner}` frontend, and this recipe's frontend is `{}`: nothing reads it",
                            frontend.name()
                        ),
                    )
                    .label("not this frontend's: ignored")
                    .help(format!(
                        "remove `{name}:`, or set `frontend.type: {owner}` if that is the frontend meant"
                    )),
                );
            }
        }
    }
}

fn lookup_frontend(recipe: &Recipe, problems: &mut Vec<Problem>) -> Option<&'static dyn Frontend> {
    let kind = &recipe.frontend.kind;
    let found = frontend::lookup(&kind.value);
    if found.is_none() {
        let names = frontend::FRONTENDS.iter().map(|f| f.name());
        problems.push(unknown(
            "srt::recipe::frontend",
            kind.span,
            format!("unknown frontend type `{}`", kind.value),
            "unknown frontend",
            &kind.value,
            names,
        ));
    }
    found
}

/// An unknown table name, with a suggestion or the list of known ones.
fn unknown<'a>(
    code: &'static str,
    span: miette::SourceSpan,
    message: String,
    label: &str,
    written: &str,
    names: impl Iterator<Item = &'a str> + Clone,
) -> Problem {
    let p = Problem::new(code, span, message).label(label);
    match did_you_mean(written, names.clone()) {
        Some(s) => p.help(format!("did you mean `{s}`?")),
        None => p.help(format!(
            "known {}s: {}",
            label.trim_start_matches("unknown "),
            names.collect::<Vec<_>>().join(", ")
        )),
    }
}

/// Every role's connector, resolved once; roles sharing `engine.connector` report its
/// problem once.
fn connectors(
    recipe: &Recipe,
    engine: &dyn Engine,
    problems: &mut Vec<Problem>,
) -> Vec<ConnectorChoice> {
    let mut out = Vec::new();
    for role in &recipe.roles {
        match engine.connector(recipe, role) {
            Ok(c) => out.push(c),
            Err(p) => {
                if !problems
                    .iter()
                    .any(|q| q.code == p.code && q.span == p.span)
                {
                    problems.push(p);
                }
            }
        }
    }
    out
}

/// What the frontend needs each role's workers to serve ([`WorkerFeature`]), checked
/// with the engine: a feature the engine cannot serve is refused with the engine's
/// reason, and a recipe flag that turns off what the feature needs is refused too.
/// Returns the features to build the workers with.
fn worker_features(
    recipe: &Recipe,
    engine: &dyn Engine,
    frontend: &dyn Frontend,
    problems: &mut Vec<Problem>,
) -> Vec<(RoleKind, WorkerFeature)> {
    let mut out = Vec::new();
    for need in frontend.worker_features(recipe) {
        let Some(role) = recipe.roles.iter().find(|r| r.kind == need.role) else {
            continue;
        };
        match engine.feature_flags(recipe, need.feature) {
            Err(why) => {
                let new = match need.required {
                    true => Problem::new,
                    false => Problem::warning,
                };
                problems.push(
                    new(
                        "srt::recipe::worker_feature",
                        need.span,
                        format!(
                            "{} needs every {} worker to answer {}; {} cannot: {why}",
                            need.who,
                            role.kind.name(),
                            need.what,
                            engine.name()
                        ),
                    )
                    .label(need.label.clone())
                    .help(need.alternative.clone()),
                );
            }
            Ok(flags) => {
                for (flag, value) in flags {
                    let Some(arg) = role.args.get(&flag) else {
                        continue;
                    };
                    if arg.value != value {
                        problems.push(
                            Problem::new(
                                "srt::recipe::worker_feature",
                                arg.value_span,
                                format!(
                                    "`roles.{}.args.{flag}: {}` stops the workers answering {}, which {} needs",
                                    role.kind.name(),
                                    arg.value.render(),
                                    need.what,
                                    need.who
                                ),
                            )
                            .label("conflicts with the frontend's needs")
                            .help(format!(
                                "remove it: srt gives the {} workers `--{flag}` for the frontend; or {}",
                                role.kind.name(),
                                need.alternative
                            )),
                        );
                    }
                }
                if !out.contains(&(need.role, need.feature)) {
                    out.push((need.role, need.feature));
                }
            }
        }
    }
    out
}

/// A connector whose workers register themselves needs a frontend that listens.
/// Every prefill/decode role's connector hands requests over in a way the frontend
/// drives (the engine answers how, the frontend lists what it drives): one problem, at
/// the first role that does not.
fn check_pd_protocol(
    frontend: &dyn Frontend,
    engine: &dyn Engine,
    connectors: &[ConnectorChoice],
    problems: &mut Vec<Problem>,
) {
    let drives = frontend.pd_protocols();
    let Some(c) = connectors
        .iter()
        .find(|c| c.role != RoleKind::Agg && !drives.contains(&c.protocol))
    else {
        return;
    };
    let what = match drives {
        [] => "routes aggregated workers only".to_string(),
        _ => format!(
            "drives {} between prefill and decode workers",
            drives
                .iter()
                .map(|p| p.describe())
                .collect::<Vec<_>>()
                .join(" or ")
        ),
    };
    let fits: Vec<&str> = crate::frontend::FRONTENDS
        .iter()
        .filter(|f| f.pd_protocols().contains(&c.protocol))
        .map(|f| f.name())
        .collect();
    let mut problem = Problem::new(
        "srt::recipe::pd_protocol",
        c.span,
        format!(
            "frontend `{}` {what}, and the `{}` role's {} workers with connector `{}` speak {}",
            frontend.name(),
            c.role.name(),
            engine.name(),
            c.name,
            c.protocol.describe()
        ),
    )
    .label("the connector of the prefill/decode roles");
    if !fits.is_empty() {
        problem = problem.help(format!(
            "choose a connector the frontend drives, or a frontend that drives this one: {}",
            fits.iter()
                .map(|f| format!("`{f}`"))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    problems.push(problem);
}

fn check_discovery(
    frontend: &dyn Frontend,
    connectors: &[ConnectorChoice],
    problems: &mut Vec<Problem>,
) {
    if frontend.supports_discovery() {
        return;
    }
    for c in connectors.iter().filter(|c| c.discovery) {
        problems.push(
            Problem::new(
                "srt::recipe::discovery_frontend",
                c.span,
                format!(
                    "connector `{}` needs a frontend that discovers workers; `{}` does not",
                    c.name,
                    frontend.name()
                ),
            )
            .label("discovery connector"),
        );
    }
}

/// The public port, on the node clients reach.
fn reserve_public(
    recipe: &Recipe,
    frontend: &dyn Frontend,
    layout: &Layout,
    ctx: &mut BuildContext<'_>,
) -> Result<(), Vec<Problem>> {
    let fe = &recipe.frontend;
    let owner = layout
        .nginx_node
        .map(|_| frontend::nginx::ADDRESS.to_string())
        .unwrap_or_else(|| format!("{}[0]", frontend.entry().name));
    let block = PortBlock {
        base: fe.port.value,
        count: 1,
    };
    ctx.reserve(layout.public_node(), PUBLIC, block, &owner)
        .map_err(|e| {
            vec![
                Problem::new("srt::recipe::ports", fe.port.span, e.to_string())
                    .label("public port"),
            ]
        })
}

/// The frontend's listener for worker registrations, reserved on its node, and handed
/// to the engine through the context.
fn reserve_discovery(
    recipe: &Recipe,
    frontend: &dyn Frontend,
    layout: &Layout,
    ctx: &mut BuildContext<'_>,
) -> Result<(), Vec<Problem>> {
    let fe = &recipe.frontend;
    let (node, port) = frontend
        .discovery_listener(layout)
        .expect("a frontend that supports discovery has a listener");
    let block = PortBlock {
        base: port,
        count: 1,
    };
    if ctx.reserve(node, DISCOVERY, block, "router[0]").is_err() {
        // Only the public port is reserved before the discovery listener, and the
        // listening Router is the public one: the clash is always `frontend.port`.
        return Err(vec![Problem::new(
            "srt::recipe::ports",
            fe.port.span,
            format!(
                "`frontend.port` {} is the frontend's worker-discovery port",
                fe.port.value
            ),
        )
        .label("collides with the discovery listener")
        .help(format!(
            "the frontend listens for worker registrations on {port}; choose another public port"
        ))]);
    }
    ctx.set_discovery(DiscoveryTarget {
        ip: ctx.node_ip(node),
        port,
    });
    Ok(())
}

/// Every endpoint's worker processes, in allocation order. One problem per role is
/// enough: every endpoint of a role shares its args.
fn workers(
    recipe: &Recipe,
    engine: &dyn Engine,
    topo: &Topology,
    features: &[(RoleKind, WorkerFeature)],
    (runtime, own): (Option<&dyn WorkerRuntime>, &WrapperArgs),
    ctx: &mut BuildContext<'_>,
) -> Result<Vec<LaunchProcess>, Vec<Problem>> {
    let mut problems: Vec<Problem> = Vec::new();
    let mut workers = Vec::new();
    ctx.share_port_hosts(topo.endpoints.iter().flat_map(|e| {
        let scope = port_scope(e.role);
        e.nodes.iter().map(move |&n| (n, scope))
    }));
    for endpoint in &topo.endpoints {
        let role = recipe
            .roles
            .iter()
            .find(|r| r.kind == endpoint.role)
            .expect("endpoint of a declared role");
        ctx.set_port_scope(port_scope(role.kind));
        let wanted: Vec<WorkerFeature> = features
            .iter()
            .filter(|(r, _)| *r == role.kind)
            .map(|(_, f)| *f)
            .collect();
        let built = engine
            .worker_processes(
                ctx,
                recipe,
                role,
                endpoint,
                &wanted,
                runtime.map(WorkerRuntime::name),
            )
            .and_then(|mut p| {
                adopt(
                    ctx,
                    engine,
                    recipe,
                    (role, endpoint),
                    (runtime, own),
                    &mut p,
                )?;
                Ok(p)
            });
        match built {
            Ok(p) => workers.extend(p),
            Err(p) => {
                if !problems
                    .iter()
                    .any(|q| q.span == p.span && q.code == p.code)
                {
                    problems.push(p);
                }
            }
        }
    }
    ctx.set_port_scope(PortScope::default());
    if problems.is_empty() {
        Ok(workers)
    } else {
        Err(problems)
    }
}

/// The port scope of a role's workers: on a host both share, the decode role counts its
/// ports apart from the prefill role's, so that either can grow without moving the
/// other's (an aggregated role is alone).
fn port_scope(role: RoleKind) -> PortScope {
    match role {
        RoleKind::Agg | RoleKind::Prefill => PortScope(0),
        RoleKind::Decode => PortScope(1),
    }
}

/// Workers under a frontend's runtime: each adopted by it, and dependent on what the
/// frontend's infrastructure provides.
fn adopt(
    ctx: &mut BuildContext<'_>,
    engine: &dyn Engine,
    recipe: &Recipe,
    (role, endpoint): (&crate::recipe::Role, &topology::Endpoint),
    (runtime, own): (Option<&dyn WorkerRuntime>, &WrapperArgs),
    processes: &mut [LaunchProcess],
) -> Result<(), Problem> {
    let providers = ctx.services().providers.clone();
    let dump = recipe.runtime.config_dump.is_some()
        && runtime::takes_config_dump(own.flags.map(|f| f.catalog));
    let own = own.rendered(role.kind);
    for p in processes.iter_mut() {
        if let Some(runtime) = runtime {
            let serving = engine.serving(recipe, role, endpoint, p);
            let mut own = own.clone();
            if dump {
                own.extend(runtime::config_dump_flag(&p.address));
            }
            runtime.adopt(ctx, p, &serving, &own).map_err(|why| {
                Problem::new("srt::recipe::runtime", role.span, why).label("this role's workers")
            })?;
        }
        for provider in &providers {
            if !p.depends_on.contains(provider) {
                p.depends_on.push(provider.clone());
            }
        }
    }
    Ok(())
}

/// The smoke completion through the public URL, after every readiness gate (and nginx,
/// when there is one), and the recipe's benchmark after it.
fn checks(
    recipe: &Recipe,
    engine: &dyn Engine,
    public_url: &str,
    gates: &[Gate],
    processes: &[LaunchProcess],
    warnings: &mut Vec<Problem>,
) -> Vec<Gate> {
    let mut smoke_deps: Vec<String> = gates.iter().map(|g| g.address.clone()).collect();
    smoke_deps.extend(
        processes
            .iter()
            .filter(|p| p.address == frontend::nginx::ADDRESS)
            .map(|p| p.address.clone()),
    );
    let mut out = vec![Gate {
        address: "smoke".into(),
        description: "a one-token completion through the public URL succeeds".into(),
        probe: Probe::Completion {
            url: public_url.to_string(),
            model: recipe.model.served_name.clone(),
        },
        depends_on: smoke_deps,
    }];
    if let Some((what, c)) = command_benchmark(recipe) {
        out.push(command_bench::gate(
            recipe, &what, &c, public_url, processes,
        ));
    }
    let serving = recipe
        .benchmark
        .as_ref()
        .and_then(crate::recipe::BenchmarkRun::serving);
    if let Some(b) = serving {
        let mut spec = benchmark_spec(recipe, b, public_url);
        if let Some(slow) = &b.slow_down {
            let frontend = &recipe.frontend.kind.value;
            match slow_down::place(slow, engine, frontend, processes) {
                Ok(placed) => spec.slow_down = Some(Box::new(placed)),
                Err(unread) => warnings.push(unread),
            }
        }
        out.push(Gate {
            address: "benchmark".into(),
            description: format!(
                "{} serving benchmark: TTFT, TPOT, ITL, E2E latency and throughput per concurrency level; every request succeeds",
                b.kind
            ),
            probe: Probe::Benchmark(spec),
            depends_on: vec!["smoke".into()],
        });
    }
    out
}

/// The command a recipe's benchmark runs to completion, and what its gate calls it:
/// a `custom` benchmark's own, or the one srt writes for an evaluation or a trace
/// replay; `None` for a serving benchmark or none.
fn command_benchmark(
    recipe: &Recipe,
) -> Option<(String, Cow<'_, crate::recipe::CommandBenchmark>)> {
    use crate::recipe::BenchmarkRun;
    Some(match recipe.benchmark.as_ref()? {
        BenchmarkRun::Command(c) => ("custom benchmark".into(), Cow::Borrowed(c)),
        BenchmarkRun::Eval(e) => (
            format!(
                "{} evaluation ({})",
                e.eval,
                eval_bench::Harness::of(recipe, e).name()
            ),
            Cow::Owned(eval_bench::command(recipe, e)),
        ),
        BenchmarkRun::Trace(t) => (
            trace_bench::name(t),
            Cow::Owned(trace_bench::command(recipe, t)),
        ),
        BenchmarkRun::Serving(_) => return None,
    })
}

/// A benchmark whose measured requests cannot be sent within its bound at its rate
/// (`req_rate: 0.0001` for 4 requests would take 11 h), at `req_rate`.
fn benchmark_too_slow(b: &crate::recipe::Benchmark) -> Option<Problem> {
    let rate = b.req_rate?;
    let least = bench::least_seconds(
        &b.concurrencies,
        b.num_prompts_mult,
        bench::Rate::PerSecond(rate),
    );
    let bound = b.max_duration_secs;
    (least > bound as f64).then(|| {
        Problem::new(
            "srt::recipe::benchmark_duration",
            b.req_rate_span,
            format!(
                "at `benchmark.req_rate: {rate}` the measured requests take at least {least:.0}s ({:.1} h) to send, more than `benchmark.max_duration_seconds` ({bound}s, {:.1} h)",
                least / 3600.0,
                bound as f64 / 3600.0
            ),
        )
        .label("too slow to finish")
        .help(format!(
            "raise `req_rate`, send fewer requests (`concurrencies`, `num_prompts_mult`), or raise `max_duration_seconds` (at most {})",
            crate::recipe::limits::MAX_BENCHMARK_SECONDS
        ))
    })
}

/// The tokenizer the benchmark counts tokens with: `benchmark.tokenizer`, else the model.
fn benchmark_tokenizer(recipe: &Recipe, b: &crate::recipe::Benchmark) -> String {
    b.tokenizer
        .clone()
        .unwrap_or_else(|| recipe.model.path.value.clone())
}

/// The benchmark run the recipe asks for, through the public URL.
fn benchmark_spec(recipe: &Recipe, b: &crate::recipe::Benchmark, public_url: &str) -> bench::Spec {
    let dataset = match &b.dataset_path {
        Some(path) => bench::Dataset::Sharegpt {
            path: path.clone(),
            osl: b.osl_written.then_some(b.osl),
        },
        None => bench::Dataset::Random {
            isl: b.isl,
            osl: b.osl,
            range_ratio: b.random_range_ratio,
            prefix_len: b.random_prefix_len,
        },
    };
    bench::Spec {
        url: public_url.to_string(),
        model: recipe.model.served_name.clone(),
        tokenizer: benchmark_tokenizer(recipe, b),
        endpoint: if b.endpoint == "/v1/chat/completions" {
            bench::Endpoint::Chat
        } else {
            bench::Endpoint::Completions
        },
        dataset,
        use_chat_template: b.use_chat_template,
        custom_tokenizer: b.custom_tokenizer,
        concurrencies: b.concurrencies.clone(),
        num_prompts_mult: b.num_prompts_mult,
        num_warmup_mult: b.num_warmup_mult,
        request_rate: match b.req_rate {
            Some(r) => bench::Rate::PerSecond(r),
            None => bench::Rate::Inf,
        },
        max_duration_seconds: b.max_duration_secs,
        max_failed_fraction: b.max_failed_fraction,
        ignore_eos: b.ignore_eos,
        seed: b.seed,
        percentiles: b.percentiles.clone(),
        goodput: bench::Slo {
            ttft_ms: b.goodput[0],
            tpot_ms: b.goodput[1],
            e2el_ms: b.goodput[2],
        },
        slow_down: None,
    }
}

/// Role-mix rules: agg or prefill+decode, `colocate` only on decode with explicit GPUs.
fn check_roles(recipe: &Recipe, problems: &mut Vec<Problem>) {
    let has = |k: RoleKind| recipe.roles.iter().find(|r| r.kind == k);
    match (
        has(RoleKind::Prefill),
        has(RoleKind::Decode),
        has(RoleKind::Agg),
    ) {
        (_, _, Some(agg))
            if has(RoleKind::Prefill).is_some() || has(RoleKind::Decode).is_some() =>
        {
            problems.push(
                Problem::new("srt::recipe::role_mix", agg.span, "a recipe is either aggregated (`agg`) or disaggregated (`prefill` + `decode`), not both")
                    .label("agg next to prefill/decode")
                    .help("remove `agg`, or remove `prefill` and `decode`"),
            );
        }
        (Some(p), None, None) => problems.push(
            Problem::new(
                "srt::recipe::role_mix",
                p.span,
                "`prefill` needs a `decode` role",
            )
            .label("prefill without decode")
            .help("add `roles.decode`"),
        ),
        (None, Some(d), None) => problems.push(
            Problem::new(
                "srt::recipe::role_mix",
                d.span,
                "`decode` needs a `prefill` role",
            )
            .label("decode without prefill")
            .help("add `roles.prefill`"),
        ),
        _ => {}
    }
    for role in &recipe.roles {
        if role.nodes.value == Nodes::Colocate {
            if role.kind != RoleKind::Decode {
                problems.push(
                    Problem::new(
                        "srt::recipe::colocate",
                        role.nodes.span,
                        format!(
                            "`nodes: colocate` is only allowed on decode, not on {}",
                            role.kind.name()
                        ),
                    )
                    .label("colocate here")
                    .help("give this role a node count"),
                );
                continue;
            }
            for other in recipe.roles.iter().filter(|r| r.kind == RoleKind::Prefill) {
                if other.gpus.is_none() {
                    problems.push(
                        Problem::new(
                            "srt::recipe::colocate_gpus",
                            other.span,
                            "colocated decode needs an explicit `gpus` on prefill too",
                        )
                        .label("prefill without `gpus`")
                        .help("set `gpus` per worker on both prefill and decode"),
                    );
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recipe::keys;

    /// A spec saved without a bound gets the recipe key's default.
    #[test]
    fn the_benchmark_bound_defaults_agree() {
        assert_eq!(
            keys::default::<u64>(keys::BENCHMARK, "max_duration_seconds"),
            bench::DEFAULT_MAX_DURATION_SECONDS
        );
        let schema: serde_json::Value = serde_json::from_str(
            keys::BENCHMARK
                .iter()
                .find(|k| k.name == "max_duration_seconds")
                .unwrap()
                .schema,
        )
        .unwrap();
        assert_eq!(
            schema["maximum"],
            crate::recipe::limits::MAX_BENCHMARK_SECONDS
        );
    }
}
