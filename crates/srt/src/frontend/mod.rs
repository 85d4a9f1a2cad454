//! Frontends: what sits on the public port in front of the workers.
//!
//! [`Frontend`] is the seam; each frontend type is one implementation registered in
//! [`FRONTENDS`], in its own folder (its code, its flag catalog). Frontends own their
//! command lines, their recipe rules, their layout and their readiness probes; core
//! code never compares a frontend name. A frontend sees the assembly only through
//! [`BuildContext`], and the workers through the [`crate::launch::WorkerInfo`] the
//! engine put on them.

mod dynamo;
mod gateway;
pub(crate) mod nginx;
mod sglang_router;
mod smg;
mod vllm_router;

use crate::catalog::Catalog;
use crate::launch::{BuildContext, Component, Gate, LaunchProcess, Membership, Registration};
use crate::launch::{ConnectorChoice, PdProtocol, WorkerFeature};
use crate::launch::{Services, WorkerRuntime};
use crate::ports::{PortBlock, FRONTEND_INTERNAL, PUBLIC, ROUTER_METRICS};
use crate::recipe::diag::Problem;
use crate::recipe::{Placement, Recipe, RoleKind};
use crate::topology::Topology;
use futures::future::BoxFuture;
use miette::SourceSpan;
use std::collections::BTreeMap;

/// Where frontend processes run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layout {
    /// nginx on this node, in front of every Router.
    pub nginx_node: Option<usize>,
    /// The Router processes.
    pub routers: Vec<RouterSlot>,
    /// The node of the frontend's services (etcd, NATS) when they have one of their
    /// own ([`Topology::services_node`]); else they run on the public node.
    pub services_node: Option<usize>,
}

/// One Router process's place.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RouterSlot {
    /// Node index.
    pub node: usize,
    /// True when it listens on an internal port behind nginx.
    pub behind_nginx: bool,
}

impl Layout {
    /// The node whose public port clients use.
    pub fn public_node(&self) -> usize {
        self.nginx_node.unwrap_or(self.routers[0].node)
    }

    /// The node the frontend's services run on.
    pub fn services_node(&self) -> usize {
        self.services_node.unwrap_or_else(|| self.public_node())
    }
}

/// What a frontend adds to the launch plan.
#[derive(Clone, Debug, PartialEq)]
pub struct FrontendParts {
    /// Router / nginx processes.
    pub processes: Vec<LaunchProcess>,
    /// Readiness gates, in order.
    pub gates: Vec<Gate>,
    /// The workers each Router routes to (none in discovery mode).
    pub memberships: Vec<Membership>,
    /// The URL clients use.
    pub public_url: String,
    /// What the frontend decided that the recipe did not say, as located warnings
    /// (e.g. a flag it left out, and why).
    pub warnings: Vec<Problem>,
}

/// What a frontend runs before the workers, for them: the first phase of its build.
#[derive(Debug, Default)]
pub struct Infrastructure {
    /// Its processes (a discovery store, a message bus), started before everything
    /// that uses them.
    pub processes: Vec<LaunchProcess>,
    /// Their readiness gates.
    pub gates: Vec<Gate>,
    /// What they offer: the workers and the entry processes are built against it.
    pub services: Services,
    /// The runtime the workers run under and register with, if any.
    pub runtime: Option<Box<dyn WorkerRuntime>>,
}

/// A feature the frontend needs the workers of one role to serve, and why.
#[derive(Clone, Debug, PartialEq)]
pub struct FeatureNeed {
    /// The role whose workers must serve it.
    pub role: RoleKind,
    /// The feature.
    pub feature: WorkerFeature,
    /// What asks for it (the policy value, or the frontend key when defaulted).
    pub span: SourceSpan,
    /// The label under `span`.
    pub label: String,
    /// Who needs it: "the Router's `policy: cache_aware`".
    pub who: String,
    /// What it asks the workers, and what for: "POST /v1/completions/render for every
    /// request (the prompt's tokens, to route on)".
    pub what: String,
    /// What the recipe can do instead, when the engine cannot serve it.
    pub alternative: String,
    /// Whether the frontend cannot do its job without it (the recipe is refused when
    /// the engine cannot serve it); otherwise it works less well (a warning).
    pub required: bool,
}

