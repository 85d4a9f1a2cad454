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
    /// How apply replaces workers while serving.
    pub rollout: Rollout,
    /// Scheduler settings the recipe asks for (srtctl's `slurm:`), applied by the SLURM executor.
    pub slurm: SlurmSettings,
    /// `infra.etcd_nats_dedicated_node: true`, where written: the frontend's services
    /// get a node of their own.
    pub services_node: Option<SourceSpan>,
    /// `infra.nats_max_payload_mb`, where written: the nats-server's `max_payload`.
    pub nats_max_payload_mb: Option<Sp<u32>>,
    /// The benchmark run after the smoke completion, if any.
    pub benchmark: Option<BenchmarkRun>,
    /// `sensitive_env`: variables to treat as secrets besides the default list of
    /// [`crate::secrets`], sorted and deduplicated.
    pub sensitive_env: Vec<String>,
    /// srtctl's runtime keys (`setup_script`, `container_mounts`, `environment`, ...).
    pub runtime: super::runtime::RuntimeKeys,
    /// Top-level sections a component owns ([`super::keys::OWNED_SECTIONS`]), by name,
    /// as written: their owner checks and reads them.
    pub sections: BTreeMap<String, Section>,
    /// What was done to the file before it was read (the override file's variant
    /// chosen, srtctl v1 re-spelled as 2.0): located warnings, shown with the launch
    /// plan's.
    pub notes: Vec<crate::recipe::diag::Problem>,
    /// Set when a sweep's file is loaded as one recipe (`srt validate`, `render`, `plan`,
    /// `apply`): which of its points this is, so the commands say so.
    pub sweep: Option<SweepPoint>,
}

/// The point of a sweep a recipe is ([`super::sweep`]).
#[derive(Clone, Debug, PartialEq)]
pub struct SweepPoint {
    /// The `sweep` key.
    pub key: SourceSpan,
    /// The point, from 0.
    pub index: usize,
    /// How many points the sweep has.
    pub of: usize,
    /// Its parameters, `tp=1, conc=4`.
    pub params: String,
    /// Set when points were skipped because their parallel sizes do not fit their GPUs
    /// ([`crate::assemble::load_fitting`]).
    pub unfit: Option<Unfit>,
}

/// The points of a sweep skipped before the one read, because their parallel sizes do
/// not fit the GPUs their workers get (a grid over `tp`, `pp`, `dp` on fixed nodes has
/// such points).
#[derive(Clone, Debug, PartialEq)]
pub struct Unfit {
    /// How many were skipped: every point when none fits (the first is read then).
    pub count: usize,
    /// The first one's parameters, `tp=1, dp=1`.
    pub first: String,
    /// Why it does not fit: its first error's message.
    pub reason: String,
}

/// A top-level section a component owns, as written: its entries' keys are kept as
/// they are (not made flags), their values as role args hold theirs.
#[derive(Clone, Debug, PartialEq)]
pub struct Section {
    /// The section's key (`dynamo`).
    pub key_span: SourceSpan,
    /// Its entries, in the order written.
    pub entries: Vec<Arg>,
}

impl Section {
    /// The entry `key`, if written.
    pub fn get(&self, key: &str) -> Option<&Arg> {
        self.entries.iter().find(|a| a.key == key)
    }

