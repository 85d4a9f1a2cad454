//! Port kinds and the per-host port allocator.
//!
//! Every port a process binds comes from here, once, and is carried on the process;
//! nothing derives a port from another port. Every kind's counter restarts on every
//! host: each port is bound on its own host (a worker's listeners, its internal
//! `VLLM_PORT` scan, a DP endpoint's RPC and rendezvous ports on its leader, the NIXL
//! and MoRI-IO listeners, a Router's ports) and peers reach it at that host's address,
//! so two processes on one host never share a port while the same port may repeat on
//! other hosts. The facts behind each kind, checked in vLLM's source, are in
//! `docs/recipe-reference.md` ("Ports"). The allocator also holds fixed reservations
//! (the public frontend port, the discovery listener) and skips them, so a computed
//! block never lands on a fixed port.
//!
//! A run of ports may be split across hosts ([`PortAllocator::allocate_run`]): vLLM
//! offsets one side-channel base, the same on every node of an endpoint, by the global
//! DP rank, so each node binds its own ranks' part of the endpoint's run.
//!
//! Hosts, not symbolic nodes, key the counters: on a cluster every node is its own host;
//! the local executor maps all nodes onto one host, where no port repeats at all.

use std::collections::{BTreeMap, HashMap};

/// A declared port kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PortKind {
    /// Name shown in plans and state.
    pub name: &'static str,
    /// First port.
    pub base: u16,
    /// Distance between consecutive allocations' ordinals.
    pub stride: u16,
    /// Ports covered by one ordinal (e.g. a `VLLM_PORT` scan range).
    pub span: u16,
    /// What it is for.
    pub purpose: &'static str,
}

/// Worker HTTP API (leader only, or every hybrid-LB process).
pub const HTTP: PortKind = PortKind {
    name: "http",
    base: 6100,
    stride: 32,
    span: 1,
    purpose: "worker HTTP API",
};
/// NIXL side channels: a run of one port per DP rank of an endpoint, each rank's port
/// bound on the node that runs that rank's engine core.
pub const NIXL: PortKind = PortKind {
    name: "nixl",
    base: 5400,
    stride: 1,
    span: 1,
    purpose: "VLLM_NIXL_SIDE_CHANNEL_PORT (one per DP rank)",
};
/// vLLM data-parallel RPC port, one per DP endpoint on its leader.
pub const DP_RPC: PortKind = PortKind {
    name: "dp_rpc",
    base: 8400,
    stride: 1,
    span: 1,
    purpose: "--data-parallel-rpc-port",
};
/// torch.distributed rendezvous of a replica spanning nodes.
pub const MASTER: PortKind = PortKind {
    name: "master",
    base: 29500,
    stride: 10,
    span: 1,
    purpose: "--master-port",
};
/// Base of vLLM's internal port scan.
pub const VLLM_SCAN: PortKind = PortKind {
    name: "vllm_scan",
    base: 20000,
    stride: 50,
    span: 50,
    purpose: "VLLM_PORT scan range",
};
/// MoRI-IO handshake listeners, a block of one port per local rank.
pub const MORIIO_HANDSHAKE: PortKind = PortKind {
    name: "moriio_handshake",
    base: 26000,
    stride: 1,
    span: 1,
    purpose: "MoRI-IO handshake_port block",
};
/// MoRI-IO notify listeners, a block of one port per local rank.
pub const MORIIO_NOTIFY: PortKind = PortKind {
    name: "moriio_notify",
    base: 27000,
    stride: 1,
    span: 1,
    purpose: "MoRI-IO notify_port block",
};
/// A Router's port behind nginx.
pub const FRONTEND_INTERNAL: PortKind = PortKind {
    name: "frontend_internal",
    base: 8180,
    stride: 1,
    span: 1,
    purpose: "Router port behind nginx",
};
/// A Router's Prometheus listener (each Router needs its own).
pub const ROUTER_METRICS: PortKind = PortKind {
    name: "router_metrics",
    base: 29000,
    stride: 1,
    span: 1,
    purpose: "--prometheus-port",
};

