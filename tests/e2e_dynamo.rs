//! NVIDIA Dynamo's frontend end to end, with the real programs: ai-dynamo 1.6.1's
//! frontend and its mocker as every worker (`--simulate`; scheduling as vLLM or, for
//! SGLang's workers, as SGLang), the deployment's own etcd.
//! While a load loop sends completions through the public URL, `srt apply` changes a
//! role's args and scales roles up and down: no request may fail, and the frontend
//! keeps its pid (the workers register and deregister themselves). What changes behind
//! srt's back is drift apply heals: etcd killed, a live worker the frontend no longer
//! lists. Destroy leaves no process, etcd and nats-server included.
//!
//! Needs `scripts/install-dynamo.sh` (the test command runs it).

mod e2e_support;

use e2e_support::load::apply_failing_nothing;
use e2e_support::{
    alive, at, cmdline, etcd, example_named, serial, text, tools_dir, wait_for, Env,
};

const PUBLIC: &str = "http://127.0.0.1:8000";

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
# srtctl's: nats-server takes messages of up to 8 MiB (its own default is 1).
infra:
  nats_max_payload_mb: 8
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

/// `examples/local-dynamo-sglang.yaml` as deployment `name`, its decodes running at
/// most `decode_running` requests: one SGLang prefill and two decodes, each Dynamo's
/// mocker in SGLang's mode under `--simulate`.
fn sglang_pd(name: &str, decode_running: u32) -> String {
    example_named("local-dynamo-sglang.yaml", name)
        .replace("path: .tools/models/tiny", &format!("path: {}", model()))
        .replace(
            "max-running-requests: 64",
            &format!("max-running-requests: {decode_running}"),
        )
}

/// The requests a worker's log says it received (the mocker logs each).
fn received(env: &Env, name: &str, address: &str) -> usize {
    let log = env
        .deployment_dir(name)
        .join("logs")
        .join(format!("{address}.log"));
    std::fs::read_to_string(&log)
        .unwrap_or_else(|e| panic!("{}: {e}", log.display()))
        .matches("request received")
        .count()
}

/// The `generate` instances of namespace `name` the frontend's `/health` lists.
fn generate_instances(env: &Env, name: &str) -> usize {
    let listed = env.get(&format!("{PUBLIC}/health"));
    listed["instances"]
        .as_array()
        .unwrap_or_else(|| panic!("no instances in {listed}"))
        .iter()
        .filter(|i| i["endpoint"] == "generate" && i["namespace"] == name)
        .count()
}

/// Apply `text` under `in_flight` requests at a time; fails on any failed request.
fn apply_under_load(env: &Env, what: &str, text: &str, in_flight: usize) -> String {
    let path = env.recipe("dynamo.yaml", text);
    apply_failing_nothing(env, PUBLIC, &path, in_flight, what)
}