/// The flags a runtime's wrapper program reads itself.
#[derive(Clone, Copy)]
pub struct WrapperFlags {
    /// Its catalog, dumped from its own parser.
    pub catalog: &'static Catalog,
    /// Who sets a flag srt manages, or `None` when a recipe may set it.
    pub managed_by: fn(&str) -> Option<&'static str>,
}

/// A top-level recipe section a frontend owns: its name and keys (what the schema and
/// the key check are made of).
#[derive(Debug)]
pub struct OwnedSection {
    /// The top-level key (`dynamo`).
    pub name: &'static str,
    /// Its keys.
    pub keys: &'static [crate::recipe::keys::Key],
}

/// A frontend type.
pub trait Frontend: Sync {
    /// `frontend.type` value.
    fn name(&self) -> &'static str;
    /// Program run when `frontend.binary` is not set.
    fn default_binary(&self) -> &'static str;
    /// How to get [`Frontend::default_binary`] when it is not on this machine's `PATH`:
    /// named when a plan would start it and cannot find it.
    fn install_hint(&self) -> &'static str;
    /// The component of its entry processes (`router[0]`, ...): what holds the public
    /// port when no nginx does.
    fn entry(&self) -> &'static Component {
        &ROUTER
    }
    /// The kinds of process it runs besides the workers (nginx, which any frontend may
    /// put in front of several of its entry processes, is not one of them).
    fn components(&self) -> &'static [&'static Component];
    /// The flag catalog of the program it runs, which `frontend.args` are checked
    /// against.
    fn catalog(&self) -> &'static Catalog;
    /// The catalog `recipe`'s `frontend.args` are checked against and rendered with:
    /// that of the release the recipe runs, where the frontend has catalogs of several
    /// (default: [`catalog`](Self::catalog)).
    fn args_catalog(&self, recipe: &Recipe) -> &'static Catalog {
        let _ = recipe;
        self.catalog()
    }
    /// The flag catalogs of every program it renders a command for (its own, its
    /// infrastructure's, the runtime wrappers' of its workers), each dumped from the
    /// program's parser: what golden commands are read back with.
    fn program_catalogs(&self) -> Vec<&'static Catalog> {
        vec![self.catalog()]
    }
    /// Who sets a flag the frontend derives, or `None` when a recipe may set it.
    fn managed_by(&self, flag: &str) -> Option<&'static str>;
    /// The top-level recipe section it owns (srtctl's `dynamo:`), if any: one of
    /// [`crate::recipe::keys::OWNED_SECTIONS`]. A recipe with another frontend may not
    /// write it; its keys are checked before [`Frontend::validate`].
    fn section(&self) -> Option<&'static OwnedSection> {
        None
    }
    /// The prefill/decode hand-offs it drives between a prefill and a decode worker
    /// (empty: it routes aggregated workers only). A prefill/decode role whose
    /// connector's protocol (the engine's answer) is not one of them is refused.
    fn pd_protocols(&self) -> &'static [PdProtocol];
    /// Whether it can discover workers that register themselves (discovery connectors).
    fn supports_discovery(&self) -> bool {
        false
    }
    /// Where it listens for worker registrations in `layout`: (node, port).
    fn discovery_listener(&self, layout: &Layout) -> Option<(usize, u16)> {
        let _ = layout;
        None
    }
    /// What the frontend needs each role's workers to serve besides completions; the
    /// engine renders the flags for it or refuses the combination.
    fn worker_features(&self, recipe: &Recipe) -> Vec<FeatureNeed> {
        let _ = recipe;
        Vec::new()
    }
    /// Frontend rules on the recipe.
    fn validate(
        &self,
        recipe: &Recipe,
        connectors: &[ConnectorChoice],
        problems: &mut Vec<Problem>,
    );
    /// Where its processes run.
    fn layout(&self, recipe: &Recipe, topology: &Topology) -> Layout {
        default_layout(recipe, topology)
    }
    /// Its admin API, when srt can change a running Router's workers through it.
    fn admin(&self) -> Option<&'static dyn Admin> {
        None
    }
    /// The name of the runtime its workers run under and register with, if any (its
    /// [`Infrastructure::runtime`]): the engine must have a wrapper for it.
    fn worker_runtime(&self) -> Option<&'static str> {
        None
    }
    /// The flags the runtime's wrapper `program` (an engine's, e.g.
    /// `python3 -m dynamo.vllm`) reads itself before its engine's parser gets the rest:
    /// a role's args it knows exactly are its, checked against its catalog.
    fn wrapper_flags(&self, program: &[&str]) -> Option<WrapperFlags> {
        let _ = program;
        None
    }
    /// Whether it runs services (its infrastructure: Dynamo's etcd and NATS) that
    /// `infra.etcd_nats_dedicated_node` may give a node of their own.
    fn runs_services(&self) -> bool {
        false
    }
    /// Its infrastructure: what it runs before the workers and offers them (the first
    /// phase of its build; nothing for a frontend that lists its workers itself).
    fn infrastructure(
        &self,
        ctx: &mut BuildContext<'_>,
        recipe: &Recipe,
        layout: &Layout,
    ) -> Result<Infrastructure, Problem> {
        let _ = (ctx, recipe, layout);
        Ok(Infrastructure::default())
    }
    /// Its entry processes and readiness gates, given the workers (the second phase;
    /// what its infrastructure offers is in `ctx.services()`).
    fn build(
        &self,
        ctx: &mut BuildContext<'_>,
        recipe: &Recipe,
        layout: &Layout,
        workers: &[LaunchProcess],
        connectors: &[ConnectorChoice],
    ) -> Result<FrontendParts, Problem>;
}

