//! From parsed arguments and environment to a validated process topology: which DP ranks
//! this process hosts and fronts, what it refuses (as vLLM 0.32 does), and the simulator's
//! own knobs.

use std::collections::HashMap;
use std::time::Duration;

use super::args::{self, ServeArgs};
use super::kv::{Connector, KvConfig};
use super::ports::{self, PlannedListener};
use crate::common::knobs::{env_ms, env_on, Knobs};
use crate::common::sched::Timing;
use crate::common::text;
use crate::SimError;

/// How the DP ranks are load-balanced, after vLLM's own rewrites.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LbMode {
    /// One API server (per DP group) fronts every rank.
    Internal,
    /// Each node's API server fronts its own ranks.
    Hybrid,
    /// One API server per rank.
    External,
}

/// The vLLM simulator's own knobs (see the crate docs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VllmKnobs {
    /// `SRT_SIM_NIXL_HANDSHAKE` (1): decode stages check the prefill's side channel.
    pub kv_handshake: bool,
    /// `SRT_SIM_REGISTER_INTERVAL_MS` (3000): MoRI-IO registration period.
    pub register_interval: Duration,
}

/// A validated simulator configuration.
#[derive(Debug, Clone)]
pub struct SimConfig {
    /// The parsed command line.
    pub args: ServeArgs,
    /// The KV connector, when one is configured.
    pub kv: Option<KvConfig>,
    /// Names the model answers to; the first is the one reported.
    pub served_names: Vec<String>,
    /// Whether this process runs the HTTP API server.
    pub api_server: bool,
    /// Load-balancing mode after vLLM's rewrites.
    pub lb_mode: LbMode,
    /// Global DP size.
    pub dp_size: u32,
    /// Global ranks of the engine cores running in this process.
    pub local_ranks: Vec<u32>,
    /// Global ranks the API server routes to (empty without an API server).
    pub api_ranks: Vec<u32>,
    /// Whether this process is the DP leader that binds the DP RPC port.
    pub dp_leader: bool,
    /// `VLLM_NIXL_SIDE_CHANNEL_HOST` (localhost).
    pub nixl_host: String,
    /// `VLLM_NIXL_SIDE_CHANNEL_PORT` (5600).
    pub nixl_base_port: u16,
    /// MoRI-IO `host_ip`, else `VLLM_HOST_IP`, else 127.0.0.1.
    pub mori_host_ip: String,
    /// Every listener this process binds, HTTP included.
    pub listeners: Vec<PlannedListener>,
    /// Non-fatal remarks to log at startup.
    pub warnings: Vec<String>,
    /// The knobs every simulator reads.
    pub knobs: Knobs,
    /// The vLLM simulator's own.
    pub vllm_knobs: VllmKnobs,
    /// The timing model of every engine (knobs and `--max-num-seqs`,
    /// `--max-num-batched-tokens`).
    pub timing: Timing,
    /// The model's `tokenizer.json` (`--tokenizer`, else the model path), when there is
    /// one: prompt tokens are counted with it, else as words.
    pub tokenizer: Option<std::path::PathBuf>,
}

impl SimConfig {
    /// The reported model name.
    pub fn model_name(&self) -> &str {
        &self.served_names[0]
    }

    /// The host part of this server's address, as logged and reported in `served_by`.
    pub fn http_host(&self) -> &str {
        match self.args.host.as_deref() {
            None | Some("") => "0.0.0.0",
            Some(h) => h,
        }
    }

    /// Parses and validates `argv` (after the program name) against `env`.
    pub fn from_argv_env(
        argv: &[String],
        env: &HashMap<String, String>,
    ) -> Result<SimConfig, SimError> {
        let args = args::parse(argv).map_err(|e| match e.0.as_str() {
            "help requested" => SimError::Help,
            _ => SimError::Usage(e.0),
        })?;
        derive(args, env).map_err(SimError::Refused)
    }
}

fn vllm_knobs(env: &HashMap<String, String>) -> Result<VllmKnobs, String> {
    Ok(VllmKnobs {
        kv_handshake: env_on(env, "SRT_SIM_NIXL_HANDSHAKE"),
        register_interval: env_ms(env, "SRT_SIM_REGISTER_INTERVAL_MS")?
            .unwrap_or(Duration::from_secs(3)),
    })
}

