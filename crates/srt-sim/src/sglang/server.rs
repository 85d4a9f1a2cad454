//! SGLang 0.5.23's HTTP API on node rank 0 (`srt/entrypoints/http_server.py`, shapes as
//! the docs' SGLang notes record them), with the prefill/decode hand-off of
//! [`super::bootstrap`], and the stand-in health server of the other nodes.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Path, Query, State};
use axum::http::{header, HeaderMap, StatusCode};
use axum::middleware;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde_json::{json, Map, Value};

use super::bootstrap::{self, Bootstrap, RoomDone, FAKE_BOOTSTRAP_HOST};
use super::config::{Mode, SimConfig};
use crate::common::http::{self, access_log, label, Readiness, StageCounters, MAX_BODY};
use crate::common::log;
use crate::common::openai::{push_event, Dialect, Reply, SSE_DONE};
use crate::common::sched::{ForwardSleep, Scheduler, Tokens};
use crate::common::text::{self, count, fnv, max_tokens_of, now_secs, prompt_of, tokens, Api};

/// The SGLang version the simulator stands in for.
pub const SGLANG_VERSION: &str = "0.5.23";

/// `SamplingParams.max_new_tokens`' default (`/generate`); a chat that names no limit
/// gets it too (SGLang would generate up to the context length).
const DEFAULT_MAX_NEW_TOKENS: u64 = 128;

/// OpenAI completions' `max_tokens` default.
const DEFAULT_MAX_TOKENS: u64 = 16;

/// One data-parallel rank (a replica, or an attention-DP group) and its scheduler.
#[derive(Debug)]
pub struct DpRank {
    /// Its index.
    pub rank: u32,
    sched: Scheduler,
    /// Decode requests waiting for their prefill's KV.
    transferring: AtomicUsize,
    /// Prompt tokens it computed.
    prefill_tokens: AtomicU64,
}

/// Shared state of the API server.
pub struct AppState {
    cfg: Arc<SimConfig>,
    ranks: Vec<DpRank>,
    rr: AtomicUsize,
    readiness: Readiness,
    tokenizer: Option<tokenizers::Tokenizer>,
    bootstrap: Option<Arc<Bootstrap>>,
    client: reqwest::Client,
    stages: StageCounters,
    startup_time: f64,
    /// `/slow_down`'s sleep, shared by every rank's scheduler.
    forward_sleep: ForwardSleep,
}

impl AppState {
    /// The server's state from when it starts listening: ready `warmup` later.
    pub fn new(
        cfg: Arc<SimConfig>,
        bootstrap: Option<Arc<Bootstrap>>,
        warmup: Duration,
        started: Instant,
    ) -> Self {
        let tokenizer = text::load_tokenizer(cfg.tokenizer.as_deref());
        let forward_sleep = ForwardSleep::default();
        let ranks = (0..cfg.num_dp_ranks())
            .map(|rank| DpRank {
                rank,
                sched: Scheduler::new(cfg.timing).slowed_by(forward_sleep.clone()),
                transferring: AtomicUsize::new(0),
                prefill_tokens: AtomicU64::new(0),
            })
            .collect();
        AppState {
            readiness: Readiness::new(warmup, cfg.knobs.unhealthy_after),
            ranks,
            rr: AtomicUsize::new(0),
            tokenizer,
            bootstrap,
            client: reqwest::Client::new(),
            stages: StageCounters::default(),
            startup_time: started.elapsed().as_secs_f64(),
            forward_sleep,
            cfg,
        }
    }

    fn served_by(&self) -> String {
        format!("{}:{}", self.cfg.args.host, self.cfg.args.port)
    }

    fn vocab(&self) -> u64 {
        self.cfg
            .model_config
            .as_ref()
            .and_then(|c| c.get("vocab_size"))
            .and_then(Value::as_u64)
            .filter(|v| *v > 0)
            .unwrap_or(32_000)
    }
}

/// The API server's routes (node rank 0).
pub fn app(state: Arc<AppState>) -> Router {
    let mut r = Router::new()
        .route("/health", get(health))
        .route("/health_generate", get(health))
        .route("/ready", get(health))
        .route("/ping", get(health))
        .route("/model_info", get(model_info))
        .route(
            "/get_model_info",
            get(|s: State<Arc<AppState>>| async move {
                deprecated("/get_model_info", "/model_info");
                model_info(s).await
            }),
        )
        .route("/server_info", get(server_info))
        .route(
            "/get_server_info",
            get(|s: State<Arc<AppState>>| async move {
                deprecated("/get_server_info", "/server_info");
                server_info(s).await
            }),
        )
        .route("/v1/models", get(models))
        .route("/v1/models/{*model}", get(model_card))
        .route("/generate", axum::routing::post(generate).put(generate))
        .route(
            "/v1/completions",
            axum::routing::post(|s: State<Arc<AppState>>, h: HeaderMap, b: Bytes| {
                openai(s, h, b, Api::Completions)
            }),
        )
        .route(
            "/v1/chat/completions",
            axum::routing::post(|s: State<Arc<AppState>>, h: HeaderMap, b: Bytes| {
                openai(s, h, b, Api::Chat)
            }),
        )
        .route("/flush_cache", get(flush_cache).post(flush_cache))
        .route("/slow_down", get(slow_down).post(slow_down))
        .route("/v1/loads", get(loads));
    if state.cfg.args.enable_metrics {
        r = r.route("/metrics", get(metrics));
    }
    r.fallback(not_found)
        .layer(DefaultBodyLimit::max(MAX_BODY))
        .layer(middleware::from_fn(access_log))
        .with_state(state)
}