/// Why a call to a Router's admin API failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AdminError {
    /// The request got no answer: the Router did not accept the connection, or accepted
    /// it and did not answer in time (a stopped or overloaded process).
    #[error("{}", transport_message(.operation, .router, .timed_out, .detail))]
    Transport {
        /// `POST /add_worker`, `GET /workers`, ...
        operation: String,
        /// The Router's base URL.
        router: String,
        /// It accepted the request and did not answer in time.
        timed_out: bool,
        /// The transport's own words.
        detail: String,
    },
    /// The Router answered, with a refusal or an answer srt cannot read.
    #[error("{0}")]
    Answer(String),
}

fn transport_message(operation: &str, router: &str, timed_out: &bool, detail: &str) -> String {
    if *timed_out {
        format!("the Router at {router} did not answer `{operation}` in time (timed out)")
    } else {
        format!("cannot reach the Router at {router} for `{operation}`: {detail}")
    }
}

impl AdminError {
    /// A request to `router` for `operation` that got no answer.
    pub fn transport(operation: &str, router: &str, e: &reqwest::Error) -> AdminError {
        AdminError::Transport {
            operation: operation.to_string(),
            router: router.to_string(),
            timed_out: e.is_timeout(),
            detail: innermost(e),
        }
    }
}

/// The innermost cause of a transport error (reqwest's own words name only the URL).
fn innermost(e: &reqwest::Error) -> String {
    let mut s = e.to_string();
    let mut src = std::error::Error::source(e);
    while let Some(inner) = src {
        s = inner.to_string();
        src = inner.source();
    }
    s
}

/// `GET <router>/workers` as JSON, the listing call the SGLang-lineage gateways share:
/// no answer is a transport error, an error status or a body that is not JSON an answer
/// srt cannot use.
async fn workers_json(
    http: &reqwest::Client,
    router: &str,
) -> Result<serde_json::Value, AdminError> {
    let r = http
        .get(format!("{router}/workers"))
        .send()
        .await
        .map_err(|e| AdminError::transport("GET /workers", router, &e))?;
    let status = r.status();
    let body = r
        .text()
        .await
        .map_err(|e| AdminError::transport("GET /workers", router, &e))?;
    if !status.is_success() {
        return Err(format!("GET {router}/workers: {status} {}", body.trim()).into());
    }
    Ok(serde_json::from_str(&body)
        .map_err(|e| format!("GET {router}/workers: {e}: {}", body.trim()))?)
}

