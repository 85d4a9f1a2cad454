//! One vLLM endpoint's processes: the ports it binds, its environment and its `vllm
//! serve` command line, one process per node of the endpoint.

use super::connector::{Connector, WorkerListeners};
use super::shape::{shape, sizes, Shape};
use super::Vllm;
use crate::engine::{kv_events, Engine};
use crate::launch::{Argv, BuildContext, LaunchProcess, ProcessKind, WorkerInfo};
use crate::ports::{PortBlock, PortError, DP_RPC, HTTP, MASTER, NIXL, VLLM_SCAN};
use crate::recipe::diag::Problem;
use crate::recipe::{ArgValue, Recipe, Role, RoleKind};
use crate::topology::Endpoint;
use std::collections::BTreeMap;

/// What vLLM's KV events add to srtctl's defaults: vLLM publishes none unless told to.
const KV_EVENT_DEFAULTS: [(&str, serde_json::Value); 1] =
    [("enable_kv_cache_events", serde_json::Value::Bool(true))];

/// What every process of an endpoint shares.
struct EndpointPlan<'a> {
    recipe: &'a Recipe,
    role: &'a Role,
    connector: &'static Connector,
    endpoint: &'a Endpoint,
    shape: Shape,
    /// `worker.<role>[<i>]`.
    address: String,
    /// The leader's IP placeholder.
    leader_ip: String,
    /// Whether the workers get the connector's `--kv-transfer-config`: always on P/D
    /// roles, on an agg role only when it names a connector.
    include_kv: bool,
    /// Allocated once per endpoint, on the leader.
    dp_rpc: Option<u16>,
    master: Option<u16>,
    /// The NIXL side channels: one run of `dp` ports.
    nixl: Option<NixlRun>,
    /// Flags that make the workers serve what the frontend needs (the recipe's own
    /// value wins when it sets one: a conflicting one was refused).
    feature_flags: Vec<(String, ArgValue)>,
    /// The runtime wrapper the workers run as, when a frontend's runtime hosts them.
    wrapper: Option<&'static crate::engine::Wrapper>,
    /// The KV-event publisher config of its workers (without the endpoint), when they
    /// publish ([`kv_events`]).
    kv_events: Option<serde_json::Map<String, serde_json::Value>>,
}

/// An endpoint's NIXL side channels: one run of one port per DP rank, from one base
/// that every node of the endpoint gets (`VLLM_NIXL_SIDE_CHANNEL_PORT`); vLLM's engine
/// core for DP rank `d` binds `base + d` on its own node (`NixlConnectorScheduler`:
/// `side_channel_port = VLLM_NIXL_SIDE_CHANNEL_PORT + data_parallel_index`).
struct NixlRun {
    /// The run's first port.
    base: u16,
    /// The part of the run each node rank binds (`None`: that node runs no engine core).
    by_rank: Vec<Option<PortBlock>>,
}

fn port_problem(role: &Role) -> impl Fn(PortError) -> Problem + '_ {
    move |e| {
        Problem::new("srt::recipe::ports", role.span, e.to_string())
            .label("while allocating this role's ports")
    }
}

/// What the frontend asks of an endpoint's workers: the flags of the features it needs,
/// and the runtime wrapper they run as.
pub(super) struct ServeAs {
    pub feature_flags: Vec<(String, ArgValue)>,
    pub wrapper: Option<&'static crate::engine::Wrapper>,
}

/// The processes of one endpoint of `role` running `connector`.
pub(super) fn endpoint_processes(
    engine: &Vllm,
    ctx: &mut BuildContext<'_>,
    recipe: &Recipe,
    role: &Role,
    connector: &'static Connector,
    endpoint: &Endpoint,
    serve_as: ServeAs,
) -> Result<Vec<LaunchProcess>, Problem> {
    let mut plan = endpoint_plan(ctx, recipe, role, connector, endpoint)?;
    plan.feature_flags = serve_as.feature_flags;
    plan.wrapper = serve_as.wrapper;
    endpoint
        .nodes
        .iter()
        .enumerate()
        .map(|(rank, &node)| node_process(engine, ctx, &plan, rank as u32, node))
        .collect()
}

/// Whether a role's workers get the connector's `--kv-transfer-config` (and its side
/// channels): always on P/D roles, on an agg role only when it names a connector.
pub(super) fn includes_kv(role: &Role) -> bool {
    role.kind != RoleKind::Agg || role.connector.is_some()
}

