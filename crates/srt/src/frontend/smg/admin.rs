//! smg's admin API (1.13.0), as [`Admin`] (`docs/smg-notes.md` has what was observed).
//!
//! - `POST /workers {"url": URL}`: 202 with a `worker_id` (a UUID the gateway assigns);
//!   the registration runs in the background, the worker listed `pending`, then
//!   `ready`. A URL the gateway already holds, draining included, is 409
//!   `WORKER_ALREADY_EXISTS`.
//! - `DELETE /workers/<id>`: 202; the worker turns `draining` at once (no new request
//!   goes to it) and is gone 5 s later (`GET /workers/<id>` is 404).
//! - `GET /workers`: `{"workers": [{"id", "url", "status", ...}], ...}`.
//! - `GET /liveness`: 200 once bound.

use crate::frontend::{Admin, AdminError};
use crate::launch::Registration;
use futures::future::BoxFuture;
use futures::FutureExt;
use std::time::{Duration, Instant};

/// The admin API of smg.
pub(super) struct SmgAdmin;

/// How often a background job is polled.
const JOB_POLL: Duration = Duration::from_millis(20);

/// One entry of `GET /workers`.
struct Entry {
    id: String,
    url: String,
    status: String,
}

/// `GET /workers`, every entry whatever its status.
async fn workers(http: &reqwest::Client, router: &str) -> Result<Vec<Entry>, AdminError> {
    let v = super::super::workers_json(http, router).await?;
    Ok(v["workers"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|w| {
            Some(Entry {
                id: w["id"].as_str()?.to_string(),
                url: w["url"].as_str()?.to_string(),
                status: w["status"].as_str().unwrap_or_default().to_string(),
            })
        })
        .collect())
}

/// What a wait on a worker's entry ends with.
enum Settled {
    /// It routes (`ready`).
    Ready,
    /// The gateway holds it no more.
    Gone,
}

/// Poll `GET /workers/<id>` until `want` says the answer settles it.
async fn wait_entry(
    http: &reqwest::Client,
    router: &str,
    id: &str,
    what: &str,
    want: impl Fn(u16, &serde_json::Value) -> Option<Result<Settled, String>>,
) -> Result<Settled, AdminError> {
    super::super::wait_for_entry((http, router, id), what, JOB_POLL, want).await
}

/// Wait until the entry `id` of `worker` routes, or is gone (a removal that was under
/// way), or its registration failed.
async fn settle(
    http: &reqwest::Client,
    router: &str,
    id: &str,
    worker: &str,
) -> Result<Settled, AdminError> {
    wait_entry(http, router, id, "adding a worker", |status, v| {
        if status == 404 {
            return Some(Ok(Settled::Gone));
        }
        if v["job_status"]["status"] == "failed" {
            let message = v["job_status"]["message"].as_str().unwrap_or_default();
            return Some(Err(format!("{router} could not add {worker}: {message}")));
        }
        (v["status"] == "ready" && v["is_healthy"] == true).then_some(Ok(Settled::Ready))
    })
    .await
}

/// The body of `POST /workers` for `worker`: its URL; a prefill or decode worker also
/// its `worker_type`, the `kv_connector` the gateway pairs vLLM's two legs over (without
/// one it sends both legs without `kv_transfer_params`, and a vLLM decode computes the
/// prompt itself), and a prefill its `bootstrap_port` (SGLang's rendezvous; a vLLM
/// prefill's NIXL side channel, which the gateway does not need and keeps).
fn body(worker: Registration<'_>) -> serde_json::Value {
    let mut body = serde_json::json!({ "url": worker.url });
    let Some(worker_type) = super::super::gateway::worker_type(worker.role) else {
        return body;
    };
    body["worker_type"] = worker_type.into();
    if let Some(connector) = worker.kv_connector {
        body["kv_connector"] = connector.into();
    }
    if let Some(port) = worker.bootstrap_port {
        body["bootstrap_port"] = port.into();
    }
    body
}

/// One `POST /workers`: the id of the entry it made, or of the one the gateway already
/// holds for the URL (409).
async fn post(
    http: &reqwest::Client,
    router: &str,
    registration: Registration<'_>,
) -> Result<String, AdminError> {
    let worker = registration.url;
    let r = http
        .post(format!("{router}/workers"))
        .json(&body(registration))
        .send()
        .await
        .map_err(|e| AdminError::transport("POST /workers", router, &e))?;
    let status = r.status();
    let v: serde_json::Value = r.json().await.unwrap_or_default();
    if let Some(id) = v["worker_id"].as_str().filter(|_| status.is_success()) {
        return Ok(id.to_string());
    }
    if v["code"] == "WORKER_ALREADY_EXISTS" {
        let held = workers(http, router).await?;
        if let Some(e) = held.into_iter().find(|e| e.url == worker) {
            return Ok(e.id);
        }
    }
    Err(format!("{router} refused to add {worker}: {status} {v}").into())
}

