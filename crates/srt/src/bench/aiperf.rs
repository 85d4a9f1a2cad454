//! The aiperf release srt's trace replays run where the image has none, and whether a
//! recipe's pip requirement for aiperf (srtctl's `aiperf_package`) admits it.

/// The aiperf release srt installs where none is (0.9.0 to 0.13.0 cannot load a
/// tokenizer from a directory while they build a trace's prompts), and whose command
/// line the catalog is of (`bench/catalog/aiperf-0.8.0.json`).
pub const AIPERF_VERSION: &str = "0.8.0";

/// Whether `requirement` (`aiperf`, `aiperf>=0.7.0`, `aiperf>=0.7,<0.9`: PEP 508's
/// name and version specifiers, releases of numbers only) admits [`AIPERF_VERSION`];
/// why not, or why it cannot be read.
pub fn aiperf_requirement(requirement: &str) -> Result<(), String> {
    let text: String = requirement.chars().filter(|c| !c.is_whitespace()).collect();
    let Some(specifiers) = text.strip_prefix("aiperf") else {
        return Err(format!("`{requirement}` is not a requirement for aiperf"));
    };
    let pinned = release(AIPERF_VERSION).unwrap_or_default();
    for spec in specifiers.split(',').filter(|s| !s.is_empty()) {
        let (op, version) = ["~=", "==", "!=", ">=", "<=", ">", "<"]
            .iter()
            .find_map(|op| spec.strip_prefix(op).map(|v| (*op, v)))
            .ok_or_else(|| format!("cannot read `{spec}` of `{requirement}`"))?;
        let wanted = release(version)
            .ok_or_else(|| format!("cannot read the version `{version}` of `{requirement}`"))?;
        if !admits(op, &pinned, &wanted) {
            return Err(format!(
                "`{requirement}` excludes aiperf {AIPERF_VERSION}, the release srt runs"
            ));
        }
    }
    Ok(())
}

/// A release's numbers (`0.7.0` is `[0, 7, 0]`); `None` for anything else (a
/// pre-release, a wildcard).
fn release(version: &str) -> Option<Vec<u64>> {
    version.split('.').map(|n| n.parse().ok()).collect()
}

/// Whether `have` satisfies `op wanted`, releases compared with trailing zeros padded
/// (`0.8` is `0.8.0`), as PEP 440 compares them.
fn admits(op: &str, have: &[u64], wanted: &[u64]) -> bool {
    let len = have.len().max(wanted.len());
    let pad = |v: &[u64]| {
        let mut v = v.to_vec();
        v.resize(len, 0);
        v
    };
    let (a, b) = (pad(have), pad(wanted));
    match op {
        "==" => a == b,
        "!=" => a != b,
        ">=" => a >= b,
        "<=" => a <= b,
        ">" => a > b,
        "<" => a < b,
        // `~=X.Y.Z`: at least X.Y.Z, and the same X.Y.
        _ => a >= b && wanted.len() >= 2 && a[..wanted.len() - 1] == b[..wanted.len() - 1],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requirements_the_pinned_release_meets_are_accepted() {
        for ok in [
            "aiperf",
            "aiperf>=0.7.0",
            "aiperf >= 0.8",
            "aiperf>=0.7,<0.9",
            "aiperf==0.8.0",
            "aiperf~=0.8.0",
            "aiperf!=0.9.0",
        ] {
            assert_eq!(aiperf_requirement(ok), Ok(()), "{ok}");
        }
    }

    #[test]
    fn requirements_it_does_not_meet_or_that_cannot_be_read_are_refused() {
        for (bad, why) in [
            ("aiperf>=0.9.0", "excludes aiperf 0.8.0"),
            ("aiperf<0.8", "excludes"),
            ("aiperf~=0.7.0", "excludes"),
            ("aiperf==0.8.*", "cannot read the version"),
            ("genai-perf>=0.1", "not a requirement for aiperf"),
            ("aiperf=0.8.0", "cannot read `=0.8.0`"),
        ] {
            let e = aiperf_requirement(bad).unwrap_err();
            assert!(e.contains(why), "{bad}: {e}");
        }
    }
}
