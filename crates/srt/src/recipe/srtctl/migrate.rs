//! srtctl v1 recipes re-spelled in the 2.0 layout srt reads, rule by rule as
//! `srtctl migrate` (srtctl 2.0's `core/migrate.py`) does them, on the spanned tree:
//! every value moved keeps the span it was written at, so a problem the loader finds
//! later points at the v1 key the user wrote.
//!
//! The rules are re-spellings (the resolved recipe is the same), and each is a no-op
//! on a document already in the 2.0 layout, so they run on every recipe. Each rule
//! that changed something says so in a note.

use super::tree;
use crate::recipe::yaml::{Node, Value};

/// A recipe role, its srtctl v1 mode name (as in `sglang_config.<mode>` and
/// `<mode>_environment`).
const ROLES: &[(&str, &str)] = &[
    ("prefill", "prefill"),
    ("decode", "decode"),
    ("agg", "aggregated"),
];

/// The `backend.<engine>_config` key of each srtctl v1 engine.
const ENGINE_CONFIG: &[(&str, &str)] = &[
    ("sglang", "sglang_config"),
    ("vllm", "vllm_config"),
    ("trtllm", "trtllm_config"),
    ("mocker", "mocker_config"),
];

/// What srtctl v1 does with a flag a recipe gives in a role's args, where it sets the
/// flag itself (`backends/<engine>.py`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum V1Flag {
    /// Dropped: srtctl sets its own value (as srt does).
    Dropped,
    /// The role's own mode (`prefill`, `decode`), passed again: the same as srt's
    /// when equal to the role.
    RoleMode,
    /// The KV transfer backend, the user's choice in v1: srt's role `connector`.
    Connector,
    /// A value srt sets itself (`host` srtctl sets too; vLLM's hybrid load balancing
    /// is srt's `dp_launch_mode: per_node`, its default): the recipe's is dropped when
    /// it is that value (another value stays, and srt refuses it).
    Same(&'static str),
    /// A port the engine's processes use among themselves, which srtctl allocates
    /// per process (its allocation wins over the recipe's, or the recipe's collides
    /// when two processes share a node): srt allocates it, the recipe's is dropped.
    Port,
}

/// srtctl v1's handling of the flags it sets, by engine (flags in kebab case).
const V1_FLAGS: &[(&str, &str, V1Flag)] = &[
    ("sglang", "model-path", V1Flag::Dropped),
    ("sglang", "nccl-port", V1Flag::Dropped),
    ("sglang", "host", V1Flag::Same("0.0.0.0")),
    ("sglang", "disaggregation-mode", V1Flag::RoleMode),
    (
        "sglang",
        "disaggregation-transfer-backend",
        V1Flag::Connector,
    ),
    ("sglang", "disaggregation-bootstrap-port", V1Flag::Port),
    ("vllm", "data-parallel-rpc-port", V1Flag::Port),
    ("vllm", "data-parallel-hybrid-lb", V1Flag::Same("true")),
];

/// v1 frontend names that 2.0 (and srt) spell otherwise.
const FRONTEND_NAMES: &[(&str, &str)] = &[("sglang", "sglang-router")];

/// srtctl v1's defaults that differ from srt's: v1 recipes mean them when they say
/// nothing.
const V1_FRONTEND_DEFAULT: &str = "dynamo";
const V1_ENGINE_DEFAULT: &str = "sglang";
/// The ai-dynamo srtctl v1 installs when the recipe names none.
const V1_DYNAMO_VERSION: &str = "0.8.0";

/// The result of migrating one recipe.
#[derive(Debug, Default)]
pub struct Migration {
    /// What was re-spelled, one line each, in the order done.
    pub notes: Vec<String>,
    /// Whether the document was in srtctl's v1 layout.
    pub was_v1: bool,
}

/// What a mapping being migrated is.
#[derive(Clone, Copy, Debug)]
pub enum Part<'a> {
    /// A whole recipe: v1's defaults are written out and `schema: 2` set.
    Whole,
    /// A variant of an override file, over a base whose engine is the one named:
    /// only what it writes is re-spelled.
    Variant(&'a str),
}

/// Re-spell `recipe` (one recipe, not an override file) in the 2.0 layout.
pub fn migrate(recipe: &mut Node) -> Migration {
    migrate_part(recipe, Part::Whole)
}

