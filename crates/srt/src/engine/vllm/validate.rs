//! vLLM's rules on a recipe, checked before anything is allocated: every role's args
//! against the flag catalog of `engine.version`, the parallel sizes, the environment srt
//! manages, and a raw `kv-transfer-config` next to a connector that writes one.

use super::connector;
use super::keys::{self, DpLaunchMode};
use super::process::includes_kv;
use super::shape::sizes;
use super::Vllm;
use crate::engine::Engine;
use crate::input;
use crate::recipe::diag::Problem;
use crate::recipe::{limits, Recipe};

/// Every rule, every role; all problems are collected.
pub(super) fn recipe(engine: &Vllm, recipe: &Recipe, problems: &mut Vec<Problem>) {
    args(engine, recipe, problems);
    problems.extend(crate::engine::kv_events::problems(recipe));
    for role in &recipe.roles {
        if let Err(p) = sizes(role) {
            problems.push(p);
        }
    }
    per_gpu(recipe, problems);
    side_channel_ranks(recipe, problems);
    managed_env(engine, recipe, problems);
    raw_connector_config(recipe, problems);
    dense_external_lb(recipe, problems);
}

/// Keys of a Hugging Face `config.json` that count a model's experts (Mixtral, Qwen-MoE,
/// DeepSeek, ...): a model with none of them above zero is dense.
const EXPERT_KEYS: &[&str] = &[
    "num_local_experts",
    "num_experts",
    "n_routed_experts",
    "moe_num_experts",
    "num_experts_per_tok",
];

/// Whether the model at `path` is dense, when srt can tell: `path` is a directory on
/// this machine with a `config.json` (its `text_config` too, for multimodal models).
/// `Ok(None)` when it cannot be read or parsed (a hub id, a path only the nodes see); an
/// error when it is there but not a regular file within [`input::MODEL_CONFIG`]'s limit
/// (a link to `/dev/zero` would be read forever).
pub(super) fn dense_model(path: &std::path::Path) -> Result<Option<bool>, input::InputError> {
    let text = match input::read_text(&path.join("config.json"), input::MODEL_CONFIG) {
        Ok(text) => text,
        Err(input::InputError::Read { .. }) => return Ok(None),
        Err(e) => return Err(e),
    };
    let Ok(config) = serde_json::from_str::<serde_json::Value>(&text) else {
        return Ok(None);
    };
    let experts = |c: &serde_json::Value| {
        EXPERT_KEYS
            .iter()
            .any(|k| c.get(*k).and_then(serde_json::Value::as_u64).unwrap_or(0) > 0)
    };
    let moe = experts(&config) || config.get("text_config").is_some_and(experts);
    Ok(Some(!moe))
}

/// A `config.json` srt refuses to read, as a problem at `model.path`.
fn unreadable_config(recipe: &Recipe, e: &input::InputError) -> Problem {
    Problem::new(
        "srt::recipe::model_config",
        recipe.model.path.span,
        e.to_string(),
    )
    .label("this model")
    .help("`model.path/config.json` must be the model's own configuration, a regular file; vLLM reads it too")
}

