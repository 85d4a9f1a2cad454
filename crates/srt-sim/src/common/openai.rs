//! OpenAI-shaped answers (`/v1/completions`, `/v1/chat/completions`), as one JSON body or
//! as SSE chunks, one frame per generated token. What differs between engines (the keys
//! after `finish_reason`, the chat message, the usage object) is the engine's
//! [`Dialect`]; what a reply carries besides the choices is the engine's too
//! ([`Reply::tail`], [`Reply::last_chunk`]).

use serde_json::{json, Map, Value};

use super::text::Api;

/// How one engine shapes the parts of an OpenAI answer every engine has.
pub(crate) trait Dialect: Sync {
    /// The keys after `finish_reason` in a choice (`full`: of a whole answer, else of a
    /// streamed chunk).
    fn choice_tail(&self, api: Api, full: bool) -> Map<String, Value>;
    /// The assistant message of a whole chat answer.
    fn message(&self, text: String) -> Value;
    /// A chat stream's first choice, announcing the role.
    fn role_choice(&self, index: usize) -> Value;
    /// The delta of a chat chunk carrying one token.
    fn token_delta(&self, token: &str) -> Value;
    /// The `usage` object.
    fn usage(&self, prompt_tokens: u64, completion_tokens: u64) -> Value;
}

/// A generated reply, renderable as one JSON body or as SSE chunks.
pub(crate) struct Reply {
    /// The engine's shapes.
    pub dialect: &'static dyn Dialect,
    /// The API asked.
    pub api: Api,
    /// The answer's `id`.
    pub id: String,
    /// The model name reported.
    pub model: String,
    /// `created`, seconds since the epoch.
    pub created: u64,
    /// Prompt tokens, for `usage`.
    pub prompt_tokens: u64,
    /// Each choice's tokens.
    pub choices: Vec<Vec<String>>,
    /// Keys after `usage` in a whole answer, in order (the `srt_sim` object among them).
    pub tail: Map<String, Value>,
    /// Keys added to the chunk carrying a choice's last token.
    pub last_chunk: Map<String, Value>,
}

impl Reply {
    fn usage(&self) -> Value {
        let completion: u64 = self.choices.iter().map(|c| c.len() as u64).sum();
        self.dialect.usage(self.prompt_tokens, completion)
    }

    fn choice(&self, mut choice: Map<String, Value>, full: bool) -> Value {
        choice.extend(self.dialect.choice_tail(self.api, full));
        Value::Object(choice)
    }

    /// The whole answer.
    pub(crate) fn full(&self) -> Value {
        let choices: Vec<Value> = self
            .choices
            .iter()
            .enumerate()
            .map(|(i, toks)| {
                let text = toks.concat();
                let head = match self.api {
                    Api::Completions => json!({
                        "index": i, "text": text, "logprobs": null, "finish_reason": "length",
                    }),
                    Api::Chat => json!({
                        "index": i, "message": self.dialect.message(text),
                        "logprobs": null, "finish_reason": "length",
                    }),
                };
                self.choice(object(head), true)
            })
            .collect();
        let mut out = object(json!({
            "id": self.id,
            "object": match self.api { Api::Completions => "text_completion", Api::Chat => "chat.completion" },
            "created": self.created,
            "model": self.model,
            "choices": choices,
            "usage": self.usage(),
        }));
        out.extend(self.tail.clone());
        Value::Object(out)
    }

    fn chunk(&self, choices: Value) -> Value {
        json!({
            "id": self.id,
            "object": match self.api { Api::Completions => "text_completion", Api::Chat => "chat.completion.chunk" },
            "created": self.created,
            "model": self.model,
            "choices": choices,
        })
    }

