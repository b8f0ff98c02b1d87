//! SVG plots of a comparison: throughput per switch, latency versus offered load.

use std::path::Path;

use plotters::prelude::*;

/// One switch's figures for the plots.
pub struct SwitchFigures {
    pub name: String,
    /// Packets per second.
    pub throughput_pps: f64,
    /// (offered load in pps, average µs, p99 µs) per latency point.
    pub latency: Vec<(f64, f64, f64)>,
}

#[derive(Debug, thiserror::Error)]
#[error("cannot draw {path}: {why}")]
pub struct PlotError {
    path: String,
    why: String,
}

fn err(path: &Path, e: impl std::fmt::Display) -> PlotError {
    PlotError {
        path: path.display().to_string(),
        why: e.to_string(),
    }
}

const COLOURS: [RGBColor; 6] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
];

/// A bar per switch: 64-byte throughput in Mpps.
pub fn throughput(path: &Path, title: &str, switches: &[SwitchFigures]) -> Result<(), PlotError> {
    let root = SVGBackend::new(path, (720, 420)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(path, e))?;
    let top = switches
        .iter()
        .map(|s| s.throughput_pps / 1e6)
        .fold(0.1, f64::max)
        * 1.15;
    // A segmented range of 0..k has k + 1 segments; the last is left out.
    let n = switches.len().max(2) as u32 - 1;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d((0u32..n).into_segmented(), 0f64..top)
        .map_err(|e| err(path, e))?;
    chart
        .configure_mesh()
        .disable_x_mesh()
        .x_labels(n as usize + 2)
        .x_label_formatter(&|x| match x {
            SegmentValue::CenterOf(i) => switches
                .get(*i as usize)
                .map_or_else(String::new, |s| s.name.clone()),
            _ => String::new(),
        })
        .y_desc("Mpps")
        .draw()
        .map_err(|e| err(path, e))?;
    chart
        .draw_series(switches.iter().enumerate().map(|(i, s)| {
            let i = i as u32;
            let mut bar = Rectangle::new(
                [
                    (SegmentValue::Exact(i), 0.0),
                    (SegmentValue::Exact(i + 1), s.throughput_pps / 1e6),
                ],
                COLOURS[i as usize % COLOURS.len()].filled(),
            );
            bar.set_margin(0, 0, 20, 20);
            bar
        }))
        .map_err(|e| err(path, e))?;
    root.present().map_err(|e| err(path, e))
}

/// Average and p99 latency against offered load, a colour per switch (log scale).
pub fn latency(path: &Path, title: &str, switches: &[SwitchFigures]) -> Result<(), PlotError> {
    let root = SVGBackend::new(path, (720, 420)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(path, e))?;
    let points = switches.iter().flat_map(|s| s.latency.iter());
    let max_load = points.clone().map(|p| p.0 / 1e6).fold(0.01, f64::max) * 1.1;
    let max_us = points.map(|p| p.2.max(p.1)).fold(10.0, f64::max) * 2.0;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60)
        .build_cartesian_2d(0f64..max_load, (1f64..max_us).log_scale())
        .map_err(|e| err(path, e))?;
    chart
        .configure_mesh()
        .x_desc("offered load (Mpps)")
        .y_desc("latency (µs): solid avg, dashed p99")
        .draw()
        .map_err(|e| err(path, e))?;
    for (i, s) in switches.iter().enumerate() {
        let c = COLOURS[i % COLOURS.len()];
        chart
            .draw_series(LineSeries::new(
                s.latency.iter().map(|p| (p.0 / 1e6, p.1.max(1.0))),
                c.stroke_width(2),
            ))
            .map_err(|e| err(path, e))?
            .label(s.name.clone())
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], c.stroke_width(2)));
        chart
            .draw_series(DashedLineSeries::new(
                s.latency.iter().map(|p| (p.0 / 1e6, p.2.max(1.0))),
                6,
                4,
                c.stroke_width(1),
            ))
            .map_err(|e| err(path, e))?;
    }
    chart
        .configure_series_labels()
        .background_style(WHITE.mix(0.8))
        .border_style(BLACK)
        .draw()
        .map_err(|e| err(path, e))?;
    root.present().map_err(|e| err(path, e))
}

