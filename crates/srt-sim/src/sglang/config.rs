//! From the parsed command line and the environment to a validated process: what SGLang
//! 0.5.23's `resolve_once()` rewrites and what it and `check_server_args()` refuse, the
//! GPUs this node needs, its role in a prefill/decode pair, and the ports it binds.

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Duration;

use serde_json::Value;

use super::args::{self, LaunchArgs};
use super::ports::{self, PlannedListener};
use crate::common::argparse::ParseError;
use crate::common::knobs::{env_ms, Knobs};
use crate::common::sched::Timing;
use crate::common::text;
use crate::SimError;

/// `--disaggregation-mode`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// `null`: an aggregated server.
    Null,
    /// `prefill`: computes prompts, runs the bootstrap server.
    Prefill,
    /// `decode`: generates from a prefill's KV.
    Decode,
}

impl Mode {
    /// SGLang's name for the mode (`/model_info`, `/server_info`).
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Null => "null",
            Mode::Prefill => "prefill",
            Mode::Decode => "decode",
        }
    }

    /// The metrics' `engine_type` label.
    pub fn engine_type(self) -> &'static str {
        match self {
            Mode::Null => "unified",
            Mode::Prefill => "prefill",
            Mode::Decode => "decode",
        }
    }
}

/// The SGLang simulator's own knobs (see the crate docs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SglangKnobs {
    /// `SRT_SIM_PD_WAIT_MS` (30000): how long a decode waits for its room's prefill.
    pub pd_wait: Duration,
}

/// A validated SGLang simulator configuration.
#[derive(Debug, Clone)]
pub struct SimConfig {
    /// The parsed command line.
    pub args: LaunchArgs,
    /// The knobs every simulator reads.
    pub knobs: Knobs,
    /// The SGLang simulator's own.
    pub sglang_knobs: SglangKnobs,
    /// `--disaggregation-mode`.
    pub mode: Mode,
    /// Data-parallel replicas after the deprecated `--enable-dp-attention` rewrite.
    pub dp_size: i64,
    /// Attention-DP groups after that rewrite.
    pub attn_dp_size: i64,
    /// `--load-balance-method` as resolved (`auto` made explicit).
    pub load_balance_method: String,
    /// `--disaggregation-transfer-backend` as resolved (`mooncake_tcp` is `mooncake`).
    pub transfer_backend: String,
    /// Node rank 0: the API server, tokenizer and (on a prefill) the bootstrap server;
    /// other nodes serve only the stand-in health server.
    pub leader: bool,
    /// The address prefill ranks register with the bootstrap server (`--dist-init-addr`'s
    /// host across nodes, else `--host` with 0.0.0.0 made 127.0.0.1).
    pub rank_ip: String,
    /// Every port this process binds, HTTP included.
    pub listeners: Vec<PlannedListener>,
    /// The timing model of every DP rank.
    pub timing: Timing,
    /// The model's `tokenizer.json` (`--tokenizer-path`, else the model path).
    pub tokenizer: Option<PathBuf>,
    /// The model's `config.json`, when there is one.
    pub model_config: Option<Value>,
    /// `--context-length`, else the model's `max_position_embeddings`.
    pub context_length: Option<u64>,
    /// Non-fatal remarks to log at startup.
    pub warnings: Vec<String>,
    /// `python3 -m sglang.launch_server ...` as given (`/server_info`'s `launch_command`).
    pub launch_command: String,
}

impl SimConfig {
    /// DP ranks the server schedules on: replicas, else attention-DP groups.
    pub fn num_dp_ranks(&self) -> u32 {
        self.dp_size.max(self.attn_dp_size).max(1) as u32
    }

    /// Parses and validates `argv` (after the program name) against `env`.
    pub fn from_argv_env(
        argv: &[String],
        env: &HashMap<String, String>,
    ) -> Result<SimConfig, SimError> {
        let args = args::parse(argv).map_err(|e| match e {
            ParseError::Help => SimError::Help,
            ParseError::Usage(m) => SimError::Usage(m),
        })?;
        let launch_command = std::iter::once("python3 -m sglang.launch_server".to_string())
            .chain(
                argv.iter()
                    .map(|a| shlex::try_quote(a).map_or(a.clone(), Into::into)),
            )
            .collect::<Vec<_>>()
            .join(" ");
        derive(args, env, launch_command).map_err(SimError::Refused)
    }
}

