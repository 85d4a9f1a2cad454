//! The Shepherd Model Gateway frontend end to end, with the real `smg` (the pinned
//! release `scripts/install-smg.sh` installs) in front of simulated vLLM workers: the
//! gateway starts empty and srt adds every worker through its admin API (a prefill or
//! decode one in its role), so an args change and a scale up or down under load (one
//! request at a time, then eight in flight, half of them streamed) fail no request and
//! keep the gateway's pid, aggregated or prefill/decode. The control, the same decode
//! change behind vllm-router (which restarts), is `e2e_rollout.rs`.

mod e2e_support;

use e2e_support::load::apply_failing_nothing;
use e2e_support::{serial, Env};
use std::time::{Duration, Instant};

const NAME: &str = "e2e-smg";

fn recipe(workers: u32, max_model_len: u32) -> String {
    format!(
        "schema: 2
name: {NAME}
model:
  path: /models/tiny
  served_name: tiny
resources:
  gpus_per_node: 4
frontend:
  type: smg
  enable_multiple_frontends: false
  args:
    policy: round_robin
roles:
  agg:
    nodes: 1
    workers: {workers}
    gpus: 1
    args:
      max-model-len: {max_model_len}
health_check:
  timeout_seconds: 60
rollout:
  drain_seconds: 10
"
    )
}

/// The URLs the gateway routes to now (`ready` entries of `GET /workers`).
fn ready_workers(env: &Env) -> Vec<String> {
    let listed = env.get("http://127.0.0.1:8000/workers");
    let mut urls: Vec<String> = listed["workers"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|w| w["status"] == "ready")
        .map(|w| w["url"].as_str().unwrap().to_string())
        .collect();
    urls.sort();
    urls
}

/// Apply `text` while `in_flight` requests at a time go through the gateway; asserts
/// none failed and the gateway kept `gateway`'s pid. Returns the apply's output.
fn apply_under_load(env: &Env, text: &str, in_flight: usize, what: &str, gateway: u32) -> String {
    let deployment = if text.contains("name: e2e-smg-pd") {
        PD
    } else {
        NAME
    };
    let path = env.recipe("smg.yaml", text);
    let out = apply_failing_nothing(env, "http://127.0.0.1:8000", &path, in_flight, what);
    assert_eq!(
        env.pid(deployment, "router[0]"),
        gateway,
        "{what}: the gateway restarted:\n{out}"
    );
    out
}

const PD: &str = "e2e-smg-pd";

/// Prefill/decode over NIXL behind smg: `prefills` prefill workers and two decodes,
/// each role with its own `max-model-len`.
fn pd_recipe(prefills: u32, prefill_len: u32, decode_len: u32) -> String {
    let text = e2e_support::example_named("local-disagg-smg.yaml", PD);
    let out = text
        .replace(
            "  prefill:\n    nodes: 1\n    workers: 1\n    gpus: 1\n",
            &format!(
                "  prefill:\n    nodes: 1\n    workers: {prefills}\n    gpus: 1\n    args:\n      max-model-len: {prefill_len}\n"
            ),
        )
        .replace(
            "max-model-len: 2048\nhealth_check:\n  timeout_seconds: 120",
            &format!("max-model-len: {decode_len}\nhealth_check:\n  timeout_seconds: 60"),
        );
    assert_eq!(out.matches("max-model-len").count(), 2, "{out}");
    out
}

/// The gateway's entries by role: (prefill, decode) URLs that are `ready`.
fn ready_by_role(env: &Env) -> (usize, usize) {
    let listed = env.get("http://127.0.0.1:8000/workers");
    let ready = |role: &str| {
        listed["workers"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|w| w["status"] == "ready" && w["worker_type"] == role)
            .count()
    };
    (ready("prefill"), ready("decode"))
}

/// A completion through the gateway ran as prefill/decode: the decode served it with
/// the KV cache of a prefill.
fn assert_disaggregated(env: &Env, what: &str) {
    let v = env.completion("http://127.0.0.1:8000");
    let sim = &v["srt_sim"];
    assert!(
        sim["stage"] == "decode" && sim["kv_from"].is_string(),
        "{what}: not served as prefill/decode: {v}"
    );
}

