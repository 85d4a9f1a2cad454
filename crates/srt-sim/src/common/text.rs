//! Text in and out: counting a prompt's tokens (with the model's `tokenizer.json` when it
//! has one, as the engine does, else as words), the completion budget a request asks for,
//! and the deterministic filler text every simulator generates.

use std::path::{Path, PathBuf};
use std::time::{SystemTime, UNIX_EPOCH};

use serde_json::Value;

use super::log;

/// The OpenAI API a request came in on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Api {
    /// `/v1/completions`.
    Completions,
    /// `/v1/chat/completions`.
    Chat,
}

/// `tokenizer.json` at `path`: the file itself, or in the directory it names.
pub(crate) fn tokenizer_file(path: &Path) -> Option<PathBuf> {
    if path.is_file() {
        Some(path.to_path_buf())
    } else {
        Some(path.join("tokenizer.json")).filter(|f| f.is_file())
    }
}

/// Loads the tokenizer prompts are counted with, logging which (or why not).
pub(crate) fn load_tokenizer(path: Option<&Path>) -> Option<tokenizers::Tokenizer> {
    let p = path?;
    log::info(&format!("counting prompt tokens with {}", p.display()));
    tokenizers::Tokenizer::from_file(p)
        .map_err(|e| {
            log::warn(&format!(
                "cannot read {}: {e}; prompt tokens are counted as words",
                p.display()
            ));
        })
        .ok()
}

/// The token ids of a text: the model's tokenizer's when it has one (as vLLM's), else
/// one per word from its hash (a Router only compares them between requests).
pub(crate) fn token_ids(tok: Option<&tokenizers::Tokenizer>, text: &str) -> Vec<u64> {
    if let Some(e) = tok.and_then(|t| t.encode_fast(text, true).ok()) {
        if !e.get_ids().is_empty() {
            return e.get_ids().iter().map(|&id| u64::from(id)).collect();
        }
    }
    let ids: Vec<u64> = text.split_whitespace().map(|w| fnv(w) % 32_000).collect();
    if ids.is_empty() {
        vec![0]
    } else {
        ids
    }
}

/// Seconds since the epoch (`created` fields).
pub(crate) fn now_secs() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

fn words(s: &str) -> u64 {
    s.split_whitespace().count() as u64
}

/// Tokens of a text prompt: the model's tokenizer with its special tokens (as vLLM
/// tokenizes a completion prompt), else whitespace-separated words.
pub(crate) fn count(tok: Option<&tokenizers::Tokenizer>, text: &str, special: bool) -> u64 {
    match tok.and_then(|t| t.encode_fast(text, special).ok()) {
        Some(e) => e.get_ids().len() as u64,
        None => words(text),
    }
}

/// Counts prompt tokens (with the model's tokenizer when it has one, else words; token
/// ids as given) and returns the text that seeds the generated output. A chat is
/// rendered with a generic template, `role: content` lines then `assistant: `, as the
/// tiny test model's template does.
pub(crate) fn prompt_of(
    body: &Value,
    api: Api,
    tok: Option<&tokenizers::Tokenizer>,
) -> Result<(u64, String), String> {
    match api {
        Api::Completions => match body.get("prompt") {
            None | Some(Value::Null) => {
                Err("Either prompt or prompt_embeds must be provided and non-empty.".into())
            }
            Some(Value::String(s)) => Ok((count(tok, s, true).max(1), s.clone())),
            Some(Value::Array(items)) if !items.is_empty() => {
                if items.iter().all(Value::is_number) {
                    Ok((items.len() as u64, Value::Array(items.clone()).to_string()))
                } else if let Some(Value::Array(first)) = items.first() {
                    Ok((
                        first.len().max(1) as u64,
                        Value::Array(first.clone()).to_string(),
                    ))
                } else if let Some(Value::String(s)) = items.first() {
                    Ok((count(tok, s, true).max(1), s.clone()))
                } else {
                    Err("prompt must be a string, a list of strings or token ids".into())
                }
            }
            Some(_) => Err("prompt must be a string, a list of strings or token ids".into()),
        },
        Api::Chat => {
            let msgs = body
                .get("messages")
                .and_then(Value::as_array)
                .ok_or("messages: Field required (a list of chat messages)")?;
            let Some(t) = tok else {
                let mut text = String::new();
                let mut n = 0;
                for m in msgs {
                    match m.get("content") {
                        Some(Value::String(s)) => text.push_str(s),
                        Some(Value::Array(parts)) => {
                            for p in parts {
                                if let Some(t) = p.get("text").and_then(Value::as_str) {
                                    text.push_str(t);
                                    text.push(' ');
                                }
                            }
                        }
                        _ => {}
                    }
                    text.push('\n');
                    n += 3;
                }
                return Ok((words(&text) + n, text));
            };
            let mut text = String::new();
            for m in msgs {
                let role = m.get("role").and_then(Value::as_str).unwrap_or("user");
                let content = match m.get("content") {
                    Some(Value::String(s)) => s.clone(),
                    Some(Value::Array(parts)) => parts
                        .iter()
                        .filter_map(|p| p.get("text").and_then(Value::as_str))
                        .collect::<Vec<_>>()
                        .join("\n"),
                    _ => String::new(),
                };
                text.push_str(&format!("{role}: {content}\n"));
            }
            text.push_str("assistant: ");
            Ok((count(Some(t), &text, false).max(1), text))
        }
    }
}

