//! The prefill/decode rendezvous: the bootstrap server a prefill runs (SGLang's
//! `CommonKVBootstrapServer` routes, `srt/disaggregation/common/conn.py`), and what a
//! decode does with a request's `bootstrap_host:bootstrap_port` and `bootstrap_room`.
//!
//! The routes SGLang has, with its answers:
//!
//! - `PUT /route`: a prefill rank registers (`attn_tp_size`, `attn_tp_rank`, ...,
//!   `rank_ip`, `rank_port`) -> `OK`. The simulator registers its own ranks once it is up.
//! - `GET /route?prefill_dp_rank=&prefill_cp_rank=&target_tp_rank=&target_pp_rank=`: 400
//!   `Missing inputs for bootstrap server.` without all four; 503 `Prefill server not fully
//!   registered yet (N workers registered).` until dp x cp x tp x pp ranks registered;
//!   then, for all `-1`, the prefill's parallel info (`attn_tp_size`, `dp_size`,
//!   `follow_bootstrap_room`, `prefill_http_port`, ...), else that rank's `{rank_ip,
//!   rank_port}` or 404.
//! - `POST /register_dp_rank {bootstrap_room, dp_rank}` -> `OK`; `POST /query_dp_ranks
//!   {bootstrap_rooms}` -> `{room: dp_rank}`; `GET /health` -> `OK`.
//!
//! And one of the simulator's own, standing in for the KV transfer: `GET
//! /srt_sim/rooms/{room}?wait_ms=N` answers 200 with what the prefill computed for that
//! room (`prefill`: its HTTP address, `dp_rank`, `prompt_tokens`, `rid`) once it has, or
//! 404 after waiting up to `wait_ms` (at most 10 s).

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{middleware, Json, Router};
use serde_json::{json, Map, Value};
use tokio::sync::Notify;

use crate::common::http::access_log;
use crate::common::log;

/// How many finished rooms a prefill remembers (SGLang drops its room table's entries
/// after a cleanup interval; the simulator keeps the newest).
const ROOMS_KEPT: usize = 65_536;

/// The longest one `GET /srt_sim/rooms/{room}` waits.
const LONGEST_POLL: Duration = Duration::from_secs(10);

/// The fake bootstrap host SGLang's own warmup and health requests carry: no transfer.
pub(crate) const FAKE_BOOTSTRAP_HOST: &str = "2.2.2.2";

/// What a prefill computed for one room, as a decode learns it.
#[derive(Debug, Clone, PartialEq)]
pub struct RoomDone {
    /// The prefill's HTTP address (`host:port`).
    pub prefill: String,
    /// The prefill DP rank that computed it.
    pub dp_rank: u32,
    /// Prompt tokens it computed.
    pub prompt_tokens: u64,
    /// The request id the prefill saw.
    pub rid: String,
}

impl RoomDone {
    fn to_json(&self, room: u64) -> Value {
        json!({
            "bootstrap_room": room,
            "prefill": self.prefill,
            "dp_rank": self.dp_rank,
            "prompt_tokens": self.prompt_tokens,
            "rid": self.rid,
        })
    }
}

/// The prefill's parallel layout, as its ranks register it.
#[derive(Debug, Clone, Default)]
struct Layout {
    attn_tp_size: Option<i64>,
    attn_cp_size: Option<i64>,
    dp_size: Option<i64>,
    pp_size: Option<i64>,
    page_size: Option<i64>,
    kv_cache_dtype: Option<Value>,
    follow_bootstrap_room: Option<bool>,
    prefill_http_port: Option<i64>,
    decode_allocation_policy: String,
    registered: usize,
    /// (dp group, cp rank, tp rank, pp rank) -> (rank_ip, rank_port).
    ranks: HashMap<(i64, i64, i64, i64), (String, i64)>,
    room_dp_rank: HashMap<i64, i64>,
}

impl Layout {
    fn ready(&self) -> bool {
        match (
            self.dp_size,
            self.attn_cp_size,
            self.attn_tp_size,
            self.pp_size,
        ) {
            (Some(dp), Some(cp), Some(tp), Some(pp)) => self.registered as i64 >= dp * cp * tp * pp,
            _ => false,
        }
    }

