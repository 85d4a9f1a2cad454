//! A vLLM simulator: a stand-in for `vllm serve` for tests and demos on machines without
//! GPUs.
//!
//! The binary `srt-vllm-sim` takes exactly the argv `vllm` would get after the program name
//! (`serve <model> [flags...]`) and the environment vLLM reads, and behaves like vLLM 0.32
//! where a deployment can observe it:
//!
//! - **Arguments** are parsed like vLLM's argparse ([`args`]); what vLLM refuses is refused
//!   with exit code 2 and a message on stderr ([`config`]).
//! - **Ports** are bound for real ([`ports`]): the HTTP API (API processes only), the NIXL
//!   side channels, the MoRI-IO handshake/notify listeners, the DP RPC port on the DP
//!   leader and the master port on node rank 0 of a multi-node group. A collision exits 1
//!   with `address already in use` and the port.
//! - **Startup**: the HTTP socket is bound at once but only listens after the startup
//!   delay, so connections are refused until the "engine" is up, as with vLLM.
//! - **HTTP** ([`server`]): `/health`, `/ping`, `/load`, `/version`, `/v1/models`,
//!   `/metrics`, `/tokenize`, `/kv_event_sources` (empty), the render routes a Router's
//!   cache-aware policy calls (`/v1/completions/render`, `/v1/chat/completions/render`:
//!   403 "Scale-out endpoints are disabled" unless `--enable-scale-out`, as vLLM 0.32),
//!   `/v1/completions`, `/v1/chat/completions` (JSON or SSE), with the
//!   prefill/decode behaviour of the NIXL and MoRI-IO connectors ([`kv`]). Every generation
//!   response carries an `srt_sim` object naming the stage, the serving address and rank,
//!   and for a decode the engine whose KV it consumed.
//! - **MoRI-IO discovery** ([`discovery`]): registration with the router over a ZMQ DEALER.
//! - SIGTERM/SIGINT end the process with exit code 0.
//!
//! # Environment knobs
//!
//! | variable | default | effect |
//! |---|---|---|
//! | `SRT_SIM_STARTUP_DELAY_MS` | 200 | time from start to listening on the HTTP port |
//! | `SRT_SIM_EXIT_DURING_STARTUP` | unset | exit with this code half-way through startup, after a log line |
//! | `SRT_SIM_EXIT_AFTER_MS` | unset | exit 1 this long after becoming ready (an engine dying) |
//! | `SRT_SIM_UNHEALTHY_AFTER_MS` | unset | `/health` answers 503 this long after becoming ready |
//! | `SRT_SIM_TOKEN_DELAY_MS` | 0 | fixed time of an engine step (one token per running sequence) |
//! | `SRT_SIM_DECODE_US_PER_SEQ` | 0 | added to a step per sequence decoding in it, µs |
//! | `SRT_SIM_PREFILL_US_PER_TOKEN` | 0 | added to a step per prompt token it prefills, µs |
//! | `SRT_SIM_NIXL_HANDSHAKE` | 1 | `0` skips the decode stage's side-channel check |
//! | `SRT_SIM_REGISTER_INTERVAL_MS` | 3000 | MoRI-IO registration period |
//!
//! The three costs drive each engine's continuous-batching scheduler ([`sched`], limits
//! from `--max-num-seqs` (256) and `--max-num-batched-tokens` (8192)); all zero, tokens
//! are ready at once. Prompt tokens are counted with the model's `tokenizer.json`
//! (`--tokenizer`, else the model path) when there is one, as vLLM counts them, else as
//! words.
//!
//! vLLM's own variables read: `VLLM_NIXL_SIDE_CHANNEL_HOST` (localhost),
//! `VLLM_NIXL_SIDE_CHANNEL_PORT` (5600), `VLLM_PORT` (validated only), `VLLM_HOST_IP`
//! (MoRI-IO `host_ip` fallback, else 127.0.0.1).
//!
//! # Refusals (exit 2, message on stderr)
//!
//! As vLLM 0.32's argparse, `serve.py` and `EngineArgs.create_engine_config`:
//! unparseable command lines (unknown subcommand, missing model, bad ints or JSON, a
//! valued flag without its value, stray positionals); `--api-server-count > 0` with
//! `--headless`; `--data-parallel-hybrid-lb` with `--headless` (or `--api-server-count 0`),
//! with `--data-parallel-external-lb`, or without `--data-parallel-size-local` (unless
//! `--nnodes > 1` infers it); `--nnodes > 1` with `--data-parallel-backend ray`; world size
//! not divisible by `--nnodes`, `--node-rank >= --nnodes`; external LB (`--data-parallel-rank`
//! or `--data-parallel-external-lb`) with `--data-parallel-size > 1` on a non-MoE model
//! (the simulator's MoE marker is `--enable-expert-parallel`), without a rank, or with a
//! local size other than 1; `--headless` with a local size of 0; a DP rank outside
//! `[0, dp)`; `kv_connector` without `kv_role`, an unknown `kv_role` or
//! `kv_load_failure_policy`; `MoRIIOConnector` with `kv_both` or without
//! `kv_connector_extra_config.http_port`; a non-integer `VLLM_PORT` (a URI gets the
//! Kubernetes hint); a non-integer `VLLM_NIXL_SIDE_CHANNEL_PORT`.
//!
//! The simulator also refuses: sizes of 0; local DP ranks reaching past `dp`; side-channel
//! ports beyond 65535; and a `--device-ids` list whose length is not
//! `tp × pp × pcp × (engine cores hosted here)`, or, on a node holding a slice of a DP rank
//! that spans nodes, `(dp × tp × pp / nnodes) × pcp`. vLLM's silent rewrites are applied:
//! a non-zero `--data-parallel-start-rank` without `--headless` implies hybrid LB, hybrid
//! LB with one local rank becomes external LB, and hybrid LB with local = global is off.
//!
//! # Side-channel check
//!
//! Each side-channel (NIXL) or handshake (MoRI-IO) listener greets a connecting peer with
//! one JSON line naming its engine. A decode stage connects to the `remote_host` and
//! `remote_port` (NIXL) or `remote_handshake_port` (MoRI-IO READ mode) of its
//! `kv_transfer_params` and checks that the engine there is `remote_engine_id`. On failure
//! it answers 500, or with `kv_load_failure_policy: "recompute"` serves the request anyway
//! and marks it `"recomputed": true` (not counted as a consumed transfer).

