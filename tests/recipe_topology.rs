//! One test per seed case: the facts the vLLM Router and MoRI-IO specs state about each
//! topology, read from the launch plan (processes, command lines, ports, gates), not
//! from a snapshot.

mod common;

use common::*;
use srt::launch::HostLayout;
use srt::launch::{node_ip, LaunchPlan, LaunchProcess, MembershipMode, Probe};
use srt::recipe::RoleKind;
use std::collections::BTreeSet;

fn role(p: &LaunchProcess) -> RoleKind {
    p.worker.as_ref().expect("a worker").role
}

fn of_role(plan: &LaunchPlan, r: RoleKind) -> Vec<&LaunchProcess> {
    workers(plan).into_iter().filter(|w| role(w) == r).collect()
}

/// Node `i`'s IP placeholder as it appears in URLs and flags.
fn ip(i: usize) -> String {
    node_ip(i)
}

/// The static-routing gates: `/workers` counts on every Router, then `/health` on every
/// advertised worker URL, then the smoke completion.
fn assert_static_gates(plan: &LaunchPlan, prefill: u32, decode: u32) {
    let router_urls: Vec<String> = routers(plan)
        .iter()
        .map(|r| {
            let port = r
                .ports
                .get("frontend_internal")
                .or(r.ports.get("public"))
                .unwrap()
                .base;
            format!("http://{}:{port}", ip(r.node))
        })
        .collect();
    let names: Vec<&str> = plan.gates.iter().map(|g| g.address.as_str()).collect();
    assert_eq!(names, ["gate.router", "gate.workers", "smoke"]);
    let Probe::JsonCounts { urls, path, counts } = &plan.gates[0].probe else {
        panic!("gate.router counts /workers: {:?}", plan.gates[0].probe)
    };
    assert_eq!((urls, path.as_str()), (&router_urls, "/workers"));
    let at_least: Vec<(Vec<&str>, u32)> = counts
        .iter()
        .map(|c| (c.pointers.iter().map(String::as_str).collect(), c.at_least))
        .collect();
    assert_eq!(
        at_least,
        [
            (vec!["/stats/prefill_count"], prefill),
            (vec!["/stats/decode_count", "/stats/regular_count"], decode)
        ],
        "gate.router counts"
    );
    let want: Vec<String> = advertised(plan)
        .iter()
        .map(std::string::ToString::to_string)
        .collect();
    assert_eq!(plan.gates[1].probe, health(want));
    assert!(plan.gates[1]
        .depends_on
        .contains(&"gate.router".to_string()));
    assert!(matches!(plan.gates[2].probe, Probe::Completion { .. }));
}

/// The URLs a Router gets through its admin API (a managed membership), checking that
/// none is on its command line and that it waits for none of them.
fn managed_members<'a>(plan: &'a LaunchPlan, r: &LaunchProcess) -> Vec<&'a str> {
    assert!(
        occurrences(&r.argv, "--worker-urls").is_empty(),
        "{:?}",
        r.argv
    );
    assert!(
        r.watches.is_empty(),
        "{} watches {:?}",
        r.address,
        r.watches
    );
    let m = plan
        .memberships
        .iter()
        .find(|m| m.router == r.address)
        .unwrap_or_else(|| panic!("no membership for {}", r.address));
    assert_eq!(m.mode, MembershipMode::Managed);
    assert_eq!(m.address, format!("members.{}", r.address));
    m.members.iter().map(|x| x.url.as_str()).collect()
}

/// The one Router of a single-frontend deployment, on node 0 and the public port.
fn single_router(plan: &LaunchPlan) -> &LaunchProcess {
    let rs = routers(plan);
    assert_eq!(rs.len(), 1, "one Router");
    assert!(nginx(plan).is_none(), "no nginx with one frontend");
    let r = rs[0];
    assert_eq!(r.node, 0, "Router on the head node");
    assert_eq!(port(r, "public"), 8000);
    assert_eq!(value(&r.argv, "--port"), "8000");
    assert_eq!(value(&r.argv, "--host"), "0.0.0.0");
    assert_eq!(plan.public_url, format!("http://{}:8000", ip(0)));
    r
}

#[test]
fn agg_single_one_tp8_engine_behind_one_router() {
    let plan = plan("examples/seed/agg-single.yaml");
    let ws = workers(&plan);
    assert_eq!(ws.len(), 1);
    let w = ws[0];
    assert_eq!(w.node, 0);
    assert_eq!(w.devices, (0..8).collect::<Vec<u32>>());
    assert_eq!(value(&w.argv, "--tensor-parallel-size"), "8");
    assert_eq!(value(&w.argv, "--device-ids"), "0,1,2,3,4,5,6,7");
    assert_eq!(value(&w.argv, "--host"), "0.0.0.0");
    assert_eq!(value(&w.argv, "--port"), port(w, "http").to_string());
    for flag in [
        "--headless",
        "--data-parallel-size-local",
        "--master-addr",
        "--node-rank",
        "--kv-transfer-config",
    ] {
        assert!(!has(&w.argv, flag), "{flag} on a single-node TP engine");
    }
    assert_eq!(url(w), format!("http://{}:{}", ip(0), port(w, "http")));
    // One node, so the VLLM_PORT scan base is set.
    assert!(w.env.contains_key("VLLM_PORT"));

    let r = single_router(&plan);
    assert_eq!(managed_members(&plan, r), vec![url(w)]);
    assert_eq!(value(&r.argv, "--policy"), "consistent_hash");
    assert!(!has(&r.argv, "--vllm-pd-disaggregation"));
    assert!(!has(&r.argv, "--intra-node-data-parallel-size"));
    assert_static_gates(&plan, 0, 1);
}

#[test]
fn agg_replicas_four_routable_urls_behind_nginx() {
    let plan = plan("examples/seed/agg-replicas.yaml");
    let ws = workers(&plan);
    assert_eq!(ws.len(), 4, "four logical workers, one process each");
    for (i, w) in ws.iter().enumerate() {
        assert_eq!(w.node, i, "worker {i} on its own node");
        assert_eq!(w.devices.len(), 8);
        assert_eq!(url(w), format!("http://{}:6100", ip(i)));
    }
    // enable_multiple_frontends defaults to true: nginx on the head, one Router per
    // other worker node, each with the same four URLs.
    let ng = nginx(&plan).expect("nginx");
    assert_eq!((ng.node, port(ng, "public")), (0, 8000));
    let rs = routers(&plan);
    assert_eq!(rs.iter().map(|r| r.node).collect::<Vec<_>>(), [1, 2, 3]);
    for r in &rs {
        assert_eq!(managed_members(&plan, r), advertised(&plan));
    }
    assert_static_gates(&plan, 0, 4);
}

#[test]
fn agg_dep8_two_hybrid_lb_pools_without_intra_node_expansion() {
    let plan = plan("examples/seed/agg-dep8.yaml");
    let ws = workers(&plan);
    assert_eq!(ws.len(), 2, "one hybrid-LB vllm serve per node");
    let (w0, w1) = (ws[0], ws[1]);
    assert_eq!((w0.node, w1.node), (0, 1));
    for w in [w0, w1] {
        assert_eq!(w.devices, [0, 1, 2, 3]);
        assert_eq!(value(&w.argv, "--data-parallel-size-local"), "4");
        assert_eq!(value(&w.argv, "--data-parallel-size"), "8");
        assert!(has(&w.argv, "--data-parallel-hybrid-lb"));
        assert!(has(&w.argv, "--enable-expert-parallel"));
        assert!(!has(&w.argv, "--headless"), "both pools are API servers");
        assert_eq!(value(&w.argv, "--data-parallel-address"), ip(0));
        assert_eq!(
            value(&w.argv, "--data-parallel-rpc-port"),
            port(w0, "dp_rpc").to_string(),
            "one DP RPC port, the leader's"
        );
        // Multi-node endpoint: no VLLM_PORT scan base.
        assert!(w.env_unset.contains(&"VLLM_PORT".to_string()));
        assert!(!w.env.contains_key("VLLM_PORT"));
        assert_eq!(w.worker.as_ref().unwrap().local_dp, 4);
    }
    assert_eq!(value(&w0.argv, "--data-parallel-start-rank"), "0");
    assert_eq!(value(&w1.argv, "--data-parallel-start-rank"), "4");
    assert!(!w1.ports.contains_key("dp_rpc"), "only the leader binds it");
    // Both pools routable, each at its own node.
    assert_eq!(url(w0), format!("http://{}:{}", ip(0), port(w0, "http")));
    assert_eq!(url(w1), format!("http://{}:{}", ip(1), port(w1, "http")));
    // An agg role without a connector gets no KV config, so no side channel either.
    for w in [w0, w1] {
        assert!(!w.ports.contains_key("nixl"), "{:?}", w.ports);
        assert!(!w.env.contains_key("VLLM_NIXL_SIDE_CHANNEL_PORT"));
        assert!(!has(&w.argv, "--kv-transfer-config"));
    }

    for r in routers(&plan) {
        assert_eq!(managed_members(&plan, r), vec![url(w0), url(w1)]);
        assert!(
            !has(&r.argv, "--intra-node-data-parallel-size"),
            "the second pool owns global ranks 4..7: no node-local expansion"
        );
    }
    // The Router sees two workers (the URLs, not the 8 ranks).
    assert_static_gates(&plan, 0, 2);
}

#[test]
fn agg_tp_multinode_leader_serves_follower_is_headless() {
    let plan = plan("examples/seed/agg-tp-multinode.yaml");
    let ws = workers(&plan);
    assert_eq!(ws.len(), 2);
    let (leader, follower) = (ws[0], ws[1]);
    assert_eq!((leader.node, follower.node), (0, 1));
    // The leader: an HTTP port, node rank 0.
    assert!(leader.ports.contains_key("http"));
    assert_eq!(
        value(&leader.argv, "--port"),
        port(leader, "http").to_string()
    );
    assert_eq!(value(&leader.argv, "--node-rank"), "0");
    assert!(!has(&leader.argv, "--headless"));
    // The follower: headless, rank 1, no HTTP.
    assert!(has(&follower.argv, "--headless"));
    assert_eq!(value(&follower.argv, "--node-rank"), "1");
    assert!(!has(&follower.argv, "--port"));
    assert!(!has(&follower.argv, "--host"));
    assert!(!follower.ports.contains_key("http"));
    assert_eq!(follower.worker.as_ref().unwrap().advertised_url, None);
    // One rendezvous.
    for w in [leader, follower] {
        assert_eq!(value(&w.argv, "--tensor-parallel-size"), "8");
        assert_eq!(value(&w.argv, "--nnodes"), "2");
        assert_eq!(value(&w.argv, "--master-addr"), ip(0));
        assert_eq!(
            value(&w.argv, "--master-port"),
            port(leader, "master").to_string()
        );
        assert!(w.env_unset.contains(&"VLLM_PORT".to_string()));
        assert!(!has(&w.argv, "--data-parallel-size-local"));
    }
    assert!(follower.depends_on.contains(&leader.address));
    // Only the leader is advertised.
    assert_eq!(advertised(&plan), vec![url(leader)]);
    for r in routers(&plan) {
        assert_eq!(managed_members(&plan, r), vec![url(leader)]);
    }
    assert_static_gates(&plan, 0, 1);
}