    /// The entry `key`'s string value, at its value, when it is one.
    pub fn text(&self, key: &str) -> Option<Sp<&str>> {
        let arg = self.get(key)?;
        match &arg.value {
            ArgValue::Str(s) => Some(Sp::new(s.as_str(), arg.value_span)),
            _ => None,
        }
    }
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

/// `benchmark:`: what apply runs once the smoke completion passed.
#[derive(Clone, Debug, PartialEq)]
pub enum BenchmarkRun {
    /// `type: sa-bench`: srt's own serving benchmark.
    Serving(Box<Benchmark>),
    /// `type: custom`: the recipe's command, run to completion.
    Command(CommandBenchmark),
    /// `type: gsm8k` or `gpqa`: an accuracy evaluation through the public URL.
    Eval(EvalBenchmark),
    /// `type: mooncake-router`: a Mooncake trace replayed by aiperf.
    Trace(TraceBenchmark),
}

impl BenchmarkRun {
    /// The serving benchmark, if it is one.
    pub fn serving(&self) -> Option<&Benchmark> {
        match self {
            BenchmarkRun::Serving(b) => Some(b),
            BenchmarkRun::Command(_) | BenchmarkRun::Eval(_) | BenchmarkRun::Trace(_) => None,
        }
    }
}

/// `benchmark:` of srtctl's `type: custom`: a command run with `bash -lc` on the node
/// of the public endpoint (in its container where there is one), told the deployment's
/// endpoints in `SRT_*` variables, as srtctl runs it; it passes when it exits 0.
#[derive(Clone, Debug, PartialEq)]
pub struct CommandBenchmark {
    /// Span of the `benchmark` key.
    pub span: SourceSpan,
    /// The command, passed to `bash -lc` as written (no placeholders expanded).
    pub command: String,
    /// `env`: its variables, applied last (they override srt's).
    pub env: BTreeMap<String, String>,
    /// `container_image`: its image, else the model's container.
    pub container_image: Option<String>,
    /// Run by a login shell (`bash -lc`, as srtctl runs a `custom` command, whose
    /// profile may set `PATH`), else by `bash -c` (srt's own scripts, run as srtctl
    /// runs its benchmark scripts: with the environment they are given).
    pub login_shell: bool,
}

/// `benchmark:` of srtctl's `type: gsm8k` or `gpqa`: an accuracy evaluation of the
/// deployment through its public URL by SGLang's harness (`sglang.test.run_eval`), run
/// as srtctl runs it, in the benchmark's container (else the model's). Unset numbers
/// take srtctl's defaults for the evaluation.
#[derive(Clone, Debug, PartialEq)]
pub struct EvalBenchmark {
    /// Span of the `benchmark` key.
    pub span: SourceSpan,
    /// Span of `benchmark.type`.
    pub type_span: SourceSpan,
    /// The evaluation: `gsm8k` or `gpqa`.
    pub eval: String,
    /// `num_examples`, `max_tokens`, `num_threads`, `num_shots`, `repeat`, `top_k`:
    /// those written, by key.
    pub counts: BTreeMap<String, Sp<i64>>,
    /// `temperature`, `top_p`: those written.
    pub sampling: BTreeMap<String, Sp<f64>>,
    /// `container_image`: the image the harness runs in, else the model's container.
    pub container_image: Option<String>,
}

/// `benchmark:` of srtctl's aiperf trace replays, run as srtctl runs them (its
/// `mooncake-router/bench.sh` and `trace-replay/bench.sh`): a short warm-up, then the
/// trace through the public URL with goodput counted against two latency thresholds,
/// in the benchmark's container (else the model's). Unset values take srtctl's
/// defaults.
#[derive(Clone, Debug, PartialEq)]
pub struct TraceBenchmark {
    /// Span of the `benchmark` key.
    pub span: SourceSpan,
    /// Which trace, and how it is replayed.
    pub source: TraceSource,
    /// `ttft_threshold_ms`: goodput's time-to-first-token bound.
    pub ttft_threshold_ms: u64,
    /// `itl_threshold_ms`: goodput's inter-token-latency bound.
    pub itl_threshold_ms: u64,
    /// `max_failed_fraction`: the most requests that may fail for the run to pass.
    pub max_failed_fraction: f64,
    /// `container_image`: the image aiperf runs in, else the model's container.
    pub container_image: Option<String>,
}

/// The trace of a [`TraceBenchmark`].
#[derive(Clone, Debug, PartialEq)]
pub enum TraceSource {
    /// `type: mooncake-router`: one of the Mooncake traces (FAST'25; `mooncake_workload`:
    /// `conversation`, `mooncake`, `synthetic`, `toolagent`), downloaded once and
    /// replayed at its own timestamps.
    Mooncake {
        /// The trace's name.
        workload: String,
    },
    /// `type: trace-replay`: the recipe's own trace in Mooncake's format (`trace_file`,
    /// a path on the benchmark's node, in its container where there is one), replayed
    /// at each of `concurrencies` in turn.
    File {
        /// The trace file.
        path: String,
        /// The levels, one replay each.
        concurrencies: Vec<u32>,
    },
}

impl TraceSource {
    /// srtctl's benchmark type.
    pub fn kind(&self) -> &'static str {
        match self {
            TraceSource::Mooncake { .. } => "mooncake-router",
            TraceSource::File { .. } => "trace-replay",
        }
    }
}

