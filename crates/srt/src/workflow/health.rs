//! How refresh and `srt status` judge a live process by the health probe its record
//! holds ([`crate::launch::Probe`]).
//!
//! A `GET` probe (a process that serves HTTP itself) is one `GET` on a plain
//! connection, read up to its status line: not through the HTTP client the rest of srt
//! uses, which costs about 40 µs of CPU per request (a pool, a task per connection, a
//! parsed URL, an error value that holds it), while a refresh probes every recorded
//! worker of a deployment at once (24,576 at the largest benchmark shape: a second on
//! two cores). A probe needs a request line and a status code.
//!
//! Any other probe (a worker its frontend lists) runs as apply runs it
//! ([`crate::probe::once`]), and judges the process only when what it asks answered: a
//! frontend that is down makes no worker unhealthy, it is itself what drifted.

use crate::probe::Miss;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// What one probe saw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Probe {
    /// A 2xx status.
    Healthy,
    /// No connection (refused, unreachable): nothing listens there yet, or any more.
    NotListening,
    /// Another status.
    Answered(u16),
    /// No status line within the time allowed.
    Silent,
    /// The connection failed after it was made, or the answer was not HTTP.
    Failed(String),
}

/// One `GET` of `url` (`http://host:port/path`), bounded by `timeout`.
pub async fn probe(url: &str, timeout: Duration) -> Probe {
    let Some((authority, path)) = url
        .strip_prefix("http://")
        .map(|rest| rest.split_at(rest.find('/').unwrap_or(rest.len())))
    else {
        return Probe::Failed(format!("{url} is not an http:// URL"));
    };
    let path = if path.is_empty() { "/" } else { path };
    let exchange = async {
        let Ok(mut stream) = tokio::net::TcpStream::connect(authority).await else {
            return Probe::NotListening;
        };
        let request =
            format!("GET {path} HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\n\r\n");
        if let Err(e) = stream.write_all(request.as_bytes()).await {
            return Probe::Failed(e.to_string());
        }
        let mut head = Vec::with_capacity(64);
        let mut buf = [0u8; 512];
        while !head.contains(&b'\n') && head.len() < 4096 {
            match stream.read(&mut buf).await {
                Ok(0) => break,
                Ok(n) => head.extend_from_slice(&buf[..n]),
                Err(e) => return Probe::Failed(e.to_string()),
            }
        }
        match status_code(&head) {
            Some(code) if (200..300).contains(&code) => Probe::Healthy,
            Some(code) => Probe::Answered(code),
            None if head.is_empty() => Probe::Failed("closed without an answer".into()),
            None => Probe::Failed("answered something other than HTTP".into()),
        }
    };
    tokio::time::timeout(timeout, exchange)
        .await
        .unwrap_or(Probe::Silent)
}

/// The status code of an HTTP/1.x status line at the start of `head`.
fn status_code(head: &[u8]) -> Option<u16> {
    let line = head.split(|&b| b == b'\n').next()?;
    let rest = line
        .strip_prefix(b"HTTP/1.")?
        .get(1..)?
        .strip_prefix(b" ")?;
    let code = std::str::from_utf8(rest.get(..3)?).ok()?;
    code.bytes()
        .all(|b| b.is_ascii_digit())
        .then(|| code.parse().ok())?
}

