//! srtctl's v1 recipes applied as they are, simulated: one per engine srt has, each
//! behind the frontend srtctl's users put it behind (vLLM under the Dynamo frontend,
//! v1's default when `frontend.type` is absent; SGLang prefill/decode behind v1's
//! `sglang`, the SGLang Model Gateway; TensorRT-LLM prefill/decode under Dynamo, each
//! role's `trtllm_config` its config file). srt reads them in the 2.0 layout (a located
//! note says so), serves completions and runs their sa-bench benchmark with v1's
//! default of prompts in the model's chat template.

mod e2e_support;

use e2e_support::{repo, serial, tools_dir, Env};

const PUBLIC: &str = "http://127.0.0.1:8000";

/// The benchmark block both recipes end with: small, with sa-bench's v1 keys.
const BENCHMARK: &str = r#"benchmark:
  type: "sa-bench"
  isl: 64
  osl: 8
  concurrencies: "1x2"
  req_rate: "inf"
  num_prompts_mult: 2
  num_warmup_mult: 1
  random_range_ratio: 0.5
health_check:
  max_attempts: 45
  interval_seconds: 2
"#;

fn v1_vllm_dynamo() -> String {
    format!(
        r#"name: "v1-e2e-vllm"
model:
  path: "{model}"
  container: "nvcr.io/nvidia/ai-dynamo/vllm-runtime:1.6.1"
  precision: "bf16"
resources:
  gpu_type: "h100"
  gpus_per_node: 2
  agg_nodes: 1
  agg_workers: 2
dynamo:
  version: "1.6.1"
frontend:
  enable_multiple_frontends: false
backend:
  type: vllm
  aggregated_environment:
    PYTHONUNBUFFERED: "1"
  vllm_config:
    aggregated:
      max-model-len: 2048
{BENCHMARK}"#,
        model = tools_dir().join("models/tiny").display()
    )
}

fn v1_sglang_disagg() -> String {
    format!(
        r#"name: "v1-e2e-sglang"
model:
  path: "{model}"
  container: "lmsysorg/sglang:v0.5.23"
  precision: "bf16"
resources:
  gpu_type: "gb200"
  gpus_per_node: 2
  prefill_nodes: 1
  decode_nodes: 1
  prefill_workers: 1
  decode_workers: 2
frontend:
  type: sglang
  enable_multiple_frontends: false
  args:
    policy: "round_robin"
backend:
  type: sglang
  kv_events_config:
    prefill: true
    decode: true
  prefill_environment:
    SGLANG_DISAGGREGATION_BOOTSTRAP_TIMEOUT: "100"
  sglang_config:
    prefill:
      tensor-parallel-size: 2
      context-length: 2048
    decode:
      context-length: 2048
{BENCHMARK}"#,
        model = repo().join("tests/fixtures/tiny-model").display()
    )
}

fn v1_trtllm_disagg() -> String {
    format!(
        r#"name: "v1-e2e-trtllm"
model:
  path: "{model}"
  container: "nvcr.io/nvidia/ai-dynamo/tensorrtllm-runtime:1.6.1"
  precision: "fp8"
resources:
  gpu_type: "gb200"
  gpus_per_node: 2
  prefill_nodes: 1
  decode_nodes: 1
  prefill_workers: 1
  decode_workers: 2
dynamo:
  install: false
frontend:
  type: dynamo
  enable_multiple_frontends: false
backend:
  type: trtllm
  publish_events_and_metrics: true
  decode_environment:
    TLLM_LOG_LEVEL: "INFO"
  trtllm_config:
    prefill:
      tensor_parallel_size: 2
      max_batch_size: 4
      max_num_tokens: 2048
      disable_overlap_scheduler: true
      kv_cache_config:
        free_gpu_memory_fraction: 0.8
        tokens_per_block: 16
      cache_transceiver_config:
        backend: UCX
    decode:
      max_batch_size: 16
      max_num_tokens: 64
      kv_cache_config:
        free_gpu_memory_fraction: 0.8
        tokens_per_block: 16
      cache_transceiver_config:
        backend: UCX
{BENCHMARK}"#,
        model = tools_dir().join("models/tiny").display()
    )
}

