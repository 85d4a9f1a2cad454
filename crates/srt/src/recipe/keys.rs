//! Every recipe key, once, with its default: the loader's allowed keys, the defaults it
//! applies ([`default`]) and the JSON Schema (`srt schema`, built in
//! [`crate::schema`], which adds the names of the engines, frontends and connectors
//! from their own tables) all come from these tables, so they cannot drift apart.

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

/// A key: its name, JSON Schema fragment and meaning.
pub const fn k(name: &'static str, schema: &'static str, doc: &'static str) -> Key {
    Key { name, schema, doc }
}

const ARGS: &str = r#"{"type": "object", "additionalProperties": {"anyOf": [{"type": ["string", "number", "boolean", "null"]}, {"type": "array", "items": {"type": ["string", "number", "boolean"]}}, {"type": "object"}]}}"#;
const ENV: &str = r#"{"type": "object", "propertyNames": {"pattern": "^[A-Za-z_][A-Za-z0-9_]*$"}, "additionalProperties": {"type": ["string", "number", "boolean"]}}"#;

/// Top-level sections a component owns rather than srt's core (srtctl's `dynamo:`, the
/// Dynamo frontend's): the loader keeps each as written ([`crate::recipe::Section`]) and
/// its owner declares and checks its keys. A test holds this list to the owners'.
pub const OWNED_SECTIONS: &[&str] = &["dynamo"];

/// Top level.
pub(crate) const TOP: &[Key] = &[
    k(
        "schema",
        r#"{"const": 2}"#,
        "Recipe schema version (srtctl 2.0).",
    ),
    k(
        "name",
        r#"{"type": "string", "pattern": "^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$"}"#,
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
        r##"{"anyOf": [{"type": "string", "default": "vllm"}, {"$ref": "#/$defs/engine"}]}"##,
        "The inference engine: its name (`vllm`, `sglang`) or a mapping with `type`.",
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
        "rollout",
        r##"{"$ref": "#/$defs/rollout"}"##,
        "How apply replaces workers while the deployment serves.",
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
        "infra",
        r##"{"$ref": "#/$defs/infra"}"##,
        "Where the frontend's services (Dynamo's etcd and NATS) run (srtctl's `infra:`).",
    ),
    k(
        "benchmark",
        r##"{"$ref": "#/$defs/benchmark"}"##,
        "A load benchmark through the public URL after the gates.",
    ),
    k(
        "sweep",
        r#"{"type": "object", "minProperties": 1, "propertyNames": {"pattern": "^[A-Za-z_][A-Za-z0-9_]*$"}, "properties": {"zip": {"type": "object", "minProperties": 1, "additionalProperties": {"type": "array", "minItems": 1}}}, "additionalProperties": {"type": "array", "minItems": 1}}"#,
        "Parameters and their values: `{param}` in any value takes each in turn (the product of the lists; `zip:` lists go together). `srt sweep` runs the points.",
    ),
    // srtctl's runtime keys (`recipe::runtime`).
    k(
        "setup_script",
        r#"{"type": "string", "minLength": 1}"#,
        "A bash script (relative to the recipe's directory, or absolute) run where each worker's program runs (in its container), before it; its contents are part of the workers' hashes.",
    ),
    k(
        "host_setup",
        r#"{"type": "string", "minLength": 1}"#,
        "A bash script (relative to the recipe's directory, or absolute) run on each worker's node, outside any container, before its program and `setup_script`.",
    ),
    k(
        "container_mounts",
        r#"{"type": "object", "additionalProperties": {"type": "string", "minLength": 1}}"#,
        "Bind mounts of containerized processes: host path -> container path (pyxis `--container-mounts`).",
    ),
    k(
        "extra_mount",
        r#"{"type": "array", "items": {"type": "string", "pattern": "^[^:,]+:[^:,]+(:[^:,]+)?$"}}"#,
        "Bind mounts of containerized processes as `host:container[:flags]`, after `container_mounts`.",
    ),
    k(
        "sbatch_directives",
        r#"{"type": "object", "additionalProperties": {"type": ["string", "number", "null"]}}"#,
        "Extra `sbatch` options of the allocation: option name (no dashes) -> value (`\"\"` or null for a switch).",
    ),
    k(
        "srun_options",
        r#"{"anyOf": [{"type": "object", "additionalProperties": {"type": ["string", "number", "null"]}}, {"type": "array", "items": {"type": "string"}}]}"#,
        "Extra `srun` options of every step: a mapping like `sbatch_directives`, or a list of options (`--cpus-per-task=16`).",
    ),
    k(
        "environment",
        ENV,
        "Environment of every worker process, after the role's `env`; `{node}` and `{node_id}` are the process's node host name and index.",
    ),
    k(
        "identity",
        r##"{"$ref": "#/$defs/identity"}"##,
        "What the deployment declares it runs (model repo and revision, image, framework versions): recorded in state and shown by `srt status`, in no process's hash.",
    ),
    k(
        "profiling",
        r##"{"$ref": "#/$defs/profiling"}"##,
        "Run the workers of the profiled roles under a profiler (`nsys` or the engine's `torch` profiler), output under the run directory.",
    ),
    k(
        "enable_config_dump",
        r#"{"type": "boolean", "default": false}"#,
        "srtctl's config dump: `true` makes every worker whose program takes `--dump-config-to` (Dynamo's worker wrappers) write its resolved configuration to `<run-dir>/config/<process>.json`; elsewhere it is a warning.",
    ),
];

