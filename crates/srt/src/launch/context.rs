//! What engines and frontends may ask while the launch plan is assembled: the host and
//! address of a node, a block of ports, where discovery-connector workers register, the
//! model. The port allocator, the host map and the rest of the assembly's state stay
//! private behind these methods.

use super::{node_ip, DiscoveryTarget, HostLayout, Services};
use crate::ports::{Lease, PortAllocator, PortBlock, PortError, PortKind};
use crate::recipe::{HealthCheck, Model};

/// The narrow view of the assembly handed to engines and frontends.
pub struct BuildContext<'r> {
    model: &'r Model,
    health: &'r HealthCheck,
    alloc: PortAllocator,
    hosts: Vec<String>,
    layout: HostLayout,
    gpus_per_node: u32,
    discovery: Option<DiscoveryTarget>,
    services: Services,
    flags: std::cell::RefCell<crate::catalog::RenderMemo>,
    files: Vec<super::LaunchFile>,
}

impl<'r> BuildContext<'r> {
    /// A context for `nodes` nodes of `gpus_per_node` GPUs laid out on hosts by `layout`.
    pub(crate) fn new(
        model: &'r Model,
        health: &'r HealthCheck,
        nodes: usize,
        gpus_per_node: u32,
        layout: HostLayout,
    ) -> Self {
        let hosts: Vec<String> = (0..nodes).map(|i| layout.host(i)).collect();
        BuildContext {
            model,
            health,
            alloc: PortAllocator::new(),
            hosts,
            layout,
            gpus_per_node,
            discovery: None,
            services: Services::default(),
            flags: Default::default(),
            files: Vec::new(),
        }
    }

    /// Flags rendered to argv tokens for `catalog`'s program ([`crate::catalog::render`]),
    /// once for each run of processes with the same flags.
    pub fn render_flags(
        &self,
        catalog: Option<&'static crate::catalog::Catalog>,
        flags: Vec<(String, crate::recipe::ArgValue)>,
        out: &mut crate::launch::Argv,
    ) {
        self.flags.borrow_mut().render(catalog, flags, out);
    }

    /// The devices of the host that GPUs `gpus` of node `node` are. On a cluster each
    /// node is its own host, so they are the same indices; when every node is one host
    /// (the local executor), node `n` takes the host's devices from
    /// `n × gpus_per_node`, so the nodes of one recipe never share a device.
    pub fn host_devices(&self, node: usize, gpus: &[u32]) -> Vec<u32> {
        match self.layout {
            HostLayout::Distinct => gpus.to_vec(),
            HostLayout::Shared => {
                let offset = node as u32 * self.gpus_per_node;
                gpus.iter().map(|g| offset + g).collect()
            }
        }
    }

    /// The model being served.
    pub fn model(&self) -> &'r Model {
        self.model
    }

    /// The readiness budget (frontends size their own start-up timeouts from it).
    pub fn health(&self) -> &'r HealthCheck {
        self.health
    }

    /// The IP placeholder of node `node` (resolved by the executor at apply time).
    pub fn node_ip(&self, node: usize) -> String {
        node_ip(node)
    }

    /// Whether two nodes are the same host (the local executor puts every node on one).
    pub fn same_host(&self, a: usize, b: usize) -> bool {
        self.hosts[a] == self.hosts[b]
    }

    /// A block of `count` ports of `kind` on `node`, leased to `owner`.
    pub fn allocate(
        &mut self,
        kind: &PortKind,
        node: usize,
        count: u16,
        owner: &str,
    ) -> Result<PortBlock, PortError> {
        self.alloc.allocate(kind, &self.hosts[node], count, owner)
    }

    /// The port scopes `placements` (node, scope) put on each host: where a host holds
    /// more than one, each counts its ports apart (see [`PortScope`]).
    pub fn share_port_hosts(
        &mut self,
        placements: impl Iterator<Item = (usize, crate::ports::PortScope)>,
    ) {
        let hosts = &self.hosts;
        self.alloc
            .share_hosts(placements.map(|(node, scope)| (hosts[node].as_str(), scope)));
    }

    /// Count the ports allocated from now on in `scope` (see [`PortScope`]).
    pub fn set_port_scope(&mut self, scope: crate::ports::PortScope) {
        self.alloc.set_scope(scope);
    }

    /// One contiguous run of ports of `kind` split across nodes: `(node, count, owner)`
    /// parts, each free on and leased on its own node's host (see
    /// [`PortAllocator::allocate_run`]).
    pub fn allocate_run(
        &mut self,
        kind: &PortKind,
        parts: &[(usize, u16, &str)],
    ) -> Result<Vec<PortBlock>, PortError> {
        let parts: Vec<(&str, u16, &str)> = parts
            .iter()
            .map(|&(node, count, owner)| (self.hosts[node].as_str(), count, owner))
            .collect();
        self.alloc.allocate_run(kind, &parts)
    }

    /// Reserve a fixed block (`name`, e.g. the public port) on `node` for `owner`.
    pub fn reserve(
        &mut self,
        node: usize,
        name: &'static str,
        block: PortBlock,
        owner: &str,
    ) -> Result<(), PortError> {
        self.alloc.reserve(&self.hosts[node], name, block, owner)
    }

    /// Where discovery-connector workers register, when the frontend listens for them.
    pub fn discovery(&self) -> Option<&DiscoveryTarget> {
        self.discovery.as_ref()
    }

    /// What the frontend's infrastructure offers the workers and the frontend's entry
    /// processes (set once it is built; empty before, and for frontends without any).
    pub fn services(&self) -> &Services {
        &self.services
    }

    /// Record what the frontend's infrastructure offers.
    pub(crate) fn set_services(&mut self, services: Services) {
        self.services = services;
    }

    pub(crate) fn set_discovery(&mut self, target: DiscoveryTarget) {
        self.discovery = Some(target);
    }

    /// The port ledger, taken out: the context is done.
    /// The port leases and the files of the processes built in this context.
    pub(crate) fn finish(self) -> (Vec<Lease>, Vec<super::LaunchFile>) {
        (self.alloc.into_leases(), self.files)
    }

    /// Add `file` for the processes that read it (once: every worker of a role reads
    /// the same one), and return its address, which each reader depends on. A second
    /// file at the same address must be the same file.
    pub(crate) fn file(&mut self, file: super::LaunchFile) -> String {
        match self.files.iter().find(|f| f.address == file.address) {
            Some(known) => {
                assert_eq!(known, &file, "one file per address");
                known.address.clone()
            }
            None => {
                let address = file.address.clone();
                self.files.push(file);
                address
            }
        }
    }
}
