//! Specs in their one canonical form: JSON with every object's keys sorted, no
//! insignificant whitespace, no floats from srt's own values.
//!
//! A resource's [`Spec`] holds exactly the bytes its hash covers. The graph keeps only
//! those bytes (about 1 KB per process): a `serde_json::Value` tree of the same spec is
//! ten times larger, and a plan reads one only for what it changes or records. Process,
//! port-block and membership specs are written straight into their canonical bytes by
//! [`ObjectWriter`] (no tree is built); other specs go through [`Spec::of`].
//!
//! State records hold the same text ([`crate::state::ResourceState::spec`]): reading a
//! state file copies each spec's bytes without building a tree, a plan compares a
//! replaced resource's recorded and desired fields as text ([`Spec::fields`]), and a
//! reader that wants a few string fields parses only those ([`Spec::get_strs`]).

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::Value;
use std::borrow::Cow;
use std::collections::BTreeMap;

/// A spec as canonical JSON: the hashed bytes, and what [`Spec::value`] parses back.
#[derive(Clone, PartialEq, Eq)]
pub struct Spec(Box<str>);

impl Spec {
    /// The canonical form of `v`.
    pub fn of(v: &Value) -> Spec {
        let mut out = Vec::new();
        write_canonical(&mut out, v);
        Spec::copy_of(&out)
    }

    /// A spec of the canonical bytes in `buf` (written by [`ObjectWriter`] or
    /// [`write_canonical`]), copied at their size.
    pub fn copy_of(buf: &[u8]) -> Spec {
        Spec(
            std::str::from_utf8(buf)
                .expect("canonical JSON is UTF-8")
                .into(),
        )
    }

    /// The canonical JSON text.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The spec as a JSON value (its objects in sorted key order).
    pub fn value(&self) -> Value {
        serde_json::from_str(&self.0).expect("a spec is valid JSON")
    }

    /// Each top-level field's canonical text, sorted by key (none when the spec is not
    /// an object). Two specs' fields are equal exactly when their texts are: this
    /// compares them without building either value.
    pub fn fields(&self) -> Fields<'_> {
        object_fields(&self.0)
    }

    /// The top-level field `key` when it is a string.
    pub fn get_str(&self, key: &str) -> Option<String> {
        let [value] = self.get_strs([key]);
        value
    }

    /// The top-level fields `keys` that are strings, read in one pass over the spec (a
    /// membership spec lists every worker, and its readers want two or three fields).
    pub fn get_strs<const N: usize>(&self, keys: [&str; N]) -> [Option<String>; N] {
        let fields = self.fields();
        keys.map(|key| {
            let (_, raw) = fields.iter().find(|(k, _)| k == key)?;
            serde_json::from_str(raw).ok()
        })
    }

    /// Call `f` with each token of the spec's `argv` (a process spec's), in order; `None`
    /// when it has none. A process spec's first key is `argv` (keys are sorted), so only
    /// that array is read, token by token, without building the rest of the spec or a
    /// string per token: a plan from scratch does this for every process.
    pub fn each_arg(&self, mut f: impl FnMut(&str)) -> Option<()> {
        match self.0.strip_prefix("{\"argv\":[") {
            Some(rest) => each_string(rest, &mut f),
            None => {
                let value = self.value();
                for token in value.get("argv")?.as_array()? {
                    f(token.as_str()?);
                }
                Some(())
            }
        }
    }
}

/// Hand each string of a JSON array of strings (`text` starts after its `[`) to `f`:
/// a string without escapes as the slice it is, one with escapes decoded by serde_json.
/// `None` when the array is not one of strings.
fn each_string(text: &str, f: &mut impl FnMut(&str)) -> Option<()> {
    let bytes = text.as_bytes();
    if bytes.first() == Some(&b']') {
        return Some(());
    }
    let mut at = 0;
    loop {
        if bytes.get(at) != Some(&b'"') {
            return None;
        }
        let start = at + 1;
        let mut end = start;
        let mut escaped = false;
        loop {
            match bytes.get(end)? {
                b'"' => break,
                b'\\' => {
                    escaped = true;
                    end += 2;
                }
                _ => end += 1,
            }
        }
        if escaped {
            let decoded: String = serde_json::from_str(&text[at..=end]).ok()?;
            f(&decoded);
        } else {
            f(&text[start..end]);
        }
        at = end + 1;
        match bytes.get(at)? {
            b',' => at += 1,
            b']' => return Some(()),
            _ => return None,
        }
    }
}

