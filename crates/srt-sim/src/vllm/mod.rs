//! The vLLM 0.32 protocol (`srt-vllm-sim`): `vllm serve`'s command line and refusals
//! ([`args`], [`config`]), its ports ([`ports`]), its HTTP API ([`server`]), the
//! prefill/decode behaviour of its KV connectors ([`kv`]) and MoRI-IO discovery
//! ([`discovery`]). The crate docs describe what it answers.

pub mod args;
pub mod config;
pub mod discovery;
pub mod kv;
pub mod ports;
pub mod server;

use std::sync::Arc;

pub use config::SimConfig;

use crate::common::{self, log, ports as bind, Server, Stop};
use crate::SimError;
use ports::ListenerKind;

const USAGE: &str = "usage: srt-vllm-sim serve <model> [vllm serve flags...]\n\
    A stand-in for `vllm serve`: see the documentation of the `srt_sim` crate.";

/// Runs the vLLM simulator on `args` (the argv after the program name) and returns the
/// exit code. Builds its own tokio runtime.
pub fn main(args: Vec<String>) -> i32 {
    common::main(
        "srt-vllm-sim",
        USAGE,
        &args,
        SimConfig::from_argv_env,
        |cfg| run(Arc::new(cfg)),
    )
}

fn ranks(r: &[u32]) -> String {
    match (r.first(), r.last()) {
        (None, _) | (_, None) => "none".into(),
        (Some(a), Some(b)) if a == b => a.to_string(),
        (Some(a), Some(b)) => format!("{a}-{b}"),
    }
}

fn startup_banner(cfg: &SimConfig) {
    let a = &cfg.args;
    log::info(&format!(
        "vLLM {} simulator: serve {} as {:?}; tp={} pp={} dp={} lb={:?} local engines: {} API ranks: {}{}",
        server::VLLM_VERSION,
        a.model,
        cfg.served_names,
        a.tensor_parallel_size,
        a.pipeline_parallel_size,
        cfg.dp_size,
        cfg.lb_mode,
        ranks(&cfg.local_ranks),
        if cfg.api_server { ranks(&cfg.api_ranks) } else { "headless".into() },
        cfg.kv
            .as_ref()
            .map(|k| format!("; kv connector {} ({:?})", k.connector_name, k.role))
            .unwrap_or_default()
    ));
    // Values only for the variables the simulator reads (ports and addresses).
    common::log_env(
        &["VLLM_"],
        &[
            "HEAD_NODE_IP",
            "VLLM_HOST_IP",
            "VLLM_NIXL_SIDE_CHANNEL_HOST",
            "VLLM_NIXL_SIDE_CHANNEL_PORT",
            "VLLM_PORT",
        ],
    );
    common::log_unmodelled(
        a.extra
            .iter()
            .map(|f| (f.name.as_str(), f.value.as_deref())),
    );
    for w in &cfg.warnings {
        log::warn(w);
    }
}

async fn run(cfg: Arc<SimConfig>) -> Result<i32, SimError> {
    startup_banner(&cfg);
    let mut stop = Stop::install()?;

    // Engine-side listeners and the HTTP socket, bound before the "engine" starts.
    let engines = server::engines(&cfg);
    let first_local = cfg.local_ranks.first().copied().unwrap_or(0);
    let mut http = None;
    for l in &cfg.listeners {
        if l.kind == ListenerKind::Http {
            let sock = bind::bind_http(l).await?;
            http = Some((l.clone(), sock));
        } else {
            let listener = bind::bind_listener(l).await?;
            let greeting = match l.kind {
                ListenerKind::NixlSideChannel { dp_rank } => engines
                    .iter()
                    .find(|e| e.rank == dp_rank)
                    .map(|e| kv::handshake_greeting(&e.engine_id, dp_rank)),
                ListenerKind::MoriHandshake { local_dp, .. } => Some(kv::handshake_greeting(
                    &format!("{}:{}", cfg.mori_host_ip, l.port),
                    first_local + local_dp,
                )),
                _ => None,
            };
            tokio::spawn(bind::serve_listener(listener, greeting));
        }
    }
    log::info(&format!("bound: {}", bind::describe_bound(&cfg.listeners)));

    let starting = format!("starting {} engine core(s)", cfg.local_ranks.len());
    if let Some(code) = common::start_up(&cfg.knobs, &mut stop, &starting).await {
        return Ok(code);
    }

    // Serve.
    let mut servers = Vec::new();
    if let Some((l, sock)) = http {
        let listener = bind::listen_http(&l, sock)?;
        let state = Arc::new(server::AppState::new(cfg.clone(), engines));
        servers.push(Server::start(listener, server::app(state)));
        log::info(&format!(
            "Uvicorn running on http://{}:{}; application startup complete",
            l.host, l.port
        ));
    } else {
        log::info("engines ready (headless: no API server in this process)");
    }

    if let Some(ep) = discovery::endpoint(&cfg) {
        for local_dp in 0..cfg.local_ranks.len() as u32 {
            if let Some(p) = discovery::payload(&cfg, local_dp) {
                tokio::spawn(discovery::register_loop(
                    ep.clone(),
                    discovery::encode(&p),
                    cfg.vllm_knobs.register_interval,
                    format!("dp rank {}", first_local + local_dp),
                ));
            }
        }
    }

    common::serve_until_stopped(&cfg.knobs, &mut stop, servers, std::time::Duration::ZERO).await
}
