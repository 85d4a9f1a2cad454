//! A role's config file checked against TensorRT-LLM's own schema: the LLM API's
//! pydantic models, read from the pinned release's source by
//! `scripts/trtllm-schema.py` into `schema/llm-api-<release>.json`. Each key is
//! checked the way pydantic's lax mode validates it (a numeric string is an int, an
//! int is not a string), every problem at its YAML key or value.

use crate::recipe::diag::{did_you_mean, Problem};
use crate::recipe::yaml::{Node, Value};
use serde::Deserialize;
use std::collections::BTreeMap;

/// The LLM API schema of one TensorRT-LLM release.
#[derive(Debug, Deserialize)]
pub(super) struct Schema {
    /// The release label (`engine.version`).
    pub(super) version: String,
    /// The model the config file is read as (`TorchLlmArgs`).
    root: String,
    models: BTreeMap<String, Model>,
    enums: BTreeMap<String, Vec<serde_json::Value>>,
}

/// One pydantic model.
#[derive(Debug, Deserialize)]
struct Model {
    fields: BTreeMap<String, Field>,
    /// `forbid` (an unknown key is an error), `allow` or `ignore` (pydantic drops it).
    extra: String,
}

/// One field of a model.
#[derive(Debug, Deserialize)]
struct Field {
    #[serde(rename = "type")]
    ty: Ty,
    #[serde(default)]
    status: Option<String>,
    #[serde(default)]
    aliases: Vec<String>,
}

/// A field's type, as the catalog spells it.
#[derive(Debug, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
enum Ty {
    Int {
        #[serde(flatten)]
        bounds: Bounds,
    },
    Float {
        #[serde(flatten)]
        bounds: Bounds,
    },
    Bool {},
    Str {},
    Null {},
    /// A type the schema names from elsewhere (a tensor dtype, a tokenizer object):
    /// not checked.
    Any {},
    List {
        items: Box<Ty>,
    },
    Dict {
        values: Box<Ty>,
    },
    Model {
        name: String,
    },
    Enum {
        name: String,
    },
    Literal {
        values: Vec<serde_json::Value>,
    },
    Union {
        of: Vec<Ty>,
    },
}

/// A number's bounds (pydantic's `ge`/`gt` as `min`, `le`/`lt` as `max`, the strict
/// ones `exclusive`; `PositiveInt` is `min: 1`).
#[derive(Debug, Default, Deserialize)]
struct Bounds {
    #[serde(default)]
    min: Option<f64>,
    #[serde(default)]
    max: Option<f64>,
    #[serde(default)]
    exclusive_min: bool,
    #[serde(default)]
    exclusive_max: bool,
}

impl Bounds {
    /// What `x` breaks, in words (`at least 1`), if anything.
    fn broken(&self, x: f64) -> Option<String> {
        let low = self.min.and_then(|m| match self.exclusive_min {
            true => (x <= m).then(|| format!("more than {m}")),
            false => (x < m).then(|| format!("at least {m}")),
        });
        low.or_else(|| {
            self.max.and_then(|m| match self.exclusive_max {
                true => (x >= m).then(|| format!("less than {m}")),
                false => (x > m).then(|| format!("at most {m}")),
            })
        })
    }
}

/// The schemas srt ships, newest last.
pub(super) fn schemas() -> &'static [Schema] {
    static PARSED: std::sync::OnceLock<Vec<Schema>> = std::sync::OnceLock::new();
    PARSED.get_or_init(|| {
        [include_str!("schema/llm-api-main-0004396.json")]
            .iter()
            .map(|text| serde_json::from_str(text).expect("the shipped schema parses"))
            .collect()
    })
}

/// Config keys srt writes itself, with who sets them.
pub(super) type Managed = [(&'static str, &'static str)];

impl Schema {
    /// Every problem of `config` (a role's `args`, at `path`) read as the root model.
    pub(super) fn check(
        &self,
        config: &Node,
        path: &str,
        managed: &Managed,
        out: &mut Vec<Problem>,
    ) {
        if let Value::Map(entries) = &config.value {
            for (key, _) in entries {
                if let Some((_, why)) = managed.iter().find(|(k, _)| *k == key.name) {
                    out.push(
                        Problem::new(
                            "srt::recipe::managed_flag",
                            key.span,
                            format!("`{path}.{}` is set by srt: {why}", key.name),
                        )
                        .label("managed by srt")
                        .help("remove it from the role's args"),
                    );
                }
            }
        }
        let root = Ty::Model {
            name: self.root.clone(),
        };
        out.extend(self.problems(config, &root, path));
    }

