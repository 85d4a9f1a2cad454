//! End to end on the local executor with the real `vllm-router` (installed by
//! `scripts/install-router.sh` into `.tools/`) and the vLLM simulator as workers.
//!
//! Scenarios share ports (the Router's public 8000, worker HTTP 6100...), so they run
//! one at a time under a mutex.

mod e2e_support;

use e2e_support::{repo, tools_path};
use std::process::{Command, Output, Stdio};
use std::sync::Mutex;
use std::time::Duration;

static SERIAL: Mutex<()> = Mutex::new(());

struct Env {
    dir: tempfile::TempDir,
    path: String,
}

/// A failed test must not leave processes behind that hold the shared ports (8000,
/// 6100, ...) for the tests after it: destroy every deployment of this scratch dir.
impl Drop for Env {
    fn drop(&mut self) {
        destroy_all(self.dir.path(), &self.path);
    }
}

fn destroy_all(dir: &std::path::Path, path: &str) {
    let Ok(entries) = std::fs::read_dir(dir.join(".srt")) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let _ = Command::new(env!("CARGO_BIN_EXE_srt"))
            .args(["destroy", &name, "--auto-approve"])
            .current_dir(dir)
            .env("PATH", path)
            .env_remove("SRT_STATE_DIR")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}

impl Env {
    fn new() -> Env {
        let path = tools_path();
        Env {
            dir: tempfile::tempdir().unwrap(),
            path,
        }
    }

    fn srt(&self, args: &[&str]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_srt"))
            .args(args)
            .current_dir(self.dir.path())
            .env("PATH", &self.path)
            .env("SRT_SIM_STARTUP_DELAY_MS", "200")
            .env_remove("SRT_STATE_DIR")
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap()
    }

    fn ok(&self, args: &[&str]) -> String {
        let out = self.srt(args);
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            out.status.success(),
            "srt {args:?} failed ({:?}):\n{text}",
            out.status.code()
        );
        text
    }

    fn recipe(&self, name: &str, text: &str) -> String {
        let p = self.dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        p.display().to_string()
    }

    /// The deployment's state as srt reads it (`state.json` with the journal replayed).
    fn state(&self, deployment: &str) -> serde_json::Value {
        let store = srt::state::StateStore::new(self.dir.path().join(".srt").join(deployment));
        serde_json::to_value(store.load().unwrap().expect("the deployment has state")).unwrap()
    }

    fn pid(&self, deployment: &str, address: &str) -> u64 {
        self.state(deployment)["resources"][address]["runtime"]["pid"]
            .as_u64()
            .unwrap_or_else(|| panic!("no pid for {address}"))
    }
}

fn example(name: &str) -> String {
    std::fs::read_to_string(repo().join("examples").join(name)).unwrap()
}

fn live_processes(deployment: &str) -> Vec<u32> {
    srt::exec::process::processes_with_env_marker(srt::exec::local::DEPLOYMENT_MARKER, deployment)
        .into_iter()
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .map(|s| {
                    !s.rsplit(')')
                        .next()
                        .unwrap_or("")
                        .trim_start()
                        .starts_with('Z')
                })
                .unwrap_or(false)
        })
        .collect()
}

fn completion(url: &str) -> serde_json::Value {
    let body = serde_json::json!({"model": "tiny", "prompt": "hello", "max_tokens": 4});
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let c = reqwest::Client::builder()
            .timeout(Duration::from_secs(20))
            .no_proxy()
            .build()
            .unwrap();
        let r = c
            .post(format!("{url}/v1/completions"))
            .json(&body)
            .send()
            .await
            .unwrap();
        assert!(r.status().is_success(), "completion failed: {}", r.status());
        r.json().await.unwrap()
    })
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
    let v = completion("http://127.0.0.1:8000");
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
        live_processes(deployment),
        Vec::<u32>::new(),
        "processes of {deployment} left behind"
    );
    assert_eq!(env.state(deployment)["resources"], serde_json::json!({}));
}

#[test]
fn aggregate_two_workers_with_drift_heal() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let env = Env::new();
    let recipe = env.recipe("agg.yaml", &example("local-agg.yaml"));
    lifecycle(&env, &recipe, "local-agg");
    // Kill one worker: plan shows drift, apply heals only it.
    let victim = env.pid("local-agg", "worker.agg[1].node[0]");
    let other = env.pid("local-agg", "worker.agg[0].node[0]");
    let router = env.pid("local-agg", "router[0]");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(victim as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let plan = env.srt(&["plan", "-f", &recipe, "--simulate", "--detailed-exitcode"]);
    let text = String::from_utf8_lossy(&plan.stdout);
    assert_eq!(plan.status.code(), Some(2), "{text}");
    assert!(
        text.contains("because drift: process")
            && text.contains("Plan: 0 to create, 1 to replace, 0 to destroy."),
        "{text}"
    );
    env.ok(&["apply", "-f", &recipe, "--simulate", "--auto-approve"]);
    assert_ne!(env.pid("local-agg", "worker.agg[1].node[0]"), victim);
    assert_eq!(env.pid("local-agg", "worker.agg[0].node[0]"), other);
    assert_eq!(env.pid("local-agg", "router[0]"), router);
    completion("http://127.0.0.1:8000");
    destroy(&env, "local-agg");
}

#[test]
fn disaggregated_nixl_goes_through_prefill_and_decode_and_args_change_replaces_one_role() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let env = Env::new();
    let recipe = env.recipe("pd.yaml", &example("local-disagg.yaml"));
    lifecycle(&env, &recipe, "local-disagg");
    // The completion went through one prefill and one decode that consumed its KV.
    let state = env.state("local-disagg");
    let port = |a: &str| state["resources"][a]["ports"]["http"].as_u64().unwrap();
    let prefill = metrics(&format!(
        "http://127.0.0.1:{}",
        port("worker.prefill[0].node[0]")
    ));
    let decode = metrics(&format!(
        "http://127.0.0.1:{}",
        port("worker.decode[0].node[0]")
    ));
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
        plan.contains("{+--max-model-len+}"),
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
    completion("http://127.0.0.1:8000");
    destroy(&env, "local-disagg");
}

#[test]
fn data_parallel_hybrid_lb_pools() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let env = Env::new();
    let recipe = env.recipe("dp.yaml", &example("local-dp.yaml"));
    lifecycle(&env, &recipe, "local-dp");
    let state = env.state("local-dp");
    for a in ["worker.agg[0].node[0]", "worker.agg[0].node[1]"] {
        let port = state["resources"][a]["ports"]["http"].as_u64().unwrap();
        let m = metrics(&format!("http://127.0.0.1:{port}"));
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
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let env = Env::new();
    let text = example("seed/moriio-colocated.yaml") + "model:\n  path: /models/tiny\n  served_name: tiny\nhealth_check:\n  timeout_seconds: 120\n";
    let recipe = env.recipe("moriio-colocated.yaml", &text);
    lifecycle(&env, &recipe, "moriio-colocated");
    destroy(&env, "moriio-colocated");
}

#[test]
fn saved_plan_is_refused_once_stale() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let env = Env::new();
    let recipe = env.recipe("agg.yaml", &example("local-agg.yaml"));
    env.ok(&["plan", "-f", &recipe, "--simulate", "-o", "first.plan"]);
    env.ok(&["plan", "-f", &recipe, "--simulate", "-o", "second.plan"]);
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