    /// `PUT /route`'s effect (SGLang's `_handle_route_put`).
    fn register(&mut self, r: &Map<String, Value>) -> Result<(), String> {
        let int = |k: &str| {
            r.get(k)
                .and_then(|v| {
                    v.as_i64()
                        .or_else(|| v.as_str().and_then(|s| s.parse().ok()))
                })
                .ok_or_else(|| format!("KeyError: '{k}'"))
        };
        let (tp_size, tp_rank) = (int("attn_tp_size")?, int("attn_tp_rank")?);
        let (cp_size, cp_rank) = (int("attn_cp_size")?, int("attn_cp_rank")?);
        let (attn_dp_size, attn_dp_rank) = (int("attn_dp_size")?, int("attn_dp_rank")?);
        let (pp_size, pp_rank) = (int("pp_size")?, int("pp_rank")?);
        let (system_dp_size, system_dp_rank) = (int("system_dp_size")?, int("system_dp_rank")?);
        let rank_ip = r
            .get("rank_ip")
            .map(|v| v.as_str().map_or_else(|| v.to_string(), str::to_string))
            .ok_or("KeyError: 'rank_ip'")?;
        let rank_port = int("rank_port")?;
        let page_size = int("page_size")?;
        let kv_cache_dtype = r
            .get("kv_cache_dtype")
            .cloned()
            .ok_or("KeyError: 'kv_cache_dtype'")?;
        let policy = r
            .get("decode_allocation_policy")
            .and_then(Value::as_str)
            .unwrap_or("early")
            .to_string();
        if self.registered > 0 && self.decode_allocation_policy != policy {
            return Err("Inconsistent prefill allocation policies".into());
        }
        self.decode_allocation_policy = policy;
        self.attn_tp_size.get_or_insert(tp_size);
        self.attn_cp_size.get_or_insert(cp_size);
        self.dp_size.get_or_insert(if system_dp_size == 1 {
            attn_dp_size
        } else {
            system_dp_size
        });
        self.pp_size.get_or_insert(pp_size);
        self.page_size.get_or_insert(page_size);
        if self.kv_cache_dtype.is_none() && !kv_cache_dtype.is_null() {
            self.kv_cache_dtype = Some(kv_cache_dtype);
        }
        if self.prefill_http_port.is_none() {
            self.prefill_http_port = r.get("prefill_http_port").and_then(Value::as_i64);
        }
        if self.follow_bootstrap_room.is_none() {
            self.follow_bootstrap_room = Some(
                r.get("load_balance_method")
                    .and_then(Value::as_str)
                    .unwrap_or("follow_bootstrap_room")
                    == "follow_bootstrap_room",
            );
        }
        let group = if system_dp_size == 1 {
            attn_dp_rank
        } else {
            system_dp_rank
        };
        self.ranks
            .insert((group, cp_rank, tp_rank, pp_rank), (rank_ip, rank_port));
        self.registered += 1;
        Ok(())
    }

    /// `GET /route` with every rank `-1`: `PrefillServerInfo` as `dataclasses.asdict`
    /// gives it (`dsv41_spec_layout` and `kv_layout` dropped when unset).
    fn info(&self) -> Value {
        json!({
            "attn_tp_size": self.attn_tp_size,
            "attn_cp_size": self.attn_cp_size,
            "dp_size": self.dp_size,
            "pp_size": self.pp_size,
            "page_size": self.page_size,
            "kv_cache_dtype": self.kv_cache_dtype,
            "follow_bootstrap_room": self.follow_bootstrap_room.unwrap_or(true),
            "enable_dsa_cache_layer_split": false,
            "decode_allocation_policy": self.decode_allocation_policy,
            "enable_kv_cache_sharding": false,
            "prefill_http_port": self.prefill_http_port,
            "target_tp_rank": null,
            "target_tp_ranks": null,
            "target_cp_ranks": null,
            "target_pp_ranks": null,
            "required_dst_info_num": null,
            "required_prefill_response_num": null,
        })
    }
}

/// The rooms a prefill has computed, newest kept.
#[derive(Debug, Default)]
struct Rooms {
    done: HashMap<u64, RoomDone>,
    order: VecDeque<u64>,
}

