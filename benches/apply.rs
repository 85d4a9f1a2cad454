//! Apply overhead on the local executor: `cargo bench --bench apply` (or
//! `scripts/bench.sh`, which runs both benchmarks).
//!
//! For 2, 16 and 64 simulated workers (the vLLM simulator with `SRT_SIM_STARTUP_DELAY_MS=0`)
//! behind the real `vllm-router`, it runs `srt apply` and records, from the start of the
//! command (median of repeated runs):
//!
//! - **healthy**: when the last worker first answers `/health` (polled by this benchmark
//!   every millisecond);
//! - **Router ready**: when the Router's `/workers` first lists every worker (polled
//!   likewise): srt adds each worker through the Router's admin API as soon as its
//!   `/health` answers (srt polls every 10 ms), so this follows the last worker's health
//!   by the poll and one admin call;
//! - **gates**: when srt reports the last gate passed, and **ready**: the smoke
//!   completion passed; **exit**: when `srt apply` returns;
//! - **gate latency**: gates passed minus last worker healthy, split into the Router's part
//!   (Router ready minus healthy) and srt's (gates passed minus Router ready);
//! - **no-op apply**: `srt apply` again on the healthy deployment, and one round of the
//!   same health probes done by this benchmark, for comparison;
//! - **roll all**: `srt apply` after one argument of the role changed: every worker
//!   replaced one at a time (taken out of the Router, drained, stopped, started, put
//!   back; `rollout.max_unavailable: 1`), the Router kept, through the gates and the
//!   smoke check; and that time per rolled worker;
//! - **scale up by 1**: `srt apply` with one more worker, and **added worker: healthy to
//!   routed**: from the new worker's first `/health` to the running Router listing it
//!   (both polled every millisecond by this benchmark): srt's gate latency once the
//!   Router runs (target: under 100 ms);
//! - **destroy**: `srt destroy` of the deployment.
//!
//! Needs `vllm-router` (`scripts/install-router.sh`): looked up in `$SRT_TOOLS_DIR/bin`,
//! `.tools/bin`, then `PATH`; without it the benchmark says so and exits. Options (after
//! `--`): `--smoke` (2 workers, one run; the default without `--bench`, i.e. under
//! `cargo test --all-targets`), `--workers 2,16`, `--reps N`, `--startup-delay-ms N` (the
//! simulated workers' start-up, 0 by default: with a delay longer than the Router's own
//! start the Router is already waiting when the workers come up; run i of N adds
//! i * 1000 / N ms, so that the runs sample every phase of the Router's 1 s check). `SRT_BENCH_SRT=/path/srt`
//! measures another build of srt (with its `srt-vllm-sim` next to it).

mod common;

use common::{get, median, ms};
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The Router's public port in these recipes (away from the examples' 8000).
const PUBLIC_PORT: u16 = 18000;

/// The recipe; `max_model_len` is the one argument the replace run changes.
fn recipe_text(workers: usize, max_model_len: u32) -> String {
    scaled_text(workers, workers, max_model_len)
}

/// The recipe of deployment `bench-apply-{name}` with `workers` workers of one GPU, on
/// 8-GPU nodes with room for one more worker (all nodes are this machine).
fn scaled_text(name: usize, workers: usize, max_model_len: u32) -> String {
    format!(
        "schema: 2
name: bench-apply-{name}
model:
  path: /models/tiny
  served_name: tiny
resources:
  gpus_per_node: 8
frontend:
  enable_multiple_frontends: false
  port: {PUBLIC_PORT}
roles:
  agg:
    nodes: {nodes}
    workers: {workers}
    gpus: 1
    args:
      max-model-len: {max_model_len}
health_check:
  timeout_seconds: 120
  interval_seconds: 10
",
        nodes = (name + 1).div_ceil(8)
    )
}

/// Workers and `regular + decode` entries the Router lists.
fn router_lists(port: u16, workers: usize) -> bool {
    let Some((200, body)) = get(port, "/workers") else {
        return false;
    };
    let Some(v) = common::json_body(&body) else {
        return false;
    };
    let n = |k: &str| v["stats"][k].as_u64().unwrap_or(0);
    (n("regular_count") + n("decode_count")) as usize >= workers
}

