//! Readiness gates: poll a probe with short adaptive intervals until it passes, the
//! recipe's timeout runs out, or a process of the deployment dies (then fail at once,
//! naming it and showing its log tail, and record it as failed).

use super::{Apply, Event, Shared};
use crate::launch::{Gate, Probe};
use crate::plan::Observation;
use crate::state::Status;
use futures::StreamExt;
use std::time::{Duration, Instant};

/// First poll interval; grows x1.5 up to the cap.
const FIRST_INTERVAL: Duration = Duration::from_millis(20);
/// Longest wait between polls, whatever the recipe's interval: readiness is noticed
/// within 50 ms. A poll of something not listening yet is a refused connection, and a
/// poll that answers is one cheap GET; a round (probe and liveness checks) that takes
/// longer than the interval is followed by a pause as long as itself.
const MAX_INTERVAL: Duration = Duration::from_millis(50);
/// Health checks in flight at once within one probe.
const HEALTH_CONCURRENCY: usize = 16;
/// Per-request timeout.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

fn client() -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(REQUEST_TIMEOUT)
        .no_proxy()
        .build()
        .expect("http client")
}

/// One probe attempt: `Ok(())` when passed, `Err(what we are waiting for)` otherwise.
pub async fn probe_once(
    client: &reqwest::Client,
    probe: &Probe,
    resolve: &dyn Fn(&str) -> String,
) -> Result<String, String> {
    match probe {
        Probe::RouterWorkers {
            urls,
            prefill,
            decode,
        } => {
            for url in urls {
                let url = format!("{}/workers", resolve(url));
                let body: serde_json::Value = client
                    .get(&url)
                    .send()
                    .await
                    .map_err(|e| format!("{url}: {}", short(&e)))?
                    .json()
                    .await
                    .map_err(|e| format!("{url}: {}", short(&e)))?;
                let stats = &body["stats"];
                let count = |k: &str| stats[k].as_u64().unwrap_or(0);
                let (p, d) = (
                    count("prefill_count"),
                    count("decode_count") + count("regular_count"),
                );
                if p < u64::from(*prefill) || d < u64::from(*decode) {
                    return Err(format!(
                        "{url}: {p}/{prefill} prefill, {d}/{decode} decode/regular workers"
                    ));
                }
            }
            Ok(format!("{} Router(s) list all workers", urls.len()))
        }
        Probe::Health { urls } => {
            // A few at a time, results in URL order: the first unhealthy URL is the one
            // reported, and nothing more is sent once it is known.
            let mut checks = futures::stream::iter(urls.iter().map(|url| {
                let url = format!("{}/health", resolve(url));
                async move {
                    let resp = client
                        .get(&url)
                        .send()
                        .await
                        .map_err(|e| format!("{url}: {}", short(&e)))?;
                    if !resp.status().is_success() {
                        let status = resp.status();
                        let text = resp.text().await.unwrap_or_default();
                        return Err(format!("{url}: {status} {}", text.trim()));
                    }
                    Ok(())
                }
            }))
            .buffered(HEALTH_CONCURRENCY);
            while let Some(check) = checks.next().await {
                check?;
            }
            Ok(format!("{} endpoint(s) healthy", urls.len()))
        }
        Probe::Benchmark {
            url,
            model,
            isl,
            osl,
            concurrencies,
            requests_per_concurrency,
        } => {
            benchmark(
                client,
                &resolve(url),
                model,
                *isl,
                *osl,
                concurrencies,
                *requests_per_concurrency,
            )
            .await
        }
        Probe::Completion { url, model } => {
            let url = format!("{}/v1/completions", resolve(url));
            let body =
                serde_json::json!({ "model": model, "prompt": "srt smoke check", "max_tokens": 1 });
            let resp = client
                .post(&url)
                .json(&body)
                .send()
                .await
                .map_err(|e| format!("{url}: {}", short(&e)))?;
            let status = resp.status();
            let text = resp.text().await.unwrap_or_default();
            if !status.is_success() {
                return Err(format!("{url}: {status} {}", text.trim()));
            }
            let v: serde_json::Value =
                serde_json::from_str(&text).map_err(|_| format!("{url}: not JSON: {text}"))?;
            if v["choices"].as_array().is_none_or(|c| c.is_empty()) {
                return Err(format!("{url}: no choices in {text}"));
            }
            Ok("completion served".into())
        }
    }
}

fn short(e: &reqwest::Error) -> String {
    if e.is_connect() {
        "connection refused".into()
    } else if e.is_timeout() {
        "timed out".into()
    } else {
        let mut s = e.to_string();
        let mut src = std::error::Error::source(e);
        while let Some(inner) = src {
            s = inner.to_string();
            src = inner.source();
        }
        s
    }
}

