//! srtctl's aiperf trace replays, run as its scripts run them: aiperf installed where it
//! is missing (into a venv under the run directory, not the image's Python), a short
//! warm-up, then the trace through the public URL with goodput counted against the
//! recipe's thresholds.
//!
//! - `mooncake-router` (`mooncake-router/bench.sh`): one of the Mooncake traces
//!   (FAST'25), downloaded once, replayed at its own timestamps.
//! - `trace-replay` (`trace-replay/bench.sh`): the recipe's own trace file on the node,
//!   replayed at each concurrency in turn, each level's results in a directory of its
//!   own.
//!
//! It runs as a command to completion ([`super::command_bench`]); srt then reads
//! aiperf's summary of each replay and fails the run that got no output token back or
//! more failed requests than `max_failed_fraction` allows (srtctl's scripts pass
//! whatever aiperf exits with). Every aiperf command is checked against the catalog
//! dumped from aiperf's own command line (`bench/catalog/aiperf-*.json`).

use crate::catalog::Catalog;
use crate::launch::render::quote;
use crate::launch::RUN_DIR;
use crate::recipe::{CommandBenchmark, Recipe, TraceBenchmark, TraceSource};
use std::collections::BTreeMap;

use crate::bench::AIPERF_VERSION;

/// The catalog of `aiperf profile`.
fn catalog() -> &'static Catalog {
    static PARSED: std::sync::OnceLock<Vec<Catalog>> = std::sync::OnceLock::new();
    let files = [(
        AIPERF_VERSION,
        include_str!("../bench/catalog/aiperf-0.8.0.json"),
    )];
    &PARSED.get_or_init(|| crate::catalog::parse_shipped(&files))[0]
}

/// Where each trace is published (srtctl's URLs).
fn trace_url(workload: &str) -> String {
    let path = match workload {
        "mooncake" => "arxiv-trace/mooncake_trace.jsonl",
        other => return format!("{TRACES}/traces/{other}_trace.jsonl"),
    };
    format!("{TRACES}/{path}")
}

/// The Mooncake repository's published traces.
const TRACES: &str = "https://raw.githubusercontent.com/kvcache-ai/Mooncake/main/FAST25-release";

/// The shell variables the aiperf commands name, set by the script before them.
const TRACE: &str = "$trace";
const ARTIFACTS: &str = "$artifacts";
const WARMUP: &str = "$warmup";
const URL: &str = super::command_bench::FRONTEND_URL;

/// The warm-up: a few synthetic requests (`mooncake-router`: srtctl's 20 at
/// concurrency 10; `trace-replay`: its 5 at concurrency 1, ignoring end-of-sequence,
/// into an artifact directory of their own).
fn warmup_args(recipe: &Recipe, source: &TraceSource) -> Vec<String> {
    let mut out = common_args(recipe, source);
    let rest: &[&str] = match source {
        TraceSource::Mooncake { .. } => &[
            "--streaming",
            "--ui",
            "simple",
            "--concurrency",
            "10",
            "--request-count",
            "20",
        ],
        TraceSource::File { .. } => &[
            "--streaming",
            "--ui",
            "simple",
            "--extra-inputs",
            "ignore_eos:true",
            "--concurrency",
            "1",
            "--request-count",
            "5",
            "--artifact-dir",
            WARMUP,
        ],
    };
    out.extend(rest.iter().map(ToString::to_string));
    out
}

/// One replay, seeded, goodput against the thresholds, its results under the
/// artifacts directory: the Mooncake trace at its timestamps, or the recipe's at
/// concurrency `level`. The workers' `/metrics`, when the deployment has any, are added
/// at run time from `AIPERF_SERVER_METRICS_URLS`.
fn replay_args(recipe: &Recipe, t: &TraceBenchmark, level: Option<u32>) -> Vec<String> {
    let mut out = common_args(recipe, &t.source);
    out.extend(
        [
            "--input-file",
            TRACE,
            "--custom-dataset-type",
            "mooncake_trace",
        ]
        .map(String::from),
    );
    match level {
        None => out.push("--fixed-schedule".into()),
        Some(c) => out.extend([
            "--extra-inputs".into(),
            "ignore_eos:true".into(),
            "--concurrency".into(),
            c.to_string(),
        ]),
    }
    out.extend(
        [
            "--streaming",
            "--random-seed",
            "42",
            "--ui",
            "simple",
            "--artifact-dir",
            ARTIFACTS,
            "--goodput",
        ]
        .map(String::from),
    );
    out.push(format!(
        "time_to_first_token:{} inter_token_latency:{}",
        t.ttft_threshold_ms, t.itl_threshold_ms
    ));
    out
}

