//! Sweeps end to end, on simulated workers that take time to start (prefill slower than
//! decode) behind the real vllm-router:
//!
//! - a prefill/decode recipe swept over 4 decode settings and 3 concurrencies runs as
//!   successive applies in one deployment (`srt sweep`), against the same 12 points run
//!   as a fresh deployment each (apply, benchmark, destroy: what a job per point does):
//!   worker starts counted from the workers' own logs, wall time of each way;
//! - the results: a file per point, the summary's table and curves (each with its Pareto
//!   front), the plot as SVG and PNG, `srt sweep --results DIR`;
//! - a sweep killed between points resumes at the first unfinished point, without
//!   redoing the finished ones;
//! - a point whose benchmark fails is recorded with its reason, and `--keep-going` goes on.

mod e2e_support;

use e2e_support::{repo, serial, Env};
use std::path::Path;
use std::time::{Duration, Instant};

const PREFILL_START_MS: u64 = 3000;
const DECODE_START_MS: u64 = 1000;
const SEQS: [u32; 4] = [8, 16, 32, 64];
const CONCS: [u32; 3] = [1, 2, 4];

/// The P/D recipe, swept (`sweep: Some(block)`) or one point of it (`values`).
fn recipe(name: &str, seqs: &str, conc: &str, sweep: Option<&str>, extra: &str) -> String {
    let model = repo().join("tests/fixtures/tiny-model");
    let sweep = sweep.map(|s| format!("sweep:\n{s}")).unwrap_or_default();
    format!(
        r#"schema: 2
name: {name}
model:
  path: {model}
  served_name: tiny
resources:
  gpus_per_node: 2
frontend:
  type: vllm-router
  enable_multiple_frontends: false
roles:
  prefill:
    nodes: 1
    workers: 1
    gpus: 1
    args:
      max-model-len: 4096
    env:
      SRT_SIM_STARTUP_DELAY_MS: "{PREFILL_START_MS}"
      SRT_SIM_TOKEN_DELAY_MS: "5"
  decode:
    nodes: colocate
    workers: 1
    gpus: 1
    args:
      max-num-seqs: {seqs}
      max-model-len: {extra}
    env:
      SRT_SIM_STARTUP_DELAY_MS: "{DECODE_START_MS}"
      SRT_SIM_TOKEN_DELAY_MS: "5"
      SRT_SIM_DECODE_US_PER_SEQ: "500"
health_check:
  timeout_seconds: 60
  interval_seconds: 1
benchmark:
  type: sa-bench
  isl: 64
  osl: 8
  concurrencies: [{conc}]
  num_prompts_mult: 2
  num_warmup_mult: 0
  random_range_ratio: 0.0
{sweep}"#,
        model = model.display()
    )
}

fn list(values: &[u32]) -> String {
    format!(
        "[{}]",
        values
            .iter()
            .map(u32::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    )
}

/// Worker starts of a deployment, from its workers' logs: every start writes a marker.
fn worker_starts(env: &Env, deployment: &str) -> usize {
    let logs = env.deployment_dir(deployment).join("logs");
    let Ok(entries) = std::fs::read_dir(&logs) else {
        return 0;
    };
    entries
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("worker."))
        .map(|e| {
            std::fs::read_to_string(e.path())
                .unwrap_or_default()
                .matches("--- srt: starting ")
                .count()
        })
        .sum()
}

fn summary(dir: &Path) -> serde_json::Value {
    serde_json::from_str(&std::fs::read_to_string(dir.join("summary.json")).unwrap()).unwrap()
}

