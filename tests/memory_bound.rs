//! Memory is bounded by the recipe limits: `srt plan` of the largest deployments srt
//! accepts stays under 512 MiB of peak resident memory (measured on the child process by
//! the kernel, `ru_maxrss` of `RUSAGE_CHILDREN`). The limits in
//! `crates/srt/src/recipe/limits.rs` were chosen from these figures; a change that makes
//! planning heavier per process fails here, and one step past a limit is refused before
//! anything is allocated (`tests/invalid_limits.rs`, `tests/invalid_recipes.rs`).
//!
//! One test, so that the children measured are only these plans.

use nix::sys::resource::{getrusage, UsageWho};
use srt::recipe::limits::{MAX_ADDITIONAL_FRONTENDS, MAX_PROCESSES, MAX_ROUTED};
use std::path::Path;
use std::process::Command;

/// No recipe makes srt use more than half a GiB (the crash-safety issue asked for about
/// 1 GB; the largest plans took 0.8 GB then, about 350 MiB once the graph held its
/// specs as canonical JSON, about 270 MiB since argv and the Routers' lists are compact).
const BOUND_BYTES: i64 = 512 << 20;

/// Plans `recipe` against the example SLURM profile (one host per node, so nothing runs
/// out of ports) and returns the peak RSS of every child so far, in bytes.
fn plan_peak(dir: &Path, name: &str, recipe: &str) -> i64 {
    let path = dir.join(format!("{name}.yaml"));
    std::fs::write(&path, recipe).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_srt"))
        .args(["plan", "-f"])
        .arg(&path)
        .args(["--cluster", "clusters/example-pyxis.yaml", "--state-dir"])
        .arg(dir.join("state"))
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{name}: {stderr}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("to create"), "{name}: {stdout}");
    getrusage(UsageWho::RUSAGE_CHILDREN).unwrap().max_rss() * 1024
}

#[test]
fn the_largest_accepted_plans_stay_under_half_a_gib() {
    let dir = tempfile::tempdir().unwrap();
    let gpus_per_node = 8;
    // One process per GPU at the process limit, behind the default ten Routers: the
    // worker-list limit exactly.
    let nodes = MAX_PROCESSES / gpus_per_node;
    let agg = format!(
        "name: mem-agg\nresources: {{gpus_per_node: {gpus_per_node}}}\nroles:\n  agg:\n    nodes: {nodes}\n    workers: {MAX_PROCESSES}\n    gpus: 1\n"
    );
    assert_eq!(10 * MAX_PROCESSES, MAX_ROUTED);
    // The most Routers, each listing as many workers as the worker-list limit allows.
    let routers = MAX_ADDITIONAL_FRONTENDS + 1;
    let workers = MAX_ROUTED / routers;
    let many_routers = format!(
        "name: mem-routers\nresources: {{gpus_per_node: 1}}\nfrontend: {{num_additional_frontends: {MAX_ADDITIONAL_FRONTENDS}}}\nroles:\n  agg:\n    nodes: {workers}\n    workers: {workers}\n"
    );
    // P/D at the process limit with NIXL, one process per GPU.
    let half = MAX_PROCESSES / 2;
    let pd = format!(
        "name: mem-pd\nresources: {{gpus_per_node: {gpus_per_node}}}\nengine: {{type: vllm, connector: nixl}}\nroles:\n  prefill:\n    nodes: {n}\n    workers: {half}\n    gpus: 1\n  decode:\n    nodes: {n}\n    workers: {half}\n    gpus: 1\n",
        n = half / gpus_per_node
    );
    for (name, recipe) in [("agg", agg), ("routers", many_routers), ("pd", pd)] {
        let peak = plan_peak(dir.path(), name, &recipe);
        eprintln!(
            "{name}: peak RSS of the plans so far {} MiB",
            peak / (1 << 20)
        );
        assert!(
            peak < BOUND_BYTES,
            "{name}: srt plan peaked at {} MiB",
            peak / (1 << 20)
        );
    }
}
