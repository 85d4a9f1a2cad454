//! Every invalid recipe in `tests/invalid/` is refused with the right code, a span on
//! the offending text, exit code 3 from the binary (and no panic), and a reviewed
//! rendering of its diagnostic (`tests/snapshots/`).

mod common;

use common::{assert_problem, render_diag};
use srt::assemble::{assemble as build, BuildOptions};
use srt::recipe::{load_file, load_problems, Problem, Source};
use std::path::{Path, PathBuf};
use std::process::Command;

/// One invalid case: its file, the `--nodes` it is checked with, the code it must
/// raise, and the source text its span must cover.
struct Case {
    file: &'static str,
    nodes: Option<usize>,
    code: &'static str,
    span_text: &'static str,
    /// A fragment the message, label or help must contain (the did-you-mean, the rule).
    mentions: &'static str,
}

const fn case(
    file: &'static str,
    code: &'static str,
    span_text: &'static str,
    mentions: &'static str,
) -> Case {
    Case {
        file,
        nodes: None,
        code,
        span_text,
        mentions,
    }
}

const CASES: &[Case] = &[
    case(
        "trtllm-args-list.yaml",
        "srt::recipe::type",
        "[",
        "found a list",
    ),
    case(
        "engine-key-type.yaml",
        "srt::recipe::type",
        "\"yes\"",
        "must be a boolean",
    ),
    case(
        "engine-key-value.yaml",
        "srt::recipe::value",
        "per_rank",
        "expected `per_node` or `per_gpu`",
    ),
    case(
        "trtllm-unknown-key.yaml",
        "srt::recipe::trtllm_unknown_key",
        "max_batch_sise",
        "did you mean `max_batch_size`?",
    ),
    case(
        "trtllm-type.yaml",
        "srt::recipe::trtllm_type",
        "eight",
        "must be an integer",
    ),
    case(
        "trtllm-value.yaml",
        "srt::recipe::trtllm_value",
        "RDMA",
        "NIXL",
    ),
    case(
        "trtllm-parallel.yaml",
        "srt::recipe::trtllm_parallel",
        "4",
        "2 GPUs",
    ),
    case(
        "trtllm-managed-key.yaml",
        "srt::recipe::managed_flag",
        "tokenizer",
        "model.path",
    ),
    case(
        "trtllm-eplb-env.yaml",
        "srt::recipe::managed_env",
        "TRTLLM_EPLB_SHM_NAME",
        "each endpoint has its own",
    ),
    case(
        "trtllm-frontend.yaml",
        "srt::recipe::engine_frontend",
        "trtllm",
        "Dynamo",
    ),
    case(
        "trtllm-sequential-node-start.yaml",
        "srt::recipe::unsupported_key",
        "sequential_node_start",
        "srtctl key",
    ),
    case(
        "unknown-key-gpu.yaml",
        "srt::recipe::unknown_key",
        "gpu",
        "did you mean `gpus`?",
    ),
    case(
        "srtctl-only-services.yaml",
        "srt::recipe::unsupported_key",
        "services",
        "srtctl key",
    ),
    case(
        "benchmark-type.yaml",
        "srt::recipe::benchmark_type",
        "lm-eval",
        "not supported by srt",
    ),
    case(
        "benchmark-mooncake-workload.yaml",
        "srt::recipe::value",
        "conversations",
        "did you mean `conversation`?",
    ),
    case(
        "benchmark-custom-no-command.yaml",
        "srt::recipe::missing_key",
        "benchmark",
        "needs `benchmark.command`",
    ),
    case(
        "benchmark-custom-serving-key.yaml",
        "srt::recipe::unknown_key",
        "isl",
        "benchmark.isl",
    ),
    case(
        "benchmark-req-rate.yaml",
        "srt::recipe::value",
        "0",
        "`inf` or a number",
    ),
    case(
        "nginx-session-header.yaml",
        "srt::recipe::value",
        "\"X-Session; deny all\"",
        "not a header name",
    ),
    case(
        "nginx-session-affinity-header-alone.yaml",
        "srt::recipe::value",
        "X-Correlation-ID",
        "without `nginx_session_affinity: true`",
    ),
    case(
        "benchmark-req-rate-word.yaml",
        "srt::recipe::value",
        "\"fast\"",
        "`inf` or a number",
    ),
    case(
        "benchmark-max-failed-fraction.yaml",
        "srt::recipe::range",
        "1.5",
        "from 0 to 1",
    ),
    case(
        "benchmark-replay-relative-trace.yaml",
        "srt::recipe::value",
        "traces/day1.jsonl",
        "must be an absolute path",
    ),
    case(
        "benchmark-replay-levels.yaml",
        "srt::recipe::value",
        "\"4x8\"",
        "splits the text at commas",
    ),
    case(
        "benchmark-replay-aiperf.yaml",
        "srt::recipe::value",
        "aiperf>=0.9",
        "excludes aiperf 0.8.0",
    ),
    case(
        "benchmark-replay-no-trace.yaml",
        "srt::recipe::missing_key",
        "benchmark",
        "is required by `trace-replay`",
    ),
    case(
        "mocker-disaggregated.yaml",
        "srt::recipe::engine_role",
        "prefill",
        "aggregated only",
    ),
    case(
        "benchmark-slow-down-half.yaml",
        "srt::recipe::missing_key",
        "slow_down_sleep_time",
        "needs `benchmark.slow_down_wait_time`",
    ),
    case(
        "benchmark-slow-down-range.yaml",
        "srt::recipe::range",
        "0",
        "must be above 0",
    ),
    case(
        "benchmark-max-failed-fraction-type.yaml",
        "srt::recipe::type",
        "\"5%\"",
        "must be a number",
    ),
    case(
        "benchmark-sharegpt-without-path.yaml",
        "srt::recipe::missing_key",
        "dataset_name",
        "dataset_path",
    ),
    case(
        "benchmark-adapter-max-effort.yaml",
        "srt::recipe::value",
        "SGLANG_DSV4_REASONING_EFFORT",
        "preamble",
    ),
    case(
        "benchmark-custom-tokenizer.yaml",
        "srt::recipe::value",
        "glm_moe_dsa",
        "no sa-bench tokenizer adapter",
    ),
    case(
        "benchmark-prompts-conflict.yaml",
        "srt::recipe::conflict",
        "10",
        "earlier name",
    ),
    case(
        "wrong-type-workers.yaml",
        "srt::recipe::type",
        "two",
        "must be an integer, found a string",
    ),
    case(
        "wrong-type-resources.yaml",
        "srt::recipe::type",
        "4",
        "`resources` must be a mapping",
    ),
    case(
        "wrong-type-multiple-frontends.yaml",
        "srt::recipe::type",
        "\"no\"",
        "true or false",
    ),
    case(
        "missing-roles.yaml",
        "srt::recipe::missing_key",
        "",
        "no `roles`",
    ),
    case(
        "empty-roles.yaml",
        "srt::recipe::no_roles",
        "roles",
        "declares no role",
    ),
    case(
        "missing-workers.yaml",
        "srt::recipe::missing_key",
        "agg",
        "`roles.agg.workers` is missing",
    ),
    case(
        "agg-with-prefill.yaml",
        "srt::recipe::role_mix",
        "agg",
        "not both",
    ),
    case(
        "prefill-without-decode.yaml",
        "srt::recipe::role_mix",
        "prefill",
        "needs a `decode` role",
    ),
    case(
        "colocate-on-prefill.yaml",
        "srt::recipe::colocate",
        "colocate",
        "only allowed on decode",
    ),
    case(
        "colocate-without-prefill-gpus.yaml",
        "srt::recipe::colocate_gpus",
        "prefill",
        "explicit `gpus` on prefill",
    ),
    case(
        "colocate-oversubscribed.yaml",
        "srt::recipe::colocate_oversubscribed",
        "colocate",
        "needs 4 GPUs",
    ),
    case(
        "dp-tp-mismatch.yaml",
        "srt::recipe::dp_gpus",
        "data-parallel-size",
        "= 16 GPUs, but each `agg` worker has 8",
    ),
    case(
        "managed-flag-port.yaml",
        "srt::recipe::managed_flag",
        "port",
        "`roles.agg.args.port` is set by srt: each worker's HTTP port is allocated",
    ),
    case(
        "managed-env-vllm-port.yaml",
        "srt::recipe::managed_env",
        "VLLM_PORT",
        "`roles.agg.env.VLLM_PORT`",
    ),
    case(
        "unknown-connector.yaml",
        "srt::recipe::connector",
        "nixel",
        "did you mean `nixl`?",
    ),
    case(
        "moriio-decode-other-connector.yaml",
        "srt::recipe::discovery_roles",
        "nixl",
        "both prefill and decode",
    ),
    case(
        "moriio-agg.yaml",
        "srt::recipe::discovery_topology",
        "moriio",
        "prefill/decode topology",
    ),
    case(
        "moriio-multiple-frontends.yaml",
        "srt::recipe::discovery_single_router",
        "true",
        "must be false",
    ),
    case(
        "moriio-multiple-frontends-unset.yaml",
        "srt::recipe::discovery_single_router",
        "frontend",
        "defaults to true",
    ),
    case(
        "moriio-multiple-frontends-default.yaml",
        "srt::recipe::discovery_single_router",
        "moriio",
        "defaults to true",
    ),
    case(
        "moriio-first-decode.yaml",
        "srt::recipe::discovery_placement",
        "first_decode",
        "must run on `head`",
    ),
    case(
        "per-gpu-dp.yaml",
        "srt::recipe::dp_launch_mode",
        "per_gpu",
        "per_node",
    ),
    case(
        "managed-env-side-channel.yaml",
        "srt::recipe::managed_env",
        "VLLM_NIXL_SIDE_CHANNEL_HOST",
        "its own `kv-transfer-config`",
    ),
    case(
        "nginx-body-size.yaml",
        "srt::recipe::value",
        "45 MB",
        "not an nginx size",
    ),
    case(
        "policy-kv-aware.yaml",
        "srt::recipe::worker_feature",
        "kv_aware",
        "/get_server_info",
    ),
    case(
        "smg-power-of-two.yaml",
        "srt::recipe::flag_value",
        "power_of_two",
        "fewer than two workers",
    ),
    case(
        "smg-unpaired-connector.yaml",
        "srt::recipe::pd_protocol",
        "none",
        "no KV hand-off",
    ),
    case(
        "sglang-router-prefill-decode.yaml",
        "srt::recipe::pd_protocol",
        "nixl",
        "drives SGLang's bootstrap rendezvous",
    ),
    case(
        "sglang-behind-vllm-router-prefill-decode.yaml",
        "srt::recipe::pd_protocol",
        "sglang",
        "`sglang-router`",
    ),
    case(
        "sglang-parallel-sizes.yaml",
        "srt::recipe::parallel_size",
        "tp-size",
        "= 3 GPUs, but each `agg` worker has 2",
    ),
    case(
        "sglang-dp-across-nodes.yaml",
        "srt::recipe::parallel_size",
        "dp-size",
        "use attention DP across the nodes",
    ),
    case(
        "sglang-managed-transfer-backend.yaml",
        "srt::recipe::managed_flag",
        "disaggregation-transfer-backend",
        "the KV transfer backend is the connector",
    ),
    case(
        "sglang-vllm-key.yaml",
        "srt::recipe::engine_key",
        "dp_launch_mode",
        "a key of the `vllm` engine",
    ),
    case(
        "scale-out-off.yaml",
        "srt::recipe::worker_feature",
        "false",
        "--enable-scale-out",
    ),
    case(
        "managed-flag-dp-rpc-port.yaml",
        "srt::recipe::managed_flag",
        "data-parallel-rpc-port",
        "port kind `dp_rpc`",
    ),
    case(
        "intra-node-dp-conflict.yaml",
        "srt::recipe::intra_node_dp",
        "4",
        "which gives 1",
    ),
    case(
        "unknown-frontend-type.yaml",
        "srt::recipe::frontend",
        "triton",
        "known frontends: ",
    ),
    case(
        "yaml-syntax-error.yaml",
        "srt::recipe::syntax",
        ":",
        "YAML error",
    ),
    case(
        "empty.yaml",
        "srt::recipe::empty",
        "",
        "the recipe is empty",
    ),
    case(
        "comments-only.yaml",
        "srt::recipe::empty",
        "#",
        "the recipe is empty",
    ),
    Case {
        nodes: Some(2),
        ..case(
            "not-enough-nodes.yaml",
            "srt::recipe::not_enough_nodes",
            "prefill",
            "need 3 nodes but only 2",
        )
    },
    case(
        "public-port-collision.yaml",
        "srt::recipe::ports",
        "36367",
        "worker-discovery port",
    ),
    case(
        "served-model-name-mismatch.yaml",
        "srt::recipe::served_model_name",
        "bar",
        "`foo` in one place and `bar` in another",
    ),
    case(
        "alias-bomb.yaml",
        "srt::recipe::syntax",
        "*d",
        "limits breached: RecordedAnchorEvents",
    ),
    case(
        "deeply-nested.yaml",
        "srt::recipe::syntax",
        "k",
        "limits breached: Depth",
    ),
    case(
        "limit-side-channel.yaml",
        "srt::recipe::limit",
        "65536",
        "at most 32768 per endpoint",
    ),
    case(
        "limit-routed.yaml",
        "srt::recipe::limit",
        "1024",
        "srt manages at most 327680",
    ),
    case(
        "secret-arg-role.yaml",
        "srt::recipe::secret_arg",
        "hf-token",
        "pass the secret in `roles.agg.env`",
    ),
    case(
        "secret-arg-frontend.yaml",
        "srt::recipe::secret_arg",
        "api_key",
        "pass the secret in `frontend.env`",
    ),
    case(
        "nul-byte.yaml",
        "srt::recipe::nul_byte",
        "\"main\\0; rm -rf /\"",
        "cannot contain NUL",
    ),
    case(
        "duplicate-key.yaml",
        "srt::recipe::duplicate_key",
        "gpus_per_node",
        "given twice",
    ),
    case(
        "yaml-tag.yaml",
        "srt::recipe::yaml_tag",
        "!!binary L21vZGVs",
        "`!!binary` is not allowed",
    ),
    case(
        "yaml-tag-local.yaml",
        "srt::recipe::yaml_tag",
        "!Ref region",
        "neither ignores nor interprets tags",
    ),
    case(
        "yaml11-boolean.yaml",
        "srt::recipe::type",
        "no",
        "write `false`",
    ),
    case(
        "option-like-model-path.yaml",
        "srt::recipe::option_like_value",
        "\"--trust-remote-code\"",
        "read as an option",
    ),
    case(
        "option-like-arg.yaml",
        "srt::recipe::option_like_value",
        "\"--port=1\"",
        "treats a value starting with `-` as a flag",
    ),
    case(
        "control-characters-escaped.yaml",
        "srt::recipe::option_like_value",
        "\"-\\e]0;pwned\\a\"",
        "`-\\x1b]0;pwned\\x07`",
    ),
    case(
        "control-characters.yaml",
        "srt::recipe::syntax",
        "\u{1b}",
        "unexpected character",
    ),
    case(
        "gpus-unused-nodes.yaml",
        "srt::recipe::parallel_size",
        "tensor-parallel-size",
        "set `gpus: 2` on the role",
    ),
    case(
        "limit-workers.yaml",
        "srt::recipe::range",
        "4294967295",
        "between 1 and 32768",
    ),
    case(
        "limit-processes.yaml",
        "srt::recipe::limit",
        "32768",
        "at most 32768 per deployment",
    ),
    case(
        "secret-in-excerpt.yaml",
        "srt::recipe::unknown_key",
        "argz",
        "did you mean `args`?",
    ),
    case(
        "unknown-flag.yaml",
        "srt::recipe::unknown_flag",
        "max-modl-len",
        "did you mean `max-model-len`?",
    ),
    case(
        "flag-prefix-secret.yaml",
        "srt::recipe::secret_arg",
        "api-ke",
        "`roles.agg.args.api-key` would put a secret",
    ),
    case(
        "flag-prefix-managed.yaml",
        "srt::recipe::managed_flag",
        "por",
        "`frontend.args.port` is set by srt",
    ),
    case(
        "flag-switch-value.yaml",
        "srt::recipe::flag_value",
        "yes",
        "write `true`",
    ),
    case(
        "flag-bad-choice.yaml",
        "srt::recipe::flag_value",
        "fastest",
        "invalid choice: 'fastest'",
    ),
    case(
        "flag-not-an-int.yaml",
        "srt::recipe::flag_value",
        "many",
        "invalid int value",
    ),
    case(
        "engine-version-unknown.yaml",
        "srt::recipe::engine_version",
        "0.1.0",
        "known releases: 0.32.0",
    ),
    case(
        "benchmark-too-slow.yaml",
        "srt::recipe::benchmark_duration",
        "0.0001",
        "at least 40000s (11.1 h) to send",
    ),
    case(
        "placement-env-cuda.yaml",
        "srt::recipe::placement_env",
        "CUDA_VISIBLE_DEVICES",
        "contradicts the placement",
    ),
    case(
        "managed-env-srt-marker.yaml",
        "srt::recipe::managed_env",
        "SRT_DEPLOYMENT",
        "`frontend.env.SRT_DEPLOYMENT` is set by srt",
    ),
    case(
        "dynamo-http-request-plane.yaml",
        "srt::recipe::dynamo_plane",
        "http",
        "no HTTP request plane",
    ),
    case(
        "dynamo-version.yaml",
        "srt::recipe::dynamo_version",
        "\"0.8.0\"",
        "install: true",
    ),
    case(
        "dynamo-top-of-tree.yaml",
        "srt::recipe::dynamo_install",
        "top_of_tree",
        "name the commit with `hash: <sha>`",
    ),
    case(
        "dynamo-hash-branch.yaml",
        "srt::recipe::dynamo_source",
        "main",
        "`git rev-parse <ref>`",
    ),
    case(
        "dynamo-unknown-key.yaml",
        "srt::recipe::unknown_key",
        "request_planes",
        "did you mean `request_plane`?",
    ),
    case(
        "dynamo-managed-plane-flag.yaml",
        "srt::recipe::managed_flag",
        "request-plane",
        "dynamo.request_plane",
    ),
    case(
        "dynamo-managed-env-nats.yaml",
        "srt::recipe::managed_env",
        "NATS_SERVER",
        "nats-server",
    ),
    case(
        "dynamo-frontend-request-plane-var.yaml",
        "srt::recipe::managed_env",
        "DYN_REQUEST_PLANE",
        "dynamo.request_plane",
    ),
    case(
        "dynamo-managed-wrapper-flag.yaml",
        "srt::recipe::managed_flag",
        "endpoint",
        "dyn://<deployment>",
    ),
    case(
        "dynamo-sglang-managed-wrapper-flag.yaml",
        "srt::recipe::managed_flag",
        "namespace",
        "its own Dynamo namespace",
    ),
    case(
        "sweep-unquoted.yaml",
        "srt::recipe::sweep_unquoted",
        "{",
        "\"{conc}\"",
    ),
    case(
        "sweep-unknown-placeholder.yaml",
        "srt::recipe::sweep_placeholder",
        "\"{seq}\"",
        "did you mean `{seqs}`?",
    ),
    case(
        "infra-services-node-without-services.yaml",
        "srt::recipe::services_node",
        "etcd_nats_dedicated_node",
        "remove `infra.etcd_nats_dedicated_node`",
    ),
    case(
        "srtctl-zip-ragged.yaml",
        "srt::recipe::zip",
        "gpus_per_agg",
        "the same length",
    ),
    case(
        "srtctl-override-stray-key.yaml",
        "srt::recipe::override_file",
        "benchmark",
        "move it into `base:`",
    ),
    case(
        "engine-unknown-key.yaml",
        "srt::recipe::unknown_key",
        "conector",
        "did you mean `connector`?",
    ),
    // srtctl's runtime keys (`recipe::runtime`).
    case(
        "runtime-setup-script-missing.yaml",
        "srt::recipe::setup_script",
        "/nonexistent/srt-setup.sh",
        "names no file",
    ),
    case(
        "runtime-extra-mount.yaml",
        "srt::recipe::mount",
        "/data",
        "host:container[:flags]",
    ),
    case(
        "runtime-container-mount-relative.yaml",
        "srt::recipe::mount",
        "/lustre/models",
        "not absolute",
    ),
    case(
        "runtime-sbatch-managed.yaml",
        "srt::recipe::managed_option",
        "nodes",
        "from the recipe's node count",
    ),
    case(
        "runtime-srun-unknown.yaml",
        "srt::recipe::unknown_option",
        "cpus-per-taks",
        "did you mean `--cpus-per-task`?",
    ),
    case(
        "runtime-config-dump-conflict.yaml",
        "srt::recipe::conflict",
        "dump-config-to",
        "both name where the configuration goes",
    ),
    case(
        "runtime-environment-managed.yaml",
        "srt::recipe::managed_env",
        "SRT_DEPLOYMENT",
        "`environment.SRT_DEPLOYMENT`",
    ),
    case(
        "runtime-profiling-role.yaml",
        "srt::recipe::profiling",
        "prefill",
        "no `roles.prefill`",
    ),
    case(
        "runtime-profiling-type.yaml",
        "srt::recipe::value",
        "nsys-time",
        "not supported",
    ),
    case(
        "runtime-profiling-steps.yaml",
        "srt::recipe::range",
        "10",
        "after `start_step`",
    ),
    case(
        "runtime-profiler-config.yaml",
        "srt::recipe::profiling",
        "aggregated",
        "remove `profiler-config`",
    ),
];