/// Facts common to both NIXL P/D examples.
fn assert_nixl_pd(plan: &LaunchPlan, intra_dp: u32) {
    let r = single_router(plan);
    assert!(has(&r.argv, "--vllm-pd-disaggregation"));
    assert!(!has(&r.argv, "--worker-urls"));
    assert!(!has(&r.argv, "--kv-connector"));
    assert!(!has(&r.argv, "--vllm-discovery-address"));
    // --prefill URL NIXL_PORT: the prefill's side-channel base.
    let prefills = of_role(plan, RoleKind::Prefill);
    let want: Vec<Vec<String>> = prefills
        .iter()
        .map(|p| {
            assert_eq!(
                p.env["VLLM_NIXL_SIDE_CHANNEL_PORT"],
                port(p, "nixl").to_string()
            );
            vec![url(p).to_string(), port(p, "nixl").to_string()]
        })
        .collect();
    let got: Vec<Vec<String>> = occurrences(&r.argv, "--prefill")
        .into_iter()
        .map(|v| v.into_iter().map(String::from).collect())
        .collect();
    assert_eq!(got, want);
    let decodes = of_role(plan, RoleKind::Decode);
    let want: Vec<Vec<&str>> = decodes.iter().map(|d| vec![url(d)]).collect();
    assert_eq!(occurrences(&r.argv, "--decode"), want);
    assert_eq!(
        value(&r.argv, "--intra-node-data-parallel-size"),
        intra_dp.to_string()
    );
    // The workers are on its command line: it restarts when they change, and says why.
    let m = plan
        .memberships
        .iter()
        .find(|m| m.router == r.address)
        .unwrap();
    assert_eq!(m.mode, MembershipMode::Static);
    assert!(m
        .note
        .as_deref()
        .unwrap()
        .contains("cannot add prefill/decode workers"));
    assert_eq!(m.members.len(), prefills.len() + decodes.len());
    assert_eq!(r.watches.len(), prefills.len() + decodes.len());
    // Every worker runs NIXL as kv_both.
    for w in workers(plan) {
        let config: serde_json::Value =
            serde_json::from_str(value(&w.argv, "--kv-transfer-config")).unwrap();
        assert_eq!(
            config,
            serde_json::json!({"kv_connector": "NixlConnector", "kv_role": "kv_both"})
        );
        assert_eq!(w.env["VLLM_NIXL_SIDE_CHANNEL_HOST"], ip(w.node));
    }
    // The Router counts the ranks each URL expands into.
    assert_static_gates(
        plan,
        prefills.len() as u32 * intra_dp,
        decodes.len() as u32 * intra_dp,
    );
}

#[test]
fn disagg_nixl_prefill_bootstrap_ports_and_two_decodes() {
    let plan = plan("examples/seed/disagg-nixl.yaml");
    let p = of_role(&plan, RoleKind::Prefill);
    let d = of_role(&plan, RoleKind::Decode);
    assert_eq!((p.len(), d.len()), (1, 2));
    assert_eq!(p[0].node, 0);
    // Decode starts on a fresh node: one whole node per decode worker.
    assert_eq!(d.iter().map(|w| w.node).collect::<Vec<_>>(), [1, 2]);
    for w in workers(&plan) {
        assert_eq!(w.devices, [0, 1, 2, 3]);
        assert_eq!(value(&w.argv, "--data-parallel-size"), "4");
        assert_eq!(value(&w.argv, "--data-parallel-size-local"), "4");
        assert_eq!(value(&w.argv, "--data-parallel-start-rank"), "0");
        assert_eq!(value(&w.argv, "--data-parallel-address"), ip(w.node));
        // A single-node DP endpoint keeps its VLLM_PORT scan base.
        assert!(w.env.contains_key("VLLM_PORT"));
    }
    // Each endpoint has its own NIXL run of 4 (DP ranks), never shared on a host; each
    // is alone on its node here, so each counts from the base.
    let runs: BTreeSet<(usize, u16)> = workers(&plan)
        .iter()
        .map(|w| (w.node, port(w, "nixl")))
        .collect();
    assert_eq!(runs.len(), 3);
    assert!(runs.iter().all(|&(_, base)| base == 5400), "{runs:?}");
    assert_nixl_pd(&plan, 4);
    assert_eq!(
        value(&routers(&plan)[0].argv, "--policy"),
        "consistent_hash"
    );
}

#[test]
fn local_disagg_colocated_nixl_on_one_node() {
    let plan = plan("examples/local-disagg.yaml");
    assert_eq!(plan.nodes.len(), 1);
    let p = of_role(&plan, RoleKind::Prefill);
    let d = of_role(&plan, RoleKind::Decode);
    assert_eq!((p.len(), d.len()), (1, 1));
    assert_eq!((p[0].node, d[0].node), (0, 0));
    assert_eq!(p[0].devices, [0, 1]);
    assert_eq!(
        d[0].devices,
        [2, 3],
        "decode takes the prefill node's remaining GPUs"
    );
    // Same host: every per-node listener differs.
    assert_ne!(port(p[0], "http"), port(d[0], "http"));
    assert_ne!(port(p[0], "dp_rpc"), port(d[0], "dp_rpc"));
    assert_eq!(
        value(&d[0].argv, "--data-parallel-rpc-port"),
        port(d[0], "dp_rpc").to_string()
    );
    assert_nixl_pd(&plan, 2);
    assert_eq!(
        value(&routers(&plan)[0].argv, "--worker-startup-timeout-secs"),
        "120"
    );
}

#[test]
fn slurm_disagg_prefill_and_decode_on_different_nodes() {
    let plan = plan("examples/slurm-disagg.yaml");
    assert_eq!(plan.nodes.len(), 2);
    let p = of_role(&plan, RoleKind::Prefill);
    let d = of_role(&plan, RoleKind::Decode);
    assert_eq!((p.len(), d.len()), (1, 1));
    assert_eq!(
        (p[0].node, d[0].node),
        (0, 1),
        "decode starts on a fresh node"
    );
    for w in workers(&plan) {
        assert_eq!(w.devices, [0, 1, 2, 3]);
        assert_eq!(value(&w.argv, "--data-parallel-address"), ip(w.node));
        assert_eq!(
            w.container_image.as_deref(),
            Some("nvcr.io/nvidia/vllm:25.09")
        );
    }
    // Distinct hosts: both workers may use the first port of every kind.
    assert_eq!(port(p[0], "http"), port(d[0], "http"));
    assert_nixl_pd(&plan, 4);
    assert_eq!(single_router(&plan).node, 0);
}

/// Two TP 2 workers on each of three nodes, the Router on node 0: each node a group of
/// its own, so that on SLURM each is an allocation that can come and go alone.
#[test]
fn slurm_agg_puts_two_workers_on_each_of_three_nodes_each_its_own_group() {
    let plan = plan("examples/slurm-agg.yaml");
    assert_eq!(plan.nodes.len(), 3);
    let placed: Vec<(usize, Vec<u32>)> = workers(&plan)
        .iter()
        .map(|w| (w.node, w.devices.clone()))
        .collect();
    assert_eq!(
        placed,
        [
            (0, vec![0, 1]),
            (0, vec![2, 3]),
            (1, vec![0, 1]),
            (1, vec![2, 3]),
            (2, vec![0, 1]),
            (2, vec![2, 3])
        ]
    );
    assert_eq!(single_router(&plan).node, 0);
    assert_eq!(plan.node_groups(), [vec![0], vec![1], vec![2]]);
    // The endpoints of an MPI job or of a replica spanning nodes share a group.
    let tp16 = plan_with(
        "examples/seed/agg-tp-multinode.yaml",
        None,
        HostLayout::Distinct,
    );
    assert!(
        tp16.node_groups().iter().any(|g| g.len() > 1),
        "{:?}",
        tp16.node_groups()
    );
}

/// The runtime keys change nothing of the topology: the same processes, nodes and
/// ports as `slurm-disagg.yaml`, with what runs around each worker's program.
#[test]
fn slurm_runtime_keys_wrap_the_same_topology() {
    let bare = plan("examples/slurm-disagg.yaml");
    let plan = plan("examples/slurm-runtime-keys.yaml");
    assert_eq!(plan.processes.len(), bare.processes.len());
    for (p, b) in plan.processes.iter().zip(&bare.processes) {
        assert_eq!(
            (&p.address, p.node, &p.ports),
            (&b.address, b.node, &b.ports)
        );
        assert_eq!(p.wrap.setup.is_empty(), p.worker.is_none(), "{}", p.address);
        assert_eq!(
            p.wrap.mounts,
            ["/lustre/models:/models", "/lustre/datasets:/datasets:ro"]
        );
    }
    assert_nixl_pd(&plan, 4);
}

/// Every MoRI-IO fact of the contract table, for every worker of a plan.
fn assert_moriio(plan: &LaunchPlan) {
    let r = single_router(plan);
    assert!(has(&r.argv, "--vllm-pd-disaggregation"));
    assert_eq!(value(&r.argv, "--kv-connector"), "moriio");
    assert_eq!(value(&r.argv, "--vllm-discovery-address"), "0.0.0.0:36367");
    for flag in ["--prefill", "--decode", "--worker-urls"] {
        assert!(!has(&r.argv, flag), "{flag} in discovery mode");
    }
    assert_eq!(port(r, "discovery"), 36367);
    assert!(
        !has(&r.argv, "--intra-node-data-parallel-size"),
        "no URLs, nothing to expand"
    );

    let mut handshake_ports = BTreeSet::new();
    let mut notify_ports = BTreeSet::new();
    let ws = workers(plan);
    assert!(ws.iter().any(|w| role(w) == RoleKind::Prefill));
    assert!(ws.iter().any(|w| role(w) == RoleKind::Decode));
    for w in &ws {
        let config: serde_json::Value =
            serde_json::from_str(value(&w.argv, "--kv-transfer-config")).unwrap();
        assert_eq!(config["kv_connector"], "MoRIIOConnector");
        let want_role = match role(w) {
            RoleKind::Prefill => "kv_producer",
            RoleKind::Decode => "kv_consumer",
            RoleKind::Agg => unreachable!("MoRI-IO is P/D only"),
        };
        assert_eq!(config["kv_role"], want_role, "{}", w.address);
        let extra = &config["kv_connector_extra_config"];
        assert_eq!(
            extra["proxy_ip"],
            ip(0),
            "the head node, where the Router runs"
        );
        assert_eq!(extra["proxy_ping_port"], "36367");
        assert_eq!(extra["http_port"], port(w, "http").to_string());
        assert_eq!(extra["http_port"], value(&w.argv, "--port"));
        assert_eq!(extra["host_ip"], ip(w.node), "its own node's IP");
        assert_eq!(extra["read_mode"], true);
        let hs = w.ports["moriio_handshake"];
        let nt = w.ports["moriio_notify"];
        assert_eq!(extra["handshake_port"], hs.base.to_string());
        assert_eq!(extra["notify_port"], nt.base.to_string());
        // One port per local rank.
        assert_eq!(usize::from(hs.count), w.devices.len(), "{}", w.address);
        assert_eq!(usize::from(nt.count), w.devices.len(), "{}", w.address);
        // Never reused on a host (ports repeat across hosts).
        for p in hs.base..=hs.last() {
            assert!(
                handshake_ports.insert((w.node, p)),
                "handshake port {p} reused"
            );
        }
        for p in nt.base..=nt.last() {
            assert!(notify_ports.insert((w.node, p)), "notify port {p} reused");
        }
        // No VLLM_PORT (TP children would inherit it) and no NIXL side channel.
        assert!(!w.env.contains_key("VLLM_PORT"));
        assert!(w.env_unset.contains(&"VLLM_PORT".to_string()));
        assert!(!w.env.keys().any(|k| k.starts_with("VLLM_NIXL")));
        assert!(!w.ports.contains_key("nixl"));
        assert!(!w.ports.contains_key("vllm_scan"));
    }
    assert!(handshake_ports.is_disjoint(&notify_ports));

    // Readiness: the Router's own /health (discovery cannot be counted), then every
    // worker's /health.
    let names: Vec<&str> = plan.gates.iter().map(|g| g.address.as_str()).collect();
    assert_eq!(names, ["gate.router", "gate.workers", "smoke"]);
    assert_eq!(
        plan.gates[0].probe,
        health(vec![format!("http://{}:8000", ip(0))])
    );
    let want: Vec<String> = advertised(plan)
        .iter()
        .map(std::string::ToString::to_string)
        .collect();
    assert_eq!(
        want.len(),
        ws.len(),
        "every MoRI-IO worker is an API server"
    );
    assert_eq!(plan.gates[1].probe, health(want));
}

