//! A sweep's results: one file per point (its benchmark's levels, `vllm bench serve`'s
//! fields, one JSON object per line), a summary for machines (`summary.json`), the
//! table of every point and concurrency (`summary.txt`), and the plot of output
//! throughput per GPU against output tokens per second per user (`pareto.svg`,
//! `pareto.png`), each point a curve with its Pareto front marked.

use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::path::{Path, PathBuf};

/// The summary's format version.
pub const FORMAT_VERSION: u32 = 1;

/// One point's outcome.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PointResult {
    /// `NAME_param1value1_...`, as srtctl names it.
    pub name: String,
    /// Its parameters, in the sweep's order, as their values are written in names.
    pub params: Vec<(String, String)>,
    /// `done` (the benchmark passed), `failed`, `pending` (not run yet), or `unfit`
    /// (not run: its parallel sizes do not fit its GPUs).
    pub status: String,
    /// Why it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// GPUs its workers use.
    pub gpus: usize,
    /// Worker processes it started (its step from the point before).
    pub worker_starts: usize,
    /// Seconds from the start of its apply to the end of its benchmark.
    pub wall_seconds: f64,
    /// Its result file, relative to the results directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub result: Option<String>,
    /// The curve it is drawn on: points whose deployments are the same (they differ
    /// only in the benchmark, e.g. its concurrency) share one, named by the values they
    /// share (`seqs=8`).
    #[serde(default)]
    pub curve: String,
    /// Its benchmark's levels (`vllm bench serve`'s fields).
    #[serde(default)]
    pub levels: Vec<Value>,
}

/// Every point of a sweep, in the order they ran, and what the sweep cost.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// [`FORMAT_VERSION`].
    pub format_version: u32,
    /// The deployment the points ran in.
    pub deployment: String,
    /// The points, in the order they ran.
    pub points: Vec<PointResult>,
    /// Worker starts of the sweep (every point run so far, in one deployment).
    pub worker_starts: usize,
    /// Worker starts of running every point as a fresh deployment.
    pub fresh_worker_starts: usize,
    /// The plot's curves, each with its Pareto front (worked out from `points` when
    /// written: [`Summary::curves`]).
    #[serde(default)]
    pub curves: Vec<Curve>,
}

/// One curve of the plot: the levels of the points of one deployment, by concurrency.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Curve {
    /// Its name ([`PointResult::curve`]).
    pub label: String,
    /// GPUs of its workers.
    pub gpus: usize,
    /// Its levels, by increasing concurrency.
    pub spots: Vec<CurveSpot>,
}

/// A level on a curve.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CurveSpot {
    /// The point it was measured in.
    pub point: String,
    /// Its concurrency.
    pub concurrency: u64,
    /// Output tokens/s per user (`1000 / mean TPOT`).
    pub per_user: f64,
    /// Output tokens/s per GPU.
    pub per_gpu: f64,
    /// Whether it is on its curve's Pareto front.
    pub front: bool,
}

impl Summary {
    /// The curves of the points that have levels, in the order their first point ran.
    pub fn curves(&self) -> Vec<Curve> {
        let mut curves: Vec<Curve> = Vec::new();
        for p in self.points.iter().filter(|p| !p.levels.is_empty()) {
            let label = match p.curve.is_empty() {
                true => p.name.clone(),
                false => p.curve.clone(),
            };
            let at = match curves.iter().position(|c| c.label == label) {
                Some(at) => at,
                None => {
                    curves.push(Curve {
                        label,
                        gpus: p.gpus,
                        spots: Vec::new(),
                    });
                    curves.len() - 1
                }
            };
            curves[at]
                .spots
                .extend(p.spots().into_iter().map(|s| CurveSpot {
                    point: p.name.clone(),
                    concurrency: s.concurrency,
                    per_user: s.per_user,
                    per_gpu: s.per_gpu,
                    front: false,
                }));
        }
        for c in &mut curves {
            c.spots.sort_by_key(|s| s.concurrency);
            let spots: Vec<Spot> = c
                .spots
                .iter()
                .map(|s| Spot {
                    concurrency: s.concurrency,
                    per_user: s.per_user,
                    per_gpu: s.per_gpu,
                })
                .collect();
            for i in pareto(&spots) {
                c.spots[i].front = true;
            }
        }
        curves
    }
}

