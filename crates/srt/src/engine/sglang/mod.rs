//! SGLang: `python3 -m sglang.launch_server` workers, one server per node of an
//! endpoint ([`process`]), their parallel sizes as SGLang resolves them ([`shape`]),
//! the KV transfer backends of prefill/decode ([`connector`]), its `engine:` keys
//! ([`keys`]) and the flag catalogs of the releases srt checks recipes against
//! (`catalog/`). Prefill and decode pair by SGLang's bootstrap rendezvous
//! ([`PdProtocol::Bootstrap`]). Facts, each with how it was seen: `docs/sglang-notes.md`.

mod connector;
mod keys;
mod process;
mod shape;
mod validate;

use super::{Engine, Wrapper};
use crate::catalog::Catalog;
use crate::launch::WorkerFeature;
use crate::launch::{BuildContext, ConnectorChoice, LaunchProcess, PdProtocol, Serving};
use crate::ports::PortKind;
use crate::recipe::diag::Problem;
use crate::recipe::{ArgValue, Recipe, Role, RoleKind};
use crate::topology::Endpoint;

/// The SGLang engine.
pub(super) struct Sglang;

/// SGLang's server.
const PROGRAM: &[&str] = &["python3", "-m", "sglang.launch_server"];

/// SGLang's runtime wrappers: one row per runtime. `dynamo.sglang` (ai-dynamo 1.6.1)
/// parses its own flags, then the router-advertisement ones, and hands SGLang's parser
/// the rest, the same flags `sglang.launch_server` takes (`--model-path` among them);
/// it runs SGLang's engine in-process, without SGLang's HTTP server
/// (`docs/sglang-notes.md`, "Under Dynamo").
const WRAPPERS: &[Wrapper] = &[Wrapper {
    runtime: "dynamo",
    program: &["python3", "-m", "dynamo.sglang"],
    // At node rank > 0 it runs SGLang's schedulers and Dynamo's runtime (their metrics
    // and KV events), registering nothing.
    followers_connect: true,
}];

/// `--nccl-port`: one per process (SGLang's own free-port pick races on a shared node).
const NCCL: PortKind = PortKind {
    name: "sglang_nccl",
    base: 14000,
    stride: 1,
    span: 1,
    purpose: "an SGLang process's `--nccl-port`",
};

/// `--dist-init-addr`'s port on an endpoint's leader and the six SGLang derives from it
/// for attention DP (`PortArgs.init_new`: port + 1 .. port + 6).
const DIST_INIT: PortKind = PortKind {
    name: "sglang_dist_init",
    base: 15000,
    stride: 8,
    span: 7,
    purpose: "an SGLang endpoint's `--dist-init-addr` port and the six it derives",
};

/// A prefill's bootstrap server (`--disaggregation-bootstrap-port`), on its leader.
const BOOTSTRAP: PortKind = PortKind {
    name: "sglang_bootstrap",
    base: 14500,
    stride: 1,
    span: 1,
    purpose: "an SGLang prefill's `--disaggregation-bootstrap-port`",
};

/// Flags srt derives, with who sets them (what a recipe changes instead).
const MANAGED: &[(&str, &str)] = &[
    ("model-path", "the model is `model.path`"),
    ("host", "every worker listens on 0.0.0.0"),
    ("port", "each process's HTTP port is allocated (port kind `http`)"),
    ("nccl-port", "each process's NCCL port is allocated (port kind `sglang_nccl`)"),
    ("dist-init-addr", "a worker spanning nodes or running attention DP rendezvous at its leader, on a port allocated there (port kind `sglang_dist_init`)"),
    ("nnodes", "the node count follows the role's GPUs per worker (`gpus`, `resources.gpus_per_node`)"),
    ("node-rank", "each node's rank follows its place in the endpoint"),
    ("base-gpu-id", "each worker's GPUs come from the allocation (`gpus`, `resources.gpus_per_node`), given as CUDA_VISIBLE_DEVICES"),
    ("gpu-id-step", "each worker's GPUs come from the allocation (`gpus`, `resources.gpus_per_node`), given as CUDA_VISIBLE_DEVICES"),
    ("disaggregation-mode", "the role (`prefill`, `decode`) sets it"),
    ("disaggregation-bootstrap-port", "each prefill's bootstrap port is allocated (port kind `sglang_bootstrap`)"),
    ("disaggregation-transfer-backend", "the KV transfer backend is the connector (`engine.connector`, `args.connector`)"),
];