/// Whether a process at `url` is unhealthy: it accepts connections but `/health` does
/// not answer 2xx at any probe within `grace` (probed every 0.5 s, each probe bounded by
/// a second). A refused connection is not judged: a starting engine binds its port
/// only once it is up, and a dead one is liveness's business.
pub async fn unhealthy(url: &str, grace: Duration) -> Option<String> {
    let start = Instant::now();
    let per_probe = grace.min(Duration::from_secs(1));
    loop {
        let last = match probe(url, per_probe).await {
            Probe::Healthy | Probe::NotListening => return None,
            Probe::Answered(code) => format!("{url} answered {code}"),
            Probe::Silent => format!("{url} did not answer"),
            Probe::Failed(e) => format!("{url} failed: {e}"),
        };
        if start.elapsed() >= grace {
            return Some(format!("unhealthy: {last} for {}s", grace.as_secs()));
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

/// A process's health as `srt status` shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Health {
    /// Its probe passed.
    Healthy,
    /// Its probe failed.
    Unhealthy,
    /// What its probe asks (another process) did not answer: nothing to tell.
    Unknown,
}

/// One look at `probe`, each request bounded by `timeout`: a `GET` probe is healthy when
/// every URL answers 2xx; another probe is unknown when what it asks did not answer.
pub async fn look(
    probe: &crate::launch::Probe,
    resolve: &dyn Fn(&str) -> String,
    (client, answers): (&reqwest::Client, &crate::probe::Answers),
    timeout: Duration,
) -> Health {
    if let crate::launch::Probe::Http { urls, path } = probe {
        for url in urls {
            if self::probe(&format!("{}{path}", resolve(url)), timeout).await != Probe::Healthy {
                return Health::Unhealthy;
            }
        }
        return Health::Healthy;
    }
    let attempt = crate::probe::once_in(client, probe, resolve, Some(answers));
    match tokio::time::timeout(timeout, attempt).await {
        Ok(Ok(_)) => Health::Healthy,
        Ok(Err(Miss::Short(_))) => Health::Unhealthy,
        Ok(Err(Miss::Unanswered(_))) | Err(_) => Health::Unknown,
    }
}

/// Whether the live process `probe` checks has failed it for `grace`, and how: a `GET`
/// probe through [`unhealthy`], any other through [`unlisted`].
pub async fn failing(
    probe: &crate::launch::Probe,
    resolve: &dyn Fn(&str) -> String,
    (client, answers): (&reqwest::Client, &crate::probe::Answers),
    grace: Duration,
) -> Option<String> {
    let crate::launch::Probe::Http { urls, path } = probe else {
        return unlisted(probe, resolve, (client, answers), grace).await;
    };
    for url in urls {
        let found = unhealthy(&format!("{}{path}", resolve(url)), grace).await;
        if found.is_some() {
            return found;
        }
    }
    None
}

/// Whether a worker judged by its frontend's answer (`probe`: the frontend lists it)
/// is missing from it at every attempt within `grace` (every 0.5 s, each bounded by a
/// second). Judged only while the frontend answers: one that does not (down, stopped,
/// not answering JSON) makes the worker neither listed nor missing, it is what drifted.
/// The first attempt reads the answers of the pass (`answers`: one fetch per frontend
/// for every worker); a worker missing from them is asked again on its own.
pub async fn unlisted(
    probe: &crate::launch::Probe,
    resolve: &dyn Fn(&str) -> String,
    (client, answers): (&reqwest::Client, &crate::probe::Answers),
    grace: Duration,
) -> Option<String> {
    let start = Instant::now();
    let per_attempt = grace.min(Duration::from_secs(1));
    let mut shared = Some(answers);
    loop {
        let once = crate::probe::once_in(client, probe, resolve, shared.take());
        let attempt = tokio::time::timeout(per_attempt, once);
        let missing = match attempt.await {
            Ok(Err(Miss::Short(missing))) => missing,
            Ok(Ok(_) | Err(Miss::Unanswered(_))) | Err(_) => return None,
        };
        if start.elapsed() >= grace {
            return Some(format!(
                "not listed by the frontend for {}s: {missing}",
                grace.as_secs()
            ));
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::{Arc, Mutex};
    use tokio::net::TcpListener;

    #[test]
    fn status_lines() {
        assert_eq!(status_code(b"HTTP/1.1 200 OK\r\n"), Some(200));
        assert_eq!(
            status_code(b"HTTP/1.0 503 Service Unavailable\r\n"),
            Some(503)
        );
        assert_eq!(status_code(b"HTTP/1.1 204\r\n"), Some(204));
        assert_eq!(status_code(b"HTTP/1.1 20"), None);
        assert_eq!(status_code(b"HTTP/2 200\r\n"), None);
        assert_eq!(status_code(b"SSH-2.0-OpenSSH\r\n"), None);
        assert_eq!(status_code(b"HTTP/1.1 2x0 OK\r\n"), None);
        assert_eq!(status_code(b""), None);
    }

    /// A listener that answers every connection with `answer` (after reading the
    /// request head), or never answers when `None`; the requests it read.
    async fn server(answer: Option<&'static str>) -> (String, Arc<Mutex<Vec<String>>>) {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/health", listener.local_addr().unwrap());
        let seen = Arc::new(Mutex::new(Vec::new()));
        let requests = seen.clone();
        tokio::spawn(async move {
            loop {
                let (mut s, _) = listener.accept().await.unwrap();
                let requests = requests.clone();
                tokio::spawn(async move {
                    let mut request = Vec::new();
                    let mut buf = [0u8; 256];
                    while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                        let n = s.read(&mut buf).await.unwrap();
                        request.extend_from_slice(&buf[..n]);
                    }
                    requests
                        .lock()
                        .unwrap()
                        .push(String::from_utf8(request).unwrap());
                    match answer {
                        Some(a) => s.write_all(a.as_bytes()).await.unwrap(),
                        None => tokio::time::sleep(Duration::from_secs(30)).await,
                    }
                });
            }
        });
        (url, seen)
    }

    #[tokio::test]
    async fn probes_read_the_status_line() {
        let (url, seen) = server(Some("HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n")).await;
        assert_eq!(probe(&url, Duration::from_secs(5)).await, Probe::Healthy);
        let request = seen.lock().unwrap()[0].clone();
        assert!(
            request.starts_with("GET /health HTTP/1.1\r\nHost: 127.0.0.1:"),
            "{request}"
        );

        let (url, _) = server(Some("HTTP/1.1 503 Service Unavailable\r\n\r\n")).await;
        assert_eq!(
            probe(&url, Duration::from_secs(5)).await,
            Probe::Answered(503)
        );

        let (url, _) = server(Some("hello\n")).await;
        assert!(matches!(
            probe(&url, Duration::from_secs(5)).await,
            Probe::Failed(_)
        ));

        let (url, _) = server(None).await;
        let t = Instant::now();
        assert_eq!(probe(&url, Duration::from_millis(200)).await, Probe::Silent);
        assert!(t.elapsed() < Duration::from_secs(5));
    }

    #[tokio::test]
    async fn a_closed_port_is_not_judged() {
        // A port that was just free: nothing listens on it.
        let port = TcpListener::bind("127.0.0.1:0")
            .await
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let url = format!("http://127.0.0.1:{port}/health");
        assert_eq!(
            probe(&url, Duration::from_secs(5)).await,
            Probe::NotListening
        );
        assert_eq!(unhealthy(&url, Duration::from_secs(1)).await, None);
        let (url, _) = server(Some("HTTP/1.1 500 Internal Server Error\r\n\r\n")).await;
        let (said, seen) = (unhealthy(&url, Duration::from_secs(1)).await.unwrap(), url);
        assert!(
            said.starts_with(&format!("unhealthy: {seen} answered 500 for 1s")),
            "{said}"
        );
    }
}

/// The judgement of a worker by its frontend's list, and refresh's use of it.
#[cfg(test)]
mod listed {
    use super::*;
    use crate::exec::fake::FakeExecutor;
    use crate::launch::{Field, Listed};
    use crate::plan::Observation;
    use crate::probe::Answers;
    use crate::state::{ResourceState, State, Status};
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use tokio::net::TcpListener;

    /// A frontend whose `/health` lists one instance, at `127.0.0.1:7000` in namespace
    /// `d`: its base URL.
    async fn frontend() -> String {
        counted_frontend().await.0
    }

    /// [`frontend`], and how many requests it has answered.
    async fn counted_frontend() -> (String, Arc<AtomicUsize>) {
        let served = Arc::new(AtomicUsize::new(0));
        let counter = served.clone();
        const BODY: &str = r#"{"instances":[{"namespace":"d","transport":{"tcp":"127.0.0.1:7000/x/d/generate"}}]}"#;
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move {
            loop {
                let (mut s, _) = listener.accept().await.unwrap();
                let counter = counter.clone();
                tokio::spawn(async move {
                    let mut request = Vec::new();
                    let mut buf = [0u8; 512];
                    while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                        let n = s.read(&mut buf).await.unwrap();
                        request.extend_from_slice(&buf[..n]);
                    }
                    let answer = format!(
                        "HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{BODY}",
                        BODY.len()
                    );
                    s.write_all(answer.as_bytes()).await.unwrap();
                    counter.fetch_add(1, Ordering::SeqCst);
                });
            }
        });
        (url, served)
    }

    /// A base URL nothing listens on: a frontend that is down.
    async fn down() -> String {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        format!("http://{}", listener.local_addr().unwrap())
    }

    /// The probe of worker `name` registered with its RPC port `port`, asked of the
    /// frontend at `frontend`.
    fn registered(frontend: &str, name: &str, port: u16) -> crate::launch::Probe {
        crate::launch::Probe::JsonItems {
            urls: vec![frontend.to_string()],
            path: "/health".into(),
            lists: vec![Listed {
                name: format!("`{name}` registered"),
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
        s.replace("<node0-ip>", "127.0.0.1")
    }

    #[tokio::test]
    async fn a_worker_its_frontend_answers_without_is_unlisted_after_the_grace() {
        let url = frontend().await;
        let grace = Duration::from_millis(1200);
        let t = Instant::now();
        let listed = registered(&url, "w0", 7000);
        assert_eq!(
            unlisted(&listed, &resolve, (&http(), &Answers::default()), grace).await,
            None
        );
        assert!(t.elapsed() < grace, "a listed worker is judged at once");
        let missing = registered(&url, "w1", 7001);
        let said = unlisted(&missing, &resolve, (&http(), &Answers::default()), grace).await;
        assert!(t.elapsed() >= grace, "judged only after the grace");
        assert_eq!(
            said.as_deref(),
            Some(
                format!("not listed by the frontend for 1s: {url}/health: 0/1 `w1` registered")
                    .as_str()
            )
        );
        // `failing` sends it there; status sees the same.
        assert_eq!(
            failing(&missing, &resolve, (&http(), &Answers::default()), grace).await,
            said
        );
        let look = |p| async move {
            super::look(&p, &resolve, (&http(), &Answers::default()), grace).await
        };
        assert_eq!(look(listed).await, Health::Healthy);
        assert_eq!(look(missing).await, Health::Unhealthy);
    }

    /// One pass over many workers asks their frontend once: its answer lists them all.
    #[tokio::test]
    async fn one_pass_reads_a_frontends_answer_once_for_every_worker() {
        let (url, served) = counted_frontend().await;
        let (answers, client) = (Answers::default(), http());
        let probes: Vec<_> = (0..50).map(|_| registered(&url, "w0", 7000)).collect();
        let looks = probes
            .iter()
            .map(|p| unlisted(p, &resolve, (&client, &answers), Duration::from_secs(1)));
        let found = futures::future::join_all(looks).await;
        assert!(found.iter().all(Option::is_none), "{found:?}");
        assert_eq!(served.load(Ordering::SeqCst), 1);
        // Without the pass's answers each probe asks on its own.
        for p in &probes[..3] {
            assert_eq!(
                unlisted(
                    p,
                    &resolve,
                    (&http(), &Answers::default()),
                    Duration::from_secs(1)
                )
                .await,
                None
            );
        }
        assert_eq!(served.load(Ordering::SeqCst), 4);
    }

    #[tokio::test]
    async fn a_frontend_that_does_not_answer_makes_no_worker_unlisted() {
        let url = down().await;
        let probe = registered(&url, "w0", 7000);
        let t = Instant::now();
        assert_eq!(
            unlisted(
                &probe,
                &resolve,
                (&http(), &Answers::default()),
                Duration::from_secs(5)
            )
            .await,
            None
        );
        assert!(t.elapsed() < Duration::from_secs(5), "not waited out");
        let look = super::look(
            &probe,
            &resolve,
            (&http(), &Answers::default()),
            Duration::from_secs(1),
        )
        .await;
        assert_eq!(look, Health::Unknown);
    }

    /// Refresh judges each live worker by the probe its record holds: the one its
    /// frontend does not list is drift, with the reason; with the frontend down, none
    /// is; a process that is not a worker is not judged (it is alive: liveness).
    #[tokio::test]
    async fn refresh_finds_a_live_worker_its_frontend_does_not_list_gone() {
        let exec = FakeExecutor::new();
        let record = |probe| ResourceState {
            runtime: Some(exec.runtime("w")),
            health: Some(probe),
            ..ResourceState {
                kind: crate::graph::Kind::Worker,
                hash: String::new(),
                dependencies: Vec::new(),
                spec: crate::graph::Spec::of(&serde_json::json!({})),
                status: Status::Running,
                runtime: None,
                node: Some("node0".into()),
                ports: Default::default(),
                log_path: None,
                error: None,
                health: None,
                deposed: Vec::new(),
            }
        };
        let state_of = |url: &str| {
            let mut state = State::new("d");
            for (a, port) in [("w0", 7000), ("w1", 7001)] {
                let r = record(registered(url, a, port));
                state.resources.insert(a.into(), r);
            }
            state
        };
        let grace = Some(Duration::from_secs(1));
        let url = frontend().await;
        // `srt status` looks once: listed is healthy, missing unhealthy, a frontend that
        // is down tells nothing (running); a record without a probe (an older srt's) is
        // probed with `GET /health` on its HTTP port, here the frontend's.
        let mut state = state_of(&url);
        let mut older = record(registered(&url, "w2", 7002));
        older.health = None;
        let port = url.rsplit(':').next().unwrap().parse().unwrap();
        older.ports.insert("http".into(), port);
        state.resources.insert("w2".into(), older);
        let shown = crate::workflow::status::status(&state, &exec).await;
        let states: Vec<(&str, &str)> = shown
            .iter()
            .map(|r| (r.address.as_str(), r.state.as_str()))
            .collect();
        assert_eq!(
            states,
            [("w0", "healthy"), ("w1", "unhealthy"), ("w2", "healthy")]
        );
        let shown = crate::workflow::status::status(&state_of(&down().await), &exec).await;
        assert!(shown.iter().all(|r| r.state == "running"), "{shown:?}");
        let seen = crate::workflow::refresh_async(&state_of(&url), &exec, grace).await;
        assert_eq!(seen["w0"], Observation::Alive);
        let Observation::Gone(why) = &seen["w1"] else {
            panic!("{seen:?}");
        };
        assert!(
            why.starts_with("not listed by the frontend for 1s: "),
            "{why}"
        );
        // Without a grace refresh only observes.
        let seen = crate::workflow::refresh_async(&state_of(&url), &exec, None).await;
        assert_eq!(seen["w1"], Observation::Alive);
        // The frontend down: the workers are not judged by it.
        let seen = crate::workflow::refresh_async(&state_of(&down().await), &exec, grace).await;
        assert!(seen.values().all(|o| *o == Observation::Alive), "{seen:?}");
    }
}
