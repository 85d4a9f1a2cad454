//! The vLLM Router (`vllm-router`, PyPI) in front of direct `vllm serve` workers.
//!
//! Static mode lists worker URLs on the command line (`--worker-urls`, or
//! `--vllm-pd-disaggregation` with `--prefill URL BOOTSTRAP` / `--decode URL`). Discovery
//! mode (a connector row with `discovery`) starts the Router with
//! `--kv-connector <row> --vllm-discovery-address 0.0.0.0:<port>` and no URLs; workers
//! register over ZMQ.
//!
//! Readiness: static mode first checks the Router's `/workers` counts, then every
//! advertised worker's `/health`. Discovery mode cannot be counted (`/workers` reads only
//! the static list, which is empty), so it waits for the Router's `/health`, which is 503
//! until one prefill and one decode have registered, then every worker's `/health`.

use super::{nginx, Frontend, FrontendParts, Layout, RoleConnector};
use crate::launch::build::Ctx;
use crate::launch::{node_ip, Gate, LaunchProcess, Probe, ProcessKind};
use crate::ports::{
    PortBlock, DISCOVERY, DISCOVERY_PORT, FRONTEND_INTERNAL, PUBLIC, ROUTER_METRICS,
};
use crate::recipe::diag::Problem;
use crate::recipe::{ArgValue, Args, Recipe, RoleKind};
use std::collections::{BTreeMap, BTreeSet};

/// The vLLM Router frontend.
pub struct VllmRouter;

/// Flags the Router gets from the topology; recipes may not set them.
const MANAGED: &[&str] = &[
    "worker-urls",
    "host",
    "port",
    "prometheus-port",
    "vllm-pd-disaggregation",
    "prefill",
    "decode",
    "kv-connector",
    "vllm-discovery-address",
    "pd-disaggregation",
];

/// Flags srt sets by default that a recipe may override.
const DEFAULTED: &[&str] = &[
    "worker-startup-timeout-secs",
    "worker-startup-check-interval",
];

const INTRA_DP: &str = "intra-node-data-parallel-size";

fn discovery_connector(connectors: &[RoleConnector]) -> Option<&RoleConnector> {
    connectors.iter().find(|c| c.connector.discovery)
}

