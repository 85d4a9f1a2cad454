//! Argv parsing for `vllm serve`, following vLLM's argparse rules.
//!
//! vLLM's `FlexibleArgumentParser` accepts hundreds of flags. The simulator knows the arity
//! of the flags that shape a deployment (and of common switches, so that a switch is not
//! mistaken for a valued flag that swallows the next token); any other flag is accepted
//! generically: `--x value` is valued when the next token does not start with `-` (or is a
//! negative number), otherwise `--x` is a switch. Like vLLM's parser it also accepts
//! `--flag=value`, underscores in flag names (`--max_model_len`), the short aliases
//! (`-tp`, `-dp`, `-dpl`, …), attached values for two-character short options (`-n2`),
//! `--no-<switch>` negations, and dotted JSON sub-keys
//! (`--kv-transfer-config.kv_role kv_both`).

use std::collections::HashMap;

use serde_json::{Map, Value};

/// A command line vLLM's parser would reject (argparse exits 2 on these).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct UsageError(pub String);

/// A flag the simulator does not interpret, kept for logging.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExtraFlag {
    /// Canonical name without leading dashes (`enforce-eager`, or the short form `O`).
    pub name: String,
    /// The value, or `None` for a switch.
    pub value: Option<String>,
}

/// The `vllm serve` arguments the simulator interprets, with vLLM's defaults applied.
#[derive(Debug, Clone, PartialEq)]
pub struct ServeArgs {
    /// The positional model (or `--model`).
    pub model: String,
    /// `--host`; `None` means all interfaces.
    pub host: Option<String>,
    /// `--port` (8000).
    pub port: u16,
    /// `--headless`: no API server in this process.
    pub headless: bool,
    /// `--data-parallel-size/-dp` (1).
    pub data_parallel_size: u32,
    /// `--data-parallel-size-local/-dpl`.
    pub data_parallel_size_local: Option<u32>,
    /// `--data-parallel-start-rank/-dpr`.
    pub data_parallel_start_rank: Option<u32>,
    /// `--data-parallel-rank/-dpn` (implies external LB).
    pub data_parallel_rank: Option<u32>,
    /// `--data-parallel-address/-dpa`.
    pub data_parallel_address: Option<String>,
    /// `--data-parallel-rpc-port/-dpp` (29550).
    pub data_parallel_rpc_port: u16,
    /// `--data-parallel-hybrid-lb/-dph`.
    pub data_parallel_hybrid_lb: bool,
    /// `--data-parallel-external-lb/-dpe`.
    pub data_parallel_external_lb: bool,
    /// `--data-parallel-backend/-dpb` (`mp` or `ray`).
    pub data_parallel_backend: String,
    /// `--nnodes/-n` (1).
    pub nnodes: u32,
    /// `--node-rank/-r` (0).
    pub node_rank: u32,
    /// `--master-addr` (127.0.0.1).
    pub master_addr: String,
    /// `--master-port` (29501).
    pub master_port: u16,
    /// `--tensor-parallel-size/-tp` (1).
    pub tensor_parallel_size: u32,
    /// `--pipeline-parallel-size/-pp` (1).
    pub pipeline_parallel_size: u32,
    /// `--prefill-context-parallel-size/-pcp` (1).
    pub prefill_context_parallel_size: u32,
    /// `--enable-expert-parallel/-ep`; the simulator's stand-in for "the model is MoE".
    pub enable_expert_parallel: bool,
    /// `--device-ids 0,1,2,3`.
    pub device_ids: Option<Vec<u32>>,
    /// `--served-model-name` (nargs `+`); empty means "the model path".
    pub served_model_name: Vec<String>,
    /// `--kv-transfer-config`, as the JSON object given (dotted sub-keys merged in).
    pub kv_transfer_config: Option<Value>,
    /// `--api-server-count/-asc`.
    pub api_server_count: Option<u32>,
    /// `--disable-log-stats`.
    pub disable_log_stats: bool,
    /// `--max-model-len` (accepts `32k`, `1M`, `-1`, `auto`); `None` when unset or auto.
    pub max_model_len: Option<u64>,
    /// `--enable-scale-out`: the render and token-in routes answer (403 without it).
    pub enable_scale_out: bool,
    /// Every other flag, in order.
    pub extra: Vec<ExtraFlag>,
}

