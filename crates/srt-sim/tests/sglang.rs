//! Integration tests of the `srt-sglang-sim` binary: each test launches real processes on
//! loopback ports, talks to them over HTTP, and kills them at the end.

mod common;

use std::net::TcpListener as StdListener;
use std::time::{Duration, Instant};

use common::{client, free_blocks, free_port, get_text, post, wait_healthy, Sim};
use serde_json::{json, Value};

const BIN: &str = env!("CARGO_BIN_EXE_srt-sglang-sim");

const MODEL: &str = common::TINY_MODEL;

/// The tiny model served as `tiny` on `127.0.0.1:port`, then `rest`.
fn argv(port: u16, rest: &[&str]) -> Vec<String> {
    common::sglang_args(port, rest)
}

fn start(args: &[String], env: &[(&str, &str)]) -> Sim {
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    Sim::start(BIN, &args, env)
}

async fn get(port: u16, path: &str) -> (u16, String) {
    let r = client()
        .get(format!("http://127.0.0.1:{port}{path}"))
        .send()
        .await
        .unwrap();
    (r.status().as_u16(), r.text().await.unwrap())
}

async fn get_json(port: u16, path: &str) -> Value {
    let (status, text) = get(port, path).await;
    assert_eq!(status, 200, "GET {path}: {text}");
    serde_json::from_str(&text).unwrap()
}

/// The `data:` events of an SSE body, `[DONE]` last.
fn events(body: &str) -> Vec<String> {
    body.split_terminator("\n\n")
        .map(|e| e.trim_start_matches("data: ").to_string())
        .collect()
}

async fn post_stream(port: u16, path: &str, body: &Value) -> Vec<String> {
    let r = client()
        .post(format!("http://127.0.0.1:{port}{path}"))
        .json(body)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    events(&r.text().await.unwrap())
}

/// argv words after the model, extra environment, and a fragment stderr must contain.
type Refusal<'a> = (&'a str, Vec<(&'a str, &'a str)>, &'a str);

#[test]
fn argv_refusals_exit_2_with_argparse_and_resolution_messages() {
    let cases: Vec<Refusal> = vec![
        ("--foo 1", vec![], "unrecognized arguments: --foo 1"),
        ("--tp_size 2", vec![], "unrecognized arguments: --tp_size 2"),
        ("stray", vec![], "unrecognized arguments: stray"),
        ("--p 1", vec![], "ambiguous option: --p could match"),
        (
            "--disaggregation-mode both",
            vec![],
            "argument --disaggregation-mode: invalid choice: 'both'",
        ),
        ("--port", vec![], "argument --port: expected one argument"),
        (
            "--host --port 1",
            vec![],
            "argument --host: expected one argument",
        ),
        ("--tp-size two", vec![], "invalid int value: 'two'"),
        (
            "--skip-server-warmup=1",
            vec![],
            "ignored explicit argument '1'",
        ),
        (
            "--tp-size 3 --nnodes 2",
            vec![],
            "tp_size must be divisible by number of nodes",
        ),
        (
            "--dp-size 2 --enable-dp-attention",
            vec![],
            "tp_size % attn_dp_size",
        ),
        (
            "--tp-size 4 --attn-dp-size 2 --dp-size 2",
            vec![],
            "data-parallel replicas combined with attention data parallelism",
        ),
        (
            "--tp-size 2 --dp-size 2 --nnodes 2",
            vec![],
            "multi-node data-parallel replicas are not supported",
        ),
        (
            "--tp-size 4 --moe-dense-tp-size 2",
            vec![],
            "moe_dense_tp_size only supports None, 1, or tp_size",
        ),
        (
            "--served-model-name a:b",
            vec![],
            "served_model_name cannot contain a colon",
        ),
        (
            "--base-gpu-id -1",
            vec![],
            "base_gpu_id must be non-negative",
        ),
        (
            "--disaggregation-mode prefill --disaggregation-transfer-backend fake",
            vec![],
            "Prefill server does not support 'fake'",
        ),
        (
            "--tp-size 2 --nnodes 2 --node-rank 2",
            vec![],
            "must be in [0, --nnodes 2)",
        ),
        (
            "--tp-size 4",
            vec![("CUDA_VISIBLE_DEVICES", "0,1")],
            "invalid device ordinal",
        ),
        (
            "--tp-size 2 --base-gpu-id 1",
            vec![("CUDA_VISIBLE_DEVICES", "0,1")],
            "invalid device ordinal",
        ),
    ];
    for (rest, env, fragment) in cases {
        let mut args = vec!["--model-path", MODEL, "--port", "1"];
        let words: Vec<String> = shlex::split(rest).unwrap();
        args.extend(words.iter().map(String::as_str));
        let mut sim = Sim::start(BIN, &args, &env);
        let st = sim
            .wait_exit(Duration::from_secs(5))
            .unwrap_or_else(|| panic!("{rest}: still running"));
        assert_eq!(st.code(), Some(2), "{rest}: {}", sim.stderr());
        assert!(
            sim.stderr().contains(fragment),
            "{rest}: stderr lacks {fragment:?}: {}",
            sim.stderr()
        );
    }
    let mut sim = Sim::start(BIN, &["--port", "1"], &[]);
    assert_eq!(
        sim.wait_exit(Duration::from_secs(5)).unwrap().code(),
        Some(2)
    );
    assert!(sim
        .stderr()
        .contains("the following arguments are required: --model-path/--model"));
    let mut sim = Sim::start(BIN, &["--model", MODEL, "--help"], &[]);
    assert_eq!(
        sim.wait_exit(Duration::from_secs(5)).unwrap().code(),
        Some(0)
    );
    assert!(sim.stdout().contains("usage: srt-sglang-sim"));
}

