//! A load loop for the zero-downtime tests: completions through the public URL while
//! an apply runs, once one at a time, once several in flight; half of them streamed (a
//! stream counts only when it ends with `[DONE]`).

use super::Env;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Completions sent during an apply, and how they ended.
pub(crate) struct Load {
    stop: Arc<AtomicBool>,
    ok: Arc<AtomicUsize>,
    failed: Arc<Mutex<Vec<String>>>,
    /// When each failure happened, since the load started.
    failed_at: Arc<Mutex<Vec<Duration>>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Load {
    /// Start `in_flight` request loops against `url`, inside the scenario's namespace.
    pub(crate) fn start(env: &Env, url: &str, in_flight: usize) -> Load {
        let netns = env
            .netns
            .as_ref()
            .map(|n| format!("/var/run/netns/{}", n.name()));
        Load::start_in(netns, url, in_flight)
    }

    /// Start `in_flight` request loops against `url`, in the network namespace at
    /// `netns` (this process's own without one).
    pub(crate) fn start_in(netns: Option<String>, url: &str, in_flight: usize) -> Load {
        let stop = Arc::new(AtomicBool::new(false));
        let ok = Arc::new(AtomicUsize::new(0));
        let failed = Arc::new(Mutex::new(Vec::new()));
        let failed_at = Arc::new(Mutex::new(Vec::new()));
        let began = Instant::now();
        let (s, o, f, url) = (stop.clone(), ok.clone(), failed.clone(), url.to_string());
        let fa = failed_at.clone();
        let thread = std::thread::spawn(move || {
            if let Some(path) = netns {
                let ns = std::fs::File::open(path).unwrap();
                nix::sched::setns(ns, nix::sched::CloneFlags::CLONE_NEWNET).unwrap();
            }
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let client = reqwest::Client::builder()
                    .timeout(Duration::from_secs(30))
                    .no_proxy()
                    .build()
                    .unwrap();
                let loops = (0..in_flight).map(|k| {
                    let (client, s, o, f, url) =
                        (client.clone(), s.clone(), o.clone(), f.clone(), url.clone());
                    let fa = fa.clone();
                    async move {
                        let mut n = 0usize;
                        while !s.load(Ordering::SeqCst) {
                            n += 1;
                            let stream = (n + k).is_multiple_of(2);
                            match one(&client, &url, stream).await {
                                Ok(()) => {
                                    o.fetch_add(1, Ordering::SeqCst);
                                }
                                Err(e) => {
                                    f.lock().unwrap().push(e);
                                    fa.lock().unwrap().push(began.elapsed());
                                }
                            }
                        }
                    }
                });
                futures::future::join_all(loops).await;
            });
        });
        // Some traffic before the apply starts.
        let start = Instant::now();
        while ok.load(Ordering::SeqCst) < 10 {
            assert!(
                start.elapsed() < Duration::from_secs(20),
                "the load never got an answer: {:?}",
                failed.lock().unwrap()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        Load {
            stop,
            ok,
            failed,
            failed_at,
            thread: Some(thread),
        }
    }

    /// How many requests succeeded so far.
    pub(crate) fn ok(&self) -> usize {
        self.ok.load(Ordering::SeqCst)
    }

    /// How long requests kept failing: from the first failure to the last.
    pub(crate) fn failure_window(&self) -> Duration {
        let at = self.failed_at.lock().unwrap();
        match (at.first(), at.last()) {
            (Some(a), Some(b)) => *b - *a,
            _ => Duration::ZERO,
        }
    }

    /// Stop and return (succeeded, failures).
    pub(crate) fn finish(mut self) -> (usize, Vec<String>) {
        self.stop.store(true, Ordering::SeqCst);
        self.thread.take().unwrap().join().unwrap();
        let failed = self.failed.lock().unwrap().clone();
        (self.ok.load(Ordering::SeqCst), failed)
    }
}

/// One completion (streamed or not); `Err` says how it failed.
async fn one(client: &reqwest::Client, url: &str, stream: bool) -> Result<(), String> {
    let body = serde_json::json!({
        "model": "tiny", "prompt": "hello there", "max_tokens": 8, "stream": stream
    });
    let r = client
        .post(format!("{url}/v1/completions"))
        .json(&body)
        .send()
        .await
        .map_err(|e| format!("send: {e}"))?;
    let status = r.status();
    let text = r
        .text()
        .await
        .map_err(|e| format!("body ({status}): {e}"))?;
    if !status.is_success() {
        return Err(format!("{status}: {}", text.trim()));
    }
    if stream && !text.contains("[DONE]") {
        return Err(format!("stream cut short: {text:?}"));
    }
    Ok(())
}

/// Apply the recipe at `path` while `in_flight` requests at a time go through `url`
/// (then 0.3 s more); asserts none failed and some went through, naming the step
/// `what`. Returns the apply's output.
pub(crate) fn apply_failing_nothing(
    env: &Env,
    url: &str,
    path: &str,
    in_flight: usize,
    what: &str,
) -> String {
    let load = Load::start(env, url, in_flight);
    let out = env.apply(path);
    std::thread::sleep(Duration::from_millis(300));
    let (ok, failed) = load.finish();
    assert_no_failures(what, &out, ok, &failed);
    assert!(ok > 0, "{what}: no request went through\n{out}");
    out
}

/// No request of a load failed (`ok` went through, `failed` are the failures), during
/// `what`; `out` is shown with the failures.
pub(crate) fn assert_no_failures(what: &str, out: &str, ok: usize, failed: &[String]) {
    assert!(
        failed.is_empty(),
        "{what}: {} of {} requests failed: {:?}\n{out}",
        failed.len(),
        ok + failed.len(),
        &failed[..failed.len().min(10)]
    );
    eprintln!("{what}: {ok} requests, none failed");
}