/// The stand-in a node with `--node-rank >= 1` serves (SGLang's
/// `launch_dummy_health_check_server`): `/ping`, `/health`, `/health_generate`, 200.
pub fn follower_app() -> Router {
    Router::new()
        .route("/ping", get(|| async { StatusCode::OK }))
        .route("/health", get(|| async { StatusCode::OK }))
        .route("/health_generate", get(|| async { StatusCode::OK }))
        .fallback(not_found)
        .layer(middleware::from_fn(access_log))
}

/// FastAPI's 404.
async fn not_found() -> Response {
    (StatusCode::NOT_FOUND, Json(json!({"detail": "Not Found"}))).into_response()
}

fn deprecated(old: &str, new: &str) {
    log::warn(&format!(
        "Endpoint '{old}' is deprecated and will be removed in a future version. Please use \
         '{new}' instead."
    ));
}

/// `/health`, `/health_generate`, `/ready`, `/ping`: 503 until the warmup is done (or
/// past `SRT_SIM_UNHEALTHY_AFTER_MS`), empty bodies.
async fn health(State(st): State<Arc<AppState>>) -> StatusCode {
    if st.readiness.healthy() {
        StatusCode::OK
    } else {
        StatusCode::SERVICE_UNAVAILABLE
    }
}

fn model_config_field(st: &AppState, key: &str) -> Value {
    st.cfg
        .model_config
        .as_ref()
        .and_then(|c| c.get(key))
        .cloned()
        .unwrap_or(Value::Null)
}

async fn model_info(State(st): State<Arc<AppState>>) -> Json<Value> {
    let a = &st.cfg.args;
    let given = |dest: &str| a.parsed.get(dest).cloned().unwrap_or(Value::Null);
    Json(json!({
        "model_path": a.model_path,
        "served_model_name": a.served_model_name,
        "tokenizer_path": a.tokenizer_path,
        "is_generation": true,
        "preferred_sampling_params": given("preferred_sampling_params"),
        "weight_version": a.parsed.str("weight_version").unwrap_or("default"),
        "load_format": a.parsed.str("load_format").unwrap_or("auto"),
        "reasoning_parser": given("reasoning_parser"),
        "tool_call_parser": given("tool_call_parser"),
        "disaggregation_mode": st.cfg.mode.as_str(),
        "has_image_understanding": false,
        "has_audio_understanding": false,
        "model_type": model_config_field(&st, "model_type"),
        "architectures": model_config_field(&st, "architectures"),
    }))
}

/// Each DP rank's running and waiting sequences.
fn rank_load(r: &DpRank) -> (usize, usize) {
    r.sched.load()
}

async fn server_info(State(st): State<Arc<AppState>>) -> Json<Value> {
    let c = &st.cfg;
    let a = &c.args;
    let mut m = match json!({
        "model_path": a.model_path,
        "tokenizer_path": a.tokenizer_path,
        "served_model_name": a.served_model_name,
        "host": a.host,
        "port": a.port,
        "nccl_port": a.nccl_port,
        "dist_init_addr": a.dist_init_addr,
        "nnodes": a.nnodes,
        "node_rank": a.node_rank,
        "tp_size": a.tp_size,
        "pp_size": a.pp_size,
        "dp_size": c.dp_size,
        "attn_dp_size": c.attn_dp_size,
        "enable_dp_attention": c.attn_dp_size > 1,
        "ep_size": a.ep_size,
        "moe_dense_tp_size": a.moe_dense_tp_size,
        "base_gpu_id": a.base_gpu_id,
        "gpu_id_step": a.gpu_id_step,
        "load_balance_method": c.load_balance_method,
        "disaggregation_mode": c.mode.as_str(),
        "disaggregation_bootstrap_port": a.disaggregation_bootstrap_port,
        "disaggregation_transfer_backend": c.transfer_backend,
        "disable_radix_cache": c.mode == Mode::Decode || a.parsed.flag("disable_radix_cache", false),
        "skip_server_warmup": a.skip_server_warmup,
        "enable_metrics": a.enable_metrics,
        "context_length": c.context_length,
        "max_running_requests": c.timing.max_num_seqs,
        "chunked_prefill_size": c.timing.max_batched_tokens,
    }) {
        Value::Object(m) => m,
        _ => Map::new(),
    };
    for (dest, v) in a.parsed.iter() {
        m.entry(dest.to_string()).or_insert_with(|| v.clone());
    }
    let internal: Vec<Value> = st
        .ranks
        .iter()
        .map(|r| {
            let (running, waiting) = rank_load(r);
            json!({
                "dp_rank": r.rank,
                "num_running_reqs": running,
                "num_waiting_reqs": waiting,
                "last_gen_throughput": 0.0,
                "load_balance_method": c.load_balance_method,
            })
        })
        .collect();
    m.insert("launch_command".into(), json!(c.launch_command));
    m.insert("max_total_num_tokens".into(), json!(max_total_tokens(c)));
    m.insert("kv_events".into(), Value::Null);
    m.insert("startup_time".into(), json!(st.startup_time));
    m.insert("internal_states".into(), Value::Array(internal));
    m.insert("version".into(), json!(SGLANG_VERSION));
    m.insert("frontend".into(), json!("python"));
    Json(Value::Object(m))
}

