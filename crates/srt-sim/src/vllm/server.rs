//! The OpenAI-compatible HTTP API (axum): health, models, metrics, completions and chat
//! completions, with the prefill/decode behaviour of the configured KV connector.

use std::sync::atomic::{AtomicI64, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;

use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderMap, StatusCode};
use axum::middleware;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{json, Map, Value};

use super::config::SimConfig;
use super::kv::{self, Connector, FailurePolicy, PrefillSource, Stage};
use crate::common::http::{self, access_log, label, Readiness, StageCounters, MAX_BODY};
use crate::common::log;
use crate::common::openai::{Dialect, Reply};
use crate::common::sched::Scheduler;
use crate::common::text::{max_tokens_of, now_secs, prompt_of, token_ids, tokens, Api};

/// Tokens per KV block, for the block ids handed out by prefills.
const BLOCK_SIZE: u64 = 16;

/// The vLLM version the simulator stands in for.
pub const VLLM_VERSION: &str = "0.32.0";

/// One DP engine as the simulator knows it.
#[derive(Debug)]
pub struct Engine {
    /// Global DP rank.
    pub rank: u32,
    /// KV-transfer engine id.
    pub engine_id: String,
    /// NIXL: side-channel port of this rank. MoRI-IO: its handshake port.
    pub kv_port: Option<u16>,
    /// MoRI-IO: notify port of this rank.
    pub notify_port: Option<u16>,
    next_block: AtomicU64,
    running: AtomicI64,
    /// The engine's timing model.
    sched: Scheduler,
}

/// The engines a process knows about: its local engines and those its API server fronts.
pub fn engines(cfg: &SimConfig) -> Vec<Engine> {
    let mut ranks: Vec<u32> = cfg
        .local_ranks
        .iter()
        .chain(cfg.api_ranks.iter())
        .copied()
        .collect();
    ranks.sort_unstable();
    ranks.dedup();
    let first_local = cfg.local_ranks.first().copied().unwrap_or(0);
    let base_id = cfg
        .kv
        .as_ref()
        .and_then(|k| k.engine_id.clone())
        .unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
    ranks
        .into_iter()
        .map(|rank| {
            let local_idx = if cfg.local_ranks.contains(&rank) {
                rank - first_local
            } else {
                0
            };
            let (engine_id, kv_port, notify_port) = match cfg.kv.as_ref().map(|k| &k.connector) {
                Some(Connector::MoriIo) => {
                    let m = cfg
                        .kv
                        .as_ref()
                        .and_then(|k| k.mori.as_ref())
                        .expect("MoRI settings");
                    let hs = m.handshake_port.saturating_add(local_idx as u16);
                    (
                        format!("{}:{hs}", cfg.mori_host_ip),
                        Some(hs),
                        Some(m.notify_port.saturating_add(local_idx as u16)),
                    )
                }
                Some(Connector::Nixl) => {
                    // vLLM's DP engine cores append their *local* DP rank.
                    let id = if cfg.dp_size > 1 {
                        format!("{base_id}_dp{local_idx}")
                    } else {
                        base_id.clone()
                    };
                    (
                        id,
                        Some(cfg.nixl_base_port.saturating_add(rank as u16)),
                        None,
                    )
                }
                _ => (base_id.clone(), None, None),
            };
            Engine {
                rank,
                engine_id,
                kv_port,
                notify_port,
                next_block: AtomicU64::new(1),
                running: AtomicI64::new(0),
                sched: Scheduler::new(cfg.timing),
            }
        })
        .collect()
}

/// Shared state of the HTTP server.
pub struct AppState {
    cfg: Arc<SimConfig>,
    engines: Vec<Engine>,
    rr: AtomicUsize,
    stages: StageCounters,
    readiness: Readiness,
    tokenizer: Option<tokenizers::Tokenizer>,
}

impl AppState {
    /// State for a server that became healthy now, over the engines from [`engines`] (the
    /// same ones whose ids the side channels announce).
    pub fn new(cfg: Arc<SimConfig>, engines: Vec<Engine>) -> Self {
        let tokenizer = crate::common::text::load_tokenizer(cfg.tokenizer.as_deref());
        let readiness = Readiness::new(std::time::Duration::ZERO, cfg.knobs.unhealthy_after);
        AppState {
            cfg,
            engines,
            rr: AtomicUsize::new(0),
            stages: StageCounters::default(),
            readiness,
            tokenizer,
        }
    }