    /// What is wrong with `node` as a value of `ty`.
    fn problems(&self, node: &Node, ty: &Ty, path: &str) -> Vec<Problem> {
        match (ty, &node.value) {
            (Ty::Any {}, _) => Vec::new(),
            (Ty::Union { of }, _) => self.union(node, of, path),
            (Ty::Model { name }, Value::Map(entries)) => self.model(name, entries, path),
            (Ty::List { items }, Value::Seq(seq)) => seq
                .iter()
                .enumerate()
                .flat_map(|(i, n)| self.problems(n, items, &format!("{path}[{i}]")))
                .collect(),
            (Ty::Dict { values }, Value::Map(entries)) => entries
                .iter()
                .flat_map(|(k, n)| self.problems(n, values, &format!("{path}.{}", k.name)))
                .collect(),
            _ => self.scalar(node, ty, path).into_iter().collect(),
        }
    }

    /// A union accepts what one of its members accepts; otherwise the problems of the
    /// member of the value's shape (a mapping's model), or a type problem.
    fn union(&self, node: &Node, of: &[Ty], path: &str) -> Vec<Problem> {
        let mut shaped = None;
        for member in of {
            let found = self.problems(node, member, path);
            if found.is_empty() {
                return found;
            }
            if shaped.is_none() && shape_matches(member, &node.value) {
                shaped = Some(found);
            }
        }
        let expected = of.iter().map(noun).collect::<Vec<_>>().join(" or ");
        shaped.unwrap_or_else(|| vec![type_problem(node, &expected, path)])
    }

    /// Each key of a mapping read as model `name`.
    fn model(
        &self,
        name: &str,
        entries: &[(crate::recipe::yaml::Key, Node)],
        path: &str,
    ) -> Vec<Problem> {
        let Some(model) = self.models.get(name) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for (key, value) in entries {
            let at = format!("{path}.{}", key.name);
            let field = model.fields.get(&key.name).or_else(|| {
                model
                    .fields
                    .values()
                    .find(|f| f.aliases.contains(&key.name))
            });
            let Some(field) = field else {
                out.extend(self.unknown(model, name, key, &at));
                continue;
            };
            if field.status.as_deref() == Some("deprecated") {
                out.push(
                    Problem::warning(
                        "srt::recipe::trtllm_deprecated",
                        key.span,
                        format!("`{at}` is deprecated in TensorRT-LLM {}", self.version),
                    )
                    .label("deprecated")
                    .help("see TensorRT-LLM's release notes for what replaces it"),
                );
            }
            out.extend(self.problems(value, &field.ty, &at));
        }
        out
    }

    /// A key model `name` has no field for: an error where the model forbids extra
    /// keys, a warning where pydantic drops it.
    fn unknown(
        &self,
        model: &Model,
        name: &str,
        key: &crate::recipe::yaml::Key,
        at: &str,
    ) -> Option<Problem> {
        let message = format!(
            "`{at}` is not a field of TensorRT-LLM {}'s `{name}`",
            self.version
        );
        let p = match model.extra.as_str() {
            "allow" => return None,
            "forbid" => Problem::new("srt::recipe::trtllm_unknown_key", key.span, message)
                .label("unknown key"),
            _ => Problem::warning("srt::recipe::trtllm_ignored_key", key.span, message)
                .label("ignored by TensorRT-LLM"),
        };
        let names = model.fields.keys().map(String::as_str);
        Some(match did_you_mean(&key.name, names) {
            Some(near) => p.help(format!("did you mean `{near}`?")),
            None => p.help(format!(
                "the fields of `{name}` are in `engine/trtllm/schema/` (from the LLM API's source)"
            )),
        })
    }

    /// A scalar (or a value of the wrong shape) against a scalar type.
    fn scalar(&self, node: &Node, ty: &Ty, path: &str) -> Option<Problem> {
        let v = &node.value;
        let ok = match ty {
            Ty::Int { bounds } => match as_int(v) {
                Some(n) => {
                    return bounds
                        .broken(n as f64)
                        .map(|b| out_of_bounds(node, &b, path))
                }
                None => false,
            },
            Ty::Float { bounds } => match as_float(v) {
                Some(x) => return bounds.broken(x).map(|b| out_of_bounds(node, &b, path)),
                None => false,
            },
            Ty::Bool {} => as_bool(v).is_some(),
            Ty::Str {} => matches!(v, Value::Str(_)),
            Ty::Null {} => matches!(v, Value::Null),
            Ty::Enum { name } => return self.choice(node, self.enum_values(name), path),
            Ty::Literal { values } => return self.choice(node, values, path),
            _ => false,
        };
        (!ok).then(|| type_problem(node, &noun(ty), path))
    }