/// A prefill's bootstrap server: its ranks' registrations and the rooms it computed.
#[derive(Debug)]
pub struct Bootstrap {
    layout: Mutex<Layout>,
    rooms: Mutex<Rooms>,
    finished: Notify,
    /// What the prefill's own ranks register once it is up.
    own: Vec<Map<String, Value>>,
}

impl Bootstrap {
    /// A bootstrap server whose prefill will register `own` (see [`Bootstrap::register_own`]).
    pub fn new(own: Vec<Map<String, Value>>) -> Bootstrap {
        Bootstrap {
            layout: Mutex::new(Layout {
                decode_allocation_policy: "early".into(),
                ..Layout::default()
            }),
            rooms: Mutex::default(),
            finished: Notify::new(),
            own,
        }
    }

    /// The prefill's ranks register (once the engine is up).
    pub fn register_own(&self) {
        let mut l = self.layout.lock().expect("bootstrap lock");
        for r in &self.own {
            if let Err(e) = l.register(r) {
                log::warn(&format!("bootstrap: own registration refused: {e}"));
            }
        }
        log::info(&format!(
            "bootstrap: {} prefill rank(s) registered",
            l.registered
        ));
    }

    /// Records that this prefill computed `room`, waking decodes waiting for it.
    pub fn room_done(&self, room: u64, done: RoomDone) {
        {
            let mut r = self.rooms.lock().expect("rooms lock");
            if r.done.insert(room, done).is_none() {
                r.order.push_back(room);
            }
            while r.order.len() > ROOMS_KEPT {
                if let Some(old) = r.order.pop_front() {
                    r.done.remove(&old);
                }
            }
        }
        self.finished.notify_waiters();
    }

    /// What was computed for `room`, waiting up to `wait` for it.
    async fn wait_room(&self, room: u64, wait: Duration) -> Option<RoomDone> {
        let deadline = tokio::time::Instant::now() + wait;
        loop {
            let notified = self.finished.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if let Some(d) = self.rooms.lock().expect("rooms lock").done.get(&room) {
                return Some(d.clone());
            }
            if tokio::time::timeout_at(deadline, notified).await.is_err() {
                return None;
            }
        }
    }
}

fn text(status: StatusCode, body: impl Into<String>) -> Response {
    (status, body.into()).into_response()
}

async fn route_put(State(b): State<Arc<Bootstrap>>, body: Bytes) -> Response {
    let Ok(Value::Object(r)) = serde_json::from_slice::<Value>(&body) else {
        return text(StatusCode::BAD_REQUEST, "the body must be a JSON object");
    };
    match b.layout.lock().expect("bootstrap lock").register(&r) {
        Ok(()) => text(StatusCode::OK, "OK"),
        Err(e) if e.starts_with("KeyError") => text(StatusCode::INTERNAL_SERVER_ERROR, e),
        Err(e) => text(StatusCode::BAD_REQUEST, e),
    }
}

async fn route_get(
    State(b): State<Arc<Bootstrap>>,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    let keys = [
        "prefill_dp_rank",
        "prefill_cp_rank",
        "target_tp_rank",
        "target_pp_rank",
    ];
    let vals: Vec<Option<i64>> = keys
        .iter()
        .map(|k| {
            q.get(*k)
                .filter(|v| !v.is_empty())
                .map(|v| v.parse().unwrap_or(i64::MIN))
        })
        .collect();
    if vals.iter().any(Option::is_none) {
        return text(
            StatusCode::BAD_REQUEST,
            "Missing inputs for bootstrap server.",
        );
    }
    let v: Vec<i64> = vals.into_iter().flatten().collect();
    let l = b.layout.lock().expect("bootstrap lock");
    if !l.ready() {
        return text(
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "Prefill server not fully registered yet ({} workers registered).",
                l.registered
            ),
        );
    }
    if v.iter().all(|x| *x == -1) {
        return Json(l.info()).into_response();
    }
    match l.ranks.get(&(v[0], v[1], v[2], v[3])) {
        Some((ip, port)) => Json(json!({"rank_ip": ip, "rank_port": port})).into_response(),
        None => text(
            StatusCode::NOT_FOUND,
            format!(
                "Bootstrap info not found for dp_rank={} cp_rank={} tp_rank={} pp_rank={}",
                v[0], v[1], v[2], v[3]
            ),
        ),
    }
}