/// The fields of the JSON object `text` as text, sorted by key (empty when it is not
/// one). Canonical text (no whitespace, keys sorted, none escaped) is cut at its
/// top-level commas directly; any other is read by serde_json.
pub fn object_fields(text: &str) -> Fields<'_> {
    if let Some(fields) = canonical_fields(text) {
        return fields;
    }
    #[derive(Deserialize)]
    struct Fields<'a>(#[serde(borrow)] BTreeMap<Cow<'a, str>, &'a RawValue>);
    match serde_json::from_str::<Fields>(text) {
        Ok(Fields(map)) => map.into_iter().map(|(k, v)| (k, v.get())).collect(),
        Err(_) => Vec::new(),
    }
}

/// The fields of a canonical JSON object's text, or `None` when the text is not in that
/// form (whitespace, an escaped key, keys out of order, not an object).
fn canonical_fields(text: &str) -> Option<Fields<'_>> {
    let bytes = text.as_bytes();
    if bytes.first() != Some(&b'{') || bytes.last() != Some(&b'}') {
        return None;
    }
    let mut fields: Fields<'_> = Vec::new();
    let mut at = 1;
    if bytes.get(at) == Some(&b'}') {
        return (at + 1 == bytes.len()).then_some(fields);
    }
    while at < bytes.len() {
        let (key, value, next) = field_at(text, at, fields.last().map(|(k, _)| &**k))?;
        fields.push((Cow::Borrowed(key), value));
        at = next;
    }
    Some(fields)
}

/// The field of a canonical JSON object's text whose key's opening quote is at `at`,
/// after the field keyed `previous`: its key, its value's text, and where the next key
/// starts (the text's length after the last field). `None` when the text there is not
/// in canonical form (an escaped key, a key not after `previous`, whitespace, a missing
/// value, a brace before the end).
fn field_at<'a>(
    text: &'a str,
    at: usize,
    previous: Option<&str>,
) -> Option<(&'a str, &'a str, usize)> {
    let bytes = text.as_bytes();
    // The key: a string without escapes.
    if bytes.get(at) != Some(&b'"') {
        return None;
    }
    let key_start = at + 1;
    let key_end = string_end(bytes, key_start)?;
    let key = &text[key_start..key_end];
    if key.contains('\\')
        || previous.is_some_and(|previous| previous >= key)
        || bytes.get(key_end + 1) != Some(&b':')
    {
        return None;
    }
    // The value: up to the comma or brace that closes it at depth 0.
    let value_start = key_end + 2;
    let mut at = value_start;
    let mut depth = 0usize;
    loop {
        match *bytes.get(at)? {
            b'"' => at = string_end(bytes, at + 1)?,
            b'{' | b'[' => depth += 1,
            b'}' | b']' if depth > 0 => depth -= 1,
            b',' | b'}' if depth == 0 => break,
            b' ' | b'\n' | b'\r' | b'\t' => return None,
            _ => {}
        }
        at += 1;
    }
    if at == value_start || (bytes[at] == b'}' && at + 1 != bytes.len()) {
        return None;
    }
    Some((key, &text[value_start..at], at + 1))
}

/// An object's fields as (key, the value's text), sorted by key.
pub type Fields<'a> = Vec<(Cow<'a, str>, &'a str)>;

/// A key with its text before and after (`None` on a side without it).
pub type FieldChange<'a> = (Cow<'a, str>, Option<&'a str>, Option<&'a str>);

