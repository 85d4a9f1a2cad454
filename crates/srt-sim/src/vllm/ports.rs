//! The TCP ports a vLLM process binds, planned from its configuration (the common core
//! binds them: [`crate::common::ports`]).

use super::config::SimConfig;
use super::kv::Connector;
use crate::common::ports::{self, offset_port, Purpose};

/// Why a port is bound.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListenerKind {
    /// The OpenAI-compatible HTTP API (`--host`/`--port`); API processes only.
    Http,
    /// A NIXL side channel, one per local engine, at base + global DP rank.
    NixlSideChannel {
        /// Global DP rank of the engine.
        dp_rank: u32,
    },
    /// A MoRI-IO handshake listener at base + local DP rank + TP rank.
    MoriHandshake {
        /// Local DP index.
        local_dp: u32,
        /// TP rank.
        tp_rank: u32,
    },
    /// A MoRI-IO notify listener at base + local DP rank + TP rank.
    MoriNotify {
        /// Local DP index.
        local_dp: u32,
        /// TP rank.
        tp_rank: u32,
    },
    /// The DP handshake/RPC port (`--data-parallel-rpc-port`) on the DP leader.
    DpRpc,
    /// The torch rendezvous port (`--master-port`) on node rank 0 of a multi-node group.
    MasterPort,
}

/// One port a vLLM process binds.
pub type PlannedListener = ports::PlannedListener<ListenerKind>;

impl Purpose for ListenerKind {
    fn describe(&self) -> String {
        match *self {
            ListenerKind::Http => "HTTP API".into(),
            ListenerKind::NixlSideChannel { dp_rank } => {
                format!("NIXL side channel (dp rank {dp_rank})")
            }
            ListenerKind::MoriHandshake { local_dp, tp_rank } => {
                format!("MoRI-IO handshake (local dp {local_dp}, tp {tp_rank})")
            }
            ListenerKind::MoriNotify { local_dp, tp_rank } => {
                format!("MoRI-IO notify (local dp {local_dp}, tp {tp_rank})")
            }
            ListenerKind::DpRpc => "DP RPC port".into(),
            ListenerKind::MasterPort => "master port".into(),
        }
    }
}

