//! The launch plan: every process the deployment runs, with its node, devices, ports,
//! environment and command line, plus the readiness gates, fully determined by the
//! recipe and the node count.
//!
//! Values only known at apply time are symbolic placeholders ([`node_ip`], [`RUN_DIR`]),
//! resolved by the executor through [`Bindings`]. This keeps the plan, its hashes and the
//! golden files byte-identical on every host.

pub mod argv;
mod context;
pub mod env;
mod groups;
pub mod render;
pub mod wrap;

pub use argv::Argv;
pub use context::BuildContext;
pub use groups::named_nodes;

use crate::ports::PortBlock;
use crate::recipe::RoleKind;
use miette::SourceSpan;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Version of the JSON form of the launch plan (`srt render --json`).
pub const FORMAT_VERSION: u32 = 3;

/// Placeholder for the deployment's run directory (logs, generated config files).
pub const RUN_DIR: &str = "<run-dir>";

/// Placeholder for the IP of node `i`.
pub fn node_ip(i: usize) -> String {
    format!("<node{i}-ip>")
}

/// Placeholder for the host name of node `i` (a recipe's `{node}`).
pub fn node_host(i: usize) -> String {
    format!("<node{i}-host>")
}

/// Symbolic name of node `i`.
pub fn node_name(i: usize) -> String {
    format!("node{i}")
}

/// An allocation an executor holds some of the plan's nodes in (a SLURM job): a
/// resource of the graph that every process on those nodes, or naming them, depends on.
#[derive(Clone, Debug, PartialEq)]
pub struct AllocationSpec {
    /// The plan nodes it holds, sorted (its hosts, in this order, are theirs).
    pub nodes: Vec<usize>,
    /// What the executor asks for it, canonical: a change replaces it, and everything
    /// on it.
    pub spec: serde_json::Value,
}

/// How nodes map to hosts when allocating per-node ports.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum HostLayout {
    /// Every node is its own host (a cluster).
    #[default]
    Distinct,
    /// All nodes share one host (the local executor): per-node port kinds never repeat.
    Shared,
}

impl HostLayout {
    /// The host key of node `i`, which the port allocator counts on.
    pub fn host(self, i: usize) -> String {
        match self {
            HostLayout::Distinct => node_name(i),
            HostLayout::Shared => "localhost".to_string(),
        }
    }
}

/// Where discovery-connector workers register: the frontend's listener.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DiscoveryTarget {
    /// The listening node's IP (placeholder).
    pub ip: String,
    /// The listener port.
    pub port: u16,
}

/// What a frontend's infrastructure processes offer the rest of the deployment, by
/// service name (`etcd` -> `http://<node0-ip>:2379`): the workers and the frontend's
/// entry processes are built against them and depend on `providers`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Services {
    /// Service name -> endpoint (placeholder IPs).
    pub endpoints: BTreeMap<String, String>,
    /// The processes offering them: whatever uses a service depends on these.
    pub providers: Vec<String>,
}

/// A runtime a frontend brings for its workers to run under (Dynamo's): its workers
/// register themselves with it, and it shapes what every worker needs for that. The
/// engine renders its own program for it (the runtime's wrapper of that engine); the
/// runtime then adopts each worker.
pub trait WorkerRuntime: Send + Sync + std::fmt::Debug {
    /// Name, which an engine's table of runtime wrappers is keyed by (`dynamo`).
    fn name(&self) -> &'static str;
    /// Make `process`, a worker whose program is the engine's wrapper for this runtime,
    /// register with it: ports, environment, flags, dependencies, its health probe, and
    /// what runs in its place under `--simulate`. `own` are the role's flags that the
    /// wrapper reads itself, rendered (the engine rendered the rest).
    fn adopt(
        &self,
        ctx: &mut BuildContext<'_>,
        process: &mut LaunchProcess,
        serving: &Serving,
        own: &[String],
    ) -> Result<(), String>;
}

/// What an engine's worker serves, in terms any runtime understands: what a runtime
/// hands its own simulated engine.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Serving {
    /// Model path (or hub name) the engine loads.
    pub model_path: String,
    /// Name clients request.
    pub served_name: String,
    /// KV-cache block size in tokens, when the recipe sets it.
    pub block_size: Option<String>,
    /// Sequences batched at once, when the recipe sets it.
    pub max_num_seqs: Option<String>,
    /// Tokens batched in one step, when the recipe sets it.
    pub max_num_batched_tokens: Option<String>,
    /// Data-parallel ranks this process serves.
    pub data_parallel: u32,
    /// The port its decodes rendezvous with it at, when it is the prefill side of a KV
    /// transfer: vLLM's NIXL side channel (its first rank's), SGLang's bootstrap server.
    pub bootstrap_port: Option<u16>,
    /// The engine whose scheduling a runtime's simulated engine imitates (`vllm`,
    /// `sglang`: the Dynamo mocker's `--engine-type`).
    pub family: &'static str,
    /// A process that registers nothing (`WorkerInfo::headless`) still connects to the
    /// runtime (its wrapper does at node rank > 0), so it needs the runtime's address.
    pub follower_connects: bool,
}

