//! Integration tests of the `srt-vllm-sim` binary: each test launches real processes on
//! loopback ports, talks to them over HTTP or ZMQ, and kills them at the end.

mod common;

use std::net::TcpListener as StdListener;
use std::time::{Duration, Instant};

use common::{client, free_blocks, free_port, get_text, metric, post, wait_healthy, Sim};
use serde_json::{json, Value};

const BIN: &str = env!("CARGO_BIN_EXE_srt-vllm-sim");

/// argv, extra environment, and a fragment the error message must contain.
type Refusal<'a> = (Vec<&'a str>, Vec<(&'a str, &'a str)>, &'a str);

#[test]
fn refusals_exit_2_with_a_message() {
    let nixl = r#"{"kv_connector":"NixlConnector","kv_role":"kv_both"}"#;
    let cases: Vec<Refusal> = vec![
        (
            vec!["serve", "m", "-dp", "8", "-dph"],
            vec![],
            "data_parallel_size_local",
        ),
        (
            vec!["serve", "m", "-dp", "8", "-dpl", "4", "-dph", "--headless"],
            vec![],
            "headless",
        ),
        (
            vec!["serve", "m", "--headless", "--api-server-count", "2"],
            vec![],
            "--api-server-count",
        ),
        (
            vec!["serve", "m", "-dp", "2", "-dpl", "0", "--headless"],
            vec![],
            "> 0 in headless",
        ),
        (
            vec!["serve", "m", "-n", "2", "-dp", "2", "-dpb", "ray"],
            vec![],
            "nnodes > 1",
        ),
        (
            vec!["serve", "m", "-dp", "2", "-dpe", "-ep"],
            vec![],
            "data_parallel_rank",
        ),
        (
            vec!["serve", "m", "-dp", "4", "-dpn", "1", "-dpl", "2", "-ep"],
            vec![],
            "must be 1 or None",
        ),
        (
            vec!["serve", "m", "-dp", "2", "-dpn", "1"],
            vec![],
            "Non-MoE",
        ),
        (
            vec![
                "serve",
                "m",
                "--kv-transfer-config",
                r#"{"kv_connector":"NixlConnector"}"#,
            ],
            vec![],
            "kv_role",
        ),
        (
            vec![
                "serve",
                "m",
                "--kv-transfer-config",
                r#"{"kv_connector":"MoRIIOConnector","kv_role":"kv_both","kv_connector_extra_config":{"http_port":8000}}"#,
            ],
            vec![],
            "kv_both",
        ),
        (
            vec![
                "serve",
                "m",
                "--kv-transfer-config",
                r#"{"kv_connector":"MoRIIOConnector","kv_role":"kv_consumer"}"#,
            ],
            vec![],
            "http_port",
        ),
        (
            vec!["serve", "m", "--kv-transfer-config", nixl],
            vec![("VLLM_PORT", "tcp://10.96.0.7:8000")],
            "URI",
        ),
        (
            vec!["serve", "m", "-tp", "4", "--device-ids", "0,1,2"],
            vec![],
            "--device-ids",
        ),
        (
            vec!["serve", "m", "--port", "eighty"],
            vec![],
            "invalid int",
        ),
        (vec!["serve"], vec![], "model"),
        (vec!["bench", "m"], vec![], "invalid choice"),
    ];
    for (argv, env, needle) in cases {
        let mut sim = Sim::start(BIN, &argv, &env);
        let st = sim
            .wait_exit(Duration::from_secs(10))
            .unwrap_or_else(|| panic!("{argv:?} did not exit"));
        assert_eq!(st.code(), Some(2), "{argv:?}: {}", sim.stderr());
        let err = sim.stderr();
        assert!(
            err.contains(needle),
            "{argv:?}: stderr lacks {needle:?}: {err}"
        );
    }
}

