//! KV connectors as table rows. Code asks a row what it needs (a side channel, rank
//! listeners, discovery); no connector name is compared anywhere else.

use crate::launch::{DiscoveryTarget, PdProtocol};
use crate::ports::{PortKind, MORIIO_HANDSHAKE, MORIIO_NOTIFY};
use crate::recipe::diag::Problem;
use crate::recipe::{Recipe, Role, RoleKind, Sp};
use serde_json::{json, Map, Value};

/// The `kv_role` a connector's workers get.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum KvRole {
    /// `kv_both` on every role.
    Both,
    /// `kv_producer` on prefill, `kv_consumer` on decode (never `kv_both`).
    ByMode,
}

/// One connector row.
#[derive(Debug, PartialEq, Eq)]
pub(super) struct Connector {
    /// Recipe name (`engine.connector`, `roles.<r>.args.connector`).
    pub name: &'static str,
    /// vLLM `kv_connector` class; `None` means no `--kv-transfer-config`.
    pub kv_connector: Option<&'static str>,
    /// How `kv_role` is chosen.
    pub kv_role: KvRole,
    /// Workers register with the frontend over ZMQ instead of being listed on its command line.
    pub discovery: bool,
    /// How its prefill/decode pairs hand a request over.
    pub protocol: PdProtocol,
    /// Workers open a NIXL side channel (one port per DP rank), advertised as the prefill bootstrap port.
    pub side_channel: bool,
    /// Listener kinds allocated as a block of one port per local rank.
    pub rank_listeners: &'static [PortKind],
    /// Whether workers may get a `VLLM_PORT` scan base (listeners opened inside TP children
    /// that inherit it would collide).
    pub vllm_port: bool,
}

/// NIXL, vLLM's default P/D connector.
pub(super) const NIXL: Connector = Connector {
    name: "nixl",
    kv_connector: Some("NixlConnector"),
    kv_role: KvRole::Both,
    discovery: false,
    protocol: PdProtocol::KvTransferParams,
    side_channel: true,
    rank_listeners: &[],
    vllm_port: true,
};

/// AMD's MoRI-IO connector, discovered by the Router over ZMQ.
pub(super) const MORIIO: Connector = Connector {
    name: "moriio",
    kv_connector: Some("MoRIIOConnector"),
    kv_role: KvRole::ByMode,
    discovery: true,
    protocol: PdProtocol::KvTransferParams,
    side_channel: false,
    rank_listeners: &[MORIIO_HANDSHAKE, MORIIO_NOTIFY],
    vllm_port: false,
};

/// No KV transfer: decode recomputes the prompt.
pub(super) const NONE: Connector = Connector {
    name: "none",
    kv_connector: None,
    kv_role: KvRole::Both,
    discovery: false,
    protocol: PdProtocol::Recompute,
    side_channel: false,
    rank_listeners: &[],
    vllm_port: true,
};

/// Whether `role` brings its own `--kv-transfer-config` (`args.kv-transfer-config` with
/// a connector that writes none, `none`): srt then opens the NIXL side channel for it
/// as for `nixl` (a custom NIXL config across nodes needs a routable
/// `VLLM_NIXL_SIDE_CHANNEL_HOST` and ports that do not collide), and the role may set
/// those variables itself.
pub(super) fn own_config(connector: &Connector, role: &Role) -> bool {
    connector.kv_connector.is_none() && role.args.get("kv-transfer-config").is_some()
}

/// The variables of the NIXL side channel.
pub(super) const SIDE_CHANNEL_ENV: &[&str] =
    &["VLLM_NIXL_SIDE_CHANNEL_HOST", "VLLM_NIXL_SIDE_CHANNEL_PORT"];

/// Every connector srt knows.
pub(super) const CONNECTORS: &[&Connector] = &[&NIXL, &MORIIO, &NONE];

/// Their names, in table order.
pub(super) const NAMES: &[&str] = &[NIXL.name, MORIIO.name, NONE.name];

/// The realized facts a discovery connector's worker config is built from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct WorkerListeners<'a> {
    /// The worker's HTTP port.
    pub http_port: Option<u16>,
    /// The worker's own routable IP.
    pub host_ip: &'a str,
    /// Base of each rank-listener block, in `rank_listeners` order.
    pub rank_blocks: Vec<u16>,
    /// Where to register.
    pub discovery: Option<&'a DiscoveryTarget>,
}

