//! `srt migrate --verify`: an srtctl file and its migrated text give the same launch
//! plan, recipe by recipe (an override file's base and every variant).

use crate::assemble::{assemble, BuildOptions};
use crate::recipe::{self, RecipeError, Selection, Source};

/// How one recipe of the file compared.
#[derive(Debug)]
pub enum Outcome {
    /// Both give this launch plan, byte for byte (warnings aside: the original's say
    /// it was translated).
    Same,
    /// The launch plans differ: a unified diff of their JSON, original first.
    Differs(String),
    /// An override file's base that is no recipe on its own, in the original and the
    /// migrated text alike (its variants complete it: srtctl runs the variants, and the
    /// base only when it is selected).
    Incomplete(Box<RecipeError>),
    /// One side does not give a launch plan; the original's error when it is the one
    /// (then the migration is not at fault), else the migrated text's.
    Fails {
        /// Whether the original fails too.
        original: bool,
        /// The error.
        error: Box<RecipeError>,
    },
}

/// One recipe's comparison.
#[derive(Debug)]
pub struct Check {
    /// Its label (`base`, `override_<name>`, `zip_override_<group>[i]`; empty for a
    /// plain recipe).
    pub label: String,
    /// How it compared.
    pub outcome: Outcome,
}

/// Compare `original` with `migrated` (its `srt migrate` text), recipe by recipe.
pub fn verify(
    original: &Source,
    migrated: &str,
    stem: &str,
    profile: &crate::cluster::ClusterProfile,
) -> Result<Vec<Check>, RecipeError> {
    let root = recipe::yaml::parse(&original.text).map_err(|e| {
        original.error(vec![recipe::yaml::syntax_problem(
            &e,
            &original.text,
            "srt::recipe::syntax",
            "srt::recipe::duplicate_key",
        )])
    })?;
    let labels = recipe::srtctl::labels(&root).map_err(|p| original.error(p))?;
    let migrated = Source {
        name: format!("{} (migrated)", original.name),
        text: migrated.to_string(),
    };
    Ok(labels
        .into_iter()
        .map(|label| {
            let selection = Selection {
                variant: (!label.is_empty()).then(|| label.clone()),
            };
            let outcome = match compare(original, &migrated, stem, &selection, profile) {
                // The base alone fails on both sides: what it lacks, its variants give.
                Outcome::Fails {
                    original: true,
                    error,
                } if label == "base"
                    && plan_json(&migrated, stem, &selection, profile).is_err() =>
                {
                    Outcome::Incomplete(error)
                }
                outcome => outcome,
            };
            Check { label, outcome }
        })
        .collect())
}

fn compare(
    original: &Source,
    migrated: &Source,
    stem: &str,
    selection: &Selection,
    profile: &crate::cluster::ClusterProfile,
) -> Outcome {
    let before = match plan_json(original, stem, selection, profile) {
        Ok(json) => json,
        Err(error) => {
            return Outcome::Fails {
                original: true,
                error: Box::new(error),
            }
        }
    };
    let after = match plan_json(migrated, stem, selection, profile) {
        Ok(json) => json,
        Err(error) => {
            return Outcome::Fails {
                original: false,
                error: Box::new(error),
            }
        }
    };
    if before == after {
        return Outcome::Same;
    }
    let diff = similar::TextDiff::from_lines(&before, &after)
        .unified_diff()
        .header("original", "migrated")
        .to_string();
    Outcome::Differs(diff)
}

/// The launch plan of the recipe `selection` picks, read with `profile`'s aliases and
/// script directories, as JSON without its warnings.
fn plan_json(
    source: &Source,
    stem: &str,
    selection: &Selection,
    profile: &crate::cluster::ClusterProfile,
) -> Result<String, RecipeError> {
    let options = BuildOptions::default();
    let recipe = crate::assemble::load_fitting(source, stem, selection, &options, |r| {
        profile.resolve_aliases(r);
    })?;
    let mut plan = assemble(&recipe, &options).map_err(|p| source.error(p))?;
    plan.warnings.clear();
    Ok(crate::launch::render::json(&plan))
}