    fn api_engines(&self) -> impl Iterator<Item = &Engine> {
        self.engines
            .iter()
            .filter(|e| self.cfg.api_ranks.contains(&e.rank))
    }

    fn served_by(&self) -> String {
        format!("{}:{}", self.cfg.http_host(), self.cfg.args.port)
    }
}

/// Builds the router.
pub fn app(state: Arc<AppState>) -> Router {
    Router::new()
        .route("/health", get(health))
        .route("/ping", get(health).post(health))
        .route("/load", get(load))
        .route("/version", get(version))
        .route("/v1/models", get(models))
        .route("/metrics", get(metrics))
        .route(
            "/v1/completions",
            post(|s: State<Arc<AppState>>, h: HeaderMap, b: Bytes| {
                generate(s, h, b, Api::Completions)
            }),
        )
        .route(
            "/v1/chat/completions",
            post(|s: State<Arc<AppState>>, h: HeaderMap, b: Bytes| generate(s, h, b, Api::Chat)),
        )
        .route(
            "/v1/completions/render",
            post(|s: State<Arc<AppState>>, b: Bytes| render(s, b, Api::Completions)),
        )
        .route(
            "/v1/chat/completions/render",
            post(|s: State<Arc<AppState>>, b: Bytes| render(s, b, Api::Chat)),
        )
        .route("/v1/completions/derender", post(scale_out_only))
        .route("/v1/chat/completions/derender", post(scale_out_only))
        .route("/inference/v1/generate", post(scale_out_only))
        .route("/inference/v1/abort_requests", post(scale_out_only))
        .route("/tokenize", post(tokenize))
        .route("/kv_event_sources", get(kv_event_sources))
        .layer(DefaultBodyLimit::max(MAX_BODY))
        .layer(middleware::from_fn(access_log))
        .with_state(state)
}

async fn health(State(st): State<Arc<AppState>>) -> StatusCode {
    if st.readiness.healthy() {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    }
}

async fn load(State(st): State<Arc<AppState>>) -> Json<Value> {
    let n: i64 = st
        .engines
        .iter()
        .map(|e| e.running.load(Ordering::Relaxed))
        .sum();
    Json(json!({ "server_load": n }))
}

/// vLLM 0.32's answer on its scale-out routes (render, derender, token-in generate)
/// when `vllm serve` did not get `--enable-scale-out`.
const SCALE_OUT_DISABLED: &str =
    "Scale-out endpoints are disabled. Restart vllm serve with --enable-scale-out to enable them.";

fn scale_out_disabled() -> Response {
    log::info(&format!("request refused (403): {SCALE_OUT_DISABLED}"));
    (
        StatusCode::FORBIDDEN,
        Json(json!({"error": {"message": SCALE_OUT_DISABLED, "type": "PermissionDeniedError", "param": null, "code": 403}})),
    )
        .into_response()
}

/// A scale-out route the simulator does not model beyond vLLM's gate: 403 without
/// `--enable-scale-out`, else 501.
async fn scale_out_only(State(st): State<Arc<AppState>>) -> Response {
    if !st.cfg.args.enable_scale_out {
        return scale_out_disabled();
    }
    error(
        StatusCode::NOT_IMPLEMENTED,
        "the simulator does not implement this scale-out route",
    )
}

/// `POST /v1/completions/render` and `/v1/chat/completions/render`: the prompt's token
/// ids and sampling parameters, the shape vLLM 0.32 answers with `--enable-scale-out`
/// (a one-element list), 403 without it.
async fn render(State(st): State<Arc<AppState>>, body: Bytes, api: Api) -> Response {
    if !st.cfg.args.enable_scale_out {
        return scale_out_disabled();
    }
    let req: Value = match serde_json::from_slice(&body) {
        Ok(v) => v,
        Err(e) => return error(StatusCode::BAD_REQUEST, format!("invalid JSON body: {e}")),
    };
    let (_, text) = match prompt_of(&req, api, st.tokenizer.as_ref()) {
        Ok(p) => p,
        Err(msg) => return error(StatusCode::BAD_REQUEST, msg),
    };
    let max_tokens = max_tokens_of(&req, api, DEFAULT_MAX_TOKENS).unwrap_or(16);
    Json(json!([{
        "request_id": format!("cmpl-{}", uuid::Uuid::new_v4().simple()),
        "token_ids": token_ids(st.tokenizer.as_ref(), &text),
        "sampling_params": {"max_tokens": max_tokens, "temperature": 1.0},
        "model": st.cfg.model_name(),
        "stream": req.get("stream").and_then(Value::as_bool).unwrap_or(false),
        "kv_transfer_params": null,
    }]))
    .into_response()
}