/// The built-in serving load: per level, `level x per_level` requests, `level` in flight.
async fn benchmark(
    client: &reqwest::Client,
    url: &str,
    model: &str,
    isl: u32,
    osl: u32,
    levels: &[u32],
    per_level: u32,
) -> Result<String, String> {
    use futures::stream::{self, StreamExt};
    let url = format!("{url}/v1/completions");
    let prompt = vec!["benchmark"; isl as usize].join(" ");
    let mut report = Vec::new();
    for &level in levels {
        let total = level as usize * per_level as usize;
        let started = std::time::Instant::now();
        let results: Vec<Result<(Duration, u64), String>> = stream::iter(0..total)
            .map(|_| {
                let body = serde_json::json!({"model": model, "prompt": prompt, "max_tokens": osl, "ignore_eos": true});
                let url = url.clone();
                async move {
                    let t = std::time::Instant::now();
                    let resp = client.post(&url).json(&body).send().await.map_err(|e| short(&e))?;
                    let status = resp.status();
                    let v: serde_json::Value = resp.json().await.map_err(|e| short(&e))?;
                    if !status.is_success() {
                        return Err(format!("{status}: {v}"));
                    }
                    Ok((t.elapsed(), v["usage"]["completion_tokens"].as_u64().unwrap_or(0)))
                }
            })
            .buffer_unordered(level as usize)
            .collect()
            .await;
        let wall = started.elapsed();
        let mut latencies: Vec<Duration> = Vec::new();
        let mut tokens = 0u64;
        for r in results {
            let (lat, tok) = r.map_err(|e| format!("{url} at concurrency {level}: {e}"))?;
            latencies.push(lat);
            tokens += tok;
        }
        latencies.sort();
        let pct = |p: f64| {
            latencies[((latencies.len() as f64 - 1.0) * p).round() as usize].as_secs_f64() * 1000.0
        };
        report.push(format!(
            "c{level}: {total} req, p50 {:.0} ms, p99 {:.0} ms, {:.0} output tok/s",
            pct(0.5),
            pct(0.99),
            tokens as f64 / wall.as_secs_f64().max(1e-9)
        ));
    }
    Ok(report.join("; "))
}

/// Run a gate to completion.
pub(super) async fn run(apply: &Apply<'_>, state: &Shared, gate: &Gate) -> Result<String, String> {
    let client = client();
    let bindings = apply.exec.bindings();
    let resolve = |s: &str| bindings.resolve(s);
    let deadline = Instant::now() + Duration::from_secs(apply.health.timeout_secs);
    let cap = MAX_INTERVAL.min(Duration::from_secs(apply.health.interval_secs.max(1)));
    if matches!(gate.probe, Probe::Benchmark { .. }) {
        // A load run happens once; retrying would hide failures.
        return tokio::select! {
            r = probe_once(&client, &gate.probe, &resolve) => r,
            _ = apply.cancel.cancelled() => Err("interrupted".into()),
        };
    }
    let mut interval = FIRST_INTERVAL;
    let mut last_report = Instant::now();
    loop {
        let started = Instant::now();
        let attempt = probe_once(&client, &gate.probe, &resolve).await;
        let waiting = match attempt {
            Ok(detail) => return Ok(detail),
            Err(w) => w,
        };
        if let Some(dead) = dead_process(apply, state) {
            return Err(dead);
        }
        // The probe and the liveness check of every process, paced to at most half of
        // the time however large the deployment.
        let took = started.elapsed();
        if Instant::now() >= deadline {
            return Err(format!(
                "timed out after {}s waiting for {waiting}",
                apply.health.timeout_secs
            ));
        }
        if last_report.elapsed() >= Duration::from_secs(5) {
            (apply.events)(Event::Waiting {
                address: gate.address.clone(),
                detail: waiting,
            });
            last_report = Instant::now();
        }
        tokio::select! {
            _ = tokio::time::sleep(interval.max(took)) => {}
            _ = apply.cancel.cancelled() => return Err("interrupted".into()),
        }
        interval = (interval.mul_f32(1.5)).min(cap);
    }
}

/// A recorded process of the deployment that died: mark it failed and describe it.
fn dead_process(apply: &Apply<'_>, state: &Shared) -> Option<String> {
    let mut s = state.lock().expect("state mutex");
    let dead = s.resources.iter().find_map(|(addr, r)| {
        let rt = r.runtime.as_ref()?;
        if r.status != Status::Running {
            return None;
        }
        match apply.exec.observe(rt) {
            Observation::Alive => None,
            Observation::Gone(detail) => Some((addr.clone(), detail)),
        }
    })?;
    let (addr, detail) = dead;
    let tail = apply.exec.log_tail(&addr, 20).unwrap_or_default();
    let message = format!(
        "`{addr}` died while waiting: {detail}\n--- last lines of its log ---\n{}",
        tail.trim_end()
    );
    if let Some(r) = s.resources.get_mut(&addr) {
        r.status = Status::Failed;
        r.error = Some(detail);
    }
    let _ = apply.store.save(apply.lock, &mut s);
    Some(message)
}