/// Variables that narrow the GPUs a process sees: srt sets `CUDA_VISIBLE_DEVICES` to
/// each worker's GPUs.
const PLACEMENT_ENV: &[&str] = &[
    "CUDA_VISIBLE_DEVICES",
    "ROCR_VISIBLE_DEVICES",
    "HIP_VISIBLE_DEVICES",
];

/// The SGLang releases srt has flag catalogs for, newest (the default) first.
const CATALOGS: &[(&str, &str)] = &[
    ("0.5.23", include_str!("catalog/sglang-0.5.23.json")),
    (
        "0.5.13.post1",
        include_str!("catalog/sglang-0.5.13.post1.json"),
    ),
    ("0.5.12", include_str!("catalog/sglang-0.5.12.json")),
    ("0.5.11", include_str!("catalog/sglang-0.5.11.json")),
    ("0.5.8", include_str!("catalog/sglang-0.5.8.json")),
    ("0.5.7", include_str!("catalog/sglang-0.5.7.json")),
];

fn catalogs() -> &'static [Catalog] {
    static PARSED: std::sync::OnceLock<Vec<Catalog>> = std::sync::OnceLock::new();
    PARSED.get_or_init(|| crate::catalog::parse_shipped(CATALOGS))
}

/// The catalog a release an image names is checked against: its own, or for a post
/// release (`0.5.8.post1`) its release's.
fn image_catalog(release: &str) -> Option<&'static Catalog> {
    let base = release.split(".post").next().unwrap_or(release);
    let find = |v: &str| catalogs().iter().find(|c| c.version == v);
    find(release).or_else(|| find(base))
}

/// A release as numbers to compare: `0.5.13.post1` is (0, 5, 13, 1), `0.5.8` (0, 5, 8,
/// 0).
fn release_order(release: &str) -> Vec<u64> {
    let (base, post) = release.split_once(".post").unwrap_or((release, "0"));
    base.split('.')
        .chain([post])
        .map(|n| n.parse().unwrap_or(0))
        .collect()
}

/// Which release a recipe's args are checked against, and why that one.
#[derive(Clone, Debug)]
pub(super) enum Release {
    /// `engine.version` names it (the default when srt has no catalog of it: that is
    /// refused on its own).
    Written(&'static Catalog),
    /// The workers' image names it, and srt has its catalog.
    Named(&'static Catalog),
    /// The image names a release srt has no catalog of: the newest older one srt has,
    /// else the newest.
    Nearest {
        /// The release the image names.
        named: String,
        catalog: &'static Catalog,
    },
    /// The image names no release (an alias, a nightly, another project's image): the
    /// newest release whose parser takes every role's args, else the newest.
    Fitting {
        /// The image, as written.
        image: Option<String>,
        catalog: &'static Catalog,
        /// Whether its parser takes every role's args.
        fits: bool,
    },
}

impl Release {
    /// Its catalog.
    pub(super) fn catalog(&self) -> &'static Catalog {
        match self {
            Release::Written(c) | Release::Named(c) => c,
            Release::Nearest { catalog, .. } | Release::Fitting { catalog, .. } => catalog,
        }
    }
}

impl Sglang {
    /// The catalog of the release the recipe's workers run (see [`Release`]).
    fn recipe_catalog(&self, recipe: &Recipe) -> &'static Catalog {
        self.release(recipe).catalog()
    }

    /// The release the recipe's workers run, as far as srt can tell.
    pub(super) fn release(&self, recipe: &Recipe) -> Release {
        let newest = &catalogs()[0];
        if let Some(v) = keys::version(recipe) {
            return Release::Written(self.catalog(Some(v.value)).unwrap_or(newest));
        }
        match keys::image_release(recipe) {
            Some(named) => match image_catalog(named) {
                Some(c) => Release::Named(c),
                None => {
                    let order = release_order(named);
                    let older = catalogs()
                        .iter()
                        .filter(|c| release_order(&c.version) <= order)
                        .max_by_key(|c| release_order(&c.version));
                    Release::Nearest {
                        named: named.to_string(),
                        catalog: older.unwrap_or(newest),
                    }
                }
            },
            None => {
                let fitting = catalogs().iter().find(|c| self.takes_every_args(c, recipe));
                Release::Fitting {
                    image: recipe.model.container.clone(),
                    catalog: fitting.unwrap_or(newest),
                    fits: fitting.is_some(),
                }
            }
        }
    }

    /// Whether `catalog`'s parser takes every role's args: knows every flag and takes
    /// every value (what srt itself sets, or a secret on a command line, is refused
    /// whatever the release).
    fn takes_every_args(&self, catalog: &Catalog, recipe: &Recipe) -> bool {
        const PARSER: [&str; 2] = ["srt::recipe::unknown_flag", "srt::recipe::flag_value"];
        let mut problems = Vec::new();
        crate::engine::check_role_args(self, catalog, recipe, &mut problems);
        !problems
            .iter()
            .any(|p| !p.is_warning() && PARSER.contains(&p.code))
    }
}

