//! srtctl's runtime keys (`setup_script`, `host_setup`, `container_mounts`,
//! `extra_mount`, `sbatch_directives`, `srun_options`, `environment`, `identity`,
//! `profiling`, `enable_config_dump`): what each does to the launch plan, and that changing one replaces
//! exactly what it touches, as `srt plan` works it out (the desired graph diffed
//! against the state of the previous one applied).

mod common;

use srt::plan::{self, Action, PlanOptions};
use srt::state::State;
use srt::workflow::{prepare_file, PrepareOptions, Prepared};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// A prefill/decode recipe on two nodes, with an image, and the runtime keys of
/// `extra` (top-level YAML), in a directory of its own holding `scripts`.
struct Case {
    dir: tempfile::TempDir,
}

const BASE: &str = "\
schema: 2
name: rt
model:
  path: /models/tiny
  served_name: tiny
  container: nvcr.io/nvidia/vllm:25.09
resources:
  gpus_per_node: 4
frontend:
  enable_multiple_frontends: false
roles:
  prefill:
    nodes: 1
    workers: 1
    gpus: 1
    env:
      LOG: \"/logs/{node}-{node_id}.log\"
  decode:
    nodes: 1
    workers: 2
    gpus: 1
";

impl Case {
    fn new() -> Case {
        let dir = tempfile::tempdir().unwrap();
        // A directory others cannot write (the temporary root may be world-writable
        // and sticky, which is accepted above a script).
        std::fs::create_dir(dir.path().join("scripts")).unwrap();
        Case { dir }
    }

    fn script(&self, name: &str, body: &str) {
        std::fs::write(self.dir.path().join("scripts").join(name), body).unwrap();
    }

    fn recipe(&self, extra: &str) -> PathBuf {
        let path = self.dir.path().join("rt.yaml");
        std::fs::write(&path, format!("{BASE}{extra}")).unwrap();
        path
    }

    fn prepared(&self, extra: &str, cluster: Option<&str>) -> Prepared {
        let path = self.recipe(extra);
        let options = PrepareOptions {
            state_dir: self.dir.path().join(".srt"),
            nodes: None,
            simulate: true,
            grace: Duration::from_secs(1),
            cluster: cluster.map(|c| common::root().join("clusters").join(c)),
            selection: Default::default(),
        };
        prepare_file(&path, &options)
            .unwrap_or_else(|e| panic!("{extra}: {}", common::render_diag(&e)))
    }
}

/// State as if `p`'s graph had been applied.
fn applied(p: &Prepared) -> State {
    let mut s = State::new("rt");
    for r in &p.graph.resources {
        let record = srt::state::ResourceState::of(r, srt::state::Status::Running);
        s.resources.insert(r.address.clone(), record);
    }
    s
}

/// The addresses whose own spec `after` changes once `before` is applied: what a key
/// touches. Whatever else is replaced is replaced for them (a static Router lists its
/// workers, so their replacement restarts it), never for a spec of its own.
fn replaced(before: &Prepared, after: &Prepared) -> BTreeSet<String> {
    let p = plan::diff(
        &after.graph,
        &applied(before),
        &BTreeMap::new(),
        "h",
        &PlanOptions::default(),
    );
    assert!(
        p.changes
            .iter()
            .all(|c| c.action != Action::Create && c.action != Action::Destroy),
        "{}",
        plan::render::render(&p)
    );
    let own = |c: &&plan::Change| {
        c.reasons
            .iter()
            .any(|r| matches!(r, plan::Reason::SpecChanged { .. }))
    };
    let touched: BTreeSet<String> = p
        .changes
        .iter()
        .filter(|c| c.action == Action::Replace)
        .filter(own)
        .map(|c| c.address.clone())
        .collect();
    for c in p.changes.iter().filter(|c| c.action == Action::Replace) {
        assert!(
            touched.contains(&c.address)
                || c.reasons.iter().all(|r| matches!(
                    r,
                    plan::Reason::DependencyChanged { .. } | plan::Reason::MustRestart { .. }
                )),
            "{}: {:?}",
            c.address,
            c.reasons
        );
    }
    touched
}

fn workers(p: &Prepared) -> BTreeSet<String> {
    addresses(p, |a| a.starts_with("worker."))
}

