//! The largest deployment srt accepts, in one place.
//!
//! Everything srt builds (the topology, the launch plan, the graph, the state) grows
//! with the number of processes and nodes. A recipe is a few lines whatever it asks
//! for, so these bounds are checked on the recipe's numbers, before anything is
//! allocated ([`check`]): a recipe over them gets a located error instead of srt
//! allocating until the kernel kills it. `docs/recipe-reference.md` ("Limits") states
//! them; `docs/performance.md` measures plans at the top of the range.

use super::diag::Problem;
use super::{Nodes, Recipe};

/// Nodes a deployment may span.
pub const MAX_NODES: u64 = 32_768;
/// GPUs per node.
pub const MAX_GPUS_PER_NODE: u64 = 64;
/// Processes (workers, Routers, nginx) a deployment may run: one per GPU on 4,096 nodes
/// of 8 GPUs. `srt plan` of the largest deployment peaks at about 270 MiB
/// (`tests/memory_bound.rs`); before the graph held specs as canonical JSON it took
/// 0.8 GB, and twice as many processes 1.6 GB.
pub const MAX_PROCESSES: u64 = 32_768;
/// Router replicas behind nginx (`frontend.num_additional_frontends`).
pub const MAX_ADDITIONAL_FRONTENDS: u64 = 1024;
/// Benchmark requests in one apply (every level's `level x (num_prompts_mult +
/// num_warmup_mult)`).
pub const MAX_BENCHMARK_REQUESTS: u64 = 1_000_000;
/// The longest bound of a benchmark run (`benchmark.max_duration_seconds`): a week.
pub const MAX_BENCHMARK_SECONDS: u64 = 7 * 24 * 3600;
/// Entries of the Routers' worker lists together: Routers x worker processes. Every
/// Router's membership lists every advertised worker and depends on each of them in the
/// graph (a Router the workers' URLs are given on its command line, too), so this (not the resource count) is what grows fastest with
/// `num_additional_frontends`: at most 1,025 Routers x 32,768 workers would be 34
/// million entries. The default ten Routers in front of [`MAX_PROCESSES`] workers are
/// the bound (32 Routers x 32,768 workers took 1.5 GB to plan).
pub const MAX_ROUTED: u64 = 10 * MAX_PROCESSES;
/// DP ranks of one endpoint with a NIXL side channel: vLLM binds the side-channel base
/// plus the global DP rank (one port per rank, from 5400), so the run of ports must fit
/// below 65536 on the nodes it spans, with room to skip what those nodes already hold.
pub const MAX_SIDE_CHANNEL_RANKS: u64 = 32_768;
/// Resources of a deployment's graph: a port block and a process per process
/// ([`MAX_PROCESSES`] workers, a Router per frontend, nginx), a membership per Router,
/// two gates, the smoke check, the benchmark and the allocation. The other limits keep
/// every recipe under it; it is checked on its own so that it stays true when they
/// change.
pub const MAX_RESOURCES: u64 =
    2 * (MAX_PROCESSES + MAX_ADDITIONAL_FRONTENDS + 2) + (MAX_ADDITIONAL_FRONTENDS + 1) + 5;

/// What a recipe asks for, computed from its numbers alone (no allocation).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Demand {
    /// Nodes the roles occupy (an upper bound: packing may use fewer).
    pub nodes: u64,
    /// Worker processes.
    pub workers: u64,
    /// Router processes (an upper bound: the layout places at most one per node).
    pub routers: u64,
    /// Resources of the graph (an upper bound).
    pub resources: u64,
}