#[test]
fn a_sweep_restarts_only_what_its_points_change_and_beats_a_deployment_per_point() {
    let _g = serial();
    let env = Env::new();
    let block = format!("  seqs: {}\n  conc: {}\n", list(&SEQS), list(&CONCS));
    let file = env.recipe(
        "sweep.yaml",
        &recipe(
            "e2e-sweep",
            "\"{seqs}\"",
            "\"{conc}\"",
            Some(&block),
            "4096",
        ),
    );

    // The plan: every point, what it replaces, the cost both ways.
    let plan = env.ok(&["sweep", "-f", &file, "--simulate", "--plan"]);
    assert!(plan.contains("Sweep of 12 points"), "{plan}");
    assert_eq!(plan.matches("benchmark only").count(), 8, "{plan}");
    assert!(
        plan.contains(
            "replaces router[0], worker.decode[0].node[0]: 1 worker start (keeps 1 worker)"
        ),
        "{plan}"
    );
    assert!(
        plan.contains(
            "5 for the whole sweep in one deployment, 24 to run every point as a fresh deployment"
        ),
        "{plan}"
    );

    // Written with the concurrency outermost, every step would change the decode: the
    // plan runs the points by decode setting instead, and says so.
    let inner = format!("  conc: {}\n  seqs: {}\n", list(&CONCS), list(&SEQS));
    let other = env.recipe(
        "other-order.yaml",
        &recipe(
            "e2e-sweep",
            "\"{seqs}\"",
            "\"{conc}\"",
            Some(&inner),
            "4096",
        ),
    );
    let reordered = env.ok(&["sweep", "-f", &other, "--simulate", "--plan"]);
    assert!(
        reordered.contains(
            "Points reordered to restart less: 5 worker starts instead of 13 in the written order"
        ),
        "{reordered}"
    );

    let t = Instant::now();
    let out = env.ok(&["sweep", "-f", &file, "--simulate", "--auto-approve", "-q"]);
    let sweep_wall = t.elapsed();
    assert!(
        out.contains("Sweep: 12 of 12 points done, 0 failed"),
        "{out}"
    );
    let sweep_starts = worker_starts(&env, "e2e-sweep");
    env.destroy("e2e-sweep");

    // The same points, each a fresh deployment: apply (every worker starts), benchmark,
    // destroy.
    let t = Instant::now();
    for (i, (seqs, conc)) in SEQS
        .iter()
        .flat_map(|s| CONCS.iter().map(move |c| (s, c)))
        .enumerate()
    {
        let name = format!("e2e-fresh-{i}");
        let f = env.recipe(
            &format!("{name}.yaml"),
            &recipe(&name, &seqs.to_string(), &conc.to_string(), None, "4096"),
        );
        let out = env.apply(&f);
        assert!(out.contains("benchmark: passed"), "{out}");
        env.destroy(&name);
    }
    let fresh_wall = t.elapsed();
    let fresh_starts: usize = (0..12)
        .map(|i| worker_starts(&env, &format!("e2e-fresh-{i}")))
        .sum();
    eprintln!(
        "sweep: {sweep_starts} worker starts in {:.1} s; fresh deployments: {fresh_starts} worker starts in {:.1} s",
        sweep_wall.as_secs_f64(),
        fresh_wall.as_secs_f64()
    );
    // What the points keep is not started again: the first point starts both workers,
    // each new decode setting one decode, a new concurrency nothing.
    assert_eq!(sweep_starts, 2 + 3);
    assert_eq!(fresh_starts, 12 * 2);
    assert!(
        sweep_wall * 2 <= fresh_wall,
        "the sweep took {sweep_wall:?}, the deployments per point {fresh_wall:?}: not 2x less"
    );

    check_results(&env);
}

