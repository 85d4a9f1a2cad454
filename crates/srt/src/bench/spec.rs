//! What a benchmark run is asked to do: the recipe's `benchmark:` after defaults, carried
//! by the launch plan's `benchmark` resource (and so recorded in state, where `srt bench`
//! reads it back).

use serde::{Deserialize, Serialize};

/// The parameters of one benchmark run (every level).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Spec {
    /// Public base URL (may hold placeholders such as `<node0-ip>`).
    pub url: String,
    /// Model name sent in requests (the served name).
    pub model: String,
    /// Where the tokenizer is: a `tokenizer.json` file, a model directory holding one, or
    /// a Hugging Face id found in the local hub cache.
    pub tokenizer: String,
    /// The API the requests go to.
    pub endpoint: Endpoint,
    /// Where prompts come from.
    pub dataset: Dataset,
    /// Wrap random prompts in the model's chat template (srtctl's `use_chat_template`,
    /// as sa-bench does it). Absent from specs written before it, and not written when
    /// false, so their hashes stay.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub use_chat_template: bool,
    /// The sa-bench tokenizer adapter that renders the chat in place of the model's
    /// template (srtctl's `custom_tokenizer`). Not written when absent, so the hashes of
    /// specs without one stay.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub custom_tokenizer: Option<super::AdapterChat>,
    /// Levels run one after the other: each is the most requests in flight at once
    /// (`max_concurrency`).
    pub concurrencies: Vec<u32>,
    /// Requests measured per level, as a multiple of the level (`num_prompts_mult`).
    pub num_prompts_mult: u32,
    /// Warm-up requests sent before each level, as a multiple of the level, not
    /// counted (`num_warmup_mult`).
    pub num_warmup_mult: u32,
    /// Arrival rate of requests within a level.
    pub request_rate: Rate,
    /// The longest the run may take, in seconds: it stops with an error past it.
    #[serde(default = "default_max_duration")]
    pub max_duration_seconds: u64,
    /// The most measured requests that may fail, as a fraction of them, for the run to
    /// pass ([`super::Invalid`]).
    #[serde(default = "default_max_failed_fraction")]
    pub max_failed_fraction: f64,
    /// Ask the server to ignore end-of-sequence tokens, so every request produces its
    /// requested output length.
    pub ignore_eos: bool,
    /// Seed of every random choice (prompt tokens, lengths, arrival times).
    pub seed: u64,
    /// Percentiles reported for TTFT, TPOT, ITL and E2EL (besides mean, median, std).
    pub percentiles: Vec<f64>,
    /// Service-level objectives for goodput, in milliseconds.
    pub goodput: Slo,
    /// The decode workers slowed down at the start of each measured level (srtctl's
    /// `slow_down_*`). Not written when absent, so the hashes of specs without one stay.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub slow_down: Option<Box<super::SlowDown>>,
}

/// The OpenAI API a benchmark sends to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Endpoint {
    /// `POST /v1/completions` with `prompt` (vLLM's `--backend openai`).
    #[serde(rename = "/v1/completions")]
    Completions,
    /// `POST /v1/chat/completions` with one user message (`--backend openai-chat`).
    #[serde(rename = "/v1/chat/completions")]
    Chat,
}

impl Endpoint {
    /// The path.
    pub fn path(self) -> &'static str {
        match self {
            Endpoint::Completions => "/v1/completions",
            Endpoint::Chat => "/v1/chat/completions",
        }
    }

    /// vLLM's name for this request function (`--backend`).
    pub fn backend(self) -> &'static str {
        match self {
            Endpoint::Completions => "openai",
            Endpoint::Chat => "openai-chat",
        }
    }
}

