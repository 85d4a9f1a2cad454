//! Engines turn an endpoint into the worker processes that serve it.
//!
//! [`Engine`] is the seam; [`vllm`] is the one implementation. KV connectors are table
//! rows in [`connector`].

pub mod connector;
pub mod vllm;

use crate::launch::build::Ctx;
use crate::launch::LaunchProcess;
use crate::recipe::diag::Problem;
use crate::recipe::Role;
use crate::topology::Endpoint;
use connector::Connector;

/// An inference engine.
pub trait Engine: Sync {
    /// Recipe name (`engine.type`).
    fn name(&self) -> &'static str;
    /// Flags the engine derives from the topology; recipes may not set them.
    fn managed_flags(&self) -> &'static [&'static str];
    /// Environment variables the engine sets from the topology; recipes may not set them.
    fn managed_env(&self) -> &'static [&'static str];
    /// Check a role's args (parallel sizes, DP mode) before allocation.
    fn validate_role(&self, ctx: &Ctx<'_>, role: &Role, problems: &mut Vec<Problem>);
    /// The processes of one endpoint, with their ports allocated from `ctx`.
    fn worker_processes(
        &self,
        ctx: &mut Ctx<'_>,
        role: &Role,
        connector: &'static Connector,
        endpoint: &Endpoint,
    ) -> Result<Vec<LaunchProcess>, Problem>;
}

/// Every engine srt knows.
pub const ENGINES: &[&dyn Engine] = &[&vllm::Vllm];

/// Look an engine up by its recipe name.
pub fn lookup(name: &str) -> Option<&'static dyn Engine> {
    ENGINES.iter().copied().find(|e| e.name() == name)
}
