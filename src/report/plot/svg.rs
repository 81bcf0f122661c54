//! Drawing a `Chart` as SVG markup: axes with ticks and labels, error bars, polylines with
//! circles carrying `<title>` tooltips, dashed curves clipped to the plot area, a legend.

use super::format::raw;
use super::{Chart, Curve, Scale, Series, Unit, color};
use crate::report::escape::escape;
use std::fmt::Write;

const WIDTH: f64 = 560.0;
const HEIGHT: f64 = 340.0;
const LEFT: f64 = 72.0;
const RIGHT: f64 = 18.0;
const TOP: f64 = 52.0;
const BOTTOM: f64 = 48.0;

pub fn render(chart: &Chart) -> String {
    let mut out = String::new();
    let id = escape(&chart.id);
    let _ = write!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" class="chart" id="chart-{id}" data-chart="{id}" viewBox="0 0 {WIDTH} {HEIGHT}" width="{WIDTH}" height="{HEIGHT}" role="img" aria-label="{title}" font-family="system-ui, sans-serif" font-size="12">"#,
        title = escape(&chart.title)
    );
    let _ = write!(
        out,
        r##"<title>{t}</title><rect class="background" x="0" y="0" width="{WIDTH}" height="{HEIGHT}" fill="#ffffff"/><text class="chart-title" x="{LEFT}" y="20" font-size="14" font-weight="600">{t}</text>"##,
        t = escape(&chart.title)
    );
    if !chart.has_points() {
        let _ = write!(
            out,
            r##"<text class="empty" x="{x}" y="{y}" text-anchor="middle" fill="#666666">{m}</text></svg>"##,
            x = WIDTH / 2.0,
            y = HEIGHT / 2.0,
            m = escape(&chart.empty_text)
        );
        return out;
    }
    let shaded = chart.shades.iter().flat_map(|s| s.points.iter());
    let xs: Vec<f64> = chart
        .series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.x))
        .chain(shaded.clone().map(|p| p.0))
        .collect();
    let ys: Vec<f64> = chart
        .series
        .iter()
        .flat_map(|s| {
            s.points.iter().flat_map(|p| {
                let (lo, hi) = p.spread.unwrap_or((p.y, p.y));
                [p.y, lo, hi]
            })
        })
        .chain(shaded.flat_map(|p| [p.1, p.2]))
        .collect();
    let x = Scale::fit(chart.x_scale, &xs, false, LEFT, WIDTH - RIGHT);
    let y = Scale::fit(chart.y_scale, &ys, chart.y_zero, HEIGHT - BOTTOM, TOP);
    axes(&mut out, chart, &x, &y);
    for s in &chart.shades {
        shade(&mut out, s, &x, &y);
    }
    for c in &chart.curves {
        curve(&mut out, c, &x, &y);
    }
    for s in &chart.series {
        series(&mut out, s, &x, &y);
    }
    legend(&mut out, chart);
    out.push_str("</svg>");
    out
}

fn axes(out: &mut String, chart: &Chart, x: &Scale, y: &Scale) {
    let (x0, x1, y0, y1) = (LEFT, WIDTH - RIGHT, HEIGHT - BOTTOM, TOP);
    let _ = write!(
        out,
        r##"<rect class="plot-area" x="{x0}" y="{y1}" width="{w:.1}" height="{h:.1}" fill="none" stroke="#cccccc"/>"##,
        w = x1 - x0,
        h = y0 - y1
    );
    let x_line = format!(
        r##"<line class="axis-line" x1="{x0}" y1="{y0}" x2="{x1}" y2="{y0}" stroke="#333333"/>"##
    );
    axis(out, "x-axis", x, &x_line, chart.x_unit, |px| {
        let lines = format!(
            r##"<line class="grid" x1="{px:.1}" y1="{y1}" x2="{px:.1}" y2="{y0}" stroke="#eeeeee"/><line x1="{px:.1}" y1="{y0}" x2="{px:.1}" y2="{t2}" stroke="#333333"/>"##,
            t2 = y0 + 5.0
        );
        let place = format!(
            r#"x="{px:.1}" y="{ty}" text-anchor="middle""#,
            ty = y0 + 18.0
        );
        (lines, place)
    });
    let _ = write!(
        out,
        r#"<text class="axis-label x-label" x="{cx:.1}" y="{ly}" text-anchor="middle">{l}</text></g>"#,
        cx = (x0 + x1) / 2.0,
        ly = HEIGHT - 10.0,
        l = escape(&chart.x_label)
    );
    let y_line = format!(
        r##"<line class="axis-line" x1="{x0}" y1="{y0}" x2="{x0}" y2="{y1}" stroke="#333333"/>"##
    );
    axis(out, "y-axis", y, &y_line, chart.y_unit, |py| {
        let lines = format!(
            r##"<line class="grid" x1="{x0}" y1="{py:.1}" x2="{x1}" y2="{py:.1}" stroke="#eeeeee"/><line x1="{t2}" y1="{py:.1}" x2="{x0}" y2="{py:.1}" stroke="#333333"/>"##,
            t2 = x0 - 5.0
        );
        let place = format!(
            r#"x="{tx}" y="{ty:.1}" text-anchor="end""#,
            tx = x0 - 8.0,
            ty = py + 4.0
        );
        (lines, place)
    });
    let zero = (!y.kind.is_log() && y.lo < 0.0 && y.hi > 0.0)
        .then(|| y.map(0.0))
        .flatten();
    if let Some(py) = zero {
        let _ = write!(
            out,
            r##"<line class="zero-line" x1="{x0}" y1="{py:.1}" x2="{x1}" y2="{py:.1}" stroke="#888888"/>"##
        );
    }
    let _ = write!(
        out,
        r#"<text class="axis-label y-label" x="16" y="{cy:.1}" text-anchor="middle" transform="rotate(-90 16 {cy:.1})">{l}</text></g>"#,
        cy = (y0 + y1) / 2.0,
        l = escape(&chart.y_label)
    );
}