/// Re-spell `mapping`, a whole recipe or a variant, in the 2.0 layout.
pub fn migrate_part(mapping: &mut Node, part: Part<'_>) -> Migration {
    let mut m = Migration {
        was_v1: is_v1(mapping),
        ..Migration::default()
    };
    if !m.was_v1 {
        return m;
    }
    let engine = match part {
        Part::Variant(base) if !has_engine_type(mapping) => base.to_string(),
        _ => engine_name(mapping),
    };
    fold_roles(mapping, &engine, &mut m.notes);
    rename_nginx_image(mapping, &mut m.notes);
    drop_default_infra(mapping, &mut m.notes);
    match part {
        Part::Whole => {
            fold_engine(mapping, &engine, &mut m.notes);
            default_frontend(mapping, &mut m.notes);
            default_dynamo_install(mapping, &mut m.notes);
            drop_manual_benchmark(mapping, &mut m.notes);
            default_chat_template(mapping, &mut m.notes);
            set_schema(mapping, &mut m.notes);
        }
        Part::Variant(_) => {
            if tree::has(mapping, "backend") {
                fold_engine(mapping, &engine, &mut m.notes);
            }
            rename_frontend(mapping, &mut m.notes);
            null_frontend(mapping, &mut m.notes);
        }
    }
    m
}

/// A variant's `frontend: null` removes the base's frontend, leaving srtctl's default,
/// Dynamo, which is not srt's: written out as the section it leaves.
fn null_frontend(variant: &mut Node, notes: &mut Vec<String>) {
    let Some(span) = tree::get(variant, "frontend")
        .filter(|f| f.value == Value::Null)
        .map(|f| f.span)
    else {
        return;
    };
    let key = tree::key_span(variant, "frontend").unwrap_or(span);
    let section = tree::map(
        vec![(
            tree::named("type", span),
            tree::string(V1_FRONTEND_DEFAULT, span),
        )],
        span,
    );
    tree::set(variant, tree::named("frontend", key), section);
    notes.push(format!(
        "frontend: null -> frontend: {{type: {V1_FRONTEND_DEFAULT}}} (srtctl's default once the base's is removed)"
    ));
}

fn has_engine_type(mapping: &Node) -> bool {
    tree::get(mapping, "backend").is_some_and(|b| tree::has(b, "type"))
}

/// The engine an srtctl v1 recipe (or an override file's base) runs.
pub fn engine_of(recipe: &Node) -> String {
    engine_name(recipe)
}

/// Whether `recipe` is in srtctl's v1 layout: `schema` absent or 1, and a v1-only key
/// present (`backend`, or a role's count in `resources`).
pub fn is_v1(recipe: &Node) -> bool {
    let declared = tree::get(recipe, "schema").map(|n| &n.value);
    if !matches!(declared, None | Some(Value::Int(1))) {
        return false;
    }
    if matches!(declared, Some(Value::Int(1))) || tree::has(recipe, "backend") {
        return true;
    }
    let Some(resources) = tree::get(recipe, "resources") else {
        return false;
    };
    ROLES.iter().any(|(role, _)| {
        [
            format!("{role}_nodes"),
            format!("{role}_workers"),
            format!("gpus_per_{role}"),
        ]
        .iter()
        .any(|k| tree::has(resources, k))
    })
}

/// The engine of a v1 recipe: `backend.type`, else the one whose `<engine>_config` is
/// present, else srtctl v1's default (SGLang).
fn engine_name(recipe: &Node) -> String {
    let backend = tree::get(recipe, "backend");
    if let Some(name) = backend
        .and_then(|b| tree::get(b, "type"))
        .and_then(tree::as_str)
    {
        return name.to_string();
    }
    ENGINE_CONFIG
        .iter()
        .find(|(_, key)| backend.is_some_and(|b| tree::has(b, key)))
        .map_or(V1_ENGINE_DEFAULT, |(engine, _)| engine)
        .to_string()
}

fn config_key(engine: &str) -> &'static str {
    ENGINE_CONFIG
        .iter()
        .find(|(e, _)| *e == engine)
        .map_or("sglang_config", |(_, key)| key)
}

/// `resources.<role>_nodes/_workers`, `gpus_per_<role>`, `backend.<mode>_environment`
/// and `backend.<engine>_config.<mode>` fold into `roles.<role>` (`nodes`, `workers`,
/// `gpus`, `env`, `args`).
fn fold_roles(recipe: &mut Node, engine: &str, notes: &mut Vec<String>) {
    let config = config_key(engine);
    for (role, mode) in ROLES {
        let mut moved = Vec::new();
        for (legacy, new) in [
            (format!("{role}_nodes"), "nodes"),
            (format!("{role}_workers"), "workers"),
            (format!("gpus_per_{role}"), "gpus"),
        ] {
            if let Some(entry) = take_in(recipe, &["resources"], &legacy) {
                moved.push((entry, new));
            }
        }
        for (legacy, new) in [
            (format!("{mode}_environment"), "env"),
            (format!("{mode}_extra_args"), "extra_args"),
        ] {
            if let Some(entry) = take_in(recipe, &["backend"], &legacy) {
                moved.push((entry, new));
            }
        }
        if let Some(entry) = take_in(recipe, &["backend", config], mode) {
            moved.push((entry, "args"));
        }
        if moved.is_empty() {
            continue;
        }
        let span = moved[0].0 .0.span;
        let anchor = if tree::has(recipe, "backend") {
            "backend"
        } else {
            "resources"
        };
        let roles = tree::child_map(recipe, "roles", Some(anchor), span);
        let spec = tree::child_map(roles, role, None, span);
        for ((key, value), new) in moved {
            if tree::has(spec, new) {
                notes.push(format!(
                    "roles.{role}.{new} already set: kept it, dropped {}",
                    key.name
                ));
                continue;
            }
            tree::set(spec, tree::named(new, key.span), value);
        }
        notes.push(format!("folded the {role} fields into roles.{role}"));
    }
    colocate_decode(recipe, notes);
    drop_empty(recipe, &["backend"], config);
    for (role, _) in ROLES {
        v1_flags(recipe, engine, role, notes);
    }
}