fn addresses(p: &Prepared, keep: impl Fn(&str) -> bool) -> BTreeSet<String> {
    p.launch
        .processes
        .iter()
        .map(|p| p.address.clone())
        .filter(|a| keep(a))
        .collect()
}

fn setup_keys(key: &str) -> String {
    format!("{key}: scripts/s.sh\n")
}

#[test]
fn a_changed_setup_script_replaces_the_workers_that_run_it_and_nothing_else() {
    for key in ["setup_script", "host_setup"] {
        let case = Case::new();
        case.script("s.sh", "echo one\n");
        let before = case.prepared(&setup_keys(key), None);
        let w = &before.launch.processes[0];
        assert_eq!(w.wrap.setup.len(), 1, "{key}");
        assert_eq!(w.wrap.setup[0].key, key);
        assert_eq!(w.wrap.setup[0].on_host, key == "host_setup");
        assert_eq!(&*w.wrap.setup[0].text, "echo one\n");
        // The Router runs no setup script.
        assert!(before
            .launch
            .processes
            .iter()
            .filter(|p| p.worker.is_none())
            .all(|p| p.wrap.setup.is_empty()));
        case.script("s.sh", "echo two\n");
        let after = case.prepared(&setup_keys(key), None);
        assert_eq!(replaced(&before, &after), workers(&before), "{key}");
        // The plan says what changed: the wrap, its digest with --explain.
        let p = plan::diff(
            &after.graph,
            &applied(&before),
            &BTreeMap::new(),
            "h",
            &PlanOptions::default(),
        );
        let text = plan::render::render(&p);
        assert!(text.contains("because its spec changed: wrap"), "{text}");
        // Same contents under another name: nothing to replace.
        case.script("t.sh", "echo two\n");
        let renamed = case.prepared(&format!("{key}: scripts/t.sh\n"), None);
        assert!(replaced(&after, &renamed).is_empty(), "{key}");
    }
}

#[test]
fn a_setup_script_others_can_write_is_refused_at_its_key() {
    use std::os::unix::fs::PermissionsExt;
    let case = Case::new();
    case.script("s.sh", "true\n");
    let script = case.dir.path().join("scripts/s.sh");
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o666)).unwrap();
    let path = case.recipe("setup_script: scripts/s.sh\n");
    let (source, recipe) = srt::recipe::load_file(&path);
    let problems = srt::assemble::assemble(&recipe.unwrap(), &Default::default()).unwrap_err();
    let p = problems
        .iter()
        .find(|p| p.code == "srt::recipe::setup_script")
        .unwrap_or_else(|| panic!("{problems:?}"));
    assert!(
        p.message.contains("can be written by other users"),
        "{}",
        p.message
    );
    let at = p.span.offset();
    assert_eq!(&source.text[at..at + p.span.len()], "scripts/s.sh");
    // Writable by its group only through a directory: refused as well.
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o644)).unwrap();
    let dir = case.dir.path().join("scripts");
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
    let (_, recipe) = srt::recipe::load_file(&path);
    let problems = srt::assemble::assemble(&recipe.unwrap(), &Default::default()).unwrap_err();
    assert!(
        problems
            .iter()
            .any(|p| p.code == "srt::recipe::setup_script" && p.message.contains("scripts")),
        "{problems:?}"
    );
}

#[test]
fn environment_reaches_every_worker_after_the_role_env_and_replaces_only_workers() {
    let case = Case::new();
    let before = case.prepared("environment:\n  A: \"{node_id}\"\n  LOG: over\n", None);
    for p in &before.launch.processes {
        let env = &p.env;
        match &p.worker {
            Some(_) => {
                assert_eq!(env["A"], p.node.to_string(), "{}", p.address);
                // `environment` wins over the role's `env`, as in srtctl.
                assert_eq!(env["LOG"], "over");
            }
            None => assert!(!env.contains_key("A"), "{}", p.address),
        }
    }
    let after = case.prepared("environment:\n  A: \"{node_id}\"\n  LOG: other\n", None);
    assert_eq!(replaced(&before, &after), workers(&before));
}

