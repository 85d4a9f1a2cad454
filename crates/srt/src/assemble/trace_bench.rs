//! srtctl's `mooncake-router` benchmark: one of the Mooncake traces (FAST'25) replayed
//! through the public URL at its own timestamps by aiperf, as srtctl's
//! `mooncake-router/bench.sh` runs it: aiperf installed where it is missing (into a
//! venv under the run directory, not the image's Python), the trace
//! downloaded once, a short warm-up, then the replay with goodput counted against the
//! recipe's thresholds. It runs as a command to completion ([`super::command_bench`]);
//! srt then reads aiperf's summary and fails the run that got no output token back or
//! more failed requests than `max_failed_fraction` allows (srtctl's script passes
//! whatever aiperf exits with). Both aiperf commands are checked against the catalog
//! dumped from aiperf's own command line (`bench/catalog/aiperf-*.json`).

use crate::catalog::Catalog;
use crate::launch::render::quote;
use crate::launch::RUN_DIR;
use crate::recipe::{CommandBenchmark, Recipe, TraceBenchmark};
use std::collections::BTreeMap;

/// The aiperf release srt installs where none is (0.9.0 to 0.13.0 cannot load a
/// tokenizer from a directory while they build a trace's prompts), and whose
/// command line the catalog is of.
pub(crate) const AIPERF_VERSION: &str = "0.8.0";

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
const URL: &str = super::command_bench::FRONTEND_URL;

/// The warm-up: a few synthetic requests (srtctl's 20 at concurrency 10).
fn warmup_args(recipe: &Recipe) -> Vec<String> {
    let mut out = common_args(recipe);
    out.extend(
        [
            "--streaming",
            "--ui",
            "simple",
            "--concurrency",
            "10",
            "--request-count",
            "20",
        ]
        .map(String::from),
    );
    out
}

/// The replay: the trace at its timestamps, seeded, goodput against the thresholds,
/// its results under the artifacts directory. The workers' `/metrics`, when the
/// deployment has any, are added at run time from `AIPERF_SERVER_METRICS_URLS`.
fn replay_args(recipe: &Recipe, t: &TraceBenchmark) -> Vec<String> {
    let mut out = common_args(recipe);
    out.extend(
        [
            "--input-file",
            TRACE,
            "--custom-dataset-type",
            "mooncake_trace",
            "--fixed-schedule",
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

/// The model and its tokenizer (the path the workers load, or its Hugging Face id),
/// and the public URL.
fn common_args(recipe: &Recipe) -> Vec<String> {
    [
        "-m",
        &recipe.model.served_name,
        "--tokenizer",
        &recipe.model.path.value,
        "--url",
        URL,
    ]
    .map(String::from)
    .to_vec()
}

/// `aiperf profile` with `args`, as one line of the script.
fn aiperf_line(args: &[String]) -> String {
    let words: Vec<String> = args
        .iter()
        .map(|a| super::command_bench::shell_word(a, &[TRACE, ARTIFACTS, URL]))
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
/// both commands (they are srt's; a failure here is srt's bug, reported all the same).
pub(super) fn problems(recipe: &Recipe, t: &TraceBenchmark) -> Vec<crate::recipe::diag::Problem> {
    [warmup_args(recipe), replay_args(recipe, t)]
        .iter()
        .filter_map(|args| catalog().parse_argv(args).err())
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

/// The command benchmark that runs `t`.
pub(super) fn command(recipe: &Recipe, t: &TraceBenchmark) -> CommandBenchmark {
    let model = recipe
        .model
        .served_name
        .rsplit('/')
        .next()
        .unwrap_or_default();
    let lines = [
        format!(
            "# srtctl's mooncake-router: the {} trace replayed by aiperf",
            t.workload
        ),
        "set -e".to_string(),
        // Where the image has no aiperf, a venv of its own under the run directory
        // (srtctl pip-installs the newest aiperf into the image's Python).
        format!(
            "command -v aiperf >/dev/null || {{ venv=\"{RUN_DIR}/aiperf-{AIPERF_VERSION}-venv\"; [ -x \"$venv/bin/aiperf\" ] || {{ python3 -m venv \"$venv\" && \"$venv/bin/pip\" install --quiet aiperf=={AIPERF_VERSION}; }}; PATH=\"$venv/bin:$PATH\"; }}"
        ),
        // aiperf's default of 30 s fails under load while a tokenizer downloads.
        "export AIPERF_HTTP_SO_RCVTIMEO=120".to_string(),
        format!(
            "trace=\"${{TRACE_DIR:-{RUN_DIR}/traces}}/{}_trace.jsonl\"",
            t.workload
        ),
        format!(
            "[ -f \"$trace\" ] || {{ mkdir -p \"${{trace%/*}}\" && curl -fsSL -o \"$trace.part\" {} && mv \"$trace.part\" \"$trace\"; }}",
            quote(&trace_url(&t.workload))
        ),
        aiperf_line(&warmup_args(recipe)),
        format!(
            "artifacts=\"${{ARTIFACT_DIR:-{RUN_DIR}/artifacts}}\"/{}_{}_\"$(date +%Y%m%d_%H%M%S)\"",
            quote(model),
            t.workload
        ),
        "metrics=(); [ -z \"${AIPERF_SERVER_METRICS_URLS:-}\" ] || metrics=(--server-metrics ${AIPERF_SERVER_METRICS_URLS//,/ })".to_string(),
        format!("{} \"${{metrics[@]}}\"", aiperf_line(&replay_args(recipe, t))),
        format!(
            "python3 -c {} \"$artifacts/profile_export_aiperf.json\" {}",
            quote(SUMMARY_CHECK),
            t.max_failed_fraction
        ),
    ];
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
            workload: "conversation".into(),
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
            replay_args(&r, &trace()).join(" "),
            "-m Qwen3-32B --tokenizer Qwen/Qwen3-32B --url $SRT_FRONTEND_URL --input-file $trace \
             --custom-dataset-type mooncake_trace --fixed-schedule --streaming --random-seed 42 \
             --ui simple --artifact-dir $artifacts --goodput time_to_first_token:2000 inter_token_latency:25"
        );
        let mut args = replay_args(&r, &trace());
        args.extend(["--server-metrics", "http://a/metrics", "http://b/metrics"].map(String::from));
        catalog()
            .parse_argv(&args)
            .expect("aiperf takes the workers' metrics");
        let mut bad = warmup_args(&r);
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
}