/// The token budget reported for the KV cache (the simulator has no memory model).
fn max_total_tokens(c: &SimConfig) -> u64 {
    c.context_length.unwrap_or(4096) * c.timing.max_num_seqs as u64
}

async fn models(State(st): State<Arc<AppState>>) -> Json<Value> {
    let name = &st.cfg.args.served_model_name;
    Json(json!({"object": "list", "data": [card(&st, name)]}))
}

fn card(st: &AppState, name: &str) -> Value {
    json!({
        "id": name,
        "object": "model",
        "created": now_secs(),
        "owned_by": "sglang",
        "root": name,
        "parent": null,
        "max_model_len": st.cfg.context_length,
    })
}

async fn model_card(State(st): State<Arc<AppState>>, Path(model): Path<String>) -> Response {
    if model != st.cfg.args.served_model_name {
        return (
            StatusCode::NOT_FOUND,
            Json(json!({"error": {
                "message": format!("The model '{model}' does not exist"),
                "type": "invalid_request_error",
                "param": "model",
                "code": "model_not_found",
            }})),
        )
            .into_response();
    }
    Json(card(&st, &model)).into_response()
}

async fn flush_cache(State(st): State<Arc<AppState>>) -> Response {
    let busy: usize = st
        .ranks
        .iter()
        .map(|r| {
            let (running, waiting) = rank_load(r);
            running + waiting
        })
        .sum();
    if busy > 0 {
        return (
            StatusCode::BAD_REQUEST,
            format!("Flush cache failed: {busy} request(s) are running or waiting.\n"),
        )
            .into_response();
    }
    (
        StatusCode::OK,
        "Cache flushed.\nPlease check backend logs for more details. (When there are running \
         or waiting requests, the operation will not be performed.)\n",
    )
        .into_response()
}

/// `/slow_down` (SGLang's, for tests of large P/D deployments): every forward pass
/// sleeps `forward_sleep_time` seconds from now on, `null` stops it. Its body is
/// `SlowDownReqInput`, whose one field FastAPI requires; the answer is the handler's
/// `None`.
async fn slow_down(State(st): State<Arc<AppState>>, body: Bytes) -> Response {
    let invalid = |kind: &str, msg: &str| {
        let detail =
            json!({"detail": [{"type": kind, "loc": ["body", "forward_sleep_time"], "msg": msg}]});
        (StatusCode::UNPROCESSABLE_ENTITY, Json(detail)).into_response()
    };
    let v: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let sleep = match v.get("forward_sleep_time") {
        None => return invalid("missing", "Field required"),
        Some(Value::Null) => None,
        Some(n) => match n.as_f64() {
            Some(secs) if secs.is_finite() && secs >= 0.0 => Some(Duration::from_secs_f64(secs)),
            _ => return invalid("float_parsing", "Input should be a valid number"),
        },
    };
    st.forward_sleep.set(sleep);
    Json(Value::Null).into_response()
}

/// `YYYY-MM-DDThh:mm:ss.ffffff+00:00`, Python's `datetime.now(timezone.utc).isoformat()`.
fn iso_now() -> String {
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default();
    let (y, mo, d) = log::civil_date((now.as_secs() / 86_400) as i64);
    let tod = now.as_secs() % 86_400;
    format!(
        "{y:04}-{mo:02}-{d:02}T{:02}:{:02}:{:02}.{:06}+00:00",
        tod / 3600,
        (tod / 60) % 60,
        tod % 60,
        now.subsec_micros()
    )
}

/// One DP rank's `LoadSnapshot.to_dict(include)`.
fn load_snapshot(st: &AppState, r: &DpRank, sections: Option<&[String]>) -> Value {
    let (running, waiting) = rank_load(r);
    let c = &st.cfg;
    let mut m = match json!({
        "timestamp": SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default().as_secs_f64(),
        "dp_rank": r.rank,
        "num_running_reqs": running,
        "num_waiting_reqs": waiting,
        "num_waiting_uncached_tokens": 0,
        "num_used_tokens": 0,
        "num_total_tokens": 0,
        "num_active_tokens": 0,
        "num_prealloc_ready_tokens": 0,
        "max_total_num_tokens": max_total_tokens(c),
        "max_running_requests": c.timing.max_num_seqs,
        "token_usage": 0.0,
        "gen_throughput": 0.0,
        "cache_hit_rate": 0.0,
        "utilization": running as f64 / c.timing.max_num_seqs.max(1) as f64,
        "total_prefill_uncached_tokens": r.prefill_tokens.load(Ordering::Relaxed),
        "total_prefill_busy_us": 0,
        "decode_moments": null,
    }) {
        Value::Object(m) => m,
        _ => Map::new(),
    };
    let wants = |name: &str| sections.is_none_or(|s| s.iter().any(|x| x == name || x == "all"));
    if wants("disagg") {
        m.insert(
            "disaggregation".into(),
            json!({
                "mode": c.mode.as_str(),
                "prefill_bootstrap_queue_reqs": 0,
                "prefill_inflight_queue_reqs": 0,
                "decode_prealloc_queue_reqs": 0,
                "decode_transfer_queue_reqs": r.transferring.load(Ordering::Relaxed),
                "decode_retracted_queue_reqs": 0,
                "kv_transfer_speed_gb_s": 0.0,
                "kv_transfer_latency_ms": 0.0,
            }),
        );
    }
    if wants("queues") {
        m.insert(
            "queues".into(),
            json!({"waiting": waiting, "grammar": 0, "paused": 0, "retracted": 0, "prealloc_ready": 0}),
        );
    }
    Value::Object(m)
}

