//! The recorded state of a deployment: its file format, its atomic store, and the
//! deployment lock.
//!
//! `srt plan` diffs the resource graph of a recipe against a [`State`]; `srt apply`
//! changes the world and records the outcome here, resource by resource. A deployment
//! directory (e.g. `.srt/<name>/`) holds the state file, a backup of the previous
//! state, and the lock file; [`StateStore`] owns that directory.
//!
//! ```no_run
//! use srt::state::{State, StateStore};
//!
//! # fn main() -> Result<(), srt::state::StateError> {
//! let store = StateStore::new(".srt/demo");
//! let lock = store.lock("apply", None)?;
//! if let Some(dead) = lock.previous_holder_died() {
//!     eprintln!("taking over a lock left by dead pid {}", dead.pid);
//! }
//! let mut state = store.load()?.unwrap_or_else(|| State::new("demo"));
//! // ... apply, updating `state.resources` ...
//! store.save(&lock, &mut state)?;
//! lock.release()?;
//! # Ok(())
//! # }
//! ```
//!
//! Invariants:
//! - `state.json` is replaced atomically (temporary file, fsync, rename, directory
//!   fsync), so a reader always sees a complete state.
//! - [`State::serial`] only moves when the content changes, and [`State::lineage`]
//!   never does, so a saved plan can tell whether the state moved under it.
//! - Loading never modifies anything, even a corrupt file.
//! - Saving requires a [`StateLock`], and a save is refused if the file on disk is of
//!   another lineage or a newer serial than the state being saved.

mod error;
mod format;
mod lock;
mod store;

pub use error::StateError;
pub use format::{Client, ResourceState, Runtime, State, Status, FORMAT_VERSION};
pub use lock::{LockInfo, StateLock};
pub use store::{StateStore, BACKUP_FILE, JOURNAL_FILE, LOCK_FILE, STATE_FILE};

/// Write `bytes` to `path` atomically with owner-only permissions (temp file in the same
/// directory, fsync, rename). Used for files that sit beside state, such as saved plans.
pub fn write_private_atomic(path: &std::path::Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let dir = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(std::path::Path::new("."));
    let tmp = dir.join(format!(
        ".{}.tmp.{}",
        path.file_name()
            .map(|n| n.to_string_lossy())
            .unwrap_or_default(),
        std::process::id()
    ));
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)?;
    f.write_all(bytes)?;
    f.sync_all()?;
    drop(f);
    std::fs::rename(&tmp, path)
}
