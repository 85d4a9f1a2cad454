//! NVIDIA Dynamo's frontend end to end, with the real programs: ai-dynamo 1.6.1's
//! frontend and its mocker as every worker (`--simulate`), the deployment's own etcd.
//! While a load loop sends completions through the public URL, `srt apply` changes a
//! role's args and scales roles up and down: no request may fail, and the frontend
//! keeps its pid (the workers register and deregister themselves). Destroy leaves no
//! process, etcd and nats-server included.
//!
//! Needs `scripts/install-dynamo.sh` (the test command runs it).

mod e2e_support;

use e2e_support::load::Load;
use e2e_support::{serial, tools_dir, Env};

const PUBLIC: &str = "http://127.0.0.1:8000";

fn env() -> Option<Env> {
    let env = Env::dynamo();
    assert!(
        env.is_some(),
        "ai-dynamo is not installed in {}: run scripts/install-dynamo.sh (the test command does)",
        tools_dir().display()
    );
    env
}

fn model() -> String {
    tools_dir().join("models/tiny").display().to_string()
}

fn agg(name: &str, workers: u32, max_model_len: u32) -> String {
    format!(
        "schema: 2
name: {name}
model:
  path: {model}
  served_name: tiny
resources:
  gpus_per_node: 4
frontend:
  type: dynamo
  enable_multiple_frontends: false
roles:
  agg:
    nodes: 1
    workers: {workers}
    gpus: 1
    args:
      max-model-len: {max_model_len}
health_check:
  timeout_seconds: 90
",
        model = model()
    )
}

/// `prefill` prefill and `decode` decode workers on a node each (one host here, as the
/// local executor puts every node on it), requests over NATS (`dynamo.request_plane`, as
/// most of srtctl's Dynamo recipes).
fn pd(name: &str, prefill: u32, decode: u32, decode_len: u32) -> String {
    format!(
        "schema: 2
name: {name}
model:
  path: {model}
  served_name: tiny
resources:
  gpus_per_node: 6
frontend:
  type: dynamo
  enable_multiple_frontends: false
dynamo:
  request_plane: nats
roles:
  prefill:
    nodes: 1
    workers: {prefill}
    gpus: 1
  decode:
    nodes: 1
    workers: {decode}
    gpus: 1
    args:
      max-model-len: {decode_len}
health_check:
  timeout_seconds: 90
",
        model = model()
    )
}

/// Apply `text` under `in_flight` requests at a time; fails on any failed request.
fn apply_under_load(env: &Env, what: &str, text: &str, in_flight: usize) -> String {
    let path = env.recipe("dynamo.yaml", text);
    let load = Load::start(env, PUBLIC, in_flight);
    let out = env.apply(&path);
    std::thread::sleep(std::time::Duration::from_millis(300));
    let (ok, failed) = load.finish();
    assert!(
        failed.is_empty(),
        "{what}: {} of {} requests failed: {:?}\n{out}",
        failed.len(),
        ok + failed.len(),
        &failed[..failed.len().min(5)]
    );
    eprintln!("{what}: {ok} ok, 0 failed");
    out
}

#[test]
fn aggregate_args_change_and_scaling_serve_every_request_with_one_frontend() {
    let _serial = serial();
    let Some(env) = env() else { return };
    let name = "dyn-agg";
    env.apply(&env.recipe("dynamo.yaml", &agg(name, 3, 2048)));
    assert_eq!(env.completion(PUBLIC)["object"], "text_completion");
    let frontend = env.pid(name, "frontend[0]");
    let etcd = env.pid(name, "etcd");
    let out = apply_under_load(&env, "args change", &agg(name, 3, 1024), 1);
    assert!(out.contains("3 replaced"), "{out}");
    apply_under_load(&env, "scale 3 -> 4", &agg(name, 4, 1024), 8);
    apply_under_load(&env, "scale 4 -> 2", &agg(name, 2, 1024), 8);
    assert_eq!(
        env.pid(name, "frontend[0]"),
        frontend,
        "the frontend restarted"
    );
    assert_eq!(env.pid(name, "etcd"), etcd, "etcd restarted");
    let listed = env.get(&format!("{PUBLIC}/health"));
    let generate = listed["instances"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["endpoint"] == "generate" && i["namespace"] == name)
        .count();
    assert_eq!(generate, 2, "{listed}");
    // Unchanged: nothing to do.
    let again = env.apply(&env.recipe("dynamo.yaml", &agg(name, 2, 1024)));
    assert!(again.contains("nothing to change"), "{again}");
    env.destroy(name);
    assert_eq!(
        env.processes(name),
        Vec::<u32>::new(),
        "processes left after destroy"
    );
}