/// `identity:`.
pub(crate) const IDENTITY: &[Key] = &[
    k(
        "model",
        r#"{"type": "object", "properties": {"repo": {"type": "string"}, "revision": {"type": "string"}}, "additionalProperties": false}"#,
        "The model's Hugging Face repository and revision.",
    ),
    k(
        "container",
        r#"{"type": "object", "properties": {"image": {"type": "string"}}, "additionalProperties": false}"#,
        "The container image to pull to reproduce the run.",
    ),
    k(
        "frameworks",
        r#"{"type": "object", "additionalProperties": {"type": "string"}}"#,
        "Framework name -> version expected in the image.",
    ),
];

/// `identity.model:`.
pub(crate) const IDENTITY_MODEL: &[Key] = &[
    k("repo", r#"{"type": "string"}"#, "Hugging Face repository."),
    k("revision", r#"{"type": "string"}"#, "Its git revision."),
];

/// `identity.container:`.
pub(crate) const IDENTITY_CONTAINER: &[Key] = &[k("image", r#"{"type": "string"}"#, "Image URI.")];

const PHASE: &str = r#"{"type": "object", "properties": {"start_step": {"type": "integer", "minimum": 0}, "stop_step": {"type": "integer", "minimum": 1}}, "required": ["start_step", "stop_step"], "additionalProperties": false}"#;

/// `profiling:`.
pub(crate) const PROFILING: &[Key] = &[
    k(
        "type",
        r#"{"enum": ["nsys", "torch", "none"]}"#,
        "The profiler: `nsys` (the program under `nsys profile`), `torch` (the engine's PyTorch profiler), `none`.",
    ),
    k(
        "extra_nsys_args",
        r#"{"type": "array", "items": {"type": "string"}}"#,
        "Words added to `nsys profile` before its output (`nsys` only).",
    ),
    k("prefill", PHASE, "Steps profiled on prefill workers."),
    k("decode", PHASE, "Steps profiled on decode workers."),
    k("aggregated", PHASE, "Steps profiled on agg workers."),
];

/// `profiling.<phase>:`.
pub(crate) const PROFILING_PHASE: &[Key] = &[
    k(
        "start_step",
        r#"{"type": "integer", "minimum": 0}"#,
        "Engine step capture starts at.",
    ),
    k(
        "stop_step",
        r#"{"type": "integer", "minimum": 1}"#,
        "Engine step capture stops at.",
    ),
];

/// `slurm:`.
/// `infra:`.
pub(crate) const INFRA: &[Key] = &[
    k(
        "etcd_nats_dedicated_node",
        r#"{"type": "boolean", "default": false}"#,
        "Run the frontend's services (etcd, NATS) on a node of their own, after the workers' (srtctl's meaning); a frontend without services refuses it.",
    ),
    k(
        "nats_max_payload_mb",
        r#"{"type": "integer", "minimum": 1, "maximum": 64}"#,
        "The largest message the deployment's nats-server takes, in MiB (srtctl's; NATS's default is 1): its `max_payload`. A warning when no nats-server runs.",
    ),
];

pub(crate) const SLURM: &[Key] = &[
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

/// The keys of a `custom` benchmark.
pub(crate) const COMMAND_BENCHMARK: &[&str] = &["type", "command", "env", "container_image"];

/// The keys of a `mooncake-router` benchmark besides `type`, `container_image` and
/// `max_failed_fraction` (which it shares).
pub(crate) const TRACE_BENCHMARK: &[&str] =
    &["mooncake_workload", "ttft_threshold_ms", "itl_threshold_ms"];

/// The keys of a `trace-replay` benchmark besides `type`, `container_image` and
/// `max_failed_fraction`.
pub(crate) const REPLAY_BENCHMARK: &[&str] = &[
    "trace_file",
    "concurrencies",
    "ttft_threshold_ms",
    "itl_threshold_ms",
    "aiperf_package",
];

/// Those of [`REPLAY_BENCHMARK`] no other benchmark type has.
pub(crate) const REPLAY_ONLY: &[&str] = &["trace_file", "aiperf_package"];

/// The traces a `mooncake-router` benchmark replays (`mooncake_workload`).
pub(crate) const MOONCAKE_WORKLOADS: &[&str] =
    &["mooncake", "conversation", "synthetic", "toolagent"];

/// The accuracy evaluations srt runs (srtctl's benchmark types of those names).
pub(crate) const EVALS: &[&str] = &["gsm8k", "gpqa"];

/// The keys of a `gsm8k` or `gpqa` benchmark: counts, then sampling values.
pub(crate) const EVAL_COUNTS: &[&str] = &[
    "num_examples",
    "max_tokens",
    "num_threads",
    "num_shots",
    "repeat",
    "top_k",
];
/// Sampling values of an evaluation.
pub(crate) const EVAL_SAMPLING: &[&str] = &["temperature", "top_p"];

/// `benchmark:`: srtctl's sa-bench keys, then srt's (named after `vllm bench serve`'s
/// options); `command`, `env` and `container_image` are `custom`'s
/// ([`COMMAND_BENCHMARK`]).
pub(crate) const BENCHMARK: &[Key] = &[
    k(
        "type",
        r#"{"enum": ["sa-bench", "custom", "gsm8k", "gpqa", "mooncake-router", "trace-replay"]}"#,
        "Benchmark type: `sa-bench`, srt's own serving load (vLLM's `bench serve` metrics); `custom`, the `command` run to completion (srtctl's); `gsm8k` and `gpqa`, accuracy evaluations by SGLang's `run_eval` (srtctl's); `mooncake-router`, a replay of a Mooncake trace at its own timestamps by aiperf (srtctl's); `trace-replay`, the recipe's own trace replayed by aiperf at each concurrency (srtctl's).",
    ),
    k(
        "mooncake_workload",
        r#"{"enum": ["mooncake", "conversation", "synthetic", "toolagent"], "default": "conversation"}"#,
        "`mooncake-router` only: the Mooncake trace replayed (FAST'25's, downloaded once into `$TRACE_DIR`, default `<run-dir>/traces`).",
    ),
    k(
        "ttft_threshold_ms",
        r#"{"type": "integer", "minimum": 1, "default": 2000}"#,
        "`mooncake-router` and `trace-replay` only: the time to first token a request must meet to count towards goodput, in ms.",
    ),
    k(
        "itl_threshold_ms",
        r#"{"type": "integer", "minimum": 1, "default": 25}"#,
        "`mooncake-router` and `trace-replay` only: the inter-token latency a request must meet to count towards goodput, in ms.",
    ),
    k(
        "trace_file",
        r#"{"type": "string", "pattern": "^/"}"#,
        "`trace-replay` only, required: the trace replayed (Mooncake's JSONL format: `timestamp`, `input_length`, `output_length`, `hash_ids`), an absolute path on the benchmark's node, in its container where there is one (srtctl's).",
    ),
    k(
        "aiperf_package",
        r#"{"type": "string"}"#,
        "`trace-replay` only: srtctl's pip requirement for the aiperf it installs (`aiperf>=0.7.0`); srt installs its pinned aiperf where the image has none, and refuses a requirement that release does not meet.",
    ),
    k(
        "num_examples",
        r#"{"type": "integer", "minimum": 1}"#,
        "`gsm8k`/`gpqa` only: questions evaluated (default: srtctl's, 1319 and 198).",
    ),
    k(
        "max_tokens",
        r#"{"type": "integer", "minimum": 1}"#,
        "`gsm8k`/`gpqa` only: the most tokens per answer (default 16384 and 32768).",
    ),
    k(
        "num_threads",
        r#"{"type": "integer", "minimum": 1}"#,
        "`gsm8k`/`gpqa` only: requests in flight (default 512 and 128).",
    ),
    k(
        "num_shots",
        r#"{"type": "integer", "minimum": 0}"#,
        "`gsm8k` only: few-shot examples per question (default 5).",
    ),
    k(
        "repeat",
        r#"{"type": "integer", "minimum": 1}"#,
        "`gpqa` only: times each question is asked (default 8).",
    ),
    k(
        "temperature",
        r#"{"type": "number", "minimum": 0}"#,
        "`gsm8k` only: sampling temperature (default: the harness's).",
    ),
    k(
        "top_p",
        r#"{"type": "number", "exclusiveMinimum": 0, "maximum": 1}"#,
        "`gsm8k` only: nucleus sampling (default: the harness's).",
    ),
    k(
        "top_k",
        r#"{"type": "integer"}"#,
        "`gsm8k` only: top-k sampling (default: the harness's).",
    ),
    k(
        "command",
        r#"{"type": "string", "minLength": 1}"#,
        "`custom` only: the command, run with `bash -lc` as written on the public endpoint's node (in `container_image`, else the model's container), with `SRT_FRONTEND_HOST`, `SRT_FRONTEND_PORT`, `SRT_<ROLE>_ENDPOINTS`, ... set; it passes when it exits 0.",
    ),
    k(
        "env",
        r#"{"type": "object", "additionalProperties": {"type": ["string", "number", "boolean"]}}"#,
        "`custom` only: the command's variables, applied last (they override srt's).",
    ),
    k(
        "container_image",
        r#"{"type": "string"}"#,
        "`custom`, `gsm8k`, `gpqa` and `mooncake-router`: the image the command runs in (default: the model's container).",
    ),
    k(
        "isl",
        r#"{"type": "integer", "minimum": 1, "maximum": 1000000, "default": 128}"#,
        "Mean input length per request, in the model's tokens (special tokens the server adds included).",
    ),
    k(
        "osl",
        r#"{"type": "integer", "minimum": 1, "maximum": 1000000, "default": 128}"#,
        "Mean output tokens per request (`max_tokens`); with `dataset_name: sharegpt`, fixes every request's output length.",
    ),
    k(
        "concurrencies",
        r#"{"anyOf": [{"type": "string", "pattern": "^[0-9]+((x[0-9]+)*|(,[0-9]+)*)$"}, {"type": "integer", "minimum": 1}, {"type": "array", "items": {"type": "integer", "minimum": 1}}], "default": 1}"#,
        "Concurrency levels (`max_concurrency`), run one after the other: `\"4x8\"`, `8` or `[4, 8]`; `trace-replay` (required there) writes text as `\"4,8\"`, as srtctl's script splits it.",
    ),
    k(
        "req_rate",
        r#"{"anyOf": [{"const": "inf"}, {"type": "number", "exclusiveMinimum": 0}, {"type": "string", "pattern": "^\\s*[0-9]*\\.?[0-9]+([eE][-+]?[0-9]+)?\\s*$"}], "default": "inf"}"#,
        "Requests per second within a level, as a Poisson process; `inf` sends them all at once. A quoted number (`\"300\"`, srtctl's form) is that number.",
    ),
    k(
        "num_prompts_mult",
        r#"{"type": "integer", "minimum": 1, "maximum": 1000000, "default": 10}"#,
        "Requests measured per level, as a multiple of the level.",
    ),
    k(
        "requests_per_concurrency",
        r#"{"type": "integer", "minimum": 1, "maximum": 1000000}"#,
        "srt's earlier name for `num_prompts_mult`.",
    ),
    k(
        "num_warmup_mult",
        r#"{"type": "integer", "minimum": 0, "maximum": 1000000, "default": 2}"#,
        "Warm-up requests before each level (not measured), as a multiple of the level.",
    ),
    k(
        "random_range_ratio",
        r#"{"type": "number", "minimum": 0, "maximum": 1, "default": 0.8}"#,
        "Input and output lengths are drawn uniformly from `[len x r, len]`, as sa-bench draws them (1: every length is `len`).",
    ),
    k(
        "random_prefix_len",
        r#"{"type": "integer", "minimum": 0, "maximum": 1000000, "default": 0}"#,
        "Tokens of a random prefix shared by every request (on top of `isl`): prefix caching on purpose.",
    ),
    k(
        "dataset_name",
        r#"{"enum": ["random", "sharegpt"], "default": "random"}"#,
        "`random`: random token ids of exact token lengths; `sharegpt`: conversations from `dataset_path`.",
    ),
    k(
        "dataset_path",
        r#"{"type": "string", "minLength": 1}"#,
        "ShareGPT-style JSON file (read where srt runs), for `dataset_name: sharegpt`.",
    ),
    k(
        "tokenizer",
        r#"{"type": "string", "minLength": 1}"#,
        "The model's tokenizer: a tokenizer.json, a directory holding one, or a Hugging Face id in the local cache (default: `model.path`).",
    ),
    k(
        "endpoint",
        r#"{"enum": ["/v1/completions", "/v1/chat/completions"], "default": "/v1/completions"}"#,
        "The API requests go to.",
    ),
    k(
        "ignore_eos",
        r#"{"type": "boolean", "default": true}"#,
        "Ask for every output token even past an end-of-sequence token.",
    ),
    k(
        "use_chat_template",
        r#"{"type": "boolean", "default": false}"#,
        "Wrap each random prompt in the model's chat template (its tokenizer's, with the generation prompt) as srtctl's sa-bench does, the template's tokens taken off `isl`; srtctl's default is `true`.",
    ),
    k(
        "custom_tokenizer",
        r#"{"enum": ["sa_bench_tokenizers.sglang_deepseek_v4.SGLangDeepseekV4Tokenizer", "sa_bench_tokenizers.vllm_deepseek_v4.VLLMDeepseekV4Tokenizer"]}"#,
        "srtctl's sa-bench tokenizer adapter for a model whose chat format is code, not a template (DeepSeek-V4): with `use_chat_template`, prompts are wrapped as that adapter wraps them (vLLM's in thinking mode; SGLang's in chat mode unless the top-level `environment` sets `SGLANG_DEFAULT_THINKING`) instead of in the tokenizer's template; tokens are still counted with `tokenizer`.",
    ),
    k(
        "seed",
        r#"{"type": "integer", "minimum": 0, "default": 0}"#,
        "Seed of prompts, lengths and arrival times.",
    ),
    k(
        "max_duration_seconds",
        r#"{"type": "integer", "minimum": 1, "maximum": 604800, "default": 14400}"#,
        "The longest a run may take (every level, warm-ups included): a recipe whose requests cannot be sent within it at `req_rate` is refused, and a run past it stops with an error.",
    ),
    k(
        "max_failed_fraction",
        r#"{"type": "number", "minimum": 0, "maximum": 1, "default": 0.05}"#,
        "The most measured requests that may fail, as a fraction of them, for the run to pass; more fail it (as does a run that got no output token back). `sa-bench` and `mooncake-router`.",
    ),
    k(
        "slow_down_sleep_time",
        r#"{"type": "number", "exclusiveMinimum": 0, "maximum": 3600}"#,
        "`sa-bench` only, with `slow_down_wait_time` (srtctl's): seconds each forward pass of the decode workers sleeps at the start of every measured level, set through the engine's own admin route (SGLang's `/slow_down`), so decode fills up with sequences before it runs at full speed.",
    ),
    k(
        "slow_down_wait_time",
        r#"{"type": "number", "exclusiveMinimum": 0, "maximum": 604800}"#,
        "`sa-bench` only, with `slow_down_sleep_time`: seconds after a level's requests start that the slow-down is turned off (at the latest when the level ends).",
    ),
    k(
        "metric_percentiles",
        r#"{"type": "array", "items": {"type": "number", "exclusiveMinimum": 0, "maximum": 100}, "minItems": 1, "default": [90, 99]}"#,
        "Percentiles reported for TTFT, TPOT, ITL and E2EL, besides mean and median.",
    ),
    k(
        "goodput",
        r#"{"type": "object", "properties": {"ttft": {"type": "number", "minimum": 0}, "tpot": {"type": "number", "minimum": 0}, "e2el": {"type": "number", "minimum": 0}}, "additionalProperties": false}"#,
        "Service-level objectives in ms (`ttft`, `tpot`, `e2el`); goodput counts the requests meeting all of them.",
    ),
];

/// `model:`.
pub(crate) const MODEL: &[Key] = &[
    k("path", r#"{"type": "string", "minLength": 1, "default": "/model"}"#, "Path or id passed to `vllm serve`; `hf:org/name` is served as `org/name`."),
    k("served_name", r#"{"type": "string"}"#, "`--served-model-name` (default: the path's last component)."),
    k("container", r#"{"type": "string"}"#, "Container image for workers (executors that run containers)."),
    k("precision", r#"{"type": "string"}"#, "srtctl's precision label (`bf16`, `fp8`); shown, not passed to vLLM (use args.dtype / args.quantization)."),
];

/// `resources:`.
pub(crate) const RESOURCES: &[Key] = &[
    k(
        "gpus_per_node",
        r#"{"type": "integer", "minimum": 1, "maximum": 64, "default": 4}"#,
        "GPUs per node.",
    ),
    k(
        "gpu_type",
        r#"{"type": "string"}"#,
        "GPU model; the GRES type the SLURM executor requests (`--gres=gpu:<type>:N`).",
    ),
    k(
        "spread_workers",
        r#"{"type": "boolean", "default": false}"#,
        "Each worker smaller than a node gets a node of its own instead of sharing one with the next worker (srtctl's); a role's `nodes` must then hold one per worker.",
    ),
];

/// `engine:` as a mapping: its type; every other key is the engine's
/// (`crate::engine::Engine::keys`).
pub(crate) const ENGINE: &[Key] = &[
    k(
        "type",
        r#"{"type": "string", "default": "vllm"}"#,
        "Engine type.",
    ),
    k(
        "allow_prefill_decode_colocation",
        r#"{"type": "boolean", "default": false}"#,
        "srtctl's: the first decode worker may take the GPUs prefill left on its last node instead of starting a node of its own.",
    ),
];

/// `roles:`.
pub(crate) const ROLES: &[Key] = &[
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
pub(crate) const ROLE: &[Key] = &[
    k("nodes", r#"{"anyOf": [{"type": "integer", "minimum": 1}, {"const": "colocate"}]}"#, "Nodes for this role, or `colocate` (decode only)."),
    k("workers", r#"{"type": "integer", "minimum": 1}"#, "Logical endpoints of this role."),
    k("gpus", r#"{"type": "integer", "minimum": 1}"#, "GPUs per worker (default: nodes x gpus_per_node / workers)."),
    k("args", ARGS, "Engine flags (kebab or snake case); `connector` overrides the engine connector for this role."),
    k("env", ENV, "Extra environment for this role's processes."),
];

/// `frontend:`.
pub(crate) const FRONTEND: &[Key] = &[
    k(
        "type",
        r#"{"type": "string", "default": "vllm-router"}"#,
        "Frontend type.",
    ),
    k(
        "args",
        ARGS,
        "Flags passed to the Router (e.g. `policy`), checked against its flag catalog.",
    ),
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
        r#"{"type": "string"}"#,
        "Program run as the Router (default: the frontend's own program).",
    ),
    k(
        "nginx",
        r##"{"$ref": "#/$defs/nginx"}"##,
        "Limits of the nginx in front of several Routers (multiple frontends).",
    ),
    k(
        "nginx_image",
        r#"{"type": "string", "minLength": 1}"#,
        "srtctl's spelling of `nginx.image` (srtctl v1: `nginx_container`).",
    ),
    k(
        "nginx_session_affinity",
        r#"{"type": "boolean", "default": false}"#,
        "srtctl's: `true` is `nginx.session_header` set to `nginx_session_affinity_header`.",
    ),
    k(
        "nginx_session_affinity_header",
        r#"{"type": "string", "pattern": "^[A-Za-z0-9-]+$", "default": "X-Dynamo-Session-ID"}"#,
        "srtctl's: the header `nginx_session_affinity: true` hashes.",
    ),
    k(
        "nginx_raise_ulimit",
        r#"{"type": "boolean", "default": false}"#,
        "srtctl's: `true` is `nginx.worker_rlimit_nofile: 1048576`.",
    ),
];

/// `frontend.nginx:`.
pub(crate) const NGINX: &[Key] = &[
    k(
        "image",
        r#"{"type": "string", "minLength": 1}"#,
        "Container image nginx runs in, on executors that run containers (pyxis); elsewhere nginx is the host's.",
    ),
    k(
        "worker_processes",
        r#"{"anyOf": [{"const": "auto"}, {"type": "integer", "minimum": 1, "maximum": 1024}], "default": "auto"}"#,
        "nginx worker processes: `auto` (one per CPU core) or a count.",
    ),
    k(
        "worker_connections",
        r#"{"type": "integer", "minimum": 16, "maximum": 1048576, "default": 65535}"#,
        "Connections each nginx worker holds at once (a proxied request takes two).",
    ),
    k(
        "worker_rlimit_nofile",
        r#"{"type": "integer", "minimum": 64, "maximum": 1048576}"#,
        "Open-file limit nginx sets for its workers (default: 2 x worker_connections).",
    ),
    k(
        "upstream_keepalive",
        r#"{"type": "integer", "minimum": 0, "maximum": 1048576, "default": 512}"#,
        "Idle connections to the Routers each nginx worker keeps open (0: none).",
    ),
    k(
        "keepalive_timeout_seconds",
        r#"{"type": "integer", "minimum": 0, "maximum": 86400, "default": 600}"#,
        "How long an idle client connection stays open.",
    ),
    k(
        "session_header",
        r#"{"type": "string", "pattern": "^[A-Za-z0-9-]+$"}"#,
        "A request header nginx hashes (consistently) to choose the Router: the requests of one session go to one Router while it is up; requests without it are spread.",
    ),
    k(
        "client_max_body_size",
        r#"{"type": "string", "pattern": "^[0-9]+[kKmMgG]?$", "default": "45m"}"#,
        "Largest request body (nginx size syntax: `45m`, `1g`, `0` for no limit).",
    ),
];

/// `health_check:`.
pub(crate) const HEALTH_CHECK: &[Key] = &[
    k(
        "timeout_seconds",
        r#"{"type": "integer", "minimum": 1, "default": 1800}"#,
        "Readiness budget in seconds; the smoke completion may take up to it (a cold engine's first request is slow).",
    ),
    k(
        "interval_seconds",
        r#"{"type": "integer", "minimum": 1, "default": 10}"#,
        "srtctl's probe interval; srt polls readiness from every 20 ms growing to every 50 ms, never slower than this.",
    ),
    k(
        "max_attempts",
        r#"{"type": "integer", "minimum": 1}"#,
        "srtctl form of the budget: max_attempts x interval_seconds.",
    ),
    k(
        "unhealthy_grace_seconds",
        r#"{"type": "integer", "minimum": 1, "maximum": 3600, "default": 10}"#,
        "A running worker that accepts connections but does not answer /health for this long (or is stopped) is drift: the next apply replaces it.",
    ),
];

const AMOUNT_OR_PERCENT: &str = r#"{"anyOf": [{"type": "integer", "minimum": 0, "maximum": 32768}, {"type": "string", "pattern": "^[0-9]{1,3}%$"}]}"#;

/// `rollout:`.
pub(crate) const ROLLOUT: &[Key] = &[
    k(
        "max_unavailable",
        r#"{"anyOf": [{"type": "integer", "minimum": 1, "maximum": 32768}, {"type": "string", "pattern": "^[0-9]{1,3}%$"}], "default": 1}"#,
        "Workers of a role replaced at once: a count, or a percentage of the role's workers (rounded down, at least 1). Each is taken out of its Routers, drained, restarted, and put back before the next.",
    ),
    k(
        "max_surge",
        AMOUNT_OR_PERCENT,
        "Reserved: extra workers started ahead of a replacement. Only 0 (the default) is accepted: a worker's replacement binds the same ports and GPUs.",
    ),
    k(
        "drain_seconds",
        r#"{"type": "integer", "minimum": 0, "maximum": 3600, "default": 30}"#,
        "How long a worker taken out of its Routers may take to finish its requests before it is stopped.",
    ),
    k(
        "min_ready_seconds",
        r#"{"type": "integer", "minimum": 0, "maximum": 3600, "default": 1}"#,
        "How long a replaced unit must stay up (process alive, /health answering) after it became healthy before the next unit of its role is taken out; one that dies meanwhile halts the roll.",
    ),
];

/// The problems of a component's section: every key it does not declare, located, with
/// the nearest declared one. What the values mean is the owner's to check.
pub fn unknown_section_keys(
    name: &str,
    keys: &[Key],
    section: &super::Section,
) -> Vec<super::Problem> {
    let declared = names(keys);
    section
        .entries
        .iter()
        .filter(|e| !declared.contains(&e.key.as_str()))
        .map(|e| {
            let problem = super::Problem::new(
                "srt::recipe::unknown_key",
                e.key_span,
                format!("unknown key `{name}.{}`", e.key),
            )
            .label("unknown key");
            match super::diag::did_you_mean(&e.key, declared.iter().copied()) {
                Some(s) => problem.help(format!("did you mean `{s}`?")),
                None => problem.help(format!("expected one of: {}", declared.join(", "))),
            }
        })
        .collect()
}

/// What is wrong with `value` (at `span`) as the value of `key`, read by its schema
/// fragment: a JSON type its `type` does not list is `srt::recipe::type`, a string its
/// `enum` does not list is `srt::recipe::value`. What the value means beyond that is the
/// key owner's to check.
pub(crate) fn value_problem(
    path: &str,
    key: &Key,
    value: &super::ArgValue,
    span: miette::SourceSpan,
) -> Option<super::Problem> {
    use super::ArgValue;
    let fragment: serde_json::Value = serde_json::from_str(key.schema).expect("key schema is JSON");
    let choices: Vec<&str> = fragment["enum"]
        .as_array()
        .map(|c| c.iter().filter_map(serde_json::Value::as_str).collect())
        .unwrap_or_default();
    let types: Vec<&str> = match &fragment["type"] {
        serde_json::Value::String(t) => vec![t.as_str()],
        serde_json::Value::Array(ts) => ts.iter().filter_map(serde_json::Value::as_str).collect(),
        _ if !choices.is_empty() => vec!["string"],
        _ => return None,
    };
    let json_type = match value {
        ArgValue::Null => "null",
        ArgValue::Bool(_) => "boolean",
        ArgValue::Int(_) => "integer",
        ArgValue::Float(_) => "number",
        ArgValue::Str(_) => "string",
        ArgValue::List(_) => "array",
        ArgValue::Json(_) => "object",
    };
    let fits = types
        .iter()
        .any(|t| *t == json_type || (*t == "number" && json_type == "integer"));
    if !fits {
        let noun = match types
            .iter()
            .find(|t| **t != "null")
            .copied()
            .unwrap_or("null")
        {
            "string" => "a string",
            "boolean" => "a boolean",
            "integer" => "an integer",
            "number" => "a number",
            "array" => "a list",
            "object" => "a mapping",
            other => other,
        };
        return Some(
            super::Problem::new(
                "srt::recipe::type",
                span,
                format!("`{path}` must be {noun}, found {}", value.noun()),
            )
            .label(format!("expected {noun}")),
        );
    }
    let ArgValue::Str(s) = value else { return None };
    if choices.is_empty() || choices.contains(&s.as_str()) {
        return None;
    }
    let listed: Vec<String> = choices.iter().map(|c| format!("`{c}`")).collect();
    Some(
        super::Problem::new(
            "srt::recipe::value",
            span,
            format!("unknown `{path}` `{s}`"),
        )
        .label("not one of its values")
        .help(format!("expected {}", listed.join(" or "))),
    )
}

/// Key names of a table, for the loader.
pub(crate) fn names(keys: &[Key]) -> Vec<&'static str> {
    keys.iter().map(|k| k.name).collect()
}

/// The default of `name` in `table`, from its schema fragment (`"default": ...`): the
/// one place a recipe default is written.
///
/// # Panics
/// When the key has no default: a bug in the table, caught by its tests.
pub(crate) fn default<T: serde::de::DeserializeOwned>(table: &[Key], name: &str) -> T {
    let key = table
        .iter()
        .find(|k| k.name == name)
        .unwrap_or_else(|| panic!("no recipe key `{name}`"));
    let fragment: serde_json::Value = serde_json::from_str(key.schema).expect("key schema is JSON");
    serde_json::from_value(fragment["default"].clone())
        .unwrap_or_else(|e| panic!("recipe key `{name}` has no usable default: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_value_is_read_by_its_keys_schema_type_and_enum() {
        use crate::recipe::ArgValue;
        let at = miette::SourceSpan::new(0.into(), 1);
        let code = |schema: &'static str, v: ArgValue| {
            value_problem("engine.x", &k("x", schema, ""), &v, at).map(|p| p.code)
        };
        let nullable = r#"{"type": ["string", "null"]}"#;
        assert_eq!(code(nullable, ArgValue::Null), None);
        assert_eq!(
            code(nullable, ArgValue::Bool(true)),
            Some("srt::recipe::type")
        );
        assert_eq!(code(r#"{"type": "number"}"#, ArgValue::Int(2)), None);
        assert_eq!(
            code(r#"{"type": "boolean"}"#, ArgValue::Str("yes".into())),
            Some("srt::recipe::type")
        );
        let modes = r#"{"enum": ["a", "b"]}"#;
        assert_eq!(code(modes, ArgValue::Str("b".into())), None);
        assert_eq!(
            code(modes, ArgValue::Str("c".into())),
            Some("srt::recipe::value")
        );
        assert_eq!(code(modes, ArgValue::Int(1)), Some("srt::recipe::type"));
        assert_eq!(code(r##"{"$ref": "#/$defs/x"}"##, ArgValue::Int(1)), None);
    }

    #[test]
    fn every_fragment_is_a_json_object() {
        for table in [
            TOP,
            MODEL,
            RESOURCES,
            ENGINE,
            ROLES,
            ROLE,
            FRONTEND,
            NGINX,
            HEALTH_CHECK,
            ROLLOUT,
            SLURM,
            BENCHMARK,
            IDENTITY,
            IDENTITY_MODEL,
            IDENTITY_CONTAINER,
            PROFILING,
            PROFILING_PHASE,
        ] {
            for key in table {
                let v: serde_json::Value = serde_json::from_str(key.schema).unwrap();
                assert!(v.is_object(), "{}", key.name);
            }
        }
    }

    #[test]
    fn bounds_match_the_limits() {
        let v: serde_json::Value = serde_json::from_str(RESOURCES[0].schema).unwrap();
        assert_eq!(v["maximum"], crate::recipe::limits::MAX_GPUS_PER_NODE);
    }

    #[test]
    fn the_traces_a_replay_reads_are_the_schemas() {
        let key = BENCHMARK
            .iter()
            .find(|k| k.name == "mooncake_workload")
            .unwrap();
        let v: serde_json::Value = serde_json::from_str(key.schema).unwrap();
        assert_eq!(v["enum"], serde_json::json!(MOONCAKE_WORKLOADS));
        assert!(MOONCAKE_WORKLOADS
            .contains(&default::<String>(BENCHMARK, "mooncake_workload").as_str()));
    }

    #[test]
    fn replay_only_keys_are_replays_and_no_other_types() {
        for k in REPLAY_ONLY {
            assert!(REPLAY_BENCHMARK.contains(k), "{k}");
            let others = [
                COMMAND_BENCHMARK,
                TRACE_BENCHMARK,
                EVAL_COUNTS,
                EVAL_SAMPLING,
            ];
            assert!(others.iter().all(|t| !t.contains(k)), "{k}");
        }
    }

    #[test]
    fn defaults_come_from_the_fragments() {
        assert_eq!(default::<u64>(HEALTH_CHECK, "timeout_seconds"), 1800);
        assert_eq!(default::<String>(FRONTEND, "type"), "vllm-router");
        assert_eq!(default::<u16>(FRONTEND, "port"), 8000);
        assert_eq!(
            default::<f64>(BENCHMARK, "max_failed_fraction"),
            crate::bench::DEFAULT_MAX_FAILED_FRACTION
        );
    }
}