/// etcd's client port (a frontend's discovery store).
pub const ETCD_CLIENT: PortKind = PortKind {
    name: "etcd_client",
    base: 12300,
    stride: 1,
    span: 1,
    purpose: "etcd --listen-client-urls",
};

/// etcd's peer port.
pub const ETCD_PEER: PortKind = PortKind {
    name: "etcd_peer",
    base: 12400,
    stride: 1,
    span: 1,
    purpose: "etcd --listen-peer-urls",
};

/// A worker's request-plane listener under a runtime (Dynamo's `DYN_TCP_RPC_PORT`).
pub const RUNTIME_RPC: PortKind = PortKind {
    name: "runtime_rpc",
    base: 24100,
    stride: 1,
    span: 1,
    purpose: "DYN_TCP_RPC_PORT (a worker's request plane)",
};

/// NATS's client port (a frontend's request and event planes).
pub const NATS_CLIENT: PortKind = PortKind {
    name: "nats_client",
    base: 12500,
    stride: 1,
    span: 1,
    purpose: "nats-server --port",
};

/// NATS's monitoring port (`/healthz`).
pub const NATS_MONITOR: PortKind = PortKind {
    name: "nats_monitor",
    base: 12600,
    stride: 1,
    span: 1,
    purpose: "nats-server --http_port",
};

/// A worker's system server under a runtime (Dynamo's `DYN_SYSTEM_PORT`: its metrics,
/// which name the instance it registered as).
pub const RUNTIME_SYSTEM: PortKind = PortKind {
    name: "runtime_system",
    base: 25100,
    stride: 1,
    span: 1,
    purpose: "DYN_SYSTEM_PORT (a worker's system server)",
};

/// A worker's KV-event publisher (`--kv-events-config`'s ZMQ endpoint), when the recipe
/// asks for KV events (`engine.kv_events_config`): a run of one per local DP rank.
pub const KV_EVENTS: PortKind = PortKind {
    name: "kv_events",
    base: 5200,
    stride: 1,
    span: 1,
    purpose: "a worker's `--kv-events-config` ZMQ endpoint (one per local DP rank)",
};

/// Every declared kind, for documentation and invariant checks.
pub const KINDS: &[PortKind] = &[
    HTTP,
    NIXL,
    DP_RPC,
    MASTER,
    VLLM_SCAN,
    MORIIO_HANDSHAKE,
    MORIIO_NOTIFY,
    FRONTEND_INTERNAL,
    ROUTER_METRICS,
    ETCD_CLIENT,
    ETCD_PEER,
    RUNTIME_RPC,
    NATS_CLIENT,
    NATS_MONITOR,
    RUNTIME_SYSTEM,
    KV_EVENTS,
];

/// Fixed (not counted) port uses: the public frontend port and the discovery listener.
pub const PUBLIC: &str = "public";
/// The Router's worker-discovery listener (`--vllm-discovery-address`).
pub const DISCOVERY: &str = "discovery";
/// Port of the discovery listener (the address MoRI-IO workers register with).
pub const DISCOVERY_PORT: u16 = 36367;

/// A contiguous run of ports handed to one process.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
pub struct PortBlock {
    /// First port.
    pub base: u16,
    /// Number of ports.
    pub count: u16,
}

impl PortBlock {
    /// The `i`-th port of the block; `None` past its end.
    pub fn port(&self, i: u16) -> Option<u16> {
        (i < self.count).then(|| self.base + i)
    }

    /// Last port (inclusive).
    pub fn last(&self) -> u16 {
        self.base + self.count - 1
    }
}

impl std::fmt::Display for PortBlock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.count == 1 {
            write!(f, "{}", self.base)
        } else {
            write!(f, "{}-{}", self.base, self.last())
        }
    }
}