/// How long a gateway may take to settle an entry of its worker list.
pub(super) const ENTRY_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(60);

/// Poll `GET <router>/workers/<id>` every `poll` until `settled` says the answer
/// (status, JSON) settles it, for at most [`ENTRY_TIMEOUT`]: the wait both
/// SGLang-lineage gateways' admin APIs need, since they add and remove in the
/// background. `what` names the operation in the timeout's message.
async fn wait_for_entry<T>(
    (http, router, id): (&reqwest::Client, &str, &str),
    what: &str,
    poll: std::time::Duration,
    settled: impl Fn(u16, &serde_json::Value) -> Option<Result<T, String>>,
) -> Result<T, AdminError> {
    let start = std::time::Instant::now();
    loop {
        let r = http
            .get(format!("{router}/workers/{id}"))
            .send()
            .await
            .map_err(|e| AdminError::transport("GET /workers/<id>", router, &e))?;
        let status = r.status().as_u16();
        let v: serde_json::Value = r.json().await.unwrap_or_default();
        if let Some(result) = settled(status, &v) {
            return result.map_err(AdminError::Answer);
        }
        if start.elapsed() > ENTRY_TIMEOUT {
            return Err(format!(
                "{router} did not finish {what} within {}s: {v}",
                ENTRY_TIMEOUT.as_secs()
            )
            .into());
        }
        tokio::time::sleep(poll).await;
    }
}

impl From<String> for AdminError {
    fn from(message: String) -> AdminError {
        AdminError::Answer(message)
    }
}

/// A running Router's worker list, through its admin API: what apply uses to add a
/// worker once it is healthy and to take one out before it stops, and refresh to see
/// what a Router routes to. URLs are the base URLs srt gives (a Router that expands
/// data-parallel ranks into `URL@rank` entries lists them folded back).
pub trait Admin: Sync {
    /// The worker URLs the Router at `router` routes to now, sorted.
    fn list<'a>(
        &'a self,
        http: &'a reqwest::Client,
        router: &'a str,
    ) -> BoxFuture<'a, Result<Vec<String>, AdminError>>;
    /// Add `worker` (already healthy) in its role; adding a present worker succeeds.
    fn add<'a>(
        &'a self,
        http: &'a reqwest::Client,
        router: &'a str,
        worker: Registration<'a>,
    ) -> BoxFuture<'a, Result<(), AdminError>>;
    /// Take `worker` out: no new request goes to it, requests in flight finish. Removing
    /// an absent worker succeeds.
    fn remove<'a>(
        &'a self,
        http: &'a reqwest::Client,
        router: &'a str,
        worker: &'a str,
    ) -> BoxFuture<'a, Result<(), AdminError>>;
    /// Whether the Router answers at all (it has bound its port).
    fn live<'a>(&'a self, http: &'a reqwest::Client, router: &'a str) -> BoxFuture<'a, bool>;
}

/// A Router with an admin API: the program of the frontends that are one.
pub static ROUTER: Component = Component {
    name: "router",
    install_hint: None,
    reloads_files: false,
    scratch_dirs: &[],
};

/// The components of a frontend that runs only Routers.
static ROUTER_ONLY: &[&Component] = &[&ROUTER];

/// Every frontend srt knows.
pub const FRONTENDS: &[&dyn Frontend] = &[
    &vllm_router::VllmRouter,
    &sglang_router::SglangRouter,
    &smg::Smg,
    &dynamo::Dynamo,
];

/// Every component a frontend may run, whatever the frontend: what a recorded
/// resource kind is read back as.
pub fn components() -> impl Iterator<Item = &'static Component> {
    FRONTENDS
        .iter()
        .flat_map(|f| f.components().iter().copied())
        .chain([&nginx::NGINX])
}

/// The component named `name`, of any frontend.
pub fn component(name: &str) -> Option<&'static Component> {
    components().find(|c| c.name == name)
}

