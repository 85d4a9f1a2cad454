//! Apply overhead behind NVIDIA Dynamo's frontend on the local executor: `cargo bench
//! --bench apply_dynamo` (or `scripts/bench.sh`).
//!
//! For N aggregated workers (the real Dynamo mocker under `--simulate`, the real
//! frontend, the deployment's own etcd) it runs `srt apply` and records, from the start
//! of the command (median of repeated runs):
//!
//! - **all listed**: when the frontend's `/health` first lists all N `generate`
//!   instances of the deployment's namespace (polled by this benchmark every
//!   millisecond): the last worker registered;
//! - **gates passed**: when srt reports its last readiness gate passed (`gate.model`),
//!   and **gate latency**: gates passed minus all listed (target: under 100 ms);
//! - **apply exits**;
//! - **roll all**: `srt apply` after one argument of the role changed: every worker
//!   replaced one at a time (SIGTERM, it deregisters and finishes its requests, started
//!   again, serving once the frontend lists it), the frontend kept; and that time per
//!   rolled worker, **beyond its start-up**: minus one worker's start-up alone, measured
//!   by adding one worker to the running deployment (from that apply's start to the
//!   frontend listing it);
//! - **destroy**.
//!
//! Needs ai-dynamo (`scripts/install-dynamo.sh`: its venv and the tiny model under
//! `$SRT_TOOLS_DIR`, else `.tools`) and etcd; without them it says so and exits. Options
//! (after `--`): `--smoke` (2 workers, one run; the default without `--bench`, i.e. under
//! `cargo test --all-targets`), `--workers 4,16`, `--reps N`.

mod common;

use common::{median, tools};
use std::io::{BufRead, BufReader, Read};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The frontend's public port in these recipes (away from the examples' 8000).
const PUBLIC_PORT: u16 = 18100;

/// The recipe of `workers` workers of one GPU, on a node with room for one more.
fn recipe_text(name: &str, workers: usize, max_model_len: u32) -> String {
    format!(
        "schema: 2
name: {name}
model:
  path: {model}
  served_name: tiny
resources:
  gpus_per_node: {gpus}
frontend:
  type: dynamo
  enable_multiple_frontends: false
  port: {PUBLIC_PORT}
roles:
  agg:
    nodes: 1
    workers: {workers}
    gpus: 1
    args:
      max-model-len: {max_model_len}
health_check:
  timeout_seconds: 300
rollout:
  min_ready_seconds: 0
",
        model = tools().join("models/tiny").display(),
        gpus = workers + 1
    )
}

/// The `generate` instances of `namespace` the frontend lists.
fn listed(namespace: &str) -> usize {
    let Some(v) =
        common::get(PUBLIC_PORT, "/health").and_then(|(_, body)| common::json_body(&body))
    else {
        return 0;
    };
    v["instances"].as_array().map_or(0, |a| {
        a.iter()
            .filter(|i| i["namespace"] == namespace && i["endpoint"] == "generate")
            .count()
    })
}

struct Env {
    dir: tempfile::TempDir,
    path: String,
    name: String,
}