/// A named line of (x, y) points.
pub struct Line {
    pub name: String,
    pub points: Vec<(f64, f64)>,
    /// Drawn dashed (a second figure of the same colour, e.g. p99 beside p50).
    pub dashed: bool,
    pub colour: usize,
}

/// Lines against a common x axis; `log_y` for figures that span decades.
pub fn lines(
    path: &Path,
    title: &str,
    x_desc: &str,
    y_desc: &str,
    log_y: bool,
    lines: &[Line],
) -> Result<(), PlotError> {
    let root = SVGBackend::new(path, (720, 420)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| err(path, e))?;
    let all = lines.iter().flat_map(|l| l.points.iter());
    let max_x = all.clone().map(|p| p.0).fold(1.0, f64::max) * 1.05;
    let max_y = all.map(|p| p.1).fold(1.0, f64::max) * if log_y { 2.0 } else { 1.15 };
    let mut builder = ChartBuilder::on(&root);
    builder
        .caption(title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(60);
    macro_rules! draw {
        ($chart:expr, $y:expr) => {{
            let mut chart = $chart;
            chart
                .configure_mesh()
                .x_desc(x_desc)
                .y_desc(y_desc)
                .draw()
                .map_err(|e| err(path, e))?;
            for l in lines {
                let c = COLOURS[l.colour % COLOURS.len()];
                let pts: Vec<(f64, f64)> = l.points.iter().map(|p| (p.0, $y(p.1))).collect();
                if l.dashed {
                    chart
                        .draw_series(DashedLineSeries::new(pts, 6, 4, c.stroke_width(1)))
                        .map_err(|e| err(path, e))?;
                } else {
                    chart
                        .draw_series(LineSeries::new(pts, c.stroke_width(2)))
                        .map_err(|e| err(path, e))?
                        .label(l.name.clone())
                        .legend(move |(x, y)| {
                            PathElement::new(vec![(x, y), (x + 16, y)], c.stroke_width(2))
                        });
                }
            }
            chart
                .configure_series_labels()
                .background_style(WHITE.mix(0.8))
                .border_style(BLACK)
                .draw()
                .map_err(|e| err(path, e))?;
        }};
    }
    if log_y {
        let chart = builder
            .build_cartesian_2d(0f64..max_x, (1f64..max_y).log_scale())
            .map_err(|e| err(path, e))?;
        draw!(chart, |y: f64| y.max(1.0));
    } else {
        let chart = builder
            .build_cartesian_2d(0f64..max_x, 0f64..max_y)
            .map_err(|e| err(path, e))?;
        draw!(chart, |y: f64| y);
    }
    root.present().map_err(|e| err(path, e))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn figures() -> Vec<SwitchFigures> {
        vec![
            SwitchFigures {
                name: "vsw".into(),
                throughput_pps: 684_000.0,
                latency: vec![
                    (68_400.0, 5.0, 40.0),
                    (342_000.0, 6.5, 43.0),
                    (615_600.0, 9.0, 120.0),
                ],
            },
            SwitchFigures {
                name: "bridge".into(),
                throughput_pps: 358_000.0,
                latency: vec![(35_800.0, 4.0, 10.0), (179_000.0, 4.3, 15.1)],
            },
        ]
    }

    #[test]
    fn writes_both_svgs() {
        let dir = std::env::temp_dir().join(format!("vsw-bench-plot-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        throughput(&dir.join("t.svg"), "64-byte throughput", &figures()).unwrap();
        latency(&dir.join("l.svg"), "latency", &figures()).unwrap();
        for f in ["t.svg", "l.svg"] {
            let svg = std::fs::read_to_string(dir.join(f)).unwrap();
            assert!(svg.starts_with("<svg") && svg.contains("</svg>"), "{f}");
        }
        let t = std::fs::read_to_string(dir.join("t.svg")).unwrap();
        assert!(
            t.contains("vsw") && t.contains("bridge"),
            "switch names label the bars"
        );
        assert!(
            t.matches("<rect").count() >= 3,
            "a bar per switch and the background"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn no_switches_still_draws() {
        let dir = std::env::temp_dir().join(format!("vsw-bench-plot-empty-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        throughput(&dir.join("t.svg"), "none", &[]).unwrap();
        latency(&dir.join("l.svg"), "none", &[]).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