fn dir() -> PathBuf {
    common::root().join("tests/invalid")
}

fn lookup(file: &str) -> &'static Case {
    CASES
        .iter()
        .find(|c| c.file == file)
        .unwrap_or_else(|| panic!("tests/invalid/{file} has no entry in CASES"))
}

/// Load and build, returning the source and every problem (none when it is valid).
fn problems(path: &Path, nodes: Option<usize>) -> (Source, Vec<Problem>) {
    let file = path.file_name().unwrap().to_string_lossy().into_owned();
    let stem = path.file_stem().unwrap().to_string_lossy().into_owned();
    let source = Source {
        name: file,
        text: std::fs::read_to_string(path).unwrap(),
    };
    let problems = match load_problems(&source, &stem) {
        Err(p) => p,
        Ok(recipe) => match build(
            &recipe,
            &BuildOptions {
                nodes,
                ..Default::default()
            },
        ) {
            Ok(_) => Vec::new(),
            Err(p) => p,
        },
    };
    (source, problems)
}

#[test]
fn every_case_has_its_code_and_span() {
    for case in CASES {
        let path = dir().join(case.file);
        let (source, problems) = problems(&path, case.nodes);
        let shown = render_diag(&source.error(problems.clone()));
        // One error; warnings beside it say what srt made of the text (an abbreviated
        // flag spelled out before it is refused).
        let errors: Vec<_> = problems.iter().filter(|p| !p.is_warning()).collect();
        assert_eq!(
            errors.len(),
            1,
            "{}: expected one error, got\n{shown}",
            case.file
        );
        assert_problem(
            case.file,
            &source.text,
            errors[0],
            (case.code, case.span_text, case.mentions),
            &shown,
        );
    }
}

