//! One SGLang endpoint's processes: one server per node (`python3 -m
//! sglang.launch_server`), every port it binds from the allocator, its GPUs by device
//! visibility.
//!
//! Ports (SGLang 0.5.23, `docs/sglang-notes.md`): every node serves HTTP on `--port`
//! (the leader its API, the others SGLang's stand-in health server) and gets its own
//! `--nccl-port` (SGLang's own pick of a free one races between workers on a node, as
//! srtctl found). A worker spanning nodes, or one with attention DP, gets
//! `--dist-init-addr` on its leader: the torch store's port and the six ports SGLang
//! derives from it for attention DP (otherwise it would take `--port + 233` and up,
//! which nothing allocated). A prefill's leader serves the bootstrap rendezvous on
//! `--disaggregation-bootstrap-port`. Under a runtime's wrapper (`python3 -m
//! dynamo.sglang`) the command is the same after the program: the wrapper hands SGLang
//! its flags, and SGLang still binds what they name but `--port` (its engine runs
//! without the HTTP server; the port stays the base of what SGLang derives from it).

use super::connector::Connector;
use super::shape::Sizes;
use super::{BOOTSTRAP, DIST_INIT, NCCL, PROGRAM};
use crate::engine::Wrapper;
use crate::launch::{Argv, BuildContext, LaunchProcess, Probe, ProcessKind, WorkerInfo};
use crate::ports::{PortBlock, PortError, HTTP};
use crate::recipe::diag::Problem;
use crate::recipe::{ArgValue, Role, RoleKind};
use crate::topology::Endpoint;
use std::collections::BTreeMap;

/// What every process of an endpoint shares.
pub(super) struct EndpointPlan<'a> {
    pub role: &'a Role,
    pub endpoint: &'a Endpoint,
    pub sizes: Sizes,
    /// The backend of a prefill/decode role.
    pub connector: Option<&'static Connector>,
    /// The runtime wrapper the workers run as, when a frontend's runtime hosts them.
    pub wrapper: Option<&'static Wrapper>,
    /// The catalog its flags are rendered by.
    pub catalog: &'static crate::catalog::Catalog,
    /// The KV-event publisher config of its workers (without the endpoint), when they
    /// publish ([`crate::engine::kv_events`]).
    pub kv_events: Option<serde_json::Map<String, serde_json::Value>>,
}

fn port_problem(role: &Role) -> impl Fn(PortError) -> Problem + '_ {
    move |e| {
        Problem::new("srt::recipe::ports", role.span, e.to_string())
            .label("while allocating this role's ports")
    }
}

/// The ports the endpoint's leader holds for all of its nodes.
struct Shared {
    /// `--dist-init-addr`'s port and the six SGLang derives from it.
    dist_init: Option<PortBlock>,
    /// A prefill's bootstrap server.
    bootstrap: Option<PortBlock>,
}

/// The processes of the endpoint, one per node.
pub(super) fn endpoint_processes(
    ctx: &mut BuildContext<'_>,
    plan: &EndpointPlan<'_>,
) -> Result<Vec<LaunchProcess>, Problem> {
    let address = format!("worker.{}[{}]", plan.role.kind.name(), plan.endpoint.index);
    let leader = plan.endpoint.leader();
    let err = port_problem(plan.role);
    let spans = plan.endpoint.nodes.len() > 1;
    let dist_init = match spans || plan.sizes.attn_dp > 1 {
        true => Some(
            ctx.allocate(&DIST_INIT, leader, 1, &address)
                .map_err(&err)?,
        ),
        false => None,
    };
    let bootstrap = match plan.role.kind {
        RoleKind::Prefill => Some(
            ctx.allocate(&BOOTSTRAP, leader, 1, &address)
                .map_err(&err)?,
        ),
        _ => None,
    };
    let shared = Shared {
        dist_init,
        bootstrap,
    };
    plan.endpoint
        .nodes
        .iter()
        .enumerate()
        .map(|(rank, &node)| node_process(ctx, plan, &shared, (&address, rank as u32), node))
        .collect()
}