/// `POST /tokenize`: served whatever the flags, as by vLLM.
async fn tokenize(State(st): State<Arc<AppState>>, body: Bytes) -> Response {
    let req: Value = match serde_json::from_slice(&body) {
        Ok(v) => v,
        Err(e) => return error(StatusCode::BAD_REQUEST, format!("invalid JSON body: {e}")),
    };
    let api = match req.get("messages") {
        Some(_) => Api::Chat,
        None => Api::Completions,
    };
    let (_, text) = match prompt_of(&req, api, st.tokenizer.as_ref()) {
        Ok(p) => p,
        Err(msg) => return error(StatusCode::BAD_REQUEST, msg),
    };
    let ids = token_ids(st.tokenizer.as_ref(), &text);
    Json(json!({
        "count": ids.len(),
        "max_model_len": st.cfg.args.max_model_len,
        "tokens": ids,
        "token_strs": null,
    }))
    .into_response()
}

/// `GET /kv_event_sources`: no KV-event publisher (vLLM without `--kv-events-config`).
async fn kv_event_sources() -> Json<Value> {
    Json(json!({}))
}

async fn version() -> Json<Value> {
    Json(json!({ "version": VLLM_VERSION }))
}

async fn models(State(st): State<Arc<AppState>>) -> Json<Value> {
    let data: Vec<Value> = st
        .cfg
        .served_names
        .iter()
        .map(|name| {
            json!({
                "id": name,
                "object": "model",
                "created": now_secs(),
                "owned_by": "vllm",
                "root": st.cfg.args.model,
                "parent": null,
                "max_model_len": st.cfg.args.max_model_len,
                "permission": [],
            })
        })
        .collect();
    Json(json!({ "object": "list", "data": data }))
}

async fn metrics(State(st): State<Arc<AppState>>) -> Response {
    let mut out = String::new();
    if !st.cfg.args.disable_log_stats {
        let model = label(st.cfg.model_name());
        for (name, help) in [
            (
                "vllm:num_requests_running",
                "Number of requests in model execution batches.",
            ),
            (
                "vllm:num_requests_waiting",
                "Number of requests waiting to be processed.",
            ),
        ] {
            out.push_str(&format!("# HELP {name} {help}\n# TYPE {name} gauge\n"));
            for e in st.api_engines() {
                let v = if name.ends_with("running") {
                    e.running.load(Ordering::Relaxed) as f64
                } else {
                    0.0
                };
                out.push_str(&format!(
                    "{name}{{engine=\"{}\",model_name=\"{model}\"}} {v:.1}\n",
                    e.rank
                ));
            }
        }
    }
    st.stages.write(&mut out);
    http::prometheus(out)
}

fn error(status: StatusCode, msg: impl Into<String>) -> Response {
    let kind = match status {
        StatusCode::BAD_REQUEST => "BadRequestError",
        StatusCode::NOT_FOUND => "NotFoundError",
        _ => "InternalServerError",
    };
    let msg = msg.into();
    log::info(&format!("request refused ({}): {msg}", status.as_u16()));
    (
        status,
        Json(json!({"error": {"message": msg, "type": kind, "param": null, "code": status.as_u16()}})),
    )
        .into_response()
}

/// A refused request: status and message, rendered by [`error`].
type Failure = (StatusCode, String);

fn fail(status: StatusCode, msg: impl Into<String>) -> Failure {
    (status, msg.into())
}

struct RunningGuard<'a>(&'a AtomicI64);

/// Decrements a rank's running gauge when a response stream is dropped.
struct StreamGuard {
    state: Arc<AppState>,
    rank: u32,
}

impl Drop for StreamGuard {
    fn drop(&mut self) {
        if let Some(e) = self.state.engines.iter().find(|e| e.rank == self.rank) {
            e.running.fetch_sub(1, Ordering::Relaxed);
        }
    }
}

