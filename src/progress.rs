//! Apply progress: timestamped lines on a terminal, plain lines otherwise, nothing but
//! errors with `--quiet`, and one JSON object per line with `--json`.

use srt::apply::{Event, Outcome};
use srt::plan::Plan;
use std::io::IsTerminal;
use std::time::Instant;

/// How progress is shown.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mode {
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
    pub(crate) fn choose(quiet: bool, json: bool) -> Mode {
        match (json, quiet) {
            (true, _) => Mode::Json,
            (false, true) => Mode::Quiet,
            _ if std::io::stdout().is_terminal() => Mode::Tty,
            _ => Mode::Plain,
        }
    }
}

fn json_line(v: serde_json::Value) {
    say_exact!("{v}");
}

/// The event sink for [`srt::apply::Apply`].
pub(crate) fn printer(mode: Mode) -> impl Fn(Event) + Sync {
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
                Event::Failed(f) => {
                    let mut v = failure_json(f);
                    v["type"] = "apply_errored".into();
                    v
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
            Event::Failed(f) => format!("{}: FAILED: {}", f.address, f.error),
            Event::Skipped { address, because } => format!("{address}: skipped ({because})"),
        };
        let line = if mode == Mode::Tty {
            format!("[{:>6.1}s] {line}", start.elapsed().as_secs_f64())
        } else {
            line
        };
        if matches!(e, Event::Failed(_)) {
            shout!("{line}");
        } else if mode != Mode::Quiet {
            say!("{line}");
        }
    }
}

/// `--json`: the plan as `planned_change` events and a `change_summary`.
pub(crate) fn plan_events(plan: &Plan) {
    for d in &plan.drift {
        json_line(
            serde_json::json!({"type": "resource_drift", "address": d.address, "detail": d.detail}),
        );
    }
    for c in plan
        .changes
        .iter()
        .filter(|c| c.action != srt::plan::Action::NoOp)
    {
        json_line(
            serde_json::json!({"type": "planned_change", "address": c.address, "kind": c.kind, "action": c.action, "actions": c.action.steps(), "reasons": c.reasons}),
        );
    }
    let s = plan.summary();
    let mut summary = serde_json::json!({"type": "change_summary", "operation": "plan", "create": s.create, "update": s.update, "replace": s.replace, "destroy": s.destroy, "check": s.check});
    // As in `srt plan --json`: said only of a plan made without refresh.
    if !plan.refreshed {
        summary["refreshed"] = false.into();
    }
    json_line(summary);
}

/// `--json`: the final summary of an apply.
pub(crate) fn outcome_event(o: &Outcome, url: &str) {
    json_line(serde_json::json!({
        "type": "change_summary",
        "operation": "apply",
        "created": o.created,
        "updated": o.updated,
        "replaced": o.replaced,
        "destroyed": o.destroyed,
        "untracked_stopped": o.untracked,
        "checked": o.checked,
        "failed": o.failed.iter().map(failure_json).collect::<Vec<_>>(),
        "skipped": o.skipped,
        "interrupted": o.interrupted,
        "url": url,
    }));
}

/// A failure as JSON: its address, error, the log lines that explain it, and what to
/// check (`null` when srt has nothing to add).
fn failure_json(f: &srt::apply::Failure) -> serde_json::Value {
    serde_json::json!({
        "address": f.address,
        "error": f.error,
        "log_of": f.log.as_ref().map(|l| &l.of),
        "log": f.log.as_ref().map(|l| &l.lines),
        "help": f.help,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use srt::apply::{Failure, LogTail};

    #[test]
    fn a_failure_in_json_carries_its_log_as_lines() {
        let f = Failure {
            address: "gate.router".into(),
            error: "`worker.agg[0].node[0]` died while waiting: exited with 1".into(),
            log: Some(LogTail {
                of: "worker.agg[0].node[0]".into(),
                lines: vec![
                    "--- srt: starting worker.agg[0].node[0] ---".into(),
                    "boom".into(),
                ],
            }),
            help: None,
        };
        assert_eq!(
            failure_json(&f),
            serde_json::json!({
                "address": "gate.router",
                "error": "`worker.agg[0].node[0]` died while waiting: exited with 1",
                "log_of": "worker.agg[0].node[0]",
                "log": ["--- srt: starting worker.agg[0].node[0] ---", "boom"],
                "help": null,
            })
        );
        let none = Failure { log: None, ..f };
        assert_eq!(failure_json(&none)["log"], serde_json::Value::Null);
    }
}