impl Engine for Sglang {
    fn slow_down_route(&self) -> Option<&'static str> {
        Some("/slow_down")
    }

    fn gpus_used(&self, recipe: &Recipe, role: &Role, endpoint: &Endpoint) -> Option<u32> {
        shape::check(self.recipe_catalog(recipe), role, endpoint)
            .ok()
            .map(shape::Sizes::gpus)
    }

    fn name(&self) -> &'static str {
        "sglang"
    }

    fn args_catalog(&self, recipe: &Recipe) -> Option<&'static Catalog> {
        Some(self.recipe_catalog(recipe))
    }

    fn managed(&self) -> &'static [(&'static str, &'static str)] {
        MANAGED
    }

    /// SGLang's torch profiler writes to `SGLANG_TORCH_PROFILER_DIR`; under nsys it
    /// needs nothing of its own (its profiler start opens nsys' `cudaProfilerApi`
    /// range).
    fn profile(
        &self,
        process: &mut LaunchProcess,
        profile: &crate::launch::wrap::ProfileRun,
    ) -> Result<(), String> {
        if profile.kind == crate::recipe::runtime::ProfilerKind::Torch {
            const DIR: &str = "SGLANG_TORCH_PROFILER_DIR";
            if process.env.contains_key(DIR) {
                return Err(format!(
                    "`profiling` sets `{DIR}` on these workers; remove it from the role's env"
                ));
            }
            process.env.insert(DIR.to_string(), profile.dir.clone());
        }
        Ok(())
    }

    fn managed_env(&self) -> &'static [&'static str] {
        &[]
    }

    fn placement_env(&self) -> &'static [&'static str] {
        PLACEMENT_ENV
    }

    fn catalog(&self, version: Option<&str>) -> Result<&'static Catalog, Vec<&'static str>> {
        super::catalog_of(catalogs(), CATALOGS, version)
    }

    fn keys(&self) -> &'static [crate::recipe::keys::Key] {
        keys::KEYS
    }

    fn port_kinds(&self) -> &'static [PortKind] {
        &[NCCL, DIST_INIT, BOOTSTRAP]
    }

    fn connector_names(&self) -> &'static [&'static str] {
        connector::NAMES
    }

    fn connector(&self, recipe: &Recipe, role: &Role) -> Result<ConnectorChoice, Problem> {
        Ok(ConnectorChoice {
            role: role.kind,
            name: connector::for_role(recipe, role)?.name,
            discovery: false,
            protocol: PdProtocol::Bootstrap,
            span: role
                .connector
                .as_ref()
                .map_or_else(|| keys::connector(recipe).span, |s| s.span),
        })
    }

    fn validate(&self, recipe: &Recipe, problems: &mut Vec<Problem>) {
        validate::recipe(self, recipe, problems);
    }

    fn feature_flags(
        &self,
        recipe: &Recipe,
        feature: WorkerFeature,
    ) -> Result<Vec<(String, ArgValue)>, String> {
        let version = &self.recipe_catalog(recipe).version;
        match feature {
            WorkerFeature::PromptRender => Err(format!(
                "SGLang {version} has no prompt render route (`/v1/completions/render`)"
            )),
            WorkerFeature::LoadReport => Err(format!(
                "SGLang {version} reports its load at GET /v1/loads and has no /get_load"
            )),
            // Its `/get_server_info` (a deprecated alias of `/server_info`) always answers.
            WorkerFeature::KvCacheInfo => Ok(Vec::new()),
        }
    }

    fn worker_processes(
        &self,
        ctx: &mut BuildContext<'_>,
        recipe: &Recipe,
        role: &Role,
        endpoint: &Endpoint,
        _: &[WorkerFeature],
        runtime: Option<&'static str>,
    ) -> Result<Vec<LaunchProcess>, Problem> {
        let catalog = self.recipe_catalog(recipe);
        let plan = process::EndpointPlan {
            role,
            endpoint,
            sizes: shape::check(catalog, role, endpoint)?,
            connector: match role.kind {
                RoleKind::Agg => None,
                _ => Some(connector::for_role(recipe, role)?),
            },
            // Checked by the assembly (`runtime_wrapper`) before any worker is built.
            wrapper: runtime.and_then(|r| WRAPPERS.iter().find(|w| w.runtime == r)),
            catalog,
            kv_events: crate::engine::kv_events::config(recipe, role.kind, &[]),
        };
        process::endpoint_processes(ctx, &plan)
    }

    fn runtime_wrapper(&self, runtime: &str) -> Result<&'static [&'static str], String> {
        super::wrapper_program("SGLang", WRAPPERS, runtime)
    }

    fn serving(
        &self,
        recipe: &Recipe,
        role: &Role,
        _: &Endpoint,
        process: &LaunchProcess,
    ) -> Serving {
        let catalog = self.recipe_catalog(recipe);
        let arg = |flag: &str| shape::arg(catalog, role, flag).map(|a| a.value.render());
        Serving {
            model_path: recipe.model.path.value.clone(),
            served_name: recipe.model.served_name.clone(),
            block_size: arg("page-size"),
            max_num_seqs: arg("max-running-requests"),
            max_num_batched_tokens: None,
            data_parallel: shape::sizes(catalog, role).map_or(1, shape::Sizes::ranks),
            bootstrap_port: process.ports.get(BOOTSTRAP.name).map(|b| b.base),
            family: "sglang",
            follower_connects: super::wrapper_of(WRAPPERS, &process.argv)
                .is_some_and(|w| w.followers_connect),
        }
    }

    fn simulator(&self) -> Option<&'static str> {
        Some("srt-sglang-sim")
    }

    fn simulate(&self, process: &mut LaunchProcess, simulator: &std::path::Path) {
        // `srt-sglang-sim` reads what follows the server's (or a wrapper's) program.
        let skip = WRAPPERS
            .iter()
            .map(|w| w.program)
            .chain([PROGRAM])
            .find(|p| process.argv.iter().take(p.len()).eq(p.iter().copied()))
            .map_or(1, <[&str]>::len);
        let mut argv = crate::launch::Argv::from([simulator.display().to_string()]);
        argv.extend(process.argv.iter().skip(skip));
        process.argv = argv;
    }

    fn install_hint(&self) -> &'static str {
        "without GPUs, apply with `--simulate` (srt's simulator answers as SGLang's server \
         would); otherwise run where SGLang is installed (`python3 -m sglang.launch_server`), \
         e.g. in the recipe's container (`model.container`)"
    }

    fn in_flight<'a>(
        &'a self,
        http: &'a reqwest::Client,
        url: &'a str,
    ) -> futures::future::BoxFuture<'a, Option<u64>> {
        use futures::FutureExt;
        async move {
            let r = super::get_ok(http, &format!("{url}/v1/loads")).await?;
            requests_in_flight(&r.json().await.ok()?)
        }
        .boxed()
    }
}

