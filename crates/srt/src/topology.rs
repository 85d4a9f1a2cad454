//! Endpoint allocation: which GPUs of which nodes each logical worker gets.
//!
//! Endpoints are allocated in role order prefill, decode, agg, by endpoint index, with a
//! `(node, gpu offset)` cursor that fills nodes sequentially (srtctl's
//! `allocate_endpoints`): a worker needing at least a node's GPUs takes whole nodes; a
//! smaller worker packs onto the current node or moves to the next (with
//! `resources.spread_workers`, the next worker always moves on). Before the first
//! decode worker the cursor jumps to a fresh node, unless decode is colocated, in which
//! case decode takes the prefill node's remaining GPUs, or the engine allows prefill
//! and decode to share a node (`allow_prefill_decode_colocation`), in which case decode
//! goes on from the cursor.

use crate::recipe::diag::Problem;
use crate::recipe::{Nodes, Recipe, RoleKind};

/// One logical worker of a role.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Endpoint {
    /// Its role.
    pub role: RoleKind,
    /// Index within the role.
    pub index: u32,
    /// Nodes in rank order; the first is the leader.
    pub nodes: Vec<usize>,
    /// GPU indices used on each of its nodes.
    pub gpu_indices: Vec<u32>,
}

impl Endpoint {
    /// Total GPUs of the endpoint.
    pub fn total_gpus(&self) -> u32 {
        self.nodes.len() as u32 * self.gpu_indices.len() as u32
    }

    /// The leader node.
    pub fn leader(&self) -> usize {
        self.nodes[0]
    }
}

/// The allocation result.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Topology {
    /// Nodes the deployment occupies (node indices `0..node_count`).
    pub node_count: usize,
    /// GPUs per node.
    pub gpus_per_node: u32,
    /// All endpoints in allocation order.
    pub endpoints: Vec<Endpoint>,
    /// The node of the frontend's services when the recipe gives them one of their own
    /// (`infra.etcd_nats_dedicated_node`): the one after the workers'.
    pub services_node: Option<usize>,
}

impl Topology {
    /// Endpoints of one role.
    pub fn role(&self, role: RoleKind) -> impl Iterator<Item = &Endpoint> {
        self.endpoints.iter().filter(move |e| e.role == role)
    }
}

/// GPUs per worker for a role: explicit `gpus`, else `nodes * gpus_per_node / workers`.
pub fn gpus_per_worker(recipe: &Recipe, role: &crate::recipe::Role) -> Result<u32, Problem> {
    if let Some(g) = &role.gpus {
        return Ok(g.value);
    }
    let gpn = recipe.resources.gpus_per_node.value;
    match role.nodes.value {
        Nodes::Colocate => Err(Problem::new(
            "srt::recipe::colocate_gpus",
            role.nodes.span,
            "`nodes: colocate` needs an explicit `gpus` on decode",
        )
        .label("colocated here")
        .help(
            "set `gpus` on both prefill and decode: the default formula cannot split a shared node",
        )),
        Nodes::Count(n) => {
            let total = n * gpn;
            let per = total / role.workers.value;
            if per == 0 {
                return Err(Problem::new(
                    "srt::recipe::workers",
                    role.workers.span,
                    format!(
                        "{} workers do not fit on {n} node(s) of {gpn} GPUs",
                        role.workers.value
                    ),
                )
                .label("too many workers"));
            }
            Ok(per)
        }
    }
}

