//! Process exit codes, one place. Documented in `docs/exit-codes.md`.

/// Success; for `plan --detailed-exitcode`, also "no changes".
pub const OK: i32 = 0;
/// A runtime error not covered below.
pub const ERROR: i32 = 1;
/// `plan --detailed-exitcode`: the plan has changes.
pub const CHANGES: i32 = 2;
/// The recipe is invalid (parse or validation error).
pub const INVALID_RECIPE: i32 = 3;
/// The state file is unreadable, corrupt or from a newer srt.
pub const STATE: i32 = 4;
/// Another operation holds the deployment lock.
pub const LOCKED: i32 = 5;
/// A saved plan no longer matches the state.
pub const STALE_PLAN: i32 = 6;
/// Apply ran but some resources failed (the rest were applied and recorded).
pub const APPLY_FAILED: i32 = 7;
/// Refused: confirmation needed but no terminal, or the user declined.
pub const NOT_CONFIRMED: i32 = 8;
/// The filesystem holding the state is full: what could be done without writing was
/// done, the state could not be updated.
pub const NO_SPACE: i32 = 9;
/// Command-line usage error.
pub const USAGE: i32 = 64;
/// Interrupted by a signal; state was saved.
pub const INTERRUPTED: i32 = 130;