async fn register_dp_rank(State(b): State<Arc<Bootstrap>>, body: Bytes) -> Response {
    let r: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let (Some(room), Some(rank)) = (
        r.get("bootstrap_room").and_then(Value::as_i64),
        r.get("dp_rank").and_then(Value::as_i64),
    ) else {
        return text(
            StatusCode::INTERNAL_SERVER_ERROR,
            "KeyError: bootstrap_room/dp_rank",
        );
    };
    b.layout
        .lock()
        .expect("bootstrap lock")
        .room_dp_rank
        .insert(room, rank);
    text(StatusCode::OK, "OK")
}

async fn query_dp_ranks(State(b): State<Arc<Bootstrap>>, body: Bytes) -> Response {
    let r: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let Some(rooms) = r.get("bootstrap_rooms").and_then(Value::as_array) else {
        return text(
            StatusCode::INTERNAL_SERVER_ERROR,
            "KeyError: 'bootstrap_rooms'",
        );
    };
    let l = b.layout.lock().expect("bootstrap lock");
    let out: Map<String, Value> = rooms
        .iter()
        .filter_map(|room| room.as_i64().or_else(|| room.as_str()?.parse().ok()))
        .filter_map(|room| {
            l.room_dp_rank
                .get(&room)
                .map(|rank| (room.to_string(), json!(rank)))
        })
        .collect();
    Json(Value::Object(out)).into_response()
}

async fn room(
    State(b): State<Arc<Bootstrap>>,
    Path(room): Path<u64>,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    let wait = q
        .get("wait_ms")
        .and_then(|v| v.parse::<u64>().ok())
        .map_or(Duration::ZERO, Duration::from_millis)
        .min(LONGEST_POLL);
    match b.wait_room(room, wait).await {
        Some(d) => Json(d.to_json(room)).into_response(),
        None => (
            StatusCode::NOT_FOUND,
            Json(json!({"bootstrap_room": room, "done": false})),
        )
            .into_response(),
    }
}

/// The bootstrap server's routes.
pub fn app(b: Arc<Bootstrap>) -> Router {
    Router::new()
        .route(
            "/route",
            get(route_get)
                .put(route_put)
                .fallback(|| async { text(StatusCode::METHOD_NOT_ALLOWED, "Method not allowed") }),
        )
        .route("/register_dp_rank", post(register_dp_rank))
        .route("/query_dp_ranks", post(query_dp_ranks))
        .route("/health", get(|| async { "OK" }))
        .route("/srt_sim/rooms/{room}", get(room))
        .layer(middleware::from_fn(access_log))
        .with_state(b)
}

