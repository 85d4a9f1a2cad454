//! The atomic store of one deployment's state.
//!
//! A deployment directory (e.g. `.srt/<name>/`, mode 0700) holds:
//!
//! | file | content |
//! |---|---|
//! | `state.json` | the current [`State`], pretty JSON, mode 0600 |
//! | `state.json.backup` | the state as it was before the last save that changed it |
//! | `state.journal` | records changed since `state.json` was written, one JSON line per append (only while an apply runs, or after one was killed) |
//! | `lock` | the deployment lock and its holder's record (see [`super::lock`]) |
//! | `logs/<address>.log`, `leases/<address>.lease` | each process's output and lease ([`log_file`], [`lease_file`]) |
//!
//! srt uses a deployment directory only when it, and every directory above it, passes
//! [`files::check_dir`](crate::files::check_dir): owned by the user, writable by nobody else. Every file in it is
//! opened without following links ([`crate::files`]). Paths recorded in the state (a log, a
//! lease) are never used as they are: loading puts in their place the ones derived
//! from the directory and the resource's address, and refuses an address that is not a
//! plain file name.
//!
//! A save writes a temporary file in the same directory, fsyncs it, renames it over
//! `state.json` and fsyncs the directory, so `state.json` is at every instant either
//! the old or the new state, never a mix, even if `srt` or the machine dies mid-save.
//!
//! An append ([`StateStore::append`]) writes only the records an apply step changed:
//! one line `{"lineage", "serial", "set": {address: record}, "remove": [address]}`
//! appended to `state.journal` and fsynced, so its cost does not grow with the
//! deployment. A load replays the lines that continue `state.json`'s serial; a last
//! line without its newline (an append cut short) is ignored, and lines at or below
//! the serial (left by a save that was cut short before removing the journal) are
//! skipped. A save (the end of every apply) writes the whole state and removes the
//! journal.

use std::fs::File;
use std::io::{ErrorKind, Write};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use std::borrow::Cow;
use std::collections::BTreeMap;

use super::error::StateError;
use super::format::{ResourceState, Runtime, State, FORMAT_VERSION};
use super::lock::StateLock;
use crate::files;

/// Name of the state file in a deployment directory.
pub const STATE_FILE: &str = "state.json";
/// Name of the backup of the previous state.
pub const BACKUP_FILE: &str = "state.json.backup";
/// Name of the lock file.
pub const LOCK_FILE: &str = "lock";
/// Name of the journal of records changed since the state file was written.
pub const JOURNAL_FILE: &str = "state.journal";
/// The folder of a deployment directory holding the processes' logs.
pub const LOGS_DIR: &str = "logs";
/// The folder of a deployment directory holding the lease files.
pub const LEASES_DIR: &str = "leases";

/// The log file of resource `address` in deployment directory `dir`. Derived, never
/// read from state: a recorded path could name any file.
pub fn log_file(dir: &Path, address: &str) -> PathBuf {
    dir.join(LOGS_DIR).join(format!("{address}.log"))
}

/// The lease file of resource `address` in deployment directory `dir` (see
/// `exec::process::read_lease`): one per address, shared by its launches. Derived,
/// never read from state.
pub fn lease_file(dir: &Path, address: &str) -> PathBuf {
    dir.join(LEASES_DIR).join(format!("{address}.lease"))
}

/// Temporary file a save writes before renaming it over [`STATE_FILE`].
const STATE_TMP: &str = "state.json.tmp";
/// Temporary name of the backup before it is renamed over [`BACKUP_FILE`].
const BACKUP_TMP: &str = "state.json.backup.tmp";

/// The state files of one deployment directory.
///
/// Creating a store touches nothing; [`StateStore::lock`] creates the directory.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StateStore {
    dir: PathBuf,
}

/// The fields of a state file that a save checks before overwriting it. Reading them
/// also validates the whole file as JSON without building the resources.
#[derive(Deserialize)]
struct Header {
    format_version: u32,
    #[serde(default)]
    srt_version: Option<String>,
    lineage: String,
    serial: u64,
}

/// One journal line: the records an append changed, and the serial it brought the
/// state to.
#[derive(Serialize, Deserialize)]
struct JournalEntry<'a> {
    lineage: Cow<'a, str>,
    serial: u64,
    #[serde(default)]
    set: BTreeMap<String, Cow<'a, ResourceState>>,
    #[serde(default)]
    remove: Vec<String>,
}