impl Admin for SmgAdmin {
    /// The workers that route now: `ready` (a `pending` one does not yet, a `draining`
    /// one no longer).
    fn list<'a>(
        &'a self,
        http: &'a reqwest::Client,
        router: &'a str,
    ) -> BoxFuture<'a, Result<Vec<String>, AdminError>> {
        async move {
            let mut urls: Vec<String> = workers(http, router)
                .await?
                .into_iter()
                .filter(|e| e.status == "ready")
                .map(|e| e.url)
                .collect();
            urls.sort();
            urls.dedup();
            Ok(urls)
        }
        .boxed()
    }

    /// Adds and waits until the worker routes; an entry for the URL that is still
    /// draining is waited out and the worker added again.
    fn add<'a>(
        &'a self,
        http: &'a reqwest::Client,
        router: &'a str,
        worker: Registration<'a>,
    ) -> BoxFuture<'a, Result<(), AdminError>> {
        async move {
            let start = Instant::now();
            loop {
                let id = post(http, router, worker).await?;
                match settle(http, router, &id, worker.url).await? {
                    Settled::Ready => return Ok(()),
                    Settled::Gone if start.elapsed() < super::super::ENTRY_TIMEOUT => {}
                    Settled::Gone => {
                        return Err(format!("{router} kept dropping {}", worker.url).into());
                    }
                }
            }
        }
        .boxed()
    }

    /// Removes every entry of the URL and waits until each is draining (no new request
    /// goes to it) or gone. The gateway keeps a removed worker draining for 5 s and
    /// refuses to add the URL back until then: [`SmgAdmin::add`] waits that out, so the
    /// 5 s pass while the worker stops and its replacement starts.
    fn remove<'a>(
        &'a self,
        http: &'a reqwest::Client,
        router: &'a str,
        worker: &'a str,
    ) -> BoxFuture<'a, Result<(), AdminError>> {
        async move {
            let held = workers(http, router).await?;
            for e in held.into_iter().filter(|e| e.url == worker) {
                let r = http
                    .delete(format!("{router}/workers/{}", e.id))
                    .send()
                    .await
                    .map_err(|err| AdminError::transport("DELETE /workers/<id>", router, &err))?;
                let status = r.status();
                if !status.is_success() && status.as_u16() != 404 {
                    let body = r.text().await.unwrap_or_default();
                    return Err(format!(
                        "{router} refused to remove {worker}: {status} {}",
                        body.trim()
                    )
                    .into());
                }
                wait_entry(http, router, &e.id, "removing a worker", |status, v| {
                    (status == 404 || v["status"] == "draining").then_some(Ok(Settled::Gone))
                })
                .await?;
            }
            Ok(())
        }
        .boxed()
    }

    fn live<'a>(&'a self, http: &'a reqwest::Client, router: &'a str) -> BoxFuture<'a, bool> {
        async move {
            http.get(format!("{router}/liveness"))
                .send()
                .await
                .is_ok_and(|r| r.status().is_success())
        }
        .boxed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recipe::RoleKind;

    #[test]
    fn a_prefill_or_decode_worker_is_registered_with_its_role_and_connector() {
        let url = "http://10.0.0.1:6100";
        assert_eq!(
            body(Registration::regular(url)),
            serde_json::json!({ "url": url })
        );
        for (role, name) in [(RoleKind::Prefill, "prefill"), (RoleKind::Decode, "decode")] {
            let worker = Registration {
                url,
                role,
                kv_connector: Some("NixlConnector"),
                bootstrap_port: None,
            };
            assert_eq!(
                body(worker),
                serde_json::json!({ "url": url, "worker_type": name, "kv_connector": "NixlConnector" })
            );
        }
        let sglang_prefill = Registration {
            url,
            role: RoleKind::Prefill,
            kv_connector: None,
            bootstrap_port: Some(14500),
        };
        assert_eq!(
            body(sglang_prefill),
            serde_json::json!({ "url": url, "worker_type": "prefill", "bootstrap_port": 14500 })
        );
    }
}