/// Concrete values for the placeholders, provided by an executor at apply time.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Bindings {
    /// IP of each node, by index.
    pub node_ips: Vec<String>,
    /// The run directory.
    pub run_dir: String,
    /// Host name of each node, by index (what `<nodeN-host>` resolves to).
    pub node_hosts: Vec<String>,
}

impl Bindings {
    /// Replace every placeholder in `text`.
    ///
    /// One pass over the text: each `<nodeN-ip>` (N as [`node_ip`] writes it) with N
    /// bound is replaced, anything else is kept. Trying every node's placeholder in turn
    /// cost O(nodes) per string, and a Router's argv has a URL per worker.
    pub fn resolve(&self, text: &str) -> String {
        if !text.contains('<') {
            return text.to_string();
        }
        let text = text.replace(RUN_DIR, &self.run_dir);
        const OPEN: &str = "<node";
        const CLOSE: &str = "-ip>";
        const HOST: &str = "-host>";
        let mut out = String::with_capacity(text.len());
        let mut rest = text.as_str();
        while let Some(at) = rest.find(OPEN) {
            out.push_str(&rest[..at]);
            let after = &rest[at + OPEN.len()..];
            let digits = after.bytes().take_while(u8::is_ascii_digit).count();
            let canonical = digits == 1 || (digits > 1 && !after.starts_with('0'));
            let index = || after[..digits].parse::<usize>().ok();
            let tail = &after[digits..];
            let bound = match canonical {
                true if tail.starts_with(CLOSE) => index()
                    .and_then(|i| self.node_ips.get(i))
                    .map(|v| (v, CLOSE)),
                true if tail.starts_with(HOST) => index()
                    .and_then(|i| self.node_hosts.get(i))
                    .map(|v| (v, HOST)),
                _ => None,
            };
            match bound {
                Some((ip, close)) => {
                    out.push_str(ip);
                    rest = &after[digits + close.len()..];
                }
                None => {
                    out.push_str(OPEN);
                    rest = after;
                }
            }
        }
        out.push_str(rest);
        out
    }
}

/// The launch plan.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LaunchPlan {
    /// JSON format version.
    pub format_version: u32,
    /// Deployment name.
    pub deployment: String,
    /// Engine type (`engine.type`).
    pub engine: String,
    /// Frontend type.
    pub frontend: String,
    /// Served model name.
    pub served_model_name: String,
    /// srtctl's precision label, shown for reference (not passed to vLLM).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub precision: Option<String>,
    /// GPU model the nodes need, when the recipe names one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub gpu_type: Option<String>,
    /// What the deployment declares it runs (the recipe's `identity`): recorded in
    /// state by apply and shown by `srt status`; in no resource's hash.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub identity: Option<crate::recipe::runtime::Identity>,
    /// Nodes, symbolic.
    pub nodes: Vec<NodeSlot>,
    /// Every process, in launch order (workers, then frontends).
    pub processes: Vec<LaunchProcess>,
    /// Files srt writes for the processes that read them (an engine's config file),
    /// each a resource of its own; absent from the JSON when none.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<LaunchFile>,
    /// Readiness gates and the smoke check, in order.
    pub gates: Vec<Gate>,
    /// The workers each Router routes to (absent from the JSON when none: discovery).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub memberships: Vec<Membership>,
    /// How apply replaces workers while the deployment serves.
    pub rollout: RolloutPlan,
    /// The public URL clients use.
    pub public_url: String,
    /// Every port lease, for invariant checks and display.
    pub leases: Vec<crate::ports::Lease>,
    /// Variables the recipe marks sensitive (`sensitive_env`), on top of the default
    /// list of [`crate::secrets`]; absent from the JSON when empty.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub sensitive_env: Vec<String>,
    /// What srt noticed about the recipe and went on with (located warnings: a shape
    /// vLLM is known to refuse, a setting nothing reads, a flag srt left out and why),
    /// shown by `srt validate`, `render`, `plan` and `apply`; absent from the JSON when
    /// empty, else `[{code, message, help}]`.
    #[serde(
        skip_serializing_if = "Vec::is_empty",
        serialize_with = "serialize_warnings"
    )]
    pub warnings: Vec<crate::recipe::diag::Problem>,
}

fn serialize_warnings<S: serde::Serializer>(
    warnings: &[crate::recipe::diag::Problem],
    s: S,
) -> Result<S::Ok, S::Error> {
    #[derive(Serialize)]
    struct Warning<'a> {
        code: &'a str,
        message: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        help: Option<&'a str>,
    }
    s.collect_seq(warnings.iter().map(|w| Warning {
        code: w.code,
        message: &w.message,
        help: w.help.as_deref(),
    }))
}

