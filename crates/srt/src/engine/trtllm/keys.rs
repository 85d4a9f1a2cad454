//! TensorRT-LLM's `engine:` keys: what they mean and their defaults (in their schema
//! fragments, the one place they are written), and how they are read.

use crate::recipe::keys::{k, Key};
use crate::recipe::{ArgValue, Recipe, Sp};

/// TensorRT-LLM's `engine:` keys besides `type`.
pub(super) static KEYS: &[Key] = &[
    k(
        "version",
        r#"{"type": "string"}"#,
        "The LLM API schema release the roles' config files are checked against (one srt has a catalog for; default: the newest).",
    ),
    k(
        "publish_events_and_metrics",
        r#"{"type": "boolean", "default": false}"#,
        "Workers publish their KV-cache events and metrics (`--publish-kv-events --publish-metrics`), which Dynamo's KV-aware router reads.",
    ),
    k(
        "numa_memory_bind",
        r#"{"type": "boolean"}"#,
        "Run every rank under `numactl -m 0,1` (default: on GB200 and GB300 nodes, as srtctl does).",
    ),
];

/// `engine.version`, when written.
pub(super) fn version(recipe: &Recipe) -> Option<Sp<&str>> {
    recipe.engine.keys.text("version")
}

/// A boolean key's value, when written.
pub(super) fn flag(recipe: &Recipe, key: &str) -> Option<bool> {
    match recipe.engine.keys.get(key)?.value {
        ArgValue::Bool(b) => Some(b),
        _ => None,
    }
}