/// `GET <url>/health` answers 2xx on every URL.
fn health(urls: Vec<String>) -> Probe {
    Probe::Http {
        urls,
        path: "/health".into(),
    }
}

#[test]
fn moriio_colocated_discovery_and_worker_config() {
    let plan = plan("examples/seed/moriio-colocated.yaml");
    assert_eq!(plan.nodes.len(), 1);
    let p = of_role(&plan, RoleKind::Prefill);
    let d = of_role(&plan, RoleKind::Decode);
    assert_eq!((p.len(), d.len()), (1, 1));
    assert_eq!((p[0].node, d[0].node), (0, 0), "decode colocated on node0");
    assert_eq!(p[0].devices, [0]);
    assert_eq!(d[0].devices, [1], "the next free GPU of node0");
    assert_moriio(&plan);
}

#[test]
fn moriio_reference_recipe_tp_blocks_per_worker() {
    let plan = plan("examples/vllm-router-moriio-disagg.yaml");
    let p = of_role(&plan, RoleKind::Prefill);
    let d = of_role(&plan, RoleKind::Decode);
    assert_eq!((p.len(), d.len()), (2, 1));
    assert_eq!(p[0].devices, [0, 1]);
    assert_eq!(p[1].devices, [2, 3]);
    assert_eq!(
        d[0].devices,
        [4, 5, 6, 7],
        "decode on node0's remaining GPUs"
    );
    assert!(workers(&plan).iter().all(|w| w.node == 0));
    assert_eq!(value(&d[0].argv, "--tensor-parallel-size"), "4");
    // Blocks sized to the GPU count: 2, 2 and 4 ports.
    assert_eq!(p[0].ports["moriio_notify"].count, 2);
    assert_eq!(d[0].ports["moriio_notify"].count, 4);
    for w in workers(&plan) {
        assert_eq!(w.env["MORI_IO_ENABLE_NOTIFICATION"], "0");
    }
    assert_moriio(&plan);
    assert_eq!(
        value(&routers(&plan)[0].argv, "--policy"),
        "consistent_hash"
    );
    assert_eq!(
        value(&routers(&plan)[0].argv, "--worker-startup-timeout-secs"),
        "3600"
    );
}

/// MoRI-IO across nodes (not a seed example): a hybrid-LB decode spanning two nodes.
/// Every node's API server registers with the Router on the head node and names its
/// own node as `host_ip`.
#[test]
fn moriio_across_nodes_host_ip_is_each_workers_own_node() {
    let text = "
resources:
  gpus_per_node: 4
engine:
  type: vllm
  connector: moriio
frontend:
  enable_multiple_frontends: false
roles:
  prefill:
    nodes: 1
    workers: 1
    args:
      data-parallel-size: 4
  decode:
    nodes: 2
    workers: 1
    args:
      data-parallel-size: 8
";
    let source = srt::recipe::Source {
        name: "moriio-multinode.yaml".into(),
        text: text.into(),
    };
    let recipe = srt::recipe::load_str(&source, "moriio-multinode").unwrap();
    let plan = srt::assemble::assemble(&recipe, &Default::default()).unwrap();
    let d = of_role(&plan, RoleKind::Decode);
    assert_eq!(d.iter().map(|w| w.node).collect::<Vec<_>>(), [1, 2]);
    assert_eq!(value(&d[1].argv, "--data-parallel-start-rank"), "4");
    assert_moriio(&plan);
}

#[test]
fn multi_frontend_nginx_and_identical_routers() {
    let plan = plan("examples/multi-frontend.yaml");
    let ng = nginx(&plan).expect("nginx");
    assert_eq!(ng.node, 0);
    assert_eq!(port(ng, "public"), 8000);
    assert_eq!(plan.public_url, format!("http://{}:8000", ip(0)));
    let rs = routers(&plan);
    assert_eq!(rs.iter().map(|r| r.node).collect::<Vec<_>>(), [1, 2]);
    let conf = ng.files.values().next().expect("nginx.conf");
    assert!(conf.contains("listen 8000;"));
    for r in &rs {
        assert_eq!(port(r, "frontend_internal"), 8180);
        assert_eq!(value(&r.argv, "--port"), "8180");
        assert!(!r.ports.contains_key("public"));
        assert_eq!(
            value(&r.argv, "--prometheus-port"),
            port(r, "router_metrics").to_string()
        );
        assert!(conf.contains(&format!("server {}:8180 max_fails=0;", ip(r.node))));
        assert_eq!(value(&r.argv, "--policy"), "cache_aware");
    }
    // Identical backend topology on every Router.
    assert_eq!(rs[0].argv, rs[1].argv);
    assert_eq!(advertised(&plan).len(), 6);
    assert_eq!(managed_members(&plan, rs[0]), advertised(&plan));
    // nginx depends on no Router (it starts alongside them, and a replaced Router does
    // not restart it); the next Router takes a request one cannot serve; smoke goes
    // through nginx.
    assert!(ng.depends_on.is_empty() && ng.watches.is_empty());
    assert!(conf.contains("proxy_next_upstream error timeout http_502 http_503 non_idempotent;"));
    // No Router depends on a worker: srt adds them to each one as they become healthy.
    for r in &rs {
        assert!(r.depends_on.is_empty());
        assert_eq!(managed_members(&plan, r).len(), 6);
    }
    assert!(plan.gates[2].depends_on.contains(&"nginx".to_string()));
    assert_static_gates(&plan, 0, 6);

    // On one host (the local executor) every Router still needs its own listeners.
    let shared = plan_with("examples/multi-frontend.yaml", None, HostLayout::Shared);
    let rs = routers(&shared);
    let metrics: BTreeSet<u16> = rs.iter().map(|r| port(r, "router_metrics")).collect();
    let internal: BTreeSet<u16> = rs.iter().map(|r| port(r, "frontend_internal")).collect();
    assert_eq!((metrics.len(), internal.len()), (2, 2));
    assert!(!internal.contains(&8000));
}

/// An srtctl 2.0 recipe as srt-slurm writes them loads unchanged: `slurm`, `precision`,
/// `gpu_type` and an sa-bench `benchmark` are read, not refused or ignored.
#[test]
fn srtctl_shape_loads_unchanged() {
    let text = std::fs::read_to_string(root().join("examples/srtctl-shape.yaml")).unwrap();
    let source = srt::recipe::Source {
        name: "srtctl-shape.yaml".into(),
        text,
    };
    let recipe = srt::recipe::load_str(&source, "x").unwrap();
    assert_eq!(recipe.slurm.time_limit.as_deref(), Some("01:00:00"));
    assert_eq!(recipe.model.precision.as_deref(), Some("bf16"));
    assert_eq!(recipe.resources.gpu_type.as_deref(), Some("h100"));
    let plan = plan("examples/srtctl-shape.yaml");
    assert_eq!(plan.precision.as_deref(), Some("bf16"));
    let ws = workers(&plan);
    assert_eq!(ws.len(), 3);
    assert_eq!(
        ws[0].argv.to_vec()[..3],
        ["vllm", "serve", "Qwen/Qwen3-0.6B"]
    );
    let devices: Vec<Vec<u32>> = ws.iter().map(|w| w.devices.clone()).collect();
    assert_eq!(devices, [vec![0, 1], vec![2, 3], vec![4, 5]]);
    let bench = plan
        .gates
        .iter()
        .find(|g| g.address == "benchmark")
        .expect("benchmark gate");
    assert_eq!(bench.depends_on, ["smoke"]);
    match &bench.probe {
        srt::launch::Probe::Benchmark(spec) => {
            assert_eq!(
                spec.dataset,
                srt::bench::Dataset::Random {
                    isl: 128,
                    osl: 64,
                    range_ratio: 0.8,
                    prefix_len: 0
                }
            );
            assert_eq!(spec.concurrencies, [2, 4]);
            assert_eq!((spec.num_prompts_mult, spec.num_warmup_mult), (10, 2));
            assert_eq!(spec.request_rate, srt::bench::Rate::Inf);
            assert_eq!(spec.tokenizer, "Qwen/Qwen3-0.6B");
            assert_eq!(spec.percentiles, [90.0, 99.0]);
        }
        other => panic!("{other:?}"),
    }
}

/// DEP8 with an explicit NIXL connector on the agg role: one run of 8 side-channel ports;
/// vLLM adds the global rank to the env base, so node1 binds base+4..base+7 and leases
/// them on node1.
#[test]
fn agg_dep8_with_nixl_splits_side_channels_per_node() {
    let text = std::fs::read_to_string(root().join("examples/seed/agg-dep8.yaml"))
        .unwrap()
        .replace(
            "      enable-expert-parallel: true",
            "      enable-expert-parallel: true\n      connector: nixl",
        );
    let source = srt::recipe::Source {
        name: "dep8-nixl.yaml".into(),
        text,
    };
    let recipe = srt::recipe::load_str(&source, "dep8-nixl").unwrap();
    let plan = srt::assemble::assemble(&recipe, &Default::default()).unwrap();
    let ws = workers(&plan);
    let (w0, w1) = (ws[0], ws[1]);
    let base = port(w0, "nixl");
    for w in [w0, w1] {
        assert_eq!(w.env["VLLM_NIXL_SIDE_CHANNEL_PORT"], base.to_string());
        assert!(has(&w.argv, "--kv-transfer-config"));
    }
    assert_eq!(w0.ports["nixl"].count, 4);
    assert_eq!(
        (w1.ports["nixl"].base, w1.ports["nixl"].count),
        (base + 4, 4)
    );
    assert!(plan
        .leases
        .iter()
        .any(|l| l.kind == "nixl" && l.host == "node1" && l.block.base == base + 4));
}

/// DP4 over two 2-GPU nodes: two routable hybrid-LB pools (start ranks 0 and 2) sharing
/// the leader's DP address and RPC port; the Router gets both URLs, unexpanded.
#[test]
fn local_dp_two_hybrid_lb_pools() {
    let plan = plan("examples/local-dp.yaml");
    let ws = workers(&plan);
    assert_eq!(ws.len(), 2);
    let starts: Vec<&str> = ws
        .iter()
        .map(|w| value(&w.argv, "--data-parallel-start-rank"))
        .collect();
    assert_eq!(starts, ["0", "2"]);
    for w in &ws {
        assert_eq!(value(&w.argv, "--data-parallel-size-local"), "2");
        assert_eq!(value(&w.argv, "--data-parallel-address"), "<node0-ip>");
        assert!(has(&w.argv, "--data-parallel-hybrid-lb"));
        assert!(!has(&w.argv, "--headless"));
    }
    assert_eq!(
        value(&ws[0].argv, "--data-parallel-rpc-port"),
        value(&ws[1].argv, "--data-parallel-rpc-port")
    );
    let r = single_router(&plan);
    assert_eq!(managed_members(&plan, r), advertised(&plan));
    assert!(!has(&r.argv, "--intra-node-data-parallel-size"));
}

