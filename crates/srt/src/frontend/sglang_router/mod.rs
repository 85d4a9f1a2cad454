//! The SGLang Model Gateway (`sglang-router`, PyPI) in front of aggregated workers of
//! any engine, and of SGLang's prefill/decode workers.
//!
//! `sglang-router launch --host 0.0.0.0 --port P --prometheus-port M --prometheus-host
//! 0.0.0.0 [--pd-disaggregation] <args>`, with no worker on its command line: srt adds
//! each worker through the admin API ([`admin`]) once it is healthy, a prefill or decode
//! worker with its `worker_type` (and a prefill with its `bootstrap_port`), and takes it
//! out before stopping it (managed membership), so a changed worker set never restarts
//! the gateway. Its prefill/decode mode speaks SGLang's bootstrap rendezvous (the same
//! request to both, with `bootstrap_host`/`bootstrap_port`/`bootstrap_room`), not vLLM's
//! `kv_transfer_params` hand-off.
//!
//! Readiness: its `/health` is 200 with no worker at all, so the gate reads `/readiness`
//! (`{"healthy_workers": N, ...}`; 503 until one is healthy) on every gateway until each
//! counts every worker, then every worker's own `/health`.

mod admin;

use super::{Frontend, FrontendParts, Layout};
use crate::catalog::Catalog;
use crate::launch::{BuildContext, Component, LaunchProcess};
use crate::launch::{ConnectorChoice, PdProtocol};
use crate::recipe::diag::Problem;
use crate::recipe::Recipe;

/// The SGLang Model Gateway frontend.
pub(super) struct SglangRouter;

/// Flags the gateway gets from the topology beyond every gateway's
/// ([`super::gateway::MANAGED`]), with who sets them.
const MANAGED: &[(&str, &str)] = &[
    (
        "pd-disaggregation",
        "the gateway runs in its prefill/decode mode exactly when the recipe has prefill and decode roles",
    ),
    (
        "prefill",
        "srt adds each prefill worker, with its bootstrap port, through the admin API once it is healthy",
    ),
    (
        "decode",
        "srt adds each decode worker through the admin API once it is healthy",
    ),
];

/// Flags srt sets by default that a recipe may override.
const DEFAULTED: &[&str] = &[
    "worker-startup-timeout-secs",
    "worker-startup-check-interval",
];

/// The sglang-router release srt ships a flag catalog for.
fn catalog() -> &'static Catalog {
    static PARSED: std::sync::OnceLock<Catalog> = std::sync::OnceLock::new();
    PARSED.get_or_init(|| {
        Catalog::parse(include_str!("catalog/sglang-router-0.3.2.json"))
            .expect("the shipped catalog parses")
    })
}

/// What the shared gateway build needs of this one.
fn gateway() -> super::gateway::Gateway {
    super::gateway::Gateway {
        default_binary: SglangRouter.default_binary(),
        catalog: catalog(),
        defaulted: DEFAULTED,
        name: "sglang-router",
    }
}

impl Frontend for SglangRouter {
    fn name(&self) -> &'static str {
        "sglang-router"
    }

    fn default_binary(&self) -> &'static str {
        "sglang-router"
    }

    fn components(&self) -> &'static [&'static Component] {
        super::ROUTER_ONLY
    }

    fn install_hint(&self) -> &'static str {
        "install the pinned Router with `scripts/install-sglang-router.sh` and put `.tools/bin` \
         on PATH (`export PATH=\"$PWD/.tools/bin:$PATH\"`), or name the program with \
         `frontend.binary`"
    }

    fn catalog(&self) -> &'static Catalog {
        catalog()
    }

    fn admin(&self) -> Option<&'static dyn super::Admin> {
        Some(&admin::SglangRouterAdmin)
    }

    fn managed_by(&self, flag: &str) -> Option<&'static str> {
        super::gateway::managed_by(MANAGED, flag)
    }

    /// Its prefill/decode mode sends SGLang's bootstrap fields to both legs at once.
    fn pd_protocols(&self) -> &'static [PdProtocol] {
        &[PdProtocol::Bootstrap]
    }

    fn validate(&self, _: &Recipe, _: &[ConnectorChoice], _: &mut Vec<Problem>) {}

    fn build(
        &self,
        ctx: &mut BuildContext<'_>,
        recipe: &Recipe,
        layout: &Layout,
        workers: &[LaunchProcess],
        _: &[ConnectorChoice],
    ) -> Result<FrontendParts, Problem> {
        super::gateway::build(&gateway(), ctx, recipe, layout, workers)
    }
}
