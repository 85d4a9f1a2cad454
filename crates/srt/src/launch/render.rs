//! Human-readable rendering of a launch plan (`srt render`), the golden-file format.
//!
//! Deterministic by construction: processes in launch order, maps sorted, commands
//! shell-quoted through `shlex`, one flag per continuation line so reviews diff per flag.
//! Sensitive environment values are masked.

use super::{LaunchPlan, LaunchProcess, Probe};
use crate::secrets;
use std::fmt::Write;

/// Quote one argv token for a POSIX shell.
pub fn quote(token: &str) -> String {
    let mut out = String::new();
    push_quoted(&mut out, token);
    out
}

/// Bytes `shlex` leaves unquoted: `+-./:@]_`, digits and ASCII letters.
fn unquoted_ok(b: u8) -> bool {
    UNQUOTED[b as usize]
}

/// [`unquoted_ok`] of every byte, looked up: a plan tests every byte of every command
/// line it shows.
const UNQUOTED: [bool; 256] = {
    let mut table = [false; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        table[b] = c.is_ascii_alphanumeric()
            || matches!(c, b'+' | b'-' | b'.' | b'/' | b':' | b'@' | b']' | b'_');
        b += 1;
    }
    table
};

/// Append `token` quoted for a POSIX shell (what [`quote`] returns) to `out`: what
/// `shlex::try_quote` writes, byte for byte. The two common cases are decided here in one
/// pass without an allocation (a plan quotes every token of every command line it shows,
/// a Router's lists every worker): a token of unquoted-safe bytes is written as it is,
/// and one without `'`, `^`, `\` or NUL in single quotes (shlex's choice for both).
fn push_quoted(out: &mut String, token: &str) {
    let bytes = token.as_bytes();
    if !bytes.is_empty() && bytes.iter().all(|&b| unquoted_ok(b)) {
        out.push_str(token);
        return;
    }
    if !bytes.is_empty() && !bytes.iter().any(|b| matches!(b, b'\'' | b'^' | b'\\' | 0)) {
        out.push('\'');
        out.push_str(token);
        out.push('\'');
        return;
    }
    match shlex::try_quote(token) {
        Ok(quoted) => out.push_str(&quoted),
        Err(_) => {
            out.push('\'');
            out.push_str(&token.replace('\0', ""));
            out.push('\'');
        }
    }
}

/// The command as one shell line. Written into one buffer: plans render the command of
/// every changed process, and a Router's lists every worker.
pub fn command_line<S: AsRef<str>>(argv: impl IntoIterator<Item = S>) -> String {
    let mut line = CommandLine(String::new());
    for token in argv {
        line.push(token.as_ref());
    }
    line.0
}

/// A shell line built one token at a time (what [`command_line`] writes), for tokens
/// that are not in a slice.
#[derive(Default)]
pub struct CommandLine(pub String);

impl CommandLine {
    /// Append one token, quoted as needed.
    pub fn push(&mut self, token: &str) {
        if !self.0.is_empty() {
            self.0.push(' ');
        }
        push_quoted(&mut self.0, token);
    }
}

/// The command broken into lines: the program and positionals first, then one flag (with
/// its values) per continuation line.
pub fn command_lines<S: AsRef<str>>(argv: impl IntoIterator<Item = S>) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    let mut current = String::new();
    for token in argv {
        let token = token.as_ref();
        if token.starts_with("--") && !current.is_empty() {
            lines.push(std::mem::take(&mut current));
        }
        if !current.is_empty() {
            current.push(' ');
        }
        push_quoted(&mut current, token);
    }
    if !current.is_empty() {
        lines.push(current);
    }
    lines
}

fn write_command(out: &mut String, argv: &super::Argv) {
    let lines = command_lines(argv);
    let last = lines.len().saturating_sub(1);
    for (i, line) in lines.iter().enumerate() {
        let indent = if i == 0 { "  " } else { "    " };
        let cont = if i < last { " \\" } else { "" };
        let _ = writeln!(out, "{indent}{line}{cont}");
    }
}