/// Worker HTTP ports of the recipe on the local executor.
fn worker_ports(text: &str) -> Vec<u16> {
    let source = srt::recipe::Source {
        name: "bench.yaml".into(),
        text: text.to_string(),
    };
    let recipe = srt::recipe::load_str(&source, "bench").expect("recipe loads");
    let plan = srt::assemble::assemble(
        &recipe,
        &srt::assemble::BuildOptions {
            nodes: None,
            hosts: srt::launch::HostLayout::Shared,
        },
    )
    .unwrap_or_else(|p| panic!("recipe builds: {:?}", source.error(p)));
    plan.processes
        .iter()
        .filter(|p| {
            p.worker
                .as_ref()
                .is_some_and(|w| w.advertised_url.is_some())
        })
        .filter_map(|p| p.ports.get("http").map(|b| b.base))
        .collect()
}

#[derive(Default, Clone)]
struct Timeline {
    healthy: Option<Duration>,
    router_ready: Option<Duration>,
    gates: Option<Duration>,
    ready: Option<Duration>,
    exit: Duration,
}

struct Env {
    dir: tempfile::TempDir,
    recipe: PathBuf,
    path: String,
    deployment: String,
    /// `SRT_SIM_STARTUP_DELAY_MS` for the simulated workers.
    startup_delay_ms: u64,
}

impl Env {
    fn srt(&self, args: &[&str]) -> Command {
        let mut c = Command::new(common::srt_program());
        c.args(args)
            .current_dir(self.dir.path())
            .env("PATH", &self.path)
            .env(
                "SRT_SIM_STARTUP_DELAY_MS",
                self.startup_delay_ms.to_string(),
            )
            .env_remove("SRT_STATE_DIR")
            .stdin(Stdio::null());
        c
    }

    /// `srt apply` of the recipe; `quiet` drops the progress lines.
    fn apply_args(&self, quiet: bool) -> Vec<&str> {
        let mut args = vec![
            "apply",
            "-f",
            self.recipe.to_str().expect("utf-8 path"),
            "--simulate",
            "--auto-approve",
        ];
        if quiet {
            args.push("--quiet");
        }
        args
    }

