//! Zero-downtime apply, end to end with the real Routers and simulated workers: while a
//! load loop sends completions through the public URL (once one at a time, once eight
//! in flight; half of them streamed, a stream counting only when it ends with
//! `[DONE]`), `srt apply` changes one role's args, scales it up, scales it down. No
//! request may fail and the Router keeps its pid. With prefill/decode, vllm-router
//! 0.1.17 cannot add workers at run time: the test states what happens then. Under
//! faults (workers already dead, a change that fails at start or dies soon after it
//! became healthy) the roll never takes the last serving worker (issue 26).

mod e2e_support;

use e2e_support::load::{assert_no_failures, Load};
use e2e_support::{serial, Env};
use std::time::Duration;

fn recipe(workers: u32, max_model_len: u32) -> String {
    named_recipe("roll", workers, max_model_len)
}

/// The aggregated recipe under another deployment name (every test its own: the
/// process scans look for a deployment's processes machine-wide).
fn named_recipe(name: &str, workers: u32, max_model_len: u32) -> String {
    format!(
        "schema: 2
name: {name}
model:
  path: /models/tiny
  served_name: tiny
resources:
  gpus_per_node: 4
frontend:
  enable_multiple_frontends: false
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

/// Apply `text` under load (`in_flight` requests at a time); returns the apply output
/// and what the load saw.
fn apply_under_load(env: &Env, text: &str, in_flight: usize) -> (String, usize, Vec<String>) {
    let (out, ok, failed, _) = apply_under_load_timed(env, text, in_flight);
    (out, ok, failed)
}

/// [`apply_under_load`], with how long requests kept failing.
fn apply_under_load_timed(
    env: &Env,
    text: &str,
    in_flight: usize,
) -> (String, usize, Vec<String>, Duration) {
    let path = env.recipe("roll.yaml", text);
    let load = Load::start(env, "http://127.0.0.1:8000", in_flight);
    let out = env.apply(&path);
    std::thread::sleep(Duration::from_millis(300));
    let window = load.failure_window();
    let (ok, failed) = load.finish();
    (out, ok, failed, window)
}

#[test]
fn args_change_and_scaling_keep_serving_with_the_same_router() {
    let _g = serial();
    let env = Env::new();
    env.apply(&env.recipe("roll.yaml", &recipe(3, 2048)));
    let router = env.pid("roll", "router[0]");

    // (a) One role's args changed: every worker replaced, one at a time.
    for (in_flight, len) in [(1, 1024), (8, 2048)] {
        let (out, ok, failed) = apply_under_load(&env, &recipe(3, len), in_flight);
        assert!(out.contains("3 replaced"), "{out}");
        assert_no_failures(
            &format!("args change, {in_flight} in flight"),
            &out,
            ok,
            &failed,
        );
        assert_eq!(
            env.pid("roll", "router[0]"),
            router,
            "the Router restarted:\n{out}"
        );
    }
    // The plan of a scale-up shows the membership updated in place, not the Router.
    let path = env.recipe("roll.yaml", &recipe(4, 2048));
    let plan = env.ok(&["plan", "-f", &path, "--simulate"]);
    assert!(
        plan.contains("# members.router[0] will be updated in-place")
            && plan.contains("~ members.router[0] (membership)")
            && plan.contains("+ http://127.0.0.1:6196 (worker.agg[3].node[0])")
            && !plan.contains("router[0] will be replaced"),
        "{plan}"
    );
    // (b) 3 -> 4 and (c) 4 -> 2, each under both loads.
    for (in_flight, from, to) in [(1, 3, 4), (1, 4, 2), (8, 2, 4), (8, 4, 2)] {
        let what = format!("{from} -> {to} workers, {in_flight} in flight");
        let (out, ok, failed) = apply_under_load(&env, &recipe(to, 2048), in_flight);
        assert_no_failures(&what, &out, ok, &failed);
        assert_eq!(
            env.pid("roll", "router[0]"),
            router,
            "{what}: the Router restarted:\n{out}"
        );
        let listed = env.get("http://127.0.0.1:8000/workers");
        assert_eq!(
            listed["workers"].as_array().unwrap().len(),
            to as usize,
            "{what}: {listed}"
        );
    }
    env.destroy("roll");
}

fn disagg(decode_len: u32) -> String {
    format!(
        "schema: 2
name: roll-pd
model:
  path: /models/tiny
  served_name: tiny
resources:
  gpus_per_node: 4
engine:
  type: vllm
  connector: nixl
frontend:
  enable_multiple_frontends: false
roles:
  prefill:
    nodes: 1
    workers: 1
    gpus: 1
  decode:
    nodes: colocate
    workers: 2
    gpus: 1
    args:
      max-model-len: {decode_len}
health_check:
  timeout_seconds: 60
rollout:
  drain_seconds: 10
"
    )
}

/// (d) A decode role's args changed in a prefill/decode deployment. vllm-router 0.1.17
/// takes a prefill or decode worker out at run time but cannot put one in: the plan
/// says the Router must restart; each decode is taken out before it stops (the other
/// serves meanwhile) and comes back only with the Router's restart, once, at the end.
/// Requests fail from when the last decode is taken out until the restarted Router
/// serves (503 `0 decode`, then refused connections): one window, which the test
/// measures and bounds.
#[test]
fn decode_args_change_restarts_the_router_once_and_says_so() {
    let _g = serial();
    let env = Env::new();
    env.apply(&env.recipe("roll.yaml", &disagg(2048)));
    let router = env.pid("roll-pd", "router[0]");
    let decodes = [0, 1].map(|d| env.pid("roll-pd", &format!("worker.decode[{d}].node[0]")));
    let prefill = env.pid("roll-pd", "worker.prefill[0].node[0]");
    let path = env.recipe("roll.yaml", &disagg(1024));
    let plan = env.ok(&["plan", "-f", &path, "--simulate"]);
    assert!(
        plan.contains("# router[0] will be replaced")
            && plan.contains("because it must restart: vllm-router 0.1.17 cannot add prefill/decode workers at run time"),
        "{plan}"
    );
    for (in_flight, len) in [(1, 1024), (8, 2048)] {
        let (out, ok, failed, window) = apply_under_load_timed(&env, &disagg(len), in_flight);
        let total = ok + failed.len();
        eprintln!(
            "P/D decode args change, {in_flight} in flight: {} of {total} requests failed, within {:.2}s: {:?}",
            failed.len(),
            window.as_secs_f64(),
            &failed[..failed.len().min(3)]
        );
        assert!(out.contains("Apply complete"), "{out}");
        // One window: the last decode's roll and the Router's restart.
        assert!(window < Duration::from_secs(5), "{window:?}:\n{out}");
        assert!(
            failed
                .iter()
                .all(|f| f.starts_with("send:") || f.starts_with("503") || f.starts_with("500")),
            "{failed:?}"
        );
    }
    assert_ne!(
        env.pid("roll-pd", "router[0]"),
        router,
        "the Router restarts"
    );
    for (d, before) in decodes.iter().enumerate() {
        assert_ne!(
            env.pid("roll-pd", &format!("worker.decode[{d}].node[0]")),
            *before
        );
    }
    assert_eq!(env.pid("roll-pd", "worker.prefill[0].node[0]"), prefill);
    env.destroy("roll-pd");
}

fn gateways(policy: &str) -> String {
    e2e_support::example_named("local-multi-sglang.yaml", "roll-gw")
        .replace("policy: cache_aware", &format!("policy: {policy}"))
        .replace(
            "health_check:\n  timeout_seconds: 120",
            "health_check:\n  timeout_seconds: 60\nrollout:\n  drain_seconds: 10",
        )
}

/// Two sglang gateways behind nginx: a change of the gateways' own args replaces them
/// one at a time while nginx sends requests to the other, and nginx keeps its pid;
/// then a worker args change rolls the workers with both gateways kept.
#[test]
fn gateways_behind_nginx_roll_one_at_a_time_without_failures() {
    let _g = serial();
    let env = Env::new();
    env.apply(&env.recipe("roll.yaml", &gateways("cache_aware")));
    let nginx = env.pid("roll-gw", "nginx");
    let gw = [0, 1].map(|i| env.pid("roll-gw", &format!("router[{i}]")));
    for (in_flight, policy) in [(1, "round_robin"), (8, "random")] {
        let (out, ok, failed) = apply_under_load(&env, &gateways(policy), in_flight);
        assert!(out.contains("2 replaced"), "{out}");
        assert_no_failures(
            &format!("gateways replaced, {in_flight} in flight"),
            &out,
            ok,
            &failed,
        );
        assert_eq!(
            env.pid("roll-gw", "nginx"),
            nginx,
            "nginx restarted:\n{out}"
        );
    }
    let now = [0, 1].map(|i| env.pid("roll-gw", &format!("router[{i}]")));
    assert!(now[0] != gw[0] && now[1] != gw[1]);
    let text = gateways("random").replace("max-model-len: 2048", "max-model-len: 1024");
    let (out, ok, failed) = apply_under_load(&env, &text, 8);
    assert!(out.contains("3 replaced"), "{out}");
    assert_no_failures("workers rolled behind two gateways", &out, ok, &failed);
    assert_eq!(
        [0, 1].map(|i| env.pid("roll-gw", &format!("router[{i}]"))),
        now
    );
    env.destroy("roll-gw");
}

/// SIGKILL of `srt apply` in the middle of a roll: the next apply finishes it (every
/// worker on the new args, every one a member of the Router again) and the deployment
/// serves.
#[test]
fn a_roll_killed_midway_is_completed_by_the_next_apply() {
    let _g = serial();
    let env = Env::new();
    env.apply(&env.recipe("roll.yaml", &named_recipe("roll-kill", 3, 2048)));
    let router = env.pid("roll-kill", "router[0]");
    let path = env.recipe("roll.yaml", &named_recipe("roll-kill", 3, 1024));
    for after_ms in [150, 400, 700] {
        let len = if after_ms == 400 { 2048 } else { 1024 };
        let path = env.recipe("roll.yaml", &named_recipe("roll-kill", 3, len));
        let mut child = env
            .command(&["apply", "-f", &path, "--simulate", "--auto-approve"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(after_ms));
        let _ = child.kill();
        let _ = child.wait();
        let plan = env.srt(&["plan", "-f", &path, "--simulate"]);
        assert!(plan.status.success(), "{}", e2e_support::text(&plan));
        let out = env.apply(&path);
        assert!(out.contains("Apply complete"), "{out}");
        let again = env.apply(&path);
        assert!(
            again.contains("No changes."),
            "killed at {after_ms} ms:\n{again}"
        );
        let listed = env.get("http://127.0.0.1:8000/workers");
        assert_eq!(listed["workers"].as_array().unwrap().len(), 3, "{listed}");
        env.completion("http://127.0.0.1:8000");
    }
    let _ = path;
    assert_eq!(env.pid("roll-kill", "router[0]"), router);
    e2e_support::assert_all_recorded(&env, "roll-kill");
    env.destroy("roll-kill");
}

fn moriio(decode_len: u32) -> String {
    format!(
        "schema: 2
name: roll-moriio
model:
  path: /models/tiny
  served_name: tiny
resources:
  gpus_per_node: 8
engine:
  type: vllm
  connector: moriio
frontend:
  enable_multiple_frontends: false
roles:
  prefill:
    nodes: 1
    workers: 1
    gpus: 1
  decode:
    nodes: colocate
    workers: 2
    gpus: 1
    args:
      max-model-len: {decode_len}
health_check:
  timeout_seconds: 60
rollout:
  drain_seconds: 10
"
    )
}

/// Discovery (MoRI-IO): workers register themselves with the Router over ZMQ, and
/// vllm-router 0.1.17 drops a registration only when it expires (4-5 s after the last
/// one); no admin call removes it. The plan says so for every replaced decode; the
/// Router keeps its pid; requests paired with a decode while it restarts fail until its
/// replacement answers on the same port. The test measures that and bounds it.
#[test]
fn discovery_workers_roll_with_a_measured_window() {
    let _g = serial();
    let env = Env::new();
    env.apply(&env.recipe("roll.yaml", &moriio(2048)));
    let router = env.pid("roll-moriio", "router[0]");
    let path = env.recipe("roll.yaml", &moriio(1024));
    let plan = env.ok(&["plan", "-f", &path, "--simulate"]);
    assert!(
        plan.contains("# worker.decode[0].node[0] will be replaced")
            && plan.contains("#   note: it registers itself with the Router over ZMQ"),
        "{plan}"
    );
    for (in_flight, len) in [(1, 1024), (8, 2048)] {
        let (out, ok, failed, window) = apply_under_load_timed(&env, &moriio(len), in_flight);
        let total = ok + failed.len();
        eprintln!(
            "MoRI-IO decode args change, {in_flight} in flight: {} of {total} requests failed, within {:.2}s: {:?}",
            failed.len(),
            window.as_secs_f64(),
            &failed[..failed.len().min(3)]
        );
        assert!(out.contains("Apply complete"), "{out}");
        assert!(window < Duration::from_secs(6), "{window:?}:\n{out}");
    }
    assert_eq!(env.pid("roll-moriio", "router[0]"), router);
    env.destroy("roll-moriio");
}

/// [`named_recipe`] with `env` given to the role's workers (a change that replaces
/// them all).
fn recipe_with_env(name: &str, key: &str, value: &str) -> String {
    named_recipe(name, 3, 2048).replace(
        "    gpus: 1\n",
        &format!("    gpus: 1\n    env:\n      {key}: \"{value}\"\n"),
    )
}

/// Apply `path` expecting the roll to fail (exit 7); the output.
fn apply_failing(env: &Env, path: &str) -> String {
    let out = env.srt(&["apply", "-f", path, "--simulate", "--auto-approve"]);
    let shown = e2e_support::text(&out);
    assert_eq!(out.status.code(), Some(srt::exit::APPLY_FAILED), "{shown}");
    shown
}

/// Completions through the Router after a halted roll: all served.
fn assert_router_serves(env: &Env, n: usize) {
    for _ in 0..n {
        env.completion("http://127.0.0.1:8000");
    }
}

/// Issue 26, item 4: two of three workers were SIGKILLed, and the change fails at
/// start. The two dead endpoints are replaced first and fail; the live one is never
/// taken out: a load loop sent to it directly sees no failure, its pid is the same,
/// and the Router serves through it afterwards.
#[test]
fn a_failing_change_with_two_of_three_workers_dead_keeps_the_live_one() {
    let _g = serial();
    let env = Env::new();
    let name = "roll-down";
    env.apply(&env.recipe("roll.yaml", &named_recipe(name, 3, 2048)));
    let live = env.pid(name, "worker.agg[0].node[0]");
    for i in [1, 2] {
        let pid = env.pid(name, &format!("worker.agg[{i}].node[0]"));
        e2e_support::signal(pid, nix::sys::signal::Signal::SIGKILL);
        e2e_support::wait_for("the worker to die", || !e2e_support::alive(pid));
    }
    let port = env.state(name)["resources"]["worker.agg[0].node[0]"]["ports"]["http"]
        .as_u64()
        .unwrap();
    let direct = Load::start(&env, &format!("http://127.0.0.1:{port}"), 4);
    let path = env.recipe(
        "roll.yaml",
        &recipe_with_env(name, "SRT_SIM_EXIT_DURING_STARTUP", "3"),
    );
    let out = apply_failing(&env, &path);
    std::thread::sleep(Duration::from_millis(300));
    let (ok, failed) = direct.finish();
    assert_no_failures("the live worker, during a failing roll", &out, ok, &failed);
    assert!(
        out.contains("worker.agg[1].node[0]") && out.contains("worker.agg[2].node[0]"),
        "{out}"
    );
    assert!(
        out.contains("worker.agg[0].node[0]: skipped (not taken out, it keeps serving: the change failed on a down endpoint of `agg`, replaced first)"),
        "the live worker is skipped, saying why:\n{out}"
    );
    assert_eq!(env.pid(name, "worker.agg[0].node[0]"), live);
    assert!(e2e_support::alive(live));
    assert_router_serves(&env, 20);
    env.destroy(name);
}

/// Issue 26, item 5: a version that dies 300 ms after it became healthy. With the
/// default `rollout.min_ready_seconds` (1 s) the first rolled worker is held, dies
/// meanwhile, and the roll halts there: the other two keep their processes and the
/// Router serves through them. A load loop through the Router counts what failed
/// (only requests on the dying worker can).
#[test]
fn a_version_dying_after_it_became_healthy_halts_the_roll_at_its_first_worker() {
    let _g = serial();
    let env = Env::new();
    let name = "roll-die";
    env.apply(&env.recipe("roll.yaml", &named_recipe(name, 3, 2048)));
    let others = [
        env.pid(name, "worker.agg[1].node[0]"),
        env.pid(name, "worker.agg[2].node[0]"),
    ];
    let path = env.recipe(
        "roll.yaml",
        &recipe_with_env(name, "SRT_SIM_EXIT_AFTER_MS", "300"),
    );
    let load = Load::start(&env, "http://127.0.0.1:8000", 4);
    let out = apply_failing(&env, &path);
    std::thread::sleep(Duration::from_millis(300));
    let (ok, failed) = load.finish();
    eprintln!(
        "a version dying 300 ms after healthy: {ok} requests served, {} failed: {:?}",
        failed.len(),
        &failed[..failed.len().min(3)]
    );
    assert!(
        out.contains("`worker.agg[0].node[0]` rolled, then went down")
            && out.contains("min_ready_seconds")
            && out.contains(&format!("srt logs {name} worker.agg[0].node[0]"))
            && out.contains("simulated engine death"),
        "{out}"
    );
    assert_eq!(
        [
            env.pid(name, "worker.agg[1].node[0]"),
            env.pid(name, "worker.agg[2].node[0]"),
        ],
        others
    );
    let state = env.state(name);
    assert_eq!(
        state["resources"]["worker.agg[0].node[0]"]["status"], "failed",
        "{state}"
    );
    assert_router_serves(&env, 20);
    // The next plan replaces the failed worker (and the two not reached).
    let plan = env.srt(&["plan", "-f", &path, "--simulate"]);
    let shown = e2e_support::text(&plan);
    assert!(shown.contains("3 to replace"), "{shown}");
    env.destroy(name);
}