/// Whether the level of `point` at `concurrency` is on its curve's front.
fn on_front(curves: &[Curve], point: &str, concurrency: u64) -> bool {
    {
        curves.iter().any(|c| {
            c.spots
                .iter()
                .any(|s| s.point == point && s.concurrency == concurrency && s.front)
        })
    }
}

/// One level's place on the plot: output tokens/s per user (x) and output tokens/s per
/// GPU (y).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Spot {
    /// The level's concurrency.
    pub concurrency: u64,
    /// `1000 / mean TPOT (ms)`: the tokens per second one user sees while decoding.
    pub per_user: f64,
    /// Output tokens per second over the point's GPUs.
    pub per_gpu: f64,
}

fn num(v: &Value, key: &str) -> f64 {
    v.get(key).and_then(Value::as_f64).unwrap_or(0.0)
}

impl PointResult {
    /// Each level's place on the plot.
    pub fn spots(&self) -> Vec<Spot> {
        self.levels
            .iter()
            .map(|l| {
                let tpot = num(l, "mean_tpot_ms");
                Spot {
                    concurrency: num(l, "max_concurrency") as u64,
                    per_user: if tpot > 0.0 { 1000.0 / tpot } else { 0.0 },
                    per_gpu: num(l, "output_throughput") / self.gpus.max(1) as f64,
                }
            })
            .collect()
    }
}

/// The spots no other spot beats on both axes (more per user and more per GPU), as
/// indices into `spots`, by decreasing tokens per user.
pub fn pareto(spots: &[Spot]) -> Vec<usize> {
    let mut by_user: Vec<usize> = (0..spots.len()).collect();
    by_user.sort_by(|&a, &b| {
        spots[b]
            .per_user
            .total_cmp(&spots[a].per_user)
            .then(spots[b].per_gpu.total_cmp(&spots[a].per_gpu))
    });
    let mut best = f64::NEG_INFINITY;
    let mut front = Vec::new();
    for i in by_user {
        if spots[i].per_gpu > best {
            best = spots[i].per_gpu;
            front.push(i);
        }
    }
    front
}

/// The table of every point and concurrency; `*` marks the levels on their curve's
/// Pareto front ([`Summary::curves`]).
pub fn table(summary: &Summary) -> String {
    let curves = summary.curves();
    let mut rows = vec![[
        "point",
        "conc",
        "req/s",
        "out tok/s",
        "tok/s/gpu",
        "tok/s/user",
        "TTFT p50",
        "TPOT p50",
        "failed",
        "front",
    ]
    .map(String::from)
    .to_vec()];
    for p in &summary.points {
        if p.levels.is_empty() {
            let why = match (&p.status[..], &p.reason) {
                (s @ ("failed" | "unfit"), Some(r)) => format!("{s}: {}", first_line(r)),
                (s, _) => s.to_string(),
            };
            rows.push(vec![p.name.clone(), why]);
            continue;
        }
        let spots = p.spots();
        for (l, s) in p.levels.iter().zip(&spots) {
            rows.push(vec![
                p.name.clone(),
                s.concurrency.to_string(),
                format!("{:.2}", num(l, "request_throughput")),
                format!("{:.1}", num(l, "output_throughput")),
                format!("{:.1}", s.per_gpu),
                format!("{:.1}", s.per_user),
                format!("{:.1}", num(l, "median_ttft_ms")),
                format!("{:.2}", num(l, "median_tpot_ms")),
                format!("{}", num(l, "failed") as u64),
                if on_front(&curves, &p.name, s.concurrency) {
                    "*"
                } else {
                    ""
                }
                .to_string(),
            ]);
        }
    }
    let widths: Vec<usize> = (0..10)
        .map(|c| {
            rows.iter()
                .filter(|r| r.len() == 10)
                .map(|r| r[c].len())
                .max()
                .unwrap_or(0)
        })
        .collect();
    let mut out = String::new();
    for r in &rows {
        let line: Vec<String> = match r.len() {
            10 => r
                .iter()
                .zip(&widths)
                .enumerate()
                .map(|(c, (v, w))| match c {
                    0 => format!("{v:<w$}"),
                    _ => format!("{v:>w$}"),
                })
                .collect(),
            _ => vec![format!("{:<w$}", r[0], w = widths[0]), r[1].clone()],
        };
        out.push_str(line.join("  ").trim_end());
        out.push('\n');
    }
    out.push_str(&format!(
        "\nworker starts: {} (as a fresh deployment per point: {})\n",
        summary.worker_starts, summary.fresh_worker_starts
    ));
    out
}

