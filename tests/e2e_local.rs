//! End to end on the local executor with the real `vllm-router` (installed by
//! `scripts/install-router.sh` into `.tools/`) and the vLLM simulator as workers.
//!
//! Scenarios use the fixed ports (the Router's public 8000, worker HTTP 6100...), each in
//! its own network namespace (see `e2e_support`).

mod e2e_support;

use e2e_support::{repo, serial, sigkill, Env};
use std::time::Duration;

fn example(name: &str) -> String {
    std::fs::read_to_string(repo().join("examples").join(name)).unwrap()
}

fn metrics(url: &str) -> String {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        reqwest::get(format!("{url}/metrics"))
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    })
}

fn counter(metrics: &str, line_prefix: &str) -> u64 {
    metrics
        .lines()
        .find(|l| l.starts_with(line_prefix))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse::<f64>().ok())
        .unwrap_or(0.0) as u64
}

/// `srt plan --detailed-exitcode` of `recipe` (simulated) with `extra` flags: its exit
/// code and its output.
fn plan(env: &Env, recipe: &str, extra: &[&str]) -> (Option<i32>, String) {
    let mut args = vec!["plan", "-f", recipe, "--simulate", "--detailed-exitcode"];
    args.extend(extra);
    let out = env.srt(&args);
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
    )
}

/// Apply, serve, re-apply as a no-op, destroy with nothing left behind.
fn lifecycle(env: &Env, recipe: &str, deployment: &str) {
    let out = env.ok(&["apply", "-f", recipe, "--simulate", "--auto-approve"]);
    assert!(out.contains("Apply complete"), "{out}");
    assert!(
        out.contains("gate.router: passed")
            && out.contains("gate.workers: passed")
            && out.contains("smoke: passed"),
        "{out}"
    );
    let v = env.completion("http://127.0.0.1:8000");
    assert!(v["choices"][0]["text"].is_string(), "{v}");
    let before = env.state(deployment);
    let again = env.ok(&["apply", "-f", recipe, "--simulate", "--auto-approve"]);
    assert!(
        again.contains("No changes.") && again.contains("nothing to change"),
        "{again}"
    );
    let after = env.state(deployment);
    assert_eq!(
        before["serial"], after["serial"],
        "a no-op apply must not change state"
    );
    assert_eq!(before["resources"], after["resources"]);
}

fn destroy(env: &Env, deployment: &str) {
    let out = env.ok(&["destroy", deployment, "--auto-approve"]);
    assert!(out.contains("Destroy complete"), "{out}");
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(
        env.processes(deployment),
        Vec::<u32>::new(),
        "processes of {deployment} left behind"
    );
    assert_eq!(env.state(deployment)["resources"], serde_json::json!({}));
}

#[test]
fn aggregate_two_workers_with_drift_heal() {
    let _g = serial();
    let env = Env::new();
    let recipe = env.recipe("agg.yaml", &example("local-agg.yaml"));
    lifecycle(&env, &recipe, "local-agg");
    // Kill one worker: plan shows drift, apply heals only it.
    let victim = env.pid("local-agg", "worker.agg[1].node[0]");
    let other = env.pid("local-agg", "worker.agg[0].node[0]");
    let router = env.pid("local-agg", "router[0]");
    sigkill(victim).unwrap();
    std::thread::sleep(Duration::from_millis(300));
    // Against the records alone, the dead worker does not show, and the plan says why.
    let (code, text) = plan(&env, &recipe, &["--refresh=false"]);
    assert_eq!(code, Some(0), "{text}");
    assert!(
        text.starts_with("Note: the live deployment was not refreshed")
            && text.contains("No changes."),
        "{text}"
    );
    let (code, text) = plan(&env, &recipe, &[]);
    assert_eq!(code, Some(2), "{text}");
    assert!(
        text.contains("because drift: process")
            && text.contains("Plan: 0 to create, 1 to replace, 0 to destroy"),
        "{text}"
    );
    env.ok(&["apply", "-f", &recipe, "--simulate", "--auto-approve"]);
    assert_ne!(env.pid("local-agg", "worker.agg[1].node[0]"), victim);
    assert_eq!(env.pid("local-agg", "worker.agg[0].node[0]"), other);
    assert_eq!(env.pid("local-agg", "router[0]"), router);
    env.completion("http://127.0.0.1:8000");
    destroy(&env, "local-agg");
}

