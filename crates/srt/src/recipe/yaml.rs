//! A YAML document as a tree of nodes that remember where they came from.
//!
//! The recipe is first parsed into this tree (through serde-saphyr, whose `Spanned<T>`
//! records the source location of every value), then converted into the typed schema by
//! [`super::load`]. Keeping the whole tree spanned means every later error, including
//! semantic ones found long after parsing (a colocated split that does not fit, a connector
//! rule), can point at the exact key or value in the user's file.

use crate::recipe::diag::Problem;
use miette::SourceSpan;
use serde::de::{self, Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_saphyr::Spanned;
use std::fmt;

/// One YAML value with its source span (byte offset and length).
#[derive(Clone, Debug, PartialEq)]
pub struct Node {
    /// Where the value starts in the source, in bytes.
    pub span: SourceSpan,
    /// The value itself.
    pub value: Value,
}

/// A mapping key with its span.
#[derive(Clone, Debug, PartialEq)]
pub struct Key {
    /// The key as written (non-string scalar keys are converted to their text).
    pub name: String,
    /// Where the key is in the source.
    pub span: SourceSpan,
}

/// The YAML data model, with mappings kept in source order.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// `null`, `~` or an empty value.
    Null,
    /// `true` / `false`.
    Bool(bool),
    /// An integer.
    Int(i64),
    /// A floating point number.
    Float(f64),
    /// A string scalar.
    Str(String),
    /// A sequence.
    Seq(Vec<Node>),
    /// A mapping, in source order.
    Map(Vec<(Key, Node)>),
}

impl Value {
    /// A short noun for error messages ("a mapping", "an integer", ...).
    pub fn kind(&self) -> &'static str {
        match self {
            Value::Null => "null",
            Value::Bool(_) => "a boolean",
            Value::Int(_) => "an integer",
            Value::Float(_) => "a number",
            Value::Str(_) => "a string",
            Value::Seq(_) => "a list",
            Value::Map(_) => "a mapping",
        }
    }
}

fn span_of(loc: &serde_saphyr::Location) -> SourceSpan {
    let span = loc.span();
    let offset = span.byte_offset().unwrap_or(span.offset()) as usize;
    let len = span.byte_len().unwrap_or(span.len()) as usize;
    SourceSpan::new(offset.into(), len)
}

impl<'de> Deserialize<'de> for Node {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let spanned = Spanned::<Value>::deserialize(deserializer)?;
        Ok(Node {
            span: span_of(&spanned.referenced),
            value: spanned.value,
        })
    }
}

impl<'de> Deserialize<'de> for Key {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let spanned = Spanned::<KeyText>::deserialize(deserializer)?;
        Ok(Key {
            name: spanned.value.0,
            span: span_of(&spanned.referenced),
        })
    }
}

/// A scalar key converted to text.
struct KeyText(String);

impl<'de> Deserialize<'de> for KeyText {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct KeyVisitor;
        impl Visitor<'_> for KeyVisitor {
            type Value = KeyText;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a scalar mapping key")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<KeyText, E> {
                Ok(KeyText(v.to_owned()))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<KeyText, E> {
                Ok(KeyText(v.to_string()))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<KeyText, E> {
                Ok(KeyText(v.to_string()))
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<KeyText, E> {
                Ok(KeyText(v.to_string()))
            }
        }
        deserializer.deserialize_any(KeyVisitor)
    }
}

