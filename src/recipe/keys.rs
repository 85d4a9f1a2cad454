//! Every recipe key, once: the loader's allowed keys and the JSON Schema (`srt schema`)
//! are both generated from these tables, so they cannot drift apart.

/// One key of a recipe mapping.
#[derive(Clone, Copy, Debug)]
pub struct Key {
    /// The key.
    pub name: &'static str,
    /// Its JSON Schema fragment (JSON text); `{"$ref": ...}` for nested sections.
    pub schema: &'static str,
    /// What it means (the schema's `description`).
    pub doc: &'static str,
}

const fn k(name: &'static str, schema: &'static str, doc: &'static str) -> Key {
    Key { name, schema, doc }
}

const ARGS: &str = r#"{"type": "object", "additionalProperties": {"anyOf": [{"type": ["string", "number", "boolean", "null"]}, {"type": "array", "items": {"type": ["string", "number", "boolean"]}}, {"type": "object"}]}}"#;
const ENV: &str = r#"{"type": "object", "propertyNames": {"pattern": "^[A-Za-z_][A-Za-z0-9_]*$"}, "additionalProperties": {"type": ["string", "number", "boolean"]}}"#;

/// Top level.
pub const TOP: &[Key] = &[
    k(
        "schema",
        r#"{"const": 2}"#,
        "Recipe schema version (srtctl 2.0).",
    ),
    k(
        "name",
        r#"{"type": "string", "pattern": "^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"}"#,
        "Deployment name; defaults to the file stem.",
    ),
    k(
        "model",
        r##"{"$ref": "#/$defs/model"}"##,
        "The model served.",
    ),
    k(
        "resources",
        r##"{"$ref": "#/$defs/resources"}"##,
        "Cluster facts the recipe relies on.",
    ),
    k(
        "engine",
        r##"{"anyOf": [{"const": "vllm"}, {"$ref": "#/$defs/engine"}]}"##,
        "The inference engine: `vllm` or a mapping.",
    ),
    k(
        "roles",
        r##"{"$ref": "#/$defs/roles"}"##,
        "Worker roles: `agg`, or `prefill` and `decode`.",
    ),
    k(
        "frontend",
        r##"{"$ref": "#/$defs/frontend"}"##,
        "What serves the public port.",
    ),
    k(
        "health_check",
        r##"{"$ref": "#/$defs/health_check"}"##,
        "Readiness budget.",
    ),
    k(
        "sensitive_env",
        r#"{"type": "array", "items": {"type": "string", "pattern": "^[A-Za-z_][A-Za-z0-9_]*$"}}"#,
        "Variables whose values are secrets, besides the default list (`*_TOKEN`, `*_KEY`, `HF_TOKEN`, ...).",
    ),
    k(
        "slurm",
        r##"{"$ref": "#/$defs/slurm"}"##,
        "Scheduler settings for the SLURM executor (override the cluster profile).",
    ),
    k(
        "benchmark",
        r##"{"$ref": "#/$defs/benchmark"}"##,
        "A load benchmark through the public URL after the gates.",
    ),
];

