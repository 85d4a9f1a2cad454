//! Port invariants over every example, on the cluster layout (one host per node) and
//! the local layout (every node on one host), with exactly the nodes needed and with
//! spare nodes: two processes on one host never share a port (no port is leased twice
//! on a host), every port a process binds or is told to use is covered by a lease on
//! the host that binds it, and across hosts ports repeat (every kind's counter is per
//! host).

mod common;

use srt::assemble::{assemble as build, BuildOptions};
use srt::launch::HostLayout;
use srt::launch::{node_name, LaunchPlan};
use srt::ports::Lease;
use srt::recipe::{load_str, Source};
use std::path::Path;

const LAYOUTS: [HostLayout; 2] = [HostLayout::Distinct, HostLayout::Shared];

fn host_of(layout: HostLayout, node: usize) -> String {
    match layout {
        HostLayout::Distinct => node_name(node),
        HostLayout::Shared => "localhost".to_string(),
    }
}

fn last(l: &Lease) -> u16 {
    l.block.last()
}

fn overlaps(a: &Lease, b: &Lease) -> bool {
    a.block.base <= last(b) && b.block.base <= last(a)
}

fn covered(plan: &LaunchPlan, host: &str, port: u16) -> bool {
    plan.leases
        .iter()
        .any(|l| l.host == host && l.block.base <= port && port <= last(l))
}

/// The value of `flag` on a command line.
fn flag<'a>(argv: &'a [String], flag: &str) -> Option<&'a str> {
    let i = argv.iter().position(|a| a == flag)?;
    argv.get(i + 1).map(String::as_str)
}

/// The DP ranks whose engine cores a `vllm serve` command line starts on its node, as
/// vLLM decides it (`EngineArgs.create_engine_config`, `run_headless`): with
/// `--data-parallel-size-local L --data-parallel-start-rank S`, ranks S..S+L; with
/// `--nnodes N --node-rank r` and DP size D, rank r / (N / D) on the first node of each
/// replica and none on the others; otherwise every rank.
fn engine_ranks(argv: &[String]) -> Vec<u32> {
    let num = |f: &str| flag(argv, f).map(|v| v.parse::<u32>().unwrap());
    let dp = num("--data-parallel-size").unwrap_or(1);
    if let (Some(local), Some(start)) = (
        num("--data-parallel-size-local"),
        num("--data-parallel-start-rank"),
    ) {
        return (start..start + local).collect();
    }
    if let (Some(nnodes), Some(rank)) = (num("--nnodes"), num("--node-rank")) {
        let per = (nnodes / dp).max(1);
        return if rank % per == 0 {
            vec![rank / per]
        } else {
            Vec::new()
        };
    }
    (0..dp).collect()
}

