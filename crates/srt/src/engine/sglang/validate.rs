//! SGLang's rules on a recipe, checked before anything is allocated: every role's args
//! against the flag catalog of `engine.version`, the parallel sizes, and the
//! environment that would contradict the placement.

use super::shape::sizes;
use super::{keys, Sglang};
use crate::engine::Engine;
use crate::recipe::diag::Problem;
use crate::recipe::Recipe;

/// Every rule, every role; all problems are collected.
pub(super) fn recipe(engine: &Sglang, recipe: &Recipe, problems: &mut Vec<Problem>) {
    let catalog = match keys::version(recipe) {
        Some(v) => match crate::engine::recipe_catalog(engine, Some(v), problems) {
            Some(c) => c,
            None => return,
        },
        None => image_catalog(engine, recipe, problems),
    };
    crate::engine::check_role_args(engine, catalog, recipe, problems);
    for role in &recipe.roles {
        if let Err(p) = sizes(catalog, role) {
            problems.push(p);
        }
    }
    placement_env(engine, recipe, problems);
}

/// The catalog of the release the workers' image names; one srt has no catalog of is
/// a warning (the args are checked against the newest).
fn image_catalog(
    engine: &Sglang,
    recipe: &Recipe,
    problems: &mut Vec<Problem>,
) -> &'static crate::catalog::Catalog {
    let catalog = engine.recipe_catalog(recipe);
    if let Some(release) = keys::image_release(recipe) {
        if super::image_catalog(release).is_none() {
            problems.push(
                Problem::warning(
                    "srt::recipe::engine_version",
                    recipe.engine.span,
                    format!(
                        "the workers' image runs SGLang {release}; srt checks `args` against SGLang {}'s flags",
                        catalog.version
                    ),
                )
                .label("no catalog of the image's release")
                .help(format!(
                    "a flag {release} and {} do not share shows only when the program starts; write `engine.version` to name a release srt has",
                    catalog.version
                )),
            );
        }
    }
    catalog
}

/// A role's `env` choosing devices: srt gives each worker its GPUs as
/// `CUDA_VISIBLE_DEVICES`.
fn placement_env(engine: &Sglang, recipe: &Recipe, problems: &mut Vec<Problem>) {
    for role in &recipe.roles {
        for key in role.env.keys() {
            if !engine.placement_env().contains(&key.as_str()) {
                continue;
            }
            problems.push(
                Problem::new(
                    "srt::recipe::placement_env",
                    role.env_spans.get(key).copied().unwrap_or(role.span),
                    format!(
                        "`roles.{}.env.{key}` contradicts the placement: srt gives each worker its GPUs (CUDA_VISIBLE_DEVICES, from `gpus` and `resources.gpus_per_node`)",
                        role.kind.name()
                    ),
                )
                .label("chooses devices")
                .help("remove it; to run on fewer GPUs, lower `gpus` or `resources.gpus_per_node`"),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::engine::Engine;
    use crate::recipe::diag::Problem;

    /// The problems SGLang finds in an aggregate recipe whose workers run `image`
    /// with `args`.
    fn problems(image: &str, engine: &str, args: &str) -> Vec<Problem> {
        let text = format!(
            "engine: {engine}\nmodel:\n  path: /models/m\n  container: \"{image}\"\nroles:\n  agg:\n    nodes: 1\n    workers: 1\n    args:\n{args}"
        );
        let source = crate::recipe::Source {
            name: "t.yaml".into(),
            text,
        };
        let recipe = crate::recipe::load_str(&source, "t").expect("loads");
        let mut problems = Vec::new();
        super::super::Sglang.validate(&recipe, &mut problems);
        problems
    }

    fn codes(problems: &[Problem]) -> Vec<(&'static str, bool)> {
        problems.iter().map(|p| (p.code, p.is_warning())).collect()
    }

    const OLD_FLAG: &str = "      cuda-graph-max-bs: 256\n";

    #[test]
    fn the_images_release_chooses_the_catalog() {
        for image in [
            "lmsysorg/sglang:v0.5.8-cu130",
            "lmsysorg/sglang:v0.5.8.post1-cu130",
        ] {
            assert_eq!(codes(&problems(image, "sglang", OLD_FLAG)), [], "{image}");
        }
        assert_eq!(
            codes(&problems("lmsysorg/sglang:v0.5.23", "sglang", OLD_FLAG)),
            [("srt::recipe::unknown_flag", false)]
        );
    }

    #[test]
    fn the_parallel_sizes_are_read_in_either_release() {
        // 0.5.8 names the option's destination `tensor_parallel_size`, 0.5.23 `tp_size`.
        for image in ["lmsysorg/sglang:v0.5.8-cu130", "lmsysorg/sglang:v0.5.23"] {
            for flag in ["tp-size", "tensor-parallel-size"] {
                // A size that is no positive integer is found only if it is read.
                let found = problems(image, "sglang", &format!("      {flag}: 0\n"));
                assert_eq!(
                    codes(&found),
                    [("srt::recipe::parallel_size", false)],
                    "{image} {flag}: {found:?}"
                );
                assert!(
                    found[0].message.contains("positive integer"),
                    "{}",
                    found[0].message
                );
            }
        }
    }

    #[test]
    fn engine_version_outranks_the_image() {
        let engine = "{type: sglang, version: \"0.5.23\"}";
        assert_eq!(
            codes(&problems("lmsysorg/sglang:v0.5.8-cu130", engine, OLD_FLAG)),
            [("srt::recipe::unknown_flag", false)]
        );
    }

    #[test]
    fn an_image_release_without_a_catalog_is_a_warning_and_the_newest_checks() {
        let found = problems("lmsysorg/sglang:v0.5.11-cu130", "sglang", OLD_FLAG);
        assert_eq!(
            codes(&found),
            [
                ("srt::recipe::engine_version", true),
                ("srt::recipe::unknown_flag", false)
            ]
        );
        assert!(
            found[0].message.contains("SGLang 0.5.11"),
            "{}",
            found[0].message
        );
        assert!(found[0].message.contains("0.5.23"), "{}", found[0].message);
    }
}
