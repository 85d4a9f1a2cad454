//! vllm-router's admin API (0.1.17), as [`Admin`].
//!
//! - `POST /add_worker?url=URL`: checks the worker's `/health` first (srt calls it once
//!   the worker is healthy, so that is one request), then routes to it at once; 400
//!   `Worker URL already exists` for a present one. With
//!   `--intra-node-data-parallel-size K` it registers `URL@0..K-1`.
//! - `POST /remove_worker?url=URL`: always 200; requests in flight finish; the base URL
//!   removes every `@rank` entry.
//! - `GET /workers`: `{"workers": [{"url": ...}, ...]}`.
//! - `GET /liveness`: 200 once bound.
//!
//! In prefill/decode mode `add_worker` is refused (`PD router requires specific
//! add_prefill_server or add_decode_server methods`) and `remove_worker` works: srt
//! takes a worker out before stopping it, and restarts the Router to put one in.

use crate::frontend::{Admin, AdminError};
use crate::launch::Registration;
use futures::future::BoxFuture;
use futures::FutureExt;

/// The admin API of vllm-router.
pub(super) struct VllmRouterAdmin;

/// `URL@rank` folded to `URL`.
fn base_url(url: &str) -> &str {
    match url.rsplit_once('@') {
        Some((base, rank)) if !rank.is_empty() && rank.bytes().all(|b| b.is_ascii_digit()) => base,
        _ => url,
    }
}

/// The status and body of the response to `operation` at `router`, or why none came
/// (a body cut short by the client's timeout counts as none).
async fn answer(
    operation: &str,
    router: &str,
    r: reqwest::Result<reqwest::Response>,
) -> Result<(u16, String), AdminError> {
    let r = r.map_err(|e| AdminError::transport(operation, router, &e))?;
    let status = r.status().as_u16();
    let body = r
        .text()
        .await
        .map_err(|e| AdminError::transport(operation, router, &e))?;
    Ok((status, body))
}

impl Admin for VllmRouterAdmin {
    fn list<'a>(
        &'a self,
        http: &'a reqwest::Client,
        router: &'a str,
    ) -> BoxFuture<'a, Result<Vec<String>, AdminError>> {
        async move {
            let sent = http.get(format!("{router}/workers")).send().await;
            let (status, body) = answer("GET /workers", router, sent).await?;
            if status != 200 {
                return Err(format!("GET {router}/workers: {status} {}", body.trim()).into());
            }
            // Only each worker's `url` is read (a Router of every worker lists thousands,
            // each with its whole configuration), borrowed from the body.
            #[derive(serde::Deserialize)]
            struct Listed<'a> {
                #[serde(borrow, default)]
                workers: Vec<Worker<'a>>,
            }
            #[derive(serde::Deserialize)]
            struct Worker<'a> {
                #[serde(borrow, default)]
                url: Option<std::borrow::Cow<'a, str>>,
            }
            let listed: Listed = serde_json::from_str(&body)
                .map_err(|e| format!("GET {router}/workers: {e}: {}", body.trim()))?;
            let mut urls: Vec<String> = listed
                .workers
                .iter()
                .filter_map(|w| w.url.as_deref())
                .map(|u| base_url(u).to_string())
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
        // It adds regular workers only (its prefill/decode workers are on its command
        // line): the role is not sent.
        let worker = worker.url;
        async move {
            let r = http
                .post(format!("{router}/add_worker"))
                .query(&[("url", worker)])
                .send()
                .await;
            match answer("POST /add_worker", router, r).await? {
                (200, _) => Ok(()),
                (_, body) if body.contains("already exists") => Ok(()),
                (status, body) => Err(format!(
                    "{router} refused to add {worker}: {status} {}",
                    body.trim()
                )
                .into()),
            }
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
            let r = http
                .post(format!("{router}/remove_worker"))
                .query(&[("url", worker)])
                .send()
                .await;
            match answer("POST /remove_worker", router, r).await? {
                (200, _) => Ok(()),
                (status, body) => Err(format!(
                    "{router} refused to remove {worker}: {status} {}",
                    body.trim()
                )
                .into()),
            }
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

    /// A Router that takes the connection and never answers (SIGSTOPped, hung): the
    /// error says it timed out, at which Router, for which call.
    #[tokio::test]
    async fn a_router_that_never_answers_times_out_by_name() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let router = format!("http://{}", listener.local_addr().unwrap());
        let http = reqwest::Client::builder()
            .timeout(std::time::Duration::from_millis(300))
            .no_proxy()
            .build()
            .unwrap();
        let e = VllmRouterAdmin
            .add(
                &http,
                &router,
                Registration::regular("http://127.0.0.1:6100"),
            )
            .await
            .unwrap_err();
        assert!(
            matches!(&e, AdminError::Transport { operation, router: at, timed_out: true, .. }
                if operation == "POST /add_worker" && at == &router),
            "{e:?}"
        );
        assert_eq!(
            e.to_string(),
            format!("the Router at {router} did not answer `POST /add_worker` in time (timed out)")
        );
        drop(listener);
        let e = VllmRouterAdmin.list(&http, &router).await.unwrap_err();
        assert!(
            matches!(&e, AdminError::Transport { timed_out: false, operation, .. } if operation == "GET /workers"),
            "{e:?}"
        );
    }

    #[test]
    fn data_parallel_ranks_fold_to_the_base_url() {
        assert_eq!(base_url("http://10.0.0.1:6100@1"), "http://10.0.0.1:6100");
        assert_eq!(base_url("http://10.0.0.1:6100"), "http://10.0.0.1:6100");
        assert_eq!(base_url("http://u@host:1"), "http://u@host:1");
    }
}
