//! One attempt of a [`Probe`] over HTTP, and why it did not pass: apply's gates and
//! worker waits poll it, `srt status` and refresh judge a recorded process by it.
//!
//! A miss says whether what the probe asks answered ([`Miss::Short`]: it answered
//! without what the probe wants) or not ([`Miss::Unanswered`]): a worker judged by the
//! list another process keeps (its frontend's) is judged only when that process
//! answers.

use crate::launch::Probe;
use futures::future::{FutureExt, LocalBoxFuture};
use futures::StreamExt;
use std::time::Duration;

/// Timeout of one readiness request (`/health`, `/workers`, `/readiness`): they answer
/// at once or not at all.
pub(crate) const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);
/// Health checks in flight at once within one probe.
const HEALTH_CONCURRENCY: usize = 16;

/// Why one attempt of a probe did not pass.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Miss {
    /// Nothing answered as the probe needs: no connection, no answer in time, an answer
    /// that is not JSON where JSON is read. Nothing to judge the probed process by.
    #[error("{0}")]
    Unanswered(String),
    /// An answer came, without what the probe waits for (an error status, a count or a
    /// list short of its minimum, a completion without choices).
    #[error("{0}")]
    Short(String),
}

/// The JSON answer of `GET url` (whatever its status), or why there is none.
async fn json_of(client: &reqwest::Client, url: &str) -> Result<serde_json::Value, Miss> {
    let unanswered = |e: reqwest::Error| Miss::Unanswered(format!("{url}: {}", short(&e)));
    client
        .get(url)
        .timeout(REQUEST_TIMEOUT)
        .send()
        .await
        .map_err(unanswered)?
        .json()
        .await
        .map_err(unanswered)
}

/// A JSON answer, shared by the probes that asked for it.
type Answer = Result<std::sync::Arc<serde_json::Value>, Miss>;

/// JSON answers fetched once for every probe of one pass over many processes (refresh,
/// `srt status`): each worker's registration probe reads its frontend's `/health`, which
/// lists every worker, so without it a pass over n workers would fetch and parse n
/// answers of n instances each. The first probe asking for a URL fetches it; the others
/// wait for that answer.
#[derive(Default)]
pub struct Answers {
    by_url: std::sync::Mutex<
        std::collections::HashMap<String, futures::future::Shared<LocalBoxFuture<'static, Answer>>>,
    >,
}

impl Answers {
    /// The JSON answer of `GET url`, fetched by the first caller.
    async fn get(&self, client: &reqwest::Client, url: &str) -> Answer {
        let shared = {
            let mut by_url = self
                .by_url
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            by_url
                .entry(url.to_string())
                .or_insert_with(|| {
                    let (client, url) = (client.clone(), url.to_string());
                    let fetch: LocalBoxFuture<'static, Answer> =
                        Box::pin(
                            async move { json_of(&client, &url).await.map(std::sync::Arc::new) },
                        );
                    fetch.shared()
                })
                .clone()
        };
        shared.await
    }
}

/// `GET url` as JSON, through `answers` when the probe is one of a pass.
async fn answer(client: &reqwest::Client, url: &str, answers: Option<&Answers>) -> Answer {
    match answers {
        Some(answers) => answers.get(client, url).await,
        None => json_of(client, url).await.map(std::sync::Arc::new),
    }
}

/// The text of `GET url`: a 2xx answer's body, else why there is none (a process that
/// answers with an error status has said nothing yet).
async fn text_of(client: &reqwest::Client, url: &str) -> Result<String, Miss> {
    let unanswered = |e: reqwest::Error| Miss::Unanswered(format!("{url}: {}", short(&e)));
    let resp = client
        .get(url)
        .timeout(REQUEST_TIMEOUT)
        .send()
        .await
        .map_err(unanswered)?;
    if !resp.status().is_success() {
        return Err(Miss::Unanswered(format!("{url}: {}", resp.status())));
    }
    resp.text().await.map_err(unanswered)
}

/// One attempt of `probe`, its URLs resolved by `resolve`: what it saw when it passed,
/// else why not.
pub fn once<'a>(
    client: &'a reqwest::Client,
    probe: &'a Probe,
    resolve: &'a dyn Fn(&str) -> String,
) -> LocalBoxFuture<'a, Result<String, Miss>> {
    once_in(client, probe, resolve, None)
}