/// Apply `text` as a v1 file: the translation is noted, the gates and the benchmark
/// pass, and completions come back; `check` looks at the deployment before destroy.
fn applies_serves_and_benchmarks(env: &Env, deployment: &str, text: &str, check: &dyn Fn(&Env)) {
    let path = env.recipe("v1.yaml", text);
    let out = env.apply(&path);
    assert!(
        out.contains("srt::recipe::srtctl_v1"),
        "the translation is noted:\n{out}"
    );
    assert!(
        out.contains("smoke: passed") && out.contains("benchmark: passed"),
        "{out}"
    );
    // sa-bench's v1 default, written out by the translation: prompts in the chat template.
    let bench = env.deployment_dir(deployment).join("bench");
    let results: String = std::fs::read_dir(&bench)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .map(|p| std::fs::read_to_string(p).unwrap())
        .collect();
    assert!(results.contains("\"use_chat_template\":true"), "{results}");
    for _ in 0..3 {
        let v = env.completion(PUBLIC);
        assert!(v["choices"][0]["text"].is_string(), "{v}");
    }
    let again = env.apply(&path);
    assert!(
        again.contains("No changes."),
        "an unchanged v1 file changes nothing:\n{again}"
    );
    check(env);
    env.destroy(deployment);
}

#[test]
fn a_v1_vllm_recipe_behind_dynamo_serves_and_runs_its_benchmark() {
    let _g = serial();
    let env = Env::dynamo();
    // v1 installs Dynamo at start unless told not to: the release named, which the
    // venv holds already, so each Dynamo program's install finds it and goes on.
    applies_serves_and_benchmarks(&env, "v1-e2e-vllm", &v1_vllm_dynamo(), &|env| {
        for address in [
            "frontend[0]",
            "worker.agg[0].node[0]",
            "worker.agg[1].node[0]",
        ] {
            let log = env
                .deployment_dir("v1-e2e-vllm")
                .join("logs")
                .join(format!("{address}.log"));
            let text = std::fs::read_to_string(&log).unwrap();
            assert!(
                text.contains("srt: ai-dynamo 1.6.1 is installed in "),
                "{address} did not run its install:\n{text}"
            );
        }
    });
}

#[test]
fn a_v1_trtllm_prefill_decode_recipe_behind_dynamo_serves_and_runs_its_benchmark() {
    let _g = serial();
    let env = Env::dynamo();
    applies_serves_and_benchmarks(&env, "v1-e2e-trtllm", &v1_trtllm_disagg(), &|_| {});
}

#[test]
fn a_v1_sglang_prefill_decode_recipe_behind_sglang_router_serves_and_runs_its_benchmark() {
    let _g = serial();
    let env = Env::new();
    // Every worker publishes its KV events on a port of its own (all on one host here).
    let publishes_apart = |env: &Env| {
        let state = env.state("v1-e2e-sglang");
        let mut endpoints: Vec<u64> = state["resources"]
            .as_object()
            .unwrap()
            .iter()
            .filter(|(address, _)| address.starts_with("worker."))
            .map(|(address, r)| {
                let spec = r["spec"].to_string();
                let port = r["ports"]["kv_events"].as_u64();
                let port = port.unwrap_or_else(|| panic!("{address}: {}", r["ports"]));
                assert!(
                    spec.contains(&format!("tcp://*:{port}")),
                    "{address}: {spec}"
                );
                port
            })
            .collect();
        endpoints.sort_unstable();
        assert_eq!(endpoints.len(), 3, "{endpoints:?}");
        endpoints.dedup();
        assert_eq!(endpoints.len(), 3, "{endpoints:?}");
    };
    applies_serves_and_benchmarks(&env, "v1-e2e-sglang", &v1_sglang_disagg(), &publishes_apart);
}
