//! The benchmark end to end: `srt apply` runs the recipe's benchmark through the real
//! `vllm-router` to simulated workers whose timing model is known, and the figures it
//! reports are the ones that model predicts; `srt bench` runs it again.
//!
//! The workers use the tiny test model's tokenizer (`tests/fixtures/tiny-model`), so
//! the prompts' token counts and the simulator's `usage` agree exactly, and three costs:
//! a step of `STEP_MS`, `PER_SEQ_US` more per decoding sequence, `PREFILL_US` per prompt
//! token prefilled (see `srt_sim::common::sched`). Expected figures are the model's; measured
//! ones add the HTTP path (client, Router, simulator), a few milliseconds, so the bounds
//! are one-sided and loose, and the claims that do not depend on the machine's speed
//! (token counts, ordering of levels) are exact.

mod e2e_support;

use e2e_support::{repo, serial, Env};

const STEP_MS: f64 = 20.0;
const PER_SEQ_US: f64 = 1000.0;
const PREFILL_US: f64 = 100.0;
const ISL: u64 = 256;
const OSL: u64 = 16;

fn recipe() -> String {
    let model = repo().join("tests/fixtures/tiny-model");
    format!(
        r#"name: e2e-bench
model:
  path: {model}
  served_name: tiny
resources:
  gpus_per_node: 1
frontend:
  type: vllm-router
  enable_multiple_frontends: false
  # Requests reach the engine as the client sends them: the default cache_aware policy
  # first renders each prompt on the worker, which spreads a burst's arrivals over
  # several engine steps (the timing-model bounds below assume one burst).
  args:
    policy: round_robin
roles:
  agg:
    nodes: 1
    workers: 1
    args:
      max-model-len: 4096
    env:
      SRT_SIM_TOKEN_DELAY_MS: "{STEP_MS}"
      SRT_SIM_DECODE_US_PER_SEQ: "{PER_SEQ_US}"
      SRT_SIM_PREFILL_US_PER_TOKEN: "{PREFILL_US}"
health_check:
  timeout_seconds: 60
  interval_seconds: 1
benchmark:
  type: sa-bench
  isl: {ISL}
  osl: {OSL}
  concurrencies: "1x4"
  num_prompts_mult: 4
  num_warmup_mult: 1
  random_range_ratio: 1.0
  metric_percentiles: [50, 90, 99]
  goodput:
    ttft: 10000
"#,
        model = model.display()
    )
}

fn num(v: &serde_json::Value, key: &str) -> f64 {
    v[key]
        .as_f64()
        .unwrap_or_else(|| panic!("no number `{key}` in {v}"))
}

/// `measured` is `expected` plus the HTTP path: at least `expected` less a millisecond
/// of timer rounding, at most `slack` ms more.
fn about(what: &str, measured: f64, expected: f64, slack: f64) {
    eprintln!("{what}: measured {measured:.2} ms, model {expected:.2} ms");
    assert!(
        measured >= expected - 1.0 && measured <= expected + slack,
        "{what}: measured {measured:.2} ms, the timing model gives {expected:.2} ms (allowed: -1 .. +{slack} ms)"
    );
}