/// Just the format version, to tell a newer format from a corrupt file.
#[derive(Deserialize)]
struct VersionPeek {
    format_version: u32,
    #[serde(default)]
    srt_version: Option<String>,
}

impl StateStore {
    /// A store for the deployment directory `dir` (e.g. `.srt/<name>`).
    pub fn new(dir: impl Into<PathBuf>) -> Self {
        StateStore { dir: dir.into() }
    }

    /// The deployment directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Path of `state.json`.
    pub fn state_path(&self) -> PathBuf {
        self.dir.join(STATE_FILE)
    }

    /// Path of `state.json.backup`.
    pub fn backup_path(&self) -> PathBuf {
        self.dir.join(BACKUP_FILE)
    }

    /// Path of the lock file.
    pub fn lock_path(&self) -> PathBuf {
        self.dir.join(LOCK_FILE)
    }

    /// Path of `state.journal`.
    pub fn journal_path(&self) -> PathBuf {
        self.dir.join(JOURNAL_FILE)
    }

    /// Reads the state; `Ok(None)` when the deployment has no state file yet.
    ///
    /// Never modifies anything, whatever it finds. Fails with
    /// [`StateError::Corrupt`] for a file that is not a valid state (including a
    /// truncated one), [`StateError::NewerFormat`] for a file written by a newer `srt`,
    /// and [`StateError::Io`] when the file cannot be read. Loading does not need the
    /// lock: saves replace the file atomically.
    pub fn load(&self) -> Result<Option<State>, StateError> {
        match files::check_dir(&self.dir) {
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(StateError::io("use", &self.dir, e)),
            Ok(()) => {}
        }
        let path = self.state_path();
        let bytes = match files::read(&path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(StateError::io("read", &path, e)),
        };
        match parse_state(&path, &bytes) {
            Ok(mut state) => {
                self.replay_journal(&mut state)?;
                self.anchor(&mut state)?;
                Ok(Some(state))
            }
            Err(StateError::Corrupt { path, detail, .. }) => Err(StateError::Corrupt {
                backup: self.usable_backup(),
                path,
                detail,
            }),
            Err(e) => Err(e),
        }
    }

    /// Writes `state` if its content differs from the state on disk; requires the
    /// deployment lock.
    ///
    /// Returns `Ok(false)` and writes nothing when the content is the same as on disk
    /// (the serial is not compared and not bumped, so a no-op apply keeps saved plans
    /// valid). Otherwise bumps `state.serial`, stamps the current format and `srt`
    /// version, keeps the previous file as `state.json.backup`, replaces `state.json`
    /// atomically and durably, and returns `Ok(true)`. On error `state.serial` is left
    /// as it was and `state.json` is untouched.
    ///
    /// Refuses to overwrite a state of another lineage ([`StateError::LineageMismatch`]),
    /// a newer serial ([`StateError::StaleSerial`]) or a newer format
    /// ([`StateError::NewerFormat`]). A state file that is corrupt is overwritten, but
    /// not copied to the backup, which keeps the last good state.
    pub fn save(&self, lock: &StateLock, state: &mut State) -> Result<bool, StateError> {
        self.check_lock(lock)?;
        let path = self.state_path();
        let old = match files::read(&path) {
            Ok(bytes) => Some(bytes),
            Err(e) if e.kind() == ErrorKind::NotFound => None,
            Err(e) => return Err(StateError::io("read", &path, e)),
        };

        // The serial and versions are stamped for the write; a save that writes
        // nothing, or fails, puts them back.
        // Records appended since `state.json` was written make it differ from the
        // state whatever the bytes say: write, so the serial moves past every line.
        let journal = self.journal_path();
        let journaled = journal.exists();
        let saved = (
            state.serial,
            state.format_version,
            state.srt_version.clone(),
        );
        let result = self.write_if_changed(&path, old.as_deref(), state, journaled);
        if !matches!(result, Ok(true)) {
            (state.serial, state.format_version, state.srt_version) = saved;
        }
        if result.is_ok() && journaled {
            // The state file now holds everything the journal did (with a higher
            // serial, so a journal left by a crash here is skipped on load).
            remove_if_present(&journal)?;
            sync_dir(&self.dir)?;
        }
        result
    }