/// The tokens a request asks for (`max_completion_tokens`, then `max_tokens` for a chat),
/// `default` when it names none.
pub(crate) fn max_tokens_of(body: &Value, api: Api, default: u64) -> Result<u64, String> {
    let keys: &[&str] = match api {
        Api::Completions => &["max_tokens"],
        Api::Chat => &["max_completion_tokens", "max_tokens"],
    };
    for k in keys {
        match body.get(*k) {
            None | Some(Value::Null) => continue,
            Some(v) => {
                return match v.as_i64() {
                    Some(n) if n >= 1 => Ok(n as u64),
                    _ => Err(format!("{k} must be at least 1, got {v}")),
                }
            }
        }
    }
    Ok(default)
}

const VOCAB: &[&str] = &[
    "the",
    "model",
    "serves",
    "tokens",
    "from",
    "a",
    "simulated",
    "engine",
    "while",
    "prefill",
    "and",
    "decode",
    "share",
    "cache",
    "blocks",
    "over",
    "fast",
    "links",
    "to",
    "answer",
];

pub(crate) fn fnv(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// Deterministic output: the same prompt always yields the same tokens.
pub(crate) fn tokens(seed_text: &str, choice: u64, n: u64) -> Vec<String> {
    let seed = fnv(seed_text).wrapping_add(choice.wrapping_mul(7919));
    (0..n)
        .map(|i| {
            let idx = (seed.wrapping_add(i.wrapping_mul(31)) % VOCAB.len() as u64) as usize;
            format!(" {}", VOCAB[idx])
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn prompt_counting() {
        assert_eq!(
            prompt_of(&json!({"prompt": "a b c"}), Api::Completions, None)
                .unwrap()
                .0,
            3
        );
        assert_eq!(
            prompt_of(&json!({"prompt": [1, 2, 3, 4]}), Api::Completions, None)
                .unwrap()
                .0,
            4
        );
        assert!(prompt_of(&json!({}), Api::Completions, None).is_err());
        assert!(prompt_of(&json!({"prompt": 5}), Api::Completions, None).is_err());
        let chat = json!({"messages": [{"role": "user", "content": "hi there"}]});
        assert_eq!(prompt_of(&chat, Api::Chat, None).unwrap().0, 5);
        assert!(prompt_of(&json!({"messages": "x"}), Api::Chat, None).is_err());
    }

    #[test]
    fn max_tokens_rules() {
        assert_eq!(max_tokens_of(&json!({}), Api::Completions, 16).unwrap(), 16);
        assert_eq!(
            max_tokens_of(&json!({"max_tokens": null}), Api::Completions, 16).unwrap(),
            16
        );
        assert_eq!(
            max_tokens_of(&json!({"max_tokens": 3}), Api::Completions, 16).unwrap(),
            3
        );
        assert_eq!(
            max_tokens_of(
                &json!({"max_tokens": 3, "max_completion_tokens": 5}),
                Api::Chat,
                16
            )
            .unwrap(),
            5
        );
        assert!(max_tokens_of(&json!({"max_tokens": 0}), Api::Completions, 16).is_err());
    }

    #[test]
    fn generation_is_deterministic() {
        assert_eq!(tokens("p", 0, 8), tokens("p", 0, 8));
        assert_eq!(tokens("p", 0, 8).len(), 8);
        assert_ne!(tokens("p", 0, 8), tokens("q", 0, 8));
    }
}
