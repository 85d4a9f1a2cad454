//! Prompts: random token ids of an exact token length (vLLM's `random` dataset), or the
//! conversations of a ShareGPT-style JSON file.

use super::adapter::AdapterChat;
use super::chat::{ChatTemplate, ChatTemplateError};
use super::rng::Rng;
use super::spec::Dataset;
use super::tokenizer::Tokenizer;
use std::sync::Arc;

/// One request to send.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct Request {
    /// Prompt text.
    pub prompt: String,
    /// Prompt tokens as the server counts them (special tokens included).
    pub prompt_len: u32,
    /// `max_tokens`.
    pub output_len: u32,
}

/// Tries to bring a decoded prompt to its exact token length (as vLLM).
const MAX_RETRY: usize = 10;

/// Stream ids of [`Rng::new`]: independent sequences of one seed.
const STREAM_PREFIX: u64 = 1;

/// A source of requests.
pub(super) enum Source {
    /// Random prompts.
    Random(Random),
    /// Conversations from a file, in shuffled order, repeated when exhausted.
    Sharegpt {
        /// Valid (prompt, prompt tokens, completion tokens) entries.
        entries: Vec<Request>,
        /// Next entry.
        next: usize,
    },
}

/// The random dataset's state.
pub(super) struct Random {
    isl: u32,
    osl: u32,
    range_ratio: f64,
    prefix: Vec<u32>,
    rng: Rng,
    /// Prompts wrapped in the model's chat template (`use_chat_template`).
    chat: Option<Arc<Chat>>,
}

/// The chat format random prompts are wrapped in, as sa-bench's `use_chat_template`
/// wraps them.
#[derive(Debug)]
pub(super) struct Chat {
    format: ChatFormat,
    /// Tokens the format adds to a prompt, as sa-bench counts them: the tokens of the
    /// one-message chat `a` with the generation prompt, less one (the `a`).
    pub len: u32,
}

/// What renders a chat: the model's template, or an adapter srtctl names in its place.
#[derive(Debug)]
pub(super) enum ChatFormat {
    /// The tokenizer's Jinja chat template.
    Template(Box<ChatTemplate>),
    /// A sa-bench tokenizer adapter (`custom_tokenizer`).
    Adapter(AdapterChat),
}

impl ChatFormat {
    /// The format of `tok`'s model: `adapter` when given, else the chat template of its
    /// files beside `tokenizer.json`, checked to render.
    pub(super) fn load(
        tok: &std::path::Path,
        adapter: Option<AdapterChat>,
    ) -> Result<ChatFormat, ChatTemplateError> {
        if let Some(a) = adapter {
            return Ok(ChatFormat::Adapter(a));
        }
        let dir = tok.parent().unwrap_or(std::path::Path::new("."));
        let template = ChatTemplate::load(dir)?;
        template.render_user("a")?;
        Ok(ChatFormat::Template(Box::new(template)))
    }

    /// One user message `content` with the generation prompt.
    fn render_user(&self, content: &str) -> Result<String, ChatTemplateError> {
        match self {
            ChatFormat::Template(t) => t.render_user(content),
            ChatFormat::Adapter(a) => Ok(a.render_user(content)),
        }
    }
}

impl Chat {
    /// The chat format of `tok`'s model (`adapter`, or its chat template), and the
    /// length it adds.
    pub(super) fn load(
        tok: &Tokenizer,
        adapter: Option<AdapterChat>,
    ) -> Result<Chat, ChatTemplateError> {
        let format = ChatFormat::load(&tok.path, adapter)?;
        let one = format.render_user("a")?;
        let len = tok.encode(&one).len().saturating_sub(1) as u32;
        Ok(Chat { format, len })
    }
}