/// The top-level fields whose text differs between the JSON objects `before` and
/// `after`, sorted by key; `None` when either is not an object.
///
/// Two canonical texts are read field by field only between their common head and
/// tail (found a chunk at a time): a replaced worker whose one argument changed is read
/// through its `argv` alone, where cutting both specs whole reads every byte twice.
/// The fields that end inside the common head are the same in both (same bytes, read
/// from the same place). Once both sides reach a field that starts inside the common
/// tail at the same distance from the end, the rest is the same bytes read from the
/// same place (at a key, at depth 0): the same fields. Other text is cut whole.
pub fn differing_fields<'a>(before: &'a str, after: &'a str) -> Option<Vec<FieldChange<'a>>> {
    if let Some(changes) = canonical_differences(before, after) {
        return Some(changes);
    }
    let is_object = |text: &str| text.trim_start().starts_with('{');
    if !is_object(before) || !is_object(after) {
        return None;
    }
    let (b, a) = (object_fields(before), object_fields(after));
    Some(merge_fields(b, a).filter(|(_, b, a)| b != a).collect())
}

/// [`differing_fields`] of two canonical objects with at least one field each, or
/// `None` for anything else (and when the two do not meet in their common tail).
fn canonical_differences<'a>(before: &'a str, after: &'a str) -> Option<Vec<FieldChange<'a>>> {
    let (b, a) = (before.as_bytes(), after.as_bytes());
    for text in [b, a] {
        if text.first() != Some(&b'{') || text.get(1) != Some(&b'"') || text.last() != Some(&b'}') {
            return None;
        }
    }
    let head = common_prefix(b, a);
    if head == b.len() && head == a.len() {
        return Some(Vec::new());
    }
    let tail = common_suffix(&b[head..], &a[head..]);
    // Past the fields both hold whole in the common head (their closing comma too).
    let mut at = 1;
    let mut last: Option<&str> = None;
    loop {
        let (key, _, next) = field_at(before, at, last)?;
        if next > head {
            break;
        }
        (last, at) = (Some(key), next);
    }
    // Each side's fields from there to the first that starts in the common tail, and how
    // many bytes are left after them.
    let middle = |text: &'a str| -> Option<(Fields<'a>, usize)> {
        let shared = text.len() - tail;
        let (mut at, mut last, mut fields) = (at, last, Vec::new());
        while at < shared {
            let (key, value, next) = field_at(text, at, last)?;
            fields.push((Cow::Borrowed(key), value));
            (last, at) = (Some(key), next);
        }
        Some((fields, text.len() - at))
    };
    let ((b, b_rest), (a, a_rest)) = (middle(before)?, middle(after)?);
    if b_rest != a_rest {
        return None;
    }
    Some(merge_fields(b, a).filter(|(_, b, a)| b != a).collect())
}

/// How many bytes `a` and `b` start with in common (compared 32 at a time).
pub(crate) fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    let n = a.len().min(b.len());
    let mut at = 0;
    while at + 32 <= n && a[at..at + 32] == b[at..at + 32] {
        at += 32;
    }
    while at < n && a[at] == b[at] {
        at += 1;
    }
    at
}

/// How many bytes `a` and `b` end with in common (compared 32 at a time).
fn common_suffix(a: &[u8], b: &[u8]) -> usize {
    let n = a.len().min(b.len());
    let (ea, eb) = (a.len(), b.len());
    let mut len = 0;
    while len + 32 <= n && a[ea - len - 32..ea - len] == b[eb - len - 32..eb - len] {
        len += 32;
    }
    while len < n && a[ea - len - 1] == b[eb - len - 1] {
        len += 1;
    }
    len
}

/// Two key-sorted field lists joined by key: each key once, with its text on each side.
fn merge_fields<'a>(
    before: Fields<'a>,
    after: Fields<'a>,
) -> impl Iterator<Item = FieldChange<'a>> {
    let (mut b, mut a) = (before.into_iter().peekable(), after.into_iter().peekable());
    std::iter::from_fn(move || {
        let next = match (b.peek(), a.peek()) {
            (None, None) => return None,
            (Some((kb, _)), Some((ka, _))) => kb.cmp(ka),
            (Some(_), None) => std::cmp::Ordering::Less,
            (None, Some(_)) => std::cmp::Ordering::Greater,
        };
        Some(match next {
            std::cmp::Ordering::Less => {
                let (k, v) = b.next().expect("peeked");
                (k, Some(v), None)
            }
            std::cmp::Ordering::Greater => {
                let (k, v) = a.next().expect("peeked");
                (k, None, Some(v))
            }
            std::cmp::Ordering::Equal => {
                let ((k, vb), (_, va)) = (b.next().expect("peeked"), a.next().expect("peeked"));
                (k, Some(vb), Some(va))
            }
        })
    })
}