fn write_process(out: &mut String, plan: &LaunchPlan, p: &LaunchProcess) {
    let _ = writeln!(out, "## {}", p.address);
    let _ = writeln!(out, "kind: {}", p.kind.name());
    let _ = writeln!(out, "node: {}", plan.nodes[p.node].name);
    if let Some(r) = &p.ranks {
        let nodes: Vec<&str> = r
            .nodes
            .iter()
            .map(|&n| plan.nodes[n].name.as_str())
            .collect();
        let _ = writeln!(
            out,
            "ranks: {} over {} (MPI {}), each under: {}",
            r.tasks,
            nodes.join(","),
            r.mpi,
            command_line(&r.launcher)
        );
    }
    if !p.devices.is_empty() {
        let d: Vec<String> = p.devices.iter().map(u32::to_string).collect();
        let _ = writeln!(out, "devices: {}", d.join(","));
    }
    if let Some(image) = &p.container_image {
        let _ = writeln!(out, "container_image: {image}");
    }
    if !p.ports.is_empty() {
        let _ = writeln!(out, "ports:");
        for (kind, block) in &p.ports {
            let _ = writeln!(out, "  {kind}: {block}");
        }
    }
    if let Some(url) = p.worker.as_ref().and_then(|w| w.advertised_url.as_ref()) {
        let _ = writeln!(out, "advertised: {url}");
    }
    if !p.env.is_empty() {
        env_lines(out, plan, &p.env);
    }
    if !p.env_unset.is_empty() {
        let _ = writeln!(out, "env_unset: {}", p.env_unset.join(" "));
    }
    if !p.depends_on.is_empty() {
        let _ = writeln!(out, "depends_on: {}", p.depends_on.join(" "));
    }
    if !p.watches.is_empty() {
        let _ = writeln!(out, "watches: {}", p.watches.join(" "));
    }
    for setup in &p.wrap.setup {
        let on = if setup.on_host { " (on the host)" } else { "" };
        let _ = writeln!(
            out,
            "{}: {} -> {} ({}){on}",
            setup.key,
            quote(&setup.source),
            setup.path,
            setup.digest
        );
    }
    for dir in &p.wrap.dirs {
        let _ = writeln!(out, "writes: {dir}");
    }
    if !p.wrap.mounts.is_empty() {
        let _ = writeln!(out, "mounts: {}", p.wrap.mounts.join(","));
    }
    let _ = writeln!(out, "command:");
    if p.wrap.setup.is_empty() && p.wrap.prefix.is_empty() {
        write_command(out, &p.argv);
    } else {
        let scripts: Vec<String> = p.wrap.setup.iter().map(|s| s.path.clone()).collect();
        let program = p.argv.iter().map(str::to_string).collect();
        let wrapped = p.wrap.command(&scripts, program, str::to_string);
        write_command(out, &super::Argv::from(wrapped));
    }
    for (path, content) in &p.files {
        let _ = writeln!(out, "file {path}:");
        for line in content.lines() {
            let _ = writeln!(out, "  | {line}");
        }
    }
    out.push('\n');
}