#[test]
fn benchmark_figures_follow_the_simulators_timing_model() {
    let _g = serial();
    let env = Env::new();
    let recipe = env.recipe("bench.yaml", &recipe());
    let out = env.apply(&recipe);
    assert!(out.contains("benchmark: passed"), "{out}");
    assert!(out.contains("TTFT P50") && out.contains("Plot: "), "{out}");

    let bench_dir = env.deployment_dir("e2e-bench").join("bench");
    let runs: Vec<_> = std::fs::read_dir(&bench_dir)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .collect();
    assert_eq!(runs.len(), 1, "{runs:?}");
    assert!(runs[0].with_extension("svg").is_file());
    let levels: Vec<serde_json::Value> = std::fs::read_to_string(&runs[0])
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(levels.len(), 2);

    // vLLM's result fields, as `vllm bench serve --save-result` writes them.
    for key in [
        "date",
        "backend",
        "model_id",
        "tokenizer_id",
        "num_prompts",
        "request_rate",
        "burstiness",
        "max_concurrency",
        "duration",
        "completed",
        "failed",
        "total_input_tokens",
        "total_output_tokens",
        "request_throughput",
        "request_goodput",
        "output_throughput",
        "total_token_throughput",
        "max_output_tokens_per_s",
        "max_concurrent_requests",
        "mean_ttft_ms",
        "median_ttft_ms",
        "std_ttft_ms",
        "p99_ttft_ms",
        "mean_tpot_ms",
        "median_tpot_ms",
        "p90_tpot_ms",
        "mean_itl_ms",
        "median_itl_ms",
        "p50_itl_ms",
        "p99_itl_ms",
        "mean_e2el_ms",
        "median_e2el_ms",
        "p99_e2el_ms",
    ] {
        assert!(levels[0].get(key).is_some(), "no `{key}` in {}", levels[0]);
    }

    for l in &levels {
        let c = num(l, "max_concurrency") as u64;
        let n = 4 * c;
        assert_eq!(
            (l["completed"].as_u64(), l["failed"].as_u64()),
            (Some(n), Some(0)),
            "{l}"
        );
        // Prompts of exactly ISL tokens by the model's tokenizer, as the simulator counts
        // them (its usage is what the client adds up), and exactly OSL output tokens.
        assert_eq!(l["total_input_tokens"].as_u64(), Some(n * ISL), "{l}");
        // The simulator counts with the same tokenizer: its `usage` agrees.
        assert_eq!(l["srt_server_input_tokens"].as_u64(), Some(n * ISL), "{l}");
        assert_eq!(l["total_output_tokens"].as_u64(), Some(n * OSL), "{l}");
        assert_eq!(l["request_rate"], "inf");
        assert_eq!(l["num_warmups"].as_u64(), Some(c));
        // Every request met the generous TTFT objective.
        assert!((num(l, "request_goodput") - num(l, "request_throughput")).abs() < 1e-9);
    }

    // One request at a time: the prefill step takes STEP + ISL x PREFILL, each later token
    // one decode step of STEP + PER_SEQ.
    let c1 = &levels[0];
    let prefill = ISL as f64 * PREFILL_US / 1000.0;
    about(
        "c=1 median TTFT",
        num(c1, "median_ttft_ms"),
        STEP_MS + prefill,
        30.0,
    );
    about(
        "c=1 median ITL",
        num(c1, "median_itl_ms"),
        STEP_MS + PER_SEQ_US / 1000.0,
        5.0,
    );
    // Four at once on one engine: if all four are there when a step starts, their
    // prefills share it (STEP + 4 x ISL x PREFILL); requests arrive a little apart, so
    // the first k may have a step of their own (STEP + k x ISL x PREFILL) and the other
    // 4 - k prefill in the next, beside their decode (STEP + k x PER_SEQ + (4 - k) x ISL
    // x PREFILL). Then they decode together, a step of STEP + 4 x PER_SEQ. The median of
    // the four TTFTs is the mean of the middle two, whichever way the burst split.
    let c4 = &levels[1];
    let medians: Vec<f64> = (1..=4u32)
        .map(|k| {
            let first = STEP_MS + f64::from(k) * prefill;
            let second =
                first + STEP_MS + f64::from(k) * PER_SEQ_US / 1000.0 + f64::from(4 - k) * prefill;
            let mut ttft: Vec<f64> = (0..4).map(|i| if i < k { first } else { second }).collect();
            ttft.sort_by(f64::total_cmp);
            (ttft[1] + ttft[2]) / 2.0
        })
        .collect();
    let low = medians.iter().copied().fold(f64::INFINITY, f64::min);
    let high = medians.iter().copied().fold(0.0, f64::max);
    let ttft = num(c4, "median_ttft_ms");
    eprintln!("c=4 median TTFT: measured {ttft:.2} ms, model {low:.2} to {high:.2} ms");
    assert!(
        ttft >= low - 1.0 && ttft <= high + 30.0,
        "c=4 median TTFT: measured {ttft:.2} ms, the timing model gives {low:.2} to {high:.2} ms (allowed: -1 .. +30 ms)"
    );
    about(
        "c=4 median ITL",
        num(c4, "median_itl_ms"),
        STEP_MS + 4.0 * PER_SEQ_US / 1000.0,
        5.0,
    );
    // Batching: four sequences per step give well over twice the output throughput of one.
    assert!(
        num(c4, "output_throughput") > 2.5 * num(c1, "output_throughput"),
        "c=1 {} tok/s, c=4 {} tok/s",
        num(c1, "output_throughput"),
        num(c4, "output_throughput")
    );

    // `srt bench` measures the deployed deployment again, with other levels, into a new
    // run file.
    let again = env.ok(&[
        "bench",
        "e2e-bench",
        "--concurrencies",
        "2",
        "--num-warmup-mult",
        "0",
    ]);
    assert!(
        again.contains("TTFT P50") && again.contains("Results: "),
        "{again}"
    );
    let after: Vec<_> = std::fs::read_dir(&bench_dir)
        .unwrap()
        .flatten()
        .filter(|e| e.path().extension().is_some_and(|x| x == "jsonl"))
        .collect();
    assert_eq!(after.len(), 2);
    let json = env.stdout(&[
        "bench",
        "e2e-bench",
        "--concurrencies",
        "1",
        "--num-prompts-mult",
        "2",
        "--json",
    ]);
    let line: serde_json::Value = serde_json::from_str(json.trim()).unwrap();
    assert_eq!(line["completed"].as_u64(), Some(2));
    assert_eq!(
        line["num_warmups"].as_u64(),
        Some(1),
        "the recorded warm-up multiple"
    );
    // A rate too slow to send the run within its bound is refused before any request.
    let shown = env.exits(
        &["bench", "e2e-bench", "--request-rate", "0.0001"],
        srt::exit::USAGE,
    );
    assert!(
        shown.contains("`benchmark.max_duration_seconds`") && shown.contains("--request-rate"),
        "{shown}"
    );
    env.destroy("e2e-bench");
}

