//! The deployment lock: one writer per deployment at a time.
//!
//! The lock is an exclusive `flock(2)` on a separate file, `lock`, in the deployment
//! directory. It is not taken on `state.json` itself because every save replaces that
//! file by a rename, and a lock on the old inode would not cover the new one.
//!
//! The kernel releases a `flock` when the last descriptor of its open file description
//! closes, which includes the death of the holder. A crashed `srt` therefore never
//! leaves a lock that blocks the next run. The holder also writes a [`LockInfo`] into
//! the file, so that a blocked run can say who holds the lock, and so that the next
//! run can tell when it takes over from a holder that died without cleaning up
//! ([`StateLock::previous_holder_died`]).
//!
//! The descriptor is opened close-on-exec (the default of `std::fs`), so processes
//! launched by an apply do not inherit the lock and cannot keep it alive after `srt`
//! exits.

use std::fs::File;
use std::io::Read;
use std::os::unix::fs::{FileExt, MetadataExt};
use std::path::{Path, PathBuf};
use std::thread::sleep;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use nix::errno::Errno;
use nix::fcntl::{Flock, FlockArg};
use serde::{Deserialize, Serialize};

use super::error::StateError;
use super::store::{ensure_dir, StateStore};

/// How often a waiting [`StateStore::lock`] retries.
const RETRY_INTERVAL: Duration = Duration::from_millis(100);

/// How long a lock whose recorded holder is dead may still be held (by a child that
/// holder was forking, until it execs) before it is reported as taken.
const DEAD_HOLDER_GRACE: Duration = Duration::from_secs(3);

/// Who holds (or last held) the deployment lock, as recorded in the lock file.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LockInfo {
    /// A UUID (v4) identifying this acquisition of the lock.
    pub id: String,
    /// Process id of the holder.
    pub pid: u32,
    /// Host name of the holder.
    pub host: String,
    /// User name of the holder.
    pub user: String,
    /// What the holder is doing, e.g. `apply` or `plan`.
    pub operation: String,
    /// When the lock was acquired, in seconds since the Unix epoch.
    pub started_at: u64,
}

impl LockInfo {
    /// Describes the current process acquiring the lock for `operation` now.
    fn current(operation: &str) -> Self {
        LockInfo {
            id: uuid::Uuid::new_v4().to_string(),
            pid: std::process::id(),
            host: local_host(),
            user: local_user(),
            operation: operation.to_string(),
            started_at: SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .map(|d| d.as_secs())
                .unwrap_or(0),
        }
    }

    /// Whether the recorded process still exists: `Some(true)` or `Some(false)` when
    /// the holder ran on this host, `None` when it ran on another host and cannot be
    /// checked from here.
    ///
    /// Meant for status display of [`StateStore::read_lock_info`]: a pid can be
    /// recycled, so `Some(true)` means "a process with that pid exists", while
    /// `Some(false)` reliably means the holder is gone.
    pub fn holder_alive(&self) -> Option<bool> {
        if self.host != local_host() {
            return None;
        }
        let Ok(pid) = i32::try_from(self.pid) else {
            return Some(false);
        };
        match nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None) {
            Ok(()) | Err(Errno::EPERM) => Some(true),
            Err(_) => Some(false),
        }
    }

    /// Parses the content of a lock file; `None` when it is empty or not a `LockInfo`
    /// (a holder that did not record itself, or a write in progress).
    fn parse(bytes: &[u8]) -> Option<Self> {
        if bytes.iter().all(u8::is_ascii_whitespace) {
            return None;
        }
        serde_json::from_slice(bytes).ok()
    }
}

/// Proof that this process holds the deployment lock; released when dropped.
///
/// [`StateStore::save`] takes a `&StateLock`, so state cannot be written without it.
/// Dropping the guard erases the [`LockInfo`] from the lock file, then releases the
/// lock; [`StateLock::release`] does the same and reports errors.
#[derive(Debug)]
pub struct StateLock {
    /// The locked file; `None` only after [`StateLock::release`].
    file: Option<Flock<File>>,
    path: PathBuf,
    info: LockInfo,
    previous: Option<LockInfo>,
}

impl StateLock {
    /// What this process recorded in the lock file.
    pub fn info(&self) -> &LockInfo {
        &self.info
    }