impl<'de> Deserialize<'de> for Value {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct ValueVisitor;
        impl<'de> Visitor<'de> for ValueVisitor {
            type Value = Value;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("any YAML value")
            }
            fn visit_unit<E: de::Error>(self) -> Result<Value, E> {
                Ok(Value::Null)
            }
            fn visit_none<E: de::Error>(self) -> Result<Value, E> {
                Ok(Value::Null)
            }
            fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
                Value::deserialize(d)
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<Value, E> {
                Ok(Value::Bool(v))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<Value, E> {
                Ok(Value::Int(v))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<Value, E> {
                i64::try_from(v)
                    .map(Value::Int)
                    .map_err(|_| E::custom(format!("integer {v} is too large")))
            }
            fn visit_i128<E: de::Error>(self, v: i128) -> Result<Value, E> {
                i64::try_from(v)
                    .map(Value::Int)
                    .map_err(|_| E::custom(format!("integer {v} is too large")))
            }
            fn visit_u128<E: de::Error>(self, v: u128) -> Result<Value, E> {
                i64::try_from(v)
                    .map(Value::Int)
                    .map_err(|_| E::custom(format!("integer {v} is too large")))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<Value, E> {
                Ok(Value::Float(v))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Value, E> {
                Ok(Value::Str(v.to_owned()))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<Value, E> {
                Ok(Value::Str(v))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
                let mut items = Vec::new();
                while let Some(item) = seq.next_element::<Node>()? {
                    items.push(item);
                }
                Ok(Value::Seq(items))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
                let mut entries: Vec<(Key, Node)> = Vec::new();
                while let Some(key) = map.next_key::<Key>()? {
                    let value = map.next_value::<Node>()?;
                    entries.push((key, value));
                }
                Ok(Value::Map(entries))
            }
        }
        deserializer.deserialize_any(ValueVisitor)
    }
}

/// Deepest nesting of mappings and sequences accepted. A recipe needs fewer than ten
/// levels (`roles.<role>.args.<flag>.<json>`); the tree is built recursively, so the
/// bound is what keeps a hostile document from overflowing the stack (a debug build
/// spends tens of kilobytes of stack per level, and test threads have 2 MiB).
pub const MAX_DEPTH: usize = 16;

/// Most parser events that anchors may record and aliases replay. A recipe's aliases
/// (a shared `args` or `env` block) replay tens of events; serde-saphyr's default of a
/// million let a billion-laughs document build a 250,000-node tree before the node
/// budget stopped it, seconds of work per recipe.
pub const MAX_ALIAS_EVENTS: usize = 20_000;

/// Parse YAML text into a spanned tree. Errors carry serde-saphyr's own location.
/// serde-saphyr's default budget bounds nodes and events, [`MAX_ALIAS_EVENTS`] alias
/// expansion; nesting is bounded by [`MAX_DEPTH`], for block and flow collections alike.
///
/// Scalars resolve by YAML 1.2's core schema: only `true`/`false` (and their
/// capitalised forms) are booleans, so `NO`, `off` or `yes` stay the strings the user
/// wrote (YAML 1.1 made them booleans, which turned `REGION: NO` into `false`);
/// `1_000` stays a string too. Tags are not interpreted here: see [`tags`].
pub fn parse(text: &str) -> Result<Node, serde_saphyr::Error> {
    let options = serde_saphyr::options! {
        budget: serde_saphyr::budget! {
            max_depth: MAX_DEPTH,
            flow_nesting_limit: MAX_DEPTH,
            max_recorded_anchor_events: MAX_ALIAS_EVENTS,
        },
        strict_booleans: true,
        underscored_numbers_as_strings: true,
    };
    serde_saphyr::from_str_with_options::<Node>(text, options)
}

/// A YAML error as a problem at its location, under `syntax` (or `duplicate_key` for a
/// repeated key) codes of the file kind that was read: a recipe or a cluster profile.
/// The span is never past the end of the text and never inside a character.
pub fn syntax_problem(
    err: &serde_saphyr::Error,
    text: &str,
    syntax: &'static str,
    duplicate_key: &'static str,
) -> Problem {
    let span = err
        .location()
        .map(|loc| {
            let s = loc.span();
            let offset = (s.byte_offset().unwrap_or(s.offset()) as usize).min(text.len());
            let len = (s.byte_len().unwrap_or(s.len()) as usize).max(1);
            if offset + len <= text.len() {
                return SourceSpan::new(offset.into(), len);
            }
            // An error at the end of the input (an unterminated `[`, a lone `%`) would
            // point past the text, where no label can be drawn: point at the last
            // character instead, whole (never inside a multi-byte character).
            match text.char_indices().next_back() {
                Some((i, c)) => SourceSpan::new(i.into(), c.len_utf8()),
                None => SourceSpan::new(0.into(), 0),
            }
        })
        .unwrap_or_else(|| SourceSpan::new(0.into(), 0));
    if let serde_saphyr::Error::DuplicateMappingKey { key, .. } = err.without_snippet() {
        let key = key.as_deref().unwrap_or("?");
        return Problem::new(
            duplicate_key,
            span,
            format!("key `{key}` is given twice in the same mapping"),
        )
        .label("second occurrence")
        .help("remove one of them; YAML mappings cannot repeat a key");
    }
    // The plain, user-facing message: serde-saphyr's default rendering embeds its own
    // source snippet (against `<input>`), which would repeat the file under our label.
    let rendered = err.render_with_options(serde_saphyr::render_options! {
        formatter: &serde_saphyr::UserMessageFormatter,
        snippets: serde_saphyr::SnippetMode::Off,
    });
    let message = rendered
        .split(" at line ")
        .next()
        .unwrap_or(&rendered)
        .trim();
    Problem::new(syntax, span, format!("YAML error: {message}"))
}

/// An explicit tag in the document (`!Ref x`, `!!binary ...`, `!!str 8`), with the span
/// of the node it is attached to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TagUse {
    /// The tag as written (`!Ref`, `!!binary`).
    pub tag: String,
    /// The tagged node.
    pub span: SourceSpan,
}

/// Every explicit tag in `text`, in document order. A recipe means what its plain text
/// says: a tag is either ignored by the loader (`!Ref x` read as `x`) or acted on
/// (`!!binary` decoded), and both change what runs without the user seeing why, so the
/// loader refuses any. The non-specific `!` (a quoted-string hint) counts too. Call only
/// on text [`parse`] accepted; a parse error here ends the scan.
pub fn tags(text: &str) -> Vec<TagUse> {
    use granit_parser::{Event, Parser};
    let mut out = Vec::new();
    for item in Parser::new_from_str(text) {
        let Ok((event, span)) = item else { break };
        let (Event::Scalar(_, _, _, Some(tag))
        | Event::SequenceStart(_, _, Some(tag))
        | Event::MappingStart(_, _, Some(tag))) = &event
        else {
            continue;
        };
        let at = |m: &granit_parser::Marker| m.byte_offset().unwrap_or(m.index());
        let mut start = at(&span.start).min(text.len());
        let end = at(&span.end).clamp(start, text.len());
        let written = tag_as_written(tag);
        // The node's span starts at its content; take the tag in front of it too.
        if let Some(tag_at) = text[..start].rfind(written.as_str()) {
            if text[tag_at + written.len()..start].trim().is_empty() {
                start = tag_at;
            }
        }
        out.push(TagUse {
            tag: written,
            span: SourceSpan::new(start.into(), end - start),
        });
    }
    out
}

/// A tag the way the user typed it: `!!` for the core schema handle, else the handle
/// as written.
fn tag_as_written(tag: &granit_parser::Tag) -> String {
    format!("{}{}", tag.original_handle(), tag.suffix())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(text: &str, node: &Node) -> String {
        let start = node.span.offset();
        text[start..start + node.span.len().max(1)].to_owned()
    }

    #[test]
    fn spans_point_at_values_and_keys() {
        let text = "roles:\n  agg:\n    nodes: 2\n    args:\n      tensor-parallel-size: 8\n";
        let root = parse(text).unwrap();
        let Value::Map(top) = &root.value else {
            panic!("root is a map")
        };
        assert_eq!(top[0].0.name, "roles");
        assert_eq!(&text[top[0].0.span.offset()..][..5], "roles");
        let Value::Map(roles) = &top[0].1.value else {
            panic!()
        };
        let Value::Map(agg) = &roles[0].1.value else {
            panic!()
        };
        assert_eq!(agg[0].0.name, "nodes");
        assert_eq!(agg[0].1.value, Value::Int(2));
        assert_eq!(at(text, &agg[0].1), "2");
    }

    #[test]
    fn scalars_follow_yaml_1_2() {
        let root = parse("a: NO\nb: off\nc: yes\nd: 1_000\ne: True\nf: FALSE\ng: y\n").unwrap();
        let Value::Map(m) = root.value else { panic!() };
        let values: Vec<_> = m.into_iter().map(|(_, n)| n.value).collect();
        assert_eq!(
            values,
            [
                Value::Str("NO".into()),
                Value::Str("off".into()),
                Value::Str("yes".into()),
                Value::Str("1_000".into()),
                Value::Bool(true),
                Value::Bool(false),
                Value::Str("y".into()),
            ]
        );
    }

    #[test]
    fn tags_are_found_with_their_node() {
        let text = "a: !!binary aGk=\nb: !Ref x\nc: !!str 8\nd: plain\ne: !!map {k: v}\n";
        let found = tags(text);
        let shown: Vec<(&str, &str)> = found
            .iter()
            .map(|t| {
                (
                    t.tag.as_str(),
                    &text[t.span.offset()..t.span.offset() + t.span.len()],
                )
            })
            .collect();
        assert_eq!(shown[0], ("!!binary", "!!binary aGk="));
        assert_eq!(shown[1], ("!Ref", "!Ref x"));
        assert_eq!(shown[2], ("!!str", "!!str 8"));
        assert_eq!(shown[3].0, "!!map");
        assert_eq!(found.len(), 4);
        assert!(tags("a: '!not a tag'\nb: \"!!x\"\n").is_empty());
    }

    #[test]
    fn scalars_are_typed() {
        let root = parse("a: true\nb: 0.5\nc: \"8\"\nd: ~\ne: [1, x]\n").unwrap();
        let Value::Map(m) = root.value else { panic!() };
        let values: Vec<_> = m.into_iter().map(|(_, n)| n.value).collect();
        assert_eq!(values[0], Value::Bool(true));
        assert_eq!(values[1], Value::Float(0.5));
        assert_eq!(values[2], Value::Str("8".into()));
        assert_eq!(values[3], Value::Null);
        assert!(matches!(values[4], Value::Seq(_)));
    }
}