#[test]
fn local_agg_two_single_gpu_workers_on_one_node() {
    let plan = plan("examples/local-agg.yaml");
    let ws = workers(&plan);
    assert_eq!(ws.len(), 2);
    assert_eq!(
        (ws[0].devices.clone(), ws[1].devices.clone()),
        (vec![0], vec![1])
    );
    assert_ne!(port(ws[0], "http"), port(ws[1], "http"));
    assert_ne!(ws[0].env["VLLM_PORT"], ws[1].env["VLLM_PORT"]);
    for w in &ws {
        assert_eq!(w.env["PYTHONUNBUFFERED"], "1");
        assert_eq!(w.argv.to_vec()[..3], ["vllm", "serve", "/models/tiny"]);
        assert_eq!(value(&w.argv, "--served-model-name"), "tiny");
        assert_eq!(value(&w.argv, "--max-model-len"), "2048");
        assert!(
            !has(&w.argv, "--kv-transfer-config"),
            "agg without a connector"
        );
    }
    let r = single_router(&plan);
    assert_eq!(value(&r.argv, "--policy"), "round_robin");
    assert_eq!(value(&r.argv, "--worker-startup-timeout-secs"), "120");
    assert_eq!(managed_members(&plan, r), advertised(&plan));
    assert_static_gates(&plan, 0, 2);
}

/// A `custom` benchmark runs on the node of the public endpoint (the Router's), told
/// each worker's endpoint, after the smoke completion.
#[test]
fn local_custom_benchmark_runs_beside_the_router_told_every_worker() {
    let plan = plan("examples/local-custom-benchmark.yaml");
    let ws = workers(&plan);
    assert_eq!(ws.len(), 2);
    let r = single_router(&plan);
    let gate = plan
        .gates
        .iter()
        .find(|g| g.address == "benchmark")
        .unwrap();
    assert_eq!(gate.depends_on, ["smoke"]);
    let srt::launch::Probe::Command(run) = &gate.probe else {
        panic!("{:?}", gate.probe)
    };
    assert_eq!(run.node, r.node);
    let endpoints: Vec<String> = ws
        .iter()
        .map(|w| format!("{}:{}", srt::launch::node_ip(w.node), port(w, "http")))
        .collect();
    assert_eq!(run.env["SRT_AGG_ENDPOINTS"], endpoints.join(","));
    assert_eq!(run.env["SRT_FRONTEND_PORT"], "8000");
    assert_eq!(run.env["PYTHONUNBUFFERED"], "1");
    assert_eq!(run.argv[..2], ["bash", "-c"]);
}

/// The SGLang Model Gateway: `sglang-router launch` in regular mode listing every
/// worker, its readiness read from `/readiness` (its `/health` is 200 with no worker).
#[test]
fn sglang_gateway_single_and_behind_nginx() {
    let plan = plan("examples/local-agg-sglang.yaml");
    let r = single_router(&plan);
    assert_eq!(r.argv.to_vec()[..2], ["sglang-router", "launch"]);
    assert_eq!(managed_members(&plan, r), advertised(&plan));
    assert_eq!(value(&r.argv, "--prometheus-host"), "0.0.0.0");
    assert_eq!(value(&r.argv, "--worker-startup-timeout-secs"), "120");
    assert_eq!(value(&r.argv, "--worker-startup-check-interval"), "1");
    assert!(r.depends_on.is_empty(), "starts alongside its workers");
    let names: Vec<&str> = plan.gates.iter().map(|g| g.address.as_str()).collect();
    assert_eq!(names, ["gate.router", "gate.workers", "smoke"]);
    let Probe::JsonCounts { urls, path, counts } = &plan.gates[0].probe else {
        panic!("{:?}", plan.gates[0].probe)
    };
    assert_eq!(urls, &[format!("http://{}:8000", ip(0))]);
    assert_eq!(path, "/readiness");
    assert_eq!(counts.len(), 1);
    assert_eq!(counts[0].pointers, ["/healthy_workers"]);
    assert_eq!(counts[0].at_least, 2);

    let multi = common::plan("examples/local-multi-sglang.yaml");
    let ng = nginx(&multi).expect("nginx");
    let conf = ng.files.values().next().expect("nginx.conf");
    let rs = routers(&multi);
    assert_eq!(rs.len(), 2);
    assert_eq!(rs[0].argv, rs[1].argv, "identical gateways");
    for r in &rs {
        assert_eq!(value(&r.argv, "--port"), "8180");
        assert!(conf.contains(&format!("server {}:8180 max_fails=0;", ip(r.node))));
    }
    let Probe::JsonCounts { urls, .. } = &multi.gates[0].probe else {
        panic!("{:?}", multi.gates[0].probe)
    };
    assert_eq!(urls.len(), 2, "every gateway counts its workers");
}

/// The Shepherd Model Gateway: `smg launch` in regular mode, started empty, every
/// worker added through its admin API; its readiness read from `/readiness`.
#[test]
fn smg_gateway_starts_empty_and_lists_every_worker() {
    let plan = plan("examples/local-agg-smg.yaml");
    let r = single_router(&plan);
    assert_eq!(r.argv.to_vec()[..2], ["smg", "launch"]);
    assert!(!r.argv.to_vec().iter().any(|a| a == "--worker-urls"));
    assert_eq!(managed_members(&plan, r), advertised(&plan));
    assert_eq!(value(&r.argv, "--policy"), "round_robin");
    assert_eq!(value(&r.argv, "--worker-startup-timeout-secs"), "120");
    assert!(r.depends_on.is_empty(), "starts alongside its workers");
    let Probe::JsonCounts { path, counts, .. } = &plan.gates[0].probe else {
        panic!("{:?}", plan.gates[0].probe)
    };
    assert_eq!(path, "/readiness");
    assert_eq!(counts[0].pointers, ["/healthy_workers"]);
    assert_eq!(counts[0].at_least, 2);
}

/// smg in prefill/decode mode: `--pd-disaggregation`, still started empty, every worker a
/// managed member in its role with the connector the gateway pairs over; its gate counts
/// both roles.
#[test]
fn smg_prefill_decode_adds_each_worker_in_its_role() {
    for (example, gateway_node) in [
        ("examples/local-disagg-smg.yaml", 0),
        ("examples/slurm-disagg-smg.yaml", 1),
    ] {
        let plan = plan(example);
        let rs = routers(&plan);
        assert_eq!(rs.len(), 1, "{example}");
        let r = rs[0];
        assert_eq!(r.node, gateway_node, "{example}");
        assert_eq!(r.argv.to_vec()[..2], ["smg", "launch"]);
        assert_eq!(occurrences(&r.argv, "--pd-disaggregation").len(), 1);
        assert!(occurrences(&r.argv, "--prefill").is_empty());
        assert!(occurrences(&r.argv, "--decode").is_empty());
        assert_eq!(value(&r.argv, "--prefill-policy"), "round_robin");
        assert_eq!(managed_members(&plan, r), advertised(&plan));
        let m = &plan.memberships[0];
        for member in m.members.iter() {
            let w = plan
                .processes
                .iter()
                .find(|p| p.address == member.worker)
                .unwrap();
            assert_eq!(member.role, w.worker.as_ref().unwrap().role);
            assert_ne!(member.role, RoleKind::Agg);
            assert_eq!(member.kv_connector, Some("NixlConnector"));
        }
        let Probe::JsonCounts { counts, .. } = &plan.gates[0].probe else {
            panic!("{:?}", plan.gates[0].probe)
        };
        assert_eq!(counts[0].at_least as usize, m.members.len());
    }
    // Behind nginx on SLURM: nginx on the head, the gateway on the decode node.
    let plan = plan("examples/slurm-disagg-smg.yaml");
    assert_eq!(nginx(&plan).map(|n| n.node), Some(0));
}

/// What every SGLang process gets from the allocator: its own HTTP and NCCL ports on its
/// node (never another process's on the same host), and its GPUs as
/// `CUDA_VISIBLE_DEVICES`, the devices srt placed it on.
fn assert_sglang_processes(plan: &LaunchPlan) {
    let mut seen = BTreeSet::new();
    for w in workers(plan) {
        assert_eq!(
            w.argv.to_vec()[..3],
            ["python3", "-m", "sglang.launch_server"]
        );
        assert_eq!(value(&w.argv, "--port"), port(w, "http").to_string());
        assert_eq!(
            value(&w.argv, "--nccl-port"),
            port(w, "sglang_nccl").to_string()
        );
        assert_eq!(value(&w.argv, "--host"), "0.0.0.0");
        let devices: Vec<String> = w.devices.iter().map(u32::to_string).collect();
        assert_eq!(w.env["CUDA_VISIBLE_DEVICES"], devices.join(","));
        for block in w.ports.values() {
            for p in block.base..block.base + block.count {
                assert!(seen.insert((w.node, p)), "{} reuses port {p}", w.address);
            }
        }
    }
}

#[test]
fn sglang_agg_tp_workers_each_on_their_own_gpus() {
    let plan = plan("examples/local-sglang-agg.yaml");
    assert_sglang_processes(&plan);
    let ws = workers(&plan);
    assert_eq!(ws.len(), 2);
    assert_eq!(ws[0].devices, [0, 1]);
    assert_eq!(ws[1].devices, [2, 3]);
    for w in &ws {
        assert_eq!(value(&w.argv, "--tp-size"), "2");
        // One node, no attention DP: no rendezvous address to allocate.
        assert!(!has(&w.argv, "--dist-init-addr") && !has(&w.argv, "--nnodes"));
        assert!(!has(&w.argv, "--disaggregation-mode"));
    }
    let r = single_router(&plan);
    assert!(!has(&r.argv, "--pd-disaggregation"));
    assert_eq!(managed_members(&plan, r), advertised(&plan));
}

#[test]
fn sglang_disagg_prefill_serves_its_bootstrap_port_and_attention_dp_its_dist_init_block() {
    let plan = plan("examples/local-sglang-disagg.yaml");
    assert_sglang_processes(&plan);
    let prefill = of_role(&plan, RoleKind::Prefill);
    let decode = of_role(&plan, RoleKind::Decode);
    assert_eq!((prefill.len(), decode.len()), (1, 2));
    let p = prefill[0];
    let bootstrap = port(p, "sglang_bootstrap");
    assert_eq!(
        value(&p.argv, "--disaggregation-bootstrap-port"),
        bootstrap.to_string()
    );
    assert_eq!(p.worker.as_ref().unwrap().bootstrap_port, Some(bootstrap));
    for w in prefill.iter().chain(&decode) {
        let role = role(w).name();
        assert_eq!(value(&w.argv, "--disaggregation-mode"), role);
        assert_eq!(value(&w.argv, "--disaggregation-transfer-backend"), "nixl");
        // Attention DP derives six ports from the dist-init port: all seven allocated.
        let block = w.ports["sglang_dist_init"];
        assert_eq!(block.count, 7);
        assert_eq!(
            value(&w.argv, "--dist-init-addr"),
            format!("{}:{}", node_ip(w.node), block.base)
        );
    }
    for d in &decode {
        assert!(!has(&d.argv, "--disaggregation-bootstrap-port"));
        assert_eq!(d.worker.as_ref().unwrap().bootstrap_port, None);
        assert_eq!(d.worker.as_ref().unwrap().local_dp, 2);
    }
    let r = single_router(&plan);
    assert_eq!(count(&r.argv, "--pd-disaggregation"), 1);
    assert!(!has(&r.argv, "--prefill") && !has(&r.argv, "--decode"));
    for member in plan.memberships[0].members.iter() {
        let w = process(&plan, &member.worker);
        assert_eq!(member.role, role(w));
        assert_eq!(
            member.bootstrap_port,
            w.worker.as_ref().unwrap().bootstrap_port
        );
    }
}

