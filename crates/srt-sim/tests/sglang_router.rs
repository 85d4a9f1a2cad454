//! `srt-sglang-sim` behind the real sglang-router 0.3.2 (`$SRT_TOOLS_DIR/bin/sglang-router`,
//! `<repo>/.tools` by default, as the root package's end-to-end tests find tools;
//! `scripts/install-deps.sh router` installs it): prefill/decode pairs and an aggregate
//! worker serve `/generate` and the OpenAI routes, streamed and not, and P/D workers
//! registered at run time (`POST /workers`, `DELETE /workers/{id}`).
//!
//! Without the router the tests fail, naming the install script, unless
//! `SRT_SKIP_REAL_ROUTER=1`.

mod common;

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use common::{client, free_port, wait_healthy, Sim};
use serde_json::{json, Value};

const BIN: &str = env!("CARGO_BIN_EXE_srt-sglang-sim");

/// The real router, or `None` (the test is skipped) when it is missing and
/// `SRT_SKIP_REAL_ROUTER=1`.
fn router_bin() -> Option<PathBuf> {
    let tools = std::env::var_os("SRT_TOOLS_DIR").map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../.tools"),
        PathBuf::from,
    );
    let bin = tools.join("bin").join("sglang-router");
    if bin.exists() {
        return Some(bin);
    }
    if std::env::var("SRT_SKIP_REAL_ROUTER").as_deref() == Ok("1") {
        eprintln!(
            "sglang-router is not installed at {}: skipped (SRT_SKIP_REAL_ROUTER=1)",
            bin.display()
        );
        return None;
    }
    panic!(
        "the real sglang-router 0.3.2 is not installed at {}: run scripts/install-deps.sh \
         router (or point SRT_TOOLS_DIR at the tools; SRT_SKIP_REAL_ROUTER=1 skips this test)",
        bin.display()
    );
}

/// A running sglang-router, killed on drop.
struct Router {
    child: Child,
    port: u16,
    log: tempfile::NamedTempFile,
}

impl Router {
    fn start(bin: &PathBuf, args: &[String]) -> Router {
        let port = free_port();
        let log = tempfile::NamedTempFile::new().unwrap();
        let child = Command::new(bin)
            .arg("launch")
            .args(["--host", "127.0.0.1", "--port", &port.to_string()])
            .args([
                "--prometheus-host",
                "127.0.0.1",
                "--prometheus-port",
                &free_port().to_string(),
            ])
            .args(args)
            .stdin(Stdio::null())
            .stdout(log.reopen().unwrap())
            .stderr(log.reopen().unwrap())
            .spawn()
            .unwrap();
        Router { child, port, log }
    }

    fn url(&self, path: &str) -> String {
        format!("http://127.0.0.1:{}{path}", self.port)
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.log.path()).unwrap_or_default()
    }

    /// Waits until `GET /readiness` reports `healthy` workers.
    async fn wait_ready(&mut self, healthy: u64) {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Ok(r) = client().get(self.url("/readiness")).send().await {
                if let Ok(v) = r.json::<Value>().await {
                    if v["healthy_workers"] == healthy {
                        return;
                    }
                }
            }
            if let Some(st) = self.child.try_wait().unwrap() {
                panic!("sglang-router exited ({st}): {}", self.log());
            }
            assert!(
                Instant::now() < deadline,
                "sglang-router never had {healthy} healthy worker(s): {}",
                self.log()
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    async fn post(&self, path: &str, body: &Value) -> (u16, Value) {
        let r = client()
            .post(self.url(path))
            .json(body)
            .send()
            .await
            .unwrap();
        let status = r.status().as_u16();
        let text = r.text().await.unwrap();
        (
            status,
            serde_json::from_str(&text).unwrap_or(Value::String(text)),
        )
    }

    /// A streamed request: its events, `[DONE]` last.
    async fn stream(&self, path: &str, body: &Value) -> Vec<String> {
        let r = client()
            .post(self.url(path))
            .json(body)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200, "{path}");
        r.text()
            .await
            .unwrap()
            .split_terminator("\n\n")
            .map(|e| e.trim_start_matches("data: ").to_string())
            .collect()
    }

    async fn workers(&self) -> Vec<Value> {
        let v: Value = client()
            .get(self.url("/workers"))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        v["workers"].as_array().cloned().unwrap_or_default()
    }
}