    /// Records the changes of `addresses` (each set to its record in `state`, or
    /// removed when `state` has none) by appending one line to `state.journal`;
    /// requires the deployment lock. Bumps `state.serial`. Costs the size of those
    /// records, not of the state. When there is no state file yet, does a whole
    /// [`StateStore::save`] instead. On error `state.serial` is left as it was.
    pub fn append(
        &self,
        lock: &StateLock,
        state: &mut State,
        addresses: &[&str],
    ) -> Result<(), StateError> {
        self.check_lock(lock)?;
        if !self.state_path().exists() {
            return self.save(lock, state).map(|_| ());
        }
        let mut entry = JournalEntry {
            lineage: Cow::Borrowed(&state.lineage),
            serial: state.serial + 1,
            set: BTreeMap::new(),
            remove: Vec::new(),
        };
        for &a in addresses {
            match state.resources.get(a) {
                Some(r) => {
                    entry.set.insert(a.to_string(), Cow::Borrowed(r));
                }
                None => entry.remove.push(a.to_string()),
            }
        }
        entry.remove.sort();
        entry.remove.dedup();
        let mut line = serde_json::to_vec(&entry).map_err(StateError::Encode)?;
        line.push(b'\n');
        let path = self.journal_path();
        let created = !path.exists();
        if !created {
            drop_torn_tail(&path)?;
        }
        let mut f = files::open_append(&path).map_err(|e| StateError::io("open", &path, e))?;
        f.write_all(&line)
            .map_err(|e| StateError::io("write", &path, e))?;
        f.sync_data()
            .map_err(|e| StateError::io("fsync", &path, e))?;
        if created {
            sync_dir(&self.dir)?;
        }
        state.serial += 1;
        Ok(())
    }

    /// Puts the paths derived from the deployment directory in place of the ones the
    /// records name (see the module docs); refuses an address that is no file name.
    fn anchor(&self, state: &mut State) -> Result<(), StateError> {
        let dir = std::path::absolute(&self.dir).unwrap_or_else(|_| self.dir.clone());
        for (address, r) in &mut state.resources {
            if !is_file_name(address) {
                return Err(StateError::Corrupt {
                    path: self.state_path(),
                    detail: format!(
                        "resource address {address:?} is not a name srt gives (it would \
                         name a file outside the deployment directory)"
                    ),
                    backup: None,
                });
            }
            if r.log_path.is_some() {
                r.log_path = Some(log_file(&dir, address));
            }
            let lease = match &mut r.runtime {
                Some(Runtime::Local { lease, .. }) => lease,
                Some(Runtime::Slurm {
                    client: Some(c), ..
                }) => &mut c.lease,
                _ => continue,
            };
            if lease.is_some() {
                *lease = Some(lease_file(&dir, address));
            }
        }
        Ok(())
    }

    /// Refuses a lock that is not this deployment's.
    fn check_lock(&self, lock: &StateLock) -> Result<(), StateError> {
        if lock.guards(&self.lock_path()) {
            Ok(())
        } else {
            Err(StateError::WrongLock {
                lock: lock.path().to_path_buf(),
                dir: self.dir.clone(),
            })
        }
    }

    /// Applies the journal lines that continue `state` (see the module docs).
    fn replay_journal(&self, state: &mut State) -> Result<(), StateError> {
        let path = self.journal_path();
        let bytes = match files::read(&path) {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(StateError::io("read", &path, e)),
        };
        let corrupt = |n: usize, detail: String| StateError::Corrupt {
            path: path.clone(),
            detail: format!("line {n}: {detail}"),
            backup: None,
        };
        // Only whole lines: the bytes after the last newline are an append cut short.
        let whole = match bytes.iter().rposition(|&b| b == b'\n') {
            Some(end) => &bytes[..end],
            None => return Ok(()),
        };
        for (i, line) in whole.split(|&b| b == b'\n').enumerate() {
            let entry: JournalEntry =
                serde_json::from_slice(line).map_err(|e| corrupt(i + 1, e.to_string()))?;
            if entry.lineage != state.lineage {
                return Err(corrupt(
                    i + 1,
                    format!(
                        "lineage {} is not the state's {}",
                        entry.lineage, state.lineage
                    ),
                ));
            }
            if entry.serial <= state.serial {
                continue;
            }
            if entry.serial != state.serial + 1 {
                return Err(corrupt(
                    i + 1,
                    format!(
                        "serial {} does not follow the state's {}",
                        entry.serial, state.serial
                    ),
                ));
            }
            for (address, record) in entry.set {
                state.resources.insert(address, record.into_owned());
            }
            for address in &entry.remove {
                state.resources.remove(address);
            }
            state.serial = entry.serial;
        }
        Ok(())
    }