impl Connector {
    /// The `kv_role` for a worker of `role`.
    pub(super) fn kv_role_for(&self, role: RoleKind) -> &'static str {
        match (self.kv_role, role) {
            (KvRole::Both, _) | (KvRole::ByMode, RoleKind::Agg) => "kv_both",
            (KvRole::ByMode, RoleKind::Prefill) => "kv_producer",
            (KvRole::ByMode, RoleKind::Decode) => "kv_consumer",
        }
    }

    /// The worker's `--kv-transfer-config` JSON, or `None` for a connector without one.
    /// A discovery connector needs the worker's realized listeners and refuses without them.
    pub(super) fn kv_transfer_config(
        &self,
        role: RoleKind,
        listeners: Option<&WorkerListeners<'_>>,
    ) -> Result<Option<Value>, String> {
        let Some(class) = self.kv_connector else {
            return Ok(None);
        };
        let mut config = Map::new();
        config.insert("kv_connector".into(), json!(class));
        config.insert("kv_role".into(), json!(self.kv_role_for(role)));
        if self.discovery {
            let l = listeners.ok_or_else(|| {
                format!("a `{}` worker needs its realized listeners (HTTP port, rank blocks, discovery address)", self.name)
            })?;
            let http = l.http_port.ok_or_else(|| {
                format!(
                    "a `{}` worker needs its own HTTP port; every process must be an API server",
                    self.name
                )
            })?;
            let target = l.discovery.ok_or_else(|| {
                format!(
                    "a `{}` worker needs the Router's discovery address",
                    self.name
                )
            })?;
            let [handshake, notify] = l.rank_blocks[..] else {
                return Err(format!(
                    "a `{}` worker needs its handshake and notify port blocks",
                    self.name
                ));
            };
            config.insert(
                "kv_connector_extra_config".into(),
                json!({
                    "proxy_ip": target.ip,
                    "proxy_ping_port": target.port.to_string(),
                    "http_port": http.to_string(),
                    "host_ip": l.host_ip,
                    "handshake_port": handshake.to_string(),
                    "notify_port": notify.to_string(),
                    "read_mode": true,
                }),
            );
        }
        Ok(Some(Value::Object(config)))
    }
}

/// Look a connector up by name.
pub(super) fn lookup(name: &str) -> Option<&'static Connector> {
    CONNECTORS.iter().copied().find(|c| c.name == name)
}

/// The one resolver for a role's connector: `roles.<r>.args.connector`, else `engine.connector`.
pub(super) fn for_role(recipe: &Recipe, role: &Role) -> Result<&'static Connector, Problem> {
    let engine_wide = super::keys::connector(recipe);
    let chosen: &Sp<String> = role.connector.as_ref().unwrap_or(&engine_wide);
    lookup(&chosen.value).ok_or_else(|| crate::engine::unknown_connector(chosen, NAMES))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nixl_is_kv_both_without_extras() {
        let c = NIXL
            .kv_transfer_config(RoleKind::Prefill, None)
            .unwrap()
            .unwrap();
        assert_eq!(
            c.to_string(),
            r#"{"kv_connector":"NixlConnector","kv_role":"kv_both"}"#
        );
    }

    #[test]
    fn moriio_roles_follow_mode_and_need_listeners() {
        assert_eq!(MORIIO.kv_role_for(RoleKind::Prefill), "kv_producer");
        assert_eq!(MORIIO.kv_role_for(RoleKind::Decode), "kv_consumer");
        assert!(MORIIO.kv_transfer_config(RoleKind::Prefill, None).is_err());
        let target = DiscoveryTarget {
            ip: "<node0-ip>".into(),
            port: 36367,
        };
        let no_http = WorkerListeners {
            http_port: None,
            host_ip: "<node0-ip>",
            rank_blocks: vec![26000, 27000],
            discovery: Some(&target),
        };
        assert!(MORIIO
            .kv_transfer_config(RoleKind::Prefill, Some(&no_http))
            .is_err());
        let ok = WorkerListeners {
            http_port: Some(6100),
            ..no_http
        };
        let c = MORIIO
            .kv_transfer_config(RoleKind::Decode, Some(&ok))
            .unwrap()
            .unwrap();
        let extra = &c["kv_connector_extra_config"];
        assert_eq!(c["kv_role"], "kv_consumer");
        assert_eq!(extra["handshake_port"], "26000");
        assert_eq!(extra["notify_port"], "27000");
        assert_eq!(extra["proxy_ping_port"], "36367");
        assert_eq!(extra["read_mode"], true);
    }

    #[test]
    fn none_has_no_config() {
        assert_eq!(
            NONE.kv_transfer_config(RoleKind::Decode, None).unwrap(),
            None
        );
    }
}
