//! What a SLURM deployment costs where srt runs and at the scheduler: `cargo bench
//! --bench slurm_footprint` on the project's test cluster (`scripts/slurm-cluster.sh`).
//!
//! For deployments of 2, 8 and 32 steps (the Router and 1, 7 or 31 one-GPU simulated
//! workers, as many nodes as they need), it records, with the real `vllm-router`:
//!
//! - **where srt runs**: the processes of the deployment left on this machine after
//!   `srt apply` (outside the nodes' network namespaces: the test cluster's nodes are
//!   namespaces of this machine), and their resident memory;
//! - **on the nodes**: the `srun` clients of the steps (started there by srt's node
//!   agents) and their resident memory;
//! - **scheduler calls** srt made (`sbatch`, `squeue`, `scontrol`, `scancel`, `srun`,
//!   counted by stand-ins first on its `PATH` that log and run the real programs) for the
//!   apply, for one refresh (`srt plan` of the unchanged recipe) and for `srt destroy`;
//!   and the step launches (`srun`) the nodes' agents made for the apply.
//!
//! 32 one-GPU steps need a cluster of 32 GPUs: `SRT_SLURM_NODE_COUNT=4
//! SRT_SLURM_GPUS_PER_NODE=8 scripts/slurm-cluster.sh start`; sizes the cluster cannot
//! hold are skipped. Without a cluster (or `vllm-router`) it says so and exits. Options
//! (after `--`): `--smoke` (2 steps; the default without `--bench`, i.e. under `cargo
//! test --all-targets`), `--steps 2,8`.

mod common;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The programs whose calls are counted.
const SCHEDULER: [&str; 5] = ["sbatch", "squeue", "scontrol", "scancel", "srun"];

/// The test cluster's facts, from `scripts/slurm-cluster.sh env`.
struct Cluster {
    partition: String,
    iface: String,
    nodes: usize,
    gpus: usize,
}

fn cluster() -> Option<Cluster> {
    let out = Command::new("scripts/slurm-cluster.sh")
        .arg("env")
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let vars: BTreeMap<&str, &str> = text
        .lines()
        .filter_map(|l| l.strip_prefix("export ")?.split_once('='))
        .collect();
    let ok = Command::new("sinfo")
        .arg("-h")
        .output()
        .is_ok_and(|o| o.status.success() && !o.stdout.is_empty());
    Some(Cluster {
        partition: vars.get("SRT_SLURM_PARTITION")?.to_string(),
        iface: vars.get("SRT_SLURM_IFACE")?.to_string(),
        nodes: vars.get("SRT_SLURM_NODE_COUNT")?.parse().ok()?,
        gpus: vars.get("SRT_SLURM_GPUS_PER_NODE")?.parse().ok()?,
    })
    .filter(|_| ok)
}

/// A deployment of `steps` steps: the Router and `steps - 1` one-GPU workers.
fn recipe(name: &str, steps: usize, gpus_per_node: usize) -> String {
    let workers = steps - 1;
    let nodes = workers.div_ceil(gpus_per_node);
    format!(
        "schema: 2\nname: {name}\nmodel:\n  path: /models/tiny\n  served_name: tiny\n\
         resources:\n  gpus_per_node: {gpus_per_node}\nfrontend:\n  enable_multiple_frontends: false\n\
         roles:\n  agg:\n    nodes: {nodes}\n    workers: {workers}\n    gpus: 1\n\
         health_check:\n  timeout_seconds: 180\n"
    )
}