/// The flags of `roles.<role>.args` srtctl v1 sets itself, as it reads them: dropped
/// when srtctl drops them or when they say what the role says; the transfer backend
/// becomes the role's `connector`.
fn v1_flags(recipe: &mut Node, engine: &str, role: &str, notes: &mut Vec<String>) {
    let Some(args) = tree::map_mut(recipe, "roles")
        .and_then(|r| tree::map_mut(r, role))
        .and_then(|r| tree::map_mut(r, "args"))
    else {
        return;
    };
    let Some(entries) = tree::entries_mut(args) else {
        return;
    };
    let mut connector = None;
    entries.retain(|(key, value)| {
        let flag = key.name.replace('_', "-");
        let Some((_, _, rule)) = V1_FLAGS.iter().find(|(e, f, _)| *e == engine && *f == flag) else {
            return true;
        };
        match rule {
            V1Flag::Dropped => {
                notes.push(format!("dropped roles.{role}.args.{} (srtctl sets it, as srt does)", key.name));
                false
            }
            V1Flag::Port => {
                notes.push(format!(
                    "dropped roles.{role}.args.{} (a port between the engine's processes: srt allocates one per process)",
                    key.name
                ));
                false
            }
            V1Flag::Same(same) if scalar_text(value).as_deref() == Some(same) => {
                notes.push(format!(
                    "dropped roles.{role}.args.{}: {same} (srt sets that itself)",
                    key.name
                ));
                false
            }
            V1Flag::RoleMode if tree::as_str(value) == Some(role) => {
                notes.push(format!("dropped roles.{role}.args.{}: {role} (the role says it)", key.name));
                false
            }
            V1Flag::Connector if connector.is_none() && tree::as_str(value).is_some() => {
                connector = Some((key.span, value.clone()));
                notes.push(format!("roles.{role}.args.{} -> roles.{role}.args.connector", key.name));
                false
            }
            _ => true,
        }
    });
    if let Some((span, value)) = connector {
        if !entries.iter().any(|(k, _)| k.name == "connector") {
            entries.push((tree::named("connector", span), value));
        }
    }
}

/// A scalar's text as a command line would carry it (`true` for a boolean).
fn scalar_text(node: &Node) -> Option<String> {
    match &node.value {
        Value::Str(s) => Some(s.clone()),
        Value::Bool(b) => Some(b.to_string()),
        Value::Int(i) => Some(i.to_string()),
        _ => None,
    }
}

/// v1's `decode_nodes: 0` (decode on the prefill nodes) is 2.0's `nodes: colocate`,
/// which needs `gpus` on both roles: written out as v1 derived them (prefill's
/// `nodes x gpus_per_node / workers`, decode's inherited from prefill).
fn colocate_decode(recipe: &mut Node, notes: &mut Vec<String>) {
    let gpus_per_node = tree::get(recipe, "resources")
        .and_then(|r| tree::get(r, "gpus_per_node"))
        .and_then(int);
    let Some(roles) = recipe_roles_mut(recipe) else {
        return;
    };
    let Some(decode) = tree::get(roles, "decode") else {
        return;
    };
    let Some(nodes) = tree::get(decode, "nodes").filter(|n| n.value == Value::Int(0)) else {
        return;
    };
    let nodes_span = nodes.span;
    let decode_gpus = tree::get(decode, "gpus").cloned();
    let prefill = tree::get(roles, "prefill");
    let prefill_gpus = prefill
        .and_then(|p| tree::get(p, "gpus"))
        .cloned()
        .or_else(|| {
            let p = prefill?;
            let (n, w) = (int(tree::get(p, "nodes")?)?, int(tree::get(p, "workers")?)?);
            let per_node = gpus_per_node?;
            (w > 0).then(|| int_node(n * per_node / w, nodes_span))
        });
    if let (Some(gpus), Some(prefill)) = (&prefill_gpus, tree::map_mut(roles, "prefill")) {
        if !tree::has(prefill, "gpus") {
            tree::insert_after(
                prefill,
                "workers",
                tree::named("gpus", nodes_span),
                gpus.clone(),
            );
            notes.push(format!(
                "wrote roles.prefill.gpus: {} (v1 derived it)",
                show(gpus)
            ));
        }
    }
    let decode = tree::map_mut(roles, "decode").expect("checked above");
    tree::set(
        decode,
        tree::named("nodes", nodes_span),
        tree::string("colocate", nodes_span),
    );
    notes.push("rewrote roles.decode.nodes: 0 as nodes: colocate".into());
    if decode_gpus.is_none() {
        if let Some(gpus) = prefill_gpus {
            notes.push(format!(
                "wrote roles.decode.gpus: {} (v1 inherited prefill's)",
                show(&gpus)
            ));
            tree::insert_after(decode, "workers", tree::named("gpus", nodes_span), gpus);
        }
    }
}