/// `benchmark:`: a serving benchmark through the public URL after every gate passed
/// (run by [`crate::bench`]; defaults from [`crate::recipe::keys::BENCHMARK`]).
#[derive(Clone, Debug, PartialEq)]
pub struct Benchmark {
    /// Span of the `benchmark` key.
    pub span: SourceSpan,
    /// Benchmark type (`sa-bench`).
    pub kind: String,
    /// Mean input length per request, in the model's tokens.
    pub isl: u32,
    /// Mean output tokens per request (`max_tokens`).
    pub osl: u32,
    /// Whether `osl` was written (a ShareGPT dataset then uses it for every request).
    pub osl_written: bool,
    /// Concurrency levels run one after the other (`"4x8"` is 4 then 8).
    pub concurrencies: Vec<u32>,
    /// Requests per level, as a multiple of the level (`num_prompts_mult`, or srt's
    /// earlier `requests_per_concurrency`).
    pub num_prompts_mult: u32,
    /// Warm-up requests per level, as a multiple of the level.
    pub num_warmup_mult: u32,
    /// Requests per second within a level; `None` is `inf` (all at once).
    pub req_rate: Option<f64>,
    /// Where `req_rate` is written (the `benchmark` key when it is not).
    pub req_rate_span: SourceSpan,
    /// The longest a run may take, in seconds (`max_duration_seconds`).
    pub max_duration_secs: u64,
    /// The most measured requests that may fail, as a fraction of them, for the run to
    /// pass (`max_failed_fraction`, in `[0, 1]`).
    pub max_failed_fraction: f64,
    /// Length spread of the random dataset, in `[0, 1)`.
    pub random_range_ratio: f64,
    /// Tokens of a prefix shared by every random prompt.
    pub random_prefix_len: u32,
    /// ShareGPT-style dataset file, when `dataset_name: sharegpt`.
    pub dataset_path: Option<String>,
    /// The tokenizer to count tokens with (default: the model path).
    pub tokenizer: Option<String>,
    /// Where `tokenizer` is written (the `benchmark` key when it is not).
    pub tokenizer_span: SourceSpan,
    /// `/v1/completions` or `/v1/chat/completions`.
    pub endpoint: String,
    /// `ignore_eos` on every request.
    pub ignore_eos: bool,
    /// Wrap random prompts in the model's chat template, as sa-bench does
    /// (`use_chat_template`).
    pub use_chat_template: bool,
    /// The sa-bench tokenizer adapter rendering the chat in place of the model's
    /// template (srtctl's `custom_tokenizer`), in the mode the recipe's top-level
    /// `environment` gives it.
    pub custom_tokenizer: Option<crate::bench::AdapterChat>,
    /// Seed of prompts, lengths and arrivals.
    pub seed: u64,
    /// Percentiles reported besides mean and median.
    pub percentiles: Vec<f64>,
    /// Goodput objectives in ms: TTFT, TPOT, E2EL.
    pub goodput: [Option<f64>; 3],
    /// srtctl's `slow_down_sleep_time` and `slow_down_wait_time`.
    pub slow_down: Option<SlowDown>,
}

/// srtctl's sa-bench slow-down: each measured level starts with the decode workers'
/// forward passes sleeping, turned off after a while (the engine's admin route, SGLang's
/// `/slow_down`; [`crate::bench::SlowDown`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct SlowDown {
    /// Seconds each forward pass sleeps (`slow_down_sleep_time`).
    pub sleep_seconds: f64,
    /// Seconds after the level's requests start that it is turned off
    /// (`slow_down_wait_time`).
    pub wait_seconds: f64,
    /// Where `slow_down_sleep_time` is written.
    pub span: SourceSpan,
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
    /// `spread_workers`: a worker smaller than a node gets a node of its own.
    pub spread_workers: bool,
}

