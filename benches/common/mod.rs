//! What the apply benchmarks (`apply.rs`, `apply_dynamo.rs`, `apply_smg.rs`) share: where
//! the installed tools are, which `srt` to run, a plain HTTP GET, and how figures are
//! reduced and printed.
#![allow(dead_code)]

use std::ffi::OsString;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::PathBuf;
use std::time::Duration;

/// Where the install scripts put tools: `$SRT_TOOLS_DIR`, else the repository's `.tools`.
pub(crate) fn tools() -> PathBuf {
    std::env::var_os("SRT_TOOLS_DIR").map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".tools"),
        PathBuf::from,
    )
}

/// The directory holding `program`: `$SRT_TOOLS_DIR/bin`, the repository's `.tools/bin`,
/// then `PATH`.
pub(crate) fn tool_dir(program: &str) -> Option<PathBuf> {
    let mut dirs: Vec<PathBuf> = Vec::new();
    if let Some(d) = std::env::var_os("SRT_TOOLS_DIR") {
        dirs.push(PathBuf::from(d).join("bin"));
    }
    dirs.push(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".tools/bin"));
    if let Some(path) = std::env::var_os("PATH") {
        dirs.extend(std::env::split_paths(&path));
    }
    dirs.into_iter().find(|d| d.join(program).is_file())
}

/// The `srt` measured: `$SRT_BENCH_SRT` (another build, its `srt-vllm-sim` next to it),
/// else this build's.
pub(crate) fn srt_program() -> OsString {
    std::env::var_os("SRT_BENCH_SRT").unwrap_or_else(|| env!("CARGO_BIN_EXE_srt").into())
}

/// One HTTP/1.1 GET of `127.0.0.1:port`: the status and body, or `None` when nothing
/// answers.
pub(crate) fn get(port: u16, path: &str) -> Option<(u16, String)> {
    let mut s =
        TcpStream::connect_timeout(&([127, 0, 0, 1], port).into(), Duration::from_secs(2)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(5))).ok()?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut buf = String::new();
    s.read_to_string(&mut buf).ok()?;
    let status = buf.split_whitespace().nth(1)?.parse().ok()?;
    let body = buf.split_once("\r\n\r\n").map_or("", |b| b.1);
    Some((status, body.to_string()))
}

/// The JSON object of a body [`get`] returned: a chunked body still contains it whole,
/// between its first `{` and its last `}`.
pub(crate) fn json_body(body: &str) -> Option<serde_json::Value> {
    let json = body
        .find('{')
        .and_then(|s| body.rfind('}').map(|e| &body[s..=e]))?;
    serde_json::from_str(json).ok()
}

/// The median (the upper one of an even count).
pub(crate) fn median(mut v: Vec<Duration>) -> Duration {
    v.sort();
    v[v.len() / 2]
}

/// Whole milliseconds, without a unit.
pub(crate) fn ms(d: Duration) -> String {
    format!("{:.0}", d.as_secs_f64() * 1000.0)
}

/// A benchmark's command line (after `--`): `--smoke`, also the default without
/// `--bench` (as under `cargo test --all-targets`, which only checks the benchmark still
/// runs), `--workers a,b`, `--reps N`, and any other `--flag value`.
pub(crate) struct Options {
    args: Vec<String>,
    /// One small run only.
    pub smoke: bool,
}

impl Options {
    /// This process's options.
    pub(crate) fn parse() -> Options {
        let args: Vec<String> = std::env::args().skip(1).collect();
        let smoke = args.iter().any(|a| a == "--smoke") || !args.iter().any(|a| a == "--bench");
        Options { args, smoke }
    }

    /// The word after `flag`.
    pub(crate) fn value(&self, flag: &str) -> Option<String> {
        self.args
            .iter()
            .position(|a| a == flag)
            .and_then(|i| self.args.get(i + 1))
            .cloned()
    }

    /// `--workers a,b`, else 2 for a smoke run, else `bench`.
    pub(crate) fn workers(&self, bench: &[usize]) -> Vec<usize> {
        match self.value("--workers") {
            Some(w) => w
                .split(',')
                .map(|n| n.trim().parse().expect("--workers N,M"))
                .collect(),
            None if self.smoke => vec![2],
            None => bench.to_vec(),
        }
    }

    /// `--reps N`, else 1 for a smoke run, else `bench`.
    pub(crate) fn reps(&self, bench: usize) -> usize {
        self.value("--reps")
            .map(|r| r.parse().expect("--reps N"))
            .unwrap_or(if self.smoke { 1 } else { bench })
    }
}