    /// The SSE body, one frame per generated token (each choice's token at that index;
    /// a chat's role chunk with the first; the usage chunk and `[DONE]` with the last).
    pub(crate) fn sse_frames(&self, include_usage: bool) -> Vec<String> {
        let n = self.choices.iter().map(Vec::len).max().unwrap_or(0).max(1);
        let mut frames = vec![String::new(); n];
        for (t, frame) in frames.iter_mut().enumerate() {
            for (i, toks) in self.choices.iter().enumerate() {
                let Some(tok) = toks.get(t) else { continue };
                if t == 0 && self.api == Api::Chat {
                    push_event(frame, &self.chunk(json!([self.dialect.role_choice(i)])));
                }
                let last = t + 1 == toks.len();
                let finish = if last { json!("length") } else { Value::Null };
                let head = match self.api {
                    Api::Completions => json!({
                        "index": i, "text": tok, "logprobs": null, "finish_reason": finish,
                    }),
                    Api::Chat => json!({
                        "index": i, "delta": self.dialect.token_delta(tok),
                        "logprobs": null, "finish_reason": finish,
                    }),
                };
                let mut ev = self.chunk(json!([self.choice(object(head), false)]));
                if last {
                    if let Value::Object(m) = &mut ev {
                        m.extend(self.last_chunk.clone());
                    }
                }
                push_event(frame, &ev);
            }
        }
        let last = frames.last_mut().expect("at least one frame");
        if include_usage {
            let mut ev = self.chunk(json!([]));
            ev["usage"] = self.usage();
            push_event(last, &ev);
        }
        last.push_str(SSE_DONE);
        frames
    }
}

/// A two-token chat reply to "p" in `dialect`'s shapes, for tests of a dialect.
#[cfg(test)]
pub(crate) fn sample(dialect: &'static dyn Dialect, api: Api) -> Reply {
    Reply {
        dialect,
        api,
        id: "id-x".into(),
        model: "m".into(),
        created: 1,
        prompt_tokens: 2,
        choices: vec![super::text::tokens("p", 0, 2)],
        tail: Map::new(),
        last_chunk: Map::new(),
    }
}

/// The event that ends every stream.
pub(crate) const SSE_DONE: &str = "data: [DONE]\n\n";

/// Appends one SSE event carrying `ev`.
pub(crate) fn push_event(frame: &mut String, ev: &Value) {
    frame.push_str(&format!("data: {ev}\n\n"));
}

fn object(v: Value) -> Map<String, Value> {
    match v {
        Value::Object(m) => m,
        _ => Map::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::common::text::tokens;

    struct Plain;

    impl Dialect for Plain {
        fn choice_tail(&self, _: Api, _: bool) -> Map<String, Value> {
            object(json!({"stop_reason": null}))
        }
        fn message(&self, text: String) -> Value {
            json!({"role": "assistant", "content": text})
        }
        fn role_choice(&self, index: usize) -> Value {
            json!({"index": index, "delta": {"role": "assistant"}})
        }
        fn token_delta(&self, token: &str) -> Value {
            json!({"content": token})
        }
        fn usage(&self, p: u64, c: u64) -> Value {
            json!({"prompt_tokens": p, "completion_tokens": c})
        }
    }

    #[test]
    fn sse_shape() {
        let r = Reply {
            dialect: &Plain,
            api: Api::Completions,
            id: "cmpl-x".into(),
            model: "m".into(),
            created: 1,
            prompt_tokens: 2,
            choices: vec![tokens("p", 0, 3)],
            tail: Map::new(),
            last_chunk: object(json!({"srt_sim": {"stage": "agg"}})),
        };
        let frames = r.sse_frames(true);
        assert_eq!(frames.len(), 3, "one frame per token");
        let chunks: Vec<&str> = frames
            .iter()
            .flat_map(|f| f.split_terminator("\n\n"))
            .collect();
        assert_eq!(chunks.len(), 5);
        assert_eq!(*chunks.last().unwrap(), "data: [DONE]");
        assert!(frames[2].ends_with("data: [DONE]\n\n"));
        let last_tok: Value =
            serde_json::from_str(chunks[2].trim_start_matches("data: ").trim()).unwrap();
        assert_eq!(last_tok["choices"][0]["finish_reason"], "length");
        assert_eq!(last_tok["choices"][0]["stop_reason"], Value::Null);
        assert_eq!(last_tok["srt_sim"]["stage"], "agg");
        let usage: Value =
            serde_json::from_str(chunks[3].trim_start_matches("data: ").trim()).unwrap();
        assert_eq!(usage["usage"]["completion_tokens"], 3);
    }
}
