//! srtctl's accuracy benchmarks, `gsm8k` and `gpqa`: SGLang's evaluation harness,
//! `python3 -m sglang.test.run_eval`, run against the public URL with srtctl's
//! arguments and defaults (its `gsm8k/sglang-bench.sh` and `gpqa/bench.sh`), as a
//! command to completion ([`super::command_bench`]), whose log holds the scores it
//! prints. The arguments are checked against the catalog dumped from the harness's own
//! parser (`bench/catalog/sglang-run-eval-*.json`).

use crate::catalog::Catalog;
use crate::engine::Engine;
use crate::launch::render::quote;
use crate::recipe::diag::Problem;
use crate::recipe::{CommandBenchmark, EvalBenchmark, Recipe};
use std::collections::BTreeMap;

/// The harness's command.
const HARNESS: &[&str] = &["python3", "-m", "sglang.test.run_eval"];

/// The catalog of the harness's parser (SGLang 0.5.23's).
fn catalog() -> &'static Catalog {
    static PARSED: std::sync::OnceLock<Catalog> = std::sync::OnceLock::new();
    PARSED.get_or_init(|| {
        Catalog::parse(include_str!("../bench/catalog/sglang-run-eval-0.5.23.json"))
            .expect("the run_eval catalog parses")
    })
}

/// srtctl's defaults, by evaluation and key.
fn default(eval: &str, key: &str) -> Option<i64> {
    Some(match (eval, key) {
        ("gsm8k", "num_examples") => 1319,
        ("gsm8k", "max_tokens") => 16384,
        ("gsm8k", "num_threads") => 512,
        ("gsm8k", "num_shots") => 5,
        ("gpqa", "num_examples") => 198,
        ("gpqa", "max_tokens") => 32768,
        ("gpqa", "num_threads") => 128,
        ("gpqa", "repeat") => 8,
        _ => return None,
    })
}

/// The keys each evaluation's harness is given (srtctl's scripts pass no others).
fn reads(eval: &str, key: &str) -> bool {
    match eval {
        "gsm8k" => key != "repeat",
        _ => matches!(
            key,
            "num_examples" | "max_tokens" | "num_threads" | "repeat"
        ),
    }
}

/// What srt says of `e` before anything is built: the engine's deployments must be
/// ones srtctl evaluates with this harness, the harness's parser must take its
/// arguments, and a key the harness is not given is a warning.
pub(super) fn problems(recipe: &Recipe, e: &EvalBenchmark, engine: &dyn Engine) -> Vec<Problem> {
    let mut out = Vec::new();
    if let Err(error) = catalog().parse_argv(&arguments(recipe, e, "http://127.0.0.1:8000")) {
        out.push(
            Problem::new(
                "srt::recipe::benchmark_args",
                e.span,
                format!("SGLang's run_eval would refuse these arguments: {error}"),
            )
            .label("this benchmark"),
        );
    }
    if e.eval == "gsm8k" && !engine.gsm8k_with_run_eval() {
        out.push(
            Problem::new(
                "srt::recipe::benchmark_type",
                e.type_span,
                format!(
                    "srtctl evaluates `{}` deployments on GSM8K with its own copy of vLLM's gsm8k_eval.py, which srt does not ship",
                    engine.name()
                ),
            )
            .label("srtctl's own harness")
            .help("remove `benchmark`, or run the evaluation as `type: custom` with a command of your own"),
        );
        return out;
    }
    let written = e
        .counts
        .iter()
        .map(|(k, v)| (k, v.span))
        .chain(e.sampling.iter().map(|(k, v)| (k, v.span)));
    for (key, span) in written {
        if !reads(&e.eval, key) {
            out.push(
                Problem::warning(
                    "srt::recipe::benchmark_unread",
                    span,
                    format!("`benchmark.{key}` is not read by a `{}` evaluation", e.eval),
                )
                .label("unread")
                .help("srtctl does not pass it to the harness either; remove it"),
            );
        }
    }
    out
}