/// The results of the 12-point sweep: a file per point, the summary's curves and fronts,
/// the plot, `--results`.
fn check_results(env: &Env) {
    let dir = env.deployment_dir("e2e-sweep").join("sweep");
    let s = summary(&dir);
    assert_eq!(s["worker_starts"], 5);
    assert_eq!(s["fresh_worker_starts"], 24);
    let points = s["points"].as_array().unwrap();
    assert_eq!(points.len(), 12);
    for p in points {
        assert_eq!(p["status"], "done", "{p}");
        let file = dir.join(p["result"].as_str().unwrap());
        let levels: Vec<serde_json::Value> = std::fs::read_to_string(&file)
            .unwrap()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect();
        assert_eq!(levels.len(), 1, "{}", file.display());
        assert!(levels[0]["output_throughput"].as_f64().unwrap() > 0.0);
        assert_eq!(levels[0]["completed"], levels[0]["num_prompts"]);
    }
    // One curve per decode setting, its three concurrencies on it; its front is every
    // level no other level of the curve beats on both axes.
    let curves = s["curves"].as_array().unwrap();
    let labels: Vec<&str> = curves
        .iter()
        .map(|c| c["label"].as_str().unwrap())
        .collect();
    assert_eq!(labels, ["seqs=8", "seqs=16", "seqs=32", "seqs=64"]);
    let mut fronts = 0;
    for c in curves {
        let spots = c["spots"].as_array().unwrap();
        let concs: Vec<u64> = spots
            .iter()
            .map(|p| p["concurrency"].as_u64().unwrap())
            .collect();
        assert_eq!(concs, [1, 2, 4]);
        let at = |p: &serde_json::Value| {
            (
                p["per_user"].as_f64().unwrap(),
                p["per_gpu"].as_f64().unwrap(),
            )
        };
        for p in spots {
            let (u, g) = at(p);
            let beaten = spots.iter().any(|q| {
                let (qu, qg) = at(q);
                qu >= u && qg >= g && (qu > u || qg > g)
            });
            assert_eq!(p["front"].as_bool().unwrap(), !beaten, "{c}");
            fronts += usize::from(!beaten);
        }
    }
    let png = std::fs::read(dir.join("pareto.png")).unwrap();
    assert!(png.starts_with(b"\x89PNG\r\n\x1a\n") && png.len() > 10_000);
    let svg = std::fs::read_to_string(dir.join("pareto.svg")).unwrap();
    assert!(labels.iter().all(|l| svg.contains(l)), "{svg}");
    let table = env.ok(&["sweep", "--results", &dir.display().to_string()]);
    let rows: Vec<&str> = table
        .lines()
        .filter(|l| l.starts_with("e2e-sweep_"))
        .collect();
    assert_eq!(rows.len(), 12, "{table}");
    assert_eq!(
        rows.iter().filter(|r| r.ends_with('*')).count(),
        fronts,
        "{table}"
    );
}

#[test]
fn a_killed_sweep_resumes_at_its_first_unfinished_point() {
    resumes_after("e2e-resume-kill", nix::sys::signal::Signal::SIGKILL);
}

#[test]
fn an_interrupted_sweep_resumes_at_its_first_unfinished_point() {
    resumes_after("e2e-resume-int", nix::sys::signal::Signal::SIGINT);
}

