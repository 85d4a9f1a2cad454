//! The arithmetic of `vllm bench serve` (`calculate_metrics` in
//! `vllm/benchmarks/serve.py`), applied to the streams of one level: the same
//! definitions, so figures compare with vLLM's.
//!
//! - **TTFT**: from sending the request to the first chunk that carries a choice.
//! - **ITL**: the gaps between consecutive such chunks, pooled over every request.
//! - **TPOT**: per request, `(latency - ttft) / (output tokens - 1)`, for requests with
//!   more than one output token.
//! - **E2EL**: from sending to the last chunk that carries a choice.
//! - Throughputs divide by the level's duration (first send to last answer): completed
//!   requests, output tokens, input + output tokens.
//! - Statistics are numpy's: mean, median, population standard deviation, and
//!   percentiles by linear interpolation; an empty list counts as `[0]`.

use super::spec::Slo;

/// What one request's stream showed (vLLM's `RequestFuncOutput`).
#[derive(Clone, Debug, Default, PartialEq)]
pub(super) struct Output {
    /// A `200` with at least one choice chunk.
    pub success: bool,
    /// Time to the first choice chunk, s.
    pub ttft: f64,
    /// Gaps between choice chunks, s.
    pub itl: Vec<f64>,
    /// Time to the last choice chunk, s.
    pub latency: f64,
    /// Prompt tokens as the client counted them with the model's tokenizer (as
    /// `vllm bench serve` counts input tokens).
    pub prompt_len: u32,
    /// The server's `usage.prompt_tokens`, when it sent usage.
    pub server_prompt_tokens: Option<u32>,
    /// `usage.completion_tokens`, when the server sent usage.
    pub output_tokens: Option<u32>,
    /// The text received.
    pub generated_text: String,
    /// When the request was sent, s after the level started.
    pub start_time: f64,
    /// Time spent waiting for a concurrency slot, s.
    pub queue_time: f64,
    /// Why it failed.
    pub error: String,
}

/// Mean, median, standard deviation and chosen percentiles of one metric, in ms.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Stats {
    /// Mean.
    pub mean: f64,
    /// Median.
    pub median: f64,
    /// Population standard deviation.
    pub std: f64,
    /// `(percentile, value)` pairs, in the order asked.
    pub percentiles: Vec<(f64, f64)>,
}

impl Stats {
    /// Statistics of `values_s` (seconds), reported in milliseconds.
    pub fn of(values_s: &[f64], percentiles: &[f64]) -> Stats {
        let mut sorted: Vec<f64> = if values_s.is_empty() {
            vec![0.0]
        } else {
            values_s.to_vec()
        };
        sorted.sort_by(f64::total_cmp);
        let n = sorted.len() as f64;
        let mean = sorted.iter().sum::<f64>() / n;
        let var = sorted.iter().map(|v| (v - mean) * (v - mean)).sum::<f64>() / n;
        Stats {
            mean: mean * 1000.0,
            median: percentile(&sorted, 50.0) * 1000.0,
            std: var.sqrt() * 1000.0,
            percentiles: percentiles
                .iter()
                .map(|&p| (p, percentile(&sorted, p) * 1000.0))
                .collect(),
        }
    }

    /// The value at percentile `p`, if it was asked for.
    pub fn at(&self, p: f64) -> Option<f64> {
        self.percentiles
            .iter()
            .find(|(q, _)| (*q - p).abs() < 1e-9)
            .map(|(_, v)| *v)
    }
}

/// numpy's default percentile (linear interpolation between closest ranks) of sorted,
/// non-empty values.
pub(super) fn percentile(sorted: &[f64], p: f64) -> f64 {
    let rank = (p / 100.0).clamp(0.0, 1.0) * (sorted.len() - 1) as f64;
    let lo = rank.floor() as usize;
    let hi = rank.ceil() as usize;
    sorted[lo] + (sorted[hi] - sorted[lo]) * (rank - lo as f64)
}