#[test]
fn node_placeholders_of_a_role_env_are_the_process_node() {
    let case = Case::new();
    let p = case.prepared("", None);
    let prefill = &p.launch.processes[0];
    assert_eq!(prefill.env["LOG"], "/logs/<node0-host>-0.log");
    // The executor binds `<nodeN-host>` to the node's host name.
    let resolved = p.exec.bindings().resolve(&prefill.env["LOG"]);
    assert!(!resolved.contains('<'), "{resolved}");
}

#[test]
fn mounts_reach_every_containerized_process_and_replace_only_those() {
    let case = Case::new();
    let keys =
        |m: &str| format!("container_mounts:\n  /lustre/models: /models\nextra_mount:\n  - {m}\n");
    let before = case.prepared(&keys("/data:/data:ro"), None);
    let with_image = addresses(&before, |_| true)
        .into_iter()
        .filter(|a| {
            before
                .launch
                .processes
                .iter()
                .any(|p| &p.address == a && p.container_image.is_some())
        })
        .collect::<BTreeSet<_>>();
    assert!(!with_image.is_empty());
    for p in &before.launch.processes {
        let want: Vec<String> = match p.container_image {
            Some(_) => vec!["/lustre/models:/models".into(), "/data:/data:ro".into()],
            None => Vec::new(),
        };
        assert_eq!(p.wrap.mounts, want, "{}", p.address);
    }
    // Locally they are a warning at the key: the same recipe runs on a cluster.
    assert!(before
        .launch
        .warnings
        .iter()
        .any(|w| w.code == "srt::recipe::runtime_key_unused"));
    let after = case.prepared(&keys("/data:/data"), None);
    assert_eq!(replaced(&before, &after), with_image);
}

#[test]
fn sbatch_directives_replace_the_allocation_and_srun_options_every_step() {
    let case = Case::new();
    let cluster = Some("test-cluster.yaml");
    let before = case.prepared("sbatch_directives:\n  mem: \"0\"\n", cluster);
    let allocations: BTreeSet<String> = before
        .graph
        .resources
        .iter()
        .filter(|r| r.kind.name() == "allocation")
        .map(|r| r.address.clone())
        .collect();
    assert!(!allocations.is_empty());
    for a in &allocations {
        let spec = before.graph.get(a).unwrap().spec.as_str();
        assert!(spec.contains("--mem=0"), "{spec}");
    }
    let after = case.prepared("sbatch_directives:\n  mem: 64G\n", cluster);
    // The allocations' own spec; everything on them is replaced with them, as
    // `dependencies changed: allocation[N]`.
    assert_eq!(replaced(&before, &after), allocations);

    let before = case.prepared("srun_options:\n  cpus-per-task: 16\n", cluster);
    let after = case.prepared("srun_options:\n  - --cpus-per-task=8\n", cluster);
    let steps = replaced(&before, &after);
    assert!(steps.is_disjoint(&allocations), "{steps:?}");
    assert_eq!(steps, addresses(&before, |_| true));
    // Locally there is no scheduler: a warning, nothing replaced by them.
    let local = case.prepared("srun_options:\n  cpus-per-task: 16\n", None);
    assert!(
        local
            .launch
            .warnings
            .iter()
            .any(|w| w.code == "srt::recipe::runtime_key_unused"
                && w.message.contains("srun_options"))
    );
    let other = case.prepared("srun_options:\n  cpus-per-task: 8\n", None);
    assert!(replaced(&local, &other).is_empty());
}

#[test]
fn identity_is_in_the_plan_and_in_no_hash() {
    let case = Case::new();
    let identity = |rev: &str| {
        format!("identity:\n  model:\n    repo: Qwen/Qwen3-0.6B\n    revision: {rev}\n  frameworks:\n    vllm: 0.32.0\n")
    };
    let before = case.prepared(&identity("abc"), None);
    let id = before.launch.identity.as_ref().unwrap();
    assert_eq!(id.describe(), "model=Qwen/Qwen3-0.6B@abc vllm=0.32.0");
    let json: serde_json::Value =
        serde_json::from_str(&srt::launch::render::json(&before.launch)).unwrap();
    assert_eq!(json["identity"]["model"]["revision"], "abc");
    let after = case.prepared(&identity("def"), None);
    assert!(replaced(&before, &after).is_empty());
    assert_eq!(before.recipe_hash, after.recipe_hash);
}

