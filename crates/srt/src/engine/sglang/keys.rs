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
        "The SGLang release whose flags `args` are checked against (one srt has a catalog for). Unset: the release the workers' image tag names (`lmsysorg/sglang:v0.5.8-cu130`), when srt has its catalog, else the newest.",
    ),
    crate::engine::kv_events::KEY,
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

/// The release the workers' image names, when it is SGLang's own image:
/// `lmsysorg/sglang:v0.5.8-cu130` names 0.5.8, `...:v0.5.8.post1-cu130-runtime`
/// 0.5.8.post1, and so does an alias that is only a release (`v0.5.7`, srtctl's
/// cluster files name images so); a nightly, another repository's image or another
/// alias names none.
pub(super) fn image_release(recipe: &Recipe) -> Option<&str> {
    let image = recipe.model.container.as_deref()?;
    let tag = match image.rsplit_once(':') {
        Some((repository, tag)) if repository.rsplit('/').next() == Some("sglang") => tag,
        Some(_) => return None,
        None if image.contains('/') => return None,
        None => image,
    };
    if tag.contains('/') {
        return None;
    }
    let tag = tag.strip_prefix('v')?;
    let release = &tag[..tag.find('-').unwrap_or(tag.len())];
    let mut parts = release.split('.');
    let numbered = parts
        .by_ref()
        .take(3)
        .filter(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()))
        .count()
        == 3;
    let rest_ok = parts.all(|p| {
        p.strip_prefix("post")
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
    });
    (numbered && rest_ok).then_some(release)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_image(image: Option<&str>) -> Recipe {
        let mut recipe = crate::recipe::load_str(
            &crate::recipe::Source {
                name: "t.yaml".into(),
                text: "engine: sglang\nroles:\n  agg:\n    nodes: 1\n    workers: 1\n".into(),
            },
            "t",
        )
        .expect("loads");
        recipe.model.container = image.map(String::from);
        recipe
    }

    #[test]
    fn sglangs_own_image_tags_name_their_release() {
        for (image, release) in [
            ("lmsysorg/sglang:v0.5.8-cu130", Some("0.5.8")),
            (
                "lmsysorg/sglang:v0.5.8.post1-cu130-runtime",
                Some("0.5.8.post1"),
            ),
            ("docker.io/lmsysorg/sglang:v0.5.23", Some("0.5.23")),
            (
                "registry:5000/lmsysorg/sglang:v0.5.11-cu130",
                Some("0.5.11"),
            ),
            ("lmsysorg/sglang:nightly-dev-20260527-14f81a67", None),
            ("nvcr.io/nvidia/ai-dynamo/sglang-runtime:1.1.1-cuda13", None),
            ("lmsysorg/sglang:v0.5", None),
            ("lmsysorg/sglang:v0.5.8.rc1", None),
            ("v0.5.7", Some("0.5.7")),
            ("v0.5.13.post1", Some("0.5.13.post1")),
            ("dynamo-sglang", None),
            ("/lustre/images/v0.5.7", None),
            ("registry:5000/sglang", None),
            ("dynamo-sglang", None),
        ] {
            assert_eq!(image_release(&with_image(Some(image))), release, "{image}");
        }
        assert_eq!(image_release(&with_image(None)), None);
    }
}