impl Drop for Router {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn sim(port: u16, rest: &[&str], env: &[(&str, &str)]) -> Sim {
    let mut rest = rest.to_vec();
    rest.push("--skip-server-warmup");
    let args = common::sglang_args(port, &rest);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    Sim::start(BIN, &args, env)
}

/// A prefill (with its bootstrap server) and a decode, both healthy.
async fn pd_pair(decode_env: &[(&str, &str)]) -> (Sim, Sim, u16, u16, u16) {
    let mut p = common::sglang_pair(BIN, decode_env, &[]);
    wait_healthy(&mut p.prefill, p.p_port).await;
    wait_healthy(&mut p.decode, p.d_port).await;
    (p.prefill, p.decode, p.p_port, p.d_port, p.boot)
}

/// Checks that the decode answered, from the room the prefill computed.
async fn decode_consumed_the_prefills_room(sim: &Value, p: u16, boot: u16) {
    assert_eq!(sim["stage"], "decode", "{sim}");
    assert_eq!(sim["kv_from"], format!("127.0.0.1:{p}"), "{sim}");
    assert_eq!(sim["bootstrap"], format!("127.0.0.1:{boot}"), "{sim}");
    let room = sim["bootstrap_room"].as_u64().expect("a room");
    let r: Value = client()
        .get(format!("http://127.0.0.1:{boot}/srt_sim/rooms/{room}"))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(r["prefill"], format!("127.0.0.1:{p}"), "{r}");
}

/// The `srt_sim` object of a stream's last token chunk.
fn streamed_sim(ev: &[String]) -> Value {
    ev.iter()
        .filter_map(|e| serde_json::from_str::<Value>(e).ok())
        .find_map(|v| v.get("srt_sim").cloned())
        .unwrap_or_else(|| panic!("no srt_sim in {ev:?}"))
}

#[tokio::test]
async fn real_router_pairs_each_request_with_a_prefill_and_a_decode() {
    let Some(bin) = router_bin() else { return };
    let (_prefill, _decode, p, d, boot) = pd_pair(&[]).await;
    let mut router = Router::start(
        &bin,
        &[
            "--pd-disaggregation".into(),
            "--prefill".into(),
            format!("http://127.0.0.1:{p}"),
            boot.to_string(),
            "--decode".into(),
            format!("http://127.0.0.1:{d}"),
            "--policy".into(),
            "round_robin".into(),
        ],
    );
    router.wait_ready(2).await;
    let workers = router.workers().await;
    let prefill = workers
        .iter()
        .find(|w| w["worker_type"] == "prefill")
        .unwrap();
    assert_eq!(prefill["bootstrap_port"], boot);
    assert_eq!(
        prefill["metadata"]["load_balance_method"],
        "follow_bootstrap_room"
    );

    let chat =
        json!({"model": "tiny", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 3});
    let cases = [
        (
            "/generate",
            json!({"text": "hi there", "sampling_params": {"max_new_tokens": 3}}),
        ),
        (
            "/v1/completions",
            json!({"model": "tiny", "prompt": "hi there", "max_tokens": 3}),
        ),
        ("/v1/chat/completions", chat),
    ];
    for (path, body) in &cases {
        let (status, v) = router.post(path, body).await;
        assert_eq!(status, 200, "{path}: {v}");
        decode_consumed_the_prefills_room(&v["srt_sim"], p, boot).await;
        let mut streamed = body.clone();
        streamed["stream"] = json!(true);
        if *path == "/v1/chat/completions" {
            streamed["stream_options"] = json!({"include_usage": true});
        }
        let ev = router.stream(path, &streamed).await;
        assert_eq!(
            ev.last().map(String::as_str),
            Some("[DONE]"),
            "{path}: {ev:?}"
        );
        decode_consumed_the_prefills_room(&streamed_sim(&ev), p, boot).await;
        if *path == "/v1/chat/completions" {
            let usage: Value = serde_json::from_str(&ev[ev.len() - 2]).unwrap();
            assert_eq!(usage["usage"]["completion_tokens"], 3, "{ev:?}");
        }
    }
}

#[tokio::test]
async fn real_router_in_front_of_an_aggregate_worker() {
    let Some(bin) = router_bin() else { return };
    let port = free_port();
    let mut worker = sim(port, &[], &[]);
    wait_healthy(&mut worker, port).await;
    let mut router = Router::start(
        &bin,
        &[
            "--worker-urls".into(),
            format!("http://127.0.0.1:{port}"),
            "--policy".into(),
            "round_robin".into(),
        ],
    );
    router.wait_ready(1).await;
    let (status, v) = router
        .post(
            "/generate",
            &json!({"text": "hi", "sampling_params": {"max_new_tokens": 2}}),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["srt_sim"]["stage"], "agg");
    assert_eq!(v["meta_info"]["completion_tokens"], 2);
    let (status, v) = router
        .post(
            "/v1/completions",
            &json!({"model": "tiny", "prompt": "hi", "max_tokens": 2}),
        )
        .await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["choices"][0]["finish_reason"], "length");
    let ev = router
        .stream(
            "/v1/chat/completions",
            &json!({"model": "tiny", "messages": [{"role": "user", "content": "hi"}],
                    "max_tokens": 2, "stream": true}),
        )
        .await;
    assert_eq!(streamed_sim(&ev)["stage"], "agg");
    assert_eq!(ev.last().map(String::as_str), Some("[DONE]"));
}

