//! srtctl's recipe files as srtctl reads them, turned into the one recipe srt loads:
//! an override file's variant ([`variants`]), then the v1 layout re-spelled as 2.0
//! ([`migrate`]). Each step works on the spanned tree, so whatever the loader finds
//! wrong later points at what the user wrote; each step that did something says so
//! in a located note (a warning), shown with the recipe's other warnings.
//!
//! [`emit`] writes a tree back as YAML (`srt migrate`).

pub mod emit;
pub mod migrate;
pub mod tree;
pub mod variants;

use crate::recipe::diag::Problem;
use crate::recipe::yaml::Node;
use miette::SourceSpan;

/// The recipe srt loads from a document, with what was done to get it.
#[derive(Debug)]
pub struct Prepared {
    /// The recipe, in the 2.0 layout.
    pub recipe: Node,
    /// Located notes: the variant chosen, the v1 translation.
    pub notes: Vec<Problem>,
}

/// Which of a document's recipes to load.
#[derive(Clone, Debug, Default)]
pub struct Selection {
    /// An override file's variant by its label (`override_<name>`,
    /// `zip_override_<group>[i]`), or `base`; the first variant when `None`.
    pub variant: Option<String>,
}

/// The recipe of `root` that `selection` picks, in the 2.0 layout.
pub fn prepare(root: Node, selection: &Selection) -> Result<Prepared, Vec<Problem>> {
    let (mut recipe, mut notes) = variant(root, selection)?;
    notes.extend(migrate_tree(&mut recipe));
    Ok(Prepared { recipe, notes })
}

/// The recipe of `root` that `selection` picks: an override file's variant (with a
/// note naming it), else `root` itself.
pub fn variant(root: Node, selection: &Selection) -> Result<(Node, Vec<Problem>), Vec<Problem>> {
    let mut notes = Vec::new();
    let recipe = match variants::variants(&root) {
        None => root,
        Some(found) => pick(&root, found?, selection, &mut notes)?,
    };
    Ok((recipe, notes))
}

/// `recipe` re-spelled in the 2.0 layout when it is in srtctl's v1 one, with the note
/// that says what was done.
pub fn migrate_tree(recipe: &mut Node) -> Option<Problem> {
    let at = v1_marker(recipe);
    let migration = migrate::migrate(recipe);
    migration.was_v1.then(|| v1_note(at, &migration.notes))
}

/// A document re-spelled in the 2.0 layout, as text.
#[derive(Debug)]
pub struct Migrated {
    /// The YAML `srt migrate` writes: a header naming what was done, then the recipe.
    pub text: String,
    /// What was done, one line each (none when the document was 2.0 already).
    pub notes: Vec<String>,
}

/// `text` (the file `origin`) re-spelled in the 2.0 layout. Comments of the original
/// are not kept: the header says so.
pub fn migrate_text(text: &str, origin: &str) -> Result<Migrated, Vec<Problem>> {
    let mut root = crate::recipe::yaml::parse(text).map_err(|e| {
        vec![crate::recipe::yaml::syntax_problem(
            &e,
            text,
            "srt::recipe::syntax",
            "srt::recipe::duplicate_key",
        )]
    })?;
    labels(&root)?;
    let notes = migrate_document(&mut root);
    if notes.is_empty() {
        return Ok(Migrated {
            text: text.to_string(),
            notes,
        });
    }
    let mut out = format!(
        "# {origin}, migrated to srtctl's 2.0 layout by `srt migrate` (the original's comments are not kept):\n"
    );
    for note in &notes {
        out.push_str(&format!("# - {note}\n"));
    }
    out.push_str(&emit::to_yaml(&root));
    Ok(Migrated { text: out, notes })
}

/// A whole document re-spelled in the 2.0 layout (what `srt migrate` writes): a plain
/// recipe, or an override file's base and each of its variants. The notes say what
/// was done, a variant's prefixed with its key.
pub fn migrate_document(root: &mut Node) -> Vec<String> {
    let Some(base) = tree::get(root, "base") else {
        return migrate::migrate(root).notes;
    };
    let engine = migrate::engine_of(base);
    let mut notes = Vec::new();
    let Some(entries) = tree::entries_mut(root) else {
        return notes;
    };
    for (key, value) in entries.iter_mut() {
        let part = match key.name.as_str() {
            "base" => migrate::Part::Whole,
            name if name.starts_with("override_") || name.starts_with("zip_override_") => {
                migrate::Part::Variant(&engine)
            }
            _ => continue,
        };
        let done = migrate::migrate_part(value, part).notes;
        notes.extend(done.into_iter().map(|n| format!("{}: {n}", key.name)));
    }
    notes
}

