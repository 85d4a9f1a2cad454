//! Results: one JSON object per level with the fields and names of `vllm bench serve
//! --save-result` (so tooling that reads vLLM's result files reads these), written one
//! per line to a file per run, as vLLM's `--append-result` does; and the table printed
//! from them.

use super::metrics::{Metrics, Stats};
use super::spec::{Dataset, Spec};
use serde_json::{json, Map, Value};
use std::path::{Path, PathBuf};

/// Results directory inside a deployment's state directory.
pub const DIR: &str = "bench";

/// One measured level.
pub struct Level {
    /// `max_concurrency`.
    pub concurrency: u32,
    /// Requests sent (`num_prompts`).
    pub num_prompts: usize,
    /// Warm-up requests sent before.
    pub num_warmups: usize,
    /// Wall time of the level, s.
    pub duration: f64,
    /// Figures.
    pub metrics: Metrics,
    /// E2E latency of every request, s (0 for failed ones).
    pub latencies: Vec<f64>,
    /// Time every request waited for a concurrency slot, s.
    pub queue_times: Vec<f64>,
    /// The first errors, for the report.
    pub errors: Vec<String>,
}

/// Facts about the run written with every level (vLLM's `--metadata` position).
pub struct RunInfo<'a> {
    /// When the run started, `YYYYmmdd-HHMMSS` (UTC).
    pub date: &'a str,
    /// The run's id (its file name without extension).
    pub run_id: &'a str,
    /// Deployment name.
    pub deployment: &'a str,
    /// The tokenizer file used.
    pub tokenizer: &'a str,
}

fn stats(out: &mut Map<String, Value>, name: &str, s: &Stats) {
    out.insert(format!("mean_{name}_ms"), json!(s.mean));
    out.insert(format!("median_{name}_ms"), json!(s.median));
    out.insert(format!("std_{name}_ms"), json!(s.std));
    for (p, v) in &s.percentiles {
        out.insert(format!("p{}_{name}_ms", p_word(*p)), json!(v));
    }
}

/// vLLM's percentile key word: `99` for 99.0, `99.9` for 99.9.
pub fn p_word(p: f64) -> String {
    if p.fract() == 0.0 {
        format!("{}", p as i64)
    } else {
        format!("{p}")
    }
}

