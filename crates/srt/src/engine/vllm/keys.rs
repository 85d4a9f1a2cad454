//! vLLM's `engine:` keys: what they mean, their defaults (in their schema fragments, the
//! one place they are written) and how they are read. The loader keeps the mapping as
//! written ([`crate::recipe::Engine::keys`]), the assembly checks each value against
//! its schema fragment; this module reads them.

use crate::recipe::keys::{default, k, Key};
use crate::recipe::{ArgValue, Recipe, Sp};

/// vLLM's `engine:` keys besides `type`.
pub(super) static KEYS: &[Key] = &[
    k(
        "connector",
        r#"{"type": ["string", "null"], "default": "nixl"}"#,
        "KV connector of every role (`none` or null: no KV transfer).",
    ),
    k(
        "dp_launch_mode",
        r#"{"enum": ["per_node", "per_gpu"], "default": "per_node"}"#,
        "How data parallelism is launched (`per_gpu` is refused).",
    ),
    k(
        "serve_binary",
        r#"{"type": "string"}"#,
        "Program run as `<binary> serve` (default: the engine's own, `vllm`).",
    ),
    k(
        "vllm_serve_binary",
        r#"{"type": "string"}"#,
        "srtctl's name for `serve_binary`.",
    ),
    k(
        "version",
        r#"{"type": "string", "default": "0.32.0"}"#,
        "The engine release whose flags `args` are checked against (one srt has a catalog for).",
    ),
    crate::engine::kv_events::KEY,
];

/// How vLLM data parallelism is launched.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum DpLaunchMode {
    /// One hybrid-LB API server per node (upstream default).
    PerNode,
    /// One process per DP rank (deprecated; refused).
    PerGpu,
}

/// A written key's string value, if it is one.
fn text<'r>(recipe: &'r Recipe, key: &str) -> Option<Sp<&'r str>> {
    recipe.engine.keys.text(key)
}

/// The engine-wide KV connector: `engine.connector` (`null` is `none`), else the default
/// at the `engine` key.
pub(super) fn connector(recipe: &Recipe) -> Sp<String> {
    match recipe.engine.keys.get("connector") {
        Some(arg) => match &arg.value {
            ArgValue::Null => Sp::new("none".to_string(), arg.value_span),
            other => Sp::new(other.render(), arg.value_span),
        },
        None => Sp::new(default(KEYS, "connector"), recipe.engine.span),
    }
}

/// `engine.dp_launch_mode` (an unknown one reads as the default: [`check`] refuses it).
pub(super) fn dp_launch_mode(recipe: &Recipe) -> Sp<DpLaunchMode> {
    match text(recipe, "dp_launch_mode") {
        Some(m) if m.value == "per_gpu" => Sp::new(DpLaunchMode::PerGpu, m.span),
        Some(m) => Sp::new(DpLaunchMode::PerNode, m.span),
        None => Sp::new(DpLaunchMode::PerNode, recipe.engine.span),
    }
}

/// The program run as `<binary> serve`, when the recipe names one (srtctl's name last).
pub(super) fn serve_binary(recipe: &Recipe) -> Option<&str> {
    ["vllm_serve_binary", "serve_binary"]
        .iter()
        .find_map(|key| text(recipe, key))
        .map(|b| b.value)
}

/// `engine.version`, when written.
pub(super) fn version(recipe: &Recipe) -> Option<Sp<&str>> {
    text(recipe, "version")
}
