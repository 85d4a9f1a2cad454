//! The Shepherd Model Gateway (`smg`, PyPI) in front of vLLM's and SGLang's workers.
//!
//! `smg launch --host 0.0.0.0 --port P --prometheus-port M --prometheus-host 0.0.0.0
//! [--pd-disaggregation] <args>`, with no worker on its command line: srt adds each
//! worker through the admin API ([`admin`]) once it is healthy and takes it out before
//! stopping it (managed membership), so a changed worker set never restarts the
//! gateway, in its regular mode or its prefill/decode one. A prefill or decode worker
//! is added with its `worker_type`, its `kv_connector` and its `bootstrap_port`; the
//! gateway then drives the hand-off of the runtime it detects on the worker: vLLM's
//! (the prefill leg with `kv_transfer_params`, `do_remote_decode`, and the decode leg
//! with what the prefill answered) or SGLang's bootstrap rendezvous (both legs at once,
//! with `bootstrap_host`/`bootstrap_port`/`bootstrap_room`) (`docs/smg-notes.md`).
//!
//! Readiness: its `/health` is 200 with no worker at all, so the gate reads `/readiness`
//! (`{"healthy_workers": N, ...}`; 503 until one is healthy, and in prefill/decode mode
//! until a prefill and a decode are) on every gateway until each counts every worker,
//! then every worker's own `/health`.

mod admin;

use super::{Frontend, FrontendParts, Layout};
use crate::catalog::Catalog;
use crate::launch::{BuildContext, Component, LaunchProcess};
use crate::launch::{ConnectorChoice, PdProtocol};
use crate::recipe::diag::Problem;
use crate::recipe::Recipe;

/// The Shepherd Model Gateway frontend.
pub(super) struct Smg;

/// Flags the gateway gets from the topology beyond every gateway's
/// ([`super::gateway::MANAGED`]), with who sets them.
const MANAGED: &[(&str, &str)] = &[
    (
        "pd-disaggregation",
        "the gateway runs in its prefill/decode mode exactly when the recipe has prefill and decode roles",
    ),
    (
        "prefill",
        "srt adds each prefill worker through the admin API once it is healthy",
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

/// The smg release srt ships a flag catalog for.
fn catalog() -> &'static Catalog {
    static PARSED: std::sync::OnceLock<Catalog> = std::sync::OnceLock::new();
    PARSED.get_or_init(|| {
        Catalog::parse(include_str!("catalog/smg-1.13.0.json")).expect("the shipped catalog parses")
    })
}

/// What the shared gateway build needs of this one.
fn gateway() -> super::gateway::Gateway {
    super::gateway::Gateway {
        default_binary: Smg.default_binary(),
        catalog: catalog(),
        defaulted: DEFAULTED,
        name: "smg",
    }
}

impl Frontend for Smg {
    fn name(&self) -> &'static str {
        "smg"
    }

    fn default_binary(&self) -> &'static str {
        "smg"
    }

    fn components(&self) -> &'static [&'static Component] {
        super::ROUTER_ONLY
    }

    fn install_hint(&self) -> &'static str {
        "install the pinned gateway with `scripts/install-smg.sh` and put `.tools/bin` \
         on PATH (`export PATH=\"$PWD/.tools/bin:$PATH\"`), or name the program with \
         `frontend.binary`"
    }

    fn catalog(&self) -> &'static Catalog {
        catalog()
    }

    fn admin(&self) -> Option<&'static dyn super::Admin> {
        Some(&admin::SmgAdmin)
    }

    fn managed_by(&self, flag: &str) -> Option<&'static str> {
        super::gateway::managed_by(MANAGED, flag)
    }

    /// vLLM's NIXL hand-off (1.13.0 tags the prefill leg only for a worker registered
    /// with `kv_connector: NixlConnector`; unpaired, it sends both legs untagged), and
    /// SGLang's rendezvous (a worker whose `/v1/models` says `owned_by: sglang`).
    fn pd_protocols(&self) -> &'static [PdProtocol] {
        &[PdProtocol::KvTransferParams, PdProtocol::Bootstrap]
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