/// Whether `text` has no whitespace outside its strings: what a spec written by srt
/// looks like (a spec recorded by an older srt was pretty-printed).
fn compact(text: &str) -> bool {
    let bytes = text.as_bytes();
    let mut at = 0;
    while at < bytes.len() {
        match bytes[at] {
            b'"' => match string_end(bytes, at + 1) {
                Some(end) => at = end + 1,
                None => return false,
            },
            b' ' | b'\n' | b'\r' | b'\t' => return false,
            _ => at += 1,
        }
    }
    true
}

/// Where the JSON string whose contents start at `from` ends: the position of its
/// closing quote (found a chunk at a time: most of a spec's bytes are in strings).
fn string_end(bytes: &[u8], from: usize) -> Option<usize> {
    let mut at = from;
    loop {
        at += memchr::memchr2(b'"', b'\\', bytes.get(at..)?)?;
        if bytes[at] == b'"' {
            return Some(at);
        }
        at += 2;
    }
}

/// Written as the JSON it is (in a state file).
impl Serialize for Spec {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        RawValue::from_string(self.0.to_string())
            .map_err(serde::ser::Error::custom)?
            .serialize(s)
    }
}

/// Read as the JSON text it is, without building a value; a spec with whitespace between
/// its tokens (an older srt pretty-printed them) is brought to its canonical form. A
/// compact spec is taken as srt wrote it: one edited by hand into compact text with
/// unsorted keys keeps them, which only changes how its fields read as changed (never
/// its hash, which the record holds apart).
impl<'de> Deserialize<'de> for Spec {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let raw: Box<RawValue> = Deserialize::deserialize(d)?;
        let text: Box<str> = raw.into();
        if compact(&text) {
            return Ok(Spec(text));
        }
        let value: Value = serde_json::from_str(&text).map_err(serde::de::Error::custom)?;
        Ok(Spec::of(&value))
    }
}

impl std::fmt::Debug for Spec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl PartialEq<Value> for Spec {
    /// Whether `other` has this canonical form.
    fn eq(&self, other: &Value) -> bool {
        let mut out = Vec::with_capacity(self.0.len());
        write_canonical(&mut out, other);
        out == self.0.as_bytes()
    }
}

/// Canonical JSON of `v` as a string.
pub fn canonical(v: &Value) -> String {
    Spec::of(v).0.into()
}

/// Append the canonical JSON of `v` to `out`: the bytes `serde_json::to_writer` writes
/// for `v` with every object's keys sorted, written directly (no sorted copy of the value
/// is built, and no serializer state machine runs per value). Strings that need no escape are copied as
/// they are; the others, and numbers, are written by serde_json itself.
pub fn write_canonical(out: &mut Vec<u8>, v: &Value) {
    match v {
        Value::Null => out.extend_from_slice(b"null"),
        Value::Bool(true) => out.extend_from_slice(b"true"),
        Value::Bool(false) => out.extend_from_slice(b"false"),
        Value::Number(n) => serde_json::to_writer(out, n).expect("a number serializes"),
        Value::String(s) => write_str(out, s),
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_canonical(out, item);
            }
            out.push(b']');
        }
        Value::Object(map) => {
            let mut object = ObjectWriter::new(out);
            // Specs are mostly built with their keys in order already.
            if map.keys().is_sorted() {
                for (k, v) in map {
                    object.key(k);
                    write_canonical(object.out, v);
                }
            } else {
                let mut entries: Vec<(&String, &Value)> = map.iter().collect();
                entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
                for (k, v) in entries {
                    object.key(k);
                    write_canonical(object.out, v);
                }
            }
            object.end();
        }
    }
}