/// `engine:` (a name, or a mapping with `type`).
#[derive(Clone, Debug, PartialEq)]
pub struct Engine {
    /// Engine type.
    pub kind: Sp<String>,
    /// The `engine` value (or the document's start when there is none): where a default
    /// of the engine's keys points.
    pub span: SourceSpan,
    /// The mapping's other keys, as written: the engine declares, checks and reads them
    /// (`crate::engine::Engine::keys`).
    pub keys: Section,
    /// `allow_prefill_decode_colocation` (srtctl's): the first decode worker may take
    /// the GPUs prefill left on its last node instead of starting a node of its own.
    pub allow_prefill_decode_colocation: bool,
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

    /// srtctl's name of the role's mode (`aggregated` for agg), as its per-role keys
    /// spell it (`profiling.<mode>`, `kv_events_config.<mode>`).
    pub fn srtctl_name(self) -> &'static str {
        match self {
            RoleKind::Agg => "aggregated",
            r => r.name(),
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
    /// `args` read as engine flags (without `connector`); emptied by the assembly when
    /// the engine reads them as its config file (`config`).
    pub args: Args,
    /// What is wrong with `args` read as flags: reported by the assembly when the
    /// engine reads flags ([`crate::engine::ArgsForm::Flags`]), dropped when it reads a
    /// config file.
    pub flag_problems: Vec<crate::recipe::diag::Problem>,
    /// The role's `args` mapping as written, for an engine that reads it as its own
    /// config file rather than as flags ([`crate::engine::ArgsForm::Config`]): keys,
    /// nesting and `null`s kept, every value with its span. Cleared by the assembly
    /// when the engine reads flags.
    pub config: Option<crate::recipe::yaml::Node>,
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
}

impl ArgValue {
    /// A short noun for the value's kind, as messages name YAML kinds (`a string`).
    pub fn noun(&self) -> &'static str {
        match self {
            ArgValue::Null => "null",
            ArgValue::Bool(_) => "a boolean",
            ArgValue::Int(_) => "an integer",
            ArgValue::Float(_) => "a number",
            ArgValue::Str(_) => "a string",
            ArgValue::List(_) => "a list",
            ArgValue::Json(_) => "a mapping",
        }
    }

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
    /// Span of each `env` key, so rules about a variable can point at it.
    pub env_spans: BTreeMap<String, SourceSpan>,
    /// nginx + one Router per non-head node (default true, as srtctl).
    pub enable_multiple_frontends: Sp<bool>,
    /// Upper bound of extra Router replicas behind nginx (default 9).
    pub num_additional_frontends: Sp<u32>,
    /// Where a single frontend runs.
    pub orchestrator_placement: Sp<Placement>,
    /// Separate image for frontend processes.
    pub container_image: Option<String>,
    /// Public port (default 8000).
    pub port: Sp<u16>,
    /// Program run as the Router (default per frontend type, `vllm-router`).
    pub binary: Option<String>,
    /// `frontend.nginx`: the limits of nginx in front of several Routers.
    pub nginx: Nginx,
}

/// `frontend.nginx:`: what nginx in front of several Routers may hold at once. The
/// defaults are fit for serving (srtctl's `worker_processes auto`,
/// `worker_connections 65535`, upstream keepalive).
#[derive(Clone, Debug, PartialEq)]
pub struct Nginx {
    /// Span of the `nginx` key, when written (a layout without nginx warns about it).
    pub span: Option<SourceSpan>,
    /// `worker_processes`: `None` is `auto` (one per core).
    pub worker_processes: Option<u32>,
    /// `worker_connections` per worker.
    pub worker_connections: u32,
    /// `worker_rlimit_nofile` (default: twice the connections: a proxied request holds
    /// a client and an upstream connection).
    pub worker_rlimit_nofile: u32,
    /// Idle upstream connections to the Routers kept per worker (`keepalive`).
    pub upstream_keepalive: u32,
    /// Client `keepalive_timeout`, in seconds.
    pub keepalive_timeout_secs: u32,
    /// `client_max_body_size`, in nginx's size syntax.
    pub client_max_body_size: String,
    /// The container image nginx runs in, where the executor runs containers.
    pub image: Option<String>,
    /// `session_header`: the request header hashed to choose the Router.
    pub session_header: Option<String>,
}

