//! SGLang's workers end to end, simulated (`srt-sglang-sim`, taking exactly the flags
//! of `python3 -m sglang.launch_server`), behind the real `sglang-router` (the pinned
//! release `scripts/install-sglang-router.sh` installs): aggregated, and in its
//! prefill/decode mode, where each request goes to a prefill and a decode at once and
//! the decode completes only with its prefill's KV (the bootstrap rendezvous). The
//! gateway starts empty and srt adds every worker through its admin API, a prefill with
//! its bootstrap port; an args change and a scale up or down under load (one request at
//! a time, then eight in flight, half of them streamed) fail no request and keep the
//! gateway's pid.

mod e2e_support;

use e2e_support::load::apply_failing_nothing;
use e2e_support::{serial, Env};

const AGG: &str = "e2e-sglang-agg";
const PD: &str = "e2e-sglang-pd";

/// `workers` SGLang workers of TP 2 with a context length of `len`, behind
/// sglang-router.
fn agg_recipe(workers: u32, len: u32) -> String {
    agg_behind("sglang-router", workers, len)
}

/// The same behind `frontend`.
fn agg_behind(frontend: &str, workers: u32, len: u32) -> String {
    format!(
        "schema: 2
name: {AGG}
model:
  path: /models/tiny
  served_name: tiny
resources:
  gpus_per_node: 6
engine: sglang
frontend:
  type: {frontend}
  enable_multiple_frontends: false
  args:
    policy: round_robin
roles:
  agg:
    nodes: 1
    workers: {workers}
    gpus: 2
    args:
      tp-size: 2
      context-length: {len}
health_check:
  timeout_seconds: 60
rollout:
  drain_seconds: 10
"
    )
}

/// `prefills` prefills (TP 2, attention DP 2) on one node and two decodes (TP 1) on
/// another, each role with its own context length, behind `frontend`.
fn pd_recipe(frontend: &str, prefills: u32, prefill_len: u32, decode_len: u32) -> String {
    format!(
        "schema: 2
name: {PD}
model:
  path: /models/tiny
  served_name: tiny
resources:
  gpus_per_node: 4
engine:
  type: sglang
  connector: nixl
frontend:
  type: {frontend}
  enable_multiple_frontends: false
  args:
    policy: round_robin
roles:
  prefill:
    nodes: 1
    workers: {prefills}
    gpus: 2
    args:
      tp-size: 2
      attn-dp-size: 2
      context-length: {prefill_len}
  decode:
    nodes: 1
    workers: 2
    gpus: 1
    args:
      context-length: {decode_len}
health_check:
  timeout_seconds: 60
rollout:
  drain_seconds: 10
"
    )
}

/// Apply `text` while `in_flight` requests at a time go through the gateway; asserts
/// none failed and the gateway of `deployment` kept `gateway`'s pid.
fn apply_under_load(
    env: &Env,
    deployment: &str,
    text: &str,
    in_flight: usize,
    what: &str,
    gateway: u32,
) -> String {
    let path = env.recipe("sglang-engine.yaml", text);
    let out = apply_failing_nothing(env, "http://127.0.0.1:8000", &path, in_flight, what);
    assert_eq!(
        env.pid(deployment, "router[0]"),
        gateway,
        "{what}: the gateway restarted:\n{out}"
    );
    out
}

/// The gateway's workers by type: (prefill, decode, regular) entries it lists, but
/// those it is draining (smg keeps a removed worker listed as `draining` for 5 s).
fn listed_by_type(env: &Env) -> (usize, usize, usize) {
    let listed = env.get("http://127.0.0.1:8000/workers");
    let of = |t: &str| {
        listed["workers"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|w| w["worker_type"] == t && w["status"] != "draining")
            .count()
    };
    (of("prefill"), of("decode"), of("regular"))
}

/// A completion through the gateway ran as prefill/decode: a decode answered it with
/// the KV of the prefill it was paired with.
fn assert_disaggregated(env: &Env, what: &str) {
    let v = env.completion("http://127.0.0.1:8000");
    let sim = &v["srt_sim"];
    assert!(
        sim["stage"] == "decode" && sim["bootstrap_room"].is_u64() && sim["kv_from"].is_string(),
        "{what}: not served as prefill/decode: {v}"
    );
}