/// The harness's arguments (after [`HARNESS`]), with `base_url` for `--base-url`.
fn arguments(recipe: &Recipe, e: &EvalBenchmark, base_url: &str) -> Vec<String> {
    let mut out: Vec<String> = vec!["--base-url".into(), base_url.into()];
    if e.eval == "gpqa" {
        out.extend(["--model".into(), recipe.model.served_name.clone()]);
    }
    out.extend(["--eval-name".into(), e.eval.clone()]);
    // The counts in the keys' order, `top_k` (a sampling value) after the others.
    for &key in crate::recipe::keys::EVAL_COUNTS {
        if key == "top_k" || !reads(&e.eval, key) {
            continue;
        }
        let value = e.counts.get(key).map(|v| v.value).or(default(&e.eval, key));
        if let Some(v) = value {
            out.extend([flag(key), v.to_string()]);
        }
    }
    for (key, value) in &e.sampling {
        if reads(&e.eval, key) {
            out.extend([flag(key), value.value.to_string()]);
        }
    }
    if let Some(k) = e.counts.get("top_k").filter(|_| reads(&e.eval, "top_k")) {
        out.extend([flag("top_k"), k.value.to_string()]);
    }
    out
}

/// `--num-examples` for `num_examples`.
fn flag(key: &str) -> String {
    format!("--{}", key.replace('_', "-"))
}

/// The command benchmark that runs `e`: the harness (its arguments checked by
/// [`problems`]). What it prints, the scores with it, is the command's log.
pub(super) fn command(recipe: &Recipe, e: &EvalBenchmark, public_url: &str) -> CommandBenchmark {
    let args = arguments(recipe, e, public_url);
    let words: Vec<String> = HARNESS
        .iter()
        .map(ToString::to_string)
        .chain(args.iter().map(|w| {
            if w == public_url {
                "\"$SRT_FRONTEND_URL\"".to_string()
            } else {
                quote(w)
            }
        }))
        .collect();
    let command = words.join(" ");
    CommandBenchmark {
        span: e.span,
        command,
        env: BTreeMap::from([("OPENAI_API_KEY".to_string(), "EMPTY".to_string())]),
        container_image: e.container_image.clone(),
        login_shell: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::recipe::Sp;

    fn eval(name: &str, counts: &[(&str, i64)], sampling: &[(&str, f64)]) -> EvalBenchmark {
        let span = miette::SourceSpan::from(0..1);
        EvalBenchmark {
            span,
            type_span: span,
            eval: name.into(),
            counts: counts
                .iter()
                .map(|(k, v)| (k.to_string(), Sp::new(*v, span)))
                .collect(),
            sampling: sampling
                .iter()
                .map(|(k, v)| (k.to_string(), Sp::new(*v, span)))
                .collect(),
            container_image: None,
        }
    }

    fn recipe() -> Recipe {
        let source = crate::recipe::Source {
            name: "t.yaml".into(),
            text: "model:\n  path: /m\n  served_name: tiny\nroles:\n  agg:\n    nodes: 1\n    workers: 1\n".into(),
        };
        crate::recipe::load_str(&source, "t").expect("loads")
    }

    #[test]
    fn gsm8k_takes_srtctls_defaults_and_the_sampling_written() {
        let e = eval("gsm8k", &[("num_examples", 200)], &[("temperature", 0.6)]);
        let args = arguments(&recipe(), &e, "http://h:8000");
        assert_eq!(
            args.join(" "),
            "--base-url http://h:8000 --eval-name gsm8k --num-examples 200 --max-tokens 16384 \
             --num-threads 512 --num-shots 5 --temperature 0.6"
        );
        catalog().parse_argv(&args).expect("run_eval parses it");
    }

    #[test]
    fn gpqa_names_the_model_and_repeats() {
        let e = eval("gpqa", &[("repeat", 2), ("top_k", 20)], &[]);
        let args = arguments(&recipe(), &e, "http://h:8000");
        assert_eq!(
            args.join(" "),
            "--base-url http://h:8000 --model tiny --eval-name gpqa --num-examples 198 \
             --max-tokens 32768 --num-threads 128 --repeat 2"
        );
        catalog().parse_argv(&args).expect("run_eval parses it");
    }

    #[test]
    fn every_key_an_evaluation_reads_is_an_option_of_the_harness() {
        use crate::catalog::Resolution;
        for key in crate::recipe::keys::EVAL_COUNTS
            .iter()
            .chain(crate::recipe::keys::EVAL_SAMPLING)
        {
            assert!(
                matches!(catalog().resolve(&flag(key)[2..]), Resolution::Exact(..)),
                "{key}"
            );
        }
    }

    #[test]
    fn the_command_runs_the_harness_on_the_public_url() {
        let e = eval("gsm8k", &[], &[]);
        let c = command(&recipe(), &e, "http://<node0-ip>:8000");
        assert!(
            c.command.starts_with(
                "python3 -m sglang.test.run_eval --base-url \"$SRT_FRONTEND_URL\" --eval-name gsm8k "
            ),
            "{}",
            c.command
        );
        assert_eq!(c.env["OPENAI_API_KEY"], "EMPTY");
    }
}
