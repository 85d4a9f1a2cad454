//! Engines turn an endpoint into the worker processes that serve it.
//!
//! [`Engine`] is the seam; each engine is one implementation registered in [`ENGINES`]
//! ([`vllm`] today). An engine owns everything about its program: the flags it derives
//! and renders (checked against its flag catalog), its KV connectors, the environment it
//! manages, and how the simulator stands in for it. It sees the assembly only through
//! [`BuildContext`]; frontends learn what they need from the workers it returns
//! ([`crate::launch::WorkerInfo`]) and from [`ConnectorChoice`].

mod kv_events;
mod mocker;
mod sglang;
mod trtllm;
mod vllm;

use crate::catalog::Catalog;
use crate::launch::{BuildContext, ConnectorChoice, LaunchProcess, Serving, WorkerFeature};
use crate::recipe::diag::{did_you_mean, Problem};
use crate::recipe::{ArgValue, Recipe, Role, Sp};
use crate::topology::Endpoint;

/// An inference engine.
pub trait Engine: Sync {
    /// Recipe name (`engine.type`).
    fn name(&self) -> &'static str;
    /// Flags (or config keys) the engine derives from the topology, each with who sets
    /// it (for the diagnostic refusing it in a recipe); recipes may not set them.
    fn managed(&self) -> &'static [(&'static str, &'static str)];
    /// Who sets a flag the engine derives, or `None` when a recipe may set it.
    fn managed_by(&self, flag: &str) -> Option<&'static str> {
        crate::catalog::managed_by(self.managed(), flag)
    }
    /// Environment variables the engine sets from the topology; recipes may not set them.
    fn managed_env(&self) -> &'static [&'static str];
    /// Environment variables that choose the devices a worker sees, which the engine's
    /// placement sets by its own means (a flag naming each worker's GPUs): a recipe
    /// setting one contradicts the placement, and is refused.
    fn placement_env(&self) -> &'static [&'static str];
    /// The flag catalog of `version` of the engine's program (`None`: the release srt
    /// ships), or the versions srt has catalogs for.
    fn catalog(&self, version: Option<&str>) -> Result<&'static Catalog, Vec<&'static str>>;
    /// Its `engine:` keys besides `type` (their schema fragments hold their defaults):
    /// the schema and the unknown-key check come from them; the engine checks their
    /// values in [`Engine::validate`].
    fn keys(&self) -> &'static [crate::recipe::keys::Key];
    /// The port kinds its processes bind beyond the shared ones of [`crate::ports`]
    /// (their ranges stay below the ephemeral ports: a test checks every engine's).
    fn port_kinds(&self) -> &'static [crate::ports::PortKind] {
        &[]
    }
    /// How the engine reads a role's `args`: as flags (the default), or as its own
    /// config file.
    fn args_form(&self) -> ArgsForm {
        ArgsForm::Flags
    }
    /// The catalog `recipe`'s role args are read with (the release its workers run),
    /// when the engine reads flags and srt has that release's.
    fn args_catalog(&self, recipe: &Recipe) -> Option<&'static Catalog> {
        let _ = recipe;
        None
    }
    /// The names of the KV connectors a recipe may choose (`engine.connector`).
    fn connector_names(&self) -> &'static [&'static str];
    /// The connector `role` runs (its own override, else the engine-wide one).
    fn connector(&self, recipe: &Recipe, role: &Role) -> Result<ConnectorChoice, Problem>;
    /// The engine's rules on the recipe, before anything is allocated: its args against
    /// its flag catalog, parallel sizes, managed environment, connector configs.
    fn validate(&self, recipe: &Recipe, problems: &mut Vec<Problem>);
    /// The flags that make a worker serve `feature` (none when it always does), or why
    /// this engine cannot serve it.
    fn feature_flags(
        &self,
        recipe: &Recipe,
        feature: WorkerFeature,
    ) -> Result<Vec<(String, ArgValue)>, String>;
    /// The processes of one endpoint of `role`, with their ports allocated from `ctx`,
    /// serving `features` (checked with [`Engine::feature_flags`] beforehand). Under a
    /// frontend's runtime (`runtime`, its name), each process runs the engine's wrapper
    /// for it instead of the engine's own server; the runtime adopts them afterwards.
    fn worker_processes(
        &self,
        ctx: &mut BuildContext<'_>,
        recipe: &Recipe,
        role: &Role,
        endpoint: &Endpoint,
        features: &[WorkerFeature],
        runtime: Option<&'static str>,
    ) -> Result<Vec<LaunchProcess>, Problem>;
    /// The engine's wrapper program for the runtime named `runtime`
    /// (`python3 -m dynamo.vllm`), or why it has none.
    fn runtime_wrapper(&self, runtime: &str) -> Result<&'static [&'static str], String> {
        Err(format!(
            "{} has no wrapper for the `{runtime}` runtime",
            self.name()
        ))
    }
    /// What one of its worker processes serves, for a runtime's simulated engine.
    fn serving(
        &self,
        recipe: &Recipe,
        role: &Role,
        endpoint: &Endpoint,
        process: &LaunchProcess,
    ) -> Serving;
    /// The program that stands in for the engine under `--simulate`: a binary shipped
    /// next to `srt` (`srt-vllm-sim`) that accepts exactly the engine's arguments;
    /// `None` for an engine srt runs only under a runtime, whose own simulated engine
    /// stands in for it ([`crate::launch::WorkerInfo::simulated`]).
    fn simulator(&self) -> Option<&'static str>;
    /// Make one of the engine's worker processes run `simulator` (the path of
    /// [`Engine::simulator`]) in place of the engine's program (`--simulate`): the
    /// simulator takes the engine's own arguments, so only the program changes. Applied
    /// to the processes handed to the executor, never to the launch plan the graph is
    /// lowered from.
    fn simulate(&self, process: &mut LaunchProcess, simulator: &std::path::Path);
    /// What one of its worker processes needs to run under the recipe's profiler
    /// (`profile`, its role's steps and output directory): the engine's own flags and
    /// variables for it, added to `process` (vLLM's `--profiler-config`, SGLang's
    /// `SGLANG_TORCH_PROFILER_DIR`). Why not, when the role's args already set them.
    fn profile(
        &self,
        process: &mut LaunchProcess,
        profile: &crate::launch::wrap::ProfileRun,
    ) -> Result<(), String>;
    /// How to get the engine's program when it is not on this machine's `PATH`: named
    /// when a plan would start it and cannot find it.
    fn install_hint(&self) -> &'static str;

    /// Whether srtctl's `gsm8k` benchmark evaluates this engine's deployments with
    /// SGLang's `run_eval`, as it does for every engine but vLLM (which it evaluates
    /// with a copy of vLLM's own script, and srt with its own program of that
    /// evaluation: `assemble/eval_bench.rs`).
    fn gsm8k_with_run_eval(&self) -> bool {
        true
    }
    /// The route of the engine's own HTTP server that makes each forward pass sleep for
    /// a while (`{"forward_sleep_time": s}`, `null` to stop: SGLang's `/slow_down`), for
    /// srtctl's sa-bench `slow_down_*`; `None` when it has none.
    fn slow_down_route(&self) -> Option<&'static str> {
        None
    }
    /// The GPUs of `endpoint` that the role's parallel sizes use, where the engine runs a
    /// worker on fewer than it is given (the first ones, the others idle, as srtctl's
    /// single-node sweeps do); `None` when it refuses any other count, or the sizes do not
    /// fit at all (its worker processes say why).
    fn gpus_used(&self, _recipe: &Recipe, _role: &Role, _endpoint: &Endpoint) -> Option<u32> {
        None
    }
    /// Requests the worker at `url` is still working on (running and queued), or `None`
    /// when it cannot tell: how apply knows a worker taken out of its Routers has
    /// drained before stopping it.
    fn in_flight<'a>(
        &'a self,
        http: &'a reqwest::Client,
        url: &'a str,
    ) -> futures::future::BoxFuture<'a, Option<u64>>;
}