/// The model and its tokenizer (the path the workers load, or its Hugging Face id;
/// `trace-replay` trusts its remote code, as srtctl's script does), and the public URL.
fn common_args(recipe: &Recipe, source: &TraceSource) -> Vec<String> {
    let mut out: Vec<String> = [
        "-m",
        &recipe.model.served_name,
        "--tokenizer",
        &recipe.model.path.value,
    ]
    .map(String::from)
    .to_vec();
    if let TraceSource::File { .. } = source {
        out.push("--tokenizer-trust-remote-code".into());
    }
    out.extend(["--url".to_string(), URL.to_string()]);
    out
}

/// The replays of `t`: one, or one per level.
fn replays(recipe: &Recipe, t: &TraceBenchmark) -> Vec<(Option<u32>, Vec<String>)> {
    match &t.source {
        TraceSource::Mooncake { .. } => vec![(None, replay_args(recipe, t, None))],
        TraceSource::File { concurrencies, .. } => concurrencies
            .iter()
            .map(|&c| (Some(c), replay_args(recipe, t, Some(c))))
            .collect(),
    }
}

/// `aiperf profile` with `args`, as one line of the script.
fn aiperf_line(args: &[String]) -> String {
    let words: Vec<String> = args
        .iter()
        .map(|a| super::command_bench::shell_word(a, &[TRACE, ARTIFACTS, WARMUP, URL]))
        .collect();
    format!("aiperf profile {}", words.join(" "))
}

/// The check of aiperf's summary (`profile_export_aiperf.json`): its requests, those
/// that failed and the output tokens, printed; exits 1 on too many failures, else on
/// no output token (`$1` the summary, `$2` the fraction allowed).
const SUMMARY_CHECK: &str = r#"import json, sys
summary = json.load(open(sys.argv[1]))
def total(name):
    return float((summary.get(name) or {}).get("avg") or 0)
done, failed, tokens = total("request_count"), total("error_request_count"), total("total_output_tokens")
sent, allowed = done + failed, float(sys.argv[2])
print(f"srt: {done:.0f} of {sent:.0f} requests succeeded, {tokens:.0f} output tokens")
if failed > allowed * sent:
    sys.exit(f"srt: {failed:.0f} of {sent:.0f} requests failed, more than max_failed_fraction {allowed}")
if tokens == 0:
    sys.exit("srt: the replay got no output token back")"#;

/// What srt says of `t` before anything is built: aiperf's command line must take
/// every command (they are srt's; a failure here is srt's bug, reported all the same).
pub(super) fn problems(recipe: &Recipe, t: &TraceBenchmark) -> Vec<crate::recipe::diag::Problem> {
    std::iter::once(warmup_args(recipe, &t.source))
        .chain(replays(recipe, t).into_iter().map(|(_, args)| args))
        .filter_map(|args| catalog().parse_argv(&args).err())
        .map(|error| {
            crate::recipe::diag::Problem::new(
                "srt::recipe::benchmark_args",
                t.span,
                format!("aiperf {AIPERF_VERSION} would refuse the replay's arguments: {error}"),
            )
            .label("this benchmark")
        })
        .collect()
}

/// What the gate calls `t`'s run.
pub(super) fn name(t: &TraceBenchmark) -> String {
    match &t.source {
        TraceSource::Mooncake { workload } => format!("{workload} trace replay (aiperf)"),
        TraceSource::File { path, .. } => format!("trace replay of {path} (aiperf)"),
    }
}

