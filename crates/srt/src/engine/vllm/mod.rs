//! vLLM: `vllm serve` workers, their rank/rendezvous flags, ports and environment
//! ([`process`]), the endpoint shapes ([`shape`]), the KV connectors ([`connector`]),
//! and the flag catalogs of the releases srt checks recipes against (`catalog/`).

mod connector;
mod keys;
mod process;
mod shape;
mod validate;

use super::{Engine, Wrapper};
use crate::catalog::Catalog;
use crate::launch::{Argv, BuildContext, LaunchProcess, Serving};
use crate::launch::{ConnectorChoice, WorkerFeature};
use crate::recipe::diag::Problem;
use crate::recipe::{ArgValue, Recipe, Role};
use crate::topology::Endpoint;

/// The vLLM engine.
pub(super) struct Vllm;

/// vLLM's runtime wrappers: one row per runtime.
const WRAPPERS: &[Wrapper] = &[Wrapper {
    runtime: "dynamo",
    program: &["python3", "-m", "dynamo.vllm"],
    // Its `--headless` runs vLLM alone, without Dynamo's runtime (ai-dynamo 1.6.1,
    // dynamo/vllm/main.py).
    followers_connect: false,
}];

/// Flags srt derives, with who sets them (what a recipe changes instead).
const MANAGED: &[(&str, &str)] = &[
    ("host", "every worker listens on 0.0.0.0"),
    ("port", "each worker's HTTP port is allocated (port kind `http`)"),
    ("headless", "the followers of a replica spanning nodes are headless"),
    ("master-addr", "the rendezvous address is the endpoint leader's IP"),
    ("master-port", "the rendezvous port is allocated per endpoint, on its leader, and given to every node of the endpoint (port kind `master`)"),
    ("nnodes", "the node count follows the role's GPUs per worker (`gpus`, `resources.gpus_per_node`)"),
    ("node-rank", "each node's rank follows its place in the endpoint"),
    ("data-parallel-size-local", "the DP ranks per node follow `data-parallel-size`, the parallel sizes and the GPUs per node"),
    ("data-parallel-start-rank", "each node's first DP rank follows its place in the endpoint"),
    ("data-parallel-address", "the DP address is the endpoint leader's IP"),
    ("data-parallel-rpc-port", "the DP RPC port is allocated per endpoint, on its leader, and given to every node of the endpoint (port kind `dp_rpc`)"),
    ("data-parallel-hybrid-lb", "hybrid load balancing is how srt runs node-local DP (`engine.dp_launch_mode: per_node`)"),
    ("data-parallel-rank", "per-rank DP launch (`per_gpu`) is not supported"),
    ("data-parallel-external-lb", "per-rank DP launch (`per_gpu`) is not supported"),
    ("device-ids", "each worker's GPUs come from the allocation (`gpus`, `resources.gpus_per_node`)"),
];

/// The switch that opens vLLM's render (and token-in) endpoints.
const SCALE_OUT: &str = "enable-scale-out";

/// The `vllm serve` releases srt has flag catalogs for, newest (the default) first.
const CATALOGS: &[(&str, &str)] = &[("0.32.0", include_str!("catalog/vllm-0.32.0.json"))];

fn catalogs() -> &'static [Catalog] {
    static PARSED: std::sync::OnceLock<Vec<Catalog>> = std::sync::OnceLock::new();
    PARSED.get_or_init(|| crate::catalog::parse_shipped(CATALOGS))
}

const MANAGED_ENV: &[&str] = &[
    "HEAD_NODE_IP",
    "VLLM_PORT",
    "VLLM_NIXL_SIDE_CHANNEL_HOST",
    "VLLM_NIXL_SIDE_CHANNEL_PORT",
];

/// Variables that narrow the GPUs a process sees (CUDA, ROCm, HIP): srt gives each
/// worker its GPUs with `--device-ids`, which indexes the devices visible to it.
const PLACEMENT_ENV: &[&str] = &[
    "CUDA_VISIBLE_DEVICES",
    "ROCR_VISIBLE_DEVICES",
    "HIP_VISIBLE_DEVICES",
];

