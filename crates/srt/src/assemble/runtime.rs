//! srtctl's runtime keys applied to the launch plan (`recipe::runtime`): `environment`
//! joins every role's `env` (so every rule about a role's variables holds for it), the
//! `{node}` / `{node_id}` placeholders of both are expanded per process, the setup
//! scripts and the profiler wrap the workers, the mounts every containerized process.

use crate::catalog::{Catalog, Resolution};
use crate::engine::Engine;
use crate::input::{self, Input};
use crate::launch::wrap::{ProfileRun, Setup};
use crate::launch::{node_host, LaunchProcess, RUN_DIR};
use crate::recipe::diag::Problem;
use crate::recipe::runtime::{ProfilerKind, ScriptRef};
use crate::recipe::{Recipe, RoleKind};
use std::borrow::Cow;
use std::sync::Arc;

/// `recipe` with its top-level `environment` in every role's `env`, after the role's
/// own variables (srtctl's order: a variable in both takes `environment`'s value);
/// borrowed as it is without one.
pub(super) fn with_environment(recipe: Cow<'_, Recipe>) -> Cow<'_, Recipe> {
    let rt = &recipe.runtime;
    if rt.environment.is_empty() {
        return recipe;
    }
    let (env, spans) = (rt.environment.clone(), rt.environment_spans.clone());
    let mut merged = recipe.into_owned();
    for role in &mut merged.roles {
        role.env.extend(env.clone());
        role.env_spans.extend(spans.clone());
    }
    Cow::Owned(merged)
}

/// `environment` is in every role's `env`, so a rule about one of its variables is
/// found once per role, at the variable: kept once, and named as written.
pub(super) fn environment_problems(recipe: &Recipe, problems: &mut Vec<Problem>) {
    let at: std::collections::BTreeMap<(usize, usize), &String> = recipe
        .runtime
        .environment_spans
        .iter()
        .map(|(k, s)| ((s.offset(), s.len()), k))
        .collect();
    let mut seen = std::collections::BTreeSet::new();
    problems.retain_mut(|p| {
        let Some(key) = at.get(&(p.span.offset(), p.span.len())) else {
            return true;
        };
        for role in &recipe.roles {
            let written = format!("roles.{}.env.{key}", role.kind.name());
            p.message = p.message.replace(&written, &format!("environment.{key}"));
        }
        seen.insert((p.code, p.span.offset()))
    });
}

/// The runtime keys' rules: the scheduler options as `sbatch` and `srun` read them,
/// the profiled roles among the recipe's.
pub(super) fn check(recipe: &Recipe, problems: &mut Vec<Problem>) {
    let rt = &recipe.runtime;
    problems.extend(crate::cluster::recipe_options(
        &rt.sbatch_directives,
        "sbatch_directives",
        true,
    ));
    problems.extend(crate::cluster::recipe_options(
        &rt.srun_options,
        "srun_options",
        false,
    ));
    let Some(profiling) = &rt.profiling else {
        return;
    };
    if profiling.phases.is_empty() {
        problems.push(
            Problem::new(
                "srt::recipe::profiling",
                profiling.span,
                "`profiling` names no role to profile",
            )
            .label("no phase")
            .help("add `prefill` and `decode` (or `aggregated`) with `start_step` and `stop_step`"),
        );
    }
    for phase in &profiling.phases {
        if !recipe.roles.iter().any(|r| r.kind == phase.role) {
            problems.push(
                Problem::new(
                    "srt::recipe::profiling",
                    phase.span,
                    format!(
                        "`profiling` profiles `{}` workers, and the recipe has no `roles.{}`",
                        phase.role.srtctl_name(),
                        phase.role.name()
                    ),
                )
                .label("no such role")
                .help("profile the recipe's roles: `prefill`/`decode` for prefill and decode workers, `aggregated` for `agg`"),
            );
        }
    }
}

/// The flag a Dynamo worker wrapper writes its resolved configuration with (srtctl's
/// `enable_config_dump`).
const DUMP_FLAG: &str = "dump-config-to";

/// Whether the workers' wrapper program (its `catalog`) takes [`DUMP_FLAG`].
pub(super) fn takes_config_dump(wrapper: Option<&Catalog>) -> bool {
    wrapper.is_some_and(|c| matches!(c.resolve(DUMP_FLAG), Resolution::Exact(..)))
}

/// `enable_config_dump: true` against the workers' `wrapper`: a warning when their
/// program takes no such flag (srtctl passes it to Dynamo's wrappers only, and nothing
/// is dumped), an error where a role's args name the file too.
pub(super) fn config_dump_check(
    recipe: &Recipe,
    wrapper: Option<&Catalog>,
    wrapper_args: &[(RoleKind, crate::recipe::Args)],
    problems: &mut Vec<Problem>,
) {
    let Some(at) = recipe.runtime.config_dump else {
        return;
    };
    if !takes_config_dump(wrapper) {
        problems.push(
            Problem::warning(
                "srt::recipe::config_dump",
                at,
                "no worker of this deployment runs a program with `--dump-config-to`: nothing is dumped",
            )
            .label("no effect here")
            .help("Dynamo's worker wrappers take it (`frontend.type: dynamo`), as srtctl passes it; `srt render --json` shows every process's resolved command and environment"),
        );
        return;
    }
    for (role, args) in wrapper_args {
        if let Some(arg) = args.get(DUMP_FLAG) {
            problems.push(
                Problem::new(
                    "srt::recipe::conflict",
                    arg.key_span,
                    format!("`roles.{}.args.{DUMP_FLAG}` and `enable_config_dump: true` both name where the configuration goes", role.name()),
                )
                .label("set one of them")
                .help(format!("`enable_config_dump: true` writes each worker's to {RUN_DIR}/config/<process>.json")),
            );
        }
    }
}

/// [`DUMP_FLAG`] and the file of the process at `address`.
pub(super) fn config_dump_flag(address: &str) -> [String; 2] {
    [
        format!("--{DUMP_FLAG}"),
        format!("{RUN_DIR}/config/{address}.json"),
    ]
}

/// The runtime keys applied to the built processes: placeholders of the workers' env,
/// their setup scripts and profiler, every containerized process's mounts.
pub(super) fn apply(
    recipe: &Recipe,
    engine: &dyn Engine,
    processes: &mut [LaunchProcess],
) -> Result<(), Vec<Problem>> {
    let scripts = read_scripts(recipe)?;
    let mounts: Vec<String> = recipe
        .runtime
        .mounts
        .iter()
        .map(|m| m.value.render())
        .collect();
    let mut problems = Vec::new();
    for p in processes.iter_mut() {
        if p.container_image.is_some() {
            p.wrap.mounts = mounts.clone();
        }
        let Some(role) = p.worker.as_ref().map(|w| w.role) else {
            continue;
        };
        expand_placeholders(recipe, role, p);
        // The recipe's scripts run first, then what the frontend's runtime set up
        // (srtctl's order: `setup_script`, then its Dynamo install).
        let own = std::mem::take(&mut p.wrap.setup);
        p.wrap.setup = scripts.iter().cloned().chain(own).collect();
        if let Err(why) = profile(recipe, engine, role, p) {
            let span = recipe
                .runtime
                .profiling
                .as_ref()
                .and_then(|x| x.phase(role))
                .map(|x| x.span)
                .unwrap_or(recipe.name.span);
            let problem = Problem::new("srt::recipe::profiling", span, why).label("profiled here");
            if !problems
                .iter()
                .any(|q: &Problem| q.message == problem.message)
            {
                problems.push(problem);
            }
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(problems)
    }
}

/// Every script the workers run, read once (a file another user could change is
/// refused): `host_setup` first, as it runs outside the container.
fn read_scripts(recipe: &Recipe) -> Result<Vec<Setup>, Vec<Problem>> {
    let rt = &recipe.runtime;
    let mut out = Vec::new();
    let mut problems = Vec::new();
    for (script, on_host) in [(&rt.host_setup, true), (&rt.setup_script, false)] {
        let Some(script) = script else { continue };
        match read_script(script) {
            Ok(text) => out.push(Setup {
                key: script.key,
                on_host,
                source: script.written.value.clone(),
                path: format!("{RUN_DIR}/setup/{}.sh", script.key),
                digest: crate::secrets::digest(&text),
                text: Arc::from(text),
            }),
            Err(p) => problems.push(p),
        }
    }
    if problems.is_empty() {
        Ok(out)
    } else {
        Err(problems)
    }
}

fn read_script(script: &ScriptRef) -> Result<String, Problem> {
    let kind = Input {
        key: script.key,
        ..input::SETUP_SCRIPT
    };
    input::read_trusted(&script.path, kind).map_err(|e| {
        let missing = matches!(&e, input::InputError::Read { source, .. } if source.kind() == std::io::ErrorKind::NotFound);
        let absolute = std::path::Path::new(&script.written.value).is_absolute();
        let help = match missing {
            true if absolute => format!("`{}` names no file: write the path of the script", script.key),
            true => format!(
                "`{}` is read relative to the recipe's directory (or is absolute), then in the cluster profile's `script_dirs`; srtctl looks a name up in its `configs/` and `configs/patches/` directories: name that checkout in the cluster profile (`srtctl_root` in srtslurm.yaml, `script_dirs` in srt's), or write the script's path",
                script.key
            ),
            false => miette::Diagnostic::help(&e).map(|h| h.to_string()).unwrap_or_default(),
        };
        Problem::new("srt::recipe::setup_script", script.written.span, e.to_string())
            .label("this script")
            .help(help)
    })
}

/// `{node}` (the process's node host name, `<nodeN-host>` until the executor knows
/// it) and `{node_id}` (its node index) in the role's variables, as srtctl formats
/// role `env` and `environment`: other `{...}` are left as written, `{{` and `}}` are
/// braces.
fn expand_placeholders(recipe: &Recipe, role: RoleKind, p: &mut LaunchProcess) {
    let Some(r) = recipe.roles.iter().find(|r| r.kind == role) else {
        return;
    };
    for (key, value) in &r.env {
        if value.contains(['{', '}']) && p.env.get(key) == Some(value) {
            let expanded = expand(value, p.node);
            p.env.insert(key.clone(), expanded);
        }
    }
}

/// [`expand_placeholders`] of one value on node `node`.
pub(crate) fn expand(value: &str, node: usize) -> String {
    let mut out = String::with_capacity(value.len());
    let mut rest = value;
    while let Some(at) = rest.find(['{', '}']) {
        out.push_str(&rest[..at]);
        let tail = &rest[at..];
        if tail.starts_with("{{") || tail.starts_with("}}") {
            out.push_str(&tail[..1]);
            rest = &tail[2..];
        } else if let Some(t) = tail.strip_prefix("{node}") {
            out.push_str(&node_host(node));
            rest = t;
        } else if let Some(t) = tail.strip_prefix("{node_id}") {
            out.push_str(&node.to_string());
            rest = t;
        } else {
            out.push_str(&tail[..1]);
            rest = &tail[1..];
        }
    }
    out.push_str(rest);
    out
}

/// A worker of a profiled role under its profiler: srtctl's variables
/// (`PROFILING_MODE`, `PROFILE_TYPE`, `PROFILE_<MODE>_START_STEP`/`STOP_STEP`), the
/// engine's own flags and variables, and for nsys the `nsys profile` prefix writing
/// `<run-dir>/profiles/<role>/<address>.nsys-rep`.
fn profile(
    recipe: &Recipe,
    engine: &dyn Engine,
    role: RoleKind,
    p: &mut LaunchProcess,
) -> Result<(), String> {
    let Some(profiling) = &recipe.runtime.profiling else {
        return Ok(());
    };
    let Some(phase) = profiling.phase(role) else {
        return Ok(());
    };
    let kind = profiling.kind.value;
    let dir = format!("{RUN_DIR}/profiles/{}", role.name());
    let mode = role.name().to_ascii_uppercase();
    for (k, v) in [
        ("PROFILING_MODE".to_string(), role.name().to_string()),
        ("PROFILE_TYPE".to_string(), kind.name().to_string()),
        (
            format!("PROFILE_{mode}_START_STEP"),
            phase.start_step.to_string(),
        ),
        (
            format!("PROFILE_{mode}_STOP_STEP"),
            phase.stop_step.to_string(),
        ),
    ] {
        p.env.insert(k, v);
    }
    if kind == ProfilerKind::Nsys {
        let mut prefix: Vec<String> = [
            "nsys",
            "profile",
            "-t",
            "cuda,nvtx",
            "--cuda-graph-trace=node",
            "-c",
            "cudaProfilerApi",
            "--capture-range-end",
            "stop",
            "--force-overwrite",
            "true",
        ]
        .map(str::to_string)
        .into();
        prefix.extend(profiling.extra_nsys_args.iter().map(|a| a.value.clone()));
        prefix.extend(["-o".to_string(), format!("{dir}/{}", p.address)]);
        p.wrap.prefix = prefix;
    }
    p.wrap.dirs = vec![dir.clone()];
    engine.profile(
        p,
        &ProfileRun {
            kind,
            start_step: phase.start_step,
            stop_step: phase.stop_step,
            dir,
        },
    )
}

#[cfg(test)]
mod tests {
    use super::expand;

    #[test]
    fn node_placeholders_expand_as_srtctl_formats_them() {
        assert_eq!(
            expand("/tmp/{node}_{node_id}.log", 3),
            "/tmp/<node3-host>_3.log"
        );
        assert_eq!(expand("{other} {{node}} }x{", 1), "{other} {node} }x{");
        assert_eq!(expand("plain", 0), "plain");
    }
}
