//! Frontends: what sits on the public port in front of the workers.
//!
//! [`Frontend`] is the seam; each frontend type is one implementation registered in
//! [`FRONTENDS`]. Frontends own their command lines, their recipe rules and their
//! readiness probes; core code never compares a frontend name.

pub mod nginx;
pub mod vllm_router;

use crate::engine::connector::Connector;
use crate::launch::build::Ctx;
use crate::launch::{Gate, LaunchProcess};
use crate::recipe::diag::Problem;
use crate::recipe::{Placement, Recipe, RoleKind};
use crate::topology::Topology;
use miette::SourceSpan;

/// Where frontend processes run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layout {
    /// nginx on this node, in front of every Router.
    pub nginx_node: Option<usize>,
    /// The Router processes.
    pub routers: Vec<RouterSlot>,
}

/// One Router process's place.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RouterSlot {
    /// Node index.
    pub node: usize,
    /// True when it listens on an internal port behind nginx.
    pub behind_nginx: bool,
}

impl Layout {
    /// The node whose public port clients use.
    pub fn public_node(&self) -> usize {
        self.nginx_node.unwrap_or(self.routers[0].node)
    }
}

/// A role's resolved connector, with the span that chose it.
#[derive(Clone, Copy, Debug)]
pub struct RoleConnector {
    /// Role.
    pub role: RoleKind,
    /// Its connector row.
    pub connector: &'static Connector,
    /// Where it was chosen (role override or engine key).
    pub span: SourceSpan,
}

/// What a frontend adds to the launch plan.
#[derive(Clone, Debug, PartialEq)]
pub struct FrontendParts {
    /// Router / nginx processes.
    pub processes: Vec<LaunchProcess>,
    /// Readiness gates, in order.
    pub gates: Vec<Gate>,
    /// The URL clients use.
    pub public_url: String,
}

/// A frontend type.
pub trait Frontend: Sync {
    /// `frontend.type` value.
    fn name(&self) -> &'static str;
    /// Program run when `frontend.binary` is not set.
    fn default_binary(&self) -> &'static str;
    /// Whether it can discover workers that register themselves (discovery connectors).
    fn supports_discovery(&self) -> bool;
    /// Frontend rules on the recipe.
    fn validate(&self, recipe: &Recipe, connectors: &[RoleConnector], problems: &mut Vec<Problem>);
    /// Where its processes run.
    fn layout(&self, recipe: &Recipe, topology: &Topology) -> Layout {
        default_layout(recipe, topology)
    }
    /// Its processes and gates, given the workers.
    fn build(
        &self,
        ctx: &mut Ctx<'_>,
        layout: &Layout,
        workers: &[LaunchProcess],
        connectors: &[RoleConnector],
    ) -> Result<FrontendParts, Problem>;
}

/// Every frontend srt knows.
pub const FRONTENDS: &[&dyn Frontend] = &[&vllm_router::VllmRouter];

/// Look a frontend up by `frontend.type`.
pub fn lookup(name: &str) -> Option<&'static dyn Frontend> {
    FRONTENDS.iter().copied().find(|f| f.name() == name)
}

/// srtctl's layout: with one worker node, or `enable_multiple_frontends: false`, one
/// frontend on the placed node; otherwise nginx on the head and
/// `min(num_additional_frontends + 1, worker nodes - 1)` Routers on the other nodes.
pub fn default_layout(recipe: &Recipe, topology: &Topology) -> Layout {
    let fe = &recipe.frontend;
    let mut worker_nodes: Vec<usize> = topology
        .endpoints
        .iter()
        .flat_map(|e| e.nodes.iter().copied())
        .collect();
    worker_nodes.sort_unstable();
    worker_nodes.dedup();
    if fe.enable_multiple_frontends.value && worker_nodes.len() > 1 {
        let head = worker_nodes[0];
        let count = (fe.num_additional_frontends as usize + 1).min(worker_nodes.len() - 1);
        return Layout {
            nginx_node: Some(head),
            routers: worker_nodes[1..=count]
                .iter()
                .map(|&node| RouterSlot {
                    node,
                    behind_nginx: true,
                })
                .collect(),
        };
    }
    let node = match fe.orchestrator_placement.value {
        Placement::Head => 0,
        Placement::FirstDecode => topology
            .role(RoleKind::Decode)
            .map(|e| e.leader())
            .next()
            .unwrap_or(0),
    };
    Layout {
        nginx_node: None,
        routers: vec![RouterSlot {
            node,
            behind_nginx: false,
        }],
    }
}