/// A `type: null` (srtctl's merge deletes the key, which leaves v1's default engine),
/// or a zip list's null entries, written as that default: srt's own default differs.
fn v1_default_for_nulls(type_value: &mut Node, notes: &mut Vec<String>) {
    let mut filled = false;
    let mut fill = |n: &mut Node| {
        if n.value == Value::Null {
            n.value = Value::Str(V1_ENGINE_DEFAULT.into());
            filled = true;
        }
    };
    match &mut type_value.value {
        Value::Seq(items) => items.iter_mut().for_each(&mut fill),
        _ => fill(type_value),
    }
    if filled {
        notes.push(format!(
            "backend.type: null -> engine: {V1_ENGINE_DEFAULT} (srtctl v1's default, which a null leaves)"
        ));
    }
}

/// `backend:` becomes `engine:`: its `type` alone as a name, with engine-wide keys
/// (`connector`, ...) as a mapping; an absent type is srtctl v1's default engine.
fn fold_engine(recipe: &mut Node, engine: &str, notes: &mut Vec<String>) {
    let anchor = key_before(recipe, "backend");
    let Some((key, mut backend)) = tree::take(recipe, "backend") else {
        if !tree::has(recipe, "engine") {
            let at = recipe.span;
            tree::insert_after(
                recipe,
                "resources",
                tree::named("engine", at),
                tree::string(engine, at),
            );
            notes.push(format!("engine: {engine} (srtctl v1's default)"));
        }
        return;
    };
    let type_node = tree::take(&mut backend, "type");
    if type_node.is_none() {
        notes.push(format!("engine: {engine} (srtctl v1's default)"));
    }
    let (type_key, mut type_value) = type_node.unwrap_or_else(|| {
        (
            tree::named("type", key.span),
            tree::string(engine, key.span),
        )
    });
    v1_default_for_nulls(&mut type_value, notes);
    let rest = tree::entries(&backend)
        .map(<[_]>::to_vec)
        .unwrap_or_default();
    let value = if rest.is_empty() {
        type_value
    } else {
        let mut entries = vec![(type_key, type_value)];
        entries.extend(rest);
        tree::map(entries, backend.span)
    };
    match anchor {
        Some(anchor) => tree::insert_after(recipe, &anchor, tree::named("engine", key.span), value),
        None => {
            if let Some(entries) = tree::entries_mut(recipe) {
                entries.insert(0, (tree::named("engine", key.span), value));
            }
        }
    }
    notes.push("backend -> engine".into());
}

/// srtctl v1's frontend is Dynamo when the recipe names none (srt's own default is
/// the vLLM Router), and v1's `sglang` is the SGLang Model Gateway, `sglang-router`.
fn default_frontend(recipe: &mut Node, notes: &mut Vec<String>) {
    let span = recipe.span;
    let frontend = tree::child_map(recipe, "frontend", Some("engine"), span);
    if tree::has(frontend, "type") {
        rename_frontend(recipe, notes);
        return;
    }
    let at = frontend.span;
    tree::insert_after(
        frontend,
        "",
        tree::named("type", at),
        tree::string(V1_FRONTEND_DEFAULT, at),
    );
    notes.push(format!(
        "frontend.type: {V1_FRONTEND_DEFAULT} (srtctl v1's default)"
    ));
}

fn rename_frontend(recipe: &mut Node, notes: &mut Vec<String>) {
    let Some(frontend) = tree::map_mut(recipe, "frontend") else {
        return;
    };
    let Some(node) = tree::get(frontend, "type") else {
        return;
    };
    let at = node.span;
    let name = tree::as_str(node).unwrap_or_default();
    if let Some((old, new)) = FRONTEND_NAMES.iter().find(|(old, _)| *old == name) {
        tree::set(frontend, tree::named("type", at), tree::string(new, at));
        notes.push(format!("frontend.type: {old} -> {new}"));
    }
}