/// Spans that must land on a particular occurrence, not just matching text.
#[test]
fn spans_land_on_the_right_occurrence() {
    // The duplicate is the second `gpus_per_node`.
    let (source, p) = problems(&dir().join("duplicate-key.yaml"), None);
    let second = source.text.rfind("gpus_per_node").unwrap();
    assert_eq!(p[0].span.offset(), second);
    // The conflicting value is the frontend's 4, not the role's 8.
    let (source, p) = problems(&dir().join("intra-node-dp-conflict.yaml"), None);
    let at = source
        .text
        .find("intra-node-data-parallel-size: 4")
        .unwrap();
    assert_eq!(
        p[0].span.offset(),
        at + "intra-node-data-parallel-size: ".len()
    );
    // The missing `roles` points at the document start.
    let (_, p) = problems(&dir().join("missing-roles.yaml"), None);
    assert_eq!(p[0].span.offset(), 0);
    // The decode override, not the engine-wide connector.
    let (source, p) = problems(&dir().join("moriio-decode-other-connector.yaml"), None);
    assert_eq!(
        p[0].span.offset(),
        source.text.find("connector: nixl").unwrap() + "connector: ".len()
    );
}

#[test]
fn every_file_has_a_case_and_every_case_a_file() {
    let mut files: Vec<String> = std::fs::read_dir(dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|f| f.ends_with(".yaml"))
        .collect();
    files.sort();
    for f in &files {
        lookup(f);
    }
    for c in CASES {
        assert!(files.iter().any(|f| f == c.file), "{} is missing", c.file);
    }
}