/// Every invariant, for one plan built with `layout`.
fn check(what: &str, plan: &LaunchPlan, layout: HostLayout) {
    let leases = &plan.leases;
    assert!(!leases.is_empty(), "{what}: no leases");

    // 1. No (host, port) is leased twice, ranges included.
    for (i, a) in leases.iter().enumerate() {
        for b in &leases[i + 1..] {
            assert!(
                !(a.host == b.host && overlaps(a, b)),
                "{what}: {a:?} and {b:?} overlap on {}",
                a.host
            );
        }
    }

    // 2. Two processes on one host never share a port: the ports maps of the
    //    processes of one host are disjoint (a run's parts included).
    let mut bound: Vec<(String, u16, u16, &str)> = Vec::new();
    for p in &plan.processes {
        let host = host_of(layout, p.node);
        for block in p.ports.values() {
            bound.push((host.clone(), block.base, block.last(), p.address.as_str()));
        }
    }
    bound.sort();
    for w in bound.windows(2) {
        let ((h0, _, e0, a0), (h1, s1, _, a1)) = (&w[0], &w[1]);
        assert!(
            !(h0 == h1 && s1 <= e0 && a0 != a1),
            "{what}: {a0} and {a1} share port {s1} on {h0}"
        );
    }

    // 3. Every port in every process's ports map is leased on that process's host.
    for p in &plan.processes {
        let host = host_of(layout, p.node);
        for (kind, block) in &p.ports {
            for port in block.base..=block.last() {
                assert!(
                    covered(plan, &host, port),
                    "{what}: {} binds {kind} {port} on {host} without a lease",
                    p.address
                );
            }
        }
    }

    // 4. Ports handed to a process on its command line or in its env are leased where
    //    they are bound: its own host, or the leader's for rendezvous ports.
    for p in &plan.processes {
        let own = host_of(layout, p.node);
        let argv = &p.argv.to_vec();
        let leader_host = argv
            .iter()
            .position(|a| a == "--data-parallel-address" || a == "--master-addr")
            .map(|i| {
                let ip = &argv[i + 1];
                let node = plan.nodes.iter().find(|n| &n.ip == ip).unwrap().index;
                host_of(layout, node)
            });
        for (i, flag) in argv.iter().enumerate() {
            let host = match flag.as_str() {
                "--port" | "--prometheus-port" => own.clone(),
                "--data-parallel-rpc-port" | "--master-port" => leader_host.clone().unwrap(),
                _ => continue,
            };
            let port: u16 = argv[i + 1].parse().unwrap();
            assert!(
                covered(plan, &host, port),
                "{what}: {} {flag} {port} is not leased on {host}",
                p.address
            );
        }
        if let Some(v) = p.env.get("VLLM_PORT") {
            let base: u16 = v.parse().unwrap();
            assert_eq!(p.ports["vllm_scan"].base, base, "{what}: {}", p.address);
        }
        if let Some(v) = p.env.get("VLLM_NIXL_SIDE_CHANNEL_PORT") {
            // The endpoint's base, the same on each of its nodes: vLLM's engine core of
            // DP rank d binds base + d on its own node. Each of those ports is this
            // process's and leased on its host.
            let base: u16 = v.parse().unwrap();
            let endpoint = p.address.split(".node[").next().unwrap();
            for q in plan
                .processes
                .iter()
                .filter(|q| q.address.split(".node[").next() == Some(endpoint))
            {
                assert_eq!(
                    q.env.get("VLLM_NIXL_SIDE_CHANNEL_PORT"),
                    Some(v),
                    "{what}: {} and {} disagree on the side-channel base",
                    p.address,
                    q.address
                );
            }
            let own_host = host_of(layout, p.node);
            for rank in engine_ranks(argv) {
                let port = base + rank as u16;
                let own = p.ports.get("nixl");
                assert!(
                    own.is_some_and(|b| b.base <= port && port <= b.last()),
                    "{what}: {} runs DP rank {rank} (side channel {port}) but its ports are {own:?}",
                    p.address
                );
                assert!(
                    covered(plan, &own_host, port),
                    "{what}: {} side channel {port} is not leased on {own_host}",
                    p.address
                );
            }
        }
    }

    // 5. On one host, no port repeats at all.
    if layout == HostLayout::Shared {
        assert!(leases.iter().all(|l| l.host == "localhost"), "{what}");
        for (i, a) in leases.iter().enumerate() {
            for b in &leases[i + 1..] {
                assert!(!overlaps(a, b), "{what}: {a:?} and {b:?} share a port");
            }
        }
    }
}

fn build_path(path: &Path, nodes: Option<usize>, layout: HostLayout) -> LaunchPlan {
    common::plan_with(path, nodes, layout)
}

#[test]
fn examples_hold_every_invariant() {
    for path in common::examples() {
        for layout in LAYOUTS {
            let plan = build_path(&path, None, layout);
            let needed = plan.nodes.len();
            check(&format!("{} {layout:?}", path.display()), &plan, layout);
            // Spare nodes change nothing about the ports.
            let roomy = build_path(&path, Some(needed + 3), layout);
            assert_eq!(roomy.nodes.len(), needed + 3);
            check(
                &format!("{} {layout:?} --nodes {}", path.display(), needed + 3),
                &roomy,
                layout,
            );
            assert_eq!(roomy.leases, plan.leases, "{}", path.display());
        }
    }
}

fn plan_str(text: &str, layout: HostLayout) -> LaunchPlan {
    let source = Source {
        name: "inline.yaml".into(),
        text: text.into(),
    };
    let recipe = load_str(&source, "inline").unwrap_or_else(|e| {
        panic!("{}", common::render_diag(&e));
    });
    build(
        &recipe,
        &BuildOptions {
            nodes: None,
            hosts: layout,
        },
    )
    .unwrap_or_else(|p| panic!("{}", common::render_diag(&source.error(p))))
}

