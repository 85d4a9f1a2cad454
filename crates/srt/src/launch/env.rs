//! The environment and arguments a recipe gives processes, checked against what srt sets
//! itself and what the kernel runs.
//!
//! - srt marks every process it starts with [`SRT_ENV`] (how it finds its own processes):
//!   a recipe may not set those.
//! - Linux refuses to start a program (`E2BIG`, "Argument list too long") when one
//!   argument or environment string passes [`MAX_ARG_STRLEN`], or when all of them
//!   together pass `ARG_MAX` (a quarter of the stack limit: 2 MiB by default). The first
//!   is checked on the recipe ([`check`]), the second on each process of the launch plan
//!   ([`check_processes`]), against [`MAX_EXEC_BYTES`], which leaves room for the
//!   environment a process inherits. Both point at the key to change instead of letting
//!   the worker fail at start.
//!
//! Variables an engine sets or that choose its devices are the engine's to refuse
//! ([`crate::engine::Engine::managed_env`], [`crate::engine::Engine::placement_env`]).

use super::{LaunchProcess, ProcessKind};
use crate::recipe::diag::Problem;
use crate::recipe::{ArgValue, Args, Recipe};
use miette::SourceSpan;
use std::collections::BTreeMap;

/// Environment variable naming the deployment in every launched process (to find orphans).
pub const DEPLOYMENT_MARKER: &str = "SRT_DEPLOYMENT";
/// Environment variable naming the resource address in every launched process.
pub const RESOURCE_MARKER: &str = "SRT_RESOURCE";
/// Environment variable naming the deployment directory in every launched process:
/// with [`DEPLOYMENT_MARKER`], what proves a process is this deployment's when its
/// lease is gone (two state directories may hold deployments of one name).
pub const DIR_MARKER: &str = "SRT_DEPLOYMENT_DIR";

/// The kernel's limit on one argument or environment string, its final NUL included
/// (`MAX_ARG_STRLEN`, 32 pages).
pub const MAX_ARG_STRLEN: usize = 128 * 1024;

/// The most bytes of arguments and environment srt gives one process (strings, their
/// NULs and pointers): `ARG_MAX` is 2 MiB at the default 8 MiB stack, and this leaves
/// 128 KiB of it to the environment the process inherits. The largest deployment's
/// prefill/decode Router, whose command line lists every worker, takes about 1.8 MiB.
pub const MAX_EXEC_BYTES: usize = 1920 * 1024;

/// Variables srt sets on every process it starts, to find its own processes again.
pub const SRT_ENV: &[&str] = &[DEPLOYMENT_MARKER, DIR_MARKER, RESOURCE_MARKER];

/// One `env` mapping of the recipe: where it is and what it holds.
struct EnvOf<'a> {
    /// `roles.agg.env` or `frontend.env`.
    path: String,
    env: &'a BTreeMap<String, String>,
    spans: &'a BTreeMap<String, SourceSpan>,
    /// Where to point when a key has no span.
    fallback: SourceSpan,
}

fn envs(recipe: &Recipe) -> Vec<EnvOf<'_>> {
    let mut out: Vec<EnvOf<'_>> = recipe
        .roles
        .iter()
        .map(|r| EnvOf {
            path: format!("roles.{}.env", r.kind.name()),
            env: &r.env,
            spans: &r.env_spans,
            fallback: r.span,
        })
        .collect();
    out.push(EnvOf {
        path: "frontend.env".into(),
        env: &recipe.frontend.env,
        spans: &recipe.frontend.env_spans,
        fallback: recipe.frontend.span,
    });
    out
}

/// Refuse variables srt sets itself, and any variable or argument longer than the
/// kernel passes to a program.
pub fn check(recipe: &Recipe, problems: &mut Vec<Problem>) {
    for e in envs(recipe) {
        for (key, value) in e.env {
            let span = e.spans.get(key).copied().unwrap_or(e.fallback);
            if SRT_ENV.contains(&key.as_str()) {
                problems.push(srt_owned(&e.path, key, span));
            }
            // `KEY=VALUE` and its NUL.
            let len = key.len() + 1 + value.len() + 1;
            if len > MAX_ARG_STRLEN {
                problems.push(too_long(&format!("{}.{key}", e.path), len, span));
            }
        }
    }
    for r in &recipe.roles {
        args(&r.args, &format!("roles.{}.args", r.kind.name()), problems);
    }
    args(&recipe.frontend.args, "frontend.args", problems);
}

fn args(args: &Args, path: &str, problems: &mut Vec<Problem>) {
    for a in &args.0 {
        let len = value_len(&a.value) + 1;
        if len > MAX_ARG_STRLEN {
            problems.push(too_long(&format!("{path}.{}", a.key), len, a.value_span));
        }
    }
}