/// Refuse a recipe whose roles would exceed [`MAX_NODES`] or [`MAX_PROCESSES`], or whose
/// `available_nodes` (`--nodes`) exceeds [`MAX_NODES`], before any allocation. Each
/// problem points at the key that asks for too much.
pub fn check(recipe: &Recipe, available_nodes: Option<usize>) -> Result<Demand, Vec<Problem>> {
    let mut problems = Vec::new();
    let gpn = u64::from(recipe.resources.gpus_per_node.value).max(1);
    let mut demand = Demand::default();
    for role in &recipe.roles {
        let workers = u64::from(role.workers.value);
        let per_worker = match (&role.gpus, role.nodes.value) {
            (Some(g), _) => u64::from(g.value),
            (None, Nodes::Count(n)) => (u64::from(n) * gpn / workers.max(1)).max(1),
            (None, Nodes::Colocate) => 1,
        };
        let nodes_per_worker = per_worker.div_ceil(gpn).max(1);
        let processes = workers.saturating_mul(nodes_per_worker);
        let nodes = if per_worker >= gpn {
            processes
        } else {
            workers.saturating_mul(per_worker).div_ceil(gpn)
        };
        let declared = match role.nodes.value {
            Nodes::Count(n) => u64::from(n),
            Nodes::Colocate => 0,
        };
        demand.workers = demand.workers.saturating_add(processes);
        demand.nodes = demand.nodes.saturating_add(nodes.max(declared));
        if processes > MAX_PROCESSES {
            let span = role.gpus.as_ref().map_or(role.workers.span, |g| {
                if workers > MAX_PROCESSES {
                    role.workers.span
                } else {
                    g.span
                }
            });
            problems.push(
                Problem::new(
                    "srt::recipe::limit",
                    span,
                    format!(
                        "`roles.{}` asks for {processes} worker processes; srt runs at most {MAX_PROCESSES} per deployment",
                        role.kind.name()
                    ),
                )
                .label("too many processes")
                .help("split the deployment into several recipes (see \"Limits\" in docs/recipe-reference.md)"),
            );
        }
    }
    if problems.is_empty() && demand.workers > MAX_PROCESSES {
        let role = &recipe.roles[recipe.roles.len() - 1];
        problems.push(
            Problem::new(
                "srt::recipe::limit",
                role.workers.span,
                format!(
                    "the roles ask for {} worker processes together; srt runs at most {MAX_PROCESSES} per deployment",
                    demand.workers
                ),
            )
            .label("the total passes the limit here")
            .help("split the deployment into several recipes (see \"Limits\" in docs/recipe-reference.md)"),
        );
    }
    if demand.nodes > MAX_NODES {
        let role = recipe
            .roles
            .iter()
            .max_by_key(|r| match r.nodes.value {
                Nodes::Count(n) => u64::from(n),
                Nodes::Colocate => 0,
            })
            .unwrap_or(&recipe.roles[0]);
        problems.push(
            Problem::new(
                "srt::recipe::limit",
                role.nodes.span,
                format!(
                    "the roles need {} nodes; srt manages at most {MAX_NODES} per deployment",
                    demand.nodes
                ),
            )
            .label("too many nodes")
            .help("split the deployment into several recipes (see \"Limits\" in docs/recipe-reference.md)"),
        );
    }
    let fe = &recipe.frontend;
    demand.routers = if fe.enable_multiple_frontends.value {
        u64::from(fe.num_additional_frontends.value) + 1
    } else {
        1
    };
    let nginx = u64::from(fe.enable_multiple_frontends.value);
    // A port block and a process each, a membership per Router; two gates, the smoke
    // check, the benchmark and the allocation at most.
    demand.resources = 2 * (demand.workers + demand.routers + nginx) + demand.routers + 5;
    let routed = demand.routers.saturating_mul(demand.workers);
    if problems.is_empty() && routed > MAX_ROUTED {
        let span = match fe.enable_multiple_frontends.value {
            true => fe.num_additional_frontends.span,
            false => recipe.roles[recipe.roles.len() - 1].workers.span,
        };
        problems.push(
            Problem::new(
                "srt::recipe::limit",
                span,
                format!(
                    "{} Router(s) each listing {} worker processes make {routed} worker-list entries; srt manages at most {MAX_ROUTED}",
                    demand.routers, demand.workers
                ),
            )
            .label("the Routers are set here")
            .help("lower `frontend.num_additional_frontends` (each Router lists every worker), or split the deployment (see \"Limits\" in docs/recipe-reference.md)"),
        );
    }
    if problems.is_empty() && demand.resources > MAX_RESOURCES {
        let role = &recipe.roles[recipe.roles.len() - 1];
        problems.push(
            Problem::new(
                "srt::recipe::limit",
                role.workers.span,
                format!(
                    "the deployment would have {} resources; srt plans at most {MAX_RESOURCES}",
                    demand.resources
                ),
            )
            .label("the total passes the limit here")
            .help("split the deployment into several recipes (see \"Limits\" in docs/recipe-reference.md)"),
        );
    }
    if let Some(n) = available_nodes.filter(|&n| n as u64 > MAX_NODES) {
        problems.push(
            Problem::new(
                "srt::recipe::limit",
                recipe.name.span,
                format!("--nodes {n} is more than the {MAX_NODES} nodes srt manages"),
            )
            .label("this deployment"),
        );
    }
    if problems.is_empty() {
        Ok(demand)
    } else {
        Err(problems)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recipe::{load_str, Source};

    fn demand(text: &str) -> Result<Demand, Vec<Problem>> {
        let source = Source {
            name: "limits.yaml".into(),
            text: text.into(),
        };
        check(&load_str(&source, "limits").expect("loads"), None)
    }

    fn agg(workers: u64, frontends: u64) -> String {
        format!(
            "resources: {{gpus_per_node: 8}}\nfrontend: {{num_additional_frontends: {frontends}}}\nroles:\n  agg: {{nodes: {}, workers: {workers}, gpus: 1}}\n",
            workers.div_ceil(8)
        )
    }

    #[test]
    fn the_largest_deployment_stays_under_every_bound() {
        // One process per GPU on 4,096 nodes, the default ten Routers.
        let d = demand(&agg(MAX_PROCESSES, 9)).expect("accepted");
        assert_eq!((d.workers, d.routers), (MAX_PROCESSES, 10));
        assert!(d.resources <= MAX_RESOURCES);
        assert!(d.routers * d.workers <= MAX_ROUTED);
    }

    #[test]
    fn router_worker_lists_are_bounded() {
        // 10 Routers x 32,768 workers is exactly the bound; one Router more is over it.
        assert!(demand(&agg(MAX_PROCESSES, 9)).is_ok());
        let problems = demand(&agg(MAX_PROCESSES, 10)).expect_err("refused");
        assert_eq!(problems.len(), 1);
        assert!(problems[0].message.contains("worker-list entries"));
        // Without nginx there is one Router, whatever the count says.
        let single = agg(MAX_PROCESSES, 1024).replace(
            "frontend: {",
            "frontend: {enable_multiple_frontends: false, ",
        );
        assert_eq!(demand(&single).expect("accepted").routers, 1);
    }
}