/// vLLM's `get_vllm_port`: unset is fine, an integer is fine, a URI (as Kubernetes injects
/// for a service named `vllm`) or anything else is an error.
fn check_vllm_port(env: &HashMap<String, String>) -> Result<(), String> {
    let Some(v) = env.get("VLLM_PORT") else {
        return Ok(());
    };
    if v.trim().parse::<i64>().is_ok() {
        return Ok(());
    }
    if let Some((scheme, _)) = v.split_once("://") {
        if !scheme.is_empty() {
            return Err(format!(
                "VLLM_PORT '{v}' appears to be a URI. This may be caused by a Kubernetes \
                 service discovery issue (a service named 'vllm'); unset VLLM_PORT or set it \
                 to a port number"
            ));
        }
    }
    Err(format!("VLLM_PORT '{v}' must be a valid integer"))
}

/// The value of an extra (unmodelled) flag.
fn extra<'a>(a: &'a ServeArgs, name: &str) -> Option<&'a str> {
    a.extra
        .iter()
        .rev()
        .find(|f| f.name == name)
        .and_then(|f| f.value.as_deref())
}

/// The timing model: the knobs' costs and vLLM's scheduler limits.
fn timing(a: &ServeArgs, k: &Knobs) -> Result<Timing, String> {
    let int = |name: &str, default: u64| -> Result<u64, String> {
        match extra(a, name) {
            None => Ok(default),
            Some(v) => v
                .trim()
                .parse::<u64>()
                .ok()
                .filter(|n| *n >= 1)
                .ok_or_else(|| format!("argument --{name}: invalid int value: '{v}'")),
        }
    };
    let d = Timing::default();
    Ok(k.timing(
        int("max-num-seqs", d.max_num_seqs as u64)? as usize,
        int("max-num-batched-tokens", d.max_batched_tokens)?,
    ))
}

/// `tokenizer.json` of `--tokenizer`, else of the model path (a file, or a directory
/// holding one).
fn tokenizer_file(a: &ServeArgs) -> Option<std::path::PathBuf> {
    text::tokenizer_file(std::path::Path::new(
        extra(a, "tokenizer").unwrap_or(&a.model),
    ))
}