/// `GET /v1/loads?dp_rank=&include=&format=`.
async fn loads(
    State(st): State<Arc<AppState>>,
    Query(q): Query<std::collections::HashMap<String, String>>,
) -> Response {
    const VALID: &[&str] = &["core", "memory", "spec", "lora", "disagg", "queues", "all"];
    let include: Option<Vec<String>> = q
        .get("include")
        .filter(|s| !s.is_empty())
        .map(|s| s.split(',').map(|x| x.trim().to_string()).collect());
    if let Some(inc) = &include {
        let bad: Vec<&String> = inc
            .iter()
            .filter(|x| !VALID.contains(&x.as_str()))
            .collect();
        if !bad.is_empty() {
            // FastAPI's HTTPException(400), as SGLang's handler renders it.
            return (
                StatusCode::BAD_REQUEST,
                Json(json!({
                    "object": "error",
                    "message": format!("Invalid include sections: {bad:?}. Valid options: {VALID:?}"),
                    "type": "400", "param": null, "code": 400,
                })),
            )
                .into_response();
        }
    }
    let core_only = include.as_deref().is_some_and(|i| i == ["core"]);
    let dp_rank = q.get("dp_rank").and_then(|v| v.parse::<u32>().ok());
    let snaps: Vec<Value> = st
        .ranks
        .iter()
        .filter(|r| dp_rank.is_none_or(|d| d == r.rank))
        .map(|r| {
            load_snapshot(
                &st,
                r,
                if core_only {
                    Some(&[])
                } else {
                    include.as_deref()
                },
            )
        })
        .collect();
    if q.get("format").map(String::as_str) == Some("prometheus") {
        let mut series: Vec<(String, Vec<(Value, Value)>)> = Vec::new();
        for s in &snaps {
            let Value::Object(m) = s else { continue };
            let rank = m.get("dp_rank").cloned().unwrap_or(Value::Null);
            for (k, v) in m {
                let mut add = |name: String, v: &Value| {
                    if !v.is_number() || k == "dp_rank" {
                        return;
                    }
                    match series.iter_mut().find(|(n, _)| *n == name) {
                        Some((_, vs)) => vs.push((rank.clone(), v.clone())),
                        None => series.push((name, vec![(rank.clone(), v.clone())])),
                    }
                };
                match v {
                    Value::Object(sub) => {
                        let prefix = match k.as_str() {
                            "disaggregation" => "disagg",
                            other => other,
                        };
                        for (sk, sv) in sub {
                            add(format!("sglang_{prefix}_{sk}"), sv);
                        }
                    }
                    other => add(format!("sglang_{k}"), other),
                }
            }
        }
        let mut out = String::new();
        for (name, vs) in series {
            out.push_str(&format!("# TYPE {name} gauge\n"));
            for (rank, v) in vs {
                out.push_str(&format!("{name}{{dp_rank=\"{rank}\"}} {v}\n"));
            }
        }
        return http::prometheus(out);
    }
    let c = &st.cfg;
    let mut accelerators = c.args.tp_size * c.args.pp_size;
    if c.attn_dp_size > 1 {
        accelerators /= i64::from(c.num_dp_ranks());
    }
    Json(json!({
        "timestamp": iso_now(),
        "version": SGLANG_VERSION,
        "accelerator": null,
        "num_accelerators": accelerators,
        "loads": snaps,
    }))
    .into_response()
}

/// `/metrics` (with `--enable-metrics` only, as SGLang mounts it): the scheduler gauges
/// and the simulator's own counters.
async fn metrics(State(st): State<Arc<AppState>>) -> Response {
    let c = &st.cfg;
    let model = label(&c.args.served_model_name);
    let attn_tp = (c.args.tp_size / c.attn_dp_size.max(1)).max(1);
    let mut out = String::new();
    for (name, help, running) in [
        (
            "sglang:num_running_reqs",
            "The number of running requests.",
            true,
        ),
        (
            "sglang:num_queue_reqs",
            "The number of requests in the waiting queue.",
            false,
        ),
    ] {
        out.push_str(&format!("# HELP {name} {help}\n# TYPE {name} gauge\n"));
        for r in &st.ranks {
            let (run, wait) = rank_load(r);
            let tp_rank = if c.attn_dp_size > 1 {
                i64::from(r.rank) * attn_tp
            } else {
                0
            };
            let dp = if c.num_dp_ranks() > 1 {
                format!(",dp_rank=\"{}\"", r.rank)
            } else {
                String::new()
            };
            out.push_str(&format!(
                "{name}{{model_name=\"{model}\",engine_type=\"{}\",tp_rank=\"{tp_rank}\",pp_rank=\"0\",moe_ep_rank=\"0\"{dp}}} {:.1}\n",
                c.mode.engine_type(),
                if running { run } else { wait } as f64
            ));
        }
    }
    st.stages.write(&mut out);
    http::prometheus(out)
}

