//! sglang-router's admin API (0.3.2), as [`Admin`].
//!
//! - `POST /workers {"url": URL}`: 202 with a `worker_id`; the registration runs in the
//!   background (health, metadata, activation). `GET /workers/<id>` shows a `job_status`
//!   while it runs (`failed` with a message if it fails) and the worker itself once it
//!   is active. A duplicate gets 202 too, and its job fails with `already exists`.
//! - `DELETE /workers/<id>`: 202; the worker is gone from `/workers` tens of ms later;
//!   requests in flight finish.
//! - `GET /workers`: `{"workers": [{"id": ..., "url": ...}, ...]}`.
//! - `GET /liveness`: 200 once bound.

use crate::frontend::{Admin, AdminError};
use crate::launch::Registration;
use futures::future::BoxFuture;
use futures::FutureExt;
use std::time::Duration;

/// The admin API of sglang-router.
pub(super) struct SglangRouterAdmin;

/// How often a background job is polled.
const JOB_POLL: Duration = Duration::from_millis(10);

/// `GET /workers` as (id, url) pairs.
async fn workers(
    http: &reqwest::Client,
    router: &str,
) -> Result<Vec<(String, String)>, AdminError> {
    let v = super::super::workers_json(http, router).await?;
    Ok(v["workers"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|w| {
            Some((
                w["id"].as_str()?.to_string(),
                w["url"].as_str()?.to_string(),
            ))
        })
        .collect())
}

/// Poll `GET /workers/<id>` until `done` says the answer settles it.
async fn wait_job(
    http: &reqwest::Client,
    router: &str,
    id: &str,
    what: &str,
    done: impl Fn(u16, &serde_json::Value) -> Option<Result<(), String>>,
) -> Result<(), AdminError> {
    super::super::wait_for_entry((http, router, id), what, JOB_POLL, done).await
}

/// The body of `POST /workers` for `worker`: its URL; a prefill or decode worker also
/// its `worker_type`, and a prefill the port of its bootstrap server (JSON `null`
/// without one: the gateway then sends `bootstrap_port: null`, and SGLang's decode
/// takes its default).
fn body(worker: Registration<'_>) -> serde_json::Value {
    let mut body = serde_json::json!({ "url": worker.url });
    if let Some(worker_type) = super::super::gateway::worker_type(worker.role) {
        body["worker_type"] = worker_type.into();
    }
    if let Some(port) = worker.bootstrap_port {
        body["bootstrap_port"] = port.into();
    }
    body
}

impl Admin for SglangRouterAdmin {
    fn list<'a>(
        &'a self,
        http: &'a reqwest::Client,
        router: &'a str,
    ) -> BoxFuture<'a, Result<Vec<String>, AdminError>> {
        async move {
            let mut urls: Vec<String> = workers(http, router)
                .await?
                .into_iter()
                .map(|(_, u)| u)
                .collect();
            urls.sort();
            urls.dedup();
            Ok(urls)
        }
        .boxed()
    }

    fn add<'a>(
        &'a self,
        http: &'a reqwest::Client,
        router: &'a str,
        worker: Registration<'a>,
    ) -> BoxFuture<'a, Result<(), AdminError>> {
        let body = body(worker);
        let worker = worker.url;
        async move {
            let r = http
                .post(format!("{router}/workers"))
                .json(&body)
                .send()
                .await
                .map_err(|e| AdminError::transport("POST /workers", router, &e))?;
            let status = r.status();
            let v: serde_json::Value = r.json().await.unwrap_or_default();
            let Some(id) = v["worker_id"].as_str().filter(|_| status.is_success()) else {
                return Err(format!("{router} refused to add {worker}: {status} {v}").into());
            };
            wait_job(http, router, id, "adding a worker", |status, v| {
                match v["job_status"]["status"].as_str() {
                    Some("failed") => {
                        let message = v["job_status"]["message"].as_str().unwrap_or_default();
                        Some(if message.contains("already exists") {
                            Ok(())
                        } else {
                            Err(format!("{router} could not add {worker}: {message}"))
                        })
                    }
                    Some(_) => None,
                    None if status == 200 && v["is_healthy"] == true => Some(Ok(())),
                    None => None,
                }
            })
            .await
        }
        .boxed()
    }

    fn remove<'a>(
        &'a self,
        http: &'a reqwest::Client,
        router: &'a str,
        worker: &'a str,
    ) -> BoxFuture<'a, Result<(), AdminError>> {
        async move {
            let ids: Vec<String> = workers(http, router)
                .await?
                .into_iter()
                .filter(|(_, u)| u == worker)
                .map(|(id, _)| id)
                .collect();
            for id in ids {
                let r = http
                    .delete(format!("{router}/workers/{id}"))
                    .send()
                    .await
                    .map_err(|e| AdminError::transport("DELETE /workers/<id>", router, &e))?;
                if !r.status().is_success() {
                    let status = r.status();
                    let body = r.text().await.unwrap_or_default();
                    return Err(format!(
                        "{router} refused to remove {worker}: {status} {}",
                        body.trim()
                    )
                    .into());
                }
                wait_job(http, router, &id, "removing a worker", |status, _| {
                    (status == 404).then_some(Ok(()))
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
    fn a_prefill_is_registered_with_its_role_and_bootstrap_port_a_decode_with_its_role() {
        let url = "http://10.0.0.1:6100";
        assert_eq!(
            body(Registration::regular(url)),
            serde_json::json!({ "url": url })
        );
        let prefill = Registration {
            url,
            role: RoleKind::Prefill,
            kv_connector: None,
            bootstrap_port: Some(14500),
        };
        assert_eq!(
            body(prefill),
            serde_json::json!({ "url": url, "worker_type": "prefill", "bootstrap_port": 14500 })
        );
        let decode = Registration {
            role: RoleKind::Decode,
            bootstrap_port: None,
            ..prefill
        };
        assert_eq!(
            body(decode),
            serde_json::json!({ "url": url, "worker_type": "decode" })
        );
    }
}
