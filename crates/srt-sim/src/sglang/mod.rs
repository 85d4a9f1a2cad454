//! The SGLang 0.5.23 protocol (`srt-sglang-sim`): `python3 -m sglang.launch_server`'s
//! command line from SGLang's own catalog ([`args`]), what its resolution rewrites and
//! refuses ([`config`]), its ports ([`ports`]), its HTTP API and the followers' stand-in
//! ([`server`]), and the prefill/decode rendezvous ([`bootstrap`]). The crate docs
//! describe what it answers.

pub mod args;
pub mod bootstrap;
pub mod config;
pub mod ports;
pub mod server;

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{json, Map, Value};

pub use config::SimConfig;

use crate::common::{self, log, ports as bind, Server, Stop};
use crate::SimError;
use bootstrap::Bootstrap;
use config::Mode;
use ports::ListenerKind;

const USAGE: &str =
    "usage: srt-sglang-sim --model-path MODEL_PATH [options of python3 -m sglang.launch_server]\n\
    A stand-in for an SGLang 0.5.23 worker: see the documentation of the `srt_sim` crate.";

/// Runs the SGLang simulator on `args` (the argv after the program name, as
/// `python3 -m sglang.launch_server` gets it) and returns the exit code.
pub fn main(args: Vec<String>) -> i32 {
    common::main(
        "srt-sglang-sim",
        USAGE,
        &args,
        SimConfig::from_argv_env,
        |cfg| run(Arc::new(cfg)),
    )
}

fn banner(cfg: &SimConfig) {
    let a = &cfg.args;
    log::info(&format!(
        "SGLang {} simulator: serve {} as {:?}; tp={} pp={} dp={} attn_dp={} nnodes={} \
         node_rank={} mode={} lb={} transfer={}",
        server::SGLANG_VERSION,
        a.model_path,
        a.served_model_name,
        a.tp_size,
        a.pp_size,
        cfg.dp_size,
        cfg.attn_dp_size,
        a.nnodes,
        a.node_rank,
        cfg.mode.as_str(),
        cfg.load_balance_method,
        cfg.transfer_backend,
    ));
    common::log_env(
        &["SGLANG_", "MOONCAKE_"],
        &["CUDA_VISIBLE_DEVICES", "HEAD_NODE_IP"],
    );
    let catalog = a.catalog;
    let shown: Vec<(&str, Option<String>)> = a
        .parsed
        .iter()
        .filter(|(dest, _)| !args::interpreted(catalog, dest))
        .map(|(dest, v)| {
            let value = match v {
                Value::Bool(_) => None,
                Value::String(s) => Some(s.clone()),
                Value::Array(items) => Some(
                    items
                        .iter()
                        .map(|i| i.as_str().map_or_else(|| i.to_string(), str::to_string))
                        .collect::<Vec<_>>()
                        .join(" "),
                ),
                other => Some(other.to_string()),
            };
            (catalog.long_name(dest).unwrap_or(dest), value)
        })
        .collect();
    common::log_unmodelled(shown.iter().map(|(n, v)| (*n, v.as_deref())));
    for w in &cfg.warnings {
        log::warn(w);
    }
}

/// What the prefill's own ranks register with its bootstrap server (SGLang's
/// `register_to_bootstrap`, one per attention TP rank of every DP group and PP stage).
fn own_registrations(cfg: &SimConfig) -> Vec<Map<String, Value>> {
    let a = &cfg.args;
    let attn_dp = cfg.attn_dp_size.max(1);
    let attn_tp = (a.tp_size / attn_dp).max(1);
    let mut out = Vec::new();
    for dp in 0..i64::from(cfg.num_dp_ranks()) {
        for tp in 0..attn_tp {
            for pp in 0..a.pp_size {
                let (attn_dp_rank, system_dp_rank) =
                    if cfg.dp_size > 1 { (0, dp) } else { (dp, 0) };
                if let Value::Object(m) = json!({
                    "attn_tp_size": attn_tp, "attn_tp_rank": tp,
                    "attn_cp_size": 1, "attn_cp_rank": 0,
                    "attn_dp_size": attn_dp, "attn_dp_rank": attn_dp_rank,
                    "pp_size": a.pp_size, "pp_rank": pp,
                    "system_dp_size": cfg.dp_size, "system_dp_rank": system_dp_rank,
                    "rank_ip": cfg.rank_ip,
                    // No per-rank transfer port is bound: nothing dials it.
                    "rank_port": 0,
                    "page_size": 1,
                    "kv_cache_dtype": "auto",
                    "load_balance_method": cfg.load_balance_method,
                    "prefill_http_port": a.port,
                    "decode_allocation_policy": "early",
                }) {
                    out.push(m);
                }
            }
        }
    }
    out
}

