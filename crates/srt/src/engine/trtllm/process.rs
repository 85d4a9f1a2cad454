//! One TensorRT-LLM endpoint's process: one MPI job of `tp x pp` ranks over its nodes
//! (each rank `trtllm-llmapi-launch python3 -m dynamo.trtllm ...`, as srtctl launches
//! them), reading its role's config file (`--extra-engine-args`), a file resource of
//! the graph written canonically: keys sorted, strings quoted, the parallel size srt
//! derives written in. Ports: none of its own; its runtime allocates what it listens
//! on (`crate::frontend::dynamo`), and TensorRT-LLM picks its ranks' own.

use super::shape::Sizes;
use crate::engine::Wrapper;
use crate::launch::{
    Argv, BuildContext, LaunchFile, LaunchProcess, ProcessKind, Ranks, WorkerInfo,
};
use crate::recipe::yaml::{Node, Value};
use crate::recipe::{Recipe, Role};
use crate::topology::Endpoint;
use std::collections::BTreeMap;
use std::fmt::Write;

/// TensorRT-LLM's MPI launcher: rank 0 runs the command, the others become its
/// workers.
const LAUNCHER: &str = "trtllm-llmapi-launch";

/// What the endpoint's process is built from.
pub(super) struct EndpointPlan<'a> {
    pub recipe: &'a Recipe,
    pub role: &'a Role,
    pub endpoint: &'a Endpoint,
    pub sizes: Sizes,
    /// The runtime wrapper it runs as (`python3 -m dynamo.trtllm`).
    pub wrapper: &'static Wrapper,
    /// `numactl -m 0,1` before the launcher.
    pub numa_bind: bool,
    /// `--publish-kv-events --publish-metrics`.
    pub publish: bool,
}

/// The role's config file: where its workers read it.
pub(super) fn config_file(role: &Role, sizes: Sizes) -> LaunchFile {
    let name = role.kind.name();
    LaunchFile {
        address: format!("file.{name}.engine-config"),
        path: format!("{}/config/{name}-engine.yaml", crate::launch::RUN_DIR),
        content: canonical(role.config.as_ref(), sizes),
    }
}

/// The endpoint's one process.
pub(super) fn endpoint_process(
    ctx: &mut BuildContext<'_>,
    plan: &EndpointPlan<'_>,
) -> LaunchProcess {
    let role = plan.role;
    let file = config_file(role, plan.sizes);
    let config_path = file.path.clone();
    let file_address = ctx.file(file);
    let node = plan.endpoint.leader();
    let devices = ctx.host_devices(node, &plan.endpoint.gpu_indices);
    let visible: Vec<String> = devices.iter().map(u32::to_string).collect();
    let mut env = BTreeMap::from([
        ("CUDA_VISIBLE_DEVICES".to_string(), visible.join(",")),
        (super::EPLB_SHM.to_string(), eplb_name(plan)),
    ]);
    env.extend(role.env.iter().map(|(k, v)| (k.clone(), v.clone())));
    let mut launcher = Vec::new();
    if plan.numa_bind {
        launcher.extend(["numactl", "-m", "0,1"].map(String::from));
    }
    launcher.push(LAUNCHER.to_string());
    LaunchProcess {
        address: format!("worker.{}[{}]", role.kind.name(), plan.endpoint.index),
        kind: ProcessKind::Worker,
        node,
        devices,
        ports: BTreeMap::new(),
        env,
        env_unset: Vec::new(),
        argv: argv(ctx, plan, &config_path),
        files: BTreeMap::new(),
        depends_on: vec![file_address],
        watches: Default::default(),
        worker: Some(WorkerInfo {
            role: role.kind,
            endpoint: plan.endpoint.index,
            node_rank: 0,
            advertised_url: None,
            local_dp: plan.sizes.data_parallel(),
            bootstrap_port: None,
            kv_connector: None,
            headless: false,
            health: None,
            simulated: None,
        }),
        wrap: Default::default(),
        ranks: Some(Ranks {
            tasks: plan.sizes.ranks(),
            nodes: plan.endpoint.nodes.clone(),
            mpi: "pmix",
            launcher,
        }),
        container_image: ctx.model().container.clone(),
    }
}

