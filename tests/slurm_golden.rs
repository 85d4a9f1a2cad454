//! What a recipe becomes on SLURM, without a scheduler: the `sbatch` and `srun` command
//! lines (`srt render --cluster FILE`), the plan with its `allocation` resource, and the
//! plan once the allocation's job is gone (everything on it is replaced, with reasons).
//! Golden files live in `golden/slurm/`; every profile in `clusters/` must load.

mod common;

use srt::cluster::{ClusterProfile, SlurmProfile};
use srt::exec::slurm::SlurmExecutor;
use srt::exec::Executor;
use srt::graph::{self, ResourceGraph};
use srt::launch::{HostLayout, LaunchPlan};
use srt::plan::{self, Observation, PlanOptions};
use srt::state::{ResourceState, Runtime, State, Status};
use std::collections::BTreeMap;
use std::path::Path;

const RECIPE: &str = "examples/slurm-disagg.yaml";

fn profile(name: &str) -> SlurmProfile {
    ClusterProfile::load(&common::root().join("clusters").join(name))
        .unwrap()
        .slurm()
        .cloned()
        .expect("a SLURM profile")
}

fn snapshot(name: &str, text: &str) {
    insta::with_settings!({
        snapshot_path => "../golden/slurm",
        prepend_module_to_snapshot => false,
        omit_expression => true,
    }, {
        insta::assert_snapshot!(name, text);
    });
}

fn lowered(profile: SlurmProfile) -> (LaunchPlan, ResourceGraph) {
    let launch = common::plan_with(RECIPE, None, HostLayout::Distinct);
    let exec = SlurmExecutor::new(
        profile,
        &launch.deployment,
        Path::new("/state/slurm-disagg"),
        launch.nodes.len(),
        launch.nodes[0].gpus,
        false,
        None,
    );
    let graph = graph::lower_with(&launch, &exec.execution(), exec.allocation().as_ref()).unwrap();
    (launch, graph)
}

#[test]
fn every_cluster_profile_loads() {
    let mut seen = 0;
    for entry in std::fs::read_dir(common::root().join("clusters")).unwrap() {
        let path = entry.unwrap().path();
        let p = ClusterProfile::load(&path).unwrap_or_else(|e| panic!("{e}"));
        assert_eq!(p.executor(), "slurm", "{}", path.display());
        seen += 1;
    }
    assert!(seen >= 2);
}

#[test]
fn srun_and_sbatch_lines() {
    let launch = common::plan_with(RECIPE, None, HostLayout::Distinct);
    let text = format!(
        "{}\n{}",
        srt::launch::render::render(&launch),
        srt::exec::slurm::render(&launch, &profile("example-pyxis.yaml"))
    );
    snapshot("render@slurm-disagg.yaml", &text);
}

/// The runtime keys on SLURM with pyxis: the recipe's sbatch and srun options after
/// the profile's, the mounts (and the run directory, where srt's copy of each script
/// is) on every containerized step, `host_setup` as a step of its own before the
/// worker's, outside its container.
#[test]
fn srun_and_sbatch_lines_of_the_runtime_keys() {
    let path = "examples/slurm-runtime-keys.yaml";
    let (_, recipe) = common::recipe(path);
    let launch = common::plan_with(path, None, HostLayout::Distinct);
    let pyxis = ClusterProfile::load(&common::root().join("clusters/example-pyxis.yaml")).unwrap();
    let profile = srt::workflow::effective_profile(pyxis, &recipe);
    let text = srt::exec::slurm::render(&launch, profile.slurm().unwrap());
    snapshot("render@slurm-runtime-keys.yaml", &text);
}

/// TensorRT-LLM's MPI jobs on SLURM with pyxis: each endpoint one `srun --mpi=pmix`
/// step of tp x pp tasks over its nodes, each rank under `numactl` (GB200) and
/// `trtllm-llmapi-launch`, the run directory (where its config file is) mounted.
#[test]
fn srun_lines_of_mpi_launched_workers() {
    let path = "examples/slurm-dynamo-trtllm-dep.yaml";
    let (_, recipe) = common::recipe(path);
    let launch = common::plan_with(path, None, HostLayout::Distinct);
    let pyxis = ClusterProfile::load(&common::root().join("clusters/example-pyxis.yaml")).unwrap();
    let profile = srt::workflow::effective_profile(pyxis, &recipe);
    let text = srt::exec::slurm::render(&launch, profile.slurm().unwrap());
    assert!(text.contains("--mpi=pmix"), "{text}");
    snapshot("render@slurm-dynamo-trtllm-dep.yaml", &text);
}

#[test]
fn plan_creates_the_allocation_first() {
    let (_, graph) = lowered(profile("test-cluster.yaml"));
    let alloc = graph.get("allocation").expect("an allocation resource");
    assert_eq!(alloc.kind.name(), "allocation");
    for r in graph
        .resources
        .iter()
        .filter(|r| r.kind.name() == "ports" || r.kind.is_process())
    {
        assert!(r.deps.contains(&"allocation".to_string()), "{}", r.address);
    }
    assert_eq!(graph.resources[0].address, "allocation");
    let p = plan::diff(
        &graph,
        &State::new("slurm-disagg"),
        &BTreeMap::new(),
        "hash",
        &PlanOptions::default(),
    );
    snapshot("plan@slurm-disagg.yaml", &plan::render::render(&p));
}