impl Drop for RunningGuard<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

fn pick_engine<'a>(st: &'a AppState, headers: &HeaderMap) -> Result<&'a Engine, Failure> {
    let api: Vec<&Engine> = st.api_engines().collect();
    if api.is_empty() {
        return Err(fail(
            StatusCode::SERVICE_UNAVAILABLE,
            "no engines are attached to this API server",
        ));
    }
    match headers.get("x-data-parallel-rank") {
        None => Ok(api[st.rr.fetch_add(1, Ordering::Relaxed) % api.len()]),
        Some(v) => {
            let raw = v.to_str().unwrap_or("").trim();
            let rank: Option<u32> = raw.parse().ok();
            match rank.and_then(|r| api.iter().find(|e| e.rank == r)) {
                Some(e) => Ok(e),
                None => Err(fail(
                    StatusCode::BAD_REQUEST,
                    format!(
                        "x-data-parallel-rank '{raw}' is not served here (ranks {})",
                        api.iter()
                            .map(|e| e.rank.to_string())
                            .collect::<Vec<_>>()
                            .join(",")
                    ),
                )),
            }
        }
    }
}

/// The KV transfer outcome of a decode stage.
struct DecodeOutcome {
    kv_from: String,
    transfer_id: Option<String>,
    recomputed: bool,
}

async fn run_decode(
    st: &AppState,
    params: &Value,
    request_id: &str,
) -> Result<DecodeOutcome, Failure> {
    let kvc = st.cfg.kv.as_ref().expect("decode implies a connector");
    let (src, check) = match &kvc.connector {
        Connector::Nixl => (
            kv::nixl_decode_source(params).map_err(|m| fail(StatusCode::BAD_REQUEST, m))?,
            true,
        ),
        Connector::MoriIo => {
            let read = kvc.mori.as_ref().is_some_and(|m| m.read_mode);
            (
                kv::mori_decode_source(params, read, request_id)
                    .map_err(|m| fail(StatusCode::BAD_REQUEST, m))?,
                read,
            )
        }
        Connector::Other(_) => unreachable!("other connectors serve as aggregate"),
    };
    let mut recomputed = false;
    if check && st.cfg.vllm_knobs.kv_handshake {
        if let (Some(host), Some(port)) = (src.host.as_deref(), src.port) {
            let got = kv::handshake(host, port, std::time::Duration::from_secs(3)).await;
            let failure = match got {
                Ok(id) if id == src.engine_id => None,
                Ok(id) => Some(format!(
                    "remote engine id mismatch: {host}:{port} serves engine '{id}', the request \
                     names '{}'",
                    src.engine_id
                )),
                Err(e) => Some(e),
            };
            if let Some(why) = failure {
                match kvc.failure_policy {
                    FailurePolicy::Fail => {
                        return Err(fail(
                            StatusCode::INTERNAL_SERVER_ERROR,
                            format!("KV load from engine '{}' failed: {why}", src.engine_id),
                        ))
                    }
                    FailurePolicy::Recompute => {
                        log::info(&format!(
                            "KV load from engine '{}' failed ({why}); recomputing the prompt",
                            src.engine_id
                        ));
                        recomputed = true;
                    }
                }
            }
        }
    }
    Ok(DecodeOutcome {
        kv_from: src.engine_id,
        transfer_id: src.transfer_id,
        recomputed,
    })
}