impl LaunchPlan {
    /// A plan of nothing: what a deployment is planned against to destroy it.
    pub fn empty(deployment: &str) -> LaunchPlan {
        LaunchPlan {
            format_version: FORMAT_VERSION,
            deployment: deployment.to_string(),
            engine: String::new(),
            frontend: String::new(),
            served_model_name: String::new(),
            precision: None,
            gpu_type: None,
            identity: None,
            nodes: Vec::new(),
            processes: Vec::new(),
            files: Vec::new(),
            gates: Vec::new(),
            memberships: Vec::new(),
            rollout: Default::default(),
            public_url: String::new(),
            leases: Vec::new(),
            sensitive_env: Vec::new(),
            warnings: Vec::new(),
        }
    }

    /// Whether the value of variable `name` is a secret in this plan: a default
    /// sensitive name, or one the recipe marks.
    pub fn is_sensitive(&self, name: &str) -> bool {
        crate::secrets::is_sensitive(name) || self.sensitive_env.iter().any(|n| n == name)
    }
}

/// A file srt writes for the processes that read it (an engine's config file): a
/// resource of the graph, content-hashed, which its readers depend on, so a change to
/// it replaces exactly them. Written before they start; removed when destroyed.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LaunchFile {
    /// Stable address, e.g. `file.decode.engine-config`.
    pub address: String,
    /// Where it is written: under the run directory (`<run-dir>/config/decode.yaml`),
    /// which every node sees.
    pub path: String,
    /// Its text, canonical: the same recipe gives the same bytes.
    pub content: String,
}

/// How a Router learns the workers it routes to.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum MembershipMode {
    /// srt adds and removes them through the Router's admin API while it runs; the
    /// Router starts with none, and a changed set never restarts it.
    Managed,
    /// They are on the Router's command line. srt can take one out through the admin
    /// API (before stopping it) but not put one in: a changed set restarts the Router.
    Static,
    /// They register themselves with the Router (MoRI-IO over ZMQ) and cannot be taken
    /// out: a stopped one stays routed until its registration expires.
    Discovery,
}

/// The workers one Router routes to.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Membership {
    /// Address of the membership resource, `members.router[0]`.
    pub address: String,
    /// The Router process's address.
    pub router: String,
    /// The Router's base URL, for its admin API (placeholder IP).
    pub admin_url: String,
    /// Managed through the admin API, or on the command line.
    pub mode: MembershipMode,
    /// What the plan says about this membership's limit: why the Router restarts when
    /// its workers change (static), or why a stopped worker stays routed for a while
    /// (discovery).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// The members, in the order the Router lists them. Shared: every Router of a
    /// deployment routes to the same workers.
    pub members: std::sync::Arc<[Member]>,
}

/// One worker of a [`Membership`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Member {
    /// The worker process's address.
    pub worker: String,
    /// The URL the Router gets.
    pub url: String,
    /// The role it serves: a prefill/decode Router is told which when it is added.
    pub role: RoleKind,
    /// The KV connector it pairs over, as its engine names it (`NixlConnector`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kv_connector: Option<&'static str>,
    /// The port a prefill hands its requests' KV cache over from, told to a Router
    /// that pairs by it (SGLang's bootstrap server). Not in the launch plan's JSON: the
    /// worker's own `bootstrap_port` says it.
    #[serde(skip)]
    pub bootstrap_port: Option<u16>,
}

impl Member {
    /// The worker `process` (its facts `info`) at `url`.
    pub fn new(process: &LaunchProcess, info: &WorkerInfo, url: &str) -> Member {
        Member {
            worker: process.address.clone(),
            url: url.to_string(),
            role: info.role,
            kv_connector: info.kv_connector,
            bootstrap_port: info.bootstrap_port,
        }
    }

    /// What a Router's admin API is told of it, reached at `url` (its URL with the
    /// addresses resolved).
    pub fn registration<'a>(&self, url: &'a str) -> Registration<'a> {
        Registration {
            url,
            role: self.role,
            kv_connector: self.kv_connector,
            bootstrap_port: self.bootstrap_port,
        }
    }
}

/// A worker as a Router's admin API is told of it when it is added.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Registration<'a> {
    /// Where the Router reaches it.
    pub url: &'a str,
    /// The role it serves (`agg`: a regular worker).
    pub role: RoleKind,
    /// The KV connector it pairs over, as its engine names it.
    pub kv_connector: Option<&'static str>,
    /// A prefill's bootstrap port, when its Router pairs by one.
    pub bootstrap_port: Option<u16>,
}

