//! One streamed request, timed as vLLM's `async_request_openai_completions` and
//! `async_request_openai_chat_completions` time it: server-sent events are split on
//! blank lines, every `data:` payload holding a non-empty `choices` is a token chunk (the
//! first sets TTFT, each later one adds an ITL gap), and the `usage` chunk gives the
//! prompt and completion token counts.

use super::dataset::Request;
use super::metrics::Output;
use super::spec::Endpoint;
use futures::StreamExt;
use std::time::Instant;

/// What a request carries besides its prompt.
pub(super) struct Target {
    /// `<base url><endpoint path>`.
    pub url: String,
    /// Model name.
    pub model: String,
    /// The API.
    pub endpoint: Endpoint,
    /// `ignore_eos`.
    pub ignore_eos: bool,
}

/// The JSON body of `req` for `endpoint` (the fields vLLM's client sends).
pub(super) fn body(t: &Target, req: &Request) -> serde_json::Value {
    let mut b = match t.endpoint {
        Endpoint::Completions => serde_json::json!({
            "model": t.model,
            "prompt": req.prompt,
            "repetition_penalty": 1.0,
            "max_tokens": req.output_len,
            "logprobs": null,
            "stream": true,
            "stream_options": {"include_usage": true},
        }),
        Endpoint::Chat => serde_json::json!({
            "model": t.model,
            "messages": [{"role": "user", "content": [{"type": "text", "text": req.prompt}]}],
            "max_completion_tokens": req.output_len,
            "stream": true,
            "stream_options": {"include_usage": true},
        }),
    };
    if t.ignore_eos {
        b["ignore_eos"] = serde_json::json!(true);
    }
    b
}

/// Splits a byte stream into SSE messages (`data: ...` blocks between blank lines).
#[derive(Default)]
pub(super) struct SseSplitter {
    buf: Vec<u8>,
}

impl SseSplitter {
    /// Feed bytes; returns the complete messages they finish, trimmed.
    pub(super) fn push(&mut self, bytes: &[u8]) -> Vec<String> {
        self.buf.extend_from_slice(bytes);
        let mut out = Vec::new();
        loop {
            let lf = self
                .buf
                .windows(2)
                .position(|w| w == b"\n\n")
                .map(|p| (p, 2));
            let crlf = self
                .buf
                .windows(4)
                .position(|w| w == b"\r\n\r\n")
                .map(|p| (p, 4));
            let pos = match (lf, crlf) {
                (Some(a), Some(b)) => Some(if b.0 < a.0 { b } else { a }),
                (a, b) => a.or(b),
            };
            let Some((p, sep)) = pos else { break };
            let msg: Vec<u8> = self.buf.drain(..p + sep).take(p).collect();
            let msg = String::from_utf8_lossy(&msg).trim().to_string();
            if !msg.is_empty() {
                out.push(msg);
            }
        }
        out
    }

    /// What is left when the stream ends (a last message without its blank line).
    pub(super) fn finish(&mut self) -> Option<String> {
        let rest = String::from_utf8_lossy(&std::mem::take(&mut self.buf))
            .trim()
            .to_string();
        (!rest.is_empty()).then_some(rest)
    }
}

/// Folds SSE messages into an [`Output`], timing each one at `now` (seconds after
/// sending).
#[derive(Default)]
pub(super) struct StreamTimer {
    /// The result so far.
    pub out: Output,
    first: bool,
    last: f64,
}

impl StreamTimer {
    /// One message received `at` seconds after the request was sent.
    pub(super) fn message(&mut self, endpoint: Endpoint, msg: &str, at: f64) -> Result<(), String> {
        if msg.starts_with(':') {
            return Ok(());
        }
        // A message may hold several lines; its data is the `data:` lines joined.
        let data: Vec<&str> = msg
            .lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .map(str::trim_start)
            .collect();
        if data.is_empty() {
            return Ok(());
        }
        let data = data.join("\n");
        if data == "[DONE]" {
            return Ok(());
        }
        let v: serde_json::Value =
            serde_json::from_str(&data).map_err(|e| format!("bad chunk `{data}`: {e}"))?;
        let choices = v
            .get("choices")
            .and_then(|c| c.as_array())
            .filter(|c| !c.is_empty());
        if let Some(choices) = choices {
            let text = match endpoint {
                Endpoint::Completions => choices[0].get("text"),
                Endpoint::Chat => choices[0].pointer("/delta/content"),
            }
            .and_then(|t| t.as_str())
            .unwrap_or("");
            if !self.first {
                self.first = true;
                self.out.ttft = at;
            } else {
                self.out.itl.push(at - self.last);
            }
            self.last = at;
            self.out.generated_text.push_str(text);
        } else if let Some(usage) = v.get("usage").filter(|u| u.is_object()) {
            self.out.output_tokens = usage
                .get("completion_tokens")
                .and_then(serde_json::Value::as_u64)
                .map(|n| n as u32);
            self.out.server_prompt_tokens = usage
                .get("prompt_tokens")
                .and_then(serde_json::Value::as_u64)
                .map(|n| n as u32);
        }
        Ok(())
    }

    /// The stream ended: success needs a token chunk; latency is the last one's time.
    pub(super) fn finish(mut self) -> Output {
        if self.first {
            self.out.success = true;
            self.out.latency = self.last;
        } else if self.out.error.is_empty() {
            self.out.error = "Never received a valid chunk to calculate TTFT.".into();
        }
        self.out
    }
}