/// A probe in one line.
pub fn describe_probe(probe: &Probe) -> String {
    match probe {
        Probe::JsonCounts { urls, path, counts } => format!(
            "GET {{{}}}{path} until {}",
            urls.join(", "),
            counts
                .iter()
                .map(|c| format!("{} >= {}", c.pointers.join(" + "), c.at_least))
                .collect::<Vec<_>>()
                .join(" and ")
        ),
        Probe::JsonItems { urls, path, lists } => format!(
            "GET {{{}}}{path} until {}",
            urls.join(", "),
            lists
                .iter()
                .map(crate::launch::Listed::describe)
                .collect::<Vec<_>>()
                .join(" and ")
        ),
        Probe::Http { urls, path } => format!("GET {{{}}}{path} answers 2xx", urls.join(", ")),
        Probe::Learned {
            url,
            path,
            after,
            then,
        } => format!(
            "{} = what follows `{after}` in GET {url}{path}, then {}",
            crate::launch::LEARNED,
            describe_probe(then)
        ),
        Probe::Benchmark(spec) => spec.describe(),
        Probe::Command(run) => format!(
            "on node {}: {} exits 0 (its status in {})",
            run.node,
            run.argv
                .iter()
                .map(|w| quote(w))
                .collect::<Vec<_>>()
                .join(" "),
            run.status
        ),
        Probe::Completion { url, model } => {
            format!(
                "POST {url}/v1/completions {{\"model\": \"{model}\", \"max_tokens\": 1}} == 200"
            )
        }
    }
}

/// The whole plan as text.
pub fn render(plan: &LaunchPlan) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "# srt launch plan (format {})", plan.format_version);
    let _ = writeln!(out, "deployment: {}", plan.deployment);
    let _ = writeln!(out, "engine: {}", plan.engine);
    let _ = writeln!(out, "frontend: {}", plan.frontend);
    let _ = writeln!(out, "served_model_name: {}", plan.served_model_name);
    if let Some(p) = &plan.precision {
        let _ = writeln!(
            out,
            "precision: {p} (label only; vLLM flags decide the dtype)"
        );
    }
    if let Some(t) = &plan.gpu_type {
        let _ = writeln!(out, "gpu_type: {t}");
    }
    if let Some(identity) = &plan.identity {
        let _ = writeln!(
            out,
            "identity: {} (recorded, not launched)",
            identity.describe()
        );
    }
    let _ = writeln!(out, "public_url: {}", plan.public_url);
    let _ = writeln!(out, "nodes:");
    for n in &plan.nodes {
        let _ = writeln!(out, "  {}: ip {}, {} GPUs", n.name, n.ip, n.gpus);
    }
    if !plan.warnings.is_empty() {
        let _ = writeln!(out, "warnings:");
        for w in &plan.warnings {
            let _ = writeln!(out, "  {}: {}", w.code, w.message);
        }
    }
    let _ = writeln!(out, "processes: {}", plan.processes.len());
    let _ = writeln!(
        out,
        "rollout: {} endpoint(s) of a role replaced at a time, each drained for up to {}s and held {}s once healthy",
        plan.rollout.max_unavailable, plan.rollout.drain_seconds, plan.rollout.min_ready_seconds
    );
    out.push('\n');
    for f in &plan.files {
        let _ = writeln!(out, "## {}", f.address);
        let _ = writeln!(out, "kind: file");
        let _ = writeln!(out, "path: {}", f.path);
        for line in f.content.lines() {
            let _ = writeln!(out, "  | {line}");
        }
        out.push('\n');
    }
    for p in &plan.processes {
        write_process(&mut out, plan, p);
    }
    for m in &plan.memberships {
        let _ = writeln!(out, "## {}", m.address);
        let _ = writeln!(out, "kind: membership");
        let how = match m.mode {
            super::MembershipMode::Managed => "added and removed through its admin API",
            super::MembershipMode::Static => {
                "on its command line; taken out through its admin API before stopping"
            }
            super::MembershipMode::Discovery => "they register themselves over ZMQ",
        };
        let _ = writeln!(out, "router: {} at {} ({how})", m.router, m.admin_url);
        if let Some(note) = &m.note {
            let _ = writeln!(out, "note: {note}");
        }
        let _ = writeln!(out, "members:");
        for member in m.members.iter() {
            let _ = writeln!(
                out,
                "  {} ({}){}",
                member.url,
                member.worker,
                registered_as(m, member)
            );
        }
        out.push('\n');
    }
    for g in &plan.gates {
        let _ = writeln!(out, "## {}", g.address);
        let kind = match &g.probe {
            Probe::Completion { .. } => "smoke",
            Probe::Benchmark(_) | Probe::Command(_) => "benchmark",
            _ => "gate",
        };
        let _ = writeln!(out, "kind: {kind}");
        let _ = writeln!(out, "checks: {}", g.description);
        let _ = writeln!(out, "probe: {}", describe_probe(&g.probe));
        if let Probe::Command(run) = &g.probe {
            if let Some(image) = &run.image {
                let _ = writeln!(out, "image: {image}");
            }
            env_lines(&mut out, plan, &run.env);
        }
        let _ = writeln!(out, "depends_on: {}", g.depends_on.join(" "));
        out.push('\n');
    }
    out
}

