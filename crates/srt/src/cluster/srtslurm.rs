//! srtctl's cluster file, `srtslurm.yaml`, read as a cluster profile: its keys
//! re-spelled as the profile's on the spanned tree (spans kept, so every problem the
//! profile's checker finds points at the user's srtctl key), then checked like any
//! profile. srtctl runs every process in a container, so the profile is `executor:
//! slurm` with the pyxis runtime.
//!
//! | srtslurm.yaml | profile |
//! |---|---|
//! | `default_account`, `default_partition`, `default_time_limit` | `account`, `partition`, `time_limit` |
//! | `gpus_per_node`, `network_interface` | the same |
//! | `use_gpus_per_node_directive` (default true) | `gpu_request: gpus-per-node` (false: `gres`) |
//! | `use_exclusive_sbatch_directive: true` | `sbatch_options: [--exclusive]` |
//! | `default_sbatch_directives: {k: v}` | `sbatch_options: [--k=v]` |
//! | `default_mounts: {host: container}` | `container.flags: [--container-mounts=host:container,...]` |
//! | `model_paths`, `containers` | the same: aliases of `model.path` and of images |
//! | `srtctl_root: ROOT` | `script_dirs: [ROOT/configs, ROOT/configs/patches]`: where srtctl finds a recipe's `setup_script` (its `/configs` mount) |

use crate::recipe::diag::Problem;
use crate::recipe::srtctl::tree;
use crate::recipe::yaml::{Key, Node, Value};
use miette::SourceSpan;

/// The file name srtctl looks for.
pub const FILE: &str = "srtslurm.yaml";

/// Keys only srtctl's cluster file has: a file with one of them (and no `executor`)
/// is read as one.
const MARKERS: &[&str] = &[
    "default_account",
    "default_partition",
    "default_time_limit",
    "use_gpus_per_node_directive",
    "use_segment_sbatch_directive",
    "use_exclusive_sbatch_directive",
    "default_sbatch_directives",
    "default_mounts",
    "model_paths",
    "containers",
];

/// srtctl keys srt has no equivalent for, with why.
const REFUSED: &[(&str, &str)] = &[
    (
        "use_het_jobs",
        "srt allocates one job, not heterogeneous components",
    ),
    (
        "default_health_check",
        "srt reads the readiness budget from the recipe's `health_check` only",
    ),
    (
        "default_bash_preamble",
        "srt wraps no step in a shell preamble",
    ),
    (
        "output_dir",
        "srt keeps logs under its state directory (`--state-dir`)",
    ),
    ("cloud", "srt uploads nothing"),
    ("reporting", "srt reports to no service"),
    ("telemetry", "srt runs no telemetry collector"),
    (
        "nginx_raise_ulimit",
        "srt's nginx sets its own open-file limit (`frontend.nginx.worker_rlimit_nofile`)",
    ),
    (
        "default_container",
        "not a key of srtctl's cluster schema; name the image in the recipe's `model.container`",
    ),
    (
        "cluster",
        "srt reports to no service that needs the cluster's name",
    ),
];

/// Whether `root` is an srtctl cluster file (no `executor`, an srtctl-only key).
pub fn is_srtslurm(root: &Node) -> bool {
    !tree::has(root, "executor") && MARKERS.iter().any(|k| tree::has(root, k))
}

/// `text` (the file `origin`) as srt's cluster profile text, when it is srtctl's
/// cluster file (`None` otherwise): what `srt migrate srtslurm.yaml` writes. The text
/// is checked as a profile first, so what it writes loads.
pub fn profile_text(text: &str, origin: &str) -> Option<Result<String, super::ProfileError>> {
    let root = crate::recipe::yaml::parse(text).ok()?;
    if !is_srtslurm(&root) {
        return None;
    }
    if let Err(e) = super::ClusterProfile::parse(text, std::path::Path::new(origin)) {
        return Some(Err(e));
    }
    let (profile, _) = translate(&root);
    Some(Ok(format!(
        "# {origin}, srtctl's cluster file, as srt's cluster profile (`srt migrate`; the original's comments are not kept)\n{}",
        crate::recipe::srtctl::emit::to_yaml(&profile)
    )))
}

