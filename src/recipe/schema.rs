//! The typed recipe: what a user can write, after loading and before validation.
//!
//! Every value that a later rule may complain about keeps its source span ([`Sp`]).
//! Defaults are applied by the loader, so downstream code never sees an absent value
//! it would have to default again.

use miette::SourceSpan;
use std::collections::BTreeMap;

/// A value with the span of the YAML it came from (or of its parent key when defaulted).
#[derive(Clone, Debug, PartialEq)]
pub struct Sp<T> {
    /// The value.
    pub value: T,
    /// Where it was written.
    pub span: SourceSpan,
}

impl<T> Sp<T> {
    /// Wrap a value with a span.
    pub fn new(value: T, span: SourceSpan) -> Self {
        Sp { value, span }
    }
}

/// A loaded recipe.
#[derive(Clone, Debug, PartialEq)]
pub struct Recipe {
    /// Deployment name (defaults to the file stem).
    pub name: Sp<String>,
    /// The model served.
    pub model: Model,
    /// Cluster facts the recipe relies on.
    pub resources: Resources,
    /// The inference engine and its settings.
    pub engine: Engine,
    /// Worker roles: prefill + decode, or agg.
    pub roles: Vec<Role>,
    /// The public frontend.
    pub frontend: Frontend,
    /// Readiness budget.
    pub health_check: HealthCheck,
    /// Scheduler settings the recipe asks for (srtctl's `slurm:`), applied by the SLURM executor.
    pub slurm: SlurmSettings,
    /// The load benchmark run after the gates, if any.
    pub benchmark: Option<Benchmark>,
    /// `sensitive_env`: variables to treat as secrets besides the default list of
    /// [`crate::secrets`], sorted and deduplicated.
    pub sensitive_env: Vec<String>,
}

/// `slurm:`: per-recipe scheduler settings; they override the cluster profile.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SlurmSettings {
    /// `--time` of the allocation (`HH:MM:SS` or `D-HH:MM:SS`).
    pub time_limit: Option<String>,
    /// `--partition`.
    pub partition: Option<String>,
    /// `--account`.
    pub account: Option<String>,
}

/// `benchmark:`: a load run through the public URL after every gate passed.
#[derive(Clone, Debug, PartialEq)]
pub struct Benchmark {
    /// Span of the `benchmark` key.
    pub span: SourceSpan,
    /// Benchmark type (`sa-bench`: srt runs its own built-in equivalent).
    pub kind: String,
    /// Input length per request, in tokens (approximate: words of a synthetic prompt).
    pub isl: u32,
    /// Output tokens per request (`max_tokens`).
    pub osl: u32,
    /// Concurrency levels run one after the other (`"4x8"` is 4 then 8).
    pub concurrencies: Vec<u32>,
    /// Requests per concurrency level, as a multiple of the level (default 4).
    pub requests_per_concurrency: u32,
}

/// `model:`.
#[derive(Clone, Debug, PartialEq)]
pub struct Model {
    /// Path or id passed to `vllm serve` (default `/model`, the conventional container mount).
    pub path: Sp<String>,
    /// `--served-model-name` (defaults to the path's last component).
    pub served_name: String,
    /// Container image for workers (rendered only by executors that run containers).
    pub container: Option<String>,
    /// srtctl's `precision` (e.g. `bf16`, `fp8`): recorded and shown; vLLM's own flags
    /// (`args.dtype`, `args.quantization`) decide how the model is loaded.
    pub precision: Option<String>,
}

/// `resources:`.
#[derive(Clone, Debug, PartialEq)]
pub struct Resources {
    /// GPUs per node (default 4).
    pub gpus_per_node: Sp<u32>,
    /// GPU model (`h100`, `mi300x`): the GRES type a scheduler allocates.
    pub gpu_type: Option<String>,
}

/// How vLLM data parallelism is launched.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DpLaunchMode {
    /// One hybrid-LB API server per node (upstream default).
    PerNode,
    /// One process per DP rank (deprecated; refused with vllm-router).
    PerGpu,
}

/// `engine:` (`vllm` or a mapping).
#[derive(Clone, Debug, PartialEq)]
pub struct Engine {
    /// Engine type; only `vllm` exists.
    pub kind: Sp<String>,
    /// Engine-wide KV connector name (default `nixl`).
    pub connector: Sp<String>,
    /// DP launch mode (default `per_node`).
    pub dp_launch_mode: Sp<DpLaunchMode>,
    /// The program run as `<binary> serve` (default `vllm`).
    pub serve_binary: String,
}

/// The three role kinds, in allocation order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum RoleKind {
    /// Prefill workers of a disaggregated deployment.
    Prefill,
    /// Decode workers of a disaggregated deployment.
    Decode,
    /// Aggregated workers.
    Agg,
}

impl RoleKind {
    /// All kinds in allocation order.
    pub const ALL: [RoleKind; 3] = [RoleKind::Prefill, RoleKind::Decode, RoleKind::Agg];

    /// The recipe key.
    pub fn name(self) -> &'static str {
        match self {
            RoleKind::Prefill => "prefill",
            RoleKind::Decode => "decode",
            RoleKind::Agg => "agg",
        }
    }
}

/// `roles.<r>.nodes`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Nodes {
    /// This many dedicated nodes.
    Count(u32),
    /// Share the prefill node's remaining GPUs (decode only).
    Colocate,
}

