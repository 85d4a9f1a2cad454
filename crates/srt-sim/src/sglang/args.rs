//! `python3 -m sglang.launch_server`'s command line, read by argparse's rules
//! ([`crate::common::argparse`]) from SGLang's own flag catalogs, the ones srt checks
//! recipes against: the newest release whose parser takes the command line (srt
//! checked it against the recipe's release, one of them), and the options the
//! simulator interprets, found by their option names (releases name some destinations
//! differently), with SGLang's defaults.

use std::sync::OnceLock;

use serde_json::Value;

use crate::common::argparse::{Catalog, Converter, OptionSpec, ParseError, Parsed};

include!(concat!(env!("OUT_DIR"), "/sglang_catalogs.rs"));

/// SGLang's option catalogs, newest release first, parsed once.
pub fn catalogs() -> &'static [Catalog] {
    static PARSED: OnceLock<Vec<Catalog>> = OnceLock::new();
    PARSED.get_or_init(|| {
        CATALOG_FILES
            .iter()
            .map(|(_, text)| Catalog::parse_json(text).expect("a shipped SGLang catalog parses"))
            .collect()
    })
}

/// SGLang's `human_readable_int`: a plain integer, or SI (`32k`, `1.5M`) or IEC (`1Ki`)
/// suffixes, case-sensitive; decimals with SI suffixes only.
fn human_readable_int(word: &str, _: &OptionSpec) -> Result<Value, String> {
    let t = word.trim();
    let invalid = || {
        format!(
            "Invalid integer value: '{t}'. Use a plain integer, SI suffixes (1k, 1M), or IEC \
             suffixes (1Ki, 1Mi). Suffixes are case-sensitive."
        )
    };
    const SUFFIXES: &[(&str, u64, bool)] = &[
        ("Ki", 1 << 10, true),
        ("Mi", 1 << 20, true),
        ("Gi", 1 << 30, true),
        ("Ti", 1 << 40, true),
        ("k", 1_000, false),
        ("M", 1_000_000, false),
        ("G", 1_000_000_000, false),
        ("T", 1_000_000_000_000, false),
    ];
    for &(suffix, mult, iec) in SUFFIXES {
        let Some(num) = t.strip_suffix(suffix) else {
            continue;
        };
        let (int, frac) = num.split_once('.').unwrap_or((num, ""));
        let digits = |s: &str| !s.is_empty() && s.chars().all(|c| c.is_ascii_digit());
        if !digits(int) || (num.contains('.') && !digits(frac)) || frac.len() > 30 {
            return Err(invalid());
        }
        if iec && num.contains('.') {
            return Err(format!(
                "Decimals are not allowed with IEC suffixes like '{suffix}'. Use an integer \
                 IEC value such as '{int}{suffix}', or an SI value such as '{num}{}'.",
                &suffix[..1]
            ));
        }
        // int(Decimal(number) * multiplier): exact, truncated.
        let whole: u128 = int.parse().map_err(|_| invalid())?;
        let mut n = whole * u128::from(mult);
        if !frac.is_empty() {
            let f: u128 = frac.parse().map_err(|_| invalid())?;
            n += f * u128::from(mult) / 10u128.pow(frac.len() as u32);
        }
        return i64::try_from(n).map(Value::from).map_err(|_| invalid());
    }
    t.parse::<i64>().map(Value::from).map_err(|_| invalid())
}

/// SGLang's JSON-typed options: the text must be JSON.
fn json_arg(word: &str, o: &OptionSpec) -> Result<Value, String> {
    serde_json::from_str(word).map_err(|e| {
        format!(
            "{} must be JSON: {e}",
            o.flags.first().map_or("the value", String::as_str)
        )
    })
}

/// The converters of the catalog's types that are not argparse's own.
const CONVERTERS: &[(&str, Converter)] = &[
    ("human_readable_int", human_readable_int),
    ("json", json_arg),
];