impl Source {
    /// Prepare `dataset` (reads the ShareGPT file, draws the shared prefix) with the
    /// sequence `stream` of `seed`; random prompts are wrapped in `chat` when given
    /// (ShareGPT prompts are sent as they are, as sa-bench sends them).
    pub(super) fn new(
        dataset: &Dataset,
        tok: &Tokenizer,
        seed: u64,
        stream: u64,
        chat: Option<&Arc<Chat>>,
    ) -> Result<Source, String> {
        match dataset {
            Dataset::Random {
                isl,
                osl,
                range_ratio,
                prefix_len,
            } => {
                if !(0.0..=1.0).contains(range_ratio) {
                    return Err(format!(
                        "random_range_ratio must be in [0, 1], got {range_ratio}"
                    ));
                }
                let real = isl
                    .saturating_sub(tok.special_to_add)
                    .saturating_sub(chat.map_or(0, |c| c.len));
                let min_total = u64::from(*prefix_len) + lengths(u64::from(real), *range_ratio).1;
                if min_total < 1 {
                    return Err(match chat {
                        None => format!(
                            "isl {isl} is too small: the server adds {} special token(s), leaving no prompt",
                            tok.special_to_add
                        ),
                        Some(c) => format!(
                            "isl {isl} is too small: the server adds {} special token(s) and the chat template {}, leaving no prompt",
                            tok.special_to_add, c.len
                        ),
                    });
                }
                // The prefix is the same for every stream of a seed: it is shared.
                let mut prefix_rng = Rng::new(seed, STREAM_PREFIX);
                let prefix = if *prefix_len > 0 {
                    let ids = random_ids(tok, &mut prefix_rng, *prefix_len as usize);
                    exact_len(tok, ids, *prefix_len as usize, &mut prefix_rng).1
                } else {
                    Vec::new()
                };
                Ok(Source::Random(Random {
                    isl: *isl,
                    osl: *osl,
                    range_ratio: *range_ratio,
                    prefix,
                    rng: Rng::new(seed, stream),
                    chat: chat.cloned(),
                }))
            }
            Dataset::Sharegpt { path, osl } => {
                let text =
                    crate::input::read_text(std::path::Path::new(path), crate::input::DATASET)
                        .map_err(|e| e.with_help())?;
                let mut entries =
                    sharegpt(&text, tok, *osl).map_err(|e| format!("the dataset {path}: {e}"))?;
                if entries.is_empty() {
                    return Err(format!(
                        "the dataset {path} has no usable conversation (two turns, prompt 4..1024 tokens, prompt + output at most 2048)"
                    ));
                }
                shuffle(&mut entries, &mut Rng::new(seed, stream));
                Ok(Source::Sharegpt { entries, next: 0 })
            }
        }
    }

    /// The next `n` requests; an error when the chat template refuses a prompt.
    pub(super) fn take(&mut self, tok: &Tokenizer, n: usize) -> Result<Vec<Request>, String> {
        (0..n).map(|_| self.next(tok)).collect()
    }

    fn next(&mut self, tok: &Tokenizer) -> Result<Request, String> {
        match self {
            Source::Random(r) => r.next(tok),
            Source::Sharegpt { entries, next } => {
                let e = entries[*next % entries.len()].clone();
                *next += 1;
                Ok(e)
            }
        }
    }
}

impl Random {
    /// vLLM's sampling: input length uniform in `[floor(real x (1-r)), ceil(real x (1+r))]`
    /// where `real` is `isl` less the special tokens the server adds, output length
    /// likewise around `osl` (at least 1); the prompt is the shared prefix then random
    /// token ids, decoded, re-encoded and adjusted to the exact length. With a chat
    /// template, `real` is also less the template's tokens and the prompt is built as
    /// sa-bench builds it ([`Random::chat_prompt`]).
    fn next(&mut self, tok: &Tokenizer) -> Result<Request, String> {
        let real = f64::from(
            self.isl
                .saturating_sub(tok.special_to_add)
                .saturating_sub(self.chat.as_ref().map_or(0, |c| c.len)),
        );
        let (in_lo, in_hi) = lengths(real as u64, self.range_ratio);
        let in_len = self.rng.between(in_lo, in_hi) as usize;
        let (out_lo, out_hi) = lengths(u64::from(self.osl), self.range_ratio);
        let out_lo = out_lo.max(1);
        let out_hi = out_hi.max(1);
        let output_len = self.rng.between(out_lo, out_hi) as u32;
        if let Some(chat) = self.chat.clone() {
            return self.chat_prompt(tok, &chat, in_len, output_len);
        }
        let mut ids = self.prefix.clone();
        ids.extend(random_ids(tok, &mut self.rng, in_len));
        let target = self.prefix.len() + in_len;
        let (prompt, ids) = exact_len(tok, ids, target, &mut self.rng);
        Ok(Request {
            prompt,
            prompt_len: ids.len() as u32 + tok.special_to_add,
            output_len,
        })
    }