/// The figures of one level (vLLM's `BenchmarkMetrics`).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Metrics {
    /// Successful requests.
    pub completed: usize,
    /// Failed requests.
    pub failed: usize,
    /// Prompt tokens of successful requests, as the client counted them.
    pub total_input: u64,
    /// `usage.prompt_tokens` summed over the successful requests whose server sent it;
    /// `None` when none did.
    pub total_input_server: Option<u64>,
    /// Output tokens of successful requests.
    pub total_output: u64,
    /// Completed requests per second.
    pub request_throughput: f64,
    /// Requests per second that met every objective (when objectives are set).
    pub request_goodput: Option<f64>,
    /// Output tokens per second.
    pub output_throughput: f64,
    /// Input and output tokens per second.
    pub total_token_throughput: f64,
    /// Time to first token.
    pub ttft: Stats,
    /// Time per output token, first excluded.
    pub tpot: Stats,
    /// Inter-token latency.
    pub itl: Stats,
    /// End-to-end latency.
    pub e2el: Stats,
    /// Most output tokens received within one second of the level.
    pub max_output_tokens_per_s: f64,
    /// Most requests in flight during one second of the level.
    pub max_concurrent_requests: u64,
    /// Output tokens per request (0 for failed ones), in request order.
    pub output_lens: Vec<u32>,
}

/// Compute a level's figures. `duration_s` is the level's wall time; `count` counts the
/// tokens of a generated text when the server sent no usage.
pub(super) fn calculate(
    outputs: &[Output],
    duration_s: f64,
    percentiles: &[f64],
    slo: &Slo,
    count: &dyn Fn(&str) -> u32,
) -> Metrics {
    let mut m = Metrics::default();
    let (mut ttfts, mut tpots, mut all_tpots, mut itls, mut e2els) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for o in outputs {
        if !o.success {
            m.output_lens.push(0);
            m.failed += 1;
            continue;
        }
        let out_len = match o.output_tokens {
            Some(n) if n > 0 => n,
            _ => count(&o.generated_text),
        };
        m.output_lens.push(out_len);
        m.total_input += u64::from(o.prompt_len);
        if let Some(n) = o.server_prompt_tokens {
            *m.total_input_server.get_or_insert(0) += u64::from(n);
        }
        let mut tpot = 0.0;
        if out_len > 1 {
            tpot = (o.latency - o.ttft) / f64::from(out_len - 1);
            tpots.push(tpot);
        }
        all_tpots.push(tpot);
        itls.extend_from_slice(&o.itl);
        ttfts.push(o.ttft);
        e2els.push(o.latency);
        m.completed += 1;
    }
    m.total_output = m.output_lens.iter().map(|&n| u64::from(n)).sum();
    let dur = duration_s.max(f64::MIN_POSITIVE);
    m.request_throughput = m.completed as f64 / dur;
    m.output_throughput = m.total_output as f64 / dur;
    m.total_token_throughput = (m.total_input + m.total_output) as f64 / dur;
    if slo.is_set() {
        let ok = |v: f64, limit: Option<f64>| limit.is_none_or(|l| l / 1000.0 >= v);
        let good = (0..ttfts.len())
            .filter(|&i| {
                ok(ttfts[i], slo.ttft_ms)
                    && ok(all_tpots[i], slo.tpot_ms)
                    && ok(e2els[i], slo.e2el_ms)
            })
            .count();
        m.request_goodput = Some(good as f64 / dur);
    }
    m.ttft = Stats::of(&ttfts, percentiles);
    m.tpot = Stats::of(&tpots, percentiles);
    m.itl = Stats::of(&itls, percentiles);
    m.e2el = Stats::of(&e2els, percentiles);
    let (tok, conc) = peaks(outputs);
    m.max_output_tokens_per_s = tok;
    m.max_concurrent_requests = conc;
    m
}

/// Why a run's figures prove nothing about the deployment ([`judge`]).
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum Invalid {
    /// More measured requests failed than `benchmark.max_failed_fraction` allows.
    #[error(
        "{failed}/{total} measured requests failed (fraction {:.4}), more than `benchmark.max_failed_fraction` allows ({threshold}); first error: {first_error}",
        *failed as f64 / *total as f64
    )]
    TooManyFailed {
        /// Failed requests, over every level.
        failed: usize,
        /// Measured requests, over every level.
        total: usize,
        /// `benchmark.max_failed_fraction`.
        threshold: f64,
        /// The first error seen.
        first_error: String,
    },
    /// The requests that succeeded brought no output token back.
    #[error("no output token came back from {total} measured requests ({failed} of them failed): the server answered without generating anything")]
    NoOutput {
        /// Failed requests, over every level.
        failed: usize,
        /// Measured requests, over every level.
        total: usize,
    },
}

/// Whether a run's totals over every level make a benchmark: some output token came
/// back, and at most `max_failed_fraction` of the `total` measured requests failed (a
/// fraction at the threshold passes).
pub(super) fn judge(
    failed: usize,
    total: usize,
    output_tokens: u64,
    max_failed_fraction: f64,
    first_error: Option<&str>,
) -> Result<(), Invalid> {
    if failed > 0 && failed as f64 > max_failed_fraction * total as f64 {
        return Err(Invalid::TooManyFailed {
            failed,
            total,
            threshold: max_failed_fraction,
            first_error: first_error.unwrap_or("no detail").to_string(),
        });
    }
    if output_tokens == 0 {
        return Err(Invalid::NoOutput { failed, total });
    }
    Ok(())
}

