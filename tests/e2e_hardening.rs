//! Faults on the local executor, end to end through the `srt` binary with the real
//! Router and the vLLM simulator: a worker dying during startup, a killed Router, a
//! port held by another program, a recorded pid now owned by another program, corrupt,
//! truncated and newer state files, and a stale lock left by a dead process.
//!
//! (The same faults on SLURM belong with the SLURM executor's own tests.)

mod e2e_support;

use e2e_support::*;
use nix::sys::signal::Signal;
use std::net::TcpListener;
use std::os::unix::process::CommandExt;
use std::process::Command;
use std::time::Duration;

const STARTUP_FAILURE: &str = "\
name: hard-startup
model:
  path: /models/tiny
  served_name: tiny
resources:
  gpus_per_node: 2
frontend:
  enable_multiple_frontends: false
roles:
  prefill:
    nodes: 1
    workers: 1
    gpus: 1
    env:
      SRT_SIM_EXIT_DURING_STARTUP: \"3\"
  decode:
    nodes: colocate
    workers: 1
    gpus: 1
health_check:
  timeout_seconds: 60
";

#[test]
fn a_worker_exiting_during_startup_fails_the_gate_naming_it_and_only_it_is_replaced() {
    let _g = serial();
    let env = Env::new();
    let recipe = env.recipe("startup.yaml", STARTUP_FAILURE);
    let out = env.srt(&["apply", "-f", &recipe, "--simulate", "--auto-approve"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(srt::exit::APPLY_FAILED),
        "{}",
        text(&out)
    );
    // The gate names the worker and shows the tail of its log, once.
    assert!(
        stderr.contains("`worker.prefill[0].node[0]` died while waiting")
            && stderr.contains("--- last lines of worker.prefill[0].node[0]'s log ---")
            && stderr.contains("simulated failure during startup"),
        "{stderr}"
    );
    assert_eq!(stderr.matches("--- last lines of").count(), 1, "{stderr}");
    let state = env.state("hard-startup");
    let r = &state["resources"];
    assert_eq!(
        r["worker.prefill[0].node[0]"]["status"], "failed",
        "{state}"
    );
    assert_eq!(r["worker.decode[0].node[0]"]["status"], "running");
    assert_eq!(r["router[0]"]["status"], "running");
    // The next plan replaces the failed worker alone; the rest is kept.
    let plan = env.srt(&["plan", "-f", &recipe, "--simulate", "--json"]);
    assert!(plan.status.success(), "{}", text(&plan));
    let plan: serde_json::Value = serde_json::from_slice(&plan.stdout).unwrap();
    let changed: Vec<(&str, &str)> = plan["resource_changes"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["action"] != "no-op" && c["action"] != "check")
        .map(|c| {
            (
                c["address"].as_str().unwrap(),
                c["action"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        changed,
        vec![("worker.prefill[0].node[0]", "replace")],
        "{plan:#}"
    );
    let reasons = plan["resource_changes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["address"] == "worker.prefill[0].node[0]")
        .unwrap()["reasons"]
        .clone();
    assert_eq!(reasons[0]["reason"], "failed", "{reasons}");
    env.destroy("hard-startup");
}

#[test]
fn a_killed_router_is_drift_and_apply_restarts_only_it() {
    let _g = serial();
    let env = Env::new();
    let recipe = env.recipe("agg.yaml", &example_named("local-agg.yaml", "hard-router"));
    env.apply(&recipe);
    let router = env.pid("hard-router", "router[0]");
    let workers = [
        env.pid("hard-router", "worker.agg[0].node[0]"),
        env.pid("hard-router", "worker.agg[1].node[0]"),
    ];
    signal(router, Signal::SIGKILL);
    wait_for("the Router to die", || !alive(router));
    let plan = env.srt(&["plan", "-f", &recipe, "--simulate", "--detailed-exitcode"]);
    let shown = text(&plan);
    assert_eq!(plan.status.code(), Some(srt::exit::CHANGES), "{shown}");
    assert!(
        shown.contains("objects changed outside srt")
            && shown.contains(&format!("router[0]: process {router} exited"))
            && shown.contains("# router[0] will be replaced")
            && shown.contains("Plan: 0 to create, 1 to replace, 0 to destroy"),
        "{shown}"
    );
    let out = env.apply(&recipe);
    assert!(out.contains("smoke: passed"), "{out}");
    assert_ne!(env.pid("hard-router", "router[0]"), router);
    assert_eq!(
        [
            env.pid("hard-router", "worker.agg[0].node[0]"),
            env.pid("hard-router", "worker.agg[1].node[0]"),
        ],
        workers
    );
    assert_no_orphans(&env, "hard-router");
    env.destroy("hard-router");
}

/// A worker taken out through the Router's own admin API (by someone else) is drift of
/// its membership: the plan says which, and apply adds it back without restarting
/// anything.
#[test]
fn a_worker_removed_behind_srts_back_is_membership_drift() {
    let _g = serial();
    let env = Env::new();
    let recipe = env.recipe("agg.yaml", &example_named("local-agg.yaml", "hard-members"));
    env.apply(&recipe);
    let pids = |env: &Env| {
        [
            "router[0]",
            "worker.agg[0].node[0]",
            "worker.agg[1].node[0]",
        ]
        .map(|a| env.pid("hard-members", a))
    };
    let before = pids(&env);
    let listed = env.get("http://127.0.0.1:8000/workers");
    let url = listed["workers"][1]["url"].as_str().unwrap().to_string();
    let status = env.post(&format!("http://127.0.0.1:8000/remove_worker?url={url}"));
    assert_eq!(status, 200);
    let plan = env.srt(&["plan", "-f", &recipe, "--simulate", "--detailed-exitcode"]);
    let shown = text(&plan);
    assert_eq!(plan.status.code(), Some(srt::exit::CHANGES), "{shown}");
    assert!(
        shown.contains("objects changed outside srt")
            && shown.contains(&format!("its Router lost {url}")),
        "{shown}"
    );
    env.apply(&recipe);
    let listed = env.get("http://127.0.0.1:8000/workers");
    assert_eq!(listed["workers"].as_array().unwrap().len(), 2, "{listed}");
    assert_eq!(pids(&env), before);
    let plan = env.srt(&["plan", "-f", &recipe, "--simulate", "--detailed-exitcode"]);
    assert_eq!(plan.status.code(), Some(0), "{}", text(&plan));
    env.destroy("hard-members");
}

#[test]
fn a_port_held_by_another_program_is_refused_before_launch() {
    let _g = serial();
    let env = Env::new();
    let text_ = example_named("local-agg.yaml", "hard-port");
    let recipe = env.recipe("agg.yaml", &text_);
    // The port the first worker would bind on this host.
    let source = srt::recipe::Source {
        name: "agg.yaml".into(),
        text: text_,
    };
    let loaded = srt::recipe::load_str(&source, "agg").unwrap();
    let launch = srt::assemble::assemble(
        &loaded,
        &srt::assemble::BuildOptions {
            nodes: None,
            hosts: srt::launch::HostLayout::Shared,
        },
    )
    .unwrap();
    let victim = launch
        .processes
        .iter()
        .find(|p| p.address == "worker.agg[0].node[0]")
        .unwrap();
    let port = victim.ports["http"].base;
    let squatter = env.in_netns(|| TcpListener::bind(("127.0.0.1", port)).unwrap());
    // The same plan saved to a file, to apply as it is.
    env.ok(&["plan", "-f", &recipe, "--simulate", "-o", "first.plan"]);
    // A first apply checks every port before it starts anything: refused, with the way
    // out (the command that shows who holds the port). So does the saved plan's.
    for args in [
        &["apply", "-f", &recipe, "--simulate", "--auto-approve"][..],
        &["apply", "first.plan"][..],
    ] {
        let out = env.srt(args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            out.status.code(),
            Some(srt::exit::ERROR),
            "{args:?}: {}",
            text(&out)
        );
        assert!(
            stderr.contains(&format!(
                "port {port} (http) of `worker.agg[0].node[0]` is already in use"
            )),
            "{args:?}: {stderr}"
        );
        assert!(
            stderr.contains(&format!("ss -ltnp 'sport = :{port}'")),
            "{args:?}: {stderr}"
        );
    }
    // Nothing started, nothing recorded: no Router either.
    let state = srt::state::StateStore::new(env.deployment_dir("hard-port"))
        .load()
        .unwrap();
    assert!(
        state.as_ref().is_none_or(|s| s.resources.is_empty()),
        "{state:#?}"
    );
    assert!(
        live_processes("hard-port").is_empty(),
        "a process was started"
    );
    // Once the port is free, apply starts everything.
    drop(squatter);
    let out = env.apply(&recipe);
    assert!(out.contains("smoke: passed"), "{out}");
    assert!(out.contains("worker.agg[0].node[0]: started"), "{out}");
    assert_no_orphans(&env, "hard-port");
    env.destroy("hard-port");
}

/// A process that is not ours: its own process group, and it logs any SIGTERM it gets
/// (SIGKILL would end it, which the test sees too).
fn foreign_process(dir: &std::path::Path) -> (Foreign, std::path::PathBuf) {
    let log = dir.join("foreign.log");
    let child = Command::new("sh")
        .arg("-c")
        .arg(format!(
            "trap 'echo TERM >> {0}' TERM; trap 'echo INT >> {0}' INT; while :; do sleep 0.05; done",
            log.display()
        ))
        .process_group(0)
        .spawn()
        .unwrap();
    (Foreign(child), log)
}

/// The foreign program, killed when the test ends, whether it passed or panicked.
struct Foreign(std::process::Child);

impl std::ops::Deref for Foreign {
    type Target = std::process::Child;
    fn deref(&self) -> &Self::Target {
        &self.0
    }
}

impl std::ops::DerefMut for Foreign {
    fn deref_mut(&mut self) -> &mut Self::Target {
        &mut self.0
    }
}

impl Drop for Foreign {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Point a resource's record at `pid` with a start time that is not that process's.
fn forge(env: &Env, deployment: &str, address: &str, pid: u32) {
    let mut state = env.state(deployment);
    let (_, _, start) = stat(pid).unwrap();
    let rt = &mut state["resources"][address]["runtime"];
    rt["pid"] = pid.into();
    rt["pgid"] = pid.into();
    rt["start_time"] = (start + 4242).into();
    env.write_state(deployment, &state);
}

#[test]
fn a_reused_pid_is_drift_and_is_never_signalled() {
    let _g = serial();
    let env = Env::new();
    let recipe = env.recipe("agg.yaml", &example_named("local-agg.yaml", "hard-pid"));
    env.apply(&recipe);
    let (mut foreign, log) = foreign_process(env.dir.path());
    let fpid = foreign.id();
    // The worker dies and the kernel hands its pid to another program: forged by
    // recording the foreign pid with the dead worker's (different) start time.
    let worker = env.pid("hard-pid", "worker.agg[1].node[0]");
    signal(worker, Signal::SIGKILL);
    wait_for("the worker to die", || !alive(worker));
    forge(&env, "hard-pid", "worker.agg[1].node[0]", fpid);
    let plan = env.srt(&["plan", "-f", &recipe, "--simulate", "--detailed-exitcode"]);
    let shown = text(&plan);
    assert_eq!(plan.status.code(), Some(srt::exit::CHANGES), "{shown}");
    assert!(
        shown.contains(&format!(
            "worker.agg[1].node[0]: process {fpid} is gone (its pid now belongs to another program)"
        )) && shown.contains("Plan: 0 to create, 1 to replace, 0 to destroy"),
        "{shown}"
    );
    let out = env.apply(&recipe);
    assert!(out.contains("smoke: passed"), "{out}");
    assert_ne!(env.pid("hard-pid", "worker.agg[1].node[0]"), fpid);
    // Destroy with a forged Router record: the foreign program is left alone again.
    let router = env.pid("hard-pid", "router[0]");
    signal(router, Signal::SIGKILL);
    wait_for("the Router to die", || !alive(router));
    forge(&env, "hard-pid", "router[0]", fpid);
    env.destroy("hard-pid");
    std::thread::sleep(Duration::from_millis(200));
    assert!(
        foreign.try_wait().unwrap().is_none(),
        "the foreign program was killed"
    );
    assert_eq!(
        std::fs::read_to_string(&log).unwrap_or_default(),
        "",
        "the foreign program was signalled"
    );
}

fn lock_record(pid: u32) -> String {
    let host = nix::unistd::gethostname()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    serde_json::json!({
        "id": "00000000-0000-4000-8000-000000000000",
        "pid": pid,
        "host": host,
        "user": "someone",
        "operation": "apply",
        "started_at": 1_700_000_000u64,
    })
    .to_string()
}

#[test]
fn stale_lock_corrupt_truncated_and_newer_state_are_handled_without_overwriting() {
    let _g = serial();
    let env = Env::new();
    let recipe = env.recipe("agg.yaml", &example_named("local-agg.yaml", "hard-state"));
    let dir = env.deployment_dir("hard-state");

    // A lock left by a process that died: taken over with a note, never blocking.
    let mut dead = Command::new("true").spawn().unwrap();
    let dead_pid = dead.id();
    dead.wait().unwrap();
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("lock"), lock_record(dead_pid)).unwrap();
    let out = env.apply(&recipe);
    assert!(
        out.contains(&format!("taking over the lock left by pid {dead_pid}")),
        "{out}"
    );
    assert_eq!(
        std::fs::read_to_string(dir.join("lock")).unwrap(),
        "",
        "the lock record is erased on release"
    );
    let workers = [
        env.pid("hard-state", "worker.agg[0].node[0]"),
        env.pid("hard-state", "worker.agg[1].node[0]"),
    ];

    let state_path = dir.join("state.json");
    let backup_path = dir.join("state.json.backup");
    let good = std::fs::read(&state_path).unwrap();
    let backup = std::fs::read(&backup_path).expect("a backup of the previous state");
    let bad_cases: Vec<(&str, Vec<u8>, &str)> = vec![
        (
            "truncated",
            good[..good.len() / 2].to_vec(),
            "looks truncated",
        ),
        (
            "garbage",
            b"{\"format_version\": 1, oops".to_vec(),
            "corrupt",
        ),
        ("empty", Vec::new(), "the file is empty"),
    ];
    let mut last_stderr = String::new();
    for (what, bytes, says) in &bad_cases {
        std::fs::write(&state_path, bytes).unwrap();
        for args in [
            vec!["plan", "-f", &recipe, "--simulate"],
            vec!["apply", "-f", &recipe, "--simulate", "--auto-approve"],
            vec!["destroy", "hard-state", "--auto-approve"],
        ] {
            let out = env.srt(&args);
            let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
            assert_eq!(
                out.status.code(),
                Some(srt::exit::STATE),
                "{what} {args:?}: {}",
                text(&out)
            );
            assert!(
                stderr.contains("srt::state::corrupt")
                    && stderr.contains(says)
                    && stderr.contains(
                        "cp .srt/hard-state/state.json.backup .srt/hard-state/state.json"
                    ),
                "{what} {args:?}: {stderr}"
            );
            assert_eq!(
                &std::fs::read(&state_path).unwrap(),
                bytes,
                "{what} {args:?}: state was rewritten"
            );
            assert_eq!(
                std::fs::read(&backup_path).unwrap(),
                backup,
                "{what} {args:?}: backup was rewritten"
            );
            last_stderr = stderr;
        }
    }
    for pid in workers {
        assert!(alive(pid), "a worker died while state was unreadable");
    }
    // The recovery command from the help works as printed.
    let cp = last_stderr
        .lines()
        .map(str::trim)
        .find(|l| l.starts_with("cp "))
        .unwrap()
        .to_string();
    let status = Command::new("sh")
        .arg("-c")
        .arg(&cp)
        .current_dir(env.dir.path())
        .status()
        .unwrap();
    assert!(status.success(), "{cp}");
    let plan = env.srt(&["plan", "-f", &recipe, "--simulate", "--json"]);
    assert!(plan.status.success(), "{}", text(&plan));
    let plan: serde_json::Value = serde_json::from_slice(&plan.stdout).unwrap();
    for c in plan["resource_changes"].as_array().unwrap() {
        if c["kind"] == "worker" {
            assert_eq!(c["action"], "no-op", "{plan:#}");
        }
    }

    // A state written by a newer srt: refused, untouched, with the upgrade hint.
    let mut newer: serde_json::Value = serde_json::from_slice(&good).unwrap();
    newer["format_version"] = 99.into();
    newer["srt_version"] = "9.0.0".into();
    let newer = serde_json::to_vec_pretty(&newer).unwrap();
    std::fs::write(&state_path, &newer).unwrap();
    for args in [
        vec!["plan", "-f", &recipe, "--simulate"],
        vec!["apply", "-f", &recipe, "--simulate", "--auto-approve"],
        vec!["destroy", "hard-state", "--auto-approve"],
    ] {
        let out = env.srt(&args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            out.status.code(),
            Some(srt::exit::STATE),
            "{args:?}: {stderr}"
        );
        assert!(
            stderr.contains("srt::state::newer_format")
                && stderr.contains("format version 99")
                && stderr.contains("upgrade srt to 9.0.0"),
            "{args:?}: {stderr}"
        );
        assert_eq!(std::fs::read(&state_path).unwrap(), newer, "{args:?}");
    }
    std::fs::write(&state_path, &good).unwrap();
    env.destroy("hard-state");
}

/// A state whose recorded dependencies form a cycle (edited by hand) still destroys
/// everything: what no stop can release is stopped anyway, in a fixed order.
#[test]
fn destroy_stops_resources_in_a_recorded_cycle() {
    let _g = serial();
    let env = Env::new();
    let recipe = env.recipe("agg.yaml", &example_named("local-agg.yaml", "hard-cycle"));
    env.apply(&recipe);
    let mut state = env.state("hard-cycle");
    // The Router depends on this worker; make the worker depend on the Router too.
    state["resources"]["worker.agg[0].node[0]"]["dependencies"]
        .as_array_mut()
        .unwrap()
        .push("router[0]".into());
    env.write_state("hard-cycle", &state);
    let pids = [
        env.pid("hard-cycle", "worker.agg[0].node[0]"),
        env.pid("hard-cycle", "router[0]"),
    ];
    env.destroy("hard-cycle");
    for pid in pids {
        wait_for(&format!("pid {pid} to exit"), || !alive(pid));
    }
    assert!(live_processes("hard-cycle").is_empty());
}

/// A state file pointed at an unrelated process (its real pid, group and start time)
/// never gets it signalled: the lease srt planted names another process, and a record
/// without a lease (as an older srt wrote) needs srt's marker in the environment.
#[test]
fn a_forged_identity_with_the_true_start_time_is_never_signalled() {
    let _g = serial();
    let env = Env::new();
    let recipe = env.recipe("agg.yaml", &example_named("local-agg.yaml", "hard-forged"));
    env.apply(&recipe);
    let (mut foreign, log) = foreign_process(env.dir.path());
    let fpid = foreign.id();
    wait_for("the foreign program", || stat(fpid).is_some());
    let (_, _, start) = stat(fpid).unwrap();
    let mut state = env.state("hard-forged");
    // The Router's record keeps its lease; worker 1's loses it (an older state format).
    for (address, keep_lease) in [("router[0]", true), ("worker.agg[1].node[0]", false)] {
        let rt = &mut state["resources"][address]["runtime"];
        rt["pid"] = fpid.into();
        rt["pgid"] = fpid.into();
        rt["start_time"] = start.into();
        if !keep_lease {
            rt.as_object_mut().unwrap().remove("lease");
        }
    }
    let real_router = env.pid("hard-forged", "router[0]");
    let real_worker = env.pid("hard-forged", "worker.agg[1].node[0]");
    env.write_state("hard-forged", &state);
    let out = env.srt(&["destroy", "hard-forged", "--auto-approve"]);
    let shown = text(&out);
    // The worker's record cannot be verified: destroy says so and keeps it.
    assert_eq!(out.status.code(), Some(srt::exit::APPLY_FAILED), "{shown}");
    assert!(
        shown.contains(&format!("process {fpid} was recorded without a lease")),
        "{shown}"
    );
    std::thread::sleep(Duration::from_millis(200));
    assert!(
        foreign.try_wait().unwrap().is_none(),
        "the foreign program was killed"
    );
    assert_eq!(
        std::fs::read_to_string(&log).unwrap_or_default(),
        "",
        "the foreign program was signalled"
    );
    // The real Router and worker, whose records were overwritten, were found through
    // their leases and stopped as processes no record tracks.
    assert!(shown.contains("2 untracked processes"), "{shown}");
    for pid in [real_router, real_worker] {
        wait_for("the real processes to stop", || !alive(pid));
    }
    // The Router's record names the foreign program, whose lease (the real Router's,
    // removed once it stopped) is gone and whose environment carries no marker of the
    // deployment: it cannot be proven srt's either, so it stays too.
    assert!(
        shown.contains(&format!("process {fpid} still runs but its lease")),
        "{shown}"
    );
    // The unverifiable records stay until a person decides; without them, nothing is
    // left.
    let mut state = env.state("hard-forged");
    for address in ["worker.agg[1].node[0]", "router[0]"] {
        state["resources"].as_object_mut().unwrap().remove(address);
    }
    env.write_state("hard-forged", &state);
    env.destroy("hard-forged");
    assert_no_orphans(&env, "hard-forged");
}

/// A stopped (SIGSTOP) or unhealthy worker is drift after `unhealthy_grace_seconds`:
/// the plan says so and apply replaces that worker alone, without waiting out the
/// readiness budget.
#[test]
fn a_stopped_or_unhealthy_worker_is_drift_and_replaced_alone() {
    let _g = serial();
    let env = Env::new();
    let text_of = example_named("local-agg.yaml", "hard-hung").replace(
        "health_check:\n  timeout_seconds: 120",
        "health_check:\n  timeout_seconds: 120\n  unhealthy_grace_seconds: 1",
    );
    assert!(text_of.contains("unhealthy_grace_seconds"));
    let recipe = env.recipe("agg.yaml", &text_of);
    env.apply(&recipe);
    let router = env.pid("hard-hung", "router[0]");
    let stopped = env.pid("hard-hung", "worker.agg[0].node[0]");
    let other = env.pid("hard-hung", "worker.agg[1].node[0]");
    signal(stopped, Signal::SIGSTOP);
    let plan = env.srt(&["plan", "-f", &recipe, "--simulate", "--detailed-exitcode"]);
    let shown = text(&plan);
    assert_eq!(plan.status.code(), Some(srt::exit::CHANGES), "{shown}");
    assert!(
        shown.contains(&format!(
            "worker.agg[0].node[0]: process {stopped} is stopped"
        )) && shown.contains("Plan: 0 to create, 1 to replace, 0 to destroy"),
        "{shown}"
    );
    let started = std::time::Instant::now();
    env.apply(&recipe);
    assert!(started.elapsed() < Duration::from_secs(30), "apply waited");
    assert!(!alive(stopped), "the stopped worker was not stopped");
    assert_ne!(env.pid("hard-hung", "worker.agg[0].node[0]"), stopped);
    assert_eq!(env.pid("hard-hung", "worker.agg[1].node[0]"), other);
    assert_eq!(env.pid("hard-hung", "router[0]"), router);

    // Unhealthy while running: /health answers 503 (the simulator's fault knob).
    let unhealthy = env.recipe(
        "agg2.yaml",
        &text_of.replace(
            "      PYTHONUNBUFFERED: \"1\"",
            "      PYTHONUNBUFFERED: \"1\"\n      SRT_SIM_UNHEALTHY_AFTER_MS: \"4000\"",
        ),
    );
    // Healthy long enough for apply's gates, then 503 (4 s after becoming healthy,
    // which was before apply returned).
    env.apply(&unhealthy);
    std::thread::sleep(Duration::from_millis(4500));
    let plan = env.srt(&[
        "plan",
        "-f",
        &unhealthy,
        "--simulate",
        "--detailed-exitcode",
    ]);
    let shown = text(&plan);
    assert_eq!(plan.status.code(), Some(srt::exit::CHANGES), "{shown}");
    assert!(
        shown.contains("worker.agg[0].node[0]: unhealthy:") && shown.contains("503"),
        "{shown}"
    );
    // `srt status` probes the same way: the 503 worker is unhealthy, its Router healthy.
    let status: serde_json::Value =
        serde_json::from_str(&env.stdout(&["status", "hard-hung", "--json"])).unwrap();
    let state_of = |address: &str| {
        status["resources"]
            .as_array()
            .unwrap()
            .iter()
            .find(|r| r["address"] == address)
            .map(|r| r["state"].clone())
    };
    assert_eq!(
        state_of("worker.agg[0].node[0]").unwrap(),
        "unhealthy",
        "{status}"
    );
    assert_eq!(state_of("router[0]").unwrap(), "healthy", "{status}");
    env.destroy("hard-hung");
}
