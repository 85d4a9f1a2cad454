//! Hostile recipes too large to keep in `tests/invalid/`: generated here, each refused
//! with a spanned diagnostic, in bounded time, without a panic or a stack overflow.
//!
//! The tests run on the test harness's threads (2 MiB of stack), smaller than the main
//! thread `srt` parses on: a recursion the parser's depth bound does not stop would
//! overflow here first.

mod common;

use srt::recipe::load::MAX_RECIPE_BYTES;
use srt::recipe::{load_file, load_str, Source};
use std::process::Command;
use std::time::{Duration, Instant};

fn load(text: String) -> Vec<srt::recipe::Problem> {
    let source = Source {
        name: "hostile.yaml".into(),
        text,
    };
    match load_str(&source, "hostile") {
        Ok(_) => Vec::new(),
        Err(e) => {
            // The diagnostic renders (spans inside the source) without panicking.
            let shown = common::render_diag(&e);
            assert!(!shown.is_empty());
            e.problems
        }
    }
}

fn one(problems: &[srt::recipe::Problem], code: &str) {
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert_eq!(problems[0].code, code, "{problems:?}");
}

#[test]
fn a_file_over_the_size_limit_is_refused_at_the_limit_without_reading_it_all() {
    let dir = tempfile::tempdir().unwrap();
    // Short lines past the limit, then far too much: 4 GiB, sparse, so it costs no disk.
    let path = dir.path().join("huge.yaml");
    let mut head = String::from("roles:\n  agg:\n    nodes: 1\n    workers: 1\n    env:\n");
    let mut i = 0;
    while head.len() <= MAX_RECIPE_BYTES + 100 {
        head.push_str(&format!("      V{i}: \"{}\"\n", "x".repeat(64)));
        i += 1;
    }
    std::fs::write(&path, head).unwrap();
    let f = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    f.set_len(4 << 30).unwrap();
    drop(f);
    let started = Instant::now();
    let (source, result) = load_file(&path);
    let err = result.expect_err("too large");
    assert!(started.elapsed() < Duration::from_secs(10));
    assert!(
        source.text.len() <= MAX_RECIPE_BYTES + 4,
        "read the whole file"
    );
    one(&err.problems, "srt::recipe::too_large");
    assert_eq!(err.problems[0].span.offset(), MAX_RECIPE_BYTES);
    assert_eq!(err.problems[0].span.len(), 1);
    let out = Command::new(env!("CARGO_BIN_EXE_srt"))
        .args(["validate", "-f"])
        .arg(&path)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(srt::exit::INVALID_RECIPE),
        "{stderr}"
    );
    assert!(stderr.contains("srt::recipe::too_large"), "{stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
}

#[test]
fn a_text_over_the_size_limit_is_refused_by_the_library_too() {
    let mut text = String::from("roles:\n  agg:\n    nodes: 1\n    workers: 1\n    env:\n");
    let mut i = 0;
    while text.len() <= MAX_RECIPE_BYTES {
        text.push_str(&format!("      V{i}: \"{}\"\n", "x".repeat(64)));
        i += 1;
    }
    one(&load(text), "srt::recipe::too_large");
}

#[test]
fn the_limit_inside_a_multibyte_character_is_still_a_drawable_span() {
    // 3-byte characters: the limit falls inside one; a file cut there is not UTF-8.
    let line = format!("# {}\n", "é€".repeat(20));
    let text = format!(
        "roles: {{agg: {{nodes: 1, workers: 1}}}}\n{}",
        line.repeat(MAX_RECIPE_BYTES / line.len() + 10)
    );
    let problems = load(text.clone());
    one(&problems, "srt::recipe::too_large");
    let p = &problems[0];
    let end = p.span.offset() + p.span.len();
    assert!(text.is_char_boundary(p.span.offset()) && text.is_char_boundary(end));
    assert!(p.span.offset() <= MAX_RECIPE_BYTES && MAX_RECIPE_BYTES < end);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("wide.yaml");
    std::fs::write(&path, &text).unwrap();
    let (source, result) = load_file(&path);
    let err = result.expect_err("too large");
    one(&err.problems, "srt::recipe::too_large");
    let shown = common::render_diag(&err);
    assert!(
        shown.contains("the limit is reached here"),
        "{}",
        &shown[..500.min(shown.len())]
    );
    assert!(source.text.is_char_boundary(err.problems[0].span.offset()));
}

#[test]
fn a_big_file_under_the_limit_loads_in_bounded_time() {
    // About 1 MiB of environment: legal, just large.
    let mut text = String::from("roles:\n  agg:\n    nodes: 1\n    workers: 1\n    env:\n");
    let mut i = 0;
    while text.len() < MAX_RECIPE_BYTES - 200 {
        text.push_str(&format!("      V{i}: \"{}\"\n", "x".repeat(64)));
        i += 1;
    }
    let started = Instant::now();
    assert_eq!(load(text), Vec::new());
    assert!(
        started.elapsed() < Duration::from_secs(60),
        "{:?}",
        started.elapsed()
    );
}