/// [`once`], with the JSON answers of a pass shared through `answers`.
pub fn once_in<'a>(
    client: &'a reqwest::Client,
    probe: &'a Probe,
    resolve: &'a dyn Fn(&str) -> String,
    answers: Option<&'a Answers>,
) -> LocalBoxFuture<'a, Result<String, Miss>> {
    Box::pin(attempt(client, probe, resolve, answers))
}

async fn attempt(
    client: &reqwest::Client,
    probe: &Probe,
    resolve: &dyn Fn(&str) -> String,
    answers: Option<&Answers>,
) -> Result<String, Miss> {
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
                return Err(Miss::Unanswered(format!(
                    "{url}: nothing follows `{after}` yet"
                )));
            };
            let then = then.with_learned(value);
            once_in(client, &then, resolve, answers)
                .await
                .map(|ok| format!("{value}: {ok}"))
        }
        Probe::JsonCounts { urls, path, .. } | Probe::JsonItems { urls, path, .. } => {
            for url in urls {
                let url = format!("{}{path}", resolve(url));
                let body = answer(client, &url, answers).await?;
                let short_of = shortfalls(probe, &body, resolve);
                if !short_of.is_empty() {
                    return Err(Miss::Short(format!("{url}: {}", short_of.join(", "))));
                }
            }
            Ok(match probe {
                Probe::JsonCounts { .. } => format!("{} answer(s) reach every count", urls.len()),
                _ => format!("{} answer(s) list every item", urls.len()),
            })
        }
        Probe::Http { urls, path } => every_url_answers(client, urls, path, resolve).await,
        Probe::Benchmark(_) | Probe::Command(_) => Err(Miss::Unanswered(
            "a benchmark is run by the gate, not polled".into(),
        )),
        Probe::Completion { url, model } => completion(client, &resolve(url), model).await,
    }
}

/// What a JSON answer lacks for `probe`: `have/minimum name` for every count or list
/// short of its minimum (empty when it has everything).
fn shortfalls(
    probe: &Probe,
    body: &serde_json::Value,
    resolve: &dyn Fn(&str) -> String,
) -> Vec<String> {
    match probe {
        Probe::JsonCounts { counts, .. } => counts
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
                (have < u64::from(c.at_least)).then(|| format!("{have}/{} {}", c.at_least, c.name))
            })
            .collect(),
        Probe::JsonItems { lists, .. } => lists
            .iter()
            .filter_map(|l| {
                let have = l.count(body, resolve);
                (have < l.at_least).then(|| format!("{have}/{} {}", l.at_least, l.name))
            })
            .collect(),
        _ => Vec::new(),
    }
}