async fn generate(
    State(st): State<Arc<AppState>>,
    headers: HeaderMap,
    body: Bytes,
    api: Api,
) -> Response {
    let req: Value = match serde_json::from_slice(&body) {
        Ok(v @ Value::Object(_)) => v,
        Ok(_) => {
            return error(
                StatusCode::BAD_REQUEST,
                "the request body must be a JSON object",
            )
        }
        Err(e) => return error(StatusCode::BAD_REQUEST, format!("invalid JSON body: {e}")),
    };
    if let Some(m) = req.get("model").and_then(Value::as_str) {
        if !m.is_empty() && !st.cfg.served_names.iter().any(|n| n == m) {
            return error(
                StatusCode::NOT_FOUND,
                format!("The model `{m}` does not exist."),
            );
        }
    }
    let engine = match pick_engine(&st, &headers) {
        Ok(e) => e,
        Err((status, m)) => return error(status, m),
    };
    let (prompt_tokens, seed_text) = match prompt_of(&req, api, st.tokenizer.as_ref()) {
        Ok(p) => p,
        Err(m) => return error(StatusCode::BAD_REQUEST, m),
    };
    let requested = match max_tokens_of(&req, api, DEFAULT_MAX_TOKENS) {
        Ok(n) => n,
        Err(m) => return error(StatusCode::BAD_REQUEST, m),
    };
    if let Some(limit) = st.cfg.args.max_model_len {
        if prompt_tokens + requested > limit {
            return error(
                StatusCode::BAD_REQUEST,
                format!(
                    "This model's maximum context length is {limit} tokens. However, you \
                     requested {} tokens ({prompt_tokens} in the messages, {requested} in the \
                     completion). Please reduce the length of the messages or completion.",
                    prompt_tokens + requested
                ),
            );
        }
    }
    let rid = headers
        .get("x-request-id")
        .and_then(|v| v.to_str().ok())
        .filter(|s| !s.is_empty())
        .map_or_else(|| uuid::Uuid::new_v4().simple().to_string(), str::to_string);
    let id = match api {
        Api::Completions => format!("cmpl-{rid}"),
        Api::Chat => format!("chatcmpl-{rid}"),
    };

    let params = req.get("kv_transfer_params").filter(|v| !v.is_null());
    let asked = kv::stage_of(params);
    let stage = match st.cfg.kv.as_ref().map(|k| &k.connector) {
        Some(Connector::Nixl | Connector::MoriIo) => asked,
        Some(Connector::Other(name)) => {
            if asked != Stage::Agg {
                log::info(&format!(
                    "{name} is not simulated; serving a {} request as aggregate",
                    asked.as_str()
                ));
            }
            Stage::Agg
        }
        None => {
            if params.is_some() {
                log::info("Got kv_transfer_params, but no KVConnector found. Disabling KVTransfer");
            }
            Stage::Agg
        }
    };

    engine.running.fetch_add(1, Ordering::Relaxed);
    let guard = RunningGuard(&engine.running);
    let served_by = st.served_by();
    let mut sim = json!({"stage": stage.as_str(), "served_by": served_by, "dp_rank": engine.rank});
    let mut kv_out = Value::Null;
    // Prompt tokens this engine computes: none on a decode that loaded them remotely.
    let mut prefill = prompt_tokens;
    let completion_tokens = match stage {
        Stage::Agg => requested,
        Stage::Prefill => {
            let n_blocks = prompt_tokens.div_ceil(BLOCK_SIZE).max(1);
            let first = engine.next_block.fetch_add(n_blocks, Ordering::Relaxed);
            let kvc = st.cfg.kv.as_ref().expect("prefill implies a connector");
            let (host, notify) = match &kvc.connector {
                Connector::MoriIo => (st.cfg.mori_host_ip.clone(), engine.notify_port.unwrap_or(0)),
                _ => (st.cfg.nixl_host.clone(), 0),
            };
            let src = PrefillSource {
                engine_id: &engine.engine_id,
                request_id: &id,
                host: &host,
                port: engine.kv_port.unwrap_or(0),
                notify_port: notify,
                tp_size: st.cfg.args.tensor_parallel_size,
                pp_size: st.cfg.args.pipeline_parallel_size,
                block_ids: (first..first + n_blocks).collect(),
                num_tokens: prompt_tokens,
            };
            kv_out = match &kvc.connector {
                Connector::MoriIo => {
                    match kv::mori_prefill_params(params.expect("prefill has params"), &src) {
                        Ok(v) => v,
                        Err(m) => return error(StatusCode::BAD_REQUEST, m),
                    }
                }
                _ => kv::nixl_prefill_params(&src),
            };
            sim["engine_id"] = json!(engine.engine_id);
            1
        }
        Stage::Decode => {
            let out = match run_decode(&st, params.expect("decode has params"), &rid).await {
                Ok(o) => o,
                Err((status, m)) => return error(status, m),
            };
            sim["kv_from"] = json!(out.kv_from);
            if let Some(t) = out.transfer_id {
                sim["transfer_id"] = json!(t);
            }
            if out.recomputed {
                sim["recomputed"] = json!(true);
            } else {
                st.stages.kv_consumed.fetch_add(1, Ordering::Relaxed);
                prefill = 0;
            }
            requested
        }
    };
    match stage {
        Stage::Agg => &st.stages.agg,
        Stage::Prefill => &st.stages.prefill,
        Stage::Decode => &st.stages.decode,
    }
    .fetch_add(1, Ordering::Relaxed);

    let stream = req.get("stream").and_then(Value::as_bool).unwrap_or(false);
    let include_usage = req
        .pointer("/stream_options/include_usage")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let n_choices = req
        .get("n")
        .and_then(Value::as_u64)
        .unwrap_or(1)
        .clamp(1, 16);
    log::info(&format!(
        "request {id}: {} rank={} stage={} prompt_tokens={prompt_tokens} completion_tokens={completion_tokens}{}",
        match api {
            Api::Completions => "completion",
            Api::Chat => "chat",
        },
        engine.rank,
        stage.as_str(),
        sim.get("kv_from")
            .and_then(Value::as_str)
            .map(|k| format!(" kv_from={k}"))
            .unwrap_or_default()
    ));

    let mut tail = Map::new();
    tail.insert("prompt_logprobs".into(), Value::Null);
    tail.insert("kv_transfer_params".into(), kv_out.clone());
    tail.insert("srt_sim".into(), sim.clone());
    let mut last_chunk = Map::new();
    last_chunk.insert("srt_sim".into(), sim);
    if !kv_out.is_null() {
        last_chunk.insert("kv_transfer_params".into(), kv_out);
    }
    let reply = Reply {
        dialect: &VllmDialect,
        api,
        id,
        model: st.cfg.model_name().to_string(),
        created: now_secs(),
        prompt_tokens,
        choices: (0..n_choices)
            .map(|c| tokens(&seed_text, c, completion_tokens))
            .collect(),
        tail,
        last_chunk,
    };
    // Tokens come from the engine's scheduler (the timing model, `sched`); a stream sends
    // each token's frame as it is generated, a plain answer once all are.
    let toks = engine.sched.submit(prefill, completion_tokens);
    if stream {
        let frames = reply.sse_frames(include_usage);
        // The stream keeps the rank counted as running until it ends or the client leaves.
        engine.running.fetch_add(1, Ordering::Relaxed);
        drop(guard);
        let keep = StreamGuard {
            state: st.clone(),
            rank: engine.rank,
        };
        http::sse(frames, toks, keep)
    } else {
        let resp = http::when_done(toks, || reply.full()).await;
        drop(guard);
        resp
    }
}