/// The result object of one level, in vLLM's key order.
pub fn level_json(spec: &Spec, run: &RunInfo, l: &Level) -> Value {
    let m = &l.metrics;
    let mut o = Map::new();
    o.insert("date".into(), json!(run.date));
    o.insert("endpoint_type".into(), json!(spec.endpoint.backend()));
    o.insert("backend".into(), json!(spec.endpoint.backend()));
    o.insert("label".into(), json!("srt"));
    o.insert("model_id".into(), json!(spec.model));
    o.insert("tokenizer_id".into(), json!(run.tokenizer));
    o.insert("num_prompts".into(), json!(l.num_prompts));
    // Metadata (vLLM's `--metadata KEY=VALUE` entries sit here).
    o.insert("srt_run".into(), json!(run.run_id));
    o.insert("deployment".into(), json!(run.deployment));
    o.insert("endpoint".into(), json!(spec.endpoint.path()));
    match &spec.dataset {
        Dataset::Random {
            isl,
            osl,
            range_ratio,
            prefix_len,
        } => {
            o.insert("dataset_name".into(), json!("random"));
            o.insert("random_input_len".into(), json!(isl));
            o.insert("random_output_len".into(), json!(osl));
            o.insert("random_range_ratio".into(), json!(range_ratio));
            o.insert("random_prefix_len".into(), json!(prefix_len));
            o.insert("use_chat_template".into(), json!(spec.use_chat_template));
            if let Some(a) = spec.custom_tokenizer {
                o.insert("custom_tokenizer".into(), json!(a.adapter.class()));
                o.insert("srt_chat_thinking".into(), json!(a.thinking));
            }
        }
        Dataset::Sharegpt { path, osl } => {
            o.insert("dataset_name".into(), json!("sharegpt"));
            o.insert("dataset_path".into(), json!(path));
            o.insert("sharegpt_output_len".into(), json!(osl));
        }
    }
    if let Some(slow) = &spec.slow_down {
        o.insert("slow_down_sleep_time".into(), json!(slow.sleep_seconds));
        o.insert("slow_down_wait_time".into(), json!(slow.wait_seconds));
        o.insert("slow_down_servers".into(), json!(slow.servers));
    }
    o.insert("seed".into(), json!(spec.seed));
    o.insert("ignore_eos".into(), json!(spec.ignore_eos));
    o.insert("num_warmups".into(), json!(l.num_warmups));
    // Traffic.
    o.insert("request_rate".into(), spec.request_rate.to_json());
    o.insert("burstiness".into(), json!(1.0));
    o.insert("max_concurrency".into(), json!(l.concurrency));
    // Results.
    o.insert("duration".into(), json!(l.duration));
    o.insert("completed".into(), json!(m.completed));
    o.insert("failed".into(), json!(m.failed));
    o.insert("total_input_tokens".into(), json!(m.total_input));
    o.insert("total_output_tokens".into(), json!(m.total_output));
    o.insert("request_throughput".into(), json!(m.request_throughput));
    o.insert("request_goodput".into(), json!(m.request_goodput));
    o.insert("output_throughput".into(), json!(m.output_throughput));
    o.insert(
        "total_token_throughput".into(),
        json!(m.total_token_throughput),
    );
    o.insert("latencies".into(), json!(l.latencies));
    o.insert("queue_times".into(), json!(l.queue_times));
    o.insert(
        "max_output_tokens_per_s".into(),
        json!(m.max_output_tokens_per_s),
    );
    o.insert(
        "max_concurrent_requests".into(),
        json!(m.max_concurrent_requests),
    );
    o.insert("rtfx".into(), json!(0.0));
    stats(&mut o, "ttft", &m.ttft);
    stats(&mut o, "tpot", &m.tpot);
    stats(&mut o, "itl", &m.itl);
    stats(&mut o, "e2el", &m.e2el);
    o.insert(
        "srt_server_input_tokens".into(),
        json!(m.total_input_server),
    );
    if !l.errors.is_empty() {
        o.insert("srt_errors".into(), json!(l.errors));
    }
    Value::Object(o)
}

/// `YYYYmmdd-HHMMSS` (UTC) of a time since the epoch.
pub fn date(secs: u64) -> String {
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}{m:02}{d:02}-{:02}{:02}{:02}",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// A new run file under `dir` for a run started at `date`: `<date>.jsonl`, or
/// `<date>-N.jsonl` when that exists.
pub fn new_run_file(dir: &Path, date: &str) -> std::io::Result<PathBuf> {
    crate::files::private_dir(dir)?;
    for n in 1.. {
        let name = if n == 1 {
            format!("{date}.jsonl")
        } else {
            format!("{date}-{n}.jsonl")
        };
        let path = dir.join(name);
        match crate::files::create_new(&path) {
            Ok(_) => return Ok(path),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e),
        }
    }
    unreachable!("some run file name is free")
}

/// Append one level's object as a line.
pub fn append(path: &Path, level: &Value) -> std::io::Result<()> {
    use std::io::Write;
    let mut f = crate::files::open_append(path)?;
    writeln!(f, "{level}")?;
    f.sync_data()
}

/// Run files of a deployment directory, oldest first.
pub fn runs(deployment_dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(deployment_dir.join(DIR))
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "jsonl"))
        .collect();
    v.sort_by_key(|p| {
        let stem = p
            .file_stem()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        // `<date>` sorts before `<date>-2`, `-2` before `-10`.
        let (date, n) = match stem.get(15..).and_then(|s| s.strip_prefix('-')) {
            Some(n) => (stem[..15].to_string(), n.parse::<u32>().unwrap_or(0)),
            None => (stem.clone(), 1),
        };
        (date, n)
    });
    v
}

/// The newest run file of a deployment directory.
pub fn latest(deployment_dir: &Path) -> Option<PathBuf> {
    runs(deployment_dir).pop()
}

/// The level objects of a run file.
pub fn load(path: &Path) -> Result<Vec<Value>, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).map_err(|e| format!("{}: {e}", path.display())))
        .collect()
}

