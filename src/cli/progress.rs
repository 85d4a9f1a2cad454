//! Apply progress: timestamped lines on a terminal, plain lines otherwise, nothing but
//! errors with `--quiet`, and one JSON object per line with `--json`.

use crate::apply::{Event, Outcome};
use crate::plan::Plan;
use std::io::IsTerminal;
use std::time::Instant;

/// How progress is shown.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// A terminal: lines prefixed with the elapsed time.
    Tty,
    /// Not a terminal: plain lines.
    Plain,
    /// Only failures.
    Quiet,
    /// JSON events, one per line.
    Json,
}

impl Mode {
    /// Pick the mode from the flags and whether stdout is a terminal.
    pub fn choose(quiet: bool, json: bool) -> Mode {
        match (json, quiet) {
            (true, _) => Mode::Json,
            (false, true) => Mode::Quiet,
            _ if std::io::stdout().is_terminal() => Mode::Tty,
            _ => Mode::Plain,
        }
    }
}

fn json_line(v: serde_json::Value) {
    say!("{v}");
}

/// The event sink for [`crate::apply::Apply`].
pub fn printer(mode: Mode) -> impl Fn(Event) + Sync {
    let start = Instant::now();
    move |e: Event| {
        if mode == Mode::Json {
            let v = match &e {
                Event::Started { address, action } => {
                    serde_json::json!({"type": "apply_start", "address": address, "action": action})
                }
                Event::Done {
                    address,
                    action,
                    detail,
                } => {
                    serde_json::json!({"type": "apply_complete", "address": address, "action": action, "detail": detail})
                }
                Event::Waiting { address, detail } => {
                    serde_json::json!({"type": "apply_progress", "address": address, "waiting_for": detail})
                }
                Event::Failed { address, error } => {
                    serde_json::json!({"type": "apply_errored", "address": address, "error": error})
                }
                Event::Skipped { address, because } => {
                    serde_json::json!({"type": "apply_skipped", "address": address, "because": because})
                }
            };
            json_line(v);
            return;
        }
        let line = match &e {
            Event::Started { address, action } => format!("{address}: {action}..."),
            Event::Done {
                address,
                action,
                detail,
            } => format!("{address}: {action} ({detail})"),
            Event::Waiting { address, detail } => format!("{address}: still waiting: {detail}"),
            Event::Failed { address, error } => format!("{address}: FAILED: {error}"),
            Event::Skipped { address, because } => format!("{address}: skipped ({because})"),
        };
        let line = if mode == Mode::Tty {
            format!("[{:>6.1}s] {line}", start.elapsed().as_secs_f64())
        } else {
            line
        };
        if matches!(e, Event::Failed { .. }) {
            eprintln!("{line}");
        } else if mode != Mode::Quiet {
            say!("{line}");
        }
    }
}

/// `--json`: the plan as `planned_change` events and a `change_summary`.
pub fn plan_events(plan: &Plan) {
    for d in &plan.drift {
        json_line(
            serde_json::json!({"type": "resource_drift", "address": d.address, "detail": d.detail}),
        );
    }
    for c in plan
        .changes
        .iter()
        .filter(|c| c.action != crate::plan::Action::NoOp)
    {
        json_line(
            serde_json::json!({"type": "planned_change", "address": c.address, "kind": c.kind, "action": c.action, "actions": c.action.steps(), "reasons": c.reasons}),
        );
    }
    let s = plan.summary();
    json_line(
        serde_json::json!({"type": "change_summary", "operation": "plan", "create": s.create, "replace": s.replace, "destroy": s.destroy}),
    );
}

/// `--json`: the final summary of an apply.
pub fn outcome_event(o: &Outcome, url: &str) {
    json_line(serde_json::json!({
        "type": "change_summary",
        "operation": "apply",
        "created": o.created,
        "replaced": o.replaced,
        "destroyed": o.destroyed,
        "checked": o.checked,
        "failed": o.failed.iter().map(|(a, e)| serde_json::json!({"address": a, "error": e})).collect::<Vec<_>>(),
        "skipped": o.skipped,
        "interrupted": o.interrupted,
        "url": url,
    }));
}