//!
//! # Limits
//!
//! Generation is deterministic filler text, one word per output token; without a
//! `tokenizer.json` prompt word counts stand in for tokens, and a chat is counted through
//! a generic `role: content` template, not the model's. No prefix caching is modelled. An
//! internal-LB API server whose engines partly live on other nodes serves those ranks
//! itself, and its NIXL parameters then name this node's side-channel host. MoRI-IO WRITE
//! mode skips the side-channel check (the prefill pushes; nothing to dial from decode).

#![warn(missing_docs)]

pub mod args;
pub mod config;
pub mod discovery;
pub mod kv;
mod log;
pub mod ports;
pub mod sched;
pub mod server;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::signal::unix::{signal, SignalKind};
use tokio::sync::watch;

pub use config::SimConfig;

use ports::ListenerKind;

/// Why the simulator stopped before or while serving.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// The command line does not parse (argparse's exit 2).
    #[error("{0}")]
    Usage(String),
    /// The command line parses but vLLM would refuse the combination.
    #[error("{0}")]
    Refused(String),
    /// A port could not be bound.
    #[error("{0}")]
    Bind(String),
    /// Anything else at run time.
    #[error("{0}")]
    Runtime(String),
}

impl SimError {
    /// The process exit code for this error: 2 for usage errors and refusals, else 1.
    pub fn exit_code(&self) -> i32 {
        match self {
            SimError::Usage(_) | SimError::Refused(_) => 2,
            SimError::Bind(_) | SimError::Runtime(_) => 1,
        }
    }
}

const USAGE: &str = "usage: srt-vllm-sim serve <model> [vllm serve flags...]\n\
    A stand-in for `vllm serve`: see the documentation of the `srt::sim` module.";

/// Runs the simulator on `args` (the argv after the program name) and returns the exit
/// code. Builds its own tokio runtime.
pub fn main(args: Vec<String>) -> i32 {
    let env: HashMap<String, String> = std::env::vars().collect();
    let cfg = match SimConfig::from_argv_env(&args, &env) {
        Ok(c) => c,
        Err(SimError::Usage(m)) if m == "help requested" => {
            println!("{USAGE}");
            return 0;
        }
        Err(e) => {
            let kind = match e {
                SimError::Usage(_) => "usage",
                _ => "refused",
            };
            eprintln!("srt-vllm-sim: error ({kind}): {e}");
            return e.exit_code();
        }
    };
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("srt-vllm-sim: error: cannot start the runtime: {e}");
            return 1;
        }
    };
    let code = rt.block_on(async {
        match run(Arc::new(cfg)).await {
            Ok(code) => code,
            Err(e) => {
                log::error(&e.to_string());
                e.exit_code()
            }
        }
    });
    rt.shutdown_background();
    code
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
    // Values only for the variables the simulator reads (ports and addresses); the
    // others are named, never shown: any of them may be a secret the recipe marks
    // sensitive (`sensitive_env`), which the simulator cannot know.
    const SHOWN: &[&str] = &[
        "HEAD_NODE_IP",
        "VLLM_HOST_IP",
        "VLLM_NIXL_SIDE_CHANNEL_HOST",
        "VLLM_NIXL_SIDE_CHANNEL_PORT",
        "VLLM_PORT",
    ];
    let mut env: Vec<(String, String)> = std::env::vars()
        .filter(|(k, _)| k.starts_with("VLLM_") || k == "HEAD_NODE_IP" || k.starts_with("SRT_SIM_"))
        .collect();
    env.sort();
    if !env.is_empty() {
        log::info(&format!(
            "environment: {}",
            env.iter()
                .map(
                    |(k, v)| if SHOWN.contains(&k.as_str()) || k.starts_with("SRT_SIM_") {
                        format!("{k}={v}")
                    } else {
                        format!("{k}=(set)")
                    }
                )
                .collect::<Vec<_>>()
                .join(" ")
        ));
    }
    if !a.extra.is_empty() {
        log::info(&format!(
            "flags accepted without simulation: {}",
            a.extra
                .iter()
                .map(|f| match &f.value {
                    Some(v) => format!("--{} {v}", f.name),
                    None => format!("--{}", f.name),
                })
                .collect::<Vec<_>>()
                .join(" ")
        ));
    }
    for w in &cfg.warnings {
        log::warn(w);
    }
}

