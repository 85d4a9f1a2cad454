//! TensorRT-LLM: one MPI job per endpoint, `tp x pp` ranks over its nodes, each
//! `trtllm-llmapi-launch python3 -m dynamo.trtllm ...` ([`process`]), its parallel
//! sizes held to the endpoint's GPUs ([`shape`]). A role's `args` is the worker's LLM
//! API config ([`super::ArgsForm::Config`]), checked against the LLM API's schema
//! ([`config`]) and written as a file resource the role's workers read
//! (`--extra-engine-args`). It runs under Dynamo only, where the mocker stands in for
//! it under `--simulate`. Facts, each with how it was seen: `docs/trtllm-notes.md`.

mod config;
mod keys;
mod process;
mod shape;

use super::{ArgsForm, Engine, Wrapper};
use crate::catalog::Catalog;
use crate::launch::WorkerFeature;
use crate::launch::{BuildContext, ConnectorChoice, LaunchProcess, PdProtocol, Serving};
use crate::recipe::diag::Problem;
use crate::recipe::yaml::Value;
use crate::recipe::{ArgValue, Recipe, Role, Sp};
use crate::topology::Endpoint;

/// The TensorRT-LLM engine.
pub(super) struct Trtllm;

/// Its runtime wrappers: one row per runtime. `dynamo.trtllm` (ai-dynamo 1.6.1) takes
/// its own flags only; TensorRT-LLM's settings are the file `--extra-engine-args`
/// names (`docs/trtllm-notes.md`).
const WRAPPERS: &[Wrapper] = &[Wrapper {
    runtime: "dynamo",
    program: &["python3", "-m", "dynamo.trtllm"],
    // One process per endpoint: no follower registers or connects.
    followers_connect: false,
}];

/// The expert load balancer's shared-memory name, which srt sets per endpoint.
const EPLB_SHM: &str = "TRTLLM_EPLB_SHM_NAME";

/// Config keys srt sets, with who sets them.
const MANAGED: &[(&str, &str)] = &[
    ("model", "the model is `model.path` (`--model-path`)"),
    ("tokenizer", "the tokenizer is the model's (`model.path`)"),
];

/// The KV cache transfer backends of `cache_transceiver_config.backend`.
const CONNECTORS: &[&str] = &["DEFAULT", "UCX", "NIXL", "MOONCAKE", "MPI"];

/// Variables that narrow the GPUs a rank sees: srt sets `CUDA_VISIBLE_DEVICES`.
const PLACEMENT_ENV: &[&str] = &[
    "CUDA_VISIBLE_DEVICES",
    "ROCR_VISIBLE_DEVICES",
    "HIP_VISIBLE_DEVICES",
];

/// GPU models whose nodes bind memory to both NUMA nodes by default (srtctl's rule).
const NUMA_BOUND_GPUS: &[&str] = &["gb200", "gb300"];

/// The LLM API schema of the release `engine.version` names (default: the newest),
/// or the problem at that key when srt has none.
fn schema(recipe: &Recipe, problems: &mut Vec<Problem>) -> Option<&'static config::Schema> {
    let schemas = config::schemas();
    let Some(v) = keys::version(recipe) else {
        return schemas.last();
    };
    let found = schemas.iter().find(|s| s.version == v.value);
    if found.is_none() {
        let known: Vec<&str> = schemas.iter().map(|s| s.version.as_str()).collect();
        problems.push(
            Problem::new(
                "srt::recipe::engine_version",
                v.span,
                format!("srt has no LLM API schema for TensorRT-LLM {}", v.value),
            )
            .label("unknown release")
            .help(format!(
                "known releases: {} (scripts/trtllm-schema.py makes a schema from a release's source)",
                known.join(", ")
            )),
        );
    }
    found
}

impl Trtllm {
    /// Whether every rank runs under `numactl -m 0,1`.
    fn numa_bind(recipe: &Recipe) -> bool {
        keys::flag(recipe, "numa_memory_bind").unwrap_or_else(|| {
            recipe
                .resources
                .gpu_type
                .as_deref()
                .is_some_and(|t| NUMA_BOUND_GPUS.contains(&t))
        })
    }

    /// The role's `cache_transceiver_config.backend`, as written.
    fn backend(role: &Role) -> Option<Sp<String>> {
        let cache = shape::entry(role.config.as_ref(), "cache_transceiver_config");
        let backend = shape::entry(cache, "backend")?;
        match &backend.value {
            Value::Str(s) => Some(Sp::new(s.clone(), backend.span)),
            _ => None,
        }
    }
}