#[test]
fn disaggregated_over_nats_decode_change_and_scale_ups_keep_serving() {
    let _serial = serial();
    let Some(env) = env() else { return };
    let name = "dyn-pd";
    let out = env.apply(&env.recipe("dynamo.yaml", &pd(name, 1, 2, 2048)));
    assert!(out.contains("gate.nats: passed"), "{out}");
    let frontend = env.pid(name, "frontend[0]");
    let nats = env.pid(name, "nats");
    let out = apply_under_load(&env, "decode args change", &pd(name, 1, 2, 1024), 1);
    assert!(out.contains("2 replaced"), "{out}");
    // The roles share this host: decode counts its ports apart, so a growing prefill
    // role moves none of them and no decode worker is replaced (on its own node, it
    // keeps its GPUs too).
    let out = apply_under_load(&env, "prefill 1 -> 2", &pd(name, 2, 2, 1024), 8);
    assert!(out.contains("2 created, 0 replaced"), "{out}");
    let out = apply_under_load(&env, "decode 2 -> 3", &pd(name, 2, 3, 1024), 8);
    assert!(out.contains("0 replaced"), "{out}");
    assert_eq!(
        env.pid(name, "frontend[0]"),
        frontend,
        "the frontend restarted"
    );
    assert_eq!(env.pid(name, "nats"), nats, "nats-server restarted");
    let listed = env.get(&format!("{PUBLIC}/health"));
    let over_nats = listed["instances"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|i| i["endpoint"] == "generate" && i["namespace"] == name)
        .filter(|i| i["transport"]["nats_tcp"].is_string())
        .count();
    assert_eq!(over_nats, 5, "{listed}");
    env.destroy(name);
    assert_eq!(
        env.processes(name),
        Vec::<u32>::new(),
        "processes left after destroy"
    );
}

/// SIGKILL of `srt apply` while it rolls the workers, at several moments: the next
/// apply converges (every worker listed, a completion served) and destroy leaves
/// nothing running, etcd and the frontend included.
#[test]
fn sigkill_of_apply_mid_roll_then_apply_converges_and_destroy_leaves_nothing() {
    let _serial = serial();
    for ms in [400u64, 1500, 3000] {
        let Some(env) = env() else { return };
        let name = format!("dyn-kill-{ms}");
        env.apply(&env.recipe("dynamo.yaml", &agg(&name, 3, 2048)));
        let changed = env.recipe("dynamo.yaml", &agg(&name, 3, 1024));
        let mut child = env.spawn(&["apply", "-f", &changed, "--simulate", "--auto-approve"]);
        std::thread::sleep(std::time::Duration::from_millis(ms));
        let _ = child.kill();
        let _ = child.wait();
        let out = env.apply(&changed);
        assert!(out.contains("Apply complete"), "killed at {ms} ms:\n{out}");
        let again = env.apply(&changed);
        assert!(
            again.contains("nothing to change"),
            "killed at {ms} ms:\n{again}"
        );
        assert_eq!(env.completion(PUBLIC)["object"], "text_completion");
        env.destroy(&name);
        if let Some(ns) = &env.netns {
            if let Err(left) = ns.drained() {
                panic!("killed at {ms} ms: survivors after destroy:\n{left}");
            }
        }
        assert_eq!(env.processes(&name), Vec::<u32>::new());
    }
}

/// etcd killed under a running deployment: refresh sees it gone, the plan replaces
/// it (and what registered in it), apply heals it and the deployment serves again.
#[test]
fn a_killed_etcd_is_drift_and_apply_heals_it() {
    let _serial = serial();
    let Some(env) = env() else { return };
    let name = "dyn-etcd";
    let recipe = env.recipe("dynamo.yaml", &agg(name, 2, 2048));
    env.apply(&recipe);
    let etcd = env.pid(name, "etcd");
    e2e_support::sigkill(etcd).unwrap();
    e2e_support::wait_for("etcd to exit", || {
        e2e_support::stat(etcd).is_none_or(|(state, _, _)| state == 'Z')
    });
    let plan = env.ok(&["plan", "-f", &recipe, "--simulate"]);
    assert!(plan.contains("etcd will be replaced"), "{plan}");
    let out = env.apply(&recipe);
    assert!(out.contains("Apply complete"), "{out}");
    assert_ne!(env.pid(name, "etcd"), etcd);
    assert_eq!(env.completion(PUBLIC)["object"], "text_completion");
    let again = env.apply(&recipe);
    assert!(again.contains("nothing to change"), "{again}");
    env.destroy(name);
    assert_eq!(env.processes(name), Vec::<u32>::new());
}