#[test]
fn deep_nesting_is_refused_not_a_stack_overflow() {
    for depth in [17, 100, 10_000, 100_000] {
        let block = {
            let mut s = String::from("roles:\n  agg:\n    nodes: 1\n    workers: 1\n    args:\n");
            for i in 0..depth.min(2000) {
                s.push_str(&" ".repeat(6 + 2 * i));
                s.push_str("k:\n");
            }
            s
        };
        let flow = format!(
            "roles: {{agg: {{nodes: 1, workers: 1, args: {{x: {}1{}}}}}}}\n",
            "[".repeat(depth),
            "]".repeat(depth)
        );
        let flow_maps = format!("a: {}1{}\n", "{a: ".repeat(depth), "}".repeat(depth));
        for text in [block, flow, flow_maps] {
            let problems = load(text);
            assert_eq!(problems.len(), 1, "depth {depth}: {problems:?}");
            assert!(
                [
                    "srt::recipe::syntax",
                    "srt::recipe::long_line",
                    "srt::recipe::too_large"
                ]
                .contains(&problems[0].code),
                "depth {depth}: {problems:?}"
            );
        }
    }
}

#[test]
fn nesting_up_to_the_bound_is_accepted() {
    // roles(1) agg(2) args(3) mapping(4) and 12 more levels: exactly the bound.
    let mut value = String::from("1");
    for _ in 0..(srt::recipe::yaml::MAX_DEPTH - 4) {
        value = format!("{{k: {value}}}");
    }
    let text =
        format!("roles: {{agg: {{nodes: 1, workers: 1, args: {{hf-overrides: {value}}}}}}}\n");
    assert_eq!(load(text), Vec::new());
}

/// Anchors and aliases as a recipe uses them (one block shared by every role, merged
/// and extended) stay well inside the alias budget.
#[test]
fn ordinary_anchors_and_aliases_load() {
    let text = "roles:\n  prefill:\n    nodes: 1\n    workers: 1\n    gpus: 1\n    args: &args {max-model-len: 2048, enforce-eager: true}\n    env: &env {PYTHONUNBUFFERED: \"1\", NCCL_DEBUG: INFO}\n  decode:\n    nodes: 1\n    workers: 1\n    gpus: 1\n    args:\n      <<: *args\n      max-num-seqs: 64\n    env: *env\n";
    assert_eq!(load(text.to_string()), Vec::new(), "{text}");
}

#[test]
fn alias_bombs_are_refused_quickly() {
    // Sequences, mappings and merge keys, each level nine times the last.
    let mut seq = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x]\n");
    let mut map = String::from("a0: &a0 {a: x, b: x, c: x, d: x, e: x, f: x, g: x, h: x, i: x}\n");
    for i in 1..12 {
        let p = i - 1;
        seq.push_str(&format!(
            "a{i}: &a{i} [{}]\n",
            vec![format!("*a{p}"); 9].join(", ")
        ));
        map.push_str(&format!(
            "a{i}: &a{i} {{{}}}\n",
            (0..9)
                .map(|k| format!("k{k}: *a{p}"))
                .collect::<Vec<_>>()
                .join(", ")
        ));
    }
    let merge = {
        let mut s = String::from("m0: &m0 {a: 1}\n");
        for i in 1..12 {
            s.push_str(&format!(
                "m{i}: &m{i}\n  <<: [{}]\n",
                vec![format!("*m{}", i - 1); 9].join(", ")
            ));
        }
        s
    };
    for text in [seq, map, merge] {
        let started = Instant::now();
        let problems = load(text.clone() + "roles: {agg: {nodes: 1, workers: 1}}\n");
        assert!(!problems.is_empty(), "{text}");
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "{:?}",
            started.elapsed()
        );
    }
}

/// Found by the fuzzer (`scripts/fuzz.sh`): an error at the very end of the input got a
/// span past the text, so the diagnostic showed no pointer. Every span now lies inside
/// the text and its label is drawn.
#[test]
fn fuzz_regression_errors_at_the_end_point_inside_the_text() {
    for text in [
        "%",
        "roles: [",
        "roles: [\n",
        "a: \"open",
        "roles:\n  agg: {",
        "é: [",
    ] {
        let problems = load(text.to_string());
        assert_eq!(problems.len(), 1, "{text:?}: {problems:?}");
        let p = &problems[0];
        let end = p.span.offset() + p.span.len();
        assert!(end <= text.len(), "{text:?}: span {:?}", p.span);
        assert!(text.is_char_boundary(p.span.offset()) && text.is_char_boundary(end));
        let source = Source {
            name: "end.yaml".into(),
            text: text.to_string(),
        };
        let shown = common::render_diag(&source.error(problems.clone()));
        assert!(
            shown.contains(&p.label),
            "{text:?}: no label drawn\n{shown}"
        );
    }
}