async fn run(cfg: Arc<SimConfig>) -> Result<i32, SimError> {
    banner(&cfg);
    let started = Instant::now();
    let mut stop = Stop::install()?;

    // Every port, bound before the "engine" starts: the HTTP socket without listening,
    // the bootstrap server serving at once (its routes answer 503 until the ranks have
    // registered), the rendezvous and ZMQ ports accepting and closing.
    let mut http = None;
    let mut servers = Vec::new();
    let mut boot = None;
    for l in &cfg.listeners {
        match l.kind {
            ListenerKind::Http | ListenerKind::StandIn => {
                http = Some((l.clone(), bind::bind_http(l).await?));
            }
            ListenerKind::Bootstrap => {
                let listener = bind::bind_listener(l).await?;
                let b = Arc::new(Bootstrap::new(own_registrations(&cfg)));
                servers.push(Server::start(listener, bootstrap::app(b.clone())));
                boot = Some(b);
            }
            ListenerKind::DistInit | ListenerKind::NcclPort | ListenerKind::Derived(_) => {
                let listener = bind::bind_listener(l).await?;
                tokio::spawn(bind::serve_listener(listener, None));
            }
        }
    }
    log::info(&format!("bound: {}", bind::describe_bound(&cfg.listeners)));

    let a = &cfg.args;
    let starting = format!(
        "starting {} scheduler(s) on this node (tp {} x pp {} x dp {} / nnodes {})",
        a.tp_size * a.pp_size * cfg.dp_size / a.nnodes,
        a.tp_size,
        a.pp_size,
        cfg.dp_size,
        a.nnodes
    );
    if let Some(code) = common::start_up(&cfg.knobs, &mut stop, &starting).await {
        return Ok(code);
    }
    if let Some(b) = &boot {
        b.register_own();
    }

    let mut warmup = Duration::ZERO;
    if let Some((l, sock)) = http {
        let listener = bind::listen_http(&l, sock)?;
        let port = listener.local_addr().map_or(l.port, |a| a.port());
        if cfg.leader {
            if !a.skip_server_warmup {
                warmup = cfg.knobs.startup_delay;
            }
            let state = Arc::new(server::AppState::new(
                cfg.clone(),
                boot.clone(),
                warmup,
                started,
            ));
            servers.push(Server::start(listener, server::app(state)));
            log::info(&format!(
                "Uvicorn running on http://{}:{port}; {}",
                l.host,
                if a.skip_server_warmup {
                    "no warmup (--skip-server-warmup)".to_string()
                } else {
                    format!("warming up for {} ms", warmup.as_millis())
                }
            ));
            tokio::spawn(async move {
                tokio::time::sleep(warmup).await;
                log::info("The server is fired up and ready to roll!");
            });
        } else {
            servers.push(Server::start(listener, server::follower_app()));
            log::info(&format!(
                "node rank {}: schedulers ready; dummy health server on http://{}:{port}",
                a.node_rank, l.host
            ));
        }
    }
    if cfg.mode == Mode::Prefill && cfg.leader {
        log::info(&format!(
            "bootstrap server on {}:{}",
            a.host, a.disaggregation_bootstrap_port
        ));
    }

    common::serve_until_stopped(&cfg.knobs, &mut stop, servers, warmup).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    #[test]
    fn own_registrations_cover_every_rank() {
        let argv: Vec<String> = shlex::split(
            "--model-path /m --tp-size 4 --attn-dp-size 2 --pp-size 2 --disaggregation-mode prefill",
        )
        .unwrap();
        let cfg = SimConfig::from_argv_env(&argv, &HashMap::new()).unwrap();
        let regs = own_registrations(&cfg);
        assert_eq!(regs.len(), 2 * 2 * 2, "dp groups x attn tp x pp");
        assert!(regs
            .iter()
            .all(|r| r["attn_tp_size"] == 2 && r["rank_ip"] == "127.0.0.1"));
    }
}