    /// sa-bench's chat prompt (`_process_random_chat`): the text of one and a half times
    /// `in_len` random tokens (after the shared prefix) is encoded again and cut to
    /// `in_len` tokens, decoded, and wrapped in the chat template as one user message
    /// with the generation prompt. Its length is the whole text's as the server counts
    /// it (the template's tokens and the special tokens the server adds included).
    fn chat_prompt(
        &mut self,
        tok: &Tokenizer,
        chat: &Chat,
        in_len: usize,
        output_len: u32,
    ) -> Result<Request, String> {
        let target = self.prefix.len() + in_len;
        let mut ids = self.prefix.clone();
        ids.extend(random_ids(tok, &mut self.rng, in_len * 3 / 2));
        let mut ids = tok.encode(&tok.decode(&ids));
        ids.truncate(target);
        let content = tok.decode(&ids);
        let prompt = chat
            .format
            .render_user(&content)
            .map_err(|e| e.with_help())?;
        Ok(Request {
            prompt_len: tok.count_prompt(&prompt),
            prompt,
            output_len,
        })
    }
}

fn random_ids(tok: &Tokenizer, rng: &mut Rng, n: usize) -> Vec<u32> {
    (0..n)
        .map(|_| tok.allowed[rng.between(0, tok.allowed.len() as u64 - 1) as usize])
        .collect()
}

/// Decode, re-encode, and truncate or extend until the text encodes to exactly `target`
/// tokens (vLLM's `gen_prompt_decode_to_target_len`): some id sequences decode to text
/// that encodes differently. Returns the text and its ids.
pub(super) fn exact_len(
    tok: &Tokenizer,
    mut ids: Vec<u32>,
    target: usize,
    rng: &mut Rng,
) -> (String, Vec<u32>) {
    let mut tries = MAX_RETRY;
    loop {
        let text = tok.decode(&ids);
        ids = tok.encode(&text);
        if ids.len() == target || tries == 0 {
            return (text, ids);
        }
        tries -= 1;
        if ids.len() < target {
            ids.extend(random_ids(tok, rng, target - ids.len()));
        } else {
            ids.truncate(target);
        }
    }
}

/// vLLM's ShareGPT filter (`is_valid_sequence`): prompt of 4 to 1024 tokens, output of
/// at least 4 (unless fixed), at most 2048 together.
fn valid(prompt: u32, output: u32, fixed_output: bool) -> bool {
    prompt >= 4 && (fixed_output || output >= 4) && prompt <= 1024 && prompt + output <= 2048
}

