//! End to end on the real SLURM test cluster (`scripts/slurm-cluster.sh`: nodes n1 to n4
//! with 4 fake GPUs each, each node in its own network namespace with its own IP), with
//! the real `vllm-router` and the vLLM simulator as workers.
//!
//! `scripts/test.sh` starts the cluster, exports its facts (`SRT_SLURM_*`) and sets
//! `SRT_SLURM_REQUIRED=1`; without a cluster these tests say so and pass, unless it is
//! required. Scenarios may take every node of the cluster, so they run one at a time.
//! A deployment's allocations land where the scheduler puts them: its Router listens on
//! its node 0's host (read from the state), reached at that node's IP, never 127.0.0.1.

mod e2e_support;

use e2e_support::load::assert_no_failures;
use e2e_support::{repo, tools_dir, tools_path, with_client};
use std::collections::{BTreeMap, BTreeSet};
use std::process::{Command, Output};
use std::sync::Mutex;
use std::time::{Duration, Instant};

static SERIAL: Mutex<()> = Mutex::new(());

/// One scenario at a time: they may take every node of the cluster.
fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The cluster, if it has `nodes` nodes at least; a scenario that needs more says so
/// and is skipped.
fn cluster_of(nodes: usize, scenario: &str) -> Option<Cluster> {
    let c = cluster()?;
    if c.ips.len() < nodes {
        eprintln!("{scenario}: skipped");
        return None;
    }
    Some(c)
}

/// The plan of `recipe` shows no change (exit 0 of `--detailed-exitcode`).
fn assert_no_change(env: &Env, recipe: &str) {
    let plan = env.srt(&["plan", "-f", recipe, "--simulate", "--detailed-exitcode"]);
    assert_eq!(plan.status.code(), Some(0), "{}", text(&plan));
}

/// The running test cluster's facts.
struct Cluster {
    partition: String,
    iface: String,
    gpus: u32,
    ips: Vec<String>,
}

fn cluster() -> Option<Cluster> {
    let mut vars: std::collections::HashMap<String, String> = std::env::vars()
        .filter(|(k, _)| k.starts_with("SRT_SLURM_"))
        .collect();
    if !vars.contains_key("SRT_SLURM_PARTITION") {
        // A cluster started by hand: its env file.
        if let Ok(text) = std::fs::read_to_string("/run/srt-slurm/env") {
            for line in text.lines() {
                if let Some((k, v)) = line.trim_start_matches("export ").split_once('=') {
                    vars.entry(k.to_string()).or_insert_with(|| v.to_string());
                }
            }
        }
    }
    let required = std::env::var_os("SRT_SLURM_REQUIRED").is_some();
    let Some(partition) = vars.get("SRT_SLURM_PARTITION").cloned() else {
        assert!(
            !required,
            "SRT_SLURM_REQUIRED is set but no SLURM test cluster is running (scripts/slurm-cluster.sh start)"
        );
        eprintln!("no SLURM test cluster (scripts/slurm-cluster.sh start): skipped");
        return None;
    };
    let ips: Vec<String> = vars["SRT_SLURM_NODE_IPS"]
        .split(',')
        .map(str::to_string)
        .collect();
    assert!(ips.len() >= 2, "the SLURM tests need two nodes: {ips:?}");
    Some(Cluster {
        partition,
        iface: vars["SRT_SLURM_IFACE"].clone(),
        gpus: vars["SRT_SLURM_GPUS_PER_NODE"].parse().unwrap(),
        ips,
    })
}

struct Env {
    dir: tempfile::TempDir,
    path: String,
    cluster: Cluster,
}

impl Env {
    /// A deployment directory with the test cluster's profile as `srt-cluster.yaml`
    /// (found by convention, no `--cluster` needed).
    fn new(cluster: Cluster) -> Env {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("srt-cluster.yaml"),
            profile(&cluster, "allocation_timeout_seconds: 60\n"),
        )
        .unwrap();
        let path = tools_path();
        Env { dir, path, cluster }
    }

    /// [`Env::new`], with the ai-dynamo venv first on `PATH` (the frontend, etcd's
    /// client and the mocker come from it).
    fn dynamo(cluster: Cluster) -> Env {
        let venv = tools_dir().join("dynamo-venv/bin");
        assert!(
            venv.join("python3").exists(),
            "ai-dynamo is not installed: run scripts/install-dynamo.sh (the test command does)"
        );
        let mut env = Env::new(cluster);
        env.path = format!("{}:{}", venv.display(), env.path);
        env
    }

    fn file(&self, name: &str, text: &str) -> String {
        let p = self.dir.path().join(name);
        std::fs::write(&p, text).unwrap();
        p.display().to_string()
    }

    fn command(&self, args: &[&str]) -> Command {
        let mut c = Command::new(env!("CARGO_BIN_EXE_srt"));
        c.args(args)
            .current_dir(self.dir.path())
            .env("PATH", &self.path)
            .env("SRT_SIM_STARTUP_DELAY_MS", "200")
            .env_remove("SRT_STATE_DIR")
            .env_remove("SRT_CLUSTER")
            .env_remove("SLURM_JOB_ID")
            .stdin(std::process::Stdio::null());
        c
    }

    fn srt(&self, args: &[&str]) -> Output {
        self.command(args).output().unwrap()
    }

    fn ok(&self, args: &[&str]) -> String {
        let out = self.srt(args);
        let text = text(&out);
        assert!(
            out.status.success(),
            "srt {args:?} failed ({:?}):\n{text}",
            out.status.code()
        );
        text
    }

    /// The deployment's state as srt reads it (`state.json` with the journal replayed).
    fn state(&self, deployment: &str) -> serde_json::Value {
        let store = srt::state::StateStore::new(self.dir.path().join(".srt").join(deployment));
        serde_json::to_value(store.load().unwrap().expect("the deployment has state")).unwrap()
    }

    /// The runtime of each allocation of a deployment, by address.
    fn allocations(&self, deployment: &str) -> BTreeMap<String, serde_json::Value> {
        self.state(deployment)["resources"]
            .as_object()
            .unwrap()
            .iter()
            .filter(|(_, r)| r["kind"] == "allocation")
            .map(|(a, r)| (a.clone(), r["runtime"].clone()))
            .collect()
    }

    /// The job ids of a deployment's allocations, sorted.
    fn jobs(&self, deployment: &str) -> Vec<u64> {
        let mut jobs: Vec<u64> = self
            .allocations(deployment)
            .values()
            .filter_map(|rt| rt["job_id"].as_u64())
            .collect();
        jobs.sort_unstable();
        jobs
    }

    fn runtime(&self, deployment: &str, address: &str) -> serde_json::Value {
        self.state(deployment)["resources"][address]["runtime"].clone()
    }

    fn step(&self, deployment: &str, address: &str) -> (u64, u64) {
        let rt = self.runtime(deployment, address);
        (
            rt["job_id"]
                .as_u64()
                .unwrap_or_else(|| panic!("{address}: {rt}")),
            rt["step_id"]
                .as_u64()
                .unwrap_or_else(|| panic!("{address}: {rt}")),
        )
    }

    /// The host and IPv4 address plan node `n` of a deployment runs on: its
    /// allocation's (each allocation is a job the scheduler places where it likes).
    fn node(&self, deployment: &str, n: usize) -> (String, String) {
        for rt in self.allocations(deployment).values() {
            let slots: Vec<u64> = match rt["slots"].as_array() {
                Some(s) => s.iter().filter_map(serde_json::Value::as_u64).collect(),
                None => (0..rt["nodes"].as_array().map_or(0, Vec::len) as u64).collect(),
            };
            if let Some(at) = slots.iter().position(|&s| s == n as u64) {
                return (
                    rt["nodes"][at].as_str().unwrap().to_string(),
                    rt["node_ips"][at].as_str().unwrap().to_string(),
                );
            }
        }
        panic!("no allocation of {deployment} holds node {n}")
    }

    fn host(&self, deployment: &str, n: usize) -> String {
        self.node(deployment, n).0
    }

    fn ip(&self, deployment: &str, n: usize) -> String {
        self.node(deployment, n).1
    }

    /// The public URL of this test's one deployment: port 8000 on its node 0.
    fn router(&self) -> String {
        let deployments: Vec<String> = std::fs::read_dir(self.dir.path().join(".srt"))
            .unwrap()
            .flatten()
            .filter(|e| e.path().join("state.json").exists())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(deployments.len(), 1, "{deployments:?}");
        format!("http://{}:8000", self.ip(&deployments[0], 0))
    }
}

/// A scenario that fails leaves nothing to the next one: every job its state records
/// is cancelled (one that passed destroyed its deployments: nothing is recorded).
impl Drop for Env {
    fn drop(&mut self) {
        let Ok(entries) = std::fs::read_dir(self.dir.path().join(".srt")) else {
            return;
        };
        for entry in entries.flatten() {
            let store = srt::state::StateStore::new(entry.path());
            let Ok(Some(state)) = store.load() else {
                continue;
            };
            for r in state.resources.values() {
                if let Some(srt::state::Runtime::Slurm { job_id, .. }) = &r.runtime {
                    let _ = Command::new("scancel").arg(job_id.to_string()).output();
                }
            }
        }
    }
}

