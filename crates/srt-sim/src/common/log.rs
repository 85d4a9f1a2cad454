//! Minimal log lines in vLLM's style (`INFO MM-DD hh:mm:ss [srt-vllm-sim] message`), on
//! stdout, so that an executor capturing the process output gets one line per event. The
//! tag is the binary's name ([`set_program`]).

use std::io::Write;
use std::sync::OnceLock;
use std::time::{SystemTime, UNIX_EPOCH};

static PROGRAM: OnceLock<&'static str> = OnceLock::new();

/// Names the binary in every line (`srt-vllm-sim`, `srt-sglang-sim`); set once, first.
pub(crate) fn set_program(name: &'static str) {
    let _ = PROGRAM.set(name);
}

fn program() -> &'static str {
    PROGRAM.get().copied().unwrap_or("srt-sim")
}

/// `MM-DD hh:mm:ss` in UTC.
fn stamp() -> String {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let days = (secs / 86_400) as i64;
    let tod = secs % 86_400;
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    format!(
        "{month:02}-{day:02} {:02}:{:02}:{:02}",
        tod / 3600,
        (tod / 60) % 60,
        tod % 60
    )
}

/// An informational line on stdout.
pub(crate) fn info(msg: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "INFO {} [{}] {msg}", stamp(), program());
    let _ = out.flush();
}

/// A warning line on stdout.
pub(crate) fn warn(msg: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "WARNING {} [{}] {msg}", stamp(), program());
    let _ = out.flush();
}

/// An error line on stderr.
pub(crate) fn error(msg: &str) {
    let mut err = std::io::stderr().lock();
    let _ = writeln!(err, "ERROR {} [{}] {msg}", stamp(), program());
    let _ = err.flush();
}
