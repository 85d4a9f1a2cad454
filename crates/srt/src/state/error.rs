//! Errors of the state store and the deployment lock.
//!
//! Every variant carries what the user needs to recover: the help text of each
//! diagnostic names the command to run (restore the backup, upgrade `srt`, wait for or
//! stop the lock holder).

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use miette::Diagnostic;

use super::lock::LockInfo;

/// An error reading, writing or locking a deployment's state.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum StateError {
    /// The state file exists but is not a valid state (bad or truncated JSON, missing
    /// fields, an unknown format version). It was left untouched.
    #[error("state file {} is corrupt: {detail}", path.display())]
    Corrupt {
        /// The state file.
        path: PathBuf,
        /// What is wrong with it (the parser's message, with line and column).
        detail: String,
        /// The backup of the previous state, if one exists.
        backup: Option<PathBuf>,
    },

    /// The state file was written by a newer `srt` with a format this build cannot read.
    #[error(
        "state file {} has format version {found}, but this srt ({}) supports up to {supported}",
        path.display(),
        env!("CARGO_PKG_VERSION")
    )]
    NewerFormat {
        /// The state file.
        path: PathBuf,
        /// The format version found in the file.
        found: u32,
        /// The newest format version this build supports.
        supported: u32,
        /// The `srt_version` recorded in the file, when it could be read.
        written_by: Option<String>,
    },

    /// A file operation on the state directory failed.
    #[error("cannot {action} {}: {source}", path.display())]
    Io {
        /// What was being done, e.g. "read", "write", "rename", "lock".
        action: &'static str,
        /// The file or directory concerned.
        path: PathBuf,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },

    /// Another process holds the deployment lock.
    #[error("{}", LockedMessage { holder: holder.as_deref(), waited: *waited, path })]
    Locked {
        /// The lock file.
        path: PathBuf,
        /// Who holds the lock, as recorded in the lock file; `None` when the holder
        /// did not record itself (e.g. a `flock` command run by hand).
        holder: Option<Box<LockInfo>>,
        /// How long we waited before giving up, when asked to wait.
        waited: Option<Duration>,
    },

    /// The state being saved belongs to another state history than the one on disk.
    #[error(
        "refusing to overwrite state {}: it has lineage {on_disk}, the state being saved has lineage {ours}",
        path.display()
    )]
    LineageMismatch {
        /// The state file.
        path: PathBuf,
        /// Lineage of the state on disk.
        on_disk: String,
        /// Lineage of the state being saved.
        ours: String,
    },

    /// The state on disk is newer than the one being saved: it changed after the state
    /// being saved was loaded, and saving would lose that change.
    #[error(
        "refusing to overwrite state {}: it is at serial {on_disk}, newer than the serial {ours} being saved",
        path.display()
    )]
    StaleSerial {
        /// The state file.
        path: PathBuf,
        /// Serial of the state on disk.
        on_disk: u64,
        /// Serial of the state being saved.
        ours: u64,
    },

    /// The lock passed to a save is not the lock of this store's directory.
    #[error(
        "the lock {} does not guard the state in {}",
        lock.display(),
        dir.display()
    )]
    WrongLock {
        /// The lock file the save was given.
        lock: PathBuf,
        /// The directory of the store being saved to.
        dir: PathBuf,
    },

    /// The state could not be serialized.
    #[error("cannot serialize the state: {0}")]
    Encode(#[source] serde_json::Error),
}

impl StateError {
    /// Whether the filesystem holding the state is full (no space, or over quota): the
    /// state could not be written, nothing of it was lost.
    pub fn is_no_space(&self) -> bool {
        matches!(self, StateError::Io { source, .. } if crate::files::is_no_space(source))
    }

    /// The refusal of a path srt does not trust, if that is what this is.
    pub fn untrusted(&self) -> Option<&crate::files::Untrusted> {
        match self {
            StateError::Io { source, .. } => crate::files::Untrusted::of(source),
            _ => None,
        }
    }

    /// Wraps an I/O error with the action and the path it concerns.
    pub(crate) fn io(action: &'static str, path: &Path, source: std::io::Error) -> Self {
        StateError::Io {
            action,
            path: path.to_path_buf(),
            source,
        }
    }
}