fn profile(c: &Cluster, extra: &str) -> String {
    format!(
        "executor: slurm\npartition: {}\ngpus_per_node: {}\nnetwork_interface: {}\nstop_grace_seconds: 5\n{extra}",
        c.partition, c.gpus, c.iface
    )
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn example(name: &str) -> String {
    std::fs::read_to_string(repo().join("examples").join(name)).unwrap()
}

/// Run a scheduler command, returning stdout.
fn slurm(program: &str, args: &[&str]) -> String {
    let out = Command::new(program).args(args).output().unwrap();
    assert!(out.status.success(), "{program} {args:?}: {}", text(&out));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Job ids of jobs named `name` the scheduler still lists as active.
fn jobs_named(name: &str) -> Vec<String> {
    slurm(
        "squeue",
        &[
            "-h",
            "-n",
            name,
            "-t",
            "PENDING,RUNNING,CONFIGURING,COMPLETING",
            "-o",
            "%i",
        ],
    )
    .split_whitespace()
    .map(str::to_string)
    .collect()
}

fn live_steps(job: u64) -> Vec<String> {
    slurm(
        "squeue",
        &["--steps", "-h", "-j", &job.to_string(), "-o", "%i %j"],
    )
    .lines()
    .map(str::to_string)
    .collect()
}

fn log(env: &Env, deployment: &str, address: &str) -> String {
    std::fs::read_to_string(
        env.dir
            .path()
            .join(".srt")
            .join(deployment)
            .join("logs")
            .join(format!("{address}.log")),
    )
    .unwrap_or_default()
}

fn live_processes(deployment: &str) -> Vec<u32> {
    srt::exec::process::processes_with_env_marker(srt::exec::local::DEPLOYMENT_MARKER, deployment)
}

fn wait_until(what: &str, timeout: Duration, mut f: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !f() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(100));
    }
}

fn http(method: &str, url: &str, body: Option<serde_json::Value>) -> (u16, String) {
    with_client(|c| async move {
        let req = match method {
            "POST" => c.post(url).json(&body.unwrap()),
            _ => c.get(url),
        };
        let r = req.send().await.unwrap();
        (r.status().as_u16(), r.text().await.unwrap())
    })
}

fn completion(router: &str) -> serde_json::Value {
    let body = serde_json::json!({"model": "tiny", "prompt": "hello", "max_tokens": 4});
    let (status, text) = http("POST", &format!("{router}/v1/completions"), Some(body));
    assert_eq!(status, 200, "completion through {router}: {text}");
    let v: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert!(v["choices"][0]["text"].is_string(), "{v}");
    v
}

fn counter(metrics: &str, line_prefix: &str) -> u64 {
    metrics
        .lines()
        .find(|l| l.starts_with(line_prefix))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse::<f64>().ok())
        .unwrap_or(0.0) as u64
}

/// Apply with every gate passing and a completion through the Router; the job runs
/// the recorded steps; a second apply changes nothing.
fn apply_and_serve(env: &Env, recipe: &str, deployment: &str) {
    let t = Instant::now();
    let out = env.ok(&["apply", "-f", recipe, "--simulate", "--auto-approve"]);
    eprintln!(
        "{deployment}: apply on SLURM took {:.1}s",
        t.elapsed().as_secs_f64()
    );
    assert!(
        out.contains("allocation[0]: allocated (job ")
            && out.contains("gate.router: passed")
            && out.contains("gate.workers: passed")
            && out.contains("smoke: passed")
            && out.contains(&format!("Public URL: {}", env.router())),
        "{out}"
    );
    completion(&env.router());
    let state = env.state(deployment);
    let first = &env.allocations(deployment)["allocation[0]"];
    assert!(
        env.cluster
            .ips
            .iter()
            .any(|ip| first["node_ips"][0] == ip.as_str()),
        "{first}"
    );
    let jobs = env.jobs(deployment);
    let mut named = jobs_named(&format!("srt-{deployment}"));
    named.sort_by_key(|j| j.parse::<u64>().unwrap());
    assert_eq!(named, jobs.iter().map(u64::to_string).collect::<Vec<_>>());
    for (address, r) in state["resources"].as_object().unwrap() {
        if let Some(step) = r["runtime"]["step_id"].as_u64() {
            let job = r["runtime"]["job_id"].as_u64().unwrap();
            let line = format!("{job}.{step} {deployment}.{address}");
            assert!(live_steps(job).contains(&line), "{line} not live");
        }
    }
    // The srun clients own the steps and live in their own sessions: nothing ties them
    // to the srt that started them or to its shell.
    let own_sid = nix::unistd::getsid(None).unwrap();
    for r in state["resources"].as_object().unwrap().values() {
        if let Some(pid) = r["runtime"]["client"]["pid"].as_u64() {
            let pid = nix::unistd::Pid::from_raw(pid as i32);
            assert_eq!(nix::unistd::getsid(Some(pid)).unwrap(), pid);
            assert_ne!(nix::unistd::getsid(Some(pid)).unwrap(), own_sid);
        }
    }
    let again = env.ok(&["apply", "-f", recipe, "--simulate", "--auto-approve"]);
    assert!(
        again.contains("No changes.") && again.contains("nothing to change"),
        "{again}"
    );
    let after = env.state(deployment);
    assert_eq!(
        state["serial"], after["serial"],
        "a no-op apply must not change state"
    );
    assert_eq!(state["resources"], after["resources"]);
}

/// Destroy: no job, no step, no client, empty state.
fn destroy(env: &Env, deployment: &str) {
    let jobs = env.jobs(deployment);
    assert!(!jobs.is_empty());
    let out = env.ok(&["destroy", deployment, "--auto-approve"]);
    assert!(out.contains("Destroy complete"), "{out}");
    assert_eq!(
        jobs_named(&format!("srt-{deployment}")),
        Vec::<String>::new()
    );
    for job in jobs {
        assert_eq!(live_steps(job), Vec::<String>::new());
    }
    wait_until("the srun clients to exit", Duration::from_secs(10), || {
        live_processes(deployment).is_empty()
    });
    assert_eq!(env.state(deployment)["resources"], serde_json::json!({}));
}

#[test]
fn disaggregated_across_nodes_heals_a_cancelled_step_and_replaces_one_role() {
    let _g = serial();
    let Some(c) = cluster() else { return };
    let env = Env::new(c);
    let d = "slurm-disagg";
    let recipe = env.file("pd.yaml", &example("slurm-disagg.yaml"));
    apply_and_serve(&env, &recipe, d);
    // Prefill on node 0, decode on node 1, two hosts: the KV went across nodes.
    let rt = |a: &str| env.runtime(d, a);
    assert_eq!(
        rt("worker.prefill[0].node[0]")["nodes"][0],
        env.host(d, 0).as_str()
    );
    assert_eq!(
        rt("worker.decode[0].node[0]")["nodes"][0],
        env.host(d, 1).as_str()
    );
    assert_ne!(env.host(d, 0), env.host(d, 1));
    let prefill = http(
        "GET",
        &format!("http://{}:6100/metrics", env.ip(d, 0)),
        None,
    )
    .1;
    let decode = http(
        "GET",
        &format!("http://{}:6100/metrics", env.ip(d, 1)),
        None,
    )
    .1;
    assert!(
        counter(&prefill, "srt_sim_requests_total{stage=\"prefill\"}") >= 1,
        "{prefill}"
    );
    assert!(
        counter(&decode, "srt_sim_kv_transfers_consumed_total") >= 1,
        "{decode}"
    );

    // scancel of one step is drift; apply restarts only that step.
    let (job, prefill_step) = env.step(d, "worker.prefill[0].node[0]");
    let decode_step = env.step(d, "worker.decode[0].node[0]");
    let router_step = env.step(d, "router[0]");
    slurm("scancel", &[&format!("{job}.{prefill_step}")]);
    wait_until(
        "the cancelled step to leave squeue",
        Duration::from_secs(15),
        || {
            !live_steps(job)
                .iter()
                .any(|l| l.starts_with(&format!("{job}.{prefill_step} ")))
        },
    );
    let plan = env.srt(&["plan", "-f", &recipe, "--simulate", "--detailed-exitcode"]);
    let plan_text = text(&plan);
    assert_eq!(plan.status.code(), Some(2), "{plan_text}");
    assert!(
        plan_text.contains(&format!("because drift: step {job}.{prefill_step}"))
            && plan_text.contains("Plan: 0 to create, 1 to replace, 0 to destroy"),
        "{plan_text}"
    );
    env.ok(&["apply", "-f", &recipe, "--simulate", "--auto-approve"]);
    let (job2, healed) = env.step(d, "worker.prefill[0].node[0]");
    assert_eq!(job2, job, "healing a step keeps the allocation");
    assert_ne!(healed, prefill_step);
    assert_eq!(env.step(d, "worker.decode[0].node[0]"), decode_step);
    assert_eq!(env.step(d, "router[0]"), router_step);
    completion(&env.router());

    // Changing decode args replaces the decode step and the Router routing to it only.
    let prefill_now = env.step(d, "worker.prefill[0].node[0]");
    let changed = example("slurm-disagg.yaml").replace(
        "      data-parallel-size: 4\nhealth_check",
        "      data-parallel-size: 4\n      max-model-len: 1024\nhealth_check",
    );
    assert_ne!(changed, example("slurm-disagg.yaml"));
    std::fs::write(&recipe, changed).unwrap();
    let plan = env.ok(&["plan", "-f", &recipe, "--simulate"]);
    assert!(
        plan.contains("# worker.decode[0].node[0] will be replaced")
            && plan.contains("{+--max-model-len 1024+}")
            && plan.contains("# router[0] will be replaced")
            && !plan.contains("# worker.prefill[0].node[0] will be replaced")
            && !plan.contains("# allocation["),
        "{plan}"
    );
    env.ok(&["apply", "-f", &recipe, "--simulate", "--auto-approve"]);
    assert_eq!(env.step(d, "worker.prefill[0].node[0]"), prefill_now);
    assert_ne!(env.step(d, "worker.decode[0].node[0]"), decode_step);
    let job = decode_step.0;
    assert_eq!(env.step(d, "worker.decode[0].node[0]").0, job);
    // Exactly the old decode step was cancelled, and gracefully: TERM reached it first.
    let steps = live_steps(job);
    assert!(
        !steps
            .iter()
            .any(|l| l.starts_with(&format!("{job}.{} ", decode_step.1))),
        "{steps:?}"
    );
    let (prefill_job, prefill_step) = prefill_now;
    assert!(
        live_steps(prefill_job)
            .iter()
            .any(|l| l.starts_with(&format!("{prefill_job}.{prefill_step} "))),
        "{steps:?}"
    );
    assert!(
        log(&env, d, "worker.decode[0].node[0]").contains("received SIGTERM; shutting down"),
        "{}",
        log(&env, d, "worker.decode[0].node[0]")
    );
    completion(&env.router());
    destroy(&env, d);
    assert!(log(&env, d, "worker.prefill[0].node[0]").contains("received SIGTERM; shutting down"));
}

