//! Faults on the local executor: a concurrent apply is refused naming the lock holder;
//! an interrupted apply saves state, releases the lock, and the next apply converges.

mod e2e_support;
use e2e_support::{serial, Env};

use std::path::PathBuf;
use std::time::{Duration, Instant};

fn recipe(dir: &std::path::Path) -> String {
    let text = std::fs::read_to_string(
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("examples/local-agg.yaml"),
    )
    .unwrap();
    let p = dir.join("agg.yaml");
    std::fs::write(&p, text).unwrap();
    p.display().to_string()
}

#[test]
fn concurrent_apply_is_refused_with_the_holder() {
    let _g = serial();
    let env = Env::new();
    let r = recipe(env.dir.path());
    let store = srt::state::StateStore::new(env.dir.path().join(".srt/local-agg"));
    let held = store.lock("apply", None).unwrap();
    let out = env.srt(&["apply", "-f", &r, "--simulate", "--auto-approve"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(5), "{err}");
    assert!(
        err.contains(&format!("pid {}", std::process::id())) && err.contains("apply"),
        "{err}"
    );
    drop(held);
}

/// `srt plan` reads the state while it builds the graph: the lock is still checked
/// (with the recipe's warnings shown), and a recipe the graph refuses is still the
/// error (not the lock), located.
#[test]
fn a_plan_under_a_held_lock_names_the_holder_unless_the_recipe_is_refused() {
    let _g = serial();
    let env = Env::new();
    let r = recipe(env.dir.path());
    let store = srt::state::StateStore::new(env.dir.path().join(".srt/local-agg"));
    let held = store.lock("apply", None).unwrap();
    // nginx settings on a layout without nginx: a warning, not an error.
    let text = std::fs::read_to_string(&r).unwrap().replace(
        "    policy: round_robin\n",
        "    policy: round_robin\n  nginx:\n    worker_connections: 4096\n",
    );
    std::fs::write(&r, text).unwrap();
    let plan = ["plan", "-f", r.as_str(), "--simulate"];
    let apply = ["apply", "-f", r.as_str(), "--simulate", "--auto-approve"];
    for args in [&plan[..], &apply[..]] {
        let out = env.srt(args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(srt::exit::LOCKED), "{err}");
        assert!(
            err.contains(&format!("pid {}", std::process::id())),
            "{err}"
        );
        assert!(err.contains("this layout runs no nginx"), "{args:?}: {err}");
    }
    // 1,000 TP8 replicas on this one host run out of ports while the launch plan is built.
    let text = std::fs::read_to_string(&r)
        .unwrap()
        .replace("nodes: 1\n    workers: 2", "nodes: 1000\n    workers: 1000")
        .replace("gpus_per_node: 2", "gpus_per_node: 8")
        .replace(
            "max-model-len: 2048",
            "max-model-len: 2048\n      tensor-parallel-size: 8",
        );
    std::fs::write(&r, text).unwrap();
    let out = env.srt(&["plan", "-f", &r, "--simulate"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(srt::exit::INVALID_RECIPE), "{err}");
    assert!(
        err.contains("port range exhausted") && err.contains("agg.yaml:"),
        "{err}"
    );
    drop(held);
}

#[test]
fn interrupted_apply_saves_state_and_converges() {
    let _g = serial();
    let env = Env::new();
    let r = recipe(env.dir.path());
    // Workers take 3 s to become healthy: interrupt while the gate waits.
    env.startup_delay_ms.set(3000);
    let child = env.spawn(&["apply", "-f", &r, "--simulate", "--auto-approve"]);
    let store = srt::state::StateStore::new(env.dir.path().join(".srt/local-agg"));
    let start = Instant::now();
    loop {
        // As srt reads it: the launch is recorded in the journal until apply ends.
        let router_running = store.load().ok().flatten().is_some_and(|s| {
            s.resources
                .get("router[0]")
                .is_some_and(|r| r.status == srt::state::Status::Running)
        });
        if router_running {
            break;
        }
        assert!(
            start.elapsed() < Duration::from_secs(30),
            "apply never launched the Router"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(130),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let state = store.load().unwrap().expect("state exists");
    assert_eq!(
        state.resources["router[0]"].status,
        srt::state::Status::Running
    );
    // The lock is free and the next apply converges (processes kept, gates pass).
    let again = env.srt(&["apply", "-f", &r, "--simulate", "--auto-approve"]);
    let text = String::from_utf8_lossy(&again.stdout);
    assert!(
        again.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&again.stderr)
    );
    assert!(text.contains("smoke: passed"), "{text}");
    env.destroy("local-agg");
}

/// The Router stopped (SIGSTOP) in the middle of a roll: it takes connections and never
/// answers. Putting the replaced worker back fails after the admin timeout, naming the
/// Router, its URL, the call and that it timed out, with what to check; it was
/// `error sending request for url (http://127.0.0.1:8000/add_worker?...)`.
#[test]
fn a_router_stopped_mid_roll_is_named_with_what_to_check() {
    use nix::sys::signal::Signal;
    let _g = serial();
    let env = Env::new();
    let name = "fault-stopped-router";
    let text = |delay_ms: u32| {
        format!(
            "schema: 2
name: {name}
model:
  path: /models/tiny
  served_name: tiny
resources:
  gpus_per_node: 2
frontend:
  enable_multiple_frontends: false
roles:
  agg:
    nodes: 1
    workers: 2
    gpus: 1
    env:
      SRT_SIM_STARTUP_DELAY_MS: \"{delay_ms}\"
health_check:
  timeout_seconds: 60
rollout:
  drain_seconds: 1
"
        )
    };
    env.apply(&env.recipe("roll.yaml", &text(200)));
    let router = env.pid(name, "router[0]");
    let first = "worker.agg[0].node[0]";
    let old = env.pid(name, first);
    // The new workers take 1.5 s to listen: the Router is stopped before the first one
    // is put back.
    let path = env.recipe("roll.yaml", &text(1500));
    let mut child = env.spawn(&["apply", "-f", &path, "--simulate", "--auto-approve"]);
    e2e_support::wait_for("the first replacement to start", || {
        env.processes_of(name, first).iter().any(|&p| p != old)
    });
    e2e_support::signal(router, Signal::SIGSTOP);
    let started = Instant::now();
    e2e_support::wait_child(&mut child, Duration::from_secs(120));
    let out = e2e_support::collect(child);
    e2e_support::signal(router, Signal::SIGCONT);
    let shown = e2e_support::text(&out);
    assert_ne!(out.status.code(), Some(0), "{shown}");
    assert!(
        started.elapsed() >= Duration::from_secs(25),
        "failed before the timeout: {shown}"
    );
    assert!(
        shown.contains("the Router `router[0]` (http://127.0.0.1:8000) did not answer `POST /add_worker` within 30s: timed out"),
        "{shown}"
    );
    assert!(
        shown.contains("is not stopped")
            && shown.contains(&format!("`srt logs {name} 'router[0]'`")),
        "{shown}"
    );
    env.destroy(name);
}
