//! Port kinds and the per-node port allocator.
//!
//! Every port a process binds comes from here, once, and is carried on the process;
//! nothing derives a port from another port. A kind is either per-node (its counter
//! restarts on every host) or job-wide (never repeats within the deployment). The
//! allocator also holds fixed reservations (the public frontend port, the discovery
//! listener) and skips them, so a computed block never lands on a fixed port.
//!
//! Hosts, not symbolic nodes, key the counters: on a cluster every node is its own host;
//! the local executor maps all nodes onto one host, so per-node kinds stay collision-free
//! there too.

use std::collections::BTreeMap;

/// Whether a kind's counter restarts per host or runs over the whole deployment.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Scope {
    /// Listener reached by address + port on its node.
    PerNode,
    /// Never repeats within the deployment (rank-keyed or peer-addressed ports).
    Job,
}

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
    /// Counter scope.
    pub scope: Scope,
    /// What it is for.
    pub purpose: &'static str,
}

/// Worker HTTP API (leader only, or every hybrid-LB process).
pub const HTTP: PortKind = PortKind {
    name: "http",
    base: 6100,
    stride: 32,
    span: 1,
    scope: Scope::PerNode,
    purpose: "worker HTTP API",
};
/// NIXL side channel, a block of one port per DP rank of an endpoint.
pub const NIXL: PortKind = PortKind {
    name: "nixl",
    base: 5400,
    stride: 1,
    span: 1,
    scope: Scope::Job,
    purpose: "VLLM_NIXL_SIDE_CHANNEL_PORT (one per DP rank)",
};
/// vLLM data-parallel RPC port, one per DP endpoint on its leader.
pub const DP_RPC: PortKind = PortKind {
    name: "dp_rpc",
    base: 8400,
    stride: 1,
    span: 1,
    scope: Scope::PerNode,
    purpose: "--data-parallel-rpc-port",
};
/// torch.distributed rendezvous of a replica spanning nodes.
pub const MASTER: PortKind = PortKind {
    name: "master",
    base: 29500,
    stride: 10,
    span: 1,
    scope: Scope::PerNode,
    purpose: "--master-port",
};
/// Base of vLLM's internal port scan.
pub const VLLM_SCAN: PortKind = PortKind {
    name: "vllm_scan",
    base: 20000,
    stride: 50,
    span: 50,
    scope: Scope::Job,
    purpose: "VLLM_PORT scan range",
};
/// MoRI-IO handshake listeners, a block of one port per local rank.
pub const MORIIO_HANDSHAKE: PortKind = PortKind {
    name: "moriio_handshake",
    base: 26000,
    stride: 1,
    span: 1,
    scope: Scope::Job,
    purpose: "MoRI-IO handshake_port block",
};
/// MoRI-IO notify listeners, a block of one port per local rank.
pub const MORIIO_NOTIFY: PortKind = PortKind {
    name: "moriio_notify",
    base: 27000,
    stride: 1,
    span: 1,
    scope: Scope::Job,
    purpose: "MoRI-IO notify_port block",
};
/// A Router's port behind nginx.
pub const FRONTEND_INTERNAL: PortKind = PortKind {
    name: "frontend_internal",
    base: 8180,
    stride: 1,
    span: 1,
    scope: Scope::PerNode,
    purpose: "Router port behind nginx",
};
/// A Router's Prometheus listener (each Router needs its own).
pub const ROUTER_METRICS: PortKind = PortKind {
    name: "router_metrics",
    base: 29000,
    stride: 1,
    span: 1,
    scope: Scope::PerNode,
    purpose: "--prometheus-port",
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

/// Allocates ports for one deployment. Allocation is a pure function of the order of calls.
#[derive(Debug, Default)]
pub struct PortAllocator {
    /// (kind, host or "" for job scope) -> next ordinal.
    next: BTreeMap<(&'static str, String), u32>,
    /// host -> start -> (end inclusive, lease index).
    taken: BTreeMap<String, BTreeMap<u16, (u16, usize)>>,
    /// Every lease in allocation order.
    leases: Vec<Lease>,
    /// Job-wide kinds must also avoid every host's leases: they are checked against all hosts.
    hosts: Vec<String>,
    /// Ports leased on any host of `hosts`, one bit per port: a job-wide block is checked
    /// against every host with one lookup instead of one per host.
    any_host: PortSet,
}

/// A set of ports (one bit each).
#[derive(Debug)]
struct PortSet(Vec<u64>);

impl Default for PortSet {
    fn default() -> Self {
        PortSet(vec![0; 1 << 10])
    }
}

impl PortSet {
    fn insert(&mut self, block: PortBlock) {
        for port in block.base..=block.last() {
            self.0[usize::from(port) >> 6] |= 1 << (port & 63);
        }
    }

    /// Whether any port of `start..=end` is in the set.
    fn any(&self, start: u16, end: u16) -> bool {
        (start..=end).any(|port| self.0[usize::from(port) >> 6] & (1 << (port & 63)) != 0)
    }
}

impl PortAllocator {
    /// An allocator over the given host keys.
    pub fn new(hosts: impl IntoIterator<Item = String>) -> Self {
        let mut hosts: Vec<String> = hosts.into_iter().collect();
        hosts.sort();
        hosts.dedup();
        PortAllocator {
            hosts,
            ..Default::default()
        }
    }

    fn overlap(&self, host: &str, start: u16, end: u16) -> Option<usize> {
        let map = self.taken.get(host)?;
        // The last lease starting at or before `end` is the only candidate that can overlap
        // from the left; any lease starting inside [start, end] overlaps too.
        map.range(..=end)
            .next_back()
            .filter(|(_, (e, _))| *e >= start)
            .map(|(_, (_, idx))| *idx)
    }

    fn record(&mut self, host: &str, kind: &'static str, block: PortBlock, owner: &str) {
        let idx = self.leases.len();
        self.leases.push(Lease {
            host: host.to_string(),
            kind,
            block,
            owner: owner.to_string(),
        });
        self.taken
            .entry(host.to_string())
            .or_default()
            .insert(block.base, (block.last(), idx));
        if self
            .hosts
            .binary_search_by(|h| h.as_str().cmp(host))
            .is_ok()
        {
            self.any_host.insert(block);
        }
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

    /// Allocate `count` consecutive ordinals of `kind` for `owner` on `host`.
    /// For job-scoped kinds the block is free on every host.
    pub fn allocate(
        &mut self,
        kind: &PortKind,
        host: &str,
        count: u16,
        owner: &str,
    ) -> Result<PortBlock, PortError> {
        let key = (
            kind.name,
            if kind.scope == Scope::Job {
                String::new()
            } else {
                host.to_string()
            },
        );
        let mut ordinal = *self.next.get(&key).unwrap_or(&0);
        let width = u32::from(count) * u32::from(kind.span);
        loop {
            let start = u32::from(kind.base) + ordinal * u32::from(kind.stride);
            let end = start + width - 1;
            if end > u32::from(u16::MAX) {
                return Err(PortError::Exhausted {
                    kind: kind.name,
                    host: host.to_string(),
                    needed: width,
                    last: start,
                });
            }
            let (s, e) = (start as u16, end as u16);
            let clash = match kind.scope {
                Scope::PerNode => self.overlap(host, s, e).is_some(),
                Scope::Job => self.any_host.any(s, e) || self.overlap(host, s, e).is_some(),
            };
            if clash {
                ordinal += 1;
                continue;
            }
            let block = PortBlock {
                base: s,
                count: width as u16,
            };
            self.record(host, kind.name, block, owner);
            self.next.insert(key, ordinal + u32::from(count));
            // A block's ports are reported per ordinal; with span 1 this is `count` ports.
            return Ok(PortBlock {
                base: s,
                count: width as u16,
            });
        }
    }

    /// Allocate one contiguous run of a job-wide kind whose parts are bound on different
    /// hosts: part `i` is `(host, count, owner)` and gets the next `count` ordinals. The
    /// run is free on every host, and each part is leased on the host that binds it.
    ///
    /// This is what a rank-offset block spread over nodes needs: vLLM adds the global DP
    /// rank to `VLLM_NIXL_SIDE_CHANNEL_PORT`, so a hybrid-LB endpoint's side channels are
    /// one run of `dp` ports, of which each node binds only its own ranks.
    pub fn allocate_split(
        &mut self,
        kind: &PortKind,
        parts: &[(&str, u16, &str)],
    ) -> Result<Vec<PortBlock>, PortError> {
        debug_assert_eq!(kind.scope, Scope::Job, "split runs are job-wide");
        let key = (kind.name, String::new());
        let mut ordinal = *self.next.get(&key).unwrap_or(&0);
        let total: u32 = parts.iter().map(|(_, c, _)| u32::from(*c)).sum();
        let width = total * u32::from(kind.span);
        let host0 = parts.first().map(|p| p.0).unwrap_or_default();
        loop {
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
            let (s, e) = (start as u16, end as u16);
            let clash =
                self.any_host.any(s, e) || parts.iter().any(|p| self.overlap(p.0, s, e).is_some());
            if clash {
                ordinal += 1;
                continue;
            }
            let mut blocks = Vec::with_capacity(parts.len());
            let mut base = start;
            for (host, count, owner) in parts {
                let block = PortBlock {
                    base: base as u16,
                    count: count * kind.span,
                };
                self.record(host, kind.name, block, owner);
                blocks.push(block);
                base += u32::from(block.count);
            }
            self.next.insert(key, ordinal + total);
            return Ok(blocks);
        }
    }

    /// Every lease, in allocation order.
    pub fn leases(&self) -> &[Lease] {
        &self.leases
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn per_node_counters_restart_per_host() {
        let mut a = PortAllocator::new(["h0".to_string(), "h1".to_string()]);
        assert_eq!(a.allocate(&HTTP, "h0", 1, "w0").unwrap().base, 6100);
        assert_eq!(a.allocate(&HTTP, "h0", 1, "w1").unwrap().base, 6132);
        assert_eq!(a.allocate(&HTTP, "h1", 1, "w2").unwrap().base, 6100);
    }

    #[test]
    fn job_kinds_never_repeat() {
        let mut a = PortAllocator::new(["h0".to_string(), "h1".to_string()]);
        let b0 = a.allocate(&NIXL, "h0", 4, "w0").unwrap();
        let b1 = a.allocate(&NIXL, "h1", 2, "w1").unwrap();
        assert_eq!((b0.base, b0.count), (5400, 4));
        assert_eq!((b1.base, b1.count), (5404, 2));
        let s0 = a.allocate(&VLLM_SCAN, "h0", 1, "w0").unwrap();
        let s1 = a.allocate(&VLLM_SCAN, "h1", 1, "w1").unwrap();
        assert_eq!((s0.base, s0.count, s1.base), (20000, 50, 20050));
    }

    #[test]
    fn job_kinds_avoid_ports_taken_on_any_host() {
        let mut a = PortAllocator::new(["h0".to_string(), "h1".to_string(), "h2".to_string()]);
        let taken = PortBlock {
            base: 5401,
            count: 1,
        };
        a.reserve("h2", PUBLIC, taken, "nginx").unwrap();
        // 5400 is free everywhere, but a block of two would cover h2's 5401.
        assert_eq!(a.allocate(&NIXL, "h0", 2, "w0").unwrap().base, 5402);
        let split = a
            .allocate_split(&NIXL, &[("h0", 1, "w1.node[0]"), ("h1", 1, "w1.node[1]")])
            .unwrap();
        assert_eq!((split[0].base, split[1].base), (5404, 5405));
        // A host the allocator was not built with is checked on its own.
        a.reserve(
            "elsewhere",
            PUBLIC,
            PortBlock {
                base: 5406,
                count: 1,
            },
            "x",
        )
        .unwrap();
        assert_eq!(a.allocate(&NIXL, "h0", 1, "w2").unwrap().base, 5406);
        assert_eq!(a.allocate(&NIXL, "elsewhere", 1, "w3").unwrap().base, 5407);
    }

    #[test]
    fn split_runs_are_contiguous_and_leased_where_bound() {
        let mut a = PortAllocator::new(["h0".to_string(), "h1".to_string()]);
        let blocks = a
            .allocate_split(&NIXL, &[("h0", 4, "w.node[0]"), ("h1", 4, "w.node[1]")])
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
        // The counter moved past the whole run, on every host.
        assert_eq!(a.allocate(&NIXL, "h1", 1, "w2").unwrap().base, 5408);
    }

    #[test]
    fn fixed_reservations_are_skipped_and_conflicts_refused() {
        let mut a = PortAllocator::new(["h0".to_string()]);
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
            scope: Scope::PerNode,
            purpose: "test",
        };
        let mut a = PortAllocator::new(["h0".to_string()]);
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