/// Entries of a ShareGPT file: a JSON array of `{"conversations": [{"value": ...}, ...]}`
/// (turns may also be `{"content": ...}`); the first turn is the prompt, the second the
/// reference completion.
pub(super) fn sharegpt(
    text: &str,
    tok: &Tokenizer,
    osl: Option<u32>,
) -> Result<Vec<Request>, String> {
    let data: serde_json::Value =
        serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
    let items = data.as_array().ok_or("not a JSON array of conversations")?;
    let turn = |t: &serde_json::Value| -> Option<String> {
        t.get("value")
            .or_else(|| t.get("content"))
            .and_then(|v| v.as_str())
            .map(str::to_string)
    };
    let mut out = Vec::new();
    for item in items {
        let Some(conv) = item.get("conversations").and_then(|c| c.as_array()) else {
            continue;
        };
        if conv.len() < 2 {
            continue;
        }
        let (Some(prompt), Some(completion)) = (turn(&conv[0]), turn(&conv[1])) else {
            continue;
        };
        let prompt_len = tok.count_prompt(&prompt);
        let output_len = osl.unwrap_or_else(|| tok.count_prompt(&completion));
        if valid(prompt_len, output_len, osl.is_some()) {
            out.push(Request {
                prompt,
                prompt_len,
                output_len,
            });
        }
    }
    Ok(out)
}

fn shuffle<T>(v: &mut [T], rng: &mut Rng) {
    for i in (1..v.len()).rev() {
        let j = rng.between(0, i as u64) as usize;
        v.swap(i, j);
    }
}

/// The lengths a request of nominal length `n` is drawn from (inclusive), as
/// sa-bench's `sample_random_requests` draws them: from `n x r` (1 for `n` of 1) up
/// to `n`, so `r = 1` fixes every length and the default 0.8 keeps them within the
/// top fifth.
fn lengths(n: u64, r: f64) -> (u64, u64) {
    let lo = if n > 1 { (n as f64 * r) as u64 } else { 1 };
    // sa-bench may draw an empty prompt at `r` near 0; a request has one token at least.
    (lo.clamp(1.min(n), n), n)
}

#[cfg(test)]
mod tests {
    use super::super::tokenizer::tests::tiny;
    use super::*;

    fn random(isl: u32, osl: u32, ratio: f64, prefix: u32) -> Dataset {
        Dataset::Random {
            isl,
            osl,
            range_ratio: ratio,
            prefix_len: prefix,
        }
    }

    #[test]
    fn random_prompts_have_their_exact_token_length() {
        let tok = tiny();
        let mut src = Source::new(&random(64, 16, 1.0, 0), &tok, 0, 10, None).unwrap();
        let reqs = src.take(&tok, 20).unwrap();
        for r in &reqs {
            assert_eq!(r.prompt_len, 64, "{r:?}");
            assert_eq!(tok.count_prompt(&r.prompt), 64, "{r:?}");
            assert_eq!(r.output_len, 16);
        }
        let distinct: std::collections::BTreeSet<&str> =
            reqs.iter().map(|r| r.prompt.as_str()).collect();
        assert_eq!(distinct.len(), reqs.len(), "every prompt differs");
    }

    #[test]
    fn range_ratio_spreads_lengths_and_the_seed_fixes_them() {
        let tok = tiny();
        let take = |seed| {
            let mut src = Source::new(&random(100, 40, 0.5, 0), &tok, seed, 10, None).unwrap();
            src.take(&tok, 200).unwrap()
        };
        let a = take(1);
        assert_eq!(a, take(1));
        assert_ne!(a, take(2));
        let (lo, hi) = a.iter().fold((u32::MAX, 0), |(lo, hi), r| {
            (lo.min(r.prompt_len), hi.max(r.prompt_len))
        });
        // real = 99, so [49, 99] plus the BOS (sa-bench's [n x r, n]).
        assert!(lo >= 50 && hi <= 100 && hi - lo > 30, "{lo}..{hi}");
        for r in &a {
            assert_eq!(tok.count_prompt(&r.prompt), r.prompt_len);
            assert!((20..=40).contains(&r.output_len));
        }
    }

    #[test]
    fn a_shared_prefix_starts_every_prompt() {
        let tok = tiny();
        let mut src = Source::new(&random(40, 8, 1.0, 24), &tok, 3, 10, None).unwrap();
        let mut warm = Source::new(&random(40, 8, 1.0, 24), &tok, 3, 11, None).unwrap();
        let reqs: Vec<Request> = src
            .take(&tok, 5)
            .unwrap()
            .into_iter()
            .chain(warm.take(&tok, 2).unwrap())
            .collect();
        let first = tok.encode(&reqs[0].prompt);
        for r in &reqs {
            assert_eq!(r.prompt_len, 24 + 40, "{r:?}");
            assert_eq!(tok.encode(&r.prompt)[..20], first[..20], "{r:?}");
        }
    }

