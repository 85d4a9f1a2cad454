//! `engine.kv_events_config` (srtctl's `backend.kv_events_config`): workers publish
//! their KV-cache events over ZMQ (`--kv-events-config`), which Dynamo's KV-aware
//! router reads. srtctl's meaning: `true` turns it on for the prefill and decode
//! workers with ZMQ on the `kv-events` topic; a mapping turns it on per role
//! (`prefill`, `decode`, `aggregated`), each `true` or a mapping of settings merged
//! over those. Each worker process publishes on a port of its own (port kind
//! [`crate::ports::KV_EVENTS`], a run of one per local DP rank: vLLM offsets the
//! port by the rank),
//! which srt allocates and writes as the config's `endpoint`. Shared by the engines
//! whose flags take the config (SGLang, vLLM).

use crate::launch::BuildContext;
use crate::ports::{PortBlock, PortError, KV_EVENTS};
use crate::recipe::diag::{did_you_mean, Problem};
use crate::recipe::keys::{k, Key};
use crate::recipe::{ArgValue, Recipe, RoleKind};
use serde_json::{Map, Value};
use std::collections::BTreeMap;

/// The key, in the tables of the engines that read it.
pub(super) const KEY: Key = k(
    "kv_events_config",
    r#"{"type": ["boolean", "object"]}"#,
    "Workers publish their KV-cache events over ZMQ (`--kv-events-config`, for Dynamo's KV-aware router): `true` for the prefill and decode workers, or per role (`prefill`, `decode`, `aggregated`) `true` or settings merged over `{publisher: zmq, topic: kv-events}`; srt allocates each worker's port (`endpoint`).",
);

/// The config's key srt writes.
const ENDPOINT: &str = "endpoint";

/// The config `role`'s workers publish with, without its endpoint (srtctl's ZMQ
/// publisher and topic, then the engine's `defaults`, under what the recipe wrote), or
/// `None` when they publish none.
pub(super) fn config(
    recipe: &Recipe,
    role: RoleKind,
    defaults: &[(&str, Value)],
) -> Option<Map<String, Value>> {
    let base = || -> Map<String, Value> {
        [
            ("publisher", Value::from("zmq")),
            ("topic", Value::from("kv-events")),
        ]
        .into_iter()
        .chain(defaults.iter().cloned())
        .map(|(k, v)| (k.to_string(), v))
        .collect()
    };
    let written = match &recipe.engine.keys.get(KEY.name)?.value {
        ArgValue::Bool(true) => return (role != RoleKind::Agg).then(base),
        ArgValue::Json(Value::Object(roles)) => roles.get(role.srtctl_name())?,
        _ => return None,
    };
    match written {
        Value::Bool(true) => Some(base()),
        Value::Object(settings) => {
            let mut out = base();
            out.extend(settings.iter().map(|(k, v)| (k.clone(), v.clone())));
            Some(out)
        }
        _ => None,
    }
}

/// A worker process's publisher: a run of `ranks` ports (one per local DP rank) of kind
/// [`KV_EVENTS`] allocated on `node` for `address` and recorded in `ports`; returns the
/// `--kv-events-config` value, whose endpoint is the run's first port, and that port.
pub(super) fn publisher(
    ctx: &mut BuildContext<'_>,
    config: &Map<String, Value>,
    (node, ranks): (usize, u16),
    address: &str,
    ports: &mut BTreeMap<String, PortBlock>,
) -> Result<(ArgValue, u16), PortError> {
    let block = ctx.allocate(&KV_EVENTS, node, ranks, address)?;
    ports.insert(KV_EVENTS.name.to_string(), block);
    Ok((with_endpoint(config.clone(), block.base), block.base))
}

/// The flag's value for a worker publishing on `port`.
fn with_endpoint(mut config: Map<String, Value>, port: u16) -> ArgValue {
    config.insert(ENDPOINT.into(), Value::String(format!("tcp://*:{port}")));
    ArgValue::Json(Value::Object(config))
}