#[test]
fn sglang_multinode_leader_serves_and_the_follower_answers_its_own_health() {
    let plan = plan("examples/slurm-sglang-multinode.yaml");
    assert_sglang_processes(&plan);
    let ws = workers(&plan);
    assert_eq!(ws.len(), 2);
    let (leader, follower) = (ws[0], ws[1]);
    let dist = format!("{}:{}", node_ip(0), port(leader, "sglang_dist_init"));
    for (rank, w) in ws.iter().enumerate() {
        assert_eq!(value(&w.argv, "--dist-init-addr"), dist);
        assert_eq!(value(&w.argv, "--nnodes"), "2");
        assert_eq!(value(&w.argv, "--node-rank"), rank.to_string());
        assert_eq!(value(&w.argv, "--tp-size"), "8");
    }
    assert!(!follower.ports.contains_key("sglang_dist_init"));
    let info = follower.worker.as_ref().unwrap();
    assert!(info.headless && info.advertised_url.is_none());
    assert_eq!(
        follower.health_probe(),
        Some(health(vec![format!(
            "http://{}:{}",
            node_ip(1),
            port(follower, "http")
        )]))
    );
    assert_eq!(follower.depends_on, std::slice::from_ref(&leader.address));
    assert_eq!(advertised(&plan), [url(leader)]);
}

/// What registers a Dynamo worker: its endpoint (component by role), its mode (`None`:
/// it names none, SGLang's aggregated `null`), etcd's address on the infra node, and a
/// request-plane port of its own on its node.
fn assert_registers(plan: &LaunchPlan, w: &LaunchProcess, component: &str, mode: Option<&str>) {
    let ns = &plan.deployment;
    assert_eq!(
        value(&w.argv, "--endpoint"),
        format!("dyn://{ns}.{component}.generate")
    );
    match mode {
        Some(mode) => assert_eq!(value(&w.argv, "--disaggregation-mode"), mode),
        None => assert!(!has(&w.argv, "--disaggregation-mode"), "{:?}", w.argv),
    }
    let etcd = plan.processes.iter().find(|p| p.address == "etcd").unwrap();
    let client = etcd.ports["etcd_client"].base;
    assert_eq!(
        w.env["ETCD_ENDPOINTS"],
        format!("http://{}:{client}", ip(etcd.node))
    );
    assert!(w.depends_on.contains(&"etcd".to_string()));
    match plan.processes.iter().find(|p| p.address == "nats") {
        // The NATS request plane: requests come over NATS, the worker's system
        // server (whose metrics name its instance) on its own node.
        Some(nats) => {
            let port = nats.ports["nats_client"].base;
            assert_eq!(
                w.env["NATS_SERVER"],
                format!("nats://{}:{port}", ip(nats.node))
            );
            assert_eq!(value(&w.argv, "--request-plane"), "nats");
            assert_eq!(w.env["DYN_SYSTEM_HOST"], ip(w.node));
            assert_eq!(
                w.env["DYN_SYSTEM_PORT"],
                w.ports["runtime_system"].base.to_string()
            );
            assert!(!w.env.contains_key("DYN_TCP_RPC_PORT"));
            assert!(w.depends_on.contains(&"nats".to_string()));
        }
        None => {
            assert_eq!(w.env["DYN_TCP_RPC_HOST"], ip(w.node));
            assert_eq!(
                w.env["DYN_TCP_RPC_PORT"],
                w.ports["runtime_rpc"].base.to_string()
            );
            assert!(!w.env.contains_key("NATS_SERVER"));
        }
    }
    assert!(w.worker.as_ref().unwrap().advertised_url.is_none());
}

/// The instances of each role `gate.frontend` waits for the frontend to list.
fn listed_counts(plan: &LaunchPlan) -> Vec<u32> {
    let listed = plan.gates.iter().find(|g| g.address == "gate.frontend");
    let Some(Probe::JsonItems { lists, .. }) = listed.map(|g| &g.probe) else {
        panic!("{:?}", plan.gates)
    };
    lists.iter().map(|l| l.at_least).collect()
}

#[test]
fn dynamo_agg_and_disagg_register_every_worker_under_the_namespace() {
    let agg = plan("examples/local-dynamo-agg.yaml");
    let workers = of_role(&agg, RoleKind::Agg);
    assert_eq!(workers.len(), 3);
    // `use-vllm-tokenizer` is `dynamo.vllm`'s own flag: after vLLM's, before the
    // registration srt adds.
    for w in &workers {
        let words: Vec<&str> = w.argv.iter().collect();
        let own = words.iter().position(|t| *t == "--use-vllm-tokenizer");
        let vllm = words.iter().position(|t| *t == "--max-model-len");
        let registration = words.iter().position(|t| *t == "--endpoint");
        assert!(vllm < own && own < registration, "{words:?}");
    }
    let rpc: BTreeSet<u16> = workers
        .iter()
        .map(|w| w.ports["runtime_rpc"].base)
        .collect();
    assert_eq!(
        rpc.len(),
        3,
        "one request-plane port each on the shared host"
    );
    for w in &workers {
        assert_registers(&agg, w, "backend", Some("agg"));
    }
    let frontend = agg
        .processes
        .iter()
        .find(|p| p.address == "frontend[0]")
        .unwrap();
    assert_eq!(value(&frontend.argv, "--namespace"), agg.deployment);
    assert_eq!(value(&frontend.argv, "--http-port"), "8000");
    let gates: Vec<&str> = agg.gates.iter().map(|g| g.address.as_str()).collect();
    assert_eq!(gates, ["gate.etcd", "gate.frontend", "gate.model", "smoke"]);
    let Probe::JsonItems { lists, .. } = &agg.gates[1].probe else {
        panic!("{:?}", agg.gates[1].probe)
    };
    assert_eq!(lists[0].at_least, 3);
    for path in [
        "examples/local-dynamo-disagg.yaml",
        "examples/slurm-dynamo-disagg.yaml",
    ] {
        let pd = plan(path);
        let p = of_role(&pd, RoleKind::Prefill);
        let d = of_role(&pd, RoleKind::Decode);
        assert_eq!((p.len(), d.len()), (1, 2), "{path}");
        assert_registers(&pd, p[0], "prefill", Some("prefill"));
        for w in &d {
            assert_registers(&pd, w, "backend", Some("decode"));
        }
        assert_eq!(listed_counts(&pd), [1, 2], "{path}");
    }
    let slurm = plan("examples/slurm-dynamo-disagg.yaml");
    let d = of_role(&slurm, RoleKind::Decode);
    assert!(d.iter().all(|w| w.node == 1), "decode on the second node");
    assert_eq!(
        d[0].env["ETCD_ENDPOINTS"],
        format!("http://{}:12300", ip(0))
    );
    assert_eq!(d[0].env["NATS_SERVER"], format!("nats://{}:12500", ip(0)));
    assert_eq!(d[0].env["DYN_SYSTEM_HOST"], ip(1));
}

/// TensorRT-LLM prefill/decode behind Dynamo: each worker is one MPI job of one rank
/// under `trtllm-llmapi-launch`, reading its role's config file (a resource it depends
/// on, one per role, every worker of the role reading the same); no bootstrap port.
/// Under `--simulate` each is the mocker scheduling as TensorRT-LLM does.
#[test]
fn dynamo_trtllm_prefill_decode_read_their_roles_config_file() {
    let plan = plan("examples/local-dynamo-trtllm.yaml");
    let p = of_role(&plan, RoleKind::Prefill);
    let d = of_role(&plan, RoleKind::Decode);
    assert_eq!((p.len(), d.len()), (1, 2));
    let files: Vec<&str> = plan.files.iter().map(|f| f.address.as_str()).collect();
    assert_eq!(
        files,
        ["file.prefill.engine-config", "file.decode.engine-config"]
    );
    for (w, component, mode, role) in [
        (p[0], "prefill", "prefill", "prefill"),
        (d[0], "backend", "decode", "decode"),
        (d[1], "backend", "decode", "decode"),
    ] {
        assert_eq!(w.argv.to_vec()[..3], ["python3", "-m", "dynamo.trtllm"]);
        assert_registers(&plan, w, component, Some(mode));
        let file = plan
            .files
            .iter()
            .find(|f| f.address == format!("file.{role}.engine-config"))
            .unwrap();
        assert_eq!(value(&w.argv, "--extra-engine-args"), file.path);
        assert!(w.depends_on.contains(&file.address), "{:?}", w.depends_on);
        let ranks = w.ranks.as_ref().expect("an MPI job");
        assert_eq!((ranks.tasks, ranks.nodes.as_slice()), (1, &[0][..]));
        assert_eq!(ranks.launcher, ["trtllm-llmapi-launch"]);
        assert!(!w.ports.contains_key("sglang_bootstrap"));
        let mocker = w.worker.as_ref().unwrap().simulated.clone().unwrap();
        assert_eq!(mocker.to_vec()[..3], ["python3", "-m", "dynamo.mocker"]);
        assert_eq!(value(&mocker, "--engine-type"), "trtllm");
        assert_eq!(value(&mocker, "--block-size"), "16");
        assert!(!has(&mocker, "--bootstrap-ports"), "{mocker:?}");
    }
    let decode = plan
        .files
        .iter()
        .find(|f| f.address.contains("decode"))
        .unwrap();
    assert!(
        decode.content.contains("max_batch_size: 64"),
        "{}",
        decode.content
    );
    assert!(
        decode.content.contains("backend: \"UCX\""),
        "{}",
        decode.content
    );
}

/// Aggregated TensorRT-LLM of TP 2: each worker is one MPI job of two ranks on its
/// node's two GPUs; the tensor parallel size the GPUs give is written into the config
/// file, and the mocker serves both attention ranks' batch.
#[test]
fn dynamo_trtllm_agg_worker_is_one_mpi_job_of_its_gpus() {
    let plan = plan("examples/local-dynamo-trtllm-agg.yaml");
    let a = of_role(&plan, RoleKind::Agg);
    assert_eq!(a.len(), 2);
    let devices: Vec<Vec<u32>> = a.iter().map(|w| w.devices.clone()).collect();
    assert_eq!(devices, [vec![0, 1], vec![2, 3]]);
    for w in &a {
        assert_registers(&plan, w, "backend", Some("agg"));
        assert_eq!(w.ranks.as_ref().unwrap().tasks, 2);
        assert!(has(&w.argv, "--publish-kv-events") && has(&w.argv, "--publish-metrics"));
        let mocker = w.worker.as_ref().unwrap().simulated.clone().unwrap();
        assert_eq!(value(&mocker, "--max-num-seqs"), "32");
        assert_eq!(value(&mocker, "--max-num-batched-tokens"), "4096");
    }
    assert_eq!(plan.files.len(), 1);
    assert!(plan.files[0].content.contains("tensor_parallel_size: 2"));
}

/// TensorRT-LLM DEP on GB200 nodes: the decode endpoint is one MPI job of 8 ranks over
/// its two nodes (rank 0's first), each rank bound to both NUMA nodes; the attention-DP
/// prefill is one job of 4 ranks; the mocker serves each as TensorRT-LLM's DP ranks.
#[test]
fn dynamo_trtllm_dep_decode_is_one_mpi_job_over_its_nodes() {
    let plan = plan("examples/slurm-dynamo-trtllm-dep.yaml");
    let p = of_role(&plan, RoleKind::Prefill);
    let d = of_role(&plan, RoleKind::Decode);
    assert_eq!((p.len(), d.len()), (1, 1));
    let ranks = d[0].ranks.as_ref().unwrap();
    assert_eq!((ranks.tasks, ranks.nodes.as_slice()), (8, &[1, 2][..]));
    assert_eq!(
        ranks.launcher,
        ["numactl", "-m", "0,1", "trtllm-llmapi-launch"]
    );
    assert_eq!(p[0].ranks.as_ref().unwrap().tasks, 4);
    for (w, dp) in [(p[0], "4"), (d[0], "8")] {
        let mocker = w.worker.as_ref().unwrap().simulated.clone().unwrap();
        assert_eq!(value(&mocker, "--data-parallel-size"), dp, "{mocker:?}");
    }
}

