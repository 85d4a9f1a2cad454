//! What a recipe becomes on SLURM, without a scheduler: the `sbatch` and `srun` command
//! lines (`srt render --cluster FILE`), the plan with its `allocation[N]` resources, and
//! the plan once one allocation's job is gone (what runs on it or names it is replaced,
//! with reasons).
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
    lowered_from(RECIPE, profile)
}

fn lowered_from(recipe: &str, profile: SlurmProfile) -> (LaunchPlan, ResourceGraph) {
    let launch = common::plan_with(recipe, None, HostLayout::Distinct);
    let exec = SlurmExecutor::new(
        profile,
        &launch.deployment,
        Path::new("/state/slurm-disagg"),
        launch.nodes[0].gpus,
        false,
        None,
    );
    let allocations = exec.allocations(launch.node_groups());
    let graph = graph::lower_with(&launch, &exec.execution(), &allocations).unwrap();
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

/// The allocations each address holds, as `applied` records them: job 41 + i for the
/// i-th allocation of the graph, each on hosts `n<node + 1>`.
fn jobs(graph: &ResourceGraph) -> BTreeMap<usize, (String, u64)> {
    let mut out = BTreeMap::new();
    for (k, nodes) in graph.allocations.iter().enumerate() {
        for &n in nodes {
            out.insert(n, (graph::allocation_address(nodes[0]), 41 + k as u64));
        }
    }
    out
}

/// slurm-disagg's prefill (with the Router) on node0 and its decode on node1 need not
/// share a job: each node is an allocation of its own, created first; a port block
/// depends on its node's, a process on those of the nodes it runs on or names (the
/// Router lists both workers on its command line, every worker names node 0).
#[test]
fn plan_creates_one_allocation_per_group_of_nodes_first() {
    let (_, graph) = lowered(profile("test-cluster.yaml"));
    assert_eq!(graph.allocations, [vec![0], vec![1]]);
    assert_eq!(graph.resources[0].address, "allocation[0]");
    assert_eq!(graph.resources[1].address, "allocation[1]");
    let deps = |a: &str| -> Vec<String> {
        graph
            .get(a)
            .unwrap()
            .deps
            .iter()
            .filter(|d| d.starts_with("allocation"))
            .cloned()
            .collect()
    };
    assert_eq!(deps("ports.worker.decode[0].node[0]"), ["allocation[1]"]);
    // Every vLLM worker is told node 0's address (`HEAD_NODE_IP`).
    assert_eq!(
        deps("worker.decode[0].node[0]"),
        ["allocation[0]", "allocation[1]"]
    );
    assert_eq!(deps("worker.prefill[0].node[0]"), ["allocation[0]"]);
    assert_eq!(deps("ports.router[0]"), ["allocation[0]"]);
    assert_eq!(deps("router[0]"), ["allocation[0]", "allocation[1]"]);
    let p = plan::diff(
        &graph,
        &State::new("slurm-disagg"),
        &BTreeMap::new(),
        "hash",
        &PlanOptions::default(),
    );
    snapshot("plan@slurm-disagg.yaml", &plan::render::render(&p));
}

/// `allocations: single` holds every node in one job, as srtctl does.
#[test]
fn a_single_allocation_holds_every_node() {
    let mut single = profile("test-cluster.yaml");
    single.allocations = srt::cluster::Allocations::Single;
    let (launch, graph) = lowered(single.clone());
    assert_eq!(graph.allocations, [vec![0, 1]]);
    for r in graph
        .resources
        .iter()
        .filter(|r| r.kind.name() == "ports" || r.kind.is_process())
    {
        assert!(
            r.deps.contains(&"allocation[0]".to_string()),
            "{}",
            r.address
        );
    }
    let text = srt::exec::slurm::render(&launch, &single);
    assert_eq!(text.matches("sbatch").count(), 1, "{text}");
    assert!(text.contains("--nodes 2"), "{text}");
}

/// slurm-agg's graph on the test cluster's profile.
fn slurm_agg() -> ResourceGraph {
    lowered_from("examples/slurm-agg.yaml", profile("test-cluster.yaml")).1
}

/// The plan of `graph` against `state`, refresh having seen `observed` (an address and
/// what it found there) when given.
fn plan_observing(
    graph: &ResourceGraph,
    state: &State,
    observed: Option<(&str, Observation)>,
) -> plan::Plan {
    let observed: BTreeMap<String, Observation> = observed
        .map(|(a, o)| (a.to_string(), o))
        .into_iter()
        .collect();
    plan::diff(graph, state, &observed, "h", &PlanOptions::default())
}

/// State as if every resource of `graph` had been applied, the i-th allocation on job
/// 41 + i.
fn applied(graph: &ResourceGraph) -> State {
    let jobs = jobs(graph);
    let mut state = State::new("slurm-disagg");
    for (i, r) in graph.resources.iter().enumerate() {
        let runtime = match (r.kind.name(), r.target) {
            ("allocation", graph::Target::Allocation(k)) => {
                let slots = graph.allocations[k].clone();
                Some(Runtime::Slurm {
                    job_id: 41 + k as u64,
                    step_id: None,
                    step_name: None,
                    nodes: slots.iter().map(|n| format!("n{}", n + 1)).collect(),
                    node_ips: slots.iter().map(|n| format!("10.0.0.{}", n + 1)).collect(),
                    adopted: false,
                    client: None,
                    launch: None,
                    slots,
                })
            }
            _ if r.kind.is_process() => Some(Runtime::Slurm {
                job_id: jobs[&r.node.unwrap()].1,
                step_id: Some(i as u64),
                step_name: Some(format!("slurm-disagg.{}", r.address)),
                nodes: vec![format!("n{}", r.node.unwrap() + 1)],
                node_ips: Vec::new(),
                adopted: false,
                client: None,
                launch: None,
                slots: Vec::new(),
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

/// The job of allocation[1] (the decode's node) is gone: it is replaced, and with it
/// only what runs on it or names it (the decode, and the Router that lists it on its
/// command line); the prefill on allocation[0] is left alone.
#[test]
fn a_gone_job_replaces_only_what_runs_on_it_or_names_it() {
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
        .filter(|(_, r)| matches!(r.runtime, Some(Runtime::Slurm { job_id: 42, .. })))
        .map(|(a, _)| (a.clone(), Observation::Gone("job 42 is gone".into())))
        .collect();
    let p = plan::diff(&graph, &state, &observed, "h", &PlanOptions::default());
    let replaced: Vec<&str> = p
        .changes
        .iter()
        .filter(|c| c.action == plan::Action::Replace)
        .map(|c| c.address.as_str())
        .collect();
    assert_eq!(
        replaced,
        [
            "allocation[1]",
            "ports.worker.decode[0].node[0]",
            "worker.decode[0].node[0]",
            "router[0]"
        ],
        "{}",
        plan::render::render(&p)
    );
    for c in p
        .changes
        .iter()
        .filter(|c| c.action == plan::Action::Replace)
    {
        if c.address != "allocation[1]" {
            assert!(
                c.reasons.iter().any(|x| matches!(x, plan::Reason::DependencyChanged { dependencies } if dependencies == &["allocation[1]".to_string()])),
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
    let p = plan_observing(&after, &state, None);
    for address in ["allocation[0]", "allocation[1]"] {
        assert_eq!(
            p.change(address).unwrap().reasons,
            [plan::Reason::SpecChanged {
                fields: vec!["time_limit".into()]
            }]
        );
    }
    let replaced = p
        .changes
        .iter()
        .filter(|c| c.action == plan::Action::Replace)
        .count();
    assert_eq!(replaced, 8, "{}", plan::render::render(&p));
    // The local executor's graph has no allocation: local hashes stay as they were.
    let local = graph::lower(
        &common::plan_with(RECIPE, None, HostLayout::Shared),
        &serde_json::json!({"executor": "local", "simulate": true}),
    )
    .unwrap();
    assert!(local.allocations.is_empty());
    assert!(local
        .resources
        .iter()
        .all(|r| r.kind.name() != "allocation"));
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

/// The addresses a plan replaces, and the reasons of each, as text.
fn replaced(p: &plan::Plan) -> BTreeMap<String, Vec<String>> {
    p.changes
        .iter()
        .filter(|c| c.action == plan::Action::Replace)
        .map(|c| {
            (
                c.address.clone(),
                c.reasons.iter().map(plan::Reason::describe).collect(),
            )
        })
        .collect()
}

/// A live allocation whose spec changes is replaced by one created first (`+/-`): what
/// runs on it moves with it, rolling, and the Router of slurm-agg (on allocation[0]),
/// which listens on the public address, says that address moves. One whose job is gone
/// is destroyed first.
#[test]
fn a_live_allocation_is_replaced_by_one_created_first_and_what_runs_on_it_moves() {
    let before = slurm_agg();
    let state = applied(&before);
    let mut longer = profile("test-cluster.yaml");
    longer.time_limit = Some("04:00:00".into());
    let (_, after) = lowered_from("examples/slurm-agg.yaml", longer);
    let p = plan_observing(&after, &state, None);
    for a in ["allocation[0]", "allocation[1]", "allocation[2]"] {
        let c = p.change(a).unwrap();
        assert!(c.create_first, "{a}");
        assert_eq!(c.steps(), ["create", "delete"]);
    }
    let worker = p.change("worker.agg[2].node[0]").unwrap();
    assert!(
        worker.reasons.contains(&plan::Reason::MovesWith {
            allocation: "allocation[1]".into()
        }),
        "{:?}",
        worker.reasons
    );
    let router = p.change("router[0]").unwrap();
    assert!(
        router
            .note
            .as_deref()
            .is_some_and(|n| n.contains("public address")),
        "{router:?}"
    );
    snapshot("plan-move@slurm-agg.yaml", &plan::render::render(&p));

    let graph = slurm_agg();
    let p = plan_observing(
        &graph,
        &state,
        Some(("allocation[1]", Observation::Gone("job 42 is gone".into()))),
    );
    assert!(!p.change("allocation[1]").unwrap().create_first);
}

/// An allocation refresh finds near the end of its time limit is renewed: replaced by
/// one created first, only its own processes moving; nothing else changes.
#[test]
fn a_renewal_moves_only_what_runs_on_the_allocation() {
    let graph = slurm_agg();
    let state = applied(&graph);
    let p = plan_observing(
        &graph,
        &state,
        Some((
            "allocation[2]",
            Observation::Renew(
                "5:00 left of its time limit 4:00:00, under renew_before 30:00".into(),
            ),
        )),
    );
    assert!(p.drift.is_empty(), "a renewal is not drift");
    let replaced = replaced(&p);
    assert_eq!(
        replaced.keys().collect::<Vec<_>>(),
        [
            "allocation[2]",
            "ports.worker.agg[4].node[0]",
            "ports.worker.agg[5].node[0]",
            "worker.agg[4].node[0]",
            "worker.agg[5].node[0]"
        ],
        "{}",
        plan::render::render(&p)
    );
    assert!(p.change("allocation[2]").unwrap().create_first);
    assert_eq!(
        replaced["worker.agg[4].node[0]"],
        ["it moves to the new job of `allocation[2]`, which replaces the old one"]
    );
    snapshot("plan-renew@slurm-agg.yaml", &plan::render::render(&p));
}

/// After a move cut short: allocation[1] is a new job, and its old one, deposed, still
/// runs a worker that has not moved. The worker moves; the allocation is updated in
/// place (its deposed job released once nothing runs in it); nothing else changes.
#[test]
fn a_process_left_in_a_deposed_job_moves_and_the_job_is_released() {
    let graph = slurm_agg();
    let mut state = applied(&graph);
    let alloc = state.resources.get_mut("allocation[1]").unwrap();
    let old = alloc.runtime.clone().unwrap();
    let Some(Runtime::Slurm { job_id, .. }) = &mut alloc.runtime else {
        unreachable!()
    };
    *job_id = 90;
    alloc.deposed = vec![old];
    // worker.agg[3] moved to job 90; worker.agg[2] still runs in job 42.
    if let Some(Runtime::Slurm { job_id, .. }) = &mut state
        .resources
        .get_mut("worker.agg[3].node[0]")
        .unwrap()
        .runtime
    {
        *job_id = 90;
    }
    let p = plan_observing(&graph, &state, None);
    let replaced = replaced(&p);
    assert_eq!(
        replaced.keys().collect::<Vec<_>>(),
        ["worker.agg[2].node[0]"],
        "{}",
        plan::render::render(&p)
    );
    assert_eq!(
        replaced["worker.agg[2].node[0]"],
        ["it runs in job 42, which its allocation's replacement deposed"]
    );
    let alloc = p.change("allocation[1]").unwrap();
    assert_eq!(alloc.action, plan::Action::Update);
    assert_eq!(
        alloc.reasons,
        [plan::Reason::Deposed {
            runtimes: vec!["job 42".into()]
        }]
    );
}

/// A job that is gone restarts its workers elsewhere: the Router they are listed in
/// (through its admin API) is updated in place, each taken out and added back.
#[test]
fn workers_restarted_on_a_new_job_rejoin_their_router() {
    let graph = slurm_agg();
    let state = applied(&graph);
    let p = plan_observing(
        &graph,
        &state,
        Some(("allocation[2]", Observation::Gone("job 43 is gone".into()))),
    );
    let members = p.change("members.router[0]").unwrap();
    assert_eq!(members.action, plan::Action::Update);
    assert_eq!(
        members.reasons,
        [plan::Reason::Rejoin {
            workers: vec![
                "worker.agg[4].node[0]".into(),
                "worker.agg[5].node[0]".into()
            ]
        }]
    );
    let diff = members.members.as_ref().unwrap();
    assert_eq!((diff.added.len(), diff.removed.len()), (2, 2));
    assert!(p.change("router[0]").unwrap().action == plan::Action::NoOp);
}