    /// The body of [`StateStore::save`] once the old content is read: stamps and
    /// serializes `state` once, compares, checks the old file, writes.
    fn write_if_changed(
        &self,
        path: &Path,
        old: Option<&[u8]>,
        state: &mut State,
        journaled: bool,
    ) -> Result<bool, StateError> {
        state.format_version = FORMAT_VERSION;
        env!("CARGO_PKG_VERSION").clone_into(&mut state.srt_version);
        state.serial += 1;
        let capacity = old.map_or(64 * 1024, |o| o.len() + 4096);
        let mut buf = Vec::with_capacity(capacity);
        serde_json::to_writer_pretty(&mut buf, &*state).map_err(StateError::Encode)?;
        buf.push(b'\n');

        let Some(old) = old else {
            self.replace(path, None, &buf)?;
            return Ok(true);
        };
        // Equal bytes (but the serial) mean equal format, lineage and content: there
        // is nothing to write, and no need to look further into the old file.
        if !journaled && same_ignoring_serial(old, &buf) {
            return Ok(false);
        }
        // Reading the header validates the whole old file as JSON. A corrupt old file
        // is replaced but not made the backup, so the last good backup survives.
        let old_valid = match serde_json::from_slice::<Header>(old) {
            Ok(header) => {
                check_overwrite(path, &header, state.serial - 1, &state.lineage)?;
                Some(old)
            }
            Err(_) => None,
        };
        self.replace(path, old_valid, &buf)?;
        Ok(true)
    }

    /// Keeps `old` (the content of `state.json`) as the backup, then replaces
    /// `state.json` with `new` through a fsynced temporary file and a rename.
    fn replace(&self, path: &Path, old: Option<&[u8]>, new: &[u8]) -> Result<(), StateError> {
        if let Some(old) = old {
            self.keep_backup(path, old)?;
        }
        let tmp = self.dir.join(STATE_TMP);
        write_new_file(&tmp, new)?;
        if let Err(e) = std::fs::rename(&tmp, path) {
            let _ = std::fs::remove_file(&tmp);
            return Err(StateError::io("rename", &tmp, e));
        }
        sync_dir(&self.dir)
    }

    /// Makes `state.json.backup` hold `old`, the current content of `state.json`.
    ///
    /// `state.json` is never modified in place, so a hard link to it is an exact copy
    /// that costs nothing; where links are not supported the bytes are written.
    fn keep_backup(&self, path: &Path, old: &[u8]) -> Result<(), StateError> {
        let tmp = self.dir.join(BACKUP_TMP);
        remove_if_present(&tmp)?;
        if std::fs::hard_link(path, &tmp).is_err() {
            write_new_file(&tmp, old)?;
        }
        let backup = self.backup_path();
        std::fs::rename(&tmp, &backup).map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            StateError::io("rename", &tmp, e)
        })
    }

    /// The backup, when it exists and is a state this build can read, so that a help
    /// text only suggests restoring a backup that would work.
    fn usable_backup(&self) -> Option<PathBuf> {
        let backup = self.backup_path();
        let bytes = files::read(&backup).ok()?;
        parse_state(&backup, &bytes).ok().map(|_| backup)
    }
}

/// Refuses to overwrite a state that is not an older version of `state`.
fn check_overwrite(
    path: &Path,
    on_disk: &Header,
    serial: u64,
    lineage: &str,
) -> Result<(), StateError> {
    if on_disk.format_version > FORMAT_VERSION {
        return Err(StateError::NewerFormat {
            path: path.to_path_buf(),
            found: on_disk.format_version,
            supported: FORMAT_VERSION,
            written_by: on_disk.srt_version.clone(),
        });
    }
    if on_disk.lineage != lineage {
        return Err(StateError::LineageMismatch {
            path: path.to_path_buf(),
            on_disk: on_disk.lineage.clone(),
            ours: lineage.to_string(),
        });
    }
    if on_disk.serial > serial {
        return Err(StateError::StaleSerial {
            path: path.to_path_buf(),
            on_disk: on_disk.serial,
            ours: serial,
        });
    }
    Ok(())
}