    fn destroy(&self) -> Duration {
        let t = Instant::now();
        let out = self
            .srt(&["destroy", &self.deployment, "--auto-approve"])
            .output()
            .expect("run srt destroy");
        if !out.status.success() {
            eprintln!(
                "srt destroy failed:\n{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        t.elapsed()
    }
}

impl Drop for Env {
    fn drop(&mut self) {
        if self.dir.path().join(".srt").join(&self.deployment).exists() {
            self.destroy();
        }
    }
}

/// `srt apply` from nothing, with the benchmark's own pollers running alongside.
fn first_apply(env: &Env, workers: usize, ports: &[u16]) -> Result<Timeline, String> {
    let done = Arc::new(AtomicBool::new(false));
    let t0 = Instant::now();
    // Progress lines are timestamped as they arrive (Rust's stdout is line-buffered).
    let mut child = env
        .srt(&env.apply_args(false))
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run srt: {e}"))?;
    let timeline = Arc::new(Mutex::new(Timeline::default()));
    let poller = {
        let (done, timeline, ports) = (done.clone(), timeline.clone(), ports.to_vec());
        std::thread::spawn(move || {
            let mut pending = ports;
            while !pending.is_empty() && !done.load(Ordering::Relaxed) {
                pending.retain(|&p| !matches!(get(p, "/health"), Some((200, _))));
                if pending.is_empty() {
                    timeline.lock().unwrap().healthy = Some(t0.elapsed());
                    break;
                }
                std::thread::sleep(Duration::from_millis(1));
            }
            while !done.load(Ordering::Relaxed) {
                if router_lists(PUBLIC_PORT, workers) {
                    timeline.lock().unwrap().router_ready = Some(t0.elapsed());
                    break;
                }
                std::thread::sleep(Duration::from_millis(1));
            }
        })
    };
    let stdout = child.stdout.take().expect("piped");
    let mut lines = Vec::new();
    for line in BufReader::new(stdout).lines() {
        let Ok(line) = line else { break };
        let at = t0.elapsed();
        let mut t = timeline.lock().unwrap();
        if line.starts_with("gate.") && line.contains(": passed") {
            t.gates = Some(at);
        }
        if line.starts_with("smoke: passed") {
            t.ready = Some(at);
        }
        drop(t);
        lines.push(line);
    }
    let mut stderr = String::new();
    if let Some(mut e) = child.stderr.take() {
        let _ = e.read_to_string(&mut stderr);
    }
    let status = child.wait().map_err(|e| e.to_string())?;
    let exit = t0.elapsed();
    done.store(true, Ordering::Relaxed);
    let _ = poller.join();
    if !status.success() {
        return Err(format!(
            "srt apply failed ({status}):\n{}\n{stderr}",
            lines.join("\n")
        ));
    }
    let mut t = timeline.lock().unwrap().clone();
    t.exit = exit;
    Ok(t)
}

/// One round of the probes the gates make: Router `/workers`, every worker `/health`.
fn probe_round(workers: usize, ports: &[u16]) -> Duration {
    let t = Instant::now();
    assert!(
        router_lists(PUBLIC_PORT, workers),
        "the Router lists every worker"
    );
    for &p in ports {
        assert!(
            matches!(get(p, "/health"), Some((200, _))),
            "worker {p} healthy"
        );
    }
    t.elapsed()
}

/// Scale the running deployment up by one worker: from the new worker's first `/health`
/// to the Router listing it (both polled every millisecond), and the apply's time.
fn scale_up(env: &Env, workers: usize, max_model_len: u32) -> Result<(Duration, Duration), String> {
    let before = worker_ports(&scaled_text(workers, workers, max_model_len));
    let text = scaled_text(workers, workers + 1, max_model_len);
    let new: Vec<u16> = worker_ports(&text)
        .into_iter()
        .filter(|p| !before.contains(p))
        .collect();
    std::fs::write(&env.recipe, &text).map_err(|e| e.to_string())?;
    let t0 = Instant::now();
    let mut child = env
        .srt(&env.apply_args(true))
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| e.to_string())?;
    let mut healthy = None;
    let mut listed = None;
    while listed.is_none() && t0.elapsed() < Duration::from_secs(60) {
        if healthy.is_none()
            && new
                .iter()
                .all(|&p| matches!(get(p, "/health"), Some((200, _))))
        {
            healthy = Some(Instant::now());
        }
        if healthy.is_some() && router_lists(PUBLIC_PORT, workers + 1) {
            listed = Some(Instant::now());
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    let status = child.wait().map_err(|e| e.to_string())?;
    let took = t0.elapsed();
    if !status.success() {
        let mut err = String::new();
        if let Some(mut e) = child.stderr.take() {
            let _ = e.read_to_string(&mut err);
        }
        return Err(format!("scale-up apply failed: {err}"));
    }
    match (healthy, listed) {
        (Some(h), Some(l)) => Ok((l.saturating_duration_since(h), took)),
        _ => Err("the new worker was never listed".into()),
    }
}

struct Run {
    /// A worker added to the running Router: its first /health to the Router listing it.
    added: Duration,
    /// The scale-up apply.
    scale_up: Duration,
    timeline: Timeline,
    noop: Duration,
    probes: Duration,
    replace: Duration,
    destroy: Duration,
}

fn one_run(router: &Path, workers: usize, startup_delay_ms: u64) -> Result<Run, String> {
    let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
    let text = recipe_text(workers, 2048);
    let recipe = dir.path().join("bench.yaml");
    std::fs::write(&recipe, &text).map_err(|e| e.to_string())?;
    let env = Env {
        path: format!(
            "{}:{}",
            router.display(),
            std::env::var("PATH").unwrap_or_default()
        ),
        dir,
        recipe,
        deployment: format!("bench-apply-{workers}"),
        startup_delay_ms,
    };
    let ports = worker_ports(&text);
    assert_eq!(ports.len(), workers);
    let timeline = first_apply(&env, workers, &ports)?;
    // No-op applies on the healthy deployment (median of three), then the probes alone.
    let mut noops = Vec::new();
    let mut probes = Vec::new();
    for _ in 0..3 {
        let t = Instant::now();
        let out = env
            .srt(&env.apply_args(true))
            .output()
            .map_err(|e| e.to_string())?;
        noops.push(t.elapsed());
        let text = String::from_utf8_lossy(&out.stdout);
        if !out.status.success() || !text.contains("nothing to change") {
            return Err(format!(
                "no-op apply did something:\n{text}{}",
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        probes.push(probe_round(workers, &ports));
    }
    // One argument of the role changed: every worker is rolled, one at a time, through
    // the gates and the smoke check; the Router stays.
    std::fs::write(&env.recipe, recipe_text(workers, 4096)).map_err(|e| e.to_string())?;
    let t = Instant::now();
    let out = env
        .srt(&env.apply_args(true))
        .output()
        .map_err(|e| e.to_string())?;
    let replace = t.elapsed();
    if !out.status.success() {
        return Err(format!(
            "replacing apply failed:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    let (added, scale_up) = scale_up(&env, workers, 4096)?;
    let destroy = env.destroy();
    Ok(Run {
        added,
        scale_up,
        timeline,
        noop: median(noops),
        probes: median(probes),
        replace,
        destroy,
    })
}

fn opt_median(v: Vec<Option<Duration>>) -> String {
    let v: Vec<Duration> = v.into_iter().flatten().collect();
    if v.is_empty() {
        "n/a".into()
    } else {
        ms(median(v))
    }
}

fn main() {
    let options = common::Options::parse();
    let arg = |flag: &str| options.value(flag);
    let Some(router) = common::tool_dir("vllm-router") else {
        println!("apply benchmark skipped: vllm-router not found (run scripts/install-router.sh or set SRT_TOOLS_DIR)");
        return;
    };
    let sizes = options.workers(&[2, 16, 64]);
    let startup_delay_ms: u64 =
        arg("--startup-delay-ms").map_or(0, |d| d.parse().expect("--startup-delay-ms N"));
    let reps = options.reps(5);
    // With a delay, run i waits `delay + i * 1000 / reps` ms: the workers come up at
    // phases spread over one period of the Router's 1 s startup check, as they would in
    // real deployments, instead of at one phase that is always lucky or always unlucky.
    let delay_of = |run: usize| {
        if startup_delay_ms == 0 {
            0
        } else {
            startup_delay_ms + (run as u64 * 1000) / reps as u64
        }
    };
    let shown = if startup_delay_ms == 0 {
        "no startup delay".to_string()
    } else {
        format!(
            "startup delay {startup_delay_ms}-{} ms, spread over runs",
            delay_of(reps - 1)
        )
    };
    println!("srt apply benchmark: local executor, simulated workers ({shown}), real vllm-router; median of {reps} run(s), ms from the start of `srt apply`\n");
    println!("| workers | last worker healthy | Router lists all | gates passed | smoke passed | apply exits | gate latency (Router + srt) | no-op apply | one probe round | roll all | per rolled worker | scale up by 1 | added worker: healthy to routed | destroy |");
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for &w in &sizes {
        let mut runs = Vec::new();
        let mut failures = 0;
        while runs.len() < reps {
            match one_run(&router, w, delay_of(runs.len())) {
                Ok(r) => runs.push(r),
                Err(e) => {
                    // Other programs on this machine may hold a port for a while.
                    failures += 1;
                    eprintln!("run with {w} workers failed (attempt {failures}): {e}");
                    assert!(failures <= 3, "apply benchmark keeps failing");
                    std::thread::sleep(Duration::from_secs(2));
                }
            }
        }
        let tl = |f: fn(&Timeline) -> Option<Duration>| {
            runs.iter().map(|r| f(&r.timeline)).collect::<Vec<_>>()
        };
        let diff = |a: fn(&Timeline) -> Option<Duration>, b: fn(&Timeline) -> Option<Duration>| {
            runs.iter()
                .map(|r| Some(a(&r.timeline)?.saturating_sub(b(&r.timeline)?)))
                .collect::<Vec<_>>()
        };
        println!(
            "| {w} | {} | {} | {} | {} | {} | {} ({} + {}) | {} | {} | {} | {} | {} | {} | {} |",
            opt_median(tl(|t| t.healthy)),
            opt_median(tl(|t| t.router_ready)),
            opt_median(tl(|t| t.gates)),
            opt_median(tl(|t| t.ready)),
            ms(median(runs.iter().map(|r| r.timeline.exit).collect())),
            opt_median(diff(|t| t.gates, |t| t.healthy)),
            opt_median(diff(|t| t.router_ready, |t| t.healthy)),
            opt_median(diff(|t| t.gates, |t| t.router_ready)),
            ms(median(runs.iter().map(|r| r.noop).collect())),
            ms(median(runs.iter().map(|r| r.probes).collect())),
            ms(median(runs.iter().map(|r| r.replace).collect())),
            ms(median(runs.iter().map(|r| r.replace / w as u32).collect())),
            ms(median(runs.iter().map(|r| r.scale_up).collect())),
            ms(median(runs.iter().map(|r| r.added).collect())),
            ms(median(runs.iter().map(|r| r.destroy).collect())),
        );
    }
}
