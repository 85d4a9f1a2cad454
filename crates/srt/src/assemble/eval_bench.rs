//! srtctl's accuracy benchmarks, `gsm8k` and `gpqa`, run as srtctl runs them, each as a
//! command to completion ([`super::command_bench`]) whose log holds the scores:
//! - SGLang's evaluation harness, `python3 -m sglang.test.run_eval`, against the public
//!   URL with srtctl's arguments and defaults (its `gsm8k/sglang-bench.sh` and
//!   `gpqa/bench.sh`), the arguments checked against the catalog dumped from the
//!   harness's own parser (`bench/catalog/sglang-run-eval-*.json`);
//! - for GSM8K on an engine srtctl evaluates with its copy of vLLM's `gsm8k_eval.py`
//!   (which no vLLM package ships; [`Engine::gsm8k_with_run_eval`]), srt's own
//!   program of that evaluation (`bench/gsm8k_completions.py`: the same few-shot
//!   prompts, stop strings and scoring, over `/v1/completions`), with srtctl's
//!   arguments and defaults (its `gsm8k/vllm-bench.sh`), run `repeat` times. It fails
//!   the run whose requests failed beyond `max_failed_fraction`'s default or that got
//!   no output token back.

use super::command_bench::shell_word;
use crate::catalog::Catalog;
use crate::engine::Engine;
use crate::launch::RUN_DIR;
use crate::recipe::diag::Problem;
use crate::recipe::{CommandBenchmark, EvalBenchmark, Recipe};
use std::collections::BTreeMap;

/// The program that evaluates a deployment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Harness {
    /// SGLang's `run_eval`.
    RunEval,
    /// srt's GSM8K evaluation of `/v1/completions`.
    Completions,
}

impl Harness {
    /// The harness srtctl's `benchmark.type: <e.eval>` runs for `recipe`'s engine.
    pub(super) fn of(recipe: &Recipe, e: &EvalBenchmark) -> Harness {
        let engine = crate::engine::lookup(&recipe.engine.kind.value);
        if e.eval == "gsm8k" && engine.is_some_and(|engine| !engine.gsm8k_with_run_eval()) {
            Harness::Completions
        } else {
            Harness::RunEval
        }
    }

    /// What the gate calls it.
    pub(super) fn name(self) -> &'static str {
        match self {
            Harness::RunEval => "SGLang's run_eval",
            Harness::Completions => "srt's GSM8K of /v1/completions",
        }
    }
}

/// SGLang's harness's command.
const RUN_EVAL: &[&str] = &["python3", "-m", "sglang.test.run_eval"];

/// srt's GSM8K program, written into the run directory by the benchmark's script.
const COMPLETIONS: &str = include_str!("../bench/gsm8k_completions.py");

/// The catalog of SGLang's harness's parser (SGLang 0.5.23's).
fn catalog() -> &'static Catalog {
    static PARSED: std::sync::OnceLock<Catalog> = std::sync::OnceLock::new();
    PARSED.get_or_init(|| {
        Catalog::parse(include_str!("../bench/catalog/sglang-run-eval-0.5.23.json"))
            .expect("the run_eval catalog parses")
    })
}

/// srtctl's defaults, by harness, evaluation and key.
fn default(harness: Harness, eval: &str, key: &str) -> Option<i64> {
    Some(match (harness, eval, key) {
        (Harness::Completions, _, "num_examples") => 1319,
        (Harness::Completions, _, "max_tokens") => 256,
        (Harness::Completions, _, "num_shots") => 5,
        (Harness::Completions, _, "repeat") => 1,
        (Harness::RunEval, "gsm8k", "num_examples") => 1319,
        (Harness::RunEval, "gsm8k", "max_tokens") => 16384,
        (Harness::RunEval, "gsm8k", "num_threads") => 512,
        (Harness::RunEval, "gsm8k", "num_shots") => 5,
        (Harness::RunEval, "gpqa", "num_examples") => 198,
        (Harness::RunEval, "gpqa", "max_tokens") => 32768,
        (Harness::RunEval, "gpqa", "num_threads") => 128,
        (Harness::RunEval, "gpqa", "repeat") => 8,
        _ => return None,
    })
}

/// The keys each harness is given (srtctl's scripts pass no others).
fn reads(harness: Harness, eval: &str, key: &str) -> bool {
    match (harness, eval) {
        (Harness::Completions, _) => matches!(
            key,
            "num_examples" | "max_tokens" | "num_shots" | "repeat" | "temperature"
        ),
        (Harness::RunEval, "gsm8k") => key != "repeat",
        (Harness::RunEval, _) => matches!(
            key,
            "num_examples" | "max_tokens" | "num_threads" | "repeat"
        ),
    }
}

