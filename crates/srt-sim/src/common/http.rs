//! What every simulator's HTTP server shares: the access log, the body limit, and an
//! answer paced by the scheduler (SSE frames as their tokens come, or one body once all
//! have).

use std::convert::Infallible;

use axum::body::{Body, Bytes};
use axum::extract::Request;
use axum::http::{header, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::Value;

use super::log;
use super::sched::Tokens;

/// Largest request body accepted (long prompts from benchmarks).
pub(crate) const MAX_BODY: usize = 64 * 1024 * 1024;

/// Logs each request's method, path and status, as uvicorn's access log does.
pub(crate) async fn access_log(req: Request, next: Next) -> Response {
    let line = format!("\"{} {}\"", req.method(), req.uri().path());
    let resp = next.run(req).await;
    log::info(&format!("{line} {}", resp.status().as_u16()));
    resp
}

/// An SSE answer: each frame is sent once its token is generated. `keep` lives until the
/// stream ends or the client leaves (a guard counting the request as running).
pub(crate) fn sse<K: Send + 'static>(frames: Vec<String>, toks: Tokens, keep: K) -> Response {
    let body = futures::stream::unfold(
        (frames.into_iter(), toks, keep),
        |(mut it, mut toks, keep)| async move {
            let frame = it.next()?;
            toks.next().await;
            Some((Ok::<_, Infallible>(Bytes::from(frame)), (it, toks, keep)))
        },
    );
    Response::builder()
        .status(StatusCode::OK)
        .header(header::CONTENT_TYPE, "text/event-stream; charset=utf-8")
        .header(header::CACHE_CONTROL, "no-cache")
        .body(Body::from_stream(body))
        .expect("valid response")
}

/// A JSON answer sent once every token is generated.
pub(crate) async fn when_done(mut toks: Tokens, body: impl FnOnce() -> Value) -> Response {
    while toks.next().await {}
    Json(body()).into_response()
}

/// When a server counts as ready and healthy: `warmup` after it started listening (the
/// engine's own warmup, none for vLLM), and until `SRT_SIM_UNHEALTHY_AFTER_MS` past that.
#[derive(Debug)]
pub(crate) struct Readiness {
    ready_at: std::time::Instant,
    unhealthy_after: Option<std::time::Duration>,
}

impl Readiness {
    /// Ready `warmup` from now.
    pub(crate) fn new(
        warmup: std::time::Duration,
        unhealthy_after: Option<std::time::Duration>,
    ) -> Readiness {
        Readiness {
            ready_at: std::time::Instant::now() + warmup,
            unhealthy_after,
        }
    }

    /// Ready, and not yet past `SRT_SIM_UNHEALTHY_AFTER_MS`.
    pub(crate) fn healthy(&self) -> bool {
        let now = std::time::Instant::now();
        match now.checked_duration_since(self.ready_at) {
            None => false,
            Some(up) => self.unhealthy_after.is_none_or(|d| up < d),
        }
    }
}

/// Requests served by stage, and decode stages that consumed a remote prefill's KV: the
/// `srt_sim_*` counters every simulator's `/metrics` ends with.
#[derive(Debug, Default)]
pub(crate) struct StageCounters {
    /// Prefill stages served.
    pub(crate) prefill: std::sync::atomic::AtomicU64,
    /// Decode stages served.
    pub(crate) decode: std::sync::atomic::AtomicU64,
    /// Aggregated requests served.
    pub(crate) agg: std::sync::atomic::AtomicU64,
    /// Decode stages that loaded a remote prefill's KV.
    pub(crate) kv_consumed: std::sync::atomic::AtomicU64,
}

impl StageCounters {
    /// Appends the counters in Prometheus' text format.
    pub(crate) fn write(&self, out: &mut String) {
        use std::sync::atomic::Ordering::Relaxed;
        out.push_str("# HELP srt_sim_requests_total Requests served by the simulator, by stage.\n");
        out.push_str("# TYPE srt_sim_requests_total counter\n");
        for (stage, c) in [
            ("prefill", &self.prefill),
            ("decode", &self.decode),
            ("agg", &self.agg),
        ] {
            out.push_str(&format!(
                "srt_sim_requests_total{{stage=\"{stage}\"}} {}\n",
                c.load(Relaxed)
            ));
        }
        out.push_str(
            "# HELP srt_sim_kv_transfers_consumed_total Decode stages that consumed a remote prefill's KV.\n",
        );
        out.push_str("# TYPE srt_sim_kv_transfers_consumed_total counter\n");
        out.push_str(&format!(
            "srt_sim_kv_transfers_consumed_total {}\n",
            self.kv_consumed.load(Relaxed)
        ));
    }
}

/// A Prometheus text-format answer.
pub(crate) fn prometheus(body: String) -> Response {
    (
        [(
            header::CONTENT_TYPE,
            "text/plain; version=0.0.4; charset=utf-8",
        )],
        body,
    )
        .into_response()
}

/// A Prometheus label value, escaped.
pub(crate) fn label(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}