impl Env {
    fn srt(&self, args: &[&str]) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_srt"));
        c.args(args)
            .current_dir(self.dir.path())
            .env("PATH", &self.path)
            .env_remove("SRT_STATE_DIR")
            .stdin(Stdio::null());
        c
    }

    fn recipe(&self, workers: usize, max_model_len: u32) -> String {
        let p = self.dir.path().join("r.yaml");
        std::fs::write(&p, recipe_text(&self.name, workers, max_model_len)).unwrap();
        p.display().to_string()
    }

    /// `srt apply`, timed: (when N instances were first listed, last gate passed, exit).
    fn apply(&self, recipe: &str, workers: usize) -> Result<[Option<Duration>; 3], String> {
        let t0 = Instant::now();
        let args = ["apply", "-f", recipe, "--simulate", "--auto-approve"];
        let mut child = self
            .srt(&args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot run srt: {e}"))?;
        let done = Arc::new(AtomicBool::new(false));
        let all_listed = Arc::new(Mutex::new(None));
        let poller = {
            let (done, all_listed, ns) = (done.clone(), all_listed.clone(), self.name.clone());
            std::thread::spawn(move || {
                while !done.load(Ordering::Relaxed) {
                    if listed(&ns) >= workers {
                        *all_listed.lock().unwrap() = Some(t0.elapsed());
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(1));
                }
            })
        };
        let mut gates = None;
        let mut lines = Vec::new();
        for line in BufReader::new(child.stdout.take().expect("piped")).lines() {
            let Ok(line) = line else { break };
            if line.starts_with("gate.") && line.contains(": passed") {
                gates = Some(t0.elapsed());
            }
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
        let listed_at = *all_listed.lock().unwrap();
        Ok([listed_at, gates, Some(exit)])
    }

    fn destroy(&self) -> Duration {
        let t = Instant::now();
        let _ = self
            .srt(&["destroy", &self.name, "--auto-approve"])
            .output();
        t.elapsed()
    }
}

impl Drop for Env {
    fn drop(&mut self) {
        if self.dir.path().join(".srt").join(&self.name).exists() {
            self.destroy();
        }
    }
}

/// One run: first apply, roll, destroy.
struct Run {
    listed: Duration,
    gates: Duration,
    exit: Duration,
    roll: Duration,
    /// One worker added: from the apply's start to the frontend listing it.
    one_start: Duration,
    destroy: Duration,
}

fn one_run(path: &str, workers: usize) -> Result<Run, String> {
    let env = Env {
        dir: tempfile::tempdir().map_err(|e| e.to_string())?,
        path: path.to_string(),
        name: format!("bench-dyn-{workers}"),
    };
    let first = env.apply(&env.recipe(workers, 2048), workers)?;
    let [Some(listed), Some(gates), Some(exit)] = first else {
        return Err(format!(
            "the first apply did not list every worker: {first:?}"
        ));
    };
    let t = Instant::now();
    env.apply(&env.recipe(workers, 1024), workers)?;
    let roll = t.elapsed();
    let grown = env.apply(&env.recipe(workers + 1, 1024), workers + 1)?;
    let Some(one_start) = grown[0] else {
        return Err("the added worker was never listed".into());
    };
    let destroy = env.destroy();
    Ok(Run {
        listed,
        gates,
        exit,
        roll,
        one_start,
        destroy,
    })
}

fn ms(d: Duration) -> String {
    format!("{} ms", common::ms(d))
}

fn main() {
    let options = common::Options::parse();
    let workers = options.workers(&[4, 16]);
    let reps = options.reps(3);
    let venv = tools().join("dynamo-venv/bin");
    if !venv.join("python3").exists() || !tools().join("models/tiny/config.json").exists() {
        println!("apply_dynamo: ai-dynamo is not installed (scripts/install-dynamo.sh); skipped");
        return;
    }
    let path = format!(
        "{}:{}:{}",
        venv.display(),
        tools().join("bin").display(),
        std::env::var("PATH").unwrap_or_default()
    );
    println!("| workers | all listed | gates passed | gate latency | apply exits | roll all | per rolled worker, beyond its start-up | destroy |");
    println!("|---|---|---|---|---|---|---|---|");
    for &n in &workers {
        let mut runs = Vec::new();
        for _ in 0..reps {
            match one_run(&path, n) {
                Ok(r) => runs.push(r),
                Err(e) => {
                    eprintln!("apply_dynamo: {n} workers: {e}");
                    std::process::exit(1);
                }
            }
        }
        let m = |f: fn(&Run) -> Duration| median(runs.iter().map(f).collect());
        let latency = m(|r| r.gates.saturating_sub(r.listed));
        // A worker's own start-up, alone: one worker added to the running deployment.
        let startup = m(|r| r.one_start);
        let per_worker = m(|r| r.roll) / n as u32;
        println!(
            "| {n} | {} | {} | {} | {} | {} | {} ({} each, minus a start-up of {}) | {} |",
            ms(m(|r| r.listed)),
            ms(m(|r| r.gates)),
            ms(latency),
            ms(m(|r| r.exit)),
            ms(m(|r| r.roll)),
            ms(per_worker.saturating_sub(startup)),
            ms(per_worker),
            ms(startup),
            ms(m(|r| r.destroy)),
        );
    }
}