/// The endpoint's shape and the ports its processes share.
fn endpoint_plan<'a>(
    ctx: &mut BuildContext<'_>,
    recipe: &'a Recipe,
    role: &'a Role,
    connector: &'static Connector,
    endpoint: &'a Endpoint,
) -> Result<EndpointPlan<'a>, Problem> {
    let shape = shape(role, endpoint)?;
    let dp = sizes(role)?.dp;
    let address = format!("worker.{}[{}]", role.kind.name(), endpoint.index);
    let leader = endpoint.leader();
    let err = port_problem(role);
    let is_dp = matches!(shape, Shape::DpLocal { .. } | Shape::DpSpanning);
    let dp_rpc = match is_dp {
        true => Some(
            ctx.allocate(&DP_RPC, leader, 1, &address)
                .map_err(&err)?
                .base,
        ),
        false => None,
    };
    let master = match shape {
        Shape::MultiNode | Shape::DpSpanning => Some(
            ctx.allocate(&MASTER, leader, 1, &address)
                .map_err(&err)?
                .base,
        ),
        _ => None,
    };
    let include_kv = includes_kv(role);
    // A hand-written NIXL config (connector `none`) gets the side channel as the `nixl`
    // row does.
    let own_config = super::connector::own_config(connector, role);
    let nixl = if (connector.side_channel && include_kv) || own_config {
        Some(nixl_run(ctx, endpoint, shape, dp, &address).map_err(&err)?)
    } else {
        None
    };
    Ok(EndpointPlan {
        recipe,
        role,
        connector,
        endpoint,
        shape,
        leader_ip: ctx.node_ip(leader),
        address,
        include_kv,
        dp_rpc,
        master,
        nixl,
        feature_flags: Vec::new(),
        wrapper: None,
        kv_events: kv_events::config(recipe, role.kind, &KV_EVENT_DEFAULTS),
    })
}

/// Where the engine cores of an endpoint's DP ranks run, and so which node binds which
/// ports of its side-channel run: a hybrid-LB endpoint runs `local_dp` ranks on every
/// node; DP replicas spanning nodes run rank `d` on the first node of replica `d` (vLLM
/// `run_headless`: a node whose `node_rank_within_dp` is 0 starts the engine core of the
/// DP rank inferred from its `--node-rank`); otherwise the leader runs the only rank.
fn nixl_run(
    ctx: &mut BuildContext<'_>,
    endpoint: &Endpoint,
    shape: Shape,
    dp: u32,
    address: &str,
) -> Result<NixlRun, PortError> {
    let nodes = endpoint.nodes.len();
    let ranks: Vec<u16> = match shape {
        Shape::DpLocal { local_dp } => vec![local_dp as u16; nodes],
        Shape::DpSpanning => {
            let per = nodes / dp as usize;
            (0..nodes)
                .map(|r| u16::from(r.is_multiple_of(per)))
                .collect()
        }
        Shape::Single | Shape::MultiNode => {
            let mut v = vec![0; nodes];
            v[0] = dp as u16;
            v
        }
    };
    // A run bound by the leader alone is the endpoint's, as before; parts bound on
    // several nodes are owned by the process of each node.
    let owners: Vec<String> = match shape {
        Shape::Single | Shape::MultiNode => vec![address.to_string(); nodes],
        _ => (0..nodes).map(|r| format!("{address}.node[{r}]")).collect(),
    };
    let parts: Vec<(usize, u16, &str)> = endpoint
        .nodes
        .iter()
        .zip(&ranks)
        .zip(&owners)
        .filter(|((_, &n), _)| n > 0)
        .map(|((&node, &n), owner)| (node, n, owner.as_str()))
        .collect();
    let blocks = ctx.allocate_run(&NIXL, &parts)?;
    let mut blocks = blocks.into_iter();
    let by_rank = ranks
        .iter()
        .map(|&n| if n > 0 { blocks.next() } else { None })
        .collect::<Vec<_>>();
    let base = by_rank
        .iter()
        .flatten()
        .next()
        .map(|b| b.base)
        .expect("an endpoint has at least one DP rank");
    Ok(NixlRun { base, by_rank })
}

