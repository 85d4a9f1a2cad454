//! SGLang's `engine:` keys: what they mean and their defaults (in their schema
//! fragments, the one place they are written), and how they are read.

use crate::recipe::keys::{default, k, Key};
use crate::recipe::{Recipe, Sp};

/// SGLang's `engine:` keys besides `type`.
pub(super) static KEYS: &[Key] = &[
    k(
        "connector",
        r#"{"type": "string", "default": "nixl"}"#,
        "KV transfer backend of the prefill/decode roles (`--disaggregation-transfer-backend`).",
    ),
    k(
        "version",
        r#"{"type": "string", "default": "0.5.23"}"#,
        "The SGLang release whose flags `args` are checked against (one srt has a catalog for).",
    ),
];

/// The engine-wide connector: `engine.connector`, else the default at the `engine` key.
pub(super) fn connector(recipe: &Recipe) -> Sp<String> {
    match recipe.engine.keys.text("connector") {
        Some(c) => Sp::new(c.value.to_string(), c.span),
        None => Sp::new(default(KEYS, "connector"), recipe.engine.span),
    }
}

/// `engine.version`, when written.
pub(super) fn version(recipe: &Recipe) -> Option<Sp<&str>> {
    recipe.engine.keys.text("version")
}
