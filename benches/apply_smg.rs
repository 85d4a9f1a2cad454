//! A prefill/decode roll behind the Shepherd Model Gateway on the local executor:
//! `cargo bench --bench apply_smg` (or `scripts/bench.sh`).
//!
//! For one prefill and N decode workers (the vLLM simulator under `--simulate`, with
//! `SRT_SIM_STARTUP_DELAY_MS=0`) behind the real `smg` in its prefill/decode mode (srt
//! starts it empty and adds each worker in its role through the admin API), it records
//! (median of repeated runs):
//!
//! - **first apply**: from the start of `srt apply` to srt's last gate passed, and to
//!   its exit;
//! - **roll all decodes**: `srt apply` after the decode role's `max-model-len` changed:
//!   every decode replaced one at a time (taken out of the gateway, drained, stopped,
//!   started, added back, held for `rollout.min_ready_seconds`), the gateway kept (its
//!   pid in the state file is the same before and after); and the time **per rolled
//!   unit beyond its start-up**: the roll over N, minus one decode's start-up alone,
//!   measured by scaling the decode role up by one on the running deployment (from that
//!   apply's start until the gateway's `GET /workers`, polled every 5 ms, lists the new
//!   worker `ready`);
//! - **destroy**: `srt destroy` of the deployment.
//!
//! What it shows (docs/performance.md): a rolled decode costs about 6 s beyond its
//! start-up, smg's 5 s and `rollout.min_ready_seconds` (1 s here). The gateway keeps a
//! removed worker `draining` for 5 s and refuses its URL until then, and a rolled worker
//! keeps its URL, so its replacement, started within milliseconds, waits that out before
//! it is added back and held (with `min_ready_seconds: 0` a unit took 5.0 s). Destroy
//! is about 5 s too: the gateway's own shutdown on SIGTERM.
//!
//! Needs `smg` (`scripts/install-smg.sh`): looked up in `$SRT_TOOLS_DIR/bin`,
//! `.tools/bin`, then `PATH`; without it the benchmark says so and exits. Options (after
//! `--`): `--smoke` (2 decodes, one run; the default without `--bench`, i.e. under
//! `cargo test --all-targets`), `--workers 2,8` (decodes), `--reps N` (3 by default).
//! `SRT_BENCH_SRT=/path/srt` measures another build of srt (with its `srt-vllm-sim`
//! next to it). The gateway listens on port 18200; each run's state is in a scratch
//! directory, and what a run started is destroyed when it ends, fails or panics.

mod common;

use common::{get, median, ms};
use std::io::{BufRead, BufReader, Read};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The gateway's public port in these recipes (away from the examples' 8000 and the
/// other benchmarks' 18000 and 18100).
const PUBLIC_PORT: u16 = 18200;

/// How often this benchmark asks the gateway for its workers.
const POLL: Duration = Duration::from_millis(5);

/// The recipe of deployment `name`: one prefill and `decodes` decode workers of one GPU
/// each over NIXL, on one node with room for one more decode.
fn recipe_text(name: &str, decodes: usize, max_model_len: u32, room: usize) -> String {
    format!(
        "schema: 2
name: {name}
model:
  path: /models/tiny
  served_name: tiny
resources:
  gpus_per_node: {gpus}
engine:
  type: vllm
  connector: nixl
frontend:
  type: smg
  enable_multiple_frontends: false
  port: {PUBLIC_PORT}
  args:
    prefill-policy: round_robin
    decode-policy: round_robin
roles:
  prefill:
    nodes: 1
    workers: 1
    gpus: 1
  decode:
    nodes: colocate
    workers: {decodes}
    gpus: 1
    args:
      max-model-len: {max_model_len}
health_check:
  timeout_seconds: 120
rollout:
  min_ready_seconds: 1
",
        gpus = room + 2
    )
}

/// The HTTP ports of the recipe's decode workers on the local executor.
fn decode_ports(text: &str) -> Vec<u16> {
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
            p.worker.as_ref().is_some_and(|w| {
                w.role == srt::recipe::RoleKind::Decode && w.advertised_url.is_some()
            })
        })
        .filter_map(|p| p.ports.get("http").map(|b| b.base))
        .collect()
}

/// The gateway's entries: (worker type, status, URL) of each.
fn gateway_workers() -> Vec<(String, String, String)> {
    let Some(v) = get(PUBLIC_PORT, "/workers").and_then(|(_, b)| common::json_body(&b)) else {
        return Vec::new();
    };
    let field = |w: &serde_json::Value, k: &str| w[k].as_str().unwrap_or_default().to_string();
    v["workers"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|w| (field(w, "worker_type"), field(w, "status"), field(w, "url")))
        .collect()
}

/// `ready` entries of the gateway by role: (prefill, decode).
fn ready_by_role() -> (usize, usize) {
    let listed = gateway_workers();
    let ready = |role: &str| {
        listed
            .iter()
            .filter(|(t, s, _)| t == role && s == "ready")
            .count()
    };
    (ready("prefill"), ready("decode"))
}

