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

/// `srt plan --explain`: for every replaced resource, each hash input that changed, with
/// its value before and after (secrets are digests in specs, so nothing leaks).
pub fn explain(
    plan: &Plan,
    state: &crate::state::State,
    graph: &crate::graph::ResourceGraph,
) -> String {
    fn short(v: Option<&serde_json::Value>) -> String {
        match v {
            None => "(absent)".into(),
            Some(v) => {
                let s = crate::graph::canonical(v);
                if s.len() > 160 {
                    format!("{}...", &s[..160])
                } else {
                    s
                }
            }
        }
    }
    let mut out = String::new();
    for c in plan.changes.iter().filter(|c| c.action == Action::Replace) {
        let _ = writeln!(out, "{} ({}):", c.address, c.kind);
        let before = state.resources.get(&c.address);
        let after = graph.get(&c.address);
        for r in &c.reasons {
            match r {
                super::Reason::SpecChanged { fields } => {
                    for f in fields {
                        let (b, a) = match f.strip_prefix("env.") {
                            Some(var) => (
                                before
                                    .and_then(|s| s.spec.get("env"))
                                    .and_then(|e| e.get(var)),
                                after
                                    .and_then(|s| s.spec.get("env"))
                                    .and_then(|e| e.get(var)),
                            ),
                            None => (
                                before.and_then(|s| s.spec.get(f)),
                                after.and_then(|s| s.spec.get(f)),
                            ),
                        };
                        if f == "argv" {
                            let line = |v: Option<&serde_json::Value>| {
                                v.and_then(|v| v.as_array())
                                    .map(|a| {
                                        a.iter()
                                            .filter_map(|x| x.as_str().map(str::to_string))
                                            .collect::<Vec<_>>()
                                    })
                                    .map(|a| crate::launch::render::command_line(&a))
                                    .unwrap_or_default()
                            };
                            let _ = writeln!(out, "  spec.argv: {}", word_diff(&line(b), &line(a)));
                        } else {
                            let _ = writeln!(out, "  spec.{f}: {} -> {}", short(b), short(a));
                        }
                    }
                }
                super::Reason::DependencyChanged { dependencies } => {
                    for d in dependencies {
                        let b = state
                            .resources
                            .get(d)
                            .map(|r| r.hash[..12].to_string())
                            .unwrap_or_else(|| "(new)".into());
                        let a = graph
                            .get(d)
                            .map(|r| r.hash[..12].to_string())
                            .unwrap_or_else(|| "(gone)".into());
                        let _ = writeln!(out, "  dependency {d}: hash {b} -> {a}");
                    }
                }
                other => {
                    let _ = writeln!(out, "  {}", other.describe());
                }
            }
        }
        let hash = |h: &Option<String>| {
            h.as_deref()
                .map(|h| h[..12.min(h.len())].to_string())
                .unwrap_or_else(|| "-".into())
        };
        let _ = writeln!(
            out,
            "  hash: {} -> {}",
            hash(&c.before_hash),
            hash(&c.after_hash)
        );
    }
    if out.is_empty() {
        out.push_str("Nothing is replaced.\n");
    }
    out
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