/// The longest command-line string a value renders to.
fn value_len(v: &ArgValue) -> usize {
    match v {
        ArgValue::Str(s) => s.len(),
        ArgValue::Json(j) => j.to_string().len(),
        ArgValue::List(items) => items.iter().map(value_len).max().unwrap_or(0),
        ArgValue::Null | ArgValue::Bool(_) | ArgValue::Int(_) | ArgValue::Float(_) => 0,
    }
}

fn srt_owned(path: &str, key: &str, span: SourceSpan) -> Problem {
    Problem::new(
        "srt::recipe::managed_env",
        span,
        format!("`{path}.{key}` is set by srt on every process it starts"),
    )
    .label("managed by srt")
    .help("remove it; srt marks its processes with it to find them again (orphans, `srt destroy`)")
}

fn too_long(path: &str, len: usize, span: SourceSpan) -> Problem {
    Problem::new(
        "srt::recipe::env_size",
        span,
        format!(
            "`{path}` is {} KiB; the kernel starts no program with an argument or environment string over {} KiB (MAX_ARG_STRLEN): the process would fail with \"Argument list too long\"",
            len.div_ceil(1024),
            MAX_ARG_STRLEN / 1024
        ),
    )
    .label("too long")
    .help("put the content in a file the process reads, and pass its path")
}

/// Bytes the kernel counts of a process's arguments and environment: each string, its
/// NUL and its pointer.
pub fn exec_bytes(p: &LaunchProcess) -> usize {
    let ptr = std::mem::size_of::<usize>();
    // What runs around the program is on its command line too (the setup shell's
    // script and the scripts' paths, a profiler's words).
    let setup = p.wrap.setup.iter().map(|s| s.path.as_str());
    let around = p.wrap.prefix.iter().map(String::as_str).chain(setup);
    let wrapper = match p.wrap.setup.is_empty() {
        true => 0,
        false => 128,
    };
    let argv: usize = p
        .argv
        .iter()
        .chain(around)
        .map(|a| a.len() + 1 + ptr)
        .sum::<usize>()
        + wrapper;
    let env: usize = p.env.iter().map(|(k, v)| k.len() + v.len() + 2 + ptr).sum();
    argv + env
}

/// Refuse a launch plan with a process whose arguments and environment together pass
/// [`MAX_EXEC_BYTES`]: one problem per role (and one for the frontend), at its largest
/// variable.
pub fn check_processes(recipe: &Recipe, processes: &[LaunchProcess]) -> Vec<Problem> {
    let envs = envs(recipe);
    let mut reported = std::collections::BTreeSet::new();
    let mut problems = Vec::new();
    for p in processes {
        let bytes = exec_bytes(p);
        if bytes <= MAX_EXEC_BYTES {
            continue;
        }
        let at = match (p.kind, &p.worker) {
            (ProcessKind::Worker, Some(w)) => recipe.roles.iter().position(|r| r.kind == w.role),
            _ => None,
        }
        .unwrap_or(envs.len() - 1);
        if !reported.insert(at) {
            continue;
        }
        problems.push(too_large(&envs[at], p, bytes));
    }
    problems
}

/// `p`'s arguments and environment (`bytes`) are past [`MAX_EXEC_BYTES`]: a problem at
/// the largest variable of the recipe's `e` for it, or at `e`'s role or frontend.
fn too_large(e: &EnvOf<'_>, p: &LaunchProcess, bytes: usize) -> Problem {
    let largest = e.env.iter().max_by_key(|(k, v)| (k.len() + v.len(), *k));
    let (span, label) = match largest.and_then(|(k, _)| e.spans.get(k)) {
        Some(span) => (*span, format!("the largest variable of `{}`", e.path)),
        None => (e.fallback, "its processes".to_string()),
    };
    Problem::new(
        "srt::recipe::env_size",
        span,
        format!(
            "`{}` would start with {} KiB of arguments and environment; srt gives a process at most {} KiB (the kernel's ARG_MAX is 2048 KiB by default, and the process inherits an environment too)",
            p.address,
            bytes.div_ceil(1024),
            MAX_EXEC_BYTES / 1024
        ),
    )
    .label(label)
    .help("move large values into files the process reads, and pass their paths")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn value_lengths_are_those_of_the_longest_rendered_string() {
        assert_eq!(value_len(&ArgValue::Str("abc".into())), 3);
        assert_eq!(
            value_len(&ArgValue::List(vec![
                ArgValue::Str("a".into()),
                ArgValue::Str("abcd".into())
            ])),
            4
        );
        assert_eq!(value_len(&ArgValue::Json(serde_json::json!({"a": 1}))), 7);
        assert_eq!(value_len(&ArgValue::Int(12345)), 0);
    }
}
