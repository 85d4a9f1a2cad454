//! The `SRT_SIM_*` environment knobs every simulator reads (startup, faults, timing), and
//! the readers an engine's own knobs use.

use std::collections::HashMap;
use std::time::Duration;

use super::sched::Timing;

/// The knobs every simulator reads (see the crate docs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Knobs {
    /// `SRT_SIM_STARTUP_DELAY_MS` (200).
    pub startup_delay: Duration,
    /// `SRT_SIM_EXIT_DURING_STARTUP`: exit with this code half-way through startup.
    pub exit_during_startup: Option<i32>,
    /// `SRT_SIM_EXIT_AFTER_MS`: exit 1 this long after becoming healthy.
    pub exit_after: Option<Duration>,
    /// `SRT_SIM_UNHEALTHY_AFTER_MS`: `/health` answers 503 this long after becoming healthy.
    pub unhealthy_after: Option<Duration>,
    /// `SRT_SIM_TOKEN_DELAY_MS` (0): time per generated token.
    pub token_delay: Duration,
    /// `SRT_SIM_DECODE_US_PER_SEQ` (0): added to a step per decoding sequence.
    pub decode_per_seq: Duration,
    /// `SRT_SIM_PREFILL_US_PER_TOKEN` (0): a step's time per prompt token it prefills.
    pub prefill_per_token: Duration,
}

/// The value of `key`, trimmed, when set and not empty.
fn var<'e>(env: &'e HashMap<String, String>, key: &str) -> Option<&'e str> {
    env.get(key).map(|s| s.trim()).filter(|s| !s.is_empty())
}

/// `key` as a number of milliseconds.
pub(crate) fn env_ms(env: &HashMap<String, String>, key: &str) -> Result<Option<Duration>, String> {
    var(env, key)
        .map(|v| {
            v.parse::<u64>()
                .map(Duration::from_millis)
                .map_err(|_| format!("{key} must be a number of milliseconds, got '{v}'"))
        })
        .transpose()
}

/// `key` as a number of microseconds.
pub(crate) fn env_us(env: &HashMap<String, String>, key: &str) -> Result<Option<Duration>, String> {
    var(env, key)
        .map(|v| {
            v.parse::<u64>()
                .map(Duration::from_micros)
                .map_err(|_| format!("{key} must be a number of microseconds, got '{v}'"))
        })
        .transpose()
}

/// `key` as a switch: on unless `0`, `false`, `no` or `off`.
pub(crate) fn env_on(env: &HashMap<String, String>, key: &str) -> bool {
    !matches!(
        env.get(key)
            .map(|s| s.trim().to_ascii_lowercase())
            .as_deref(),
        Some("0" | "false" | "no" | "off")
    )
}

impl Knobs {
    /// Reads the knobs from `env`.
    pub fn from_env(env: &HashMap<String, String>) -> Result<Knobs, String> {
        let exit_during_startup = var(env, "SRT_SIM_EXIT_DURING_STARTUP")
            .map(|v| {
                v.parse::<i32>().map_err(|_| {
                    format!("SRT_SIM_EXIT_DURING_STARTUP must be an exit code, got '{v}'")
                })
            })
            .transpose()?;
        Ok(Knobs {
            startup_delay: env_ms(env, "SRT_SIM_STARTUP_DELAY_MS")?
                .unwrap_or(Duration::from_millis(200)),
            exit_during_startup,
            exit_after: env_ms(env, "SRT_SIM_EXIT_AFTER_MS")?,
            unhealthy_after: env_ms(env, "SRT_SIM_UNHEALTHY_AFTER_MS")?,
            token_delay: env_ms(env, "SRT_SIM_TOKEN_DELAY_MS")?.unwrap_or_default(),
            decode_per_seq: env_us(env, "SRT_SIM_DECODE_US_PER_SEQ")?.unwrap_or_default(),
            prefill_per_token: env_us(env, "SRT_SIM_PREFILL_US_PER_TOKEN")?.unwrap_or_default(),
        })
    }

    /// The timing model: these costs and an engine's scheduler limits.
    pub fn timing(&self, max_num_seqs: usize, max_batched_tokens: u64) -> Timing {
        Timing {
            step: self.token_delay,
            per_seq: self.decode_per_seq,
            prefill_per_token: self.prefill_per_token,
            max_num_seqs,
            max_batched_tokens,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn defaults_and_values() {
        let k = Knobs::from_env(&env(&[])).unwrap();
        assert_eq!(k.startup_delay, Duration::from_millis(200));
        assert_eq!(k.exit_during_startup, None);
        let k = Knobs::from_env(&env(&[
            ("SRT_SIM_STARTUP_DELAY_MS", "5"),
            ("SRT_SIM_EXIT_DURING_STARTUP", "3"),
            ("SRT_SIM_DECODE_US_PER_SEQ", "7"),
        ]))
        .unwrap();
        assert_eq!(k.startup_delay, Duration::from_millis(5));
        assert_eq!(k.exit_during_startup, Some(3));
        assert_eq!(k.decode_per_seq, Duration::from_micros(7));
        assert!(Knobs::from_env(&env(&[("SRT_SIM_STARTUP_DELAY_MS", "soon")])).is_err());
        assert!(!env_on(&env(&[("X", "off")]), "X"));
        assert!(env_on(&env(&[]), "X"));
    }
}