/// Completions default to 16 tokens, as vLLM's (the simulator uses it for chats too).
const DEFAULT_MAX_TOKENS: u64 = 16;

/// vLLM 0.32's shapes.
struct VllmDialect;

impl Dialect for VllmDialect {
    fn choice_tail(&self, api: Api, full: bool) -> Map<String, Value> {
        let mut m = Map::new();
        m.insert("stop_reason".into(), Value::Null);
        if full && api == Api::Completions {
            m.insert("prompt_logprobs".into(), Value::Null);
        }
        m
    }

    fn message(&self, text: String) -> Value {
        json!({"role": "assistant", "content": text, "reasoning_content": null, "tool_calls": []})
    }

    fn role_choice(&self, index: usize) -> Value {
        json!({
            "index": index, "delta": {"role": "assistant", "content": ""},
            "logprobs": null, "finish_reason": null,
        })
    }

    fn token_delta(&self, token: &str) -> Value {
        json!({"content": token})
    }

    fn usage(&self, prompt_tokens: u64, completion_tokens: u64) -> Value {
        json!({
            "prompt_tokens": prompt_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
            "completion_tokens": completion_tokens,
            "prompt_tokens_details": null,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vllm_shapes() {
        let r = crate::common::openai::sample(&VllmDialect, Api::Chat);
        let full = r.full();
        assert_eq!(full["choices"][0]["message"]["tool_calls"], json!([]));
        assert_eq!(full["choices"][0]["stop_reason"], Value::Null);
        assert_eq!(full["usage"]["total_tokens"], 4);
        let frames = r.sse_frames(false);
        assert!(frames[0].contains(r#""delta":{"role":"assistant","content":""}"#));
    }
}
