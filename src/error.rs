//! Why a command did not succeed, in one type: every command returns
//! `Result<Done, ExpectedError>`, and [`crate::run`] turns that into what is printed and
//! the documented exit code (`docs/exit-codes.md`). Nothing below the commands picks an
//! exit code or prints an error itself.

use crate::report;
use srt::apply::Failure;
use srt::exit;
use srt::workflow::OpError;

/// A command that succeeded, and whether it found changes (`plan --detailed-exitcode`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Done {
    /// Success.
    Ok,
    /// Success, and the plan has changes (exit 2; only with `plan --detailed-exitcode`).
    Changes,
}

/// Everything a command can fail with, as the user sees it.
#[derive(Debug)]
pub enum ExpectedError {
    /// A library error, printed as its diagnostic (recipe, state, lock, saved plan,
    /// cluster profile, executor).
    Op(Box<OpError>),
    /// Confirmation was needed and not given.
    NotConfirmed {
        /// Why: no terminal, `--json` without `--auto-approve`, or the user declined.
        why: Unconfirmed,
        /// What was asked ("perform these actions").
        question: &'static str,
    },
    /// Apply ran and some resources failed: the rest were applied and recorded.
    ApplyFailed {
        /// What failed, with the log that explains each.
        failures: Vec<Failure>,
        /// Resources skipped because something they need failed.
        skipped: usize,
        /// What was applied before the failure: created, replaced, destroyed.
        applied: (usize, usize, usize),
    },
    /// Destroy could not stop every resource; those stay in state.
    DestroyIncomplete {
        /// What could not be stopped.
        failures: Vec<Failure>,
    },
    /// A state write failed because the filesystem holding the state is full: what the
    /// failures name was done (stopped, for a destroy) but is not recorded.
    NoSpace {
        /// What could not be recorded (and anything else that failed).
        failures: Vec<Failure>,
        /// The command that ran: `apply` or `destroy`.
        command: &'static str,
    },
    /// Interrupted by a signal; state is saved.
    Interrupted {
        /// What was applied before stopping: created, replaced, destroyed.
        applied: (usize, usize, usize),
    },
    /// The command line names something that does not exist, or is ambiguous.
    Usage(String),
    /// Something the user asked for is not there (a deployment, a log).
    NotFound(String),
    /// The work itself failed (a benchmark request, a tokenizer that cannot be read).
    Failed(String),
    /// Interrupted by a signal, with what was kept.
    Cancelled(String),
    /// Points of a sweep failed (each recorded in the state with its reason).
    PointsFailed(String),
}

/// Why a confirmation was not given.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unconfirmed {
    /// stdin is not a terminal and `--auto-approve` was not passed.
    NoTerminal,
    /// `--json` output cannot ask.
    Json,
    /// The user answered something other than `yes`.
    Declined,
}

impl From<OpError> for ExpectedError {
    fn from(e: OpError) -> Self {
        ExpectedError::Op(Box::new(e))
    }
}

impl From<srt::recipe::RecipeError> for ExpectedError {
    fn from(e: srt::recipe::RecipeError) -> Self {
        OpError::from(e).into()
    }
}

impl From<srt::state::StateError> for ExpectedError {
    fn from(e: srt::state::StateError) -> Self {
        OpError::from(e).into()
    }
}

impl From<srt::plan::file::PlanFileError> for ExpectedError {
    fn from(e: srt::plan::file::PlanFileError) -> Self {
        OpError::from(e).into()
    }
}

impl From<srt::graph::GraphError> for ExpectedError {
    fn from(e: srt::graph::GraphError) -> Self {
        OpError::from(e).into()
    }
}

impl ExpectedError {
    /// The documented exit code (`docs/exit-codes.md`).
    pub fn exit_code(&self) -> i32 {
        match self {
            ExpectedError::Op(e) => e.exit_code(),
            ExpectedError::NotConfirmed { .. } => exit::NOT_CONFIRMED,
            ExpectedError::ApplyFailed { .. } | ExpectedError::DestroyIncomplete { .. } => {
                exit::APPLY_FAILED
            }
            ExpectedError::NoSpace { .. } => exit::NO_SPACE,
            ExpectedError::Interrupted { .. } => exit::INTERRUPTED,
            ExpectedError::Usage(_) => exit::USAGE,
            ExpectedError::NotFound(_) | ExpectedError::Failed(_) => exit::ERROR,
            ExpectedError::Cancelled(_) => exit::INTERRUPTED,
            ExpectedError::PointsFailed(_) => exit::APPLY_FAILED,
        }
    }

    /// Print it to stderr.
    pub fn report(&self) {
        match self {
            ExpectedError::Op(e) => report(e.as_ref()),
            ExpectedError::NotConfirmed { why, question } => match why {
                Unconfirmed::NoTerminal => shout!(
                    "error: refusing to {question} without confirmation: stdin is not a terminal; pass --auto-approve"
                ),
                Unconfirmed::Json => {
                    shout!("error: --json cannot ask for confirmation; pass --auto-approve");
                }
                Unconfirmed::Declined => shout!("Cancelled."),
            },
            ExpectedError::ApplyFailed {
                failures,
                skipped,
                applied: (created, replaced, destroyed),
            } => {
                shout!(
                    "\nApply failed: {} resource(s) failed, {skipped} skipped.",
                    failures.len()
                );
                failures.iter().for_each(print_failure);
                shout!(
                    "Applied before the failure: {created} created, {replaced} replaced, {destroyed} destroyed."
                );
            }
            ExpectedError::DestroyIncomplete { failures } => {
                shout!(
                    "Destroy incomplete: {} resource(s) could not be stopped; they stay in state.",
                    failures.len()
                );
                failures.iter().for_each(print_failure);
            }
            ExpectedError::NoSpace { failures, command } => {
                shout!(
                    "\n{command}: the filesystem holding the state is full, so {} change(s) could not be recorded.",
                    failures.len()
                );
                failures.iter().for_each(print_failure);
                shout!(
                    "help: what a failure above names as \"saving state\" was done (a stopped process is stopped), only not recorded; free space, then run `srt {command}` again: it finds what is gone and records it"
                );
            }
            ExpectedError::Interrupted {
                applied: (created, replaced, destroyed),
            } => shout!(
                "Apply interrupted: {created} created, {replaced} replaced, {destroyed} destroyed before stopping. State is saved; run `srt plan` to see what remains."
            ),
            ExpectedError::Usage(m)
            | ExpectedError::NotFound(m)
            | ExpectedError::Failed(m)
            | ExpectedError::PointsFailed(m) => {
                shout!("error: {m}");
            }
            ExpectedError::Cancelled(m) => shout!("{m}"),
        }
    }
}

/// One failure: its first line, what to check, then the log that explains it.
fn print_failure(f: &Failure) {
    shout!(
        "  {}: {}",
        f.address,
        f.error.lines().next().unwrap_or_default()
    );
    if let Some(help) = &f.help {
        shout!("  help: {help}");
    }
    if let Some(log) = &f.log {
        shout!("  --- last lines of {}'s log ---", log.of);
        for line in &log.lines {
            shout!("  | {line}");
        }
    }
}

/// What a command returns.
pub type CmdResult = Result<Done, ExpectedError>;

/// The exit code of a command's result, after printing its error if any.
pub(crate) fn finish(result: CmdResult) -> i32 {
    match result {
        Ok(Done::Changes) => exit::CHANGES,
        Ok(Done::Ok) => exit::OK,
        Err(e) => {
            e.report();
            e.exit_code()
        }
    }
}