/// Send `req` and time its stream from the moment it is sent.
pub(super) async fn send(
    client: &reqwest::Client,
    t: &Target,
    req: &Request,
    request_id: &str,
) -> Output {
    let started = Instant::now();
    let mut timer = StreamTimer::default();
    timer.out.prompt_len = req.prompt_len;
    let resp = client
        .post(&t.url)
        .header("x-request-id", request_id)
        .json(&body(t, req))
        .send()
        .await;
    let resp = match resp {
        Ok(r) => r,
        Err(e) => {
            timer.out.error = super::error_text(&e);
            return timer.finish();
        }
    };
    if !resp.status().is_success() {
        let status = resp.status();
        let text = resp.text().await.unwrap_or_default();
        timer.out.error = format!("{status} {}", text.trim());
        return timer.finish();
    }
    let mut split = SseSplitter::default();
    let mut bytes = resp.bytes_stream();
    while let Some(chunk) = bytes.next().await {
        let chunk = match chunk {
            Ok(c) => c,
            Err(e) => {
                timer.out.error = super::error_text(&e);
                timer.first = false;
                return timer.finish();
            }
        };
        let at = started.elapsed().as_secs_f64();
        for msg in split.push(&chunk) {
            if let Err(e) = timer.message(t.endpoint, &msg, at) {
                timer.out.error = e;
                timer.first = false;
                return timer.finish();
            }
        }
    }
    if let Some(msg) = split.finish() {
        let at = started.elapsed().as_secs_f64();
        if let Err(e) = timer.message(t.endpoint, &msg, at) {
            timer.out.error = e;
            timer.first = false;
        }
    }
    timer.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splitter_handles_messages_cut_anywhere() {
        let text = "data: {\"a\":1}\n\ndata: {\"b\":2}\r\n\r\n: ping\n\ndata: [DONE]";
        let bytes = text.as_bytes();
        for cut in 0..bytes.len() {
            let mut s = SseSplitter::default();
            let mut got = s.push(&bytes[..cut]);
            got.extend(s.push(&bytes[cut..]));
            got.extend(s.finish());
            assert_eq!(
                got,
                [
                    "data: {\"a\":1}",
                    "data: {\"b\":2}",
                    ": ping",
                    "data: [DONE]"
                ],
                "cut at {cut}"
            );
        }
    }

    /// A completions stream by hand: tokens at 0.1, 0.3, 0.35 s, a usage chunk at 0.4 s
    /// (ignored for timing), `[DONE]`.
    #[test]
    fn completion_stream_timing() {
        let mut t = StreamTimer::default();
        t.out.prompt_len = 7;
        let ep = Endpoint::Completions;
        t.message(ep, r#"data: {"choices": [{"text": " a"}]}"#, 0.1)
            .unwrap();
        t.message(ep, ": keep-alive", 0.2).unwrap();
        t.message(ep, r#"data: {"choices": [{"text": " b"}]}"#, 0.3)
            .unwrap();
        t.message(ep, r#"data: {"choices": [{"text": ""}]}"#, 0.35)
            .unwrap();
        t.message(
            ep,
            r#"data: {"choices": [], "usage": {"prompt_tokens": 9, "completion_tokens": 3}}"#,
            0.4,
        )
        .unwrap();
        t.message(ep, "data: [DONE]", 0.41).unwrap();
        let o = t.finish();
        assert!(o.success);
        assert_eq!(o.ttft, 0.1);
        assert_eq!(o.itl.len(), 2);
        assert!((o.itl[0] - 0.2).abs() < 1e-12 && (o.itl[1] - 0.05).abs() < 1e-12);
        assert_eq!(o.latency, 0.35);
        // The client's prompt length stays the input count; the server's is kept beside.
        assert_eq!(
            (o.prompt_len, o.server_prompt_tokens, o.output_tokens),
            (7, Some(9), Some(3))
        );
        assert_eq!(o.generated_text, " a b");
    }

    #[test]
    fn chat_role_chunk_counts_as_first() {
        let mut t = StreamTimer::default();
        let ep = Endpoint::Chat;
        t.message(
            ep,
            r#"data: {"choices": [{"delta": {"role": "assistant", "content": ""}}]}"#,
            0.2,
        )
        .unwrap();
        t.message(
            ep,
            r#"data: {"choices": [{"delta": {"content": "hi"}}]}"#,
            0.25,
        )
        .unwrap();
        let o = t.finish();
        assert_eq!(
            (o.ttft, o.latency, o.generated_text.as_str()),
            (0.2, 0.25, "hi")
        );
    }

    #[test]
    fn a_stream_without_tokens_failed() {
        let mut t = StreamTimer::default();
        t.message(Endpoint::Completions, "data: [DONE]", 0.1)
            .unwrap();
        let o = t.finish();
        assert!(!o.success && o.error.contains("TTFT"));
        let mut t = StreamTimer::default();
        assert!(t
            .message(Endpoint::Completions, "data: {not json", 0.1)
            .is_err());
    }

    #[test]
    fn bodies_match_vllms_client() {
        let req = Request {
            prompt: "p".into(),
            prompt_len: 2,
            output_len: 5,
        };
        let t = Target {
            url: "u".into(),
            model: "m".into(),
            endpoint: Endpoint::Completions,
            ignore_eos: true,
        };
        let b = body(&t, &req);
        assert_eq!(b["max_tokens"], 5);
        assert_eq!(b["stream_options"]["include_usage"], true);
        assert_eq!(b["ignore_eos"], true);
        let t = Target {
            endpoint: Endpoint::Chat,
            ignore_eos: false,
            ..t
        };
        let b = body(&t, &req);
        assert_eq!(b["max_completion_tokens"], 5);
        assert_eq!(b["messages"][0]["content"][0]["text"], "p");
        assert!(b.get("ignore_eos").is_none());
    }
}
