//! The vLLM Router (`vllm-router`, PyPI) in front of direct `vllm serve` workers.
//!
//! Three ways to learn the workers:
//! - **Aggregated: managed membership.** The Router starts with no worker URL; srt adds
//!   each worker through the admin API ([`admin`]) once it is healthy and takes it out
//!   before stopping it, so a changed worker set never restarts the Router.
//! - **Prefill/decode: static.** `--vllm-pd-disaggregation` with `--prefill URL
//!   BOOTSTRAP` / `--decode URL` on the command line: 0.1.17 cannot add prefill or
//!   decode workers at run time (only take them out), so a changed set restarts it.
//! - **Discovery** (a connector row with `discovery`): `--kv-connector <row>
//!   --vllm-discovery-address 0.0.0.0:<port>` and no URLs; workers register over ZMQ.
//!
//! Readiness: with listed workers, the Router's `/workers` counts, then every
//! advertised worker's `/health`. Discovery mode cannot be counted (`/workers` reads only
//! the static list, which is empty), so it waits for the Router's `/health`, which is 503
//! until one prefill and one decode have registered, then every worker's `/health`.

mod admin;

use super::{nginx, FeatureNeed, Frontend, FrontendParts, Layout, RouterSlot};
use crate::catalog::Catalog;
use crate::launch::{
    membership_address, Argv, BuildContext, Component, Count, Gate, LaunchProcess, Member,
    Membership, MembershipMode, Probe, ProcessKind, WorkerInfo,
};
use crate::launch::{ConnectorChoice, PdProtocol, WorkerFeature};
use crate::ports::{PortBlock, DISCOVERY, DISCOVERY_PORT};
use crate::recipe::diag::Problem;
use crate::recipe::{ArgValue, Recipe, RoleKind};
use std::collections::{BTreeMap, BTreeSet};

/// The vLLM Router frontend.
pub(super) struct VllmRouter;

/// Flags the Router gets from the topology, with who sets them; recipes may not set them.
const MANAGED: &[(&str, &str)] = &[
    (
        "worker-urls",
        "the Router's workers are the role's routable workers",
    ),
    ("host", "the Router listens on 0.0.0.0"),
    (
        "port",
        "the Router's port is `frontend.port` (or an internal port behind nginx)",
    ),
    (
        "prometheus-port",
        "each Router's metrics port is allocated (port kind `router_metrics`)",
    ),
    (
        "vllm-pd-disaggregation",
        "prefill/decode mode follows the recipe's roles",
    ),
    ("prefill", "the prefill workers are the `prefill` role's"),
    ("decode", "the decode workers are the `decode` role's"),
    (
        "kv-connector",
        "the Router's connector follows `engine.connector`",
    ),
    (
        "vllm-discovery-address",
        "the discovery listener follows the connector (MoRI-IO)",
    ),
];

/// The vllm-router release srt ships a flag catalog for.
fn catalog() -> &'static Catalog {
    static PARSED: std::sync::OnceLock<Catalog> = std::sync::OnceLock::new();
    PARSED.get_or_init(|| {
        Catalog::parse(include_str!("catalog/vllm-router-0.1.17.json"))
            .expect("the shipped catalog parses")
    })
}

/// Flags srt sets by default that a recipe may override.
const DEFAULTED: &[&str] = &[
    "worker-startup-timeout-secs",
    "worker-startup-check-interval",
];

const INTRA_DP: &str = "intra-node-data-parallel-size";

/// vllm-router's `--policy` when none is given.
const DEFAULT_POLICY: &str = "cache_aware";

/// What a routing policy of vllm-router 0.1.17 asks of the workers, as observed in
/// front of real vLLM 0.32 and read in the Router's source: (feature, the request and
/// what the Router does with it, whether the policy cannot work without it, what to use
/// instead).
/// `random`, `round_robin`, `consistent_hash` and `sticky_least_loaded` ask nothing.
fn policy_needs(policy: &str) -> Vec<(WorkerFeature, &'static str, bool, &'static str)> {
    const RENDER: (WorkerFeature, &str, bool, &str) = (
        WorkerFeature::PromptRender,
        "POST /v1/completions/render for every request (the prompt's tokens, to route on)",
        false,
        "choose a policy that routes without the workers, e.g. `consistent_hash` or `round_robin`",
    );
    match policy {
        "cache_aware" => vec![RENDER],
        "kv_aware" => vec![
            RENDER,
            (
                WorkerFeature::KvCacheInfo,
                "GET /get_server_info (the KV-cache block size and identity, to index the worker's KV-cache events)",
                true,
                "use `cache_aware`, which tracks prefixes on the Router's side",
            ),
        ],
        "power_of_two" => vec![(
            WorkerFeature::LoadReport,
            "GET /get_load every few seconds (the worker's load, to compare two workers)",
            false,
            "the Router then compares only its own in-flight request counts; `round_robin` or `cache_aware` do not poll",
        )],
        _ => Vec::new(),
    }
}

