//! vLLM: `vllm serve` workers, their rank/rendezvous flags, ports and environment.
//!
//! Topology rules (srtctl's vLLM backend):
//! - no DP, one node: one API server;
//! - no DP, a replica spanning nodes: one process per node with a `--master-addr`
//!   rendezvous; only the leader serves HTTP, the others are `--headless`;
//! - DP `per_node`, node-local replicas: one hybrid-LB API server per node with
//!   `--data-parallel-size-local/-start-rank/-address/-rpc-port --data-parallel-hybrid-lb`;
//! - DP `per_node`, replicas spanning nodes: vLLM's native multi-node topology, only the
//!   global leader is routable.

use super::connector::{Connector, WorkerListeners};
use super::Engine;
use crate::launch::build::Ctx;
use crate::launch::{node_ip, LaunchProcess, ProcessKind, WorkerInfo};
use crate::ports::{PortBlock, DP_RPC, HTTP, MASTER, NIXL, VLLM_SCAN};
use crate::recipe::diag::Problem;
use crate::recipe::{ArgValue, DpLaunchMode, Role, RoleKind};
use crate::topology::Endpoint;
use std::collections::BTreeMap;

/// The vLLM engine.
pub struct Vllm;

const MANAGED_FLAGS: &[&str] = &[
    "host",
    "port",
    "headless",
    "master-addr",
    "master-port",
    "nnodes",
    "node-rank",
    "data-parallel-size-local",
    "data-parallel-start-rank",
    "data-parallel-address",
    "data-parallel-rpc-port",
    "data-parallel-hybrid-lb",
    "data-parallel-rank",
    "device-ids",
];

const MANAGED_ENV: &[&str] = &[
    "HEAD_NODE_IP",
    "VLLM_PORT",
    "VLLM_NIXL_SIDE_CHANNEL_HOST",
    "VLLM_NIXL_SIDE_CHANNEL_PORT",
];

/// The shape of one endpoint's processes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Shape {
    Single,
    MultiNode,
    DpLocal { local_dp: u32 },
    DpSpanning,
}

struct Sizes {
    replica: u32,
    dp: u32,
}

fn positive(role: &Role, key: &str) -> Result<u32, Problem> {
    let Some(arg) = role.args.get(key) else {
        return Ok(1);
    };
    match &arg.value {
        ArgValue::Int(v) if *v >= 1 && *v <= 1 << 20 => Ok(*v as u32),
        _ => Err(Problem::new(
            "srt::recipe::parallel_size",
            arg.value_span,
            format!(
                "`roles.{}.args.{key}` must be a positive integer",
                role.kind.name()
            ),
        )
        .label("expected a positive integer")),
    }
}

fn sizes(role: &Role) -> Result<Sizes, Problem> {
    let tp = positive(role, "tensor-parallel-size")?;
    let pp = positive(role, "pipeline-parallel-size")?;
    let pcp = positive(role, "prefill-context-parallel-size")?;
    let dp = positive(role, "data-parallel-size")?;
    Ok(Sizes {
        replica: tp * pp * pcp,
        dp,
    })
}

fn span_of_sizes(role: &Role) -> miette::SourceSpan {
    [
        "data-parallel-size",
        "tensor-parallel-size",
        "pipeline-parallel-size",
    ]
    .iter()
    .find_map(|k| role.args.get(k).map(|a| a.key_span))
    .or(role.gpus.as_ref().map(|g| g.span))
    .unwrap_or(role.span)
}