/// A JSON string as serde_json writes it.
pub fn write_str(out: &mut Vec<u8>, s: &str) {
    // serde_json escapes `"`, `\` and the control characters below 0x20, nothing else.
    if s.bytes().any(|b| b < 0x20 || b == b'"' || b == b'\\') {
        serde_json::to_writer(out, s).expect("a string serializes");
    } else {
        out.reserve(s.len() + 2);
        out.push(b'"');
        out.extend_from_slice(s.as_bytes());
        out.push(b'"');
    }
}

/// Writes one canonical JSON object whose keys the caller gives in sorted order (checked
/// in debug builds): a spec built from typed fields without a `Value` tree.
pub struct ObjectWriter<'a> {
    /// The output; a key's value is written here after [`ObjectWriter::key`].
    pub out: &'a mut Vec<u8>,
    first: bool,
    #[cfg(debug_assertions)]
    last: Option<String>,
}

impl<'a> ObjectWriter<'a> {
    /// Open an object.
    pub fn new(out: &'a mut Vec<u8>) -> Self {
        out.push(b'{');
        ObjectWriter {
            out,
            first: true,
            #[cfg(debug_assertions)]
            last: None,
        }
    }

    /// Write the next key; its value follows in `out`.
    pub fn key(&mut self, key: &str) {
        #[cfg(debug_assertions)]
        {
            assert!(
                self.last.as_deref().is_none_or(|last| last < key),
                "keys in sorted order: {key:?} after {:?}",
                self.last
            );
            self.last = Some(key.to_string());
        }
        if !self.first {
            self.out.push(b',');
        }
        self.first = false;
        write_str(self.out, key);
        self.out.push(b':');
    }

    /// A string field.
    pub fn str(&mut self, key: &str, value: &str) {
        self.key(key);
        write_str(self.out, value);
    }

    /// An unsigned number field.
    pub fn uint(&mut self, key: &str, value: u64) {
        self.key(key);
        write_uint(self.out, value);
    }

    /// An array of strings.
    pub fn strs<'s>(&mut self, key: &str, values: impl IntoIterator<Item = &'s str>) {
        self.key(key);
        self.out.push(b'[');
        for (i, v) in values.into_iter().enumerate() {
            if i > 0 {
                self.out.push(b',');
            }
            write_str(self.out, v);
        }
        self.out.push(b']');
    }

    /// Close the object.
    pub fn end(self) {
        self.out.push(b'}');
    }
}