/// vLLM's peaks: output tokens received and requests in flight per one-second bucket
/// from the first successful send.
fn peaks(outputs: &[Output]) -> (f64, u64) {
    let ok: Vec<&Output> = outputs.iter().filter(|o| o.success).collect();
    if ok.is_empty() {
        return (0.0, 0);
    }
    let start = ok
        .iter()
        .map(|o| o.start_time)
        .fold(f64::INFINITY, f64::min);
    let end = ok
        .iter()
        .map(|o| o.start_time + o.latency)
        .fold(f64::NEG_INFINITY, f64::max);
    let buckets = (end - start).ceil() as usize + 1;
    let mut tokens = vec![0u64; buckets];
    let mut running = vec![0u64; buckets];
    for o in ok {
        let mut t = o.start_time + o.ttft;
        let mut times = vec![t];
        for gap in &o.itl {
            t += gap;
            times.push(t);
        }
        for t in times {
            let b = (t - start) as i64;
            if b >= 0 && (b as usize) < buckets {
                tokens[b as usize] += 1;
            }
        }
        let first = (o.start_time - start) as usize;
        let last = (o.start_time + o.latency - start) as usize;
        for s in running
            .iter_mut()
            .take(last.min(buckets - 1) + 1)
            .skip(first)
        {
            *s += 1;
        }
    }
    (
        tokens.iter().copied().max().unwrap_or(0) as f64,
        running.iter().copied().max().unwrap_or(0),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) {
        assert!((a - b).abs() < 1e-9, "{a} != {b}");
    }

    /// A stream: sent at `start`, chunks at the given times after sending.
    fn stream(start: f64, chunks: &[f64], prompt: u32, usage: Option<u32>) -> Output {
        Output {
            success: true,
            ttft: chunks[0],
            itl: chunks.windows(2).map(|w| w[1] - w[0]).collect(),
            latency: *chunks.last().unwrap(),
            prompt_len: prompt,
            output_tokens: usage,
            generated_text: " a".repeat(chunks.len()),
            start_time: start,
            ..Output::default()
        }
    }

    #[test]
    fn numpy_percentiles() {
        let v = [1.0, 2.0, 3.0, 4.0];
        close(percentile(&v, 50.0), 2.5);
        close(percentile(&v, 90.0), 3.7);
        close(percentile(&v, 99.0), 3.97);
        close(percentile(&v, 0.0), 1.0);
        close(percentile(&v, 100.0), 4.0);
        close(percentile(&[5.0], 99.0), 5.0);
        let s = Stats::of(&[0.001, 0.002, 0.003, 0.004], &[90.0]);
        close(s.mean, 2.5);
        close(s.median, 2.5);
        close(s.std, 1.118_033_988_749_895);
        close(s.at(90.0).unwrap(), 3.7);
        assert_eq!(s.at(99.0), None);
        // numpy over `[] or 0`.
        assert_eq!(
            Stats::of(&[], &[99.0]),
            Stats {
                percentiles: vec![(99.0, 0.0)],
                ..Stats::default()
            }
        );
    }

    /// Two requests worked by hand:
    /// A sent at 0.0, chunks at 0.10, 0.15, 0.20, 0.30 s (4 tokens, usage 4, 10 prompt);
    /// B sent at 0.5, chunks at 0.20, 0.22 s (2 tokens, no usage: counted from text, 20
    /// prompt); C failed. Duration 1.0 s.
    #[test]
    fn hand_computed_level() {
        let a = Output {
            server_prompt_tokens: Some(11),
            ..stream(0.0, &[0.10, 0.15, 0.20, 0.30], 10, Some(4))
        };
        let b = stream(0.5, &[0.20, 0.22], 20, None);
        let c = Output {
            error: "500 Internal Server Error".into(),
            server_prompt_tokens: Some(5),
            ..Output::default()
        };
        let count = |t: &str| t.split_whitespace().count() as u32;
        let slo = Slo {
            ttft_ms: Some(150.0),
            tpot_ms: None,
            e2el_ms: None,
        };
        let m = calculate(&[a, b, c], 1.0, &[50.0, 99.0], &slo, &count);
        assert_eq!((m.completed, m.failed), (1 + 1, 1));
        assert_eq!((m.total_input, m.total_output), (30, 6));
        // The server's count of A only (B sent no usage, C failed).
        assert_eq!(m.total_input_server, Some(11));
        assert_eq!(m.output_lens, vec![4, 2, 0]);
        close(m.request_throughput, 2.0);
        close(m.output_throughput, 6.0);
        close(m.total_token_throughput, 36.0);
        // Only A has TTFT <= 150 ms.
        close(m.request_goodput.unwrap(), 1.0);
        // TTFT: 100, 200 ms.
        close(m.ttft.mean, 150.0);
        close(m.ttft.median, 150.0);
        close(m.ttft.std, 50.0);
        close(m.ttft.at(99.0).unwrap(), 199.0);
        // TPOT: A (0.30 - 0.10) / 3, B (0.22 - 0.20) / 1.
        close(m.tpot.mean, (200.0 / 3.0 + 20.0) / 2.0);
        // ITL pooled: 50, 50, 100 (A), 20 (B) ms.
        close(m.itl.mean, 55.0);
        close(m.itl.median, 50.0);
        close(m.itl.at(50.0).unwrap(), 50.0);
        close(m.itl.at(99.0).unwrap(), 100.0 - 0.03 * 50.0);
        // E2EL: 300, 220 ms.
        close(m.e2el.mean, 260.0);
        // Buckets from 0.0: A's tokens all in second 0, B's at 0.70 and 0.72, second 0.
        close(m.max_output_tokens_per_s, 6.0);
        assert_eq!(m.max_concurrent_requests, 2);
    }

    #[test]
    fn goodput_counts_tpot_of_single_token_requests_as_zero() {
        let one = stream(0.0, &[0.5], 3, Some(1));
        let slow = stream(0.0, &[0.1, 0.5], 3, Some(2));
        let slo = Slo {
            ttft_ms: None,
            tpot_ms: Some(100.0),
            e2el_ms: Some(1000.0),
        };
        let m = calculate(&[one, slow], 2.0, &[99.0], &slo, &|_| 0);
        // `one` is good (TPOT 0); `slow` has TPOT 400 ms.
        close(m.request_goodput.unwrap(), 0.5);
        // TPOT statistics skip single-token requests.
        close(m.tpot.mean, 400.0);
        assert_eq!(
            calculate(&[], 1.0, &[], &Slo::default(), &|_| 0).request_goodput,
            None
        );
    }

    #[test]
    fn no_output_token_fails_a_run() {
        assert_eq!(
            judge(0, 8, 0, 0.05, None),
            Err(Invalid::NoOutput {
                failed: 0,
                total: 8
            })
        );
        // Within the threshold, failures do not hide that nothing came back.
        assert!(matches!(
            judge(1, 40, 0, 0.05, Some("500")),
            Err(Invalid::NoOutput { failed: 1, .. })
        ));
        assert_eq!(judge(0, 8, 1, 0.05, None), Ok(()));
    }

    #[test]
    fn failures_up_to_the_threshold_pass_and_above_it_fail() {
        // 2 of 40 is exactly 0.05.
        assert_eq!(judge(2, 40, 100, 0.05, Some("500")), Ok(()));
        let e = judge(3, 40, 100, 0.05, Some("500 Internal Server Error")).unwrap_err();
        assert_eq!(
            e,
            Invalid::TooManyFailed {
                failed: 3,
                total: 40,
                threshold: 0.05,
                first_error: "500 Internal Server Error".into()
            }
        );
        let text = e.to_string();
        assert!(
            text.contains("3/40") && text.contains("0.0750") && text.contains("(0.05)"),
            "{text}"
        );
        // A threshold of 0 allows none; of 1, all (then only the output counts).
        assert!(judge(1, 1000, 100, 0.0, None).is_err());
        assert_eq!(judge(0, 1000, 100, 0.0, None), Ok(()));
        assert!(matches!(
            judge(8, 8, 0, 1.0, None),
            Err(Invalid::NoOutput { .. })
        ));
    }

    #[test]
    fn peaks_bucket_by_second() {
        let a = stream(0.0, &[0.5, 1.2, 1.4, 2.1], 1, Some(4));
        let b = stream(1.1, &[0.2, 0.3], 1, Some(2));
        let m = calculate(&[a, b], 3.0, &[], &Slo::default(), &|_| 0);
        // Second 1 holds A's 1.2 and 1.4 and B's 1.3 and 1.4.
        close(m.max_output_tokens_per_s, 4.0);
        assert_eq!(m.max_concurrent_requests, 2);
    }
}