/// v1's `frontend.nginx_container` is 2.0's `nginx_image`.
fn rename_nginx_image(recipe: &mut Node, notes: &mut Vec<String>) {
    let Some(frontend) = tree::map_mut(recipe, "frontend") else {
        return;
    };
    let Some(entries) = tree::entries_mut(frontend) else {
        return;
    };
    if let Some((key, _)) = entries
        .iter_mut()
        .find(|(k, _)| k.name == "nginx_container")
    {
        key.name = "nginx_image".into();
        notes.push("frontend.nginx_container -> frontend.nginx_image".into());
    }
}

/// `infra.etcd_nats_dedicated_node: false` is v1's default (etcd and NATS share a
/// node): dropped, and `infra` with it when nothing else is left.
fn drop_default_infra(recipe: &mut Node, notes: &mut Vec<String>) {
    let Some(infra) = tree::map_mut(recipe, "infra") else {
        return;
    };
    let default =
        tree::get(infra, "etcd_nats_dedicated_node").is_some_and(|n| n.value == Value::Bool(false));
    if !default {
        return;
    }
    tree::take(infra, "etcd_nats_dedicated_node");
    notes.push("dropped infra.etcd_nats_dedicated_node: false (the default)".into());
    if tree::entries(infra).is_some_and(<[_]>::is_empty) {
        tree::take(recipe, "infra");
    }
}

/// srtctl v1's Dynamo is installed at start unless told not to (`dynamo.install`
/// defaults to true, `version` to 0.8.0): written out under the Dynamo frontend, so a
/// v1 recipe means what it meant (srt installs that release too; its own default is
/// to install none).
fn default_dynamo_install(recipe: &mut Node, notes: &mut Vec<String>) {
    let dynamo_frontend = tree::get(recipe, "frontend")
        .and_then(|f| tree::get(f, "type"))
        .and_then(tree::as_str)
        == Some(V1_FRONTEND_DEFAULT);
    if !dynamo_frontend {
        return;
    }
    let span = tree::get(recipe, "frontend").map_or(recipe.span, |f| f.span);
    let section = tree::child_map(recipe, "dynamo", Some("frontend"), span);
    if tree::has(section, "install") {
        return;
    }
    let at = section.span;
    let sourced = ["version", "hash", "wheel", "top_of_tree"]
        .iter()
        .any(|k| tree::has(section, k));
    tree::insert_after(
        section,
        "",
        tree::named("install", at),
        Node {
            span: at,
            value: Value::Bool(true),
        },
    );
    if !sourced {
        tree::insert_after(
            section,
            "install",
            tree::named("version", at),
            tree::string(V1_DYNAMO_VERSION, at),
        );
        notes.push(format!(
            "dynamo.install: true, version: {V1_DYNAMO_VERSION} (srtctl v1's default)"
        ));
    } else {
        notes.push("dynamo.install: true (srtctl v1's default)".into());
    }
}

/// srtctl v1's benchmark `type` defaults to `manual`: no benchmark runs (the deployment
/// is left for the user to measure), whatever else the block says. Dropped, with the
/// keys it held named, so a v1 recipe means what it meant.
fn drop_manual_benchmark(recipe: &mut Node, notes: &mut Vec<String>) {
    let Some(benchmark) = tree::get(recipe, "benchmark") else {
        return;
    };
    if !matches!(benchmark.value, Value::Map(_)) {
        return;
    }
    let written = tree::get(benchmark, "type").is_some();
    let manual = match tree::get(benchmark, "type") {
        None => true,
        Some(k) => tree::as_str(k) == Some("manual"),
    };
    if !manual {
        return;
    }
    let keys: Vec<String> = tree::entries(benchmark)
        .unwrap_or_default()
        .iter()
        .map(|(k, _)| k.name.clone())
        .filter(|k| k != "type")
        .collect();
    tree::take(recipe, "benchmark");
    let unread = match keys.is_empty() {
        true => String::new(),
        false => format!(", its {} unread", keys.join(", ")),
    };
    let why = match written {
        false => "no `type`: srtctl v1's default `manual`",
        true => "`type: manual`",
    };
    notes.push(format!("dropped benchmark ({why}, runs none{unread})"));
}