/// The engine's own command for a prefill of two GPUs, as srt renders it, serves.
#[tokio::test]
async fn the_engines_prefill_command_is_accepted_and_binds_its_ports() {
    let b = free_blocks(&[1, 1, 1]);
    let (http, nccl, boot) = (b[0], b[1], b[2]);
    let args = argv(
        http,
        &[
            "--nccl-port",
            &nccl.to_string(),
            "--tp-size",
            "2",
            "--disaggregation-mode",
            "prefill",
            "--disaggregation-bootstrap-port",
            &boot.to_string(),
            "--disaggregation-transfer-backend",
            "nixl",
            "--mem-fraction-static",
            "0.8",
            "--trust-remote-code",
        ],
    );
    let mut sim = start(&args, &[("CUDA_VISIBLE_DEVICES", "0,1")]);
    wait_healthy(&mut sim, http).await;
    for p in [http, nccl, boot] {
        assert!(
            StdListener::bind(("127.0.0.1", p)).is_err(),
            "port {p} is not bound"
        );
    }
    assert!(
        sim.stdout().contains(
            "flags accepted without simulation: --mem-fraction-static 0.8 --trust-remote-code"
        ),
        "{}",
        sim.stdout()
    );
    let info = get_json(http, "/server_info").await;
    assert_eq!(info["tp_size"], 2);
    assert_eq!(info["disaggregation_mode"], "prefill");
    assert_eq!(info["disaggregation_bootstrap_port"], boot);
    assert_eq!(info["load_balance_method"], "follow_bootstrap_room");
    assert_eq!(info["mem_fraction_static"], 0.8);
    assert_eq!(sim.terminate().and_then(|s| s.code()), Some(0));
}

#[tokio::test]
async fn port_collisions_exit_1_naming_the_port() {
    // Each case: the extra flags, and which of the block's ports is taken first.
    let cases: Vec<(Vec<String>, usize, &str)> = vec![
        (vec![], 0, "HTTP API"),
        (vec!["--nccl-port".into(), "{1}".into()], 1, "--nccl-port"),
        (
            vec![
                "--disaggregation-mode".into(),
                "prefill".into(),
                "--disaggregation-bootstrap-port".into(),
                "{1}".into(),
            ],
            1,
            "bootstrap server",
        ),
        (
            vec![
                "--tp-size".into(),
                "4".into(),
                "--nnodes".into(),
                "2".into(),
                "--dist-init-addr".into(),
                "127.0.0.1:{1}".into(),
            ],
            1,
            "--dist-init-addr",
        ),
        (
            vec![
                "--tp-size".into(),
                "2".into(),
                "--attn-dp-size".into(),
                "2".into(),
                "--dist-init-addr".into(),
                "127.0.0.1:{1}".into(),
            ],
            3,
            "attention-DP",
        ),
    ];
    for (rest, taken, what) in cases {
        let b = free_blocks(&[1, 8]);
        let ports = [b[0], b[1], b[1] + 1, b[1] + 2];
        let rest: Vec<String> = rest
            .iter()
            .map(|w| w.replace("{1}", &b[1].to_string()))
            .collect();
        let rest: Vec<&str> = rest.iter().map(String::as_str).collect();
        let _blocker = StdListener::bind(("127.0.0.1", ports[taken])).unwrap();
        let mut sim = start(&argv(ports[0], &rest), &[]);
        let st = sim
            .wait_exit(Duration::from_secs(5))
            .unwrap_or_else(|| panic!("{what}: still running"));
        assert_eq!(st.code(), Some(1), "{what}: {}", sim.stderr());
        let err = sim.stderr();
        assert!(
            err.contains("address already in use")
                && err.contains(&ports[taken].to_string())
                && err.contains(what),
            "{what}: {err}"
        );
    }
}