/// What srt says of `e` before anything is built: SGLang's harness's parser must take
/// its arguments, and a key the harness is not given is a warning.
pub(super) fn problems(recipe: &Recipe, e: &EvalBenchmark, engine: &dyn Engine) -> Vec<Problem> {
    let mut out = Vec::new();
    let harness = Harness::of(recipe, e);
    // srt's own GSM8K program's arguments are checked by its tests, against its parser.
    let checked = match harness {
        Harness::RunEval => catalog().parse_argv(&arguments(recipe, e, URL)).map(drop),
        Harness::Completions => Ok(()),
    };
    if let Err(error) = checked {
        out.push(
            Problem::new(
                "srt::recipe::benchmark_args",
                e.span,
                format!("SGLang's run_eval would refuse these arguments: {error}"),
            )
            .label("this benchmark"),
        );
    }
    let written = e
        .counts
        .iter()
        .map(|(k, v)| (k, v.span))
        .chain(e.sampling.iter().map(|(k, v)| (k, v.span)));
    for (key, span) in written {
        if !reads(harness, &e.eval, key) {
            out.push(
                Problem::warning(
                    "srt::recipe::benchmark_unread",
                    span,
                    format!(
                        "`benchmark.{key}` is not read by a `{}` evaluation of `{}` deployments",
                        e.eval,
                        engine.name()
                    ),
                )
                .label("unread")
                .help("srtctl does not pass it to the harness either; remove it"),
            );
        }
    }
    out
}

/// SGLang's harness's arguments (after [`RUN_EVAL`]), with `base_url` for `--base-url`.
fn arguments(recipe: &Recipe, e: &EvalBenchmark, base_url: &str) -> Vec<String> {
    let harness = Harness::RunEval;
    let mut out: Vec<String> = vec!["--base-url".into(), base_url.into()];
    if e.eval == "gpqa" {
        out.extend(["--model".into(), recipe.model.served_name.clone()]);
    }
    out.extend(["--eval-name".into(), e.eval.clone()]);
    // The counts in the keys' order, `top_k` (a sampling value) after the others.
    for &key in crate::recipe::keys::EVAL_COUNTS {
        if key == "top_k" || !reads(harness, &e.eval, key) {
            continue;
        }
        let value = count(harness, e, key);
        if let Some(v) = value {
            out.extend([flag(key), v.to_string()]);
        }
    }
    for (key, value) in &e.sampling {
        if reads(harness, &e.eval, key) {
            out.extend([flag(key), value.value.to_string()]);
        }
    }
    if let Some(k) = e
        .counts
        .get("top_k")
        .filter(|_| reads(harness, &e.eval, "top_k"))
    {
        out.extend([flag("top_k"), k.value.to_string()]);
    }
    out
}

/// `key`'s count: written, else srtctl's default for `harness`.
fn count(harness: Harness, e: &EvalBenchmark, key: &str) -> Option<i64> {
    e.counts
        .get(key)
        .map(|v| v.value)
        .or(default(harness, &e.eval, key))
}

/// `--num-examples` for `num_examples`.
fn flag(key: &str) -> String {
    format!("--{}", key.replace('_', "-"))
}

/// The shell variables the GSM8K script names, set before its commands.
const URL: &str = super::command_bench::FRONTEND_URL;
const DATA: &str = "$data";

/// srt's GSM8K program's arguments, but `--save-results` (srtctl's `vllm-bench.sh`'s:
/// the served model named, the counts and temperature with their defaults; GSM8K's
/// files in `$data`).
fn completions_arguments(recipe: &Recipe, e: &EvalBenchmark) -> Vec<String> {
    let harness = Harness::Completions;
    let number = |key: &str| count(harness, e, key).unwrap_or_default().to_string();
    let temperature = e.sampling.get("temperature").map_or(0.0, |t| t.value);
    let fraction: f64 =
        crate::recipe::keys::default(crate::recipe::keys::BENCHMARK, "max_failed_fraction");
    [
        "--url",
        URL,
        "--model",
        &recipe.model.served_name,
        "--num-questions",
        &number("num_examples"),
        "--max-tokens",
        &number("max_tokens"),
        "--num-shots",
        &number("num_shots"),
        "--temperature",
        &temperature.to_string(),
        "--max-failed-fraction",
        &fraction.to_string(),
        "--data-dir",
        DATA,
    ]
    .map(String::from)
    .to_vec()
}

