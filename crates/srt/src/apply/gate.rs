//! Readiness gates: poll a probe with short adaptive intervals until it passes, the
//! recipe's timeout runs out, or a process of the deployment dies (then fail at once,
//! naming it and showing its log tail, and record it as failed).

use super::record::Recorder;
use super::{Apply, Event, StepError, StepResult};
use crate::launch::{Gate, Probe};
use crate::plan::Observation;
use crate::state::{Runtime, Status};
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
/// Timeout of one readiness request (`/health`, `/workers`, `/readiness`): they answer
/// at once or not at all.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// The gates' HTTP client. A completion (the smoke check, the benchmark's requests) may
/// take as long as the recipe's readiness budget (`health_check.timeout_seconds`):
/// a real engine's first request can take longer than any fixed timeout (over 5 s for
/// TP2 on CPU), and the gate stops waiting at its deadline anyway. Readiness requests
/// set [`REQUEST_TIMEOUT`] each.
fn client(budget: Duration) -> reqwest::Client {
    reqwest::Client::builder()
        .timeout(budget.max(REQUEST_TIMEOUT))
        .no_proxy()
        .build()
        .expect("http client")
}

/// The JSON answer of `GET url`, or what went wrong.
async fn json_of(client: &reqwest::Client, url: &str) -> Result<serde_json::Value, String> {
    client
        .get(url)
        .timeout(REQUEST_TIMEOUT)
        .send()
        .await
        .map_err(|e| format!("{url}: {}", short(&e)))?
        .json()
        .await
        .map_err(|e| format!("{url}: {}", short(&e)))
}

/// The text of `GET url`, or what went wrong (an answer that is not 2xx included).
async fn text_of(client: &reqwest::Client, url: &str) -> Result<String, String> {
    let resp = client
        .get(url)
        .timeout(REQUEST_TIMEOUT)
        .send()
        .await
        .map_err(|e| format!("{url}: {}", short(&e)))?;
    if !resp.status().is_success() {
        return Err(format!("{url}: {}", resp.status()));
    }
    resp.text()
        .await
        .map_err(|e| format!("{url}: {}", short(&e)))
}

/// One probe attempt: `Ok(())` when passed, `Err(what we are waiting for)` otherwise.
pub(super) fn probe_once<'a>(
    client: &'a reqwest::Client,
    probe: &'a Probe,
    resolve: &'a dyn Fn(&str) -> String,
) -> futures::future::LocalBoxFuture<'a, Result<String, String>> {
    Box::pin(probe_now(client, probe, resolve))
}

