//! KV transfer: the `--kv-transfer-config` contract, the `kv_transfer_params` exchanged by
//! the prefill and decode stages (NIXL and MoRI-IO flavours), and the side-channel
//! handshake the simulator runs between a decode and the prefill it reads from.

use std::time::Duration;

use serde_json::{json, Map, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

/// Which connector the process was started with, as far as the simulator models it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Connector {
    /// `NixlConnector` (also `NixlPullConnector` / `NixlPushConnector`).
    Nixl,
    /// `MoRIIOConnector`.
    MoriIo,
    /// Any other registered connector: accepted, served as aggregate.
    Other(String),
}

/// `kv_role`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KvRole {
    /// `kv_producer` (a prefill instance).
    Producer,
    /// `kv_consumer` (a decode instance).
    Consumer,
    /// `kv_both`.
    Both,
}

/// `kv_load_failure_policy`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FailurePolicy {
    /// Fail the request (vLLM's default).
    Fail,
    /// Recompute the prompt locally.
    Recompute,
}

/// MoRI-IO `kv_connector_extra_config`, with vLLM's defaults applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MoriSettings {
    /// `http_port` (required): the HTTP port advertised to the router.
    pub http_port: u16,
    /// `handshake_port` base (6301).
    pub handshake_port: u16,
    /// `notify_port` base (61005).
    pub notify_port: u16,
    /// `proxy_ip`: registration runs only when non-empty.
    pub proxy_ip: String,
    /// `proxy_ping_port`: the router's discovery port.
    pub proxy_ping_port: u16,
    /// `host_ip`, if given.
    pub host_ip: Option<String>,
    /// `read_mode`: READ (true) or WRITE transfer mode.
    pub read_mode: bool,
}

/// A validated `--kv-transfer-config` with a connector set.
#[derive(Debug, Clone, PartialEq)]
pub struct KvConfig {
    /// `kv_connector` as given.
    pub connector_name: String,
    /// The connector family.
    pub connector: Connector,
    /// `kv_role`.
    pub role: KvRole,
    /// `engine_id`, if given (vLLM otherwise generates a UUID).
    pub engine_id: Option<String>,
    /// `kv_load_failure_policy`.
    pub failure_policy: FailurePolicy,
    /// MoRI-IO settings when the connector is `MoRIIOConnector`.
    pub mori: Option<MoriSettings>,
}

/// Reads an integer that vLLM accepts either as a JSON number or a numeric string.
fn int_like(v: &Value) -> Option<i64> {
    match v {
        Value::Number(n) => n.as_i64(),
        Value::String(s) => s.trim().parse().ok(),
        _ => None,
    }
}

/// "Missing or falsy" in Python terms.
fn falsy(v: Option<&Value>) -> bool {
    match v {
        None | Some(Value::Null) => true,
        Some(Value::Bool(b)) => !b,
        Some(Value::String(s)) => s.is_empty(),
        Some(Value::Number(n)) => n.as_f64() == Some(0.0),
        Some(Value::Array(a)) => a.is_empty(),
        Some(Value::Object(o)) => o.is_empty(),
    }
}

fn port_value(key: &str, v: &Value) -> Result<u16, String> {
    int_like(v)
        .and_then(|n| u16::try_from(n).ok())
        .ok_or_else(|| format!("kv_connector_extra_config.{key} must be a port number, got {v}"))
}