/// Shapes that broke srtctl's derived-port arithmetic: two DP endpoints on one node
/// (DP RPC and NIXL runs), colocated P/D, multi-node TP next to DP, many replicas.
const STRESS: &[(&str, &str)] = &[
    (
        "two DEP4 on one node",
        "
resources: {gpus_per_node: 8}
frontend: {enable_multiple_frontends: false}
roles:
  agg:
    nodes: 1
    workers: 2
    args: {data-parallel-size: 4}
",
    ),
    (
        "colocated DP prefill and decode",
        "
resources: {gpus_per_node: 8}
frontend: {enable_multiple_frontends: false}
roles:
  prefill:
    nodes: 1
    workers: 2
    gpus: 2
    args: {data-parallel-size: 2}
  decode:
    nodes: colocate
    workers: 2
    gpus: 2
    args: {data-parallel-size: 2}
",
    ),
    (
        "multi-node TP prefill, hybrid-LB decode",
        "
resources: {gpus_per_node: 4}
roles:
  prefill:
    nodes: 2
    workers: 1
    args: {tensor-parallel-size: 8}
  decode:
    nodes: 2
    workers: 1
    args: {data-parallel-size: 8}
",
    ),
    (
        "DP replicas spanning nodes",
        "
resources: {gpus_per_node: 4}
roles:
  agg:
    nodes: 4
    workers: 1
    args: {data-parallel-size: 2, tensor-parallel-size: 8}
",
    ),
    (
        "P/D with DP replicas spanning nodes (side channels on each replica's first node)",
        "
resources: {gpus_per_node: 4}
roles:
  prefill:
    nodes: 4
    workers: 1
    args: {data-parallel-size: 2, tensor-parallel-size: 8}
  decode:
    nodes: 4
    workers: 2
    args: {data-parallel-size: 4, tensor-parallel-size: 2}
",
    ),
    (
        "sixteen single-GPU replicas on two nodes",
        "
resources: {gpus_per_node: 8}
roles:
  agg:
    nodes: 2
    workers: 16
",
    ),
    (
        "MoRI-IO colocated, many small workers",
        "
resources: {gpus_per_node: 8}
engine: {type: vllm, connector: moriio}
frontend: {enable_multiple_frontends: false}
roles:
  prefill:
    nodes: 1
    workers: 3
    gpus: 2
    args: {tensor-parallel-size: 2}
  decode:
    nodes: colocate
    workers: 2
    gpus: 1
",
    ),
];

#[test]
fn stress_shapes_hold_every_invariant() {
    for (what, text) in STRESS {
        for layout in LAYOUTS {
            let plan = plan_str(text, layout);
            check(&format!("{what} {layout:?}"), &plan, layout);
        }
    }
}

/// A public port inside the workers' HTTP range is not a collision: it is reserved
/// first and the allocator moves the worker past it.
#[test]
fn public_port_in_the_http_range_moves_the_worker() {
    let text = "
frontend:
  enable_multiple_frontends: false
  port: 6100
roles:
  agg:
    nodes: 1
    workers: 1
    gpus: 1
";
    for layout in LAYOUTS {
        let plan = plan_str(text, layout);
        check(&format!("frontend.port 6100 {layout:?}"), &plan, layout);
        let w = &common::workers(&plan)[0];
        let r = &common::routers(&plan)[0];
        assert_eq!(common::port(r, "public"), 6100);
        assert_eq!(common::value(&r.argv, "--port"), "6100");
        assert_ne!(common::port(w, "http"), 6100);
        assert_eq!(
            common::value(&w.argv, "--port"),
            common::port(w, "http").to_string()
        );
    }
}