/// srtctl v1's sa-bench applies the chat template unless told not to
/// (`use_chat_template` defaults to true there, to false in srt): written out, so a
/// v1 recipe means what it meant.
fn default_chat_template(recipe: &mut Node, notes: &mut Vec<String>) {
    let Some(benchmark) = tree::map_mut(recipe, "benchmark") else {
        return;
    };
    let sa_bench = tree::get(benchmark, "type").and_then(tree::as_str) == Some("sa-bench");
    if !sa_bench || tree::has(benchmark, "use_chat_template") {
        return;
    }
    let at = tree::get(benchmark, "type").map_or(benchmark.span, |n| n.span);
    tree::set(
        benchmark,
        tree::named("use_chat_template", at),
        Node {
            span: at,
            value: Value::Bool(true),
        },
    );
    notes.push("benchmark.use_chat_template: true (srtctl v1's default)".into());
}

fn set_schema(recipe: &mut Node, notes: &mut Vec<String>) {
    let span = tree::get(recipe, "schema").map_or(recipe.span, |n| n.span);
    let two = Node {
        span,
        value: Value::Int(2),
    };
    if tree::has(recipe, "schema") {
        tree::set(recipe, tree::named("schema", span), two);
    } else if let Some(entries) = tree::entries_mut(recipe) {
        entries.insert(0, (tree::named("schema", span), two));
    }
    notes.push("set schema: 2".into());
}

/// The entry `key` of the mapping at `path`, removed.
fn take_in(
    recipe: &mut Node,
    path: &[&str],
    key: &str,
) -> Option<(crate::recipe::yaml::Key, Node)> {
    let mut node = recipe;
    for step in path {
        node = tree::map_mut(node, step)?;
    }
    tree::take(node, key)
}

/// The mapping at `path.key`, dropped when left empty.
fn drop_empty(recipe: &mut Node, path: &[&str], key: &str) {
    let mut node = &mut *recipe;
    for step in path {
        let Some(next) = tree::map_mut(node, step) else {
            return;
        };
        node = next;
    }
    if tree::get(node, key)
        .and_then(tree::entries)
        .is_some_and(<[_]>::is_empty)
    {
        tree::take(node, key);
    }
}

fn recipe_roles_mut(recipe: &mut Node) -> Option<&mut Node> {
    tree::map_mut(recipe, "roles")
}

/// The key held before `key` in a mapping (for putting a renamed key where the old
/// one was).
fn key_before(recipe: &Node, key: &str) -> Option<String> {
    let entries = tree::entries(recipe).unwrap_or_default();
    let at = entries.iter().position(|(k, _)| k.name == key)?;
    at.checked_sub(1).map(|i| entries[i].0.name.clone())
}

fn int(node: &Node) -> Option<i64> {
    match node.value {
        Value::Int(i) => Some(i),
        _ => None,
    }
}

fn int_node(i: i64, span: miette::SourceSpan) -> Node {
    Node {
        span,
        value: Value::Int(i),
    }
}

fn show(node: &Node) -> String {
    match &node.value {
        Value::Int(i) => i.to_string(),
        Value::Str(s) => s.clone(),
        other => other.kind().to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recipe::yaml::parse;

    fn migrated(text: &str) -> (Node, Migration) {
        let mut root = parse(text).unwrap();
        let m = migrate(&mut root);
        (root, m)
    }

    fn at<'a>(node: &'a Node, path: &str) -> &'a Node {
        path.split('.').fold(node, |n, step| {
            tree::get(n, step).unwrap_or_else(|| panic!("no {path}"))
        })
    }

    const V1_DISAGG: &str = "\
name: r
resources:
  gpus_per_node: 4
  prefill_nodes: 1
  decode_nodes: 1
  prefill_workers: 2
  decode_workers: 1
  gpus_per_prefill: 2
backend:
  type: sglang
  connector: nixl
  prefill_environment: {A: '1'}
  sglang_config:
    prefill: {tp-size: 2}
    decode: {tp-size: 4}