#[test]
fn aggregated_sglang_workers_roll_and_scale_without_failures_or_a_restart() {
    let _g = serial();
    let env = Env::new();
    let path = env.recipe("sglang-engine.yaml", &agg_recipe(2, 2048));
    let out = env.apply(&path);
    assert!(
        out.contains("gate.router: passed") && out.contains("smoke: passed"),
        "{out}"
    );
    let argv = env.state(AGG)["resources"]["worker.agg[0].node[0]"]["spec"]["argv"].clone();
    assert_eq!(
        argv[0], "python3",
        "the recorded command is SGLang's: {argv}"
    );
    for _ in 0..4 {
        let v = env.completion("http://127.0.0.1:8000");
        assert!(v["choices"][0]["text"].is_string(), "{v}");
    }
    assert_eq!(listed_by_type(&env), (0, 0, 2));
    let again = env.apply(&path);
    assert!(again.contains("No changes."), "{again}");
    let gateway = env.pid(AGG, "router[0]");
    for (in_flight, len) in [(1, 1024), (8, 2048)] {
        let what = format!("args change, {in_flight} in flight");
        let out = apply_under_load(&env, AGG, &agg_recipe(2, len), in_flight, &what, gateway);
        assert!(out.contains("2 replaced"), "{what}:\n{out}");
        assert_eq!(listed_by_type(&env), (0, 0, 2), "{what}");
    }
    for (in_flight, to) in [(1, 3), (8, 2)] {
        let what = format!("scale to {to}, {in_flight} in flight");
        apply_under_load(&env, AGG, &agg_recipe(to, 2048), in_flight, &what, gateway);
        assert_eq!(listed_by_type(&env), (0, 0, to as usize), "{what}");
    }
    env.destroy(AGG);
}

#[test]
fn sglang_prefill_decode_pairs_by_bootstrap_and_changes_keep_the_gateway() {
    prefill_decode_changes_keep_the_gateway("sglang-router");
}

/// smg (sglang-router's successor) drives SGLang's rendezvous too: it detects the
/// workers' runtime (`/v1/models` `owned_by: sglang`) and pairs them `sglang/?/?`.
#[test]
fn smg_pairs_sglang_prefill_decode_by_bootstrap_and_changes_keep_the_gateway() {
    prefill_decode_changes_keep_the_gateway("smg");
}

/// Prefill/decode behind `frontend`: each worker is added in its role (a prefill with
/// its bootstrap port), every completion is the decode's with its prefill's KV, and
/// decode and prefill changes, one request at a time and eight in flight, fail no
/// request and keep the gateway.
fn prefill_decode_changes_keep_the_gateway(frontend: &str) {
    let _g = serial();
    let env = Env::new();
    let path = env.recipe("sglang-engine.yaml", &pd_recipe(frontend, 1, 2048, 2048));
    let out = env.apply(&path);
    assert!(out.contains("smoke: passed"), "{out}");
    assert_eq!(listed_by_type(&env), (1, 2, 0));
    assert_disaggregated(&env, "first apply");
    let gateway = env.pid(PD, "router[0]");
    let plan = env.ok(&["plan", "-f", &path, "--simulate"]);
    assert!(plan.contains("No changes."), "{plan}");
    // (change, prefill workers, prefill and decode context length, the summary).
    let steps = [
        ("decode args change", [1, 2048, 1024], "2 replaced"),
        ("decode args change", [1, 2048, 2048], "2 replaced"),
        ("prefill scale 1 -> 2", [2, 2048, 2048], "0 replaced"),
        ("prefill args change", [2, 1024, 2048], "2 replaced"),
        ("prefill scale 2 -> 1", [1, 1024, 2048], "0 replaced"),
    ];
    for (i, (change, [prefills, prefill_len, decode_len], summary)) in steps.into_iter().enumerate()
    {
        let in_flight = if i % 2 == 0 { 1 } else { 8 };
        let what = format!("{change}, {in_flight} in flight");
        let text = pd_recipe(frontend, prefills, prefill_len, decode_len);
        let out = apply_under_load(&env, PD, &text, in_flight, &what, gateway);
        assert!(out.contains(summary), "{what}:\n{out}");
        assert_eq!(listed_by_type(&env), (prefills as usize, 2, 0), "{what}");
        assert_disaggregated(&env, &what);
    }
    env.destroy(PD);
}

/// vLLM's Router in front of SGLang's aggregated workers: it polls only their `/health`
/// and routes OpenAI requests, so it serves them, and its admin API rolls them with no
/// failed request (its prefill/decode mode drives vLLM's hand-off, which SGLang's workers
/// do not speak: `tests/invalid/sglang-behind-vllm-router-prefill-decode.yaml`).
#[test]
fn vllm_router_serves_and_rolls_aggregated_sglang_workers() {
    let _g = serial();
    let env = Env::new();
    let path = env.recipe("sglang-engine.yaml", &agg_behind("vllm-router", 2, 2048));
    let out = env.apply(&path);
    assert!(out.contains("smoke: passed"), "{out}");
    let v = env.completion("http://127.0.0.1:8000");
    assert_eq!(v["srt_sim"]["stage"], "agg", "{v}");
    let gateway = env.pid(AGG, "router[0]");
    for (in_flight, len) in [(1, 1024), (8, 2048)] {
        let what = format!("args change behind vllm-router, {in_flight} in flight");
        let text = agg_behind("vllm-router", 2, len);
        let out = apply_under_load(&env, AGG, &text, in_flight, &what, gateway);
        assert!(out.contains("2 replaced"), "{what}:\n{out}");
    }
    env.destroy(AGG);
}
