//! The picture of a run: output throughput against latency, one point per concurrency
//! level, as an SVG (plotters) next to the run's result file.

use plotters::prelude::*;
use serde_json::Value;
use std::path::Path;

fn num(v: &Value, key: &str) -> f64 {
    v.get(key).and_then(Value::as_f64).unwrap_or(0.0)
}

/// Draw `levels` (a run's result objects) to `path`: output tokens/s against median
/// TTFT (left) and median TPOT (right), points labelled with their concurrency.
pub(super) fn svg(path: &Path, title: &str, levels: &[Value]) -> Result<(), String> {
    draw(path, title, levels).map_err(|e| format!("cannot draw {}: {e}", path.display()))
}

fn draw(path: &Path, title: &str, levels: &[Value]) -> Result<(), Box<dyn std::error::Error>> {
    let root = SVGBackend::new(path, (1100, 480)).into_drawing_area();
    root.fill(&WHITE)?;
    let root = root.titled(title, ("sans-serif", 20))?;
    let panels = root.split_evenly((1, 2));
    let y_max = levels
        .iter()
        .map(|l| num(l, "output_throughput"))
        .fold(0.0, f64::max);
    for (panel, (key, label)) in panels.iter().zip([
        ("median_ttft_ms", "median TTFT (ms)"),
        ("median_tpot_ms", "median TPOT (ms)"),
    ]) {
        let points: Vec<(f64, f64, u64)> = levels
            .iter()
            .map(|l| {
                (
                    num(l, key),
                    num(l, "output_throughput"),
                    num(l, "max_concurrency") as u64,
                )
            })
            .collect();
        let x_max = points.iter().map(|p| p.0).fold(0.0, f64::max);
        let mut chart = ChartBuilder::on(panel)
            .margin(20)
            .x_label_area_size(45)
            .y_label_area_size(70)
            .build_cartesian_2d(0.0..nice(x_max), 0.0..nice(y_max))?;
        chart
            .configure_mesh()
            .x_desc(label)
            .y_desc("output tokens/s")
            .label_style(("sans-serif", 13))
            .draw()?;
        chart.draw_series(LineSeries::new(
            points.iter().map(|p| (p.0, p.1)),
            BLUE.stroke_width(2),
        ))?;
        // Each point with its level's label a little above and to the right of it.
        chart.draw_series(points.iter().map(|p| {
            EmptyElement::at((p.0, p.1))
                + Circle::new((0, 0), 5, BLUE.filled())
                + Text::new(
                    format!("c={}", p.2),
                    (8, -18),
                    ("sans-serif", 13).into_font().color(&BLACK),
                )
        }))?;
    }
    root.present()?;
    Ok(())
}

/// An axis end a little past `v` (and not zero).
pub(crate) fn nice(v: f64) -> f64 {
    if v > 0.0 && v.is_finite() {
        v * 1.15
    } else {
        1.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn draws_an_svg_with_every_level() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("run.svg");
        let levels: Vec<Value> = [(1, 10.0, 2.0, 100.0), (4, 30.0, 3.0, 320.0)]
            .iter()
            .map(|&(c, ttft, tpot, tput)| {
                serde_json::json!({"max_concurrency": c, "median_ttft_ms": ttft,
                    "median_tpot_ms": tpot, "output_throughput": tput})
            })
            .collect();
        svg(&path, "demo", &levels).unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.starts_with("<svg"), "{}", &text[..80.min(text.len())]);
        assert!(text.contains("c=1") && text.contains("c=4") && text.contains("median TTFT"));
    }
}