fn mori_settings(extra: &Map<String, Value>) -> Result<MoriSettings, String> {
    let http_port = match extra.get("http_port") {
        None => {
            return Err(
                "MoRIIOConnector requires kv_connector_extra_config.http_port \
                        (KeyError: 'http_port')"
                    .into(),
            )
        }
        Some(v) => port_value("http_port", v)?,
    };
    let port_or = |key: &str, default: u16| -> Result<u16, String> {
        let v = extra.get(key);
        if falsy(v) {
            Ok(default)
        } else {
            port_value(key, v.expect("not falsy"))
        }
    };
    let proxy_ip = match extra.get("proxy_ip") {
        None | Some(Value::Null) => String::new(),
        Some(Value::String(s)) => s.clone(),
        Some(v) => v.to_string(),
    };
    let host_ip = match extra.get("host_ip") {
        Some(Value::String(s)) if !s.is_empty() => Some(s.clone()),
        _ => None,
    };
    let read_mode = match extra.get("read_mode") {
        Some(Value::Bool(b)) => *b,
        Some(Value::Number(n)) => n.as_i64() == Some(1),
        Some(Value::String(s)) => matches!(s.trim().to_ascii_lowercase().as_str(), "1" | "true"),
        _ => false,
    };
    Ok(MoriSettings {
        http_port,
        handshake_port: port_or("handshake_port", 6301)?,
        notify_port: port_or("notify_port", 61005)?,
        proxy_ip,
        proxy_ping_port: port_or("proxy_ping_port", 0)?,
        host_ip,
        read_mode,
    })
}

impl KvConfig {
    /// Validates a `--kv-transfer-config` object. `Ok(None)` when no connector is set.
    pub fn from_json(v: &Value) -> Result<Option<KvConfig>, String> {
        let obj = v
            .as_object()
            .ok_or_else(|| format!("--kv-transfer-config must be a JSON object, got {v}"))?;
        let role = match obj.get("kv_role") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => Some(match s.as_str() {
                "kv_producer" => KvRole::Producer,
                "kv_consumer" => KvRole::Consumer,
                "kv_both" => KvRole::Both,
                other => {
                    return Err(format!(
                        "kv_role '{other}' is not one of 'kv_producer', 'kv_consumer', 'kv_both'"
                    ))
                }
            }),
            Some(other) => return Err(format!("kv_role must be a string, got {other}")),
        };
        let failure_policy = match obj.get("kv_load_failure_policy") {
            None | Some(Value::Null) => FailurePolicy::Fail,
            Some(Value::String(s)) if s == "fail" => FailurePolicy::Fail,
            Some(Value::String(s)) if s == "recompute" => FailurePolicy::Recompute,
            Some(other) => {
                return Err(format!(
                    "kv_load_failure_policy must be 'recompute' or 'fail', got {other}"
                ))
            }
        };
        let name = match obj.get("kv_connector") {
            None | Some(Value::Null) => return Ok(None),
            Some(Value::String(s)) if s.is_empty() => return Ok(None),
            Some(Value::String(s)) => s.clone(),
            Some(other) => return Err(format!("kv_connector must be a string, got {other}")),
        };
        let role = role.ok_or_else(|| {
            "Please specify kv_role when kv_connector is set, supported roles are \
             ['kv_producer', 'kv_consumer', 'kv_both']"
                .to_string()
        })?;
        let connector = match name.as_str() {
            "NixlConnector" | "NixlPullConnector" | "NixlPushConnector" => Connector::Nixl,
            "MoRIIOConnector" => Connector::MoriIo,
            other => Connector::Other(other.to_string()),
        };
        let extra = match obj.get("kv_connector_extra_config") {
            None | Some(Value::Null) => Map::new(),
            Some(Value::Object(m)) => m.clone(),
            Some(other) => {
                return Err(format!(
                    "kv_connector_extra_config must be a JSON object, got {other}"
                ))
            }
        };
        let mori = if connector == Connector::MoriIo {
            if role == KvRole::Both {
                return Err(
                    "MoRIIOConnector does not support kv_role 'kv_both': the scheduler \
                            and the workers disagree on the role; use kv_producer on prefill \
                            and kv_consumer on decode"
                        .into(),
                );
            }
            Some(mori_settings(&extra)?)
        } else {
            None
        };
        let engine_id = match obj.get("engine_id") {
            Some(Value::String(s)) if !s.is_empty() => Some(s.clone()),
            _ => None,
        };
        Ok(Some(KvConfig {
            connector_name: name,
            connector,
            role,
            engine_id,
            failure_policy,
            mori,
        }))
    }
}

/// What a request asks of this engine, judged from its `kv_transfer_params`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// No KV transfer: ordinary serving.
    Agg,
    /// `do_remote_decode: true`: compute the prompt, hand the KV to a decode instance.
    Prefill,
    /// `do_remote_prefill: true`: read the KV computed by a prefill instance.
    Decode,
}