/// Stand-ins for the scheduler's programs in `dir`, each logging `NAME HOST` to `log`
/// before it runs the real one.
fn shims(dir: &Path, log: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    for program in SCHEDULER {
        let real = common::tool_dir(program)
            .map(|d| d.join(program))
            .unwrap_or_else(|| PathBuf::from("/usr/bin").join(program));
        let path = dir.join(program);
        std::fs::write(
            &path,
            format!(
                "#!/bin/sh\necho \"{program} $(hostname)\" >> '{}'\nexec '{}' \"$@\"\n",
                log.display(),
                real.display()
            ),
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt as _;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
}

/// Calls logged since `from` (a line count), by program, split into this machine's and
/// the nodes'.
fn calls(log: &Path, from: usize, here: &str) -> (BTreeMap<String, usize>, usize) {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let mut mine = BTreeMap::new();
    let mut nodes = 0;
    for line in text.lines().skip(from) {
        let (program, host) = line.split_once(' ').unwrap_or((line, ""));
        if host == here {
            *mine.entry(program.to_string()).or_insert(0) += 1;
        } else {
            nodes += 1;
        }
    }
    (mine, nodes)
}

fn lines(log: &Path) -> usize {
    std::fs::read_to_string(log).map_or(0, |t| t.lines().count())
}

fn netns(pid: u32) -> Option<PathBuf> {
    std::fs::read_link(format!("/proc/{pid}/ns/net")).ok()
}

/// Resident memory of `pid`, in KiB.
fn rss_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

fn comm(pid: u32) -> String {
    std::fs::read_to_string(format!("/proc/{pid}/comm"))
        .unwrap_or_default()
        .trim()
        .to_string()
}

/// The deployment's processes where srt runs and the `srun` clients on the nodes, each
/// as (count, MiB).
fn footprint(deployment: &str) -> ((usize, f64), (usize, f64)) {
    let here = netns(std::process::id());
    let pids = srt::exec::process::processes_with_env_marker(
        srt::exec::local::DEPLOYMENT_MARKER,
        deployment,
    );
    let (mut local, mut clients) = ((0, 0u64), (0, 0u64));
    for pid in pids {
        if netns(pid) == here {
            local.0 += 1;
            local.1 += rss_kib(pid);
        } else if comm(pid) == "srun" {
            clients.0 += 1;
            clients.1 += rss_kib(pid);
        }
    }
    let mib = |kib: u64| kib as f64 / 1024.0;
    ((local.0, mib(local.1)), (clients.0, mib(clients.1)))
}

fn show(calls: &BTreeMap<String, usize>) -> String {
    let total: usize = calls.values().sum();
    let each: Vec<String> = calls.iter().map(|(p, n)| format!("{p} {n}")).collect();
    format!("{total} ({})", each.join(", "))
}

fn main() {
    let options = common::Options::parse();
    let Some(c) = cluster() else {
        println!("slurm_footprint benchmark skipped: no SLURM test cluster (scripts/slurm-cluster.sh start)");
        return;
    };
    let Some(tools) = common::tool_dir("vllm-router") else {
        println!(
            "slurm_footprint benchmark skipped: vllm-router not found (scripts/install-router.sh)"
        );
        return;
    };
    let steps: Vec<usize> = match options.value("--steps") {
        Some(s) => s
            .split(',')
            .map(|n| n.trim().parse().expect("--steps N,M"))
            .collect(),
        None if options.smoke => vec![2],
        None => vec![2, 8, 32],
    };
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("scheduler-calls.log");
    shims(&dir.path().join("shims"), &log);
    std::fs::write(
        dir.path().join("srt-cluster.yaml"),
        format!(
            "executor: slurm\npartition: {}\ngpus_per_node: {}\nnetwork_interface: {}\nstop_grace_seconds: 5\nallocation_timeout_seconds: 120\n",
            c.partition, c.gpus, c.iface
        ),
    )
    .unwrap();
    let path = format!(
        "{}:{}:{}",
        dir.path().join("shims").display(),
        tools.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let here = nix::unistd::gethostname()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    let srt = |args: &[&str]| {
        let out = Command::new(common::srt_program())
            .args(args)
            .current_dir(dir.path())
            .env("PATH", &path)
            .env("SRT_SIM_STARTUP_DELAY_MS", "0")
            .env_remove("SLURM_JOB_ID")
            .env_remove("SRT_CLUSTER")
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "srt {args:?}:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
    };
    println!("srt on SLURM: what a deployment leaves where srt runs, and its scheduler calls ({} nodes of {} GPUs)\n", c.nodes, c.gpus);
    println!("| steps | allocations | processes where srt runs (RSS) | srun clients on the nodes (RSS) | srt's scheduler calls: apply | refresh | destroy | step launches by the agents |");
    println!("|---:|---:|---|---|---|---|---|---:|");
    for n in steps {
        if n - 1 > c.nodes * c.gpus {
            println!(
                "| {n} | skipped: {} GPUs in the cluster | | | | | | |",
                c.nodes * c.gpus
            );
            continue;
        }
        let name = format!("footprint-{n}");
        let file = dir.path().join(format!("{name}.yaml"));
        std::fs::write(&file, recipe(&name, n, c.gpus)).unwrap();
        let file = file.display().to_string();
        let start = lines(&log);
        srt(&[
            "apply",
            "-f",
            &file,
            "--simulate",
            "--auto-approve",
            "--quiet",
        ]);
        let (apply, launches) = calls(&log, start, &here);
        let (local, clients) = footprint(&name);
        let start = lines(&log);
        srt(&["plan", "-f", &file, "--simulate"]);
        let (refresh, _) = calls(&log, start, &here);
        let state = srt::state::StateStore::new(dir.path().join(".srt").join(&name))
            .load()
            .unwrap()
            .unwrap();
        let allocations = state
            .resources
            .values()
            .filter(|r| r.kind.name() == "allocation")
            .count();
        let start = lines(&log);
        srt(&["destroy", &name, "--auto-approve", "--quiet"]);
        let (destroy, _) = calls(&log, start, &here);
        println!(
            "| {n} | {allocations} | {} ({:.1} MiB) | {} ({:.1} MiB) | {} | {} | {} | {launches} |",
            local.0,
            local.1,
            clients.0,
            clients.1,
            show(&apply),
            show(&refresh),
            show(&destroy)
        );
        assert_eq!(local.0, 0, "processes of {name} left where srt runs");
    }
}
