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
pub use format::{
    Client, ResourceState, Runtime, State, Status, SweepOutcome, SweepPoint, SweepProgress,
    FORMAT_VERSION,
};
pub use lock::{LockInfo, StateLock};
pub use store::{
    lease_file, log_file, StateStore, BACKUP_FILE, JOURNAL_FILE, LEASES_DIR, LOCK_FILE, LOGS_DIR,
    STATE_FILE,
};
