//! What the Router needs from the workers, end to end with the real `vllm-router` in
//! front of simulated workers (which answer like vLLM 0.32: the render routes 403
//! without `--enable-scale-out`).

mod e2e_support;

use e2e_support::{serial, Env};

/// The Router's default policy, cache_aware, renders every prompt on the workers before
/// routing it: srt gives the workers `--enable-scale-out`, so those calls succeed (vLLM
/// answers 403 without it).
#[test]
fn cache_aware_render_calls_reach_workers_that_answer_them() {
    let _g = serial();
    let env = Env::new();
    let recipe = env.recipe(
        "render.yaml",
        "name: e2e-render
model:
  path: /models/tiny
  served_name: tiny
resources:
  gpus_per_node: 2
frontend:
  enable_multiple_frontends: false
roles:
  agg:
    nodes: 1
    workers: 2
health_check:
  timeout_seconds: 120
",
    );
    let out = env.apply(&recipe);
    assert!(out.contains("smoke: passed"), "{out}");
    let state = env.state("e2e-render");
    for w in ["worker.agg[0].node[0]", "worker.agg[1].node[0]"] {
        let argv = state["resources"][w]["spec"]["argv"].as_array().unwrap();
        assert!(argv.iter().any(|a| a == "--enable-scale-out"), "{argv:?}");
    }
    for _ in 0..4 {
        env.completion("http://127.0.0.1:8000");
    }
    for w in ["worker.agg[0].node[0]", "worker.agg[1].node[0]"] {
        let log = std::fs::read_to_string(
            env.deployment_dir("e2e-render")
                .join("logs")
                .join(format!("{w}.log")),
        )
        .unwrap();
        assert!(
            log.contains("\"POST /v1/completions/render\" 200"),
            "{w} got no render call:\n{log}"
        );
        assert!(!log.contains(" 403"), "{w} refused a call:\n{log}");
    }
    env.destroy("e2e-render");
}

/// Prefill with two local DP ranks in front of a one-rank decode: the Router gets no
/// `--intra-node-data-parallel-size`, counts the prefill's engines from its `/metrics`,
/// and serves through both.
#[test]
fn prefill_and_decode_with_different_local_dp_sizes_serve() {
    let _g = serial();
    let env = Env::new();
    let recipe = env.recipe(
        "pd.yaml",
        "name: e2e-pd-dp
model:
  path: /models/tiny
  served_name: tiny
resources:
  gpus_per_node: 4
engine:
  type: vllm
  connector: nixl
frontend:
  enable_multiple_frontends: false
  args:
    policy: round_robin
roles:
  prefill:
    nodes: 1
    workers: 1
    gpus: 2
    args:
      data-parallel-size: 2
  decode:
    nodes: colocate
    workers: 1
    gpus: 1
health_check:
  timeout_seconds: 120
",
    );
    let out = env.apply(&recipe);
    assert!(
        out.contains("srt::recipe::intra_node_dp_omitted") && out.contains("smoke: passed"),
        "{out}"
    );
    let argv = env.state("e2e-pd-dp")["resources"]["router[0]"]["spec"]["argv"].clone();
    assert!(
        !argv
            .as_array()
            .unwrap()
            .iter()
            .any(|a| a == "--intra-node-data-parallel-size"),
        "{argv}"
    );
    // The Router expanded the prefill URL by the engines its /metrics reports.
    let workers = env.get("http://127.0.0.1:8000/workers");
    assert_eq!(workers["stats"]["prefill_count"], 2, "{workers}");
    assert_eq!(workers["stats"]["decode_count"], 1, "{workers}");
    for _ in 0..4 {
        let v = env.completion("http://127.0.0.1:8000");
        assert!(v["choices"][0]["text"].is_string(), "{v}");
    }
    env.destroy("e2e-pd-dp");
}