/// The same recipes are refused by the binary with exit code 3, for both commands.
#[test]
fn binary_exits_3_without_panicking() {
    for case in CASES {
        for command in ["validate", "render"] {
            let mut cmd = Command::new(env!("CARGO_BIN_EXE_srt"));
            cmd.current_dir(common::root()).args([
                command,
                "-f",
                &format!("tests/invalid/{}", case.file),
            ]);
            if let Some(n) = case.nodes {
                cmd.args(["--nodes", &n.to_string()]);
            }
            let out = cmd.output().unwrap();
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(
                out.status.code(),
                Some(srt::exit::INVALID_RECIPE),
                "srt {command} {}:\n{stderr}",
                case.file
            );
            assert!(!stderr.contains("panicked"), "{}: {stderr}", case.file);
            assert!(stderr.contains(case.code), "{}: {stderr}", case.file);
            assert!(out.stdout.is_empty(), "{}: output on failure", case.file);
        }
    }
}

/// A recipe that is not UTF-8 is a diagnostic at the first bad byte, not a crash.
#[test]
fn non_utf8_is_refused_at_the_first_bad_byte() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("latin1.yaml");
    let mut bytes = b"name: caf".to_vec();
    let bad = bytes.len();
    bytes.extend_from_slice(b"\xe9\nroles:\n  agg:\n    nodes: 1\n    workers: 1\n");
    std::fs::write(&path, &bytes).unwrap();

    let (source, result) = load_file(&path);
    let err = result.expect_err("not UTF-8");
    assert_eq!(err.problems.len(), 1);
    let p = &err.problems[0];
    assert_eq!(p.code, "srt::recipe::encoding");
    assert_eq!((p.span.offset(), p.span.len()), (bad, 1));
    assert!(p.message.contains(&format!("offset {bad}")));
    // The lossy text keeps the offsets before the bad byte, so the snippet renders.
    assert_eq!(&source.text[..bad], "name: caf");
    let shown = render_diag(&err);
    assert!(shown.contains("invalid UTF-8 here"), "{shown}");

    let out = Command::new(env!("CARGO_BIN_EXE_srt"))
        .args(["validate", "-f"])
        .arg(&path)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{stderr}");
    assert!(stderr.contains("srt::recipe::encoding"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}

/// The diagnostics as a user sees them: reviewed snapshots, one per invalid recipe.
#[test]
fn diagnostics() {
    insta::glob!("invalid/*.yaml", |path| {
        let case = lookup(&path.file_name().unwrap().to_string_lossy());
        let (source, problems) = problems(path, case.nodes);
        assert!(!problems.is_empty(), "{} is valid", case.file);
        insta::assert_snapshot!(render_diag(&source.error(problems)));
    });
}

fn source_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            source_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The reference documents every diagnostic code the sources can raise, every flag and
/// variable the engine manages, and every exit code: a new one without documentation
/// fails here.
#[test]
fn docs_list_every_code_flag_and_exit_code() {
    let root = common::root();
    let reference = std::fs::read_to_string(root.join("docs/recipe-reference.md")).unwrap();
    let mut files = Vec::new();
    source_files(&root.join("crates/srt/src"), &mut files);
    let mut codes = std::collections::BTreeSet::new();
    for f in files {
        let text = std::fs::read_to_string(&f).unwrap();
        for (i, _) in text.match_indices("\"srt::recipe::") {
            let rest = &text[i + 1..];
            let end = rest.find('"').unwrap();
            codes.insert(rest[..end].to_string());
        }
    }
    assert!(codes.len() > 30, "found only {codes:?}");
    for code in &codes {
        let short = code.trim_start_matches("srt::recipe::");
        assert!(
            reference.contains(&format!("`{code}`")) || reference.contains(&format!("`{short}`")),
            "docs/recipe-reference.md does not list {code}"
        );
    }
    let engine = srt::engine::lookup("vllm").unwrap();
    let managed = engine.managed().iter().map(|(flag, _)| flag);
    for name in managed.chain(engine.managed_env()) {
        assert!(
            reference.contains(&format!("`{name}`")),
            "docs/recipe-reference.md does not list managed `{name}`"
        );
    }
    let exit_doc = std::fs::read_to_string(root.join("docs/exit-codes.md")).unwrap();
    let exit_rs = std::fs::read_to_string(root.join("crates/srt/src/exit.rs")).unwrap();
    for line in exit_rs.lines() {
        let Some(rest) = line.strip_prefix("pub const ") else {
            continue;
        };
        let (name, value) = rest.split_once(": i32 = ").unwrap();
        let value = value.trim_end_matches(';');
        assert!(
            exit_doc.contains(&format!("| {value} | `{name}` |")),
            "docs/exit-codes.md does not document {name} = {value}"
        );
    }
}