impl Default for Nginx {
    /// The defaults of `recipe::keys::NGINX`.
    fn default() -> Self {
        use super::keys::{default, NGINX};
        let auto: serde_json::Value = default(NGINX, "worker_processes");
        let worker_connections: u32 = default(NGINX, "worker_connections");
        Nginx {
            span: None,
            worker_processes: auto.as_u64().map(|n| n as u32),
            worker_connections,
            worker_rlimit_nofile: worker_connections.saturating_mul(2),
            upstream_keepalive: default(NGINX, "upstream_keepalive"),
            keepalive_timeout_secs: default(NGINX, "keepalive_timeout_seconds"),
            client_max_body_size: default(NGINX, "client_max_body_size"),
            image: None,
            session_header: None,
        }
    }
}

/// `rollout:`: how apply replaces a role's workers while the deployment serves.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rollout {
    /// Workers of a role out of service at once.
    pub max_unavailable: Amount,
    /// Seconds a worker taken out of its Routers may take to finish its requests.
    pub drain_secs: u64,
    /// Seconds a replaced unit must stay up after it became healthy.
    pub min_ready_secs: u64,
}

impl Default for Rollout {
    /// The defaults of `recipe::keys::ROLLOUT`.
    fn default() -> Self {
        use super::keys::{default, ROLLOUT};
        Rollout {
            max_unavailable: Amount::Count(default(ROLLOUT, "max_unavailable")),
            drain_secs: default(ROLLOUT, "drain_seconds"),
            min_ready_secs: default(ROLLOUT, "min_ready_seconds"),
        }
    }
}

/// A number of workers: a count, or a percentage of a role's workers. Serialized as the
/// recipe writes it: `1`, `"25%"`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Amount {
    /// This many.
    Count(u32),
    /// This percentage, rounded down, at least 1.
    Percent(u32),
}

impl Amount {
    /// The count out of `of` workers (at least 1, at most `of` when `of > 0`).
    pub fn of(self, of: usize) -> usize {
        let n = match self {
            Amount::Count(n) => n as usize,
            Amount::Percent(p) => of * p as usize / 100,
        };
        n.clamp(1, of.max(1))
    }
}

impl serde::Serialize for Amount {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Amount::Count(n) => s.serialize_u32(*n),
            Amount::Percent(_) => s.serialize_str(&self.to_string()),
        }
    }
}

impl std::fmt::Display for Amount {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Amount::Count(n) => write!(f, "{n}"),
            Amount::Percent(p) => write!(f, "{p}%"),
        }
    }
}

/// `health_check:`.
#[derive(Clone, Debug, PartialEq)]
pub struct HealthCheck {
    /// Total readiness budget in seconds (default 1800).
    pub timeout_secs: u64,
    /// Longest interval between probes in seconds (default 10); probing starts faster.
    pub interval_secs: u64,
    /// How long a running worker may accept connections without answering `/health`
    /// before refresh calls it drift (default 10).
    pub unhealthy_grace_secs: u64,
}

impl Default for HealthCheck {
    /// The defaults of `recipe::keys::HEALTH_CHECK`.
    fn default() -> Self {
        use super::keys::{default, HEALTH_CHECK};
        HealthCheck {
            timeout_secs: default(HEALTH_CHECK, "timeout_seconds"),
            interval_secs: default(HEALTH_CHECK, "interval_seconds"),
            unhealthy_grace_secs: default(HEALTH_CHECK, "unhealthy_grace_seconds"),
        }
    }
}

/// Whether argparse reads `token` as an option rather than a value: it starts with `-`
/// and is not a negative number (`-1`, `-0.5`).
pub fn looks_like_option(token: &str) -> bool {
    let Some(rest) = token.strip_prefix('-') else {
        return false;
    };
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    let negative_number = digits(rest)
        || rest
            .split_once('.')
            .is_some_and(|(int, frac)| (int.is_empty() || digits(int)) && digits(frac));
    !rest.is_empty() && !negative_number
}
