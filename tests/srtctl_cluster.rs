//! srtctl's cluster file, `srtslurm.yaml`, as srt's cluster profile: its aliases
//! resolve in the recipe (each resolution a located note), its defaults reach the
//! allocation's `sbatch` and the steps' `srun`.

use std::process::Command;

const CLUSTER: &str = "\
default_account: llm
default_partition: gpu
default_time_limit: \"02:00:00\"
gpus_per_node: 4
use_segment_sbatch_directive: false
use_exclusive_sbatch_directive: true
default_mounts:
  /lustre/models: /models
model_paths:
  tiny: /lustre/models/tiny
containers:
  sglang-dev: /lustre/images/sglang-dev.sqsh
";

const RECIPE: &str = "\
name: aliased
model:
  path: tiny
  container: sglang-dev
  precision: bf16
resources:
  gpus_per_node: 4
  agg_nodes: 1
  agg_workers: 1
frontend:
  type: sglang
  enable_multiple_frontends: false
backend:
  type: sglang
  sglang_config:
    aggregated:
      tensor-parallel-size: 4
";

fn render(dir: &std::path::Path, cluster: &str) -> std::process::Output {
    std::fs::write(dir.join("srtslurm.yaml"), cluster).unwrap();
    std::fs::write(dir.join("r.yaml"), RECIPE).unwrap();
    Command::new(env!("CARGO_BIN_EXE_srt"))
        .args(["render", "-f", "r.yaml", "--cluster", "srtslurm.yaml"])
        .current_dir(dir)
        .env("NO_COLOR", "1")
        .env_remove("SRT_CLUSTER")
        .output()
        .unwrap()
}

#[test]
fn aliases_and_defaults_of_srtslurm_yaml_reach_the_commands() {
    let dir = tempfile::tempdir().unwrap();
    let out = render(dir.path(), CLUSTER);
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stdout.contains("--model-path /lustre/models/tiny"),
        "{stdout}"
    );
    assert!(
        stdout.contains("--container-image /lustre/images/sglang-dev.sqsh"),
        "{stdout}"
    );
    assert!(
        stdout.contains("'--container-mounts=/lustre/models:/models'"),
        "{stdout}"
    );
    for option in [
        "--exclusive",
        "--account llm",
        "--partition gpu",
        "--time 02:00:00",
        "--gpus-per-node 4",
    ] {
        assert!(stdout.contains(option), "{option}:\n{stdout}");
    }
    assert!(
        stderr.contains("srt::recipe::alias"),
        "each resolution is noted:\n{stderr}"
    );
}

#[test]
fn a_key_srt_does_not_support_is_refused_in_the_cluster_file() {
    let dir = tempfile::tempdir().unwrap();
    let out = render(dir.path(), &format!("{CLUSTER}use_het_jobs: true\n"));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("srt::cluster::srtctl_key") && stderr.contains("use_het_jobs"),
        "{stderr}"
    );
}

#[test]
fn srt_migrate_writes_srtslurm_yaml_as_a_profile_that_loads_the_same() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("srtslurm.yaml"), CLUSTER).unwrap();
    let run = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_srt"))
            .args(args)
            .current_dir(dir.path())
            .output()
            .unwrap()
    };
    let out = run(&["migrate", "srtslurm.yaml", "-o", "srt-cluster.yaml"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let written = std::fs::read_to_string(dir.path().join("srt-cluster.yaml")).unwrap();
    assert!(
        written.contains("executor: slurm") && written.contains("--exclusive"),
        "{written}"
    );
    assert_eq!(
        srt::cluster::ClusterProfile::check(&written).unwrap(),
        srt::cluster::ClusterProfile::check(CLUSTER).unwrap()
    );
    let verified = run(&["migrate", "srtslurm.yaml", "--verify"]);
    assert!(
        verified.status.success(),
        "{}",
        String::from_utf8_lossy(&verified.stderr)
    );
}

/// `srtctl_root` names srtctl's checkout: a recipe's `setup_script` that is not beside
/// it is found in its `configs/`, then `configs/patches/` (srtctl's `/configs` mount),
/// with a located note; one beside the recipe wins; without the cluster file it is
/// refused, saying where srt looked.
#[test]
fn setup_scripts_are_found_in_srtctl_s_configs_as_srtctl_finds_them() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    let configs = root.join("checkout/configs");
    std::fs::create_dir_all(configs.join("patches")).unwrap();
    std::fs::create_dir_all(root.join("recipes")).unwrap();
    std::fs::write(configs.join("patches/deps.sh"), "echo patched\n").unwrap();
    std::fs::write(
        root.join("srtslurm.yaml"),
        format!("{CLUSTER}srtctl_root: checkout\n"),
    )
    .unwrap();
    std::fs::write(
        root.join("recipes/r.yaml"),
        format!("{RECIPE}setup_script: deps.sh\n"),
    )
    .unwrap();
    let validate = |cluster: Option<&str>| {
        let mut c = Command::new(env!("CARGO_BIN_EXE_srt"));
        c.args(["validate", "-f", "recipes/r.yaml"])
            .current_dir(root)
            .env("NO_COLOR", "1")
            .env_remove("SRT_CLUSTER");
        match cluster {
            Some(file) => c.env("SRTSLURM_CONFIG", file),
            None => c.env("SRTSLURM_CONFIG", "/dev/null"),
        };
        let out = c.output().unwrap();
        (
            out.status.success(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let found = |stderr: &str, path: &std::path::Path| {
        stderr.contains("srt::recipe::script_dir")
            && stderr.contains(&format!("it is {}", path.display()))
    };

    let (ok, stderr) = validate(Some("srtslurm.yaml"));
    assert!(ok, "{stderr}");
    assert!(found(&stderr, &configs.join("patches/deps.sh")), "{stderr}");

    std::fs::write(configs.join("deps.sh"), "echo configs\n").unwrap();
    let (ok, stderr) = validate(Some("srtslurm.yaml"));
    assert!(ok && found(&stderr, &configs.join("deps.sh")), "{stderr}");

    let (ok, stderr) = validate(None);
    assert!(!ok, "{stderr}");
    assert!(
        stderr.contains("srt::recipe::setup_script") && stderr.contains("srtctl_root"),
        "{stderr}"
    );

    // `srt migrate --verify` reads both forms with the cluster file as validate does;
    // without `--verify`, a cluster file in the environment is unread.
    let migrate = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_srt"))
            .arg("migrate")
            .args(args)
            .current_dir(root)
            .env("SRT_CLUSTER", "srtslurm.yaml")
            .output()
            .unwrap()
    };
    let verified = migrate(&["recipes/r.yaml", "--verify"]);
    assert!(
        verified.status.success(),
        "{}",
        String::from_utf8_lossy(&verified.stderr)
    );
    let printed = migrate(&["recipes/r.yaml"]);
    assert!(
        printed.status.success(),
        "{}",
        String::from_utf8_lossy(&printed.stderr)
    );

    std::fs::write(root.join("recipes/deps.sh"), "echo beside\n").unwrap();
    let (ok, stderr) = validate(Some("srtslurm.yaml"));
    assert!(ok, "{stderr}");
    assert!(!stderr.contains("srt::recipe::script_dir"), "{stderr}");
}