/// Shell-quotes a path for a command shown in a help text.
fn sh(path: &Path) -> String {
    let text = path.to_string_lossy();
    shlex::try_quote(&text)
        .map(std::borrow::Cow::into_owned)
        .unwrap_or_else(|_| text.into_owned())
}

impl Diagnostic for StateError {
    fn code<'a>(&'a self) -> Option<Box<dyn fmt::Display + 'a>> {
        let code = match self {
            StateError::Corrupt { .. } => "srt::state::corrupt",
            StateError::NewerFormat { .. } => "srt::state::newer_format",
            StateError::Io { .. } if self.untrusted().is_some() => "srt::state::untrusted",
            StateError::Io { .. } if self.is_no_space() => "srt::state::no_space",
            StateError::Io { .. } => "srt::state::io",
            StateError::Locked { .. } => "srt::state::locked",
            StateError::LineageMismatch { .. } => "srt::state::lineage_mismatch",
            StateError::StaleSerial { .. } => "srt::state::stale_serial",
            StateError::WrongLock { .. } => "srt::state::wrong_lock",
            StateError::Encode(_) => "srt::state::encode",
        };
        Some(Box::new(code))
    }

    fn help<'a>(&'a self) -> Option<Box<dyn fmt::Display + 'a>> {
        let help = match self {
            StateError::Corrupt { path, .. }
                if path.file_name() == Some(std::ffi::OsStr::new(super::JOURNAL_FILE)) =>
            {
                let aside = format!("{}.corrupt", path.to_string_lossy());
                format!(
                    "the journal was left untouched. Set it aside to fall back to state.json as \
                     the interrupted apply found it (what that apply launched since is then \
                     unknown to srt; stop those processes first):\n  mv {} {}",
                    sh(path),
                    sh(Path::new(&aside))
                )
            }
            StateError::Corrupt { path, backup, .. } => {
                let aside = format!("{}.corrupt", path.to_string_lossy());
                let start_over = format!(
                    "set it aside and start a fresh state (srt then forgets what it \
                     launched; stop those processes first):\n  mv {} {}",
                    sh(path),
                    sh(Path::new(&aside))
                );
                match backup {
                    Some(b) => format!(
                        "the file was left untouched. Restore the previous state:\n  cp {} {}\n\
                         or {start_over}",
                        sh(b),
                        sh(path),
                    ),
                    None => format!(
                        "the file was left untouched and there is no usable backup; \
                         {start_over}"
                    ),
                }
            }
            StateError::NewerFormat { written_by, .. } => match written_by {
                Some(v) => format!("upgrade srt to {v} or later to work with this deployment"),
                None => "upgrade srt to work with this deployment".to_string(),
            },
            StateError::Io { .. } if self.untrusted().is_some() => {
                crate::files::Untrusted::HELP.to_string()
            }
            StateError::Io { path, .. } if self.is_no_space() => format!(
                "the filesystem holding {} is full: free space there and run the command \
                 again (state is only ever replaced whole, so nothing recorded was lost)",
                sh(path)
            ),
            StateError::Io { source, path, .. } => match source.kind() {
                std::io::ErrorKind::PermissionDenied => format!(
                    "check the ownership and permissions of {} (srt keeps state files 0600 \
                     in a 0700 directory owned by the user running it)",
                    sh(path)
                ),
                _ => return None,
            },
            StateError::Locked { holder, .. } => locked_help(holder.as_deref()),
            StateError::LineageMismatch { .. } => "the state being saved was not loaded from \
                this deployment directory; load the state from the directory before \
                changing it, or move the existing state.json aside if it belongs to \
                another deployment"
                .to_string(),
            StateError::StaleSerial { .. } => "another srt run changed the state after this \
                one loaded it; re-run the command so that it starts from the current state"
                .to_string(),
            StateError::WrongLock { .. } => "this is a bug in srt: a state must be saved \
                under the lock of its own directory"
                .to_string(),
            StateError::Encode(_) => return None,
        };
        Some(Box::new(help))
    }
}

