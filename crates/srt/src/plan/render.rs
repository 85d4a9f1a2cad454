//! Human plan output: Terraform-style symbols, a reason per change, a word-level diff of
//! changed command lines, and the summary line. No colour, stable order.

use super::{Action, Plan};
use similar::{ChangeTag, TextDiff};
use std::fmt::Write;

/// A word-level diff: removed words as `[-old-]`, added as `{+new+}`. Consecutive
/// words of one kind share one marker (`{+--max-model-len 1024+}`), with the spaces
/// around the run left outside it.
///
/// The words the two lines start with in common are not diffed: a replaced process's
/// command line differs from the recorded one in a flag or two, and a plan shows one per
/// replaced process (12,288 for one role at 24,576 nodes). (Their common end is diffed:
/// where a word could match more than one place, the diff of the whole lines picks one
/// that a cut there would not.)
pub fn word_diff(before: &str, after: &str) -> String {
    let head = common_head(before, after);
    let mut out = String::with_capacity(after.len() + 16);
    out.push_str(&before[..head]);
    word_diff_into(&mut out, &before[head..], &after[head..]);
    out
}

/// The byte length of the head two lines have in common, ending at a word boundary in
/// both (after a space, before a printable ASCII byte; other whitespace may continue a
/// run, so the cut is a boundary but not always the last one), so that the rest
/// tokenizes as it does within the whole lines.
fn common_head(before: &str, after: &str) -> usize {
    let (b, a) = (before.as_bytes(), after.as_bytes());
    let boundary = |at: usize, s: &[u8]| {
        at == s.len() || (at > 0 && s[at - 1] == b' ' && s[at].is_ascii_graphic())
    };
    let mut head = crate::graph::spec::common_prefix(b, a);
    while head > 0 && !(boundary(head, b) && boundary(head, a)) {
        head -= 1;
    }
    head
}

/// [`word_diff`] of `before` and `after` in full, appended to `out`.
fn word_diff_into(out: &mut String, before: &str, after: &str) {
    let diff = TextDiff::from_words(before, after);
    let mut run: Option<(ChangeTag, String)> = None;
    let flush = |out: &mut String, run: Option<(ChangeTag, String)>| {
        let Some((tag, text)) = run else { return };
        let body = text.trim();
        let lead = &text[..text.len() - text.trim_start().len()];
        let trail = &text[text.trim_end().len()..];
        match tag {
            ChangeTag::Equal => out.push_str(&text),
            _ if body.is_empty() => out.push_str(&text),
            ChangeTag::Delete => {
                let _ = write!(out, "{lead}[-{body}-]{trail}");
            }
            ChangeTag::Insert => {
                let _ = write!(out, "{lead}{{+{body}+}}{trail}");
            }
        }
    };
    for change in diff.iter_all_changes() {
        let tag = change.tag();
        match &mut run {
            Some((t, text)) if *t == tag => text.push_str(change.value()),
            _ => {
                flush(out, run.take());
                run = Some((tag, change.value().to_string()));
            }
        }
    }
    flush(out, run);
}

/// The command lines of a replaced process whose line changes, before and after.
fn replaced_lines(c: &super::Change) -> Option<(&str, &str)> {
    match (c.action, &c.before_command, &c.after_command) {
        (Action::Replace, Some(b), Some(a)) if b != a => Some((b, a)),
        _ => None,
    }
}

fn verb(action: Action) -> &'static str {
    match action {
        Action::Create => "will be created",
        Action::Replace => "will be replaced",
        Action::Destroy => "will be destroyed",
        Action::Check => "will be checked",
        Action::Update => "will be updated in-place",
        Action::NoOp => "is up to date",
    }
}

/// What a plan made without refresh says first.
pub const NOT_REFRESHED: &str =
    "Note: the live deployment was not refreshed (--refresh=false): this plan trusts the \
     recorded state, and does not show a process that died or a Router that lost a worker.\n\n";

/// The plan as text.
pub fn render(plan: &Plan) -> String {
    let mut out = String::new();
    let _ = render_to(plan, &mut out);
    out
}