    fn enum_values(&self, name: &str) -> &[serde_json::Value] {
        self.enums.get(name).map_or(&[], Vec::as_slice)
    }

    /// A value that must be one of `values`.
    fn choice(&self, node: &Node, values: &[serde_json::Value], path: &str) -> Option<Problem> {
        if values.iter().any(|c| same(c, &node.value)) {
            return None;
        }
        let list: Vec<String> = values.iter().map(ToString::to_string).collect();
        Some(
            Problem::new(
                "srt::recipe::trtllm_value",
                node.span,
                format!("`{path}` must be one of {}", list.join(", ")),
            )
            .label("not a choice of TensorRT-LLM's")
            .help(format!(
                "TensorRT-LLM {} accepts {}",
                self.version,
                list.join(", ")
            )),
        )
    }
}

/// `node` is outside the field's bounds: it must be `rule` (`at least 1`).
fn out_of_bounds(node: &Node, rule: &str, path: &str) -> Problem {
    Problem::new(
        "srt::recipe::trtllm_value",
        node.span,
        format!("`{path}` must be {rule}"),
    )
    .label(format!("not {rule}"))
}

/// `node` is not a value of the type `expected` names.
fn type_problem(node: &Node, expected: &str, path: &str) -> Problem {
    Problem::new(
        "srt::recipe::trtllm_type",
        node.span,
        format!("`{path}` must be {expected}, found {}", node.value.kind()),
    )
    .label(format!("expected {expected}"))
}

/// Whether a value of this shape is what `ty` reads (a mapping for a model or dict,
/// a sequence for a list), to say which member of a union it was meant for.
fn shape_matches(ty: &Ty, v: &Value) -> bool {
    matches!(
        (ty, v),
        (Ty::Model { .. } | Ty::Dict { .. }, Value::Map(_))
            | (Ty::List { .. }, Value::Seq(_))
            | (Ty::Literal { .. } | Ty::Enum { .. }, Value::Str(_))
            | (
                Ty::Int { .. } | Ty::Float { .. },
                Value::Int(_) | Value::Float(_)
            )
    )
}

/// pydantic's lax int: an int, a float without a fraction, or a string of one.
fn as_int(v: &Value) -> Option<i64> {
    match v {
        Value::Int(n) => Some(*n),
        Value::Float(x) if x.fract() == 0.0 && x.abs() < 9.0e15 => Some(*x as i64),
        Value::Str(s) => s.trim().parse().ok(),
        _ => None,
    }
}

/// pydantic's lax float: a number, or a string of one.
fn as_float(v: &Value) -> Option<f64> {
    match v {
        Value::Int(n) => Some(*n as f64),
        Value::Float(x) => Some(*x),
        Value::Str(s) => s.trim().parse().ok(),
        _ => None,
    }
}

/// pydantic's lax bool: a boolean, 0 or 1, or one of its boolean words.
fn as_bool(v: &Value) -> Option<bool> {
    match v {
        Value::Bool(b) => Some(*b),
        Value::Int(0) => Some(false),
        Value::Int(1) => Some(true),
        Value::Str(s) => match s.to_ascii_lowercase().as_str() {
            "0" | "off" | "f" | "false" | "n" | "no" => Some(false),
            "1" | "on" | "t" | "true" | "y" | "yes" => Some(true),
            _ => None,
        },
        _ => None,
    }
}

/// Whether a YAML value is the catalog's choice `c`.
fn same(c: &serde_json::Value, v: &Value) -> bool {
    match (c, v) {
        (serde_json::Value::String(a), Value::Str(b)) => a == b,
        (serde_json::Value::Bool(a), Value::Bool(b)) => a == b,
        (serde_json::Value::Number(a), Value::Int(b)) => a.as_i64() == Some(*b),
        (serde_json::Value::Null, Value::Null) => true,
        _ => false,
    }
}