/// A deployment without `benchmark:` has nothing for `srt bench` to run.
#[test]
fn bench_needs_a_recorded_benchmark() {
    let _g = serial();
    let env = Env::new();
    let text = recipe();
    let text = &text[..text.find("benchmark:").unwrap()];
    let recipe = env.recipe("plain.yaml", text);
    env.apply(&recipe);
    let out = env.srt(&["bench", "e2e-bench"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("has no benchmark"),
        "{}",
        e2e_support::text(&out)
    );
    env.destroy("e2e-bench");
}

/// The result files of the deployment's benchmark runs, oldest first.
fn runs(env: &Env) -> Vec<std::path::PathBuf> {
    let mut runs: Vec<_> = std::fs::read_dir(env.deployment_dir("e2e-bench").join("bench"))
        .map(|d| d.flatten().map(|e| e.path()).collect())
        .unwrap_or_default();
    runs.retain(|p| p.extension().is_some_and(|x| x == "jsonl"));
    runs.sort();
    runs
}

/// Workers that refuse every benchmark request (its 256-token prompts do not fit their
/// 64-token context, while the smoke check's one-token completion does) fail the apply
/// with the counts and the threshold; the result file is still written.
#[test]
fn a_benchmark_whose_requests_fail_fails_the_apply() {
    let _g = serial();
    let env = Env::new();
    let text = recipe().replace("max-model-len: 4096", "max-model-len: 64");
    let recipe = env.recipe("failing.yaml", &text);
    let shown = env.exits(
        &["apply", "-f", &recipe, "--simulate", "--auto-approve"],
        srt::exit::APPLY_FAILED,
    );
    // 1 x 4 + 4 x 4 measured requests.
    assert!(
        shown.contains("the benchmark failed: 20/20 measured requests failed (fraction 1.0000)")
            && shown.contains("`benchmark.max_failed_fraction` allows (0.05)")
            && shown.contains("maximum context length is 64 tokens"),
        "{shown}"
    );
    let runs = runs(&env);
    assert_eq!(runs.len(), 1, "{runs:?}");
    let name = runs[0].file_name().unwrap().to_string_lossy();
    assert!(
        shown.contains(&format!("results .srt/e2e-bench/bench/{name}")),
        "{shown}"
    );
    let levels: Vec<serde_json::Value> = std::fs::read_to_string(&runs[0])
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(levels.len(), 2);
    assert!(levels.iter().all(|l| l["completed"] == 0), "{levels:?}");
    env.destroy("e2e-bench");
}

/// A benchmark whose tokenizer is nowhere here is a warning at plan time (as a missing
/// program is: what the machine lacks stays out of the launch plan, which is the same
/// everywhere) and refused by apply before any process starts.
#[test]
fn a_benchmark_without_its_tokenizer_is_refused_before_anything_starts() {
    let _g = serial();
    let env = Env::new();
    let text = recipe().replace(
        "  type: sa-bench\n",
        "  type: sa-bench\n  tokenizer: /no/such/tokenizer\n",
    );
    let recipe = env.recipe("no-tokenizer.yaml", &text);
    let plan = env.srt(&["plan", "-f", &recipe, "--simulate"]);
    let shown = e2e_support::text(&plan);
    assert!(plan.status.success(), "{shown}");
    assert!(
        shown.contains("warning: the benchmark has no tokenizer here, so apply would refuse")
            && shown.contains("no tokenizer for `/no/such/tokenizer`"),
        "{shown}"
    );
    let shown = env.exits(
        &["apply", "-f", &recipe, "--simulate", "--auto-approve"],
        srt::exit::ERROR,
    );
    assert!(
        shown.contains("srt::bench::tokenizer")
            && shown.contains("has no tokenizer; nothing was started")
            && shown.contains("set `benchmark.tokenizer`"),
        "{shown}"
    );
    assert!(env.processes("e2e-bench").is_empty());
    assert!(runs(&env).is_empty());
}

/// The levels of the deployment's only benchmark run.
fn only_run_levels(env: &Env) -> Vec<serde_json::Value> {
    let runs = runs(env);
    assert_eq!(runs.len(), 1, "{runs:?}");
    std::fs::read_to_string(&runs[0])
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// `use_chat_template: true` (srtctl's default): every prompt goes out in the tiny
/// model's chat template (`user: ...\nassistant: `), and the input tokens recorded
/// are the templated prompts' as the simulated server counts them. The template's
/// length is sa-bench's (its one-message chat `a` less one token), which undercounts
/// this template by one for most contents (` a` is one token), so the prompts come
/// out a token longer than `isl` where the plain ones are exactly `isl`.
#[test]
fn a_chat_template_benchmark_records_the_templated_prompts() {
    let _g = serial();
    let env = Env::new();
    let text = recipe().replace(
        "  type: sa-bench\n",
        "  type: sa-bench\n  use_chat_template: true\n",
    );
    let recipe = env.recipe("chat.yaml", &text);
    let out = env.apply(&recipe);
    assert!(out.contains("benchmark: passed"), "{out}");
    let levels = only_run_levels(&env);
    assert_eq!(levels.len(), 2);
    for l in &levels {
        let n = l["num_prompts"].as_u64().unwrap();
        let input = l["total_input_tokens"].as_u64().unwrap();
        assert_eq!(l["use_chat_template"], true, "{l}");
        assert_eq!(l["completed"].as_u64(), Some(n), "{l}");
        assert_eq!(l["srt_server_input_tokens"].as_u64(), Some(input), "{l}");
        assert!(
            input > n * ISL && input <= n * (ISL + 2),
            "{input} input tokens for {n} prompts of {ISL}: {l}"
        );
    }
    // Recorded in state: `srt bench` runs it again, the same prompts by the same seed.
    let again = env.ok(&["bench", "e2e-bench"]);
    assert!(again.contains("in the model's chat template"), "{again}");
    let runs = runs(&env);
    assert_eq!(runs.len(), 2, "{runs:?}");
    let second: Vec<serde_json::Value> = std::fs::read_to_string(&runs[1])
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    for (a, b) in levels.iter().zip(&second) {
        assert_eq!(a["total_input_tokens"], b["total_input_tokens"], "{a}\n{b}");
    }
    env.destroy("e2e-bench");
}

/// srtctl's DeepSeek-V4 recipes name a sa-bench tokenizer adapter (`custom_tokenizer`)
/// because the model ships no chat template: with one, a tokenizer without a template
/// plans without a warning, the benchmark passes, and the server counts the tokens the
/// benchmark recorded. SGLang's adapter takes its mode from the recipe's top-level
/// `environment`, as srtctl's benchmark step does.
#[test]
fn a_tokenizer_adapter_wraps_prompts_where_the_model_has_no_template() {
    let _g = serial();
    let env = Env::new();
    let bare = tokenizer_without_template();
    const ADAPTER: &str = "sa_bench_tokenizers.sglang_deepseek_v4.SGLangDeepseekV4Tokenizer";
    let text = recipe().replace(
        "benchmark:\n  type: sa-bench\n",
        &format!(
            "environment:\n  SGLANG_DEFAULT_THINKING: \"1\"\nbenchmark:\n  type: sa-bench\n  use_chat_template: true\n  tokenizer: {}\n  custom_tokenizer: {ADAPTER}\n",
            bare.path().display()
        ),
    );
    assert!(text.contains(ADAPTER), "{text}");
    let recipe = env.recipe("adapter.yaml", &text);
    let plan = env.ok(&["plan", "-f", &recipe, "--simulate"]);
    assert!(!plan.contains("chat template is unusable"), "{plan}");
    let out = env.apply(&recipe);
    assert!(out.contains("benchmark: passed"), "{out}");
    for l in only_run_levels(&env) {
        let n = l["num_prompts"].as_u64().unwrap();
        assert_eq!(l["custom_tokenizer"], ADAPTER, "{l}");
        assert_eq!(l["srt_chat_thinking"], true, "{l}");
        assert_eq!(l["completed"].as_u64(), Some(n), "{l}");
        assert_eq!(
            l["srt_server_input_tokens"].as_u64(),
            l["total_input_tokens"].as_u64(),
            "{l}"
        );
    }
    let again = env.ok(&["bench", "e2e-bench"]);
    assert!(
        again.contains(&format!("in the chat format of {ADAPTER} (thinking mode)")),
        "{again}"
    );
    env.destroy("e2e-bench");
}

/// A chat-template benchmark whose tokenizer has no chat template is a warning at plan
/// time and refused by apply before any process starts, as a missing tokenizer is.
#[test]
fn a_chat_template_benchmark_without_a_template_is_refused_before_anything_starts() {
    let _g = serial();
    let env = Env::new();
    let bare = tokenizer_without_template();
    let text = recipe().replace(
        "  type: sa-bench\n",
        &format!(
            "  type: sa-bench\n  use_chat_template: true\n  tokenizer: {}\n",
            bare.path().display()
        ),
    );
    let recipe = env.recipe("no-template.yaml", &text);
    let plan = env.srt(&["plan", "-f", &recipe, "--simulate"]);
    let shown = e2e_support::text(&plan);
    assert!(plan.status.success(), "{shown}");
    assert!(
        shown.contains(
            "warning: the benchmark's chat template is unusable here, so apply would refuse"
        ) && shown.contains("has no chat template"),
        "{shown}"
    );
    let shown = env.exits(
        &["apply", "-f", &recipe, "--simulate", "--auto-approve"],
        srt::exit::ERROR,
    );
    assert!(
        shown.contains("srt::bench::chat_template")
            && shown.contains("nothing was started")
            && shown.contains("use_chat_template: false"),
        "{shown}"
    );
    assert!(env.processes("e2e-bench").is_empty());
    assert!(runs(&env).is_empty());
}

/// The tiny model's tokenizer files alone, in a directory of their own: a tokenizer
/// with no chat template.
fn tokenizer_without_template() -> tempfile::TempDir {
    let bare = tempfile::tempdir().unwrap();
    let tiny = repo().join("tests/fixtures/tiny-model");
    for f in ["tokenizer.json", "tokenizer_config.json"] {
        std::fs::copy(tiny.join(f), bare.path().join(f)).unwrap();
    }
    bare
}

/// The start of a recipe `name` with the tiny model behind the vLLM Router, one GPU a
/// worker; its roles follow.
fn tiny_recipe(name: &str) -> String {
    let model = repo().join("tests/fixtures/tiny-model");
    format!(
        "name: {name}\nmodel:\n  path: {}\n  served_name: tiny\nresources:\n  gpus_per_node: 1\nfrontend:\n  type: vllm-router\n",
        model.display()
    )
}

/// srtctl's `custom` benchmark: a recipe with the tiny model and `command`.
fn custom_recipe(command: &str) -> String {
    format!(
        r#"{head}roles:
  prefill:
    nodes: 1
    workers: 1
  decode:
    nodes: 1
    workers: 1
environment:
  FROM_ENVIRONMENT: "on {{node_id}}"
health_check:
  timeout_seconds: 60
  interval_seconds: 1
benchmark:
  type: custom
  command: {command}
  env:
    MY_OPTION: "set"
"#,
        head = tiny_recipe("e2e-custom"),
        command = serde_json::to_string(command).unwrap(),
    )
}

/// The command runs once the smoke completion passed, as a process of the deployment,
/// told its endpoints as srtctl tells them; exit 0 passes. Another exit status fails the
/// apply with the command's last lines.
#[test]
fn a_custom_benchmark_runs_its_command_and_is_judged_by_its_exit_status() {
    let _g = serial();
    let env = Env::new();
    let out_file = env.deployment_dir("e2e-custom").with_extension("seen");
    let command = format!(
        r#"env | grep -E '^(SRT_|SRTCTL_|AIPERF_|MY_OPTION|FROM_ENVIRONMENT)' | sort > {seen}
curl -sf -o /dev/null "http://$SRT_FRONTEND_HOST:$SRT_FRONTEND_PORT/v1/models"
for e in ${{SRT_PREFILL_ENDPOINTS//,/ }} ${{SRT_DECODE_ENDPOINTS//,/ }}; do curl -sf -o /dev/null "http://$e/health"; done
echo custom-benchmark-passed"#,
        seen = out_file.display()
    );
    let recipe = env.recipe("custom.yaml", &custom_recipe(&command));
    let shown = env.apply(&recipe);
    assert!(
        shown.contains("benchmark: passed (the command exited 0"),
        "{shown}"
    );
    let seen = std::fs::read_to_string(&out_file).unwrap();
    for expected in [
        "FROM_ENVIRONMENT=on 0",
        "MY_OPTION=set",
        "SRTCTL_FRONTEND_TYPE=vllm-router",
        "SRT_FRONTEND_HOST=127.0.0.1",
        "SRT_FRONTEND_PORT=",
        "SRT_PREFILL_ENDPOINTS=127.0.0.1:",
        "SRT_DECODE_IPS=127.0.0.1",
        "AIPERF_SERVER_METRICS_URLS=http://127.0.0.1:",
    ] {
        assert!(seen.contains(expected), "{expected} not in:\n{seen}");
    }
    let bench = env.exits(&["bench", "e2e-custom"], srt::exit::USAGE);
    assert!(
        bench.contains("`srt apply --replace benchmark` runs it again"),
        "{bench}"
    );
    // A check, like the serving benchmark: every apply runs it again.
    std::fs::remove_file(&out_file).unwrap();
    let again = env.apply(&recipe);
    assert!(
        again.contains("No changes") && again.contains("benchmark: passed"),
        "{again}"
    );
    assert!(out_file.exists(), "{again}");

    let failing = env.recipe("failing.yaml", &custom_recipe("echo about to fail; exit 7"));
    let shown = env.exits(
        &["apply", "-f", &failing, "--simulate", "--auto-approve"],
        srt::exit::APPLY_FAILED,
    );
    assert!(
        shown.contains("the command exited 7") && shown.contains("about to fail"),
        "{shown}"
    );
    // Its output only: not the earlier, passing runs' (the log keeps them).
    assert!(!shown.contains("custom-benchmark-passed"), "{shown}");
    env.destroy("e2e-custom");
}

/// A command still running when apply is killed is no record's: the next plan finds it
/// through its lease, and destroy stops it.
#[test]
fn a_custom_benchmark_left_by_a_killed_apply_is_stopped_by_destroy() {
    let _g = serial();
    let env = Env::new();
    let recipe = env.recipe("custom.yaml", &custom_recipe("sleep 600"));
    let mut apply = env.spawn(&["apply", "-f", &recipe, "--simulate", "--auto-approve"]);
    e2e_support::wait_for("the benchmark's command to start", || {
        !env.processes_of("e2e-custom", "benchmark.command")
            .is_empty()
    });
    e2e_support::sigkill(apply.id()).unwrap();
    apply.wait().unwrap();
    let plan = env.stdout(&["plan", "-f", &recipe, "--simulate"]);
    assert!(plan.contains("benchmark.command"), "{plan}");
    env.destroy("e2e-custom");
    assert!(env
        .processes_of("e2e-custom", "benchmark.command")
        .is_empty());
}

/// A Mooncake trace (aiperf's `mooncake_trace` lines) of `requests` requests, one every
/// 100 ms, each `blocks` full blocks of 512 tokens sharing the first, then 100 tokens
/// of their own.
fn mooncake_trace(requests: u64, blocks: u64) -> String {
    (0..requests)
        .map(|i| {
            let ids: Vec<u64> = (0..blocks).chain([blocks + i % 3]).collect();
            format!(
                "{{\"timestamp\": {}, \"input_length\": {}, \"output_length\": 8, \"hash_ids\": {ids:?}}}\n",
                i * 100,
                blocks * 512 + 100
            )
        })
        .collect()
}

/// A recipe `name` with the tiny model, one aggregated worker of 2,048 tokens, the
/// variable `var` naming `dir` (where the benchmark finds its data, so that nothing is
/// downloaded), and `benchmark`'s keys.
fn data_benchmark_recipe(name: &str, var: &str, dir: &std::path::Path, benchmark: &str) -> String {
    format!(
        r#"{head}roles:
  agg:
    nodes: 1
    workers: 1
    args:
      max-model-len: 2048
environment:
  {var}: {dir}
health_check:
  timeout_seconds: 60
  interval_seconds: 1
benchmark:
{benchmark}"#,
        head = tiny_recipe(name),
        dir = dir.display(),
    )
}

/// srtctl's `mooncake-router` benchmark, its trace read from `traces` (srtctl's
/// `TRACE_DIR`).
fn trace_recipe(traces: &std::path::Path) -> String {
    data_benchmark_recipe(
        "e2e-trace",
        "TRACE_DIR",
        traces,
        "  type: mooncake-router\n  mooncake_workload: toolagent\n  ttft_threshold_ms: 5000\n  itl_threshold_ms: 500\n",
    )
}

/// The benchmark command's log of deployment `name`.
fn command_log(env: &Env, name: &str) -> String {
    std::fs::read_to_string(env.deployment_dir(name).join("logs/benchmark.command.log")).unwrap()
}

/// aiperf's summary in `run` counts the twelve requests of [`mooncake_trace`] and
/// their goodput.
fn assert_twelve_replayed(run: &std::path::Path) {
    let summary: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(run.join("profile_export_aiperf.json")).unwrap(),
    )
    .unwrap();
    assert_eq!(num(&summary["request_count"], "avg"), 12.0, "{summary}");
    assert!(summary["goodput"].is_object(), "{summary}");
}

/// With prompts of 5 blocks (2660 tokens) in `trace`, past the workers' 2048, every
/// request fails, and so does the apply of `recipe`, though aiperf exits 0.
fn assert_long_prompts_fail(env: &Env, trace: &std::path::Path, recipe: &str) {
    std::fs::write(trace, mooncake_trace(12, 5)).unwrap();
    let shown = env.exits(
        &["apply", "-f", recipe, "--simulate", "--auto-approve"],
        srt::exit::APPLY_FAILED,
    );
    assert!(
        shown.contains("the command exited 1")
            && shown.contains("requests failed, more than max_failed_fraction 0.05"),
        "{shown}"
    );
}

/// The trace is replayed by the real aiperf (pinned, `scripts/install-aiperf.sh`)
/// through the real Router after aiperf's warm-up, and srt reads aiperf's summary:
/// requests that all succeed pass; requests the workers refuse (prompts longer than
/// `max-model-len`) fail the apply, though aiperf itself exits 0. Twelve requests:
/// aiperf builds ten or more prompts in worker processes, where the aiperf releases
/// after the pinned one cannot load a tokenizer from a directory.
#[test]
fn a_mooncake_trace_is_replayed_by_aiperf_and_failed_requests_fail_the_apply() {
    let _g = serial();
    let env = Env::new();
    let traces = env.dir.path().join("traces");
    std::fs::create_dir_all(&traces).unwrap();
    let trace = traces.join("toolagent_trace.jsonl");
    std::fs::write(&trace, mooncake_trace(12, 1)).unwrap();
    let recipe = env.recipe("trace.yaml", &trace_recipe(&traces));
    let shown = env.apply(&recipe);
    assert!(
        shown.contains("benchmark: passed (the command exited 0"),
        "{shown}"
    );
    let log = command_log(&env, "e2e-trace");
    assert!(log.contains("srt: 12 of 12 requests succeeded"), "{log}");
    let artifacts = env.deployment_dir("e2e-trace").join("run/artifacts");
    let runs: Vec<_> = std::fs::read_dir(&artifacts)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert!(
        runs.len() == 1 && runs[0].starts_with("tiny_toolagent_"),
        "{runs:?}"
    );
    assert_twelve_replayed(&artifacts.join(&runs[0]));
    assert_long_prompts_fail(&env, &trace, &recipe);
    env.destroy("e2e-trace");
}

/// GSM8K's two files in its own format: `train` worked examples and `test` questions,
/// each question `words` words long.
fn gsm8k_files(dir: &std::path::Path, train: usize, test: usize, words: usize) {
    std::fs::create_dir_all(dir).unwrap();
    let line = |i: usize| {
        let padding = " and then some more apples".repeat(words / 5);
        serde_json::json!({
            "question": format!("Ann has {i} apples{padding}. She buys 2 more. How many apples does she have?"),
            "answer": format!("She has {i} + 2 = <<{i}+2={}>>{} apples.\n#### {}", i + 2, i + 2, i + 2),
        })
        .to_string()
    };
    let lines = |n: usize| (0..n).map(|i| line(i) + "\n").collect::<String>();
    std::fs::write(dir.join("train.jsonl"), lines(train)).unwrap();
    std::fs::write(dir.join("test.jsonl"), lines(test)).unwrap();
}

/// srtctl's `gsm8k` of a vLLM deployment, its GSM8K files read from `data`.
fn gsm8k_recipe(data: &std::path::Path) -> String {
    data_benchmark_recipe(
        "e2e-gsm8k",
        "GSM8K_DIR",
        data,
        "  type: gsm8k\n  num_examples: 6\n  num_shots: 2\n  max_tokens: 16\n  repeat: 2\n",
    )
}

/// A vLLM deployment's GSM8K evaluation is srt's program over `/v1/completions`, run
/// `repeat` times with the recipe's counts: each run's results are recorded, all its
/// questions answered. Questions longer than the workers' `max-model-len` fail every
/// request, and the apply fails with them.
#[test]
fn a_vllm_gsm8k_evaluation_runs_srts_program_and_failed_requests_fail_the_apply() {
    let _g = serial();
    let env = Env::new();
    let data = env.dir.path().join("gsm8k");
    gsm8k_files(&data, 2, 6, 10);
    let recipe = env.recipe("gsm8k.yaml", &gsm8k_recipe(&data));
    let shown = env.apply(&recipe);
    assert!(
        shown.contains("benchmark: passed (the command exited 0"),
        "{shown}"
    );
    let log = command_log(&env, "e2e-gsm8k");
    assert!(log.contains("srt: GSM8K run 2 of 2"), "{log}");
    for run in 1..=2 {
        let path = env
            .deployment_dir("e2e-gsm8k")
            .join(format!("run/accuracy/gsm8k_run{run}.json"));
        let result: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        assert_eq!(result["num_questions"], 6, "{result}");
        assert_eq!(result["num_shots"], 2, "{result}");
        assert_eq!(result["failed_requests"], 0, "{result}");
        assert!(result["total_output_tokens"].as_u64() > Some(0), "{result}");
        assert!(result["accuracy"].as_f64().is_some(), "{result}");
    }

    // Questions of about 3,000 words are past the workers' 2,048 tokens.
    gsm8k_files(&data, 2, 6, 3000);
    let shown = env.exits(
        &["apply", "-f", &recipe, "--simulate", "--auto-approve"],
        srt::exit::APPLY_FAILED,
    );
    assert!(
        shown.contains("6 of 6 requests failed, more than max_failed_fraction 0.05"),
        "{shown}"
    );
    env.destroy("e2e-gsm8k");
}

/// A P/D SGLang deployment behind the real sglang-router, two decode workers, with
/// srtctl's decode slow-down: each decode worker's `/slow_down` (the simulator's, every
/// step sleeping while it is set) is turned on when the level starts and off after the
/// wait, so the level's first tokens come a sleep apart and the rest at once; the
/// prefill is never slowed, and the decode workers serve at full speed afterwards;
/// `srt bench` does the same.
#[test]
fn a_decode_slow_down_slows_each_decode_worker_for_the_wait_only() {
    let _g = serial();
    let env = Env::new();
    let text = r#"schema: 2
name: e2e-bench
model:
  path: /models/tiny
  served_name: tiny
resources:
  gpus_per_node: 3
engine: sglang
frontend:
  type: sglang-router
  enable_multiple_frontends: false
roles:
  prefill:
    nodes: 1
    workers: 1
    gpus: 1
  decode:
    nodes: colocate
    workers: 2
    gpus: 1
health_check:
  timeout_seconds: 60
benchmark:
  type: sa-bench
  isl: 32
  osl: 8
  concurrencies: "2"
  num_prompts_mult: 2
  num_warmup_mult: 0
  random_range_ratio: 1.0
  use_chat_template: false
  tokenizer: TOKENIZER
  slow_down_sleep_time: 0.25
  slow_down_wait_time: 0.6
"#
    .replace(
        "TOKENIZER",
        &repo()
            .join("tests/fixtures/tiny-model")
            .display()
            .to_string(),
    );
    let recipe = env.recipe("slow-down.yaml", &text);
    let render = env.ok(&["render", "-f", &recipe]);
    assert!(
        render.contains("sleeping 0.25 s (POST /slow_down)"),
        "{render}"
    );
    let out = env.apply(&recipe);
    assert!(out.contains("benchmark: passed"), "{out}");
    let levels = only_run_levels(&env);
    let level = &levels[0];
    assert_eq!(level["slow_down_sleep_time"], 0.25, "{level}");
    let servers = level["slow_down_servers"].as_array().unwrap();
    assert_eq!(servers.len(), 2, "the two decode leaders: {level}");
    assert!(servers
        .iter()
        .all(|s| s.as_str().unwrap().starts_with("http://127.0.0.1:")));
    // Slowed steps while it was on: a request's first tokens a sleep apart.
    assert!(num(level, "p99_itl_ms") >= 200.0, "{level}");
    assert!(num(level, "duration") >= 0.5, "{level}");
    // Each decode worker was slowed and released once; the prefill never.
    let logs = env.deployment_dir("e2e-bench").join("logs");
    let calls = |address: &str| {
        std::fs::read_to_string(logs.join(format!("{address}.log")))
            .unwrap_or_else(|e| panic!("{address}: {e}"))
            .matches("\"POST /slow_down\" 200")
            .count()
    };
    assert_eq!(calls("worker.decode[0].node[0]"), 2);
    assert_eq!(calls("worker.decode[1].node[0]"), 2);
    assert_eq!(calls("worker.prefill[0].node[0]"), 0);
    // `srt bench` runs it again, its servers resolved as apply resolves them.
    let again = env.ok(&["bench", "e2e-bench"]);
    assert!(
        again.contains("sleeping 0.25 s (POST /slow_down)") && !again.contains("<node"),
        "{again}"
    );
    assert_eq!(calls("worker.decode[1].node[0]"), 4);
    // Released: four tokens now take no sleep (with it, at least 4 x 250 ms;
    // the bound leaves room for a loaded machine).
    let t0 = std::time::Instant::now();
    let done = env.completion("http://127.0.0.1:8000");
    assert!(done["choices"].is_array(), "{done}");
    assert!(
        t0.elapsed() < std::time::Duration::from_millis(750),
        "{:?}",
        t0.elapsed()
    );
    env.destroy("e2e-bench");
}

/// srtctl's `trace-replay`: the recipe's own trace file, replayed by the real aiperf
/// through the real Router at each concurrency in turn after a warm-up, each level's
/// results in a directory of its own and each summary read: requests that all succeed
/// pass; requests the workers refuse fail the apply at the level they fail.
#[test]
fn a_trace_file_is_replayed_at_each_concurrency_and_failed_requests_fail_the_apply() {
    let _g = serial();
    let env = Env::new();
    let trace = env.dir.path().join("my trace.jsonl");
    std::fs::write(&trace, mooncake_trace(12, 1)).unwrap();
    let text = format!(
        "{head}roles:\n  agg:\n    nodes: 1\n    workers: 1\n    args:\n      max-model-len: 2048\nhealth_check:\n  timeout_seconds: 60\n  interval_seconds: 1\nbenchmark:\n  type: trace-replay\n  trace_file: {trace}\n  concurrencies: \"1,2\"\n  ttft_threshold_ms: 5000\n  itl_threshold_ms: 500\n  aiperf_package: aiperf>=0.7.0\n",
        head = tiny_recipe("e2e-replay"),
        trace = trace.display(),
    );
    let recipe = env.recipe("replay.yaml", &text);
    let shown = env.apply(&recipe);
    assert!(
        shown.contains("benchmark: passed (the command exited 0"),
        "{shown}"
    );
    let log = command_log(&env, "e2e-replay");
    assert_eq!(
        log.matches("srt: 12 of 12 requests succeeded").count(),
        2,
        "{log}"
    );
    let artifacts = env.deployment_dir("e2e-replay").join("run/artifacts");
    let mut runs: Vec<_> = std::fs::read_dir(&artifacts)
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    runs.sort();
    assert_eq!(runs.len(), 3, "{runs:?}");
    assert!(runs[0].starts_with("tiny_trace_c1_"), "{runs:?}");
    assert!(runs[1].starts_with("tiny_trace_c2_"), "{runs:?}");
    assert_eq!(runs[2], "warmup");
    for run in &runs[..2] {
        assert_twelve_replayed(&artifacts.join(run));
    }
    assert_long_prompts_fail(&env, &trace, &recipe);
    env.destroy("e2e-replay");
}