/// How an engine reads `roles.<role>.args`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArgsForm {
    /// Command-line flags: keys normalised to kebab case, checked against the engine's
    /// flag catalog, rendered on its command line ([`crate::recipe::Role::args`]).
    Flags,
    /// The engine's config file: the mapping kept as written (keys, nesting, `null`s),
    /// checked against the engine's config schema and written as a file the worker
    /// reads ([`crate::recipe::Role::config`]).
    Config,
}

/// A program that runs an engine under a frontend's runtime, in place of the engine's
/// own server (`python3 -m dynamo.vllm`): it takes the engine's flags (its own parser
/// leaves them to the engine's) and registers the worker with the runtime. Each engine
/// lists its wrappers, one row per runtime.
pub(crate) struct Wrapper {
    /// The runtime's name.
    pub runtime: &'static str,
    /// argv before the flags.
    pub program: &'static [&'static str],
    /// Whether it still connects to the runtime on a worker's follower nodes, which
    /// register nothing (`dynamo.sglang` at node rank > 0 publishes its ranks' metrics
    /// and KV events; `dynamo.vllm --headless` bypasses the runtime).
    pub followers_connect: bool,
}

/// The program of the wrapper among `wrappers` for the runtime named `runtime`, or why
/// the engine (`engine`, as messages name it) has none.
pub(crate) fn wrapper_program(
    engine: &str,
    wrappers: &'static [Wrapper],
    runtime: &str,
) -> Result<&'static [&'static str], String> {
    wrappers
        .iter()
        .find(|w| w.runtime == runtime)
        .map(|w| w.program)
        .ok_or_else(|| format!("{engine} has no wrapper for the `{runtime}` runtime"))
}