/// A sweep of two points keeps its allocations: the second point replaces its decode
/// step (and the Router routing to it) inside the same job, and the prefill step started
/// for the first point serves the second too.
#[test]
fn a_two_point_sweep_keeps_its_allocations() {
    let _g = serial();
    let Some(c) = cluster() else { return };
    let env = Env::new(c);
    let d = "slurm-sweep";
    let tokenizer = repo().join("tests/fixtures/tiny-model");
    let text = example("slurm-disagg.yaml")
        .replace("name: slurm-disagg", &format!("name: {d}"))
        .replace(
            "      data-parallel-size: 4\nhealth_check",
            "      data-parallel-size: 4\n      max-model-len: \"{mml}\"\nhealth_check",
        )
        + &format!(
            "benchmark:\n  type: sa-bench\n  isl: 32\n  osl: 4\n  concurrencies: [2]\n  num_prompts_mult: 2\n  num_warmup_mult: 0\n  tokenizer: {}\nsweep:\n  mml: [1024, 2048]\n",
            tokenizer.display()
        );
    let recipe = env.file("sweep.yaml", &text);
    let out = env.ok(&["sweep", "-f", &recipe, "--simulate", "--auto-approve"]);
    assert!(out.contains("Sweep: 2 of 2 points done, 0 failed"), "{out}");
    assert!(!out.contains("] will be replaced"), "{out}");
    let allocations = env.allocations(d);
    let job = |a: &str| allocations[a]["job_id"].as_u64().unwrap();
    assert_eq!(jobs_named(&format!("srt-{d}")).len(), allocations.len());
    let (prefill_job, _) = env.step(d, "worker.prefill[0].node[0]");
    let (decode_job, _) = env.step(d, "worker.decode[0].node[0]");
    assert_eq!(
        (prefill_job, decode_job),
        (job("allocation[0]"), job("allocation[1]"))
    );
    // In the same jobs, the prefill started once for both points, the decode once per
    // point.
    // Every start of the simulator logs once that it is ready.
    let starts = |a: &str| log(&env, d, a).matches("; ready in ").count();
    assert_eq!(starts("worker.prefill[0].node[0]"), 1);
    assert_eq!(starts("worker.decode[0].node[0]"), 2);
    let state = env.state(d);
    for point in [format!("{d}_mml1024"), format!("{d}_mml2048")] {
        assert_eq!(
            state["sweep"]["points"][&point]["outcome"], "done",
            "{state}"
        );
    }
    destroy(&env, d);
}

#[test]
fn dep8_over_two_nodes_serves_from_two_hybrid_lb_pools() {
    let _g = serial();
    let Some(c) = cluster() else { return };
    let env = Env::new(c);
    let text = example("seed/agg-dep8.yaml")
        + "name: slurm-dep8\nmodel:\n  path: /models/tiny\n  served_name: tiny\nhealth_check:\n  timeout_seconds: 120\n";
    let recipe = env.file("dep8.yaml", &text);
    apply_and_serve(&env, &recipe, "slurm-dep8");
    for (address, node) in [("worker.agg[0].node[0]", 0), ("worker.agg[0].node[1]", 1)] {
        let rt = env.runtime("slurm-dep8", address);
        assert_eq!(
            rt["nodes"][0],
            env.host("slurm-dep8", node).as_str(),
            "{rt}"
        );
        let m = http(
            "GET",
            &format!("http://{}:6100/metrics", env.ip("slurm-dep8", node)),
            None,
        )
        .1;
        let ranks = m
            .lines()
            .filter(|l| l.starts_with("vllm:num_requests_running"))
            .count();
        assert_eq!(ranks, 4, "{address}: a pool of 4 DP ranks expected:\n{m}");
    }
    destroy(&env, "slurm-dep8");
}

#[test]
fn moriio_colocated_workers_register_with_the_router() {
    let _g = serial();
    let Some(c) = cluster() else { return };
    let env = Env::new(c);
    let text = example("seed/moriio-colocated.yaml")
        + "name: slurm-moriio\nmodel:\n  path: /models/tiny\n  served_name: tiny\nhealth_check:\n  timeout_seconds: 120\n";
    let recipe = env.file("moriio.yaml", &text);
    apply_and_serve(&env, &recipe, "slurm-moriio");
    let rt = env.runtime("slurm-moriio", "worker.decode[0].node[0]");
    assert_eq!(rt["nodes"][0], env.host("slurm-moriio", 0).as_str(), "{rt}");
    destroy(&env, "slurm-moriio");
}

#[test]
fn inside_an_allocation_uses_it_and_never_cancels_it() {
    let _g = serial();
    let Some(c) = cluster() else { return };
    let env = Env::new(c);
    let holder = slurm(
        "sbatch",
        &[
            "--parsable",
            "-J",
            "srt-test-holder",
            "-N",
            "2",
            &format!("--gres=gpu:{}", env.cluster.gpus),
            "-o",
            "/dev/null",
            "--wrap",
            "exec sleep 600",
        ],
    )
    .trim()
    .to_string();
    let cancel_holder = Cancel(holder.clone());
    wait_until("the holder job to run", Duration::from_secs(30), || {
        slurm("squeue", &["-h", "-j", &holder, "-o", "%T"]).trim() == "RUNNING"
    });
    let recipe = env.file("pd.yaml", &example("slurm-disagg.yaml"));
    let out = env
        .command(&["apply", "-f", &recipe, "--simulate", "--auto-approve"])
        .env("SLURM_JOB_ID", &holder)
        .output()
        .unwrap();
    let out_text = text(&out);
    assert!(out.status.success(), "{out_text}");
    let hosts = slurm(
        "scontrol",
        &[
            "show",
            "hostnames",
            slurm("squeue", &["-h", "-j", &holder, "-o", "%N"]).trim(),
        ],
    );
    let hosts: Vec<&str> = hosts.split_whitespace().collect();
    assert!(
        out_text.contains(&format!(
            "allocation[0]: allocated (job {holder} on {})",
            hosts.join(",")
        )),
        "{out_text}"
    );
    assert_eq!(
        jobs_named("srt-slurm-disagg"),
        Vec::<String>::new(),
        "no job submitted"
    );
    let allocations = env.allocations("slurm-disagg");
    assert_eq!(
        allocations.len(),
        1,
        "one job holds every node: {allocations:?}"
    );
    let alloc = &allocations["allocation[0]"];
    assert_eq!(alloc["adopted"], true, "{alloc}");
    completion(&env.router());
    let destroyed = env
        .command(&["destroy", "slurm-disagg", "--auto-approve"])
        .env("SLURM_JOB_ID", &holder)
        .output()
        .unwrap();
    assert!(destroyed.status.success(), "{}", text(&destroyed));
    let job: u64 = holder.parse().unwrap();
    assert_eq!(
        slurm("squeue", &["-h", "-j", &holder, "-o", "%T"]).trim(),
        "RUNNING",
        "the adopted allocation must survive destroy"
    );
    assert_eq!(live_steps(job), [format!("{holder}.batch batch")]);
    drop(cancel_holder);
}