impl Engine for Vllm {
    fn name(&self) -> &'static str {
        "vllm"
    }

    fn args_catalog(&self, recipe: &Recipe) -> Option<&'static Catalog> {
        self.catalog(keys::version(recipe).map(|v| v.value)).ok()
    }

    fn in_flight<'a>(
        &'a self,
        http: &'a reqwest::Client,
        url: &'a str,
    ) -> futures::future::BoxFuture<'a, Option<u64>> {
        use futures::FutureExt;
        async move {
            let r = super::get_ok(http, &format!("{url}/metrics")).await?;
            requests_in_flight(&r.text().await.ok()?)
        }
        .boxed()
    }

    fn gsm8k_with_run_eval(&self) -> bool {
        false
    }

    fn gpus_used(&self, _recipe: &Recipe, role: &Role, endpoint: &Endpoint) -> Option<u32> {
        shape::gpus_used(role, endpoint)
    }

    fn install_hint(&self) -> &'static str {
        "without GPUs, apply with `--simulate` (srt's simulator answers as `vllm serve` \
         would); otherwise install vLLM (`scripts/install-vllm.sh` installs its CPU build \
         and links it as `.tools/bin/vllm`) and put `.tools/bin` on PATH, or name the program with \
         `engine.serve_binary`"
    }

    fn simulator(&self) -> Option<&'static str> {
        Some("srt-vllm-sim")
    }

    fn simulate(&self, process: &mut LaunchProcess, simulator: &std::path::Path) {
        let sim = simulator.display().to_string();
        // A runtime's wrapper (`python3 -m dynamo.vllm --model M ...`) takes the model as
        // a flag: `srt-vllm-sim serve M ...` reads the same vLLM flags.
        let words: Vec<&str> = process.argv.iter().collect();
        if let Some(w) = super::wrapper_of(WRAPPERS, &process.argv) {
            let rest = &words[w.program.len()..];
            if let ["--model", model, flags @ ..] = rest {
                let mut argv = Argv::from([sim.as_str(), "serve", *model]);
                argv.extend(flags.iter().copied());
                process.argv = argv;
                return;
            }
        }
        // argv[0] is `vllm` (or `engine.serve_binary`); `srt-vllm-sim` reads the rest.
        process.argv.set_program(&sim);
    }

    /// vLLM's profiler is configured by `--profiler-config` (0.32's `ProfilerConfig`):
    /// CUDA for nsys (captured between the profiler's start and stop, which nsys'
    /// `cudaProfilerApi` range follows), torch with its trace directory; both delayed
    /// to the phase's start step and as long as its steps.
    fn profile(
        &self,
        process: &mut LaunchProcess,
        profile: &crate::launch::wrap::ProfileRun,
    ) -> Result<(), String> {
        const FLAG: &str = "--profiler-config";
        if process
            .argv
            .iter()
            .any(|t| t == FLAG || t.starts_with("--profiler-config="))
        {
            return Err(format!(
                "`profiling` sets `{FLAG}` on these workers; remove `profiler-config` from the role's args"
            ));
        }
        let mut config = serde_json::json!({
            "delay_iterations": profile.start_step,
            "max_iterations": profile.stop_step - profile.start_step,
        });
        match profile.kind {
            crate::recipe::runtime::ProfilerKind::Nsys => config["profiler"] = "cuda".into(),
            crate::recipe::runtime::ProfilerKind::Torch => {
                config["profiler"] = "torch".into();
                config["torch_profiler_dir"] = profile.dir.clone().into();
            }
        }
        process.argv.extend([FLAG.to_string(), config.to_string()]);
        Ok(())
    }

    fn managed(&self) -> &'static [(&'static str, &'static str)] {
        MANAGED
    }

    fn managed_env(&self) -> &'static [&'static str] {
        MANAGED_ENV
    }

    fn placement_env(&self) -> &'static [&'static str] {
        PLACEMENT_ENV
    }

    fn catalog(&self, version: Option<&str>) -> Result<&'static Catalog, Vec<&'static str>> {
        super::catalog_of(catalogs(), CATALOGS, version)
    }

    fn connector_names(&self) -> &'static [&'static str] {
        connector::NAMES
    }

    fn connector(&self, recipe: &Recipe, role: &Role) -> Result<ConnectorChoice, Problem> {
        let c = connector::for_role(recipe, role)?;
        Ok(ConnectorChoice {
            role: role.kind,
            name: c.name,
            discovery: c.discovery,
            // A role's own `kv-transfer-config` brings a connector of its own (NIXL).
            protocol: match connector::own_config(c, role) {
                true => crate::launch::PdProtocol::KvTransferParams,
                false => c.protocol,
            },
            span: role
                .connector
                .as_ref()
                .map_or_else(|| keys::connector(recipe).span, |s| s.span),
        })
    }

    fn keys(&self) -> &'static [crate::recipe::keys::Key] {
        keys::KEYS
    }

    fn validate(&self, recipe: &Recipe, problems: &mut Vec<Problem>) {
        validate::recipe(self, recipe, problems);
    }

    fn feature_flags(
        &self,
        recipe: &Recipe,
        feature: WorkerFeature,
    ) -> Result<Vec<(String, ArgValue)>, String> {
        let version = keys::version(recipe).map(|v| v.value);
        // An unknown release is refused on its own (`engine.version`); judge by the
        // default one meanwhile.
        let catalog = self
            .catalog(version)
            .or_else(|_| self.catalog(None))
            .map_err(|_| "srt has no flag catalog for it".to_string())?;
        match feature {
            // vLLM 0.32 answers the render routes 403 ("Scale-out endpoints are
            // disabled") unless `vllm serve` gets --enable-scale-out.
            WorkerFeature::PromptRender => match catalog.resolve(SCALE_OUT) {
                crate::catalog::Resolution::Exact(..) => {
                    Ok(vec![(SCALE_OUT.to_string(), ArgValue::Bool(true))])
                }
                _ => Err(format!(
                    "vLLM {} has no --{SCALE_OUT}, which opens its render endpoints",
                    catalog.version
                )),
            },
            WorkerFeature::LoadReport => Err(format!(
                "vLLM {} reports its load at GET /load and answers /get_load with 404",
                catalog.version
            )),
            WorkerFeature::KvCacheInfo => Err(format!(
                "vLLM {} answers /get_server_info with 404, so the Router cannot index its KV cache (it logs \"cannot index\" and routes without KV awareness)",
                catalog.version
            )),
        }
    }

    fn worker_processes(
        &self,
        ctx: &mut BuildContext<'_>,
        recipe: &Recipe,
        role: &Role,
        endpoint: &Endpoint,
        features: &[WorkerFeature],
        runtime: Option<&'static str>,
    ) -> Result<Vec<LaunchProcess>, Problem> {
        let connector = connector::for_role(recipe, role)?;
        // Checked by the assembly (`runtime_wrapper`) before any worker is built.
        let wrapper = runtime.and_then(|r| WRAPPERS.iter().find(|w| w.runtime == r));
        let mut extra = Vec::new();
        for f in features {
            // Checked by the assembly before any worker is built.
            extra.extend(self.feature_flags(recipe, *f).unwrap_or_default());
        }
        let serve_as = process::ServeAs {
            feature_flags: extra,
            wrapper,
        };
        process::endpoint_processes(self, ctx, recipe, role, connector, endpoint, serve_as)
    }

    fn runtime_wrapper(&self, runtime: &str) -> Result<&'static [&'static str], String> {
        super::wrapper_program("vLLM", WRAPPERS, runtime)
    }

    fn serving(
        &self,
        recipe: &Recipe,
        role: &Role,
        endpoint: &Endpoint,
        process: &LaunchProcess,
    ) -> Serving {
        let arg = |flag: &str| role.args.get(flag).map(|a| a.value.render());
        // The ranks behind this process: a node of a hybrid-LB endpoint serves its own,
        // the leader of any other endpoint all of them.
        let data_parallel = match shape::shape(role, endpoint) {
            Ok(shape::Shape::DpLocal { local_dp }) => local_dp,
            _ => shape::sizes(role).map_or(1, |s| s.dp),
        };
        Serving {
            model_path: recipe.model.path.value.clone(),
            served_name: recipe.model.served_name.clone(),
            block_size: arg("block-size"),
            max_num_seqs: arg("max-num-seqs"),
            max_num_batched_tokens: arg("max-num-batched-tokens"),
            data_parallel,
            bootstrap_port: process.ports.get(crate::ports::NIXL.name).map(|b| b.base),
            family: "vllm",
            follower_connects: super::wrapper_of(WRAPPERS, &process.argv)
                .is_some_and(|w| w.followers_connect),
        }
    }
}