    /// The holder recorded in the lock file when we acquired it, if there was one.
    ///
    /// A holder that exits normally erases its record before releasing the lock, so a
    /// record found on a free lock means the previous holder died (crashed, was
    /// killed, or its host rebooted) while holding it. Its apply may have been
    /// interrupted, which the `pending` records in the state show.
    pub fn previous_holder_died(&self) -> Option<&LockInfo> {
        self.previous.as_ref()
    }

    /// The lock file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Erases the lock record and releases the lock, reporting any error (dropping the
    /// guard does the same but ignores errors).
    pub fn release(mut self) -> Result<(), StateError> {
        let Some(file) = self.file.take() else {
            return Ok(());
        };
        file.set_len(0)
            .map_err(|e| StateError::io("truncate", &self.path, e))?;
        file.unlock()
            .map_err(|(_, errno)| StateError::io("unlock", &self.path, errno.into()))?;
        Ok(())
    }

    /// Whether this guard holds the lock file at `path` (same device and inode), so a
    /// store can check that it is saved under its own lock.
    pub(crate) fn guards(&self, path: &Path) -> bool {
        let Some(file) = &self.file else {
            return false;
        };
        match (file.metadata(), std::fs::metadata(path)) {
            (Ok(ours), Ok(theirs)) => ours.dev() == theirs.dev() && ours.ino() == theirs.ino(),
            _ => false,
        }
    }
}

impl Drop for StateLock {
    fn drop(&mut self) {
        if let Some(file) = self.file.take() {
            // Erase the record first: a record left on a free lock means "died".
            let _ = file.set_len(0);
            // Dropping the `Flock` unlocks, then closing the file would release anyway.
        }
    }
}

impl StateStore {
    /// Takes the deployment lock for `operation` (e.g. `"apply"`), creating the
    /// directory (mode 0700) and the lock file (mode 0600) when missing.
    ///
    /// If another process holds the lock, fails at once with
    /// [`StateError::Locked`] when `wait` is `None`; otherwise retries every 100 ms
    /// until `wait` has elapsed, then fails the same way. A lock left behind by a dead
    /// process never blocks (the kernel released it); the guard reports it through
    /// [`StateLock::previous_holder_died`].
    ///
    /// The lock is per open file: a second call in the same process while a guard is
    /// alive also fails with [`StateError::Locked`].
    pub fn lock(&self, operation: &str, wait: Option<Duration>) -> Result<StateLock, StateError> {
        ensure_dir(self.dir())?;
        let path = self.lock_path();
        let started = Instant::now();
        loop {
            let mut file = open_lock_file(&path)?;
            let locked = loop {
                match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
                    Ok(locked) => break locked,
                    Err((f, Errno::EINTR)) => file = f,
                    Err((f, errno)) if errno == Errno::EWOULDBLOCK => {
                        let waited = started.elapsed();
                        let remaining = wait.and_then(|w| w.checked_sub(waited));
                        // The recorded holder is dead but the lock is still held: a
                        // process it was forking holds the descriptor until it execs
                        // (a few milliseconds); the kernel releases it then.
                        let remaining = remaining.filter(|r| !r.is_zero()).or_else(|| {
                            let dead =
                                read_holder(&path).is_some_and(|h| h.holder_alive() == Some(false));
                            (dead && waited < DEAD_HOLDER_GRACE).then(|| DEAD_HOLDER_GRACE - waited)
                        });
                        match remaining {
                            Some(r) if !r.is_zero() => {
                                sleep(r.min(RETRY_INTERVAL));
                                file = f;
                            }
                            _ => {
                                return Err(StateError::Locked {
                                    holder: read_holder(&path).map(Box::new),
                                    waited: wait.map(|_| waited),
                                    path,
                                })
                            }
                        }
                    }
                    Err((_, errno)) => return Err(StateError::io("lock", &path, errno.into())),
                }
            };
            // The file we locked may have been deleted and re-created while we waited;
            // a lock on an unlinked inode would exclude nobody.
            let guard = StateLock {
                file: Some(locked),
                path: path.clone(),
                info: LockInfo::current(operation),
                previous: None,
            };
            if !guard.guards(&path) {
                drop(guard);
                continue;
            }
            return record(guard);
        }
    }

    /// Reads the record of the lock file, for status display: who holds the lock, or
    /// who held it last if that holder died (see [`LockInfo::holder_alive`]). `None`
    /// when there is no lock file or no record in it.
    ///
    /// Does not touch the lock itself, so it never disturbs a concurrent run.
    pub fn read_lock_info(&self) -> Result<Option<LockInfo>, StateError> {
        let path = self.lock_path();
        match crate::files::read(&path) {
            // An empty file means "free, or held by someone who records nothing";
            // anything else that does not parse is a record being written: retry.
            Ok(bytes) if bytes.iter().all(u8::is_ascii_whitespace) => Ok(None),
            Ok(bytes) => Ok(LockInfo::parse(&bytes).or_else(|| read_holder(&path))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(StateError::io("read", &path, e)),
        }
    }
}