/// The help text of [`StateError::Locked`].
fn locked_help(holder: Option<&LockInfo>) -> String {
    let retry = "wait for it to finish, or pass --lock-timeout to wait for the lock";
    match holder {
        Some(h) => {
            let here = nix::unistd::gethostname()
                .map(|n| n.to_string_lossy() == h.host.as_str())
                .unwrap_or(false);
            if here {
                format!(
                    "{retry}. If it is stuck, interrupt it with `kill -INT {}`: the lock is \
                     released as soon as that process exits",
                    h.pid
                )
            } else {
                format!(
                    "{retry}. The holder runs on another host ({}); if it is stuck, \
                     interrupt it there with `kill -INT {}`",
                    h.host, h.pid
                )
            }
        }
        None => format!(
            "{retry}. The holder did not record itself; `fuser -v` on the lock file shows \
             which process has it open"
        ),
    }
}

/// Renders the message of [`StateError::Locked`].
struct LockedMessage<'a> {
    holder: Option<&'a LockInfo>,
    waited: Option<Duration>,
    path: &'a Path,
}

impl fmt::Display for LockedMessage<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.holder {
            Some(h) => write!(
                f,
                "deployment state is locked by pid {} ({}@{}), running `{}` since {} (lock id {})",
                h.pid,
                h.user,
                h.host,
                h.operation,
                format_unix_utc(h.started_at),
                h.id
            )?,
            None => write!(
                f,
                "deployment state is locked by a process that did not record itself in {}",
                self.path.display()
            )?,
        }
        if let Some(w) = self.waited {
            write!(f, "; gave up after waiting {:.1}s", w.as_secs_f64())?;
        }
        Ok(())
    }
}

/// Formats unix seconds as `YYYY-MM-DD HH:MM:SS UTC`.
pub(crate) fn format_unix_utc(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02} {:02}:{:02}:{:02} UTC",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// Converts days since 1970-01-01 into a proleptic Gregorian (year, month, day)
/// (Howard Hinnant's `civil_from_days`).
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unix_seconds_format_as_utc_dates() {
        assert_eq!(format_unix_utc(0), "1970-01-01 00:00:00 UTC");
        assert_eq!(format_unix_utc(951_782_400), "2000-02-29 00:00:00 UTC");
        assert_eq!(format_unix_utc(1_764_433_560), "2025-11-29 16:26:00 UTC");
        assert_eq!(format_unix_utc(4_102_444_799), "2099-12-31 23:59:59 UTC");
    }

    #[test]
    fn corrupt_help_quotes_the_restore_command() {
        let e = StateError::Corrupt {
            path: PathBuf::from("/d ir/state.json"),
            detail: "EOF".into(),
            backup: Some(PathBuf::from("/d ir/state.json.backup")),
        };
        let help = e.help().unwrap().to_string();
        assert!(
            help.contains("cp '/d ir/state.json.backup' '/d ir/state.json'"),
            "{help}"
        );
        assert_eq!(e.code().unwrap().to_string(), "srt::state::corrupt");
        let e = StateError::Corrupt {
            path: PathBuf::from("/d/state.json"),
            detail: "EOF".into(),
            backup: None,
        };
        let help = e.help().unwrap().to_string();
        assert!(!help.contains("cp "), "{help}");
        assert!(
            help.contains("mv /d/state.json /d/state.json.corrupt"),
            "{help}"
        );
    }

    #[test]
    fn locked_message_names_the_holder() {
        let e = StateError::Locked {
            path: PathBuf::from("/d/lock"),
            holder: Some(Box::new(LockInfo {
                id: "0f0e".into(),
                pid: 4242,
                host: "node1".into(),
                user: "alice".into(),
                operation: "apply".into(),
                started_at: 1_764_433_560,
            })),
            waited: Some(Duration::from_millis(1500)),
        };
        assert_eq!(
            e.to_string(),
            "deployment state is locked by pid 4242 (alice@node1), running `apply` since \
             2025-11-29 16:26:00 UTC (lock id 0f0e); gave up after waiting 1.5s"
        );
        assert!(e.help().unwrap().to_string().contains("kill -INT 4242"));
    }
}