/// The diagnostic renderer panics on a label past column 65535, which a recipe with an
/// error at the end of a very long line reached (exit 101). Lines are bounded at 8 KiB,
/// and any span further right than that is drawn at the start of its line.
#[test]
fn a_very_long_line_is_refused_not_a_crash() {
    use srt::recipe::load::MAX_LINE_BYTES;
    let text = format!(
        "{{roles: {{agg: {{nodes: 1, workers: 1, env: {{X: \"{}\"}}}}}}, bogus: 1}}\n",
        "a".repeat(70_000)
    );
    let problems = load(text.clone());
    one(&problems, "srt::recipe::long_line");
    assert_eq!(problems[0].span.offset(), MAX_LINE_BYTES);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("long.yaml");
    std::fs::write(&path, &text).unwrap();
    // Not UTF-8 far right on a long line: the encoding error is drawn, not a panic.
    let bad = dir.path().join("bad.yaml");
    let mut bytes = format!(
        "roles: {{agg: {{nodes: 1, workers: 1}}}}\n# {}",
        "a".repeat(70_000)
    )
    .into_bytes();
    bytes.extend_from_slice(b"\xff\n");
    std::fs::write(&bad, &bytes).unwrap();
    let (_, result) = load_file(&bad);
    let err = result.expect_err("not UTF-8");
    one(&err.problems, "srt::recipe::encoding");
    assert!(common::render_diag(&err).contains("column 70003"));
    for (file, code) in [
        (&path, "srt::recipe::long_line"),
        (&bad, "srt::recipe::encoding"),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_srt"))
            .args(["validate", "-f"])
            .arg(file)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            out.status.code(),
            Some(srt::exit::INVALID_RECIPE),
            "{stderr}"
        );
        assert!(
            stderr.contains(code) && !stderr.contains("panicked"),
            "{stderr}"
        );
    }
}

/// Load and build: the problems of either step.
fn build(text: String) -> (Source, Vec<srt::recipe::Problem>) {
    let source = Source {
        name: "env.yaml".into(),
        text,
    };
    let problems = match load_str(&source, "env") {
        Err(e) => e.problems,
        Ok(recipe) => match srt::assemble::assemble(&recipe, &Default::default()) {
            Ok(_) => Vec::new(),
            Err(p) => p,
        },
    };
    let shown = common::render_diag(&source.error(problems.clone()));
    assert!(!shown.is_empty());
    (source, problems)
}

/// A literal block scalar of `lines` lines of `width` characters, then `last`: a long
/// value in lines the loader's line limit lets through.
fn block(lines: usize, width: usize, last: &str) -> String {
    let line = format!("        {}\n", "x".repeat(width));
    line.repeat(lines) + last
}

fn spanned<'a>(source: &'a Source, p: &srt::recipe::Problem) -> &'a str {
    &source.text[p.span.offset()..p.span.offset() + p.span.len()]
}

/// A 200 KB environment value validated, then the worker failed with "Argument list
/// too long" (the kernel's 128 KiB per string); it is refused at its key.
#[test]
fn an_environment_value_longer_than_the_kernel_passes_is_refused_at_its_key() {
    let text = format!(
        "resources:\n  gpus_per_node: 1\nroles:\n  agg:\n    nodes: 1\n    workers: 1\n    env:\n      SMALL: ok\n      BIG: |\n{}",
        block(200, 1000, "")
    );
    let (source, problems) = build(text);
    one(&problems, "srt::recipe::env_size");
    assert_eq!(spanned(&source, &problems[0]), "BIG");
    assert!(
        problems[0]
            .message
            .contains("`roles.agg.env.BIG` is 196 KiB")
            && problems[0].message.contains("128 KiB"),
        "{problems:?}"
    );
    // Just under the limit (`BIG=` and the NUL included) is accepted.
    let last = format!("        {}\n", "x".repeat(936));
    let text = format!(
        "resources:\n  gpus_per_node: 1\nroles:\n  agg:\n    nodes: 1\n    workers: 1\n    env:\n      BIG: |\n{}",
        block(130, 1000, &last)
    );
    assert!(build(text).1.is_empty());
}

/// Values each under the per-string limit, together past what a process may be given
/// (written once, repeated through an alias): refused at the largest variable.
#[test]
fn an_environment_larger_than_a_process_may_get_is_refused() {
    let mut text = format!(
        "resources:\n  gpus_per_node: 1\nroles:\n  agg:\n    nodes: 1\n    workers: 1\n    env:\n      V00: &v |\n{}",
        block(123, 1000, "")
    );
    for i in 1..16 {
        text.push_str(&format!("      V{i:02}: *v\n"));
    }
    text.push_str("      VLONGEST: *v\n");
    let (source, problems) = build(text);
    one(&problems, "srt::recipe::env_size");
    assert_eq!(spanned(&source, &problems[0]), "VLONGEST");
    assert!(
        problems[0]
            .message
            .contains("`worker.agg[0].node[0]` would start with"),
        "{problems:?}"
    );
}