/// The script of srt's GSM8K program: written into the run directory, then run
/// `repeat` times, each run's results in `<run-dir>/accuracy/gsm8k_run<i>.json`
/// (srtctl's `/logs/accuracy`). GSM8K's files are read from `$GSM8K_DIR` (default
/// `<run-dir>/gsm8k`), downloaded there once.
fn completions_script(recipe: &Recipe, e: &EvalBenchmark) -> String {
    let repeat = count(Harness::Completions, e, "repeat").unwrap_or(1);
    let words: Vec<String> = completions_arguments(recipe, e)
        .iter()
        .map(|a| shell_word(a, &[URL, DATA]))
        .collect();
    let program = format!("{RUN_DIR}/gsm8k_completions.py");
    [
        "# srtctl's gsm8k of a vLLM deployment: srt's GSM8K evaluation of /v1/completions".to_string(),
        "set -e".to_string(),
        format!("cat > \"{program}\" <<'SRT_GSM8K'\n{COMPLETIONS}SRT_GSM8K"),
        format!("data=\"${{GSM8K_DIR:-{RUN_DIR}/gsm8k}}\""),
        format!(
            "for i in $(seq 1 {repeat}); do echo \"srt: GSM8K run $i of {repeat}\"; python3 \"{program}\" {} --save-results \"{RUN_DIR}/accuracy/gsm8k_run$i.json\"; done",
            words.join(" ")
        ),
    ]
    .join("\n")
}

/// The command benchmark that runs `e` (its arguments checked by [`problems`]). What it
/// prints, the scores with it, is the command's log.
pub(super) fn command(recipe: &Recipe, e: &EvalBenchmark) -> CommandBenchmark {
    let command = match Harness::of(recipe, e) {
        Harness::Completions => completions_script(recipe, e),
        Harness::RunEval => RUN_EVAL
            .iter()
            .map(ToString::to_string)
            .chain(
                arguments(recipe, e, URL)
                    .iter()
                    .map(|w| shell_word(w, &[URL])),
            )
            .collect::<Vec<_>>()
            .join(" "),
    };
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
            text: "model:\n  path: /m\n  served_name: tiny\nengine: sglang\nroles:\n  agg:\n    nodes: 1\n    workers: 1\n".into(),
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
        let c = command(&recipe(), &e);
        assert_eq!(Harness::of(&recipe(), &e), Harness::RunEval);
        assert!(
            c.command.starts_with(
                "python3 -m sglang.test.run_eval --base-url \"$SRT_FRONTEND_URL\" --eval-name gsm8k "
            ),
            "{}",
            c.command
        );
        assert_eq!(c.env["OPENAI_API_KEY"], "EMPTY");
    }

    /// `python3` runs `code` with srt's GSM8K program imported as `g`, and `args`.
    fn with_program(code: &str, args: &[String]) -> std::process::Output {
        let dir = tempfile::tempdir().unwrap();
        let program = dir.path().join("gsm8k_completions.py");
        std::fs::write(&program, COMPLETIONS).unwrap();
        let load = format!(
            "import importlib.util as u, sys\ns = u.spec_from_file_location('g', {:?})\ng = u.module_from_spec(s)\ns.loader.exec_module(g)\n{code}",
            program.display().to_string()
        );
        std::process::Command::new("python3")
            .arg("-c")
            .arg(load)
            .args(args)
            .output()
            .expect("python3 runs")
    }

    #[test]
    fn a_vllm_gsm8k_is_srts_program_with_srtctls_defaults_which_its_parser_takes() {
        let mut r = recipe();
        r.engine.kind.value = "vllm".into();
        let e = eval("gsm8k", &[("repeat", 5)], &[]);
        assert_eq!(Harness::of(&r, &e), Harness::Completions);
        let args = completions_arguments(&r, &e);
        assert_eq!(
            args.join(" "),
            "--url $SRT_FRONTEND_URL --model tiny --num-questions 1319 --max-tokens 256 \
             --num-shots 5 --temperature 0 --max-failed-fraction 0.05 --data-dir $data"
        );
        let parsed = with_program(
            "a = g.parser().parse_args(sys.argv[1:])\nprint(a.num_questions, a.max_tokens, a.num_shots, a.temperature, a.max_failed_fraction, a.seed)",
            &args,
        );
        assert!(parsed.status.success(), "{parsed:?}");
        assert_eq!(
            String::from_utf8_lossy(&parsed.stdout),
            "1319 256 5 0.0 0.05 42\n"
        );
        let script = command(&r, &e).command;
        assert!(script.contains("for i in $(seq 1 5); do"), "{script}");
        assert!(script.contains(COMPLETIONS), "the program is written whole");
    }

    #[test]
    fn an_answer_is_the_last_whole_number_of_its_text() {
        let out = with_program(
            "for t in sys.argv[1:]: print(g.number(t))",
            &[
                "#### 1,234".into(),
                "3 apples, then 56.".into(),
                "none".into(),
            ],
        );
        assert_eq!(String::from_utf8_lossy(&out.stdout), "1234\n56\nNone\n");
    }
}
