//! `compare` for load files: the cells both files hold, side by side with the ratio B/A.

use super::render;
use crate::choices::Format;
use crate::lengths::format_count;
use crate::load::LoadResult;
use crate::record::load::CellRecord;
use crate::report::escape::escape;
use crate::report::html::page::{plain_document, plain_table};
use crate::report::plot::{Point, Series, Unit};

/// A compared quantity of a cell.
type Pick = fn(&CellRecord) -> Option<f64>;

/// (name, value of a cell) for each compared quantity; lower is better for latencies.
const METRICS: &[(&str, Pick)] = &[
    ("ttft_p50_ms", |c| c.ttft_s.map(|p| p.p50 * 1e3)),
    ("ttft_p99_ms", |c| c.ttft_s.map(|p| p.p99 * 1e3)),
    ("tpot_p50_ms", |c| c.tpot_s.map(|p| p.p50 * 1e3)),
    ("e2e_p99_s", |c| c.e2e_s.map(|p| p.p99)),
    ("output_tps", |c| c.output_tps),
    ("goodput_rps", |c| c.goodput_rps),
];

/// Compared where either file has them (`--price-per-hour`, `--telemetry-url`).
const COST_METRICS: &[(&str, Pick)] = &[
    ("usd_per_mtok_output", |c| c.usd_per_mtok_output),
    ("usd_per_mtok_input", |c| c.usd_per_mtok_input),
    ("usd_per_mtok_goodput", |c| c.usd_per_mtok_goodput),
    ("energy_j_per_output_token", |c| c.energy_j_per_output_token),
    ("gpu_power_w", |c| c.gpu_power_w),
];

/// One row per common cell and metric: (context, load, metric, A, B, B/A).
pub fn rows(a: &LoadResult, b: &LoadResult) -> Vec<[String; 6]> {
    let mut out = Vec::new();
    for ca in &a.cells {
        let Some(cb) = b.cells.iter().find(|c| c.cell.same(&ca.cell)) else {
            continue;
        };
        let optional = COST_METRICS
            .iter()
            .filter(|(_, f)| f(ca).is_some() || f(cb).is_some());
        for (name, f) in METRICS.iter().chain(optional) {
            let (va, vb) = (f(ca), f(cb));
            let v = |x: Option<f64>| x.map(|x| format!("{x:.3}")).unwrap_or_else(|| "-".into());
            let ratio = match (va, vb) {
                (Some(x), Some(y)) if x > 0.0 => format!("{:.3}", y / x),
                _ => "-".into(),
            };
            out.push([
                format_count(ca.cell.context_tokens),
                ca.cell.load_label(),
                (*name).to_string(),
                v(va),
                v(vb),
                ratio,
            ]);
        }
    }
    out
}

/// The rows, or an error naming both files when they share no cell.
fn common_rows(
    a: &LoadResult,
    b: &LoadResult,
    labels: (&str, &str),
) -> anyhow::Result<Vec<[String; 6]>> {
    let rows = rows(a, b);
    if rows.is_empty() {
        anyhow::bail!(
            "no common cells: {} and {} share no (length, concurrency or rate); run both with the same plan",
            labels.0,
            labels.1
        );
    }
    Ok(rows)
}