/// The options the simulator interprets, SGLang's defaults applied.
#[derive(Debug, Clone)]
pub struct LaunchArgs {
    /// The catalog of the release it was read as.
    pub catalog: &'static Catalog,
    /// Every option given, by destination, as parsed.
    pub parsed: Parsed,
    /// `--model-path` (`--model`), required.
    pub model_path: String,
    /// `--tokenizer-path` (the model path).
    pub tokenizer_path: String,
    /// `--served-model-name` (the model path).
    pub served_model_name: String,
    /// `--host` (127.0.0.1).
    pub host: String,
    /// `--port` (30000).
    pub port: i64,
    /// `--nccl-port` (none: SGLang picks a free one).
    pub nccl_port: Option<i64>,
    /// `--dist-init-addr` (`--nccl-init-addr`).
    pub dist_init_addr: Option<String>,
    /// `--nnodes` (1).
    pub nnodes: i64,
    /// `--node-rank` (0).
    pub node_rank: i64,
    /// `--tp-size` (1).
    pub tp_size: i64,
    /// `--pp-size` (1).
    pub pp_size: i64,
    /// `--dp-size` (1), as given.
    pub dp_size: i64,
    /// `--attn-dp-size` (1), as given.
    pub attn_dp_size: i64,
    /// `--enable-dp-attention` (deprecated).
    pub enable_dp_attention: bool,
    /// `--ep-size` (1).
    pub ep_size: i64,
    /// `--moe-dense-tp-size`.
    pub moe_dense_tp_size: Option<i64>,
    /// `--base-gpu-id` (0).
    pub base_gpu_id: i64,
    /// `--gpu-id-step` (1).
    pub gpu_id_step: i64,
    /// `--load-balance-method` (`auto`), as given.
    pub load_balance_method: String,
    /// `--disaggregation-mode` (`null`).
    pub disaggregation_mode: String,
    /// `--disaggregation-bootstrap-port` (8998).
    pub disaggregation_bootstrap_port: i64,
    /// `--disaggregation-transfer-backend` (`mooncake`).
    pub disaggregation_transfer_backend: String,
    /// `--skip-server-warmup`.
    pub skip_server_warmup: bool,
    /// `--enable-metrics`: `/metrics` is served.
    pub enable_metrics: bool,
    /// `--max-running-requests`.
    pub max_running_requests: Option<i64>,
    /// `--chunked-prefill-size`.
    pub chunked_prefill_size: Option<i64>,
    /// `--context-length`.
    pub context_length: Option<i64>,
}

/// Why the command line was not accepted.
pub type ArgsError = ParseError;

/// Parses the words after `python3 -m sglang.launch_server`, as the newest release
/// whose parser takes them; the newest's refusal when none does.
pub fn parse(argv: &[String]) -> Result<LaunchArgs, ArgsError> {
    let mut refused = None;
    for catalog in catalogs() {
        match catalog.parse(argv, CONVERTERS) {
            Ok(p) => return Ok(read(catalog, p)),
            Err(e) => {
                refused.get_or_insert(e);
            }
        }
    }
    Err(refused.expect("at least one catalog"))
}