/// The requests a vLLM server is working on, from its Prometheus text: the sum of
/// `vllm:num_requests_running` and `vllm:num_requests_waiting` over every engine label.
/// `None` when neither is there.
fn requests_in_flight(metrics: &str) -> Option<u64> {
    let mut seen = false;
    let mut total = 0.0;
    for line in metrics.lines() {
        let Some(rest) = line
            .strip_prefix("vllm:num_requests_running")
            .or_else(|| line.strip_prefix("vllm:num_requests_waiting"))
        else {
            continue;
        };
        if !(rest.starts_with('{') || rest.starts_with(' ')) {
            continue;
        }
        if let Some(v) = rest.rsplit(' ').next().and_then(|v| v.parse::<f64>().ok()) {
            seen = true;
            total += v;
        }
    }
    seen.then_some(total.max(0.0).round() as u64)
}

#[cfg(test)]
mod in_flight_tests {
    use super::requests_in_flight;

    #[test]
    fn running_and_waiting_are_summed_over_engines() {
        let text = "# HELP vllm:num_requests_running Number of requests\n\
vllm:num_requests_running{engine=\"0\",model_name=\"tiny\"} 2.0\n\
vllm:num_requests_running{engine=\"1\",model_name=\"tiny\"} 1.0\n\
vllm:num_requests_waiting{engine=\"0\",model_name=\"tiny\"} 3.0\n\
vllm:num_requests_running_total 99\n";
        assert_eq!(requests_in_flight(text), Some(6));
        assert_eq!(requests_in_flight("vllm:num_requests_running 0\n"), Some(0));
        assert_eq!(requests_in_flight("other 1\n"), None);
    }
}