pub fn render(
    a: &LoadResult,
    b: &LoadResult,
    labels: (&str, &str),
    format: Format,
) -> anyhow::Result<String> {
    let rows = common_rows(a, b, labels)?;
    let head = ["context", "load", "metric", labels.0, labels.1, "B/A"];
    Ok(match format {
        Format::Json => {
            let v: Vec<serde_json::Value> = rows
                .iter()
                .map(|r| {
                    serde_json::json!({"context": r[0], "load": r[1], "metric": r[2],
                        "a": r[3].parse::<f64>().ok(), "b": r[4].parse::<f64>().ok(),
                        "ratio": r[5].parse::<f64>().ok()})
                })
                .collect();
            format!("{}\n", serde_json::to_string_pretty(&v).unwrap_or_default())
        }
        Format::Csv => {
            let mut s = head.join(",") + "\n";
            for r in &rows {
                s.push_str(&(r.join(",") + "\n"));
            }
            s
        }
        Format::Markdown => {
            let mut s = format!("| {} |\n|{}\n", head.join(" | "), "---|".repeat(6));
            for r in &rows {
                s.push_str(&format!("| {} |\n", r.join(" | ")));
            }
            if let Some(t) = super::spec_compare::render_text(a, b, labels) {
                s.push_str(&format!("\n```{t}```\n"));
            }
            s
        }
        Format::Table => {
            let mut s = format!(
                "{:>8} {:>8} {:>25} {:>14} {:>14} {:>7}\n",
                head[0], head[1], head[2], "A", "B", head[5]
            );
            for r in &rows {
                s.push_str(&format!(
                    "{:>8} {:>8} {:>25} {:>14} {:>14} {:>7}\n",
                    r[0], r[1], r[2], r[3], r[4], r[5]
                ));
            }
            s.push_str(&format!("A = {}, B = {}\n", labels.0, labels.1));
            s.extend(super::spec_compare::render_text(a, b, labels));
            s
        }
    })
}

/// The comparison as an HTML page: the table, then per length TTFT p50 and output tok/s
/// against load, A and B on the same axes.
pub fn html(a: &LoadResult, b: &LoadResult, labels: (&str, &str)) -> anyhow::Result<String> {
    let rows = common_rows(a, b, labels)?;
    let head = ["context", "load", "metric", "A", "B", "B/A"];
    let mut body = format!(
        "<h1>ctxbench compare (load)</h1><p>A = {}, B = {}</p>",
        escape(labels.0),
        escape(labels.1)
    );
    body.push_str(&plain_table(&head, rows.iter().map(|r| r.to_vec())));
    if let Some(t) = super::spec_compare::render_text(a, b, labels) {
        body.push_str(&format!(
            "<h2>Speculative vs plain</h2><pre>{}</pre>",
            escape(&t)
        ));
    }
    let axis = if a.cells.iter().any(|c| c.cell.rate.is_some()) {
        "rate (req/s)"
    } else {
        "concurrency"
    };
    let mut ttft = render::chart(
        "ttft",
        "TTFT p50 against load",
        axis,
        "TTFT p50",
        Unit::Ratio,
        Unit::Seconds,
    );
    let mut tps = render::chart(
        "tps",
        "Output tok/s against load",
        axis,
        "output tok/s",
        Unit::Ratio,
        Unit::TokensPerSecond,
    );
    let mut lengths: Vec<u64> = a.cells.iter().map(|c| c.cell.context_tokens).collect();
    lengths.sort_unstable();
    lengths.dedup();
    for (i, &n) in lengths.iter().enumerate() {
        for (j, (file, label)) in [(a, labels.0), (b, labels.1)].into_iter().enumerate() {
            let color = 2 * i + j;
            let key = format!("{}-{n}", ["a", "b"][j]);
            let name = format!("{label} {}", format_count(n));
            ttft.series
                .push(series(file, n, &key, &name, color, |c| Some(c.ttft_s?.p50)));
            tps.series
                .push(series(file, n, &key, &name, color, |c| c.output_tps));
        }
    }
    body.push_str(&ttft.to_svg());
    body.push_str(&tps.to_svg());
    Ok(plain_document("ctxbench compare (load)", &body))
}

/// One file's cells of length `n` as points (load, `y`).
fn series(
    r: &LoadResult,
    n: u64,
    key: &str,
    label: &str,
    color: usize,
    y: impl Fn(&CellRecord) -> Option<f64>,
) -> Series {
    let mut points: Vec<Point> = r
        .cells
        .iter()
        .filter(|c| c.cell.context_tokens == n)
        .filter_map(|c| {
            Some(Point {
                x: render::load_x(c)?,
                y: y(c)?,
                spread: None,
                tip: format!("{label} {}", c.cell.load_label()),
            })
        })
        .collect();
    points.sort_by(|p, q| p.x.total_cmp(&q.x));
    Series {
        key: key.into(),
        label: label.into(),
        color,
        points,
    }
}