#[tokio::test]
async fn port_collisions_exit_nonzero_naming_the_port() {
    // The HTTP port.
    let taken = StdListener::bind("127.0.0.1:0").unwrap();
    let port = taken.local_addr().unwrap().port();
    let mut sim = Sim::start(
        BIN,
        &[
            "serve",
            "m",
            "--host",
            "127.0.0.1",
            "--port",
            &port.to_string(),
        ],
        &[],
    );
    let st = sim.wait_exit(Duration::from_secs(10)).expect("exit");
    assert_eq!(st.code(), Some(1));
    let err = sim.stderr();
    assert!(err.contains("address already in use"), "{err}");
    assert!(err.contains(&port.to_string()), "{err}");

    // A NIXL side channel: rank 1 of two lands on base + 1.
    let [base, http] = free_blocks(&[2, 1])[..] else {
        unreachable!()
    };
    let blocker = StdListener::bind(("127.0.0.1", base + 1)).unwrap();
    let http = http.to_string();
    let mut sim = Sim::start(
        BIN,
        &[
            "serve",
            "m",
            "--host",
            "127.0.0.1",
            "--port",
            &http,
            "-dp",
            "2",
            "--kv-transfer-config",
            r#"{"kv_connector":"NixlConnector","kv_role":"kv_both"}"#,
        ],
        &[
            ("VLLM_NIXL_SIDE_CHANNEL_HOST", "127.0.0.1"),
            ("VLLM_NIXL_SIDE_CHANNEL_PORT", &base.to_string()),
        ],
    );
    let st = sim.wait_exit(Duration::from_secs(10)).expect("exit");
    assert_eq!(st.code(), Some(1));
    let err = sim.stderr();
    assert!(err.contains("NIXL side channel (dp rank 1)"), "{err}");
    assert!(
        err.contains(&format!("{}: address already in use", base + 1)),
        "{err}"
    );
    drop((taken, blocker));
}