/// Parses a state file's content, telling a newer format apart from a corrupt file.
fn parse_state(path: &Path, bytes: &[u8]) -> Result<State, StateError> {
    let corrupt = |detail: String| StateError::Corrupt {
        path: path.to_path_buf(),
        detail,
        backup: None,
    };
    let newer = |found: u32, written_by: Option<String>| StateError::NewerFormat {
        path: path.to_path_buf(),
        found,
        supported: FORMAT_VERSION,
        written_by,
    };
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(corrupt("the file is empty".to_string()));
    }
    match serde_json::from_slice::<State>(bytes) {
        Ok(state) if state.format_version > FORMAT_VERSION => {
            Err(newer(state.format_version, Some(state.srt_version)))
        }
        Ok(state) if state.format_version == 0 => Err(corrupt(
            "format_version 0 is not a version srt has ever written".to_string(),
        )),
        Ok(state) => Ok(state),
        Err(e) => {
            // A newer format may have a shape this build cannot parse: say so rather
            // than call it corrupt.
            if let Ok(peek) = serde_json::from_slice::<VersionPeek>(bytes) {
                if peek.format_version > FORMAT_VERSION {
                    return Err(newer(peek.format_version, peek.srt_version));
                }
            }
            let detail = if e.is_eof() {
                format!("the file ends early, it looks truncated ({e})")
            } else {
                e.to_string()
            };
            Err(corrupt(detail))
        }
    }
}

/// Whether two serialized states are equal except for the value of the top-level
/// `serial`. Both must be in the pretty layout this module writes, where the top-level
/// keys are the only lines starting with exactly two spaces and a quote; anything else
/// compares as different, which at worst costs an unneeded write.
fn same_ignoring_serial(a: &[u8], b: &[u8]) -> bool {
    match (serial_digits(a), serial_digits(b)) {
        (Some((a0, a1)), Some((b0, b1))) => a[..a0] == b[..b0] && a[a1..] == b[b1..],
        _ => false,
    }
}

/// Byte range of the digits of the top-level `serial` in a pretty-printed state.
fn serial_digits(bytes: &[u8]) -> Option<(usize, usize)> {
    const KEY: &[u8] = b"\n  \"serial\": ";
    // The header precedes the resources; never scan a whole large file for it.
    let head = &bytes[..bytes.len().min(64 * 1024)];
    let start = head.windows(KEY.len()).position(|w| w == KEY)? + KEY.len();
    let len = bytes[start..]
        .iter()
        .take_while(|b| b.is_ascii_digit())
        .count();
    (len > 0).then_some((start, start + len))
}

/// Whether `address` can name a file in a folder of the deployment directory: not
/// empty, no `/`, no NUL, and not starting with a dot (`.`, `..`, hidden names).
fn is_file_name(address: &str) -> bool {
    !address.is_empty()
        && !address.starts_with('.')
        && !address.bytes().any(|b| b == b'/' || b == 0)
}

/// Creates the deployment directory (and its parents) with mode 0700 if missing, and
/// refuses one srt may not trust ([`files::private_dir`]). An existing directory keeps
/// its mode.
pub(crate) fn ensure_dir(dir: &Path) -> Result<(), StateError> {
    files::private_dir(dir).map_err(|e| StateError::io("use directory", dir, e))
}

/// Writes `bytes` to a new file at `path` (mode 0600), fsynced; removes it on failure.
fn write_new_file(path: &Path, bytes: &[u8]) -> Result<(), StateError> {
    remove_if_present(path)?;
    let result = files::create_new(path)
        .map_err(|e| StateError::io("create", path, e))
        .and_then(|mut f| {
            f.write_all(bytes)
                .map_err(|e| StateError::io("write", path, e))?;
            f.sync_all().map_err(|e| StateError::io("fsync", path, e))
        });
    if result.is_err() {
        let _ = std::fs::remove_file(path);
    }
    result
}

/// Cuts a journal back to its last whole line: an append cut short leaves bytes without
/// their newline, which the next append would otherwise glue onto its own line.
fn drop_torn_tail(path: &Path) -> Result<(), StateError> {
    use std::io::{Read, Seek, SeekFrom};
    let mut f = files::open_rw(path).map_err(|e| StateError::io("open", path, e))?;
    let len = f
        .metadata()
        .map_err(|e| StateError::io("read", path, e))?
        .len();
    if len == 0 {
        return Ok(());
    }
    let mut last = [0u8];
    f.seek(SeekFrom::End(-1))
        .and_then(|_| f.read_exact(&mut last))
        .map_err(|e| StateError::io("read", path, e))?;
    if last[0] == b'\n' {
        return Ok(());
    }
    let mut bytes = Vec::new();
    f.seek(SeekFrom::Start(0))
        .and_then(|_| f.read_to_end(&mut bytes))
        .map_err(|e| StateError::io("read", path, e))?;
    let keep = bytes.iter().rposition(|&b| b == b'\n').map_or(0, |i| i + 1);
    f.set_len(keep as u64)
        .and_then(|_| f.sync_data())
        .map_err(|e| StateError::io("truncate", path, e))
}