/// The checker itself rejects a plan whose ledger misses a bound port or repeats one.
#[test]
fn the_checker_can_fail() {
    let path = common::root().join("examples/seed/disagg-nixl.yaml");
    let plan = build_path(&path, None, HostLayout::Distinct);
    // Drop node1's HTTP lease: node1 binds a port nothing records.
    let mut missing = plan.clone();
    missing
        .leases
        .retain(|l| !(l.kind == "http" && l.host == "node1"));
    let r = std::panic::catch_unwind(|| check("missing", &missing, HostLayout::Distinct));
    assert!(r.is_err(), "a bound port without a lease must fail");
    // Lease node0's HTTP port twice.
    let mut twice = plan.clone();
    let http = twice
        .leases
        .iter()
        .find(|l| l.kind == "http" && l.host == "node0")
        .unwrap()
        .clone();
    twice.leases.push(http);
    let r = std::panic::catch_unwind(|| check("twice", &twice, HostLayout::Distinct));
    assert!(r.is_err(), "a port leased twice must fail");
    // A side-channel part leased on another host than the one that binds it.
    let mut elsewhere = plan.clone();
    for l in elsewhere.leases.iter_mut().filter(|l| l.kind == "nixl") {
        l.host = "node9".into();
    }
    let r = std::panic::catch_unwind(|| check("elsewhere", &elsewhere, HostLayout::Distinct));
    assert!(
        r.is_err(),
        "a side channel leased on the wrong host must fail"
    );
    // Two processes of one host told the same port, whatever the ledger says.
    let mut shared = plan.clone();
    let (a, b) = {
        let on_node0: Vec<usize> = (0..shared.processes.len())
            .filter(|&i| shared.processes[i].node == 0)
            .collect();
        assert!(
            on_node0.len() >= 2,
            "disagg-nixl has two processes on node0"
        );
        (on_node0[0], on_node0[1])
    };
    let taken = *shared.processes[a].ports.values().next().unwrap();
    shared.processes[b].ports.insert("extra".into(), taken);
    let r = std::panic::catch_unwind(|| check("shared", &shared, HostLayout::Distinct));
    assert!(
        r.is_err(),
        "two processes on one host sharing a port must fail"
    );
    // DP replicas spanning nodes: replica 1's engine core binds base + 1 on node 2, so
    // the run held by the leader alone (as srt leased it before) fails.
    let (_, text) = STRESS
        .iter()
        .find(|(w, _)| w.starts_with("P/D with DP replicas spanning"))
        .unwrap();
    let spanning = plan_str(text, HostLayout::Distinct);
    check("spanning", &spanning, HostLayout::Distinct);
    let mut leader_only = spanning.clone();
    let p = leader_only
        .processes
        .iter_mut()
        .find(|p| p.address == "worker.prefill[0].node[2]")
        .unwrap();
    assert!(
        p.ports.remove("nixl").is_some(),
        "replica 1 binds a side channel"
    );
    let r = std::panic::catch_unwind(|| check("leader only", &leader_only, HostLayout::Distinct));
    assert!(
        r.is_err(),
        "a DP rank's side channel missing where it is bound must fail"
    );
}

/// Across hosts ports repeat: every node of a cluster counts from each kind's base, so
/// a deployment's size never exhausts a kind (what the job-wide `vllm_scan` and
/// side-channel counters used to do past about 900 endpoints).
#[test]
fn ports_repeat_across_hosts() {
    let text = "
resources: {gpus_per_node: 8}
roles:
  prefill:
    nodes: 4
    workers: 4
    args: {data-parallel-size: 2, tensor-parallel-size: 4}
  decode:
    nodes: 4
    workers: 4
    args: {data-parallel-size: 2, tensor-parallel-size: 4}
";
    let plan = plan_str(text, HostLayout::Distinct);
    check("repeat", &plan, HostLayout::Distinct);
    for kind in ["http", "nixl", "vllm_scan"] {
        let mut hosts: Vec<&str> = plan
            .leases
            .iter()
            .filter(|l| l.kind == kind && l.block.base == plan_first(&plan, kind))
            .map(|l| l.host.as_str())
            .collect();
        hosts.dedup();
        assert!(hosts.len() >= 4, "{kind}: its first port on {hosts:?}");
    }
    // The same recipe on one host never repeats a port (checked by `check`) and needs
    // no more ports than the ledger holds.
    let local = plan_str(text, HostLayout::Shared);
    check("repeat local", &local, HostLayout::Shared);
}

fn plan_first(plan: &LaunchPlan, kind: &str) -> u16 {
    plan.leases
        .iter()
        .filter(|l| l.kind == kind)
        .map(|l| l.block.base)
        .min()
        .unwrap()
}

/// The local executor puts every node on one host, so a deployment there shares one
/// host's ports: 1,000 single-GPU workers need 1,000 `VLLM_PORT` ranges of 50 ports on
/// it, past 65535, and the plan stops with a located error (on a cluster, eight per
/// node, it builds).
#[test]
fn one_host_runs_out_with_a_located_error() {
    let text = "
resources: {gpus_per_node: 8}
roles:
  agg:
    nodes: 125
    workers: 1000
    gpus: 1
";
    let cluster = plan_str(text, HostLayout::Distinct);
    check("1000 workers on a cluster", &cluster, HostLayout::Distinct);
    let source = Source {
        name: "inline.yaml".into(),
        text: text.into(),
    };
    let recipe = load_str(&source, "inline").unwrap();
    let problems = build(
        &recipe,
        &BuildOptions {
            nodes: None,
            hosts: HostLayout::Shared,
        },
    )
    .unwrap_err();
    assert_eq!(problems.len(), 1, "{problems:?}");
    let p = &problems[0];
    assert_eq!(p.code, "srt::recipe::ports");
    assert!(
        p.message
            .starts_with("port range exhausted for kind `vllm_scan` on localhost"),
        "{}",
        p.message
    );
    let at = &text[p.span.offset()..p.span.offset() + p.span.len()];
    assert!(at.starts_with("agg"), "points at the role, not {at:?}");
}