/// srtctl v1's TensorRT-LLM recipe, as it is: `backend.trtllm_config.<mode>` is each
/// role's config file, `<mode>_environment` its env, `publish_events_and_metrics` the
/// engine's key.
#[test]
fn srtctl_v1_trtllm_config_becomes_each_roles_config_file() {
    let plan = plan("examples/srtctl-v1/disagg-trtllm.yaml");
    let p = of_role(&plan, RoleKind::Prefill);
    let d = of_role(&plan, RoleKind::Decode);
    assert_eq!((p.len(), d.len()), (2, 1));
    assert_eq!(d[0].ranks.as_ref().unwrap().tasks, 4);
    for w in p.iter().chain(&d) {
        assert_eq!(w.env["TLLM_LOG_LEVEL"], "INFO");
        assert!(has(&w.argv, "--publish-kv-events"), "{:?}", w.argv);
    }
    let file = |role: &str| {
        let address = format!("file.{role}.engine-config");
        plan.files
            .iter()
            .find(|f| f.address == address)
            .unwrap()
            .content
            .clone()
    };
    assert!(file("prefill").contains("max_batch_size: 8"));
    assert!(file("decode").contains("enable_attention_dp: true"));
}

/// SGLang prefill/decode behind Dynamo: each worker is `python3 -m dynamo.sglang` with
/// SGLang's flags (its role's mode among them, once: the wrapper reads SGLang's own),
/// registered by the runtime; the prefill serves its bootstrap port. Under `--simulate`
/// each is the mocker scheduling as SGLang does, the prefill on that bootstrap port.
#[test]
fn dynamo_sglang_prefill_decode_register_with_sglangs_own_mode_flag() {
    let plan = plan("examples/local-dynamo-sglang.yaml");
    let p = of_role(&plan, RoleKind::Prefill);
    let d = of_role(&plan, RoleKind::Decode);
    assert_eq!((p.len(), d.len()), (1, 2));
    for (w, component, mode) in [
        (p[0], "prefill", "prefill"),
        (d[0], "backend", "decode"),
        (d[1], "backend", "decode"),
    ] {
        assert_eq!(
            w.argv.to_vec()[..5],
            [
                "python3",
                "-m",
                "dynamo.sglang",
                "--model-path",
                ".tools/models/tiny"
            ]
        );
        assert_registers(&plan, w, component, Some(mode));
        assert_eq!(count(&w.argv, "--disaggregation-mode"), 1, "{:?}", w.argv);
        assert_eq!(value(&w.argv, "--disaggregation-transfer-backend"), "nixl");
        let mocker = w.worker.as_ref().unwrap().simulated.clone().unwrap();
        assert_eq!(mocker.to_vec()[..3], ["python3", "-m", "dynamo.mocker"]);
        assert_eq!(value(&mocker, "--engine-type"), "sglang");
        assert_eq!(value(&mocker, "--disaggregation-mode"), mode);
        assert_eq!(value(&mocker, "--block-size"), "16");
    }
    let bootstrap = port(p[0], "sglang_bootstrap").to_string();
    assert_eq!(
        value(&p[0].argv, "--disaggregation-bootstrap-port"),
        bootstrap
    );
    let simulated = |w: &LaunchProcess| w.worker.as_ref().unwrap().simulated.clone().unwrap();
    assert_eq!(value(&simulated(p[0]), "--bootstrap-ports"), bootstrap);
    for w in &d {
        assert!(!has(&w.argv, "--disaggregation-bootstrap-port"));
        assert!(!has(&simulated(w), "--bootstrap-ports"));
        assert_eq!(value(&simulated(w), "--max-num-seqs"), "64");
    }
    assert_eq!(listed_counts(&plan), [1, 2]);
}

/// An SGLang worker spanning two nodes behind Dynamo, its requests over NATS: the leader
/// registers; the follower runs SGLang's ranks under `dynamo.sglang`, which still
/// connects to the runtime at node rank > 0, so it gets the runtime's address and its
/// registration as the variables the wrapper reads its flags' defaults from, registers
/// nothing, and is judged by its liveness (no stand-in health server under Dynamo).
#[test]
fn dynamo_sglang_follower_connects_to_the_runtime_without_registering() {
    let source = srt::recipe::Source {
        name: "span.yaml".into(),
        text: "name: span
model:
  path: /models/tiny
  served_name: tiny
resources:
  gpus_per_node: 2
engine: sglang
frontend:
  type: dynamo
dynamo:
  request_plane: nats
roles:
  agg:
    nodes: 2
    workers: 1
    args:
      tp-size: 4
"
        .into(),
    };
    let recipe = srt::recipe::load_str(&source, "span").unwrap();
    let plan = srt::assemble::assemble(&recipe, &Default::default()).unwrap();
    let ws = workers(&plan);
    let (leader, follower) = (ws[0], ws[1]);
    // An aggregated SGLang worker names no mode: SGLang's `null`.
    assert_registers(&plan, leader, "backend", None);
    let mocker = leader.worker.as_ref().unwrap().simulated.clone().unwrap();
    assert_eq!(value(&mocker, "--disaggregation-mode"), "agg");
    assert_eq!(value(&follower.argv, "--node-rank"), "1");
    assert!(!has(&follower.argv, "--endpoint"));
    let env = |k: &str| follower.env.get(k).map(String::as_str);
    assert_eq!(env("DYN_ENDPOINT"), Some("dyn://span.backend.generate"));
    assert_eq!(env("DYN_DISCOVERY_BACKEND"), Some("etcd"));
    assert_eq!(env("DYN_REQUEST_PLANE"), Some("nats"));
    assert_eq!(
        env("ETCD_ENDPOINTS"),
        leader.env.get("ETCD_ENDPOINTS").map(String::as_str)
    );
    assert_eq!(
        env("NATS_SERVER"),
        leader.env.get("NATS_SERVER").map(String::as_str)
    );
    assert_eq!(env("DYN_EVENT_PLANE_HOST"), Some(ip(1).as_str()));
    assert!(!follower.ports.contains_key("runtime_system"));
    let info = follower.worker.as_ref().unwrap();
    assert!(info.headless && info.simulated.is_none());
    assert_eq!(follower.health_probe(), None);
    assert!(follower.depends_on.contains(&leader.address));
}

/// A recipe of `engine` behind Dynamo with `roles`, on nodes of four GPUs.
fn dynamo_plan(engine: &str, roles: &str) -> LaunchPlan {
    let source = srt::recipe::Source {
        name: "t.yaml".into(),
        text: format!(
            "name: t\nmodel:\n  path: /models/tiny\n  served_name: tiny\nresources:\n  gpus_per_node: 4\nengine: {engine}\nfrontend:\n  type: dynamo\nroles:\n{roles}"
        ),
    };
    let recipe = srt::recipe::load_str(&source, "t").unwrap();
    srt::assemble::assemble(&recipe, &Default::default()).unwrap()
}

/// What `--simulate` runs for a registering worker: Dynamo's mocker.
fn mocker(p: &LaunchProcess) -> srt::launch::Argv {
    p.worker.as_ref().and_then(|w| w.simulated.clone()).unwrap()
}

const DYNAMO_AGG: &str = "  agg:\n    nodes: 1\n    workers: 1\n    gpus: 1\n";

/// The runtime renders the registration flags the wrapper's own parser reads:
/// `dynamo.vllm` has a `--disaggregation-mode` of its own, `dynamo.sglang` reads SGLang's,
/// which names no mode for an aggregated worker. The mocker standing in for either gets
/// the mode, and schedules as the worker's engine.
#[test]
fn a_dynamo_wrapper_is_given_the_registration_flags_its_own_parser_reads() {
    for (engine, mode) in [("vllm", Some("agg")), ("sglang", None)] {
        let plan = dynamo_plan(engine, DYNAMO_AGG);
        let w = process(&plan, "worker.agg[0].node[0]");
        assert_registers(&plan, w, "backend", mode);
        assert_eq!(value(&mocker(w), "--disaggregation-mode"), "agg");
        assert_eq!(value(&mocker(w), "--engine-type"), engine);
    }
}

/// The mocker wants one bootstrap port per mocker worker (`--num-workers`, 1) whatever
/// its DP ranks: a vLLM prefill's first NIXL side channel, an SGLang prefill's bootstrap
/// server (for its attention-DP ranks too).
#[test]
fn a_prefill_mocker_has_one_bootstrap_port_whatever_its_dp_ranks() {
    let roles = "  prefill:\n    nodes: 1\n    workers: 1\n    gpus: 2\n    args:\n      data-parallel-size: 2\n  decode:\n    nodes: colocate\n    workers: 1\n    gpus: 1\n";
    let pd = dynamo_plan("vllm", roles);
    let p = process(&pd, "worker.prefill[0].node[0]");
    assert_eq!(value(&mocker(p), "--data-parallel-size"), "2");
    assert_eq!(p.ports["nixl"].count, 2);
    assert_eq!(
        value(&mocker(p), "--bootstrap-ports"),
        port(p, "nixl").to_string()
    );
    let d = process(&pd, "worker.decode[0].node[0]");
    assert!(!has(&mocker(d), "--bootstrap-ports"));
    let roles = roles.replace("data-parallel-size: 2", "tp-size: 2\n      attn-dp-size: 2");
    let pd = dynamo_plan("sglang", &roles);
    let p = process(&pd, "worker.prefill[0].node[0]");
    assert_eq!(value(&mocker(p), "--data-parallel-size"), "2");
    assert_eq!(
        value(&mocker(p), "--bootstrap-ports"),
        port(p, "sglang_bootstrap").to_string()
    );
}

/// `dynamo.sglang`'s own flags in a role's args come after SGLang's and before the
/// registration, and stay off the mocker.
#[test]
fn dynamo_sglangs_own_flags_follow_sglangs_and_stay_off_the_mocker() {
    let roles = format!(
        "{DYNAMO_AGG}    args:\n      endpoint-types: completions\n      context-length: 1024\n"
    );
    let plan = dynamo_plan("sglang", &roles);
    let w = process(&plan, "worker.agg[0].node[0]");
    let words: Vec<&str> = w.argv.iter().collect();
    let at = |flag: &str| words.iter().position(|t| *t == flag).unwrap();
    assert!(at("--context-length") < at("--endpoint-types"), "{words:?}");
    assert!(at("--endpoint-types") < at("--endpoint"), "{words:?}");
    assert!(!has(&mocker(w), "--endpoint-types"));
}

