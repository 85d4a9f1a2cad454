//! Human plan output: Terraform-style symbols, a reason per change, a word-level diff of
//! changed command lines, and the summary line. No colour, stable order.

use super::{Action, Plan};
use similar::{ChangeTag, TextDiff};
use std::fmt::Write;

/// A word-level diff: removed words as `[-old-]`, added as `{+new+}`.
pub fn word_diff(before: &str, after: &str) -> String {
    let diff = TextDiff::from_words(before, after);
    let mut out = String::new();
    for change in diff.iter_all_changes() {
        let text = change.value();
        match change.tag() {
            ChangeTag::Equal => out.push_str(text),
            ChangeTag::Delete => {
                let _ = write!(out, "[-{text}-]");
            }
            ChangeTag::Insert => {
                let _ = write!(out, "{{+{text}+}}");
            }
        }
    }
    out
}

fn verb(action: Action) -> &'static str {
    match action {
        Action::Create => "will be created",
        Action::Replace => "will be replaced",
        Action::Destroy => "will be destroyed",
        Action::Check => "will be checked",
        Action::NoOp => "is up to date",
    }
}

/// The plan as text.
pub fn render(plan: &Plan) -> String {
    let mut out = String::new();
    if !plan.drift.is_empty() {
        out.push_str("Note: objects changed outside srt:\n\n");
        for d in &plan.drift {
            let _ = writeln!(out, "  ~ {}: {}", d.address, d.detail);
        }
        out.push('\n');
    }
    let s = plan.summary();
    if !plan.has_changes() {
        out.push_str("No changes. The deployment matches the recipe.\n");
        if s.check > 0 {
            let _ = writeln!(out, "Apply would re-check {} gate(s).", s.check);
        }
        return out;
    }
    let present: Vec<Action> = [
        Action::Create,
        Action::Replace,
        Action::Destroy,
        Action::Check,
    ]
    .into_iter()
    .filter(|a| plan.changes.iter().any(|c| c.action == *a))
    .collect();
    out.push_str("srt will perform the following actions:\n");
    for a in &present {
        let legend = match a {
            Action::Create => "create",
            Action::Replace => "destroy and then create replacement",
            Action::Destroy => "destroy",
            Action::Check => "check (re-run every apply)",
            Action::NoOp => "",
        };
        let _ = writeln!(out, "  {:>3} {legend}", a.symbol());
    }
    out.push('\n');
    for c in plan.changes.iter().filter(|c| c.action != Action::NoOp) {
        let _ = writeln!(out, "  # {} {}", c.address, verb(c.action));
        for r in &c.reasons {
            let _ = writeln!(out, "  #   because {}", r.describe());
        }
        let _ = writeln!(out, "  {:>3} {} ({})", c.action.symbol(), c.address, c.kind);
        match (c.action, &c.before_command, &c.after_command) {
            (Action::Replace, Some(b), Some(a)) if b != a => {
                let _ = writeln!(out, "      command: {}", word_diff(b, a));
            }
            (Action::Create, _, Some(a)) => {
                let _ = writeln!(out, "      command: {a}");
            }
            _ => {}
        }
        out.push('\n');
    }
    let _ = writeln!(
        out,
        "Plan: {} to create, {} to replace, {} to destroy.",
        s.create, s.replace, s.destroy
    );
    out
}

/// The plan as versioned JSON. Secrets never reach it: specs carry digests only.
pub fn json(plan: &Plan) -> String {
    #[derive(serde::Serialize)]
    struct JsonChange<'a> {
        address: &'a str,
        kind: &'a str,
        action: super::Action,
        actions: &'static [&'static str],
        reasons: &'a [super::Reason],
        before_hash: &'a Option<String>,
        after_hash: &'a Option<String>,
    }
    #[derive(serde::Serialize)]
    struct JsonPlan<'a> {
        format_version: u32,
        deployment: &'a str,
        lineage: &'a str,
        serial: u64,
        recipe_hash: &'a str,
        srt_version: &'a str,
        has_changes: bool,
        summary: super::Summary,
        resource_drift: &'a [super::Drift],
        resource_changes: Vec<JsonChange<'a>>,
    }
    let doc = JsonPlan {
        format_version: plan.format_version,
        deployment: &plan.deployment,
        lineage: &plan.lineage,
        serial: plan.serial,
        recipe_hash: &plan.recipe_hash,
        srt_version: &plan.srt_version,
        has_changes: plan.has_changes(),
        summary: plan.summary(),
        resource_drift: &plan.drift,
        resource_changes: plan
            .changes
            .iter()
            .map(|c| JsonChange {
                address: &c.address,
                kind: &c.kind,
                action: c.action,
                actions: c.action.steps(),
                reasons: &c.reasons,
                before_hash: &c.before_hash,
                after_hash: &c.after_hash,
            })
            .collect(),
    };
    serde_json::to_string_pretty(&doc).expect("plan serializes")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn word_diff_marks_changed_words() {
        let d = word_diff(
            "vllm serve --max-model-len 4096",
            "vllm serve --max-model-len 8192",
        );
        assert_eq!(d, "vllm serve --max-model-len [-4096-]{+8192+}");
    }
}