/// A plan against the records alone does not see a worker that died, and the apply that
/// rolls its role anyway (the args changed) copes with finding it gone: it is replaced
/// like the others, and the deployment ends healthy and serving.
#[test]
fn a_rolling_apply_without_refresh_copes_with_a_worker_that_died_unseen() {
    let _g = serial();
    let env = Env::new();
    let recipe = env.recipe("agg.yaml", &example("local-agg.yaml"));
    env.ok(&["apply", "-f", &recipe, "--simulate", "--auto-approve"]);
    let victim = env.pid("local-agg", "worker.agg[1].node[0]");
    let router = env.pid("local-agg", "router[0]");
    sigkill(victim).unwrap();
    let changed = env.recipe(
        "agg.yaml",
        &example("local-agg.yaml").replace("max-model-len: 2048", "max-model-len: 1024"),
    );
    let out = env.ok(&[
        "apply",
        "-f",
        &changed,
        "--simulate",
        "--auto-approve",
        "--refresh=false",
    ]);
    assert!(
        out.starts_with("Note: the live deployment was not refreshed")
            && out.contains("Plan: 0 to create, 2 to replace, 0 to destroy")
            && !out.contains("drift"),
        "{out}"
    );
    assert!(out.contains("Apply complete"), "{out}");
    assert_ne!(env.pid("local-agg", "worker.agg[1].node[0]"), victim);
    assert_eq!(env.pid("local-agg", "router[0]"), router);
    env.completion("http://127.0.0.1:8000");
    // Nothing is left to heal: a refreshed plan finds the deployment as recorded.
    let (code, text) = plan(&env, &changed, &[]);
    assert_eq!(code, Some(0), "{text}");
    destroy(&env, "local-agg");
}

#[test]
fn disaggregated_nixl_goes_through_prefill_and_decode_and_args_change_replaces_one_role() {
    let _g = serial();
    let env = Env::new();
    let recipe = env.recipe("pd.yaml", &example("local-disagg.yaml"));
    lifecycle(&env, &recipe, "local-disagg");
    // The completion went through one prefill and one decode that consumed its KV.
    let state = env.state("local-disagg");
    let port = |a: &str| state["resources"][a]["ports"]["http"].as_u64().unwrap();
    let prefill_url = format!("http://127.0.0.1:{}", port("worker.prefill[0].node[0]"));
    let decode_url = format!("http://127.0.0.1:{}", port("worker.decode[0].node[0]"));
    let prefill = env.in_netns(|| metrics(&prefill_url));
    let decode = env.in_netns(|| metrics(&decode_url));
    assert!(
        counter(&prefill, "srt_sim_requests_total{stage=\"prefill\"}") >= 1,
        "{prefill}"
    );
    assert!(
        counter(&decode, "srt_sim_requests_total{stage=\"decode\"}") >= 1,
        "{decode}"
    );
    assert!(
        counter(&decode, "srt_sim_kv_transfers_consumed_total") >= 1,
        "{decode}"
    );
    // Change decode args: only decode (and the Router routing to it) are replaced.
    let prefill_pid = env.pid("local-disagg", "worker.prefill[0].node[0]");
    let decode_pid = env.pid("local-disagg", "worker.decode[0].node[0]");
    let changed = example("local-disagg.yaml").replace(
        "    args:\n      data-parallel-size: 2\nhealth_check",
        "    args:\n      data-parallel-size: 2\n      max-model-len: 1024\nhealth_check",
    );
    assert_ne!(
        changed,
        example("local-disagg.yaml"),
        "the edit must apply to the decode role"
    );
    std::fs::write(&recipe, changed).unwrap();
    let plan = env.ok(&["plan", "-f", &recipe, "--simulate"]);
    assert!(
        plan.contains("# worker.decode[0].node[0] will be replaced")
            && plan.contains("its spec changed: argv"),
        "{plan}"
    );
    assert!(
        plan.contains("{+--max-model-len 1024+}"),
        "word diff expected:\n{plan}"
    );
    assert!(
        !plan.contains("# worker.prefill[0].node[0] will be replaced"),
        "{plan}"
    );
    env.ok(&["apply", "-f", &recipe, "--simulate", "--auto-approve"]);
    assert_eq!(
        env.pid("local-disagg", "worker.prefill[0].node[0]"),
        prefill_pid
    );
    assert_ne!(
        env.pid("local-disagg", "worker.decode[0].node[0]"),
        decode_pid
    );
    env.completion("http://127.0.0.1:8000");
    destroy(&env, "local-disagg");
}