/// Data parallelism with one rank per node (DP over 1-GPU nodes): vLLM turns the hybrid
/// load balancing srt launches into external load balancing, which has no DP coordinator
/// for dense models: both API servers stop at start (`assert self.stats_update_address
/// is not None`, seen with vLLM 0.32). srt cannot know a model is dense in general, but
/// it reads `config.json` when the model is a local directory, and warns.
fn dense_external_lb(recipe: &Recipe, problems: &mut Vec<Problem>) {
    let gpn = recipe.resources.gpus_per_node.value;
    let mut dense = None;
    for role in &recipe.roles {
        let (Ok(s), Ok(gpw)) = (sizes(role), crate::topology::gpus_per_worker(recipe, role)) else {
            continue;
        };
        // One replica per node of a worker spanning nodes: a hybrid-LB pool of one rank.
        let external = s.dp > 1 && gpw > gpn && s.replica == gpn;
        if !external {
            continue;
        }
        let path = std::path::Path::new(&recipe.model.path.value);
        let known = match dense {
            Some(known) => known,
            None => match dense_model(path) {
                Ok(d) => *dense.insert(d.unwrap_or(false)),
                Err(e) => {
                    problems.push(unreadable_config(recipe, &e));
                    return;
                }
            },
        };
        if !known {
            return;
        }
        let span = role
            .args
            .get("data-parallel-size")
            .map_or(role.span, |a| a.key_span);
        problems.push(
            Problem::warning(
                "srt::recipe::dense_dp",
                span,
                format!(
                    "`roles.{}` runs data-parallel-size {} with one rank per node: vLLM then balances externally, which needs a mixture-of-experts model, and {} describes a dense one (no experts); its API servers would stop at start",
                    role.kind.name(),
                    s.dp,
                    path.join("config.json").display()
                ),
            )
            .label("one DP rank per node")
            .help("put several ranks on each node (larger nodes, or `gpus`), or serve replicas instead (`workers: N` without data-parallel-size)"),
        );
    }
}

/// An endpoint with a NIXL side channel binds one port per DP rank from one base, so
/// its DP size is bounded ([`limits::MAX_SIDE_CHANNEL_RANKS`]).
fn side_channel_ranks(recipe: &Recipe, problems: &mut Vec<Problem>) {
    for role in &recipe.roles {
        let Ok(c) = connector::for_role(recipe, role) else {
            continue;
        };
        let Some(arg) = role.args.get("data-parallel-size") else {
            continue;
        };
        let dp = sizes(role).map_or(0, |s| u64::from(s.dp));
        if c.side_channel && includes_kv(role) && dp > limits::MAX_SIDE_CHANNEL_RANKS {
            problems.push(
                Problem::new(
                    "srt::recipe::limit",
                    arg.value_span,
                    format!(
                        "`roles.{}` runs {dp} DP ranks with {} side channels; srt allocates at most {} per endpoint",
                        role.kind.name(),
                        c.name,
                        limits::MAX_SIDE_CHANNEL_RANKS
                    ),
                )
                .label("too many DP ranks for one side-channel run")
                .help("vLLM binds the side-channel base plus the global DP rank, one port per rank: use more workers with fewer DP ranks each (see \"Limits\" in docs/recipe-reference.md)"),
            );
        }
    }
}

/// Data parallelism launched one process per rank (srtctl's deprecated `per_gpu`)
/// gives registrations, not independently routable API servers: refused.
fn per_gpu(recipe: &Recipe, problems: &mut Vec<Problem>) {
    let mode = keys::dp_launch_mode(recipe);
    let uses_dp = recipe
        .roles
        .iter()
        .any(|r| sizes(r).is_ok_and(|s| s.dp > 1));
    if mode.value == DpLaunchMode::PerGpu && uses_dp {
        problems.push(
            Problem::new(
                "srt::recipe::dp_launch_mode",
                mode.span,
                "`dp_launch_mode: per_gpu` is not supported with data parallelism",
            )
            .label("per_gpu")
            .help("per_gpu launches one process per DP rank (registrations, not routable API servers); use per_node (the default): one hybrid-LB API server per node"),
        );
    }
}

/// Every role's `args` against the catalog of the release the recipe names.
fn args(engine: &Vllm, recipe: &Recipe, problems: &mut Vec<Problem>) {
    if let Some(catalog) = crate::engine::recipe_catalog(engine, keys::version(recipe), problems) {
        crate::engine::check_role_args(engine, catalog, recipe, problems);
    }
}

