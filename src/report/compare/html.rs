//! The comparison as one self-contained HTML page: both runs on the same axes, then the
//! per-length ratios with their intervals, changes inside the noise marked.

use super::render::{HEADER, side_line};
use super::row::cells;
use super::{Comparison, METRICS, Verdict};
use crate::report::escape::escape;
use crate::report::html::page::{Cell, document, notes, table};
use crate::report::plot::figures::{Metric, overlay_chart};

pub fn render(c: &Comparison) -> String {
    let mut body = format!(
        "<header>\n<h1>ctxbench compare</h1>\n<p class=\"sub side-a\">{}</p>\n<p class=\"sub side-b\">{}</p>\n</header>\n",
        escape(&side_line("A", &c.a)),
        escape(&side_line("B", &c.b))
    );
    body.push_str(&notes(&c.notes));
    body.push_str("<section id=\"charts\">\n<h2>Both runs</h2>\n<p class=\"sub\">Medians over valid repetitions; bars span p10–p90.</p>\n<div class=\"charts\">\n");
    let (name_a, name_b) = (short_name(&c.a.label), short_name(&c.b.label));
    let (a, b) = (
        (name_a.as_str(), c.a.summary.points.as_slice()),
        (name_b.as_str(), c.b.summary.points.as_slice()),
    );
    for m in METRICS.iter().copied().chain([Metric::ItlP50]) {
        body.push_str(&overlay_chart(m, a, b).to_svg());
        body.push('\n');
    }
    body.push_str("</div>\n</section>\n");
    let rows: Vec<(String, Vec<Cell>)> = c
        .points
        .iter()
        .flat_map(|p| {
            p.changes.iter().map(|ch| {
                let class = match ch.verdict {
                    Verdict::WithinNoise => "within-noise",
                    Verdict::Better => "better",
                    Verdict::Worse => "worse",
                    Verdict::NoSpread | Verdict::Missing => "muted",
                };
                let cells: Vec<Cell> = cells(p.context_tokens, ch)
                    .into_iter()
                    .enumerate()
                    .map(|(i, t)| match i {
                        0 | 1 => Cell::text(t),
                        6 => Cell::text(t).with_class(class),
                        _ => Cell::num(t),
                    })
                    .collect();
                ("change".to_string(), cells)
            })
        })
        .collect();
    body.push_str(&format!(
        "<section id=\"changes\">\n<h2>Changes per length</h2>\n<p class=\"sub\">B/A is the ratio of medians; the interval is a 95 % bootstrap over the repetitions of both runs; ~ marks a change inside the noise.</p>\n{}</section>\n",
        table("compare", &HEADER, &rows, 2)
    ));
    if !c.spec.is_empty() {
        body.push_str(&format!(
            "<section id=\"spec\">\n<h2>Acceptance (speculative decoding)</h2>\n<pre>{}</pre>\n</section>\n",
            escape(super::spec::text(&c.spec, "").trim())
        ));
    }
    document(
        &format!("ctxbench compare: {} vs {}", c.a.label, c.b.label),
        &body,
    )
}

/// A file's name without its directories, for legends.
fn short_name(label: &str) -> String {
    std::path::Path::new(label)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| label.to_string())
}
