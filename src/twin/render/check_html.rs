//! `twin check --html`: per banded figure, the measured points over the predicted 90 %
//! band (shaded) and the prediction (dashed) against load, one chart per length and loop
//! kind; points outside their band drawn apart; a caption with the figure's coverage and
//! signed bias. Built on the report's own SVG charts and page.

use crate::report::html::page;
use crate::report::plot::{Chart, Curve, Point, Series, Shade, Unit};
use crate::twin::check::{CellCheck, CheckReport};
use crate::twin::model::figure::Figure;
use std::collections::BTreeMap;
use std::fmt::Write;
use std::path::Path;

/// The x of a cell: its concurrency (closed loop) or rate (open loop).
fn load_of(c: &CellCheck) -> (&'static str, f64) {
    match (c.key.concurrency, c.key.rate) {
        (Some(n), _) => ("concurrency", f64::from(n)),
        (None, Some(r)) => ("rate (req/s)", r),
        _ => ("load", 0.0),
    }
}

fn unit(f: Figure) -> Unit {
    match f {
        Figure::TtftP50 | Figure::TtftP90 | Figure::TtftP99 | Figure::TpotP50 => Unit::Seconds,
        Figure::OutputTps => Unit::TokensPerSecond,
        Figure::HitRatio => Unit::Percent,
        Figure::Goodput => Unit::Count,
    }
}

/// One chart: figure `f` over `cells` (one length, one loop kind).
fn chart(f: Figure, length: u64, axis: &str, cells: &[&CellCheck]) -> Chart {
    let y_unit = unit(f);
    let id = format!(
        "{}-{length}-{}",
        f.name().replace([' ', '/'], "-"),
        axis.split(' ').next().unwrap_or("load")
    );
    let mut c = Chart::linear(
        &id,
        &format!("{} at {length} tokens", f.name()),
        (axis, f.name()),
        (Unit::Count, y_unit),
        "no measured figure",
    );
    let mut inside = Vec::new();
    let mut outside = Vec::new();
    let mut band = Vec::new();
    let mut predicted = Vec::new();
    for cell in cells {
        let Some(row) = cell.rows.iter().find(|r| r.figure == f) else {
            continue;
        };
        let x = load_of(cell).1;
        predicted.push((x, row.predicted));
        if let Some([lo, hi]) = row.band {
            band.push((x, lo, hi));
        }
        for &m in &row.measured {
            let within = row.band.is_some_and(|[lo, hi]| lo <= m && m <= hi);
            let p = Point {
                x,
                y: m,
                spread: None,
                tip: format!(
                    "{}: measured {} predicted {}{}",
                    cell.key.load_label(),
                    f.show(m),
                    f.show(row.predicted),
                    if within { "" } else { " (outside its band)" }
                ),
            };
            if within { &mut inside } else { &mut outside }.push(p);
        }
    }
    c.shades.push(Shade {
        key: "band".into(),
        label: "predicted 90 % band".into(),
        color: 0,
        points: band,
    });
    c.curves.push(Curve {
        key: "predicted".into(),
        label: "predicted".into(),
        color: 0,
        points: predicted,
    });
    c.series.push(Series {
        key: "measured".into(),
        label: "measured, inside its band".into(),
        color: 2,
        points: inside,
    });
    c.series.push(Series {
        key: "outside".into(),
        label: "measured, OUTSIDE its band".into(),
        color: 1,
        points: outside,
    });
    c
}

/// The page.
pub fn render(r: &CheckReport) -> String {
    let mut body = String::new();
    let _ = write!(
        body,
        "<h1>twin check</h1><p>profile {} against {}</p>",
        crate::report::escape::escape(&r.profile),
        crate::report::escape::escape(&r.files.join(", "))
    );
    let summary = r.per_figure();
    for f in [
        Figure::TtftP50,
        Figure::TtftP99,
        Figure::TpotP50,
        Figure::OutputTps,
        Figure::Goodput,
    ] {
        let Some(s) = summary.iter().find(|s| s.figure == f) else {
            continue;
        };
        let mut groups: BTreeMap<(u64, &str), Vec<&CellCheck>> = BTreeMap::new();
        for c in &r.cells {
            groups
                .entry((c.key.context_tokens, load_of(c).0))
                .or_default()
                .push(c);
        }
        let _ = write!(body, "<h2>{}</h2>", f.name());
        for ((length, axis), mut cells) in groups {
            cells.sort_by(|a, b| load_of(a).1.total_cmp(&load_of(b).1));
            body.push_str(&chart(f, length, axis, &cells).to_svg());
        }
        let _ = write!(
            body,
            "<p class=\"caption\">{}: {} of {} measured values inside their 90 % bands; \
             signed bias {:+.1} %; median |error| {:.1} %.</p>",
            f.name(),
            s.inside,
            s.measured,
            s.bias * 100.0,
            s.median_error * 100.0
        );
    }
    if let Some(c) = r.coverage() {
        let _ = write!(
            body,
            "<p class=\"caption\">coverage over every banded figure: {:.1} %</p>",
            c * 100.0
        );
    }
    page::document("twin check", &body)
}

/// Write the page to `path`.
pub fn write(path: &Path, r: &CheckReport) -> anyhow::Result<()> {
    crate::report::write_atomic(path, &render(r))
        .map_err(|e| anyhow::anyhow!("--html {}: {e}", path.display()))
}