/// What is wrong with the key as written: a role srtctl has no key for, a role's
/// value neither a boolean nor a mapping, an `endpoint` (srt's), or a role that also
/// sets `kv-events-config` in its args.
pub(super) fn problems(recipe: &Recipe) -> Vec<Problem> {
    let Some(arg) = recipe.engine.keys.get(KEY.name) else {
        return Vec::new();
    };
    let at = arg.value_span;
    let mut out = Vec::new();
    if let ArgValue::Json(Value::Object(roles)) = &arg.value {
        for (role, value) in roles {
            let path = format!("engine.{}.{role}", KEY.name);
            let names = RoleKind::ALL.map(RoleKind::srtctl_name);
            if !names.contains(&role.as_str()) {
                let p = Problem::new(
                    "srt::recipe::value",
                    at,
                    format!("`{path}`: srtctl's kv_events_config has no role `{role}`"),
                )
                .label("this mapping");
                out.push(match did_you_mean(role, names) {
                    Some(close) => p.help(format!("did you mean `{close}`?")),
                    None => p.help(format!("its roles are {}", names.join(", "))),
                });
                continue;
            }
            match value {
                Value::Bool(_) | Value::Null => {}
                Value::Object(settings) if settings.contains_key(ENDPOINT) => out.push(
                    Problem::new(
                        "srt::recipe::managed_flag",
                        at,
                        format!("`{path}.{ENDPOINT}` is srt's: each worker publishes on a port srt allocates"),
                    )
                    .label("this mapping")
                    .help(format!("remove `{ENDPOINT}`")),
                ),
                Value::Object(_) => {}
                other => out.push(
                    Problem::new(
                        "srt::recipe::type",
                        at,
                        format!("`{path}` must be a boolean or a mapping, found {other}"),
                    )
                    .label("this mapping"),
                ),
            }
        }
    }
    for role in &recipe.roles {
        if config(recipe, role.kind, &[]).is_none() {
            continue;
        }
        if let Some(a) = role.args.get("kv-events-config") {
            out.push(
                Problem::new(
                    "srt::recipe::conflict",
                    a.key_span,
                    format!(
                        "`roles.{}.args.kv-events-config` and `engine.{}` both configure these workers' KV events",
                        role.kind.name(),
                        KEY.name
                    ),
                )
                .label("set twice")
                .help(format!("keep one: `engine.{}` also allocates each worker's port", KEY.name)),
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn recipe(value: &str) -> Recipe {
        let text = format!(
            "engine:\n  type: sglang\n  kv_events_config: {value}\nroles:\n  prefill:\n    nodes: 1\n    workers: 1\n  decode:\n    nodes: 1\n    workers: 1\n"
        );
        crate::recipe::load_str(
            &crate::recipe::Source {
                name: "t.yaml".into(),
                text,
            },
            "t",
        )
        .expect("loads")
    }

    #[test]
    fn true_is_prefill_and_decode_with_srtctls_defaults() {
        let r = recipe("true");
        let prefill = config(&r, RoleKind::Prefill, &[]).expect("prefill publishes");
        let vllm = config(
            &r,
            RoleKind::Prefill,
            &[("enable_kv_cache_events", Value::Bool(true))],
        );
        assert_eq!(vllm.unwrap()["enable_kv_cache_events"], true);
        assert_eq!(
            Value::Object(prefill),
            serde_json::json!({"publisher": "zmq", "topic": "kv-events"})
        );
        assert!(config(&r, RoleKind::Decode, &[]).is_some());
        assert!(config(&r, RoleKind::Agg, &[]).is_none());
        assert!(problems(&r).is_empty());
    }

    #[test]
    fn a_mapping_chooses_roles_and_merges_settings() {
        let r = recipe("{prefill: {topic: mine}, decode: false}");
        let prefill = config(&r, RoleKind::Prefill, &[]).unwrap();
        assert_eq!(prefill["topic"], "mine");
        assert_eq!(prefill["publisher"], "zmq");
        assert!(config(&r, RoleKind::Decode, &[]).is_none());
        assert_eq!(
            with_endpoint(prefill, 5201),
            ArgValue::Json(
                serde_json::json!({"publisher": "zmq", "topic": "mine", "endpoint": "tcp://*:5201"})
            )
        );
    }

    #[test]
    fn a_role_srtctl_lacks_and_an_endpoint_are_refused() {
        let codes = |value: &str| -> Vec<String> {
            problems(&recipe(value))
                .iter()
                .map(|p| format!("{} {}", p.code, p.message))
                .collect()
        };
        let unknown = codes("{prefil: true}");
        assert!(unknown[0].contains("no role `prefil`"), "{unknown:?}");
        let endpoint = codes("{decode: {endpoint: 'tcp://*:1'}}");
        assert!(
            endpoint[0].starts_with("srt::recipe::managed_flag"),
            "{endpoint:?}"
        );
        let number = codes("{decode: 3}");
        assert!(number[0].starts_with("srt::recipe::type"), "{number:?}");
    }
}
