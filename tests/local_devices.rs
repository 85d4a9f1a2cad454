//! Several nodes on one host: the local executor puts every node of a recipe on this
//! machine, so node `n`'s GPUs are the host's devices from `n × gpus_per_node`, and
//! without `--simulate` a recipe whose nodes need more devices than the host has is
//! refused rather than run with workers sharing GPUs.

mod common;

use srt::launch::HostLayout;
use std::process::Command;

/// `examples/local-dp.yaml` (two 2-GPU nodes): on a cluster both nodes use devices 0,1;
/// on one host the second node's pool gets devices 2,3.
#[test]
fn nodes_on_one_host_get_distinct_devices() {
    let devices = |hosts| -> Vec<(Vec<u32>, String)> {
        common::plan_with("examples/local-dp.yaml", None, hosts)
            .processes
            .iter()
            .filter(|p| p.worker.is_some())
            .map(|p| {
                let at = p.argv.iter().position(|a| a == "--device-ids").unwrap();
                (p.devices.clone(), p.argv[at + 1].to_owned())
            })
            .collect()
    };
    assert_eq!(
        devices(HostLayout::Distinct),
        [
            (vec![0, 1], "0,1".to_string()),
            (vec![0, 1], "0,1".to_string())
        ]
    );
    assert_eq!(
        devices(HostLayout::Shared),
        [
            (vec![0, 1], "0,1".to_string()),
            (vec![2, 3], "2,3".to_string())
        ]
    );
}

fn plan(dir: &std::path::Path, gpus: &str, simulate: bool) -> std::process::Output {
    let mut c = Command::new(env!("CARGO_BIN_EXE_srt"));
    c.args(["plan", "-f"])
        .arg(common::root().join("examples/local-dp.yaml"))
        .current_dir(dir)
        .env("SRT_LOCAL_GPUS", gpus)
        .env_remove("CUDA_VISIBLE_DEVICES")
        .env_remove("SRT_STATE_DIR")
        .env_remove("SRT_SIMULATE")
        .env_remove("SRT_CLUSTER");
    if simulate {
        c.arg("--simulate");
    }
    c.output().unwrap()
}

/// Without the simulator, the two nodes need devices 0-3: a 2-GPU host is refused
/// (naming the need and the count), a 4-GPU host plans; `--simulate` always plans.
#[test]
fn without_the_simulator_the_host_must_have_every_node_s_devices() {
    let dir = tempfile::tempdir().unwrap();
    let out = plan(dir.path(), "2", false);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "{err}");
    assert!(
        err.contains("srt::exec::host_gpus")
            && err.contains("2 nodes of 2 GPUs run on this one host as devices 0-3")
            && err.contains("has 2 GPU(s) (SRT_LOCAL_GPUS)")
            && err.contains("--simulate"),
        "{err}"
    );
    for (gpus, simulate) in [("4", false), ("0", true)] {
        let out = plan(dir.path(), gpus, simulate);
        assert!(
            out.status.success(),
            "{gpus} {simulate}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}
