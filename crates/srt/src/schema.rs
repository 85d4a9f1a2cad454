//! The recipe's JSON Schema (`srt schema`, `docs/recipe.schema.json`), for editors:
//! every key and default from [`crate::recipe::keys`], and the names a recipe may use
//! for its engine, frontend and connectors from their own tables, so adding one adds
//! it here too.

use crate::recipe::keys::{self, Key};
use serde_json::{json, Value};

fn object(table: &[Key], required: &[&str]) -> Value {
    let mut props = serde_json::Map::new();
    for key in table {
        let mut v: Value = serde_json::from_str(key.schema).expect("key schema is JSON");
        v.as_object_mut()
            .expect("schema fragment is an object")
            .insert("description".into(), key.doc.into());
        props.insert(key.name.into(), v);
    }
    json!({"type": "object", "additionalProperties": false, "properties": props, "required": required})
}

/// Set `enum` on the schema of `key` in `def` (a `$defs` entry).
fn names(v: &mut Value, def: &str, key: &str, names: Vec<&str>) {
    v["$defs"][def]["properties"][key]["enum"] = json!(names);
}

/// `engine:` as the mapping of engine `e`: `type` is its name, the other keys its own
/// (`connector` one of its connector names).
fn engine_object(e: &dyn crate::engine::Engine) -> Value {
    let mut v = object(keys::ENGINE, &["type"]);
    let ty = &mut v["properties"]["type"];
    ty["const"] = e.name().into();
    ty.as_object_mut().expect("object").remove("default");
    for key in e.keys() {
        let mut k: Value = serde_json::from_str(key.schema).expect("key schema is JSON");
        k["description"] = key.doc.into();
        v["properties"][key.name] = k;
    }
    if v["properties"].get("connector").is_some() {
        let mut names: Vec<Value> = e.connector_names().iter().map(|&n| n.into()).collect();
        if v["properties"]["connector"]["type"]
            .as_array()
            .is_some_and(|t| t.contains(&"null".into()))
        {
            names.push(Value::Null);
        }
        v["properties"]["connector"]["enum"] = Value::Array(names);
    }
    v
}

/// The recipe JSON Schema (draft 2020-12).
pub fn json_schema() -> Value {
    let mut root = object(keys::TOP, &["roles"]);
    let obj = root.as_object_mut().expect("object");
    obj.insert(
        "$schema".into(),
        "https://json-schema.org/draft/2020-12/schema".into(),
    );
    obj.insert(
        "$id".into(),
        "https://srt.invalid/recipe.schema.json".into(),
    );
    obj.insert("title".into(), "srt recipe".into());
    obj.insert(
        "$defs".into(),
        json!({
            "model": object(keys::MODEL, &[]),
            "resources": object(keys::RESOURCES, &[]),
            "engine": object(keys::ENGINE, &["type"]),
            "roles": object(keys::ROLES, &[]),
            "role": object(keys::ROLE, &["nodes", "workers"]),
            "frontend": object(keys::FRONTEND, &[]),
            "nginx": object(keys::NGINX, &[]),
            "health_check": object(keys::HEALTH_CHECK, &[]),
            "rollout": object(keys::ROLLOUT, &[]),
            "slurm": object(keys::SLURM, &[]),
            "infra": object(keys::INFRA, &[]),
            "benchmark": object(keys::BENCHMARK, &["type"]),
            "identity": object(keys::IDENTITY, &[]),
            "profiling": object(keys::PROFILING, &["type"]),
        }),
    );
    // `engine:` as a mapping: one schema per engine, its type and its own keys.
    let mut engines_defs = Vec::new();
    for e in crate::engine::ENGINES {
        let def = format!("engine_{}", e.name());
        root["$defs"][&def] = engine_object(*e);
        engines_defs.push(json!({"$ref": format!("#/$defs/{def}")}));
    }
    root["$defs"]["engine"] = json!({"oneOf": engines_defs});
    for f in crate::frontend::FRONTENDS {
        if let Some(section) = f.section() {
            root["$defs"][section.name] = object(section.keys, &[]);
            root["properties"][section.name] = json!({
                "$ref": format!("#/$defs/{}", section.name),
                "description": format!("Settings of the `{}` frontend (only with `frontend.type: {}`).", f.name(), f.name()),
            });
        }
    }
    let engines: Vec<&str> = crate::engine::ENGINES.iter().map(|e| e.name()).collect();
    let frontends: Vec<&str> = crate::frontend::FRONTENDS
        .iter()
        .map(|f| f.name())
        .collect();
    root["properties"]["engine"]["anyOf"][0]["enum"] = json!(engines);
    names(&mut root, "frontend", "type", frontends);
    root
}

#[cfg(test)]
mod tests {
    #[test]
    fn names_come_from_the_tables() {
        let schema = super::json_schema();
        assert_eq!(
            schema["$defs"]["role"]["properties"]["nodes"]["description"],
            "Nodes for this role, or `colocate` (decode only)."
        );
        let frontends = &schema["$defs"]["frontend"]["properties"]["type"]["enum"];
        for f in crate::frontend::FRONTENDS {
            assert!(
                frontends.as_array().unwrap().contains(&f.name().into()),
                "{frontends}"
            );
        }
        let engines = schema["$defs"]["engine"]["oneOf"].as_array().unwrap();
        assert_eq!(engines.len(), crate::engine::ENGINES.len());
        for e in crate::engine::ENGINES {
            let def = &schema["$defs"][format!("engine_{}", e.name())];
            assert_eq!(def["properties"]["type"]["const"], e.name());
            if e.connector_names().is_empty() {
                assert!(def["properties"].get("connector").is_none(), "{def}");
                continue;
            }
            let connectors = def["properties"]["connector"]["enum"].as_array().unwrap();
            for name in e.connector_names() {
                assert!(connectors.contains(&(*name).into()), "{connectors:?}");
            }
        }
        assert!(
            schema["$defs"]["engine_vllm"]["properties"]["connector"]["enum"]
                .as_array()
                .unwrap()
                .contains(&serde_json::Value::Null)
        );
        assert_eq!(
            schema["$defs"]["engine_vllm"]["properties"]["version"]["default"],
            "0.32.0"
        );
    }
}