/// SGLang's `NetworkAddress.parse`: `host:port` or `[v6]:port`.
pub(crate) fn parse_addr(addr: &str) -> Result<(String, i64), String> {
    let port = |p: &str| {
        p.parse::<i64>()
            .map_err(|_| format!("ValueError: Invalid port in address: {p:?}"))
    };
    if addr.is_empty() {
        return Err("ValueError: Empty address string".into());
    }
    if let Some(rest) = addr.strip_prefix('[') {
        let Some((host, after)) = rest.split_once(']') else {
            return Err(format!(
                "ValueError: Missing closing bracket in IPv6 address: {addr:?}"
            ));
        };
        let Some(p) = after.strip_prefix(':').filter(|p| !p.is_empty()) else {
            return Err(format!(
                "ValueError: Expected ':port' after closing bracket, got: {after:?}"
            ));
        };
        return Ok((host.to_string(), port(p)?));
    }
    let Some((host, p)) = addr.rsplit_once(':') else {
        return Err(format!(
            "ValueError: Missing port in address (expected host:port): {addr:?}"
        ));
    };
    if host.is_empty() {
        return Err(format!("ValueError: Empty host in address: {addr:?}"));
    }
    if host.contains(':') {
        return Err(format!(
            "ValueError: Bare IPv6 address without brackets is ambiguous: {addr:?}. Use \
             [{host}]:{p} instead."
        ));
    }
    Ok((host.to_string(), port(p)?))
}

/// The number of devices `CUDA_VISIBLE_DEVICES` lists (`None` when unset).
fn visible_devices(env: &HashMap<String, String>) -> Option<usize> {
    env.get("CUDA_VISIBLE_DEVICES")
        .map(|v| v.split(',').filter(|d| !d.trim().is_empty()).count())
}

/// The model's `config.json`: the model path's, when it is a directory holding one.
fn model_config(model_path: &str) -> Option<Value> {
    let text =
        std::fs::read_to_string(std::path::Path::new(model_path).join("config.json")).ok()?;
    serde_json::from_str(&text).ok()
}