/// One `roles.<r>` entry.
#[derive(Clone, Debug, PartialEq)]
pub struct Role {
    /// Which role.
    pub kind: RoleKind,
    /// Span of the role's key.
    pub span: SourceSpan,
    /// `nodes`.
    pub nodes: Sp<Nodes>,
    /// `workers`: logical endpoints.
    pub workers: Sp<u32>,
    /// `gpus` per worker, when written.
    pub gpus: Option<Sp<u32>>,
    /// Engine flags (without `connector`).
    pub args: Args,
    /// `args.connector`: a per-role connector override.
    pub connector: Option<Sp<String>>,
    /// Extra environment.
    pub env: BTreeMap<String, String>,
    /// Span of each `env` key, so rules about a variable can point at it.
    pub env_spans: BTreeMap<String, SourceSpan>,
}

/// A mapping of CLI flags, in source order, keys normalised to kebab-case.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Args(pub Vec<Arg>);

/// One flag.
#[derive(Clone, Debug, PartialEq)]
pub struct Arg {
    /// Kebab-case flag name without dashes.
    pub key: String,
    /// Span of the key.
    pub key_span: SourceSpan,
    /// The value.
    pub value: ArgValue,
    /// Span of the value.
    pub value_span: SourceSpan,
}

/// A flag value as written.
#[derive(Clone, Debug, PartialEq)]
pub enum ArgValue {
    /// `null`: the flag is dropped.
    Null,
    /// `true` renders `--k`; `false` drops it.
    Bool(bool),
    /// `--k 8`.
    Int(i64),
    /// `--k 0.5`.
    Float(f64),
    /// `--k text`.
    Str(String),
    /// Repeated `--k v`.
    List(Vec<ArgValue>),
    /// A mapping, rendered as compact JSON.
    Json(serde_json::Value),
}

impl Args {
    /// The flag named `key`, if present.
    pub fn get(&self, key: &str) -> Option<&Arg> {
        self.0.iter().find(|a| a.key == key)
    }

    /// An integer flag, if present and integral.
    pub fn int(&self, key: &str) -> Option<i64> {
        match self.get(key).map(|a| &a.value) {
            Some(ArgValue::Int(v)) => Some(*v),
            Some(ArgValue::Str(s)) => s.parse().ok(),
            _ => None,
        }
    }

    /// True when the flag is set to `true`.
    pub fn switch(&self, key: &str) -> bool {
        matches!(self.get(key).map(|a| &a.value), Some(ArgValue::Bool(true)))
    }

    /// Render to argv tokens: sorted by key; `true` -> `--k`, `false`/`null` dropped,
    /// lists repeat the flag, mappings become compact JSON.
    pub fn to_argv(&self) -> Vec<String> {
        let mut sorted: Vec<&Arg> = self.0.iter().collect();
        sorted.sort_by(|a, b| a.key.cmp(&b.key));
        let mut out = Vec::new();
        for arg in sorted {
            push_flag(&mut out, &arg.key, &arg.value);
        }
        out
    }
}

fn push_flag(out: &mut Vec<String>, key: &str, value: &ArgValue) {
    let flag = format!("--{key}");
    match value {
        ArgValue::Null | ArgValue::Bool(false) => {}
        ArgValue::Bool(true) => out.push(flag),
        ArgValue::List(items) => {
            for item in items {
                push_flag(out, key, item);
            }
        }
        scalar => {
            out.push(flag);
            out.push(scalar.render());
        }
    }
}

impl ArgValue {
    /// The value as a single argv token.
    pub fn render(&self) -> String {
        match self {
            ArgValue::Null => String::new(),
            ArgValue::Bool(b) => b.to_string(),
            ArgValue::Int(i) => i.to_string(),
            ArgValue::Float(f) => f.to_string(),
            ArgValue::Str(s) => s.clone(),
            ArgValue::List(items) => items
                .iter()
                .map(ArgValue::render)
                .collect::<Vec<_>>()
                .join(","),
            ArgValue::Json(v) => v.to_string(),
        }
    }
}

/// Where the (single) Router goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Placement {
    /// The head node (node 0).
    Head,
    /// The first decode leader node.
    FirstDecode,
}

/// `frontend:`.
#[derive(Clone, Debug, PartialEq)]
pub struct Frontend {
    /// Span of the `frontend` key (or of the document when absent).
    pub span: SourceSpan,
    /// Frontend type (default `vllm-router`).
    pub kind: Sp<String>,
    /// Flags passed to the frontend.
    pub args: Args,
    /// Extra environment for frontend processes.
    pub env: BTreeMap<String, String>,
    /// nginx + one Router per non-head node (default true, as srtctl).
    pub enable_multiple_frontends: Sp<bool>,
    /// Upper bound of extra Router replicas behind nginx (default 9).
    pub num_additional_frontends: u32,
    /// Where a single frontend runs.
    pub orchestrator_placement: Sp<Placement>,
    /// Separate image for frontend processes.
    pub container_image: Option<String>,
    /// Public port (default 8000).
    pub port: Sp<u16>,
    /// Program run as the Router (default per frontend type, `vllm-router`).
    pub binary: Option<String>,
}

/// `health_check:`.
#[derive(Clone, Debug, PartialEq)]
pub struct HealthCheck {
    /// Total readiness budget in seconds (default 1800).
    pub timeout_secs: u64,
    /// Longest interval between probes in seconds (default 10); probing starts faster.
    pub interval_secs: u64,
}