#[test]
fn profiling_wraps_the_profiled_role_and_replaces_only_its_workers() {
    let case = Case::new();
    let nsys = |stop: u32| {
        format!("profiling:\n  type: nsys\n  prefill:\n    start_step: 5\n    stop_step: {stop}\n")
    };
    let before = case.prepared(&nsys(10), None);
    let prefill = addresses(&before, |a| a.starts_with("worker.prefill"));
    for p in &before.launch.processes {
        let profiled = prefill.contains(&p.address);
        assert_eq!(!p.wrap.prefix.is_empty(), profiled, "{}", p.address);
        if profiled {
            assert_eq!(p.wrap.prefix[..2], ["nsys", "profile"]);
            let out = p.wrap.prefix.last().unwrap();
            assert_eq!(out, &format!("<run-dir>/profiles/prefill/{}", p.address));
            assert_eq!(p.wrap.dirs, ["<run-dir>/profiles/prefill"]);
            assert_eq!(p.env["PROFILE_PREFILL_START_STEP"], "5");
            let argv: Vec<&str> = p.argv.iter().collect();
            let at = argv.iter().position(|t| *t == "--profiler-config").unwrap();
            assert_eq!(
                argv[at + 1],
                r#"{"delay_iterations":5,"max_iterations":5,"profiler":"cuda"}"#
            );
        }
    }
    // Under --simulate the simulator runs without nsys.
    assert!(before
        .runnable()
        .processes
        .iter()
        .all(|p| p.wrap.prefix.is_empty()));
    let after = case.prepared(&nsys(20), None);
    assert_eq!(replaced(&before, &after), prefill);
    // torch: the engine's own profiler, its traces under the run directory.
    let torch = case.prepared(
        "profiling:\n  type: torch\n  decode:\n    start_step: 0\n    stop_step: 3\n",
        None,
    );
    let d = torch
        .launch
        .processes
        .iter()
        .find(|p| p.address.starts_with("worker.decode"))
        .unwrap();
    assert!(d.wrap.prefix.is_empty());
    assert!(d
        .argv
        .iter()
        .any(|t| t.contains("\"torch_profiler_dir\":\"<run-dir>/profiles/decode\"")));
}

/// The example's goldens show every key; here, that it loads where the CLI reads it
/// from (its scripts next to it).
#[test]
fn the_example_reads_its_scripts_next_to_it() {
    let p = common::plan(Path::new("examples/slurm-runtime-keys.yaml"));
    let w = &p.processes[0];
    assert_eq!(
        w.wrap.setup.iter().map(|s| s.key).collect::<Vec<_>>(),
        ["host_setup", "setup_script"]
    );
    assert!(w.wrap.setup[1].text.contains("worker setup on"));
}

/// srtctl recipes pass pyxis' own options in `srun_options` (`container-remap-root`):
/// srun's catalog does not have them, so they are read as the container plugin's and
/// join the profile's `container.flags` (containerized steps only); srt's own
/// `--container-image` is still refused.
#[test]
fn container_plugin_options_in_srun_options_join_the_container_flags() {
    let case = Case::new();
    let path = case.recipe("srun_options:\n  container-remap-root: \"\"\n  cpus-per-task: 2\n");
    let (_, recipe) = srt::recipe::load_file(&path);
    let recipe = recipe.unwrap();
    srt::assemble::assemble(&recipe, &Default::default()).unwrap();
    let pyxis =
        srt::cluster::ClusterProfile::load(&common::root().join("clusters/example-pyxis.yaml"))
            .unwrap();
    let profile = srt::workflow::effective_profile(pyxis, &recipe);
    let s = profile.slurm().unwrap();
    assert_eq!(s.container.flags.last().unwrap(), "--container-remap-root");
    assert_eq!(s.srun_options.last().unwrap(), "--cpus-per-task=2");
    assert!(!s.srun_options.iter().any(|o| o.starts_with("--container")));
    let path = case.recipe("srun_options:\n  container-image: other\n");
    let (_, recipe) = srt::recipe::load_file(&path);
    let problems = srt::assemble::assemble(&recipe.unwrap(), &Default::default()).unwrap_err();
    assert_eq!(
        problems[0].code, "srt::recipe::managed_option",
        "{problems:?}"
    );
}

