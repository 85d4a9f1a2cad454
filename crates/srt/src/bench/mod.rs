//! The serving benchmark: what `vllm bench serve` (and srtctl's sa-bench, which wraps
//! it) measures, built in. Per concurrency level: distinct prompts of an exact token
//! length from the model's own tokenizer ([`dataset`]), warm-up requests that are not
//! counted, then streamed requests ([`client`]) released as a Poisson process (or all at
//! once) with at most `level` in flight; TTFT, TPOT, ITL, E2EL, throughputs and goodput
//! computed as vLLM computes them ([`metrics`]); results written as vLLM's result JSON,
//! one line per level, to a file per run under the deployment's state directory
//! ([`result`]), and drawn ([`plot`]).
//!
//! Apply runs it as the `benchmark` resource; `srt bench NAME` runs it again on a
//! deployed deployment. See `docs/benchmark.md`.

mod adapter;
mod aiperf;
mod chat;
mod client;
mod dataset;
mod metrics;
pub(crate) mod plot;
pub mod result;
mod rng;
mod slow_down;
mod spec;
mod tokenizer;

pub use adapter::{AdapterChat, MaxEffort, TokenizerAdapter};
pub use aiperf::{aiperf_requirement, AIPERF_VERSION};
pub use chat::ChatTemplateError;
pub use metrics::Invalid;
pub use slow_down::SlowDown;
pub use spec::{
    least_seconds, Dataset, Endpoint, Rate, Slo, Spec, DEFAULT_MAX_DURATION_SECONDS,
    DEFAULT_MAX_FAILED_FRACTION,
};

use dataset::{Chat, Request, Source};
use metrics::Output;
use rng::Rng;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Stream ids of one seed ([`Rng::new`]).
const STREAM_PROMPTS: u64 = 10;
const STREAM_WARMUP: u64 = 11;
const STREAM_ARRIVALS: u64 = 12;

/// Errors kept per level in the result file.
const ERRORS_KEPT: usize = 10;

/// What a finished run wrote.
#[derive(Debug)]
pub struct Report {
    /// The result file (one vLLM result object per level, one per line).
    pub file: PathBuf,
    /// The picture, if it could be drawn.
    pub plot: Option<PathBuf>,
    /// The level objects written.
    pub levels: Vec<serde_json::Value>,
    /// Requests measured, over every level.
    pub requests: usize,
    /// Requests that failed, over every level.
    pub failed: usize,
    /// Output tokens over every level.
    pub output_tokens: u64,
    /// The first error seen.
    pub first_error: Option<String>,
    /// The spec's `max_failed_fraction`.
    pub max_failed_fraction: f64,
}

/// A run that finished but proves nothing ([`Invalid`]): its result file is written, and
/// named, so what went wrong can be read there.
#[derive(Debug, thiserror::Error)]
#[error("the benchmark failed: {why}; results {}", file.display())]
pub struct Failed {
    /// Why.
    pub why: Invalid,
    /// The run's result file.
    pub file: PathBuf,
}

impl Report {
    /// One line for progress output: where the results are.
    pub fn summary(&self) -> String {
        let requests: u64 = self
            .levels
            .iter()
            .map(|l| l["completed"].as_u64().unwrap_or(0))
            .sum();
        let mut s = format!(
            "{} level(s), {requests} requests, {} output tokens; results {}",
            self.levels.len(),
            self.output_tokens,
            self.file.display()
        );
        if let Some(p) = &self.plot {
            s.push_str(&format!(", plot {}", p.display()));
        }
        s
    }

    /// Whether the run counts as passed ([`metrics::judge`]): output tokens came back and
    /// at most `max_failed_fraction` of the measured requests failed.
    pub fn check(&self) -> Result<(), Failed> {
        metrics::judge(
            self.failed,
            self.requests,
            self.output_tokens,
            self.max_failed_fraction,
            self.first_error.as_deref(),
        )
        .map_err(|why| Failed {
            why,
            file: self.file.clone(),
        })
    }
}

/// Where the tokenizer `spec` names is ([`Spec::tokenizer`]), or why there is none:
/// what a run needs before it sends anything, so plan warns and apply refuses early.
pub fn find_tokenizer(spec: &str) -> Result<PathBuf, String> {
    tokenizer::locate(spec)
}