fn discovery_connector(connectors: &[ConnectorChoice]) -> Option<&ConnectorChoice> {
    connectors.iter().find(|c| c.discovery)
}

/// A worker the Router routes to: its process, its facts, its URL.
type Advertised<'a> = (&'a LaunchProcess, &'a WorkerInfo, &'a String);

/// Why a Router in prefill/decode mode restarts when its workers change, what that
/// costs, and which frontend would not (measured: `tests/e2e_rollout.rs`, the decode
/// args change; `tests/e2e_smg.rs`, the same change behind smg).
const STATIC_NOTE: &str = "vllm-router 0.1.17 cannot add prefill/decode workers at run time: they are on its command line, so a change of them restarts it and requests fail until it serves again (2-3 s measured); smg (`frontend.type: smg`) adds and removes prefill/decode workers without a restart";

impl Frontend for VllmRouter {
    fn name(&self) -> &'static str {
        "vllm-router"
    }

    fn default_binary(&self) -> &'static str {
        "vllm-router"
    }

    fn components(&self) -> &'static [&'static Component] {
        super::ROUTER_ONLY
    }

    fn install_hint(&self) -> &'static str {
        "install the pinned Router with `scripts/install-router.sh` and put `.tools/bin` on PATH \
         (`export PATH=\"$PWD/.tools/bin:$PATH\"`), or name the program with `frontend.binary`"
    }

    /// vLLM's hand-off (`--vllm-pd-disaggregation`), or none (`connector: none`).
    fn pd_protocols(&self) -> &'static [PdProtocol] {
        &[PdProtocol::KvTransferParams, PdProtocol::Recompute]
    }

    fn supports_discovery(&self) -> bool {
        true
    }

    fn discovery_listener(&self, layout: &Layout) -> Option<(usize, u16)> {
        Some((layout.routers[0].node, DISCOVERY_PORT))
    }

    fn catalog(&self) -> &'static Catalog {
        catalog()
    }

    fn admin(&self) -> Option<&'static dyn super::Admin> {
        Some(&admin::VllmRouterAdmin)
    }

    fn managed_by(&self, flag: &str) -> Option<&'static str> {
        crate::catalog::managed_by(MANAGED, flag)
    }

    fn worker_features(&self, recipe: &Recipe) -> Vec<FeatureNeed> {
        let fe = &recipe.frontend;
        let mut out = Vec::new();
        for role in &recipe.roles {
            // `--prefill-policy` / `--decode-policy` inherit `--policy`, whose default
            // is cache_aware.
            let own = match role.kind {
                RoleKind::Prefill => Some("prefill-policy"),
                RoleKind::Decode => Some("decode-policy"),
                RoleKind::Agg => None,
            };
            let set = own
                .and_then(|k| fe.args.get(k))
                .or_else(|| fe.args.get("policy"));
            let (policy, key, span, label) = match set {
                Some(a) => (
                    a.value.render(),
                    a.key.clone(),
                    a.value_span,
                    "this policy".to_string(),
                ),
                None => (
                    DEFAULT_POLICY.to_string(),
                    "policy".to_string(),
                    fe.span,
                    format!("the Router's default policy is {DEFAULT_POLICY}"),
                ),
            };
            for (feature, what, required, alternative) in policy_needs(&policy) {
                out.push(FeatureNeed {
                    role: role.kind,
                    feature,
                    span,
                    label: label.clone(),
                    who: format!("the Router's `{key}: {policy}`"),
                    what: what.to_string(),
                    alternative: alternative.to_string(),
                    required,
                });
            }
        }
        out
    }

    fn validate(
        &self,
        recipe: &Recipe,
        connectors: &[ConnectorChoice],
        problems: &mut Vec<Problem>,
    ) {
        let Some(disc) = discovery_connector(connectors) else {
            return;
        };
        let name = disc.name;
        // The Router's `--kv-connector` must name the connector the workers register with.
        let known = match catalog().resolve("kv-connector") {
            crate::catalog::Resolution::Exact(o, _) => o.choices.clone().unwrap_or_default(),
            _ => Vec::new(),
        };
        if !known.iter().any(|k| k == name) {
            problems.push(
                Problem::new(
                    "srt::recipe::discovery_frontend",
                    disc.span,
                    format!("vllm-router has no `--kv-connector {name}` for discovered workers"),
                )
                .label("discovery connector")
                .help(format!("the Router's connectors: {}", known.join(", "))),
            );
        }
        let roles: BTreeSet<RoleKind> = recipe.roles.iter().map(|r| r.kind).collect();
        if !(roles.contains(&RoleKind::Prefill) && roles.contains(&RoleKind::Decode)) {
            problems.push(
                Problem::new(
                    "srt::recipe::discovery_topology",
                    disc.span,
                    format!("connector `{name}` needs a prefill/decode topology"),
                )
                .label("discovery connector")
                .help("use `roles.prefill` and `roles.decode`"),
            );
        }
        for c in connectors {
            if c.name != disc.name {
                problems.push(
                    Problem::new(
                        "srt::recipe::discovery_roles",
                        c.span,
                        format!(
                            "`{}` uses connector `{}` but `{}` uses `{name}`: both prefill and decode must run the discovery connector",
                            c.role.name(),
                            c.name,
                            disc.role.name()
                        ),
                    )
                    .label("different connector")
                    .help(format!("set `engine.connector: {name}` and drop the role override")),
                );
            }
        }
        if recipe.frontend.enable_multiple_frontends.value {
            let multiple = &recipe.frontend.enable_multiple_frontends;
            // Written, defaulted under a `frontend:` key, or defaulted with no `frontend:`
            // at all (an empty span): point at the value, the key, or the connector.
            let (span, label) = if multiple.span.is_empty() {
                (
                    disc.span,
                    "needs one Router, but `frontend.enable_multiple_frontends` defaults to true",
                )
            } else if multiple.span == recipe.frontend.span {
                (
                    multiple.span,
                    "`enable_multiple_frontends` is not set here and defaults to true",
                )
            } else {
                (multiple.span, "multiple frontends")
            };
            problems.push(
                Problem::new(
                    "srt::recipe::discovery_single_router",
                    span,
                    format!("connector `{name}` registers workers with one Router: `frontend.enable_multiple_frontends` must be false"),
                )
                .label(label)
                .help("set `frontend.enable_multiple_frontends: false`"),
            );
        }
        if recipe.frontend.orchestrator_placement.value != crate::recipe::Placement::Head {
            problems.push(
                Problem::new(
                    "srt::recipe::discovery_placement",
                    recipe.frontend.orchestrator_placement.span,
                    format!("connector `{name}` workers register with the head node: the Router must run on `head`"),
                )
                .label("not head")
                .help("set `frontend.orchestrator_placement: head`"),
            );
        }
    }

    fn build(
        &self,
        ctx: &mut BuildContext<'_>,
        recipe: &Recipe,
        layout: &Layout,
        workers: &[LaunchProcess],
        connectors: &[ConnectorChoice],
    ) -> Result<FrontendParts, Problem> {
        let fe = &recipe.frontend;
        let discovery = discovery_connector(connectors);
        let advertised: Vec<Advertised<'_>> = workers
            .iter()
            .filter_map(|w| {
                let info = w.worker.as_ref()?;
                Some((w, info, info.advertised_url.as_ref()?))
            })
            .collect();
        let (derived, dp_note) = intra_node_dp(recipe, &advertised)?;
        if discovery.is_none() && advertised.is_empty() {
            return Err(Problem::new(
                "srt::recipe::no_workers",
                fe.span,
                "no worker serves HTTP for the Router to route to",
            )
            .label("this frontend"));
        }
        let disaggregated = advertised.iter().any(|(_, i, _)| i.role != RoleKind::Agg);
        let mode = match (discovery, disaggregated) {
            (Some(_), _) => Some(MembershipMode::Discovery),
            (None, true) => Some(MembershipMode::Static),
            (None, false) => Some(MembershipMode::Managed),
        };
        let topo_flags = topology_flags(discovery, &advertised);
        let user_flags = user_flags(recipe, ctx.health().timeout_secs, derived);
        // A Router whose workers are on its command line restarts with them (its hash
        // covers theirs); a managed one does not depend on them at all.
        // One list, shared by every Router.
        let worker_deps: std::sync::Arc<[String]> = match mode {
            Some(MembershipMode::Static) => advertised
                .iter()
                .map(|(w, _, _)| w.address.clone())
                .collect(),
            _ => std::sync::Arc::default(),
        };
        let mut processes = Vec::new();
        let mut router_urls = Vec::new();
        let mut upstreams = Vec::new();
        for (i, slot) in layout.routers.iter().enumerate() {
            let (p, port) = router_process(
                self,
                ctx,
                recipe,
                i,
                *slot,
                discovery.is_some(),
                &topo_flags,
                &user_flags,
                &worker_deps,
            )?;
            let ip = ctx.node_ip(slot.node);
            router_urls.push(format!("http://{ip}:{port}"));
            upstreams.push(format!("{ip}:{port}"));
            processes.push(p);
        }
        let router_addrs: Vec<String> = processes.iter().map(|p| p.address.clone()).collect();
        let members: std::sync::Arc<[Member]> = advertised
            .iter()
            .map(|(w, info, url)| Member::new(w, info, url))
            .collect();
        let memberships: Vec<Membership> = match mode {
            None => Vec::new(),
            Some(mode) => router_addrs
                .iter()
                .zip(&router_urls)
                .map(|(router, url)| Membership {
                    address: membership_address(router),
                    router: router.clone(),
                    admin_url: url.clone(),
                    mode,
                    note: match mode {
                        MembershipMode::Static => Some(STATIC_NOTE.to_string()),
                        MembershipMode::Discovery => Some("it registers itself with the Router over ZMQ, and vllm-router 0.1.17 cannot drop a registration: the Router keeps routing to it until the registration expires, 4-5 s after it stops (requests paired with it meanwhile fail), or until its replacement answers on the same port".to_string()),
                        MembershipMode::Managed => None,
                    },
                    members: members.clone(),
                })
                .collect(),
        };
        let public_url = format!(
            "http://{}:{}",
            ctx.node_ip(layout.public_node()),
            fe.port.value
        );
        if let Some(node) = layout.nginx_node {
            processes.push(nginx::process(node, fe.port.value, &upstreams, &fe.nginx));
        }
        let mut gate_deps = router_addrs;
        gate_deps.extend(
            memberships
                .iter()
                .filter(|m| m.mode == MembershipMode::Managed)
                .map(|m| m.address.clone()),
        );
        let gates = gates(
            discovery.is_some(),
            &advertised,
            derived,
            router_urls,
            gate_deps,
        );
        Ok(FrontendParts {
            processes,
            gates,
            memberships,
            public_url,
            warnings: dp_note.into_iter().collect(),
        })
    }
}