/// Look a frontend up by `frontend.type`.
pub fn lookup(name: &str) -> Option<&'static dyn Frontend> {
    FRONTENDS.iter().copied().find(|f| f.name() == name)
}

/// The ports of a Router in `slot`, leased to `address`: the public port, or an
/// internal one behind nginx, and its own metrics port (every Router on a host needs its
/// own: a taken one makes it exit). Returns them with the port it listens on and the
/// metrics port.
pub fn router_ports(
    ctx: &mut BuildContext<'_>,
    fe: &crate::recipe::Frontend,
    slot: RouterSlot,
    address: &str,
) -> Result<(BTreeMap<String, PortBlock>, u16, u16), Problem> {
    let port_problem = |e: crate::ports::PortError| {
        Problem::new("srt::recipe::ports", fe.span, e.to_string())
            .label("while allocating frontend ports")
    };
    let mut ports = BTreeMap::new();
    let port = if slot.behind_nginx {
        let b = ctx
            .allocate(&FRONTEND_INTERNAL, slot.node, 1, address)
            .map_err(port_problem)?;
        ports.insert(FRONTEND_INTERNAL.name.to_string(), b);
        b.base
    } else {
        let public = PortBlock {
            base: fe.port.value,
            count: 1,
        };
        ports.insert(PUBLIC.to_string(), public);
        fe.port.value
    };
    let metrics = ctx
        .allocate(&ROUTER_METRICS, slot.node, 1, address)
        .map_err(port_problem)?;
    ports.insert(ROUTER_METRICS.name.to_string(), metrics);
    Ok((ports, port, metrics.base))
}

/// srtctl's layout: with one worker node, or `enable_multiple_frontends: false`, one
/// frontend on the placed node; otherwise nginx on the head and
/// `min(num_additional_frontends + 1, worker nodes - 1)` Routers on the other nodes.
pub fn default_layout(recipe: &Recipe, topology: &Topology) -> Layout {
    let fe = &recipe.frontend;
    let mut worker_nodes: Vec<usize> = topology
        .endpoints
        .iter()
        .flat_map(|e| e.nodes.iter().copied())
        .collect();
    worker_nodes.sort_unstable();
    worker_nodes.dedup();
    if fe.enable_multiple_frontends.value && worker_nodes.len() > 1 {
        let head = worker_nodes[0];
        let count = (fe.num_additional_frontends.value as usize + 1).min(worker_nodes.len() - 1);
        return Layout {
            services_node: topology.services_node,
            nginx_node: Some(head),
            routers: worker_nodes[1..=count]
                .iter()
                .map(|&node| RouterSlot {
                    node,
                    behind_nginx: true,
                })
                .collect(),
        };
    }
    let node = match fe.orchestrator_placement.value {
        Placement::Head => 0,
        Placement::FirstDecode => topology
            .role(RoleKind::Decode)
            .map(super::topology::Endpoint::leader)
            .next()
            .unwrap_or(0),
    };
    Layout {
        services_node: topology.services_node,
        nginx_node: None,
        routers: vec![RouterSlot {
            node,
            behind_nginx: false,
        }],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A recorded kind is read back by name: one name, one component, whichever
    /// frontends declare it.
    #[test]
    fn the_loader_keeps_exactly_the_sections_frontends_own() {
        let mut owned: Vec<&str> = FRONTENDS
            .iter()
            .filter_map(|f| f.section())
            .map(|s| s.name)
            .collect();
        owned.sort_unstable();
        let mut kept = crate::recipe::keys::OWNED_SECTIONS.to_vec();
        kept.sort_unstable();
        assert_eq!(owned, kept);
    }

    #[test]
    fn component_names_have_one_meaning() {
        let all: Vec<&Component> = components().collect();
        for c in &all {
            let same: Vec<_> = all.iter().filter(|d| d.name == c.name).collect();
            assert!(
                same.iter().all(|d| std::ptr::eq(**d, *c)),
                "two components are named `{}`",
                c.name
            );
        }
        for fixed in ["worker", "ports", "gate", "membership", "allocation"] {
            assert!(component(fixed).is_none(), "`{fixed}` is not a component's");
        }
    }
}
