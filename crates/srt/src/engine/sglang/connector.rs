//! SGLang's KV transfer backends as table rows: a prefill/decode role's
//! `--disaggregation-transfer-backend`. Every backend pairs by the bootstrap rendezvous.

use crate::recipe::diag::Problem;
use crate::recipe::{Recipe, Role, Sp};

/// One backend row.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Connector {
    /// Recipe name (`engine.connector`, `roles.<r>.args.connector`).
    pub name: &'static str,
    /// Its `--disaggregation-transfer-backend` value.
    pub backend: &'static str,
}

/// NIXL: what most of srtctl's SGLang recipes run (srt's default).
const NIXL: Connector = Connector {
    name: "nixl",
    backend: "nixl",
};

/// Mooncake's transfer engine: SGLang's own default.
const MOONCAKE: Connector = Connector {
    name: "mooncake",
    backend: "mooncake",
};

/// AMD's MoRI.
const MORI: Connector = Connector {
    name: "mori",
    backend: "mori",
};

/// Every backend srt runs SGLang's prefill/decode with.
const CONNECTORS: &[&Connector] = &[&NIXL, &MOONCAKE, &MORI];

/// Their names, in table order.
pub(super) const NAMES: &[&str] = &[NIXL.name, MOONCAKE.name, MORI.name];

/// The backend `role` runs: its own `args.connector`, else `engine.connector`.
pub(super) fn for_role(recipe: &Recipe, role: &Role) -> Result<&'static Connector, Problem> {
    let engine_wide = super::keys::connector(recipe);
    let chosen: &Sp<String> = role.connector.as_ref().unwrap_or(&engine_wide);
    CONNECTORS
        .iter()
        .copied()
        .find(|c| c.name == chosen.value)
        .ok_or_else(|| crate::engine::unknown_connector(chosen, NAMES))
}