#[tokio::test]
async fn refused_until_started_then_healthy_and_sigterm_exits_0() {
    let port = free_port();
    let mut sim = Sim::start(
        BIN,
        &[
            "serve",
            "/models/tiny",
            "--host",
            "127.0.0.1",
            "--port",
            &port.to_string(),
        ],
        &[("SRT_SIM_STARTUP_DELAY_MS", "1500")],
    );
    let started = Instant::now();
    sim.wait_log("bound: HTTP API", Duration::from_secs(10));
    // Bound but not listening: connections are refused, as with vLLM before engine start.
    let err = tokio::net::TcpStream::connect(("127.0.0.1", port))
        .await
        .expect_err("the port must refuse connections during startup");
    assert_eq!(err.kind(), std::io::ErrorKind::ConnectionRefused);
    wait_healthy(&mut sim, port).await;
    assert!(started.elapsed() >= Duration::from_millis(1400));

    let r = client()
        .get(format!("http://127.0.0.1:{port}/health"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.text().await.unwrap(), "");
    let models: Value = serde_json::from_str(&get_text(port, "/v1/models").await).unwrap();
    assert_eq!(models["data"][0]["id"], "/models/tiny");

    let st = sim.terminate().expect("exit after SIGTERM");
    assert_eq!(st.code(), Some(0), "{}", sim.stderr());
}

#[tokio::test]
async fn fault_knobs() {
    let port = free_port().to_string();
    let mut sim = Sim::start(
        BIN,
        &["serve", "m", "--host", "127.0.0.1", "--port", &port],
        &[("SRT_SIM_EXIT_DURING_STARTUP", "7")],
    );
    let st = sim.wait_exit(Duration::from_secs(10)).expect("exit");
    assert_eq!(st.code(), Some(7));
    assert!(sim.stderr().contains("simulated failure during startup"));

    let port = free_port();
    let mut sim = Sim::start(
        BIN,
        &[
            "serve",
            "m",
            "--host",
            "127.0.0.1",
            "--port",
            &port.to_string(),
        ],
        &[("SRT_SIM_EXIT_AFTER_MS", "300")],
    );
    wait_healthy(&mut sim, port).await;
    let st = sim.wait_exit(Duration::from_secs(10)).expect("exit");
    assert_eq!(st.code(), Some(1));
}

#[tokio::test]
async fn hybrid_lb_metrics_and_rank_header() {
    let port = free_port();
    let mut sim = Sim::start(
        BIN,
        &[
            "serve",
            "/m",
            "--host",
            "127.0.0.1",
            "--port",
            &port.to_string(),
            "-dp",
            "4",
            "-dpl",
            "2",
            "-dpr",
            "2",
            "-ep",
            "--served-model-name",
            "tiny",
        ],
        &[],
    );
    wait_healthy(&mut sim, port).await;
    let text = get_text(port, "/metrics").await;
    let engines: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("vllm:num_requests_running{"))
        .collect();
    assert_eq!(
        engines,
        vec![
            r#"vllm:num_requests_running{engine="2",model_name="tiny"} 0.0"#,
            r#"vllm:num_requests_running{engine="3",model_name="tiny"} 0.0"#,
        ],
        "{text}"
    );

    let body = json!({"model": "tiny", "prompt": "hello", "max_tokens": 2});
    let (status, r) = post(
        port,
        "/v1/completions",
        &[("x-data-parallel-rank", "3")],
        &body,
    )
    .await;
    assert_eq!(status, 200, "{r}");
    assert_eq!(r["srt_sim"]["dp_rank"], 3);
    let (status, _) = post(
        port,
        "/v1/completions",
        &[("x-data-parallel-rank", "0")],
        &body,
    )
    .await;
    assert_eq!(status, 400, "rank 0 lives on another node");
    let (status, _) = post(
        port,
        "/v1/completions",
        &[],
        &json!({"model": "other", "prompt": "x"}),
    )
    .await;
    assert_eq!(status, 404);
    let text = get_text(port, "/metrics").await;
    assert_eq!(
        metric(&text, r#"srt_sim_requests_total{stage="agg"}"#),
        Some(1.0)
    );

    // --disable-log-stats drops the vllm: series.
    let port = free_port();
    let mut sim2 = Sim::start(
        BIN,
        &[
            "serve",
            "/m",
            "--host",
            "127.0.0.1",
            "--port",
            &port.to_string(),
            "--disable-log-stats",
        ],
        &[],
    );
    wait_healthy(&mut sim2, port).await;
    let text = get_text(port, "/metrics").await;
    assert!(!text.contains("vllm:"), "{text}");
    assert!(
        text.contains("srt_sim_kv_transfers_consumed_total 0"),
        "{text}"
    );
}

#[tokio::test]
async fn nixl_prefill_then_decode() {
    let nixl = r#"{"kv_connector":"NixlConnector","kv_role":"kv_both"}"#;
    let [p_port, d_port, p_side, d_side] = free_blocks(&[1, 1, 2, 1])[..] else {
        unreachable!()
    };
    let mut p = Sim::start(
        BIN,
        &[
            "serve",
            "/m",
            "--host",
            "127.0.0.1",
            "--port",
            &p_port.to_string(),
            "-dp",
            "2",
            "--served-model-name",
            "tiny",
            "--kv-transfer-config",
            nixl,
        ],
        &[
            ("VLLM_NIXL_SIDE_CHANNEL_HOST", "127.0.0.1"),
            ("VLLM_NIXL_SIDE_CHANNEL_PORT", &p_side.to_string()),
        ],
    );
    let mut d = Sim::start(
        BIN,
        &[
            "serve",
            "/m",
            "--host",
            "127.0.0.1",
            "--port",
            &d_port.to_string(),
            "--served-model-name",
            "tiny",
            "--kv-transfer-config",
            nixl,
        ],
        &[
            ("VLLM_NIXL_SIDE_CHANNEL_HOST", "127.0.0.1"),
            ("VLLM_NIXL_SIDE_CHANNEL_PORT", &d_side.to_string()),
        ],
    );
    wait_healthy(&mut p, p_port).await;
    wait_healthy(&mut d, d_port).await;

    let rid = format!(
        "___prefill_addr_127.0.0.1:{p_port}___decode_addr_127.0.0.1:{d_port}_{}",
        "0123456789abcdef0123456789abcdef"
    );
    let original = json!({"model": "tiny", "prompt": "one two three four", "max_tokens": 5,
                          "stream": false, "echo": false, "ignore_eos": false});
    let mut prefill = original.clone();
    prefill["max_tokens"] = json!(1);
    prefill["kv_transfer_params"] = json!({"do_remote_decode": true, "do_remote_prefill": false,
        "remote_engine_id": null, "remote_block_ids": null, "remote_host": null, "remote_port": null});
    let headers = [
        ("x-request-id", rid.as_str()),
        ("x-data-parallel-rank", "1"),
    ];
    let (status, pr) = post(p_port, "/v1/completions", &headers, &prefill).await;
    assert_eq!(status, 200, "{pr}");
    assert_eq!(pr["id"], format!("cmpl-{rid}"));
    assert_eq!(pr["usage"]["completion_tokens"], 1);
    assert_eq!(pr["srt_sim"]["stage"], "prefill");
    let kv = pr["kv_transfer_params"].clone();
    assert_eq!(kv["do_remote_prefill"], true);
    assert_eq!(kv["do_remote_decode"], false);
    assert_eq!(kv["remote_host"], "127.0.0.1");
    assert_eq!(kv["remote_port"], p_side + 1, "rank 1's side channel");
    assert!(kv["remote_block_ids"].is_array());
    let engine = kv["remote_engine_id"].as_str().unwrap().to_string();
    assert!(engine.ends_with("_dp1"), "{engine}");

    let mut decode = original.clone();
    decode["kv_transfer_params"] = kv.clone();
    let (status, dr) = post(
        d_port,
        "/v1/completions",
        &[("x-request-id", rid.as_str())],
        &decode,
    )
    .await;
    assert_eq!(status, 200, "{dr}");
    assert_eq!(dr["srt_sim"]["stage"], "decode");
    assert_eq!(dr["srt_sim"]["kv_from"], engine.as_str());
    assert_eq!(dr["srt_sim"]["served_by"], format!("127.0.0.1:{d_port}"));
    assert_eq!(dr["usage"]["completion_tokens"], 5);

    // Params naming a side channel that serves another engine fail the KV load.
    let mut wrong = decode.clone();
    wrong["kv_transfer_params"]["remote_port"] = json!(p_side);
    let (status, e) = post(d_port, "/v1/completions", &[], &wrong).await;
    assert_eq!(status, 500, "{e}");
    assert!(
        e["error"]["message"].as_str().unwrap().contains("mismatch"),
        "{e}"
    );
    // Missing fields are a bad request.
    let mut missing = decode.clone();
    missing["kv_transfer_params"]["remote_engine_id"] = Value::Null;
    let (status, _) = post(d_port, "/v1/completions", &[], &missing).await;
    assert_eq!(status, 400);

    let pm = get_text(p_port, "/metrics").await;
    assert_eq!(
        metric(&pm, r#"srt_sim_requests_total{stage="prefill"}"#),
        Some(1.0)
    );
    let dm = get_text(d_port, "/metrics").await;
    assert_eq!(
        metric(&dm, r#"srt_sim_requests_total{stage="decode"}"#),
        Some(1.0)
    );
    assert_eq!(
        metric(&dm, "srt_sim_kv_transfers_consumed_total"),
        Some(1.0)
    );
}

#[tokio::test]
async fn sse_streaming() {
    let port = free_port();
    let mut sim = Sim::start(
        BIN,
        &[
            "serve",
            "m",
            "--host",
            "127.0.0.1",
            "--port",
            &port.to_string(),
        ],
        &[("SRT_SIM_TOKEN_DELAY_MS", "5")],
    );
    wait_healthy(&mut sim, port).await;
    for (path, body) in [
        (
            "/v1/completions",
            json!({"prompt": "stream me", "max_tokens": 4, "stream": true,
                   "stream_options": {"include_usage": true}}),
        ),
        (
            "/v1/chat/completions",
            json!({"messages": [{"role": "user", "content": "hi"}], "max_tokens": 4,
                   "stream": true}),
        ),
    ] {
        let r = client()
            .post(format!("http://127.0.0.1:{port}{path}"))
            .header("x-request-id", "req-42")
            .json(&body)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
        assert!(r.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/event-stream"));
        let text = r.text().await.unwrap();
        let events: Vec<&str> = text
            .split("\n\n")
            .filter(|e| !e.is_empty())
            .map(|e| e.strip_prefix("data: ").expect("SSE data line"))
            .collect();
        assert_eq!(*events.last().unwrap(), "[DONE]");
        let chunks: Vec<Value> = events[..events.len() - 1]
            .iter()
            .map(|e| serde_json::from_str(e).unwrap())
            .collect();
        let mut generated = String::new();
        for c in &chunks {
            assert!(c["id"].as_str().unwrap().ends_with("cmpl-req-42"), "{c}");
            if let Some(ch) = c["choices"].get(0) {
                generated.push_str(
                    ch["text"]
                        .as_str()
                        .or_else(|| ch["delta"]["content"].as_str())
                        .unwrap_or(""),
                );
            }
        }
        assert_eq!(generated.split_whitespace().count(), 4, "{text}");
        let finished = chunks
            .iter()
            .filter(|c| {
                c["choices"]
                    .get(0)
                    .map(|ch| ch["finish_reason"] == "length")
                    == Some(true)
            })
            .count();
        assert_eq!(finished, 1, "{text}");
        if path == "/v1/completions" {
            assert_eq!(chunks.last().unwrap()["usage"]["completion_tokens"], 4);
        }
    }
}

/// With a model directory holding `tokenizer.json` (the tiny test model's), prompt tokens
/// are the tokenizer's: a completion prompt with its BOS, a chat through the generic
/// template; streams carry one token per frame with usage at the end.
#[tokio::test]
async fn prompt_tokens_come_from_the_models_tokenizer() {
    let model = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/fixtures/tiny-model"
    );
    let tok = tokenizers::Tokenizer::from_file(format!("{model}/tokenizer.json")).unwrap();
    let port = free_port();
    let mut sim = Sim::start(
        BIN,
        &[
            "serve",
            model,
            "--host",
            "127.0.0.1",
            "--port",
            &port.to_string(),
        ],
        &[("SRT_SIM_TOKEN_DELAY_MS", "1")],
    );
    wait_healthy(&mut sim, port).await;
    let prompt = "The quick brown fox jumps over the lazy dog.";
    let with_bos = tok.encode(prompt, true).unwrap().get_ids().len() as u64;
    let bare = tok.encode(prompt, false).unwrap().get_ids().len() as u64;
    assert_eq!(with_bos, bare + 1);
    let (status, v) = post(
        port,
        "/v1/completions",
        &[],
        &json!({"model": model, "prompt": prompt, "max_tokens": 3}),
    )
    .await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["usage"]["prompt_tokens"], with_bos, "{v}");
    assert_eq!(v["usage"]["completion_tokens"], 3);
    let chat = tok
        .encode(format!("user: {prompt}\nassistant: "), false)
        .unwrap()
        .get_ids()
        .len() as u64;
    let (status, v) = post(
        port,
        "/v1/chat/completions",
        &[],
        &json!({"messages": [{"role": "user", "content": [{"type": "text", "text": prompt}]}],
                "max_completion_tokens": 2}),
    )
    .await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["usage"]["prompt_tokens"], chat, "{v}");
}

#[tokio::test]
async fn mori_registers_with_the_router_and_hands_off_kv() {
    use zeromq::{Socket, SocketRecv};

    let mut router = zeromq::RouterSocket::new();
    let ep = router.bind("tcp://127.0.0.1:0").await.unwrap();
    let ping_port = match ep {
        zeromq::Endpoint::Tcp(_, port) => port,
        other => panic!("unexpected endpoint {other}"),
    };
    let [p_port, d_port, p_hs, p_nt, d_hs, d_nt] = free_blocks(&[1; 6])[..] else {
        unreachable!()
    };
    let kv = |role: &str, http: u16, hs: u16, nt: u16| {
        json!({"kv_connector": "MoRIIOConnector", "kv_role": role,
               "kv_connector_extra_config": {"http_port": http, "handshake_port": hs,
                   "notify_port": nt, "proxy_ip": "127.0.0.1", "proxy_ping_port": ping_port,
                   "host_ip": "127.0.0.1", "read_mode": true}})
        .to_string()
    };
    let p_kv = kv("kv_producer", p_port, p_hs, p_nt);
    let d_kv = kv("kv_consumer", d_port, d_hs, d_nt);
    let mut p = Sim::start(
        BIN,
        &[
            "serve",
            "m",
            "--host",
            "127.0.0.1",
            "--port",
            &p_port.to_string(),
            "--kv-transfer-config",
            &p_kv,
        ],
        &[],
    );
    let mut d = Sim::start(
        BIN,
        &[
            "serve",
            "m",
            "--host",
            "127.0.0.1",
            "--port",
            &d_port.to_string(),
            "--kv-transfer-config",
            &d_kv,
        ],
        &[],
    );

    // Both register: one msgpack map each, [identity, payload] on the ROUTER.
    let mut seen = std::collections::HashMap::new();
    let deadline = Instant::now() + Duration::from_secs(15);
    while seen.len() < 2 {
        let left = deadline.saturating_duration_since(Instant::now());
        let msg = tokio::time::timeout(left, router.recv())
            .await
            .expect("registrations within the deadline")
            .unwrap();
        assert_eq!(msg.len(), 2, "identity and payload frames");
        let payload = msg.get(1).unwrap().to_vec();
        let v = rmpv::decode::read_value(&mut payload.as_slice()).unwrap();
        let map: std::collections::HashMap<String, rmpv::Value> = v
            .as_map()
            .expect("a msgpack map")
            .iter()
            .map(|(k, v)| (k.as_str().unwrap().to_string(), v.clone()))
            .collect();
        let kind = map["type"].as_str().unwrap().to_string();
        seen.insert(kind, map);
    }
    let pm = &seen["P"];
    assert_eq!(
        pm["http_address"].as_str(),
        Some(format!("127.0.0.1:{p_port}").as_str())
    );
    assert_eq!(
        pm["zmq_address"].as_str(),
        Some(format!("host:127.0.0.1,handshake:{p_hs},notify:{p_nt}").as_str())
    );
    assert_eq!(pm["dp_size"].as_u64(), Some(1));
    assert_eq!(pm["tp_size"].as_u64(), Some(1));
    assert_eq!(pm["transfer_mode"].as_str(), Some("READ"));
    assert_eq!(
        seen["D"]["http_address"].as_str(),
        Some(format!("127.0.0.1:{d_port}").as_str())
    );

    // READ-mode hand-off through the two engines.
    wait_healthy(&mut p, p_port).await;
    wait_healthy(&mut d, d_port).await;
    let original = json!({"prompt": "a b c", "max_tokens": 3});
    let mut prefill = original.clone();
    prefill["max_tokens"] = json!(1);
    prefill["kv_transfer_params"] = json!({"do_remote_decode": true, "do_remote_prefill": false,
        "remote_engine_id": null, "remote_block_ids": null, "transfer_id": "tx-0123", "remote_dp_size": 1});
    let (status, pr) = post(p_port, "/v1/completions", &[], &prefill).await;
    assert_eq!(status, 200, "{pr}");
    let kvp = pr["kv_transfer_params"].clone();
    assert_eq!(kvp["transfer_id"], "tx-0123");
    assert_eq!(kvp["remote_engine_id"], format!("127.0.0.1:{p_hs}"));
    assert_eq!(kvp["remote_handshake_port"], p_hs);
    assert_eq!(kvp["remote_notify_port"], p_nt);
    let mut decode = original.clone();
    decode["kv_transfer_params"] = kvp.clone();
    decode["kv_transfer_params"]["remote_dp_size"] = json!(1);
    let (status, dr) = post(d_port, "/v1/completions", &[], &decode).await;
    assert_eq!(status, 200, "{dr}");
    assert_eq!(dr["srt_sim"]["kv_from"], format!("127.0.0.1:{p_hs}"));
    assert_eq!(dr["srt_sim"]["transfer_id"], "tx-0123");
    let mut no_tx = decode.clone();
    no_tx["kv_transfer_params"]
        .as_object_mut()
        .unwrap()
        .remove("transfer_id");
    let (status, _) = post(d_port, "/v1/completions", &[], &no_tx).await;
    assert_eq!(status, 400);
}

#[tokio::test]
async fn sigterm_exits_0_every_time_and_headless_serves_side_channels() {
    for _ in 0..5 {
        let port = free_port();
        let mut sim = Sim::start(
            BIN,
            &[
                "serve",
                "m",
                "--host",
                "127.0.0.1",
                "--port",
                &port.to_string(),
            ],
            &[("SRT_SIM_STARTUP_DELAY_MS", "0")],
        );
        wait_healthy(&mut sim, port).await;
        let st = sim.terminate().expect("exit after SIGTERM");
        assert_eq!(st.code(), Some(0), "{}", sim.stderr());
    }

    // A headless secondary: no HTTP port, one side channel per local rank announcing its
    // engine, and SIGTERM still exits 0.
    let [http, side] = free_blocks(&[1, 4])[..] else {
        unreachable!()
    };
    let mut sim = Sim::start(
        BIN,
        &[
            "serve",
            "m",
            "--port",
            &http.to_string(),
            "--headless",
            "-dp",
            "4",
            "-dpl",
            "2",
            "-dpr",
            "2",
            "--kv-transfer-config",
            r#"{"kv_connector":"NixlConnector","kv_role":"kv_both","engine_id":"eng"}"#,
        ],
        &[
            ("VLLM_NIXL_SIDE_CHANNEL_HOST", "127.0.0.1"),
            ("VLLM_NIXL_SIDE_CHANNEL_PORT", &side.to_string()),
        ],
    );
    sim.wait_log("engines ready", Duration::from_secs(10));
    assert!(tokio::net::TcpStream::connect(("127.0.0.1", http))
        .await
        .is_err());
    for (port, want) in [(side + 2, "eng_dp0"), (side + 3, "eng_dp1")] {
        let mut s = tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .unwrap();
        let mut line = String::new();
        tokio::io::AsyncReadExt::read_to_string(&mut s, &mut line)
            .await
            .unwrap();
        let v: Value = serde_json::from_str(line.trim()).unwrap();
        assert_eq!(v["engine_id"], want);
    }
    assert!(tokio::net::TcpStream::connect(("127.0.0.1", side))
        .await
        .is_err());
    let st = sim.terminate().expect("exit after SIGTERM");
    assert_eq!(st.code(), Some(0));
}

/// The render routes a Router's cache-aware policy calls answer 403 without
/// `--enable-scale-out`, as vLLM 0.32's do, and the rendered prompt with it; `/tokenize`
/// answers either way.
#[tokio::test]
async fn render_routes_need_enable_scale_out() {
    let body = json!({"model": "tiny", "prompt": "hello world again", "max_tokens": 2});
    for scale_out in [false, true] {
        let port = free_port();
        let port_s = port.to_string();
        let mut args = vec![
            "serve",
            "/models/tiny",
            "--host",
            "127.0.0.1",
            "--port",
            &port_s,
        ];
        if scale_out {
            args.push("--enable-scale-out");
        }
        let mut sim = Sim::start(BIN, &args, &[("SRT_SIM_STARTUP_DELAY_MS", "0")]);
        wait_healthy(&mut sim, port).await;
        let (status, v) = post(port, "/v1/completions/render", &[], &body).await;
        if scale_out {
            assert_eq!(status, 200, "{v}");
            assert_eq!(v[0]["token_ids"].as_array().map(Vec::len), Some(3), "{v}");
        } else {
            assert_eq!(status, 403, "{v}");
            assert_eq!(v["error"]["type"], "PermissionDeniedError");
            assert!(
                v["error"]["message"]
                    .as_str()
                    .unwrap()
                    .contains("--enable-scale-out"),
                "{v}"
            );
        }
        let chat = json!({"model": "tiny", "messages": [{"role": "user", "content": "hi"}]});
        let (status, _) = post(port, "/v1/chat/completions/render", &[], &chat).await;
        assert_eq!(status, if scale_out { 200 } else { 403 });
        let (status, v) = post(port, "/tokenize", &[], &body).await;
        assert_eq!(status, 200, "{v}");
        assert_eq!(v["count"], 3);
        sim.terminate();
    }
}
