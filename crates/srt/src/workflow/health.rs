//! The `/health` probe refresh sends to every live worker: one `GET` on a plain
//! connection, read up to its status line.
//!
//! Not through the HTTP client the rest of srt uses: that one costs about 40 µs of CPU
//! per request (a pool, a task per connection, a parsed URL, an error value that holds
//! it), and a refresh probes every recorded worker of a deployment at once (24,576 at
//! the largest benchmark shape: a second on two cores). A probe needs a request line
//! and a status code.

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
