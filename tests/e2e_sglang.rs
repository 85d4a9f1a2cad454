//! The SGLang Model Gateway frontend end to end, with the real `sglang-router` (the
//! pinned release `scripts/install-sglang-router.sh` installs) in front of simulated
//! vLLM workers: one gateway on the public port, and two behind the real nginx.

mod e2e_support;

use e2e_support::{serial, Env};

/// Apply, serve, a no-op re-apply, the gateway's own view of its workers, destroy.
#[test]
fn one_gateway_serves_its_workers_and_a_second_apply_changes_nothing() {
    let _g = serial();
    let env = Env::new();
    let recipe = env.recipe(
        "sglang.yaml",
        &e2e_support::example_named("local-agg-sglang.yaml", "e2e-sglang"),
    );
    let out = env.apply(&recipe);
    assert!(
        out.contains("gate.router: passed") && out.contains("smoke: passed"),
        "{out}"
    );
    let argv = env.state("e2e-sglang")["resources"]["router[0]"]["spec"]["argv"].clone();
    assert_eq!(argv[0], "sglang-router");
    assert_eq!(argv[1], "launch");
    for _ in 0..4 {
        let v = env.completion("http://127.0.0.1:8000");
        assert!(v["choices"][0]["text"].is_string(), "{v}");
    }
    // The gateway itself counts both workers healthy.
    let readiness = env.get("http://127.0.0.1:8000/readiness");
    assert_eq!(readiness["healthy_workers"], 2, "{readiness}");
    let again = env.apply(&recipe);
    assert!(again.contains("No changes."), "{again}");
    env.destroy("e2e-sglang");
}

/// nginx on the head in front of two gateways, each listing every worker.
#[test]
fn two_gateways_behind_nginx_serve_through_the_public_port() {
    let _g = serial();
    let env = Env::new();
    let recipe = env.recipe(
        "multi.yaml",
        &e2e_support::example_named("local-multi-sglang.yaml", "e2e-sglang-multi"),
    );
    let out = env.apply(&recipe);
    assert!(
        out.contains("nginx: started")
            && out.contains("router[1]: started")
            && out.contains("smoke: passed"),
        "{out}"
    );
    for _ in 0..6 {
        env.completion("http://127.0.0.1:8000");
    }
    // Each gateway serves on its own internal port too.
    let state = env.state("e2e-sglang-multi");
    for r in ["router[0]", "router[1]"] {
        let port = state["resources"][r]["ports"]["frontend_internal"]
            .as_u64()
            .unwrap();
        env.completion(&format!("http://127.0.0.1:{port}"));
    }
    env.destroy("e2e-sglang-multi");
}
