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