/// What the simulator interprets of `p`, parsed by `catalog`, each option found by its
/// name: `--tp-size` is `tp_size` in one release and `tensor_parallel_size` in another.
fn read(catalog: &'static Catalog, p: Parsed) -> LaunchArgs {
    let dest = |flag: &str| catalog.by_flag(flag).map_or("", |o| o.dest.as_str());
    let s = |flag: &str| p.str(dest(flag)).map(str::to_string);
    let int = |flag: &str| p.int(dest(flag));
    let flag = |flag: &str| p.flag(dest(flag), false);
    let model_path = s("--model-path").unwrap_or_default();
    LaunchArgs {
        tokenizer_path: s("--tokenizer-path").unwrap_or_else(|| model_path.clone()),
        served_model_name: s("--served-model-name").unwrap_or_else(|| model_path.clone()),
        host: s("--host").unwrap_or_else(|| "127.0.0.1".into()),
        port: int("--port").unwrap_or(30000),
        nccl_port: int("--nccl-port"),
        dist_init_addr: s("--dist-init-addr"),
        nnodes: int("--nnodes").unwrap_or(1),
        node_rank: int("--node-rank").unwrap_or(0),
        tp_size: int("--tp-size").unwrap_or(1),
        pp_size: int("--pp-size").unwrap_or(1),
        dp_size: int("--dp-size").unwrap_or(1),
        attn_dp_size: int("--attn-dp-size").unwrap_or(1),
        enable_dp_attention: flag("--enable-dp-attention"),
        ep_size: int("--ep-size").unwrap_or(1),
        moe_dense_tp_size: int("--moe-dense-tp-size"),
        base_gpu_id: int("--base-gpu-id").unwrap_or(0),
        gpu_id_step: int("--gpu-id-step").unwrap_or(1),
        load_balance_method: s("--load-balance-method").unwrap_or_else(|| "auto".into()),
        disaggregation_mode: s("--disaggregation-mode").unwrap_or_else(|| "null".into()),
        disaggregation_bootstrap_port: int("--disaggregation-bootstrap-port").unwrap_or(8998),
        disaggregation_transfer_backend: s("--disaggregation-transfer-backend")
            .unwrap_or_else(|| "mooncake".into()),
        skip_server_warmup: flag("--skip-server-warmup"),
        enable_metrics: flag("--enable-metrics"),
        max_running_requests: int("--max-running-requests"),
        chunked_prefill_size: int("--chunked-prefill-size"),
        context_length: int("--context-length"),
        model_path,
        catalog,
        parsed: p,
    }
}

/// The options the simulator interprets, by name (the rest is logged as accepted
/// without simulation).
pub(crate) const INTERPRETED: &[&str] = &[
    "--model-path",
    "--tokenizer-path",
    "--served-model-name",
    "--host",
    "--port",
    "--nccl-port",
    "--dist-init-addr",
    "--nnodes",
    "--node-rank",
    "--tp-size",
    "--pp-size",
    "--dp-size",
    "--attn-dp-size",
    "--enable-dp-attention",
    "--ep-size",
    "--moe-dense-tp-size",
    "--base-gpu-id",
    "--gpu-id-step",
    "--load-balance-method",
    "--disaggregation-mode",
    "--disaggregation-bootstrap-port",
    "--disaggregation-transfer-backend",
    "--skip-server-warmup",
    "--enable-metrics",
    "--max-running-requests",
    "--chunked-prefill-size",
    "--context-length",
];