fn noun(ty: &Ty) -> String {
    match ty {
        Ty::Int { .. } => "an integer".into(),
        Ty::Float { .. } => "a number".into(),
        Ty::Bool {} => "a boolean".into(),
        Ty::Str {} => "a string".into(),
        Ty::Null {} => "null".into(),
        Ty::Any {} => "a value".into(),
        Ty::List { .. } => "a list".into(),
        Ty::Dict { .. } => "a mapping".into(),
        Ty::Model { name } => format!("a mapping (`{name}`)"),
        Ty::Enum { name } => format!("a `{name}` name"),
        Ty::Literal { .. } => "one of its choices".into(),
        Ty::Union { of } => of.iter().map(noun).collect::<Vec<_>>().join(" or "),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A schema of the catalog's shape, small enough to read.
    const SCHEMA: &str = r#"{
      "version": "t", "root": "Args",
      "enums": {"Policy": ["GUARANTEED_NO_EVICT", "MAX_UTILIZATION"]},
      "models": {
        "Args": {"extra": "forbid", "fields": {
          "max_batch_size": {"type": {"kind": "int", "min": 1}},
          "old_knob": {"type": {"kind": "bool"}, "status": "deprecated"},
          "backend": {"type": {"kind": "literal", "values": ["pytorch"]}},
          "policy": {"type": {"kind": "enum", "name": "Policy"}},
          "sizes": {"type": {"kind": "union", "of": [{"kind": "list", "items": {"kind": "int"}}, {"kind": "null"}]}},
          "kv_cache_config": {"type": {"kind": "model", "name": "Kv"}},
          "tokenizer": {"type": {"kind": "union", "of": [{"kind": "str"}, {"kind": "null"}]}}
        }},
        "Kv": {"extra": "ignore", "fields": {
          "free_gpu_memory_fraction": {"type": {"kind": "float", "min": 0}},
          "dtype": {"type": {"kind": "str"}, "aliases": ["kv_dtype"]}
        }}
      }
    }"#;

    #[test]
    fn the_shipped_schemas_parse_with_their_root_model() {
        for schema in schemas() {
            assert!(
                schema.models.contains_key(&schema.root),
                "{}",
                schema.version
            );
        }
    }

    fn check(yaml: &str) -> Vec<(&'static str, String)> {
        let schema: Schema = serde_json::from_str(SCHEMA).unwrap();
        let node = crate::recipe::yaml::parse(yaml).unwrap();
        let mut out = Vec::new();
        schema.check(
            &node,
            "roles.decode.args",
            &[("tokenizer", "the model's")],
            &mut out,
        );
        out.into_iter().map(|p| (p.code, p.message)).collect()
    }

    #[test]
    fn a_config_of_the_schema_passes_as_pydantic_reads_it() {
        let ok = "max_batch_size: '8'\nbackend: pytorch\npolicy: MAX_UTILIZATION\nsizes: [1, 2.0]\nkv_cache_config: {free_gpu_memory_fraction: 1, kv_dtype: fp8}\n";
        assert_eq!(check(ok), []);
        assert_eq!(check("sizes: null\n"), []);
    }

    #[test]
    fn each_problem_names_its_key_and_what_is_wrong() {
        let codes = |y: &str| check(y).into_iter().map(|(c, _)| c).collect::<Vec<_>>();
        assert_eq!(
            codes("max_batch_sise: 8\n"),
            ["srt::recipe::trtllm_unknown_key"]
        );
        assert_eq!(codes("max_batch_size: 0\n"), ["srt::recipe::trtllm_value"]);
        assert_eq!(
            codes("max_batch_size: eight\n"),
            ["srt::recipe::trtllm_type"]
        );
        assert_eq!(codes("backend: tensorrt\n"), ["srt::recipe::trtllm_value"]);
        assert_eq!(codes("policy: FASTEST\n"), ["srt::recipe::trtllm_value"]);
        assert_eq!(codes("sizes: [1, x]\n"), ["srt::recipe::trtllm_type"]);
        assert_eq!(codes("sizes: 4\n"), ["srt::recipe::trtllm_type"]);
        assert_eq!(
            codes("old_knob: true\n"),
            ["srt::recipe::trtllm_deprecated"]
        );
        assert_eq!(
            codes("kv_cache_config: {dtype: 8, block_reuse: true}\n"),
            [
                "srt::recipe::trtllm_type",
                "srt::recipe::trtllm_ignored_key"
            ]
        );
        assert_eq!(codes("tokenizer: /t\n"), ["srt::recipe::managed_flag"]);
        let (_, message) = &check("max_batch_sise: 8\n")[0];
        assert!(
            message.contains("roles.decode.args.max_batch_sise"),
            "{message}"
        );
    }
}
