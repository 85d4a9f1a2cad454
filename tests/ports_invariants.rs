//! Port invariants over every example, on the cluster layout (one host per node) and
//! the local layout (every node on one host), with exactly the nodes needed and with
//! spare nodes: no port is leased twice on a host, job-wide kinds never repeat, and
//! every port a process binds or is told to use is covered by a lease on the right host.

mod common;

use srt::launch::build::HostLayout;
use srt::launch::{build, node_name, BuildOptions, LaunchPlan};
use srt::ports::{Lease, Scope, KINDS};
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

    // 2. Job-wide kinds never repeat within the deployment: on any host.
    let job_kinds: Vec<&str> = KINDS
        .iter()
        .filter(|k| k.scope == Scope::Job)
        .map(|k| k.name)
        .collect();
    for expected in ["nixl", "vllm_scan", "moriio_handshake", "moriio_notify"] {
        assert!(job_kinds.contains(&expected), "{expected} is job-wide");
    }
    for (i, a) in leases.iter().enumerate() {
        for b in &leases[i + 1..] {
            if job_kinds.contains(&a.kind) || job_kinds.contains(&b.kind) {
                assert!(!overlaps(a, b), "{what}: job-wide {a:?} repeats in {b:?}");
            }
        }
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
        let argv = &p.argv;
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
            // The DP-group base; this process's ranks are a lease inside the same run.
            let base: u16 = v.parse().unwrap();
            assert!(
                leases
                    .iter()
                    .any(|l| l.kind == "nixl" && l.block.base == base),
                "{what}: {} side-channel base {base} is not a lease",
                p.address
            );
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
    // A job-wide port repeated on another host.
    let mut repeated = plan.clone();
    let mut nixl = repeated
        .leases
        .iter()
        .find(|l| l.kind == "nixl")
        .unwrap()
        .clone();
    nixl.host = "node9".into();
    repeated.leases.push(nixl);
    let r = std::panic::catch_unwind(|| check("repeated", &repeated, HostLayout::Distinct));
    assert!(r.is_err(), "a job-wide port on two hosts must fail");
}
