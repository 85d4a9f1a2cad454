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
    let Some(catalog) = crate::engine::recipe_catalog(engine, keys::version(recipe), problems)
    else {
        return;
    };
    crate::engine::check_role_args(engine, catalog, recipe, problems);
    for role in &recipe.roles {
        if let Err(p) = sizes(catalog, role) {
            problems.push(p);
        }
    }
    placement_env(engine, recipe, problems);
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