/// The requests an SGLang server is working on, from its `GET /v1/loads` answer: the
/// running and waiting requests of every DP rank. `None` when it lists no rank.
fn requests_in_flight(loads: &serde_json::Value) -> Option<u64> {
    let ranks = loads["loads"].as_array().filter(|r| !r.is_empty())?;
    Some(
        ranks
            .iter()
            .map(|r| {
                r["num_running_reqs"].as_u64().unwrap_or(0)
                    + r["num_waiting_reqs"].as_u64().unwrap_or(0)
            })
            .sum(),
    )
}

#[cfg(test)]
mod tests {
    use super::{release_order, requests_in_flight, CATALOGS};

    /// Every catalog file is a release srt checks against (and the simulator parses,
    /// which lists the directory), newest first.
    #[test]
    fn every_catalog_file_is_listed_newest_first() {
        let dir =
            std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("src/engine/sglang/catalog");
        let mut files: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .flatten()
            .filter_map(|e| {
                let name = e.file_name().into_string().ok()?;
                Some(
                    name.strip_prefix("sglang-")?
                        .strip_suffix(".json")?
                        .to_string(),
                )
            })
            .collect();
        files.sort_by_key(|r| std::cmp::Reverse(release_order(r)));
        let listed: Vec<&str> = CATALOGS.iter().map(|(v, _)| *v).collect();
        assert_eq!(listed, files);
    }

    #[test]
    fn running_and_waiting_are_summed_over_dp_ranks() {
        let loads = serde_json::json!({"loads": [
            {"dp_rank": 0, "num_running_reqs": 2, "num_waiting_reqs": 1},
            {"dp_rank": 1, "num_running_reqs": 3, "num_waiting_reqs": 0},
        ]});
        assert_eq!(requests_in_flight(&loads), Some(6));
        assert_eq!(requests_in_flight(&serde_json::json!({"loads": []})), None);
        assert_eq!(requests_in_flight(&serde_json::json!({})), None);
    }
}
