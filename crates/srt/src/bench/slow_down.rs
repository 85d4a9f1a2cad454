//! srtctl's sa-bench slow-down: each measured level starts with the decode workers'
//! forward passes sleeping (`POST <server><path>` with `{"forward_sleep_time": s}`,
//! SGLang's `/slow_down`), so their batches fill up before they run at full speed; it is
//! turned off (`{"forward_sleep_time": null}`) `wait_seconds` after the level's requests
//! start, or when the level ends if that comes first.
//!
//! Unlike srtctl's client, which prints a warning and goes on, a slow-down that cannot be
//! set fails the run (the level would not measure what the recipe asks), and one that
//! cannot be turned off fails it naming the servers still slowed: they serve, slowly,
//! until it is turned off. An interrupted run turns it off through
//! [`super::Spec::release`].

use serde::{Deserialize, Serialize};
use std::time::Duration;

/// How long one request to a server's admin route may take.
const TIMEOUT: Duration = Duration::from_secs(30);

/// The slow-down of a run: where, how slow, how long.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SlowDown {
    /// Base URLs of the servers slowed (each decode worker's leader; placeholders such
    /// as `<node1-ip>` until apply resolves them).
    pub servers: Vec<String>,
    /// The engine's route that sets it (`/slow_down`).
    pub path: String,
    /// Seconds each forward pass sleeps.
    pub sleep_seconds: f64,
    /// Seconds after a level's requests start that it is turned off.
    pub wait_seconds: f64,
}

/// A slow-down in effect during one level.
pub(super) struct Window<'a> {
    slow: &'a SlowDown,
    client: &'a reqwest::Client,
    timer: tokio::task::JoinHandle<Result<(), String>>,
}

impl SlowDown {
    /// The same slow-down with each server's placeholders resolved.
    pub fn resolved(&self, resolve: &impl Fn(&str) -> String) -> SlowDown {
        SlowDown {
            servers: self.servers.iter().map(|s| resolve(s)).collect(),
            ..self.clone()
        }
    }

    /// Turn it on for a level: every server slowed, and a timer that turns it off after
    /// `wait_seconds`. A server that refuses fails it, turned off on every server first.
    pub(super) async fn start<'a>(
        &'a self,
        client: &'a reqwest::Client,
    ) -> Result<Window<'a>, String> {
        if let Err(e) = self.post(client, Some(self.sleep_seconds)).await {
            let undone = self.off(client).await.err();
            return Err(format!(
                "cannot slow the decode workers down: {e}{}",
                undone.map_or(String::new(), |u| format!("; {u}"))
            ));
        }
        let (me, http, wait) = (self.clone(), client.clone(), self.wait_seconds);
        let timer = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs_f64(wait)).await;
            me.off(&http).await
        });
        Ok(Window {
            slow: self,
            client,
            timer,
        })
    }

    /// Turn it off on every server, from a run that was interrupted (its own client).
    pub(super) async fn release(&self) -> Result<(), String> {
        let client = reqwest::Client::builder()
            .no_proxy()
            .build()
            .map_err(|e| format!("http client: {e}"))?;
        self.off(&client).await
    }

    /// Turn it off on every server.
    pub(super) async fn off(&self, client: &reqwest::Client) -> Result<(), String> {
        self.post(client, None).await.map_err(|e| {
            format!(
                "cannot turn the slow-down off: {e}; until it is, those workers' forward passes sleep {} s each (POST {} with {{\"forward_sleep_time\": null}})",
                self.sleep_seconds, self.path
            )
        })
    }

    /// `forward_sleep_time` to every server, in order; every failure.
    async fn post(&self, client: &reqwest::Client, sleep: Option<f64>) -> Result<(), String> {
        let mut failed = Vec::new();
        for server in &self.servers {
            let url = format!("{}{}", server.trim_end_matches('/'), self.path);
            let sent = client
                .post(&url)
                .timeout(TIMEOUT)
                .json(&serde_json::json!({ "forward_sleep_time": sleep }))
                .send()
                .await;
            match sent {
                Ok(r) if r.status().is_success() => {}
                Ok(r) => failed.push(format!("{url} answered {}", r.status())),
                Err(e) => failed.push(format!("{url}: {}", super::error_text(&e))),
            }
        }
        match failed.is_empty() {
            true => Ok(()),
            false => Err(failed.join(", ")),
        }
    }
}