impl Frontend for VllmRouter {
    fn name(&self) -> &'static str {
        "vllm-router"
    }

    fn default_binary(&self) -> &'static str {
        "vllm-router"
    }

    fn supports_discovery(&self) -> bool {
        true
    }

    fn validate(&self, recipe: &Recipe, connectors: &[RoleConnector], problems: &mut Vec<Problem>) {
        for arg in &recipe.frontend.args.0 {
            if MANAGED.contains(&arg.key.as_str()) {
                problems.push(
                    Problem::new(
                        "srt::recipe::managed_flag",
                        arg.key_span,
                        format!("`frontend.args.{}` is derived from the topology by srt", arg.key),
                    )
                    .label("managed by srt")
                    .help("remove it; srt renders this Router flag from the workers and ports it allocates"),
                );
            }
        }
        // DP needs independently routable API servers: per_gpu is refused.
        if recipe.engine.dp_launch_mode.value == crate::recipe::DpLaunchMode::PerGpu
            && recipe
                .roles
                .iter()
                .any(|r| r.args.int("data-parallel-size").unwrap_or(1) > 1)
        {
            problems.push(
                Problem::new(
                    "srt::recipe::dp_launch_mode",
                    recipe.engine.dp_launch_mode.span,
                    "vllm-router needs `dp_launch_mode: per_node` for data parallelism",
                )
                .label("per_gpu")
                .help("per_gpu launches registrations, not routable API servers; use per_node"),
            );
        }
        let Some(disc) = discovery_connector(connectors) else {
            return;
        };
        let name = disc.connector.name;
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
            if !std::ptr::eq(c.connector, disc.connector) {
                problems.push(
                    Problem::new(
                        "srt::recipe::discovery_roles",
                        c.span,
                        format!(
                            "`{}` uses connector `{}` but `{}` uses `{name}`: both prefill and decode must run the discovery connector",
                            c.role.name(),
                            c.connector.name,
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
        ctx: &mut Ctx<'_>,
        layout: &Layout,
        workers: &[LaunchProcess],
        connectors: &[RoleConnector],
    ) -> Result<FrontendParts, Problem> {
        let recipe = ctx.recipe;
        let fe = &recipe.frontend;
        let discovery = discovery_connector(connectors).map(|c| c.connector);
        let disaggregated = workers
            .iter()
            .any(|w| w.worker.as_ref().is_some_and(|i| i.role != RoleKind::Agg));
        let advertised: Vec<(&LaunchProcess, &crate::launch::WorkerInfo, &String)> = workers
            .iter()
            .filter_map(|w| {
                let info = w.worker.as_ref()?;
                Some((w, info, info.advertised_url.as_ref()?))
            })
            .collect();

        // --intra-node-data-parallel-size: only when every endpoint has exactly one URL.
        let mut urls_per_endpoint: BTreeMap<(RoleKind, u32), Vec<u32>> = BTreeMap::new();
        for (_, info, _) in &advertised {
            urls_per_endpoint
                .entry((info.role, info.endpoint))
                .or_default()
                .push(info.local_dp);
        }
        let derived = if urls_per_endpoint.values().all(|v| v.len() == 1) {
            let values: BTreeSet<u32> = urls_per_endpoint.values().map(|v| v[0]).collect();
            if values.len() > 1 {
                return Err(Problem::new(
                    "srt::recipe::intra_node_dp",
                    fe.span,
                    format!(
                        "the Router takes one --{INTRA_DP} but endpoints have different node-local DP sizes {values:?}"
                    ),
                )
                .label("for this frontend")
                .help("give every role the same node-local data-parallel size"));
            }
            values.into_iter().next().unwrap_or(1)
        } else {
            1
        };
        if let Some(user) = fe.args.get(INTRA_DP) {
            if user.value != ArgValue::Int(i64::from(derived)) {
                return Err(Problem::new(
                    "srt::recipe::intra_node_dp",
                    user.value_span,
                    format!("`frontend.args.{INTRA_DP}` conflicts with the topology, which gives {derived}"),
                )
                .label("conflicts with the allocated topology")
                .help("remove it: srt derives it (multi-node hybrid-LB pools stay unexpanded)"));
            }
        }
        if discovery.is_none() && advertised.is_empty() {
            return Err(Problem::new(
                "srt::recipe::no_workers",
                fe.span,
                "no worker serves HTTP for the Router to route to",
            )
            .label("this frontend"));
        }

        // Mode flags and worker lists (identical for every Router replica).
        let mut topo_flags: Vec<String> = Vec::new();
        if let Some(conn) = discovery {
            topo_flags.push("--vllm-pd-disaggregation".into());
            if let Some(kv) = conn.router_kv_connector {
                topo_flags.extend(["--kv-connector".into(), kv.into()]);
            }
            topo_flags.extend([
                "--vllm-discovery-address".into(),
                format!("0.0.0.0:{DISCOVERY_PORT}"),
            ]);
        } else if disaggregated {
            topo_flags.push("--vllm-pd-disaggregation".into());
            for (_, info, url) in advertised
                .iter()
                .filter(|(_, i, _)| i.role == RoleKind::Prefill)
            {
                topo_flags.push("--prefill".into());
                topo_flags.push((*url).clone());
                if let Some(b) = info.bootstrap_port {
                    topo_flags.push(b.to_string());
                }
            }
            for (_, _, url) in advertised
                .iter()
                .filter(|(_, i, _)| i.role == RoleKind::Decode)
            {
                topo_flags.push("--decode".into());
                topo_flags.push((*url).clone());
            }
        } else {
            topo_flags.push("--worker-urls".into());
            topo_flags.extend(advertised.iter().map(|(_, _, u)| (*u).clone()));
        }
        let worker_deps: Vec<String> = if discovery.is_some() {
            Vec::new()
        } else {
            advertised
                .iter()
                .map(|(w, _, _)| w.address.clone())
                .collect()
        };

        let binary = fe
            .binary
            .clone()
            .unwrap_or_else(|| self.default_binary().to_string());
        let mut processes = Vec::new();
        let mut router_urls = Vec::new();
        let mut upstreams = Vec::new();
        for (i, slot) in layout.routers.iter().enumerate() {
            let address = format!("router[{i}]");
            let host = ctx.host(slot.node).to_string();
            let ip = node_ip(slot.node);
            let mut ports = BTreeMap::new();
            let port = if slot.behind_nginx {
                let b = ctx
                    .alloc
                    .allocate(&FRONTEND_INTERNAL, &host, 1, &address)
                    .map_err(|e| port_problem(fe.span, e))?;
                ports.insert(FRONTEND_INTERNAL.name.to_string(), b);
                b.base
            } else {
                ports.insert(
                    PUBLIC.to_string(),
                    PortBlock {
                        base: fe.port.value,
                        count: 1,
                    },
                );
                fe.port.value
            };
            let metrics = ctx
                .alloc
                .allocate(&ROUTER_METRICS, &host, 1, &address)
                .map_err(|e| port_problem(fe.span, e))?;
            ports.insert(ROUTER_METRICS.name.to_string(), metrics);
            if discovery.is_some() {
                ports.insert(
                    DISCOVERY.to_string(),
                    PortBlock {
                        base: DISCOVERY_PORT,
                        count: 1,
                    },
                );
            }
            let mut argv = vec![binary.clone()];
            argv.extend(topo_flags.iter().cloned());
            argv.extend([
                "--host".into(),
                "0.0.0.0".into(),
                "--port".into(),
                port.to_string(),
                "--prometheus-port".into(),
                metrics.base.to_string(),
            ]);
            let mut user: Vec<crate::recipe::Arg> = fe
                .args
                .0
                .iter()
                .filter(|a| a.key != INTRA_DP)
                .cloned()
                .collect();
            for (key, default) in [
                (DEFAULTED[0], recipe.health_check.timeout_secs.to_string()),
                (DEFAULTED[1], "1".to_string()),
            ] {
                if !user.iter().any(|a| a.key == key) {
                    user.push(crate::recipe::Arg {
                        key: key.to_string(),
                        key_span: fe.span,
                        value: ArgValue::Str(default),
                        value_span: fe.span,
                    });
                }
            }
            if derived > 1 {
                user.push(crate::recipe::Arg {
                    key: INTRA_DP.to_string(),
                    key_span: fe.span,
                    value: ArgValue::Int(i64::from(derived)),
                    value_span: fe.span,
                });
            }
            argv.extend(Args(user).to_argv());
            let url = format!("http://{ip}:{port}");
            router_urls.push(url);
            upstreams.push(format!("{ip}:{port}"));
            processes.push(LaunchProcess {
                address,
                kind: ProcessKind::Router,
                node: slot.node,
                devices: Vec::new(),
                ports,
                env: fe.env.clone(),
                env_unset: Vec::new(),
                argv,
                files: BTreeMap::new(),
                // The Router waits for its workers itself (static mode binds once every
                // listed worker answers /health; discovery mode waits for registrations),
                // so it starts alongside them and its start-up overlaps theirs.
                depends_on: Vec::new(),
                watches: worker_deps.clone(),
                worker: None,
                container_image: fe
                    .container_image
                    .clone()
                    .or_else(|| recipe.model.container.clone()),
            });
        }
        let router_addrs: Vec<String> = processes.iter().map(|p| p.address.clone()).collect();
        let public_node = layout.public_node();
        let public_url = format!("http://{}:{}", node_ip(public_node), fe.port.value);
        if let Some(node) = layout.nginx_node {
            processes.push(nginx::process(
                node,
                fe.port.value,
                &upstreams,
                router_addrs.clone(),
            ));
        }

        let count = |role: RoleKind| {
            advertised.iter().filter(|(_, i, _)| i.role == role).count() as u32 * derived
        };
        let mut gates = Vec::new();
        let router_gate = if discovery.is_some() {
            Gate {
                address: "gate.router".into(),
                description: "the Router reports a registered prefill and decode (its /health is 503 until then)".into(),
                probe: Probe::Health { urls: router_urls.clone() },
                depends_on: router_addrs.clone(),
            }
        } else {
            let (prefill, decode) = (
                count(RoleKind::Prefill),
                count(RoleKind::Decode) + count(RoleKind::Agg),
            );
            Gate {
                address: "gate.router".into(),
                description: format!("every Router lists at least {prefill} prefill and {decode} decode/regular workers"),
                probe: Probe::RouterWorkers { urls: router_urls.clone(), prefill, decode },
                depends_on: router_addrs.clone(),
            }
        };
        gates.push(router_gate);
        let mut deps = vec!["gate.router".to_string()];
        deps.extend(advertised.iter().map(|(w, _, _)| w.address.clone()));
        gates.push(Gate {
            address: "gate.workers".into(),
            description: "every worker advertised to the Router answers /health".into(),
            probe: Probe::Health {
                urls: advertised.iter().map(|(_, _, u)| (*u).clone()).collect(),
            },
            depends_on: deps,
        });
        Ok(FrontendParts {
            processes,
            gates,
            public_url,
        })
    }
}

fn port_problem(span: miette::SourceSpan, e: crate::ports::PortError) -> Problem {
    Problem::new("srt::recipe::ports", span, e.to_string()).label("while allocating frontend ports")
}