/// Where a request came in: SGLang's native `/generate` or an OpenAI route.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Route {
    Generate,
    OpenAi(Api),
}

/// A refused or failed request.
#[derive(Debug)]
struct Failure {
    status: StatusCode,
    message: String,
}

fn fail(status: StatusCode, message: impl Into<String>) -> Failure {
    Failure {
        status,
        message: message.into(),
    }
}

impl Failure {
    /// As `route` answers it; a streamed request gets SGLang's in-stream error event.
    fn respond(self, route: Route, stream: bool) -> Response {
        log::info(&format!(
            "request refused ({}): {}",
            self.status.as_u16(),
            self.message
        ));
        if stream {
            let mut body = String::new();
            push_event(
                &mut body,
                &json!({"error": {
                    "message": self.message,
                    "type": if self.status == StatusCode::BAD_REQUEST { "invalid_request_error" } else { "internal_error" },
                    "code": self.status.as_u16(),
                    "retryable": false,
                }}),
            );
            body.push_str(SSE_DONE);
            return (
                [(header::CONTENT_TYPE, "text/event-stream; charset=utf-8")],
                body,
            )
                .into_response();
        }
        let body = match (route, self.status) {
            (Route::Generate, StatusCode::BAD_REQUEST) => {
                json!({"error": {"message": self.message}})
            }
            (Route::OpenAi(_), StatusCode::BAD_REQUEST) => json!({
                "object": "error", "message": self.message, "type": "BadRequestError",
                "param": null, "code": 400,
            }),
            (_, s) => json!({
                "object": "error", "message": self.message, "type": s.as_u16().to_string(),
                "param": null, "code": s.as_u16(),
            }),
        };
        (self.status, Json(body)).into_response()
    }
}

/// The prefill/decode pairing a request carries (sglang-router adds it).
#[derive(Debug, Default, Clone)]
struct Pairing {
    host: Option<String>,
    port: Option<i64>,
    room: Option<u64>,
}

impl Pairing {
    fn of(body: &Value) -> Result<Pairing, Failure> {
        let batch = |k: &str| {
            fail(
                StatusCode::BAD_REQUEST,
                format!(
                    "{k}: expected one value (a string host, an integer port or room); the \
                     simulator serves no batches"
                ),
            )
        };
        let host = match body.get("bootstrap_host") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => Some(s.clone()),
            Some(_) => return Err(batch("bootstrap_host")),
        };
        let port = match body.get("bootstrap_port") {
            None | Some(Value::Null) => None,
            Some(v) => Some(v.as_i64().ok_or_else(|| batch("bootstrap_port"))?),
        };
        let room = match body.get("bootstrap_room") {
            None | Some(Value::Null) => None,
            Some(v) => Some(v.as_u64().ok_or_else(|| batch("bootstrap_room"))?),
        };
        Ok(Pairing { host, port, room })
    }

    fn fake(&self) -> bool {
        self.host.as_deref() == Some(FAKE_BOOTSTRAP_HOST)
    }
}

/// A request as the scheduler sees it.
struct Job {
    rid: String,
    prompt_tokens: u64,
    seed_text: String,
    max_new_tokens: u64,
    /// Whether the request named its limit (only then is the total checked against the
    /// context length, as SGLang does).
    explicit_max: bool,
    pairing: Pairing,
    routed_dp_rank: Option<i64>,
}

/// A request admitted to a DP rank: its tokens and what the answer says about it.
struct Admitted {
    toks: Tokens,
    completion_tokens: u64,
    sim: Value,
}

