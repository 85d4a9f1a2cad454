//! Ports at cluster scale: no port kind runs out below 8,192 nodes x 8 GPUs, whatever
//! the recipe's shape.
//!
//! Every kind's counter is per host (`srt::ports`), so what a node needs depends on what
//! runs on that node, not on the size of the deployment; only a NIXL side-channel run,
//! one port per DP rank of an endpoint from one base, grows with an endpoint, and
//! `limits::MAX_SIDE_CHANNEL_RANKS` bounds it. A property test draws recipe shapes
//! (aggregated, P/D, DP hybrid-LB and spanning nodes, TP/PP spanning nodes, colocated
//! P/D, MoRI-IO) on up to 8,192 nodes of 8 GPUs and builds them on the cluster layout
//! (one host per node): none may fail with `srt::recipe::ports`, and no port is leased
//! twice on a host. The extreme shapes at exactly 8,192 nodes are built once each.
//!
//! Each case builds a launch plan of up to 32,768 processes: `PROPTEST_CASES` sets the
//! number of cases (default 12).

mod common;

use proptest::prelude::*;
use proptest::test_runner::Config;
use srt::assemble::{assemble as build, BuildOptions};
use srt::launch::{HostLayout, LaunchPlan};
use srt::recipe::{load_str, Source};

const GPN: u32 = 8;
const MAX_NODES: u32 = 8192;

/// One role: GPUs per worker, DP and PP sizes (TP is the rest), workers.
#[derive(Clone, Debug)]
struct RoleShape {
    gpus: u32,
    dp: u32,
    pp: u32,
    workers: u32,
}

impl RoleShape {
    fn nodes(&self) -> u32 {
        (self.workers * self.gpus).div_ceil(GPN)
    }

