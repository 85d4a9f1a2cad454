//! A `custom` benchmark (srtctl's): the recipe's command, run to completion by the
//! executor as a process of its own on the node of the public endpoint, in the
//! benchmark's container (else the model's), after the smoke completion.
//!
//! It is told the deployment as srtctl tells it (`benchmark_stage`'s environment):
//! `SRT_FRONTEND_HOST` and `SRT_FRONTEND_PORT` (and `SRT_FRONTEND_URL`, srtctl's direct
//! runner's), `SRTCTL_FRONTEND_TYPE`, per role `SRT_<ROLE>_IPS` and
//! `SRT_<ROLE>_ENDPOINTS` (each worker's leader, in order), `AIPERF_SERVER_METRICS_URLS`
//! (their `/metrics`), then the recipe's `environment`, then the benchmark's `env`.

use crate::launch::{node_ip, CommandRun, Gate, LaunchProcess, Probe, COMMAND_STARTS, RUN_DIR};
use crate::recipe::{CommandBenchmark, Recipe};
use std::collections::BTreeMap;

/// The public URL, as the shell variable every command benchmark is given
/// (`SRT_FRONTEND_URL`), for the scripts srt writes.
pub(super) const FRONTEND_URL: &str = "$SRT_FRONTEND_URL";

/// A word of a script srt writes: one of its shell `variables` (`$name`), expanded in
/// double quotes; anything else quoted as it is.
pub(super) fn shell_word(arg: &str, variables: &[&str]) -> String {
    if variables.contains(&arg) {
        format!("\"{arg}\"")
    } else {
        crate::launch::render::quote(arg)
    }
}

/// The shell that runs the command and records what it exits with (`$1` the command,
/// `$2` the status file, in a directory made if missing; a status left by an earlier
/// run is removed first), by a login shell or not. It starts its output with
/// [`COMMAND_STARTS`], so that a failure shows this run's lines only.
fn runner(login_shell: bool) -> String {
    let shell = if login_shell { "bash -lc" } else { "bash -c" };
    format!(
        r#"mkdir -p "${{2%/*}}" && rm -f "$2" || exit; echo "{COMMAND_STARTS}"; {shell} "$1"; status=$?; echo "$status" > "$2"; exit "$status""#
    )
}

/// The gate that runs `c` once every earlier check passed; `what` names it in the
/// gate's description (`custom benchmark`, `gsm8k evaluation`).
pub(super) fn gate(
    recipe: &Recipe,
    what: &str,
    c: &CommandBenchmark,
    public_url: &str,
    processes: &[LaunchProcess],
) -> Gate {
    let node = processes
        .iter()
        .find(|p| p.ports.contains_key(crate::ports::PUBLIC))
        .map_or(0, |p| p.node);
    let status = format!("{RUN_DIR}/benchmark.status");
    let argv = [
        "bash",
        "-c",
        &runner(c.login_shell),
        "srt-benchmark",
        &c.command,
        &status,
    ]
    .map(String::from)
    .to_vec();
    let mut env = endpoints_env(recipe, public_url, processes);
    env.extend(
        recipe
            .runtime
            .environment
            .iter()
            .map(|(k, v)| (k.clone(), super::runtime::expand(v, node))),
    );
    env.extend(c.env.clone());
    Gate {
        address: "benchmark".into(),
        description: format!(
            "{what}: `{}` exits 0 on node {node}",
            first_line(&c.command)
        ),
        probe: Probe::Command(CommandRun {
            node,
            argv,
            env,
            image: c
                .container_image
                .clone()
                .or_else(|| recipe.model.container.clone()),
            status,
        }),
        depends_on: vec!["smoke".into()],
    }
}

/// The command's first line, for the description.
fn first_line(command: &str) -> String {
    let line = command.trim().lines().next().unwrap_or_default();
    if command.trim().lines().nth(1).is_some() {
        format!("{line} ...")
    } else {
        line.to_string()
    }
}

/// srtctl's variables naming the deployment's endpoints.
fn endpoints_env(
    recipe: &Recipe,
    public_url: &str,
    processes: &[LaunchProcess],
) -> BTreeMap<String, String> {
    let mut env = BTreeMap::new();
    let (host, port) = host_port(public_url);
    env.insert("SRT_FRONTEND_HOST".into(), host.to_string());
    env.insert("SRT_FRONTEND_PORT".into(), port.to_string());
    env.insert("SRT_FRONTEND_URL".into(), public_url.to_string());
    env.insert(
        "SRTCTL_FRONTEND_TYPE".into(),
        recipe.frontend.kind.value.clone(),
    );
    let mut metrics = Vec::new();
    for role in &recipe.roles {
        let leaders: Vec<String> = processes
            .iter()
            .filter_map(|p| {
                let info = p.worker.as_ref()?;
                (info.role == role.kind && !info.headless).then(|| leader_url(p))?
            })
            .collect();
        if leaders.is_empty() {
            continue;
        }
        let name = role.kind.name().to_uppercase();
        let endpoints: Vec<&str> = leaders.iter().map(|u| host_port_text(u)).collect();
        let ips: Vec<&str> = leaders.iter().map(|u| host_port(u).0).collect();
        env.insert(format!("SRT_{name}_IPS"), ips.join(","));
        env.insert(format!("SRT_{name}_ENDPOINTS"), endpoints.join(","));
        metrics.extend(leaders.iter().map(|u| format!("{u}/metrics")));
    }
    if !metrics.is_empty() {
        env.insert("AIPERF_SERVER_METRICS_URLS".into(), metrics.join(","));
    }
    env
}

/// The base URL a worker's leader serves on: the URL it is reached at, else the one
/// it is probed on (a runtime's system server).
fn leader_url(p: &LaunchProcess) -> Option<String> {
    let info = p.worker.as_ref()?;
    if let Some(url) = &info.advertised_url {
        return Some(url.clone());
    }
    match p.health_probe()? {
        Probe::Http { urls, .. }
        | Probe::JsonCounts { urls, .. }
        | Probe::JsonItems { urls, .. } => urls.into_iter().next(),
        Probe::Learned { url, .. } => Some(url),
        _ => Some(format!("http://{}", node_ip(p.node))),
    }
}

/// `host:port` of a base URL.
fn host_port_text(url: &str) -> &str {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    rest.split('/').next().unwrap_or(rest)
}

/// The host and port of a base URL.
fn host_port(url: &str) -> (&str, &str) {
    let text = host_port_text(url);
    text.rsplit_once(':').unwrap_or((text, ""))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_url_splits_into_host_and_port() {
        assert_eq!(host_port("http://<node0-ip>:8000"), ("<node0-ip>", "8000"));
        assert_eq!(host_port_text("http://10.0.0.1:30001/x"), "10.0.0.1:30001");
        assert_eq!(first_line("a\nb"), "a ...");
        assert_eq!(first_line("  a  "), "a");
    }
}