/// `GET <url><path>` answers 2xx for every URL: a few at a time, results in URL order
/// (the first failing URL is the one reported, and nothing more is sent once it is
/// known).
async fn every_url_answers(
    client: &reqwest::Client,
    urls: &[String],
    path: &str,
    resolve: &dyn Fn(&str) -> String,
) -> Result<String, Miss> {
    let mut checks = futures::stream::iter(urls.iter().map(|url| {
        let url = format!("{}{path}", resolve(url));
        async move {
            let resp = client
                .get(&url)
                .timeout(REQUEST_TIMEOUT)
                .send()
                .await
                .map_err(|e| Miss::Unanswered(format!("{url}: {}", short(&e))))?;
            if !resp.status().is_success() {
                let status = resp.status();
                let text = resp.text().await.unwrap_or_default();
                return Err(Miss::Short(format!("{url}: {status} {}", text.trim())));
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

/// A one-token completion of `model` through `url` serves at least one choice.
async fn completion(client: &reqwest::Client, url: &str, model: &str) -> Result<String, Miss> {
    let url = format!("{url}/v1/completions");
    let body = serde_json::json!({ "model": model, "prompt": "srt smoke check", "max_tokens": 1 });
    let resp = client
        .post(&url)
        .json(&body)
        .send()
        .await
        .map_err(|e| Miss::Unanswered(format!("{url}: {}", short(&e))))?;
    let status = resp.status();
    let text = resp.text().await.unwrap_or_default();
    if !status.is_success() {
        return Err(Miss::Short(format!("{url}: {status} {}", text.trim())));
    }
    let v: serde_json::Value =
        serde_json::from_str(&text).map_err(|_| Miss::Short(format!("{url}: not JSON: {text}")))?;
    if v["choices"].as_array().is_none_or(std::vec::Vec::is_empty) {
        return Err(Miss::Short(format!("{url}: no choices in {text}")));
    }
    Ok("completion served".into())
}

/// A client error in a few words: `connection refused`, `timed out`, else its
/// innermost cause.
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::launch::{Field, Listed};
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    /// A server answering every request with `status` and `body`; its base URL.
    async fn server(status: &'static str, body: &'static str) -> String {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move {
            loop {
                let (mut s, _) = listener.accept().await.unwrap();
                tokio::spawn(async move {
                    let mut request = Vec::new();
                    let mut buf = [0u8; 512];
                    while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                        let n = s.read(&mut buf).await.unwrap();
                        request.extend_from_slice(&buf[..n]);
                    }
                    let answer = format!(
                        "HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                        body.len()
                    );
                    s.write_all(answer.as_bytes()).await.unwrap();
                });
            }
        });
        url
    }

    /// A base URL nothing listens on.
    async fn closed() -> String {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        format!("http://{}", listener.local_addr().unwrap())
    }

    /// A probe that `url`'s `/health` lists an instance of namespace `d` whose
    /// transport starts with `<node0-ip>:<port>/`.
    fn listed(url: &str, port: u16) -> Probe {
        Probe::JsonItems {
            urls: vec![url.to_string()],
            path: "/health".into(),
            lists: vec![Listed {
                name: "`w` registered".into(),
                array: "/instances".into(),
                fields: vec![
                    Field {
                        pointer: "/namespace".into(),
                        value: "d".into(),
                        prefix: false,
                    },
                    Field {
                        pointer: "/transport/tcp".into(),
                        value: format!("<node0-ip>:{port}/"),
                        prefix: true,
                    },
                ],
                at_least: 1,
            }],
        }
    }

    fn http() -> reqwest::Client {
        reqwest::Client::builder().no_proxy().build().unwrap()
    }

    fn resolve(s: &str) -> String {
        s.replace("<node0-ip>", "10.0.0.1")
    }

    const LIST: &str = r#"{"instances":[{"namespace":"d","transport":{"tcp":"10.0.0.1:7000/a"}}]}"#;

    #[tokio::test]
    async fn a_list_passes_with_the_item_and_is_short_without_it() {
        let client = http();
        let url = server("200 OK", LIST).await;
        let seen = once(&client, &listed(&url, 7000), &resolve).await;
        assert_eq!(seen, Ok("1 answer(s) list every item".to_string()));
        let seen = once(&client, &listed(&url, 7001), &resolve).await;
        assert_eq!(
            seen,
            Err(Miss::Short(format!("{url}/health: 0/1 `w` registered")))
        );
        // A JSON answer counts whatever its status.
        let url = server("503 Service Unavailable", LIST).await;
        assert!(once(&client, &listed(&url, 7000), &resolve).await.is_ok());
    }

    #[tokio::test]
    async fn a_list_nobody_answers_is_unanswered_not_short() {
        let client = http();
        let url = closed().await;
        let seen = once(&client, &listed(&url, 7000), &resolve).await;
        assert!(
            matches!(&seen, Err(Miss::Unanswered(why)) if why.contains("connection refused")),
            "{seen:?}"
        );
        let url = server("200 OK", "<html>not json</html>").await;
        let seen = once(&client, &listed(&url, 7000), &resolve).await;
        assert!(matches!(seen, Err(Miss::Unanswered(_))), "{seen:?}");
    }

    #[tokio::test]
    async fn a_get_is_short_on_an_error_status_and_unanswered_without_a_connection() {
        let client = http();
        let get = |url: String| Probe::Http {
            urls: vec![url],
            path: "/health".into(),
        };
        let url = server("200 OK", "{}").await;
        assert!(once(&client, &get(url), &resolve).await.is_ok());
        let url = server("503 Service Unavailable", "{}").await;
        let seen = once(&client, &get(url.clone()), &resolve).await;
        assert_eq!(
            seen,
            Err(Miss::Short(format!(
                "{url}/health: 503 Service Unavailable {{}}"
            )))
        );
        let seen = once(&client, &get(closed().await), &resolve).await;
        assert!(matches!(seen, Err(Miss::Unanswered(_))), "{seen:?}");
    }
}
