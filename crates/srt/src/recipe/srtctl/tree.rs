//! Edits of a spanned YAML tree that keep every value's span: a value moved or merged
//! still points at the place the user wrote it, so the loader's diagnostics land in the
//! user's file whatever srt rewrote before reading it.

use crate::recipe::yaml::{Key, Node, Value};
use miette::SourceSpan;

/// The entries of a mapping node (`None` for any other value).
pub fn entries(node: &Node) -> Option<&[(Key, Node)]> {
    match &node.value {
        Value::Map(entries) => Some(entries),
        _ => None,
    }
}

/// The entries of a mapping node, to edit (`None` for any other value).
pub fn entries_mut(node: &mut Node) -> Option<&mut Vec<(Key, Node)>> {
    match &mut node.value {
        Value::Map(entries) => Some(entries),
        _ => None,
    }
}

/// The value at `key` of a mapping node.
pub fn get<'a>(node: &'a Node, key: &str) -> Option<&'a Node> {
    entries(node)?
        .iter()
        .find(|(k, _)| k.name == key)
        .map(|(_, v)| v)
}

/// The mapping at `key` of a mapping node, to edit (`None` when absent or not a
/// mapping).
pub fn map_mut<'a>(node: &'a mut Node, key: &str) -> Option<&'a mut Node> {
    entries_mut(node)?
        .iter_mut()
        .find(|(k, _)| k.name == key)
        .map(|(_, v)| v)
        .filter(|v| matches!(v.value, Value::Map(_)))
}

/// Where `key` of a mapping node is written.
pub fn key_span(node: &Node, key: &str) -> Option<SourceSpan> {
    entries(node)?
        .iter()
        .find(|(k, _)| k.name == key)
        .map(|(k, _)| k.span)
}

/// The key and value at `key`, removed from a mapping node.
pub fn take(node: &mut Node, key: &str) -> Option<(Key, Node)> {
    let entries = entries_mut(node)?;
    let at = entries.iter().position(|(k, _)| k.name == key)?;
    Some(entries.remove(at))
}

/// Whether a mapping node has `key`.
pub fn has(node: &Node, key: &str) -> bool {
    get(node, key).is_some()
}

/// Set `key` of a mapping node to `value`: in place when present, else appended.
pub fn set(node: &mut Node, key: Key, value: Node) {
    let Some(entries) = entries_mut(node) else {
        return;
    };
    match entries.iter_mut().find(|(k, _)| k.name == key.name) {
        Some(slot) => slot.1 = value,
        None => entries.push((key, value)),
    }
}

/// Insert `key` right after `anchor` (appended when the anchor is absent); a present
/// `key` keeps its place and takes the value.
pub fn insert_after(node: &mut Node, anchor: &str, key: Key, value: Node) {
    let Some(entries) = entries_mut(node) else {
        return;
    };
    if let Some(slot) = entries.iter_mut().find(|(k, _)| k.name == key.name) {
        slot.1 = value;
        return;
    }
    match entries.iter().position(|(k, _)| k.name == anchor) {
        Some(at) => entries.insert(at + 1, (key, value)),
        None => entries.push((key, value)),
    }
}

/// The mapping at `key` of `node`, created empty (after `after`, spanned at `span`)
/// when absent or not a mapping.
pub fn child_map<'a>(
    node: &'a mut Node,
    key: &str,
    after: Option<&str>,
    span: SourceSpan,
) -> &'a mut Node {
    if !matches!(get(node, key).map(|n| &n.value), Some(Value::Map(_))) {
        let fresh = (named(key, span), map(Vec::new(), span));
        insert_after(node, after.unwrap_or(""), fresh.0, fresh.1);
    }
    let entries = entries_mut(node).expect("a mapping");
    let slot = entries
        .iter_mut()
        .find(|(k, _)| k.name == key)
        .expect("just inserted");
    &mut slot.1
}

/// A key named `name` at `span`.
pub fn named(name: &str, span: SourceSpan) -> Key {
    Key {
        name: name.to_string(),
        span,
    }
}

/// A mapping node at `span`.
pub fn map(entries: Vec<(Key, Node)>, span: SourceSpan) -> Node {
    Node {
        span,
        value: Value::Map(entries),
    }
}

/// A string node at `span`.
pub fn string(text: &str, span: SourceSpan) -> Node {
    Node {
        span,
        value: Value::Str(text.to_string()),
    }
}

/// The string a node holds, if it is one.
pub fn as_str(node: &Node) -> Option<&str> {
    match &node.value {
        Value::Str(s) => Some(s),
        _ => None,
    }
}

/// srtctl's `deep_merge`: mappings merge key by key, an override's `null` deletes the
/// key, anything else (lists included) replaces. Keys of the base keep their order;
/// new ones follow in the override's.
pub fn deep_merge(base: &Node, over: &Node) -> Node {
    let (Some(_), Some(over_entries)) = (entries(base), entries(over)) else {
        return over.clone();
    };
    let mut merged = base.clone();
    for (key, value) in over_entries {
        if value.value == Value::Null {
            take(&mut merged, &key.name);
            continue;
        }
        let next = match get(&merged, &key.name) {
            Some(old) if entries(old).is_some() && entries(value).is_some() => {
                deep_merge(old, value)
            }
            _ => value.clone(),
        };
        set(&mut merged, key.clone(), next);
    }
    merged
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recipe::yaml::parse;

    fn json(node: &Node) -> String {
        fn walk(n: &Node) -> serde_json::Value {
            match &n.value {
                Value::Null => serde_json::Value::Null,
                Value::Bool(b) => (*b).into(),
                Value::Int(i) => (*i).into(),
                Value::Float(f) => (*f).into(),
                Value::Str(s) => s.clone().into(),
                Value::Seq(s) => s.iter().map(walk).collect(),
                Value::Map(m) => serde_json::Value::Object(
                    m.iter().map(|(k, v)| (k.name.clone(), walk(v))).collect(),
                ),
            }
        }
        walk(node).to_string()
    }

    #[test]
    fn deep_merge_merges_mappings_replaces_lists_and_deletes_on_null() {
        let base = parse("a: {x: 1, y: [1, 2]}\nb: 2\nc: 3\n").unwrap();
        let over = parse("a: {y: [3]}\nb: ~\nd: 4\n").unwrap();
        let merged = deep_merge(&base, &over);
        assert_eq!(json(&merged), r#"{"a":{"x":1,"y":[3]},"c":3,"d":4}"#);
    }

    #[test]
    fn merged_values_keep_the_span_they_were_written_at() {
        let text = "a: {x: 1}\nover: {x: 2}\n";
        let root = parse(text).unwrap();
        let merged = deep_merge(get(&root, "a").unwrap(), get(&root, "over").unwrap());
        let x = get(&merged, "x").unwrap();
        assert_eq!(&text[x.span.offset()..x.span.offset() + x.span.len()], "2");
        assert!(x.span.offset() > text.find("over").unwrap());
    }

    #[test]
    fn child_map_creates_after_its_anchor() {
        let mut root = parse("a: 1\nb: 2\n").unwrap();
        let span = root.span;
        child_map(&mut root, "roles", Some("a"), span);
        let names: Vec<_> = entries(&root)
            .unwrap()
            .iter()
            .map(|(k, _)| k.name.as_str())
            .collect();
        assert_eq!(names, ["a", "roles", "b"]);
    }
}
