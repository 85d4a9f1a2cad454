//! Recipes srt accepts with a located warning (`tests/warnings/`): each builds, its
//! launch plan carries the warnings, and their rendering is a reviewed snapshot.

mod common;

use common::render_diag;
use srt::launch::HostLayout;

/// Every case builds and warns; the warnings as a user sees them.
#[test]
fn warnings() {
    insta::glob!("warnings/*.yaml", |path| {
        let (source, _) = common::recipe(path);
        let plan = common::plan_with(path, None, HostLayout::Distinct);
        assert!(
            !plan.warnings.is_empty(),
            "{} does not warn",
            path.display()
        );
        assert!(plan.warnings.iter().all(srt::recipe::Problem::is_warning));
        insta::assert_snapshot!(render_diag(&source.error(plan.warnings.clone())));
    });
}

/// Prefill and decode with different node-local DP sizes: the Router gets no
/// `--intra-node-data-parallel-size` (it is global), the render says so, and the
/// `/workers` gate counts one entry per URL (the Router expands each by its own
/// `/metrics` count, so at least that many).
#[test]
fn different_local_dp_sizes_leave_the_router_flag_out_and_say_so() {
    let plan = common::plan("tests/warnings/pd-different-local-dp.yaml");
    let router = plan
        .processes
        .iter()
        .find(|p| p.address == "router[0]")
        .unwrap();
    assert!(
        !router
            .argv
            .iter()
            .any(|a| a == "--intra-node-data-parallel-size"),
        "{:?}",
        router.argv
    );
    let text = srt::launch::render::render(&plan);
    assert!(
        text.contains("warnings:\n  srt::recipe::intra_node_dp_omitted: the Router gets no --intra-node-data-parallel-size: endpoints have different node-local DP sizes (prefill 8, decode 1)"),
        "{text}"
    );
    let json: serde_json::Value = serde_json::from_str(&srt::launch::render::json(&plan)).unwrap();
    assert_eq!(
        json["warnings"][0]["code"],
        "srt::recipe::intra_node_dp_omitted"
    );
    let gate = plan
        .gates
        .iter()
        .find(|g| g.address == "gate.router")
        .unwrap();
    let probe = srt::launch::render::describe_probe(&gate.probe);
    assert!(
        probe.contains("/stats/prefill_count >= 1") && probe.contains(">= 1"),
        "{probe}"
    );
}

/// DP over 1-GPU nodes with a local model: a dense `config.json` (no experts) warns at
/// the DP size (vLLM's external load balancing has no coordinator for dense models),
/// a mixture-of-experts one does not, nor do node-local DP ranks.
#[test]
fn dp_over_one_gpu_nodes_with_a_dense_local_model_warns() {
    let model = tempfile::tempdir().unwrap();
    let recipe = |nodes: u32, gpus_per_node: u32| {
        format!(
            "model:
  path: {}
  served_name: tiny
frontend:
  enable_multiple_frontends: false
  args:
    policy: round_robin
resources:
  gpus_per_node: {gpus_per_node}
roles:
  agg:
    nodes: {nodes}
    workers: 1
    args:
      data-parallel-size: 2
",
            model.path().display()
        )
    };
    let warnings = |text: &str| {
        let source = srt::recipe::Source {
            name: "dp.yaml".into(),
            text: text.to_string(),
        };
        let recipe = srt::recipe::load_str(&source, "dp").unwrap();
        let plan = srt::assemble::assemble(&recipe, &Default::default())
            .unwrap_or_else(|p| panic!("{}", render_diag(&source.error(p))));
        (source, plan.warnings)
    };
    let llama = r#"{"architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 128, "num_hidden_layers": 2}"#;
    std::fs::write(model.path().join("config.json"), llama).unwrap();
    let (source, w) = warnings(&recipe(2, 1));
    assert_eq!(w.len(), 1, "{w:?}");
    assert_eq!(w[0].code, "srt::recipe::dense_dp");
    let at = &source.text[w[0].span.offset()..w[0].span.offset() + w[0].span.len()];
    assert_eq!(at, "data-parallel-size");
    assert!(
        w[0].message.contains("dense one (no experts)")
            && w[0]
                .message
                .contains(&format!("{}/config.json", model.path().display())),
        "{}",
        render_diag(&source.error(w.clone()))
    );
    // Two ranks on one 2-GPU node: hybrid LB with a local pool, fine for dense models.
    assert!(warnings(&recipe(1, 2)).1.is_empty());
    // A mixture of experts (Mixtral's key).
    let mixtral = r#"{"model_type": "mixtral", "num_local_experts": 8, "num_experts_per_tok": 2}"#;
    std::fs::write(model.path().join("config.json"), mixtral).unwrap();
    assert!(warnings(&recipe(2, 1)).1.is_empty());
    // No config.json: srt cannot tell, and says nothing.
    std::fs::remove_file(model.path().join("config.json")).unwrap();
    assert!(warnings(&recipe(2, 1)).1.is_empty());
}