impl<'a> Registration<'a> {
    /// A regular (aggregated) worker at `url`.
    pub fn regular(url: &'a str) -> Registration<'a> {
        Registration {
            url,
            role: RoleKind::Agg,
            kv_connector: None,
            bootstrap_port: None,
        }
    }
}

/// The recipe's `rollout`, as apply uses it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RolloutPlan {
    /// Workers of a role out of service at once.
    pub max_unavailable: crate::recipe::Amount,
    /// Seconds a worker taken out of its Routers may take to finish its requests.
    pub drain_seconds: u64,
    /// Seconds a replaced unit must stay up after it became healthy before the next
    /// unit of its role is taken out.
    pub min_ready_seconds: u64,
}

impl Default for RolloutPlan {
    fn default() -> Self {
        let r = crate::recipe::Rollout::default();
        RolloutPlan {
            max_unavailable: r.max_unavailable,
            drain_seconds: r.drain_secs,
            min_ready_seconds: r.min_ready_secs,
        }
    }
}

/// Address of the membership resource of Router `router`.
pub fn membership_address(router: &str) -> String {
    format!("members.{router}")
}

/// A node of the deployment.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct NodeSlot {
    /// Index.
    pub index: usize,
    /// Symbolic name (`node0`).
    pub name: String,
    /// IP placeholder.
    pub ip: String,
    /// GPUs on the node.
    pub gpus: u32,
}

/// What a process is: an engine's worker, or a component a frontend brings (its
/// Router, nginx, a discovery service). Open: a frontend names its components, and
/// core code asks a component what it needs instead of comparing names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ProcessKind {
    /// An engine worker.
    Worker,
    /// A frontend-owned component.
    Component(&'static Component),
}

impl ProcessKind {
    /// Short name used as the resource kind.
    pub fn name(self) -> &'static str {
        match self {
            ProcessKind::Worker => "worker",
            ProcessKind::Component(c) => c.name,
        }
    }
}

impl Serialize for ProcessKind {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

/// A kind of process a frontend runs besides the workers, and what the rest of srt
/// must know about it. Declared once, as a `static`, by the frontend that owns it;
/// two components are the same when their names are.
#[derive(Debug)]
pub struct Component {
    /// Resource kind name (`router`, `nginx`, `etcd`): one meaning among all frontends'.
    pub name: &'static str,
    /// How to get its program when it is not on this machine's `PATH` (`None`: the
    /// frontend's own program, whose hint the frontend gives).
    pub install_hint: Option<&'static str>,
    /// A change to its generated files alone is applied by reloading it in place
    /// (SIGHUP) instead of restarting it.
    pub reloads_files: bool,
    /// Directories it needs under the run directory before it starts.
    pub scratch_dirs: &'static [&'static str],
}

impl PartialEq for Component {
    fn eq(&self, other: &Component) -> bool {
        self.name == other.name
    }
}

impl Eq for Component {}

// What engines and frontends tell each other about a role's workers goes through these
// two types, owned here so that neither imports the other.

/// A role's KV connector as the rest of srt sees it: a name, and whether its workers
/// register themselves with the frontend (discovery) instead of being listed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ConnectorChoice {
    /// The role.
    pub role: RoleKind,
    /// Connector name (`nixl`, `moriio`, `none`).
    pub name: &'static str,
    /// Workers register with the frontend over its discovery listener.
    pub discovery: bool,
    /// How a prefill/decode pair of these workers hands a request over, as the frontend
    /// in front of them must drive it: the engine's answer, which the frontend checks.
    pub protocol: PdProtocol,
    /// Where it was chosen (the role's override or `engine.connector`).
    pub span: SourceSpan,
}

/// How a prefill worker hands a request's KV cache to a decode worker, as the frontend
/// in front of them drives it (`Engine::connector` answers, `Frontend::pd_protocols`
/// lists what a frontend drives).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PdProtocol {
    /// No hand-off: the decode computes the prompt again.
    Recompute,
    /// vLLM's: the prefill leg carries `kv_transfer_params` (`do_remote_decode`), and
    /// the decode leg what the prefill answered (where to pull the cache from).
    KvTransferParams,
    /// SGLang's bootstrap rendezvous: the same request goes to both with
    /// `bootstrap_host`/`bootstrap_port`/`bootstrap_room`, and the decode pulls the
    /// cache through the prefill's bootstrap server.
    Bootstrap,
    /// TensorRT-LLM's: the prefill leg answers with `disaggregated_params` (its
    /// context's handle), which the decode leg carries to pull the cache.
    DisaggregatedParams,
}

impl PdProtocol {
    /// What the protocol is, in a message.
    pub fn describe(self) -> &'static str {
        match self {
            PdProtocol::Recompute => "no KV hand-off (the decode computes the prompt again)",
            PdProtocol::KvTransferParams => "vLLM's `kv_transfer_params` hand-off",
            PdProtocol::Bootstrap => "SGLang's bootstrap rendezvous",
            PdProtocol::DisaggregatedParams => "TensorRT-LLM's `disaggregated_params` hand-off",
        }
    }
}