    /// A dataset at `/dev/zero` grew srt to 3 GB; it is refused without reading.
    #[test]
    fn a_dataset_that_is_a_device_is_refused() {
        let tok = tiny();
        let dataset = Dataset::Sharegpt {
            path: "/dev/zero".into(),
            osl: None,
        };
        let e = Source::new(&dataset, &tok, 0, 10, None).err().unwrap();
        assert!(e.contains("/dev/zero is a character device"), "{e}");
    }

    #[test]
    fn too_short_inputs_are_refused() {
        let tok = tiny();
        let e = Source::new(&random(1, 8, 0.0, 0), &tok, 0, 10, None)
            .err()
            .unwrap();
        assert!(e.contains("too small"), "{e}");
    }

    #[test]
    fn sharegpt_entries_are_filtered_and_counted() {
        let tok = tiny();
        let text = serde_json::json!([
            {"conversations": [
                {"from": "human", "value": "Once upon a time there was a small language model."},
                {"from": "gpt", "value": "It could count: one, two, three, four, five."}]},
            {"conversations": [{"from": "human", "value": "only one turn"}]},
            {"conversations": [{"value": "hi"}, {"value": "too short a prompt"}]},
            {"id": "no conversations"}
        ])
        .to_string();
        let e = sharegpt(&text, &tok, None).unwrap();
        assert_eq!(e.len(), 1);
        assert_eq!(e[0].prompt_len, tok.count_prompt(&e[0].prompt));
        assert_eq!(
            e[0].output_len,
            tok.count_prompt("It could count: one, two, three, four, five.")
        );
        assert_eq!(sharegpt(&text, &tok, Some(7)).unwrap()[0].output_len, 7);
        assert!(sharegpt("{}", &tok, None).is_err());
    }

    /// The random prompts without a chat template stay what they are: a digest of 100
    /// requests of two datasets, computed when lengths were first drawn as sa-bench
    /// draws them (any change to their prompts, lengths or draws shows here).
    #[test]
    fn random_prompts_without_a_chat_template_are_unchanged() {
        let tok = tiny();
        let mut h = blake3::Hasher::new();
        for (d, stream) in [(random(64, 16, 1.0, 0), 10), (random(100, 40, 0.5, 24), 11)] {
            let mut src = Source::new(&d, &tok, 7, stream, None).unwrap();
            for r in src.take(&tok, 50).unwrap() {
                h.update(format!("{}\0{}\0{}\0", r.prompt, r.prompt_len, r.output_len).as_bytes());
            }
        }
        assert_eq!(
            h.finalize().to_hex().as_str(),
            "4d706c448effae434080564445389063ef00c0c8be2edd5cb5527113e519e6e3"
        );
    }

    /// sa-bench's template length: transformers 5.24.0 (the dynamo venv under `.tools`)
    /// gives `len(tok.encode(tok.apply_chat_template([{"role": "user", "content": "a"}],
    /// add_generation_prompt=True, tokenize=False), add_special_tokens=False)) - 1` = 14
    /// for the tiny model ("user: a\nassistant: ") and 119 for `chat::tests::RICH`.
    #[test]
    fn the_chat_template_length_is_sa_benchs() {
        let tok = tiny();
        assert_eq!(Chat::load(&tok, None).unwrap().len, 14);
        let dir = super::super::chat::tests::model_dir(
            serde_json::json!({
                "chat_template": super::super::chat::tests::RICH,
                "bos_token": "<s>",
            }),
            None,
        );
        let rich = Tokenizer::load(dir.path().to_str().unwrap()).unwrap();
        assert_eq!(Chat::load(&rich, None).unwrap().len, 119);
        let bare = super::super::chat::tests::model_dir(serde_json::json!({}), None);
        let bare = Tokenizer::load(bare.path().to_str().unwrap()).unwrap();
        let e = Chat::load(&bare, None).unwrap_err();
        assert!(e.to_string().contains("has no chat template"), "{e}");
    }

