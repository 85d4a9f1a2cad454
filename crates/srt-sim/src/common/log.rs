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
    let (_, month, day) = civil_date((secs / 86_400) as i64);
    let tod = secs % 86_400;
    format!(
        "{month:02}-{day:02} {:02}:{:02}:{:02}",
        tod / 3600,
        (tod / 60) % 60,
        tod % 60
    )
}

/// The civil date (year, month, day) of a day counted from 1970-01-01 (Howard Hinnant's
/// algorithm).
pub(crate) fn civil_date(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
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

#[cfg(test)]
mod tests {
    use super::civil_date;

    #[test]
    fn civil_dates() {
        assert_eq!(civil_date(0), (1970, 1, 1));
        assert_eq!(civil_date(19_723), (2024, 1, 1));
        assert_eq!(civil_date(19_782), (2024, 2, 29));
    }
}
