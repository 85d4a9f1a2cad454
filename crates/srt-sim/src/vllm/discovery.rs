//! MoRI-IO registration with the vLLM Router's discovery socket: a ZMQ DEALER that sends
//! one msgpack map per engine every few seconds, reconnecting on errors and never failing
//! the process.

use std::time::Duration;

use rmpv::Value as Mp;
use zeromq::{DealerSocket, Socket, SocketSend, ZmqMessage};

use super::config::SimConfig;
use super::kv::KvRole;
use crate::common::log;

/// The registration map for the engine at local DP index `local_dp`, or `None` when the
/// process does not register (no MoRI-IO connector, or an empty `proxy_ip`).
pub fn payload(cfg: &SimConfig, local_dp: u32) -> Option<Mp> {
    let kv = cfg.kv.as_ref()?;
    let m = kv.mori.as_ref()?;
    if m.proxy_ip.is_empty() {
        return None;
    }
    let role = match kv.role {
        KvRole::Producer => "P",
        KvRole::Consumer => "D",
        // Refused at startup; kept total for safety.
        KvRole::Both => "P",
    };
    let host = &cfg.mori_host_ip;
    let notify = u32::from(m.notify_port) + local_dp;
    let entries = vec![
        ("type", Mp::from(role)),
        ("http_address", Mp::from(format!("{host}:{}", m.http_port))),
        (
            "zmq_address",
            Mp::from(format!(
                "host:{host},handshake:{},notify:{notify}",
                m.handshake_port
            )),
        ),
        ("dp_size", Mp::from(cfg.dp_size)),
        ("tp_size", Mp::from(cfg.args.tensor_parallel_size)),
        (
            "transfer_mode",
            Mp::from(if m.read_mode { "READ" } else { "WRITE" }),
        ),
    ];
    Some(Mp::Map(
        entries.into_iter().map(|(k, v)| (Mp::from(k), v)).collect(),
    ))
}

/// Encodes a map as one msgpack frame.
pub fn encode(v: &Mp) -> Vec<u8> {
    let mut buf = Vec::new();
    rmpv::encode::write_value(&mut buf, v).expect("writing to a Vec cannot fail");
    buf
}

/// The router's discovery endpoint, `tcp://{proxy_ip}:{proxy_ping_port}`.
pub fn endpoint(cfg: &SimConfig) -> Option<String> {
    let m = cfg.kv.as_ref()?.mori.as_ref()?;
    (!m.proxy_ip.is_empty()).then(|| format!("tcp://{}:{}", m.proxy_ip, m.proxy_ping_port))
}

/// Sends `frame` to `endpoint` now and then every `interval`, forever.
pub async fn register_loop(endpoint: String, frame: Vec<u8>, interval: Duration, who: String) {
    let mut failures: u64 = 0;
    let mut note = |what: String| {
        failures += 1;
        if failures == 1 || failures.is_multiple_of(20) {
            log::info(&format!(
                "MoRI-IO registration of {who} with {endpoint}: {what} (attempt {failures}); retrying"
            ));
        }
    };
    loop {
        let mut sock = DealerSocket::new();
        match tokio::time::timeout(Duration::from_secs(10), sock.connect(&endpoint)).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                note(format!("connect failed: {e}"));
                tokio::time::sleep(Duration::from_secs(1)).await;
                continue;
            }
            Err(_) => {
                note("connect timed out".into());
                continue;
            }
        }
        let mut sent = 0u64;
        loop {
            let msg = ZmqMessage::from(frame.clone());
            match tokio::time::timeout(Duration::from_secs(5), sock.send(msg)).await {
                Ok(Ok(())) => {
                    if sent == 0 {
                        log::info(&format!("MoRI-IO: registered {who} with {endpoint}"));
                    }
                    sent += 1;
                }
                Ok(Err(e)) => {
                    note(format!("send failed: {e}"));
                    break;
                }
                Err(_) => {
                    note("send timed out".into());
                    break;
                }
            }
            tokio::time::sleep(interval).await;
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn cfg(kv: &str) -> SimConfig {
        let argv: Vec<String> = shlex::split(&format!(
            "serve m --port 8100 -dp 2 -tp 2 --kv-transfer-config '{kv}'"
        ))
        .unwrap();
        SimConfig::from_argv_env(&argv, &HashMap::new()).unwrap()
    }

    fn get<'a>(m: &'a Mp, key: &str) -> &'a Mp {
        m.as_map()
            .unwrap()
            .iter()
            .find(|(k, _)| k.as_str() == Some(key))
            .map_or_else(|| panic!("missing {key}"), |(_, v)| v)
    }

    #[test]
    fn payload_shape() {
        let c = cfg(
            r#"{"kv_connector":"MoRIIOConnector","kv_role":"kv_consumer","kv_connector_extra_config":{"http_port":8100,"handshake_port":7301,"notify_port":62005,"proxy_ip":"127.0.0.1","proxy_ping_port":36367,"host_ip":"10.0.0.2","read_mode":true}}"#,
        );
        assert_eq!(endpoint(&c).as_deref(), Some("tcp://127.0.0.1:36367"));
        let p = payload(&c, 1).unwrap();
        assert_eq!(get(&p, "type").as_str(), Some("D"));
        assert_eq!(get(&p, "http_address").as_str(), Some("10.0.0.2:8100"));
        assert_eq!(
            get(&p, "zmq_address").as_str(),
            Some("host:10.0.0.2,handshake:7301,notify:62006")
        );
        assert_eq!(get(&p, "dp_size").as_u64(), Some(2));
        assert_eq!(get(&p, "tp_size").as_u64(), Some(2));
        assert_eq!(get(&p, "transfer_mode").as_str(), Some("READ"));
        let bytes = encode(&p);
        let back = rmpv::decode::read_value(&mut bytes.as_slice()).unwrap();
        assert_eq!(back, p);
    }

    #[test]
    fn no_proxy_no_registration() {
        let c = cfg(
            r#"{"kv_connector":"MoRIIOConnector","kv_role":"kv_producer","kv_connector_extra_config":{"http_port":8100}}"#,
        );
        assert!(payload(&c, 0).is_none());
        assert!(endpoint(&c).is_none());
        let c = cfg(r#"{"kv_connector":"NixlConnector","kv_role":"kv_both"}"#);
        assert!(payload(&c, 0).is_none());
    }
}