/// An unsigned integer as serde_json writes it.
pub fn write_uint(out: &mut Vec<u8>, value: u64) {
    use std::io::Write;
    write!(out, "{value}").expect("writing to a Vec cannot fail");
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A view of a JSON value that serializes every object's keys in sorted order through
    /// serde_json: the reference the direct writer is checked against.
    struct Sorted<'a>(pub &'a Value);

    impl Serialize for Sorted<'_> {
        fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            use serde::ser::{SerializeMap, SerializeSeq};
            match self.0 {
                Value::Object(map) => {
                    let mut entries: Vec<(&String, &Value)> = map.iter().collect();
                    entries.sort_unstable_by(|a, b| a.0.cmp(b.0));
                    let mut m = s.serialize_map(Some(entries.len()))?;
                    for (k, v) in entries {
                        m.serialize_entry(k, &Sorted(v))?;
                    }
                    m.end()
                }
                Value::Array(items) => {
                    let mut seq = s.serialize_seq(Some(items.len()))?;
                    for v in items {
                        seq.serialize_element(&Sorted(v))?;
                    }
                    seq.end()
                }
                scalar => scalar.serialize(s),
            }
        }
    }

    /// Canonical text is cut into its fields as serde_json reads them; text in another
    /// form goes to serde_json.
    #[test]
    fn fields_are_what_serde_json_reads() {
        let values = [
            json!({}),
            json!({"a": 1}),
            json!({"argv": ["x", "a,b}", "q\"}{,"], "env": {"A": "1,2", "B": {"c": [1, {"d": "}"}]}}, "z": null}),
            json!({"k": [[], {}, [{}], ""], "l": -1.5e300, "m": true}),
        ];
        for v in &values {
            let spec = Spec::of(v);
            let cut = canonical_fields(spec.as_str()).expect("canonical text is cut");
            let read: Vec<(String, Value)> = v
                .as_object()
                .unwrap()
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect::<BTreeMap<_, _>>()
                .into_iter()
                .collect();
            let cut: Vec<(String, Value)> = cut
                .into_iter()
                .map(|(k, t)| (k.into_owned(), serde_json::from_str(t).unwrap()))
                .collect();
            assert_eq!(cut, read, "{spec:?}");
            assert_eq!(object_fields(spec.as_str()).len(), read.len());
        }
        // Not canonical: whitespace, an escaped key, keys out of order, not an object.
        for text in [
            r#"{"a": 1}"#,
            r#"{"a\u0062":1}"#,
            r#"{"b":1,"a":2}"#,
            r#"[1,2]"#,
            r#"{"a":[1, 2]}"#,
        ] {
            assert!(canonical_fields(text).is_none(), "{text}");
        }
        let escaped = object_fields(r#"{"a\u0062":1,"c": [1, 2]}"#);
        assert_eq!(escaped.len(), 2);
        assert_eq!((&*escaped[0].0, escaped[0].1), ("ab", "1"));
        assert_eq!((&*escaped[1].0, escaped[1].1), ("c", "[1, 2]"));
        assert_eq!(object_fields(r#"{"b":1,"a":2}"#)[0].0, "a");
        assert!(object_fields("[1]").is_empty());
        assert_eq!(Spec::of(&values[2]).get_str("z"), None);
        let spec = Spec::of(&values[2]);
        let (_, env) = spec.fields().into_iter().find(|(k, _)| k == "env").unwrap();
        assert_eq!(serde_json::from_str::<Value>(env).unwrap()["A"], "1,2");
        let [argv, z, missing] = spec.get_strs(["argv", "z", "missing"]);
        assert_eq!((argv, z, missing), (None, None, None));
        let spec = Spec::of(&json!({"admin_url": "http://r", "frontend": "vllm-router"}));
        let [frontend, admin] = spec.get_strs(["frontend", "admin_url"]);
        assert_eq!(
            (frontend.as_deref(), admin.as_deref()),
            (Some("vllm-router"), Some("http://r"))
        );
    }

    /// The fields that differ between two specs, read between their common head and
    /// tail, are those that differ between the two values: every pair of a set of
    /// specs that share heads, tails, keys and look-alike text (commas, braces, quotes
    /// and keys inside strings), and text with its keys out of order.
    #[test]
    fn differing_fields_are_those_of_the_values() {
        let values = [
            json!({"argv": ["vllm", "serve", "--port", "8000"], "env": {"A": "1"}, "ports": [8000]}),
            json!({"argv": ["vllm", "serve", "--port", "8001"], "env": {"A": "1"}, "ports": [8000]}),
            json!({"argv": ["vllm", "serve", "--port", "8000", "--x"], "env": {"A": "1"}, "ports": [8000]}),
            json!({"argv": ["vllm", "serve", "--port", "8000"], "env": {"A": "2"}, "ports": [8000]}),
            json!({"argv": ["vllm", "serve", "--port", "8000"], "env": {"A": "1"}, "ports": [8001]}),
            json!({"argv": ["vllm", "serve", "--port", "8000"], "ports": [8000]}),
            json!({"argv": ["vllm", "serve", "--port", "8000"], "env": {"A": "1"}, "ports": [8000], "z": 1}),
            json!({"argv": ["vllm", "serve", "--port", "8000\",\"env\":{\"A\":\"1\"}"], "ports": [8000]}),
            json!({"argv": ["vllm"], "b": "\",\"env\":{\"A\":\"1\"},\"ports\":[8000]}"}),
            json!({"argv": ["vllm", "serve", "--port", "8000"], "env": {"A": "1", "B": "}"}, "ports": [8000]}),
            json!({"a": 1, "argv": ["vllm", "serve", "--port", "8000"], "env": {"A": "1"}, "ports": [8000]}),
            json!({"env": {"A": "1"}, "ports": [8000]}),
            json!({"argv": {"nested": ["serve", "--port"]}, "ports": [8000]}),
            json!({"x": "8000]}"}),
            json!({}),
        ];
        let texts: Vec<String> = values
            .iter()
            .map(|v| Spec::of(v).as_str().to_owned())
            .collect();
        // Keys out of order: not canonical, cut by serde_json.
        let unordered =
            r#"{"ports":[8000],"env":{"A":"1"},"argv":["vllm","serve","--port","8000"]}"#;
        let expected = |b: &Value, a: &Value| -> Vec<(String, Option<Value>, Option<Value>)> {
            let (b, a) = (b.as_object().unwrap(), a.as_object().unwrap());
            let keys: std::collections::BTreeSet<&String> = b.keys().chain(a.keys()).collect();
            keys.into_iter()
                .filter(|k| b.get(*k) != a.get(*k))
                .map(|k| ((*k).clone(), b.get(k).cloned(), a.get(k).cloned()))
                .collect()
        };
        let read = |changes: Vec<FieldChange<'_>>| -> Vec<(String, Option<Value>, Option<Value>)> {
            let value = |t: Option<&str>| t.map(|t| serde_json::from_str::<Value>(t).unwrap());
            changes
                .into_iter()
                .map(|(k, b, a)| (k.into_owned(), value(b), value(a)))
                .collect()
        };
        for (i, b) in values.iter().enumerate() {
            for (j, a) in values.iter().enumerate() {
                let found = differing_fields(&texts[i], &texts[j]).expect("objects");
                assert_eq!(read(found), expected(b, a), "{} -> {}", texts[i], texts[j]);
            }
            let found = differing_fields(unordered, &texts[i]).expect("objects");
            assert_eq!(
                read(found),
                expected(&values[0], b),
                "unordered -> {}",
                texts[i]
            );
        }
        assert_eq!(differing_fields("[1]", "{}"), None);
        assert_eq!(differing_fields("{}", "null"), None);
    }

    /// The same over pseudo-random pairs of objects built from keys and values whose
    /// text looks like the other keys' (a string holding `,"b":"x"}`): one side's field
    /// in the common tail may lie inside the other side's string.
    #[test]
    fn differing_fields_of_look_alike_objects_are_those_of_the_values() {
        let keys = ["a", "b", "env", "z"];
        let pool = [
            json!("x"),
            json!(",\"b\":\"x\"}"),
            json!("x\",\"b\":\"x"),
            json!("\",\"z\":1"),
            json!({"A": "1", "B": ",\"z\":1}"}),
            json!(["x", "\"b\":\"x"]),
            json!(1),
            json!(12),
            json!([]),
            json!("b"),
            json!("x\",\"b\":\"b"),
        ];
        let mut seed = 0x9e37_79b9_7f4a_7c15_u64;
        let mut next = move || {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed
        };
        let mut object = || {
            let mut map = serde_json::Map::new();
            for key in keys {
                let roll = next();
                if roll % 4 != 0 {
                    map.insert(key.into(), pool[(roll >> 8) as usize % pool.len()].clone());
                }
            }
            Value::Object(map)
        };
        for _ in 0..4000 {
            let (b, a) = (object(), object());
            let (tb, ta) = (Spec::of(&b), Spec::of(&a));
            let found: Vec<(String, Option<Value>, Option<Value>)> =
                differing_fields(tb.as_str(), ta.as_str())
                    .expect("objects")
                    .into_iter()
                    .map(|(k, x, y)| {
                        let value = |t: Option<&str>| t.map(|t| serde_json::from_str(t).unwrap());
                        (k.into_owned(), value(x), value(y))
                    })
                    .collect();
            let expected: Vec<(String, Option<Value>, Option<Value>)> = keys
                .iter()
                .filter(|k| b.get(**k) != a.get(**k))
                .map(|k| ((*k).to_string(), b.get(*k).cloned(), a.get(*k).cloned()))
                .collect();
            assert_eq!(found, expected, "{tb:?} -> {ta:?}");
        }
    }

    /// The direct writer writes what serde_json writes for the sorted view.
    #[test]
    fn canonical_is_serde_json_of_the_sorted_view() {
        let values = [
            json!(null),
            json!({"b": [1, -2, 3.5, 1e300, true, false, null], "a": "plain"}),
            json!({"z": {"y": {"x": "deep"}, "a": []}, "": {}, "A": "\u{0}\u{1f}\u{7f}"}),
            json!([
                "quote \" back \\ slash",
                "tab\tnew\nline\r\u{8}\u{c}",
                "é€😀",
                ""
            ]),
            json!({"argv": ["vllm", "serve", "--x", "{\"k\": 1}"], "env": {"B": "2", "A": "1"}}),
            json!(u64::MAX),
            json!(i64::MIN),
            json!(0.1),
        ];
        for v in &values {
            let expected = serde_json::to_string(&Sorted(v)).unwrap();
            assert_eq!(canonical(v), expected);
            // And it reads back as the same value.
            assert_eq!(&Spec::of(v).value(), v);
            assert!(Spec::of(v) == *v);
        }
    }

    #[test]
    fn canonical_sorts_keys_at_every_depth() {
        // Built in reverse order: serde_json keeps insertion order (preserve_order).
        let v = json!({"b": 1, "a": {"d": [{"z": 1, "y": "\"q\""}], "c": null}});
        assert_eq!(
            canonical(&v),
            r#"{"a":{"c":null,"d":[{"y":"\"q\"","z":1}]},"b":1}"#
        );
    }

    #[test]
    fn numbers_are_written_as_serde_json_writes_them() {
        for n in [0, 1, 9, 10, 99, 100, 65535, 1 << 40, u64::MAX] {
            let mut out = Vec::new();
            write_uint(&mut out, n);
            assert_eq!(out, serde_json::to_vec(&n).unwrap());
        }
    }

    #[test]
    fn argv_is_read_without_the_rest() {
        let args = |spec: &Spec| {
            let mut out = Vec::new();
            spec.each_arg(|a| out.push(a.to_string())).map(|()| out)
        };
        let tokens = [
            "a b",
            "c\"d",
            "\\",
            "é€😀",
            "",
            "tab\there\nnew\r",
            "\u{1}\u{1f}",
            "{\"k\":\"v\\\\\"}",
            "trailing\\",
        ];
        let spec = Spec::of(&json!({"argv": tokens, "env": {"X": "1"}, "kind": "worker"}));
        assert!(spec.as_str().starts_with("{\"argv\":"));
        assert_eq!(args(&spec).unwrap(), tokens);
        // Read from the parsed spec when `argv` is not its first key.
        let spec = Spec::of(&json!({"argv": ["x"], "a": 1}));
        assert_eq!(args(&spec).unwrap(), ["x"]);
        assert_eq!(args(&Spec::of(&json!({"probe": "http"}))), None);
        assert_eq!(args(&Spec::of(&json!({"argv": [1]}))), None);
        assert_eq!(args(&Spec::of(&json!({"argv": ["a", 1]}))), None);
        assert_eq!(
            args(&Spec::of(&json!({"argv": []}))).unwrap(),
            Vec::<String>::new()
        );
    }

    #[test]
    fn the_object_writer_writes_the_canonical_form() {
        let mut out = Vec::new();
        let mut o = ObjectWriter::new(&mut out);
        o.strs("argv", ["vllm", "x\ty"]);
        o.str("kind", "worker");
        o.uint("node", 3);
        o.end();
        let spec = Spec::copy_of(&out);
        let expected = json!({"node": 3, "kind": "worker", "argv": ["vllm", "x\ty"]});
        assert_eq!(spec.as_str(), canonical(&expected));
    }

    #[test]
    #[cfg(debug_assertions)]
    #[should_panic(expected = "keys in sorted order")]
    fn the_object_writer_refuses_keys_out_of_order() {
        let mut out = Vec::new();
        let mut o = ObjectWriter::new(&mut out);
        o.uint("node", 3);
        o.str("kind", "worker");
    }
}
