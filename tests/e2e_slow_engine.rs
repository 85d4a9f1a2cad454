//! An engine whose completions are slow (a real engine's first request on CPU took
//! over 5 s): the smoke completion waits as long as the recipe's readiness budget
//! allows, not a fixed few seconds.

mod e2e_support;

use e2e_support::{serial, text, Env};

/// Every completion takes 6 s (one token at 6 s per token): longer than the 5 s a
/// readiness request gets, well inside the recipe's 60 s budget. The smoke check passes
/// on its first request.
#[test]
fn a_slow_first_completion_passes_the_smoke_check_within_the_budget() {
    let _g = serial();
    let env = Env::new();
    let recipe = env.recipe(
        "slow.yaml",
        "name: e2e-slow
model:
  path: /models/tiny
  served_name: tiny
resources:
  gpus_per_node: 1
frontend:
  enable_multiple_frontends: false
  args:
    policy: round_robin
roles:
  agg:
    nodes: 1
    workers: 1
health_check:
  timeout_seconds: 60
  interval_seconds: 2
",
    );
    let out = env
        .command(&["apply", "-f", &recipe, "--simulate", "--auto-approve"])
        .env("SRT_SIM_TOKEN_DELAY_MS", "6000")
        .output()
        .unwrap();
    let shown = text(&out);
    assert!(out.status.success(), "{shown}");
    assert!(shown.contains("smoke: passed"), "{shown}");
    let log = std::fs::read_to_string(
        env.deployment_dir("e2e-slow")
            .join("logs")
            .join("worker.agg[0].node[0].log"),
    )
    .unwrap();
    // One 6 s request answered, not several cut short at 5 s and retried.
    let completions = log.matches("\"POST /v1/completions\" 200").count();
    assert_eq!(completions, 1, "{log}");
    env.destroy("e2e-slow");
}
