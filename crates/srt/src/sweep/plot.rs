//! The sweep's plot: output tokens/s per GPU (y) against output tokens/s per user (x),
//! one curve per deployment the sweep ran (its points' levels by concurrency), the
//! curve's Pareto front drawn filled and joined by a black line, the other levels hollow. The same chart is drawn
//! as SVG (plotters' backend) and PNG ([`super::png`]: a pixel buffer, a built-in
//! bitmap font, no image library).

use super::results::Curve;
use crate::bench::plot::nice;
use plotters::coord::Shift;
use plotters::prelude::*;
use std::path::Path;

/// The plot's size in pixels.
pub const SIZE: (u32, u32) = (1000, 640);

const COLORS: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(23, 190, 207),
];

/// Draw `points` as SVG to `path`.
pub fn svg(path: &Path, title: &str, curves: &[Curve]) -> Result<(), String> {
    let root = SVGBackend::new(path, SIZE).into_drawing_area();
    draw(root, title, curves).map_err(|e| format!("cannot draw {}: {e}", path.display()))
}

/// Draw `points` as PNG to `path`.
pub fn png(path: &Path, title: &str, curves: &[Curve]) -> Result<(), String> {
    let mut canvas = super::png::Canvas::new(SIZE.0, SIZE.1);
    draw(canvas.area(), title, curves)
        .map_err(|e| format!("cannot draw {}: {e}", path.display()))?;
    crate::files::write_atomic(path, &canvas.encode())
        .map_err(|e| format!("cannot write {}: {e}", path.display()))
}

fn draw<DB: DrawingBackend>(
    root: DrawingArea<DB, Shift>,
    title: &str,
    curves: &[Curve],
) -> Result<(), DrawingAreaErrorKind<DB::ErrorType>> {
    root.fill(&WHITE)?;
    let root = root.titled(title, ("sans-serif", 20))?;
    let all: Vec<_> = curves.iter().flat_map(|c| &c.spots).collect();
    let x_max = all.iter().map(|s| s.per_user).fold(0.0, f64::max);
    let y_max = all.iter().map(|s| s.per_gpu).fold(0.0, f64::max);
    let mut chart = ChartBuilder::on(&root)
        .margin(20)
        .x_label_area_size(45)
        .y_label_area_size(95)
        .build_cartesian_2d(0.0..nice(x_max), 0.0..nice(y_max))?;
    chart
        .configure_mesh()
        .x_desc("output tokens/s per user (1000 / mean TPOT)")
        .y_desc("output tokens/s per GPU")
        .label_style(("sans-serif", 13))
        .draw()?;
    for (i, c) in curves.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        chart
            .draw_series(LineSeries::new(
                c.spots.iter().map(|s| (s.per_user, s.per_gpu)),
                color.stroke_width(2),
            ))?
            .label(c.label.clone())
            .legend(move |(x, y)| PathElement::new([(x, y), (x + 20, y)], color.stroke_width(2)));
        let front: Vec<_> = c.spots.iter().filter(|s| s.front).collect();
        chart.draw_series(front.windows(2).map(|w| {
            PathElement::new(
                [(w[0].per_user, w[0].per_gpu), (w[1].per_user, w[1].per_gpu)],
                BLACK.stroke_width(1),
            )
        }))?;
        chart.draw_series(c.spots.iter().map(|s| {
            let style = match s.front {
                true => color.filled(),
                false => color.stroke_width(2),
            };
            EmptyElement::at((s.per_user, s.per_gpu))
                + Circle::new((0, 0), if s.front { 6 } else { 4 }, style)
                + Text::new(
                    format!("c={}", s.concurrency),
                    (7, -16),
                    ("sans-serif", 12).into_font().color(&BLACK),
                )
        }))?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .label_font(("sans-serif", 13))
        .draw()?;
    root.present()?;
    Ok(())
}