/// Every example is covered by a test above; a new example must get one too.
#[test]
fn every_example_has_a_topology_test() {
    let covered = [
        "examples/seed/agg-single.yaml",
        "examples/seed/agg-replicas.yaml",
        "examples/seed/agg-dep8.yaml",
        "examples/seed/agg-tp-multinode.yaml",
        "examples/seed/disagg-nixl.yaml",
        "examples/seed/moriio-colocated.yaml",
        "examples/vllm-router-moriio-disagg.yaml",
        "examples/multi-frontend.yaml",
        "examples/local-agg.yaml",
        "examples/local-agg-sglang.yaml",
        "examples/local-multi-sglang.yaml",
        "examples/local-agg-smg.yaml",
        "examples/local-disagg.yaml",
        "examples/local-dp.yaml",
        "examples/slurm-runtime-keys.yaml",
        "examples/slurm-disagg.yaml",
        "examples/srtctl-shape.yaml",
        "examples/local-dynamo-agg.yaml",
        "examples/local-dynamo-disagg.yaml",
        "examples/slurm-dynamo-disagg.yaml",
        "examples/local-dynamo-sglang.yaml",
        "examples/local-dynamo-trtllm.yaml",
        "examples/local-dynamo-trtllm-agg.yaml",
        "examples/slurm-dynamo-trtllm-dep.yaml",
        "examples/local-disagg-smg.yaml",
        "examples/slurm-disagg-smg.yaml",
        "examples/local-sglang-agg.yaml",
        "examples/local-sglang-disagg.yaml",
        "examples/slurm-sglang-multinode.yaml",
        "examples/slurm-agg.yaml",
        "examples/srtctl-v1/agg-vllm.yaml",
        "examples/srtctl-v1/disagg-sglang.yaml",
        "examples/srtctl-v1/disagg-trtllm.yaml",
        "examples/srtctl-v1/dep-sglang.yaml",
        "examples/srtctl-v1/override.yaml",
        "examples/srtctl-v1/sweep.yaml",
        "examples/srtctl-v1/accuracy-sglang.yaml",
        "examples/srtctl-v1/accuracy-vllm.yaml",
        "examples/srtctl-v1/trace-sglang.yaml",
        "examples/local-custom-benchmark.yaml",
    ];
    let found: Vec<String> = examples()
        .iter()
        .map(|p| {
            p.strip_prefix(root())
                .unwrap()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    for f in &found {
        assert!(covered.contains(&f.as_str()), "{f} has no topology test");
    }
}

/// Where a worker process is: its role, node and devices.
type Placed = (RoleKind, usize, Vec<u32>);

/// The workers of a plan as (role, node, devices), in address order.
fn placement(plan: &LaunchPlan) -> Vec<Placed> {
    workers(plan)
        .into_iter()
        .map(|w| (role(w), w.node, w.devices.clone()))
        .collect()
}

/// srtctl's v1 fixtures place their workers as srtctl v1 derives them: GPUs per worker
/// from `gpus_per_<role>` or nodes x GPUs per node / workers, decode after prefill on
/// nodes of its own, a worker over two nodes one process per node; an override file's
/// first variant (`override_tp4`); a sweep's first point (TP 2); an accuracy recipe
/// (whose evaluation runs on the public endpoint's node, the prefill's), of SGLang and
/// of vLLM; a trace replay's aggregated workers (TP 2, two to a node).
#[test]
fn srtctl_v1_fixtures_place_workers_as_srtctl_derives_them() {
    use RoleKind::{Agg, Decode, Prefill};
    let cases: [(&str, Vec<Placed>); 8] = [
        ("agg-vllm", vec![(Agg, 0, vec![0, 1]), (Agg, 0, vec![2, 3])]),
        (
            "trace-sglang",
            vec![(Agg, 0, vec![0, 1]), (Agg, 0, vec![2, 3])],
        ),
        (
            "accuracy-sglang",
            vec![
                (Prefill, 0, vec![0, 1, 2, 3]),
                (Decode, 1, vec![0, 1, 2, 3]),
            ],
        ),
        (
            "disagg-sglang",
            vec![
                (Prefill, 0, vec![0, 1]),
                (Prefill, 0, vec![2, 3]),
                (Decode, 1, vec![0, 1, 2, 3]),
            ],
        ),
        (
            "dep-sglang",
            vec![
                (Prefill, 0, vec![0, 1, 2, 3]),
                (Decode, 1, vec![0, 1, 2, 3]),
                (Decode, 2, vec![0, 1, 2, 3]),
            ],
        ),
        ("override", vec![(Agg, 0, vec![0, 1, 2, 3])]),
        ("sweep", vec![(Agg, 0, vec![0, 1])]),
        (
            "accuracy-vllm",
            vec![
                (Prefill, 0, vec![0, 1]),
                (Prefill, 0, vec![2, 3]),
                (Decode, 1, vec![0, 1, 2, 3]),
            ],
        ),
    ];
    for (name, expected) in cases {
        let plan = plan(format!("examples/srtctl-v1/{name}.yaml"));
        let mut got = placement(&plan);
        got.sort_by_key(|(r, n, d)| (*r as u8, *n, d.clone()));
        let mut want = expected;
        want.sort_by_key(|(r, n, d)| (*r as u8, *n, d.clone()));
        assert_eq!(got, want, "{name}");
    }
}

/// srtctl's `hf:org/name` model form reaches `vllm serve` as the bare Hugging Face id.
#[test]
fn hf_model_is_served_by_its_bare_id() {
    let source = srt::recipe::Source {
        name: "hf.yaml".into(),
        text: "model:\n  path: hf:Qwen/Qwen3-0.6B\nroles:\n  agg:\n    nodes: 1\n    workers: 1\n    gpus: 1\n"
            .into(),
    };
    let recipe = srt::recipe::load_str(&source, "hf").unwrap();
    let plan = srt::assemble::assemble(&recipe, &Default::default()).unwrap();
    let w = workers(&plan)[0];
    assert_eq!(w.argv.to_vec()[..3], ["vllm", "serve", "Qwen/Qwen3-0.6B"]);
}

/// A served name written in role args (srtctl's spelling) is the one the Router and
/// the smoke probe use, not the default derived from the model path.
#[test]
fn served_model_name_in_args_is_the_deployments_name() {
    let source = srt::recipe::Source {
        name: "named.yaml".into(),
        text: "roles:\n  agg:\n    nodes: 1\n    workers: 1\n    gpus: 1\n    args:\n      served-model-name: foo\n"
            .into(),
    };
    let recipe = srt::recipe::load_str(&source, "named").unwrap();
    let plan = srt::assemble::assemble(&recipe, &Default::default()).unwrap();
    assert_eq!(plan.served_model_name, "foo");
    let w = workers(&plan)[0];
    assert_eq!(count(&w.argv, "--served-model-name"), 1);
    assert_eq!(value(&w.argv, "--served-model-name"), "foo");
    let smoke = plan.gates.last().unwrap();
    assert!(
        matches!(&smoke.probe, Probe::Completion { model, .. } if model == "foo"),
        "{smoke:?}"
    );
}

/// `frontend.container_image` selects the Router's image; otherwise the Router reuses
/// the model container, as workers do.
#[test]
fn router_image_defaults_to_the_model_container() {
    let build = |frontend: &str| {
        let text = format!(
            "model:\n  container: model.sqsh\nfrontend:\n  enable_multiple_frontends: false\n{frontend}roles:\n  agg:\n    nodes: 1\n    workers: 1\n    gpus: 1\n"
        );
        let source = srt::recipe::Source {
            name: "image.yaml".into(),
            text,
        };
        let recipe = srt::recipe::load_str(&source, "image").unwrap();
        srt::assemble::assemble(&recipe, &Default::default()).unwrap()
    };
    let plan = build("");
    assert_eq!(
        workers(&plan)[0].container_image.as_deref(),
        Some("model.sqsh")
    );
    assert_eq!(
        routers(&plan)[0].container_image.as_deref(),
        Some("model.sqsh")
    );
    let plan = build("  container_image: router.sqsh\n");
    assert_eq!(
        workers(&plan)[0].container_image.as_deref(),
        Some("model.sqsh")
    );
    assert_eq!(
        routers(&plan)[0].container_image.as_deref(),
        Some("router.sqsh")
    );
}

fn benchmark_spec(benchmark: &str) -> srt::bench::Spec {
    let source = srt::recipe::Source {
        name: "bench.yaml".into(),
        text: format!(
            "model:\n  path: /models/tiny\nroles:\n  agg:\n    nodes: 1\n    workers: 1\n    gpus: 1\nbenchmark:\n{benchmark}"
        ),
    };
    let recipe = srt::recipe::load_str(&source, "bench").unwrap();
    let plan = srt::assemble::assemble(&recipe, &Default::default()).unwrap();
    let gate = plan
        .gates
        .iter()
        .find(|g| g.address == "benchmark")
        .unwrap();
    match &gate.probe {
        srt::launch::Probe::Benchmark(spec) => spec.clone(),
        other => panic!("{other:?}"),
    }
}

/// Every sa-bench key srtctl passes to its benchmark script reaches the run, and srt's
/// own keys (named after `vllm bench serve`'s options) too.
#[test]
fn benchmark_keys_reach_the_run() {
    let spec = benchmark_spec(
        "  type: sa-bench\n  isl: 1024\n  osl: 256\n  concurrencies: [1, 8]\n  req_rate: 2.5\n  random_range_ratio: 0.0\n  num_prompts_mult: 3\n  num_warmup_mult: 0\n  use_chat_template: false\n  dataset_name: random\n  random_prefix_len: 100\n  tokenizer: /tok\n  endpoint: /v1/chat/completions\n  ignore_eos: false\n  seed: 42\n  metric_percentiles: [50, 99.9]\n  goodput:\n    ttft: 500\n    tpot: 20.5\n",
    );
    assert_eq!(
        spec.dataset,
        srt::bench::Dataset::Random {
            isl: 1024,
            osl: 256,
            range_ratio: 0.0,
            prefix_len: 100
        }
    );
    assert_eq!(spec.concurrencies, [1, 8]);
    assert_eq!(spec.request_rate, srt::bench::Rate::PerSecond(2.5));
    assert_eq!((spec.num_prompts_mult, spec.num_warmup_mult), (3, 0));
    assert_eq!(spec.tokenizer, "/tok");
    assert_eq!(spec.endpoint, srt::bench::Endpoint::Chat);
    assert!(!spec.ignore_eos);
    assert!(!spec.use_chat_template);
    assert_eq!(spec.seed, 42);
    assert_eq!(spec.percentiles, [50.0, 99.9]);
    assert_eq!(
        spec.goodput,
        srt::bench::Slo {
            ttft_ms: Some(500.0),
            tpot_ms: Some(20.5),
            e2el_ms: None
        }
    );
    // Defaults: srtctl's (sa-bench's script), the model path as tokenizer.
    let spec = benchmark_spec("  type: sa-bench\n");
    assert_eq!(spec.tokenizer, "/models/tiny");
    assert_eq!((spec.num_prompts_mult, spec.num_warmup_mult), (10, 2));
    assert_eq!(spec.request_rate, srt::bench::Rate::Inf);
    assert!(spec.ignore_eos);
    assert!(!spec.use_chat_template);
    assert_eq!(spec.concurrencies, [1]);
    // srtctl's `req_rate` is `str | int`: a quoted number is the number.
    let spec = benchmark_spec("  type: sa-bench\n  req_rate: \"300\"\n");
    assert_eq!(spec.request_rate, srt::bench::Rate::PerSecond(300.0));
    // sa-bench's chat template (srtctl's default), as srtctl writes it.
    let spec = benchmark_spec("  type: sa-bench\n  use_chat_template: true\n");
    assert!(spec.use_chat_template);
    // srt's earlier name for num_prompts_mult, and a ShareGPT file with a fixed output.
    let spec = benchmark_spec(
        "  type: sa-bench\n  requests_per_concurrency: 4\n  dataset_name: sharegpt\n  dataset_path: /data/sg.json\n  osl: 32\n",
    );
    assert_eq!(spec.num_prompts_mult, 4);
    assert_eq!(
        spec.dataset,
        srt::bench::Dataset::Sharegpt {
            path: "/data/sg.json".into(),
            osl: Some(32)
        }
    );
}

/// srtctl's sa-bench slow-down is placed on each decode worker's leader (the URL
/// sglang-router reaches it by), never on a prefill or a headless rank, with SGLang's
/// route and the recipe's two times.
#[test]
fn a_slow_down_is_placed_on_every_decode_leader() {
    let source = srt::recipe::Source {
        name: "slow.yaml".into(),
        text: "schema: 2\nname: slow\nmodel:\n  path: /models/tiny\nengine: sglang\nfrontend:\n  type: sglang-router\nresources:\n  gpus_per_node: 4\nroles:\n  prefill:\n    nodes: 1\n    workers: 2\n    gpus: 1\n  decode:\n    nodes: 4\n    workers: 2\n    gpus: 8\n    args:\n      tp-size: 8\nbenchmark:\n  type: sa-bench\n  concurrencies: \"8\"\n  slow_down_sleep_time: 30\n  slow_down_wait_time: 120.5\n".into(),
    };
    let recipe = srt::recipe::load_str(&source, "slow").unwrap();
    let plan = srt::assemble::assemble(&recipe, &Default::default()).unwrap();
    let spec = match &plan
        .gates
        .iter()
        .find(|g| g.address == "benchmark")
        .unwrap()
        .probe
    {
        srt::launch::Probe::Benchmark(spec) => spec.clone(),
        other => panic!("{other:?}"),
    };
    let leaders: Vec<String> = plan
        .processes
        .iter()
        .filter_map(|p| {
            let w = p.worker.as_ref()?;
            (w.role == srt::recipe::RoleKind::Decode).then(|| w.advertised_url.clone())?
        })
        .collect();
    assert_eq!(
        leaders.len(),
        2,
        "one leader per decode worker of two nodes"
    );
    assert_eq!(
        spec.slow_down.as_deref(),
        Some(&srt::bench::SlowDown {
            servers: leaders,
            path: "/slow_down".into(),
            sleep_seconds: 30.0,
            wait_seconds: 120.5,
        })
    );
    assert!(plan.warnings.is_empty(), "{:?}", plan.warnings);
}

/// A hand-written NIXL config across nodes (`connector: none` and the role's own
/// `kv-transfer-config`): srt still opens the side channel the way the `nixl` row does,
/// the node's IP and a run of ports, so prefill and decode on different nodes can reach
/// each other; a role may set the variables itself, and its value wins.
#[test]
fn own_nixl_config_across_nodes_gets_the_side_channel_host() {
    let text = "frontend:
  enable_multiple_frontends: false
  args:
    policy: round_robin
engine:
  type: vllm
  connector: none
resources:
  gpus_per_node: 1
roles:
  prefill:
    nodes: 1
    workers: 1
    args:
      kv-transfer-config: {kv_connector: NixlConnector, kv_role: kv_both, kv_connector_extra_config: {backends: [UCX]}}
  decode:
    nodes: 1
    workers: 1
    args:
      kv-transfer-config: {kv_connector: NixlConnector, kv_role: kv_both}
    env:
      VLLM_NIXL_SIDE_CHANNEL_HOST: 10.0.0.7
";
    let source = srt::recipe::Source {
        name: "own-nixl.yaml".into(),
        text: text.into(),
    };
    let recipe = srt::recipe::load_str(&source, "own-nixl").unwrap();
    let plan = srt::assemble::assemble(&recipe, &Default::default())
        .unwrap_or_else(|p| panic!("{}", render_diag(&source.error(p))));
    let prefill = of_role(&plan, RoleKind::Prefill)[0];
    let decode = of_role(&plan, RoleKind::Decode)[0];
    assert_eq!((prefill.node, decode.node), (0, 1));
    assert_eq!(prefill.env["VLLM_NIXL_SIDE_CHANNEL_HOST"], ip(0));
    assert_eq!(decode.env["VLLM_NIXL_SIDE_CHANNEL_HOST"], "10.0.0.7");
    // Each on its own node's count (ports repeat across hosts).
    let (p, d) = (port(prefill, "nixl"), port(decode, "nixl"));
    assert_eq!(prefill.env["VLLM_NIXL_SIDE_CHANNEL_PORT"], p.to_string());
    assert_eq!(decode.env["VLLM_NIXL_SIDE_CHANNEL_PORT"], d.to_string());
    // The hand-written config is passed as written.
    assert!(value(&prefill.argv, "--kv-transfer-config").contains("UCX"));
    // The Router lists the prefill with its side-channel port, as for `nixl`.
    let router = &routers(&plan)[0];
    let at = router.argv.iter().position(|a| a == "--prefill").unwrap();
    assert_eq!(router.argv[at + 2], p.to_string());
}

/// `resources.spread_workers` (srtctl's): each worker smaller than a node takes a node
/// of its own; without it they pack. A role must declare a node per worker then.
#[test]
fn spread_workers_give_each_partial_worker_its_own_node() {
    use RoleKind::{Decode, Prefill};
    let text = |spread: bool, prefill_nodes: u32| {
        format!(
            "model:\n  path: /m\nresources:\n  gpus_per_node: 4\n  spread_workers: {spread}\n\
             roles:\n  prefill:\n    nodes: {prefill_nodes}\n    workers: 2\n    gpus: 1\n\
             \x20 decode:\n    nodes: 1\n    workers: 1\n    gpus: 2\n    args:\n      tensor-parallel-size: 2\n"
        )
    };
    let placed = |text: String| {
        let source = srt::recipe::Source {
            name: "spread.yaml".into(),
            text,
        };
        let recipe = srt::recipe::load_str(&source, "spread").unwrap();
        srt::assemble::assemble(&recipe, &Default::default()).map(|plan| placement(&plan))
    };
    assert_eq!(
        placed(text(true, 2)).unwrap(),
        [
            (Prefill, 0, vec![0]),
            (Prefill, 1, vec![0]),
            (Decode, 2, vec![0, 1])
        ]
    );
    assert_eq!(
        placed(text(false, 2)).unwrap(),
        [
            (Prefill, 0, vec![0]),
            (Prefill, 0, vec![1]),
            (Decode, 1, vec![0, 1])
        ]
    );
    let problems = placed(text(true, 1)).unwrap_err();
    assert_eq!(problems[0].code, "srt::recipe::nodes", "{problems:?}");
}

/// `engine.allow_prefill_decode_colocation` (srtctl's): decode goes on from the GPUs
/// prefill left on its node instead of starting a node of its own.
#[test]
fn allowed_colocation_lets_decode_take_what_prefill_left() {
    use RoleKind::{Decode, Prefill};
    let placed = |allow: bool| {
        let text = format!(
            "model:\n  path: /m\nresources:\n  gpus_per_node: 8\n\
             engine:\n  type: vllm\n  allow_prefill_decode_colocation: {allow}\n\
             roles:\n  prefill:\n    nodes: 1\n    workers: 1\n    gpus: 1\n\
             \x20 decode:\n    nodes: 1\n    workers: 1\n    gpus: 4\n    args:\n      tensor-parallel-size: 4\n"
        );
        let source = srt::recipe::Source {
            name: "colocation.yaml".into(),
            text,
        };
        let recipe = srt::recipe::load_str(&source, "colocation").unwrap();
        placement(&srt::assemble::assemble(&recipe, &Default::default()).unwrap())
    };
    assert_eq!(
        placed(true),
        [(Prefill, 0, vec![0]), (Decode, 0, vec![1, 2, 3, 4])]
    );
    assert_eq!(
        placed(false),
        [(Prefill, 0, vec![0]), (Decode, 1, vec![0, 1, 2, 3])]
    );
}

/// The Dynamo frontend's command and `frontend.args` follow the release the recipe
/// runs: srt has the frontend's flags of several ai-dynamo releases.
#[test]
fn the_dynamo_frontend_follows_the_release_the_recipe_runs() {
    let build = |dynamo: &str, args: &str| {
        let text = format!(
            "model:\n  path: /m\nresources:\n  gpus_per_node: 1\nfrontend:\n  type: dynamo\n{args}\
             dynamo:\n{dynamo}roles:\n  agg:\n    nodes: 1\n    workers: 1\n    gpus: 1\n"
        );
        let source = srt::recipe::Source {
            name: "dynamo.yaml".into(),
            text,
        };
        let recipe = srt::recipe::load_str(&source, "dynamo").unwrap();
        srt::assemble::assemble(&recipe, &Default::default())
    };
    let frontend_argv = |plan: &srt::launch::LaunchPlan| {
        plan.processes
            .iter()
            .find(|p| p.address == "frontend[0]")
            .unwrap()
            .argv
            .to_vec()
    };
    // 0.8's frontend discovers through etcd only and migrates nothing: no flags for it.
    let old = build("  version: \"0.8.0\"\n  install: true\n", "").unwrap();
    let argv = frontend_argv(&old);
    assert!(
        !argv
            .iter()
            .any(|w| w == "--discovery-backend" || w == "--migration-limit"),
        "{argv:?}"
    );
    let new = build("  version: \"1.6.1\"\n  install: true\n", "").unwrap();
    let argv = frontend_argv(&new);
    assert!(
        argv.iter().any(|w| w == "--discovery-backend")
            && argv.iter().any(|w| w == "--migration-limit"),
        "{argv:?}"
    );
    // A flag of the 1.3 series, which 1.6.1 dropped.
    let reset = "  args:\n    router-reset-states: true\n";
    assert!(build("  wheel: \"1.3.0.dev1\"\n", reset).is_ok());
    let refused = build("  version: \"1.6.1\"\n  install: true\n", reset).unwrap_err();
    assert_eq!(refused[0].code, "srt::recipe::unknown_flag", "{refused:?}");
    // A plane flag the release lacks.
    let plane = build(
        "  version: \"0.8.0\"\n  install: true\n  event_plane: zmq\n",
        "",
    )
    .unwrap_err();
    assert!(
        plane
            .iter()
            .any(|p| p.code == "srt::recipe::dynamo_plane" && p.message.contains("0.8.0")),
        "{plane:?}"
    );
}

/// A recipe that installs ai-dynamo 0.8.0 gives its vLLM workers that release's
/// registration: the namespace in `DYN_NAMESPACE`, the key-value store as `--store-kv`,
/// the role as `--is-prefill-worker` / `--is-decode-worker`, and none of the flags
/// 0.8.0's `dynamo.vllm` refuses (`--endpoint`, `--discovery-backend`,
/// `--disaggregation-mode`). 1.6.1's are given to a recipe that names no release.
#[test]
fn dynamo_0_8_vllm_workers_register_as_that_release_takes_it() {
    let text = |dynamo: &str| {
        format!(
            "schema: 2\nname: old-dynamo\nmodel:\n  path: /models/tiny\nresources:\n  gpus_per_node: 1\nfrontend:\n  type: dynamo\n{dynamo}roles:\n  prefill:\n    nodes: 1\n    workers: 1\n    gpus: 1\n  decode:\n    nodes: 1\n    workers: 1\n    gpus: 1\n"
        )
    };
    let plan_of = |dynamo: &str| {
        let source = srt::recipe::Source {
            name: "old.yaml".into(),
            text: text(dynamo),
        };
        let recipe = srt::recipe::load_str(&source, "old").unwrap();
        srt::assemble::assemble(&recipe, &Default::default()).unwrap()
    };
    let old = plan_of("dynamo:\n  version: \"0.8.0\"\n  install: true\n");
    for (address, role) in [
        ("worker.prefill[0].node[0]", "--is-prefill-worker"),
        ("worker.decode[0].node[0]", "--is-decode-worker"),
    ] {
        let p = process(&old, address);
        for refused in ["--endpoint", "--discovery-backend", "--disaggregation-mode"] {
            assert!(!has(&p.argv, refused), "{address}: {:?}", p.argv);
        }
        assert_eq!(value(&p.argv, "--store-kv"), "etcd");
        assert!(has(&p.argv, role), "{:?}", p.argv);
        assert_eq!(
            p.env.get("DYN_NAMESPACE").map(String::as_str),
            Some("old-dynamo")
        );
    }
    let current = plan_of("");
    let p = process(&current, "worker.prefill[0].node[0]");
    assert!(has(&p.argv, "--endpoint"), "{:?}", p.argv);
    assert!(!has(&p.argv, "--store-kv"), "{:?}", p.argv);
    assert!(!p.env.contains_key("DYN_NAMESPACE"));
}