/// `slurm:`.
pub const SLURM: &[Key] = &[
    k(
        "time_limit",
        r#"{"type": "string", "pattern": "^([0-9]+-)?[0-9]+(:[0-9]{2}){0,2}$"}"#,
        "Allocation time limit (`--time`).",
    ),
    k(
        "partition",
        r#"{"type": "string"}"#,
        "Partition (`--partition`).",
    ),
    k("account", r#"{"type": "string"}"#, "Account (`--account`)."),
];

/// `benchmark:`.
pub const BENCHMARK: &[Key] = &[
    k(
        "type",
        r#"{"enum": ["sa-bench"]}"#,
        "Benchmark type; srt runs a built-in equivalent of sa-bench's serving load.",
    ),
    k(
        "isl",
        r#"{"type": "integer", "minimum": 1, "maximum": 1000000}"#,
        "Input length per request, in tokens.",
    ),
    k(
        "osl",
        r#"{"type": "integer", "minimum": 1, "maximum": 1000000}"#,
        "Output tokens per request.",
    ),
    k(
        "concurrencies",
        r#"{"anyOf": [{"type": "string", "pattern": "^[0-9]+(x[0-9]+)*$"}, {"type": "integer", "minimum": 1}, {"type": "array", "items": {"type": "integer", "minimum": 1}}]}"#,
        "Concurrency levels: `\"4x8\"`, `8` or `[4, 8]`.",
    ),
    k(
        "requests_per_concurrency",
        r#"{"type": "integer", "minimum": 1, "default": 4}"#,
        "Requests per level, as a multiple of the level.",
    ),
];

/// `model:`.
pub const MODEL: &[Key] = &[
    k("path", r#"{"type": "string", "minLength": 1}"#, "Path or id passed to `vllm serve` (default `/model`); `hf:org/name` is served as `org/name`."),
    k("served_name", r#"{"type": "string"}"#, "`--served-model-name` (default: the path's last component)."),
    k("container", r#"{"type": "string"}"#, "Container image for workers (executors that run containers)."),
    k("precision", r#"{"type": "string"}"#, "srtctl's precision label (`bf16`, `fp8`); shown, not passed to vLLM (use args.dtype / args.quantization)."),
];

/// `resources:`.
pub const RESOURCES: &[Key] = &[
    k(
        "gpus_per_node",
        r#"{"type": "integer", "minimum": 1, "maximum": 1024, "default": 4}"#,
        "GPUs per node.",
    ),
    k(
        "gpu_type",
        r#"{"type": "string"}"#,
        "GPU model; the GRES type the SLURM executor requests (`--gres=gpu:<type>:N`).",
    ),
];

/// `engine:` as a mapping.
pub const ENGINE: &[Key] = &[
    k("type", r#"{"const": "vllm"}"#, "Engine type."),
    k(
        "connector",
        r#"{"type": ["string", "null"], "default": "nixl"}"#,
        "KV connector: `nixl`, `moriio` or `none`.",
    ),
    k(
        "dp_launch_mode",
        r#"{"enum": ["per_node", "per_gpu"], "default": "per_node"}"#,
        "How data parallelism is launched (`per_gpu` is refused).",
    ),
    k(
        "serve_binary",
        r#"{"type": "string", "default": "vllm"}"#,
        "Program run as `<binary> serve`.",
    ),
    k(
        "vllm_serve_binary",
        r#"{"type": "string"}"#,
        "srtctl's name for `serve_binary`.",
    ),
];

/// `roles:`.
pub const ROLES: &[Key] = &[
    k(
        "prefill",
        r##"{"$ref": "#/$defs/role"}"##,
        "Prefill workers (with `decode`).",
    ),
    k(
        "decode",
        r##"{"$ref": "#/$defs/role"}"##,
        "Decode workers (with `prefill`); `nodes: colocate` shares the prefill node.",
    ),
    k(
        "agg",
        r##"{"$ref": "#/$defs/role"}"##,
        "Aggregated workers.",
    ),
];

/// `roles.<role>:`.
pub const ROLE: &[Key] = &[
    k("nodes", r#"{"anyOf": [{"type": "integer", "minimum": 1}, {"const": "colocate"}]}"#, "Nodes for this role, or `colocate` (decode only)."),
    k("workers", r#"{"type": "integer", "minimum": 1}"#, "Logical endpoints of this role."),
    k("gpus", r#"{"type": "integer", "minimum": 1}"#, "GPUs per worker (default: nodes x gpus_per_node / workers)."),
    k("args", ARGS, "Engine flags (kebab or snake case); `connector` overrides the engine connector for this role."),
    k("env", ENV, "Extra environment for this role's processes."),
];

/// `frontend:`.
pub const FRONTEND: &[Key] = &[
    k(
        "type",
        r#"{"enum": ["vllm-router"], "default": "vllm-router"}"#,
        "Frontend type.",
    ),
    k("args", ARGS, "Flags passed to the Router (e.g. `policy`)."),
    k("env", ENV, "Extra environment for frontend processes."),
    k(
        "enable_multiple_frontends",
        r#"{"type": "boolean", "default": true}"#,
        "nginx on the head node in front of one Router per other node.",
    ),
    k(
        "num_additional_frontends",
        r#"{"type": "integer", "minimum": 0, "default": 9}"#,
        "Upper bound of extra Routers behind nginx.",
    ),
    k(
        "orchestrator_placement",
        r#"{"enum": ["head", "first_decode"], "default": "head"}"#,
        "Where a single Router runs.",
    ),
    k(
        "container_image",
        r#"{"type": "string"}"#,
        "Separate image for frontend processes.",
    ),
    k(
        "port",
        r#"{"type": "integer", "minimum": 1, "maximum": 65535, "default": 8000}"#,
        "Public port.",
    ),
    k(
        "binary",
        r#"{"type": "string", "default": "vllm-router"}"#,
        "Program run as the Router.",
    ),
];

/// `health_check:`.
pub const HEALTH_CHECK: &[Key] = &[
    k(
        "timeout_seconds",
        r#"{"type": "integer", "minimum": 1, "default": 1800}"#,
        "Readiness budget in seconds.",
    ),
    k(
        "interval_seconds",
        r#"{"type": "integer", "minimum": 1, "default": 10}"#,
        "Longest interval between probes (srt starts faster and caps at 0.5 s).",
    ),
    k(
        "max_attempts",
        r#"{"type": "integer", "minimum": 1}"#,
        "srtctl form of the budget: max_attempts x interval_seconds.",
    ),
];

/// Key names of a table, for the loader.
pub fn names(keys: &[Key]) -> Vec<&'static str> {
    keys.iter().map(|k| k.name).collect()
}

fn object(keys: &[Key], required: &[&str]) -> serde_json::Value {
    let mut props = serde_json::Map::new();
    for key in keys {
        let mut v: serde_json::Value =
            serde_json::from_str(key.schema).expect("key schema is JSON");
        v.as_object_mut()
            .expect("schema fragment is an object")
            .insert("description".into(), key.doc.into());
        props.insert(key.name.into(), v);
    }
    serde_json::json!({"type": "object", "additionalProperties": false, "properties": props, "required": required})
}

/// The recipe JSON Schema (draft 2020-12).
pub fn json_schema() -> serde_json::Value {
    let mut root = object(TOP, &["roles"]);
    let obj = root.as_object_mut().expect("object");
    obj.insert(
        "$schema".into(),
        "https://json-schema.org/draft/2020-12/schema".into(),
    );
    obj.insert(
        "$id".into(),
        "https://srt.invalid/recipe.schema.json".into(),
    );
    obj.insert("title".into(), "srt recipe".into());
    obj.insert(
        "$defs".into(),
        serde_json::json!({
            "model": object(MODEL, &[]),
            "resources": object(RESOURCES, &[]),
            "engine": object(ENGINE, &["type"]),
            "roles": object(ROLES, &[]),
            "role": object(ROLE, &["nodes", "workers"]),
            "frontend": object(FRONTEND, &[]),
            "health_check": object(HEALTH_CHECK, &[]),
            "slurm": object(SLURM, &[]),
            "benchmark": object(BENCHMARK, &["type"]),
        }),
    );
    root
}

#[cfg(test)]
mod tests {
    #[test]
    fn every_fragment_is_a_json_object() {
        let schema = super::json_schema();
        assert_eq!(
            schema["$defs"]["role"]["properties"]["nodes"]["description"],
            "Nodes for this role, or `colocate` (decode only)."
        );
    }
}