/// The labels of the recipes a document holds: an override file's variants (and
/// `base`), or one empty label for a plain recipe.
pub fn labels(root: &Node) -> Result<Vec<String>, Vec<Problem>> {
    match variants::variants(root) {
        None => Ok(vec![String::new()]),
        Some(found) => {
            let mut labels = vec!["base".to_string()];
            labels.extend(found?.into_iter().map(|v| v.label));
            Ok(labels)
        }
    }
}

fn pick(
    root: &Node,
    found: Vec<variants::Variant>,
    selection: &Selection,
    notes: &mut Vec<Problem>,
) -> Result<Node, Vec<Problem>> {
    let count = found.len();
    let base_span = key_span(root, "base");
    if selection.variant.as_deref() == Some("base") {
        return Ok(variants::base(root).expect("an override file"));
    }
    let chosen = match &selection.variant {
        None => 0,
        Some(label) => found
            .iter()
            .position(|v| &v.label == label)
            .ok_or_else(|| {
                let labels: Vec<&str> = found.iter().map(|v| v.label.as_str()).collect();
                vec![Problem::new(
                    "srt::recipe::variant",
                    base_span,
                    format!("this override file has no variant `{label}`"),
                )
                .label("an override file")
                .help(format!("choose one of: base, {}", labels.join(", ")))]
            })?,
    };
    let variant = found.into_iter().nth(chosen).expect("in range");
    let at = key_span(root, variant.label.split('[').next().unwrap_or_default());
    if selection.variant.is_none() && count > 1 {
        notes.push(
            Problem::warning(
                "srt::recipe::variant",
                at,
                format!("loaded `{}`, variant 1 of the {count} of this override file", variant.label),
            )
            .label("the variant loaded")
            .help("choose another with `--variant LABEL` (`override_<name>`, `zip_override_<group>[i]`, or `base`)"),
        );
    }
    Ok(variant.recipe)
}

/// Where a v1 recipe says it is one: its `backend` key, else its first key.
fn v1_marker(recipe: &Node) -> SourceSpan {
    key_span(recipe, "backend")
}

/// Where `key` is written, else the document's first key.
fn key_span(node: &Node, key: &str) -> SourceSpan {
    tree::key_span(node, key)
        .or_else(|| tree::entries(node)?.first().map(|(k, _)| k.span))
        .unwrap_or(SourceSpan::new(0.into(), 0))
}

fn v1_note(at: SourceSpan, done: &[String]) -> Problem {
    Problem::warning(
        "srt::recipe::srtctl_v1",
        at,
        format!(
            "an srtctl v1 recipe, read as `srtctl migrate` writes it in 2.0: {}",
            done.join("; ")
        ),
    )
    .label("srtctl v1")
    .help("`srt migrate FILE` prints the 2.0 recipe (`--write` replaces the file, `--verify` checks both give the same launch plan)")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recipe::yaml::parse;

    #[test]
    fn an_override_file_of_v1_variants_loads_its_first_variant_migrated() {
        let text = "base:\n  name: r\n  backend: {type: vllm}\n  resources: {agg_nodes: 1, agg_workers: 1}\noverride_b: {name: second}\noverride_a: {resources: {agg_workers: 2}}\n";
        let p = prepare(parse(text).unwrap(), &Selection::default()).unwrap();
        let roles = tree::get(&p.recipe, "roles").unwrap();
        let agg = tree::get(roles, "agg").unwrap();
        assert_eq!(
            tree::get(agg, "workers").unwrap().value,
            crate::recipe::yaml::Value::Int(2)
        );
        let codes: Vec<_> = p.notes.iter().map(|n| n.code).collect();
        assert_eq!(codes, ["srt::recipe::variant", "srt::recipe::srtctl_v1"]);
    }

    #[test]
    fn a_variant_is_chosen_by_label_and_an_unknown_one_lists_the_others() {
        let text = "base: {name: r}\noverride_a: {x: 1}\nzip_override_z: {x: [1, 2]}\n";
        let pick = |v: &str| {
            prepare(
                parse(text).unwrap(),
                &Selection {
                    variant: Some(v.into()),
                },
            )
        };
        let p = pick("zip_override_z[1]").unwrap();
        assert_eq!(
            tree::get(&p.recipe, "name").and_then(tree::as_str),
            Some("r_z_1")
        );
        assert!(p.notes.is_empty());
        let err = pick("override_q").unwrap_err();
        assert!(err[0]
            .help
            .as_deref()
            .unwrap()
            .contains("zip_override_z[0]"));
        assert!(pick("base").is_ok());
    }
}
