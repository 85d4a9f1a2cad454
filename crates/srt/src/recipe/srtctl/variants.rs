//! srtctl's override files: a `base:` recipe and variants of it, `override_<name>:`
//! (deep-merged over the base) and `zip_override_<group>:` (one variant per index of
//! its lists, length-1 lists broadcast), resolved as srtctl's
//! `generate_override_configs` does: overrides in key order, then zip groups in key
//! order, the base itself not a variant.

use super::tree;
use crate::recipe::diag::Problem;
use crate::recipe::yaml::{Key, Node, Value};

const OVERRIDE: &str = "override_";
const ZIP: &str = "zip_override_";
const SCHEMA: &str = "schema";

/// One recipe an override file holds.
#[derive(Clone, Debug)]
pub struct Variant {
    /// How srtctl selects it: `override_<name>` or `zip_override_<group>[i]`.
    pub label: String,
    /// The merged recipe.
    pub recipe: Node,
}

/// The variants of `root` when it is an override file (it has `base:`), else `None`.
pub fn variants(root: &Node) -> Option<Result<Vec<Variant>, Vec<Problem>>> {
    let base = base(root)?;
    Some(resolve(root, &base))
}

/// The base recipe of an override file, with the file's `schema` (srtctl 2.0 writes
/// it beside `base:`, for every variant).
pub fn base(root: &Node) -> Option<Node> {
    let mut base = tree::get(root, "base")?.clone();
    if let (Some(schema), Some(_)) = (
        tree::entries(root).and_then(|e| e.iter().find(|(k, _)| k.name == SCHEMA)),
        tree::entries(&base),
    ) {
        if !tree::has(&base, SCHEMA) {
            tree::insert_after(&mut base, "", schema.0.clone(), schema.1.clone());
        }
    }
    Some(base)
}

fn resolve(root: &Node, base: &Node) -> Result<Vec<Variant>, Vec<Problem>> {
    let mut problems = Vec::new();
    if tree::entries(base).is_none() {
        problems.push(not_a_mapping(base, "base"));
    }
    let entries = tree::entries(root).unwrap_or_default();
    let mut overrides: Vec<&(Key, Node)> = Vec::new();
    let mut zips: Vec<&(Key, Node)> = Vec::new();
    for entry in entries {
        let name = entry.0.name.as_str();
        if name == "base" || name == SCHEMA {
            continue;
        }
        if name.starts_with(ZIP) {
            zips.push(entry);
        } else if name.starts_with(OVERRIDE) {
            overrides.push(entry);
        } else {
            problems.push(stray_key(&entry.0));
        }
    }
    for (key, value) in overrides.iter().chain(&zips) {
        if tree::entries(value).is_none() {
            problems.push(not_a_mapping(value, &key.name));
        }
    }
    if overrides.is_empty() && zips.is_empty() {
        problems.push(
            Problem::new(
                "srt::recipe::no_variants",
                tree::key_span(root, "base").unwrap_or(root.span),
                "an override file needs at least one `override_<name>:` or `zip_override_<group>:`",
            )
            .label("a base without variants")
            .help("add a variant, or write the base's keys at the top level as a plain recipe"),
        );
    }
    if !problems.is_empty() {
        return Err(problems);
    }
    overrides.sort_by(|a, b| a.0.name.cmp(&b.0.name));
    zips.sort_by(|a, b| a.0.name.cmp(&b.0.name));
    let base_name = tree::get(base, "name")
        .and_then(tree::as_str)
        .unwrap_or("unnamed")
        .to_string();
    let mut out: Vec<Variant> = overrides
        .iter()
        .map(|(key, value)| override_variant(base, &base_name, key, value))
        .collect();
    for (key, value) in zips {
        out.extend(zip_variants(base, &base_name, key, value)?);
    }
    Ok(out)
}

fn override_variant(base: &Node, base_name: &str, key: &Key, value: &Node) -> Variant {
    let suffix = &key.name[OVERRIDE.len()..];
    let mut recipe = tree::deep_merge(base, value);
    if !tree::has(value, "name") {
        name_it(&mut recipe, &format!("{base_name}_{suffix}"), key);
    }
    Variant {
        label: key.name.clone(),
        recipe,
    }
}

fn zip_variants(
    base: &Node,
    base_name: &str,
    key: &Key,
    value: &Node,
) -> Result<Vec<Variant>, Vec<Problem>> {
    let group = &key.name[ZIP.len()..];
    let n = zip_length(key, value)?;
    let named = matches!(
        tree::get(value, "name").map(|n| &n.value),
        Some(Value::Seq(_))
    );
    Ok((0..n)
        .map(|i| {
            let mut recipe = tree::deep_merge(base, &slice(value, i));
            if !named {
                name_it(&mut recipe, &format!("{base_name}_{group}_{i}"), key);
            }
            Variant {
                label: format!("{}[{i}]", key.name),
                recipe,
            }
        })
        .collect())
}

fn name_it(recipe: &mut Node, name: &str, key: &Key) {
    tree::set(
        recipe,
        tree::named("name", key.span),
        tree::string(name, key.span),
    );
}

/// Every list leaf of a zip group, with its key's span.
fn lists(node: &Node, out: &mut Vec<(usize, miette::SourceSpan)>) {
    for (key, value) in tree::entries(node).unwrap_or_default() {
        match &value.value {
            Value::Seq(items) => out.push((items.len(), key.span)),
            Value::Map(_) => lists(value, out),
            _ => {}
        }
    }
}

