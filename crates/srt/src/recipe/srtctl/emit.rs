//! A spanned tree written back as YAML, keys in the order they are held: what
//! `srt migrate` prints. Strings that would read back as another type are quoted by
//! the serializer, so the text loads to the same tree.

use crate::recipe::yaml::{Node, Value};
use serde::ser::{Serialize, SerializeMap, SerializeSeq, Serializer};

struct Yaml<'a>(&'a Node);

impl Serialize for Yaml<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match &self.0.value {
            Value::Null => s.serialize_unit(),
            Value::Bool(b) => s.serialize_bool(*b),
            Value::Int(i) => s.serialize_i64(*i),
            Value::Float(f) => s.serialize_f64(*f),
            Value::Str(text) => s.serialize_str(text),
            Value::Seq(items) => {
                let mut seq = s.serialize_seq(Some(items.len()))?;
                for item in items {
                    seq.serialize_element(&Yaml(item))?;
                }
                seq.end()
            }
            Value::Map(entries) => {
                let mut map = s.serialize_map(Some(entries.len()))?;
                for (key, value) in entries {
                    map.serialize_entry(&key.name, &Yaml(value))?;
                }
                map.end()
            }
        }
    }
}

/// `node` as YAML text.
pub fn to_yaml(node: &Node) -> String {
    serde_saphyr::to_string(&Yaml(node)).expect("a tree of plain values serializes")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recipe::yaml::parse;

    /// The tree without spans, for comparing what two texts hold.
    fn bare(node: &Node) -> String {
        format!("{:?}", strip(node))
    }

    fn strip(node: &Node) -> Value {
        match &node.value {
            Value::Seq(items) => Value::Seq(
                items
                    .iter()
                    .map(|n| Node {
                        span: (0, 0).into(),
                        value: strip(n),
                    })
                    .collect(),
            ),
            Value::Map(entries) => Value::Map(
                entries
                    .iter()
                    .map(|(k, v)| {
                        let key = crate::recipe::yaml::Key {
                            name: k.name.clone(),
                            span: (0, 0).into(),
                        };
                        (
                            key,
                            Node {
                                span: (0, 0).into(),
                                value: strip(v),
                            },
                        )
                    })
                    .collect(),
            ),
            other => other.clone(),
        }
    }

    #[test]
    fn emitted_text_reads_back_to_the_same_tree() {
        let text = "name: r\nenv: {A: '1', B: 'true', C: 'null', D: '', E: '0x10'}\nlist: [1, 2.5, true, ~]\nnested: {a: {b: [x, 'y: z']}}\nempty: {}\n";
        let tree = parse(text).unwrap();
        let again = parse(&to_yaml(&tree)).unwrap();
        assert_eq!(bare(&tree), bare(&again), "{}", to_yaml(&tree));
    }
}