    fn yaml(&self, name: &str, nodes: &str) -> String {
        let mut args = Vec::new();
        if self.dp > 1 {
            args.push(format!("data-parallel-size: {}", self.dp));
        }
        if self.pp > 1 {
            args.push(format!("pipeline-parallel-size: {}", self.pp));
        }
        let tp = self.gpus / self.dp / self.pp;
        if tp > 1 {
            args.push(format!("tensor-parallel-size: {tp}"));
        }
        format!(
            "  {name}:\n    nodes: {nodes}\n    workers: {}\n    gpus: {}\n    args: {{{}}}\n",
            self.workers,
            self.gpus,
            args.join(", ")
        )
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mix {
    Agg,
    Pd,
    PdColocated,
    Moriio,
}

#[derive(Clone, Debug)]
struct Shape {
    mix: Mix,
    roles: Vec<RoleShape>,
}

impl Shape {
    fn recipe(&self) -> String {
        let single = matches!(self.mix, Mix::Moriio);
        let mut out = format!(
            "name: scale\nresources: {{gpus_per_node: {GPN}}}\nfrontend: {{enable_multiple_frontends: {}}}\n",
            !single
        );
        if self.mix == Mix::Moriio {
            out += "engine: {type: vllm, connector: moriio}\n";
        }
        out += "roles:\n";
        match self.mix {
            Mix::Agg => out += &self.roles[0].yaml("agg", &self.roles[0].nodes().to_string()),
            Mix::Pd | Mix::Moriio => {
                out += &self.roles[0].yaml("prefill", &self.roles[0].nodes().to_string());
                out += &self.roles[1].yaml("decode", &self.roles[1].nodes().to_string());
            }
            Mix::PdColocated => {
                out += &self.roles[0].yaml("prefill", &self.roles[0].nodes().to_string());
                out += &self.roles[1].yaml("decode", "colocate");
            }
        }
        out
    }
}

fn divisors(n: u32) -> Vec<u32> {
    (1..=n).filter(|d| n.is_multiple_of(*d)).collect()
}

/// Node budgets: small ones, and ones near the top of the range.
fn budget() -> impl Strategy<Value = u32> {
    prop_oneof![1u32..=64, 1024u32..=MAX_NODES / 2, Just(MAX_NODES / 2)]
}

/// A role of `gpus`-GPU workers filling about `nodes` nodes, with a DP and PP split.
fn role(gpus: u32, nodes: u32) -> impl Strategy<Value = RoleShape> {
    let workers = (nodes * GPN / gpus).max(1);
    (prop::sample::select(divisors(gpus)), Just(gpus)).prop_flat_map(move |(dp, gpus)| {
        (prop::sample::select(divisors(gpus / dp)), Just(dp)).prop_map(move |(pp, dp)| RoleShape {
            gpus,
            dp,
            pp,
            workers,
        })
    })
}

/// GPUs per worker: packed on a node, a whole node, or spanning nodes (up to 1,024).
fn worker_gpus(spanning: bool) -> impl Strategy<Value = u32> {
    let mut sizes = vec![1, 2, 4, 8];
    if spanning {
        sizes.extend([16, 32, 64, 1024 * GPN]);
    }
    prop::sample::select(sizes)
}

fn shape() -> impl Strategy<Value = Shape> {
    prop_oneof![
        (worker_gpus(true), budget())
            .prop_flat_map(|(g, n)| role(g, n * 2))
            .prop_map(|r| Shape {
                mix: Mix::Agg,
                roles: vec![r],
            }),
        (worker_gpus(true), budget(), worker_gpus(true), budget())
            .prop_flat_map(|(gp, np, gd, nd)| (role(gp, np), role(gd, nd)))
            .prop_map(|(p, d)| Shape {
                mix: Mix::Pd,
                roles: vec![p, d],
            }),
        // Packed prefill leaving one worker's GPUs free on its last node, where decode
        // is colocated.
        (prop::sample::select(vec![1u32, 2, 4]), budget())
            .prop_flat_map(|(gp, n)| {
                let decode = prop::sample::select(divisors(gp));
                (role(gp, n), decode.prop_flat_map(|gd| role(gd, 1)))
            })
            .prop_map(|(mut p, mut d)| {
                p.workers = (p.workers - 1).max(1);
                d.workers = p.gpus / d.gpus;
                Shape {
                    mix: Mix::PdColocated,
                    roles: vec![p, d],
                }
            }),
        // MoRI-IO: every process an API server (replicas within a node).
        (worker_gpus(false), budget(), worker_gpus(false), budget())
            .prop_flat_map(|(gp, np, gd, nd)| (role(gp, np), role(gd, nd)))
            .prop_map(|(p, d)| Shape {
                mix: Mix::Moriio,
                roles: vec![p, d],
            }),
    ]
}

fn build_text(text: &str) -> Result<LaunchPlan, Vec<(String, String)>> {
    let source = Source {
        name: "scale.yaml".into(),
        text: text.into(),
    };
    let recipe = load_str(&source, "scale")
        .map_err(|e| vec![("load".to_string(), common::render_diag(&e))])?;
    build(
        &recipe,
        &BuildOptions {
            nodes: None,
            hosts: HostLayout::Distinct,
        },
    )
    .map_err(|problems| {
        problems
            .into_iter()
            .map(|p| (p.code.to_string(), p.message))
            .collect()
    })
}

/// No port is leased twice on a host: leases sorted by host and base never overlap.
fn no_port_shared_on_a_host(plan: &LaunchPlan) -> Result<(), String> {
    let mut leases: Vec<(&str, u16, u16, &str)> = plan
        .leases
        .iter()
        .map(|l| {
            (
                l.host.as_str(),
                l.block.base,
                l.block.last(),
                l.owner.as_str(),
            )
        })
        .collect();
    leases.sort_unstable();
    for w in leases.windows(2) {
        let ((h0, _, e0, o0), (h1, s1, _, o1)) = (w[0], w[1]);
        if h0 == h1 && s1 <= e0 {
            return Err(format!("{o0} and {o1} share port {s1} on {h0}"));
        }
    }
    Ok(())
}

fn config() -> Config {
    Config {
        cases: std::env::var("PROPTEST_CASES")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(12),
        max_global_rejects: 10_000,
        failure_persistence: None,
        ..Config::default()
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn no_kind_runs_out_below_8192_nodes(s in shape()) {
        let text = s.recipe();
        let nodes: u32 = match s.mix {
            Mix::PdColocated => s.roles[0].nodes(),
            _ => s.roles.iter().map(RoleShape::nodes).sum(),
        };
        prop_assume!(nodes <= MAX_NODES);
        match build_text(&text) {
            Ok(plan) => {
                prop_assert!(plan.nodes.len() <= MAX_NODES as usize);
                let shared = no_port_shared_on_a_host(&plan);
                prop_assert!(shared.is_ok(), "{:?}\n{}", shared, text);
            }
            Err(problems) => {
                // Rules the generator does not follow (one node-local DP size behind
                // a Router, MoRI-IO's API-server rule) may refuse a shape; running out
                // of ports never may.
                prop_assert!(
                    problems.iter().all(|(code, _)| code != "srt::recipe::ports"),
                    "{:?}\n{}", problems, text
                );
                prop_assume!(false);
            }
        }
    }
}

/// The largest shapes at exactly 8,192 nodes x 8 GPUs build, each kind well inside the
/// port range.
#[test]
fn extreme_shapes_at_8192_nodes_build() {
    let half = MAX_NODES / 2;
    let cases = [
        // One TP2 replica per GPU pair: 32,768 processes (the most srt accepts),
        // four per node.
        format!(
            "resources: {{gpus_per_node: 8}}\nroles:\n  agg:\n    nodes: {MAX_NODES}\n    workers: {}\n    gpus: 2\n    args: {{tensor-parallel-size: 2}}\n",
            MAX_NODES * 4
        ),
        // P/D: single-node DP8 prefill (eight side channels per node), TP8 decode.
        format!(
            "resources: {{gpus_per_node: 8}}\nroles:\n  prefill:\n    nodes: {half}\n    workers: {half}\n    args: {{data-parallel-size: 8}}\n  decode:\n    nodes: {half}\n    workers: {half}\n    args: {{data-parallel-size: 8}}\n"
        ),
        // The longest side-channel run srt accepts: one hybrid-LB endpoint of 32,768
        // DP ranks over 4,096 nodes, and PP x TP replicas spanning two nodes.
        format!(
            "resources: {{gpus_per_node: 8}}\nroles:\n  prefill:\n    nodes: {half}\n    workers: 1\n    args: {{data-parallel-size: 32768}}\n  decode:\n    nodes: {half}\n    workers: {}\n    args: {{pipeline-parallel-size: 2, tensor-parallel-size: 8}}\n",
            half / 2
        ),
    ];
    for text in &cases {
        let plan = build_text(text).unwrap_or_else(|p| panic!("{p:?}\n{text}"));
        assert_eq!(plan.nodes.len(), MAX_NODES as usize, "{text}");
        no_port_shared_on_a_host(&plan).unwrap();
        let highest = plan.leases.iter().map(|l| l.block.last()).max().unwrap();
        assert!(highest < 40_000, "highest port {highest}\n{text}");
    }
}

/// The generator is not vacuous: most shapes it draws build.
#[test]
fn most_generated_shapes_build() {
    use proptest::strategy::ValueTree;
    let mut runner = proptest::test_runner::TestRunner::deterministic();
    let strategy = shape().prop_filter("fits", |s| {
        s.roles.iter().map(RoleShape::nodes).sum::<u32>() <= 64
    });
    let mut valid = 0;
    for _ in 0..60 {
        let s = strategy.new_tree(&mut runner).unwrap().current();
        if build_text(&s.recipe()).is_ok() {
            valid += 1;
        }
    }
    assert!(valid >= 30, "only {valid}/60 generated shapes build");
}