fn derive(a: ServeArgs, env: &HashMap<String, String>) -> Result<SimConfig, String> {
    let knobs = Knobs::from_env(env)?;
    let vllm_knobs = vllm_knobs(env)?;
    check_vllm_port(env)?;
    let mut warnings = Vec::new();

    for (name, v) in [
        ("tensor-parallel-size", a.tensor_parallel_size),
        ("pipeline-parallel-size", a.pipeline_parallel_size),
        (
            "prefill-context-parallel-size",
            a.prefill_context_parallel_size,
        ),
        ("data-parallel-size", a.data_parallel_size),
        ("nnodes", a.nnodes),
    ] {
        if v == 0 {
            return Err(format!("--{name} must be at least 1"));
        }
    }

    // serve.py: --headless forces api_server_count to 0 and refuses an explicit count.
    if a.headless {
        if let Some(n) = a.api_server_count.filter(|n| *n > 0) {
            return Err(format!(
                "--api-server-count={n} cannot be used with --headless (no API servers are \
                 started in headless mode)"
            ));
        }
    }
    // api_server_count < 1 also runs the headless path.
    let headless = a.headless || a.api_server_count == Some(0);

    let kv = match &a.kv_transfer_config {
        None => None,
        Some(v) => KvConfig::from_json(v)?,
    };

    // EngineArgs.create_engine_config, in vLLM's order.
    let dp = a.data_parallel_size;
    let tp = a.tensor_parallel_size;
    let pp = a.pipeline_parallel_size;
    let mut hybrid = a.data_parallel_hybrid_lb;
    if headless && hybrid {
        return Err(
            "data_parallel_hybrid_lb is not applicable in headless mode \
                    (--data-parallel-hybrid-lb with --headless)"
                .into(),
        );
    }
    if hybrid && a.data_parallel_external_lb {
        return Err(
            "data_parallel_hybrid_lb and data_parallel_external_lb cannot both be True \
                    (--data-parallel-hybrid-lb with --data-parallel-external-lb)"
                .into(),
        );
    }
    if a.data_parallel_backend != "mp" && a.nnodes > 1 {
        return Err(format!(
            "nnodes > 1 is only supported with data_parallel_backend=mp (got --nnodes {} with \
             --data-parallel-backend {})",
            a.nnodes, a.data_parallel_backend
        ));
    }
    let mut rank = a.data_parallel_rank;
    let mut dpl_opt = a.data_parallel_size_local;
    let mut inferred_rank = 0;
    let mut follower = false;
    let mut node_local_world = None;
    if a.nnodes > 1 {
        let world = dp * pp * tp;
        let within_dp = pp * tp;
        if !world.is_multiple_of(a.nnodes) {
            return Err(format!(
                "world_size={world} must be divisible by nnodes={}",
                a.nnodes
            ));
        }
        if a.node_rank >= a.nnodes {
            return Err(format!(
                "node_rank={} must be less than nnodes={}",
                a.node_rank, a.nnodes
            ));
        }
        let local_world = world / a.nnodes;
        node_local_world = Some(local_world);
        inferred_rank = (a.node_rank * local_world) / within_dp;
        if within_dp > local_world {
            // One DP rank spans several nodes; only its first node hosts the engine core.
            let nodes_per_dp = within_dp.div_ceil(local_world);
            follower = !a.node_rank.is_multiple_of(nodes_per_dp);
        }
        if dp > 1 && a.data_parallel_external_lb {
            rank = Some(inferred_rank);
        } else if dpl_opt.is_none() {
            dpl_opt = Some((local_world / within_dp).max(1));
        }
    }
    let mut external = a.data_parallel_external_lb || rank.is_some();
    if dp > 1 && external && !a.enable_expert_parallel {
        return Err(
            "Non-MoE models do not support external data parallel mode. For external \
                    load balancing, launch independent vLLM instances without \
                    --data-parallel-* arguments. (The simulator treats a model as MoE only \
                    with --enable-expert-parallel.)"
                .into(),
        );
    }
    let dpl: u32;
    let first_rank: u32;
    if external {
        let Some(r) = rank else {
            return Err("data_parallel_rank or node_rank must be specified if \
                        data_parallel_external_lb is enabled (--data-parallel-external-lb \
                        needs --data-parallel-rank)"
                .into());
        };
        if !matches!(a.data_parallel_size_local, None | Some(1)) {
            return Err(format!(
                "data_parallel_size_local must be 1 or None when data_parallel_rank is set \
                 (got --data-parallel-size-local {})",
                a.data_parallel_size_local.unwrap_or_default()
            ));
        }
        dpl = 1;
        hybrid = false;
        first_rank = r;
    } else if let Some(local) = dpl_opt {
        dpl = local;
        if a.data_parallel_start_rank.unwrap_or(0) > 0 && !headless {
            hybrid = true;
        }
        if hybrid && dpl == 1 {
            warnings.push(
                "data_parallel_hybrid_lb is not eligible when data_parallel_size_local = 1, \
                 autoswitch to data_parallel_external_lb."
                    .into(),
            );
            external = true;
            hybrid = false;
        }
        if dpl == dp {
            hybrid = false;
        }
        first_rank = a
            .data_parallel_start_rank
            .filter(|r| *r > 0)
            .unwrap_or(inferred_rank);
    } else {
        if hybrid {
            return Err(
                "data_parallel_size_local must be set to use data_parallel_hybrid_lb \
                        (--data-parallel-hybrid-lb needs --data-parallel-size-local)"
                    .into(),
            );
        }
        dpl = dp;
        first_rank = 0;
    }
    if first_rank >= dp {
        return Err(format!(
            "data_parallel_rank ({first_rank}) must be in the range [0, {dp})"
        ));
    }
    if first_rank + dpl > dp {
        return Err(format!(
            "local DP ranks {first_rank}..{} exceed data_parallel_size {dp}",
            first_rank + dpl
        ));
    }
    if headless && dpl == 0 && !follower {
        return Err("data_parallel_size_local must be > 0 in headless mode \
                    (--headless with --data-parallel-size-local 0)"
            .into());
    }
    let lb_mode = if external {
        LbMode::External
    } else if hybrid {
        LbMode::Hybrid
    } else {
        LbMode::Internal
    };

    let local_ranks: Vec<u32> = if follower {
        vec![]
    } else {
        (first_rank..first_rank + dpl).collect()
    };
    let api_server = !headless;
    let api_ranks: Vec<u32> = match (api_server, lb_mode) {
        (false, _) => vec![],
        (true, LbMode::Internal) => (0..dp).collect(),
        (true, _) => (first_rank..first_rank + dpl).collect(),
    };
    let dp_leader = api_server && first_rank == 0 && dp > 1 && dpl < dp;

    // Devices: one per worker of every engine core hosted here; a node holding a slice of
    // a DP rank that spans nodes holds its share of that rank's workers.
    let per_engine = tp * pp * a.prefill_context_parallel_size;
    let expected_devices = match node_local_world {
        Some(lw) if pp * tp > lw => lw * a.prefill_context_parallel_size,
        _ => per_engine * local_ranks.len() as u32,
    };
    // vLLM 0.32 takes each rank's slice of `--device-ids` and refuses a list too short
    // for it (`get_physical_gpu_ids_for_local_dp_rank`); extra entries go unused.
    if let Some(ids) = &a.device_ids {
        if (ids.len() as u32) < expected_devices {
            return Err(format!(
                "--device-ids lists {} device(s) ({}) but this process needs {expected_devices}: \
                 tp({tp}) x pp({pp}) x pcp({}) x local DP engines({})",
                ids.len(),
                ids.iter().map(u32::to_string).collect::<Vec<_>>().join(","),
                a.prefill_context_parallel_size,
                local_ranks.len()
            ));
        }
    }

    let nixl_host = env
        .get("VLLM_NIXL_SIDE_CHANNEL_HOST")
        .filter(|s| !s.is_empty())
        .cloned()
        .unwrap_or_else(|| "localhost".into());
    let nixl_base_port = match env.get("VLLM_NIXL_SIDE_CHANNEL_PORT") {
        None => 5600,
        Some(v) => v
            .trim()
            .parse::<u16>()
            .map_err(|_| format!("VLLM_NIXL_SIDE_CHANNEL_PORT must be a port number, got '{v}'"))?,
    };
    let mori = kv.as_ref().and_then(|k| k.mori.clone());
    let mori_host_ip = mori
        .as_ref()
        .and_then(|m| m.host_ip.clone())
        .or_else(|| env.get("VLLM_HOST_IP").filter(|s| !s.is_empty()).cloned())
        .unwrap_or_else(|| "127.0.0.1".into());
    if let Some(m) = &mori {
        if api_server && m.http_port != a.port {
            warnings.push(format!(
                "kv_connector_extra_config.http_port ({}) differs from --port ({}): the router \
                 will be sent to the advertised port",
                m.http_port, a.port
            ));
        }
        if m.proxy_ip.is_empty() {
            warnings.push(
                "MoRIIOConnector without proxy_ip: this engine will not register with a router"
                    .into(),
            );
        }
    }

    let served_names = a.served_names();
    let timing = timing(&a, &knobs)?;
    let tokenizer = tokenizer_file(&a);
    if tokenizer.is_none() {
        warnings.push(format!(
            "no tokenizer.json for {}: prompt tokens are counted as words",
            a.extra
                .iter()
                .find(|f| f.name == "tokenizer")
                .and_then(|f| f.value.as_deref())
                .unwrap_or(&a.model)
        ));
    }
    let mut cfg = SimConfig {
        timing,
        tokenizer,
        kv,
        served_names,
        api_server,
        lb_mode,
        dp_size: dp,
        local_ranks,
        api_ranks,
        dp_leader,
        nixl_host,
        nixl_base_port,
        mori_host_ip,
        listeners: vec![],
        warnings,
        knobs,
        vllm_knobs,
        args: a,
    };
    cfg.listeners = ports::plan(&cfg)?;
    if let Some(kv) = &cfg.kv {
        if let Connector::Other(name) = &kv.connector {
            cfg.warnings.push(format!(
                "the simulator does not model {name}; requests are served as aggregate"
            ));
        }
    }
    Ok(cfg)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg_env(argv: &str, env: &[(&str, &str)]) -> Result<SimConfig, SimError> {
        let argv: Vec<String> = shlex::split(argv).unwrap();
        let env = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        SimConfig::from_argv_env(&argv, &env)
    }

    fn cfg(argv: &str) -> Result<SimConfig, SimError> {
        cfg_env(argv, &[])
    }

    fn refused(argv: &str) -> String {
        match cfg(argv) {
            Err(SimError::Refused(m)) => m,
            other => panic!("expected a refusal for {argv}, got {other:?}"),
        }
    }

    #[test]
    fn brief_example_is_hybrid_head() {
        let c = cfg(r#"serve /model --host 0.0.0.0 --port 6100 --data-parallel-size-local 4 --data-parallel-start-rank 0 --data-parallel-address 10.0.0.1 --data-parallel-rpc-port 8400 --data-parallel-hybrid-lb --data-parallel-size 8 --device-ids 0,1,2,3 --enable-expert-parallel --kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_both"}' --served-model-name model --tensor-parallel-size 1"#).unwrap();
        assert_eq!(c.lb_mode, LbMode::Hybrid);
        assert_eq!(c.local_ranks, vec![0, 1, 2, 3]);
        assert_eq!(c.api_ranks, vec![0, 1, 2, 3]);
        assert!(c.dp_leader);
        assert!(c.api_server);
        assert_eq!(c.model_name(), "model");
    }

    #[test]
    fn secondary_hybrid_node_infers_hybrid() {
        let c = cfg("serve m -dp 8 -dpl 4 -dpr 4 -ep").unwrap();
        assert_eq!(c.lb_mode, LbMode::Hybrid);
        assert_eq!(c.local_ranks, vec![4, 5, 6, 7]);
        assert_eq!(c.api_ranks, vec![4, 5, 6, 7]);
        assert!(!c.dp_leader);
    }

    #[test]
    fn internal_lb_defaults() {
        let c = cfg("serve m -dp 2").unwrap();
        assert_eq!(c.lb_mode, LbMode::Internal);
        assert_eq!(c.local_ranks, vec![0, 1]);
        assert!(!c.dp_leader, "single-node DP uses IPC, not the RPC port");
        let c = cfg("serve m -dp 4 -dpl 0 --data-parallel-address 127.0.0.1").unwrap();
        assert!(c.local_ranks.is_empty());
        assert_eq!(c.api_ranks, vec![0, 1, 2, 3]);
        assert!(c.dp_leader);
        let c = cfg("serve m -dp 4 -dpl 2 -dpr 2 --headless").unwrap();
        assert_eq!(c.lb_mode, LbMode::Internal);
        assert_eq!(c.local_ranks, vec![2, 3]);
        assert!(!c.api_server && !c.dp_leader && c.api_ranks.is_empty());
    }

    #[test]
    fn rewrites() {
        // hybrid with one local rank becomes external.
        let c = cfg("serve m -dp 2 -dpl 1 -dph -ep").unwrap();
        assert_eq!(c.lb_mode, LbMode::External);
        // hybrid with local = global is turned off.
        let c = cfg("serve m -dp 2 -dpl 2 -dph").unwrap();
        assert_eq!(c.lb_mode, LbMode::Internal);
        // explicit rank: external, MoE only.
        let c = cfg("serve m -dp 2 -dpn 1 -ep").unwrap();
        assert_eq!(c.lb_mode, LbMode::External);
        assert_eq!(c.local_ranks, vec![1]);
        assert_eq!(c.api_ranks, vec![1]);
        // --data-parallel-rank with dp 1 is not refused for a dense model.
        assert!(cfg("serve m -dpn 0").is_ok());
    }

    #[test]
    fn multi_node_inference() {
        let c = cfg("serve m -dp 4 -tp 2 -n 2 -r 1 --headless").unwrap();
        assert_eq!(c.local_ranks, vec![2, 3]);
        // a DP rank spanning two nodes: the second node hosts no engine core.
        let c = cfg("serve m -tp 16 -n 2 -r 1 --headless --device-ids 0,1,2,3,4,5,6,7").unwrap();
        assert!(c.local_ranks.is_empty());
        let c = cfg("serve m -tp 16 -n 2 -r 0 --device-ids 0,1,2,3,4,5,6,7").unwrap();
        assert_eq!(c.local_ranks, vec![0]);
    }

    #[test]
    fn refusals() {
        assert!(refused("serve m -dp 8 -dph").contains("data_parallel_size_local"));
        assert!(refused("serve m -dp 8 -dpl 4 -dph --headless").contains("headless"));
        assert!(refused("serve m --headless --api-server-count 1").contains("--api-server-count"));
        assert!(refused("serve m -dp 2 -dpl 0 --headless").contains("> 0 in headless"));
        assert!(refused("serve m -n 2 -dp 2 -dpb ray").contains("nnodes > 1"));
        assert!(refused("serve m -dp 2 -dpe -ep").contains("data_parallel_rank"));
        assert!(refused("serve m -dp 2 -dpn 0 -dpl 2 -ep").contains("must be 1 or None"));
        assert!(refused("serve m -dp 2 -dpn 1").contains("Non-MoE"));
        assert!(refused("serve m -dp 2 -dpe -dph -ep").contains("cannot both"));
        assert!(refused("serve m -dp 2 -dpn 2 -ep").contains("range"));
        assert!(refused("serve m -dp 4 -dpl 2 -dpr 3 -ep").contains("exceed"));
        assert!(refused("serve m -tp 2 --device-ids 0").contains("--device-ids"));
        assert!(refused("serve m -dp 2 -tp 2 --device-ids 0,1,2").contains("--device-ids"));
        assert!(refused("serve m -tp 0").contains("at least 1"));
        assert!(refused("serve m -n 3 -dp 2").contains("divisible"));
        assert!(refused("serve m -n 2 -r 2 -dp 2").contains("node_rank"));
        assert!(
            refused(r#"serve m --kv-transfer-config '{"kv_connector":"NixlConnector"}'"#)
                .contains("kv_role")
        );
        assert!(refused(
            r#"serve m --kv-transfer-config '{"kv_connector":"MoRIIOConnector","kv_role":"kv_both","kv_connector_extra_config":{"http_port":8000}}'"#
        )
        .contains("kv_both"));
        assert!(refused(
            r#"serve m --kv-transfer-config '{"kv_connector":"MoRIIOConnector","kv_role":"kv_producer"}'"#
        )
        .contains("http_port"));
    }

    #[test]
    fn device_ids_accepted_when_matching() {
        assert!(cfg("serve m -tp 2 -dp 2 --device-ids 0,1,2,3").is_ok());
        assert!(cfg("serve m -tp 2 -dp 4 -dpl 2 -dpr 2 -ep --device-ids 4,5,6,7").is_ok());
        // Extra devices are left unused, as vLLM does.
        assert!(cfg("serve m --device-ids 0,1").is_ok());
    }

    #[test]
    fn vllm_port_env() {
        let uri = cfg_env("serve m", &[("VLLM_PORT", "tcp://10.0.0.1:8000")]);
        assert!(matches!(uri, Err(SimError::Refused(m)) if m.contains("URI")));
        let junk = cfg_env("serve m", &[("VLLM_PORT", "abc")]);
        assert!(matches!(junk, Err(SimError::Refused(m)) if m.contains("integer")));
        assert!(cfg_env("serve m", &[("VLLM_PORT", "29000")]).is_ok());
    }

    #[test]
    fn usage_errors_are_not_refusals() {
        let argv = vec!["serve".to_string()];
        assert!(matches!(
            SimConfig::from_argv_env(&argv, &HashMap::new()),
            Err(SimError::Usage(_))
        ));
    }

    #[test]
    fn knob_parsing() {
        let c = cfg_env(
            "serve m",
            &[
                ("SRT_SIM_STARTUP_DELAY_MS", "5"),
                ("SRT_SIM_EXIT_DURING_STARTUP", "3"),
                ("SRT_SIM_NIXL_HANDSHAKE", "0"),
            ],
        )
        .unwrap();
        assert_eq!(c.knobs.startup_delay, Duration::from_millis(5));
        assert_eq!(c.knobs.exit_during_startup, Some(3));
        assert!(!c.vllm_knobs.kv_handshake);
        assert!(cfg_env("serve m", &[("SRT_SIM_STARTUP_DELAY_MS", "soon")]).is_err());
    }
}