/// Something a frontend needs every worker of a role to serve besides completions (see
/// `Frontend::worker_features`); the engine turns it into its own
/// flags (`Engine::feature_flags`), so a frontend never writes an engine flag.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum WorkerFeature {
    /// Render a request's prompt without running it (`POST /v1/completions/render`,
    /// `/v1/chat/completions/render`): the token ids a Router routes on.
    PromptRender,
    /// Report the worker's load where the frontend polls it (`GET /get_load`).
    LoadReport,
    /// Describe the worker's KV cache (`GET /get_server_info`: block size and cache
    /// identity) for a frontend that indexes the workers' KV-cache events.
    KvCacheInfo,
}

/// Worker-specific facts.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct WorkerInfo {
    /// Role.
    pub role: RoleKind,
    /// Endpoint index within the role.
    pub endpoint: u32,
    /// Rank of this process's node within the endpoint.
    pub node_rank: u32,
    /// Base URL advertised to the frontend, if this process serves HTTP and is routable.
    pub advertised_url: Option<String>,
    /// DP ranks served behind this process's API (1 without DP).
    pub local_dp: u32,
    /// Port advertised after a prefill URL (the NIXL side channel of its first rank).
    pub bootstrap_port: Option<u16>,
    /// The KV connector it transfers the cache with, as the engine names it
    /// (`NixlConnector`); `None` without one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kv_connector: Option<&'static str>,
    /// It runs engine ranks for its endpoint's leader and serves nothing itself (a
    /// follower node of a replica spanning nodes): under a runtime it does not register.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub headless: bool,
    /// How srt checks this worker serves, when that is not `GET /health` on
    /// `advertised_url` (a worker that registers with its frontend: the frontend lists
    /// it). Apart from where a frontend routes to it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub health: Option<Probe>,
    /// What `--simulate` runs in its place when that is not the engine's simulator
    /// taking the same arguments (a runtime's own simulated engine), program first.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub simulated: Option<Argv>,
}

impl WorkerInfo {
    /// The probe that shows this worker serves: its own, or `GET /health` on the URL
    /// it advertises; `None` for a process that serves nothing itself (a headless rank).
    pub fn health_probe(&self) -> Option<Probe> {
        self.health.clone().or_else(|| {
            self.advertised_url.as_ref().map(|url| Probe::Http {
                urls: vec![url.clone()],
                path: "/health".into(),
            })
        })
    }
}

impl Serialize for RoleKind {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

/// One process.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LaunchProcess {
    /// Stable address, e.g. `worker.prefill[0].node[0]`.
    pub address: String,
    /// Kind.
    pub kind: ProcessKind,
    /// Node index.
    pub node: usize,
    /// GPU indices on the node.
    pub devices: Vec<u32>,
    /// Ports by kind.
    pub ports: BTreeMap<String, PortBlock>,
    /// Environment set for the process (sorted).
    pub env: BTreeMap<String, String>,
    /// Variables removed from the inherited environment.
    pub env_unset: Vec<String>,
    /// argv, program first.
    pub argv: Argv,
    /// Generated files the process reads (path -> content).
    pub files: BTreeMap<String, String>,
    /// Processes that must run before this one (their replacement replaces this one).
    pub depends_on: Vec<String>,
    /// Processes this one watches without waiting for them: their replacement replaces
    /// this one (its hash covers theirs), but it starts alongside them because it waits
    /// for them itself (a Router polls the workers it lists; nginx proxies to Routers).
    /// Shared: every Router of a deployment watches the same workers.
    pub watches: std::sync::Arc<[String]>,
    /// Worker facts, for workers.
    pub worker: Option<WorkerInfo>,
    /// Container image, when the executor runs containers.
    pub container_image: Option<String>,
    /// What runs around its program (setup scripts, a profiler, its container's
    /// mounts): the recipe's runtime keys. Absent from the JSON when empty.
    #[serde(skip_serializing_if = "wrap::Wrap::is_empty")]
    pub wrap: wrap::Wrap,
    /// The ranks of an MPI job this process is (a TensorRT-LLM endpoint): absent for
    /// a process of one task.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ranks: Option<Ranks>,
}

/// A process that is one MPI job of several ranks, placed over its endpoint's nodes:
/// on SLURM one step of `tasks` tasks launched through `mpi` (`srun --mpi=pmix`), one
/// unit for leases, drift and replacement; on one machine a single process whose
/// program starts its ranks itself. Its `node` is the first of `nodes`, where rank 0
/// (the one that serves) runs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Ranks {
    /// How many ranks (tasks).
    pub tasks: u32,
    /// The nodes they run on, in rank order (rank 0's first).
    pub nodes: Vec<usize>,
    /// The MPI plugin their launcher wires them with (`srun --mpi`).
    pub mpi: &'static str,
    /// What each rank runs the process's argv under (`trtllm-llmapi-launch`: rank 0
    /// runs the program, the others become its MPI workers), program first.
    pub launcher: Vec<String>,
}

