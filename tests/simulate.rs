//! `--simulate` is a transform of the processes handed to the executor, not of the plan:
//! every worker runs the simulator with its engine's own arguments (or, under a
//! frontend's runtime, the runtime's simulated engine the plan names), nothing else changes,
//! and the graph (hashes, state, golden files) is lowered from the untransformed plan.

mod common;

use srt::launch::HostLayout;
use srt::launch::ProcessKind;
use srt::workflow::{self, PrepareOptions};
use std::path::Path;
use std::time::Duration;

const SIM: &str = "/opt/srt/bin/srt-vllm-sim";
const RANKS: &str = "/opt/srt/bin/srt-rank-sim";

/// `planned` with its program (its first words, up to the first flag or argument the
/// simulator also gets) replaced by the simulator, as `started` shows it: the simulator
/// must get every word after the program unchanged.
fn program_replaced(planned: &srt::launch::Argv, started: &srt::launch::Argv) -> srt::launch::Argv {
    let planned = planned.to_vec();
    let started = started.to_vec();
    let rest = started.len().saturating_sub(1);
    let program = planned.len().saturating_sub(rest);
    assert!(
        (1..=3).contains(&program) && planned[..program].iter().all(|w| !w.starts_with("--")),
        "only the program is replaced: {planned:?} -> {started:?}"
    );
    let mut argv = vec![SIM.to_string()];
    argv.extend(planned[program..].iter().cloned());
    argv.into()
}

#[test]
fn the_simulator_replaces_only_the_program_of_workers() {
    for path in common::examples() {
        let (_, recipe) = common::recipe(&path);
        for hosts in [HostLayout::Shared, HostLayout::Distinct] {
            let plan = common::plan_with(&path, None, hosts);
            let engine = srt::engine::lookup(&recipe.engine.kind.value).unwrap();
            let stand_ins = workflow::StandIns {
                engine: Path::new(SIM).into(),
                ranks: Path::new(RANKS).into(),
            };
            let run = workflow::simulated(&plan, engine, &stand_ins);
            assert_eq!(run.processes.len(), plan.processes.len());
            for (planned, started) in plan.processes.iter().zip(&run.processes) {
                let mut expected = planned.clone();
                let own = planned.worker.as_ref().and_then(|w| w.simulated.clone());
                match own {
                    // A runtime's own simulated engine (Dynamo's mocker), whole.
                    Some(argv) => expected.argv = argv,
                    None if planned.kind == ProcessKind::Worker => {
                        expected.argv = program_replaced(&planned.argv, &started.argv);
                    }
                    None => {}
                }
                // Every rank runs the rank stand-in, which runs the program at rank 0.
                if let Some(r) = &mut expected.ranks {
                    r.launcher = vec![RANKS.to_string()];
                }
                expected.container_image = None;
                expected.wrap.prefix.clear();
                assert_eq!(
                    started,
                    &expected,
                    "{}: {}",
                    path.display(),
                    planned.address
                );
            }
            // Nothing but the processes changes.
            let mut back = run.clone();
            back.processes = plan.processes.clone();
            assert_eq!(back, plan, "{}", path.display());
        }
    }
}

/// `workflow::prepare` under `--simulate`: the graph comes from the plan (`vllm serve`, the
/// golden files' hashes with the mode `simulate: true`), the executor gets the
/// simulator.
#[test]
fn prepare_lowers_the_plan_and_hands_the_simulator_to_the_executor() {
    let state = tempfile::tempdir().unwrap();
    let options = |simulate| PrepareOptions {
        state_dir: state.path().to_path_buf(),
        nodes: None,
        simulate,
        grace: Duration::from_secs(1),
        // No profile (and none in the package root): the local executor.
        cluster: None,
        selection: Default::default(),
    };
    let recipe = common::root().join("examples/local-disagg.yaml");
    let simulated = match workflow::prepare_file(&recipe, &options(true)) {
        Ok(p) => p,
        // The simulator is built with the workspace (`cargo test --all-targets`).
        Err(e) if e.to_string().contains("srt-vllm-sim") => {
            eprintln!("srt-vllm-sim is not built: skipped");
            return;
        }
        Err(e) => panic!("{e}"),
    };
    let plain = workflow::prepare_file(&recipe, &options(false)).unwrap();
    assert_eq!(simulated.launch, plain.launch, "the plan is the same");
    assert!(plain.simulated.is_none());
    let expected = srt::graph::lower(
        &simulated.launch,
        &serde_json::json!({"executor": "local", "simulate": true}),
    )
    .unwrap();
    let hashes = |g: &srt::graph::ResourceGraph| {
        g.resources
            .iter()
            .map(|r| (r.address.clone(), r.hash.clone()))
            .collect::<Vec<_>>()
    };
    assert_eq!(hashes(&simulated.graph), hashes(&expected));
    for (planned, run) in simulated
        .launch
        .processes
        .iter()
        .zip(&simulated.runnable().processes)
    {
        if planned.kind == ProcessKind::Worker {
            assert_eq!(&planned.argv[0], "vllm");
            assert!(run.argv[0].ends_with("/srt-vllm-sim"), "{:?}", run.argv);
            let spec = &simulated.graph.get(&planned.address).unwrap().spec.value();
            assert_eq!(spec["argv"][0], "vllm", "the graph keeps the plan's argv");
        } else {
            assert_eq!(planned.argv, run.argv);
        }
    }
}
