//! The mocker's `engine:` keys: srtctl's simulation settings (`backends/mocker.py`),
//! their defaults srtctl's (in their schema fragments, the one place they are
//! written), rendered as srtctl renders them: the first six always, the rest when
//! they differ from the mocker's own behaviour.

use crate::recipe::keys::{default, k, Key};
use crate::recipe::{ArgValue, Recipe};

/// The mocker's `engine:` keys besides `type`: each is the flag of its name in kebab
/// case.
pub(super) static KEYS: &[Key] = &[
    k("engine_type", r#"{"type": "string", "default": "vllm"}"#, "The engine whose scheduling the mocker imitates (`--engine-type`)."),
    k("speedup_ratio", r#"{"type": "number", "exclusiveMinimum": 0, "default": 100.0}"#, "How much faster than the imitated engine it runs (`--speedup-ratio`; srtctl's default, not the mocker's)."),
    k("data_parallel_size", r#"{"type": "integer", "minimum": 1, "default": 1}"#, "Data-parallel ranks each worker simulates (`--data-parallel-size`)."),
    k("num_gpu_blocks_override", r#"{"type": "integer", "minimum": 1, "default": 16384}"#, "KV-cache blocks per rank (`--num-gpu-blocks-override`)."),
    k("max_num_seqs", r#"{"type": "integer", "minimum": 1, "default": 256}"#, "Sequences a rank batches at most (`--max-num-seqs`)."),
    k("max_num_batched_tokens", r#"{"type": "integer", "minimum": 1, "default": 8192}"#, "Tokens a step computes at most (`--max-num-batched-tokens`)."),
    k("decode_speedup_ratio", r#"{"type": "number", "exclusiveMinimum": 0, "default": 1.0}"#, "Decode's own speed-up on top of `speedup_ratio` (`--decode-speedup-ratio`, written when not 1)."),
    k("block_size", r#"{"type": "integer", "minimum": 1}"#, "Tokens per KV-cache block (`--block-size`)."),
    k("num_workers", r#"{"type": "integer", "minimum": 1, "default": 1}"#, "Mocker workers in each process (`--num-workers`, written when above 1)."),
    k("startup_time", r#"{"type": "number", "minimum": 0}"#, "Seconds it waits before registering, as an engine loading weights would (`--startup-time`)."),
    k("kv_transfer_bandwidth", r#"{"type": "number", "minimum": 0}"#, "Simulated KV transfer bandwidth (`--kv-transfer-bandwidth`)."),
    k("kv_cache_dtype", r#"{"enum": ["auto", "bfloat16", "fp8", "fp8_ds_mla", "fp8_e4m3", "fp8_e5m2", "fp8_inc"]}"#, "KV-cache data type (`--kv-cache-dtype`)."),
    k("enable_prefix_caching", r#"{"type": "boolean", "default": true}"#, "Prefix caching (`--no-enable-prefix-caching` when false)."),
    k("enable_chunked_prefill", r#"{"type": "boolean", "default": true}"#, "Chunked prefill (`--no-enable-chunked-prefill` when false)."),
    k("preemption_mode", r#"{"type": "string"}"#, "What a full KV cache does to a running sequence (`--preemption-mode`)."),
];

/// srtctl's flags, in its order: `(flag, value)`, a `true` value for a switch.
pub(super) fn flags(recipe: &Recipe) -> Vec<(String, ArgValue)> {
    let keys = &recipe.engine.keys;
    let value = |key: &str| -> ArgValue {
        match keys.get(key) {
            Some(a) => a.value.clone(),
            None => default_value(key),
        }
    };
    let flag = |key: &str| key.replace('_', "-");
    let mut out: Vec<(String, ArgValue)> = [
        "engine_type",
        "speedup_ratio",
        "data_parallel_size",
        "num_gpu_blocks_override",
        "max_num_seqs",
        "max_num_batched_tokens",
    ]
    .iter()
    .map(|k| (flag(k), value(k)))
    .collect();
    let written = |key: &str| keys.get(key).map(|a| a.value.clone());
    if let Some(v) =
        written("decode_speedup_ratio").filter(|v| v.render() != "1" && v.render() != "1.0")
    {
        out.push((flag("decode_speedup_ratio"), v));
    }
    for key in [
        "block_size",
        "startup_time",
        "kv_transfer_bandwidth",
        "kv_cache_dtype",
        "preemption_mode",
    ] {
        if let Some(v) = written(key) {
            out.push((flag(key), v));
        }
    }
    if let Some(v) = written("num_workers").filter(|v| v.render() != "1") {
        out.push((flag("num_workers"), v));
    }
    for key in ["enable_prefix_caching", "enable_chunked_prefill"] {
        if written(key) == Some(ArgValue::Bool(false)) {
            out.push((format!("no-{}", flag(key)), ArgValue::Bool(true)));
        }
    }
    out
}

/// A key's default, as its schema fragment writes it.
fn default_value(key: &str) -> ArgValue {
    let text: serde_json::Value = default(KEYS, key);
    match text {
        serde_json::Value::String(s) => ArgValue::Str(s),
        serde_json::Value::Number(n) if n.is_i64() => ArgValue::Int(n.as_i64().unwrap_or_default()),
        serde_json::Value::Number(n) => ArgValue::Float(n.as_f64().unwrap_or_default()),
        serde_json::Value::Bool(b) => ArgValue::Bool(b),
        _ => ArgValue::Str(String::new()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(engine: &str) -> String {
        let source = crate::recipe::Source {
            name: "m.yaml".into(),
            text: format!(
                "engine:\n{engine}frontend:\n  type: dynamo\nroles:\n  agg:\n    nodes: 1\n    workers: 1\n"
            ),
        };
        let recipe = crate::recipe::load_str(&source, "m").expect("loads");
        flags(&recipe)
            .into_iter()
            .map(|(f, v)| format!("--{f} {}", v.render()))
            .collect::<Vec<_>>()
            .join(" ")
    }

    #[test]
    fn srtctls_six_flags_always_with_its_defaults() {
        assert_eq!(
            words("  type: mocker\n"),
            "--engine-type vllm --speedup-ratio 100 --data-parallel-size 1 \
             --num-gpu-blocks-override 16384 --max-num-seqs 256 --max-num-batched-tokens 8192"
        );
    }

    #[test]
    fn the_others_only_when_they_change_something() {
        let w = words(
            "  type: mocker\n  engine_type: sglang\n  decode_speedup_ratio: 1.0\n  num_workers: 1\n  enable_prefix_caching: true\n  block_size: 64\n  kv_cache_dtype: fp8\n  enable_chunked_prefill: false\n",
        );
        assert!(w.starts_with("--engine-type sglang "), "{w}");
        assert!(
            w.ends_with("--block-size 64 --kv-cache-dtype fp8 --no-enable-chunked-prefill true"),
            "{w}"
        );
        for absent in ["decode-speedup", "num-workers", "prefix"] {
            assert!(!w.contains(absent), "{absent}: {w}");
        }
    }
}