fn num(v: &Value, key: &str) -> f64 {
    v.get(key).and_then(Value::as_f64).unwrap_or(0.0)
}

/// The table of a run's levels: one row per level.
pub fn table(levels: &[Value]) -> String {
    let goodput = levels.iter().any(|l| !l["request_goodput"].is_null());
    let p99 = |l: &Value, m: &str| {
        l.get(format!("p99_{m}_ms"))
            .and_then(Value::as_f64)
            .map(|v| format!("{v:.1}"))
            .unwrap_or_else(|| "-".into())
    };
    let mut rows: Vec<Vec<String>> = vec![[
        "CONC",
        "REQS",
        "FAIL",
        "REQ/S",
        "OUT TOK/S",
        "TOTAL TOK/S",
        "TTFT MEAN",
        "TTFT P50",
        "TTFT P99",
        "TPOT P50",
        "ITL P50",
        "ITL P99",
        "E2EL P50",
    ]
    .map(String::from)
    .to_vec()];
    if goodput {
        rows[0].push("GOODPUT".into());
    }
    for l in levels {
        let mut r = vec![
            format!("{}", num(l, "max_concurrency")),
            format!("{}", num(l, "completed")),
            format!("{}", num(l, "failed")),
            format!("{:.2}", num(l, "request_throughput")),
            format!("{:.1}", num(l, "output_throughput")),
            format!("{:.1}", num(l, "total_token_throughput")),
            format!("{:.1}", num(l, "mean_ttft_ms")),
            format!("{:.1}", num(l, "median_ttft_ms")),
            p99(l, "ttft"),
            format!("{:.2}", num(l, "median_tpot_ms")),
            format!("{:.2}", num(l, "median_itl_ms")),
            p99(l, "itl"),
            format!("{:.1}", num(l, "median_e2el_ms")),
        ];
        if goodput {
            r.push(format!("{:.2}", num(l, "request_goodput")));
        }
        rows.push(r);
    }
    let widths: Vec<usize> = (0..rows[0].len())
        .map(|c| rows.iter().map(|r| r[c].len()).max().unwrap_or(0))
        .collect();
    let mut out = String::from("latencies in ms\n");
    for r in &rows {
        let cells: Vec<String> = r
            .iter()
            .zip(&widths)
            .enumerate()
            .map(|(i, (cell, w))| {
                if i == 0 {
                    format!("{cell:<w$}")
                } else {
                    format!("{cell:>w$}")
                }
            })
            .collect();
        out.push_str(cells.join("  ").trim_end());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dates() {
        assert_eq!(date(0), "19700101-000000");
        assert_eq!(date(951_782_400), "20000229-000000");
        assert_eq!(date(1_767_225_599), "20251231-235959");
    }

    #[test]
    fn percentile_words() {
        assert_eq!(p_word(99.0), "99");
        assert_eq!(p_word(99.9), "99.9");
    }

    #[test]
    fn run_files_are_new_and_ordered() {
        let dir = tempfile::tempdir().unwrap();
        let bench = dir.path().join(DIR);
        let a = new_run_file(&bench, "20250101-000000").unwrap();
        let b = new_run_file(&bench, "20250101-000000").unwrap();
        let c = new_run_file(&bench, "20240101-000000").unwrap();
        assert_ne!(a, b);
        assert_eq!(runs(dir.path()), vec![c, a, b.clone()]);
        assert_eq!(latest(dir.path()), Some(b.clone()));
        append(
            &b,
            &json!({"max_concurrency": 2, "completed": 8, "request_goodput": null}),
        )
        .unwrap();
        append(
            &b,
            &json!({"max_concurrency": 4, "completed": 16, "p99_ttft_ms": 12.24}),
        )
        .unwrap();
        let levels = load(&b).unwrap();
        assert_eq!(levels.len(), 2);
        let t = table(&levels);
        assert!(t.contains("TTFT P99"), "{t}");
        assert!(!t.contains("GOODPUT"), "{t}");
        let lines: Vec<&str> = t.lines().collect();
        assert!(
            lines[2].starts_with("2 ") && lines[2].contains(" 8 "),
            "{t}"
        );
        assert!(lines[3].contains("12.2"), "{t}");
    }
}