/// Whether the option at destination `dest` of `catalog` is one the simulator
/// interprets.
pub(crate) fn interpreted(catalog: &Catalog, dest: &str) -> bool {
    catalog
        .option(dest)
        .is_some_and(|o| o.flags.iter().any(|f| INTERPRETED.contains(&f.as_str())))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> Result<LaunchArgs, ArgsError> {
        parse(&shlex::split(s).unwrap())
    }

    fn usage(s: &str) -> String {
        match p(s) {
            Err(ParseError::Usage(m)) => m,
            other => panic!("{s}: expected a usage error, got {other:?}"),
        }
    }

    #[test]
    fn the_engines_command_parses() {
        let a = p(
            "--model-path /m --served-model-name tiny --host 0.0.0.0 --port 6100 \
                   --nccl-port 8300 --tp-size 2 --disaggregation-mode prefill \
                   --disaggregation-bootstrap-port 7200 --disaggregation-transfer-backend nixl",
        )
        .unwrap();
        assert_eq!(a.model_path, "/m");
        assert_eq!(a.served_model_name, "tiny");
        assert_eq!(a.host, "0.0.0.0");
        assert_eq!((a.port, a.nccl_port, a.tp_size), (6100, Some(8300), 2));
        assert_eq!(a.disaggregation_mode, "prefill");
        assert_eq!(a.disaggregation_bootstrap_port, 7200);
        assert_eq!(a.disaggregation_transfer_backend, "nixl");
    }

    /// A flag only an older release has is read as that release: the newest whose
    /// parser takes the command line; its parallel sizes are found by option name.
    #[test]
    fn an_older_releases_command_line_is_read_as_that_release() {
        let newest = &catalogs()[0].version;
        let a = p("--model-path /m --tp-size 2 --dp-size 2 --cuda-graph-max-bs 64").unwrap();
        assert_ne!(
            &a.catalog.version, newest,
            "no newest takes --cuda-graph-max-bs"
        );
        assert_eq!((a.tp_size, a.dp_size), (2, 2));
        let b = p("--model-path /m --tp-size 2").unwrap();
        assert_eq!(&b.catalog.version, newest);
        assert!(matches!(
            p("--model-path /m --no-such-flag 1"),
            Err(ParseError::Usage(_))
        ));
    }

    #[test]
    fn defaults_are_sglangs() {
        let a = p("--model /m").unwrap();
        assert_eq!(a.host, "127.0.0.1");
        assert_eq!(a.port, 30000);
        assert_eq!(a.served_model_name, "/m");
        assert_eq!(a.disaggregation_bootstrap_port, 8998);
        assert_eq!(a.disaggregation_transfer_backend, "mooncake");
        assert_eq!(a.load_balance_method, "auto");
        assert_eq!((a.nnodes, a.node_rank, a.nccl_port), (1, 0, None));
    }

    #[test]
    fn argparse_rules_from_the_catalog() {
        let a = p(
            "--model-path=/m --por 1 --tp 2 --context-length 32k --base-gpu-id -1 \
                   --no-enable-fused-qk-norm-rope --mem-fraction-static 0.5",
        )
        .unwrap();
        assert_eq!((a.port, a.tp_size, a.base_gpu_id), (1, 2, -1));
        assert_eq!(a.context_length, Some(32_000));
        assert_eq!(
            a.parsed.get("enable_fused_qk_norm_rope"),
            Some(&Value::Bool(false))
        );
        assert!(usage("--model /m --foo").contains("unrecognized arguments: --foo"));
        assert!(usage("--model /m --tp_size 2").contains("unrecognized arguments: --tp_size 2"));
        assert!(usage("--model /m --p 1").starts_with("ambiguous option: --p could match"));
        assert_eq!(
            usage("--model /m --skip-server-warmup=1"),
            "argument --skip-server-warmup: ignored explicit argument '1'"
        );
        assert_eq!(
            usage("--model /m --disaggregation-mode x"),
            "argument --disaggregation-mode: invalid choice: 'x' (choose from 'null', \
             'prefill', 'decode')"
        );
        assert_eq!(
            usage("--model /m --port"),
            "argument --port: expected one argument"
        );
        assert_eq!(
            usage("--model /m --port x"),
            "argument --port: invalid int value: 'x'"
        );
        assert_eq!(
            usage("--port 1"),
            "the following arguments are required: --model-path/--model"
        );
        assert!(usage("--model /m pos").contains("unrecognized arguments: pos"));
        assert!(usage("--model /m --context-length lots").contains("Invalid integer value"));
        assert!(usage("--model /m --cuda-graph-config {x").contains("must be JSON"));
        assert_eq!(
            usage("--model /m --log-requests-level 5"),
            "argument --log-requests-level: invalid choice: 5 (choose from 0, 1, 2, 3)"
        );
        assert!(matches!(p("--model /m -h"), Err(ParseError::Help)));
    }

    #[test]
    fn human_readable_ints() {
        let o = &catalogs()[0].option("context_length").unwrap().clone();
        assert_eq!(human_readable_int("25.6k", o), Ok(Value::from(25_600)));
        assert_eq!(human_readable_int("1Ki", o), Ok(Value::from(1024)));
        assert_eq!(human_readable_int(" 7 ", o), Ok(Value::from(7)));
        assert!(human_readable_int("1.5Ki", o)
            .unwrap_err()
            .contains("Decimals"));
        assert!(human_readable_int("1K", o).is_err(), "case-sensitive");
    }
}
