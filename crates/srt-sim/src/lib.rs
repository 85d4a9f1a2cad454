//! Engine simulators: stand-ins for the LLM-serving engines srt launches, for tests and
//! demos on machines without GPUs. Each takes exactly the argv and environment the real
//! engine gets and behaves like it where a deployment can observe it.
//!
//! # One core, a protocol per engine
//!
//! Everything engines have in common is the core ([`common`]): the process lifecycle
//! (bind, start up, serve, SIGTERM/SIGINT), the `SRT_SIM_*` knobs ([`common::knobs`]),
//! port binding with collisions reported ([`common::ports`]), the continuous-batching
//! scheduler ([`common::sched`]), prompt counting with the model's tokenizer, the
//! deterministic filler text, OpenAI-shaped answers and SSE, and the log lines. A protocol
//! module per engine holds what that engine does differently: its command line and
//! refusals, which ports it binds and when, its HTTP routes and their shapes.
//!
//! | binary | protocol | stands in for |
//! |---|---|---|
//! | `srt-vllm-sim` | [`vllm`] | `vllm serve` (vLLM 0.32) |
//!
//! # vLLM (`srt-vllm-sim`)
//!
//! The binary `srt-vllm-sim` takes exactly the argv `vllm` would get after the program name
//! (`serve <model> [flags...]`) and the environment vLLM reads, and behaves like vLLM 0.32
//! where a deployment can observe it:
//!
//! - **Arguments** are parsed like vLLM's argparse ([`vllm::args`]); what vLLM refuses is refused
//!   with exit code 2 and a message on stderr ([`vllm::config`]).
//! - **Ports** are bound for real ([`vllm::ports`]): the HTTP API (API processes only), the NIXL
//!   side channels, the MoRI-IO handshake/notify listeners, the DP RPC port on the DP
//!   leader and the master port on node rank 0 of a multi-node group. A collision exits 1
//!   with `address already in use` and the port.
//! - **Startup**: the HTTP socket is bound at once but only listens after the startup
//!   delay, so connections are refused until the "engine" is up, as with vLLM.
//! - **HTTP** ([`vllm::server`]): `/health`, `/ping`, `/load`, `/version`, `/v1/models`,
//!   `/metrics`, `/tokenize`, `/kv_event_sources` (empty), the render routes a Router's
//!   cache-aware policy calls (`/v1/completions/render`, `/v1/chat/completions/render`:
//!   403 "Scale-out endpoints are disabled" unless `--enable-scale-out`, as vLLM 0.32),
//!   `/v1/completions`, `/v1/chat/completions` (JSON or SSE), with the
//!   prefill/decode behaviour of the NIXL and MoRI-IO connectors ([`vllm::kv`]). Every generation
//!   response carries an `srt_sim` object naming the stage, the serving address and rank,
//!   and for a decode the engine whose KV it consumed.
//! - **MoRI-IO discovery** ([`vllm::discovery`]): registration with the router over a ZMQ DEALER.
//! - SIGTERM/SIGINT end the process with exit code 0.
//!
//! # Environment knobs
//!
//! Every simulator reads the first seven; the last two are the vLLM simulator's.
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
//! The three costs drive each engine's continuous-batching scheduler ([`common::sched`], limits
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

pub mod common;
pub mod sglang;
pub mod vllm;

/// Why a simulator stopped before or while serving.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// `--help`: print the usage and exit 0.
    #[error("help requested")]
    Help,
    /// The command line does not parse (argparse's exit 2).
    #[error("{0}")]
    Usage(String),
    /// The command line parses but the engine would refuse the combination.
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
    /// The process exit code for this error: 2 for usage errors and refusals, 0 for help,
    /// else 1.
    pub fn exit_code(&self) -> i32 {
        match self {
            SimError::Help => 0,
            SimError::Usage(_) | SimError::Refused(_) => 2,
            SimError::Bind(_) | SimError::Runtime(_) => 1,
        }
    }
}
