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
    problems.extend(crate::engine::kv_events::problems(recipe));
    for role in &recipe.roles {
        if let Err(p) = sizes(catalog, role) {
            problems.push(p);
        }
    }
    placement_env(engine, recipe, problems);
}

/// The catalog of the release the workers run, as far as their image tells
/// ([`super::Release`]); a release srt has no catalog of, or an image that names none,
/// is a warning saying which release `args` is checked against.
fn image_catalog(
    engine: &Sglang,
    recipe: &Recipe,
    problems: &mut Vec<Problem>,
) -> &'static crate::catalog::Catalog {
    let release = engine.release(recipe);
    let catalog = release.catalog();
    let newest = &super::catalogs()[0].version;
    let warning = |message: String, label: &str, help: String| {
        Problem::warning("srt::recipe::engine_version", recipe.engine.span, message)
            .label(label.to_string())
            .help(help)
    };
    let name = "write `engine.version` to name the release the workers run";
    match &release {
        super::Release::Nearest { named, .. } => problems.push(warning(
            format!(
                "the workers' image runs SGLang {named}, which srt has no catalog of; srt checks `args` against SGLang {}'s flags, the nearest release it has",
                catalog.version
            ),
            "no catalog of the image's release",
            format!(
                "a flag {named} and {} do not share shows only when the program starts; {name} if it is one srt has",
                catalog.version
            ),
        )),
        super::Release::Fitting { image, fits, .. } if !fits || catalog.version != *newest => {
            let image = image
                .as_deref()
                .map_or("no image".to_string(), |i| format!("the image `{i}`"));
            let (message, label) = if *fits {
                (
                    format!(
                        "the workers run {image}, which names no SGLang release, and `args` has flags SGLang {newest} does not: srt checks them against SGLang {}, the newest release it has whose parser takes them all",
                        catalog.version
                    ),
                    "names no release",
                )
            } else {
                (
                    format!(
                        "the workers run {image}, which names no SGLang release, and no release srt has takes every flag of `args`: srt checks them against SGLang {newest}"
                    ),
                    "names no release",
                )
            };
            problems.push(warning(message, label, name.to_string()));
        }
        _ => {}
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
    fn an_image_release_without_a_catalog_is_checked_against_the_nearest_older_one() {
        let found = problems("lmsysorg/sglang:v0.5.9-cu130", "sglang", OLD_FLAG);
        assert_eq!(codes(&found), [("srt::recipe::engine_version", true)]);
        let message = &found[0].message;
        assert!(
            message.contains("SGLang 0.5.9") && message.contains("SGLang 0.5.8's flags"),
            "{message}"
        );
    }

    #[test]
    fn an_image_naming_no_release_is_checked_against_the_newest_release_taking_its_args() {
        // The newest takes them: nothing to say.
        assert_eq!(codes(&problems("dynamo-sglang", "sglang", "")), []);
        // Only an older release takes them: said, and no error.
        let found = problems("dynamo-sglang", "sglang", OLD_FLAG);
        assert_eq!(codes(&found), [("srt::recipe::engine_version", true)]);
        assert!(
            found[0].message.contains("`dynamo-sglang`")
                && found[0]
                    .message
                    .contains("the newest release it has whose parser takes them all"),
            "{}",
            found[0].message
        );
        // None takes them: said, and the newest's error.
        let found = problems("dev", "sglang", "      no-such-flag-anywhere: 1\n");
        assert_eq!(
            codes(&found),
            [
                ("srt::recipe::engine_version", true),
                ("srt::recipe::unknown_flag", false)
            ]
        );
    }
}
