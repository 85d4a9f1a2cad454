//! Every invalid cluster profile in `tests/invalid-profiles/` is refused with the right
//! code and a span on the offending key or value, by the library and by the binary (exit
//! 1, no panic, nothing started), with a reviewed rendering of its diagnostic
//! (`tests/snapshots/`), as invalid recipes are (`tests/invalid_recipes.rs`).

mod common;

use common::{assert_problem, render_diag};
use srt::cluster::{ClusterProfile, ProfileError};
use std::path::{Path, PathBuf};
use std::process::Command;

/// One invalid profile: its file, the code of its (first) problem, the text that
/// problem's span covers, and a fragment its message, label or help must contain.
struct Case {
    file: &'static str,
    code: &'static str,
    span_text: &'static str,
    mentions: &'static str,
    /// How many problems it has.
    problems: usize,
}

const fn case(
    file: &'static str,
    code: &'static str,
    span_text: &'static str,
    mentions: &'static str,
) -> Case {
    Case {
        file,
        code,
        span_text,
        mentions,
        problems: 1,
    }
}

const CASES: &[Case] = &[
    case(
        "allocations-value.yaml",
        "srt::cluster::value",
        "many",
        "expected one of: split, single",
    ),
    case(
        "renew-before-duration.yaml",
        "srt::cluster::value",
        "\"half an hour\"",
        "SLURM's syntax",
    ),
    case(
        "renew-before-time-limit.yaml",
        "srt::cluster::range",
        "\"4:00:00\"",
        "must be shorter than `time_limit`",
    ),
    case(
        "unknown-key.yaml",
        "srt::cluster::unknown_key",
        "partiton",
        "did you mean `partition`?",
    ),
    case(
        "executor-typo.yaml",
        "srt::cluster::executor",
        "slrum",
        "did you mean `slurm`?",
    ),
    case(
        "executor-unknown.yaml",
        "srt::cluster::executor",
        "kubernetes",
        "expected one of: local, slurm",
    ),
    case(
        "executor-wrong-type.yaml",
        "srt::cluster::type",
        "[",
        "`executor` must be one of local, slurm, found a list",
    ),
    case(
        "slurm-key-on-local.yaml",
        "srt::cluster::slurm_only",
        "partition",
        "add `executor: slurm`",
    ),
    Case {
        problems: 2,
        ..case(
            "slurm-key-without-executor.yaml",
            "srt::cluster::slurm_only",
            "partition",
            "this profile runs locally",
        )
    },
    case(
        "gpus-wrong-type.yaml",
        "srt::cluster::type",
        "eight",
        "must be an integer, found a string",
    ),
    case(
        "gpus-zero.yaml",
        "srt::cluster::range",
        "0",
        "between 1 and 4294967295",
    ),
    case(
        "gpu-request-value.yaml",
        "srt::cluster::value",
        "gpus",
        "did you mean `gpus-per-node`?",
    ),
    case(
        "container-runtime.yaml",
        "srt::cluster::value",
        "docker",
        "one of none, pyxis",
    ),
    case(
        "container-unknown-key.yaml",
        "srt::cluster::unknown_key",
        "image",
        "unknown key `container.image`",
    ),
    case(
        "option-without-dash.yaml",
        "srt::cluster::option",
        "qos=high",
        "options starting with `-`",
    ),
    case(
        "managed-option.yaml",
        "srt::cluster::managed_option",
        "\"--nodelist=n1\"",
        "set by srt",
    ),
    case(
        "managed-option-prefix.yaml",
        "srt::cluster::managed_option",
        "\"--nodel=n7\"",
        "`--nodel=n7` is `--nodelist` to srun",
    ),
    case(
        "managed-option-short.yaml",
        "srt::cluster::managed_option",
        "-wn8",
        "srt sets `--nodelist`",
    ),
    case(
        "managed-sbatch-option.yaml",
        "srt::cluster::managed_option",
        "\"--wr=sleep 60\"",
        "is `--wrap` to sbatch",
    ),
    case(
        "unknown-option.yaml",
        "srt::cluster::unknown_option",
        "\"--nodelsit=n1\"",
        "did you mean `--nodelist`?",
    ),
    case(
        "ambiguous-option.yaml",
        "srt::cluster::ambiguous_option",
        "\"--exclu\"",
        "--exclude, --exclusive",
    ),
    case(
        "option-without-value.yaml",
        "srt::cluster::option_value",
        "\"--comment\"",
        "`--comment` needs a value",
    ),
    case(
        "option-double-dash.yaml",
        "srt::cluster::option",
        "\"--\"",
        "ends srun's options",
    ),
    case(
        "options-not-a-list.yaml",
        "srt::cluster::type",
        "--exclusive",
        "must be a list of options",
    ),
    case(
        "partition-with-space.yaml",
        "srt::cluster::value",
        "\"gpu debug\"",
        "single word",
    ),
    case(
        "visible-devices-env.yaml",
        "srt::cluster::value",
        "\"CUDA_VISIBLE_DEVICES=0\"",
        "must be a variable name",
    ),
    case(
        "timeout-zero.yaml",
        "srt::cluster::range",
        "0",
        "at least 1",
    ),
    case(
        "syntax-error.yaml",
        "srt::cluster::syntax",
        "[",
        "YAML error",
    ),
    case(
        "not-a-mapping.yaml",
        "srt::cluster::type",
        "-",
        "a cluster profile is a mapping of keys, found a list",
    ),
    case(
        "duplicate-key.yaml",
        "srt::cluster::duplicate_key",
        "partition",
        "given twice",
    ),
    case(
        "yaml-tag.yaml",
        "srt::cluster::yaml_tag",
        "!Ref gpu",
        "not allowed in a cluster profile",
    ),
    Case {
        problems: 4,
        ..case(
            "several-problems.yaml",
            "srt::cluster::unknown_key",
            "partiton",
            "did you mean `partition`?",
        )
    },
];