#[test]
fn data_parallel_hybrid_lb_pools() {
    let _g = serial();
    let env = Env::new();
    let recipe = env.recipe("dp.yaml", &example("local-dp.yaml"));
    lifecycle(&env, &recipe, "local-dp");
    let state = env.state("local-dp");
    for a in ["worker.agg[0].node[0]", "worker.agg[0].node[1]"] {
        let port = state["resources"][a]["ports"]["http"].as_u64().unwrap();
        let m = env.in_netns(|| metrics(&format!("http://127.0.0.1:{port}")));
        assert_eq!(
            m.lines()
                .filter(|l| l.starts_with("vllm:num_requests_running"))
                .count(),
            2,
            "{m}"
        );
    }
    destroy(&env, "local-dp");
}

#[test]
fn moriio_discovery_with_colocated_prefill_decode() {
    let _g = serial();
    let env = Env::new();
    let text = example("seed/moriio-colocated.yaml") + "model:\n  path: /models/tiny\n  served_name: tiny\nhealth_check:\n  timeout_seconds: 120\n";
    let recipe = env.recipe("moriio-colocated.yaml", &text);
    lifecycle(&env, &recipe, "moriio-colocated");
    destroy(&env, "moriio-colocated");
}

#[test]
fn saved_plan_is_refused_once_stale() {
    let _g = serial();
    let env = Env::new();
    let recipe = env.recipe("agg.yaml", &example("local-agg.yaml"));
    env.ok(&["plan", "-f", &recipe, "--simulate", "-o", "first.plan"]);
    env.ok(&["plan", "-f", &recipe, "--simulate", "-o", "second.plan"]);
    // A saved plan fixes what is replaced and whether the deployment was refreshed: the
    // flags that would change either are refused with it, not ignored.
    for flag in [&["--replace", "router[0]"][..], &["--refresh=false"]] {
        let args: Vec<&str> = ["apply", "first.plan"]
            .iter()
            .chain(flag)
            .copied()
            .collect();
        let refused = env.srt(&args);
        let stderr = String::from_utf8_lossy(&refused.stderr);
        assert_eq!(refused.status.code(), Some(srt::exit::USAGE), "{stderr}");
        assert!(stderr.contains("cannot be used with"), "{stderr}");
    }
    env.ok(&["apply", "first.plan"]);
    let stale = env.srt(&["apply", "second.plan"]);
    assert_eq!(
        stale.status.code(),
        Some(6),
        "{}",
        String::from_utf8_lossy(&stale.stderr)
    );
    assert!(String::from_utf8_lossy(&stale.stderr).contains("stale plan"));
    let no_tty = env.srt(&["destroy", "local-agg"]);
    assert_eq!(
        no_tty.status.code(),
        Some(8),
        "destroy without a terminal or --auto-approve must refuse"
    );
    destroy(&env, "local-agg");
}
