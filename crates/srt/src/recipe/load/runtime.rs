//! Loading srtctl's runtime keys ([`crate::recipe::runtime`]): each checked here as a
//! shape, with its span; what a script holds and whether the scheduler takes an option
//! is checked where it is used (the assembly, `cluster::recipe_options`).

use super::{Fields, Loader};
use crate::recipe::diag::Problem;
use crate::recipe::keys;
use crate::recipe::model::{RoleKind, Sp};
use crate::recipe::runtime::*;
use crate::recipe::yaml::{Node, Value};
use std::path::Path;

impl Loader<'_> {
    /// Every runtime key of the top-level mapping `f`.
    pub(super) fn runtime(&mut self, f: &Fields) -> RuntimeKeys {
        let environment = self.env(f, "environment");
        let config_dump = f
            .get("enable_config_dump")
            .and_then(|n| self.config_dump(n));
        RuntimeKeys {
            host_setup: self.script(f, "host_setup"),
            setup_script: self.script(f, "setup_script"),
            mounts: self.mounts(f),
            sbatch_directives: self.option_map(f, "sbatch_directives"),
            srun_options: self.srun_options(f),
            environment_spans: self.env_spans(f, "environment"),
            environment_span: f.key_span("environment"),
            environment,
            identity: f.get("identity").and_then(|n| self.identity(n)),
            profiling: f
                .get("profiling")
                .and_then(|n| self.profiling(n, f.key_span("profiling").unwrap_or(n.span))),
            config_dump,
        }
    }

    /// A script path: a string, resolved against the recipe's directory.
    fn script(&mut self, f: &Fields, key: &'static str) -> Option<ScriptRef> {
        let node = f.get(key)?;
        if node.value == Value::Null {
            return None;
        }
        let written = self.string(node, key)?;
        if written.trim().is_empty() {
            self.problem(
                Problem::new(
                    "srt::recipe::value",
                    node.span,
                    format!("`{key}` is empty"),
                )
                .label("no script")
                .help("name a bash script, relative to the recipe's directory or absolute, or remove the key"),
            );
            return None;
        }
        let path = if Path::new(&written).is_absolute() {
            Path::new(&written).to_path_buf()
        } else {
            self.dir.join(&written)
        };
        Some(ScriptRef {
            key,
            written: Sp::new(written, node.span),
            path,
        })
    }

    /// `container_mounts` (host -> container) then `extra_mount` (`host:container[:flags]`).
    fn mounts(&mut self, f: &Fields) -> Vec<Sp<Mount>> {
        let mut out = Vec::new();
        if let Some(node) = f.get("container_mounts") {
            match &node.value {
                Value::Null => {}
                Value::Map(entries) => {
                    for (k, v) in entries {
                        let path = format!("container_mounts.{}", k.name);
                        let Some(container) = self.string(v, &path) else {
                            continue;
                        };
                        let span = k.span;
                        if let Some(m) = self.mount(&k.name, &container, None, span, &path) {
                            out.push(Sp::new(m, span));
                        }
                    }
                }
                _ => self.type_error(
                    node,
                    "container_mounts",
                    "a mapping of host paths to container paths",
                ),
            }
        }
        if let Some(node) = f.get("extra_mount") {
            match &node.value {
                Value::Null => {}
                Value::Seq(items) => {
                    for item in items {
                        let Some(text) = self.string(item, "extra_mount") else {
                            continue;
                        };
                        let mut parts = text.splitn(3, ':');
                        let (host, container, flags) = (parts.next(), parts.next(), parts.next());
                        match (host, container) {
                            (Some(h), Some(c)) => {
                                if let Some(m) =
                                    self.mount(h, c, flags, item.span, "extra_mount")
                                {
                                    out.push(Sp::new(m, item.span));
                                }
                            }
                            _ => self.problem(
                                Problem::new(
                                    "srt::recipe::mount",
                                    item.span,
                                    format!("`extra_mount` entry `{}` is not `host:container[:flags]`", crate::term::escape_line(&text)),
                                )
                                .label("no container path")
                                .help("write `/host/path:/container/path`, with `:ro` to mount it read-only"),
                            ),
                        }
                    }
                }
                _ => self.type_error(node, "extra_mount", "a list of `host:container[:flags]`"),
            }
        }
        out
    }

    /// One mount, refused when pyxis would read it otherwise (a `,` separates mounts,
    /// a `:` fields) or when the container path is not absolute.
    fn mount(
        &mut self,
        host: &str,
        container: &str,
        flags: Option<&str>,
        span: miette::SourceSpan,
        path: &str,
    ) -> Option<Mount> {
        let bad = |s: &str| s.is_empty() || s.contains([',', ':', '\n']);
        let why = if bad(host) {
            Some("the host path is empty or holds `,` or `:`")
        } else if bad(container) {
            Some("the container path is empty or holds `,` or `:`")
        } else if !container.starts_with('/') {
            Some("the container path is not absolute")
        } else if flags.is_some_and(|f| !f.split('+').all(mount_flag)) {
            Some("the flags are not mount options (`ro`, `size=100%`, `+`-separated)")
        } else {
            None
        };
        if let Some(why) = why {
            self.problem(
                Problem::new(
                    "srt::recipe::mount",
                    span,
                    format!("`{path}`: {why}"),
                )
                .label("not a mount")
                .help("pyxis takes `SRC:DST[:FLAGS]` with an absolute DST; `,` separates mounts, so no path may hold one"),
            );
            return None;
        }
        // A relative host path is the recipe's, as a relative script path is; a bare
        // word (`tmpfs`) is a source the container runtime names.
        let host = match host.starts_with('/') || !host.contains('/') {
            true => host.to_string(),
            false => std::path::absolute(self.dir.join(host))
                .unwrap_or_else(|_| self.dir.join(host))
                .display()
                .to_string(),
        };
        Some(Mount {
            host,
            container: container.to_string(),
            flags: flags.map(str::to_string),
        })
    }

    /// srtctl's mapping of options (`sbatch_directives`, `srun_options`): `name: value`
    /// is `--name=value`, an empty or null value `--name`.
    fn option_map(&mut self, f: &Fields, key: &str) -> Vec<Sp<String>> {
        let Some(node) = f.get(key) else {
            return Vec::new();
        };
        let entries = match &node.value {
            Value::Null => return Vec::new(),
            Value::Map(entries) => entries,
            _ => {
                self.type_error(node, key, "a mapping of option names to values");
                return Vec::new();
            }
        };
        let mut out = Vec::new();
        for (k, v) in entries {
            let name = k.name.trim_start_matches('-');
            if name.is_empty()
                || !name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
            {
                self.problem(
                    Problem::new(
                        "srt::recipe::flag_name",
                        k.span,
                        format!(
                            "`{}` is not an option name in `{key}`",
                            crate::term::escape_line(&k.name)
                        ),
                    )
                    .label("not an option name")
                    .help("write the option's long name without dashes, e.g. `mem: 0`"),
                );
                continue;
            }
            let value = match &v.value {
                Value::Null => None,
                Value::Str(s) if s.is_empty() => None,
                Value::Str(s) => Some(s.clone()),
                Value::Int(i) => Some(i.to_string()),
                Value::Float(x) => Some(x.to_string()),
                _ => {
                    self.type_error(
                        v,
                        &format!("{key}.{}", k.name),
                        "a string, a number, `\"\"` or null (a switch)",
                    );
                    continue;
                }
            };
            let word = match value {
                Some(value) => format!("--{name}={value}"),
                None => format!("--{name}"),
            };
            out.push(Sp::new(word, k.span));
        }
        out
    }

    /// `srun_options`: srtctl's mapping, or a list of options as a cluster profile
    /// writes them.
    fn srun_options(&mut self, f: &Fields) -> Vec<Sp<String>> {
        let Some(node) = f.get("srun_options") else {
            return Vec::new();
        };
        let Value::Seq(items) = &node.value else {
            return self.option_map(f, "srun_options");
        };
        items
            .iter()
            .filter_map(|item| {
                let word = self.string(item, "srun_options")?;
                Some(Sp::new(word, item.span))
            })
            .collect()
    }

    /// `enable_config_dump`: its span when `true` (the assembly passes the flag where
    /// the workers' program takes it, and says so where none does).
    fn config_dump(&mut self, node: &Node) -> Option<miette::SourceSpan> {
        match &node.value {
            Value::Bool(false) | Value::Null => None,
            Value::Bool(true) => Some(node.span),
            _ => {
                self.type_error(node, "enable_config_dump", "true or false");
                None
            }
        }
    }

    fn identity(&mut self, node: &Node) -> Option<Identity> {
        if node.value == Value::Null {
            return None;
        }
        let f = self.fields(node, "identity", &keys::names(keys::IDENTITY), &[])?;
        let mut out = Identity::default();
        if let Some(m) = f.get("model").filter(|n| n.value != Value::Null) {
            if let Some(mf) =
                self.fields(m, "identity.model", &keys::names(keys::IDENTITY_MODEL), &[])
            {
                out.model.repo = self.opt_string(&mf, "repo");
                out.model.revision = self.opt_string(&mf, "revision");
            }
        }
        if let Some(c) = f.get("container").filter(|n| n.value != Value::Null) {
            if let Some(cf) = self.fields(
                c,
                "identity.container",
                &keys::names(keys::IDENTITY_CONTAINER),
                &[],
            ) {
                out.container_image = self.opt_string(&cf, "image");
            }
        }
        if let Some(fw) = f.get("frameworks") {
            match &fw.value {
                Value::Null => {}
                Value::Map(entries) => {
                    for (k, v) in entries {
                        let value = match &v.value {
                            Value::Str(s) => s.clone(),
                            Value::Int(i) => i.to_string(),
                            Value::Float(x) => x.to_string(),
                            _ => {
                                self.type_error(
                                    v,
                                    &format!("identity.frameworks.{}", k.name),
                                    "a version string",
                                );
                                continue;
                            }
                        };
                        out.frameworks.insert(k.name.clone(), value);
                    }
                }
                _ => self.type_error(fw, "identity.frameworks", "a mapping of names to versions"),
            }
        }
        Some(out)
    }

    fn profiling(&mut self, node: &Node, span: miette::SourceSpan) -> Option<Profiling> {
        if node.value == Value::Null {
            return None;
        }
        let f = self.fields(node, "profiling", &keys::names(keys::PROFILING), &[])?;
        let Some(t) = f.get("type") else {
            self.problem(
                Problem::new(
                    "srt::recipe::missing_key",
                    span,
                    "`profiling` has no `type`",
                )
                .label("type expected")
                .help("set `type: nsys` or `type: torch`"),
            );
            return None;
        };
        let kind = match self.string(t, "profiling.type")?.as_str() {
            "none" => return None,
            "nsys" => ProfilerKind::Nsys,
            "torch" => ProfilerKind::Torch,
            other => {
                self.problem(
                    Problem::new(
                        "srt::recipe::value",
                        t.span,
                        format!("`profiling.type` `{}` is not a profiler srt runs", crate::term::escape_line(other)),
                    )
                    .label("unknown profiler")
                    .help("use `nsys`, `torch` or `none` (srtctl's `nsys-time` is not supported: capture by engine steps with `nsys`)"),
                );
                return None;
            }
        };
        let mut extra = Vec::new();
        if let Some(n) = f.get("extra_nsys_args") {
            match &n.value {
                Value::Null => {}
                Value::Seq(items) => {
                    for item in items {
                        if let Some(s) = self.string(item, "profiling.extra_nsys_args") {
                            extra.push(Sp::new(s, item.span));
                        }
                    }
                }
                _ => self.type_error(n, "profiling.extra_nsys_args", "a list of strings"),
            }
            if kind != ProfilerKind::Nsys && !extra.is_empty() {
                self.problem(
                    Problem::new(
                        "srt::recipe::conflict",
                        n.span,
                        "`profiling.extra_nsys_args` is for `type: nsys`",
                    )
                    .label("not read by this profiler")
                    .help("remove it, or profile with `type: nsys`"),
                );
            }
        }
        let mut phases = Vec::new();
        for role in RoleKind::ALL {
            let key = role.srtctl_name();
            let Some(n) = f.get(key) else { continue };
            let path = format!("profiling.{key}");
            let Some(pf) = self.fields(n, &path, &keys::names(keys::PROFILING_PHASE), &[]) else {
                continue;
            };
            let start = self.u32_field(&pf, "start_step", 0, 1_000_000_000);
            let stop = self.u32_field(&pf, "stop_step", 1, 1_000_000_000);
            let phase_span = f.key_span(key).unwrap_or(n.span);
            match (start, stop) {
                (Some(a), Some(b)) if b.value > a.value => phases.push(Phase {
                    role,
                    span: phase_span,
                    start_step: a.value,
                    stop_step: b.value,
                }),
                (Some(_), Some(b)) => self.problem(
                    Problem::new(
                        "srt::recipe::range",
                        b.span,
                        format!("`{path}.stop_step` must be after `start_step`"),
                    )
                    .label("not after start_step"),
                ),
                (a, b) => {
                    for (v, name) in [(a, "start_step"), (b, "stop_step")] {
                        if v.is_none() && pf.get(name).is_none() {
                            self.problem(
                                Problem::new(
                                    "srt::recipe::missing_key",
                                    phase_span,
                                    format!("`{path}` has no `{name}`"),
                                )
                                .label(format!("{name} expected")),
                            );
                        }
                    }
                }
            }
        }
        Some(Profiling {
            span,
            kind: Sp::new(kind, t.span),
            extra_nsys_args: extra,
            phases,
        })
    }
}

/// One mount option as the container runtime reads them (`ro`, `rprivate`,
/// `size=100%`): letters, digits and `=%._-`; what it means is the runtime's to check.
fn mount_flag(flag: &str) -> bool {
    !flag.is_empty()
        && flag
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "=%._-".contains(c))
}