/// Where prompts come from.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "name", rename_all = "snake_case")]
pub enum Dataset {
    /// Random token ids, decoded, of an exact token length (vLLM's `random` dataset).
    Random {
        /// Mean input length in tokens, special tokens the server adds included.
        isl: u32,
        /// Mean output length in tokens (`max_tokens`).
        osl: u32,
        /// Lengths are drawn uniformly from `[len x r, len]`, as sa-bench draws them.
        range_ratio: f64,
        /// Tokens of one random prefix shared by every request (on top of `isl`).
        prefix_len: u32,
    },
    /// Conversations of a ShareGPT-style JSON file: the first turn is the prompt, the
    /// second's token count the output length (unless `osl` is set).
    Sharegpt {
        /// The JSON file, read on the machine running srt.
        path: String,
        /// Output length for every request, instead of the second turn's.
        osl: Option<u32>,
    },
}

/// Request arrival rate.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Rate {
    /// Every request of a level is released at once (still limited by the level).
    Inf,
    /// A Poisson process of this many requests per second.
    PerSecond(f64),
}

impl Rate {
    /// `inf` or the number, as vLLM writes it in results.
    pub fn to_json(self) -> serde_json::Value {
        match self {
            Rate::Inf => serde_json::json!("inf"),
            Rate::PerSecond(r) => serde_json::json!(r),
        }
    }

    /// Parse `inf` or a positive number.
    pub fn parse(s: &str) -> Option<Rate> {
        let s = s.trim();
        if s.eq_ignore_ascii_case("inf") {
            return Some(Rate::Inf);
        }
        let r: f64 = s.parse().ok()?;
        if r.is_infinite() && r > 0.0 {
            Some(Rate::Inf)
        } else {
            (r.is_finite() && r > 0.0).then_some(Rate::PerSecond(r))
        }
    }
}

impl std::fmt::Display for Rate {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Rate::Inf => f.write_str("inf"),
            Rate::PerSecond(r) => write!(f, "{r}"),
        }
    }
}

impl Serialize for Rate {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Rate::Inf => s.serialize_str("inf"),
            Rate::PerSecond(r) => s.serialize_f64(*r),
        }
    }
}

impl<'de> Deserialize<'de> for Rate {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let v = serde_json::Value::deserialize(d)?;
        let parsed = match &v {
            serde_json::Value::String(s) => Rate::parse(s),
            serde_json::Value::Number(n) => n.as_f64().and_then(|r| Rate::parse(&r.to_string())),
            _ => None,
        };
        parsed.ok_or_else(|| serde::de::Error::custom(format!("not a request rate: {v}")))
    }
}

/// Goodput objectives (vLLM's `--goodput ttft:MS tpot:MS e2el:MS`): a request is good
/// when it meets every objective set.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Slo {
    /// Time to first token, ms.
    pub ttft_ms: Option<f64>,
    /// Time per output token after the first, ms.
    pub tpot_ms: Option<f64>,
    /// End-to-end latency, ms.
    pub e2el_ms: Option<f64>,
}

impl Slo {
    /// Whether any objective is set.
    pub fn is_set(&self) -> bool {
        self.ttft_ms.is_some() || self.tpot_ms.is_some() || self.e2el_ms.is_some()
    }
}

/// The bound of a run whose spec has none (saved before there was one): 4 h, the
/// recipe key's default (`benchmark.max_duration_seconds`).
pub const DEFAULT_MAX_DURATION_SECONDS: u64 = 4 * 3600;

fn default_max_duration() -> u64 {
    DEFAULT_MAX_DURATION_SECONDS
}

/// The failure threshold of a run whose spec has none (saved before there was one): the
/// recipe key's default (`benchmark.max_failed_fraction`).
pub const DEFAULT_MAX_FAILED_FRACTION: f64 = 0.05;

fn default_max_failed_fraction() -> f64 {
    DEFAULT_MAX_FAILED_FRACTION
}

/// The least time, in seconds, that sending `level x num_prompts_mult` requests per
/// level at `rate` takes: the arrivals of a level end at `n / rate` (the schedule is
/// scaled so, see [`super::schedule`]), levels run one after the other, warm-ups are
/// sent at once. None at an infinite rate.
pub fn least_seconds(concurrencies: &[u32], num_prompts_mult: u32, rate: Rate) -> f64 {
    let Rate::PerSecond(r) = rate else {
        return 0.0;
    };
    let requests: u64 = concurrencies
        .iter()
        .map(|&c| u64::from(c) * u64::from(num_prompts_mult))
        .sum();
    requests as f64 / r
}