/// An abbreviated flag is the flag for everything srt reads: `tensor-parallel: 2` on a
/// worker of 2 GPUs is a TP2 replica (read as 1, the shape check would refuse it), and
/// the command carries the flag in full.
#[test]
fn an_abbreviated_flag_is_read_and_rendered_as_the_flag() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("abbrev.yaml");
    std::fs::write(
        &path,
        "schema: 2\nresources: {gpus_per_node: 2}\nroles:\n  agg:\n    nodes: 1\n    workers: 1\n    gpus: 2\n    args:\n      tensor-parallel: 2\n",
    )
    .unwrap();
    let plan = common::plan(&path);
    let worker = plan
        .processes
        .iter()
        .find(|p| p.kind == srt::launch::ProcessKind::Worker)
        .unwrap();
    let argv = worker.argv.to_vec().join(" ");
    assert!(argv.contains("--tensor-parallel-size 2"), "{argv}");
    assert!(!argv.contains("--tensor-parallel "), "{argv}");
    assert!(
        plan.warnings
            .iter()
            .any(|w| w.code == "srt::recipe::flag_abbreviation"),
        "{:?}",
        plan.warnings
    );
}

/// `dynamo.hash`: the frontend and every worker run the same build script before their
/// program, named by its contents, so another commit replaces them all.
#[test]
fn a_dynamo_commit_is_built_before_every_dynamo_program() {
    let builds = |path: &str| {
        let plan = common::plan(path);
        plan.processes
            .iter()
            .filter(|p| p.address.starts_with("frontend") || p.worker.is_some())
            .map(|p| {
                let setup = p
                    .wrap
                    .setup
                    .iter()
                    .find(|s| s.key == "dynamo.install")
                    .unwrap_or_else(|| panic!("{} builds no Dynamo", p.address));
                (setup.path.clone(), setup.digest.clone(), setup.text.clone())
            })
            .collect::<Vec<_>>()
    };
    let here = builds("tests/warnings/dynamo-hash.yaml");
    assert_eq!(here.len(), 3, "{here:?}");
    assert!(here.iter().all(|b| b == &here[0]), "{here:?}");
    assert!(here[0].0.starts_with("<run-dir>/setup/dynamo-build-"));
    assert!(here[0]
        .2
        .contains("\ncommit=81d0555ee23519cea80a42b4fe824e30368b7300\n"));

    let dir = tempfile::tempdir().unwrap();
    let other = dir.path().join("other.yaml");
    let text = std::fs::read_to_string("tests/warnings/dynamo-hash.yaml").unwrap();
    std::fs::write(&other, text.replace("81d0555ee23519", "4e4006138bb9dd")).unwrap();
    let there = builds(other.to_str().unwrap());
    assert_ne!(here[0].1, there[0].1);
}

/// A role whose env names `DYN_REQUEST_PLANE` gets `--request-plane` even on Dynamo's
/// default plane (the flag decides; the variable stays); one that does not, no flag.
#[test]
fn a_role_env_request_plane_gives_its_workers_the_flag() {
    let plan = common::plan("tests/warnings/dynamo-request-plane-var.yaml");
    let worker = |address: &str| {
        let p = common::process(&plan, address);
        (
            common::value(&p.argv, "--request-plane"),
            p.env.get("DYN_REQUEST_PLANE").map(String::as_str),
        )
    };
    assert_eq!(worker("worker.prefill[0].node[0]"), ("tcp", Some("nats")));
    assert_eq!(worker("worker.decode[0].node[0]"), ("tcp", Some("tcp")));
    let codes: Vec<_> = plan.warnings.iter().map(|w| w.code).collect();
    assert_eq!(
        codes,
        ["srt::recipe::request_plane_var"],
        "only the prefill's differs"
    );
}