/// Prefill/decode behind smg: each worker is added in its role, and a decode args
/// change, a prefill scale 1 -> 2, a prefill args change and a scale back to 1, each
/// under both loads, fail no request and keep the gateway.
#[test]
fn prefill_decode_changes_keep_the_gateway_and_fail_no_request() {
    let _g = serial();
    let env = Env::new();
    let path = env.recipe("smg.yaml", &pd_recipe(1, 2048, 2048));
    let out = env.apply(&path);
    assert!(out.contains("smoke: passed"), "{out}");
    let argv = env.state(PD)["resources"]["router[0]"]["spec"]["argv"].clone();
    assert!(
        argv.as_array()
            .unwrap()
            .iter()
            .any(|a| a == "--pd-disaggregation"),
        "{argv}"
    );
    assert_eq!(ready_by_role(&env), (1, 2));
    assert_disaggregated(&env, "first apply");
    let gateway = env.pid(PD, "router[0]");
    let plan = env.ok(&["plan", "-f", &path, "--simulate"]);
    assert!(plan.contains("No changes."), "{plan}");

    // (change, prefill workers, prefill and decode max-model-len, ready (prefill,
    // decode) entries after it, the apply's summary); odd steps run 8 in flight.
    let steps = [
        ("decode args change", [1, 2048, 1024], (1, 2), "2 replaced"),
        ("decode args change", [1, 2048, 2048], (1, 2), "2 replaced"),
        ("prefill scale 1 -> 2", [2, 2048, 2048], (2, 2), "2 created"),
        (
            "prefill scale 2 -> 1",
            [1, 2048, 2048],
            (1, 2),
            "2 destroyed",
        ),
        ("prefill scale 1 -> 2", [2, 2048, 2048], (2, 2), "2 created"),
        ("prefill args change", [2, 1024, 2048], (2, 2), "2 replaced"),
        ("prefill args change", [2, 2048, 2048], (2, 2), "2 replaced"),
        (
            "prefill scale 2 -> 1",
            [1, 2048, 2048],
            (1, 2),
            "2 destroyed",
        ),
    ];
    for (i, (change, [prefills, prefill_len, decode_len], by_role, summary)) in
        steps.into_iter().enumerate()
    {
        let in_flight = if i % 2 == 0 { 1 } else { 8 };
        let what = format!("{change}, {in_flight} in flight");
        let text = pd_recipe(prefills, prefill_len, decode_len);
        let out = apply_under_load(&env, &text, in_flight, &what, gateway);
        assert!(out.contains(summary), "{what}:\n{out}");
        assert_eq!(ready_by_role(&env), by_role, "{what}");
        assert_disaggregated(&env, &what);
    }
    env.destroy(PD);
}

/// Apply, serve, a no-op re-apply; then one role's args changed and the role scaled
/// 2 -> 3 -> 2, each under both loads, with the same gateway throughout.
#[test]
fn the_gateway_serves_rolls_and_scales_without_failures_or_a_restart() {
    let _g = serial();
    let env = Env::new();
    let path = env.recipe("smg.yaml", &recipe(2, 2048));
    let out = env.apply(&path);
    assert!(
        out.contains("gate.router: passed") && out.contains("smoke: passed"),
        "{out}"
    );
    let argv = env.state(NAME)["resources"]["router[0]"]["spec"]["argv"].clone();
    assert_eq!(
        (argv[0].as_str(), argv[1].as_str()),
        (Some("smg"), Some("launch"))
    );
    for _ in 0..4 {
        let v = env.completion("http://127.0.0.1:8000");
        assert!(v["choices"][0]["text"].is_string(), "{v}");
    }
    assert_eq!(ready_workers(&env).len(), 2);
    let readiness = env.get("http://127.0.0.1:8000/readiness");
    assert_eq!(readiness["healthy_workers"], 2, "{readiness}");
    let again = env.apply(&path);
    assert!(again.contains("No changes."), "{again}");
    let gateway = env.pid(NAME, "router[0]");

    for (in_flight, len) in [(1, 1024), (8, 2048)] {
        let what = format!("args change, {in_flight} in flight");
        let out = apply_under_load(&env, &recipe(2, len), in_flight, &what, gateway);
        assert!(out.contains("2 replaced"), "{what}:\n{out}");
        assert_eq!(ready_workers(&env).len(), 2, "{what}");
    }
    for (in_flight, to) in [(1, 3), (1, 2), (8, 3), (8, 2)] {
        let what = format!("scale to {to}, {in_flight} in flight");
        let out = apply_under_load(&env, &recipe(to, 2048), in_flight, &what, gateway);
        assert!(!out.contains("router[0]: started"), "{what}:\n{out}");
        assert_eq!(ready_workers(&env).len(), to as usize, "{what}");
    }
    env.destroy(NAME);
}

/// A worker the gateway no longer lists is membership drift: the next apply adds it
/// back, without restarting anything.
#[test]
fn a_worker_missing_from_the_gateway_is_drift_and_healed() {
    let _g = serial();
    let env = Env::new();
    let path = env.recipe("smg.yaml", &recipe(2, 2048));
    env.apply(&path);
    let gateway = env.pid(NAME, "router[0]");
    let listed = env.get("http://127.0.0.1:8000/workers");
    let id = listed["workers"][0]["id"].as_str().unwrap().to_string();
    let url = format!("http://127.0.0.1:8000/workers/{id}");
    let status = env.in_netns(|| {
        e2e_support::with_client(|c| async move {
            c.delete(url).send().await.unwrap().status().as_u16()
        })
    });
    assert_eq!(status, 202);
    // The gateway keeps a removed worker draining for 5 s.
    let deadline = Instant::now() + Duration::from_secs(20);
    while env.get("http://127.0.0.1:8000/workers")["total"] != 1 {
        assert!(Instant::now() < deadline, "never removed");
        std::thread::sleep(Duration::from_millis(200));
    }
    let out = env.apply(&path);
    assert!(
        out.contains("members.router[0]") && !out.contains("No changes."),
        "{out}"
    );
    assert_eq!(ready_workers(&env).len(), 2, "{out}");
    assert_eq!(env.pid(NAME, "router[0]"), gateway);
    env.destroy(NAME);
}