/// Computes every listener of the process described by `cfg`.
///
/// - HTTP on `--host` (all interfaces when unset) and `--port`, unless headless.
/// - NIXL: `VLLM_NIXL_SIDE_CHANNEL_PORT + global rank` on `VLLM_NIXL_SIDE_CHANNEL_HOST` for
///   each local engine.
/// - MoRI-IO: handshake and notify at `base + local dp + tp rank` for every (local dp, tp)
///   pair, the distinct ports, on `host_ip` or 0.0.0.0.
/// - The DP RPC port on the DP leader, the master port on node rank 0 when `--nnodes > 1`.
///   Both are bound on all interfaces: only the port matters for collisions, and the
///   addresses named by `--data-parallel-address`/`--master-addr` may be another node's.
pub fn plan(cfg: &SimConfig) -> Result<Vec<PlannedListener>, String> {
    let a = &cfg.args;
    let mut out = Vec::new();
    if cfg.api_server {
        out.push(PlannedListener {
            kind: ListenerKind::Http,
            host: cfg.http_host().to_string(),
            port: a.port,
        });
    }
    match cfg.kv.as_ref().map(|k| &k.connector) {
        Some(Connector::Nixl) => {
            for &rank in &cfg.local_ranks {
                out.push(PlannedListener {
                    kind: ListenerKind::NixlSideChannel { dp_rank: rank },
                    host: cfg.nixl_host.clone(),
                    port: offset_port("NIXL side channel", cfg.nixl_base_port, rank)?,
                });
            }
        }
        Some(Connector::MoriIo) => {
            let m = cfg
                .kv
                .as_ref()
                .and_then(|k| k.mori.as_ref())
                .expect("MoRI settings");
            let host = m.host_ip.clone().unwrap_or_else(|| "0.0.0.0".into());
            let mut handshake: Vec<PlannedListener> = Vec::new();
            let mut notify: Vec<PlannedListener> = Vec::new();
            for local_dp in 0..cfg.local_ranks.len() as u32 {
                for tp_rank in 0..a.tensor_parallel_size {
                    let h = offset_port("MoRI-IO handshake", m.handshake_port, local_dp + tp_rank)?;
                    if !handshake.iter().any(|l| l.port == h) {
                        handshake.push(PlannedListener {
                            kind: ListenerKind::MoriHandshake { local_dp, tp_rank },
                            host: host.clone(),
                            port: h,
                        });
                    }
                    let n = offset_port("MoRI-IO notify", m.notify_port, local_dp + tp_rank)?;
                    if !notify.iter().any(|l| l.port == n) {
                        notify.push(PlannedListener {
                            kind: ListenerKind::MoriNotify { local_dp, tp_rank },
                            host: host.clone(),
                            port: n,
                        });
                    }
                }
            }
            out.extend(handshake);
            out.extend(notify);
        }
        Some(Connector::Other(_)) | None => {}
    }
    if cfg.dp_leader {
        out.push(PlannedListener {
            kind: ListenerKind::DpRpc,
            host: "0.0.0.0".into(),
            port: a.data_parallel_rpc_port,
        });
    }
    if a.nnodes > 1 && a.node_rank == 0 {
        out.push(PlannedListener {
            kind: ListenerKind::MasterPort,
            host: "0.0.0.0".into(),
            port: a.master_port,
        });
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn plan_for(argv: &str, env: &[(&str, &str)]) -> Vec<(ListenerKind, String, u16)> {
        let argv: Vec<String> = shlex::split(argv).unwrap();
        let env: HashMap<String, String> = env
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        SimConfig::from_argv_env(&argv, &env)
            .unwrap()
            .listeners
            .into_iter()
            .map(|l| (l.kind, l.host, l.port))
            .collect()
    }

    const NIXL: &str =
        r#"--kv-transfer-config '{"kv_connector":"NixlConnector","kv_role":"kv_both"}'"#;

    #[test]
    fn plain_server_binds_http_only() {
        assert_eq!(
            plan_for("serve m --port 7000", &[]),
            vec![(ListenerKind::Http, "0.0.0.0".into(), 7000)]
        );
    }

    #[test]
    fn nixl_hybrid_head() {
        let got = plan_for(
            &format!("serve m --host 127.0.0.1 --port 6100 -dp 8 -dpl 4 -dpr 0 -dph -ep -dpp 8400 {NIXL}"),
            &[("VLLM_NIXL_SIDE_CHANNEL_HOST", "127.0.0.1"), ("VLLM_NIXL_SIDE_CHANNEL_PORT", "9100")],
        );
        let mut want = vec![(ListenerKind::Http, "127.0.0.1".to_string(), 6100)];
        for r in 0..4 {
            want.push((
                ListenerKind::NixlSideChannel { dp_rank: r },
                "127.0.0.1".into(),
                9100 + r as u16,
            ));
        }
        want.push((ListenerKind::DpRpc, "0.0.0.0".into(), 8400));
        assert_eq!(got, want);
    }

    #[test]
    fn nixl_secondary_headless_uses_global_ranks() {
        let got = plan_for(
            &format!("serve m -dp 8 -dpl 4 -dpr 4 --headless -ep {NIXL}"),
            &[],
        );
        let ports: Vec<u16> = got.iter().map(|g| g.2).collect();
        assert_eq!(ports, vec![5604, 5605, 5606, 5607]);
        assert!(got.iter().all(|g| g.1 == "localhost"));
    }

    #[test]
    fn mori_ports_distinct_set() {
        let kv = r#"--kv-transfer-config '{"kv_connector":"MoRIIOConnector","kv_role":"kv_producer","kv_connector_extra_config":{"http_port":8000,"handshake_port":6301,"notify_port":61005,"host_ip":"127.0.0.1"}}'"#;
        let got = plan_for(&format!("serve m --port 8000 -dp 2 -tp 2 {kv}"), &[]);
        let hs: Vec<u16> = got
            .iter()
            .filter(|g| matches!(g.0, ListenerKind::MoriHandshake { .. }))
            .map(|g| g.2)
            .collect();
        let nt: Vec<u16> = got
            .iter()
            .filter(|g| matches!(g.0, ListenerKind::MoriNotify { .. }))
            .map(|g| g.2)
            .collect();
        assert_eq!(hs, vec![6301, 6302, 6303]);
        assert_eq!(nt, vec![61005, 61006, 61007]);
        assert!(got.iter().skip(1).all(|g| g.1 == "127.0.0.1"));
    }

    #[test]
    fn master_port_on_node_zero() {
        let got = plan_for("serve m -tp 16 -n 2 -r 0 --master-port 29600", &[]);
        assert!(got.contains(&(ListenerKind::MasterPort, "0.0.0.0".into(), 29600)));
        let got = plan_for("serve m -tp 16 -n 2 -r 1 --headless", &[]);
        assert!(got.is_empty());
    }

    #[test]
    fn side_channel_overflow_is_refused() {
        let argv: Vec<String> = shlex::split(&format!("serve m -dp 4 {NIXL}")).unwrap();
        let env: HashMap<String, String> = [(
            "VLLM_NIXL_SIDE_CHANNEL_PORT".to_string(),
            "65534".to_string(),
        )]
        .into();
        assert!(SimConfig::from_argv_env(&argv, &env).is_err());
    }
}