/// The process of the endpoint on its `rank`-th node.
fn node_process(
    engine: &Vllm,
    ctx: &mut BuildContext<'_>,
    plan: &EndpointPlan<'_>,
    rank: u32,
    node: usize,
) -> Result<LaunchProcess, Problem> {
    let address = format!("{}.node[{rank}]", plan.address);
    let ip = ctx.node_ip(node);
    // Every node of a hybrid-LB endpoint runs an API server, else only the leader; under
    // a runtime the wrapper serves through the runtime, not over HTTP.
    let serves = matches!(plan.shape, Shape::DpLocal { .. }) || rank == 0;
    let serves_http = plan.wrapper.is_none() && serves;
    let local_dp = match plan.shape {
        Shape::DpLocal { local_dp } => local_dp,
        _ => 1,
    };
    let err = port_problem(plan.role);
    let mut ports = BTreeMap::new();
    let http = match serves_http {
        true => {
            let b = ctx.allocate(&HTTP, node, 1, &address).map_err(&err)?;
            ports.insert(HTTP.name.to_string(), b);
            Some(b.base)
        }
        false => None,
    };
    let own_nixl = plan.nixl.as_ref().and_then(|n| n.by_rank[rank as usize]);
    if let Some(own) = own_nixl {
        ports.insert(NIXL.name.to_string(), own);
    }
    let bootstrap_port = own_nixl.map(|b| b.base);
    for (kind, port) in [(&DP_RPC, plan.dp_rpc), (&MASTER, plan.master)] {
        if let Some(p) = port.filter(|_| rank == 0) {
            ports.insert(kind.name.to_string(), PortBlock { base: p, count: 1 });
        }
    }
    let mut rank_blocks = Vec::new();
    for kind in plan.connector.rank_listeners {
        let count = plan.endpoint.gpu_indices.len() as u16;
        let b = ctx.allocate(kind, node, count, &address).map_err(&err)?;
        ports.insert(kind.name.to_string(), b);
        rank_blocks.push(b.base);
    }
    let mut env = BTreeMap::new();
    let mut env_unset = Vec::new();
    env.insert("HEAD_NODE_IP".to_string(), ctx.node_ip(0));
    if let Some(run) = &plan.nixl {
        env.insert("VLLM_NIXL_SIDE_CHANNEL_HOST".into(), ip.clone());
        env.insert("VLLM_NIXL_SIDE_CHANNEL_PORT".into(), run.base.to_string());
    }
    if plan.connector.vllm_port && plan.endpoint.nodes.len() == 1 {
        let b = ctx.allocate(&VLLM_SCAN, node, 1, &address).map_err(&err)?;
        ports.insert(VLLM_SCAN.name.to_string(), b);
        env.insert("VLLM_PORT".into(), b.base.to_string());
    } else {
        // Several TP ranks (or connector listeners in TP children) inheriting one scan
        // base would race for the same ports: vLLM takes ephemeral ones instead.
        env_unset.push("VLLM_PORT".to_string());
    }
    // vLLM publishes one DP rank's events on the endpoint's port plus its rank, and
    // `dynamo.vllm` reads the base from DYN_VLLM_KV_EVENT_PORT (srtctl sets both).
    let kv_events = match &plan.kv_events {
        Some(config) => {
            let (flag, port) =
                kv_events::publisher(ctx, config, (node, local_dp as u16), &address, &mut ports)
                    .map_err(&err)?;
            env.insert("DYN_VLLM_KV_EVENT_PORT".into(), port.to_string());
            Some(flag)
        }
        None => None,
    };
    env.extend(plan.role.env.iter().map(|(k, v)| (k.clone(), v.clone())));
    let listeners = WorkerListeners {
        http_port: http,
        host_ip: &ip,
        rank_blocks,
        discovery: ctx.discovery(),
    };
    let argv = argv(
        engine,
        ctx,
        plan,
        (rank, serves),
        (node, http),
        &listeners,
        kv_events,
    )?;
    let depends_on = match rank {
        0 => Vec::new(),
        _ => vec![format!("{}.node[0]", plan.address)],
    };
    Ok(LaunchProcess {
        address,
        kind: ProcessKind::Worker,
        node,
        devices: ctx.host_devices(node, &plan.endpoint.gpu_indices),
        ports,
        env,
        env_unset,
        argv,
        files: BTreeMap::new(),
        depends_on,
        watches: Default::default(),
        worker: Some(WorkerInfo {
            role: plan.role.kind,
            endpoint: plan.endpoint.index,
            node_rank: rank,
            advertised_url: http.map(|p| format!("http://{ip}:{p}")),
            local_dp,
            bootstrap_port: match plan.wrapper {
                Some(_) => bootstrap_port.filter(|_| rank == 0),
                None => bootstrap_port.filter(|_| serves_http),
            },
            kv_connector: plan.connector.kv_connector,
            headless: !serves,
            health: None,
            simulated: None,
        }),
        wrap: Default::default(),
        ranks: None,
        container_image: ctx.model().container.clone(),
    })
}