/// SIGKILL of srt at moments spread through an apply inside an adopted allocation
/// (which destroy never cancels, so no job cancel sweeps steps away): the next apply
/// converges with one step per resource, and destroy leaves no step of the deployment
/// and no `srun` client. The steps' clients are found through their leases.
#[test]
fn sigkill_during_apply_inside_an_allocation_leaves_no_step() {
    let _g = serial();
    let Some(c) = cluster() else { return };
    let env = Env::new(c);
    let holder = slurm(
        "sbatch",
        &[
            "--parsable",
            "-J",
            "srt-test-crash-holder",
            "-N",
            "2",
            &format!("--gres=gpu:{}", env.cluster.gpus),
            "-o",
            "/dev/null",
            "--wrap",
            "exec sleep 900",
        ],
    )
    .trim()
    .to_string();
    let _cancel_holder = Cancel(holder.clone());
    wait_until("the holder job to run", Duration::from_secs(30), || {
        slurm("squeue", &["-h", "-j", &holder, "-o", "%T"]).trim() == "RUNNING"
    });
    let job: u64 = holder.parse().unwrap();
    let recipe = env.file("pd.yaml", &example("slurm-disagg.yaml"));
    let ours = |steps: &[String]| -> Vec<String> {
        steps
            .iter()
            .filter(|l| l.contains(" slurm-disagg."))
            .cloned()
            .collect()
    };
    // Killed `ms` after apply announces its first step launch: inside the launch batch,
    // between the fork of an `srun` client and the save of its identity.
    for ms in [0u64, 1, 2, 4, 8, 15, 40] {
        let mut apply = env
            .command(&[
                "apply",
                "-f",
                &recipe,
                "--simulate",
                "--auto-approve",
                "--json",
            ])
            .env("SLURM_JOB_ID", &holder)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap();
        let events = std::io::BufReader::new(apply.stdout.take().unwrap());
        for line in std::io::BufRead::lines(events) {
            let line = line.unwrap();
            if line.contains("\"apply_start\"")
                && (line.contains("\"worker.") || line.contains("\"router["))
            {
                break;
            }
        }
        std::thread::sleep(Duration::from_millis(ms));
        let _ = apply.kill();
        let _ = apply.wait();
        let out = env
            .command(&["apply", "-f", &recipe, "--simulate", "--auto-approve"])
            .env("SLURM_JOB_ID", &holder)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "killed at {ms} ms, then:
{}",
            text(&out)
        );
        completion(&env.router());
        // One step per recorded resource, no more (besides the agents srt started in
        // the allocation, recorded as the allocation's client).
        let steps: Vec<String> = ours(&live_steps(job))
            .into_iter()
            .filter(|s| !s.ends_with(".srt-agent"))
            .collect();
        let state = env.state("slurm-disagg");
        let recorded = state["resources"]
            .as_object()
            .unwrap()
            .values()
            .filter(|r| r["runtime"]["step_name"].is_string())
            .count();
        assert_eq!(steps.len(), recorded, "killed at {ms} ms: {steps:?}");
        let destroyed = env
            .command(&["destroy", "slurm-disagg", "--auto-approve"])
            .env("SLURM_JOB_ID", &holder)
            .output()
            .unwrap();
        assert!(destroyed.status.success(), "{}", text(&destroyed));
        wait_until("the steps to end", Duration::from_secs(30), || {
            ours(&live_steps(job)).is_empty()
        });
        wait_until("the srun clients to exit", Duration::from_secs(10), || {
            live_processes("slurm-disagg").is_empty()
        });
    }
}

/// Cancels a job when dropped (also on a failed assertion).
struct Cancel(String);

