//! The TCP ports a vLLM process binds, planned from its configuration and bound for real so
//! that port collisions between co-located processes surface as they would with vLLM.

use std::io;
use std::net::{IpAddr, SocketAddr};

use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpSocket};

use super::config::SimConfig;
use super::kv::Connector;
use super::SimError;

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

/// One port this process binds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedListener {
    /// Why.
    pub kind: ListenerKind,
    /// Bind host (an IP or a resolvable name).
    pub host: String,
    /// Port.
    pub port: u16,
}

impl PlannedListener {
    /// A short human description, e.g. `NIXL side channel (dp rank 2)`.
    pub fn describe(&self) -> String {
        match self.kind {
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

fn offset_port(what: &str, base: u16, offset: u32) -> Result<u16, String> {
    u16::try_from(u32::from(base) + offset)
        .map_err(|_| format!("{what} port {base} + {offset} is beyond 65535"))
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

/// Resolves a bind host, preferring IPv4 for names (`localhost` → 127.0.0.1).
pub async fn resolve(host: &str, port: u16) -> io::Result<SocketAddr> {
    let host = host.trim_start_matches('[').trim_end_matches(']');
    if let Ok(ip) = host.parse::<IpAddr>() {
        return Ok(SocketAddr::new(ip, port));
    }
    let addrs: Vec<SocketAddr> = tokio::net::lookup_host((host, port)).await?.collect();
    addrs
        .iter()
        .find(|a| a.is_ipv4())
        .or_else(|| addrs.first())
        .copied()
        .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, format!("cannot resolve {host}")))
}

fn bind_error(l: &PlannedListener, e: io::Error) -> SimError {
    let detail = if e.kind() == io::ErrorKind::AddrInUse {
        "address already in use".to_string()
    } else {
        e.to_string()
    };
    SimError::Bind(format!(
        "cannot bind {} on {}:{}: {detail}",
        l.describe(),
        l.host,
        l.port
    ))
}

/// Binds the HTTP socket without listening, as vLLM's `setup_server` does before the engine
/// starts: a collision shows at once, while connections are refused until [`listen_http`].
pub async fn bind_http(l: &PlannedListener) -> Result<TcpSocket, SimError> {
    let addr = resolve(&l.host, l.port)
        .await
        .map_err(|e| bind_error(l, e))?;
    let sock = if addr.is_ipv4() {
        TcpSocket::new_v4()
    } else {
        TcpSocket::new_v6()
    }
    .map_err(|e| bind_error(l, e))?;
    sock.set_reuseaddr(true).map_err(|e| bind_error(l, e))?;
    sock.bind(addr).map_err(|e| bind_error(l, e))?;
    Ok(sock)
}

/// Starts listening on a socket from [`bind_http`].
pub fn listen_http(l: &PlannedListener, sock: TcpSocket) -> Result<TcpListener, SimError> {
    sock.listen(1024).map_err(|e| bind_error(l, e))
}

/// Binds an engine-side listener (side channel, RPC or master port).
pub async fn bind_listener(l: &PlannedListener) -> Result<TcpListener, SimError> {
    let addr = resolve(&l.host, l.port)
        .await
        .map_err(|e| bind_error(l, e))?;
    TcpListener::bind(addr).await.map_err(|e| bind_error(l, e))
}

/// Accepts connections forever; each peer gets `greeting` (if any) and is then closed.
pub async fn serve_listener(listener: TcpListener, greeting: Option<String>) {
    loop {
        match listener.accept().await {
            Ok((mut stream, _)) => {
                let greeting = greeting.clone();
                tokio::spawn(async move {
                    if let Some(g) = greeting {
                        let _ = stream.write_all(g.as_bytes()).await;
                    }
                    let _ = stream.shutdown().await;
                });
            }
            Err(_) => tokio::time::sleep(std::time::Duration::from_millis(50)).await,
        }
    }
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

    #[tokio::test]
    async fn collisions_are_reported() {
        let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = taken.local_addr().unwrap().port();
        let l = PlannedListener {
            kind: ListenerKind::DpRpc,
            host: "127.0.0.1".into(),
            port,
        };
        let err = bind_listener(&l).await.unwrap_err().to_string();
        assert!(err.contains("address already in use"), "{err}");
        assert!(err.contains(&port.to_string()), "{err}");
        let http = PlannedListener {
            kind: ListenerKind::Http,
            ..l
        };
        let err = bind_http(&http).await.unwrap_err().to_string();
        assert!(err.contains("address already in use"), "{err}");
    }

    #[tokio::test]
    async fn http_refuses_until_listening() {
        let l = PlannedListener {
            kind: ListenerKind::Http,
            host: "127.0.0.1".into(),
            port: 0,
        };
        let sock = bind_http(&l).await.unwrap();
        let addr = sock.local_addr().unwrap();
        assert!(tokio::net::TcpStream::connect(addr).await.is_err());
        let listener = listen_http(&l, sock).unwrap();
        let accept = tokio::spawn(async move { listener.accept().await.map(|_| ()) });
        assert!(tokio::net::TcpStream::connect(addr).await.is_ok());
        accept.await.unwrap().unwrap();
    }
}
