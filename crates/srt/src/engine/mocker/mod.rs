//! Dynamo's mocker as the engine itself (srtctl's `backend.type: mocker`): `python3 -m
//! dynamo.mocker`, a scheduler simulator that loads no weights, registers with the
//! deployment's runtime as a worker would, and generates tokens at a simulated pace.
//! srtctl's users run it to smoke-test a whole deployment (scheduler, mounts,
//! tokenizer, discovery, frontend, benchmark) without GPUs. It runs under Dynamo only,
//! one process per worker on its node; `engine:` holds srtctl's simulation keys
//! ([`keys`]), rendered as srtctl renders them, and a role's `args` are the mocker's
//! own flags (checked against the catalog dumped from its parser). It needs no stand-in
//! under `--simulate`: it is one.

mod keys;

use super::{Engine, Wrapper};
use crate::catalog::Catalog;
use crate::launch::{
    Argv, BuildContext, ConnectorChoice, LaunchProcess, PdProtocol, ProcessKind, Serving,
    WorkerFeature, WorkerInfo,
};
use crate::recipe::diag::Problem;
use crate::recipe::{ArgValue, Recipe, Role, RoleKind};
use crate::topology::Endpoint;
use std::collections::BTreeMap;

/// The mocker engine.
pub(super) struct Mocker;

/// Its program under its one runtime: the mocker registers itself.
const WRAPPERS: &[Wrapper] = &[Wrapper {
    runtime: "dynamo",
    program: &["python3", "-m", "dynamo.mocker"],
    followers_connect: false,
}];

/// The catalog of `python3 -m dynamo.mocker` (ai-dynamo 1.6.1's parser), which the
/// Dynamo runtime reads its registration flags with too.
fn catalog() -> &'static Catalog {
    static PARSED: std::sync::OnceLock<Vec<Catalog>> = std::sync::OnceLock::new();
    let files = [(
        "1.6.1",
        include_str!("../../frontend/dynamo/catalog/dynamo-mocker-1.6.1.json"),
    )];
    &PARSED.get_or_init(|| crate::catalog::parse_shipped(&files))[0]
}

/// Flags srt sets.
const MANAGED: &[(&str, &str)] = &[
    ("model-path", "the model is `model.path`"),
    ("model-name", "the served name is `model.served_name`"),
];