/// A running `srt apply`, its output read as it comes (each stdout line with its time
/// from the start); on drop (a failed or panicking run) it is interrupted and waited
/// for, so that the destroy after it finds the state unlocked.
struct Running {
    child: Child,
    stdout: Option<std::thread::JoinHandle<Vec<(Duration, String)>>>,
    stderr: Option<std::thread::JoinHandle<String>>,
}

impl Running {
    fn spawn(mut c: Command, t0: Instant) -> Result<Running, String> {
        let mut child = c
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot run srt: {e}"))?;
        let out = child.stdout.take().expect("piped");
        let mut err = child.stderr.take().expect("piped");
        // Rust's stdout is line-buffered: a progress line arrives when srt prints it.
        let stdout = std::thread::spawn(move || {
            BufReader::new(out)
                .lines()
                .map_while(Result::ok)
                .map(|line| (t0.elapsed(), line))
                .collect()
        });
        let stderr = std::thread::spawn(move || {
            let mut s = String::new();
            let _ = err.read_to_string(&mut s);
            s
        });
        Ok(Running {
            child,
            stdout: Some(stdout),
            stderr: Some(stderr),
        })
    }

    /// Its exit: the stdout lines with their times, or what it printed if it failed.
    fn finish(mut self) -> Result<Vec<(Duration, String)>, String> {
        let status = self.child.wait().map_err(|e| e.to_string())?;
        let lines = self
            .stdout
            .take()
            .map(|h| h.join().unwrap_or_default())
            .unwrap_or_default();
        let err = self
            .stderr
            .take()
            .map(|h| h.join().unwrap_or_default())
            .unwrap_or_default();
        if status.success() {
            Ok(lines)
        } else {
            Err(format!(
                "srt apply failed ({status}):\n{}\n{err}",
                text(&lines)
            ))
        }
    }
}

impl Drop for Running {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let pid = nix::unistd::Pid::from_raw(self.child.id() as i32);
            let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
            let _ = self.child.wait();
        }
    }
}

