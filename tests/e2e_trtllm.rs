//! TensorRT-LLM behind NVIDIA Dynamo end to end, with the real programs: ai-dynamo
//! 1.6.1's frontend, the deployment's own etcd, and every worker Dynamo's mocker
//! scheduling as TensorRT-LLM does (`--engine-type trtllm`, `--simulate`), started by
//! the rank stand-in in place of `trtllm-llmapi-launch`. Each role's LLM API config is a
//! file srt writes; a change to the decode role's config rolls the decode workers under
//! load with no failed request, the prefill worker and the frontend kept. Destroy
//! leaves no process and no config file.
//!
//! Needs `scripts/install-dynamo.sh` (the test command runs it).

mod e2e_support;

use e2e_support::load::apply_failing_nothing;
use e2e_support::{at, cmdline, example_named, serial, tools_dir, Env};

const PUBLIC: &str = "http://127.0.0.1:8000";

/// The P/D example named `name`, its decode workers batching `decode_batch` requests.
fn pd(name: &str, decode_batch: u32) -> String {
    let model = tools_dir().join("models/tiny").display().to_string();
    example_named("local-dynamo-trtllm.yaml", name)
        .replace("path: .tools/models/tiny", &format!("path: {model}"))
        .replace(
            "max_batch_size: 64",
            &format!("max_batch_size: {decode_batch}"),
        )
}

/// The requests a worker's log says it received (the mocker logs each).
fn received(env: &Env, name: &str, address: &str) -> usize {
    let log = env
        .deployment_dir(name)
        .join("logs")
        .join(format!("{address}.log"));
    std::fs::read_to_string(&log)
        .unwrap_or_else(|e| panic!("{}: {e}", log.display()))
        .matches("request received")
        .count()
}

#[test]
fn prefill_decode_serve_from_their_config_files_and_a_decode_config_change_rolls_under_load() {
    let _serial = serial();
    let env = Env::dynamo();
    let name = "dyn-trtllm";
    let out = env.apply(&env.recipe("trtllm.yaml", &pd(name, 64)));
    assert!(out.contains("file.decode.engine-config: written"), "{out}");
    assert!(out.contains("gate.frontend: passed"), "{out}");
    let config = env.deployment_dir(name).join("run/config");
    let decode_file = config.join("decode-engine.yaml");
    let decode = std::fs::read_to_string(&decode_file).unwrap();
    assert!(decode.contains("max_batch_size: 64\n"), "{decode}");
    assert!(decode.contains("tensor_parallel_size: 1\n"), "{decode}");
    // Each worker is the mocker in TensorRT-LLM's mode, with its role's limits.
    for (address, batch, tokens) in [
        ("worker.prefill[0]", "8", "2048"),
        ("worker.decode[0]", "64", "256"),
        ("worker.decode[1]", "64", "256"),
    ] {
        let words = cmdline(env.pid(name, address));
        assert_eq!(words[1..3], ["-m", "dynamo.mocker"], "{address}: {words:?}");
        assert_eq!(at(&words, "--engine-type"), Some("trtllm"), "{words:?}");
        assert_eq!(at(&words, "--max-num-seqs"), Some(batch), "{words:?}");
        assert_eq!(
            at(&words, "--max-num-batched-tokens"),
            Some(tokens),
            "{words:?}"
        );
        assert_eq!(at(&words, "--block-size"), Some("16"), "{words:?}");
        // TensorRT-LLM's hand-off needs no bootstrap port (the mocker refuses one).
        assert_eq!(at(&words, "--bootstrap-ports"), None, "{words:?}");
    }
    assert_eq!(env.completion(PUBLIC)["object"], "text_completion");
    env.streamed_completion(PUBLIC);
    assert!(
        received(&env, name, "worker.prefill[0]") >= 2,
        "the prefill took no request"
    );
    let frontend = env.pid(name, "frontend[0]");
    let prefill = env.pid(name, "worker.prefill[0]");
    let out = apply_failing_nothing(
        &env,
        PUBLIC,
        &env.recipe("trtllm.yaml", &pd(name, 32)),
        8,
        "decode config change",
    );
    // The decode config file and the two decode workers that read it.
    assert!(out.contains("3 replaced"), "{out}");
    assert_eq!(
        env.pid(name, "frontend[0]"),
        frontend,
        "the frontend restarted"
    );
    assert_eq!(
        env.pid(name, "worker.prefill[0]"),
        prefill,
        "the prefill was replaced"
    );
    let decode = std::fs::read_to_string(&decode_file).unwrap();
    assert!(decode.contains("max_batch_size: 32\n"), "{decode}");
    let words = cmdline(env.pid(name, "worker.decode[1]"));
    assert_eq!(at(&words, "--max-num-seqs"), Some("32"), "{words:?}");
    env.streamed_completion(PUBLIC);
    env.destroy(name);
    if let Some(ns) = &env.netns {
        if let Err(left) = ns.drained() {
            panic!("survivors after destroy:\n{left}");
        }
    }
    assert_eq!(env.processes(name), Vec::<u32>::new());
    assert!(
        !decode_file.exists(),
        "the decode config outlived its deployment"
    );
}

/// Aggregated workers of TP 2 with attention DP: the mocker serves two DP ranks per
/// worker, and KV events are published (`--publish-kv-events`).
#[test]
fn aggregated_attention_dp_workers_serve_as_two_ranks_each() {
    let _serial = serial();
    let env = Env::dynamo();
    let name = "dyn-trtllm-agg";
    let model = tools_dir().join("models/tiny").display().to_string();
    let text = example_named("local-dynamo-trtllm-agg.yaml", name)
        .replace("path: .tools/models/tiny", &format!("path: {model}"))
        .replace(
            "max_batch_size: 32",
            "max_batch_size: 32\n      enable_attention_dp: true",
        );
    let out = env.apply(&env.recipe("trtllm.yaml", &text));
    assert!(out.contains("gate.frontend: passed"), "{out}");
    for address in ["worker.agg[0]", "worker.agg[1]"] {
        let words = cmdline(env.pid(name, address));
        assert_eq!(at(&words, "--data-parallel-size"), Some("2"), "{words:?}");
    }
    let config =
        std::fs::read_to_string(env.deployment_dir(name).join("run/config/agg-engine.yaml"))
            .unwrap();
    assert!(config.contains("tensor_parallel_size: 2\n"), "{config}");
    assert_eq!(env.completion(PUBLIC)["object"], "text_completion");
    env.destroy(name);
    assert_eq!(env.processes(name), Vec::<u32>::new());
}