/// Variables srt sets per process from the allocation. A role that brings its own
/// `kv-transfer-config` may set the NIXL side channel's (srt's are defaults then).
fn managed_env(engine: &Vllm, recipe: &Recipe, problems: &mut Vec<Problem>) {
    for role in &recipe.roles {
        let path = format!("roles.{}", role.kind.name());
        let own = connector::for_role(recipe, role).is_ok_and(|c| connector::own_config(c, role));
        for key in role.env.keys() {
            if own && connector::SIDE_CHANNEL_ENV.contains(&key.as_str()) {
                continue;
            }
            if engine.placement_env().contains(&key.as_str()) {
                problems.push(
                    Problem::new(
                        "srt::recipe::placement_env",
                        role.env_spans.get(key).copied().unwrap_or(role.span),
                        format!("`{path}.env.{key}` contradicts the placement: srt gives each worker its GPUs (`--device-ids`, from `gpus` and `resources.gpus_per_node`)"),
                    )
                    .label("chooses devices")
                    .help("remove it; to run on fewer GPUs, lower `gpus` or `resources.gpus_per_node` (locally, `SRT_LOCAL_GPUS` or srt's own `CUDA_VISIBLE_DEVICES` say which GPUs this host has)"),
                );
                continue;
            }
            if engine.managed_env().contains(&key.as_str()) {
                problems.push(
                    Problem::new(
                        "srt::recipe::managed_env",
                        role.env_spans.get(key).copied().unwrap_or(role.span),
                        format!("`{path}.env.{key}` is set by srt from the allocation"),
                    )
                    .label("managed by srt")
                    .help(if connector::SIDE_CHANNEL_ENV.contains(&key.as_str()) {
                        "remove it; srt sets the side channel per process (the node's IP, a port per DP rank). A role that passes its own `kv-transfer-config` (with `args.connector: none`) may set it"
                    } else {
                        "remove it; srt allocates this value per process"
                    }),
                );
            }
        }
    }
}

/// `args.kv-transfer-config` next to a connector that writes its own.
fn raw_connector_config(recipe: &Recipe, problems: &mut Vec<Problem>) {
    for role in &recipe.roles {
        let Some(arg) = role.args.get("kv-transfer-config") else {
            continue;
        };
        let Ok(conn) = connector::for_role(recipe, role) else {
            continue;
        };
        if conn.kv_connector.is_some() {
            let path = format!("roles.{}", role.kind.name());
            problems.push(
                Problem::new(
                    "srt::recipe::kv_transfer_config",
                    arg.key_span,
                    format!(
                        "`{path}.args.kv-transfer-config` conflicts with connector `{}`",
                        conn.name
                    ),
                )
                .label("raw connector config")
                .help("choose the connector with `engine.connector` / `args.connector`, or set `args.connector: none` to pass your own config"),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `config.json` linked to `/dev/zero` was read until 1.6 GB and the recipe called
    /// valid; it is refused at once, naming the file.
    #[test]
    fn a_config_json_that_is_no_regular_file_or_too_large_is_refused() {
        let model = tempfile::tempdir().unwrap();
        let config = model.path().join("config.json");
        std::os::unix::fs::symlink("/dev/zero", &config).unwrap();
        let t = std::time::Instant::now();
        let e = dense_model(model.path()).unwrap_err();
        assert!(t.elapsed().as_secs() < 1);
        assert!(
            matches!(e, input::InputError::NotAFile { .. })
                && e.to_string().contains(&config.display().to_string()),
            "{e}"
        );
        std::fs::remove_file(&config).unwrap();
        let f = std::fs::File::create(&config).unwrap();
        f.set_len(input::MODEL_CONFIG.limit + 1).unwrap();
        let e = dense_model(model.path()).unwrap_err();
        assert!(matches!(e, input::InputError::TooLarge { .. }), "{e}");
        std::fs::write(&config, r#"{"num_local_experts": 8}"#).unwrap();
        assert_eq!(dense_model(model.path()).unwrap(), Some(false));
        std::fs::remove_file(&config).unwrap();
        assert_eq!(dense_model(model.path()).unwrap(), None);
    }
}