fn first_line(s: &str) -> &str {
    s.lines().next().unwrap_or("")
}

/// The file of `name`'s levels in `dir`.
pub fn point_file(dir: &Path, name: &str) -> PathBuf {
    dir.join(format!("{}.jsonl", file_name(name)))
}

/// A point's name as a file name: characters a file name should not hold become `-`.
pub fn file_name(name: &str) -> String {
    name.chars()
        .map(|c| match c {
            'A'..='Z' | 'a'..='z' | '0'..='9' | '-' | '_' | '.' | '=' => c,
            _ => '-',
        })
        .collect()
}

/// Write `summary` into `dir`: `summary.json`, `summary.txt`, and the plot (SVG and
/// PNG). Each point's levels are written by [`write_point`] as it finishes.
pub fn write(dir: &Path, summary: &Summary) -> Result<(), String> {
    crate::files::private_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let summary = &Summary {
        curves: summary.curves(),
        ..summary.clone()
    };
    let json = serde_json::to_string_pretty(summary).map_err(|e| e.to_string())?;
    write_file(&dir.join("summary.json"), json.as_bytes())?;
    write_file(&dir.join("summary.txt"), table(summary).as_bytes())?;
    let title = format!(
        "{}: output throughput per GPU vs per user",
        summary.deployment
    );
    super::plot::svg(&dir.join("pareto.svg"), &title, &summary.curves)?;
    super::plot::png(&dir.join("pareto.png"), &title, &summary.curves)
}