/// The wrapper and the flags srtctl gives it; its runtime adds the registration.
fn argv(ctx: &BuildContext<'_>, plan: &EndpointPlan<'_>, config: &str) -> Argv {
    let mut argv: Argv = plan.wrapper.program.iter().collect();
    argv.extend(["--model-path", &ctx.model().path.value]);
    argv.extend(["--served-model-name", &ctx.model().served_name]);
    argv.extend(["--extra-engine-args", config]);
    if plan.publish {
        // What `--publish-events-and-metrics` (srtctl's flag) becomes in its parser.
        argv.extend(["--publish-kv-events", "--publish-metrics"]);
    }
    argv
}

/// The shared-memory name of the endpoint's expert load balancer: its own on every
/// node it shares (srtctl draws a random one per role; this one is the same on every
/// plan of the deployment).
fn eplb_name(plan: &EndpointPlan<'_>) -> String {
    let safe: String = plan
        .recipe
        .name
        .value
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    format!(
        "moe_shared_{safe}_{}_{}",
        plan.role.kind.name(),
        plan.endpoint.index
    )
}

/// The config as TensorRT-LLM reads it (YAML, which `yaml.safe_load` gives back as
/// written): keys sorted at every level, strings double-quoted, `tensor_parallel_size`
/// written in when srt derived it.
pub(super) fn canonical(config: Option<&Node>, sizes: Sizes) -> String {
    let mut entries: Vec<(&str, Entry<'_>)> = match config.map(|n| &n.value) {
        Some(Value::Map(m)) => m
            .iter()
            .map(|(k, v)| (k.name.as_str(), Entry::Node(v)))
            .collect(),
        _ => Vec::new(),
    };
    if !sizes.tp_written {
        entries.push(("tensor_parallel_size", Entry::Int(sizes.tp.into())));
    }
    entries.sort_by(|a, b| a.0.cmp(b.0));
    let mut out = String::new();
    for (key, value) in entries {
        match value {
            Entry::Node(n) => write_entry(&mut out, 0, key, n),
            Entry::Int(i) => {
                let _ = writeln!(out, "{key}: {i}");
            }
        }
    }
    out
}

/// A top-level value: as written, or one srt adds.
enum Entry<'a> {
    Node(&'a Node),
    Int(i64),
}

fn write_entry(out: &mut String, indent: usize, key: &str, value: &Node) {
    let pad = " ".repeat(indent);
    match &value.value {
        Value::Map(m) if !m.is_empty() => {
            let _ = writeln!(out, "{pad}{key}:");
            let mut sorted: Vec<&(crate::recipe::yaml::Key, Node)> = m.iter().collect();
            sorted.sort_by(|a, b| a.0.name.cmp(&b.0.name));
            for (k, v) in sorted {
                write_entry(out, indent + 2, &k.name, v);
            }
        }
        Value::Seq(items) if !items.is_empty() => {
            let _ = writeln!(out, "{pad}{key}:");
            for item in items {
                write_item(out, indent, item);
            }
        }
        _ => {
            let _ = writeln!(out, "{pad}{key}: {}", scalar(&value.value));
        }
    }
}

fn write_item(out: &mut String, indent: usize, item: &Node) {
    let pad = " ".repeat(indent);
    match &item.value {
        Value::Map(m) if !m.is_empty() => {
            let mut sorted: Vec<&(crate::recipe::yaml::Key, Node)> = m.iter().collect();
            sorted.sort_by(|a, b| a.0.name.cmp(&b.0.name));
            let mut first = true;
            for (k, v) in sorted {
                let mut body = String::new();
                write_entry(&mut body, indent + 2, &k.name, v);
                let lead = if first {
                    format!("{pad}- ")
                } else {
                    format!("{pad}  ")
                };
                first = false;
                let _ = write!(out, "{lead}{}", &body[indent + 2..]);
            }
        }
        Value::Seq(_) => {
            let _ = writeln!(out, "{pad}- {}", flow(item));
        }
        v => {
            let _ = writeln!(out, "{pad}- {}", scalar(v));
        }
    }
}