impl Engine for Mocker {
    fn name(&self) -> &'static str {
        "mocker"
    }

    fn managed(&self) -> &'static [(&'static str, &'static str)] {
        MANAGED
    }

    fn managed_env(&self) -> &'static [&'static str] {
        &[]
    }

    /// None: the mocker uses no device.
    fn placement_env(&self) -> &'static [&'static str] {
        &[]
    }

    fn catalog(&self, _: Option<&str>) -> Result<&'static Catalog, Vec<&'static str>> {
        Ok(catalog())
    }

    fn keys(&self) -> &'static [crate::recipe::keys::Key] {
        keys::KEYS
    }

    fn args_catalog(&self, _: &Recipe) -> Option<&'static Catalog> {
        Some(catalog())
    }

    /// None: the mocker simulates a KV transfer of its own.
    fn connector_names(&self) -> &'static [&'static str] {
        &[]
    }

    fn connector(&self, recipe: &Recipe, role: &Role) -> Result<ConnectorChoice, Problem> {
        Ok(ConnectorChoice {
            role: role.kind,
            name: "mocker",
            discovery: false,
            protocol: PdProtocol::DisaggregatedParams,
            span: recipe.engine.span,
        })
    }

    fn validate(&self, recipe: &Recipe, problems: &mut Vec<Problem>) {
        super::check_role_args(self, catalog(), recipe, problems);
        if let Some(role) = recipe.roles.iter().find(|r| r.kind != RoleKind::Agg) {
            problems.push(
                Problem::new(
                    "srt::recipe::engine_role",
                    role.span,
                    "srt runs the mocker engine aggregated only",
                )
                .label("a disaggregated role")
                .help("use one `agg` role; `--simulate` runs Dynamo's mocker in place of any engine's prefill and decode workers"),
            );
        }
    }

    fn feature_flags(
        &self,
        _: &Recipe,
        feature: WorkerFeature,
    ) -> Result<Vec<(String, ArgValue)>, String> {
        Err(match feature {
            WorkerFeature::PromptRender => "Dynamo's mocker has no prompt render route",
            WorkerFeature::LoadReport => "Dynamo's mocker reports no load of its own",
            WorkerFeature::KvCacheInfo => "Dynamo's mocker serves no KV-cache info route",
        }
        .to_string())
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
        let wrapper = super::runtime_only_wrapper(recipe, "Dynamo's mocker", WRAPPERS, runtime)?;
        if endpoint.nodes.len() > 1 {
            return Err(Problem::new(
                "srt::recipe::engine_role",
                role.span,
                "a mocker worker runs on one node",
            )
            .label("workers of several nodes")
            .help("give each worker at most one node's GPUs"));
        }
        let mut argv: Argv = wrapper.program.iter().collect();
        argv.extend(["--model-path", &ctx.model().path.value]);
        argv.extend(["--model-name", &ctx.model().served_name]);
        // srtctl's simulation keys, then the role's own flags (the mocker's parser takes
        // the last of a repeated flag, as srtctl's command has them).
        let mut flags = keys::flags(recipe);
        flags.extend(role.args.0.iter().map(|a| (a.key.clone(), a.value.clone())));
        ctx.render_flags(Some(catalog()), flags, &mut argv);
        let node = endpoint.leader();
        Ok(vec![LaunchProcess {
            address: format!("worker.{}[{}]", role.kind.name(), endpoint.index),
            kind: ProcessKind::Worker,
            node,
            devices: Vec::new(),
            ports: BTreeMap::new(),
            env: role
                .env
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            env_unset: Vec::new(),
            argv,
            files: BTreeMap::new(),
            depends_on: Vec::new(),
            watches: Default::default(),
            worker: Some(WorkerInfo {
                role: role.kind,
                endpoint: endpoint.index,
                node_rank: 0,
                advertised_url: None,
                local_dp: 1,
                bootstrap_port: None,
                kv_connector: None,
                headless: false,
                health: None,
                simulated: None,
            }),
            wrap: Default::default(),
            ranks: None,
            container_image: ctx.model().container.clone(),
        }])
    }

    fn runtime_wrapper(&self, runtime: &str) -> Result<&'static [&'static str], String> {
        super::wrapper_program("the mocker", WRAPPERS, runtime)
    }

    /// What the runtime reads of a worker; no stand-in is built from it, since a mocker
    /// worker is its own.
    fn serving(&self, recipe: &Recipe, _: &Role, _: &Endpoint, _: &LaunchProcess) -> Serving {
        Serving {
            model_path: recipe.model.path.value.clone(),
            served_name: recipe.model.served_name.clone(),
            block_size: None,
            max_num_seqs: None,
            max_num_batched_tokens: None,
            data_parallel: 1,
            bootstrap_port: None,
            family: "vllm",
            follower_connects: false,
        }
    }

    fn simulator(&self) -> Option<&'static str> {
        None
    }

    fn simulate(&self, _: &mut LaunchProcess, _: &std::path::Path) {}

    fn profile(
        &self,
        _: &mut LaunchProcess,
        _: &crate::launch::wrap::ProfileRun,
    ) -> Result<(), String> {
        Err("Dynamo's mocker runs no GPU work to profile".into())
    }

    fn install_hint(&self) -> &'static str {
        "the mocker is ai-dynamo's (`scripts/install-dynamo.sh` installs it): put its venv's `bin` first on `PATH`, or run in a Dynamo container (`model.container`)"
    }

    fn in_flight<'a>(
        &'a self,
        _: &'a reqwest::Client,
        _: &'a str,
    ) -> futures::future::BoxFuture<'a, Option<u64>> {
        Box::pin(std::future::ready(None))
    }
}