/// `root` re-spelled as a profile, with the problems of keys srt refuses.
pub fn translate(root: &Node) -> (Node, Vec<Problem>) {
    let mut problems = Vec::new();
    let at = root.span;
    let mut out = tree::map(
        vec![(tree::named("executor", at), tree::string("slurm", at))],
        at,
    );
    let mut sbatch: Vec<Node> = Vec::new();
    let mut mounts: Vec<String> = Vec::new();
    let mut mounts_at = None;
    let mut gpus_per_node_directive = None;
    let mut segment = None;
    for (key, value) in tree::entries(root).unwrap_or_default() {
        match key.name.as_str() {
            "default_account" => rename(&mut out, key, value, "account"),
            "default_partition" => rename(&mut out, key, value, "partition"),
            "default_time_limit" => rename(&mut out, key, value, "time_limit"),
            "gpus_per_node" | "network_interface" | "model_paths" | "containers" => {
                tree::set(&mut out, key.clone(), value.clone());
            }
            "use_gpus_per_node_directive" => gpus_per_node_directive = Some((key, value)),
            "use_segment_sbatch_directive" => segment = Some((key, value)),
            "use_exclusive_sbatch_directive" => match value.value {
                Value::Bool(true) => sbatch.push(tree::string("--exclusive", value.span)),
                Value::Bool(false) => {}
                _ => problems.push(not_a_boolean(key, value)),
            },
            "default_sbatch_directives" => sbatch.extend(directives(key, value, &mut problems)),
            "srtctl_root" => match &value.value {
                Value::Str(root) => {
                    let root = root.trim_end_matches('/');
                    let dirs = ["configs", "configs/patches"]
                        .map(|d| tree::string(&format!("{root}/{d}"), value.span));
                    tree::set(
                        &mut out,
                        tree::named("script_dirs", key.span),
                        seq(dirs.to_vec(), value.span),
                    );
                }
                _ => problems.push(
                    Problem::new(
                        "srt::cluster::type",
                        value.span,
                        "`srtctl_root` must be a directory path",
                    )
                    .label("expected a string"),
                ),
            },
            "default_mounts" => {
                mounts_at = Some(value.span);
                mounts.extend(mount_pairs(key, value, &mut problems));
            }
            name => problems.push(refused(key, name)),
        }
    }
    gpu_request(&mut out, gpus_per_node_directive, at, &mut problems);
    problems.extend(segment_problem(segment, at));
    if !sbatch.is_empty() {
        let span = sbatch[0].span;
        tree::set(
            &mut out,
            tree::named("sbatch_options", span),
            seq(sbatch, span),
        );
    }
    let mut container = vec![(tree::named("runtime", at), tree::string("pyxis", at))];
    if let (Some(span), false) = (mounts_at, mounts.is_empty()) {
        let flag = tree::string(&format!("--container-mounts={}", mounts.join(",")), span);
        container.push((tree::named("flags", span), seq(vec![flag], span)));
    }
    tree::set(
        &mut out,
        tree::named("container", at),
        tree::map(container, at),
    );
    (out, problems)
}

fn rename(out: &mut Node, key: &Key, value: &Node, to: &str) {
    tree::set(out, tree::named(to, key.span), value.clone());
}

fn seq(items: Vec<Node>, span: miette::SourceSpan) -> Node {
    Node {
        span,
        value: Value::Seq(items),
    }
}

fn gpu_request(
    out: &mut Node,
    directive: Option<(&Key, &Node)>,
    at: miette::SourceSpan,
    problems: &mut Vec<Problem>,
) {
    let (span, request) = match directive {
        None => (at, "gpus-per-node"),
        Some((_, v)) if v.value == Value::Bool(true) => (v.span, "gpus-per-node"),
        Some((_, v)) if v.value == Value::Bool(false) => (v.span, "gres"),
        Some((k, v)) => {
            problems.push(not_a_boolean(k, v));
            return;
        }
    };
    tree::set(
        out,
        tree::named("gpu_request", span),
        tree::string(request, span),
    );
}

/// srtctl asks for `--segment` unless told not to; the SLURM srt is pinned to (22.05)
/// has no such option, so the file has to say `false`.
fn segment_problem(segment: Option<(&Key, &Node)>, at: miette::SourceSpan) -> Option<Problem> {
    let (span, label) = match segment {
        Some((_, v)) if v.value == Value::Bool(false) => return None,
        Some((k, _)) => (k.span, "asks for a segment"),
        None => (
            SourceSpan::new(at.offset().into(), 0),
            "srtctl asks for a segment by default",
        ),
    };
    Some(
        Problem::new(
            "srt::cluster::segment",
            span,
            "srt does not ask SLURM for `--segment`: the SLURM it is built against (22.05) has no such option",
        )
        .label(label)
        .help("write `use_segment_sbatch_directive: false` (srtctl's spelling of what srt does)"),
    )
}

/// `default_sbatch_directives` as `--key=value` options, each spanned at its value.
fn directives(key: &Key, node: &Node, problems: &mut Vec<Problem>) -> Vec<Node> {
    let Some(entries) = tree::entries(node) else {
        problems.push(not_a_mapping(key, node));
        return Vec::new();
    };
    entries
        .iter()
        .map(|(k, v)| {
            let value = scalar(v).unwrap_or_default();
            let option = if value.is_empty() {
                format!("--{}", k.name)
            } else {
                format!("--{}={value}", k.name)
            };
            tree::string(&option, v.span)
        })
        .collect()
}

/// `default_mounts` as `host:container` pairs.
fn mount_pairs(key: &Key, node: &Node, problems: &mut Vec<Problem>) -> Vec<String> {
    let Some(entries) = tree::entries(node) else {
        problems.push(not_a_mapping(key, node));
        return Vec::new();
    };
    entries
        .iter()
        .filter_map(|(k, v)| match tree::as_str(v) {
            Some(to) if !to.contains(',') && !k.name.contains(',') => {
                Some(format!("{}:{to}", k.name))
            }
            _ => {
                problems.push(
                    Problem::new(
                        "srt::cluster::mount",
                        v.span,
                        format!(
                            "`default_mounts.{}` must be a container path without `,`",
                            k.name
                        ),
                    )
                    .label("not a mount target"),
                );
                None
            }
        })
        .collect()
}