impl Window<'_> {
    /// The level is over: the timer's outcome when it has fired, else it is turned off
    /// now.
    pub(super) async fn finish(self) -> Result<(), String> {
        if self.timer.is_finished() {
            return self
                .timer
                .await
                .unwrap_or_else(|e| Err(format!("slow-down timer: {e}")));
        }
        self.timer.abort();
        self.slow.off(self.client).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};

    /// A server recording each `forward_sleep_time` it is sent (answering `status`).
    async fn server(status: u16) -> (String, Arc<Mutex<Vec<serde_json::Value>>>) {
        use tokio::io::AsyncWriteExt;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = seen.clone();
        tokio::spawn(async move {
            while let Ok((mut sock, _)) = listener.accept().await {
                let Some(body) = super::super::tests::request_body(&mut sock).await else {
                    continue;
                };
                let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
                log.lock().unwrap().push(v["forward_sleep_time"].clone());
                let head = format!(
                    "HTTP/1.1 {status} X\r\ncontent-length: 0\r\nconnection: close\r\n\r\n"
                );
                let _ = sock.write_all(head.as_bytes()).await;
                let _ = sock.shutdown().await;
            }
        });
        (url, seen)
    }

    fn slow(servers: Vec<String>, wait_seconds: f64) -> SlowDown {
        SlowDown {
            servers,
            path: "/slow_down".into(),
            sleep_seconds: 0.5,
            wait_seconds,
        }
    }

    #[tokio::test]
    async fn a_level_shorter_than_the_wait_turns_it_off_at_its_end() {
        let (a, seen_a) = server(200).await;
        let (b, seen_b) = server(200).await;
        let s = slow(vec![a, b], 60.0);
        let http = reqwest::Client::new();
        let w = s.start(&http).await.unwrap();
        w.finish().await.unwrap();
        for seen in [seen_a, seen_b] {
            assert_eq!(
                *seen.lock().unwrap(),
                [serde_json::json!(0.5), serde_json::Value::Null]
            );
        }
    }

    #[tokio::test]
    async fn the_timer_turns_it_off_after_the_wait() {
        let (a, seen) = server(200).await;
        let s = slow(vec![a], 0.05);
        let http = reqwest::Client::new();
        let w = s.start(&http).await.unwrap();
        tokio::time::sleep(Duration::from_millis(500)).await;
        assert_eq!(seen.lock().unwrap().len(), 2, "off once the wait is over");
        w.finish().await.unwrap();
        assert_eq!(seen.lock().unwrap().len(), 2, "not sent again");
    }

    #[tokio::test]
    async fn a_server_that_refuses_fails_the_start_and_the_others_are_turned_off() {
        let (good, seen) = server(200).await;
        let (bad, _) = server(404).await;
        let s = slow(vec![good, bad.clone()], 60.0);
        let http = reqwest::Client::new();
        let e = s.start(&http).await.err().unwrap();
        assert!(e.contains(&format!("{bad}/slow_down answered 404")), "{e}");
        assert!(e.contains("cannot turn the slow-down off"), "{e}");
        assert_eq!(
            *seen.lock().unwrap(),
            [serde_json::json!(0.5), serde_json::Value::Null]
        );
    }

    #[test]
    fn placeholders_are_resolved_in_every_server() {
        let s = slow(vec!["http://<node1-ip>:30001".into()], 1.0);
        let r = s.resolved(&|u: &str| u.replace("<node1-ip>", "10.0.0.2"));
        assert_eq!(r.servers, ["http://10.0.0.2:30001"]);
        assert_eq!(r.path, s.path);
    }
}