impl LaunchProcess {
    /// The command each of its tasks runs: its argv, under its ranks' launcher.
    pub fn command(&self) -> impl Iterator<Item = &str> {
        let launcher = self.ranks.iter().flat_map(|r| r.launcher.iter());
        launcher.map(String::as_str).chain(self.argv.iter())
    }
}

/// Port kinds a process that serves HTTP itself answers `GET /health` on, in the order
/// looked for: a worker's API, a frontend's public port, a Router's behind nginx.
pub const HEALTH_PORTS: [&str; 3] = ["http", crate::ports::PUBLIC, "frontend_internal"];

impl LaunchProcess {
    /// The probe that shows this process serves, as apply checked it and as `srt
    /// status` and refresh probe it again from its record: a worker's own
    /// ([`WorkerInfo::health_probe`]); for another process, `GET /health` on the first
    /// of its [`HEALTH_PORTS`]. `None` for a process that serves neither (a headless
    /// rank, etcd).
    pub fn health_probe(&self) -> Option<Probe> {
        if let Some(worker) = &self.worker {
            return worker.health_probe();
        }
        let port = HEALTH_PORTS.iter().find_map(|k| self.ports.get(*k))?;
        Some(Probe::Http {
            urls: vec![format!("http://{}:{}", node_ip(self.node), port.base)],
            path: "/health".into(),
        })
    }

    /// Release the spare capacity its lists were built with (an argv grows by doubling):
    /// a launch plan lives through the whole plan, and at cluster scale the slack was a
    /// tenth of it.
    pub fn compact(&mut self) {
        self.devices.shrink_to_fit();
        self.env_unset.shrink_to_fit();
        self.argv.shrink_to_fit();
        self.depends_on.shrink_to_fit();
    }
}

impl LaunchProcess {
    /// A process of `kind` running `argv` on node 0, with nothing else: callers set
    /// what they need on top.
    pub(crate) fn bare(address: &str, kind: ProcessKind, argv: Argv) -> LaunchProcess {
        LaunchProcess {
            address: address.to_string(),
            kind,
            node: 0,
            devices: Vec::new(),
            ports: BTreeMap::new(),
            env: BTreeMap::new(),
            env_unset: Vec::new(),
            argv,
            files: BTreeMap::new(),
            depends_on: Vec::new(),
            watches: Default::default(),
            worker: None,
            container_image: None,
            wrap: Default::default(),
            ranks: None,
        }
    }
}

/// A readiness probe, in terms any frontend can state: the frontend that builds a gate
/// chooses the request and what its answer must show; apply runs it without knowing
/// which program answers.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Probe {
    /// `GET <url><path>` must answer 2xx, for every URL.
    Http {
        /// Base URLs.
        urls: Vec<String>,
        /// Path, e.g. `/health` or `/readiness`.
        path: String,
    },
    /// `GET <url><path>` must answer JSON whose counts reach their minimums, for every URL.
    JsonCounts {
        /// Base URLs.
        urls: Vec<String>,
        /// Path, e.g. `/workers`.
        path: String,
        /// The counts to reach.
        counts: Vec<Count>,
    },
    /// `GET <url><path>` must answer JSON listing items that match, for every URL.
    JsonItems {
        /// Base URLs.
        urls: Vec<String>,
        /// Path, e.g. `/health`.
        path: String,
        /// The lists to reach.
        lists: Vec<Listed>,
    },
    /// First read what a process says about itself (an identity it chose, such as the
    /// instance it registered as), then `then` must pass with [`LEARNED`] in its
    /// fields' values replaced by it.
    Learned {
        /// Base URL of the process.
        url: String,
        /// Path of the text that holds the value (`/metrics`).
        path: String,
        /// The value follows the first occurrence of this text and ends before the next
        /// `"` (`worker_id="`).
        after: String,
        /// What must pass once the value is known.
        then: Box<Probe>,
    },
    /// A one-token completion through the public URL must succeed.
    Completion {
        /// Public base URL.
        url: String,
        /// Model name to request.
        model: String,
    },
    /// The serving benchmark (run once per apply, not polled): see [`crate::bench`].
    Benchmark(crate::bench::Spec),
    /// A command run to completion on a node (a `custom` benchmark, run once per
    /// apply): it passes when it exits 0.
    Command(CommandRun),
}

/// A command the executor runs to completion on a node, as a process of its own (found
/// and stopped through its lease like any other): what it exits with is written to
/// `status`, which apply reads once the process is gone.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CommandRun {
    /// The node it runs on.
    pub node: usize,
    /// Its program and arguments (placeholders kept).
    pub argv: Vec<String>,
    /// Its environment (placeholders kept).
    pub env: BTreeMap<String, String>,
    /// The image it runs in, where the executor runs containers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    /// The file its exit status is written to (placeholders kept).
    pub status: String,
}

/// The line a [`CommandRun`]'s output starts with: its log (which keeps earlier runs')
/// is read from the last one.
pub const COMMAND_STARTS: &str = "srt: the benchmark command starts";