fn scalar(node: &Node) -> Option<String> {
    match &node.value {
        Value::Str(s) => Some(s.clone()),
        Value::Int(i) => Some(i.to_string()),
        Value::Float(f) => Some(f.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

fn refused(key: &Key, name: &str) -> Problem {
    let why = REFUSED
        .iter()
        .find(|(k, _)| *k == name)
        .map_or("not a key of srtctl's cluster file", |(_, why)| why);
    Problem::new(
        "srt::cluster::srtctl_key",
        key.span,
        format!("`{name}` in srtctl's cluster file: {why}"),
    )
    .label("not supported")
    .help("remove it; docs/srtctl.md lists how srt reads srtslurm.yaml")
}

fn not_a_boolean(key: &Key, node: &Node) -> Problem {
    Problem::new(
        "srt::cluster::type",
        node.span,
        format!(
            "`{}` must be true or false, found {}",
            key.name,
            node.value.kind()
        ),
    )
    .label("expected a boolean")
}

fn not_a_mapping(key: &Key, node: &Node) -> Problem {
    Problem::new(
        "srt::cluster::type",
        node.span,
        format!(
            "`{}` must be a mapping, found {}",
            key.name,
            node.value.kind()
        ),
    )
    .label("expected a mapping")
}

#[cfg(test)]
mod tests {
    use crate::cluster::{ClusterProfile, ContainerRuntime, GpuRequest};

    const FILE_TEXT: &str = "\
default_account: acct
default_partition: gpu
default_time_limit: \"04:00:00\"
gpus_per_node: 4
use_gpus_per_node_directive: false
use_segment_sbatch_directive: false
use_exclusive_sbatch_directive: true
default_sbatch_directives:
  qos: high
default_mounts:
  /lustre/models: /models
model_paths:
  qwen3-32b: /lustre/models/Qwen3-32B
containers:
  sglang: /lustre/images/sglang.sqsh
srtctl_root: /opt/srt-slurm/
";

    #[test]
    fn srtctl_s_keys_become_the_profile_s() {
        let ClusterProfile::Slurm(p) = ClusterProfile::check(FILE_TEXT).expect("a profile") else {
            panic!("a SLURM profile");
        };
        assert_eq!(p.account.as_deref(), Some("acct"));
        assert_eq!(p.partition.as_deref(), Some("gpu"));
        assert_eq!(p.time_limit.as_deref(), Some("04:00:00"));
        assert_eq!(p.gpu_request, GpuRequest::Gres);
        assert_eq!(p.sbatch_options, ["--exclusive", "--qos=high"]);
        assert_eq!(p.container.runtime, ContainerRuntime::Pyxis);
        assert_eq!(
            p.container.flags,
            ["--container-mounts=/lustre/models:/models"]
        );
        assert_eq!(
            p.model_paths.get("qwen3-32b").map(String::as_str),
            Some("/lustre/models/Qwen3-32B")
        );
        assert_eq!(
            p.containers.get("sglang").map(String::as_str),
            Some("/lustre/images/sglang.sqsh")
        );
        assert_eq!(
            p.script_dirs,
            [
                std::path::Path::new("/opt/srt-slurm/configs"),
                std::path::Path::new("/opt/srt-slurm/configs/patches")
            ]
        );
    }

    #[test]
    fn the_written_profile_reads_back_as_the_same_profile() {
        let text = super::profile_text(FILE_TEXT, "srtslurm.yaml")
            .expect("a cluster file")
            .unwrap();
        assert!(text.contains("executor: slurm"), "{text}");
        let again = ClusterProfile::check(&text).expect("loads");
        assert_eq!(again, ClusterProfile::check(FILE_TEXT).unwrap());
        assert!(super::profile_text("executor: slurm\n", "x").is_none());
    }

    #[test]
    fn keys_srt_refuses_and_the_segment_default_are_located() {
        let text = "default_partition: gpu\nuse_het_jobs: true\n";
        let problems = ClusterProfile::check(text).expect_err("refused");
        let codes: Vec<_> = problems.iter().map(|p| p.code).collect();
        assert_eq!(
            codes,
            ["srt::cluster::srtctl_key", "srt::cluster::segment"],
            "{problems:?}"
        );
        assert_eq!(&text[problems[0].span.offset()..][..12], "use_het_jobs");
    }

    #[test]
    fn a_managed_sbatch_directive_is_refused_at_its_value() {
        let text = "default_partition: gpu\nuse_segment_sbatch_directive: false\ndefault_sbatch_directives:\n  nodes: 4\n";
        let problems = ClusterProfile::check(text).expect_err("refused");
        assert!(
            problems
                .iter()
                .any(|p| &text[p.span.offset()..][..1] == "4"),
            "{problems:?}"
        );
    }
}
