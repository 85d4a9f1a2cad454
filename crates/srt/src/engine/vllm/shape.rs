//! The shape of a vLLM endpoint: how its GPUs split into replicas and DP ranks, and so
//! how many processes it runs and which of them serve HTTP (srtctl's vLLM backend):
//!
//! - no DP, one node: one API server ([`Shape::Single`]);
//! - no DP, a replica spanning nodes: one process per node with a `--master-addr`
//!   rendezvous; only the leader serves HTTP, the others are `--headless`
//!   ([`Shape::MultiNode`]);
//! - DP `per_node`, node-local replicas: one hybrid-LB API server per node
//!   ([`Shape::DpLocal`]);
//! - DP `per_node`, replicas spanning nodes: vLLM's native multi-node topology, only the
//!   global leader is routable ([`Shape::DpSpanning`]).
//!
//! A worker of one node may be given more GPUs than its sizes use: vLLM runs on the first
//! ones of its `--device-ids` and leaves the others idle (srtctl's single-node sweeps do
//! this; srt says so with a warning). Every other GPU count that the parallel sizes do
//! not use exactly is refused.

use crate::recipe::diag::Problem;
use crate::recipe::{ArgValue, Role};
use crate::topology::Endpoint;

/// The shape of one endpoint's processes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Shape {
    /// One API server.
    Single,
    /// A replica spanning nodes: the leader serves HTTP, the others are headless.
    MultiNode,
    /// Node-local DP replicas: one hybrid-LB API server per node.
    DpLocal {
        /// DP ranks per node.
        local_dp: u32,
    },
    /// DP replicas spanning nodes: only the global leader serves HTTP.
    DpSpanning,
}

/// A role's parallel sizes.
pub(super) struct Sizes {
    /// GPUs per replica: tensor x pipeline x prefill-context parallel size.
    pub(super) replica: u32,
    /// Data-parallel size.
    pub(super) dp: u32,
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

pub(super) fn sizes(role: &Role) -> Result<Sizes, Problem> {
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

pub(super) fn shape(role: &Role, endpoint: &Endpoint) -> Result<Shape, Problem> {
    let s = sizes(role)?;
    let local = endpoint.gpu_indices.len() as u32;
    let nodes = endpoint.nodes.len() as u32;
    let total = endpoint.total_gpus();
    let name = role.kind.name();
    if s.dp > 1 {
        if nodes == 1 && s.dp * s.replica < total {
            // Idle GPUs, said by `idle_gpus`: every rank is local.
            return Ok(Shape::DpLocal { local_dp: s.dp });
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
            .misfit()
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
                .label("uneven replicas per node")
                .misfit());
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
            .label("replicas do not tile the nodes")
            .misfit());
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
        .label("replica larger than the worker")
        .misfit());
    }
    if s.replica < total && nodes > 1 {
        return Err(Problem::new(
            "srt::recipe::parallel_size",
            span_of_sizes(role),
            format!(
                "each `{name}` worker spans {nodes} nodes ({total} GPUs) but its replica uses {} (tensor x pipeline x prefill-context parallel size): a replica that does not span them leaves nodes idle",
                s.replica
            ),
        )
        .label("parallel sizes do not use the worker's GPUs")
        .misfit()
        .help(format!(
            "set `gpus: {}` on the role, or make tensor-parallel-size x pipeline-parallel-size (or data-parallel-size) cover {total} GPUs",
            s.replica
        )));
    }
    if nodes == 1 {
        return Ok(Shape::Single);
    }
    Ok(Shape::MultiNode)
}

/// The GPUs the sizes use on a worker whose shape fits `endpoint` (see
/// [`crate::engine::Engine::gpus_used`]).
pub(super) fn gpus_used(role: &Role, endpoint: &Endpoint) -> Option<u32> {
    shape(role, endpoint).ok()?;
    sizes(role).ok().map(|s| s.replica * s.dp)
}