/// The command benchmark that runs `t`.
pub(super) fn command(recipe: &Recipe, t: &TraceBenchmark) -> CommandBenchmark {
    let model = recipe
        .model
        .served_name
        .rsplit('/')
        .next()
        .unwrap_or_default();
    let mut lines = vec![
        match &t.source {
            TraceSource::Mooncake { workload } => {
                format!("# srtctl's mooncake-router: the {workload} trace replayed by aiperf")
            }
            TraceSource::File {
                path,
                concurrencies,
            } => format!(
                "# srtctl's trace-replay: {path} replayed by aiperf at concurrency {}",
                concurrencies.iter().map(u32::to_string).collect::<Vec<_>>().join(", ")
            ),
        },
        "set -e".to_string(),
        // Where the image has no aiperf, a venv of its own under the run directory
        // (srtctl pip-installs aiperf into the image's Python, or a venv of its own).
        format!(
            "command -v aiperf >/dev/null || {{ venv=\"{RUN_DIR}/aiperf-{AIPERF_VERSION}-venv\"; [ -x \"$venv/bin/aiperf\" ] || {{ python3 -m venv \"$venv\" && \"$venv/bin/pip\" install --quiet aiperf=={AIPERF_VERSION}; }}; PATH=\"$venv/bin:$PATH\"; }}"
        ),
        // aiperf's default of 30 s fails under load while a tokenizer downloads.
        "export AIPERF_HTTP_SO_RCVTIMEO=120".to_string(),
    ];
    let root = format!("\"${{ARTIFACT_DIR:-{RUN_DIR}/artifacts}}\"");
    match &t.source {
        TraceSource::Mooncake { workload } => lines.extend([
            format!("trace=\"${{TRACE_DIR:-{RUN_DIR}/traces}}/{workload}_trace.jsonl\""),
            format!(
                "[ -f \"$trace\" ] || {{ mkdir -p \"${{trace%/*}}\" && curl -fsSL -o \"$trace.part\" {} && mv \"$trace.part\" \"$trace\"; }}",
                quote(&trace_url(workload))
            ),
            aiperf_line(&warmup_args(recipe, &t.source)),
            format!(
                "artifacts={root}/{}_{workload}_\"$(date +%Y%m%d_%H%M%S)\"",
                quote(model)
            ),
        ]),
        TraceSource::File { path, .. } => lines.extend([
            format!("trace={}", quote(path)),
            "[ -f \"$trace\" ] || { echo \"srt: no trace file $trace on $(hostname)\" >&2; exit 1; }".to_string(),
            format!("warmup={root}/warmup"),
            aiperf_line(&warmup_args(recipe, &t.source)),
            "stamp=\"$(date +%Y%m%d_%H%M%S)\"".to_string(),
        ]),
    }
    lines.push("metrics=(); [ -z \"${AIPERF_SERVER_METRICS_URLS:-}\" ] || metrics=(--server-metrics ${AIPERF_SERVER_METRICS_URLS//,/ })".to_string());
    for (level, args) in replays(recipe, t) {
        if let Some(c) = level {
            lines.push(format!(
                "artifacts={root}/{}_trace_c{c}_\"$stamp\"",
                quote(model)
            ));
        }
        lines.push(format!("{} \"${{metrics[@]}}\"", aiperf_line(&args)));
        lines.push(format!(
            "python3 -c {} \"$artifacts/profile_export_aiperf.json\" {}",
            quote(SUMMARY_CHECK),
            t.max_failed_fraction
        ));
    }
    CommandBenchmark {
        span: t.span,
        command: lines.join("\n"),
        env: BTreeMap::new(),
        container_image: t.container_image.clone(),
        login_shell: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trace() -> TraceBenchmark {
        TraceBenchmark {
            span: miette::SourceSpan::from(0..1),
            source: TraceSource::Mooncake {
                workload: "conversation".into(),
            },
            ttft_threshold_ms: 2000,
            itl_threshold_ms: 25,
            max_failed_fraction: 0.05,
            container_image: None,
        }
    }

    fn recipe() -> Recipe {
        let source = crate::recipe::Source {
            name: "t.yaml".into(),
            text: "model:\n  path: Qwen/Qwen3-32B\nroles:\n  agg:\n    nodes: 1\n    workers: 1\n"
                .into(),
        };
        crate::recipe::load_str(&source, "t").expect("loads")
    }

    #[test]
    fn both_commands_are_aiperfs_and_srtctls() {
        let r = recipe();
        assert!(problems(&r, &trace()).is_empty());
        assert_eq!(
            replay_args(&r, &trace(), None).join(" "),
            "-m Qwen3-32B --tokenizer Qwen/Qwen3-32B --url $SRT_FRONTEND_URL --input-file $trace \
             --custom-dataset-type mooncake_trace --fixed-schedule --streaming --random-seed 42 \
             --ui simple --artifact-dir $artifacts --goodput time_to_first_token:2000 inter_token_latency:25"
        );
        let mut args = replay_args(&r, &trace(), None);
        args.extend(["--server-metrics", "http://a/metrics", "http://b/metrics"].map(String::from));
        catalog()
            .parse_argv(&args)
            .expect("aiperf takes the workers' metrics");
        let mut bad = warmup_args(&r, &trace().source);
        bad.push("--concurency".into());
        assert!(
            catalog().parse_argv(&bad).is_err(),
            "a misspelt flag is refused"
        );
    }

    #[test]
    fn each_trace_is_srtctls() {
        assert_eq!(
            trace_url("conversation"),
            "https://raw.githubusercontent.com/kvcache-ai/Mooncake/main/FAST25-release/traces/conversation_trace.jsonl"
        );
        assert_eq!(
            trace_url("mooncake"),
            "https://raw.githubusercontent.com/kvcache-ai/Mooncake/main/FAST25-release/arxiv-trace/mooncake_trace.jsonl"
        );
    }

    #[test]
    fn the_script_replays_once_the_warm_up_ran_and_checks_the_summary() {
        let c = command(&recipe(), &trace());
        let lines: Vec<&str> = c.command.lines().collect();
        let warmup = lines.iter().position(|l| l.contains("--request-count 20"));
        let replay = lines.iter().position(|l| l.contains("--fixed-schedule"));
        assert!(warmup < replay && warmup.is_some(), "{}", c.command);
        assert!(lines[replay.unwrap()].ends_with("\"${metrics[@]}\""));
        assert!(lines
            .last()
            .unwrap()
            .ends_with("/profile_export_aiperf.json\" 0.05"));
    }

    fn replay() -> TraceBenchmark {
        TraceBenchmark {
            source: TraceSource::File {
                path: "/traces/day one.jsonl".into(),
                concurrencies: vec![4, 16],
            },
            ..trace()
        }
    }

    #[test]
    fn a_trace_file_is_replayed_at_each_level_as_srtctls_script_replays_it() {
        let r = recipe();
        assert!(problems(&r, &replay()).is_empty());
        assert_eq!(
            replay_args(&r, &replay(), Some(16)).join(" "),
            "-m Qwen3-32B --tokenizer Qwen/Qwen3-32B --tokenizer-trust-remote-code --url $SRT_FRONTEND_URL \
             --input-file $trace --custom-dataset-type mooncake_trace --extra-inputs ignore_eos:true \
             --concurrency 16 --streaming --random-seed 42 --ui simple --artifact-dir $artifacts \
             --goodput time_to_first_token:2000 inter_token_latency:25"
        );
        assert_eq!(
            warmup_args(&r, &replay().source).join(" "),
            "-m Qwen3-32B --tokenizer Qwen/Qwen3-32B --tokenizer-trust-remote-code --url $SRT_FRONTEND_URL \
             --streaming --ui simple --extra-inputs ignore_eos:true --concurrency 1 --request-count 5 \
             --artifact-dir $warmup"
        );
        let c = command(&r, &replay());
        assert!(
            c.command.contains("trace='/traces/day one.jsonl'\n"),
            "{}",
            c.command
        );
        let lines: Vec<&str> = c.command.lines().collect();
        let at = |needle: &str| lines.iter().position(|l| l.contains(needle)).unwrap();
        // The warm-up, then each level's replay into its own directory, each checked.
        assert!(at("--request-count 5") < at("_trace_c4_"));
        assert!(at("_trace_c4_") < at("--concurrency 4 "));
        assert!(at("--concurrency 4 ") < at("_trace_c16_"));
        assert_eq!(c.command.matches("profile_export_aiperf.json").count(), 2);
        assert!(!c.command.contains("--fixed-schedule"));
    }
}
