//! srtctl's sa-bench tokenizer adapters (`benchmark.custom_tokenizer`): Python classes
//! sa-bench imports in place of the model's tokenizer when the model ships no Jinja chat
//! template. Both that srtctl's recipes name are DeepSeek-V4's: its tokenizer is a
//! plain `tokenizer.json` (which srt reads as it is), and its chat format is code
//! (DeepSeek's `encoding_dsv4.encode_messages`), not a template. srt renders the one
//! message sa-bench renders (one user message with the generation prompt) as each
//! adapter does.
//!
//! For that message DeepSeek-V4's encoder writes the BOS token, the (empty or absent)
//! system message, `<｜User｜>`, the content and `<｜Assistant｜>`, then `<think>` in
//! thinking mode or `</think>` in chat mode; its one other piece, the "max" reasoning
//! effort preamble, is written only when a caller asks for it, which sa-bench does not.
//! The adapters differ in the mode:
//! - SGLang's (srtctl's `sglang_deepseek_v4.SGLangDeepseekV4Tokenizer`, which mirrors
//!   SGLang's server) inserts an empty system message and renders chat mode unless the
//!   benchmark's environment turns thinking on (`SGLANG_DEFAULT_THINKING`, else
//!   `SGLANG_ENABLE_THINKING`, read as SGLang reads a boolean). srtctl's benchmark step
//!   sees the recipe's top-level `environment` (a role's `env` reaches only its
//!   workers), and so does srt's. In thinking mode, an effort of `max`
//!   (`SGLANG_DSV4_REASONING_EFFORT`, else `SGLANG_REASONING_EFFORT`) makes the encoder
//!   open with a preamble srt does not render: refused ([`MaxEffort`]).
//! - vLLM's (`vllm_deepseek_v4.VLLMDeepseekV4Tokenizer`, vLLM's
//!   `tokenizers/deepseek_v4.py`) reads no environment and renders thinking mode when
//!   the caller names no mode, as sa-bench does not, at effort `high` (no preamble).

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// DeepSeek-V4's beginning-of-sequence token, written first by its encoder.
const BOS: &str = "<｜begin▁of▁sentence｜>";
/// Opens a user message.
const USER: &str = "<｜User｜>";
/// Opens the assistant's turn (the generation prompt).
const ASSISTANT: &str = "<｜Assistant｜>";
/// After the generation prompt in thinking mode.
const THINKING: &str = "<think>";
/// After the generation prompt in chat mode (the thinking closed, empty).
const CHAT: &str = "</think>";

/// A tokenizer adapter of srtctl's sa-bench that srt renders natively.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum TokenizerAdapter {
    /// DeepSeek-V4 as SGLang's server renders it: chat mode.
    #[serde(rename = "sa_bench_tokenizers.sglang_deepseek_v4.SGLangDeepseekV4Tokenizer")]
    SglangDeepseekV4,
    /// DeepSeek-V4 as vLLM's renderer does by default: thinking mode.
    #[serde(rename = "sa_bench_tokenizers.vllm_deepseek_v4.VLLMDeepseekV4Tokenizer")]
    VllmDeepseekV4,
}

impl TokenizerAdapter {
    /// Every adapter srt renders.
    pub const ALL: [TokenizerAdapter; 2] = [
        TokenizerAdapter::SglangDeepseekV4,
        TokenizerAdapter::VllmDeepseekV4,
    ];

    /// The Python class a recipe names it by (srtctl's `custom_tokenizer` value).
    pub fn class(self) -> &'static str {
        match self {
            TokenizerAdapter::SglangDeepseekV4 => {
                "sa_bench_tokenizers.sglang_deepseek_v4.SGLangDeepseekV4Tokenizer"
            }
            TokenizerAdapter::VllmDeepseekV4 => {
                "sa_bench_tokenizers.vllm_deepseek_v4.VLLMDeepseekV4Tokenizer"
            }
        }
    }

    /// The adapter a recipe's `custom_tokenizer` value names.
    pub fn named(class: &str) -> Option<TokenizerAdapter> {
        Self::ALL.into_iter().find(|a| a.class() == class)
    }

    /// The chat it renders for a benchmark whose environment holds `env`.
    pub fn chat(self, env: &BTreeMap<String, String>) -> Result<AdapterChat, MaxEffort> {
        let thinking = match self {
            TokenizerAdapter::VllmDeepseekV4 => true,
            TokenizerAdapter::SglangDeepseekV4 => {
                first_set(env, THINKING_VARS).is_some_and(|(_, v)| {
                    ["1", "true", "yes", "on"].contains(&v.trim().to_lowercase().as_str())
                })
            }
        };
        if self == TokenizerAdapter::SglangDeepseekV4 && thinking {
            if let Some((var, v)) = first_set(env, EFFORT_VARS) {
                if v.trim() == "max" {
                    return Err(MaxEffort(var));
                }
            }
        }
        Ok(AdapterChat {
            adapter: self,
            thinking,
        })
    }
}

