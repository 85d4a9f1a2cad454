//! Engine simulators: stand-ins for the LLM-serving engines srt launches, for tests and
//! demos on machines without GPUs. Each takes exactly the argv and environment the real
//! engine gets and behaves like it where a deployment can observe it.
//!
//! # One core, a protocol per engine
//!
//! Everything engines have in common is the core ([`common`]): the process lifecycle
//! (parse, bind, start up, serve, SIGTERM/SIGINT, the fault knobs), the `SRT_SIM_*` knobs
//! ([`common::knobs`]), port binding with collisions reported ([`common::ports`]), an
//! argparse reader of srt's flag catalogs ([`common::argparse`]), the continuous-batching
//! scheduler ([`common::sched`]), prompt counting with the model's tokenizer, the
//! deterministic filler text, OpenAI-shaped answers and SSE (an engine's differences are
//! its `Dialect`), the `srt_sim_*` metric counters, and the log lines. A protocol module per
//! engine holds what that engine does differently: its command line and refusals, which
//! ports it binds and when, its HTTP routes and their shapes, its prefill/decode hand-off.
//!
//! | binary | protocol | stands in for |
//! |---|---|---|
//! | `srt-vllm-sim` | [`vllm`] | `vllm serve` (vLLM 0.32) |
//! | `srt-sglang-sim` | [`sglang`] | `python3 -m sglang.launch_server` (SGLang 0.5.23) |
//!
//! Both: a port collision exits 1 with `address already in use` and the port; a refused
//! command line exits 2 with the reason on stderr (`srt-…-sim: error (usage|refused): …`);
//! SIGTERM/SIGINT end the process with exit code 0; every generation answer carries an
//! `srt_sim` object naming the stage (`agg`, `prefill`, `decode`), the serving address
//! (`served_by`) and DP rank, and for a decode what it consumed.
//!
//! # Environment knobs
//!
//! Every simulator reads the first seven; the others are one engine's.
//!
//! | variable | default | effect |
//! |---|---|---|
//! | `SRT_SIM_STARTUP_DELAY_MS` | 200 | time from start to listening on the HTTP port (SGLang: and its warmup after that) |
//! | `SRT_SIM_EXIT_DURING_STARTUP` | unset | exit with this code half-way through startup, after a log line |
//! | `SRT_SIM_EXIT_AFTER_MS` | unset | exit 1 this long after becoming ready (an engine dying) |
//! | `SRT_SIM_UNHEALTHY_AFTER_MS` | unset | `/health` answers 503 this long after becoming ready |
//! | `SRT_SIM_TOKEN_DELAY_MS` | 0 | fixed time of an engine step (one token per running sequence) |
//! | `SRT_SIM_DECODE_US_PER_SEQ` | 0 | added to a step per sequence decoding in it, µs |
//! | `SRT_SIM_PREFILL_US_PER_TOKEN` | 0 | added to a step per prompt token it prefills, µs |
//! | `SRT_SIM_NIXL_HANDSHAKE` | 1 | vLLM: `0` skips the decode stage's side-channel check |
//! | `SRT_SIM_REGISTER_INTERVAL_MS` | 3000 | vLLM: MoRI-IO registration period |
//! | `SRT_SIM_PD_WAIT_MS` | 30000 | SGLang: how long a decode waits for its room's prefill before answering 500 (SGLang's own `SGLANG_DISAGGREGATION_WAITING_TIMEOUT` is 300 s) |
//!
//! The three costs drive each engine's continuous-batching scheduler ([`common::sched`]);
//! all zero, tokens are ready at once. Prompt tokens are counted with the model's
//! `tokenizer.json` when there is one, as the engine counts them, else as words.
//!
//! # vLLM (`srt-vllm-sim`)
//!
//! The binary `srt-vllm-sim` takes exactly the argv `vllm` would get after the program name
//! (`serve <model> [flags...]`) and the environment vLLM reads, and behaves like vLLM 0.32
//! where a deployment can observe it:
//!
//! - **Arguments** are parsed like vLLM's argparse ([`vllm::args`]); what vLLM refuses is refused
//!   with exit code 2 and a message on stderr ([`vllm::config`]). Unlike the SGLang
//!   simulator it knows the arity of the flags that matter from its own table, not from
//!   vLLM's catalog, and accepts any other flag generically (vLLM's parser also takes
//!   `--foo_bar`, `-O3`-style short forms and dotted JSON sub-keys, which the catalog does
//!   not describe).
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
//! - The scheduler's limits are `--max-num-seqs` (256) and `--max-num-batched-tokens`
//!   (8192); prompts are counted with `--tokenizer`'s `tokenizer.json`, else the model's.
//!
//! vLLM's own variables read: `VLLM_NIXL_SIDE_CHANNEL_HOST` (localhost),
//! `VLLM_NIXL_SIDE_CHANNEL_PORT` (5600), `VLLM_PORT` (validated only), `VLLM_HOST_IP`
//! (MoRI-IO `host_ip` fallback, else 127.0.0.1).
//!
//! ## Refusals (exit 2, message on stderr)
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
//! ## Side-channel check
//!
//! Each side-channel (NIXL) or handshake (MoRI-IO) listener greets a connecting peer with
//! one JSON line naming its engine. A decode stage connects to the `remote_host` and
//! `remote_port` (NIXL) or `remote_handshake_port` (MoRI-IO READ mode) of its
//! `kv_transfer_params` and checks that the engine there is `remote_engine_id`. On failure
//! it answers 500, or with `kv_load_failure_policy: "recompute"` serves the request anyway
//! and marks it `"recomputed": true` (not counted as a consumed transfer).
//!
//! ## Limits
//!
//! Generation is deterministic filler text, one word per output token; without a
//! `tokenizer.json` prompt word counts stand in for tokens, and a chat is counted through
//! a generic `role: content` template, not the model's. No prefix caching is modelled. An
//! internal-LB API server whose engines partly live on other nodes serves those ranks
//! itself, and its NIXL parameters then name this node's side-channel host. MoRI-IO WRITE
//! mode skips the side-channel check (the prefill pushes; nothing to dial from decode).
//!
//! # SGLang (`srt-sglang-sim`)
//!
//! The binary `srt-sglang-sim` takes exactly the argv that follows `python3 -m
//! sglang.launch_server` (flags only) and the environment, and behaves like an SGLang
//! 0.5.23 worker (`docs/sglang-notes.md` holds the facts and where each was seen):
//!
//! - **Arguments** ([`sglang::args`]) are read from the catalog srt ships
//!   (`crates/srt/src/engine/sglang/catalog/sglang-0.5.23.json`, included at build time)
//!   by argparse's rules: unique prefixes of long options (`--tp 2`), `--x=v` and `--x v`,
//!   switches without values, `--x/--no-x` pairs, `nargs`, int/float/JSON and SGLang's
//!   `human_readable_int` (`32k`), choices, `--model-path` (`--model`) required, no
//!   positionals, `-h/--help`. Errors read as argparse's: `unrecognized arguments: …`,
//!   `ambiguous option: --p could match …`, `argument --x: invalid choice: …`, `expected
//!   one argument`, `ignored explicit argument`, `the following arguments are required`.
//! - **Refusals** ([`sglang::config`], exit 2), as `resolve_once()` and
//!   `check_server_args()` refuse: `(tp × pp) % nnodes`; `tp % attn_dp` (attention DP is
//!   `--attn-dp-size`, or `--dp-size N --enable-dp-attention` rewritten to `attn_dp = N,
//!   dp = 1`); `--attn-dp-size` below 1; DP replicas with attention DP; DP replicas across
//!   nodes; `--moe-dense-tp-size` other than 1 or tp; a `:` in `--served-model-name`; a
//!   negative `--base-gpu-id`; `--gpu-id-step` below 1; a prefill with the `fake` transfer
//!   backend. The simulator's own: sizes below 1; `--node-rank` outside `[0, nnodes)`
//!   (SGLang accepts it and that node never joins); ports outside 0–65535; a malformed
//!   `--dist-init-addr` (SGLang fails at startup); and, when `CUDA_VISIBLE_DEVICES` is set,
//!   fewer devices than `base_gpu_id + (tp × pp × dp / nnodes − 1) × gpu_id_step + 1`
//!   (SGLang would fail with `CUDA error: invalid device ordinal`). Rewrites applied:
//!   `--load-balance-method auto` is `follow_bootstrap_room` on a prefill, `round_robin`
//!   otherwise; `mooncake_tcp` is `mooncake`; `--chunked-prefill-size` is divided by the
//!   attention-DP size.
//! - **Ports** ([`sglang::ports`]), bound for real, as 0.5.23's source has them. On node
//!   rank 0: the HTTP `--port` on `--host` (127.0.0.1); the torch.distributed store on all
//!   interfaces at the `--dist-init-addr` port when given, else at `--nccl-port` (none
//!   given: SGLang picks a free port itself and the simulator binds nothing for it); with
//!   attention DP, the six ZMQ ports `PortArgs.init_new` derives, dist-init port + 1 … + 6
//!   (without `--dist-init-addr` on one node the dist-init port is `--port + 233`, so
//!   `--port + 234 … + 239`); on a prefill, the bootstrap server on
//!   `--host:--disaggregation-bootstrap-port` (8998). On other nodes: only the stand-in
//!   health server on `--host:--port` (`--port 0` allowed, the port chosen is logged).
//! - **Startup**: every port is bound at once; the HTTP socket listens after the startup
//!   delay; then `/health`, `/health_generate`, `/ready` and `/ping` answer 503 for the
//!   warmup (modelled as one more startup delay; none with `--skip-server-warmup`), then
//!   200 (empty bodies). The bootstrap server listens at once and its prefill's ranks
//!   register when the startup delay is over. A follower's stand-in listens after the
//!   startup delay, 200 at once.
//! - **HTTP** ([`sglang::server`], node rank 0): `/model_info` (and the deprecated
//!   `/get_model_info`, logging SGLang's warning; `model_type` and `architectures` from the
//!   model's `config.json`), `/server_info` (`/get_server_info`: the resolved fields —
//!   `tp_size`, `dp_size`, `attn_dp_size`, `load_balance_method`, `disaggregation_mode`,
//!   `disaggregation_bootstrap_port`, `served_model_name`, `model_path`, `port`, … — every
//!   flag given, `launch_command`, `internal_states` one per DP rank, `version` `0.5.23`,
//!   `frontend` `python`), `/v1/models` and `/v1/models/{name}` (`owned_by` `sglang`,
//!   `max_model_len` from `--context-length` or `max_position_embeddings`), `POST|PUT
//!   /generate` (`text` or `input_ids`, `sampling_params.max_new_tokens` (128), `stream`:
//!   cumulative `data: {text, output_ids, meta_info}` events, then `data: [DONE]`),
//!   `/v1/completions` and `/v1/chat/completions` (JSON bodies only; `stream_options.
//!   include_usage`; `matched_stop`, `metadata.weight_version`), `GET|POST /flush_cache`,
//!   `GET|POST /slow_down` (`forward_sleep_time`: every step of every DP rank's scheduler
//!   sleeps that long more until it is `null`), `/v1/loads` (`dp_rank`, `include`, `format=prometheus`; running and waiting from each
//!   DP rank's scheduler), `/metrics` only with `--enable-metrics` (as SGLang mounts it:
//!   `sglang:num_running_reqs`, `sglang:num_queue_reqs` per DP rank, and the `srt_sim_*`
//!   counters). No `/get_load` (404, as 0.5.23); unknown routes answer FastAPI's 404. DP
//!   ranks (replicas or attention-DP groups) each have a scheduler; requests go round
//!   robin, by `bootstrap_room % ranks` under `follow_bootstrap_room`, or to
//!   `routed_dp_rank`. Limits are `--max-running-requests` and `--chunked-prefill-size`
//!   (the core's 256 and 8192 when unset).
//! - **Prefill/decode** ([`sglang::bootstrap`]): a request in either mode needs a
//!   `bootstrap_room` (else 400 `Invalid request: Disaggregated request received without
//!   bootstrap room id`, as SGLang's scheduler answers; not with the `fake` backend). The
//!   prefill computes the prompt (one token) and records the room on its bootstrap server;
//!   the decode asks the prefill's bootstrap server at `bootstrap_host:bootstrap_port`
//!   (`null`: its own `--disaggregation-bootstrap-port`, as SGLang's scheduler does) first
//!   `GET /route` (retried while 503), then the simulator's own `GET
//!   /srt_sim/rooms/{room}` until the room is done, then generates. It answers 500
//!   `Decode handshake failed …` when the bootstrap server cannot be reached, the request
//!   has no `bootstrap_host`, or `SRT_SIM_PD_WAIT_MS` passes; streamed, the failure is an
//!   error event and `[DONE]`. `bootstrap_host` `2.2.2.2` (SGLang's fake host) pairs with
//!   nothing. The decode's `srt_sim` names `bootstrap_room`, `bootstrap` (where it asked),
//!   `kv_from` (the prefill's `host:port`) and `prefill_dp_rank`.
//!
//! SGLang's own variables are only logged (names, values for `CUDA_VISIBLE_DEVICES` and
//! `HEAD_NODE_IP`); `CUDA_VISIBLE_DEVICES` is checked as above.
//!
//! ## Limits
//!
//! No memory model (token counts in `/v1/loads` are zero, `max_total_num_tokens` is a
//! stand-in), no radix or prefix cache, no batches (a list of prompts to `/generate` is
//! refused), no LoRA, logprobs, embeddings or the other SGLang routes. Ranks on follower
//! nodes are simulated by node rank 0 (its bootstrap server registers every rank; a
//! follower registers nothing and binds no ZMQ port). A follower ends on SIGTERM (SGLang's
//! waits for rank 0's shutdown). Streamed `/generate` events carry no `e2e_latency`. A
//! chat with no `max_tokens` gets 128 tokens (SGLang generates to the context length).

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