/// An axis group's opening, its line and a tick per value: `tick(position)` gives the
/// tick's lines and its label's placement attributes. The caller adds the axis label and
/// closes the group.
fn axis(
    out: &mut String,
    class: &str,
    scale: &Scale,
    line: &str,
    unit: Unit,
    tick: impl Fn(f64) -> (String, String),
) {
    let _ = write!(
        out,
        r#"<g class="axis {class}" data-scale="{}" data-min="{}" data-max="{}">{line}"#,
        scale.kind.name(),
        raw(scale.lo),
        raw(scale.hi)
    );
    let labelled = scale.labelled_ticks();
    for t in &scale.ticks {
        let Some(p) = scale.map(*t) else { continue };
        let (lines, place) = tick(p);
        let _ = write!(out, r#"<g class="tick" data-value="{}">{lines}"#, raw(*t));
        if labelled.contains(t) {
            let _ = write!(
                out,
                r#"<text class="tick-label" {place}>{}</text>"#,
                escape(&unit.label(*t))
            );
        }
        out.push_str("</g>");
    }
}

/// A shaded band: the polygon along its upper edge and back along its lower one.
fn shade(out: &mut String, s: &super::Shade, x: &Scale, y: &Scale) {
    let place = |vx: f64, vy: f64| x.map(vx).zip(y.map(vy));
    let upper: Option<Vec<(f64, f64)>> = s.points.iter().map(|p| place(p.0, p.2)).collect();
    let lower: Option<Vec<(f64, f64)>> = s.points.iter().rev().map(|p| place(p.0, p.1)).collect();
    let (Some(mut pts), Some(lower)) = (upper, lower) else {
        return;
    };
    pts.extend(lower);
    let l = escape(&s.label);
    let _ = write!(
        out,
        r#"<g class="shade" data-series="{k}" data-label="{l}"><title>{l}</title><polygon class="shade-area" points="{p}" fill="{c}" fill-opacity="0.2" stroke="none"/></g>"#,
        k = escape(&s.key),
        p = polyline_points(&pts),
        c = color(s.color)
    );
}

/// A dashed curve, split into runs of points that fall inside the plot area.
fn curve(out: &mut String, c: &Curve, x: &Scale, y: &Scale) {
    let mut runs: Vec<Vec<(f64, f64)>> = vec![Vec::new()];
    for (vx, vy) in &c.points {
        let placed = if x.contains(*vx) && y.contains(*vy) {
            x.map(*vx).zip(y.map(*vy))
        } else {
            None
        };
        match (placed, runs.last_mut()) {
            (Some(p), Some(run)) => run.push(p),
            (None, Some(run)) if !run.is_empty() => runs.push(Vec::new()),
            _ => {}
        }
    }
    let key = escape(&c.key);
    let _ = write!(
        out,
        r#"<g class="curve" data-series="{key}" data-label="{l}"><title>{l}</title>"#,
        l = escape(&c.label)
    );
    for r in runs.iter().filter(|r| r.len() > 1) {
        let _ = write!(
            out,
            r#"<polyline class="curve-line" points="{}" fill="none" stroke="{}" stroke-width="1.5" stroke-dasharray="6 4"/>"#,
            polyline_points(r),
            color(c.color)
        );
    }
    out.push_str("</g>");
}

fn series(out: &mut String, s: &Series, x: &Scale, y: &Scale) {
    let key = escape(&s.key);
    let col = color(s.color);
    let _ = write!(
        out,
        r#"<g class="series" data-series="{key}" data-label="{}">"#,
        escape(&s.label)
    );
    let placed: Vec<(f64, f64, &super::Point)> = s
        .points
        .iter()
        .filter_map(|p| Some((x.map(p.x)?, y.map(p.y)?, p)))
        .collect();
    for (px, _, p) in &placed {
        let Some((lo, hi)) = p.spread else { continue };
        let (Some(py_lo), Some(py_hi)) = (y.map(lo), y.map(hi)) else {
            continue;
        };
        let _ = write!(
            out,
            r#"<g class="errorbar" data-series="{key}" data-x="{}" data-lo="{}" data-hi="{}" stroke="{col}"><line x1="{px:.1}" y1="{py_lo:.1}" x2="{px:.1}" y2="{py_hi:.1}"/><line x1="{a:.1}" y1="{py_lo:.1}" x2="{b:.1}" y2="{py_lo:.1}"/><line x1="{a:.1}" y1="{py_hi:.1}" x2="{b:.1}" y2="{py_hi:.1}"/></g>"#,
            raw(p.x),
            raw(lo),
            raw(hi),
            a = px - 4.0,
            b = px + 4.0
        );
    }
    if placed.len() > 1 {
        let pts: Vec<(f64, f64)> = placed.iter().map(|(a, b, _)| (*a, *b)).collect();
        let _ = write!(
            out,
            r#"<polyline class="series-line" points="{}" fill="none" stroke="{col}" stroke-width="2"/>"#,
            polyline_points(&pts)
        );
    }
    for (px, py, p) in &placed {
        let _ = write!(
            out,
            r##"<circle class="point" data-series="{key}" data-x="{}" data-y="{}" cx="{px:.1}" cy="{py:.1}" r="4" fill="{col}" stroke="#ffffff"><title>{}</title></circle>"##,
            raw(p.x),
            raw(p.y),
            escape(&p.tip)
        );
    }
    out.push_str("</g>");
}

fn legend(out: &mut String, chart: &Chart) {
    out.push_str(r#"<g class="legend">"#);
    let entries: Vec<_> = chart
        .series
        .iter()
        .map(|s| (&s.key, &s.label, s.color, false))
        .chain(
            chart
                .curves
                .iter()
                .map(|c| (&c.key, &c.label, c.color, true)),
        )
        .map(|(key, full, c, dashed)| (key, shorten(full, LEGEND_CHARS), c, dashed))
        .collect();
    // Rough text width: enough for the legend not to overlap at 12 px.
    let width = |label: &str| 34.0 + 6.5 * label.chars().count() as f64;
    // One row above the plot when it fits; else two rows, so no entry runs off the right edge.
    let total: f64 = entries.iter().map(|e| width(&e.1)).sum();
    let (mut ty, row_gap) = if LEFT + total - 12.0 <= WIDTH - RIGHT {
        (40.0, 0.0)
    } else {
        (33.0, 14.0)
    };
    let mut px = LEFT;
    for (key, label, c, dashed) in entries {
        if px > LEFT && row_gap > 0.0 && px + width(&label) - 12.0 > WIDTH - RIGHT {
            px = LEFT;
            ty += row_gap;
        }
        let dash = if dashed {
            r#" stroke-dasharray="6 4""#
        } else {
            ""
        };
        let _ = write!(
            out,
            r#"<g class="legend-entry" data-series="{}"><line x1="{px:.1}" y1="{ly}" x2="{x2:.1}" y2="{ly}" stroke="{}" stroke-width="2"{dash}/><text x="{tx:.1}" y="{ty}">{}</text></g>"#,
            escape(key),
            color(c),
            escape(&label),
            x2 = px + 18.0,
            tx = px + 22.0,
            ly = ty - 4.0,
        );
        px += width(&label);
    }
    out.push_str("</g>");
}

/// Longest legend entry, in characters, before it is cut (keeping its end).
const LEGEND_CHARS: usize = 36;

fn shorten(text: &str, max: usize) -> String {
    let n = text.chars().count();
    if n <= max {
        text.to_string()
    } else {
        let tail: String = text.chars().skip(n + 1 - max).collect();
        format!("…{tail}")
    }
}

fn polyline_points(pts: &[(f64, f64)]) -> String {
    pts.iter()
        .map(|(x, y)| format!("{x:.1},{y:.1}"))
        .collect::<Vec<_>>()
        .join(" ")
}