impl Engine for Trtllm {
    fn name(&self) -> &'static str {
        "trtllm"
    }

    fn args_form(&self) -> ArgsForm {
        ArgsForm::Config
    }

    fn managed(&self) -> &'static [(&'static str, &'static str)] {
        MANAGED
    }

    fn managed_env(&self) -> &'static [&'static str] {
        &[EPLB_SHM]
    }

    fn placement_env(&self) -> &'static [&'static str] {
        PLACEMENT_ENV
    }

    /// None: TensorRT-LLM takes no flags of its own under its runtime (its settings
    /// are the config file, checked against the LLM API's schema instead).
    fn catalog(&self, _: Option<&str>) -> Result<&'static Catalog, Vec<&'static str>> {
        Err(Vec::new())
    }

    fn keys(&self) -> &'static [crate::recipe::keys::Key] {
        keys::KEYS
    }

    /// None: there is no `engine.connector`; each role's backend is its config's
    /// `cache_transceiver_config.backend`, checked by the LLM API schema.
    fn connector_names(&self) -> &'static [&'static str] {
        &[]
    }

    /// The role's cache transceiver backend; the frontend hands a request from a
    /// prefill to a decode by TensorRT-LLM's `disaggregated_params`.
    fn connector(&self, recipe: &Recipe, role: &Role) -> Result<ConnectorChoice, Problem> {
        let backend = Self::backend(role);
        Ok(ConnectorChoice {
            role: role.kind,
            name: match &backend {
                Some(b) => CONNECTORS
                    .iter()
                    .copied()
                    .find(|c| c.eq_ignore_ascii_case(&b.value))
                    .unwrap_or("DEFAULT"),
                None => "DEFAULT",
            },
            discovery: false,
            protocol: PdProtocol::DisaggregatedParams,
            span: backend.map_or(recipe.engine.span, |b| b.span),
        })
    }

    fn validate(&self, recipe: &Recipe, problems: &mut Vec<Problem>) {
        if let Some(schema) = schema(recipe, problems) {
            for role in &recipe.roles {
                if let Some(config) = &role.config {
                    let path = format!("roles.{}.args", role.kind.name());
                    schema.check(config, &path, MANAGED, problems);
                }
            }
        }
        for role in &recipe.roles {
            for (k, span) in &role.env_spans {
                if k == EPLB_SHM {
                    problems.push(
                        Problem::new(
                            "srt::recipe::managed_env",
                            *span,
                            format!("`{EPLB_SHM}` is set by srt: each endpoint has its own"),
                        )
                        .label("managed by srt")
                        .help("remove it from the role's env"),
                    );
                }
            }
        }
    }

    fn feature_flags(
        &self,
        _: &Recipe,
        feature: WorkerFeature,
    ) -> Result<Vec<(String, ArgValue)>, String> {
        Err(match feature {
            WorkerFeature::PromptRender => "TensorRT-LLM under Dynamo has no prompt render route",
            WorkerFeature::LoadReport => "TensorRT-LLM under Dynamo reports no load of its own",
            WorkerFeature::KvCacheInfo => "TensorRT-LLM under Dynamo serves no KV-cache info route",
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
        let wrapper = super::runtime_only_wrapper(recipe, "TensorRT-LLM", WRAPPERS, runtime)?;
        let plan = process::EndpointPlan {
            recipe,
            role,
            endpoint,
            sizes: shape::check(role, endpoint)?,
            wrapper,
            numa_bind: Self::numa_bind(recipe),
            publish: keys::flag(recipe, "publish_events_and_metrics").unwrap_or(false),
        };
        Ok(vec![process::endpoint_process(ctx, &plan)])
    }

    fn runtime_wrapper(&self, runtime: &str) -> Result<&'static [&'static str], String> {
        super::wrapper_program("TensorRT-LLM", WRAPPERS, runtime)
    }

    /// What the mocker schedules with: the KV block size, the batch limits and the
    /// attention-DP ranks of the role's config.
    fn serving(
        &self,
        recipe: &Recipe,
        role: &Role,
        endpoint: &Endpoint,
        _: &LaunchProcess,
    ) -> Serving {
        let config = role.config.as_ref();
        let int = |node: Option<&crate::recipe::yaml::Node>| match node.map(|n| &n.value) {
            Some(Value::Int(i)) => Some(i.to_string()),
            _ => None,
        };
        let cache = shape::entry(config, "kv_cache_config");
        Serving {
            model_path: recipe.model.path.value.clone(),
            served_name: recipe.model.served_name.clone(),
            block_size: int(shape::entry(cache, "tokens_per_block")),
            max_num_seqs: int(shape::entry(config, "max_batch_size")),
            max_num_batched_tokens: int(shape::entry(config, "max_num_tokens")),
            // Checked when the process was built.
            data_parallel: shape::check(role, endpoint).map_or(1, shape::Sizes::data_parallel),
            // The mocker's TensorRT-LLM hand-off takes no bootstrap port.
            bootstrap_port: None,
            family: "trtllm",
            follower_connects: false,
        }
    }

    fn simulator(&self) -> Option<&'static str> {
        None
    }

    fn simulate(&self, _: &mut LaunchProcess, _: &std::path::Path) {}

    /// Under nsys, TensorRT-LLM's executor opens and closes the capture at the role's
    /// steps (`TLLM_PROFILE_START_STOP`, as srtctl sets it); it has no torch profiler
    /// srt drives.
    fn profile(
        &self,
        process: &mut LaunchProcess,
        profile: &crate::launch::wrap::ProfileRun,
    ) -> Result<(), String> {
        const STEPS: &str = "TLLM_PROFILE_START_STOP";
        match profile.kind {
            crate::recipe::runtime::ProfilerKind::Torch => Err(
                "TensorRT-LLM has no torch profiler srt drives; use `profiling.type: nsys`".into(),
            ),
            _ if process.env.contains_key(STEPS) => Err(format!(
                "`profiling` sets `{STEPS}` on these workers; remove it from the role's env"
            )),
            _ => {
                let steps = format!("{}-{}", profile.start_step, profile.stop_step);
                process.env.insert(STEPS.to_string(), steps);
                Ok(())
            }
        }
    }

    fn install_hint(&self) -> &'static str {
        "without GPUs, apply with `--simulate` (Dynamo's mocker stands in for TensorRT-LLM); \
         otherwise run in a TensorRT-LLM container with Dynamo (`model.container`)"
    }

    fn in_flight<'a>(
        &'a self,
        _: &'a reqwest::Client,
        _: &'a str,
    ) -> futures::future::BoxFuture<'a, Option<u64>> {
        Box::pin(std::future::ready(None))
    }
}