/// The process of the endpoint on its `rank`-th node.
fn node_process(
    ctx: &mut BuildContext<'_>,
    plan: &EndpointPlan<'_>,
    shared: &Shared,
    (endpoint, rank): (&str, u32),
    node: usize,
) -> Result<LaunchProcess, Problem> {
    let address = format!("{endpoint}.node[{rank}]");
    let err = port_problem(plan.role);
    let http = ctx.allocate(&HTTP, node, 1, &address).map_err(&err)?;
    let nccl = ctx.allocate(&NCCL, node, 1, &address).map_err(&err)?;
    let mut ports = BTreeMap::from([(HTTP.name.to_string(), http), (NCCL.name.to_string(), nccl)]);
    let kv_events = match &plan.kv_events {
        Some(config) => {
            let (flag, _) =
                crate::engine::kv_events::publisher(ctx, config, (node, 1), &address, &mut ports)
                    .map_err(&err)?;
            Some(flag)
        }
        None => None,
    };
    if rank == 0 {
        for (kind, block) in [
            (&DIST_INIT, shared.dist_init),
            (&BOOTSTRAP, shared.bootstrap),
        ] {
            if let Some(b) = block {
                ports.insert(kind.name.to_string(), b);
            }
        }
    }
    let devices = ctx.host_devices(node, &plan.endpoint.gpu_indices);
    let visible: Vec<String> = devices.iter().map(u32::to_string).collect();
    let mut env = BTreeMap::from([("CUDA_VISIBLE_DEVICES".to_string(), visible.join(","))]);
    env.extend(plan.role.env.iter().map(|(k, v)| (k.clone(), v.clone())));
    let argv = argv(ctx, plan, shared, rank, (http.base, nccl.base), kv_events);
    let url = format!("http://{}:{}", ctx.node_ip(node), http.base);
    let leads = rank == 0;
    // A runtime's wrapper runs SGLang's engine without its HTTP server: the leader
    // serves through the runtime, and a follower serves no stand-in health server
    // (`dynamo.sglang` starts the engine with SGLANG_BLOCK_NONZERO_RANK_CHILDREN=0,
    // which returns before SGLang starts one), so only its liveness tells.
    let serves_http = plan.wrapper.is_none();
    Ok(LaunchProcess {
        address,
        kind: ProcessKind::Worker,
        node,
        devices,
        ports,
        env,
        env_unset: Vec::new(),
        argv,
        files: BTreeMap::new(),
        depends_on: match leads {
            true => Vec::new(),
            false => vec![format!("{endpoint}.node[0]")],
        },
        watches: Default::default(),
        worker: Some(WorkerInfo {
            role: plan.role.kind,
            endpoint: plan.endpoint.index,
            node_rank: rank,
            advertised_url: (leads && serves_http).then(|| url.clone()),
            local_dp: plan.sizes.ranks(),
            bootstrap_port: shared.bootstrap.filter(|_| leads).map(|b| b.base),
            kv_connector: None,
            headless: !leads,
            // A follower serves SGLang's stand-in health server on its own port.
            health: (!leads && serves_http).then(|| Probe::Http {
                urls: vec![url],
                path: "/health".into(),
            }),
            simulated: None,
        }),
        wrap: Default::default(),
        ranks: None,
        container_image: ctx.model().container.clone(),
    })
}

/// The program (or the runtime's wrapper), the flags srt derives, then the recipe's args
/// with the served name, sorted and rendered as SGLang's parser reads them.
fn argv(
    ctx: &BuildContext<'_>,
    plan: &EndpointPlan<'_>,
    shared: &Shared,
    rank: u32,
    (http, nccl): (u16, u16),
    kv_events: Option<ArgValue>,
) -> Argv {
    let program = plan.wrapper.map_or(PROGRAM, |w| w.program);
    let mut argv: Argv = program.iter().collect();
    argv.extend(["--model-path", &ctx.model().path.value]);
    argv.extend(["--host", "0.0.0.0", "--port", &http.to_string()]);
    argv.extend(["--nccl-port", &nccl.to_string()]);
    if let Some(d) = shared.dist_init {
        let leader_ip = ctx.node_ip(plan.endpoint.leader());
        argv.extend(["--dist-init-addr", &format!("{leader_ip}:{}", d.base)]);
    }
    let nodes = plan.endpoint.nodes.len();
    if nodes > 1 {
        argv.extend([
            "--nnodes",
            &nodes.to_string(),
            "--node-rank",
            &rank.to_string(),
        ]);
    }
    if let Some(c) = plan.connector {
        argv.extend(["--disaggregation-mode", plan.role.kind.name()]);
        argv.extend(["--disaggregation-transfer-backend", c.backend]);
    }
    if let Some(b) = shared.bootstrap {
        argv.extend(["--disaggregation-bootstrap-port", &b.base.to_string()]);
    }
    let mut flags: Vec<(String, ArgValue)> = plan
        .role
        .args
        .0
        .iter()
        .map(|a| (a.key.clone(), a.value.clone()))
        .collect();
    if !flags.iter().any(|(k, _)| k == "served-model-name") {
        let name = ArgValue::Str(ctx.model().served_name.clone());
        flags.push(("served-model-name".into(), name));
    }
    flags.extend(kv_events.map(|c| ("kv-events-config".to_string(), c)));
    flags.sort_by(|a, b| a.0.cmp(&b.0));
    ctx.render_flags(Some(plan.catalog), flags, &mut argv);
    argv
}