fn shape(ctx: &Ctx<'_>, role: &Role, endpoint: &Endpoint) -> Result<Shape, Problem> {
    let s = sizes(role)?;
    let local = endpoint.gpu_indices.len() as u32;
    let nodes = endpoint.nodes.len() as u32;
    let total = endpoint.total_gpus();
    let name = role.kind.name();
    if s.dp > 1 {
        if ctx.recipe.engine.dp_launch_mode.value == DpLaunchMode::PerGpu {
            return Err(Problem::new(
                "srt::recipe::dp_launch_mode",
                ctx.recipe.engine.dp_launch_mode.span,
                "`dp_launch_mode: per_gpu` is deprecated and not supported by srt",
            )
            .label("per_gpu")
            .help("use `per_node` (the default): one hybrid-LB API server per node"));
        }
        if s.dp * s.replica != total {
            return Err(Problem::new(
                "srt::recipe::dp_gpus",
                span_of_sizes(role),
                format!(
                    "data-parallel-size {} x replica size {} = {} GPUs, but each `{name}` worker has {total}",
                    s.dp,
                    s.replica,
                    s.dp * s.replica
                ),
            )
            .label("DP x TP x PP does not match the worker's GPUs")
            .help("make data-parallel-size x tensor-parallel-size x pipeline-parallel-size equal the GPUs per worker"));
        }
        if s.replica <= local {
            if !local.is_multiple_of(s.replica) {
                return Err(Problem::new(
                    "srt::recipe::dp_gpus",
                    span_of_sizes(role),
                    format!(
                        "a replica of {} GPUs does not divide the {local} GPUs per node",
                        s.replica
                    ),
                )
                .label("uneven replicas per node"));
            }
            return Ok(Shape::DpLocal {
                local_dp: local / s.replica,
            });
        }
        if !s.replica.is_multiple_of(local) || nodes != s.dp * (s.replica / local) {
            return Err(Problem::new(
                "srt::recipe::dp_gpus",
                span_of_sizes(role),
                format!(
                    "replicas of {} GPUs spanning nodes of {local} GPUs need {} nodes per worker",
                    s.replica,
                    s.dp * s.replica.div_ceil(local)
                ),
            )
            .label("replicas do not tile the nodes"));
        }
        return Ok(Shape::DpSpanning);
    }
    if s.replica > total {
        return Err(Problem::new(
            "srt::recipe::parallel_size",
            span_of_sizes(role),
            format!(
                "a replica of {} GPUs does not fit a `{name}` worker of {total} GPUs",
                s.replica
            ),
        )
        .label("replica larger than the worker"));
    }
    if nodes == 1 {
        return Ok(Shape::Single);
    }
    if s.replica != total {
        return Err(Problem::new(
            "srt::recipe::parallel_size",
            span_of_sizes(role),
            format!(
                "each `{name}` worker spans {nodes} nodes ({total} GPUs) but its replica uses only {} GPUs",
                s.replica
            ),
        )
        .label("replica does not span the worker's nodes")
        .help("set tensor-parallel-size x pipeline-parallel-size to the worker's GPUs, or use data-parallel-size"));
    }
    Ok(Shape::MultiNode)
}

