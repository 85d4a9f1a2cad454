//! The model's own tokenizer (`tokenizer.json`, read with the `tokenizers` crate): prompt
//! lengths are counted in the tokens the server counts.

use std::path::{Path, PathBuf};
use tokenizers::PostProcessor;

/// A loaded tokenizer with the facts prompt sampling needs.
pub(super) struct Tokenizer {
    inner: tokenizers::Tokenizer,
    /// Where it was read from.
    pub path: PathBuf,
    /// Token ids prompts may use: the ids of the base vocabulary, special tokens excepted,
    /// whose text encodes back to the id alone (a byte-level BPE's lone continuation
    /// bytes do not: they decode to a replacement character). Random sequences of them
    /// decode to text whose token count is close to theirs.
    pub allowed: Vec<u32>,
    /// Tokens the server adds to a single prompt (a BOS token, say).
    pub special_to_add: u32,
}

impl Tokenizer {
    /// Find and load the tokenizer `spec` names: a `tokenizer.json` file, a directory
    /// holding one, or a Hugging Face id (`org/name`) whose snapshot is in the local hub
    /// cache (`$HF_HUB_CACHE`, `$HF_HOME/hub` or `~/.cache/huggingface/hub`).
    pub(super) fn load(spec: &str) -> Result<Tokenizer, String> {
        let path = locate(spec)?;
        let bytes =
            crate::input::read(&path, crate::input::TOKENIZER).map_err(|e| e.with_help())?;
        let inner = tokenizers::Tokenizer::from_bytes(&bytes)
            .map_err(|e| format!("cannot read the tokenizer {}: {e}", path.display()))?;
        drop(bytes);
        let special: std::collections::BTreeSet<u32> = inner
            .get_added_tokens_decoder()
            .iter()
            .filter(|(_, t)| t.special)
            .map(|(id, _)| *id)
            .collect();
        let round_trips = |id: u32| {
            let text = inner.decode(&[id], false).unwrap_or_default();
            !text.is_empty()
                && inner
                    .encode_fast(text.as_str(), false)
                    .is_ok_and(|e| e.get_ids() == [id])
        };
        let allowed: Vec<u32> = (0..inner.get_vocab_size(false) as u32)
            .filter(|id| !special.contains(id) && round_trips(*id))
            .collect();
        if allowed.is_empty() {
            return Err(format!(
                "the tokenizer {} has no ordinary tokens",
                path.display()
            ));
        }
        let special_to_add = inner
            .get_post_processor()
            .map(|p| p.added_tokens(false) as u32)
            .unwrap_or(0);
        Ok(Tokenizer {
            inner,
            path,
            allowed,
            special_to_add,
        })
    }

    /// Token ids of `text` without the special tokens a server adds.
    pub(super) fn encode(&self, text: &str) -> Vec<u32> {
        self.inner
            .encode_fast(text, false)
            .map(|e| e.get_ids().to_vec())
            .unwrap_or_default()
    }

    /// Tokens of `text` as a server counts a prompt (special tokens added).
    pub(super) fn count_prompt(&self, text: &str) -> u32 {
        self.encode(text).len() as u32 + self.special_to_add
    }

    /// Text of token ids (special tokens kept).
    pub(super) fn decode(&self, ids: &[u32]) -> String {
        self.inner.decode(ids, false).unwrap_or_default()
    }
}

/// The `tokenizer.json` that `spec` names.
pub(super) fn locate(spec: &str) -> Result<PathBuf, String> {
    let p = Path::new(spec);
    if p.is_file() {
        return Ok(p.to_path_buf());
    }
    if p.is_dir() {
        let f = p.join("tokenizer.json");
        return if f.is_file() {
            Ok(f)
        } else {
            Err(format!(
                "{spec} has no tokenizer.json: the benchmark counts prompt tokens with the model's own tokenizer; set `benchmark.tokenizer` to a directory or file that has one"
            ))
        };
    }
    if let Some(f) = hub_snapshot(spec) {
        return Ok(f);
    }
    Err(format!(
        "no tokenizer for `{spec}`: not a file or directory here, nor a model in the local Hugging Face cache; set `benchmark.tokenizer` to the model's directory or its tokenizer.json"
    ))
}

/// `tokenizer.json` of a cached Hugging Face model: the snapshot `refs/main` names, else
/// the first snapshot that has one.
fn hub_snapshot(id: &str) -> Option<PathBuf> {
    let id = id.strip_prefix("hf:").unwrap_or(id);
    let (org, name) = id.split_once('/')?;
    if org.is_empty() || name.is_empty() || name.contains('/') || id.contains("..") {
        return None;
    }
    let env = |k: &str| {
        std::env::var_os(k)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    let cache = env("HF_HUB_CACHE")
        .or_else(|| env("HF_HOME").map(|h| h.join("hub")))
        .or_else(|| env("HOME").map(|h| h.join(".cache/huggingface/hub")))?;
    let repo = cache.join(format!("models--{org}--{name}"));
    if let Ok(rev) = std::fs::read_to_string(repo.join("refs/main")) {
        let f = repo
            .join("snapshots")
            .join(rev.trim())
            .join("tokenizer.json");
        if f.is_file() {
            return Some(f);
        }
    }
    let mut snaps: Vec<PathBuf> = std::fs::read_dir(repo.join("snapshots"))
        .ok()?
        .flatten()
        .map(|e| e.path().join("tokenizer.json"))
        .filter(|f| f.is_file())
        .collect();
    snaps.sort();
    snaps.into_iter().next()
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// The tiny model's tokenizer (`scripts/make-tiny-model.py`), checked in for tests.
    pub(crate) fn tiny() -> Tokenizer {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/tiny-model");
        Tokenizer::load(dir.to_str().unwrap()).unwrap()
    }

    #[test]
    fn tiny_tokenizer_facts() {
        let t = tiny();
        // 300 tokens, of which <unk>, <s> and </s> are special and some are bytes that
        // are no character alone; a BOS is added.
        assert!(
            t.allowed.len() > 100 && t.allowed.len() < 297,
            "{}",
            t.allowed.len()
        );
        assert!(!t.allowed.contains(&0) && !t.allowed.contains(&1) && !t.allowed.contains(&2));
        assert_eq!(t.special_to_add, 1);
        let ids = t.encode("The quick brown fox");
        assert_eq!(t.decode(&ids), "The quick brown fox");
        assert_eq!(t.count_prompt("The quick brown fox"), ids.len() as u32 + 1);
    }

    /// A tokenizer past the limit is refused before it is read whole.
    #[test]
    fn an_oversized_tokenizer_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("tokenizer.json");
        let f = std::fs::File::create(&path).unwrap();
        f.set_len(crate::input::TOKENIZER.limit + 1).unwrap();
        let e = Tokenizer::load(path.to_str().unwrap()).err().unwrap();
        assert!(
            e.contains("larger than 256 MiB") && e.contains("tokenizer.json"),
            "{e}"
        );
    }

    #[test]
    fn missing_tokenizers_are_explained() {
        let dir = tempfile::tempdir().unwrap();
        let e = locate(dir.path().to_str().unwrap()).err().unwrap();
        assert!(e.contains("no tokenizer.json"), "{e}");
        let e = locate("no-such-org/no-such-model").err().unwrap();
        assert!(e.contains("benchmark.tokenizer"), "{e}");
    }
}
