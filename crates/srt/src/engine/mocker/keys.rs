//! The mocker's `engine:` keys: srtctl's simulation settings (`backends/mocker.py`),
//! their defaults srtctl's (in their schema fragments, the one place they are
//! written), rendered as srtctl renders them: the first six always, the rest when
//! written as something else than their default.

use crate::recipe::keys::{k, Key};
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

/// How many of [`KEYS`], from the first, srtctl always renders.
const ALWAYS: usize = 6;

/// srtctl's flags, in its order (that of [`KEYS`]): `(flag, value)`. The first
/// [`ALWAYS`] keys always, with their defaults when unset; the others when written as
/// something else than their default, a `false` switch as its `--no-` flag.
pub(super) fn flags(recipe: &Recipe) -> Vec<(String, ArgValue)> {
    let flag = |name: &str| name.replace('_', "-");
    KEYS.iter()
        .enumerate()
        .filter_map(|(i, key)| {
            let written = recipe.engine.keys.get(key.name).map(|a| a.value.clone());
            let default = default_value(key);
            if i < ALWAYS {
                return Some((flag(key.name), written.or(default)?));
            }
            let value = written?;
            if default.is_some_and(|d| d.render() == value.render()) {
                return None;
            }
            Some(match value {
                ArgValue::Bool(false) => (format!("no-{}", flag(key.name)), ArgValue::Bool(true)),
                v => (flag(key.name), v),
            })
        })
        .collect()
}

/// A key's default, as its schema fragment writes it.
fn default_value(key: &Key) -> Option<ArgValue> {
    let fragment: serde_json::Value = serde_json::from_str(key.schema).ok()?;
    Some(match fragment.get("default")? {
        serde_json::Value::String(s) => ArgValue::Str(s.clone()),
        serde_json::Value::Number(n) => match n.as_i64() {
            Some(i) => ArgValue::Int(i),
            None => ArgValue::Float(n.as_f64()?),
        },
        serde_json::Value::Bool(b) => ArgValue::Bool(*b),
        _ => return None,
    })
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

    #[test]
    fn in_srtctls_order() {
        let w = words(
            "  type: mocker\n  preemption_mode: swap\n  enable_prefix_caching: false\n  num_workers: 2\n  decode_speedup_ratio: 2\n",
        );
        assert!(
            w.ends_with(
                "--decode-speedup-ratio 2 --num-workers 2 --no-enable-prefix-caching true --preemption-mode swap"
            ),
            "{w}"
        );
    }
}