impl ServeArgs {
    /// The names the model is served under: `--served-model-name`, else the model path.
    pub fn served_names(&self) -> Vec<String> {
        if self.served_model_name.is_empty() {
            vec![self.model.clone()]
        } else {
            self.served_model_name.clone()
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Arity {
    /// `store_true` (or `BooleanOptionalAction`, which also accepts `--no-x`).
    Switch,
    /// Exactly one value.
    One,
    /// `nargs='+'`.
    Many,
}

struct Spec {
    long: &'static str,
    short: &'static [&'static str],
    arity: Arity,
}

const fn sw(long: &'static str, short: &'static [&'static str]) -> Spec {
    Spec {
        long,
        short,
        arity: Arity::Switch,
    }
}

const fn one(long: &'static str, short: &'static [&'static str]) -> Spec {
    Spec {
        long,
        short,
        arity: Arity::One,
    }
}

/// Flags whose arity the simulator knows. The first block is interpreted; the rest are
/// listed so that they parse as vLLM parses them.
const SPECS: &[Spec] = &[
    one("model", &[]),
    one("host", &[]),
    one("port", &[]),
    sw("headless", &[]),
    one("data-parallel-size", &["-dp"]),
    one("data-parallel-size-local", &["-dpl"]),
    one("data-parallel-start-rank", &["-dpr"]),
    one("data-parallel-rank", &["-dpn"]),
    one("data-parallel-address", &["-dpa"]),
    one("data-parallel-rpc-port", &["-dpp"]),
    sw("data-parallel-hybrid-lb", &["-dph"]),
    sw("data-parallel-external-lb", &["-dpe"]),
    one("data-parallel-backend", &["-dpb"]),
    one("nnodes", &["-n"]),
    one("node-rank", &["-r"]),
    one("master-addr", &[]),
    one("master-port", &[]),
    one("tensor-parallel-size", &["-tp"]),
    one("pipeline-parallel-size", &["-pp"]),
    one("prefill-context-parallel-size", &["-pcp"]),
    sw("enable-expert-parallel", &["-ep"]),
    one("device-ids", &[]),
    Spec {
        long: "served-model-name",
        short: &[],
        arity: Arity::Many,
    },
    one("kv-transfer-config", &[]),
    one("api-server-count", &["-asc"]),
    sw("disable-log-stats", &[]),
    one("max-model-len", &[]),
    sw("enable-scale-out", &[]),
    // Known to parse, not interpreted.
    one("decode-context-parallel-size", &["-dcp"]),
    sw("data-parallel-multi-port-external-lb", &["-dpm"]),
    one("data-parallel-supervisor-port", &[]),
    one("distributed-executor-backend", &[]),
    one("quantization", &["-q"]),
    one("compilation-config", &["-O"]),
    one("dtype", &[]),
    one("seed", &[]),
    one("tokenizer", &[]),
    one("revision", &[]),
    one("load-format", &[]),
    one("download-dir", &[]),
    one("gpu-memory-utilization", &[]),
    one("max-num-seqs", &[]),
    one("max-num-batched-tokens", &[]),
    one("block-size", &[]),
    one("kv-cache-dtype", &[]),
    one("swap-space", &[]),
    one("speculative-config", &[]),
    one("hf-overrides", &[]),
    one("all2all-backend", &[]),
    one("uvicorn-log-level", &[]),
    one("api-key", &[]),
    one("chat-template", &[]),
    one("reasoning-parser", &[]),
    one("tool-call-parser", &[]),
    one("config", &[]),
    sw("trust-remote-code", &[]),
    sw("enforce-eager", &[]),
    sw("enable-prefix-caching", &[]),
    sw("enable-chunked-prefill", &[]),
    sw("enable-eplb", &[]),
    sw("enable-dbo", &[]),
    sw("async-scheduling", &[]),
    sw("disable-custom-all-reduce", &[]),
    sw("disable-nccl-for-dp-synchronization", &[]),
    sw("disable-log-requests", &[]),
    sw("enable-log-requests", &[]),
    sw("disable-uvicorn-access-log", &[]),
    sw("disable-frontend-multiprocessing", &[]),
    sw("enable-auto-tool-choice", &[]),
    sw("enable-lora", &[]),
    sw("enable-sleep-mode", &[]),
    sw("skip-tokenizer-init", &[]),
    sw("enable-prompt-tokens-details", &[]),
    sw("enable-server-load-tracking", &[]),
    sw("enable-force-include-usage", &[]),
    sw("enable-request-id-headers", &[]),
    sw("disable-fastapi-docs", &[]),
    sw("help", &["-h"]),
];

fn spec_by_long(name: &str) -> Option<&'static Spec> {
    SPECS.iter().find(|s| s.long == name)
}

fn spec_by_short(tok: &str) -> Option<&'static Spec> {
    SPECS.iter().find(|s| s.short.contains(&tok))
}

/// argparse's test for a token that is a value even though it starts with `-`.
fn is_negative_number(tok: &str) -> bool {
    let Some(rest) = tok.strip_prefix('-') else {
        return false;
    };
    if rest.is_empty() {
        return false;
    }
    let mut parts = rest.splitn(2, '.');
    let int = parts.next().unwrap_or("");
    match parts.next() {
        None => int.chars().all(|c| c.is_ascii_digit()),
        Some(frac) => {
            int.chars().all(|c| c.is_ascii_digit())
                && !frac.is_empty()
                && frac.chars().all(|c| c.is_ascii_digit())
        }
    }
}

fn looks_like_flag(tok: &str) -> bool {
    tok.starts_with('-') && tok.len() > 1 && !is_negative_number(tok)
}

/// One occurrence of an option on the command line.
#[derive(Debug)]
struct Occurrence {
    /// Canonical long name (or the short spelling for unknown short flags).
    name: String,
    /// Dotted sub-key path (`--kv-transfer-config.kv_role` → `kv_role`).
    subkey: Option<String>,
    values: Vec<String>,
    /// `Some(false)` for `--no-x`.
    switch: Option<bool>,
    known: bool,
}

/// Parses `serve <model> [flags...]` (the argv after the program name).
pub fn parse(argv: &[String]) -> Result<ServeArgs, UsageError> {
    let Some(sub) = argv.first() else {
        return Err(UsageError(
            "the following arguments are required: subparser".into(),
        ));
    };
    if sub != "serve" {
        return Err(UsageError(format!(
            "argument subparser: invalid choice: '{sub}' (the simulator implements only 'serve')"
        )));
    }
    let (occurrences, positionals) = tokenize(&argv[1..])?;
    build(occurrences, positionals)
}

fn tokenize(toks: &[String]) -> Result<(Vec<Occurrence>, Vec<String>), UsageError> {
    let mut occ = Vec::new();
    let mut positionals = Vec::new();
    let mut i = 0;
    while i < toks.len() {
        let tok = &toks[i];
        i += 1;
        if tok == "--" {
            positionals.extend(toks[i..].iter().cloned());
            break;
        }
        if !looks_like_flag(tok) {
            positionals.push(tok.clone());
            continue;
        }
        let (raw_name, inline) = match tok.split_once('=') {
            Some((n, v)) => (n.to_string(), Some(v.to_string())),
            None => (tok.clone(), None),
        };
        let mut inline = inline;
        let (name, subkey, spec, display) = if let Some(long) = raw_name.strip_prefix("--") {
            let (base, subkey) = match long.split_once('.') {
                Some((b, s)) => (b.replace('_', "-"), Some(s.to_string())),
                None => (long.replace('_', "-"), None),
            };
            let spec = spec_by_long(&base);
            (base.clone(), subkey, spec, format!("--{base}"))
        } else if let Some(spec) = spec_by_short(&raw_name) {
            (spec.long.to_string(), None, Some(spec), raw_name.clone())
        } else if inline.is_none()
            && raw_name.len() > 2
            && raw_name.is_char_boundary(2)
            && spec_by_short(&raw_name[..2]).is_some()
        {
            // `-n2`: a two-character short option with its value attached.
            let spec = spec_by_short(&raw_name[..2]).expect("checked");
            inline = Some(raw_name[2..].to_string());
            (
                spec.long.to_string(),
                None,
                Some(spec),
                raw_name[..2].to_string(),
            )
        } else {
            let base = raw_name.trim_start_matches('-').to_string();
            (base, None, None, raw_name.clone())
        };

        // `--no-x` for a known switch.
        if spec.is_none() && subkey.is_none() {
            if let Some(pos) = name.strip_prefix("no-") {
                if let Some(s) = spec_by_long(pos).filter(|s| s.arity == Arity::Switch) {
                    if inline.is_some() {
                        return Err(UsageError(format!(
                            "argument {display}: ignored explicit argument '{}'",
                            inline.unwrap_or_default()
                        )));
                    }
                    occ.push(Occurrence {
                        name: s.long.to_string(),
                        subkey: None,
                        values: vec![],
                        switch: Some(false),
                        known: true,
                    });
                    continue;
                }
            }
        }

        let arity = match (spec, &subkey) {
            (_, Some(_)) => Arity::One,
            (Some(s), None) => s.arity,
            (None, None) => {
                if inline.is_some() {
                    Arity::One
                } else if name.starts_with("no-") {
                    Arity::Switch
                } else {
                    match toks.get(i) {
                        Some(next) if !looks_like_flag(next) => Arity::One,
                        _ => Arity::Switch,
                    }
                }
            }
        };
        let values = match arity {
            Arity::Switch => {
                if let Some(v) = inline {
                    return Err(UsageError(format!(
                        "argument {display}: ignored explicit argument '{v}'"
                    )));
                }
                vec![]
            }
            Arity::One => match inline {
                Some(v) => vec![v],
                None => match toks.get(i) {
                    Some(next) if !looks_like_flag(next) => {
                        i += 1;
                        vec![next.clone()]
                    }
                    _ => {
                        return Err(UsageError(format!(
                            "argument {display}: expected one argument"
                        )))
                    }
                },
            },
            Arity::Many => match inline {
                Some(v) => vec![v],
                None => {
                    let mut vs = Vec::new();
                    while let Some(next) = toks.get(i).filter(|t| !looks_like_flag(t)) {
                        vs.push(next.clone());
                        i += 1;
                    }
                    if vs.is_empty() {
                        return Err(UsageError(format!(
                            "argument {display}: expected at least one argument"
                        )));
                    }
                    vs
                }
            },
        };
        occ.push(Occurrence {
            name,
            subkey,
            switch: (arity == Arity::Switch).then_some(true),
            values,
            known: spec.is_some(),
        });
    }
    Ok((occ, positionals))
}

fn invalid(flag: &str, kind: &str, value: &str) -> UsageError {
    UsageError(format!(
        "argument --{flag}: invalid {kind} value: '{value}'"
    ))
}

fn parse_u32(flag: &str, v: &str) -> Result<u32, UsageError> {
    let n: i64 = v.trim().parse().map_err(|_| invalid(flag, "int", v))?;
    u32::try_from(n).map_err(|_| UsageError(format!("argument --{flag}: must be >= 0, got {n}")))
}

fn parse_port(flag: &str, v: &str) -> Result<u16, UsageError> {
    let n: i64 = v.trim().parse().map_err(|_| invalid(flag, "int", v))?;
    u16::try_from(n).map_err(|_| {
        UsageError(format!(
            "argument --{flag}: port must be between 0 and 65535, got {n}"
        ))
    })
}

/// vLLM's `human_readable_int`: `1k` = 1000, `1K` = 1024 (likewise m/M, g/G), decimals with
/// decimal suffixes, and `-1`/`auto` for "derive from the model".
fn parse_human_int(flag: &str, v: &str) -> Result<Option<u64>, UsageError> {
    let t = v.trim();
    if t == "-1" || t.eq_ignore_ascii_case("auto") {
        return Ok(None);
    }
    let (num, mult) = match t.chars().last() {
        Some('k') => (&t[..t.len() - 1], 1e3),
        Some('m') => (&t[..t.len() - 1], 1e6),
        Some('g') => (&t[..t.len() - 1], 1e9),
        Some('K') => (&t[..t.len() - 1], 1024.0),
        Some('M') => (&t[..t.len() - 1], 1024.0 * 1024.0),
        Some('G') => (&t[..t.len() - 1], 1024.0 * 1024.0 * 1024.0),
        _ => (t, 1.0),
    };
    let x: f64 = num
        .parse()
        .map_err(|_| invalid(flag, "human_readable_int", v))?;
    let total = x * mult;
    if !(total.is_finite() && total >= 1.0 && total.fract() == 0.0) {
        return Err(invalid(flag, "human_readable_int", v));
    }
    Ok(Some(total as u64))
}

fn parse_device_ids(v: &str) -> Result<Vec<u32>, UsageError> {
    let mut ids = Vec::new();
    for part in v.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let id: u32 = part
            .parse()
            .map_err(|_| invalid("device-ids", "int", part))?;
        if ids.contains(&id) {
            return Err(UsageError(format!(
                "argument --device-ids: device {id} is listed twice in '{v}'"
            )));
        }
        ids.push(id);
    }
    Ok(ids)
}

/// Sets `path` (dot-separated) in `obj` to `value`, parsed as JSON when it parses.
fn set_dotted(obj: &mut Map<String, Value>, path: &str, value: &str) {
    let parsed = serde_json::from_str::<Value>(value).unwrap_or(Value::String(value.into()));
    let mut cur = obj;
    let mut parts = path.split('.').peekable();
    while let Some(key) = parts.next() {
        if parts.peek().is_none() {
            cur.insert(key.to_string(), parsed);
            return;
        }
        let entry = cur
            .entry(key.to_string())
            .or_insert_with(|| Value::Object(Map::new()));
        if !entry.is_object() {
            *entry = Value::Object(Map::new());
        }
        cur = entry.as_object_mut().expect("object");
    }
}

fn build(occ: Vec<Occurrence>, positionals: Vec<String>) -> Result<ServeArgs, UsageError> {
    // Last occurrence wins, as with argparse.
    let mut last: HashMap<&str, &Occurrence> = HashMap::new();
    let mut extra = Vec::new();
    let mut kv_dotted: Vec<(&str, &str)> = Vec::new();
    for o in &occ {
        if o.subkey.is_some() {
            if o.name == "kv-transfer-config" {
                kv_dotted.push((o.subkey.as_deref().unwrap_or(""), &o.values[0]));
            } else {
                extra.push(ExtraFlag {
                    name: format!("{}.{}", o.name, o.subkey.as_deref().unwrap_or("")),
                    value: o.values.first().cloned(),
                });
            }
            continue;
        }
        if !o.known {
            extra.push(ExtraFlag {
                name: o.name.clone(),
                value: o.values.first().cloned(),
            });
            continue;
        }
        last.insert(o.name.as_str(), o);
    }
    if last.contains_key("help") {
        return Err(UsageError("help requested".into()));
    }
    let val = |name: &str| last.get(name).and_then(|o| o.values.first().cloned());
    let flag = |name: &str| last.get(name).and_then(|o| o.switch).unwrap_or(false);
    let u32_or = |name: &str, d: u32| -> Result<u32, UsageError> {
        val(name).map_or(Ok(d), |v| parse_u32(name, &v))
    };
    let opt_u32 = |name: &str| -> Result<Option<u32>, UsageError> {
        val(name).map(|v| parse_u32(name, &v)).transpose()
    };
    let port_or = |name: &str, d: u16| -> Result<u16, UsageError> {
        val(name).map_or(Ok(d), |v| parse_port(name, &v))
    };

    let mut pos = positionals.into_iter();
    let model_tag = pos.next();
    let rest: Vec<String> = pos.collect();
    if !rest.is_empty() {
        return Err(UsageError(format!(
            "unrecognized arguments: {}",
            rest.join(" ")
        )));
    }
    let model = match (model_tag, val("model")) {
        (Some(m), _) => m,
        (None, Some(m)) => m,
        (None, None) => {
            return Err(UsageError(
                "the following arguments are required: model_tag (the simulator needs an \
                 explicit model; vLLM would fall back to a default model)"
                    .into(),
            ))
        }
    };

    let backend = val("data-parallel-backend").unwrap_or_else(|| "mp".into());
    if backend != "mp" && backend != "ray" {
        return Err(UsageError(format!(
            "argument --data-parallel-backend/-dpb: invalid choice: '{backend}' (choose from 'mp', 'ray')"
        )));
    }

    let kv_transfer_config = {
        let mut base = match val("kv-transfer-config") {
            None => None,
            Some(raw) => match serde_json::from_str::<Value>(&raw) {
                Ok(Value::Object(m)) => Some(m),
                _ => {
                    return Err(UsageError(format!(
                        "argument --kv-transfer-config: Value {raw} cannot be converted to \
                         KVTransferConfig (expected a JSON object)"
                    )))
                }
            },
        };
        if !kv_dotted.is_empty() {
            let m = base.get_or_insert_with(Map::new);
            for (path, v) in kv_dotted {
                set_dotted(m, path, v);
            }
        }
        base.map(Value::Object)
    };

    Ok(ServeArgs {
        model,
        host: val("host"),
        port: port_or("port", 8000)?,
        headless: flag("headless"),
        data_parallel_size: u32_or("data-parallel-size", 1)?,
        data_parallel_size_local: opt_u32("data-parallel-size-local")?,
        data_parallel_start_rank: opt_u32("data-parallel-start-rank")?,
        data_parallel_rank: opt_u32("data-parallel-rank")?,
        data_parallel_address: val("data-parallel-address"),
        data_parallel_rpc_port: port_or("data-parallel-rpc-port", 29550)?,
        data_parallel_hybrid_lb: flag("data-parallel-hybrid-lb"),
        data_parallel_external_lb: flag("data-parallel-external-lb"),
        data_parallel_backend: backend,
        nnodes: u32_or("nnodes", 1)?,
        node_rank: u32_or("node-rank", 0)?,
        master_addr: val("master-addr").unwrap_or_else(|| "127.0.0.1".into()),
        master_port: port_or("master-port", 29501)?,
        tensor_parallel_size: u32_or("tensor-parallel-size", 1)?,
        pipeline_parallel_size: u32_or("pipeline-parallel-size", 1)?,
        prefill_context_parallel_size: u32_or("prefill-context-parallel-size", 1)?,
        enable_expert_parallel: flag("enable-expert-parallel"),
        device_ids: val("device-ids")
            .map(|v| parse_device_ids(&v))
            .transpose()?,
        served_model_name: last
            .get("served-model-name")
            .map(|o| o.values.clone())
            .unwrap_or_default(),
        kv_transfer_config,
        api_server_count: opt_u32("api-server-count")?,
        disable_log_stats: flag("disable-log-stats"),
        max_model_len: val("max-model-len")
            .map(|v| parse_human_int("max-model-len", &v))
            .transpose()?
            .flatten(),
        enable_scale_out: flag("enable-scale-out"),
        extra,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn argv(s: &[&str]) -> Vec<String> {
        s.iter().map(std::string::ToString::to_string).collect()
    }

    fn p(s: &[&str]) -> Result<ServeArgs, UsageError> {
        parse(&argv(s))
    }

    #[test]
    fn brief_example_parses() {
        let a = p(&[
            "serve",
            "/model",
            "--host",
            "0.0.0.0",
            "--port",
            "6100",
            "--data-parallel-size-local",
            "4",
            "--data-parallel-start-rank",
            "0",
            "--data-parallel-address",
            "10.0.0.1",
            "--data-parallel-rpc-port",
            "8400",
            "--data-parallel-hybrid-lb",
            "--data-parallel-size",
            "8",
            "--device-ids",
            "0,1,2,3",
            "--enable-expert-parallel",
            "--kv-transfer-config",
            r#"{"kv_connector":"NixlConnector","kv_role":"kv_both"}"#,
            "--served-model-name",
            "model",
            "--tensor-parallel-size",
            "1",
        ])
        .unwrap();
        assert_eq!(a.model, "/model");
        assert_eq!(a.host.as_deref(), Some("0.0.0.0"));
        assert_eq!(a.port, 6100);
        assert_eq!(a.data_parallel_size_local, Some(4));
        assert_eq!(a.data_parallel_start_rank, Some(0));
        assert_eq!(a.data_parallel_address.as_deref(), Some("10.0.0.1"));
        assert_eq!(a.data_parallel_rpc_port, 8400);
        assert!(a.data_parallel_hybrid_lb);
        assert_eq!(a.data_parallel_size, 8);
        assert_eq!(a.device_ids, Some(vec![0, 1, 2, 3]));
        assert!(a.enable_expert_parallel);
        assert_eq!(a.served_model_name, vec!["model"]);
        assert_eq!(a.tensor_parallel_size, 1);
        assert_eq!(
            a.kv_transfer_config.unwrap()["kv_connector"],
            Value::String("NixlConnector".into())
        );
        assert!(a.extra.is_empty());
    }

    #[test]
    fn defaults_match_vllm() {
        let a = p(&["serve", "m"]).unwrap();
        assert_eq!(a.port, 8000);
        assert_eq!(a.host, None);
        assert_eq!(a.data_parallel_size, 1);
        assert_eq!(a.data_parallel_rpc_port, 29550);
        assert_eq!(a.master_port, 29501);
        assert_eq!(a.master_addr, "127.0.0.1");
        assert_eq!(a.data_parallel_backend, "mp");
        assert_eq!(a.served_names(), vec!["m"]);
    }

    #[test]
    fn short_aliases_equals_and_underscores() {
        let a = p(&[
            "serve",
            "m",
            "-tp",
            "2",
            "-pp=2",
            "-dp",
            "4",
            "-dpl",
            "2",
            "-dpr",
            "2",
            "-dph",
            "-n2",
            "-r",
            "1",
            "-ep",
            "-asc",
            "3",
            "--max_model_len=32k",
            "-dpb",
            "mp",
        ])
        .unwrap();
        assert_eq!(a.tensor_parallel_size, 2);
        assert_eq!(a.pipeline_parallel_size, 2);
        assert_eq!(a.data_parallel_size, 4);
        assert_eq!(a.data_parallel_size_local, Some(2));
        assert_eq!(a.data_parallel_start_rank, Some(2));
        assert!(a.data_parallel_hybrid_lb);
        assert_eq!(a.nnodes, 2);
        assert_eq!(a.node_rank, 1);
        assert!(a.enable_expert_parallel);
        assert_eq!(a.api_server_count, Some(3));
        assert_eq!(a.max_model_len, Some(32_000));
    }

    #[test]
    fn unknown_flags_generic_arity() {
        let a = p(&[
            "serve",
            "m",
            "--foo",
            "bar",
            "--switchy",
            "--seed",
            "-1",
            "--baz",
            "--no-thing",
            "--qux=1",
            "--enforce-eager",
            "--port",
            "9",
        ])
        .unwrap();
        assert_eq!(
            a.extra,
            vec![
                ExtraFlag {
                    name: "foo".into(),
                    value: Some("bar".into())
                },
                ExtraFlag {
                    name: "switchy".into(),
                    value: None
                },
                ExtraFlag {
                    name: "baz".into(),
                    value: None
                },
                ExtraFlag {
                    name: "no-thing".into(),
                    value: None
                },
                ExtraFlag {
                    name: "qux".into(),
                    value: Some("1".into())
                },
            ]
        );
        assert_eq!(a.port, 9);
    }

    #[test]
    fn known_switch_does_not_swallow_model() {
        let a = p(&["serve", "--trust-remote-code", "/m", "--enforce-eager"]).unwrap();
        assert_eq!(a.model, "/m");
    }

    #[test]
    fn served_model_name_is_nargs_plus() {
        let a = p(&["serve", "m", "--served-model-name", "a", "b", "--port", "1"]).unwrap();
        assert_eq!(a.served_model_name, vec!["a", "b"]);
        assert_eq!(a.served_names(), vec!["a", "b"]);
        assert!(p(&["serve", "m", "--served-model-name", "--port", "1"]).is_err());
    }

    #[test]
    fn negation_and_last_wins() {
        let a = p(&[
            "serve",
            "m",
            "--enable-expert-parallel",
            "--no-enable-expert-parallel",
            "--port",
            "1",
            "--port",
            "2",
        ])
        .unwrap();
        assert!(!a.enable_expert_parallel);
        assert_eq!(a.port, 2);
    }

    #[test]
    fn dotted_kv_transfer_config() {
        let a = p(&[
            "serve",
            "m",
            "--kv-transfer-config.kv_connector",
            "MoRIIOConnector",
            "--kv-transfer-config.kv_role=kv_producer",
            "--kv-transfer-config.kv_connector_extra_config.http_port",
            "8000",
        ])
        .unwrap();
        let kv = a.kv_transfer_config.unwrap();
        assert_eq!(kv["kv_connector"], "MoRIIOConnector");
        assert_eq!(kv["kv_role"], "kv_producer");
        assert_eq!(kv["kv_connector_extra_config"]["http_port"], 8000);
    }

    #[test]
    fn usage_errors() {
        let bad: &[&[&str]] = &[
            &[],
            &["run", "m"],
            &["serve"],
            &["serve", "m", "extra"],
            &["serve", "m", "--port", "abc"],
            &["serve", "m", "--port", "70000"],
            &["serve", "m", "--port"],
            &["serve", "m", "--port", "--host", "x"],
            &["serve", "m", "-tp", "-2"],
            &["serve", "m", "--headless=yes"],
            &["serve", "m", "--data-parallel-backend", "slurm"],
            &["serve", "m", "--kv-transfer-config", "{not json"],
            &["serve", "m", "--kv-transfer-config", "[1]"],
            &["serve", "m", "--device-ids", "0,x"],
            &["serve", "m", "--device-ids", "0,0"],
            &["serve", "m", "--max-model-len", "lots"],
        ];
        for b in bad {
            assert!(p(b).is_err(), "{b:?} should be refused");
        }
    }

    #[test]
    fn human_readable_ints() {
        assert_eq!(parse_human_int("x", "1K").unwrap(), Some(1024));
        assert_eq!(parse_human_int("x", "1.5k").unwrap(), Some(1500));
        assert_eq!(parse_human_int("x", "2M").unwrap(), Some(2 * 1024 * 1024));
        assert_eq!(parse_human_int("x", "4096").unwrap(), Some(4096));
        assert_eq!(parse_human_int("x", "-1").unwrap(), None);
        assert_eq!(parse_human_int("x", "auto").unwrap(), None);
    }

    #[test]
    fn negative_numbers() {
        assert!(is_negative_number("-1"));
        assert!(is_negative_number("-0.5"));
        assert!(!is_negative_number("-tp"));
        assert!(!is_negative_number("-"));
        assert!(!is_negative_number("5"));
    }

    #[test]
    fn model_flag_instead_of_positional() {
        let a = p(&["serve", "--model", "/x"]).unwrap();
        assert_eq!(a.model, "/x");
    }
}