/// State as if every resource of `graph` had been applied on job 41.
fn applied(graph: &ResourceGraph) -> State {
    let mut state = State::new("slurm-disagg");
    for (i, r) in graph.resources.iter().enumerate() {
        let runtime = match r.kind.name() {
            "allocation" => Some(Runtime::Slurm {
                job_id: 41,
                step_id: None,
                step_name: None,
                nodes: vec!["n1".into(), "n2".into()],
                node_ips: vec!["10.0.0.1".into(), "10.0.0.2".into()],
                adopted: false,
                client: None,
                launch: None,
            }),
            _ if r.kind.is_process() => Some(Runtime::Slurm {
                job_id: 41,
                step_id: Some(i as u64),
                step_name: Some(format!("slurm-disagg.{}", r.address)),
                nodes: vec!["n1".into()],
                node_ips: Vec::new(),
                adopted: false,
                client: None,
                launch: None,
            }),
            _ => None,
        };
        state.resources.insert(
            r.address.clone(),
            ResourceState {
                runtime,
                ..ResourceState::of(r, Status::Running)
            },
        );
    }
    state
}

#[test]
fn a_gone_job_replaces_everything_on_it() {
    let (_, graph) = lowered(profile("test-cluster.yaml"));
    let state = applied(&graph);
    let none = plan::diff(
        &graph,
        &state,
        &BTreeMap::new(),
        "h",
        &PlanOptions::default(),
    );
    assert!(!none.has_changes(), "{}", plan::render::render(&none));
    let observed: BTreeMap<String, Observation> = state
        .resources
        .iter()
        .filter(|(_, r)| r.runtime.is_some())
        .map(|(a, _)| (a.clone(), Observation::Gone("job 41 is gone".into())))
        .collect();
    let p = plan::diff(&graph, &state, &observed, "h", &PlanOptions::default());
    for c in &p.changes {
        let r = graph.get(&c.address).unwrap();
        if r.kind.is_check() {
            continue;
        }
        assert_eq!(c.action, plan::Action::Replace, "{}", c.address);
        if c.address != "allocation" {
            assert!(
                c.reasons.iter().any(|x| matches!(x, plan::Reason::DependencyChanged { dependencies } if dependencies == &["allocation".to_string()])),
                "{}: {:?}",
                c.address,
                c.reasons
            );
        }
    }
    snapshot("plan-job-gone@slurm-disagg.yaml", &plan::render::render(&p));
}

#[test]
fn a_changed_allocation_replaces_everything_with_the_reason() {
    let (_, before) = lowered(profile("test-cluster.yaml"));
    let state = applied(&before);
    let mut longer = profile("test-cluster.yaml");
    longer.time_limit = Some("04:00:00".into());
    let (_, after) = lowered(longer);
    let p = plan::diff(
        &after,
        &state,
        &BTreeMap::new(),
        "h",
        &PlanOptions::default(),
    );
    let alloc = p.change("allocation").unwrap();
    assert_eq!(
        alloc.reasons,
        [plan::Reason::SpecChanged {
            fields: vec!["time_limit".into()]
        }]
    );
    let replaced = p
        .changes
        .iter()
        .filter(|c| c.action == plan::Action::Replace)
        .count();
    assert_eq!(replaced, 7, "{}", plan::render::render(&p));
    // The local executor's graph has no allocation: local hashes stay as they were.
    let local = graph::lower(
        &common::plan_with(RECIPE, None, HostLayout::Shared),
        &serde_json::json!({"executor": "local", "simulate": true}),
    )
    .unwrap();
    assert!(local.get("allocation").is_none());
}

#[test]
fn the_local_executor_refuses_state_that_runs_on_slurm() {
    let (_, graph) = lowered(profile("test-cluster.yaml"));
    let state = applied(&graph);
    let local = srt::exec::local::LocalExecutor::new("slurm-disagg", Path::new("/nope"), 2, false);
    let err = srt::workflow::restore(&local, &state)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("runs on SLURM (job 41)") && err.contains("--cluster"),
        "{err}"
    );
    assert!(srt::workflow::restore(&local, &State::new("slurm-disagg")).is_ok());
}

/// srtctl recipes carry `slurm:` settings and `resources.gpu_type`: they win over the
/// profile and reach sbatch.
#[test]
fn recipe_slurm_settings_override_the_profile() {
    let (_, recipe) = common::recipe("examples/srtctl-shape.yaml");
    let profile = srt::workflow::effective_profile(
        ClusterProfile::Slurm(Box::new(profile("test-cluster.yaml"))),
        &recipe,
    );
    let profile = profile.slurm().unwrap();
    assert_eq!(profile.time_limit.as_deref(), Some("01:00:00"));
    assert_eq!(
        profile.partition.as_deref(),
        Some("debug"),
        "kept from the profile"
    );
    let launch = common::plan_with("examples/srtctl-shape.yaml", None, HostLayout::Distinct);
    let text = srt::exec::slurm::render(&launch, profile);
    assert!(
        text.contains("--gres gpu:h100:8") && text.contains("--time 01:00:00"),
        "{text}"
    );
}