/// `--intra-node-data-parallel-size`: the node-local DP size, when every endpoint has
/// exactly one advertised URL and they agree (multi-node hybrid-LB pools stay
/// unexpanded: later pools own nonzero global ranks). A user value must match it.
///
/// When the endpoints' sizes differ (DEP8 prefill in front of TP8 decode), the flag,
/// which is global, is left out: the Router then counts each worker's engines from its
/// `/metrics` (static P/D mode), and each API server balances its own local ranks. The
/// returned warning says so.
fn intra_node_dp(
    recipe: &Recipe,
    advertised: &[Advertised<'_>],
) -> Result<(u32, Option<Problem>), Problem> {
    let fe = &recipe.frontend;
    let mut urls_per_endpoint: BTreeMap<(RoleKind, u32), Vec<u32>> = BTreeMap::new();
    for (_, info, _) in advertised {
        urls_per_endpoint
            .entry((info.role, info.endpoint))
            .or_default()
            .push(info.local_dp);
    }
    let mut note = None;
    let derived = if urls_per_endpoint.values().all(|v| v.len() == 1) {
        let values: BTreeSet<u32> = urls_per_endpoint.values().map(|v| v[0]).collect();
        if values.len() > 1 {
            let mut by_role: BTreeMap<RoleKind, BTreeSet<u32>> = BTreeMap::new();
            for ((role, _), v) in &urls_per_endpoint {
                by_role.entry(*role).or_default().insert(v[0]);
            }
            let sizes: Vec<String> = by_role
                .iter()
                .map(|(role, v)| {
                    let v: Vec<String> = v.iter().map(u32::to_string).collect();
                    format!("{} {}", role.name(), v.join("/"))
                })
                .collect();
            note = Some(
                Problem::warning(
                    "srt::recipe::intra_node_dp_omitted",
                    fe.span,
                    format!(
                        "the Router gets no --{INTRA_DP}: endpoints have different node-local DP sizes ({})",
                        sizes.join(", ")
                    ),
                )
                .label("for this frontend")
                .help("nothing to do: the flag is global, so srt leaves it out; the Router counts each worker's engines from its /metrics (`engine` labels), and each API server balances its own local ranks"),
            );
            1
        } else {
            values.into_iter().next().unwrap_or(1)
        }
    } else {
        1
    };
    if let Some(user) = fe.args.get(INTRA_DP) {
        if user.value != ArgValue::Int(i64::from(derived)) {
            let why = match note {
                Some(_) => ": endpoints have different node-local DP sizes, so srt leaves it out"
                    .to_string(),
                None => format!(", which gives {derived}"),
            };
            return Err(Problem::new(
                "srt::recipe::intra_node_dp",
                user.value_span,
                format!("`frontend.args.{INTRA_DP}` conflicts with the topology{why}"),
            )
            .label("conflicts with the allocated topology")
            .help("remove it: srt derives it (multi-node hybrid-LB pools stay unexpanded)"));
        }
    }
    Ok((derived, note))
}

/// The mode flags and worker lists, identical for every Router replica.
fn topology_flags(
    discovery: Option<&ConnectorChoice>,
    advertised: &[Advertised<'_>],
) -> Vec<String> {
    let mut flags: Vec<String> = Vec::new();
    let disaggregated = advertised.iter().any(|(_, i, _)| i.role != RoleKind::Agg);
    if let Some(conn) = discovery {
        flags.extend([
            "--vllm-pd-disaggregation".into(),
            "--kv-connector".into(),
            conn.name.into(),
            "--vllm-discovery-address".into(),
            format!("0.0.0.0:{DISCOVERY_PORT}"),
        ]);
    } else if disaggregated {
        flags.push("--vllm-pd-disaggregation".into());
        for (_, info, url) in advertised
            .iter()
            .filter(|(_, i, _)| i.role == RoleKind::Prefill)
        {
            flags.push("--prefill".into());
            flags.push((*url).clone());
            if let Some(b) = info.bootstrap_port {
                flags.push(b.to_string());
            }
        }
        for (_, _, url) in advertised
            .iter()
            .filter(|(_, i, _)| i.role == RoleKind::Decode)
        {
            flags.push("--decode".into());
            flags.push((*url).clone());
        }
    }
    // Aggregated workers are added through the admin API, none on the command line.
    flags
}

/// `frontend.args` with srt's defaults for what the recipe leaves out (the start-up
/// budget from `health_check`, a one-second check interval) and the derived
/// `--intra-node-data-parallel-size`, sorted and rendered as the Router reads them.
fn user_flags(recipe: &Recipe, timeout_secs: u64, derived: u32) -> Vec<String> {
    let fe = &recipe.frontend;
    let mut flags: Vec<(String, ArgValue)> = fe
        .args
        .0
        .iter()
        .filter(|a| a.key != INTRA_DP)
        .map(|a| (a.key.clone(), a.value.clone()))
        .collect();
    for (key, default) in [
        (DEFAULTED[0], timeout_secs.to_string()),
        (DEFAULTED[1], "1".to_string()),
    ] {
        if !flags.iter().any(|(k, _)| k == key) {
            flags.push((key.to_string(), ArgValue::Str(default)));
        }
    }
    if derived > 1 {
        flags.push((INTRA_DP.to_string(), ArgValue::Int(i64::from(derived))));
    }
    flags.sort_by(|a, b| a.0.cmp(&b.0));
    crate::catalog::render(Some(catalog()), &flags)
}

/// Router `i` in `slot`: its ports (the public one, or an internal one behind nginx; a
/// metrics port; the discovery listener), its command line. Returns it with its port.
#[allow(clippy::too_many_arguments)]
fn router_process(
    frontend: &VllmRouter,
    ctx: &mut BuildContext<'_>,
    recipe: &Recipe,
    i: usize,
    slot: RouterSlot,
    discovery: bool,
    topo_flags: &[String],
    user_flags: &[String],
    worker_deps: &std::sync::Arc<[String]>,
) -> Result<(LaunchProcess, u16), Problem> {
    let fe = &recipe.frontend;
    let address = format!("router[{i}]");
    let (mut ports, port, metrics) = super::router_ports(ctx, fe, slot, &address)?;
    if discovery {
        let listener = PortBlock {
            base: DISCOVERY_PORT,
            count: 1,
        };
        ports.insert(DISCOVERY.to_string(), listener);
    }
    let binary = fe
        .binary
        .clone()
        .unwrap_or_else(|| frontend.default_binary().to_string());
    let mut argv = Argv::from([binary]);
    argv.extend(topo_flags);
    argv.extend([
        "--host",
        "0.0.0.0",
        "--port",
        &port.to_string(),
        "--prometheus-port",
        &metrics.to_string(),
    ]);
    argv.extend(user_flags);
    let process = LaunchProcess {
        address,
        kind: ProcessKind::Component(&super::ROUTER),
        node: slot.node,
        devices: Vec::new(),
        ports,
        env: fe.env.clone(),
        env_unset: Vec::new(),
        argv,
        files: BTreeMap::new(),
        // The Router waits for its workers itself (with listed workers it binds once
        // every one answers /health; discovery mode waits for registrations; managed
        // workers are added as they become healthy), so it starts alongside them.
        depends_on: Vec::new(),
        watches: worker_deps.clone(),
        worker: None,
        wrap: Default::default(),
        ranks: None,
        container_image: fe
            .container_image
            .clone()
            .or_else(|| ctx.model().container.clone()),
    };
    Ok((process, port))
}

/// Readiness: static mode first checks every Router's `/workers` counts, then every
/// advertised worker's `/health`. Discovery mode cannot be counted (`/workers` reads
/// only the static list, which is empty), so it waits for the Router's `/health`,
/// which is 503 until one prefill and one decode have registered.
fn gates(
    discovery: bool,
    advertised: &[Advertised<'_>],
    derived: u32,
    router_urls: Vec<String>,
    router_addrs: Vec<String>,
) -> Vec<Gate> {
    let count = |role: RoleKind| {
        advertised.iter().filter(|(_, i, _)| i.role == role).count() as u32 * derived
    };
    let router_gate = if discovery {
        Gate {
            address: "gate.router".into(),
            description:
                "the Router reports a registered prefill and decode (its /health is 503 until then)"
                    .into(),
            probe: Probe::Http {
                urls: router_urls,
                path: "/health".into(),
            },
            depends_on: router_addrs,
        }
    } else {
        let (prefill, decode) = (
            count(RoleKind::Prefill),
            count(RoleKind::Decode) + count(RoleKind::Agg),
        );
        Gate {
            address: "gate.router".into(),
            description: format!(
                "every Router lists at least {prefill} prefill and {decode} decode/regular workers"
            ),
            probe: Probe::JsonCounts {
                urls: router_urls,
                path: "/workers".into(),
                counts: vec![
                    Count {
                        name: "prefill workers".into(),
                        pointers: vec!["/stats/prefill_count".into()],
                        at_least: prefill,
                    },
                    Count {
                        name: "decode/regular workers".into(),
                        pointers: vec!["/stats/decode_count".into(), "/stats/regular_count".into()],
                        at_least: decode,
                    },
                ],
            },
            depends_on: router_addrs,
        }
    };
    let mut deps = vec!["gate.router".to_string()];
    deps.extend(advertised.iter().map(|(w, _, _)| w.address.clone()));
    vec![
        router_gate,
        Gate {
            address: "gate.workers".into(),
            description: "every worker advertised to the Router answers /health".into(),
            probe: Probe::Http {
                urls: advertised.iter().map(|(_, _, u)| (*u).clone()).collect(),
                path: "/health".into(),
            },
            depends_on: deps,
        },
    ]
}