impl Drop for Cancel {
    fn drop(&mut self) {
        let _ = Command::new("scancel").arg(&self.0).output();
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            let out = Command::new("squeue")
                .args(["-h", "-j", &self.0, "-o", "%T"])
                .output();
            if out.map_or(true, |o| o.stdout.trim_ascii().is_empty()) {
                break;
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

/// Failed allocations: a clear message in the scheduler's words, exit 7, no job left,
/// and nothing recorded but the failed `allocations` (no job id, nothing on them).
fn refused(env: &Env, args: &[&str], expected: &[&str], allocations: &[&str]) {
    let out = env.srt(args);
    let t = text(&out);
    assert_eq!(out.status.code(), Some(7), "{t}");
    for e in expected {
        assert!(t.contains(e), "`{e}` expected in:\n{t}");
    }
    assert_eq!(jobs_named("srt-slurm-disagg"), Vec::<String>::new(), "{t}");
    let state = env.state("slurm-disagg");
    let resources = state["resources"].as_object().unwrap();
    assert_eq!(resources.keys().collect::<Vec<_>>(), allocations, "{state}");
    for r in resources.values() {
        assert_eq!(r["status"], "failed", "{state}");
        assert!(r.get("runtime").is_none(), "{state}");
    }
}

#[test]
fn scheduler_errors_are_reported_in_its_words_and_leave_nothing_behind() {
    let _g = serial();
    let Some(c) = cluster() else { return };
    let env = Env::new(c);
    let recipe = env.file("pd.yaml", &example("slurm-disagg.yaml"));
    let apply = [
        "apply",
        "-f",
        recipe.as_str(),
        "--simulate",
        "--auto-approve",
    ];

    let bad = env.file(
        "bad.yaml",
        &profile(&env.cluster, "").replace(
            &format!("partition: {}", env.cluster.partition),
            "partition: nosuch",
        ),
    );
    let mut args = apply.to_vec();
    args.extend(["--cluster", bad.as_str()]);
    refused(
        &env,
        &args,
        &[
            "sbatch refused the allocation",
            "invalid partition specified: nosuch",
        ],
        &["allocation[0]", "allocation[1]"],
    );

    // One job of more nodes than the partition has (each node alone would fit).
    let single = env.file(
        "single.yaml",
        &profile(
            &env.cluster,
            "allocations: single
",
        ),
    );
    let mut args = apply.to_vec();
    args.extend(["--nodes", "9", "--cluster", single.as_str()]);
    refused(
        &env,
        &args,
        // PartitionConfig or PartitionNodeLimit, depending on when the reason is read.
        &["cannot start", "with reason `Partition", "cancelled job"],
        &["allocation[0]"],
    );

    // Every node busy with another job: pending too long.
    let all = env.cluster.ips.len().to_string();
    let holder = slurm(
        "sbatch",
        &[
            "--parsable",
            "-J",
            "srt-test-holder",
            "-N",
            &all,
            &format!("--gres=gpu:{}", env.cluster.gpus),
            "-o",
            "/dev/null",
            "--wrap",
            "exec sleep 600",
        ],
    )
    .trim()
    .to_string();
    let _cancel = Cancel(holder.clone());
    wait_until("the holder job to run", Duration::from_secs(30), || {
        slurm("squeue", &["-h", "-j", &holder, "-o", "%T"]).trim() == "RUNNING"
    });
    let short = env.file(
        "short.yaml",
        &profile(&env.cluster, "allocation_timeout_seconds: 3\n"),
    );
    let mut args = apply.to_vec();
    args.extend(["--cluster", short.as_str()]);
    refused(
        &env,
        &args,
        &[
            "is still pending after 3s",
            "scheduler reason",
            "cancelled job",
        ],
        &["allocation[0]", "allocation[1]"],
    );
    drop(_cancel);

    // The deployment then converges normally.
    env.ok(&apply);
    completion(&env.router());
    destroy(&env, "slurm-disagg");
}

#[test]
fn a_step_ignoring_term_is_cancelled_after_the_grace() {
    let _g = serial();
    let Some(c) = cluster() else { return };
    let env = Env::new(c);
    // A "vllm" that ignores SIGTERM (and never serves, so the gates fail).
    let stubborn = env.file(
        "stubborn.sh",
        "#!/bin/sh\ntrap 'echo got TERM, ignoring' TERM\necho started\nwhile true; do sleep 1; done\n",
    );
    std::fs::set_permissions(
        &stubborn,
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let recipe = env.file(
        "stubborn.yaml",
        &format!(
            "schema: 2\nname: slurm-stubborn\nmodel:\n  path: /models/tiny\n  served_name: tiny\n\
             resources:\n  gpus_per_node: 4\nengine:\n  type: vllm\n  serve_binary: {stubborn}\n\
             frontend:\n  type: vllm-router\n  enable_multiple_frontends: false\n\
             roles:\n  agg:\n    nodes: 1\n    workers: 1\n    args:\n      tensor-parallel-size: 4\n\
             health_check:\n  timeout_seconds: 3\n"
        ),
    );
    let grace = env.file(
        "grace.yaml",
        &profile(&env.cluster, "").replace("stop_grace_seconds: 5", "stop_grace_seconds: 1"),
    );
    let out = env.srt(&[
        "apply",
        "-f",
        &recipe,
        "--cluster",
        &grace,
        "--auto-approve",
    ]);
    assert_eq!(out.status.code(), Some(7), "{}", text(&out));
    let worker = "worker.agg[0].node[0]";
    let (job, step) = env.step("slurm-stubborn", worker);
    assert!(live_steps(job)
        .iter()
        .any(|l| l.starts_with(&format!("{job}.{step} "))));
    let t = Instant::now();
    let out = env.ok(&[
        "destroy",
        "slurm-stubborn",
        "--cluster",
        &grace,
        "--auto-approve",
    ]);
    assert!(out.contains("Destroy complete"), "{out}");
    assert!(
        t.elapsed() >= Duration::from_secs(1),
        "the grace was not waited"
    );
    assert!(log(&env, "slurm-stubborn", worker).contains("got TERM, ignoring"));
    assert_eq!(jobs_named("srt-slurm-stubborn"), Vec::<String>::new());
    assert_eq!(live_steps(job), Vec::<String>::new());
    wait_until(
        "the stubborn step's processes to end",
        Duration::from_secs(10),
        || live_processes("slurm-stubborn").is_empty(),
    );
}

/// The Dynamo frontend on SLURM: etcd and the frontend steps on n1, the prefill worker
/// on n1 and two decode workers on n2 (the real Dynamo mocker under `--simulate`),
/// which register in etcd at n1's address. Serves, a decode args change rolls without
/// restarting the frontend, destroy leaves no job, step or client.
#[test]
fn dynamo_disaggregated_across_nodes_registers_at_the_infra_node() {
    let _g = serial();
    let Some(c) = cluster() else { return };
    let env = Env::dynamo(c);
    let d = "slurm-dynamo-disagg";
    let model = tools_dir().join("models/tiny").display().to_string();
    let text = example("slurm-dynamo-disagg.yaml").replace("/models/tiny", &model);
    let recipe = env.file("dyn.yaml", &text);
    let out = env.ok(&["apply", "-f", &recipe, "--simulate", "--auto-approve"]);
    assert!(
        out.contains("allocation[0]: allocated (job ")
            && out.contains("gate.etcd: passed")
            && out.contains("gate.nats: passed")
            && out.contains("gate.frontend: passed")
            && out.contains("smoke: passed"),
        "{out}"
    );
    completion(&env.router());
    let state = env.state(d);
    assert_eq!(state["resources"]["etcd"]["node"], "node0");
    assert_eq!(state["resources"]["nats"]["node"], "node0");
    assert_eq!(
        state["resources"]["worker.decode[1].node[0]"]["node"],
        "node1"
    );
    let frontend = env.step(d, "frontend[0]");
    let (job, _) = env.step(d, "worker.decode[1].node[0]");
    assert!(
        live_steps(job)
            .iter()
            .any(|l| l.ends_with(&format!("{d}.worker.decode[1].node[0]"))),
        "{:?}",
        live_steps(job)
    );
    let changed = env.file(
        "dyn.yaml",
        &text.replace(
            "  decode:\n    nodes: 1\n    workers: 2\n    gpus: 1\n",
            "  decode:\n    nodes: 1\n    workers: 2\n    gpus: 1\n    args:\n      max-model-len: 1024\n",
        ),
    );
    let out = env.ok(&["apply", "-f", &changed, "--simulate", "--auto-approve"]);
    assert!(out.contains("2 replaced"), "{out}");
    assert_eq!(
        env.step(d, "frontend[0]"),
        frontend,
        "the frontend restarted"
    );
    completion(&env.router());
    destroy(&env, d);
}

/// Two Dynamo deployments side by side on the cluster, each in its own allocation with
/// its own etcd and namespace: each frontend lists exactly its own workers and serves;
/// a roll of one leaves every step of the other as it was.
#[test]
fn two_dynamo_deployments_side_by_side_never_see_each_others_workers() {
    let _g = serial();
    let Some(c) = cluster() else { return };
    let env = Env::dynamo(c);
    let model = tools_dir().join("models/tiny").display().to_string();
    let recipe = |name: &str, len: u32| {
        format!(
            "schema: 2\nname: {name}\nmodel:\n  path: {model}\n  served_name: tiny\n\
             resources:\n  gpus_per_node: 4\nfrontend:\n  type: dynamo\n  enable_multiple_frontends: false\n\
             dynamo:\n  request_plane: nats\n\
             roles:\n  agg:\n    nodes: 1\n    workers: 2\n    gpus: 2\n    args:\n      tensor-parallel-size: 2\n      max-model-len: {len}\n\
             health_check:\n  timeout_seconds: 120\n"
        )
    };
    let (a, b) = ("dyn-side-a", "dyn-side-b");
    for d in [a, b] {
        let file = env.file(&format!("{d}.yaml"), &recipe(d, 2048));
        let out = env.ok(&["apply", "-f", &file, "--simulate", "--auto-approve"]);
        assert!(out.contains("smoke: passed"), "{out}");
    }
    // Each allocation has a node of its own (4 GPUs each), so each frontend is on its
    // node's port 8000: find which lists which namespace.
    let listed = |ip: &str| {
        let (status, text) = http("GET", &format!("http://{ip}:8000/health"), None);
        assert_eq!(status, 200, "{text}");
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        let mut namespaces: Vec<String> = v["instances"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|i| i["endpoint"] == "generate")
            .map(|i| i["namespace"].as_str().unwrap().to_string())
            .collect();
        namespaces.sort();
        namespaces
    };
    // The node each frontend runs on: the first of its allocation.
    let frontends: Vec<String> = [a, b]
        .iter()
        .map(|d| {
            let rt = env.runtime(d, "allocation[0]");
            rt["node_ips"][0].as_str().unwrap().to_string()
        })
        .collect();
    let mut seen: Vec<Vec<String>> = frontends.iter().map(|ip| listed(ip)).collect();
    seen.sort();
    assert_eq!(
        seen,
        [
            vec![a.to_string(), a.to_string()],
            vec![b.to_string(), b.to_string()]
        ]
    );
    for ip in &frontends {
        completion(&format!("http://{ip}:8000"));
    }
    let steps = |d: &str| {
        let state = env.state(d);
        let mut out: Vec<(String, u64, u64)> = state["resources"]
            .as_object()
            .unwrap()
            .iter()
            .filter_map(|(address, r)| {
                let rt = &r["runtime"];
                Some((
                    address.clone(),
                    rt["job_id"].as_u64()?,
                    rt["step_id"].as_u64()?,
                ))
            })
            .collect();
        out.sort();
        out
    };
    let before = steps(b);
    let changed = env.file(&format!("{a}.yaml"), &recipe(a, 1024));
    let out = env.ok(&["apply", "-f", &changed, "--simulate", "--auto-approve"]);
    assert!(out.contains("2 replaced"), "{out}");
    assert_eq!(steps(b), before, "rolling one deployment touched the other");
    let mut seen: Vec<Vec<String>> = frontends.iter().map(|ip| listed(ip)).collect();
    seen.sort();
    assert_eq!(
        seen,
        [
            vec![a.to_string(), a.to_string()],
            vec![b.to_string(), b.to_string()]
        ]
    );
    destroy(&env, a);
    destroy(&env, b);
}

/// Prefill/decode behind smg across the nodes: nginx on node 0 in front of the gateway
/// on node 1, which srt tells of every worker in its role. A decode args change rolls
/// the decodes with the gateway's step kept, and the deployment serves prefill/decode
/// (the decode on node 1 served with the KV cache of a prefill on node 0) before and
/// after.
#[test]
fn smg_prefill_decode_behind_nginx_rolls_without_restarting_the_gateway() {
    let _g = serial();
    let Some(c) = cluster() else { return };
    let env = Env::new(c);
    let d = "slurm-disagg-smg";
    let text = example("slurm-disagg-smg.yaml");
    let recipe = env.file("smg.yaml", &text);
    apply_and_serve(&env, &recipe, d);
    let served = |when: &str| {
        let v = completion(&env.router());
        let sim = &v["srt_sim"];
        assert!(
            sim["stage"] == "decode" && sim["kv_from"].is_string(),
            "{when}: {v}"
        );
    };
    served("first apply");
    assert_eq!(
        env.runtime(d, "router[0]")["nodes"][0],
        env.host(d, 1).as_str()
    );
    assert_eq!(env.runtime(d, "nginx")["nodes"][0], env.host(d, 0).as_str());
    let gateway = env.step(d, "router[0]");
    let changed = env.file(
        "smg.yaml",
        &text.replace(
            "  decode:\n    nodes: 1\n    workers: 2\n    gpus: 1\n",
            "  decode:\n    nodes: 1\n    workers: 2\n    gpus: 1\n    args:\n      max-model-len: 1024\n",
        ),
    );
    let out = env.ok(&["apply", "-f", &changed, "--simulate", "--auto-approve"]);
    assert!(out.contains("2 replaced"), "{out}");
    assert_eq!(env.step(d, "router[0]"), gateway, "the gateway restarted");
    served("after the decode roll");
    destroy(&env, d);
}

/// An SGLang worker of TP 8 over two nodes: the leader on node 0 serves, the follower
/// joins it at the leader's `--dist-init-addr` and answers its own stand-in `/health`;
/// an args change replaces both, and the Router routes to the new leader.
#[test]
fn sglang_worker_spanning_two_nodes_serves_from_its_leader_and_rolls() {
    let _g = serial();
    let Some(c) = cluster() else { return };
    let env = Env::new(c);
    let d = "slurm-sglang-multinode";
    let text = example("slurm-sglang-multinode.yaml");
    let recipe = env.file("sglang.yaml", &text);
    apply_and_serve(&env, &recipe, d);
    let served = |when: &str| {
        let v = completion(&env.router());
        assert_eq!(v["srt_sim"]["stage"], "agg", "{when}: {v}");
    };
    served("first apply");
    assert_eq!(
        env.runtime(d, "worker.agg[0].node[0]")["nodes"][0],
        env.host(d, 0).as_str()
    );
    assert_eq!(
        env.runtime(d, "worker.agg[0].node[1]")["nodes"][0],
        env.host(d, 1).as_str()
    );
    let status = env.ok(&["status", d, "--json"]);
    assert!(
        !status.contains("\"failed\"") && !status.contains("drifted"),
        "{status}"
    );
    let changed = env.file(
        "sglang.yaml",
        &text.replace(
            "      tp-size: 8\n",
            "      tp-size: 8\n      context-length: 1024\n",
        ),
    );
    let out = env.ok(&["apply", "-f", &changed, "--simulate", "--auto-approve"]);
    assert!(out.contains("2 replaced"), "{out}");
    served("after the roll");
    destroy(&env, d);
}

/// srtctl's runtime keys on the cluster (no container runtime): `host_setup` then
/// `setup_script` run in each worker's step on its node before the simulator, with
/// `environment`'s `{node}` the node's host name; `sbatch_directives` reach the job
/// (its comment), `srun_options` every step; a changed script replaces the workers in
/// the same allocation.
#[test]
fn runtime_keys_run_their_scripts_on_the_nodes_before_the_workers() {
    let _g = serial();
    let Some(c) = cluster() else { return };
    let env = Env::new(c);
    let d = "slurm-runtime-keys";
    std::fs::create_dir(env.dir.path().join("scripts")).unwrap();
    let script = |name: &str, body: &str| {
        std::fs::write(env.dir.path().join("scripts").join(name), body).unwrap();
    };
    script("host-setup.sh", "echo \"srt-host-setup on $(hostname)\"\n");
    script(
        "worker-setup.sh",
        "set -eu\necho \"srt-setup on $(hostname) for $SRT_RESOURCE node=$SRT_EXAMPLE_NODE\"\n",
    );
    let text = example("slurm-runtime-keys.yaml")
        .replace("  cpus-per-task: 16", "  cpus-per-task: 1")
        .replace(
            "  mem: \"0\"\n  exclusive: \"\"",
            "  comment: srt-runtime-keys",
        );
    assert!(text.contains("comment: srt-runtime-keys"), "{text}");
    let recipe = env.file("rt.yaml", &text);
    apply_and_serve(&env, &recipe, d);
    for job in env.jobs(d) {
        let comment = slurm("squeue", &["-h", "-j", &job.to_string(), "-o", "%k"]);
        assert_eq!(comment.trim(), "srt-runtime-keys");
    }
    for (worker, node) in [
        ("worker.prefill[0].node[0]", env.host(d, 0)),
        ("worker.decode[0].node[0]", env.host(d, 1)),
    ] {
        let text = log(&env, d, worker);
        let started = text.rfind("--- srt: starting").unwrap_or(0);
        let mut lines = text[started..]
            .lines()
            .filter(|l| !l.starts_with("--- srt:") && !l.starts_with("srun:"));
        assert_eq!(
            lines.next(),
            Some(format!("srt-host-setup on {node}").as_str()),
            "{worker}:\n{text}"
        );
        assert_eq!(
            lines.next(),
            Some(format!("srt-setup on {node} for {worker} node={node}").as_str()),
            "{worker}:\n{text}"
        );
    }
    let decode_job = env.step(d, "worker.decode[0].node[0]").0;
    script("worker-setup.sh", "echo srt-setup-second\n");
    let plan = env.ok(&["plan", "-f", &recipe, "--simulate"]);
    assert!(
        plan.contains("# worker.prefill[0].node[0] will be replaced")
            && plan.contains("# worker.decode[0].node[0] will be replaced")
            && !plan.contains("# allocation["),
        "{plan}"
    );
    env.ok(&["apply", "-f", &recipe, "--simulate", "--auto-approve"]);
    assert_eq!(env.step(d, "worker.decode[0].node[0]").0, decode_job);
    assert!(log(&env, d, "worker.decode[0].node[0]").contains("srt-setup-second"));
    completion(&env.router());
    destroy(&env, d);
}

/// srtctl's `custom` benchmark on SLURM: the command runs once as a step of its own on
/// the public endpoint's node, told the endpoints, and is gone when apply returns; a
/// command that fails fails the apply, with its output.
#[test]
fn a_custom_benchmark_runs_as_a_step_on_the_public_node() {
    let _g = serial();
    let Some(c) = cluster() else { return };
    let env = Env::new(c);
    let d = "slurm-disagg";
    let seen = env.dir.path().join("seen");
    let command = format!(
        "set -e\n{{ hostname; env | grep -E '^SRT_(FRONTEND|PREFILL|DECODE)' | sort; }} > {}\ncurl -sf -o /dev/null \"$SRT_FRONTEND_URL/v1/models\"\n",
        seen.display()
    );
    let with_command = |command: &str| {
        format!(
            "{}benchmark:\n  type: custom\n  command: {}\n",
            example("slurm-disagg.yaml"),
            serde_json::to_string(command).unwrap()
        )
    };
    let recipe = env.file("custom.yaml", &with_command(&command));
    let out = env.ok(&["apply", "-f", &recipe, "--simulate", "--auto-approve"]);
    assert!(
        out.contains("benchmark: passed (the command exited 0"),
        "{out}"
    );
    let seen = std::fs::read_to_string(&seen).unwrap();
    let (prefill_ip, decode_ip) = (env.ip(d, 0), env.ip(d, 1));
    for line in [
        env.host(d, 0),
        format!("SRT_FRONTEND_HOST={prefill_ip}"),
        format!("SRT_PREFILL_IPS={prefill_ip}"),
        format!("SRT_DECODE_IPS={decode_ip}"),
    ] {
        assert!(seen.lines().any(|l| l == line), "{line} not in:\n{seen}");
    }
    for job in env.jobs(d) {
        assert!(
            !live_steps(job)
                .iter()
                .any(|s| s.contains("benchmark.command")),
            "{:?}",
            live_steps(job)
        );
    }
    let failing = env.file("failing.yaml", &with_command("echo on the node; exit 3"));
    let out = env
        .command(&["apply", "-f", &failing, "--simulate", "--auto-approve"])
        .output()
        .unwrap();
    let shown = text(&out);
    assert_eq!(out.status.code(), Some(srt::exit::APPLY_FAILED), "{shown}");
    assert!(
        shown.contains("the command exited 3") && shown.contains("on the node"),
        "{shown}"
    );
    destroy(&env, d);
}

/// The pyxis path on the test cluster, which has no pyxis: a stand-in `srun` first on
/// `PATH` drops the container options, and `vllm` is the simulator (run as the engine
/// itself, no `--simulate`, so that the steps keep their image). A worker's
/// `host_setup` runs as its own step before the worker's, on the same node; while it
/// runs, the worker's step is not late (the profile's start timeout is shorter than
/// the host setup).
#[test]
fn a_containerized_worker_runs_its_host_setup_as_a_step_first() {
    let _g = serial();
    let Some(c) = cluster() else { return };
    let mut env = Env::new(c);
    std::fs::write(
        env.dir.path().join("srt-cluster.yaml"),
        profile(
            &env.cluster,
            "allocation_timeout_seconds: 60\nstep_start_timeout_seconds: 2\ncontainer:\n  runtime: pyxis\n",
        ),
    )
    .unwrap();
    let bin = env.dir.path().join("bin");
    std::fs::create_dir(&bin).unwrap();
    // `--container-image IMG` takes the next word; the others are written `--x=v`.
    let shim = "#!/bin/sh\nskip=\nfor a; do shift; if [ -n \"$skip\" ]; then skip=; continue; fi\n\
        case \"$a\" in --container-image) skip=1 ;; --container-*) ;; *) set -- \"$@\" \"$a\" ;; esac; done\n\
        exec /usr/bin/srun \"$@\"\n";
    std::fs::write(bin.join("srun"), shim).unwrap();
    std::fs::set_permissions(
        bin.join("srun"),
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .unwrap();
    let sim = std::path::Path::new(env!("CARGO_BIN_EXE_srt")).with_file_name("srt-vllm-sim");
    std::os::unix::fs::symlink(sim, bin.join("vllm")).unwrap();
    env.path = format!("{}:{}", bin.display(), env.path);
    std::fs::create_dir(env.dir.path().join("scripts")).unwrap();
    std::fs::write(
        env.dir.path().join("scripts/host.sh"),
        "sleep 4\necho \"srt-host-setup on $(hostname) step $SLURM_STEP_ID\"\n",
    )
    .unwrap();
    let d = "slurm-disagg";
    let recipe = env.file(
        "pd.yaml",
        &format!(
            "{}host_setup: scripts/host.sh\n",
            example("slurm-disagg.yaml")
        ),
    );
    let out = env.ok(&["apply", "-f", &recipe, "--auto-approve"]);
    assert!(out.contains("smoke: passed"), "{out}");
    completion(&env.router());
    for (worker, node) in [
        ("worker.prefill[0].node[0]", env.host(d, 0)),
        ("worker.decode[0].node[0]", env.host(d, 1)),
    ] {
        let text = log(&env, d, worker);
        let (_, step) = env.step(d, worker);
        let line = text
            .lines()
            .find(|l| l.starts_with("srt-host-setup on "))
            .unwrap_or_else(|| panic!("{worker}: no host setup:\n{text}"));
        let (on, setup_step) = line
            .trim_start_matches("srt-host-setup on ")
            .split_once(" step ")
            .unwrap();
        assert_eq!(on, node, "{worker}");
        // Its own step, before the worker's.
        assert!(
            setup_step.parse::<u64>().unwrap() < step,
            "{worker}: {line} vs {step}"
        );
    }
    destroy(&env, d);
}

/// A TensorRT-LLM endpoint of TP 2 over two 1-GPU nodes is one MPI job: one `srun
/// --mpi=pmix` step of two tasks, one on each of its nodes (one job holds both), each
/// rank under the
/// stand-in for `trtllm-llmapi-launch` (rank 0 runs the mocker, rank 1 waits with it);
/// it registers with the frontend and serves, and destroy ends the step.
#[test]
fn trtllm_endpoint_over_two_nodes_is_one_step_of_two_tasks() {
    let _g = serial();
    let Some(c) = cluster() else { return };
    let env = Env::dynamo(c);
    let d = "slurm-trtllm-two-ranks";
    let model = tools_dir().join("models/tiny").display().to_string();
    let text = format!(
        "schema: 2\nname: {d}\nmodel:\n  path: {model}\n  served_name: tiny\n\
         resources:\n  gpus_per_node: 1\nengine: trtllm\n\
         frontend:\n  type: dynamo\n  enable_multiple_frontends: false\n\
         roles:\n  agg:\n    nodes: 2\n    workers: 1\n    gpus: 2\n    args:\n      max_batch_size: 16\n\
         health_check:\n  timeout_seconds: 120\n  interval_seconds: 2\n"
    );
    let recipe = env.file("trt.yaml", &text);
    let out = env.ok(&["apply", "-f", &recipe, "--simulate", "--auto-approve"]);
    assert!(
        out.contains("file.agg.engine-config: written") && out.contains("smoke: passed"),
        "{out}"
    );
    completion(&env.router());
    let (job, step) = env.step(d, "worker.agg[0]");
    let shown = slurm("scontrol", &["show", "step", &format!("{job}.{step}")]);
    let list = shown
        .split_whitespace()
        .find_map(|w| w.strip_prefix("NodeList="))
        .unwrap_or_default();
    let on = slurm("scontrol", &["show", "hostnames", list]);
    assert_eq!(
        on.split_whitespace().collect::<Vec<_>>(),
        [env.host(d, 0), env.host(d, 1)],
        "{shown}"
    );
    assert!(shown.contains("Tasks=2"), "{shown}");
    let steps = live_steps(job);
    let workers: Vec<_> = steps.iter().filter(|l| l.contains(".worker.")).collect();
    assert_eq!(workers.len(), 1, "{steps:?}");
    destroy(&env, d);
}

/// Every file under `dir`.
fn walk(dir: &std::path::Path) -> Vec<std::path::PathBuf> {
    let mut out = Vec::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(walk(&path));
        } else {
            out.push(path);
        }
    }
    out
}

/// The network namespace of process `pid` (the test cluster's nodes are namespaces of
/// this machine: a process in this test's own namespace runs where srt runs).
fn netns(pid: u32) -> Option<std::path::PathBuf> {
    std::fs::read_link(format!("/proc/{pid}/ns/net")).ok()
}

/// The machine running srt may go away while the deployment serves: nothing of it runs
/// there, since every step's `srun` client runs on the step's node, started by srt's
/// agent there (the environment it is handed, a token included, is in no file once
/// the step runs). Every process of the deployment found where srt runs is killed with
/// SIGKILL (there is none); the deployment serves, the next plan shows no change, and
/// destroy leaves nothing on any node.
#[test]
fn the_machine_running_srt_may_go_away() {
    let _g = serial();
    let Some(c) = cluster() else { return };
    let env = Env::new(c);
    // A token the steps get: it reaches them through the agents' private files, and
    // no file is left holding it.
    let secret = "hf_srt_e2e_agent_secret_7f3a";
    let with_secret = example("slurm-disagg.yaml").replace(
        "roles:\n  prefill:\n",
        &format!("roles:\n  prefill:\n    env:\n      HF_TOKEN: {secret}\n"),
    );
    assert!(with_secret.contains(secret));
    let recipe = env.file("pd.yaml", &with_secret);
    env.ok(&["apply", "-f", &recipe, "--simulate", "--auto-approve"]);
    let deployment = env.dir.path().join(".srt/slurm-disagg");
    for file in walk(&deployment) {
        let bytes = std::fs::read(&file).unwrap_or_default();
        assert!(
            !bytes.windows(secret.len()).any(|w| w == secret.as_bytes()),
            "{} holds the secret",
            file.display()
        );
    }
    let prefill = live_processes("slurm-disagg").into_iter().find(|p| {
        std::fs::read(format!("/proc/{p}/environ"))
            .is_ok_and(|e| e.windows(secret.len()).any(|w| w == secret.as_bytes()))
    });
    assert!(prefill.is_some(), "the prefill worker got the secret");
    let here = netns(std::process::id());
    let all = live_processes("slurm-disagg");
    let local: Vec<u32> = all.iter().copied().filter(|p| netns(*p) == here).collect();
    for pid in &local {
        let _ = nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(*pid as i32),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
    assert_eq!(
        local,
        Vec::<u32>::new(),
        "processes of the deployment where srt runs"
    );
    assert!(
        all.len() >= 3,
        "the steps' clients and tasks run on the nodes: {all:?}"
    );
    completion(&env.router());
    assert_no_change(&env, &recipe);
    destroy(&env, "slurm-disagg");
}

/// An aggregate deployment of `nodes` nodes, two TP 2 workers on each, behind the Router
/// (which srt tells of its workers through its admin API).
fn agg_recipe(name: &str, nodes: u32) -> String {
    format!(
        "schema: 2\nname: {name}\nmodel:\n  path: /models/tiny\n  served_name: tiny\n\
         resources:\n  gpus_per_node: 4\nfrontend:\n  enable_multiple_frontends: false\n\
         roles:\n  agg:\n    nodes: {nodes}\n    workers: {workers}\n    gpus: 2\n    args:\n      tensor-parallel-size: 2\n\
         health_check:\n  timeout_seconds: 120\nrollout:\n  drain_seconds: 10\n",
        workers = 2 * nodes
    )
}

/// Scaling out and back in is no outage: under load, an aggregate deployment grows from
/// 1 node to 3 (two jobs added for the new nodes, the first job and the Router's step
/// left alone, the new workers added to the Router) and back to 1 (the extra workers
/// taken out of the Router and drained, their jobs cancelled); no request fails.
#[test]
fn scaling_out_and_in_adds_and_releases_allocations_with_no_failed_request() {
    let _g = serial();
    let Some(c) = cluster_of(3, "scaling to 3 nodes needs a cluster of 3") else {
        return;
    };
    let env = Env::new(c);
    let d = "slurm-scale";
    let recipe = |nodes| env.file("agg.yaml", &agg_recipe(d, nodes));
    env.ok(&["apply", "-f", &recipe(1), "--simulate", "--auto-approve"]);
    let router = env.step(d, "router[0]");
    let first = env.jobs(d);
    assert_eq!(first.len(), 1);
    let load = e2e_support::load::Load::start_in(None, &env.router(), 4);

    let out = env.ok(&["apply", "-f", &recipe(3), "--simulate", "--auto-approve"]);
    assert!(
        out.contains("allocation[1]: allocated")
            && out.contains("allocation[2]: allocated")
            && out.contains(", 0 replaced, 0 destroyed"),
        "{out}"
    );
    assert_eq!(
        env.step(d, "router[0]"),
        router,
        "the Router's step is kept"
    );
    let grown = env.jobs(d);
    assert_eq!(grown.len(), 3);
    assert!(grown.contains(&first[0]), "{grown:?}");
    let hosts: BTreeSet<String> = (0..3).map(|n| env.host(d, n)).collect();
    assert_eq!(hosts.len(), 3, "three nodes: {hosts:?}");

    let out = env.ok(&["apply", "-f", &recipe(1), "--simulate", "--auto-approve"]);
    assert!(
        out.contains("allocation[1]: destroyed") && out.contains("allocation[2]: destroyed"),
        "{out}"
    );
    assert_eq!(
        env.step(d, "router[0]"),
        router,
        "the Router's step is kept"
    );
    assert_eq!(env.jobs(d), first);
    for job in grown.iter().filter(|j| !first.contains(j)) {
        wait_until("a released job to leave", Duration::from_secs(30), || {
            !jobs_named(&format!("srt-{d}")).contains(&job.to_string())
        });
    }
    let (ok, failed) = load.finish();
    assert_no_failures("scaling 1 -> 3 -> 1 nodes", "", ok, &failed);
    assert!(ok > 20, "{ok}");
    destroy(&env, d);
}

/// A job that ends takes only its allocation with it: `scancel` of the job holding node
/// 2 of a 3-node aggregate deployment is drift of that allocation and of what ran in it,
/// and the plan replaces those alone (the Router and the other nodes' workers are kept);
/// under load, the rest serves meanwhile, and the apply heals it with a new job.
#[test]
fn a_cancelled_job_replaces_only_its_allocation_while_the_rest_serves() {
    let _g = serial();
    let Some(c) = cluster_of(3, "a 3-node deployment needs a cluster of 3") else {
        return;
    };
    let env = Env::new(c);
    let d = "slurm-lost-job";
    let recipe = env.file("agg.yaml", &agg_recipe(d, 3));
    env.ok(&["apply", "-f", &recipe, "--simulate", "--auto-approve"]);
    let kept: Vec<(String, (u64, u64))> = [
        "router[0]",
        "worker.agg[0].node[0]",
        "worker.agg[1].node[0]",
        "worker.agg[2].node[0]",
        "worker.agg[3].node[0]",
    ]
    .iter()
    .map(|a| (a.to_string(), env.step(d, a)))
    .collect();
    let allocations = env.allocations(d);
    let job = |a: &str| allocations[a]["job_id"].as_u64().unwrap();
    let lost = job("allocation[2]");
    let load = e2e_support::load::Load::start_in(None, &env.router(), 4);
    slurm("scancel", &[&lost.to_string()]);
    wait_until("the job to end", Duration::from_secs(30), || {
        !jobs_named(&format!("srt-{d}")).contains(&lost.to_string())
    });
    let served = load.ok();
    wait_until(
        "requests served by the rest",
        Duration::from_secs(30),
        || load.ok() > served + 20,
    );
    let plan = env.srt(&["plan", "-f", &recipe, "--simulate", "--detailed-exitcode"]);
    let text_of_plan = text(&plan);
    assert_eq!(plan.status.code(), Some(2), "{text_of_plan}");
    let mut replaced: Vec<&str> = text_of_plan
        .lines()
        .filter_map(|l| l.trim().strip_prefix("# "))
        .filter_map(|l| l.strip_suffix(" will be replaced"))
        .collect();
    replaced.sort_unstable();
    assert_eq!(
        replaced,
        [
            "allocation[2]",
            "ports.worker.agg[4].node[0]",
            "ports.worker.agg[5].node[0]",
            "worker.agg[4].node[0]",
            "worker.agg[5].node[0]"
        ],
        "{text_of_plan}"
    );
    env.ok(&["apply", "-f", &recipe, "--simulate", "--auto-approve"]);
    for (address, step) in &kept {
        assert_eq!(&env.step(d, address), step, "{address} was kept");
    }
    let healed = env.allocations(d);
    assert_ne!(healed["allocation[2]"]["job_id"].as_u64(), Some(lost));
    assert_eq!(
        healed["allocation[0]"]["job_id"].as_u64(),
        Some(job("allocation[0]"))
    );
    let (ok, failed) = load.finish();
    eprintln!(
        "{ok} requests served, {} failed while the job was gone: {:?}",
        failed.len(),
        failed.iter().take(3).collect::<Vec<_>>()
    );
    completion(&env.router());
    destroy(&env, d);
}

/// A 2-node aggregate deployment `d` on a profile that renews allocations with 5:50 left
/// of a 30-minute limit: applied, then allocation[1]'s job given a 6-minute limit
/// (`scontrol`), and waited for until the plan renews it. Returns the recipe's path and
/// that job's id, and the last plan.
fn due_for_renewal(env: &Env, d: &str) -> (String, u64, String) {
    env.file(
        "srt-cluster.yaml",
        &profile(
            &env.cluster,
            "allocation_timeout_seconds: 60\ntime_limit: \"00:30:00\"\nrenew_before: \"00:05:50\"\n",
        ),
    );
    let recipe = env.file("agg.yaml", &agg_recipe(d, 2));
    env.ok(&["apply", "-f", &recipe, "--simulate", "--auto-approve"]);
    let plan = env.ok(&["plan", "-f", &recipe, "--simulate"]);
    assert!(
        plan.contains("Allocations:")
            && plan.contains("left of 30:00, renewed with 5:50 left")
            && plan.contains("No changes."),
        "{plan}"
    );
    let old = env.allocations(d)["allocation[1]"]["job_id"]
        .as_u64()
        .unwrap();
    // Its job has run at least 10 s: with 6 minutes as its limit, less than 5:50 is left.
    slurm(
        "scontrol",
        &["update", &format!("JobId={old}"), "TimeLimit=00:06:00"],
    );
    let mut plan = String::new();
    wait_until("the job to be due", Duration::from_secs(30), || {
        plan = env.ok(&["plan", "-f", &recipe, "--simulate"]);
        plan.contains("about to end")
    });
    (recipe, old, plan)
}

/// An allocation near the end of its time limit is renewed by a rolling move: with
/// `renew_before` in the profile, the plan shows every allocation's time left; once a
/// job has less than that left (its limit shortened with `scontrol`), its allocation is
/// replaced by a new job created first, its workers move onto it one at a time while
/// the others serve, and the old job is released. Under load, no request fails; the
/// Router and the other allocation are kept.
#[test]
fn an_allocation_near_its_time_limit_moves_to_a_new_job_with_no_failed_request() {
    let _g = serial();
    let Some(c) = cluster_of(3, "a move beside a 2-node deployment needs a cluster of 3") else {
        return;
    };
    let env = Env::new(c);
    let d = "slurm-renew";
    let (recipe, old, plan) = due_for_renewal(&env, d);
    let router = env.step(d, "router[0]");
    let first = env.allocations(d)["allocation[0]"]["job_id"]
        .as_u64()
        .unwrap();
    assert!(
        plan.contains("# allocation[1] will be replaced, the new one first")
            && plan.contains("because it is about to end: ")
            && plan.contains("+/- allocation[1] (allocation)")
            && plan.contains("# worker.agg[2].node[0] will be replaced")
            && plan.contains("# worker.agg[3].node[0] will be replaced")
            && !plan.contains("# worker.agg[0].node[0] will be replaced")
            && !plan.contains("# router[0] will be replaced")
            && !plan.contains("allocation[0] will be"),
        "{plan}"
    );
    let load = e2e_support::load::Load::start_in(None, &env.router(), 4);
    let out = env.ok(&["apply", "-f", &recipe, "--simulate", "--auto-approve"]);
    let (ok, failed) = load.finish();
    assert!(
        out.contains("allocation[1]: reallocated") && out.contains("allocation[1]: released"),
        "{out}"
    );
    assert_no_failures("a renewal move", &out, ok, &failed);
    assert!(ok > 20, "{ok}");
    assert_eq!(env.step(d, "router[0]"), router);
    let now = env.allocations(d);
    assert_eq!(now["allocation[0]"]["job_id"].as_u64(), Some(first));
    let new = now["allocation[1]"]["job_id"].as_u64().unwrap();
    assert_ne!(new, old);
    for w in ["worker.agg[2].node[0]", "worker.agg[3].node[0]"] {
        assert_eq!(env.step(d, w).0, new, "{w} moved");
    }
    assert!(!jobs_named(&format!("srt-{d}")).contains(&old.to_string()));
    let state = env.state(d);
    assert!(
        state["resources"]["allocation[1]"].get("deposed").is_none(),
        "{state}"
    );
    assert_no_change(&env, &recipe);
    destroy(&env, d);
}

/// A move killed half-way is finished by the next apply: SIGKILL of `srt apply` just
/// after the new job of a renewed allocation is recorded leaves the workers on the old
/// job, recorded as deposed; the next plan moves them (they run in a deposed job) and
/// releases it once they are off it. Under load throughout, no request fails.
#[test]
fn a_move_killed_half_way_is_finished_by_the_next_apply() {
    let _g = serial();
    let Some(c) = cluster_of(3, "a move beside a 2-node deployment needs a cluster of 3") else {
        return;
    };
    let env = Env::new(c);
    let d = "slurm-move-killed";
    let (recipe, old, _) = due_for_renewal(&env, d);
    let load = e2e_support::load::Load::start_in(None, &env.router(), 4);
    let mut apply = env
        .command(&[
            "apply",
            "-f",
            &recipe,
            "--simulate",
            "--auto-approve",
            "--json",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let events = std::io::BufReader::new(apply.stdout.take().unwrap());
    for line in std::io::BufRead::lines(events) {
        let line = line.unwrap();
        if line.contains("\"apply_complete\"") && line.contains("\"allocation[1]\"") {
            break;
        }
    }
    let _ = apply.kill();
    let _ = apply.wait();
    let plan = env.ok(&["plan", "-f", &recipe, "--simulate"]);
    assert!(
        plan.contains(&format!(
            "because it runs in job {old}, which its allocation's replacement deposed"
        )) && plan.contains("# allocation[1] will be updated in-place")
            && plan.contains(&format!(
                "because its replaced job {old} released once nothing runs in it"
            )),
        "{plan}"
    );
    env.ok(&["apply", "-f", &recipe, "--simulate", "--auto-approve"]);
    let (ok, failed) = load.finish();
    assert_no_failures("a move killed half-way, then finished", "", ok, &failed);
    let new = env.allocations(d)["allocation[1]"]["job_id"]
        .as_u64()
        .unwrap();
    assert_ne!(new, old);
    for w in ["worker.agg[2].node[0]", "worker.agg[3].node[0]"] {
        assert_eq!(env.step(d, w).0, new, "{w} moved");
    }
    assert!(!jobs_named(&format!("srt-{d}")).contains(&old.to_string()));
    assert_no_change(&env, &recipe);
    destroy(&env, d);
}

/// A node that fails takes only its allocation: the node of a 3-node aggregate
/// deployment's allocation[2] is declared down (its job is killed, as on a failure) and
/// kept out of use; the plan replaces that allocation and what ran on it alone, and
/// apply heals it on another node while the rest serves.
#[test]
fn a_failed_node_takes_only_its_allocation_which_apply_moves_to_another_node() {
    let _g = serial();
    let Some(c) = cluster_of(
        4,
        "healing a 3-node deployment on another node needs a cluster of 4",
    ) else {
        return;
    };
    let env = Env::new(c);
    let d = "slurm-agg";
    let recipe = env.file("agg.yaml", &example("slurm-agg.yaml"));
    env.ok(&["apply", "-f", &recipe, "--simulate", "--auto-approve"]);
    let router = env.step(d, "router[0]");
    let lost = env.host(d, 2);
    let load = e2e_support::load::Load::start_in(None, &env.router(), 4);
    slurm(
        "scontrol",
        &[
            "update",
            &format!("NodeName={lost}"),
            "State=DOWN",
            "Reason=srt-test",
        ],
    );
    // Restored whatever happens below.
    struct Resume(String);
    impl Drop for Resume {
        fn drop(&mut self) {
            let _ = Command::new("scontrol")
                .args(["update", &format!("NodeName={}", self.0), "State=RESUME"])
                .output();
            // Back in use once its daemon answers again (`idle`, not `idle*`).
            let deadline = Instant::now() + Duration::from_secs(60);
            while Instant::now() < deadline {
                let state = Command::new("sinfo")
                    .args(["-h", "-n", &self.0, "-o", "%t"])
                    .output()
                    .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
                    .unwrap_or_default();
                if state == "idle" || state == "mix" || state == "alloc" {
                    break;
                }
                std::thread::sleep(Duration::from_millis(500));
            }
        }
    }
    let _resume = Resume(lost.clone());
    slurm(
        "scontrol",
        &[
            "update",
            &format!("NodeName={lost}"),
            "State=DRAIN",
            "Reason=srt-test",
        ],
    );
    let plan = env.srt(&["plan", "-f", &recipe, "--simulate", "--detailed-exitcode"]);
    let shown = text(&plan);
    assert_eq!(plan.status.code(), Some(2), "{shown}");
    assert!(
        shown.contains("# allocation[2] will be replaced")
            && !shown.contains("# allocation[0] will be")
            && !shown.contains("# allocation[1] will be")
            && !shown.contains("# router[0] will be"),
        "{shown}"
    );
    let served = load.ok();
    env.ok(&["apply", "-f", &recipe, "--simulate", "--auto-approve"]);
    assert_ne!(env.host(d, 2), lost, "healed on another node");
    assert_eq!(env.step(d, "router[0]"), router);
    let (ok, failed) = load.finish();
    assert!(ok > served + 20, "{served} then {ok}");
    eprintln!("{ok} served, {} failed", failed.len());
    completion(&env.router());
    destroy(&env, d);
}