/// The plan as text, written to `out` piece by piece: a plan of 50,000 resources is
/// 22 MB of text, which a caller can write out as it comes instead of holding it.
pub fn render_to<W: Write>(plan: &Plan, out: &mut W) -> std::fmt::Result {
    if !plan.refreshed {
        out.write_str(NOT_REFRESHED)?;
    }
    if !plan.drift.is_empty() {
        out.write_str("Note: objects changed outside srt:\n\n")?;
        for d in &plan.drift {
            writeln!(out, "  ~ {}: {}", d.address, d.detail)?;
        }
        out.write_char('\n')?;
    }
    if !plan.allocations.is_empty() {
        out.write_str("Allocations:\n\n")?;
        for n in &plan.allocations {
            writeln!(out, "  {}: {}", n.address, n.detail)?;
        }
        out.write_char('\n')?;
    }
    if !plan.orphans.is_empty() {
        out.write_str(
            "Note: processes srt started that no record tracks (left by an interrupted srt); apply and destroy stop them:\n\n",
        )?;
        for o in &plan.orphans {
            writeln!(out, "  ! {}: pid {}", o.address, pids(&o.pids))?;
        }
        out.write_char('\n')?;
    }
    let s = plan.summary();
    if !plan.has_changes() {
        out.write_str("No changes. The deployment matches the recipe.\n")?;
        if s.check > 0 {
            writeln!(out, "Apply would re-check {} gate(s).", s.check)?;
        }
        return Ok(());
    }
    let present: Vec<Action> = [
        Action::Create,
        Action::Update,
        Action::Replace,
        Action::Destroy,
        Action::Check,
    ]
    .into_iter()
    .filter(|a| plan.changes.iter().any(|c| c.action == *a))
    .collect();
    out.write_str("srt will perform the following actions:\n")?;
    let replaced = |first: bool| {
        plan.changes
            .iter()
            .any(|c| c.action == Action::Replace && c.create_first == first)
    };
    for a in &present {
        let legend = match a {
            Action::Create => "create",
            Action::Update => "update in-place",
            Action::Replace if replaced(false) => "destroy and then create replacement",
            Action::Replace => "",
            Action::Destroy => "destroy",
            Action::Check => "check (re-run every apply)",
            Action::NoOp => "",
        };
        if !legend.is_empty() {
            writeln!(out, "  {:>3} {legend}", a.symbol())?;
        }
        if *a == Action::Replace && replaced(true) {
            writeln!(out, "  +/- create replacement and then destroy")?;
        }
    }
    out.write_char('\n')?;
    // The command-line diffs of replaced processes, worked out first: on threads when
    // there are many (a role's workers).
    let lines: Vec<(&str, &str)> = plan.changes.iter().filter_map(replaced_lines).collect();
    let work: Vec<usize> = lines.iter().map(|(b, a)| b.len() + a.len()).collect();
    let mut diffs = crate::parallel::map_slices(&work, |range| {
        lines[range].iter().map(|(b, a)| word_diff(b, a)).collect()
    })
    .into_iter();
    for c in plan.changes.iter().filter(|c| c.action != Action::NoOp) {
        let verb = match c.create_first {
            true => "will be replaced, the new one first",
            false => verb(c.action),
        };
        writeln!(out, "  # {} {verb}", c.address)?;
        for r in &c.reasons {
            writeln!(out, "  #   because {}", r.describe())?;
        }
        if let Some(note) = &c.note {
            writeln!(out, "  #   note: {note}")?;
        }
        writeln!(out, "  {:>3} {} ({})", c.symbol(), c.address, c.kind)?;
        if replaced_lines(c).is_some() {
            let diff = diffs.next().expect("one diff per replaced command line");
            writeln!(out, "      command: {diff}")?;
        } else if let (Action::Create, Some(a)) = (c.action, &c.after_command) {
            writeln!(out, "      command: {a}")?;
        }
        if let Some(m) = &c.members {
            for (url, worker) in m.added.iter() {
                writeln!(out, "      + {url} ({worker})")?;
            }
            for (url, worker) in &m.removed {
                writeln!(out, "      - {url} ({worker})")?;
            }
        }
        out.write_char('\n')?;
    }
    out.write_str(&counts_line(plan))?;
    Ok(())
}