/// srtctl's mounts as its recipes write them: a source the container runtime names
/// (`tmpfs`) with its options, and a host path relative to the recipe (its directory).
#[test]
fn mounts_keep_srtctls_forms() {
    let case = Case::new();
    let p = case.prepared(
        "extra_mount:\n  - \"tmpfs:/dev/shm:size=100%\"\n  - \"configs/eplb:/eplb-configs\"\n",
        None,
    );
    let dir = case.dir.path().display();
    assert_eq!(
        p.launch.processes[0].wrap.mounts,
        [
            "tmpfs:/dev/shm:size=100%".to_string(),
            format!("{dir}/configs/eplb:/eplb-configs")
        ]
    );
}

/// Locally, `srt plan` names the profiler a worker would run under when this machine
/// lacks it, with how to get it, besides the engine's own program.
#[test]
fn a_missing_profiler_is_named_before_apply() {
    let dir = tempfile::tempdir().unwrap();
    let recipe = dir.path().join("r.yaml");
    std::fs::write(
        &recipe,
        "name: rt-nsys\nresources:\n  gpus_per_node: 1\nroles:\n  agg:\n    nodes: 1\n    workers: 1\n\
         profiling:\n  type: nsys\n  aggregated:\n    start_step: 1\n    stop_step: 5\n",
    )
    .unwrap();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_srt"))
        .args(["plan", "-f"])
        .arg(&recipe)
        .arg("--state-dir")
        .arg(dir.path().join(".srt"))
        .env("PATH", dir.path())
        .env_remove("SRT_CLUSTER")
        .current_dir(dir.path())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("`nsys` (run by worker.agg[0].node[0]): install NVIDIA Nsight Systems"),
        "{err}"
    );
    assert!(
        err.contains("`vllm` (run by worker.agg[0].node[0])"),
        "{err}"
    );
}

/// `enable_config_dump: true` under Dynamo: every worker's wrapper writes its resolved
/// configuration under the run directory (`--dump-config-to`, as srtctl passes it), and
/// turning it on replaces the workers alone. Where no worker program takes the flag it
/// is a warning (nothing is dumped).
#[test]
fn config_dump_reaches_every_dynamo_worker_and_replaces_only_workers() {
    let dir = tempfile::tempdir().unwrap();
    let example =
        std::fs::read_to_string(common::root().join("examples/local-dynamo-trtllm.yaml")).unwrap();
    let prepared = |extra: &str| {
        let path = dir.path().join("dump.yaml");
        std::fs::write(&path, format!("{example}{extra}")).unwrap();
        let options = PrepareOptions {
            state_dir: dir.path().join(".srt"),
            nodes: None,
            simulate: true,
            grace: Duration::from_secs(1),
            cluster: None,
            selection: Default::default(),
        };
        prepare_file(&path, &options).unwrap_or_else(|e| panic!("{}", common::render_diag(&e)))
    };
    let off = prepared("");
    let on = prepared("enable_config_dump: true\n");
    let workers = workers(&on);
    assert_eq!(workers.len(), 3, "{workers:?}");
    for p in &on.launch.processes {
        let argv = p.argv.to_vec();
        let at = argv.iter().position(|a| a == "--dump-config-to");
        if workers.contains(&p.address) {
            let file = format!("<run-dir>/config/{}.json", p.address);
            assert_eq!(at.map(|i| &argv[i + 1]), Some(&file), "{argv:?}");
        } else {
            assert!(at.is_none(), "{}: {argv:?}", p.address);
        }
    }
    assert_eq!(replaced(&off, &on), workers);

    let case = Case::new();
    let vllm = case.prepared("enable_config_dump: true\n", None);
    assert!(
        vllm.launch
            .warnings
            .iter()
            .any(|w| w.code == "srt::recipe::config_dump"),
        "{:?}",
        vllm.launch.warnings
    );
    assert!(vllm
        .launch
        .processes
        .iter()
        .all(|p| !p.argv.contains("--dump-config-to")));
}
