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
//!   benchmark's own environment sets `SGLANG_DEFAULT_THINKING`, which only a recipe's
//!   top-level `environment` (not a role's) reaches in srtctl, and srt has none: chat.
//! - vLLM's (`vllm_deepseek_v4.VLLMDeepseekV4Tokenizer`, vLLM's
//!   `tokenizers/deepseek_v4.py`) renders thinking mode when the caller names no mode,
//!   as sa-bench does not.

use serde::{Deserialize, Serialize};

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

    /// Whether it renders DeepSeek-V4's thinking mode.
    fn thinking(self) -> bool {
        self == TokenizerAdapter::VllmDeepseekV4
    }

    /// The text of one user message `content` with the generation prompt, as the
    /// adapter's `apply_chat_template([{"role": "user", "content": content}],
    /// add_generation_prompt=True, tokenize=False)` returns it.
    pub(super) fn render_user(self, content: &str) -> String {
        let mode = if self.thinking() { THINKING } else { CHAT };
        format!("{BOS}{USER}{content}{ASSISTANT}{mode}")
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

    /// The encoder's output for one user message: SGLang's adapter closes the thinking
    /// (chat mode), vLLM's opens it.
    #[test]
    fn one_user_message_renders_as_deepseek_v4s_encoder_writes_it() {
        assert_eq!(
            TokenizerAdapter::SglangDeepseekV4.render_user("hi"),
            "<｜begin▁of▁sentence｜><｜User｜>hi<｜Assistant｜></think>"
        );
        assert_eq!(
            TokenizerAdapter::VllmDeepseekV4.render_user("hi"),
            "<｜begin▁of▁sentence｜><｜User｜>hi<｜Assistant｜><think>"
        );
    }
}