async fn probe_now(
    client: &reqwest::Client,
    probe: &Probe,
    resolve: &dyn Fn(&str) -> String,
) -> Result<String, String> {
    match probe {
        Probe::Learned {
            url,
            path,
            after,
            then,
        } => {
            let url = format!("{}{path}", resolve(url));
            let text = text_of(client, &url).await?;
            let Some(value) = Probe::learned_from(&text, after) else {
                return Err(format!("{url}: nothing follows `{after}` yet"));
            };
            let then = then.with_learned(value);
            probe_once(client, &then, resolve)
                .await
                .map(|ok| format!("{value}: {ok}"))
        }
        Probe::JsonCounts { urls, path, counts } => {
            for url in urls {
                let url = format!("{}{path}", resolve(url));
                let body = json_of(client, &url).await?;
                let short_of: Vec<String> = counts
                    .iter()
                    .filter_map(|c| {
                        let have: u64 = c
                            .pointers
                            .iter()
                            .map(|p| {
                                body.pointer(p)
                                    .and_then(serde_json::Value::as_u64)
                                    .unwrap_or(0)
                            })
                            .sum();
                        (have < u64::from(c.at_least))
                            .then(|| format!("{have}/{} {}", c.at_least, c.name))
                    })
                    .collect();
                if !short_of.is_empty() {
                    return Err(format!("{url}: {}", short_of.join(", ")));
                }
            }
            Ok(format!("{} answer(s) reach every count", urls.len()))
        }
        Probe::JsonItems { urls, path, lists } => {
            for url in urls {
                let url = format!("{}{path}", resolve(url));
                let body = json_of(client, &url).await?;
                let short_of: Vec<String> = lists
                    .iter()
                    .filter_map(|l| {
                        let have = l.count(&body, resolve);
                        (have < l.at_least).then(|| format!("{have}/{} {}", l.at_least, l.name))
                    })
                    .collect();
                if !short_of.is_empty() {
                    return Err(format!("{url}: {}", short_of.join(", ")));
                }
            }
            Ok(format!("{} answer(s) list every item", urls.len()))
        }
        Probe::Http { urls, path } => {
            // A few at a time, results in URL order: the first failing URL is the one
            // reported, and nothing more is sent once it is known.
            let mut checks = futures::stream::iter(urls.iter().map(|url| {
                let url = format!("{}{path}", resolve(url));
                async move {
                    let resp = client
                        .get(&url)
                        .timeout(REQUEST_TIMEOUT)
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
            Ok(format!("{} endpoint(s) answer", urls.len()))
        }
        Probe::Benchmark(_) => Err("a benchmark is run by `gate::run`, not polled".into()),
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
            if v["choices"].as_array().is_none_or(std::vec::Vec::is_empty) {
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

/// Run a gate to completion.
pub(super) async fn run(apply: &Apply<'_>, rec: &Recorder<'_>, gate: &Gate) -> StepResult {
    let client = client(Duration::from_secs(apply.health.timeout_secs));
    let bindings = apply.exec.bindings();
    let resolve = |s: &str| bindings.resolve(s);
    let deadline = Instant::now() + Duration::from_secs(apply.health.timeout_secs);
    let cap = MAX_INTERVAL.min(Duration::from_secs(apply.health.interval_secs.max(1)));
    if let Probe::Benchmark(spec) = &gate.probe {
        // A load run happens once; retrying would hide failures.
        let url = resolve(&spec.url);
        return tokio::select! {
            r = benchmark(apply, gate, spec, &url) => Ok(r?),
            _ = apply.cancel.cancelled() => Err("interrupted".into()),
        };
    }
    let mut interval = FIRST_INTERVAL;
    let mut last_report = Instant::now();
    loop {
        let started = Instant::now();
        // A completion may take up to the budget: stop it at the deadline or on
        // interruption rather than after it.
        let attempt = tokio::select! {
            r = probe_once(&client, &gate.probe, &resolve) => r,
            _ = apply.cancel.cancelled() => return Err("interrupted".into()),
            _ = tokio::time::sleep_until(deadline.into()) => Err("no answer before the deadline".into()),
        };
        let waiting = match attempt {
            Ok(detail) => return Ok(detail),
            Err(w) => w,
        };
        if let Some(dead) = dead_process(apply, rec).await {
            return Err(dead);
        }
        // The probe and the liveness check of every process, paced to at most half of
        // the time however large the deployment.
        let took = started.elapsed();
        if Instant::now() >= deadline {
            return Err(format!(
                "timed out after {}s waiting for {waiting}",
                apply.health.timeout_secs
            )
            .into());
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

/// The benchmark resource: a run of [`crate::bench`], results under the deployment's
/// state directory; stage lines as progress.
async fn benchmark(
    apply: &Apply<'_>,
    gate: &Gate,
    spec: &crate::bench::Spec,
    url: &str,
) -> Result<String, String> {
    let deployment = apply.launch.deployment.clone();
    let place = crate::bench::Place {
        deployment_dir: apply.store.dir(),
        deployment: &deployment,
    };
    let progress = |detail: String| {
        (apply.events)(Event::Waiting {
            address: gate.address.clone(),
            detail,
        });
    };
    let report = crate::bench::run(spec, url, &place, &progress).await?;
    report.check()?;
    Ok(report.summary())
}

/// A recorded process of the deployment that died: mark it failed and describe it.
/// The executor is asked without holding the state mutex (it may ask a scheduler).
async fn dead_process(apply: &Apply<'_>, rec: &Recorder<'_>) -> Option<StepError> {
    let running: Vec<(String, Runtime)> = rec.read(|s| {
        s.resources
            .iter()
            .filter(|(_, r)| r.status == Status::Running)
            .filter_map(|(a, r)| Some((a.clone(), r.runtime.clone()?)))
            .collect()
    });
    let mut dead = None;
    for (addr, rt) in running {
        if let Observation::Gone(detail) = apply.exec.observe(&rt).await {
            dead = Some((addr, rt, detail));
            break;
        }
    }
    let (addr, rt, detail) = dead?;
    let message = format!("`{addr}` died while waiting: {detail}");
    let _ = rec.died(&addr, &rt, detail);
    Some(StepError::caused_by(message, addr))
}