/// Removes a leftover temporary file (from a save that was interrupted).
fn remove_if_present(path: &Path) -> Result<(), StateError> {
    match std::fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == ErrorKind::NotFound => Ok(()),
        Err(e) => Err(StateError::io("remove", path, e)),
    }
}

/// Fsyncs a directory so that renames in it survive a crash.
fn sync_dir(dir: &Path) -> Result<(), StateError> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(|e| StateError::io("fsync", dir, e))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::state::{ResourceState, Status};
    use serde_json::json;

    fn pretty(state: &State) -> Vec<u8> {
        let mut buf = serde_json::to_vec_pretty(state).unwrap();
        buf.push(b'\n');
        buf
    }

    fn state_with_nested_serial_key() -> State {
        let mut s = State::new("demo");
        s.serial = 41;
        s.resources.insert(
            "worker[0]".into(),
            ResourceState {
                kind: crate::graph::Kind::Worker,
                hash: "00".into(),
                dependencies: vec![],
                // Keys named "serial" deeper in the file must not be taken for the
                // top-level one.
                spec: crate::graph::Spec::of(&json!({"serial": 999, "note": "\n  \"serial\": 5"})),
                status: Status::Running,
                runtime: None,
                node: None,
                ports: Default::default(),
                log_path: None,
                error: None,
                health: None,
                deposed: Vec::new(),
            },
        );
        s
    }

    #[test]
    fn serial_digits_finds_only_the_top_level_serial() {
        let s = state_with_nested_serial_key();
        let bytes = pretty(&s);
        let (a, b) = serial_digits(&bytes).unwrap();
        assert_eq!(&bytes[a..b], b"41");
        // And it is the header's: before the resources.
        let resources = String::from_utf8_lossy(&bytes)
            .find("\"resources\"")
            .unwrap();
        assert!(b < resources);
    }

    #[test]
    fn same_ignoring_serial_ignores_only_the_serial() {
        let a = state_with_nested_serial_key();
        let mut b = a.clone();
        b.serial = 1_000_000;
        assert!(same_ignoring_serial(&pretty(&a), &pretty(&b)));
        let mut c = a.clone();
        c.resources.get_mut("worker[0]").unwrap().spec =
            crate::graph::Spec::of(&json!({"serial": 998, "note": "\n  \"serial\": 5"}));
        assert!(!same_ignoring_serial(&pretty(&a), &pretty(&c)));
        let mut d = a.clone();
        d.recipe_hash = Some("ff".into());
        assert!(!same_ignoring_serial(&pretty(&a), &pretty(&d)));
        // A file in another layout (compact) never compares equal.
        let compact = serde_json::to_vec(&a).unwrap();
        assert!(!same_ignoring_serial(&compact, &pretty(&a)));
    }

    #[test]
    fn parse_state_classifies_bad_content() {
        let p = Path::new("/x/state.json");
        let good = pretty(&State::new("demo"));
        assert!(parse_state(p, &good).is_ok());
        assert!(matches!(
            parse_state(p, b"  \n"),
            Err(StateError::Corrupt { detail, .. }) if detail.contains("empty")
        ));
        assert!(matches!(
            parse_state(p, &good[..good.len() / 2]),
            Err(StateError::Corrupt { detail, .. }) if detail.contains("truncated")
        ));
        assert!(matches!(
            parse_state(p, br#"{"format_version": 1}"#),
            Err(StateError::Corrupt { detail, .. }) if detail.contains("missing field")
        ));
        assert!(matches!(
            parse_state(p, br#"{"format_version": 7, "srt_version": "9.0.0", "shards": []}"#),
            Err(StateError::NewerFormat { found: 7, supported: FORMAT_VERSION, written_by: Some(v), .. })
                if v == "9.0.0"
        ));
        let mut zero = State::new("demo");
        zero.format_version = 0;
        assert!(matches!(
            parse_state(p, &pretty(&zero)),
            Err(StateError::Corrupt { .. })
        ));
    }
}