/// What runs a [`CommandRun`]: a process of its own, not a resource of the graph.
static COMMAND: Component = Component {
    name: "benchmark",
    install_hint: None,
    reloads_files: false,
    scratch_dirs: &[],
};

impl CommandRun {
    /// The process that runs it, at `address` (its lease's name: an address no
    /// resource has, so that one left by an apply that died is an orphan apply and
    /// destroy stop).
    pub fn process(&self, address: &str) -> LaunchProcess {
        let mut p = LaunchProcess::bare(
            address,
            ProcessKind::Component(&COMMAND),
            Argv::from_iter(self.argv.iter().map(String::as_str)),
        );
        p.node = self.node;
        p.env = self.env.clone();
        p.container_image = self.image.clone();
        p
    }
}

/// The placeholder of a value a [`Probe::Learned`] reads first.
pub const LEARNED: &str = "{learned}";

impl Probe {
    /// The value a [`Probe::Learned`] looks for in `text`, if it is there.
    pub fn learned_from<'t>(text: &'t str, after: &str) -> Option<&'t str> {
        let start = text.find(after)? + after.len();
        let rest = &text[start..];
        let value = &rest[..rest.find('"')?];
        (!value.is_empty()).then_some(value)
    }

    /// This probe with [`LEARNED`] in its fields' values replaced by `value`.
    pub fn with_learned(&self, value: &str) -> Probe {
        let mut out = self.clone();
        if let Probe::JsonItems { lists, .. } = &mut out {
            for field in lists.iter_mut().flat_map(|l| l.fields.iter_mut()) {
                field.value = field.value.replace(LEARNED, value);
            }
        }
        out
    }
}

/// One count a [`Probe::JsonCounts`] answer must reach: the sum of the integers at
/// some JSON pointers (a missing one counts 0).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Count {
    /// What is counted, for messages (`prefill workers`).
    pub name: String,
    /// JSON pointers (RFC 6901) whose integers are summed: `/stats/decode_count`.
    pub pointers: Vec<String>,
    /// The minimum.
    pub at_least: u32,
}

/// Items a [`Probe::JsonItems`] answer must list: in the array at `array`, at least
/// `at_least` items whose every field matches.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Listed {
    /// What is counted, for messages (`decode workers`).
    pub name: String,
    /// JSON pointer of the array (`/instances`).
    pub array: String,
    /// What an item must hold.
    pub fields: Vec<Field>,
    /// The minimum.
    pub at_least: u32,
}

/// One field of a [`Listed`] item: the string at `pointer` is `value`, or starts with
/// it when `prefix`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Field {
    /// JSON pointer within the item (`/transport/tcp`).
    pub pointer: String,
    /// The value (placeholders resolved before comparing).
    pub value: String,
    /// Compare as a prefix.
    pub prefix: bool,
}

impl Listed {
    /// The items of `body` that match, with placeholders of the fields resolved by
    /// `resolve`.
    pub fn count(&self, body: &serde_json::Value, resolve: &dyn Fn(&str) -> String) -> u32 {
        let fields: Vec<(&str, String, bool)> = self
            .fields
            .iter()
            .map(|f| (f.pointer.as_str(), resolve(&f.value), f.prefix))
            .collect();
        let items = body.pointer(&self.array).and_then(|a| a.as_array());
        let matches = |item: &serde_json::Value| {
            fields.iter().all(|(pointer, value, prefix)| {
                let have = item.pointer(pointer).and_then(|v| v.as_str());
                match (have, prefix) {
                    (Some(h), true) => h.starts_with(value.as_str()),
                    (Some(h), false) => h == value,
                    (None, _) => false,
                }
            })
        };
        items.map_or(0, |a| a.iter().filter(|i| matches(i)).count() as u32)
    }

    /// `name: pointer == value and ...` in one line.
    pub fn describe(&self) -> String {
        let fields: Vec<String> = self
            .fields
            .iter()
            .map(|f| {
                let op = if f.prefix { "^=" } else { "==" };
                format!("{}{} {op} {}", self.array, f.pointer, f.value)
            })
            .collect();
        format!("{} >= {} ({})", self.name, self.at_least, fields.join(", "))
    }
}