/// Why an allocation failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PortError {
    /// The kind ran past 65535.
    #[error("port range exhausted for kind `{kind}` on {host}: {needed} more port(s) needed past {last}")]
    Exhausted {
        /// Kind name.
        kind: &'static str,
        /// Host key.
        host: String,
        /// Ports requested.
        needed: u32,
        /// Last port tried.
        last: u32,
    },
    /// A fixed port is already taken.
    #[error("port {port} on {host} is wanted by `{wanted_by}` but already allocated to `{owner}`")]
    Taken {
        /// The port.
        port: u16,
        /// Host key.
        host: String,
        /// Existing owner.
        owner: String,
        /// Requester.
        wanted_by: String,
    },
}

/// One ledger line: who holds which ports where.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize)]
pub struct Lease {
    /// Host key.
    pub host: String,
    /// Kind name (or `public` / `discovery`).
    pub kind: &'static str,
    /// Ports.
    pub block: PortBlock,
    /// Address of the owning process.
    pub owner: String,
}

/// Ordinals of a kind set aside for each [`PortScope`] on a host several scopes share:
/// scope `s` counts from ordinal `s x SCOPE_ORDINALS` there (from 0 on a host with one
/// scope). A scope that outgrows its share goes on past it, skipping whatever another
/// scope leased there. Small enough that two scopes of every kind end below
/// [`EPHEMERAL_START`]: a port there may already be a connection's (an apply refused
/// decode's `VLLM_PORT` range at 32,944 when the share was 256).
pub const SCOPE_ORDINALS: u32 = 120;

/// The first port Linux hands out to outgoing connections by default
/// (`net.ipv4.ip_local_port_range`): no allocated block should need to start past it.
pub const EPHEMERAL_START: u32 = 32768;

/// A set of processes whose ports one host counts apart from the others', so that a
/// scope growing never moves another's ports: each role of a deployment is one (a
/// prefill role that grows leaves the decode workers on a shared host where they are,
/// instead of shifting them onto the ports of the workers they replace), and what is
/// not a worker shares scope 0.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PortScope(pub u16);

/// The ports of one host: each kind's next ordinal per scope, and every lease.
#[derive(Debug, Default)]
struct HostPorts {
    /// (Kind name, scope) -> next ordinal.
    next: BTreeMap<(&'static str, PortScope), u32>,
    /// Start -> (end inclusive, lease index).
    taken: BTreeMap<u16, (u16, usize)>,
}

impl HostPorts {
    /// The lease overlapping `start..=end`, if any.
    fn overlap(&self, start: u16, end: u16) -> Option<usize> {
        // The last lease starting at or before `end` is the only candidate that can overlap
        // from the left; any lease starting inside [start, end] overlaps too.
        self.taken
            .range(..=end)
            .next_back()
            .filter(|(_, (e, _))| *e >= start)
            .map(|(_, (_, idx))| *idx)
    }
}

/// Allocates ports for one deployment. Allocation is a pure function of the order of calls.
#[derive(Debug, Default)]
pub struct PortAllocator {
    /// Host key -> its counters and leases (only ever looked up by key, never iterated,
    /// so the map's order cannot reach any output).
    hosts: HashMap<String, HostPorts>,
    /// Every lease in allocation order.
    leases: Vec<Lease>,
    /// The scope allocations count in now.
    scope: PortScope,
    /// Hosts several scopes share, where each counts from its own share of ordinals.
    shared: std::collections::HashSet<String>,
}

impl PortAllocator {
    /// An empty allocator: no lease, every counter at its kind's base.
    pub fn new() -> Self {
        Self::default()
    }

    fn overlap(&self, host: &str, start: u16, end: u16) -> Option<usize> {
        self.hosts.get(host)?.overlap(start, end)
    }

    /// Count the allocations that follow in `scope` (until the next call).
    pub fn set_scope(&mut self, scope: PortScope) {
        self.scope = scope;
    }