/// An `env:` block, sensitive values masked.
fn env_lines(
    out: &mut String,
    plan: &LaunchPlan,
    env: &std::collections::BTreeMap<String, String>,
) {
    let _ = writeln!(out, "env:");
    for (k, v) in env {
        let shown = if plan.is_sensitive(k) {
            secrets::MASK.to_string()
        } else {
            quote(v)
        };
        let _ = writeln!(out, "  {k}={shown}");
    }
}

/// The plan as pretty JSON, with sensitive env values masked.
pub fn json(plan: &LaunchPlan) -> String {
    let mut masked = plan.clone();
    for g in &mut masked.gates {
        if let Probe::Command(run) = &mut g.probe {
            for (k, v) in &mut run.env {
                if plan.is_sensitive(k) {
                    *v = secrets::MASK.to_string();
                }
            }
        }
    }
    for p in &mut masked.processes {
        for (k, v) in &mut p.env {
            if plan.is_sensitive(k) {
                *v = secrets::MASK.to_string();
            }
        }
    }
    serde_json::to_string_pretty(&masked).expect("launch plan serializes")
}

/// What a managed membership's Router is told of a prefill or decode member besides
/// its URL: `: added as decode, kv_connector NixlConnector`.
fn registered_as(m: &super::Membership, member: &super::Member) -> String {
    if m.mode != super::MembershipMode::Managed || member.role == crate::recipe::RoleKind::Agg {
        return String::new();
    }
    let mut out = format!(": added as {}", member.role.name());
    if let Some(connector) = member.kv_connector {
        let _ = write!(out, ", kv_connector {connector}");
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_break_per_flag_and_quote() {
        let argv: Vec<String> = [
            "vllm",
            "serve",
            "/model",
            "--port",
            "6100",
            "--kv-transfer-config",
            r#"{"a":"b"}"#,
            "--x",
        ]
        .iter()
        .map(std::string::ToString::to_string)
        .collect();
        assert_eq!(
            command_lines(&argv),
            vec![
                "vllm serve /model",
                "--port 6100",
                r#"--kv-transfer-config '{"a":"b"}'"#,
                "--x"
            ]
        );
        assert_eq!(quote("daemon off;"), "'daemon off;'");
        assert_eq!(quote("<node0-ip>"), "'<node0-ip>'");
        assert_eq!(quote("a\0b c"), "'ab c'");
        assert_eq!(
            command_line(&argv),
            r#"vllm serve /model --port 6100 --kv-transfer-config '{"a":"b"}' --x"#
        );
        assert_eq!(command_line(["a\0b", "", "x"]), "'ab' '' x");
    }

    /// Every ASCII character (and a few others), alone and inside a word, is quoted as
    /// shlex quotes it.
    #[test]
    fn tokens_are_quoted_as_shlex_quotes_them() {
        let others = ['é', '\u{a0}', '✓'];
        for c in (1..128u8).map(char::from).chain(others) {
            for token in [c.to_string(), format!("a{c}b"), format!("{c}{c}")] {
                let shlex = shlex::try_quote(&token).unwrap();
                assert_eq!(quote(&token), shlex, "{token:?}");
            }
        }
    }
}