/// A gate: a check re-run on every apply.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Gate {
    /// Address, e.g. `gate.router`.
    pub address: String,
    /// What it proves.
    pub description: String,
    /// The probe.
    pub probe: Probe,
    /// Resources it probes (processes or earlier gates).
    pub depends_on: Vec<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The former implementation: every bound placeholder replaced in turn.
    fn resolve_each(b: &Bindings, text: &str) -> String {
        let mut out = text.replace(RUN_DIR, &b.run_dir);
        for (i, ip) in b.node_ips.iter().enumerate().rev() {
            out = out.replace(&node_ip(i), ip);
        }
        out
    }

    /// A process that serves HTTP itself is probed on its own port, first of
    /// [`HEALTH_PORTS`]; a worker by its own probe when it has one.
    #[test]
    fn a_process_is_probed_on_its_first_http_port_or_by_its_own_probe() {
        static ROUTER: Component = Component {
            name: "router",
            install_hint: None,
            reloads_files: false,
            scratch_dirs: &[],
        };
        let block = |base| PortBlock { base, count: 1 };
        let mut router = LaunchProcess::bare(
            "router[0]",
            ProcessKind::Component(&ROUTER),
            Argv::from(["r"]),
        );
        router.node = 2;
        router.ports = BTreeMap::from([
            ("frontend_internal".to_string(), block(8180)),
            ("router_metrics".to_string(), block(29000)),
        ]);
        let get = |url: &str| Probe::Http {
            urls: vec![url.to_string()],
            path: "/health".into(),
        };
        assert_eq!(router.health_probe(), Some(get("http://<node2-ip>:8180")));
        router
            .ports
            .insert(crate::ports::PUBLIC.to_string(), block(8000));
        assert_eq!(router.health_probe(), Some(get("http://<node2-ip>:8000")));
        router.ports.clear();
        assert_eq!(router.health_probe(), None);
        let mut worker = LaunchProcess::bare("w", ProcessKind::Worker, Argv::from(["vllm"]));
        let mut info = WorkerInfo {
            role: RoleKind::Agg,
            endpoint: 0,
            node_rank: 0,
            advertised_url: Some("http://<node0-ip>:6100".into()),
            local_dp: 1,
            bootstrap_port: None,
            kv_connector: None,
            health: None,
            simulated: None,
            headless: false,
        };
        worker.worker = Some(info.clone());
        assert_eq!(worker.health_probe(), Some(get("http://<node0-ip>:6100")));
        info.health = Some(Probe::JsonItems {
            urls: vec!["http://<node0-ip>:8000".into()],
            path: "/health".into(),
            lists: Vec::new(),
        });
        worker.worker = Some(info.clone());
        assert_eq!(worker.health_probe(), info.health);
    }

    #[test]
    fn resolve_replaces_bound_placeholders_only() {
        let b = Bindings {
            node_ips: (0..12).map(|i| format!("10.0.0.{i}")).collect(),
            run_dir: "/run/x".into(),
            node_hosts: Vec::new(),
        };
        for text in [
            "",
            "plain",
            "http://<node0-ip>:6100",
            "<node11-ip>,<node1-ip>,<node10-ip>",
            "<run-dir>/nginx.conf with <node3-ip>",
            "<node12-ip> is not bound, <node-ip> <node01-ip> <node1-ip",
            "<node<node2-ip>-ip> <<node5-ip>> <node99999999999999999999999-ip>",
            "<nod <node7-ip><node7-ip>",
        ] {
            assert_eq!(b.resolve(text), resolve_each(&b, text), "{text}");
        }
        assert_eq!(
            b.resolve("--prefill http://<node11-ip>:6100 5400"),
            "--prefill http://10.0.0.11:6100 5400"
        );
        let hosts = Bindings {
            node_hosts: vec!["n1".into(), "n2".into()],
            ..b
        };
        assert_eq!(
            hosts.resolve("<node1-host>/<node0-ip>/<node2-host>/<node1-hos"),
            "n2/10.0.0.0/<node2-host>/<node1-hos"
        );
    }

    #[test]
    fn a_learned_value_is_what_follows_its_marker_up_to_a_quote() {
        let metrics = "m{ns=\"x\",worker_id=\"390da2\"} 0\nm{worker_id=\"ffff\"} 1\n";
        assert_eq!(Probe::learned_from(metrics, "worker_id=\""), Some("390da2"));
        assert_eq!(Probe::learned_from("up 1\n", "worker_id=\""), None);
        assert_eq!(Probe::learned_from("worker_id=\"\"", "worker_id=\""), None);
        assert_eq!(Probe::learned_from("worker_id=\"39", "worker_id=\""), None);
    }

    #[test]
    fn a_learned_value_fills_the_fields_of_the_probe_it_leads_to() {
        let probe = Probe::JsonItems {
            urls: vec!["http://f".into()],
            path: "/health".into(),
            lists: vec![Listed {
                name: "me".into(),
                array: "/instances".into(),
                fields: vec![Field {
                    pointer: "/transport/nats_tcp".into(),
                    value: format!("ns_backend.generate-{LEARNED}"),
                    prefix: false,
                }],
                at_least: 1,
            }],
        };
        let Probe::JsonItems { lists, .. } = probe.with_learned("abc") else {
            unreachable!()
        };
        assert_eq!(lists[0].fields[0].value, "ns_backend.generate-abc");
        let body = serde_json::json!({"instances": [{"transport": {"nats_tcp": "ns_backend.generate-abc"}}]});
        assert_eq!(lists[0].count(&body, &|s| s.to_string()), 1);
    }
}