impl Spec {
    /// The least time the run takes ([`least_seconds`]).
    pub fn least_seconds(&self) -> f64 {
        least_seconds(
            &self.concurrencies,
            self.num_prompts_mult,
            self.request_rate,
        )
    }

    /// Requests measured at `level`.
    pub fn prompts_at(&self, level: u32) -> usize {
        level as usize * self.num_prompts_mult as usize
    }

    /// Warm-up requests before `level`.
    pub fn warmups_at(&self, level: u32) -> usize {
        level as usize * self.num_warmup_mult as usize
    }

    /// The same run with the placeholders of its URLs (`<node0-ip>`) resolved: the
    /// public URL's and each slowed server's.
    pub fn resolved(&self, resolve: impl Fn(&str) -> String) -> Spec {
        Spec {
            url: resolve(&self.url),
            slow_down: self
                .slow_down
                .as_ref()
                .map(|s| Box::new(s.resolved(&resolve))),
            ..self.clone()
        }
    }

    /// After an interrupted run: the slow-down it sets turned off. Whether it has one,
    /// or why it is still on.
    pub async fn release(&self) -> Result<bool, String> {
        match &self.slow_down {
            Some(slow) => slow.release().await.map(|()| true),
            None => Ok(false),
        }
    }

    /// One line: what the run sends.
    pub fn describe(&self) -> String {
        let data = match &self.dataset {
            Dataset::Random {
                isl,
                osl,
                range_ratio,
                prefix_len,
            } => {
                let prefix = if *prefix_len > 0 {
                    format!(" + {prefix_len}-token shared prefix")
                } else {
                    String::new()
                };
                let chat = match (self.use_chat_template, self.custom_tokenizer) {
                    (false, _) => String::new(),
                    (true, None) => " in the model's chat template".into(),
                    (true, Some(a)) => format!(
                        " in the chat format of {} ({})",
                        a.adapter.class(),
                        a.mode()
                    ),
                };
                format!(
                    "random {isl}-token prompts{prefix}{chat} (range ratio {range_ratio}), {osl} output tokens"
                )
            }
            Dataset::Sharegpt { path, osl } => match osl {
                Some(o) => format!("ShareGPT prompts from {path}, {o} output tokens"),
                None => format!("ShareGPT prompts and output lengths from {path}"),
            },
        };
        let slowed = self.slow_down.as_ref().map_or(String::new(), |s| {
            format!(
                "; each level's first {} s with every forward pass of {} sleeping {} s (POST {})",
                s.wait_seconds,
                s.servers.join(", "),
                s.sleep_seconds,
                s.path
            )
        });
        format!(
            "POST {}{} (model {}, tokens of {}): {data}; concurrency {:?}, {} x level requests each after {} x level warm-up, request rate {}, seed {}{slowed}",
            self.url,
            self.endpoint.path(),
            self.model,
            self.tokenizer,
            self.concurrencies,
            self.num_prompts_mult,
            self.num_warmup_mult,
            self.request_rate,
            self.seed
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_parse_and_round_trip() {
        assert_eq!(Rate::parse("inf"), Some(Rate::Inf));
        assert_eq!(Rate::parse("INF"), Some(Rate::Inf));
        assert_eq!(Rate::parse("2.5"), Some(Rate::PerSecond(2.5)));
        assert_eq!(Rate::parse("0"), None);
        assert_eq!(Rate::parse("-1"), None);
        assert_eq!(Rate::parse("nan"), None);
        for r in [Rate::Inf, Rate::PerSecond(4.0)] {
            let v = serde_json::to_value(r).unwrap();
            assert_eq!(serde_json::from_value::<Rate>(v).unwrap(), r);
        }
    }
}