    /// A tokenizer adapter renders in place of the template, so a model without one
    /// (DeepSeek-V4's) wraps its prompts: in the adapter's format, its length counted
    /// as sa-bench counts the template's (`a` in it, less one).
    #[test]
    fn an_adapter_wraps_prompts_where_the_model_has_no_template() {
        let bare = super::super::chat::tests::model_dir(serde_json::json!({}), None);
        let tok = Tokenizer::load(bare.path().to_str().unwrap()).unwrap();
        let adapter = super::super::TokenizerAdapter::SglangDeepseekV4
            .chat(&Default::default())
            .unwrap();
        let chat = Arc::new(Chat::load(&tok, Some(adapter)).unwrap());
        let one = tok.encode(&adapter.render_user("a")).len() as u32;
        assert_eq!(chat.len, one - 1);
        let mut src = Source::new(&random(64, 16, 1.0, 0), &tok, 0, 10, Some(&chat)).unwrap();
        for r in src.take(&tok, 5).unwrap() {
            let content = r
                .prompt
                .strip_prefix("<｜begin▁of▁sentence｜><｜User｜>")
                .and_then(|p| p.strip_suffix("<｜Assistant｜></think>"))
                .unwrap_or_else(|| panic!("not in DeepSeek-V4's chat: {r:?}"));
            assert!(!content.is_empty());
            assert_eq!(r.prompt_len, tok.count_prompt(&r.prompt), "{r:?}");
        }
    }

    /// With the chat template, each prompt is one user message of random text in the
    /// template with the generation prompt, its length the whole text's as the server
    /// counts it: at isl 64, 64 - 1 (BOS) - 14 (template) = 49 tokens of content, cut
    /// after re-encoding as sa-bench cuts it. sa-bench's template length undercounts
    /// this template by one when the content does not merge with the space after
    /// `user:` (as `a` does: " a" is one token), so most prompts come out at 65.
    #[test]
    fn chat_prompts_are_random_text_in_the_template() {
        let tok = tiny();
        let chat = Arc::new(Chat::load(&tok, None).unwrap());
        let mut src = Source::new(&random(64, 16, 1.0, 0), &tok, 0, 10, Some(&chat)).unwrap();
        let reqs = src.take(&tok, 20).unwrap();
        for r in &reqs {
            let content = r
                .prompt
                .strip_prefix("user: ")
                .and_then(|p| p.strip_suffix("\nassistant: "))
                .unwrap_or_else(|| panic!("not in the template: {r:?}"));
            assert_eq!(r.prompt_len, tok.count_prompt(&r.prompt), "{r:?}");
            let n = tok.encode(content).len();
            assert!((46..=49).contains(&n), "{n} content tokens: {r:?}");
            assert!((63..=66).contains(&r.prompt_len), "{r:?}");
            assert_eq!(r.output_len, 16);
        }
        let distinct: std::collections::BTreeSet<&str> =
            reqs.iter().map(|r| r.prompt.as_str()).collect();
        assert_eq!(distinct.len(), reqs.len(), "every prompt differs");
        // The seed fixes them; the chat path draws as the plain one does.
        let mut again = Source::new(&random(64, 16, 1.0, 0), &tok, 0, 10, Some(&chat)).unwrap();
        assert_eq!(again.take(&tok, 20).unwrap(), reqs);
        // The template's tokens leave too little of a short isl.
        let e = Source::new(&random(15, 8, 0.0, 0), &tok, 0, 10, Some(&chat))
            .err()
            .unwrap();
        assert!(e.contains("the chat template 14"), "{e}");
    }
}