fn counts_line(plan: &Plan) -> String {
    let s = plan.summary();
    let orphans = match plan.orphans.len() {
        0 => String::new(),
        1 => "; 1 untracked process to stop".to_string(),
        n => format!("; {n} untracked processes to stop"),
    };
    let update = match s.update {
        0 => String::new(),
        n => format!("{n} to update in-place, "),
    };
    // Gates and checks are resources too (destroy forgets them): counted apart, so that
    // what is created plus what is checked is what a destroy later counts.
    let check = match s.check {
        0 => String::new(),
        n => format!(", {n} to check"),
    };
    format!(
        "Plan: {} to create, {update}{} to replace, {} to destroy{check}{orphans}.\n",
        s.create, s.replace, s.destroy
    )
}

fn pids(pids: &[u32]) -> String {
    pids.iter()
        .map(u32::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// The plan's last line alone (`Plan: N to create, ...` or `No changes...`), for
/// `--quiet`; drift is still named, since it explains the counts.
pub fn summary_line(plan: &Plan) -> String {
    let mut out = String::new();
    for d in &plan.drift {
        let _ = writeln!(out, "Drift: {}: {}", d.address, d.detail);
    }
    if plan.has_changes() {
        out.push_str(&counts_line(plan));
    } else {
        out.push_str("No changes. The deployment matches the recipe.\n");
    }
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
        #[serde(skip_serializing_if = "Option::is_none")]
        members: &'a Option<super::MemberDiff>,
        #[serde(skip_serializing_if = "Option::is_none")]
        note: &'a Option<String>,
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
        #[serde(skip_serializing_if = "<[_]>::is_empty")]
        untracked_processes: &'a [super::Orphan],
        #[serde(skip_serializing_if = "super::was_refreshed")]
        refreshed: bool,
        #[serde(skip_serializing_if = "Option::is_none")]
        identity: &'a Option<serde_json::Value>,
        #[serde(skip_serializing_if = "<[_]>::is_empty")]
        allocations: &'a [super::Note],
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
        untracked_processes: &plan.orphans,
        refreshed: plan.refreshed,
        identity: &plan.identity,
        allocations: &plan.allocations,
        resource_changes: plan
            .changes
            .iter()
            .map(|c| JsonChange {
                address: &c.address,
                kind: c.kind.name(),
                action: c.action,
                actions: c.steps(),
                reasons: &c.reasons,
                before_hash: &c.before_hash,
                after_hash: &c.after_hash,
                members: &c.members,
                note: &c.note,
            })
            .collect(),
    };
    serde_json::to_string_pretty(&doc).expect("plan serializes")
}

/// The first 12 characters of a hash for display; a hash read from a (hand-edited)
/// state file may be shorter or not ASCII.
fn short_hash(hash: &str) -> String {
    hash.chars().take(12).collect()
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
                // At most 160 characters (never cut inside one).
                match s.char_indices().nth(160).map(|(i, _)| i) {
                    Some(cut) if cut < s.len() => format!("{}...", &s[..cut]),
                    _ => s,
                }
            }
        }
    }
    let mut out = String::new();
    for c in plan
        .changes
        .iter()
        .filter(|c| matches!(c.action, Action::Replace | Action::Update))
    {
        let _ = writeln!(out, "{} ({}):", c.address, c.kind);
        let before = state.resources.get(&c.address).map(|r| r.spec.value());
        let after = graph.get(&c.address).map(|r| r.spec.value());
        for r in &c.reasons {
            match r {
                super::Reason::SpecChanged { fields } => {
                    for f in fields {
                        let (b, a) = match f.strip_prefix("env.") {
                            Some(var) => (
                                before
                                    .as_ref()
                                    .and_then(|s| s.get("env"))
                                    .and_then(|e| e.get(var)),
                                after
                                    .as_ref()
                                    .and_then(|s| s.get("env"))
                                    .and_then(|e| e.get(var)),
                            ),
                            None => (
                                before.as_ref().and_then(|s| s.get(f)),
                                after.as_ref().and_then(|s| s.get(f)),
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
                super::Reason::DependencyChanged { dependencies }
                | super::Reason::MustRestart { dependencies, .. } => {
                    if let super::Reason::MustRestart { why, .. } = r {
                        let _ = writeln!(out, "  must restart: {why}");
                    }
                    for d in dependencies {
                        let b = state
                            .resources
                            .get(d)
                            .map(|r| short_hash(&r.hash))
                            .unwrap_or_else(|| "(new)".into());
                        let a = graph
                            .get(d)
                            .map(|r| short_hash(&r.hash))
                            .unwrap_or_else(|| "(gone)".into());
                        let _ = writeln!(out, "  dependency {d}: hash {b} -> {a}");
                    }
                }
                other => {
                    let _ = writeln!(out, "  {}", other.describe());
                }
            }
        }
        let hash = |h: &Option<String>| h.as_deref().map(short_hash).unwrap_or_else(|| "-".into());
        let _ = writeln!(
            out,
            "  hash: {} -> {}",
            hash(&c.before_hash),
            hash(&c.after_hash)
        );
    }
    if out.is_empty() {
        out.push_str("Nothing is replaced or updated.\n");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What [`word_diff`] writes is what the diff of the whole lines writes, whatever
    /// the lines share at either end.
    #[test]
    fn word_diff_is_the_diff_of_the_whole_lines() {
        let words = [
            "a", "b", "--x", "1", "a", " ", "  ", "\t", "\u{a0}", "é", "'q r'", "a\tb",
        ];
        let seed = std::cell::Cell::new(0x2545_f491_4f6c_dd1du64);
        let next = |n: usize| {
            let mut x = seed.get();
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            seed.set(x);
            (x % n as u64) as usize
        };
        let line = |len: usize| {
            let mut s = String::new();
            for i in 0..len {
                if i > 0 {
                    s.push(' ');
                }
                s.push_str(words[next(words.len())]);
            }
            s
        };
        for _ in 0..20_000 {
            let before = line(next(8));
            let after = if next(2) == 0 {
                // An edit of `before`: a word changed, added or removed.
                let mut w: Vec<&str> = before.split(' ').collect();
                let at = next(w.len() + 1);
                match next(3) {
                    0 if at < w.len() => w[at] = words[next(words.len())],
                    1 => w.insert(at.min(w.len()), words[next(words.len())]),
                    _ if at < w.len() => {
                        w.remove(at);
                    }
                    _ => {}
                }
                w.join(" ")
            } else {
                line(next(8))
            };
            let mut whole = String::new();
            word_diff_into(&mut whole, &before, &after);
            assert_eq!(word_diff(&before, &after), whole, "{before:?} -> {after:?}");
        }
    }

    #[test]
    fn word_diff_marks_changed_words() {
        let d = word_diff(
            "vllm serve --max-model-len 4096",
            "vllm serve --max-model-len 8192",
        );
        assert_eq!(d, "vllm serve --max-model-len [-4096-]{+8192+}");
    }

    #[test]
    fn an_inserted_flag_is_one_run() {
        let d = word_diff(
            "vllm serve /m --port 6100",
            "vllm serve /m --max-model-len 1024 --port 6100",
        );
        assert_eq!(d, "vllm serve /m {+--max-model-len 1024+} --port 6100");
        let d = word_diff(
            "vllm serve /m --enforce-eager --port 1",
            "vllm serve /m --port 1",
        );
        assert_eq!(d, "vllm serve /m [---enforce-eager-] --port 1");
        let d = word_diff("a b", "a b --x 1");
        assert_eq!(d, "a b {+--x 1+}");
    }
}