/// What sglang-router 0.3.2 does with P/D workers registered and removed at run time
/// (recorded in docs/sglang-notes.md).
#[tokio::test]
async fn real_router_registers_and_removes_pd_workers_at_run_time() {
    let Some(bin) = router_bin() else { return };
    let (_prefill, _decode, p, d, boot) = pd_pair(&[("SRT_SIM_TOKEN_DELAY_MS", "100")]).await;
    let mut router = Router::start(
        &bin,
        &[
            "--pd-disaggregation".into(),
            "--policy".into(),
            "round_robin".into(),
        ],
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    while client().get(router.url("/workers")).send().await.is_err() {
        assert!(Instant::now() < deadline, "{}", router.log());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let gen = json!({"text": "hi", "sampling_params": {"max_new_tokens": 2}});
    let (status, v) = router.post("/generate", &gen).await;
    assert_eq!(status, 503, "no workers: {v}");

    let (status, added) = router
        .post(
            "/workers",
            &json!({"url": format!("http://127.0.0.1:{p}"), "worker_type": "prefill",
                    "bootstrap_port": boot}),
        )
        .await;
    assert_eq!(status, 202, "{added}");
    assert_eq!(added["status"], "accepted");
    let prefill_id = added["worker_id"].as_str().unwrap().to_string();
    assert_eq!(added["location"], format!("/workers/{prefill_id}"));
    let (status, added) = router
        .post(
            "/workers",
            &json!({"url": format!("http://127.0.0.1:{d}"), "worker_type": "decode"}),
        )
        .await;
    assert_eq!(status, 202, "{added}");
    let decode_id = added["worker_id"].as_str().unwrap().to_string();
    router.wait_ready(2).await;
    let (status, v) = router.post("/generate", &gen).await;
    assert_eq!(status, 200, "{v}");
    decode_consumed_the_prefills_room(&v["srt_sim"], p, boot).await;

    // A request in flight on the decode when it is removed still finishes; new ones find
    // no decode.
    let slow = {
        let url = router.url("/generate");
        tokio::spawn(async move {
            let r = client()
                .post(url)
                .json(&json!({"text": "hi", "sampling_params": {"max_new_tokens": 15}}))
                .send()
                .await
                .unwrap();
            (r.status().as_u16(), r.json::<Value>().await.unwrap())
        })
    };
    tokio::time::sleep(Duration::from_millis(500)).await;
    let r = client()
        .delete(router.url(&format!("/workers/{decode_id}")))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 202);
    let removed: Value = r.json().await.unwrap();
    assert_eq!(removed["status"], "accepted");
    let deadline = Instant::now() + Duration::from_secs(10);
    while router.workers().await.len() != 1 {
        assert!(Instant::now() < deadline, "the decode was never removed");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let (status, v) = router.post("/generate", &gen).await;
    assert_eq!(status, 503, "{v}");
    assert!(v.to_string().contains("No decode workers available"), "{v}");
    let (status, v) = slow.await.unwrap();
    assert_eq!(status, 200, "the in-flight request was cut: {v}");
    assert_eq!(v["meta_info"]["completion_tokens"], 15);

    // Removal is by worker id only; the prefill stays.
    let r = client()
        .delete(router.url(&format!("/workers/{}", "http%3A%2F%2F127.0.0.1%3A1")))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    let workers = router.workers().await;
    assert_eq!(workers[0]["id"], prefill_id.as_str());
}