/// `vllm serve <model>`, the managed placement flags, then the recipe's args with the
/// managed engine flags (`--served-model-name`, `--kv-transfer-config`), sorted by
/// name and rendered as the catalog of `engine.version` says vLLM reads them.
fn argv(
    engine: &Vllm,
    ctx: &BuildContext<'_>,
    plan: &EndpointPlan<'_>,
    (rank, serves): (u32, bool),
    (node, http): (usize, Option<u16>),
    listeners: &WorkerListeners<'_>,
    kv_events: Option<ArgValue>,
) -> Result<Argv, Problem> {
    let recipe = plan.recipe;
    let mut argv = Argv::new();
    match plan.wrapper {
        // The wrapper hands vLLM's own parser what its parsers leave: the model is a flag.
        Some(w) => {
            argv.extend(w.program.iter().copied());
            argv.extend(["--model", &ctx.model().path.value]);
        }
        None => {
            argv.push(super::keys::serve_binary(recipe).unwrap_or("vllm"));
            argv.push("serve");
            argv.push(&ctx.model().path.value);
        }
    }
    if let Some(port) = http {
        argv.extend(["--host", "0.0.0.0", "--port", &port.to_string()]);
    }
    let nodes = plan.endpoint.nodes.len().to_string();
    let rendezvous = |argv: &mut Argv| {
        argv.extend([
            "--master-addr",
            &plan.leader_ip,
            "--master-port",
            &plan.master.unwrap_or_default().to_string(),
            "--nnodes",
            &nodes,
            "--node-rank",
            &rank.to_string(),
        ]);
    };
    let dp_address = |argv: &mut Argv| {
        argv.extend([
            "--data-parallel-address",
            &plan.leader_ip,
            "--data-parallel-rpc-port",
            &plan.dp_rpc.unwrap_or_default().to_string(),
        ]);
    };
    match plan.shape {
        Shape::Single => {}
        Shape::MultiNode => rendezvous(&mut argv),
        Shape::DpLocal { local_dp } => {
            argv.extend([
                "--data-parallel-size-local",
                &local_dp.to_string(),
                "--data-parallel-start-rank",
                &(rank * local_dp).to_string(),
            ]);
            dp_address(&mut argv);
            argv.push("--data-parallel-hybrid-lb");
        }
        Shape::DpSpanning => {
            rendezvous(&mut argv);
            dp_address(&mut argv);
        }
    }
    // vLLM's `--headless`, or the wrapper's own (`dynamo.vllm` then runs vLLM headless
    // and registers nothing).
    if !serves {
        argv.push("--headless");
    }
    let devices: Vec<String> = ctx
        .host_devices(node, &plan.endpoint.gpu_indices)
        .iter()
        .map(u32::to_string)
        .collect();
    argv.extend(["--device-ids", &devices.join(",")]);
    let mut flags: Vec<(String, ArgValue)> = plan
        .role
        .args
        .0
        .iter()
        .filter(|a| !(http.is_none() && a.key == "api-server-count"))
        .map(|a| (a.key.clone(), a.value.clone()))
        .collect();
    // The features concern what the API server answers: a headless process has none.
    for (flag, value) in plan.feature_flags.iter().filter(|_| http.is_some()) {
        if !flags.iter().any(|(k, _)| k == flag) {
            flags.push((flag.clone(), value.clone()));
        }
    }
    if !flags.iter().any(|(k, _)| k == "served-model-name") {
        let name = ArgValue::Str(ctx.model().served_name.clone());
        flags.push(("served-model-name".into(), name));
    }
    flags.extend(kv_events.map(|c| ("kv-events-config".to_string(), c)));
    if plan.include_kv {
        let config = plan
            .connector
            .kv_transfer_config(plan.role.kind, Some(listeners))
            .map_err(|msg| {
                Problem::new("srt::recipe::connector_topology", plan.role.span, msg)
                    .label("this role's workers")
            })?;
        if let Some(config) = config {
            flags.push(("kv-transfer-config".into(), ArgValue::Json(config)));
        }
    }
    flags.sort_by(|a, b| a.0.cmp(&b.0));
    let catalog = engine
        .catalog(super::keys::version(recipe).map(|v| v.value))
        .ok();
    ctx.render_flags(catalog, flags, &mut argv);
    Ok(argv)
}