/// Resolves when a stop has been requested.
async fn stopped(rx: &mut watch::Receiver<Option<&'static str>>) -> &'static str {
    loop {
        if let Some(s) = *rx.borrow_and_update() {
            return s;
        }
        if rx.changed().await.is_err() {
            // The signal task is gone; never stop on its account.
            std::future::pending::<()>().await;
        }
    }
}

async fn run(cfg: Arc<SimConfig>) -> Result<i32, SimError> {
    startup_banner(&cfg);

    let (stop_tx, mut stop_rx) = watch::channel::<Option<&'static str>>(None);
    let mut term = signal(SignalKind::terminate())
        .map_err(|e| SimError::Runtime(format!("cannot install a SIGTERM handler: {e}")))?;
    let mut int = signal(SignalKind::interrupt())
        .map_err(|e| SimError::Runtime(format!("cannot install a SIGINT handler: {e}")))?;
    tokio::spawn(async move {
        let name = tokio::select! {
            _ = term.recv() => "SIGTERM",
            _ = int.recv() => "SIGINT",
        };
        let _ = stop_tx.send(Some(name));
    });

    // Engine-side listeners and the HTTP socket, bound before the "engine" starts.
    let engines = server::engines(&cfg);
    let first_local = cfg.local_ranks.first().copied().unwrap_or(0);
    let mut http = None;
    let mut bound = Vec::new();
    for l in &cfg.listeners {
        if l.kind == ListenerKind::Http {
            let sock = ports::bind_http(l).await?;
            http = Some((l.clone(), sock));
        } else {
            let listener = ports::bind_listener(l).await?;
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
            tokio::spawn(ports::serve_listener(listener, greeting));
        }
        bound.push(format!("{} {}:{}", l.describe(), l.host, l.port));
    }
    log::info(&format!(
        "bound: {}",
        if bound.is_empty() {
            "nothing".into()
        } else {
            bound.join(", ")
        }
    ));

    // Startup.
    let delay = cfg.knobs.startup_delay;
    log::info(&format!(
        "starting {} engine core(s); ready in {} ms",
        cfg.local_ranks.len(),
        delay.as_millis()
    ));
    if let Some(code) = cfg.knobs.exit_during_startup {
        tokio::select! {
            s = stopped(&mut stop_rx) => {
                log::info(&format!("received {s} during startup; exiting"));
                return Ok(0);
            }
            _ = tokio::time::sleep(delay / 2) => {}
        }
        log::error(&format!(
            "simulated failure during startup (SRT_SIM_EXIT_DURING_STARTUP): exiting with code {code}"
        ));
        return Ok(code);
    }
    tokio::select! {
        s = stopped(&mut stop_rx) => {
            log::info(&format!("received {s} during startup; exiting"));
            return Ok(0);
        }
        _ = tokio::time::sleep(delay) => {}
    }

    // Serve.
    let mut server_task = None;
    let mut quit = None;
    if let Some((l, sock)) = http {
        let listener = ports::listen_http(&l, sock)?;
        let state = Arc::new(server::AppState::new(cfg.clone(), engines));
        let app = server::app(state);
        // The server drains only when this task says so, after it has seen the stop
        // request, so a signal can never look like the server dying on its own.
        let (quit_tx, quit_rx) = tokio::sync::oneshot::channel::<()>();
        quit = Some(quit_tx);
        server_task = Some(tokio::spawn(async move {
            axum::serve(listener, app)
                .with_graceful_shutdown(async move {
                    let _ = quit_rx.await;
                })
                .await
        }));
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
                    cfg.knobs.register_interval,
                    format!("dp rank {}", first_local + local_dp),
                ));
            }
        }
    }

    {
        let exit_after = async {
            match cfg.knobs.exit_after {
                Some(d) => tokio::time::sleep(d).await,
                None => std::future::pending().await,
            }
        };
        let server_done = async {
            match server_task.as_mut() {
                Some(t) => t.await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            s = stopped(&mut stop_rx) => {
                log::info(&format!("received {s}; shutting down"));
            }
            _ = exit_after => {
                log::error(
                    "simulated engine death (SRT_SIM_EXIT_AFTER_MS): EngineDeadError; exiting with code 1",
                );
                return Ok(1);
            }
            r = server_done => {
                return Err(SimError::Runtime(format!("the HTTP server stopped: {r:?}")));
            }
        }
    }
    if let Some(q) = quit {
        let _ = q.send(());
    }
    if let Some(t) = server_task {
        // Let in-flight responses finish, briefly.
        let _ = tokio::time::timeout(Duration::from_secs(2), t).await;
    }
    Ok(0)
}