impl Stage {
    /// The label used in logs, metrics and the `srt_sim` response field.
    pub fn as_str(self) -> &'static str {
        match self {
            Stage::Agg => "agg",
            Stage::Prefill => "prefill",
            Stage::Decode => "decode",
        }
    }
}

/// Classifies a request by its `kv_transfer_params` (absent or null means aggregate).
pub fn stage_of(params: Option<&Value>) -> Stage {
    let flag = |k: &str| {
        params
            .and_then(|p| p.get(k))
            .and_then(Value::as_bool)
            .unwrap_or(false)
    };
    if flag("do_remote_decode") {
        Stage::Prefill
    } else if flag("do_remote_prefill") {
        Stage::Decode
    } else {
        Stage::Agg
    }
}

/// What a prefill engine reports about itself in its `kv_transfer_params`.
#[derive(Debug, Clone)]
pub struct PrefillSource<'a> {
    /// The engine id (`remote_engine_id`).
    pub engine_id: &'a str,
    /// The internal request id (`remote_request_id`).
    pub request_id: &'a str,
    /// The side-channel host (`remote_host`).
    pub host: &'a str,
    /// NIXL: the serving rank's side-channel port. MoRI-IO: its handshake port.
    pub port: u16,
    /// MoRI-IO: the serving rank's notify port.
    pub notify_port: u16,
    /// Tensor-parallel size.
    pub tp_size: u32,
    /// Pipeline-parallel size.
    pub pp_size: u32,
    /// The KV blocks holding the prompt.
    pub block_ids: Vec<u64>,
    /// Prompt length in tokens.
    pub num_tokens: u64,
}

/// The `kv_transfer_params` a NIXL prefill returns (vLLM's pull scheduler shape).
pub fn nixl_prefill_params(src: &PrefillSource<'_>) -> Value {
    json!({
        "do_remote_prefill": true,
        "do_remote_decode": false,
        "remote_block_ids": [src.block_ids],
        "remote_engine_id": src.engine_id,
        "remote_request_id": src.request_id,
        "remote_host": src.host,
        "remote_port": src.port,
        "tp_size": src.tp_size,
        "dcp_size": 1,
        "pp_size": src.pp_size,
        "remote_num_tokens": src.num_tokens,
        "remote_blocks_expiry_time": null,
        "transfer_mode": "pull",
    })
}

/// The `kv_transfer_params` a MoRI-IO prefill returns. The request must carry the router's
/// `transfer_id`.
pub fn mori_prefill_params(request: &Value, src: &PrefillSource<'_>) -> Result<Value, String> {
    let transfer_id = match request.get("transfer_id") {
        Some(Value::String(s)) if !s.is_empty() => s.clone(),
        _ => return Err("MoRIIOConnector prefill needs kv_transfer_params.transfer_id".into()),
    };
    let mut out = json!({
        "do_remote_prefill": true,
        "do_remote_decode": false,
        "transfer_id": transfer_id,
        "remote_engine_id": src.engine_id,
        "remote_block_ids": [src.block_ids],
        "remote_request_id": src.request_id,
        "remote_host": src.host,
        "remote_handshake_port": src.port,
        "remote_notify_port": src.notify_port,
        "tp_size": src.tp_size,
        "remote_num_tokens": src.num_tokens,
    });
    if let Some(dp) = request.get("remote_dp_size") {
        out["remote_dp_size"] = dp.clone();
    }
    Ok(out)
}

/// Where a decode stage says its KV comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodeSource {
    /// `remote_engine_id` (for MoRI-IO WRITE mode, possibly the prefill's registered address
    /// parsed from the request id).
    pub engine_id: String,
    /// `remote_host`, when given.
    pub host: Option<String>,
    /// NIXL `remote_port` / MoRI-IO `remote_handshake_port`, when given.
    pub port: Option<u16>,
    /// MoRI-IO `transfer_id`.
    pub transfer_id: Option<String>,
}