";

    #[test]
    fn role_fields_fold_into_roles_and_backend_becomes_engine() {
        let (root, m) = migrated(V1_DISAGG);
        assert!(m.was_v1);
        assert_eq!(at(&root, "roles.prefill.nodes").value, Value::Int(1));
        assert_eq!(at(&root, "roles.prefill.workers").value, Value::Int(2));
        assert_eq!(at(&root, "roles.prefill.gpus").value, Value::Int(2));
        assert!(tree::has(at(&root, "roles.prefill.env"), "A"));
        assert_eq!(at(&root, "roles.decode.args.tp-size").value, Value::Int(4));
        assert_eq!(at(&root, "engine.type").value, Value::Str("sglang".into()));
        assert_eq!(
            at(&root, "engine.connector").value,
            Value::Str("nixl".into())
        );
        assert!(!tree::has(at(&root, "resources"), "prefill_nodes"));
        assert_eq!(at(&root, "schema").value, Value::Int(2));
        assert_eq!(
            at(&root, "frontend.type").value,
            Value::Str("dynamo".into())
        );
    }

    #[test]
    fn moved_values_keep_their_v1_spans() {
        let (root, _) = migrated(V1_DISAGG);
        let tp = at(&root, "roles.decode.args.tp-size");
        let offset = tp.span.offset();
        assert_eq!(&V1_DISAGG[offset..offset + 1], "4");
    }

    #[test]
    fn an_engine_with_nothing_but_its_type_is_a_name() {
        let (root, m) = migrated("resources: {agg_nodes: 1, agg_workers: 1}\nbackend: {type: vllm, vllm_config: {aggregated: {}}}\n");
        assert_eq!(at(&root, "engine").value, Value::Str("vllm".into()));
        assert!(m.notes.iter().any(|n| n.contains("roles.agg")));
    }

    /// srtctl's merge deletes a key an override sets to null, so a null `type` (or a
    /// zip list's null entry) leaves v1's default engine, which srt's differs from.
    #[test]
    fn a_null_engine_type_is_v1_default_written_out() {
        let (root, m) = migrated(
            "resources: {agg_nodes: 1, agg_workers: 1}\nbackend: {type: [vllm, null], vllm_config: {aggregated: {}}}\n",
        );
        let names: Vec<Value> = match &at(&root, "engine").value {
            Value::Seq(items) => items.iter().map(|n| n.value.clone()).collect(),
            other => panic!("{other:?}"),
        };
        assert_eq!(
            names,
            [Value::Str("vllm".into()), Value::Str("sglang".into())]
        );
        assert!(m.notes.iter().any(|n| n.contains("null -> engine: sglang")));
        let (root, _) =
            migrated("resources: {agg_nodes: 1, agg_workers: 1}\nbackend: {type: null}\n");
        assert_eq!(at(&root, "engine").value, Value::Str("sglang".into()));
    }

    #[test]
    fn v1_decode_on_the_prefill_nodes_is_colocate_with_gpus_written_out() {
        let (root, m) = migrated(
            "resources: {gpus_per_node: 8, prefill_nodes: 1, decode_nodes: 0, prefill_workers: 2, decode_workers: 1}\nbackend: {type: vllm}\n",
        );
        assert_eq!(
            at(&root, "roles.decode.nodes").value,
            Value::Str("colocate".into())
        );
        assert_eq!(at(&root, "roles.prefill.gpus").value, Value::Int(4));
        assert_eq!(at(&root, "roles.decode.gpus").value, Value::Int(4));
        assert!(
            m.notes.iter().any(|n| n.contains("colocate")),
            "{:?}",
            m.notes
        );
    }

    #[test]
    fn v1_defaults_are_written_out_and_old_frontend_names_renamed() {
        let (root, _) = migrated("resources: {agg_nodes: 1, agg_workers: 1}\n");
        assert_eq!(at(&root, "engine").value, Value::Str("sglang".into()));
        assert_eq!(
            at(&root, "frontend.type").value,
            Value::Str("dynamo".into())
        );
        let (root, _) = migrated("frontend: {type: sglang}\nbackend: {type: sglang}\n");
        assert_eq!(
            at(&root, "frontend.type").value,
            Value::Str("sglang-router".into())
        );
    }

    #[test]
    fn nginx_container_is_nginx_image_and_default_infra_is_dropped() {
        let (root, m) = migrated(
            "resources: {agg_nodes: 1, agg_workers: 1}\nfrontend: {type: dynamo, nginx_container: nginx:1.27}\ninfra: {etcd_nats_dedicated_node: false}\n",
        );
        assert_eq!(
            at(&root, "frontend.nginx_image").value,
            Value::Str("nginx:1.27".into())
        );
        assert!(!tree::has(&root, "infra"));
        assert!(m
            .notes
            .iter()
            .any(|n| n.contains("etcd_nats_dedicated_node")));
        let (root, _) = migrated(
            "resources: {agg_nodes: 1, agg_workers: 1}\ninfra: {etcd_nats_dedicated_node: true}\n",
        );
        assert_eq!(
            at(&root, "infra.etcd_nats_dedicated_node").value,
            Value::Bool(true)
        );
    }

    /// v1's benchmark `type` defaults to `manual`: none runs, and the block is dropped
    /// with its keys named; a typed benchmark stays.
    #[test]
    fn a_manual_benchmark_is_dropped_and_said() {
        let v1 = "resources: {agg_nodes: 1, agg_workers: 1}\n";
        let (root, m) = migrated(&format!("{v1}benchmark: {{isl: 1024, osl: 8}}\n"));
        assert!(!tree::has(&root, "benchmark"));
        assert!(
            m.notes.iter().any(|n| n
                == "dropped benchmark (no `type`: srtctl v1's default `manual`, runs none, its isl, osl unread)"),
            "{:?}",
            m.notes
        );
        let (root, m) = migrated(&format!("{v1}benchmark: {{type: manual}}\n"));
        assert!(!tree::has(&root, "benchmark"));
        assert!(m
            .notes
            .iter()
            .any(|n| n == "dropped benchmark (`type: manual`, runs none)"));
        let (root, _) = migrated(&format!("{v1}benchmark: {{type: sa-bench, isl: 64}}\n"));
        assert_eq!(at(&root, "benchmark.isl").value, Value::Int(64));
    }

    #[test]
    fn v1_s_dynamo_install_default_is_written_out_under_dynamo() {
        let (root, m) = migrated("resources: {agg_nodes: 1, agg_workers: 1}\n");
        assert_eq!(at(&root, "dynamo.install").value, Value::Bool(true));
        assert_eq!(
            at(&root, "dynamo.version").value,
            Value::Str("0.8.0".into())
        );
        assert!(m.notes.iter().any(|n| n.contains("dynamo.install")));
        let (root, _) = migrated("resources: {agg_nodes: 1, agg_workers: 1}\ndynamo: {wheel: x}\n");
        assert_eq!(at(&root, "dynamo.install").value, Value::Bool(true));
        assert!(!tree::has(at(&root, "dynamo"), "version"));
        let (root, _) =
            migrated("resources: {agg_nodes: 1, agg_workers: 1}\ndynamo: {install: false}\n");
        assert_eq!(at(&root, "dynamo.install").value, Value::Bool(false));
        let (root, _) = migrated("frontend: {type: sglang}\nbackend: {type: sglang}\n");
        assert!(!tree::has(&root, "dynamo"));
    }

    #[test]
    fn sa_bench_without_use_chat_template_means_v1_s_default() {
        let (root, m) =
            migrated("resources: {agg_nodes: 1, agg_workers: 1}\nbenchmark: {type: sa-bench}\n");
        assert_eq!(
            at(&root, "benchmark.use_chat_template").value,
            Value::Bool(true)
        );
        assert!(m.notes.iter().any(|n| n.contains("use_chat_template")));
        let (root, _) = migrated("resources: {agg_nodes: 1, agg_workers: 1}\nbenchmark: {type: sa-bench, use_chat_template: false}\n");
        assert_eq!(
            at(&root, "benchmark.use_chat_template").value,
            Value::Bool(false)
        );
    }

    #[test]
    fn flags_srtctl_v1_sets_itself_are_read_as_it_reads_them() {
        let (root, m) = migrated(
            "resources: {prefill_nodes: 1, decode_nodes: 1, prefill_workers: 1, decode_workers: 1}\n\
             backend:\n  type: sglang\n  sglang_config:\n\
             \x20   prefill: {model-path: /x, host: 0.0.0.0, disaggregation-mode: prefill, disaggregation-transfer-backend: mooncake, page-size: 64}\n\
             \x20   decode: {nccl_port: 1, host: 10.0.0.1, disaggregation-mode: prefill}\n",
        );
        let prefill = at(&root, "roles.prefill.args");
        let names: Vec<_> = tree::entries(prefill)
            .unwrap()
            .iter()
            .map(|(k, _)| k.name.as_str())
            .collect();
        assert_eq!(names, ["page-size", "connector"]);
        assert_eq!(
            at(&root, "roles.prefill.args.connector").value,
            Value::Str("mooncake".into())
        );
        // A mode other than the role's, a host other than srtctl's, are left for srt
        // to refuse.
        let decode = at(&root, "roles.decode.args");
        let names: Vec<_> = tree::entries(decode)
            .unwrap()
            .iter()
            .map(|(k, _)| k.name.as_str())
            .collect();
        assert_eq!(names, ["host", "disaggregation-mode"]);
        assert!(
            m.notes.iter().any(|n| n.contains("nccl_port")),
            "{:?}",
            m.notes
        );
    }

    #[test]
    fn a_variant_that_removes_the_frontend_leaves_srtctls_default() {
        let mut variant = parse("frontend: null\nresources: {prefill_nodes: 2}\n").unwrap();
        let m = migrate_part(&mut variant, Part::Variant("sglang"));
        assert_eq!(
            at(&variant, "frontend.type").value,
            Value::Str("dynamo".into())
        );
        assert!(
            m.notes.iter().any(|n| n.contains("frontend: null")),
            "{:?}",
            m.notes
        );
    }

    #[test]
    fn a_2_0_recipe_is_left_alone() {
        let text = "schema: 2\nengine: sglang\nroles: {agg: {nodes: 1, workers: 1}}\n";
        let (root, m) = migrated(text);
        assert!(!m.was_v1);
        assert!(m.notes.is_empty());
        assert_eq!(root, parse(text).unwrap());
    }
}