#[cfg(test)]
mod tests {
    use super::*;

    const V1: &str = "\
name: v1-agg
model: {path: /models/tiny}
resources: {gpus_per_node: 4, agg_nodes: 1, agg_workers: 2}
backend:
  type: vllm
  vllm_config:
    aggregated: {tensor-parallel-size: 2}
frontend: {type: vllm-router, enable_multiple_frontends: false}
";

    fn source(text: &str) -> Source {
        Source {
            name: "v1.yaml".into(),
            text: text.into(),
        }
    }

    #[test]
    fn a_v1_recipe_and_its_migrated_text_give_the_same_launch_plan() {
        let migrated = recipe::srtctl::migrate_text(V1, "v1.yaml").unwrap();
        assert!(!migrated.notes.is_empty());
        let checks = verify(&source(V1), &migrated.text, "v1", &Default::default()).unwrap();
        assert_eq!(checks.len(), 1);
        assert!(
            matches!(checks[0].outcome, Outcome::Same),
            "{:?}",
            checks[0].outcome
        );
    }

    #[test]
    fn a_migrated_text_that_changes_the_recipe_is_a_difference() {
        let migrated = recipe::srtctl::migrate_text(V1, "v1.yaml").unwrap();
        let changed = migrated
            .text
            .replace("tensor-parallel-size: 2", "tensor-parallel-size: 1");
        let changed = changed.replace("workers: 2", "workers: 4");
        let checks = verify(&source(V1), &changed, "v1", &Default::default()).unwrap();
        assert!(
            matches!(checks[0].outcome, Outcome::Differs(_)),
            "{:?}",
            checks[0].outcome
        );
    }

    /// A base that its variants complete is no recipe alone, on either side: said, not a
    /// failure; the variants still compare.
    #[test]
    fn a_base_its_variants_complete_is_incomplete_not_failed() {
        let text = "base:\n  name: o\n  model: {path: /models/tiny}\n  resources: {gpus_per_node: 4, agg_workers: 4}\n  backend: {type: vllm}\n  frontend: {type: vllm-router, enable_multiple_frontends: false}\noverride_one: {resources: {agg_nodes: 1}}\n";
        let migrated = recipe::srtctl::migrate_text(text, "o.yaml").unwrap();
        let checks = verify(&source(text), &migrated.text, "o", &Default::default()).unwrap();
        let outcomes: Vec<_> = checks
            .iter()
            .map(|c| {
                (
                    c.label.as_str(),
                    matches!(c.outcome, Outcome::Incomplete(_)),
                    matches!(c.outcome, Outcome::Same),
                )
            })
            .collect();
        assert_eq!(
            outcomes,
            [("base", true, false), ("override_one", false, true)]
        );
    }

    #[test]
    fn every_variant_of_an_override_file_is_compared() {
        let text = "base:\n  name: o\n  model: {path: /models/tiny}\n  resources: {gpus_per_node: 4, agg_nodes: 1, agg_workers: 4}\n  backend: {type: vllm}\n  frontend: {type: vllm-router, enable_multiple_frontends: false}\noverride_two: {resources: {agg_workers: 2, gpus_per_agg: 1}}\nzip_override_z: {resources: {agg_workers: [1, 2], gpus_per_agg: [1]}}\n";
        let migrated = recipe::srtctl::migrate_text(text, "o.yaml").unwrap();
        let checks = verify(&source(text), &migrated.text, "o", &Default::default()).unwrap();
        let labels: Vec<_> = checks.iter().map(|c| c.label.as_str()).collect();
        assert_eq!(
            labels,
            [
                "base",
                "override_two",
                "zip_override_z[0]",
                "zip_override_z[1]"
            ]
        );
        for c in &checks {
            assert!(
                matches!(c.outcome, Outcome::Same),
                "{}: {:?}\n{}",
                c.label,
                c.outcome,
                migrated.text
            );
        }
    }
}