fn non_null<'a>(p: &'a Value, key: &str) -> Option<&'a Value> {
    p.get(key).filter(|v| !v.is_null())
}

fn opt_port(p: &Value, key: &str) -> Option<u16> {
    non_null(p, key)
        .and_then(int_like)
        .and_then(|n| u16::try_from(n).ok())
}

fn id_string(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Validates the params a NIXL decode receives: `remote_engine_id` and `remote_block_ids`
/// must be present and non-null.
pub fn nixl_decode_source(p: &Value) -> Result<DecodeSource, String> {
    let engine = non_null(p, "remote_engine_id")
        .ok_or("kv_transfer_params.remote_engine_id is missing for a remote prefill")?;
    non_null(p, "remote_block_ids")
        .filter(|v| v.is_array())
        .ok_or("kv_transfer_params.remote_block_ids is missing for a remote prefill")?;
    Ok(DecodeSource {
        engine_id: id_string(engine),
        host: non_null(p, "remote_host").map(id_string),
        port: opt_port(p, "remote_port"),
        transfer_id: None,
    })
}

/// Validates the params a MoRI-IO decode receives. `transfer_id`, `remote_engine_id` and
/// `remote_block_ids` are required; in WRITE mode the router sends the latter two as null
/// (the prefill pushes the KV), so there they need only be present.
pub fn mori_decode_source(
    p: &Value,
    read_mode: bool,
    request_id: &str,
) -> Result<DecodeSource, String> {
    let transfer_id = non_null(p, "transfer_id")
        .map(id_string)
        .ok_or("MoRIIOConnector decode needs kv_transfer_params.transfer_id")?;
    for key in ["remote_engine_id", "remote_block_ids"] {
        let ok = if read_mode {
            non_null(p, key).is_some()
        } else {
            p.get(key).is_some()
        };
        if !ok {
            return Err(format!(
                "MoRIIOConnector decode needs kv_transfer_params.{key}{}",
                if read_mode { " (READ mode)" } else { "" }
            ));
        }
    }
    let engine_id = match non_null(p, "remote_engine_id") {
        Some(v) => id_string(v),
        None => {
            parse_pd_request_id(request_id).map_or_else(|| "unknown".into(), |(prefill, _)| prefill)
        }
    };
    Ok(DecodeSource {
        engine_id,
        host: non_null(p, "remote_host").map(id_string),
        port: opt_port(p, "remote_handshake_port"),
        transfer_id: Some(transfer_id),
    })
}

/// Splits a router P/D request id `___prefill_addr_<P>___decode_addr_<D>_<32 hex>[-…]` into
/// the two addresses, as the MoRI-IO connector does.
pub fn parse_pd_request_id(id: &str) -> Option<(String, String)> {
    const P: &str = "___prefill_addr_";
    const D: &str = "___decode_addr_";
    let start = id.find(P)? + P.len();
    let rest = &id[start..];
    let dpos = rest.find(D)?;
    let prefill = &rest[..dpos];
    let tail = &rest[dpos + D.len()..];
    if prefill.is_empty() {
        return None;
    }
    // Greedy: the rightmost `_<32 hex>` that ends the id or is followed by `-`.
    let bytes = tail.as_bytes();
    for (pos, _) in tail
        .match_indices('_')
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
    {
        if pos == 0 {
            break;
        }
        let hex_end = pos + 1 + 32;
        if hex_end > bytes.len() {
            continue;
        }
        let hex_ok = bytes[pos + 1..hex_end]
            .iter()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(b));
        let end_ok = hex_end == bytes.len() || bytes[hex_end] == b'-';
        if hex_ok && end_ok {
            return Some((prefill.to_string(), tail[..pos].to_string()));
        }
    }
    None
}

/// The greeting a side-channel listener sends to whoever connects: one JSON line naming
/// the engine behind the port.
pub fn handshake_greeting(engine_id: &str, dp_rank: u32) -> String {
    let mut line = json!({"engine_id": engine_id, "dp_rank": dp_rank}).to_string();
    line.push('\n');
    line
}