impl Engine for Vllm {
    fn name(&self) -> &'static str {
        "vllm"
    }

    fn managed_flags(&self) -> &'static [&'static str] {
        MANAGED_FLAGS
    }

    fn managed_env(&self) -> &'static [&'static str] {
        MANAGED_ENV
    }

    fn validate_role(&self, _ctx: &Ctx<'_>, role: &Role, problems: &mut Vec<Problem>) {
        if let Err(p) = sizes(role) {
            problems.push(p);
        }
    }

    fn worker_processes(
        &self,
        ctx: &mut Ctx<'_>,
        role: &Role,
        connector: &'static Connector,
        endpoint: &Endpoint,
    ) -> Result<Vec<LaunchProcess>, Problem> {
        let shape = shape(ctx, role, endpoint)?;
        let dp = sizes(role)?.dp;
        let ep_addr = format!("worker.{}[{}]", role.kind.name(), endpoint.index);
        let leader = endpoint.leader();
        let leader_ip = node_ip(leader);
        let leader_host = ctx.host(leader).to_string();
        let port_err = |e: crate::ports::PortError| {
            Problem::new("srt::recipe::ports", role.span, e.to_string())
                .label("while allocating this role's ports")
        };
        let multi_node = endpoint.nodes.len() > 1;
        let is_dp = matches!(shape, Shape::DpLocal { .. } | Shape::DpSpanning);
        // Endpoint-wide ports, allocated once on the leader.
        let dp_rpc = if is_dp {
            Some(
                ctx.alloc
                    .allocate(&DP_RPC, &leader_host, 1, &ep_addr)
                    .map_err(port_err)?
                    .base,
            )
        } else {
            None
        };
        let master = if matches!(shape, Shape::MultiNode | Shape::DpSpanning) {
            Some(
                ctx.alloc
                    .allocate(&MASTER, &leader_host, 1, &ep_addr)
                    .map_err(port_err)?
                    .base,
            )
        } else {
            None
        };
        // The side channels: one run of `dp` ports (vLLM offsets the env base by the
        // global DP rank). A hybrid-LB endpoint binds its ranks on every node, so each
        // node's share is leased on that node; otherwise the leader binds them all.
        // Only workers that get the connector's config open a side channel: an agg role
        // without an explicit connector gets neither.
        let include_kv = role.kind != RoleKind::Agg || role.connector.is_some();
        let nixl = if connector.side_channel && include_kv {
            let parts: Vec<(String, u16, String)> = match shape {
                Shape::DpLocal { local_dp } => endpoint
                    .nodes
                    .iter()
                    .enumerate()
                    .map(|(rank, &node)| {
                        (
                            ctx.host(node).to_string(),
                            local_dp as u16,
                            format!("{ep_addr}.node[{rank}]"),
                        )
                    })
                    .collect(),
                _ => vec![(leader_host.clone(), dp as u16, ep_addr.clone())],
            };
            let parts: Vec<(&str, u16, &str)> = parts
                .iter()
                .map(|(h, c, o)| (h.as_str(), *c, o.as_str()))
                .collect();
            Some(ctx.alloc.allocate_split(&NIXL, &parts).map_err(port_err)?)
        } else {
            None
        };
        let nixl_base = nixl.as_ref().map(|blocks| blocks[0].base);
        let mut out = Vec::new();
        for (rank, &node) in endpoint.nodes.iter().enumerate() {
            let rank = rank as u32;
            let address = format!("{ep_addr}.node[{rank}]");
            let host = ctx.host(node).to_string();
            let ip = node_ip(node);
            let serves_http = match shape {
                Shape::DpLocal { .. } => true,
                _ => rank == 0,
            };
            let local_dp = match shape {
                Shape::DpLocal { local_dp } => local_dp,
                _ => 1,
            };
            let mut ports = BTreeMap::new();
            let http = if serves_http {
                let b = ctx
                    .alloc
                    .allocate(&HTTP, &host, 1, &address)
                    .map_err(port_err)?;
                ports.insert(HTTP.name.to_string(), b);
                Some(b.base)
            } else {
                None
            };
            // The DP ranks this process hosts, and the side-channel ports they bind.
            let start_rank = match shape {
                Shape::DpLocal { local_dp } => rank * local_dp,
                _ => 0,
            };
            let bootstrap_port = match (&nixl, shape) {
                (Some(blocks), Shape::DpLocal { .. }) => {
                    let own = blocks[rank as usize];
                    ports.insert(NIXL.name.to_string(), own);
                    Some(own.base)
                }
                (Some(blocks), _) if rank == 0 => {
                    ports.insert(NIXL.name.to_string(), blocks[0]);
                    Some(blocks[0].base)
                }
                _ => None,
            };
            if let Some(p) = dp_rpc.filter(|_| rank == 0) {
                ports.insert(DP_RPC.name.to_string(), PortBlock { base: p, count: 1 });
            }
            if let Some(p) = master.filter(|_| rank == 0) {
                ports.insert(MASTER.name.to_string(), PortBlock { base: p, count: 1 });
            }
            let mut rank_blocks = Vec::new();
            for kind in connector.rank_listeners {
                let b = ctx
                    .alloc
                    .allocate(kind, &host, endpoint.gpu_indices.len() as u16, &address)
                    .map_err(port_err)?;
                ports.insert(kind.name.to_string(), b);
                rank_blocks.push(b.base);
            }
            let mut env = BTreeMap::new();
            let mut env_unset = Vec::new();
            env.insert("HEAD_NODE_IP".to_string(), node_ip(0));
            if let Some(base) = nixl_base {
                env.insert("VLLM_NIXL_SIDE_CHANNEL_HOST".into(), ip.clone());
                env.insert("VLLM_NIXL_SIDE_CHANNEL_PORT".into(), base.to_string());
            }
            if connector.vllm_port && !multi_node {
                let b = ctx
                    .alloc
                    .allocate(&VLLM_SCAN, &host, 1, &address)
                    .map_err(port_err)?;
                ports.insert(VLLM_SCAN.name.to_string(), b);
                env.insert("VLLM_PORT".into(), b.base.to_string());
            } else {
                env_unset.push("VLLM_PORT".to_string());
            }
            for (k, v) in &role.env {
                env.insert(k.clone(), v.clone());
            }

            let mut argv = vec![
                ctx.recipe.engine.serve_binary.clone(),
                "serve".to_string(),
                ctx.recipe.model.path.value.clone(),
            ];
            if let Some(port) = http {
                argv.extend([
                    "--host".into(),
                    "0.0.0.0".into(),
                    "--port".into(),
                    port.to_string(),
                ]);
            }
            let n = endpoint.nodes.len();
            match shape {
                Shape::Single => {}
                Shape::MultiNode => {
                    push_rendezvous(&mut argv, &leader_ip, master, n, rank);
                }
                Shape::DpLocal { local_dp } => {
                    argv.extend([
                        "--data-parallel-size-local".into(),
                        local_dp.to_string(),
                        "--data-parallel-start-rank".into(),
                        start_rank.to_string(),
                        "--data-parallel-address".into(),
                        leader_ip.clone(),
                        "--data-parallel-rpc-port".into(),
                        dp_rpc.unwrap_or_default().to_string(),
                        "--data-parallel-hybrid-lb".into(),
                    ]);
                }
                Shape::DpSpanning => {
                    push_rendezvous(&mut argv, &leader_ip, master, n, rank);
                    argv.extend([
                        "--data-parallel-address".into(),
                        leader_ip.clone(),
                        "--data-parallel-rpc-port".into(),
                        dp_rpc.unwrap_or_default().to_string(),
                    ]);
                }
            }
            if http.is_none() {
                argv.push("--headless".into());
            }
            argv.push("--device-ids".into());
            argv.push(
                endpoint
                    .gpu_indices
                    .iter()
                    .map(u32::to_string)
                    .collect::<Vec<_>>()
                    .join(","),
            );
            // User args plus managed engine flags, sorted by key.
            let mut flags: Vec<(String, ArgValue)> = role
                .args
                .0
                .iter()
                .filter(|a| !(http.is_none() && a.key == "api-server-count"))
                .map(|a| (a.key.clone(), a.value.clone()))
                .collect();
            if !flags.iter().any(|(k, _)| k == "served-model-name") {
                flags.push((
                    "served-model-name".into(),
                    ArgValue::Str(ctx.recipe.model.served_name.clone()),
                ));
            }
            if include_kv {
                let listeners = WorkerListeners {
                    http_port: http,
                    host_ip: &ip,
                    rank_blocks,
                    discovery: ctx.discovery.as_ref(),
                };
                let config = connector
                    .kv_transfer_config(role.kind, Some(&listeners))
                    .map_err(|msg| {
                        Problem::new("srt::recipe::connector_topology", role.span, msg)
                            .label("this role's workers")
                    })?;
                if let Some(config) = config {
                    flags.push(("kv-transfer-config".into(), ArgValue::Json(config)));
                }
            }
            flags.sort_by(|a, b| a.0.cmp(&b.0));
            argv.extend(
                crate::recipe::Args(
                    flags
                        .into_iter()
                        .map(|(key, value)| crate::recipe::Arg {
                            key,
                            key_span: role.span,
                            value,
                            value_span: role.span,
                        })
                        .collect(),
                )
                .to_argv(),
            );

            let depends_on = if rank > 0 {
                vec![format!("{ep_addr}.node[0]")]
            } else {
                Vec::new()
            };
            out.push(LaunchProcess {
                address,
                kind: ProcessKind::Worker,
                node,
                devices: endpoint.gpu_indices.clone(),
                ports,
                env,
                env_unset,
                argv,
                files: BTreeMap::new(),
                depends_on,
                watches: Vec::new(),
                worker: Some(WorkerInfo {
                    role: role.kind,
                    endpoint: endpoint.index,
                    node_rank: rank,
                    advertised_url: http.map(|p| format!("http://{ip}:{p}")),
                    local_dp,
                    bootstrap_port: if serves_http { bootstrap_port } else { None },
                }),
                container_image: ctx.recipe.model.container.clone(),
            });
        }
        Ok(out)
    }
}

fn push_rendezvous(
    argv: &mut Vec<String>,
    leader_ip: &str,
    master: Option<u16>,
    nodes: usize,
    rank: u32,
) {
    argv.extend([
        "--master-addr".into(),
        leader_ip.to_string(),
        "--master-port".into(),
        master.unwrap_or_default().to_string(),
        "--nnodes".into(),
        nodes.to_string(),
        "--node-rank".into(),
        rank.to_string(),
    ]);
}