/// Reads what a previous holder left in the freshly locked file, then writes our own
/// record in its place.
fn record(mut guard: StateLock) -> Result<StateLock, StateError> {
    let path = guard.path.clone();
    let file = guard
        .file
        .as_ref()
        .expect("guard holds the file until released");
    let mut previous = Vec::new();
    (&**file)
        .read_to_end(&mut previous)
        .map_err(|e| StateError::io("read", &path, e))?;
    guard.previous = LockInfo::parse(&previous);

    let mut text = serde_json::to_vec(&guard.info).map_err(StateError::Encode)?;
    text.push(b'\n');
    file.set_len(0)
        .map_err(|e| StateError::io("truncate", &path, e))?;
    match file.write_all_at(&text, 0) {
        // The lock is the `flock`; the record only says who holds it. On a full disk
        // the lock still holds, unrecorded, so that a destroy can stop what runs.
        Err(e) if crate::files::is_no_space(&e) => {
            let _ = file.set_len(0);
            Ok(guard)
        }
        Err(e) => Err(StateError::io("write", &path, e)),
        Ok(()) => Ok(guard),
    }
}

/// Opens (creating with mode 0600 if needed) the lock file, never through a link.
fn open_lock_file(path: &Path) -> Result<File, StateError> {
    crate::files::open_rw(path).map_err(|e| StateError::io("open", path, e))
}

/// Reads the holder's record from a lock file held by someone else. The holder writes
/// its record right after acquiring the lock, so an empty or partial record is retried
/// briefly before concluding that the holder did not record itself.
fn read_holder(path: &Path) -> Option<LockInfo> {
    for attempt in 0..5 {
        if attempt > 0 {
            sleep(Duration::from_millis(10));
        }
        if let Some(info) = crate::files::read(path)
            .ok()
            .and_then(|b| LockInfo::parse(&b))
        {
            return Some(info);
        }
    }
    None
}

/// This host's name, or `"unknown"`.
fn local_host() -> String {
    nix::unistd::gethostname()
        .map(|h| h.to_string_lossy().into_owned())
        .unwrap_or_else(|_| "unknown".to_string())
}

/// The effective user's name, falling back to `$USER`, then to the numeric uid.
fn local_user() -> String {
    let uid = nix::unistd::geteuid();
    nix::unistd::User::from_uid(uid)
        .ok()
        .flatten()
        .map(|u| u.name)
        .or_else(|| std::env::var("USER").ok())
        .unwrap_or_else(|| uid.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lock_info_describes_this_process() {
        let info = LockInfo::current("plan");
        assert_eq!(info.pid, std::process::id());
        assert_eq!(info.operation, "plan");
        assert!(uuid::Uuid::parse_str(&info.id).is_ok());
        assert!(!info.host.is_empty() && !info.user.is_empty());
        assert!(info.started_at > 1_600_000_000);
        assert_eq!(info.holder_alive(), Some(true));
    }

    #[test]
    fn holder_alive_is_false_for_a_reaped_child_and_unknown_elsewhere() {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        let mut info = LockInfo::current("apply");
        info.pid = pid;
        assert_eq!(info.holder_alive(), Some(false));
        info.host = format!("{}-elsewhere", info.host);
        assert_eq!(info.holder_alive(), None);
    }

    #[test]
    fn parse_ignores_empty_and_partial_records() {
        assert_eq!(LockInfo::parse(b""), None);
        assert_eq!(LockInfo::parse(b" \n"), None);
        assert_eq!(LockInfo::parse(br#"{"id":"x","pid":1"#), None);
        let info = LockInfo::current("apply");
        let text = serde_json::to_vec(&info).unwrap();
        assert_eq!(LockInfo::parse(&text), Some(info));
    }
}