/// Connects to a prefill's side channel and returns the engine id it announces.
pub async fn handshake(host: &str, port: u16, timeout: Duration) -> Result<String, String> {
    let work = async {
        let mut stream = TcpStream::connect((host, port))
            .await
            .map_err(|e| format!("cannot reach side channel {host}:{port}: {e}"))?;
        let mut line = String::new();
        BufReader::new(&mut stream)
            .read_line(&mut line)
            .await
            .map_err(|e| format!("side channel {host}:{port}: {e}"))?;
        let _ = stream.shutdown().await;
        let v: Value = serde_json::from_str(line.trim())
            .map_err(|_| format!("side channel {host}:{port} sent no engine metadata"))?;
        v.get("engine_id")
            .and_then(Value::as_str)
            .map(str::to_string)
            .ok_or_else(|| format!("side channel {host}:{port} sent no engine id"))
    };
    match tokio::time::timeout(timeout, work).await {
        Ok(r) => r,
        Err(_) => Err(format!("side channel {host}:{port}: handshake timed out")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nixl_config() {
        let c = KvConfig::from_json(&json!({"kv_connector":"NixlConnector","kv_role":"kv_both"}))
            .unwrap()
            .unwrap();
        assert_eq!(c.connector, Connector::Nixl);
        assert_eq!(c.role, KvRole::Both);
        assert_eq!(c.failure_policy, FailurePolicy::Fail);
        assert!(c.mori.is_none());
    }

    #[test]
    fn no_connector_is_none() {
        assert!(KvConfig::from_json(&json!({"kv_role":"kv_both"}))
            .unwrap()
            .is_none());
        assert!(KvConfig::from_json(&json!({})).unwrap().is_none());
    }

    #[test]
    fn refusals() {
        let bad = [
            json!({"kv_connector":"NixlConnector"}),
            json!({"kv_connector":"NixlConnector","kv_role":"both"}),
            json!({"kv_connector":"NixlConnector","kv_role":"kv_both","kv_load_failure_policy":"retry"}),
            json!({"kv_connector":"MoRIIOConnector","kv_role":"kv_both",
                   "kv_connector_extra_config":{"http_port":8000}}),
            json!({"kv_connector":"MoRIIOConnector","kv_role":"kv_producer"}),
            json!({"kv_connector":"MoRIIOConnector","kv_role":"kv_producer",
                   "kv_connector_extra_config":{"http_port":"eighty"}}),
            json!([1]),
        ];
        for b in bad {
            assert!(KvConfig::from_json(&b).is_err(), "{b} should be refused");
        }
    }

    #[test]
    fn mori_defaults_and_strings() {
        let c = KvConfig::from_json(&json!({
            "kv_connector":"MoRIIOConnector","kv_role":"kv_consumer",
            "kv_connector_extra_config":{"http_port":"8100","handshake_port":"","proxy_ip":"10.1.1.1",
                                         "proxy_ping_port":"36367","read_mode":"1"}
        }))
        .unwrap()
        .unwrap();
        let m = c.mori.unwrap();
        assert_eq!(m.http_port, 8100);
        assert_eq!(m.handshake_port, 6301);
        assert_eq!(m.notify_port, 61005);
        assert_eq!(m.proxy_ip, "10.1.1.1");
        assert_eq!(m.proxy_ping_port, 36367);
        assert!(m.read_mode);
        assert_eq!(m.host_ip, None);
    }

    #[test]
    fn stages() {
        assert_eq!(stage_of(None), Stage::Agg);
        assert_eq!(stage_of(Some(&Value::Null)), Stage::Agg);
        assert_eq!(
            stage_of(Some(
                &json!({"do_remote_decode":true,"do_remote_prefill":false})
            )),
            Stage::Prefill
        );
        assert_eq!(
            stage_of(Some(
                &json!({"do_remote_decode":false,"do_remote_prefill":true})
            )),
            Stage::Decode
        );
    }

    fn src() -> PrefillSource<'static> {
        PrefillSource {
            engine_id: "e0",
            request_id: "cmpl-x",
            host: "127.0.0.1",
            port: 5601,
            notify_port: 61005,
            tp_size: 2,
            pp_size: 1,
            block_ids: vec![3, 4],
            num_tokens: 20,
        }
    }

    #[test]
    fn nixl_round_trip() {
        let p = nixl_prefill_params(&src());
        assert_eq!(p["remote_port"], 5601);
        assert_eq!(p["tp_size"], 2);
        assert_eq!(stage_of(Some(&p)), Stage::Decode);
        let d = nixl_decode_source(&p).unwrap();
        assert_eq!(d.engine_id, "e0");
        assert_eq!(d.host.as_deref(), Some("127.0.0.1"));
        assert_eq!(d.port, Some(5601));
        let mut missing = p.clone();
        missing["remote_engine_id"] = Value::Null;
        assert!(nixl_decode_source(&missing).is_err());
        let mut missing = p;
        missing.as_object_mut().unwrap().remove("remote_block_ids");
        assert!(nixl_decode_source(&missing).is_err());
    }

    #[test]
    fn mori_round_trip() {
        let req = json!({"do_remote_decode":true,"do_remote_prefill":false,"remote_engine_id":null,
                         "remote_block_ids":null,"transfer_id":"tx-1","remote_dp_size":1});
        let p = mori_prefill_params(&req, &src()).unwrap();
        for k in [
            "transfer_id",
            "remote_engine_id",
            "remote_block_ids",
            "remote_host",
            "remote_handshake_port",
            "remote_notify_port",
        ] {
            assert!(!p[k].is_null(), "{k}");
        }
        assert_eq!(p["remote_dp_size"], 1);
        let d = mori_decode_source(&p, true, "x").unwrap();
        assert_eq!(d.transfer_id.as_deref(), Some("tx-1"));
        assert_eq!(d.port, Some(5601));
        assert!(mori_prefill_params(&json!({"do_remote_decode":true}), &src()).is_err());
    }

    #[test]
    fn mori_write_mode_decode_accepts_nulls() {
        let hex = "0123456789abcdef0123456789abcdef";
        let rid = format!(
            "___prefill_addr_host:10.0.0.1,handshake:6301,notify:61005___decode_addr_host:10.0.0.2,handshake:7301,notify:62005_{hex}"
        );
        let p = json!({"do_remote_decode":false,"do_remote_prefill":true,"remote_engine_id":null,
                       "remote_block_ids":null,"transfer_id":"tx-9","remote_dp_size":1});
        let d = mori_decode_source(&p, false, &rid).unwrap();
        assert_eq!(d.engine_id, "host:10.0.0.1,handshake:6301,notify:61005");
        assert!(mori_decode_source(&p, true, &rid).is_err());
        let no_tx =
            json!({"do_remote_prefill":true,"remote_engine_id":null,"remote_block_ids":null});
        assert!(mori_decode_source(&no_tx, false, &rid).is_err());
    }

    #[test]
    fn request_id_parsing() {
        let hex = "0123456789abcdef0123456789abcdef";
        let id = format!("___prefill_addr_10.0.0.1:8000___decode_addr_10.0.0.2:8001_{hex}");
        assert_eq!(
            parse_pd_request_id(&id),
            Some(("10.0.0.1:8000".into(), "10.0.0.2:8001".into()))
        );
        let id = format!("cmpl-___prefill_addr_a___decode_addr_b_c_{hex}-0");
        assert_eq!(parse_pd_request_id(&id), Some(("a".into(), "b_c".into())));
        assert_eq!(parse_pd_request_id("plain-id"), None);
        assert_eq!(
            parse_pd_request_id("___prefill_addr_a___decode_addr_b_short"),
            None
        );
    }

    #[tokio::test]
    async fn handshake_reads_greeting() {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = l.local_addr().unwrap().port();
        tokio::spawn(async move {
            let (mut s, _) = l.accept().await.unwrap();
            s.write_all(handshake_greeting("eng-7", 3).as_bytes())
                .await
                .unwrap();
        });
        let id = handshake("127.0.0.1", port, Duration::from_secs(2))
            .await
            .unwrap();
        assert_eq!(id, "eng-7");
    }
}