#[tokio::test]
async fn attention_dp_binds_the_six_derived_ports_and_no_nccl_port_binds_none() {
    let http = free_port();
    // Single node, no --dist-init-addr: the derived ports start at --port + 234.
    if http > 65_000 {
        return;
    }
    let probe: Vec<StdListener> = (http + 234..http + 240)
        .filter_map(|p| StdListener::bind(("127.0.0.1", p)).ok())
        .collect();
    if probe.len() < 6 {
        return; // Someone else holds one; nothing to learn here.
    }
    drop(probe);
    let mut sim = start(&argv(http, &["--tp-size", "2", "--attn-dp-size", "2"]), &[]);
    wait_healthy(&mut sim, http).await;
    for p in http + 234..http + 240 {
        assert!(StdListener::bind(("0.0.0.0", p)).is_err(), "{p} not bound");
    }
    // The sim's own record of what it bound, not a probe: another test may
    // hold the base port by the time this one looks.
    let bound = bound_ports(&sim.stdout());
    assert!(
        bound.is_superset(&(http + 234..http + 240).collect()),
        "{bound:?}"
    );
    assert!(
        !bound.contains(&(http + 233)),
        "the dist-init port itself is only a base: {bound:?}"
    );
    let info = get_json(http, "/server_info").await;
    assert_eq!(info["attn_dp_size"], 2);
    assert_eq!(info["enable_dp_attention"], true);
    assert_eq!(info["internal_states"].as_array().unwrap().len(), 2);
    assert!(sim.stdout().contains("bound: HTTP API"), "{}", sim.stdout());
    assert!(!sim.stdout().contains("torch.distributed store"));
}