/// `host:port` for a URL (`[v6]:port`).
fn authority(host: &str, port: u16) -> String {
    if host.contains(':') && !host.starts_with('[') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

/// A decode's wait for `room`'s prefill behind `host:port`, until `deadline`: first the
/// prefill's parallel info (`GET /route`, as SGLang's decode asks, retried while it
/// answers 503), then the room (`GET /srt_sim/rooms/{room}`). The error says why, for a
/// 500.
pub async fn await_room(
    client: &reqwest::Client,
    host: &str,
    port: u16,
    room: u64,
    wait: Duration,
) -> Result<RoomDone, String> {
    let start = Instant::now();
    let base = format!("http://{}", authority(host, port));
    let unreachable =
        |e: reqwest::Error| format!("cannot reach the prefill's bootstrap server at {base}: {e}");
    loop {
        let r = client
            .get(format!(
                "{base}/route?prefill_dp_rank=-1&prefill_cp_rank=-1&target_tp_rank=-1&target_pp_rank=-1"
            ))
            .send()
            .await
            .map_err(unreachable)?;
        if r.status() == StatusCode::OK {
            break;
        }
        if r.status() != StatusCode::SERVICE_UNAVAILABLE || start.elapsed() >= wait {
            return Err(format!(
                "the bootstrap server at {base} answered {} to GET /route: {}",
                r.status().as_u16(),
                r.text().await.unwrap_or_default()
            ));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    loop {
        let left = wait.saturating_sub(start.elapsed());
        let r = client
            .get(format!(
                "{base}/srt_sim/rooms/{room}?wait_ms={}",
                left.min(LONGEST_POLL).as_millis()
            ))
            .timeout(LONGEST_POLL + Duration::from_secs(5))
            .send()
            .await
            .map_err(unreachable)?;
        match r.status() {
            StatusCode::OK => {
                let v: Value = r.json().await.map_err(|e| e.to_string())?;
                return Ok(RoomDone {
                    prefill: v["prefill"].as_str().unwrap_or_default().to_string(),
                    dp_rank: v["dp_rank"].as_u64().unwrap_or(0) as u32,
                    prompt_tokens: v["prompt_tokens"].as_u64().unwrap_or(0),
                    rid: v["rid"].as_str().unwrap_or_default().to_string(),
                });
            }
            StatusCode::NOT_FOUND if start.elapsed() < wait => continue,
            StatusCode::NOT_FOUND => {
                return Err(format!(
                    "KV transfer for bootstrap_room {room} timed out after {:.1}s: the prefill \
                     behind the bootstrap server at {base} never computed that room \
                     (SRT_SIM_PD_WAIT_MS={})",
                    start.elapsed().as_secs_f64(),
                    wait.as_millis()
                ))
            }
            s => {
                return Err(format!(
                    "the bootstrap server at {base} answered {} for room {room}",
                    s.as_u16()
                ))
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reg(dp: i64, tp: i64) -> Map<String, Value> {
        match json!({
            "attn_tp_size": 2, "attn_tp_rank": tp, "attn_cp_size": 1, "attn_cp_rank": 0,
            "attn_dp_size": 2, "attn_dp_rank": dp, "pp_size": 1, "pp_rank": 0,
            "system_dp_size": 1, "system_dp_rank": 0, "rank_ip": "10.0.0.1",
            "rank_port": 9000 + tp, "page_size": 1, "kv_cache_dtype": "auto",
            "load_balance_method": "follow_bootstrap_room", "prefill_http_port": 6100,
        }) {
            Value::Object(m) => m,
            _ => unreachable!(),
        }
    }

    #[test]
    fn ready_once_every_rank_registered() {
        let mut l = Layout::default();
        assert!(!l.ready());
        for (dp, tp) in [(0, 0), (0, 1), (1, 0)] {
            l.register(&reg(dp, tp)).unwrap();
        }
        assert!(!l.ready(), "3 of 2 x 2");
        l.register(&reg(1, 1)).unwrap();
        assert!(l.ready());
        let info = l.info();
        assert_eq!(info["dp_size"], 2);
        assert_eq!(info["attn_tp_size"], 2);
        assert_eq!(info["follow_bootstrap_room"], true);
        assert_eq!(info["prefill_http_port"], 6100);
        assert_eq!(l.ranks[&(1, 0, 1, 0)], ("10.0.0.1".into(), 9001));
        let mut m = reg(0, 0);
        m.remove("rank_port");
        assert_eq!(l.register(&m), Err("KeyError: 'rank_port'".into()));
    }

    #[tokio::test]
    async fn rooms_wake_their_waiters() {
        let b = Arc::new(Bootstrap::new(vec![]));
        assert_eq!(b.wait_room(7, Duration::from_millis(10)).await, None);
        let waiter = {
            let b = b.clone();
            tokio::spawn(async move { b.wait_room(7, Duration::from_secs(5)).await })
        };
        tokio::time::sleep(Duration::from_millis(20)).await;
        let done = RoomDone {
            prefill: "127.0.0.1:1".into(),
            dp_rank: 0,
            prompt_tokens: 3,
            rid: "r".into(),
        };
        b.room_done(7, done.clone());
        assert_eq!(waiter.await.unwrap(), Some(done));
    }

    #[test]
    fn authorities() {
        assert_eq!(authority("::1", 5), "[::1]:5");
        assert_eq!(authority("h", 5), "h:5");
    }
}