/// A nested list in flow style (`[1, [2, 3]]`).
fn flow(node: &Node) -> String {
    match &node.value {
        Value::Seq(items) => {
            let parts: Vec<String> = items.iter().map(flow).collect();
            format!("[{}]", parts.join(", "))
        }
        Value::Map(m) => {
            let mut sorted: Vec<&(crate::recipe::yaml::Key, Node)> = m.iter().collect();
            sorted.sort_by(|a, b| a.0.name.cmp(&b.0.name));
            let parts: Vec<String> = sorted
                .iter()
                .map(|(k, v)| format!("{}: {}", quoted(&k.name), flow(v)))
                .collect();
            format!("{{{}}}", parts.join(", "))
        }
        v => scalar(v),
    }
}

fn scalar(v: &Value) -> String {
    match v {
        Value::Null => "null".into(),
        Value::Bool(b) => b.to_string(),
        Value::Int(i) => i.to_string(),
        Value::Float(f) if f.is_finite() && f.fract() == 0.0 => format!("{f:.1}"),
        Value::Float(f) if f.is_nan() => ".nan".into(),
        Value::Float(f) if f.is_infinite() => if *f > 0.0 { ".inf" } else { "-.inf" }.into(),
        Value::Float(f) => f.to_string(),
        Value::Str(s) => quoted(s),
        Value::Seq(_) => "[]".into(),
        Value::Map(_) => "{}".into(),
    }
}

/// A string in double quotes (JSON's escapes are YAML's).
fn quoted(s: &str) -> String {
    serde_json::to_string(s).expect("a string serializes")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(text: &str) -> Node {
        serde_saphyr::from_str(text).unwrap()
    }

    #[test]
    fn the_config_is_written_sorted_with_strings_quoted_and_reads_back_the_same() {
        let config = node(
            "max_batch_size: 8\nkv_cache_config:\n  free_gpu_memory_fraction: 0.75\n  dtype: fp8\ncuda_graph_config: null\nmoe_config: {backend: TRTLLM}\nbatch: [1, 2]\nempty: {}\nspeculative_config:\n  decoding_type: MTP\n",
        );
        let sizes = Sizes {
            tp: 4,
            pp: 1,
            tp_written: false,
            attention_dp: false,
        };
        let text = canonical(Some(&config), sizes);
        assert_eq!(
            text,
            "batch:\n- 1\n- 2\ncuda_graph_config: null\nempty: {}\nkv_cache_config:\n  dtype: \"fp8\"\n  free_gpu_memory_fraction: 0.75\nmax_batch_size: 8\nmoe_config:\n  backend: \"TRTLLM\"\nspeculative_config:\n  decoding_type: \"MTP\"\ntensor_parallel_size: 4\n"
        );
        // The same mapping back, whatever the order.
        let again = node(&text);
        let json = |n: &Node| {
            let Value::Map(m) = &n.value else { panic!() };
            let mut keys: Vec<&str> = m.iter().map(|(k, _)| k.name.as_str()).collect();
            keys.sort_unstable();
            keys.join(",")
        };
        assert_eq!(json(&again), "batch,cuda_graph_config,empty,kv_cache_config,max_batch_size,moe_config,speculative_config,tensor_parallel_size");
        // Deterministic: the same config gives the same bytes.
        assert_eq!(canonical(Some(&config), sizes), text);
    }

    #[test]
    fn a_list_of_mappings_is_written_as_block_items() {
        let config = node("rules:\n- b: 2\n  a: 1\n- c: [3]\n");
        let sizes = Sizes {
            tp: 1,
            pp: 1,
            tp_written: true,
            attention_dp: false,
        };
        assert_eq!(
            canonical(Some(&config), sizes),
            "rules:\n- a: 1\n  b: 2\n- c:\n  - 3\n"
        );
    }
}