fn dir() -> PathBuf {
    common::root().join("tests/invalid-profiles")
}

fn lookup(file: &str) -> &'static Case {
    CASES
        .iter()
        .find(|c| c.file == file)
        .unwrap_or_else(|| panic!("tests/invalid-profiles/{file} has no entry in CASES"))
}

/// The profile's problems, and its diagnostic as shown (named by file name).
fn problems(path: &Path) -> (String, Vec<srt::recipe::Problem>, ProfileError) {
    let text = std::fs::read_to_string(path).unwrap();
    let problems = ClusterProfile::check(&text).expect_err("an invalid profile");
    let name = Path::new(path.file_name().unwrap());
    let err = ClusterProfile::parse(&text, name).expect_err("an invalid profile");
    (text, problems, err)
}

#[test]
fn every_case_has_its_code_and_span() {
    for case in CASES {
        let (text, problems, err) = problems(&dir().join(case.file));
        let shown = render_diag(&err);
        assert_eq!(
            problems.len(),
            case.problems,
            "{}: problems\n{shown}",
            case.file
        );
        assert_problem(
            case.file,
            &text,
            &problems[0],
            (case.code, case.span_text, case.mentions),
            &shown,
        );
    }
}

#[test]
fn every_file_has_a_case_and_every_case_a_file() {
    let mut files: Vec<String> = std::fs::read_dir(dir())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    files.sort();
    for f in &files {
        lookup(f);
    }
    for c in CASES {
        assert!(files.iter().any(|f| f == c.file), "{} is missing", c.file);
    }
}

/// The diagnostics as a user sees them: reviewed snapshots, one per invalid profile.
#[test]
fn diagnostics() {
    insta::glob!("invalid-profiles/*.yaml", |path| {
        lookup(&path.file_name().unwrap().to_string_lossy());
        let (_, _, err) = problems(path);
        insta::assert_snapshot!(render_diag(&err));
    });
}

/// The binary refuses them before anything runs, for every command that reads a
/// profile: exit 1, the code on stderr, no panic, nothing on stdout.
#[test]
fn binary_refuses_without_panicking() {
    let state = tempfile::tempdir().unwrap();
    for case in CASES {
        let profile = dir().join(case.file);
        for args in [
            &["render", "-f", "examples/local-agg.yaml"][..],
            &["plan", "-f", "examples/local-agg.yaml"][..],
        ] {
            let out = Command::new(env!("CARGO_BIN_EXE_srt"))
                .current_dir(common::root())
                .args(args)
                .arg("--cluster")
                .arg(&profile)
                .env("SRT_STATE_DIR", state.path())
                .env_remove("SRT_CLUSTER")
                .output()
                .unwrap();
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert_eq!(
                out.status.code(),
                Some(srt::exit::ERROR),
                "srt {args:?} --cluster {}:\n{stderr}",
                case.file
            );
            assert!(!stderr.contains("panicked"), "{}: {stderr}", case.file);
            let code = if case.problems == 1 {
                case.code
            } else {
                "srt::cluster::invalid"
            };
            assert!(stderr.contains(code), "{}: {stderr}", case.file);
            assert!(out.stdout.is_empty(), "{}: output on failure", case.file);
        }
    }
}
