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
            "benchmark": object(keys::BENCHMARK, &["type"]),
        }),
    );
    // `engine:` as a mapping: its type and every engine's keys, each saying whose.
    for e in crate::engine::ENGINES {
        for key in e.keys() {
            let mut v: Value = serde_json::from_str(key.schema).expect("key schema is JSON");
            v["description"] = format!("`{}` engine: {}", e.name(), key.doc).into();
            root["$defs"]["engine"]["properties"][key.name] = v;
        }
    }
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
    let mut connectors: Vec<&str> = crate::engine::ENGINES
        .iter()
        .flat_map(|e| e.connector_names())
        .copied()
        .collect();
    connectors.sort_unstable();
    connectors.dedup();
    root["properties"]["engine"]["anyOf"][0]["enum"] = json!(engines.clone());
    names(&mut root, "engine", "type", engines);
    names(&mut root, "frontend", "type", frontends);
    let mut with_null: Vec<Value> = connectors.into_iter().map(Value::from).collect();
    with_null.push(Value::Null);
    root["$defs"]["engine"]["properties"]["connector"]["enum"] = Value::Array(with_null);
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
        assert_eq!(
            schema["$defs"]["engine"]["properties"]["type"]["enum"][0],
            "vllm"
        );
        assert!(schema["$defs"]["engine"]["properties"]["connector"]["enum"]
            .as_array()
            .unwrap()
            .contains(&"moriio".into()));
    }
}
