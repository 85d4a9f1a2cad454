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

use crate::frontend::Admin;
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

/// The status and body of a response, or the transport error.
async fn answer(r: reqwest::Result<reqwest::Response>) -> Result<(u16, String), String> {
    let r = r.map_err(|e| e.to_string())?;
    let status = r.status().as_u16();
    Ok((status, r.text().await.unwrap_or_default()))
}

impl Admin for VllmRouterAdmin {
    fn list<'a>(
        &'a self,
        http: &'a reqwest::Client,
        router: &'a str,
    ) -> BoxFuture<'a, Result<Vec<String>, String>> {
        async move {
            let (status, body) = answer(http.get(format!("{router}/workers")).send().await).await?;
            if status != 200 {
                return Err(format!("GET {router}/workers: {status} {}", body.trim()));
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
        worker: &'a str,
    ) -> BoxFuture<'a, Result<(), String>> {
        async move {
            let r = http
                .post(format!("{router}/add_worker"))
                .query(&[("url", worker)])
                .send()
                .await;
            match answer(r).await? {
                (200, _) => Ok(()),
                (_, body) if body.contains("already exists") => Ok(()),
                (status, body) => Err(format!(
                    "{router} refused to add {worker}: {status} {}",
                    body.trim()
                )),
            }
        }
        .boxed()
    }

    fn remove<'a>(
        &'a self,
        http: &'a reqwest::Client,
        router: &'a str,
        worker: &'a str,
    ) -> BoxFuture<'a, Result<(), String>> {
        async move {
            let r = http
                .post(format!("{router}/remove_worker"))
                .query(&[("url", worker)])
                .send()
                .await;
            match answer(r).await? {
                (200, _) => Ok(()),
                (status, body) => Err(format!(
                    "{router} refused to remove {worker}: {status} {}",
                    body.trim()
                )),
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
    use super::base_url;

    #[test]
    fn data_parallel_ranks_fold_to_the_base_url() {
        assert_eq!(base_url("http://10.0.0.1:6100@1"), "http://10.0.0.1:6100");
        assert_eq!(base_url("http://10.0.0.1:6100"), "http://10.0.0.1:6100");
        assert_eq!(base_url("http://u@host:1"), "http://u@host:1");
    }
}