    /// Hosts that `placements` (host, scope) put more than one scope on: there each
    /// scope counts from its own share of every kind's ordinals. Called before any
    /// scoped allocation.
    pub fn share_hosts<'h>(&mut self, placements: impl Iterator<Item = (&'h str, PortScope)>) {
        let mut scopes: HashMap<&str, PortScope> = HashMap::new();
        for (host, scope) in placements {
            match scopes.get(host) {
                Some(s) if *s != scope => {
                    self.shared.insert(host.to_string());
                }
                Some(_) => {}
                None => {
                    scopes.insert(host, scope);
                }
            }
        }
    }

    /// The first ordinal of the current scope on `host`.
    fn first_ordinal(&self, host: &str) -> u32 {
        match self.shared.contains(host) {
            true => u32::from(self.scope.0) * SCOPE_ORDINALS,
            false => 0,
        }
    }

    fn host_mut(&mut self, host: &str) -> &mut HostPorts {
        if !self.hosts.contains_key(host) {
            self.hosts.insert(host.to_string(), HostPorts::default());
        }
        self.hosts.get_mut(host).expect("inserted above")
    }

    fn record(&mut self, host: &str, kind: &'static str, block: PortBlock, owner: &str) {
        let idx = self.leases.len();
        self.leases.push(Lease {
            host: host.to_string(),
            kind,
            block,
            owner: owner.to_string(),
        });
        self.host_mut(host)
            .taken
            .insert(block.base, (block.last(), idx));
    }

    /// Reserve a fixed port (or block) on `host`.
    pub fn reserve(
        &mut self,
        host: &str,
        kind: &'static str,
        block: PortBlock,
        owner: &str,
    ) -> Result<(), PortError> {
        if let Some(idx) = self.overlap(host, block.base, block.last()) {
            return Err(PortError::Taken {
                port: block.base,
                host: host.to_string(),
                owner: self.leases[idx].owner.clone(),
                wanted_by: owner.to_string(),
            });
        }
        self.record(host, kind, block, owner);
        Ok(())
    }

    /// Allocate `count` consecutive ordinals of `kind` for `owner` on `host`: the first
    /// block at or past the kind's counter on that host that overlaps none of its leases.
    pub fn allocate(
        &mut self,
        kind: &PortKind,
        host: &str,
        count: u16,
        owner: &str,
    ) -> Result<PortBlock, PortError> {
        let blocks = self.allocate_run(kind, &[(host, count, owner)])?;
        Ok(blocks[0])
    }

    /// Allocate one contiguous run of `kind` whose parts are bound on different hosts:
    /// part `i` is `(host, count, owner)` and gets the next `count` ordinals of the run
    /// (a part of 0 ordinals is an empty block, leased nowhere). The run starts at or
    /// past the kind's counter on every part's host; each part is free on the host that
    /// binds it and leased there, and that host's counter moves past it. Parts on one
    /// host never overlap each other (they are consecutive pieces of one run).
    ///
    /// This is what a rank-offset block spread over nodes needs: vLLM adds the global DP
    /// rank to `VLLM_NIXL_SIDE_CHANNEL_PORT`, one base for every node of an endpoint, so
    /// an endpoint's side channels are one run of `dp` ports of which each node binds
    /// only its own ranks'.
    pub fn allocate_run(
        &mut self,
        kind: &PortKind,
        parts: &[(&str, u16, &str)],
    ) -> Result<Vec<PortBlock>, PortError> {
        let key = (kind.name, self.scope);
        let counter = |host: &str| {
            self.hosts
                .get(host)
                .and_then(|p| p.next.get(&key).copied())
                .unwrap_or_else(|| self.first_ordinal(host))
        };
        let mut ordinal = parts.iter().map(|p| counter(p.0)).max().unwrap_or(0);
        let total: u32 = parts.iter().map(|(_, c, _)| u32::from(*c)).sum();
        let width = total * u32::from(kind.span);
        let host0 = parts.first().map(|p| p.0).unwrap_or_default();
        'search: loop {
            let start = u32::from(kind.base) + ordinal * u32::from(kind.stride);
            let end = start + width.max(1) - 1;
            if end > u32::from(u16::MAX) {
                return Err(PortError::Exhausted {
                    kind: kind.name,
                    host: host0.to_string(),
                    needed: width,
                    last: start,
                });
            }
            let mut base = start;
            for (host, count, _) in parts {
                let part = u32::from(*count) * u32::from(kind.span);
                if part > 0
                    && self
                        .overlap(host, base as u16, (base + part - 1) as u16)
                        .is_some()
                {
                    ordinal += 1;
                    continue 'search;
                }
                base += part;
            }
            let mut blocks = Vec::with_capacity(parts.len());
            let (mut base, mut next) = (start, ordinal);
            for (host, count, owner) in parts {
                let block = PortBlock {
                    base: base as u16,
                    count: count * kind.span,
                };
                next += u32::from(*count);
                if block.count > 0 {
                    self.record(host, kind.name, block, owner);
                    let first = self.first_ordinal(host);
                    let counter = self.host_mut(host).next.entry(key).or_insert(first);
                    *counter = (*counter).max(next);
                }
                blocks.push(block);
                base += u32::from(block.count);
            }
            return Ok(blocks);
        }
    }

    /// Every lease, in allocation order.
    pub fn leases(&self) -> &[Lease] {
        &self.leases
    }

    /// Every lease, in allocation order, taken out of the allocator.
    pub fn into_leases(self) -> Vec<Lease> {
        self.leases
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn per_node_counters_restart_per_host() {
        let mut a = PortAllocator::new();
        assert_eq!(a.allocate(&HTTP, "h0", 1, "w0").unwrap().base, 6100);
        assert_eq!(a.allocate(&HTTP, "h0", 1, "w1").unwrap().base, 6132);
        assert_eq!(a.allocate(&HTTP, "h1", 1, "w2").unwrap().base, 6100);
    }

    #[test]
    fn two_scopes_of_every_kind_end_below_the_ephemeral_ports() {
        for kind in KINDS {
            let last = u32::from(kind.base)
                + (2 * SCOPE_ORDINALS - 1) * u32::from(kind.stride)
                + u32::from(kind.span)
                - 1;
            assert!(last < EPHEMERAL_START, "{}: {last}", kind.name);
        }
    }

    #[test]
    fn a_scope_growing_on_a_shared_host_leaves_the_other_scopes_ports() {
        let (prefill, decode) = (PortScope(0), PortScope(1));
        let plan = |prefills: usize| {
            let mut a = PortAllocator::new();
            a.share_hosts([("h", prefill), ("h", decode), ("other", decode)].into_iter());
            a.set_scope(prefill);
            for i in 0..prefills {
                a.allocate(&NIXL, "h", 1, &format!("p{i}")).unwrap();
            }
            a.set_scope(decode);
            let shared = a.allocate(&NIXL, "h", 1, "d0").unwrap().base;
            let alone = a.allocate(&NIXL, "other", 1, "d1").unwrap().base;
            (shared, alone)
        };
        assert_eq!(plan(1), plan(3));
        // On the shared host decode counts from its own share; alone, from the base.
        assert_eq!(plan(1), (5400 + SCOPE_ORDINALS as u16, 5400));
    }

    #[test]
    fn a_scope_past_its_share_skips_what_the_next_scope_holds() {
        let mut a = PortAllocator::new();
        a.share_hosts([("h", PortScope(0)), ("h", PortScope(1))].into_iter());
        a.set_scope(PortScope(1));
        let decode = a.allocate(&NIXL, "h", 1, "d0").unwrap();
        a.set_scope(PortScope(0));
        let big = a
            .allocate(&NIXL, "h", SCOPE_ORDINALS as u16 + 1, "p0")
            .unwrap();
        assert!(big.base > decode.base, "{big} after {decode}");
    }

    #[test]
    fn every_kind_repeats_across_hosts_but_not_on_one() {
        let mut a = PortAllocator::new();
        for kind in KINDS {
            let b0 = a.allocate(kind, "h0", 2, "w0").unwrap();
            let b1 = a.allocate(kind, "h1", 2, "w1").unwrap();
            let b2 = a.allocate(kind, "h0", 2, "w2").unwrap();
            assert_eq!(b0, b1, "{}: the same block on another host", kind.name);
            assert!(b2.base > b0.last(), "{}: {b0} then {b2} on h0", kind.name);
        }
        let s0 = a.allocate(&VLLM_SCAN, "h2", 1, "w0").unwrap();
        let s1 = a.allocate(&VLLM_SCAN, "h2", 1, "w1").unwrap();
        assert_eq!((s0.base, s0.count, s1.base), (20000, 50, 20050));
    }

    #[test]
    fn runs_avoid_what_each_part_host_holds() {
        let mut a = PortAllocator::new();
        a.reserve(
            "h1",
            PUBLIC,
            PortBlock {
                base: 5401,
                count: 1,
            },
            "nginx",
        )
        .unwrap();
        // 5400 is free on h0, but h1's part would be 5401.
        let run = a
            .allocate_run(&NIXL, &[("h0", 1, "w.node[0]"), ("h1", 1, "w.node[1]")])
            .unwrap();
        assert_eq!((run[0].base, run[1].base), (5401, 5402));
        // h1's counter moved past its part; h0's past its own.
        assert_eq!(a.allocate(&NIXL, "h1", 1, "x").unwrap().base, 5403);
        assert_eq!(a.allocate(&NIXL, "h0", 1, "y").unwrap().base, 5402);
        // A run starts past the counter of every host it spans.
        let run = a
            .allocate_run(&NIXL, &[("h2", 2, "z.node[0]"), ("h0", 2, "z.node[1]")])
            .unwrap();
        assert_eq!((run[0].base, run[1].base), (5403, 5405));
        // Another host alone starts from the base again.
        assert_eq!(a.allocate(&NIXL, "h3", 1, "v").unwrap().base, 5400);
    }

    #[test]
    fn split_runs_are_contiguous_and_leased_where_bound() {
        let mut a = PortAllocator::new();
        let blocks = a
            .allocate_run(&NIXL, &[("h0", 4, "w.node[0]"), ("h1", 4, "w.node[1]")])
            .unwrap();
        assert_eq!(
            blocks,
            vec![
                PortBlock {
                    base: 5400,
                    count: 4
                },
                PortBlock {
                    base: 5404,
                    count: 4
                }
            ]
        );
        let hosts: Vec<(&str, u16)> = a
            .leases()
            .iter()
            .map(|l| (l.host.as_str(), l.block.base))
            .collect();
        assert_eq!(hosts, vec![("h0", 5400), ("h1", 5404)]);
        // On one host the parts follow each other and the counter moves past the run.
        let one = a
            .allocate_run(&NIXL, &[("h2", 2, "a"), ("h2", 2, "b")])
            .unwrap();
        assert_eq!((one[0].base, one[1].base), (5400, 5402));
        assert_eq!(a.allocate(&NIXL, "h2", 1, "c").unwrap().base, 5404);
    }

    #[test]
    fn fixed_reservations_are_skipped_and_conflicts_refused() {
        let mut a = PortAllocator::new();
        a.reserve(
            "h0",
            PUBLIC,
            PortBlock {
                base: 6100,
                count: 1,
            },
            "router",
        )
        .unwrap();
        assert_eq!(a.allocate(&HTTP, "h0", 1, "w0").unwrap().base, 6132);
        let err = a
            .reserve(
                "h0",
                DISCOVERY,
                PortBlock {
                    base: 6132,
                    count: 1,
                },
                "router",
            )
            .unwrap_err();
        assert!(matches!(err, PortError::Taken { port: 6132, .. }), "{err}");
    }

    #[test]
    fn exhaustion_is_an_error() {
        let kind = PortKind {
            name: "big",
            base: 65530,
            stride: 1,
            span: 1,
            purpose: "test",
        };
        let mut a = PortAllocator::new();
        a.allocate(&kind, "h0", 4, "w0").unwrap();
        let err = a.allocate(&kind, "h0", 4, "w1").unwrap_err();
        assert!(
            matches!(err, PortError::Exhausted { kind: "big", .. }),
            "{err}"
        );
    }

    #[test]
    fn block_indexing_is_bounds_checked() {
        let b = PortBlock {
            base: 26000,
            count: 2,
        };
        assert_eq!(b.port(1), Some(26001));
        assert_eq!(b.port(2), None);
        assert_eq!(b.to_string(), "26000-26001");
    }
}