/// Checks `job` as SGLang's tokenizer manager and scheduler do, runs its prefill/decode
/// stage and queues it on a DP rank.
async fn admit(st: &Arc<AppState>, job: &Job) -> Result<Admitted, Failure> {
    let c = &st.cfg;
    if let Some(ctx) = c.context_length {
        if job.prompt_tokens >= ctx {
            return Err(fail(
                StatusCode::BAD_REQUEST,
                format!(
                    "The input ({} tokens) is longer than the model's context length ({ctx} \
                     tokens).",
                    job.prompt_tokens
                ),
            ));
        }
        if job.explicit_max && job.prompt_tokens + job.max_new_tokens > ctx {
            return Err(fail(
                StatusCode::BAD_REQUEST,
                format!(
                    "Requested token count exceeds the model's maximum context length of {ctx} \
                     tokens. You requested a total of {} tokens: {} tokens from the input \
                     messages and {} tokens for the completion. Please reduce the number of \
                     tokens in the input messages or the completion to fit within the limit.",
                    job.prompt_tokens + job.max_new_tokens,
                    job.prompt_tokens,
                    job.max_new_tokens
                ),
            ));
        }
    }
    let p = &job.pairing;
    if c.mode != Mode::Null && p.room.is_none() && c.transfer_backend != "fake" {
        return Err(fail(
            StatusCode::BAD_REQUEST,
            format!(
                "Invalid request: Disaggregated request received without bootstrap room id. \
                 req.rid='{}'",
                job.rid
            ),
        ));
    }
    let n = st.ranks.len();
    let rank = match job.routed_dp_rank {
        Some(r) if r < 0 || r as usize >= n => {
            return Err(fail(
                StatusCode::BAD_REQUEST,
                format!("routed_dp_rank {r} is out of range [0, {n})"),
            ))
        }
        Some(r) => r as usize,
        None if c.load_balance_method == "follow_bootstrap_room" && p.room.is_some() => {
            (p.room.unwrap_or(0) % n as u64) as usize
        }
        None => st.rr.fetch_add(1, Ordering::Relaxed) % n,
    };
    let r = &st.ranks[rank];
    let mut sim = json!({
        "stage": match c.mode { Mode::Null => "agg", Mode::Prefill => "prefill", Mode::Decode => "decode" },
        "served_by": st.served_by(),
        "dp_rank": r.rank,
    });
    if c.mode != Mode::Null {
        sim["bootstrap_room"] = json!(p.room);
        if p.fake() {
            sim["fake_transfer"] = json!(true);
        }
    }
    let admitted = match c.mode {
        Mode::Null => {
            st.stages.agg.fetch_add(1, Ordering::Relaxed);
            r.prefill_tokens
                .fetch_add(job.prompt_tokens, Ordering::Relaxed);
            Admitted {
                toks: r.sched.submit(job.prompt_tokens, job.max_new_tokens),
                completion_tokens: job.max_new_tokens,
                sim,
            }
        }
        Mode::Prefill => {
            // The prompt is computed (its first token), then the room is done: a decode
            // waiting on it may go on. The answer follows at once.
            st.stages.prefill.fetch_add(1, Ordering::Relaxed);
            r.prefill_tokens
                .fetch_add(job.prompt_tokens, Ordering::Relaxed);
            let completion = job.max_new_tokens.min(1);
            let mut toks = r.sched.submit(job.prompt_tokens, completion);
            while toks.next().await {}
            sim["bootstrap"] = json!(format!(
                "{}:{}",
                c.args.host, c.args.disaggregation_bootstrap_port
            ));
            if let (Some(room), false, Some(b)) = (p.room, p.fake(), &st.bootstrap) {
                b.room_done(
                    room,
                    RoomDone {
                        prefill: st.served_by(),
                        dp_rank: r.rank,
                        prompt_tokens: job.prompt_tokens,
                        rid: job.rid.clone(),
                    },
                );
            }
            Admitted {
                toks,
                completion_tokens: completion,
                sim,
            }
        }
        Mode::Decode => {
            st.stages.decode.fetch_add(1, Ordering::Relaxed);
            let mut prefill = job.prompt_tokens;
            if let (Some(room), false) = (p.room, p.fake()) {
                let Some(host) = p.host.as_deref() else {
                    return Err(fail(
                        StatusCode::INTERNAL_SERVER_ERROR,
                        format!(
                            "Decode handshake failed for request rid='{}' bootstrap_room={room}: \
                             the request names no bootstrap_host",
                            job.rid
                        ),
                    ));
                };
                // SGLang's scheduler: no bootstrap_port is this server's own
                // --disaggregation-bootstrap-port.
                let port = p.port.unwrap_or(c.args.disaggregation_bootstrap_port);
                let port = u16::try_from(port).map_err(|_| {
                    fail(
                        StatusCode::INTERNAL_SERVER_ERROR,
                        format!("bootstrap_port {port} is not a port"),
                    )
                })?;
                sim["bootstrap"] = json!(format!("{host}:{port}"));
                r.transferring.fetch_add(1, Ordering::Relaxed);
                let got =
                    bootstrap::await_room(&st.client, host, port, room, c.sglang_knobs.pd_wait)
                        .await;
                r.transferring.fetch_sub(1, Ordering::Relaxed);
                let done = got.map_err(|why| {
                    fail(
                        StatusCode::INTERNAL_SERVER_ERROR,
                        format!(
                            "Decode handshake failed for request rid='{}' \
                             bootstrap_room={room}: {why}",
                            job.rid
                        ),
                    )
                })?;
                sim["kv_from"] = json!(done.prefill);
                sim["prefill_dp_rank"] = json!(done.dp_rank);
                st.stages.kv_consumed.fetch_add(1, Ordering::Relaxed);
                prefill = 0;
            }
            r.prefill_tokens.fetch_add(prefill, Ordering::Relaxed);
            Admitted {
                toks: r.sched.submit(prefill, job.max_new_tokens),
                completion_tokens: job.max_new_tokens,
                sim,
            }
        }
    };
    log::info(&format!(
        "request {}: rank={} stage={} prompt_tokens={} completion_tokens={}{}{}",
        job.rid,
        r.rank,
        admitted.sim["stage"].as_str().unwrap_or(""),
        job.prompt_tokens,
        admitted.completion_tokens,
        p.room
            .map(|x| format!(" bootstrap_room={x}"))
            .unwrap_or_default(),
        admitted.sim["kv_from"]
            .as_str()
            .map(|k| format!(" kv_from={k}"))
            .unwrap_or_default()
    ));
    Ok(admitted)
}