/// Why the tokenizer at `tokenizer` (a `tokenizer.json` [`find_tokenizer`] found) has
/// no chat template that renders a prompt, when no `adapter` renders in its place: what
/// a run with `use_chat_template` needs before it sends anything, so plan warns and
/// apply refuses early.
pub fn check_chat_template(
    tokenizer: &Path,
    adapter: Option<AdapterChat>,
) -> Result<(), ChatTemplateError> {
    dataset::ChatFormat::load(tokenizer, adapter).map(drop)
}

/// Where a run writes and what it calls the deployment.
pub struct Place<'a> {
    /// The deployment's state directory (`.srt/<name>`); results go to its `bench/`.
    pub deployment_dir: &'a Path,
    /// The deployment's name.
    pub deployment: &'a str,
}

/// Run `spec`, its placeholders resolved ([`Spec::resolved`]). `progress` hears one
/// line per stage. Results are written level by level, so an interrupted run keeps the
/// levels it finished.
pub async fn run(
    spec: &Spec,
    place: &Place<'_>,
    progress: &(dyn Fn(String) + Sync),
) -> Result<Report, String> {
    if spec.concurrencies.is_empty() {
        return Err("no concurrency levels".into());
    }
    let tok = Arc::new(tokenizer::Tokenizer::load(&spec.tokenizer)?);
    let chat = match spec.use_chat_template {
        true => Some(Arc::new(
            Chat::load(&tok, spec.custom_tokenizer).map_err(|e| e.with_help())?,
        )),
        false => None,
    };
    let mut prompts = Source::new(
        &spec.dataset,
        &tok,
        spec.seed,
        STREAM_PROMPTS,
        chat.as_ref(),
    )?;
    let mut warmups = Source::new(&spec.dataset, &tok, spec.seed, STREAM_WARMUP, chat.as_ref())?;
    let mut arrivals = Rng::new(spec.seed, STREAM_ARRIVALS);
    let started = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    let date = result::date(started);
    let dir = place.deployment_dir.join(result::DIR);
    let file = result::new_run_file(&dir, &date)
        .map_err(|e| format!("cannot create a result file under {}: {e}", dir.display()))?;
    let run_id = file
        .file_stem()
        .map(|s| s.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tokenizer_id = tok.path.display().to_string();
    let info = result::RunInfo {
        date: &date,
        run_id: &run_id,
        deployment: place.deployment,
        tokenizer: &tokenizer_id,
    };
    let client = reqwest::Client::builder()
        .no_proxy()
        .connect_timeout(Duration::from_secs(10))
        .pool_max_idle_per_host(*spec.concurrencies.iter().max().unwrap_or(&1) as usize)
        .build()
        .map_err(|e| format!("http client: {e}"))?;
    let target = Arc::new(client::Target {
        url: format!("{}{}", spec.url.trim_end_matches('/'), spec.endpoint.path()),
        model: spec.model.clone(),
        endpoint: spec.endpoint,
        ignore_eos: spec.ignore_eos,
    });
    let mut report = Report {
        file: file.clone(),
        plot: None,
        levels: Vec::new(),
        requests: 0,
        failed: 0,
        output_tokens: 0,
        first_error: None,
        max_failed_fraction: spec.max_failed_fraction,
    };
    let bound = Duration::from_secs(spec.max_duration_seconds);
    let deadline = Instant::now() + bound;
    let stopped = |level: u32| overrun(spec, level, &file);
    for &level in &spec.concurrencies {
        let n_warm = spec.warmups_at(level);
        if n_warm > 0 {
            progress(format!("concurrency {level}: {n_warm} warm-up request(s)"));
            let reqs = warmups.take(&tok, n_warm)?;
            let zeros = vec![0.0; reqs.len()];
            drive(
                &client,
                &target,
                reqs,
                &zeros,
                level,
                &format!("{run_id}-warmup-c{level}-"),
                deadline,
            )
            .await
            .ok_or_else(|| stopped(level))?;
        }
        let n = spec.prompts_at(level);
        progress(format!(
            "concurrency {level}: {n} request(s), request rate {}",
            spec.request_rate
        ));
        let reqs = prompts.take(&tok, n)?;
        let times = schedule(n, spec.request_rate, &mut arrivals);
        let slowed = match &spec.slow_down {
            Some(slow) => {
                progress(format!(
                    "concurrency {level}: decode forward passes sleep {} s for the first {} s ({} server(s))",
                    slow.sleep_seconds,
                    slow.wait_seconds,
                    slow.servers.len()
                ));
                Some(slow.start(&client).await?)
            }
            None => None,
        };
        let t0 = Instant::now();
        let outputs = drive(
            &client,
            &target,
            reqs,
            &times,
            level,
            &format!("{run_id}-c{level}-"),
            deadline,
        )
        .await;
        let duration = t0.elapsed().as_secs_f64();
        if let Some(window) = slowed {
            window.finish().await?;
        }
        let outputs = outputs.ok_or_else(|| stopped(level))?;
        let count = |t: &str| tok.encode(t).len() as u32;
        let m = metrics::calculate(&outputs, duration, &spec.percentiles, &spec.goodput, &count);
        let errors: Vec<String> = outputs
            .iter()
            .filter(|o| !o.success)
            .map(|o| o.error.clone())
            .take(ERRORS_KEPT)
            .collect();
        if report.first_error.is_none() {
            report.first_error = errors.first().cloned();
        }
        report.requests += m.completed + m.failed;
        report.failed += m.failed;
        report.output_tokens += m.total_output;
        let level_result = result::Level {
            concurrency: level,
            num_prompts: n,
            num_warmups: n_warm,
            duration,
            latencies: outputs.iter().map(|o| o.latency).collect(),
            queue_times: outputs.iter().map(|o| o.queue_time).collect(),
            metrics: m,
            errors,
        };
        let v = result::level_json(spec, &info, &level_result);
        result::append(&file, &v).map_err(|e| format!("cannot write {}: {e}", file.display()))?;
        progress(format!(
            "concurrency {level}: {:.1} output tok/s, median TTFT {:.1} ms, median ITL {:.2} ms",
            level_result.metrics.output_throughput,
            level_result.metrics.ttft.median,
            level_result.metrics.itl.median
        ));
        report.levels.push(v);
    }
    let svg = file.with_extension("svg");
    let title = format!(
        "{} ({}): output throughput vs latency",
        place.deployment, run_id
    );
    match plot::svg(&svg, &title, &report.levels) {
        Ok(()) => report.plot = Some(svg),
        Err(e) => progress(e),
    }
    Ok(report)
}

/// Send times of `n` requests, s after the level starts: all at 0 for an infinite rate,
/// else a Poisson process scaled so the last send is at `n / rate` (as vLLM does, which
/// keeps throughput figures steady across seeds).
pub fn schedule(n: usize, rate: Rate, rng: &mut Rng) -> Vec<f64> {
    let Rate::PerSecond(r) = rate else {
        return vec![0.0; n];
    };
    let mut t = 0.0;
    let mut times: Vec<f64> = (0..n)
        .map(|_| {
            t += rng.exponential(1.0 / r);
            t
        })
        .collect();
    if let Some(&last) = times.last() {
        if last > 0.0 {
            let k = n as f64 / r / last;
            times.iter_mut().for_each(|x| *x *= k);
        }
    }
    times
}

/// Why a run stopped at `level`: it reached `max_duration_seconds`.
fn overrun(spec: &Spec, level: u32, file: &Path) -> String {
    format!(
        "the benchmark ran past its bound of {}s (`benchmark.max_duration_seconds`) at concurrency {level} and was stopped; the levels it finished are in {}; raise the bound, or send fewer or faster requests",
        spec.max_duration_seconds,
        file.display()
    )
}

/// Request tasks, aborted when dropped: a level stopped at its deadline leaves no
/// request running.
struct Tasks(Vec<tokio::task::JoinHandle<Output>>);

impl Drop for Tasks {
    fn drop(&mut self) {
        self.0.iter().for_each(tokio::task::JoinHandle::abort);
    }
}

/// Send `reqs`, request `i` released at `times[i]` s, at most `level` in flight; the
/// outputs in request order, or `None` when `deadline` came first (every request still
/// in flight is dropped).
async fn drive(
    client: &reqwest::Client,
    target: &Arc<client::Target>,
    reqs: Vec<Request>,
    times: &[f64],
    level: u32,
    id_prefix: &str,
    deadline: Instant,
) -> Option<Vec<Output>> {
    let mut tasks = Tasks(Vec::with_capacity(reqs.len()));
    let sent = send_all(client, target, reqs, times, level, id_prefix, &mut tasks);
    tokio::time::timeout_at(deadline.into(), sent).await.ok()
}

/// [`drive`] without its deadline.
async fn send_all(
    client: &reqwest::Client,
    target: &Arc<client::Target>,
    reqs: Vec<Request>,
    times: &[f64],
    level: u32,
    id_prefix: &str,
    tasks: &mut Tasks,
) -> Vec<Output> {
    let slots = Arc::new(tokio::sync::Semaphore::new(level.max(1) as usize));
    let t0 = Instant::now();
    for (i, (req, at)) in reqs.into_iter().zip(times).enumerate() {
        let due = t0 + Duration::from_secs_f64(*at);
        if due > Instant::now() {
            tokio::time::sleep_until(due.into()).await;
        }
        let arrived = Instant::now();
        let (client, target, slots) = (client.clone(), target.clone(), slots.clone());
        let id = format!("{id_prefix}{i}");
        tasks.0.push(tokio::spawn(async move {
            let _slot = slots.acquire_owned().await;
            let sent = Instant::now();
            let mut out = client::send(&client, &target, &req, &id).await;
            out.start_time = sent.duration_since(t0).as_secs_f64();
            out.queue_time = sent.duration_since(arrived).as_secs_f64();
            out
        }));
    }
    let mut outputs = Vec::with_capacity(tasks.0.len());
    for t in &mut tasks.0 {
        outputs.push(t.await.unwrap_or_else(|e| Output {
            error: format!("request task failed: {e}"),
            ..Output::default()
        }));
    }
    outputs
}

/// The innermost cause of a request error.
pub(crate) fn error_text(e: &reqwest::Error) -> String {
    if e.is_connect() {
        return "connection refused".into();
    }
    if e.is_timeout() {
        return "timed out".into();
    }
    let mut s = e.to_string();
    let mut src = std::error::Error::source(e);
    while let Some(inner) = src {
        s = inner.to_string();
        src = inner.source();
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A level still sending at the run's deadline stops there: a server that never
    /// answers (or a rate too slow) cannot hold a benchmark past its bound.
    #[tokio::test]
    async fn a_level_stops_at_the_deadline() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let target = Arc::new(client::Target {
            url: format!("http://{}/v1/completions", listener.local_addr().unwrap()),
            model: "m".into(),
            endpoint: Endpoint::Completions,
            ignore_eos: true,
        });
        let req = Request {
            prompt: "hi".into(),
            prompt_len: 2,
            output_len: 1,
        };
        let client = reqwest::Client::builder().no_proxy().build().unwrap();
        let t = Instant::now();
        // One request at once (never answered), one due in an hour.
        let out = drive(
            &client,
            &target,
            vec![req.clone(), req],
            &[0.0, 3600.0],
            1,
            "t-",
            Instant::now() + Duration::from_millis(300),
        )
        .await;
        assert!(out.is_none());
        assert!(t.elapsed() < Duration::from_secs(5), "{:?}", t.elapsed());
        drop(listener);
    }

    #[test]
    fn least_durations_follow_the_rate() {
        assert_eq!(least_seconds(&[1, 3], 10, Rate::PerSecond(2.0)), 20.0);
        assert_eq!(least_seconds(&[4], 1, Rate::PerSecond(0.0001)), 40_000.0);
        assert_eq!(least_seconds(&[4], 1, Rate::Inf), 0.0);
    }

    #[test]
    fn schedules() {
        let mut rng = Rng::new(0, STREAM_ARRIVALS);
        assert_eq!(schedule(3, Rate::Inf, &mut rng), vec![0.0; 3]);
        let t = schedule(100, Rate::PerSecond(20.0), &mut rng);
        assert_eq!(t.len(), 100);
        assert!(t.windows(2).all(|w| w[0] <= w[1]));
        assert!((t[99] - 5.0).abs() < 1e-9, "{}", t[99]);
        let mut a = Rng::new(5, STREAM_ARRIVALS);
        let mut b = Rng::new(5, STREAM_ARRIVALS);
        assert_eq!(
            schedule(10, Rate::PerSecond(2.0), &mut a),
            schedule(10, Rate::PerSecond(2.0), &mut b)
        );
    }

    /// The body of the HTTP request `sock` sends (by its `content-length`); `None`
    /// when the connection ends first.
    pub(super) async fn request_body(sock: &mut tokio::net::TcpStream) -> Option<Vec<u8>> {
        use tokio::io::AsyncReadExt;
        let mut buf = Vec::new();
        let mut chunk = [0u8; 8192];
        loop {
            let n = sock.read(&mut chunk).await.unwrap_or(0);
            if n == 0 {
                return None;
            }
            buf.extend_from_slice(&chunk[..n]);
            let text = String::from_utf8_lossy(&buf).into_owned();
            let Some(end) = text.find("\r\n\r\n") else {
                continue;
            };
            let len: usize = text[..end]
                .lines()
                .find_map(|l| {
                    let (k, v) = l.split_once(':')?;
                    k.eq_ignore_ascii_case("content-length")
                        .then(|| v.trim().parse().ok())?
                })
                .unwrap_or(0);
            if buf.len() >= end + 4 + len {
                return Some(buf[end + 4..end + 4 + len].to_vec());
            }
        }
    }

    /// A completions server that records every prompt it gets and answers one token
    /// with the usage its tokenizer counts (the tiny model's, as the simulator's).
    async fn recording_server(
        tok: Arc<tokenizer::Tokenizer>,
    ) -> (String, Arc<std::sync::Mutex<Vec<String>>>) {
        use tokio::io::AsyncWriteExt;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let prompts = Arc::new(std::sync::Mutex::new(Vec::new()));
        let seen = prompts.clone();
        tokio::spawn(async move {
            loop {
                let Ok((mut sock, _)) = listener.accept().await else {
                    return;
                };
                let (tok, seen) = (tok.clone(), seen.clone());
                tokio::spawn(async move {
                    let Some(body) = request_body(&mut sock).await else {
                        return;
                    };
                    let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
                    let prompt = v["prompt"].as_str().unwrap().to_string();
                    let usage = serde_json::json!({"usage": {
                        "prompt_tokens": tok.count_prompt(&prompt),
                        "completion_tokens": 1,
                    }});
                    seen.lock().unwrap().push(prompt);
                    let events = format!(
                        "data: {{\"choices\": [{{\"text\": \" x\"}}]}}\n\ndata: {usage}\n\ndata: [DONE]\n\n"
                    );
                    let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n";
                    let _ = sock.write_all(head.as_bytes()).await;
                    let _ = sock.write_all(events.as_bytes()).await;
                    let _ = sock.shutdown().await;
                });
            }
        });
        (url, prompts)
    }

    /// A run with `use_chat_template` sends every prompt (warm-ups too) in the tiny
    /// model's chat template, and its result counts the template's tokens as the
    /// server counts them.
    #[tokio::test]
    async fn a_chat_template_run_sends_templated_prompts() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/tiny-model");
        let tok = Arc::new(tokenizer::Tokenizer::load(dir.to_str().unwrap()).unwrap());
        let (url, prompts) = recording_server(tok.clone()).await;
        let state = tempfile::tempdir().unwrap();
        let spec = Spec {
            url: url.clone(),
            model: "tiny".into(),
            tokenizer: dir.display().to_string(),
            endpoint: Endpoint::Completions,
            dataset: Dataset::Random {
                isl: 64,
                osl: 4,
                range_ratio: 1.0,
                prefix_len: 0,
            },
            use_chat_template: true,
            custom_tokenizer: None,
            concurrencies: vec![2],
            num_prompts_mult: 3,
            num_warmup_mult: 1,
            request_rate: Rate::Inf,
            max_duration_seconds: 60,
            max_failed_fraction: 0.0,
            ignore_eos: true,
            seed: 0,
            percentiles: vec![50.0],
            goodput: Slo::default(),
            slow_down: None,
        };
        let place = Place {
            deployment_dir: state.path(),
            deployment: "chat",
        };
        let report = run(&spec, &place, &|_| {}).await.unwrap();
        report.check().unwrap();
        let prompts = prompts.lock().unwrap().clone();
        assert_eq!(prompts.len(), 2 + 6, "{prompts:?}");
        for p in &prompts {
            assert!(
                p.starts_with("user: ") && p.ends_with("\nassistant: ") && p.len() > 40,
                "{p:?}"
            );
        }
        let level = &report.levels[0];
        assert_eq!(level["use_chat_template"], true);
        // The measured requests are the last six; their counted input is the server's.
        let counted: u64 = prompts[2..]
            .iter()
            .map(|p| u64::from(tok.count_prompt(p)))
            .sum();
        assert_eq!(level["total_input_tokens"], counted, "{level}");
        assert_eq!(level["srt_server_input_tokens"], counted, "{level}");
    }
}