#[test]
fn aggregate_args_change_and_scaling_serve_every_request_with_one_frontend() {
    let _serial = serial();
    let env = Env::dynamo();
    let name = "dyn-agg";
    env.apply(&env.recipe("dynamo.yaml", &agg(name, 3, 2048)));
    assert_eq!(env.completion(PUBLIC)["object"], "text_completion");
    let frontend = env.pid(name, "frontend[0]");
    let etcd = env.pid(name, "etcd");
    let out = apply_under_load(&env, "args change", &agg(name, 3, 1024), 1);
    assert!(out.contains("3 replaced"), "{out}");
    let out = apply_under_load(&env, "args change, 8 in flight", &agg(name, 3, 2048), 8);
    assert!(out.contains("3 replaced"), "{out}");
    let out = apply_under_load(&env, "args back", &agg(name, 3, 1024), 8);
    assert!(out.contains("3 replaced"), "{out}");
    apply_under_load(&env, "scale 3 -> 4", &agg(name, 4, 1024), 8);
    apply_under_load(&env, "scale 4 -> 2", &agg(name, 2, 1024), 8);
    assert_eq!(
        env.pid(name, "frontend[0]"),
        frontend,
        "the frontend restarted"
    );
    assert_eq!(env.pid(name, "etcd"), etcd, "etcd restarted");
    assert_eq!(generate_instances(&env, name), 2);
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
    let env = Env::dynamo();
    let name = "dyn-pd";
    let out = env.apply(&env.recipe("dynamo.yaml", &pd(name, 1, 2, 2048)));
    assert!(out.contains("gate.nats: passed"), "{out}");
    let monitor = env.state(name)["resources"]["nats"]["ports"]["nats_monitor"]
        .as_u64()
        .expect("nats-server's monitor port");
    let varz = env.get(&format!("http://127.0.0.1:{monitor}/varz"));
    assert_eq!(varz["max_payload"], 8 * 1024 * 1024, "{varz}");
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

/// SGLang prefill/decode behind the real Dynamo frontend: every worker is the mocker
/// scheduling as SGLang does (`--engine-type sglang`), the prefill listening on the
/// bootstrap port srt allocated it. Completions, streamed too, go through the prefill
/// and a decode; a decode args change rolls both decodes under load with no failed
/// request, the prefill and the frontend kept; destroy leaves no process.
#[test]
fn sglang_prefill_decode_serve_through_the_prefill_and_roll_a_decode_change_under_load() {
    let _serial = serial();
    let env = Env::dynamo();
    let name = "dyn-sglang";
    let out = env.apply(&env.recipe("dynamo.yaml", &sglang_pd(name, 64)));
    assert!(out.contains("gate.frontend: passed"), "{out}");
    let state = env.state(name);
    let bootstrap = state["resources"]["worker.prefill[0].node[0]"]["ports"]["sglang_bootstrap"]
        .as_u64()
        .expect("the prefill's bootstrap port");
    for address in [
        "worker.prefill[0].node[0]",
        "worker.decode[0].node[0]",
        "worker.decode[1].node[0]",
    ] {
        let words = cmdline(env.pid(name, address));
        let at = |flag: &str| at(&words, flag);
        assert_eq!(words[1..3], ["-m", "dynamo.mocker"], "{address}: {words:?}");
        assert_eq!(at("--engine-type"), Some("sglang"), "{address}: {words:?}");
        let expected = address.contains("prefill").then(|| bootstrap.to_string());
        assert_eq!(
            at("--bootstrap-ports").map(String::from),
            expected,
            "{words:?}"
        );
    }
    assert_eq!(env.completion(PUBLIC)["object"], "text_completion");
    env.streamed_completion(PUBLIC);
    assert!(
        received(&env, name, "worker.prefill[0].node[0]") >= 2,
        "the prefill took no request"
    );
    let frontend = env.pid(name, "frontend[0]");
    let prefill = env.pid(name, "worker.prefill[0].node[0]");
    let out = apply_under_load(&env, "decode args change", &sglang_pd(name, 32), 8);
    assert!(out.contains("2 replaced"), "{out}");
    assert_eq!(
        env.pid(name, "frontend[0]"),
        frontend,
        "the frontend restarted"
    );
    assert_eq!(
        env.pid(name, "worker.prefill[0].node[0]"),
        prefill,
        "the prefill was replaced"
    );
    assert_eq!(generate_instances(&env, name), 3);
    env.streamed_completion(PUBLIC);
    env.destroy(name);
    if let Some(ns) = &env.netns {
        if let Err(left) = ns.drained() {
            panic!("survivors after destroy:\n{left}");
        }
    }
    assert_eq!(env.processes(name), Vec::<u32>::new());
}

/// SIGKILL of `srt apply` while it rolls the workers, at several moments: the next
/// apply converges (every worker listed, a completion served) and destroy leaves
/// nothing running, etcd, nats-server and the frontend included.
#[test]
fn sigkill_of_apply_mid_roll_then_apply_converges_and_destroy_leaves_nothing() {
    let _serial = serial();
    for ms in [400u64, 1500, 3000] {
        let env = Env::dynamo();
        let name = format!("dyn-kill-{ms}");
        // Over NATS, so that nats-server is among what destroy must leave nothing of.
        let recipe = |len: u32| {
            agg(&name, 3, len).replace("roles:\n", "dynamo:\n  request_plane: nats\nroles:\n")
        };
        env.apply(&env.recipe("dynamo.yaml", &recipe(2048)));
        let changed = env.recipe("dynamo.yaml", &recipe(1024));
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
    killed_infrastructure_is_drift_and_apply_heals_it("dyn-etcd", "etcd");
}

/// The same for nats-server under the NATS request plane.
#[test]
fn a_killed_nats_server_is_drift_and_apply_heals_it() {
    killed_infrastructure_is_drift_and_apply_heals_it("dyn-nats", "nats");
}

fn killed_infrastructure_is_drift_and_apply_heals_it(name: &str, killed: &str) {
    let _serial = serial();
    let env = Env::dynamo();
    let text = agg(name, 2, 2048).replace("roles:\n", "dynamo:\n  request_plane: nats\nroles:\n");
    let recipe = env.recipe("dynamo.yaml", &text);
    env.apply(&recipe);
    let pid = env.pid(name, killed);
    e2e_support::sigkill(pid).unwrap();
    e2e_support::wait_for("it to exit", || {
        e2e_support::stat(pid).is_none_or(|(state, _, _)| state == 'Z')
    });
    let plan = env.ok(&["plan", "-f", &recipe, "--simulate"]);
    assert!(
        plan.contains(&format!("{killed} will be replaced")),
        "{plan}"
    );
    let out = env.apply(&recipe);
    assert!(out.contains("Apply complete"), "{out}");
    assert_ne!(env.pid(name, killed), pid);
    assert_eq!(env.completion(PUBLIC)["object"], "text_completion");
    let again = env.apply(&recipe);
    assert!(again.contains("nothing to change"), "{again}");
    env.destroy(name);
    assert_eq!(env.processes(name), Vec::<u32>::new());
}

/// A worker that is alive but that its frontend no longer lists is drift. Its instance
/// key deleted from etcd (the worker keeps running and its lease alive, and does not
/// register again: docs/dynamo-notes.md), the frontend drops it at once; `srt status`
/// shows it unhealthy, the plan replaces that worker alone and says why, and apply
/// heals it: the frontend lists two instances again, and keeps its pid.
#[test]
fn a_live_worker_its_frontend_no_longer_lists_is_drift_and_apply_heals_it() {
    unlisted_worker_is_drift_and_apply_heals_it("dyn-unlisted", false);
}

/// The same on the NATS request plane, where the worker's instance is the id its
/// metrics name (the recorded probe is `learned`).
#[test]
fn over_nats_a_live_worker_its_frontend_no_longer_lists_is_drift_and_apply_heals_it() {
    unlisted_worker_is_drift_and_apply_heals_it("dyn-unlisted-nats", true);
}

fn unlisted_worker_is_drift_and_apply_heals_it(name: &str, nats: bool) {
    let _serial = serial();
    let env = Env::dynamo();
    let mut recipe_text = agg(name, 2, 2048);
    if nats {
        recipe_text = recipe_text.replace("roles:\n", "dynamo:\n  request_plane: nats\nroles:\n");
    }
    let with_grace = recipe_text.replace(
        "  timeout_seconds: 90\n",
        "  timeout_seconds: 90\n  unhealthy_grace_seconds: 1\n",
    );
    assert!(with_grace.contains("unhealthy_grace_seconds"));
    let recipe = env.recipe("dynamo.yaml", &with_grace);
    env.apply(&recipe);
    let (gone, kept) = ("worker.agg[1].node[0]", "worker.agg[0].node[0]");
    let state = env.state(name);
    let record = &state["resources"][gone];
    let probe = if nats { "learned" } else { "json_items" };
    assert_eq!(record["health"]["type"], probe, "{record}");
    let (frontend, unlisted, other) = (
        env.pid(name, "frontend[0]"),
        env.pid(name, gone),
        env.pid(name, kept),
    );
    let client = format!(
        "http://127.0.0.1:{}",
        state["resources"]["etcd"]["ports"]["etcd_client"]
    );
    let instances = etcd::range(
        &env,
        &client,
        &format!("v1/instances/{name}/backend/generate/"),
    );
    assert_eq!(instances.len(), 2, "{instances:?}");
    let transport = if nats {
        // Its id, as its system server's metrics name it.
        let metrics = format!(
            "http://127.0.0.1:{}/metrics",
            record["ports"]["runtime_system"]
        );
        let body = env.in_netns(|| {
            e2e_support::with_client(|c| async move {
                c.get(&metrics).send().await.unwrap().text().await.unwrap()
            })
        });
        let id = body
            .split("worker_id=\"")
            .nth(1)
            .and_then(|rest| rest.split('"').next())
            .unwrap_or_else(|| panic!("no worker_id in {body}"))
            .to_string();
        format!("generate-{id}\"")
    } else {
        format!("127.0.0.1:{}/", record["ports"]["runtime_rpc"])
    };
    let (key, _) = instances
        .iter()
        .find(|(_, value)| value.contains(&transport))
        .unwrap_or_else(|| panic!("no instance at {transport}: {instances:?}"));
    assert_eq!(etcd::delete(&env, &client, key), 1);
    wait_for("the frontend to drop the instance", || {
        generate_instances(&env, name) == 1
    });
    assert!(alive(unlisted), "the unlisted worker exited by itself");

    let status: serde_json::Value =
        serde_json::from_str(&env.stdout(&["status", name, "--json"])).unwrap();
    let state_of = |address: &str| {
        status["resources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["address"] == address)
            .map(|r| r["state"].clone())
    };
    let states = [gone, kept, "frontend[0]"].map(|a| state_of(a).unwrap());
    assert_eq!(states, ["unhealthy", "healthy", "healthy"], "{status}");

    let plan = env.srt(&["plan", "-f", &recipe, "--simulate", "--detailed-exitcode"]);
    let shown = text(&plan);
    assert_eq!(plan.status.code(), Some(srt::exit::CHANGES), "{shown}");
    assert!(
        shown.contains(&format!("{gone}: not listed by the frontend for 1s: "))
            && shown.contains(&format!("0/1 `{gone}` registered"))
            && shown.contains("Plan: 0 to create, 1 to replace, 0 to destroy")
            && !shown.contains(&format!("{kept}: ")),
        "{shown}"
    );

    let out = env.apply(&recipe);
    assert!(out.contains("Apply complete"), "{out}");
    assert_eq!(generate_instances(&env, name), 2);
    assert!(!alive(unlisted), "the unlisted worker was not stopped");
    assert_ne!(env.pid(name, gone), unlisted);
    assert_eq!(env.pid(name, kept), other, "the listed worker was replaced");
    assert_eq!(
        env.pid(name, "frontend[0]"),
        frontend,
        "the frontend restarted"
    );
    assert_eq!(env.completion(PUBLIC)["object"], "text_completion");
    let again = env.apply(&recipe);
    assert!(again.contains("nothing to change"), "{again}");
    env.destroy(name);
    if let Some(ns) = &env.netns {
        if let Err(left) = ns.drained() {
            panic!("survivors after destroy:\n{left}");
        }
    }
    assert_eq!(env.processes(name), Vec::<u32>::new());
}

/// Endpoints spanning two nodes (TP4 over nodes of two GPUs): the leader registers for
/// its endpoint and the follower runs headless (under `--simulate`, srt's simulator in
/// vLLM's headless mode). An args change rolls both endpoints under load with no
/// failed request; the frontend lists one instance per endpoint.
#[test]
fn endpoints_spanning_nodes_register_once_and_roll_under_load() {
    let _serial = serial();
    let env = Env::dynamo();
    let name = "dyn-multinode";
    let recipe = |len: u32| {
        format!(
            "schema: 2
name: {name}
model:
  path: {model}
  served_name: tiny
resources:
  gpus_per_node: 2
frontend:
  type: dynamo
  enable_multiple_frontends: false
roles:
  agg:
    nodes: 4
    workers: 2
    args:
      tensor-parallel-size: 4
      max-model-len: {len}
health_check:
  timeout_seconds: 90
",
            model = model()
        )
    };
    env.apply(&env.recipe("dynamo.yaml", &recipe(2048)));
    assert_eq!(generate_instances(&env, name), 2);
    let frontend = env.pid(name, "frontend[0]");
    let out = apply_under_load(&env, "args change", &recipe(1024), 8);
    assert!(out.contains("4 replaced"), "{out}");
    assert_eq!(generate_instances(&env, name), 2);
    assert_eq!(
        env.pid(name, "frontend[0]"),
        frontend,
        "the frontend restarted"
    );
    env.destroy(name);
    assert_eq!(env.processes(name), Vec::<u32>::new());
}

/// Several frontends behind nginx (srtctl's `enable_multiple_frontends`): nginx on the
/// head node's public port, a frontend on each other node, each listing every worker.
/// An args change rolls the workers under load through nginx with no failed request,
/// and neither nginx nor any frontend restarts.
#[test]
fn several_frontends_behind_nginx_list_every_worker_and_keep_serving_a_roll() {
    let _serial = serial();
    let env = Env::dynamo();
    let name = "dyn-nginx";
    let recipe = |len: u32| {
        format!(
            "schema: 2
name: {name}
model:
  path: {model}
  served_name: tiny
resources:
  gpus_per_node: 1
frontend:
  type: dynamo
  enable_multiple_frontends: true
roles:
  agg:
    nodes: 3
    workers: 3
    args:
      max-model-len: {len}
health_check:
  timeout_seconds: 90
",
            model = model()
        )
    };
    let out = env.apply(&env.recipe("dynamo.yaml", &recipe(2048)));
    assert!(out.contains("nginx: started"), "{out}");
    let state = env.state(name);
    let frontends: Vec<String> = (0..2)
        .map(|i| {
            let r = &state["resources"][format!("frontend[{i}]")];
            format!("http://127.0.0.1:{}", r["ports"]["frontend_internal"])
        })
        .collect();
    for url in &frontends {
        let listed = env.get(&format!("{url}/health"));
        let mine = listed["instances"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|i| i["endpoint"] == "generate" && i["namespace"] == name)
            .count();
        assert_eq!(mine, 3, "{url}: {listed}");
    }
    assert_eq!(env.completion(PUBLIC)["object"], "text_completion");
    // A worker serves once every frontend lists it, not only the first.
    let probe = &state["resources"]["worker.agg[0].node[0]"]["health"];
    assert_eq!(probe["urls"].as_array().map(Vec::len), Some(2), "{probe}");
    let pids = ["nginx", "frontend[0]", "frontend[1]"].map(|a| env.pid(name, a));
    let out = apply_under_load(&env, "args change through nginx", &recipe(1024), 8);
    assert!(out.contains("3 replaced"), "{out}");
    assert_eq!(
        ["nginx", "frontend[0]", "frontend[1]"].map(|a| env.pid(name, a)),
        pids,
        "nginx or a frontend restarted"
    );
    env.destroy(name);
    assert_eq!(env.processes(name), Vec::<u32>::new());
}

/// srtctl's recipes that set `DYN_REQUEST_PLANE: nats` in a role's env on the default
/// TCP plane: srt gives those workers `--request-plane tcp` too, as srtctl does, and
/// the real runtime reads the flag over the variable. The worker keeps the variable,
/// registers on TCP and serves, with no nats-server in the deployment.
#[test]
fn a_role_env_request_plane_is_the_flags_default_and_the_worker_serves_on_tcp() {
    let _serial = serial();
    let env = Env::dynamo();
    let name = "dyn-plane-var";
    let text = agg(name, 1, 2048).replace(
        "    gpus: 1\n",
        "    gpus: 1\n    env:\n      DYN_REQUEST_PLANE: nats\n",
    );
    let out = env.apply(&env.recipe("dynamo.yaml", &text));
    let state = env.state(name);
    assert!(state["resources"].get("nats").is_none(), "{out}");
    let pid = env.pid(name, "worker.agg[0].node[0]");
    let argv = cmdline(pid);
    assert_eq!(at(&argv, "--request-plane"), Some("tcp"), "{argv:?}");
    let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap();
    assert!(
        environ
            .split(|b| *b == 0)
            .any(|v| v == b"DYN_REQUEST_PLANE=nats"),
        "the worker lost the recipe's variable"
    );
    assert_eq!(generate_instances(&env, name), 1);
    assert_eq!(env.completion(PUBLIC)["object"], "text_completion");
    env.destroy(name);
    assert_eq!(env.processes(name), Vec::<u32>::new());
}

/// srtctl's `mocker` engine: a v1 recipe whose workers are Dynamo's mocker itself
/// (`backend.type: mocker`, srtctl's simulation keys, a mode's `mocker_config`), applied
/// as it is: each worker runs `python3 -m dynamo.mocker` with srtctl's flags, the
/// role's own last (its parser takes the last of a repeated flag), registers with the
/// deployment's runtime, serves a completion through the real frontend and runs the
/// benchmark. Under `--simulate` it is its own stand-in: the command is the plan's.
#[test]
fn a_v1_mocker_recipe_serves_and_runs_its_benchmark_with_the_mocker_as_its_engine() {
    let _g = serial();
    let env = Env::dynamo();
    let text = format!(
        "name: e2e-mocker
model:
  path: {model}
resources:
  gpus_per_node: 4
  agg_nodes: 1
  agg_workers: 2
frontend:
  type: dynamo
  enable_multiple_frontends: false
dynamo:
  install: false
backend:
  type: mocker
  speedup_ratio: 100
  engine_type: vllm
  mocker_config:
    aggregated:
      max-num-seqs: 8
health_check:
  max_attempts: 90
  interval_seconds: 1
benchmark:
  type: sa-bench
  isl: 64
  osl: 8
  concurrencies: \"2\"
  num_prompts_mult: 2
  num_warmup_mult: 0
  use_chat_template: false
",
        model = model()
    );
    let recipe = env.recipe("mocker.yaml", &text);
    let out = env.apply(&recipe);
    assert!(out.contains("srt::recipe::srtctl_v1"), "{out}");
    assert!(out.contains("benchmark: passed"), "{out}");
    assert!(env.completion(PUBLIC)["choices"].is_array());
    for address in ["worker.agg[0]", "worker.agg[1]"] {
        let argv = cmdline(env.pid("e2e-mocker", address));
        assert_eq!(&argv[1..3], ["-m", "dynamo.mocker"], "{argv:?}");
        assert_eq!(at(&argv, "--speedup-ratio"), Some("100"), "{argv:?}");
        assert_eq!(at(&argv, "--engine-type"), Some("vllm"), "{argv:?}");
        let seqs: Vec<&String> = argv
            .iter()
            .zip(argv.iter().skip(1))
            .filter(|(f, _)| *f == "--max-num-seqs")
            .map(|(_, v)| v)
            .collect();
        assert_eq!(
            seqs,
            ["256", "8"],
            "srtctl's default, then the role's: {argv:?}"
        );
    }
    // The command the plan shows is the one that ran.
    let render = env.ok(&["render", "-f", &recipe]);
    assert!(render.contains("python3 -m dynamo.mocker"), "{render}");
    env.destroy("e2e-mocker");
}