fn body_object(body: &Bytes) -> Result<Value, Failure> {
    match serde_json::from_slice(body) {
        Ok(v @ Value::Object(_)) => Ok(v),
        Ok(_) => Err(fail(
            StatusCode::BAD_REQUEST,
            "the request body must be a JSON object",
        )),
        Err(e) => Err(fail(
            StatusCode::BAD_REQUEST,
            format!("invalid JSON body: {e}"),
        )),
    }
}

fn rid_of(body: &Value) -> String {
    body.get("rid")
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map_or_else(|| uuid::Uuid::new_v4().simple().to_string(), str::to_string)
}

fn routed_dp_rank(body: &Value) -> Option<i64> {
    body.get("routed_dp_rank")
        .or_else(|| body.get("data_parallel_rank"))
        .and_then(Value::as_i64)
}

/// `POST|PUT /generate` (`GenerateReqInput`): `text` or `input_ids`,
/// `sampling_params.max_new_tokens`, `stream`, `rid`, the bootstrap fields.
async fn generate(State(st): State<Arc<AppState>>, body: Bytes) -> Response {
    let started = Instant::now();
    let req = match body_object(&body) {
        Ok(v) => v,
        Err(f) => return f.respond(Route::Generate, false),
    };
    let stream = req.get("stream").and_then(Value::as_bool).unwrap_or(false);
    let job = match generate_job(&st, &req) {
        Ok(j) => j,
        Err(f) => return f.respond(Route::Generate, stream),
    };
    let a = match admit(&st, &job).await {
        Ok(a) => a,
        Err(f) => return f.respond(Route::Generate, stream),
    };
    let words = tokens(&job.seed_text, 0, a.completion_tokens);
    let vocab = st.vocab();
    let ids: Vec<u64> = words.iter().map(|w| fnv(w.trim()) % vocab).collect();
    let weight_version = st
        .cfg
        .args
        .parsed
        .str("weight_version")
        .unwrap_or("default")
        .to_string();
    let out = move |k: usize, e2e: Option<f64>| {
        let finished = k == words.len();
        let mut meta = json!({
            "id": job.rid,
            "finish_reason": if finished { json!({"type": "length", "length": words.len()}) } else { Value::Null },
            "prompt_tokens": job.prompt_tokens,
            "weight_version": weight_version,
            "num_retractions": 0,
            "reasoning_tokens": 0,
            "completion_tokens": k,
            "cached_tokens": 0,
        });
        if let Some(e) = e2e {
            meta["e2e_latency"] = json!(e);
        }
        let mut v = json!({
            "text": words[..k].concat(),
            "output_ids": ids[..k],
            "meta_info": meta,
        });
        if finished {
            v["srt_sim"] = a.sim.clone();
        }
        v
    };
    if stream {
        let n = out_len(a.completion_tokens);
        let mut frames: Vec<String> = (1..=n)
            .map(|k| {
                let mut f = String::new();
                push_event(&mut f, &out(k.min(a.completion_tokens as usize), None));
                f
            })
            .collect();
        if let Some(last) = frames.last_mut() {
            last.push_str(SSE_DONE);
        }
        http::sse(frames, a.toks, ())
    } else {
        let total = a.completion_tokens as usize;
        http::when_done(a.toks, move || {
            out(total, Some(started.elapsed().as_secs_f64()))
        })
        .await
    }
}

/// Frames of a stream of `n` tokens: one per token, one when there are none.
fn out_len(n: u64) -> usize {
    (n as usize).max(1)
}

fn generate_job(st: &AppState, req: &Value) -> Result<Job, Failure> {
    let bad = |m: &str| fail(StatusCode::BAD_REQUEST, m);
    let (text, ids) = (req.get("text"), req.get("input_ids"));
    let batch = matches!(text, Some(Value::Array(_)))
        || ids
            .and_then(Value::as_array)
            .is_some_and(|a| a.iter().any(Value::is_array));
    if batch {
        return Err(bad(
            "a batch: the simulator serves one prompt per /generate request",
        ));
    }
    let (prompt_tokens, seed_text) = match (text, ids) {
        (Some(Value::String(t)), _) => (count(st.tokenizer.as_ref(), t, true), t.clone()),
        (_, Some(Value::Array(ids))) if ids.iter().all(Value::is_number) => {
            (ids.len() as u64, Value::Array(ids.clone()).to_string())
        }
        _ => {
            return Err(bad(
                "Either text, input_ids or input_embeds should be provided.",
            ))
        }
    };
    let sp = req.get("sampling_params").cloned().unwrap_or(json!({}));
    // SGLang checks the total against the context only when the request names a limit
    // (the tokenizer manager reads the request's own `sampling_params`).
    let (max_new_tokens, explicit_max) = match sp.get("max_new_tokens") {
        None | Some(Value::Null) => (DEFAULT_MAX_NEW_TOKENS, false),
        Some(v) => match v.as_i64() {
            Some(n) if n >= 0 => (n as u64, true),
            _ => {
                return Err(fail(
                    StatusCode::BAD_REQUEST,
                    format!("max_new_tokens must be at least 0, got {v}."),
                ))
            }
        },
    };
    Ok(Job {
        rid: rid_of(req),
        prompt_tokens,
        seed_text,
        max_new_tokens,
        explicit_max,
        pairing: Pairing::of(req)?,
        routed_dp_rank: routed_dp_rank(req),
    })
}