/// Stop a sweep of 4 points by `signal` once two are recorded done, then run it again:
/// it goes on at the first unfinished point, and leaves the finished ones as they were.
fn resumes_after(d: &str, signal: nix::sys::signal::Signal) {
    let _g = serial();
    let env = Env::new();
    let block = "  seqs: [8, 16]\n  conc: [1, 2]\n";
    let file = env.recipe(
        "resume.yaml",
        &recipe(d, "\"{seqs}\"", "\"{conc}\"", Some(block), "4096"),
    );
    let mut child = env.spawn(&["sweep", "-f", &file, "--simulate", "--auto-approve", "-q"]);
    let done = |env: &Env| -> usize {
        if !env.state_path(d).exists() {
            return 0;
        }
        env.state(d)["sweep"]["points"]
            .as_object()
            .map_or(0, serde_json::Map::len)
    };
    let t = Instant::now();
    while done(&env) < 2 {
        assert!(
            t.elapsed() < Duration::from_secs(60),
            "no two points done in a minute"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    e2e_support::signal(child.id(), signal);
    let status = child.wait().unwrap();
    if signal == nix::sys::signal::Signal::SIGINT {
        // Stopped as apply stops: what ran is saved, exit 130.
        assert_eq!(status.code(), Some(130), "{status:?}");
    }
    let finished = done(&env);
    assert!(finished < 4, "the sweep finished before it was stopped");
    let dir = env.deployment_dir(d).join("sweep");
    let kept: Vec<(String, std::time::SystemTime)> =
        [format!("{d}_seqs8_conc1"), format!("{d}_seqs8_conc2")]
            .into_iter()
            .take(finished)
            .map(|n| {
                let f = dir.join(format!("{n}.jsonl"));
                let modified = std::fs::metadata(&f).unwrap().modified().unwrap();
                (n, modified)
            })
            .collect();

    let plan = env.ok(&["sweep", "-f", &file, "--simulate", "--plan"]);
    assert_eq!(plan.matches("done: skipped").count(), finished, "{plan}");
    let out = env.ok(&["sweep", "-f", &file, "--simulate", "--auto-approve", "-q"]);
    for k in 1..=4 {
        let ran = out.contains(&format!("=== Point {k}/4"));
        assert_eq!(
            ran,
            k > finished,
            "point {k} (finished before: {finished}):\n{out}"
        );
    }
    assert!(out.contains("Sweep: 4 of 4 points done, 0 failed"), "{out}");
    for (name, modified) in kept {
        let f = dir.join(format!("{name}.jsonl"));
        assert_eq!(
            std::fs::metadata(&f).unwrap().modified().unwrap(),
            modified,
            "{name} was run again"
        );
    }
    let s = summary(&dir);
    assert_eq!(s["points"].as_array().unwrap().len(), 4);
    env.destroy(d);
    // A destroyed deployment's sweep starts again from its first point.
    assert!(env.state(d)["sweep"].is_null(), "{}", env.state(d));
    let plan = env.ok(&["sweep", "-f", &file, "--simulate", "--plan"]);
    assert!(!plan.contains("done: skipped"), "{plan}");
}

#[test]
fn a_failed_point_is_recorded_and_keep_going_goes_on() {
    let _g = serial();
    let env = Env::new();
    // A decode context shorter than the prompts: every request of that point fails.
    let block = "  mml: [32, 4096]\n";
    let file = env.recipe(
        "fail.yaml",
        &recipe("e2e-sweep-fail", "8", "2", Some(block), "\"{mml}\""),
    );
    let out = env.srt(&["sweep", "-f", &file, "--simulate", "--auto-approve", "-q"]);
    let text = e2e_support::text(&out);
    assert_eq!(out.status.code(), Some(7), "{text}");
    assert!(
        text.contains("=== Point 1/2") && !text.contains("=== Point 2/2"),
        "{text}"
    );
    let state = env.state("e2e-sweep-fail");
    let first = &state["sweep"]["points"]["e2e-sweep-fail_mml32"];
    assert_eq!(first["outcome"], "failed", "{state}");
    assert!(
        first["reason"].as_str().unwrap().contains("benchmark"),
        "{first}"
    );

    let out = env.srt(&[
        "sweep",
        "-f",
        &file,
        "--simulate",
        "--auto-approve",
        "-q",
        "--keep-going",
    ]);
    let text = e2e_support::text(&out);
    assert_eq!(out.status.code(), Some(7), "{text}");
    assert!(text.contains("=== Point 2/2"), "{text}");
    let state = env.state("e2e-sweep-fail");
    assert_eq!(
        state["sweep"]["points"]["e2e-sweep-fail_mml4096"]["outcome"], "done",
        "{state}"
    );
    // A recipe without `sweep:` is not a sweep: said, and nothing runs.
    let plain = env.recipe(
        "plain.yaml",
        &recipe("e2e-sweep-plain", "8", "2", None, "4096"),
    );
    let out = env.srt(&["sweep", "-f", &plain, "--simulate", "--auto-approve"]);
    assert_eq!(out.status.code(), Some(64), "{}", e2e_support::text(&out));
    assert!(e2e_support::text(&out).contains("has no `sweep:` block"));
    let s = summary(&env.deployment_dir("e2e-sweep-fail").join("sweep"));
    let statuses: Vec<&str> = s["points"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["status"].as_str().unwrap())
        .collect();
    assert_eq!(statuses, ["failed", "done"]);
    env.destroy("e2e-sweep-fail");
}

/// A grid over parallel sizes on fixed GPUs has points that cannot run (TP4 on a worker
/// of 2): `srt sweep` skips them, says which and why, and runs the others, one that
/// leaves a GPU idle included (TP1 on 2, as srtctl runs it); `srt validate` reads the
/// first that fits. When none fits, nothing starts and the first point's problem is the
/// error.
#[test]
fn points_that_do_not_fit_their_gpus_are_skipped_and_said() {
    let _g = serial();
    let env = Env::new();
    let model = repo().join("tests/fixtures/tiny-model");
    let text = |name: &str, tps: &str| {
        format!(
            "schema: 2\nname: {name}\nmodel:\n  path: {}\n  served_name: tiny\n\
             resources: {{gpus_per_node: 2}}\nfrontend: {{type: vllm-router, enable_multiple_frontends: false}}\n\
             roles:\n  agg:\n    nodes: 1\n    workers: 1\n    gpus: 2\n    args:\n      \
             tensor-parallel-size: \"{{tp}}\"\n      max-model-len: 4096\n\
             health_check: {{timeout_seconds: 60, interval_seconds: 1}}\n\
             benchmark:\n  type: sa-bench\n  isl: 64\n  osl: 8\n  concurrencies: [1]\n  num_prompts_mult: 2\n  num_warmup_mult: 0\n\
             sweep:\n  tp: {tps}\n",
            model.display()
        )
    };
    let d = "e2e-sweep-unfit";
    let file = env.recipe("unfit.yaml", &text(d, "[4, 1, 2]"));
    let valid = e2e_support::text(&env.srt(&["validate", "-f", &file]));
    assert!(
        valid.contains("this is point 2 of 3 (tp=1), the first whose parallel sizes fit its GPUs: 1 before it do not (tp=4: ")
            && valid.contains("srt::recipe::idle_gpus"),
        "{valid}"
    );
    let plan = env.ok(&["sweep", "-f", &file, "--simulate", "--plan"]);
    assert!(
        plan.contains("Skipped: 1 point whose parallel sizes do not fit their GPUs:")
            && plan.contains(&format!("  - {d}_tp4 (tp=4): "))
            && plan.contains(&format!("1. {d}_tp1 (tp=1)"))
            && plan.contains(&format!("2. {d}_tp2 (tp=2)")),
        "{plan}"
    );
    let out = env.ok(&["sweep", "-f", &file, "--simulate", "--auto-approve", "-q"]);
    assert!(
        out.contains("2 of 2 points done, 0 failed")
            && out.contains("(1 skipped: they do not fit their GPUs)"),
        "{out}"
    );
    let s = summary(&env.deployment_dir(d).join("sweep"));
    let statuses: Vec<(&str, &str)> = s["points"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["name"].as_str().unwrap(), p["status"].as_str().unwrap()))
        .collect();
    assert_eq!(
        statuses,
        [
            ("e2e-sweep-unfit_tp1", "done"),
            ("e2e-sweep-unfit_tp2", "done"),
            ("e2e-sweep-unfit_tp4", "unfit")
        ]
    );
    env.destroy(d);

    let none = env.recipe("none.yaml", &text("e2e-sweep-none", "[4]"));
    let out = env.srt(&["sweep", "-f", &none, "--simulate", "--auto-approve"]);
    let shown = e2e_support::text(&out);
    assert_ne!(out.status.code(), Some(0), "{shown}");
    assert!(
        shown.contains("no point of the sweep's 1 fits its GPUs")
            && shown.contains("srt::recipe::parallel_size"),
        "{shown}"
    );
    assert!(!env.state_path("e2e-sweep-none").exists());
}