/// Write a point's levels, one JSON object per line, to its file in `dir`.
pub fn write_point(dir: &Path, point: &PointResult) -> Result<PathBuf, String> {
    crate::files::private_dir(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let path = point_file(dir, &point.name);
    let mut text = String::new();
    for l in &point.levels {
        text.push_str(&serde_json::to_string(l).map_err(|e| e.to_string())?);
        text.push('\n');
    }
    write_file(&path, text.as_bytes())?;
    Ok(path)
}

fn write_file(path: &Path, bytes: &[u8]) -> Result<(), String> {
    crate::files::write_atomic(path, bytes)
        .map_err(|e| format!("cannot write {}: {e}", path.display()))
}

/// The summary in `dir` (`srt sweep --results DIR`).
pub fn load(dir: &Path) -> Result<Summary, String> {
    let path = dir.join("summary.json");
    let text = std::fs::read_to_string(&path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    serde_json::from_str(&text)
        .map_err(|e| format!("{} is not a sweep summary: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn level(c: u64, tput: f64, tpot: f64) -> Value {
        serde_json::json!({"max_concurrency": c, "output_throughput": tput, "mean_tpot_ms": tpot,
            "median_tpot_ms": tpot, "median_ttft_ms": 10.0, "request_throughput": 1.0, "failed": 0})
    }

    #[test]
    fn the_front_keeps_what_nothing_beats_on_both_axes() {
        let spot = |u, g| Spot {
            concurrency: 1,
            per_user: u,
            per_gpu: g,
        };
        // (per user, per gpu): c is beaten by b on both; the others trade one for the other.
        let spots = [
            spot(100.0, 10.0),
            spot(50.0, 40.0),
            spot(40.0, 30.0),
            spot(10.0, 60.0),
        ];
        assert_eq!(pareto(&spots), [0, 1, 3]);
        assert_eq!(pareto(&[]), Vec::<usize>::new());
    }

    #[test]
    fn points_of_one_deployment_make_one_curve_with_its_front() {
        let point = |name: &str, curve: &str, levels| PointResult {
            name: name.into(),
            params: vec![],
            status: "done".into(),
            reason: None,
            gpus: 1,
            worker_starts: 0,
            wall_seconds: 0.0,
            result: None,
            curve: curve.into(),
            levels,
        };
        let s = Summary {
            format_version: FORMAT_VERSION,
            deployment: "s".into(),
            points: vec![
                point("s_seqs8_conc4", "seqs=8", vec![level(4, 300.0, 20.0)]),
                point("s_seqs8_conc1", "seqs=8", vec![level(1, 100.0, 10.0)]),
                // Beaten by conc 4 on both axes: off the front.
                point("s_seqs8_conc2", "seqs=8", vec![level(2, 90.0, 25.0)]),
                point("s_seqs16_conc1", "seqs=16", vec![level(1, 80.0, 11.0)]),
            ],
            worker_starts: 0,
            fresh_worker_starts: 0,
            curves: Vec::new(),
        };
        let curves = s.curves();
        assert_eq!(curves.len(), 2);
        assert_eq!(curves[0].label, "seqs=8");
        let shown: Vec<(u64, bool)> = curves[0]
            .spots
            .iter()
            .map(|p| (p.concurrency, p.front))
            .collect();
        assert_eq!(shown, [(1, true), (2, false), (4, true)]);
        assert_eq!(curves[1].spots.len(), 1);
        assert!(curves[1].spots[0].front);
    }

    #[test]
    fn the_table_has_a_row_per_point_and_level() {
        let p = PointResult {
            name: "s_seqs8".into(),
            params: vec![("seqs".into(), "8".into())],
            status: "done".into(),
            reason: None,
            gpus: 2,
            worker_starts: 2,
            wall_seconds: 1.0,
            result: None,
            curve: String::new(),
            levels: vec![level(1, 100.0, 10.0), level(4, 300.0, 12.5)],
        };
        let failed = PointResult {
            name: "s_seqs16".into(),
            status: "failed".into(),
            reason: Some("the benchmark failed: 4/4\nmore".into()),
            levels: vec![],
            ..p.clone()
        };
        let mut s = Summary {
            format_version: FORMAT_VERSION,
            deployment: "s".into(),
            points: vec![p, failed],
            worker_starts: 3,
            fresh_worker_starts: 4,
            curves: Vec::new(),
        };
        s.curves = s.curves();
        let t = table(&s);
        let lines: Vec<&str> = t.lines().collect();
        assert!(
            lines[0].starts_with("point") && lines[0].ends_with("front"),
            "{t}"
        );
        // 100 tok/s on 2 GPUs, 1000/10 ms per user; 300/2, 1000/12.5: both on the front.
        assert!(
            lines[1].contains("50.0") && lines[1].contains("100.0") && lines[1].ends_with('*'),
            "{t}"
        );
        assert!(
            lines[2].contains("150.0") && lines[2].contains("80.0") && lines[2].ends_with('*'),
            "{t}"
        );
        assert!(
            lines[3].starts_with("s_seqs16")
                && lines[3].contains("failed: the benchmark failed: 4/4"),
            "{t}"
        );
        assert!(
            t.contains("worker starts: 3 (as a fresh deployment per point: 4)"),
            "{t}"
        );
    }
}