/// What turns SGLang's adapter to thinking mode, the first set winning.
const THINKING_VARS: &[&str] = &["SGLANG_DEFAULT_THINKING", "SGLANG_ENABLE_THINKING"];
/// What sets SGLang's adapter's reasoning effort, the first set winning.
const EFFORT_VARS: &[&str] = &["SGLANG_DSV4_REASONING_EFFORT", "SGLANG_REASONING_EFFORT"];

/// The first of `vars` that `env` sets, with its value.
fn first_set<'a>(
    env: &'a BTreeMap<String, String>,
    vars: &[&'static str],
) -> Option<(&'static str, &'a str)> {
    vars.iter()
        .find_map(|&var| env.get(var).map(|v| (var, v.as_str())))
}

/// The benchmark's environment asks SGLang's adapter for DeepSeek-V4's "max" reasoning
/// effort in thinking mode, whose preamble srt does not render: the variable that asks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct MaxEffort(pub &'static str);

/// The chat an adapter renders: in thinking mode or chat mode.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AdapterChat {
    /// The adapter.
    pub adapter: TokenizerAdapter,
    /// Thinking mode (the generation prompt opens `<think>`), else chat mode.
    pub thinking: bool,
}

impl AdapterChat {
    /// The text of one user message `content` with the generation prompt, as the
    /// adapter's `apply_chat_template([{"role": "user", "content": content}],
    /// add_generation_prompt=True, tokenize=False)` returns it.
    pub(super) fn render_user(self, content: &str) -> String {
        let mode = if self.thinking { THINKING } else { CHAT };
        format!("{BOS}{USER}{content}{ASSISTANT}{mode}")
    }

    /// The mode, as shown.
    pub fn mode(self) -> &'static str {
        if self.thinking {
            "thinking mode"
        } else {
            "chat mode"
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_adapter_is_named_by_its_class_and_serialized_as_it() {
        for a in TokenizerAdapter::ALL {
            assert_eq!(TokenizerAdapter::named(a.class()), Some(a));
            assert_eq!(serde_json::to_value(a).unwrap(), a.class());
        }
        assert_eq!(TokenizerAdapter::named("glm_moe_dsa"), None);
    }

    fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    /// The encoder's output for one user message: SGLang's adapter closes the thinking
    /// (chat mode), vLLM's opens it.
    #[test]
    fn one_user_message_renders_as_deepseek_v4s_encoder_writes_it() {
        let none = BTreeMap::new();
        let sglang = TokenizerAdapter::SglangDeepseekV4.chat(&none).unwrap();
        assert_eq!(
            sglang.render_user("hi"),
            "<｜begin▁of▁sentence｜><｜User｜>hi<｜Assistant｜></think>"
        );
        let vllm = TokenizerAdapter::VllmDeepseekV4.chat(&none).unwrap();
        assert_eq!(
            vllm.render_user("hi"),
            "<｜begin▁of▁sentence｜><｜User｜>hi<｜Assistant｜><think>"
        );
    }

    /// SGLang's adapter reads its mode and effort from the benchmark's environment as
    /// SGLang does; vLLM's reads none.
    #[test]
    fn the_environment_turns_sglangs_adapter_to_thinking() {
        let sglang = TokenizerAdapter::SglangDeepseekV4;
        let thinking = |pairs: &[(&str, &str)]| sglang.chat(&env(pairs)).unwrap().thinking;
        assert!(thinking(&[("SGLANG_DEFAULT_THINKING", "1")]));
        assert!(thinking(&[("SGLANG_DEFAULT_THINKING", " True ")]));
        assert!(thinking(&[("SGLANG_ENABLE_THINKING", "on")]));
        assert!(!thinking(&[("SGLANG_DEFAULT_THINKING", "0")]));
        // The newer name wins, even when it says no.
        assert!(!thinking(&[
            ("SGLANG_DEFAULT_THINKING", ""),
            ("SGLANG_ENABLE_THINKING", "1")
        ]));
        // `high` renders as no effort; `max` in chat mode adds nothing.
        assert!(thinking(&[
            ("SGLANG_DEFAULT_THINKING", "1"),
            ("SGLANG_DSV4_REASONING_EFFORT", "high")
        ]));
        assert!(!thinking(&[("SGLANG_REASONING_EFFORT", "max")]));
        assert_eq!(
            sglang.chat(&env(&[
                ("SGLANG_DEFAULT_THINKING", "1"),
                ("SGLANG_REASONING_EFFORT", "max")
            ])),
            Err(MaxEffort("SGLANG_REASONING_EFFORT"))
        );
        let vllm = TokenizerAdapter::VllmDeepseekV4;
        assert!(
            vllm.chat(&env(&[("SGLANG_DEFAULT_THINKING", "0")]))
                .unwrap()
                .thinking
        );
    }
}