/// srtctl's `_determine_zip_length`: every list has one length N, or length 1.
fn zip_length(key: &Key, node: &Node) -> Result<usize, Vec<Problem>> {
    let mut found = Vec::new();
    lists(node, &mut found);
    if found.is_empty() {
        return Err(vec![Problem::new(
            "srt::recipe::zip",
            key.span,
            format!("`{}` has no list to zip", key.name),
        )
        .label("no list values")
        .help("each list-valued key of a zip group gives one value per variant; use `override_<name>:` for a single variant")]);
    }
    if let Some((_, span)) = found.iter().find(|(n, _)| *n == 0) {
        return Err(vec![Problem::new(
            "srt::recipe::zip",
            *span,
            format!("`{}` zips an empty list", key.name),
        )
        .label("empty list")]);
    }
    let long: Vec<_> = found.iter().filter(|(n, _)| *n != 1).collect();
    let Some((n, _)) = long.first() else {
        return Ok(1);
    };
    let odd: Vec<Problem> = long
        .iter()
        .filter(|(m, _)| m != n)
        .map(|(m, span)| {
            Problem::new(
                "srt::recipe::zip",
                *span,
                format!("`{}` zips lists of {n} and of {m} values", key.name),
            )
            .label(format!("{m} values"))
            .help("every list of a zip group has the same length, or length 1 (given to every variant)")
        })
        .collect();
    if odd.is_empty() {
        Ok(*n)
    } else {
        Err(odd)
    }
}

/// srtctl's `_apply_zip_slice`: each list leaf replaced by its `i`-th value (its only
/// one when of length 1).
fn slice(node: &Node, i: usize) -> Node {
    let Some(entries) = tree::entries(node) else {
        return node.clone();
    };
    let sliced = entries
        .iter()
        .map(|(k, v)| {
            let value = match &v.value {
                Value::Seq(items) if items.len() == 1 => items[0].clone(),
                Value::Seq(items) => items[i].clone(),
                Value::Map(_) => slice(v, i),
                _ => v.clone(),
            };
            (k.clone(), value)
        })
        .collect();
    tree::map(sliced, node.span)
}

fn not_a_mapping(node: &Node, key: &str) -> Problem {
    Problem::new(
        "srt::recipe::type",
        node.span,
        format!("`{key}` must be a mapping, found {}", node.value.kind()),
    )
    .label("expected a mapping")
}

fn stray_key(key: &Key) -> Problem {
    Problem::new(
        "srt::recipe::override_file",
        key.span,
        format!("`{}` is beside `base:` and belongs to no variant", key.name),
    )
    .label("read by no variant")
    .help("an override file holds only `schema`, `base:`, `override_<name>:` and `zip_override_<group>:`; move it into `base:`")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recipe::yaml::parse;

    fn names(text: &str) -> Vec<(String, String)> {
        let root = parse(text).unwrap();
        variants(&root)
            .expect("an override file")
            .expect("resolves")
            .into_iter()
            .map(|v| {
                let name = tree::get(&v.recipe, "name")
                    .and_then(tree::as_str)
                    .unwrap()
                    .to_string();
                (v.label, name)
            })
            .collect()
    }

    #[test]
    fn overrides_come_in_key_order_then_zip_groups_and_are_named_after_the_base() {
        let text = "base: {name: r, x: 1}\nzip_override_c: {x: [2, 3]}\noverride_b: {x: 5}\noverride_a: {name: own}\n";
        assert_eq!(
            names(text),
            [
                ("override_a".into(), "own".into()),
                ("override_b".into(), "r_b".into()),
                ("zip_override_c[0]".into(), "r_c_0".into()),
                ("zip_override_c[1]".into(), "r_c_1".into()),
            ]
        );
    }

    #[test]
    fn zip_broadcasts_length_one_lists_and_takes_names_from_a_name_list() {
        let text = "base: {name: r}\nzip_override_g: {name: [p, q], a: [1], b: {c: [7, 8]}}\n";
        let root = parse(text).unwrap();
        let vs = variants(&root).unwrap().unwrap();
        let second = &vs[1].recipe;
        assert_eq!(tree::get(second, "name").and_then(tree::as_str), Some("q"));
        assert_eq!(tree::get(second, "a").unwrap().value, Value::Int(1));
        let b = tree::get(second, "b").unwrap();
        assert_eq!(tree::get(b, "c").unwrap().value, Value::Int(8));
    }

    #[test]
    fn zip_lists_of_different_lengths_are_refused_at_the_odd_list() {
        let text = "base: {name: r}\nzip_override_g: {a: [1, 2], b: [1, 2, 3]}\n";
        let root = parse(text).unwrap();
        let err = variants(&root).unwrap().unwrap_err();
        assert_eq!(err.len(), 1);
        assert_eq!(&text[err[0].span.offset()..][..1], "b");
    }

    #[test]
    fn a_key_beside_base_is_refused_at_it() {
        let text = "base: {name: r}\noverride_a: {}\nname: stray\n";
        let root = parse(text).unwrap();
        let err = variants(&root).unwrap().unwrap_err();
        assert_eq!(err[0].code, "srt::recipe::override_file");
        assert_eq!(&text[err[0].span.offset()..][..4], "name");
    }

    #[test]
    fn a_plain_recipe_is_not_an_override_file() {
        assert!(variants(&parse("name: r\n").unwrap()).is_none());
    }
}