/// `POST /v1/completions`, `POST /v1/chat/completions` (JSON bodies only), with the
/// bootstrap fields.
async fn openai(
    State(st): State<Arc<AppState>>,
    headers: HeaderMap,
    body: Bytes,
    api: Api,
) -> Response {
    let route = Route::OpenAi(api);
    let json_body = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim().starts_with("application/json"));
    if !json_body {
        return fail(
            StatusCode::BAD_REQUEST,
            "Unsupported Media Type: Only 'application/json' is allowed",
        )
        .respond(route, false);
    }
    let req = match body_object(&body) {
        Ok(v) => v,
        Err(f) => return f.respond(route, false),
    };
    let stream = req.get("stream").and_then(Value::as_bool).unwrap_or(false);
    let job = match openai_job(&st, &req, api) {
        Ok(j) => j,
        Err(f) => return f.respond(route, stream),
    };
    let a = match admit(&st, &job).await {
        Ok(a) => a,
        Err(f) => return f.respond(route, stream),
    };
    let n_choices = req
        .get("n")
        .and_then(Value::as_u64)
        .unwrap_or(1)
        .clamp(1, 16);
    let mut tail = Map::new();
    tail.insert(
        "metadata".into(),
        json!({"weight_version": st.cfg.args.parsed.str("weight_version").unwrap_or("default")}),
    );
    tail.insert("srt_sim".into(), a.sim.clone());
    let mut last_chunk = Map::new();
    last_chunk.insert("srt_sim".into(), a.sim);
    let reply = Reply {
        dialect: &SglangDialect,
        api,
        id: job.rid.clone(),
        model: st.cfg.args.served_model_name.clone(),
        created: now_secs(),
        prompt_tokens: job.prompt_tokens,
        choices: (0..n_choices)
            .map(|c| tokens(&job.seed_text, c, a.completion_tokens))
            .collect(),
        tail,
        last_chunk,
    };
    if stream {
        let include_usage = req
            .pointer("/stream_options/include_usage")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        http::sse(reply.sse_frames(include_usage), a.toks, ())
    } else {
        http::when_done(a.toks, || reply.full()).await
    }
}

fn openai_job(st: &AppState, req: &Value, api: Api) -> Result<Job, Failure> {
    let (prompt_tokens, seed_text) =
        prompt_of(req, api, st.tokenizer.as_ref()).map_err(|m| fail(StatusCode::BAD_REQUEST, m))?;
    let named = match api {
        Api::Completions => true,
        Api::Chat => ["max_completion_tokens", "max_tokens"]
            .iter()
            .any(|k| req.get(*k).is_some_and(|v| !v.is_null())),
    };
    let default = match api {
        Api::Completions => DEFAULT_MAX_TOKENS,
        Api::Chat => DEFAULT_MAX_NEW_TOKENS,
    };
    let max_new_tokens =
        max_tokens_of(req, api, default).map_err(|m| fail(StatusCode::BAD_REQUEST, m))?;
    Ok(Job {
        rid: rid_of(req),
        prompt_tokens,
        seed_text,
        max_new_tokens,
        explicit_max: named,
        pairing: Pairing::of(req)?,
        routed_dp_rank: routed_dp_rank(req),
    })
}

/// SGLang 0.5.23's OpenAI shapes (`srt/entrypoints/openai/protocol.py`).
struct SglangDialect;

impl Dialect for SglangDialect {
    fn choice_tail(&self, _: Api, _: bool) -> Map<String, Value> {
        let mut m = Map::new();
        m.insert("matched_stop".into(), Value::Null);
        m
    }

    fn message(&self, text: String) -> Value {
        json!({"role": "assistant", "content": text, "reasoning_content": null})
    }

    fn role_choice(&self, index: usize) -> Value {
        json!({
            "index": index,
            "delta": {"role": "assistant", "content": "", "reasoning_content": null},
            "logprobs": null, "finish_reason": null, "matched_stop": null,
        })
    }

    fn token_delta(&self, token: &str) -> Value {
        json!({"role": null, "content": token, "reasoning_content": null})
    }

    fn usage(&self, prompt_tokens: u64, completion_tokens: u64) -> Value {
        json!({
            "prompt_tokens": prompt_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
            "completion_tokens": completion_tokens,
            "prompt_tokens_details": null,
            "reasoning_tokens": 0,
            "completion_tokens_details": null,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sglang_shapes() {
        let r = crate::common::openai::sample(&SglangDialect, Api::Chat);
        let full = r.full();
        assert_eq!(full["choices"][0]["matched_stop"], Value::Null);
        assert!(full["choices"][0]["message"].get("tool_calls").is_none());
        assert_eq!(full["usage"]["reasoning_tokens"], 0);
        let frames = r.sse_frames(true);
        assert!(frames[0].contains(r#""role":"assistant","content":"""#));
        assert!(frames[1].ends_with(SSE_DONE));
    }

    #[test]
    fn iso_timestamps() {
        let t = iso_now();
        assert_eq!(t.len(), "2026-01-01T00:00:00.000000+00:00".len(), "{t}");
        assert!(t.ends_with("+00:00"));
    }
}