#[tokio::test]
async fn refused_until_started_503_while_warming_up_then_healthy_and_sigterm_exits_0() {
    let port = free_port();
    let mut sim = start(&argv(port, &[]), &[("SRT_SIM_STARTUP_DELAY_MS", "600")]);
    tokio::time::sleep(Duration::from_millis(150)).await;
    assert!(
        client()
            .get(format!("http://127.0.0.1:{port}/health"))
            .send()
            .await
            .is_err(),
        "not listening during startup"
    );
    sim.wait_log("warming up for 600 ms", Duration::from_secs(5));
    assert_eq!(get(port, "/health").await.0, 503);
    assert_eq!(get(port, "/health_generate").await.0, 503);
    assert_eq!(get(port, "/ready").await.0, 503);
    sim.wait_log("fired up and ready to roll", Duration::from_secs(5));
    for path in ["/health", "/health_generate", "/ready", "/ping"] {
        let (status, body) = get(port, path).await;
        assert_eq!((status, body.as_str()), (200, ""), "{path}");
    }
    assert_eq!(sim.terminate().and_then(|s| s.code()), Some(0));

    let port = free_port();
    let mut sim = start(
        &argv(port, &["--skip-server-warmup"]),
        &[("SRT_SIM_STARTUP_DELAY_MS", "300")],
    );
    sim.wait_log("no warmup", Duration::from_secs(5));
    assert_eq!(get(port, "/health").await.0, 200);
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(sim.child.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    assert_eq!(
        sim.wait_exit(Duration::from_secs(5)).and_then(|s| s.code()),
        Some(0)
    );
}

#[tokio::test]
async fn fault_knobs() {
    let port = free_port();
    let mut sim = start(
        &argv(port, &[]),
        &[
            ("SRT_SIM_EXIT_DURING_STARTUP", "7"),
            ("SRT_SIM_STARTUP_DELAY_MS", "100"),
        ],
    );
    assert_eq!(
        sim.wait_exit(Duration::from_secs(5)).and_then(|s| s.code()),
        Some(7)
    );
    let port = free_port();
    let mut sim = start(
        &argv(port, &["--skip-server-warmup"]),
        &[
            ("SRT_SIM_UNHEALTHY_AFTER_MS", "300"),
            ("SRT_SIM_EXIT_AFTER_MS", "900"),
        ],
    );
    wait_healthy(&mut sim, port).await;
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert_eq!(get(port, "/health").await.0, 503);
    assert_eq!(
        sim.wait_exit(Duration::from_secs(5)).and_then(|s| s.code()),
        Some(1)
    );
}

#[tokio::test]
async fn native_and_openai_api_shapes() {
    let port = free_port();
    let mut sim = start(&argv(port, &["--skip-server-warmup"]), &[]);
    wait_healthy(&mut sim, port).await;

    let mi = get_json(port, "/model_info").await;
    assert_eq!(mi["served_model_name"], "tiny");
    assert_eq!(mi["model_path"], MODEL);
    assert_eq!(mi["is_generation"], true);
    assert_eq!(mi["disaggregation_mode"], "null");
    assert_eq!(mi["model_type"], "llama");
    assert_eq!(mi["architectures"], json!(["LlamaForCausalLM"]));
    assert_eq!(get_json(port, "/get_model_info").await, mi);
    sim.wait_log("'/get_model_info' is deprecated", Duration::from_secs(2));

    let si = get_json(port, "/server_info").await;
    for (k, v) in [
        ("tp_size", json!(1)),
        ("dp_size", json!(1)),
        ("attn_dp_size", json!(1)),
        ("load_balance_method", json!("round_robin")),
        ("disaggregation_mode", json!("null")),
        ("disaggregation_bootstrap_port", json!(8998)),
        ("served_model_name", json!("tiny")),
        ("model_path", json!(MODEL)),
        ("port", json!(port)),
        ("version", json!("0.5.23")),
        ("frontend", json!("python")),
    ] {
        assert_eq!(si[k], v, "server_info.{k}");
    }
    assert_eq!(si["internal_states"].as_array().unwrap().len(), 1);
    assert!(si["launch_command"]
        .as_str()
        .unwrap()
        .starts_with("python3 -m sglang.launch_server --model-path"));
    assert_eq!(get_json(port, "/get_server_info").await["tp_size"], 1);

    let models = get_json(port, "/v1/models").await;
    assert_eq!(models["data"][0]["id"], "tiny");
    assert_eq!(models["data"][0]["owned_by"], "sglang");
    assert_eq!(models["data"][0]["max_model_len"], 512);
    assert_eq!(get_json(port, "/v1/models/tiny").await["id"], "tiny");
    let (status, body) = get(port, "/v1/models/other").await;
    assert_eq!(status, 404);
    assert!(body.contains("model_not_found"));

    // /generate: text, input_ids, streamed.
    let (status, g) = post(
        port,
        "/generate",
        &[],
        &json!({"text": "The capital city of France is", "sampling_params": {"max_new_tokens": 4}}),
    )
    .await;
    assert_eq!(status, 200, "{g}");
    assert_eq!(g["meta_info"]["completion_tokens"], 4);
    assert_eq!(g["output_ids"].as_array().unwrap().len(), 4);
    assert_eq!(
        g["meta_info"]["finish_reason"],
        json!({"type": "length", "length": 4})
    );
    let tok = tokenizers::Tokenizer::from_file(format!("{MODEL}/tokenizer.json")).unwrap();
    let n = tok
        .encode("The capital city of France is", true)
        .unwrap()
        .get_ids()
        .len();
    assert_eq!(g["meta_info"]["prompt_tokens"], n);
    assert_eq!(g["srt_sim"]["stage"], "agg");
    assert_eq!(g["srt_sim"]["served_by"], format!("127.0.0.1:{port}"));
    let (_, g) = post(
        port,
        "/generate",
        &[],
        &json!({"input_ids": [1, 2, 3], "sampling_params": {"max_new_tokens": 0}}),
    )
    .await;
    assert_eq!(g["meta_info"]["prompt_tokens"], 3);
    assert_eq!(g["text"], "");
    let (status, _) = post(port, "/generate", &[], &json!({"sampling_params": {}})).await;
    assert_eq!(status, 400);
    let (status, v) = post(
        port,
        "/generate",
        &[],
        &json!({"text": "hi", "sampling_params": {"max_new_tokens": 600}}),
    )
    .await;
    assert_eq!(status, 400);
    assert!(
        v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("maximum context length of 512 tokens"),
        "{v}"
    );
    let ev = post_stream(
        port,
        "/generate",
        &json!({"text": "hi", "sampling_params": {"max_new_tokens": 3}, "stream": true}),
    )
    .await;
    assert_eq!(ev.len(), 4, "{ev:?}");
    assert_eq!(ev[3], "[DONE]");
    let last: Value = serde_json::from_str(&ev[2]).unwrap();
    let first: Value = serde_json::from_str(&ev[0]).unwrap();
    assert!(first["meta_info"]["finish_reason"].is_null());
    assert_eq!(last["meta_info"]["completion_tokens"], 3);
    assert!(last["text"]
        .as_str()
        .unwrap()
        .starts_with(first["text"].as_str().unwrap()));

    // OpenAI routes.
    let (status, c) = post(
        port,
        "/v1/completions",
        &[],
        &json!({"model": "tiny", "prompt": "hello", "max_tokens": 2}),
    )
    .await;
    assert_eq!(status, 200, "{c}");
    assert_eq!(c["object"], "text_completion");
    assert_eq!(c["choices"][0]["finish_reason"], "length");
    assert_eq!(c["choices"][0]["matched_stop"], Value::Null);
    assert_eq!(c["usage"]["completion_tokens"], 2);
    assert_eq!(c["srt_sim"]["stage"], "agg");
    let (status, c) = post(
        port,
        "/v1/chat/completions",
        &[],
        &json!({"model": "tiny", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2}),
    )
    .await;
    assert_eq!(status, 200, "{c}");
    assert_eq!(c["object"], "chat.completion");
    assert_eq!(c["choices"][0]["message"]["role"], "assistant");
    assert_eq!(
        c["usage"]["total_tokens"],
        c["usage"]["prompt_tokens"].as_u64().unwrap() + 2
    );
    let ev = post_stream(
        port,
        "/v1/chat/completions",
        &json!({"model": "tiny", "messages": [{"role": "user", "content": "hi"}],
                "max_tokens": 2, "stream": true, "stream_options": {"include_usage": true}}),
    )
    .await;
    assert_eq!(ev.len(), 5, "role, 2 tokens, usage, DONE: {ev:?}");
    let usage: Value = serde_json::from_str(&ev[3]).unwrap();
    assert_eq!(usage["usage"]["completion_tokens"], 2);
    assert_eq!(usage["choices"], json!([]));
    let r = client()
        .post(format!("http://127.0.0.1:{port}/v1/completions"))
        .header("content-type", "text/plain")
        .body(r#"{"prompt": "x"}"#)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);

    // Cache, load, what 0.5.23 does not serve.
    for (method, path) in [("GET", "/flush_cache"), ("POST", "/flush_cache")] {
        let r = client()
            .request(
                method.parse().unwrap(),
                format!("http://127.0.0.1:{port}{path}"),
            )
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
        assert!(r.text().await.unwrap().starts_with("Cache flushed."));
    }
    let loads = get_json(port, "/v1/loads").await;
    assert_eq!(loads["version"], "0.5.23");
    assert_eq!(loads["loads"][0]["dp_rank"], 0);
    assert_eq!(loads["loads"][0]["num_running_reqs"], 0);
    assert!(loads["loads"][0]["queues"].is_object());
    let core = get_json(port, "/v1/loads?include=core").await;
    assert!(core["loads"][0].get("queues").is_none());
    assert_eq!(get(port, "/v1/loads?include=bogus").await.0, 400);
    let prom = get_text(port, "/v1/loads?format=prometheus").await;
    assert!(
        prom.contains("sglang_num_running_reqs{dp_rank=\"0\"} 0"),
        "{prom}"
    );
    assert_eq!(get(port, "/get_load").await.0, 404);
    assert_eq!(
        get(port, "/metrics").await.0,
        404,
        "no --enable-metrics: SGLang mounts no /metrics"
    );
}

/// `num_running_reqs` and `num_waiting_reqs` come from the scheduler.
#[tokio::test]
async fn loads_and_metrics_count_the_schedulers_sequences() {
    let port = free_port();
    let mut sim = start(
        &argv(
            port,
            &[
                "--skip-server-warmup",
                "--enable-metrics",
                "--max-running-requests",
                "1",
            ],
        ),
        &[("SRT_SIM_TOKEN_DELAY_MS", "100")],
    );
    wait_healthy(&mut sim, port).await;
    let body = json!({"text": "hi", "sampling_params": {"max_new_tokens": 10}});
    let reqs: Vec<_> = (0..2)
        .map(|_| {
            let body = body.clone();
            tokio::spawn(async move { post(port, "/generate", &[], &body).await })
        })
        .collect();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let l = &get_json(port, "/v1/loads").await["loads"][0];
    assert_eq!(
        (
            l["num_running_reqs"].as_u64(),
            l["num_waiting_reqs"].as_u64()
        ),
        (Some(1), Some(1)),
        "{l}"
    );
    let m = get_text(port, "/metrics").await;
    let series = |name: &str| {
        m.lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.rsplit(' ').next())
            .and_then(|v| v.parse::<f64>().ok())
    };
    assert_eq!(series("sglang:num_running_reqs{"), Some(1.0), "{m}");
    assert_eq!(series("sglang:num_queue_reqs{"), Some(1.0), "{m}");
    assert!(m.contains("model_name=\"tiny\",engine_type=\"unified\""));
    for r in reqs {
        assert_eq!(r.await.unwrap().0, 200);
    }
    let l = &get_json(port, "/v1/loads").await["loads"][0];
    assert_eq!(l["num_running_reqs"], 0);
    assert!(get_text(port, "/metrics")
        .await
        .contains("srt_sim_requests_total{stage=\"agg\"} 2"));
}

/// `/slow_down` makes every forward pass sleep until it is set to `null`, as SGLang's
/// scheduler does; its one field is required.
#[tokio::test]
async fn slow_down_sleeps_every_forward_pass_until_cleared() {
    let port = free_port();
    let mut sim = start(&argv(port, &["--skip-server-warmup"]), &[]);
    wait_healthy(&mut sim, port).await;
    let body = json!({"text": "hi", "sampling_params": {"max_new_tokens": 5, "ignore_eos": true}});
    let timed = || async {
        let t0 = Instant::now();
        assert_eq!(post(port, "/generate", &[], &body).await.0, 200);
        t0.elapsed()
    };
    assert_eq!(
        post(port, "/slow_down", &[], &json!({"forward_sleep_time": 0.1})).await,
        (200, Value::Null)
    );
    let slowed = timed().await;
    assert!(
        slowed >= Duration::from_millis(500),
        "5 passes of 100 ms: {slowed:?}"
    );
    assert_eq!(
        post(
            port,
            "/slow_down",
            &[],
            &json!({"forward_sleep_time": null})
        )
        .await,
        (200, Value::Null)
    );
    let fast = timed().await;
    assert!(fast < Duration::from_millis(200), "{fast:?}");
    let (status, detail) = post(port, "/slow_down", &[], &json!({})).await;
    assert_eq!(status, 422);
    assert_eq!(
        detail["detail"][0]["loc"],
        json!(["body", "forward_sleep_time"])
    );
    assert!(
        sim.stdout().contains("\"POST /slow_down\" 200"),
        "{}",
        sim.stdout()
    );
}

#[tokio::test]
async fn a_follower_node_serves_only_the_stand_in_health_server() {
    let b = free_blocks(&[1, 1]);
    let (http, nccl) = (b[0], b[1]);
    let mut sim = start(
        &argv(
            http,
            &[
                "--tp-size",
                "4",
                "--nnodes",
                "2",
                "--node-rank",
                "1",
                "--nccl-port",
                &nccl.to_string(),
                "--dist-init-addr",
                &format!("127.0.0.1:{nccl}"),
                "--disaggregation-mode",
                "prefill",
            ],
        ),
        &[],
    );
    wait_healthy(&mut sim, http).await;
    for path in ["/ping", "/health", "/health_generate"] {
        assert_eq!(get(http, path).await, (200, String::new()), "{path}");
    }
    for path in ["/model_info", "/server_info", "/v1/models"] {
        assert_eq!(get(http, path).await.0, 404, "{path}");
    }
    let (status, _) = post(http, "/generate", &[], &json!({"text": "x"})).await;
    assert_eq!(status, 404);
    assert!(
        !bound_ports(&sim.stdout()).contains(&nccl),
        "a follower binds no store"
    );
    assert!(
        sim.stdout()
            .contains("bound: stand-in health server (node rank >= 1) 127.0.0.1:"),
        "nor a bootstrap server: {}",
        sim.stdout()
    );
    assert!(!sim.stdout().contains("disaggregation bootstrap server"));
    assert_eq!(sim.terminate().and_then(|s| s.code()), Some(0));

    // srtctl gives followers --port 0.
    let mut sim = start(
        &argv(0, &["--tp-size", "2", "--nnodes", "2", "--node-rank", "1"]),
        &[],
    );
    sim.wait_log(
        "dummy health server on http://127.0.0.1:",
        Duration::from_secs(5),
    );
    let out = sim.stdout();
    let port: u16 = out
        .split("dummy health server on http://127.0.0.1:")
        .nth(1)
        .and_then(|s| s.split_whitespace().next())
        .and_then(|p| p.parse().ok())
        .unwrap();
    assert_ne!(port, 0);
    assert_eq!(get(port, "/health").await.0, 200);
}

#[tokio::test]
async fn bootstrap_server_routes() {
    let b = free_blocks(&[1, 1]);
    let (port, boot) = (b[0], b[1]);
    let mut sim = start(
        &argv(
            port,
            &[
                "--tp-size",
                "2",
                "--disaggregation-mode",
                "prefill",
                "--disaggregation-bootstrap-port",
                &boot.to_string(),
            ],
        ),
        &[("SRT_SIM_STARTUP_DELAY_MS", "500")],
    );
    let all = "/route?prefill_dp_rank=-1&prefill_cp_rank=-1&target_tp_rank=-1&target_pp_rank=-1";
    sim.wait_log("starting", Duration::from_secs(5));
    let deadline = Instant::now() + Duration::from_secs(5);
    let (status, text) = loop {
        if let Ok(r) = client()
            .get(format!("http://127.0.0.1:{boot}{all}"))
            .send()
            .await
        {
            break (r.status().as_u16(), r.text().await.unwrap());
        }
        assert!(Instant::now() < deadline, "bootstrap server never listened");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(
        (status, text.as_str()),
        (
            503,
            "Prefill server not fully registered yet (0 workers registered)."
        )
    );
    assert_eq!(get(boot, "/health").await, (200, "OK".into()));
    assert_eq!(get(boot, "/route").await.0, 400);
    wait_healthy(&mut sim, port).await;
    let info = get_json(boot, all).await;
    assert_eq!(info["attn_tp_size"], 2);
    assert_eq!(info["dp_size"], 1);
    assert_eq!(info["follow_bootstrap_room"], true);
    assert_eq!(info["prefill_http_port"], port);
    let rank = get_json(
        boot,
        "/route?prefill_dp_rank=0&prefill_cp_rank=0&target_tp_rank=1&target_pp_rank=0",
    )
    .await;
    assert_eq!(rank["rank_ip"], "127.0.0.1");
    assert_eq!(
        get(
            boot,
            "/route?prefill_dp_rank=0&prefill_cp_rank=0&target_tp_rank=5&target_pp_rank=0"
        )
        .await
        .0,
        404
    );
    let r = client()
        .put(format!("http://127.0.0.1:{boot}/route"))
        .json(
            &json!({"attn_tp_size": 2, "attn_tp_rank": 0, "attn_cp_size": 1, "attn_cp_rank": 0,
                      "attn_dp_size": 1, "attn_dp_rank": 0, "pp_size": 1, "pp_rank": 0,
                      "system_dp_size": 1, "system_dp_rank": 0, "rank_ip": "10.9.9.9",
                      "rank_port": 7000, "page_size": 1, "kv_cache_dtype": "auto"}),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(r.text().await.unwrap(), "OK");
    let r = client()
        .post(format!("http://127.0.0.1:{boot}/register_dp_rank"))
        .json(&json!({"bootstrap_room": 5, "dp_rank": 0}))
        .send()
        .await
        .unwrap();
    assert_eq!(r.text().await.unwrap(), "OK");
    let (_, q) = post(
        boot,
        "/query_dp_ranks",
        &[],
        &json!({"bootstrap_rooms": [5, 6]}),
    )
    .await;
    assert_eq!(q, json!({"5": 0}));
    assert_eq!(get(boot, "/srt_sim/rooms/5?wait_ms=10").await.0, 404);
}

/// The decode waits for its room's prefill, then generates; both sides get the same
/// body at the same time, as sglang-router sends it.
#[tokio::test]
async fn decode_waits_for_its_rooms_prefill() {
    let mut p = common::sglang_pair(BIN, &[], &[]);
    wait_healthy(&mut p.prefill, p.p_port).await;
    wait_healthy(&mut p.decode, p.d_port).await;
    let body = json!({"text": "hi there", "sampling_params": {"max_new_tokens": 3},
                      "bootstrap_host": "127.0.0.1", "bootstrap_port": p.boot,
                      "bootstrap_room": 4242u64});
    let d_port = p.d_port;
    let started = Instant::now();
    let decode = {
        let body = body.clone();
        tokio::spawn(async move { post(d_port, "/generate", &[], &body).await })
    };
    tokio::time::sleep(Duration::from_millis(400)).await;
    assert!(
        !decode.is_finished(),
        "the decode answered before its prefill ran"
    );
    let (status, pr) = post(p.p_port, "/generate", &[], &body).await;
    assert_eq!(status, 200, "{pr}");
    assert_eq!(pr["srt_sim"]["stage"], "prefill");
    assert_eq!(pr["meta_info"]["completion_tokens"], 1);
    let (status, dr) = decode.await.unwrap();
    assert_eq!(status, 200, "{dr}");
    assert!(started.elapsed() >= Duration::from_millis(400));
    let sim = &dr["srt_sim"];
    assert_eq!(sim["stage"], "decode");
    assert_eq!(sim["bootstrap_room"], 4242);
    assert_eq!(sim["kv_from"], format!("127.0.0.1:{}", p.p_port));
    assert_eq!(sim["bootstrap"], format!("127.0.0.1:{}", p.boot));
    assert_eq!(dr["meta_info"]["completion_tokens"], 3);
    let room = get_json(p.boot, "/srt_sim/rooms/4242").await;
    assert_eq!(room["prefill"], format!("127.0.0.1:{}", p.p_port));

    // The OpenAI routes carry the same fields; streamed, the decode's frames follow.
    let body = json!({"model": "tiny", "messages": [{"role": "user", "content": "hi"}],
                      "max_tokens": 2, "stream": true,
                      "bootstrap_host": "127.0.0.1", "bootstrap_port": p.boot,
                      "bootstrap_room": 7u64});
    let mut p_body = body.clone();
    p_body["stream"] = json!(false);
    let (ev_d, (status, _)) = tokio::join!(
        post_stream(d_port, "/v1/chat/completions", &body),
        post(p.p_port, "/v1/chat/completions", &[], &p_body)
    );
    assert_eq!(status, 200);
    let last: Value = serde_json::from_str(&ev_d[ev_d.len() - 2]).unwrap();
    assert_eq!(
        last["srt_sim"]["kv_from"],
        format!("127.0.0.1:{}", p.p_port)
    );
}

#[tokio::test]
async fn pairing_failures() {
    let mut p = common::sglang_pair(BIN, &[("SRT_SIM_PD_WAIT_MS", "700")], &[]);
    wait_healthy(&mut p.prefill, p.p_port).await;
    wait_healthy(&mut p.decode, p.d_port).await;
    // No room: both sides refuse it, as SGLang's scheduler does.
    for port in [p.p_port, p.d_port] {
        let (status, v) = post(port, "/generate", &[], &json!({"text": "x"})).await;
        assert_eq!(status, 400, "{v}");
        assert!(v["error"]["message"]
            .as_str()
            .unwrap()
            .contains("Disaggregated request received without bootstrap room id"));
        let (status, v) = post(
            port,
            "/v1/completions",
            &[],
            &json!({"prompt": "x", "max_tokens": 1}),
        )
        .await;
        assert_eq!(
            (status, v["type"].as_str()),
            (400, Some("BadRequestError")),
            "{v}"
        );
    }
    // A room no prefill computes: 500 once the wait is over.
    let started = Instant::now();
    let (status, v) = post(
        p.d_port,
        "/generate",
        &[],
        &json!({"text": "x", "bootstrap_host": "127.0.0.1", "bootstrap_port": p.boot,
                "bootstrap_room": 99}),
    )
    .await;
    assert_eq!(status, 500, "{v}");
    assert!(started.elapsed() >= Duration::from_millis(700));
    assert!(v["message"].as_str().unwrap().contains("timed out"), "{v}");
    // Streamed, the failure is an error event.
    let ev = post_stream(
        p.d_port,
        "/generate",
        &json!({"text": "x", "stream": true, "bootstrap_host": "127.0.0.1",
                "bootstrap_port": p.boot, "bootstrap_room": 98}),
    )
    .await;
    let e: Value = serde_json::from_str(&ev[0]).unwrap();
    assert_eq!(e["error"]["code"], 500);
    assert_eq!(ev.last().unwrap(), "[DONE]");
    // No bootstrap server there.
    let (status, v) = post(
        p.d_port,
        "/generate",
        &[],
        &json!({"text": "x", "bootstrap_host": "127.0.0.1", "bootstrap_port": free_port(),
                "bootstrap_room": 1}),
    )
    .await;
    assert_eq!(status, 500);
    assert!(
        v["message"].as_str().unwrap().contains("cannot reach"),
        "{v}"
    );
    // SGLang's fake bootstrap host (its own warmup and health requests): no transfer.
    let (status, v) = post(
        p.d_port,
        "/generate",
        &[],
        &json!({"text": "x", "bootstrap_host": "2.2.2.2", "bootstrap_room": 0}),
    )
    .await;
    assert_eq!(status, 200, "{v}");
    assert_eq!(v["srt_sim"]["fake_transfer"], true);
}

/// `bootstrap_port: null` (a prefill registered without one): the decode uses its own
/// `--disaggregation-bootstrap-port`, as SGLang's scheduler does.
#[tokio::test]
async fn a_null_bootstrap_port_is_the_decodes_own_setting() {
    let mut p = common::sglang_pair(BIN, &[], &["--disaggregation-bootstrap-port", "{boot}"]);
    wait_healthy(&mut p.prefill, p.p_port).await;
    wait_healthy(&mut p.decode, p.d_port).await;
    let body = json!({"text": "x", "sampling_params": {"max_new_tokens": 2},
                      "bootstrap_host": "127.0.0.1", "bootstrap_port": null,
                      "bootstrap_room": 31u64});
    let ((ds, dv), (ps, _)) = tokio::join!(
        post(p.d_port, "/generate", &[], &body),
        post(p.p_port, "/generate", &[], &body)
    );
    assert_eq!((ds, ps), (200, 200), "{dv}");
    assert_eq!(dv["srt_sim"]["bootstrap"], format!("127.0.0.1:{}", p.boot));
}

/// The ports of the sim's `bound: <what> <host>:<port>, ...` log line.
fn bound_ports(stdout: &str) -> std::collections::BTreeSet<u16> {
    let line = stdout
        .lines()
        .find_map(|l| l.split_once("bound: ").map(|(_, rest)| rest))
        .unwrap_or_else(|| panic!("no `bound:` line in {stdout}"));
    line.split(", ")
        .filter_map(|part| part.rsplit_once(':')?.1.parse().ok())
        .collect()
}