fn derive(
    a: LaunchArgs,
    env: &HashMap<String, String>,
    launch_command: String,
) -> Result<SimConfig, String> {
    let knobs = Knobs::from_env(env)?;
    let sglang_knobs = SglangKnobs {
        pd_wait: env_ms(env, "SRT_SIM_PD_WAIT_MS")?.unwrap_or(Duration::from_secs(30)),
    };
    let mut warnings = Vec::new();

    for (flag, v) in [
        ("--tp-size", a.tp_size),
        ("--pp-size", a.pp_size),
        ("--dp-size", a.dp_size),
        ("--nnodes", a.nnodes),
    ] {
        if v < 1 {
            return Err(format!(
                "{flag} must be at least 1, got {v} (the simulator's own check)"
            ));
        }
    }

    // resolve_once(): the deprecated spelling first (parallel_hook's
    // _handle_deprecated_dp_attention), then the data-parallel layout.
    let (mut dp, mut attn_dp) = (a.dp_size, a.attn_dp_size);
    if a.enable_dp_attention && attn_dp == 1 {
        attn_dp = dp;
        dp = 1;
        warnings.push(
            "--enable-dp-attention is deprecated: use --attn-dp-size <dp-size> instead of \
             --dp-size <dp-size> --enable-dp-attention"
                .into(),
        );
    }
    if attn_dp < 1 {
        return Err(format!(
            "ValueError: --attn-dp-size must be positive (got {attn_dp})."
        ));
    }
    if attn_dp > 1 && dp > 1 {
        return Err(format!(
            "ValueError: --dp-size {dp} with --attn-dp-size {attn_dp}: data-parallel replicas \
             combined with attention data parallelism are not supported."
        ));
    }
    let tp = a.tp_size;
    if attn_dp > 1 && tp % attn_dp != 0 {
        return Err(format!(
            "AssertionError (assert tp_size % attn_dp_size == 0 in arg_groups/parallel_hook.py: \
             tp_size {tp}, attn_dp_size {attn_dp}; SGLang prints no message)"
        ));
    }
    let mode = match a.disaggregation_mode.as_str() {
        "prefill" => Mode::Prefill,
        "decode" => Mode::Decode,
        _ => Mode::Null,
    };
    let load_balance_method = match a.load_balance_method.as_str() {
        "auto" if mode == Mode::Prefill => "follow_bootstrap_room".to_string(),
        "auto" => "round_robin".to_string(),
        other => other.to_string(),
    };
    if mode == Mode::Prefill && a.disaggregation_transfer_backend == "fake" {
        return Err(
            "AssertionError: Prefill server does not support 'fake' as the transfer backend".into(),
        );
    }
    let transfer_backend = match a.disaggregation_transfer_backend.as_str() {
        "mooncake_tcp" => "mooncake".to_string(),
        other => other.to_string(),
    };

    // check_server_args().
    let pp = a.pp_size;
    if (tp * pp) % a.nnodes != 0 {
        return Err("AssertionError: tp_size must be divisible by number of nodes".into());
    }
    if dp > 1 && a.nnodes != 1 {
        return Err(
            "AssertionError: multi-node data-parallel replicas are not supported; use \
                    attention DP (--attn-dp-size) across nodes"
                .into(),
        );
    }
    if a.base_gpu_id < 0 {
        return Err("AssertionError: base_gpu_id must be non-negative".into());
    }
    if a.gpu_id_step < 1 {
        return Err("AssertionError: gpu_id_step must be positive".into());
    }
    if !matches!(a.moe_dense_tp_size, None | Some(1)) && a.moe_dense_tp_size != Some(tp) {
        return Err(
            "AssertionError: moe_dense_tp_size only supports None, 1, or tp_size currently".into(),
        );
    }
    if a.served_model_name.contains(':') {
        return Err(format!(
            "AssertionError: served_model_name cannot contain a colon (':') character. The \
             colon is reserved for the 'model:adapter' syntax used in LoRA adapter \
             specification. Invalid value: '{}'",
            a.served_model_name
        ));
    }

    // The simulator's own: SGLang does not check the node rank (a node past the group
    // never joins it and hangs); ports must be ports.
    if a.node_rank < 0 || a.node_rank >= a.nnodes {
        return Err(format!(
            "--node-rank {} must be in [0, --nnodes {}) (the simulator's own check: SGLang \
             0.5.23 accepts it, and that node never joins its group)",
            a.node_rank, a.nnodes
        ));
    }
    let dist_init = a
        .dist_init_addr
        .as_deref()
        .map(parse_addr)
        .transpose()
        .map_err(|e| {
            format!(
                "--dist-init-addr {}: {e}",
                a.dist_init_addr.as_deref().unwrap_or("")
            )
        })?;
    for (flag, v) in [
        ("--port", Some(a.port)),
        ("--nccl-port", a.nccl_port),
        (
            "--disaggregation-bootstrap-port",
            Some(a.disaggregation_bootstrap_port),
        ),
        ("--dist-init-addr", dist_init.as_ref().map(|d| d.1)),
    ] {
        if let Some(p) = v.filter(|p| !(0..=65535).contains(p)) {
            return Err(format!(
                "{flag}: port {p} is not in 0-65535 (the simulator's own check; SGLang would \
                 fail to bind it)"
            ));
        }
    }

    // GPUs: each of this node's ranks opens device base_gpu_id + i * gpu_id_step
    // (i < tp * pp * dp / nnodes), an index into CUDA_VISIBLE_DEVICES.
    let per_node = tp * pp * dp / a.nnodes;
    let highest = a.base_gpu_id + (per_node - 1) * a.gpu_id_step;
    if let Some(n) = visible_devices(env) {
        if (n as i64) < highest + 1 {
            return Err(format!(
                "CUDA_VISIBLE_DEVICES={} lists {n} device(s), but this node's {per_node} GPU \
                 rank(s) (tp {tp} x pp {pp} x dp {dp} / nnodes {}) open devices up to \
                 {highest} (base_gpu_id {} + ({per_node} - 1) x gpu_id_step {}): SGLang would \
                 fail with 'CUDA error: invalid device ordinal'",
                env.get("CUDA_VISIBLE_DEVICES").map_or("", String::as_str),
                a.nnodes,
                a.base_gpu_id,
                a.gpu_id_step
            ));
        }
    }

    let leader = a.node_rank == 0;
    let rank_ip = match (&dist_init, a.nnodes > 1) {
        (Some((host, _)), true) => host.clone(),
        _ if a.host == "0.0.0.0" => "127.0.0.1".into(),
        _ => a.host.clone(),
    };
    if a.disaggregation_transfer_backend == "mooncake_tcp" {
        warnings.push(
            "--disaggregation-transfer-backend mooncake_tcp resolves to mooncake with \
             MC_FORCE_TCP=1"
                .into(),
        );
    }

    // The scheduler: --max-running-requests sequences, --chunked-prefill-size tokens a
    // step (divided by attention DP, as SGLang does); unset or not positive: the core's.
    let d = Timing::default();
    let max_seqs = a
        .max_running_requests
        .filter(|n| *n > 0)
        .map_or(d.max_num_seqs, |n| n as usize);
    let chunk = a
        .chunked_prefill_size
        .filter(|n| *n > 0)
        .map_or(d.max_batched_tokens, |n| n as u64);
    let timing = knobs.timing(max_seqs, (chunk / attn_dp as u64).max(1));

    let tokenizer = text::tokenizer_file(std::path::Path::new(&a.tokenizer_path));
    if tokenizer.is_none() && leader {
        warnings.push(format!(
            "no tokenizer.json for {}: prompt tokens are counted as words",
            a.tokenizer_path
        ));
    }
    let model_config = model_config(&a.model_path);
    let context_length = a
        .context_length
        .and_then(|n| u64::try_from(n).ok())
        .or_else(|| {
            model_config
                .as_ref()
                .and_then(|c| c.get("max_position_embeddings"))
                .and_then(Value::as_u64)
        });

    let mut cfg = SimConfig {
        args: a,
        knobs,
        sglang_knobs,
        mode,
        dp_size: dp,
        attn_dp_size: attn_dp,
        load_balance_method,
        transfer_backend,
        leader,
        rank_ip,
        listeners: vec![],
        timing,
        tokenizer,
        model_config,
        context_length,
        warnings,
        launch_command,
    };
    cfg.listeners = ports::plan(&cfg, dist_init.map(|d| d.1 as u16))?;
    Ok(cfg)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg_env(argv: &str, env: &[(&str, &str)]) -> Result<SimConfig, SimError> {
        let argv: Vec<String> = shlex::split(&format!("--model-path /m {argv}")).unwrap();
        let env = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        SimConfig::from_argv_env(&argv, &env)
    }

    fn cfg(argv: &str) -> SimConfig {
        cfg_env(argv, &[]).unwrap_or_else(|e| panic!("{argv}: {e}"))
    }

    fn refused_env(argv: &str, env: &[(&str, &str)]) -> String {
        match cfg_env(argv, env) {
            Err(SimError::Refused(m)) => m,
            other => panic!("expected a refusal for {argv}, got {other:?}"),
        }
    }

    fn refused(argv: &str) -> String {
        refused_env(argv, &[])
    }

    #[test]
    fn resolution_refuses_what_sglang_refuses() {
        assert_eq!(
            refused("--tp-size 3 --nnodes 2"),
            "AssertionError: tp_size must be divisible by number of nodes"
        );
        assert!(refused("--dp-size 2 --enable-dp-attention").starts_with("AssertionError"));
        assert!(refused("--tp-size 4 --attn-dp-size 3").contains("tp_size % attn_dp_size"));
        assert!(refused("--tp-size 4 --attn-dp-size 2 --dp-size 2")
            .contains("data-parallel replicas combined with attention data parallelism"));
        assert!(refused("--tp-size 2 --dp-size 2 --nnodes 2")
            .contains("multi-node data-parallel replicas are not supported"));
        assert!(refused("--tp-size 4 --moe-dense-tp-size 2").contains("moe_dense_tp_size"));
        assert!(refused("--served-model-name a:b").contains("cannot contain a colon"));
        assert!(refused("--base-gpu-id -1").contains("base_gpu_id must be non-negative"));
        assert!(refused("--gpu-id-step 0").contains("gpu_id_step must be positive"));
        assert!(
            refused("--disaggregation-mode prefill --disaggregation-transfer-backend fake")
                .contains("does not support 'fake'")
        );
        assert!(refused("--attn-dp-size 0").contains("must be positive"));
        assert!(refused("--tp-size 2 --nnodes 2 --node-rank 5").contains("simulator's own"));
        assert!(refused("--tp-size 0").contains("at least 1"));
        assert!(refused("--port 70000").contains("0-65535"));
        assert!(refused("--dist-init-addr nohost").contains("Missing port"));
    }

    #[test]
    fn resolution_rewrites_what_sglang_rewrites() {
        let c = cfg("--tp-size 4 --dp-size 2 --enable-dp-attention");
        assert_eq!((c.dp_size, c.attn_dp_size, c.num_dp_ranks()), (1, 2, 2));
        let c = cfg("--enable-dp-attention");
        assert_eq!((c.dp_size, c.attn_dp_size), (1, 1));
        assert_eq!(
            cfg("--disaggregation-mode prefill").load_balance_method,
            "follow_bootstrap_room"
        );
        assert_eq!(
            cfg("--disaggregation-mode decode").load_balance_method,
            "round_robin"
        );
        assert_eq!(cfg("").load_balance_method, "round_robin");
        assert_eq!(
            cfg("--disaggregation-mode decode --disaggregation-transfer-backend fake").mode,
            Mode::Decode
        );
        assert_eq!(
            cfg("--disaggregation-transfer-backend mooncake_tcp").transfer_backend,
            "mooncake"
        );
        // Accepted, unchecked by SGLang for a dense model.
        cfg("--tp-size 2 --ep-size 3");
        cfg("--enable-dp-lm-head");
        cfg("--disaggregation-mode prefill --disaggregation-bootstrap-port 30000 --port 30001");
        let c = cfg("--tp-size 2 --attn-dp-size 2 --chunked-prefill-size 4096");
        assert_eq!(c.timing.max_batched_tokens, 2048);
    }

    #[test]
    fn gpus_visible_must_cover_the_ranks() {
        let env = [("CUDA_VISIBLE_DEVICES", "0,1")];
        assert!(cfg_env("--tp-size 2", &env).is_ok());
        let m = refused_env("--tp-size 4", &env);
        assert!(
            m.contains("invalid device ordinal") && m.contains("up to 3"),
            "{m}"
        );
        assert!(refused_env("--tp-size 2 --base-gpu-id 1", &env).contains("up to 2"));
        assert!(refused_env("--tp-size 2 --gpu-id-step 2", &env).contains("up to 2"));
        assert!(refused_env("--dp-size 3", &env).contains("dp 3"));
        // Per node: tp 4 over 2 nodes needs 2 here.
        assert!(cfg_env("--tp-size 4 --nnodes 2 --node-rank 1", &env).is_ok());
        assert!(cfg_env("--tp-size 8", &[]).is_ok(), "unset: not checked");
        // More visible than the ranks open: the others stay idle, as in SGLang.
        let four = [("CUDA_VISIBLE_DEVICES", "0,1,2,3")];
        assert!(cfg_env("--tp-size 1", &four).is_ok());
        assert!(cfg_env("--tp-size 2 --dp-size 2 --enable-dp-attention", &four).is_ok());
    }

    #[test]
    fn addresses() {
        assert_eq!(parse_addr("10.0.0.1:8300"), Ok(("10.0.0.1".into(), 8300)));
        assert_eq!(parse_addr("[::1]:8300"), Ok(("::1".into(), 8300)));
        assert!(parse_addr("::1:8300").unwrap_err().contains("ambiguous"));
        assert!(parse_addr(":1").unwrap_err().contains("Empty host"));
    }

    #[test]
    fn followers_and_rank_ip() {
        let c = cfg("--host 0.0.0.0 --tp-size 2 --nnodes 2 --node-rank 1 --port 0");
        assert!(!c.leader);
        let c = cfg("--host 0.0.0.0");
        assert_eq!(c.rank_ip, "127.0.0.1");
        let c = cfg("--tp-size 2 --nnodes 2 --dist-init-addr 10.1.1.1:8300");
        assert_eq!(c.rank_ip, "10.1.1.1");
    }
}
