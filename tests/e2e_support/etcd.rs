//! A deployment's etcd, through its v3 HTTP gateway (etcd 3.4: `POST /v3/kv/range`,
//! `/v3/kv/deleterange`, keys and values in base64), from inside the scenario's
//! namespace: what a test reads and deletes behind srt's back.

use super::{with_client, Env};

const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

/// Standard base64 with padding, as etcd's gateway reads it.
fn encode(bytes: &[u8]) -> String {
    let mut out = String::new();
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ALPHABET[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// Standard base64 back to bytes (padding and unknown characters skipped).
fn decode(text: &str) -> Vec<u8> {
    let sextets: Vec<u32> = text
        .bytes()
        .filter_map(|c| ALPHABET.iter().position(|&a| a == c).map(|p| p as u32))
        .collect();
    let mut out = Vec::new();
    for chunk in sextets.chunks(4) {
        let n = chunk
            .iter()
            .enumerate()
            .fold(0u32, |n, (i, s)| n | (s << (18 - 6 * i)));
        out.extend_from_slice(&n.to_be_bytes()[1..chunk.len()]);
    }
    out
}

/// `POST <client><path>` with `body`, from inside the scenario's namespace: the JSON
/// answer.
fn post(env: &Env, client: &str, path: &str, body: serde_json::Value) -> serde_json::Value {
    let url = format!("{client}{path}");
    env.in_netns(|| {
        with_client(|c| async move {
            let r = c.post(&url).json(&body).send().await.unwrap();
            assert!(r.status().is_success(), "{url}: {}", r.status());
            r.json().await.unwrap()
        })
    })
}

/// Every key under `prefix` in the etcd at `client` (`http://ip:port`), with its value.
pub(crate) fn range(env: &Env, client: &str, prefix: &str) -> Vec<(String, String)> {
    let mut end = prefix.as_bytes().to_vec();
    *end.last_mut().expect("a prefix") += 1;
    let body = serde_json::json!({"key": encode(prefix.as_bytes()), "range_end": encode(&end)});
    let answer = post(env, client, "/v3/kv/range", body);
    let text = |v: &serde_json::Value| String::from_utf8(decode(v.as_str().unwrap_or(""))).unwrap();
    answer["kvs"]
        .as_array()
        .map(|kvs| {
            kvs.iter()
                .map(|kv| (text(&kv["key"]), text(&kv["value"])))
                .collect()
        })
        .unwrap_or_default()
}

/// Delete `key` from the etcd at `client`: how many keys went.
pub(crate) fn delete(env: &Env, client: &str, key: &str) -> u64 {
    let body = serde_json::json!({"key": encode(key.as_bytes())});
    let answer = post(env, client, "/v3/kv/deleterange", body);
    // The gateway writes 64-bit integers as strings.
    answer["deleted"]
        .as_str()
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}