/// Allocate every endpoint. `available_nodes` bounds the node count (`None`: as many as needed).
pub fn allocate(recipe: &Recipe, available_nodes: Option<usize>) -> Result<Topology, Vec<Problem>> {
    let gpn = recipe.resources.gpus_per_node.value;
    let colocate = recipe
        .roles
        .iter()
        .any(|r| r.kind == RoleKind::Decode && r.nodes.value == Nodes::Colocate);
    let mut problems = Vec::new();
    let mut endpoints = Vec::new();
    let (mut node, mut offset) = (0usize, 0u32);
    let mut used_nodes = 0usize;
    for role in &recipe.roles {
        let per = match gpus_per_worker(recipe, role) {
            Ok(p) => p,
            Err(p) => {
                problems.push(p);
                continue;
            }
        };
        if role.kind == RoleKind::Decode
            && !colocate
            && !recipe.engine.allow_prefill_decode_colocation
            && offset > 0
        {
            node += 1;
            offset = 0;
        }
        if role.kind == RoleKind::Agg && offset > 0 {
            node += 1;
            offset = 0;
        }
        let role_start = node;
        let mut role_problem = None;
        for index in 0..role.workers.value {
            if per >= gpn {
                if !per.is_multiple_of(gpn) {
                    role_problem = Some(
                        Problem::new(
                            "srt::recipe::gpus",
                            role.gpus.as_ref().map(|g| g.span).unwrap_or(role.span),
                            format!(
                                "a worker spanning nodes needs a multiple of {gpn} GPUs, got {per}"
                            ),
                        )
                        .label("not a whole number of nodes"),
                    );
                    break;
                }
                if offset > 0 {
                    node += 1;
                    offset = 0;
                }
                let count = (per / gpn) as usize;
                endpoints.push(Endpoint {
                    role: role.kind,
                    index,
                    nodes: (node..node + count).collect(),
                    gpu_indices: (0..gpn).collect(),
                });
                node += count;
            } else {
                if offset + per > gpn {
                    node += 1;
                    offset = 0;
                }
                endpoints.push(Endpoint {
                    role: role.kind,
                    index,
                    nodes: vec![node],
                    gpu_indices: (offset..offset + per).collect(),
                });
                offset += per;
                if offset == gpn || recipe.resources.spread_workers {
                    node += 1;
                    offset = 0;
                }
            }
        }
        if let Some(p) = role_problem {
            problems.push(p);
            continue;
        }
        let end = if offset > 0 { node + 1 } else { node };
        used_nodes = used_nodes.max(end);
        // A role's declared node count is what it may occupy (colocated decode: none).
        if let Nodes::Count(n) = role.nodes.value {
            let occupied = end - role_start.min(end);
            let shared_start = role.kind == RoleKind::Decode && colocate;
            if !shared_start && occupied > n as usize {
                problems.push(
                    Problem::new(
                        "srt::recipe::nodes",
                        role.nodes.span,
                        format!(
                            "{} workers of {per} GPUs need {occupied} nodes of {gpn} GPUs, but `roles.{}.nodes` is {n}",
                            role.workers.value,
                            role.kind.name()
                        ),
                    )
                    .label("too few nodes")
                    .help("raise `nodes`, lower `workers`, or set `gpus` per worker"),
                );
            }
        }
        if role.kind == RoleKind::Decode && colocate {
            // Decode must fit in what prefill left on its node(s).
            let prefill_end = endpoints
                .iter()
                .filter(|e| e.role == RoleKind::Prefill)
                .map(|e| e.nodes.iter().max().copied().unwrap_or(0) + 1)
                .max()
                .unwrap_or(0);
            if end > prefill_end {
                let decode_gpus = u64::from(role.workers.value) * u64::from(per);
                problems.push(
                    Problem::new(
                        "srt::recipe::colocate_oversubscribed",
                        role.nodes.span,
                        format!(
                            "colocated decode needs {decode_gpus} GPUs but the prefill node(s) have fewer left"
                        ),
                    )
                    .label("decode does not fit here")
                    .help(format!(
                        "with {gpn} GPUs per node, prefill and decode GPUs together must fit on the prefill nodes; lower `gpus` or `workers`, or give decode its own nodes"
                    )),
                );
            }
        }
    }
    if !problems.is_empty() {
        return Err(problems);
    }
    let services_node = recipe.services_node.map(|_| used_nodes);
    let used_nodes = used_nodes + usize::from(services_node.is_some());
    if let Some(avail) = available_nodes {
        if used_nodes > avail {
            return Err(vec![Problem::new(
                "srt::recipe::not_enough_nodes",
                recipe
                    .roles
                    .first()
                    .map(|r| r.span)
                    .unwrap_or(recipe.name.span),
                format!("the roles need {used_nodes} nodes but only {avail} are available"),
            )
            .label("roles declared here")]);
        }
    }
    Ok(Topology {
        node_count: available_nodes.unwrap_or(used_nodes).max(used_nodes),
        gpus_per_node: gpn,
        endpoints,
        services_node,
    })
}