/// The lines of an output, joined.
fn text(lines: &[(Duration, String)]) -> String {
    lines
        .iter()
        .map(|(_, l)| l.as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

/// One run's scratch directory and deployment; destroyed on drop if still there.
struct Env {
    dir: tempfile::TempDir,
    path: String,
    name: String,
}

impl Env {
    fn srt(&self, args: &[&str]) -> Command {
        let mut c = Command::new(common::srt_program());
        c.args(args)
            .current_dir(self.dir.path())
            .env("PATH", &self.path)
            .env("SRT_SIM_STARTUP_DELAY_MS", "0")
            .env_remove("SRT_STATE_DIR")
            .stdin(Stdio::null());
        c
    }

    /// Writes the recipe of `decodes` decodes (on a node with room for `room`).
    fn recipe(&self, decodes: usize, max_model_len: u32, room: usize) -> PathBuf {
        let p = self.dir.path().join("bench.yaml");
        let text = recipe_text(&self.name, decodes, max_model_len, room);
        std::fs::write(&p, text).expect("write the recipe");
        p
    }

    /// `srt apply` of `recipe`, started at `t0`.
    fn start_apply(&self, recipe: &Path, t0: Instant) -> Result<Running, String> {
        let recipe = recipe.to_str().expect("utf-8 path");
        let c = self.srt(&["apply", "-f", recipe, "--simulate", "--auto-approve"]);
        Running::spawn(c, t0)
    }

    /// The gateway's pid, as the state file records it.
    fn gateway_pid(&self) -> Result<u64, String> {
        let path = self
            .dir
            .path()
            .join(".srt")
            .join(&self.name)
            .join("state.json");
        let text =
            std::fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        let v: serde_json::Value = serde_json::from_str(&text).map_err(|e| e.to_string())?;
        v["resources"]["router[0]"]["runtime"]["pid"]
            .as_u64()
            .ok_or_else(|| "the state records no gateway pid".to_string())
    }

    fn destroy(&self) -> Result<Duration, String> {
        let t = Instant::now();
        let out = self
            .srt(&["destroy", &self.name, "--auto-approve"])
            .output()
            .map_err(|e| e.to_string())?;
        let took = t.elapsed();
        if !out.status.success() {
            return Err(format!(
                "srt destroy failed:\n{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        Ok(took)
    }
}

impl Drop for Env {
    fn drop(&mut self) {
        if self.dir.path().join(".srt").join(&self.name).exists() {
            if let Err(e) = self.destroy() {
                eprintln!("apply_smg: {e}");
            }
        }
    }
}

/// One run's figures.
struct Run {
    gates: Duration,
    exit: Duration,
    roll: Duration,
    /// One decode added to the running deployment: from the apply's start to the
    /// gateway listing it `ready`.
    one_start: Duration,
    destroy: Duration,
}

/// The first apply: (last gate passed, exit), from the command's start.
fn first_apply(env: &Env, recipe: &Path) -> Result<(Duration, Duration), String> {
    let t0 = Instant::now();
    let lines = env.start_apply(recipe, t0)?.finish()?;
    let exit = t0.elapsed();
    let gates = lines
        .iter()
        .filter(|(_, l)| l.starts_with("gate.") && l.contains(": passed"))
        .map(|&(at, _)| at)
        .max()
        .ok_or_else(|| format!("no gate passed:\n{}", text(&lines)))?;
    Ok((gates, exit))
}

fn one_run(path: &str, decodes: usize) -> Result<Run, String> {
    let env = Env {
        dir: tempfile::tempdir().map_err(|e| e.to_string())?,
        path: path.to_string(),
        name: format!("bench-smg-{decodes}"),
    };
    let room = decodes + 1;
    let (gates, exit) = first_apply(&env, &env.recipe(decodes, 2048, room))?;
    if ready_by_role() != (1, decodes) {
        return Err(format!(
            "after the first apply the gateway lists {:?} ready (prefill, decode)",
            ready_by_role()
        ));
    }
    let gateway = env.gateway_pid()?;

    // The decode role's args changed: every decode rolls, one at a time.
    let t = Instant::now();
    let out = text(
        &env.start_apply(&env.recipe(decodes, 1024, room), t)?
            .finish()?,
    );
    let roll = t.elapsed();
    if !out.contains(&format!("0 created, {decodes} replaced, 0 destroyed")) {
        return Err(format!("the roll did not replace every decode:\n{out}"));
    }
    if env.gateway_pid()? != gateway {
        return Err(format!("the roll restarted the gateway:\n{out}"));
    }

    // One decode more: its start-up alone, to the gateway routing to it.
    let recipe = env.recipe(decodes + 1, 1024, room);
    let before = decode_ports(&recipe_text(&env.name, decodes, 1024, room));
    let new: Vec<String> = decode_ports(&recipe_text(&env.name, decodes + 1, 1024, room))
        .into_iter()
        .filter(|p| !before.contains(p))
        .map(|p| format!(":{p}"))
        .collect();
    let [new] = &new[..] else {
        return Err(format!("scaling up adds one decode, not {new:?}"));
    };
    let t = Instant::now();
    let running = env.start_apply(&recipe, t)?;
    let mut one_start = None;
    while t.elapsed() < Duration::from_secs(60) {
        let listed = gateway_workers();
        if listed
            .iter()
            .any(|(kind, status, url)| kind == "decode" && status == "ready" && url.ends_with(new))
        {
            one_start = Some(t.elapsed());
            break;
        }
        std::thread::sleep(POLL);
    }
    let out = text(&running.finish()?);
    let one_start =
        one_start.ok_or_else(|| format!("the gateway never listed the new decode:\n{out}"))?;
    if env.gateway_pid()? != gateway {
        return Err(format!("scaling up restarted the gateway:\n{out}"));
    }

    let destroy = env.destroy()?;
    Ok(Run {
        gates,
        exit,
        roll,
        one_start,
        destroy,
    })
}

fn main() {
    let options = common::Options::parse();
    let Some(smg) = common::tool_dir("smg") else {
        println!("apply_smg benchmark skipped: smg not found (run scripts/install-smg.sh or set SRT_TOOLS_DIR)");
        return;
    };
    let decodes = options.workers(&[8]);
    let reps = options.reps(3);
    let path = format!(
        "{}:{}",
        smg.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    println!("srt apply benchmark behind smg (prefill/decode): local executor, 1 simulated prefill and N simulated decodes (no startup delay), real smg; median of {reps} run(s), ms\n");
    println!("| decodes | first apply: gates passed | first apply: exits | roll all decodes | per rolled decode | one decode's start-up alone | per rolled decode, beyond its start-up | destroy |");
    println!("|---:|---:|---:|---:|---:|---:|---:|---:|");
    for &n in &decodes {
        let mut runs = Vec::new();
        let mut failures = 0;
        while runs.len() < reps {
            match one_run(&path, n) {
                Ok(r) => runs.push(r),
                Err(e) => {
                    // Other programs on this machine may hold a port for a while.
                    failures += 1;
                    eprintln!("apply_smg: {n} decodes failed (attempt {failures}): {e}");
                    assert!(failures <= 2, "apply_smg keeps failing");
                    std::thread::sleep(Duration::from_secs(2));
                }
            }
        }
        let m = |f: fn(&Run) -> Duration| median(runs.iter().map(f).collect());
        let per_unit = m(|r| r.roll) / n as u32;
        // A decode's own start-up, alone: one decode added to the running deployment.
        let startup = m(|r| r.one_start);
        println!(
            "| {n} | {} | {} | {} | {} | {} | {} | {} |",
            ms(m(|r| r.gates)),
            ms(m(|r| r.exit)),
            ms(m(|r| r.roll)),
            ms(per_unit),
            ms(startup),
            ms(per_unit.saturating_sub(startup)),
            ms(m(|r| r.destroy)),
        );
    }
}