/// The wrapper among `wrappers` for `runtime`, for an engine srt runs only under a
/// runtime (`engine`, as messages name it): a recipe without one is refused at its
/// `engine` key.
pub(crate) fn runtime_only_wrapper(
    recipe: &Recipe,
    engine: &str,
    wrappers: &'static [Wrapper],
    runtime: Option<&'static str>,
) -> Result<&'static Wrapper, Problem> {
    runtime
        .and_then(|r| wrappers.iter().find(|w| w.runtime == r))
        .ok_or_else(|| {
            Problem::new(
                "srt::recipe::engine_frontend",
                recipe.engine.kind.span,
                format!("srt runs {engine} under Dynamo only"),
            )
            .label(engine.to_string())
            .help("use `frontend: dynamo`")
        })
}

/// The wrapper among `wrappers` that `argv` runs, if any.
pub(crate) fn wrapper_of(
    wrappers: &'static [Wrapper],
    argv: &crate::launch::Argv,
) -> Option<&'static Wrapper> {
    wrappers.iter().find(|w| {
        argv.iter()
            .take(w.program.len())
            .eq(w.program.iter().copied())
    })
}

/// Every engine srt knows.
pub const ENGINES: &[&dyn Engine] = &[
    &vllm::Vllm,
    &sglang::Sglang,
    &trtllm::Trtllm,
    &mocker::Mocker,
];

/// An engine's connector named `chosen` is none of its `names`: the problem at the
/// name, with a suggestion.
pub(crate) fn unknown_connector(chosen: &Sp<String>, names: &[&str]) -> Problem {
    let p = Problem::new(
        "srt::recipe::connector",
        chosen.span,
        format!("unknown connector `{}`", chosen.value),
    )
    .label("unknown connector");
    match did_you_mean(&chosen.value, names.iter().copied()) {
        Some(s) => p.help(format!("did you mean `{s}`?")),
        None => p.help(format!("known connectors: {}", names.join(", "))),
    }
}

/// The catalog of `version` among `parsed` (the first, the default, for `None`), or
/// the versions there are.
pub(crate) fn catalog_of(
    parsed: &'static [Catalog],
    files: &[(&'static str, &str)],
    version: Option<&str>,
) -> Result<&'static Catalog, Vec<&'static str>> {
    match version {
        None => Ok(&parsed[0]),
        Some(v) => parsed
            .iter()
            .find(|c| c.version == v)
            .ok_or_else(|| files.iter().map(|(v, _)| *v).collect()),
    }
}

/// The catalog of the release a recipe names (`engine.version`, `version`), or the
/// problem at that key when srt has none.
pub(crate) fn recipe_catalog(
    engine: &dyn Engine,
    version: Option<Sp<&str>>,
    problems: &mut Vec<Problem>,
) -> Option<&'static Catalog> {
    match engine.catalog(version.as_ref().map(|v| v.value)) {
        Ok(c) => Some(c),
        Err(known) => {
            let v = version.expect("only a named version can be missing");
            problems.push(
                Problem::new(
                    "srt::recipe::engine_version",
                    v.span,
                    format!("srt has no flag catalog for {} {}", engine.name(), v.value),
                )
                .label("unknown release")
                .help(format!(
                    "known releases: {} (scripts/flag-catalogs.sh makes a catalog from a release)",
                    known.join(", ")
                )),
            );
            None
        }
    }
}

/// Every role's `args` against `catalog`, the engine's managed flags refused.
pub(crate) fn check_role_args(
    engine: &dyn Engine,
    catalog: &Catalog,
    recipe: &Recipe,
    problems: &mut Vec<Problem>,
) {
    for role in &recipe.roles {
        crate::catalog::check_args(
            catalog,
            &role.args,
            &format!("roles.{}.args", role.kind.name()),
            &|flag| engine.managed_by(flag),
            problems,
        );
    }
}

/// `GET url`, when it answers 2xx: what an engine reads its in-flight requests from
/// (`Engine::in_flight`); `None` on any failure.
pub(crate) async fn get_ok(http: &reqwest::Client, url: &str) -> Option<reqwest::Response> {
    let r = http.get(url).send().await.ok()?;
    r.status().is_success().then_some(r)
}

/// Look an engine up by its recipe name.
pub fn lookup(name: &str) -> Option<&'static dyn Engine> {
    ENGINES.iter().copied().find(|e| e.name() == name)
}

#[cfg(test)]
mod tests {
    use super::ENGINES;
    use crate::ports::{EPHEMERAL_START, KINDS, SCOPE_ORDINALS};

    /// An engine's own port kinds obey what the shared ones do: two scopes of them end
    /// below the ephemeral ports, and no name is another kind's.
    #[test]
    fn every_engines_port_kinds_end_below_the_ephemeral_ports_with_names_of_their_own() {
        let mut names: Vec<&str> = KINDS.iter().map(|k| k.name).collect();
        for engine in ENGINES {
            for kind in engine.port_kinds() {
                let last = u32::from(kind.base)
                    + (2 * SCOPE_ORDINALS - 1) * u32::from(kind.stride)
                    + u32::from(kind.span)
                    - 1;
                assert!(last < EPHEMERAL_START, "{}: {last}", kind.name);
                assert!(!names.contains(&kind.name), "{} named twice", kind.name);
                names.push(kind.name);
            }
        }
    }
}
