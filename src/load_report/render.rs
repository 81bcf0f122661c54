//! Load results on stdout (table, json, csv, markdown) and as HTML: pure functions of the
//! cell and knee records (the HTML also of the scrapes).

use crate::choices::Format;
use crate::lengths::format_count;
use crate::load::LoadResult;
use crate::record::load::{CellRecord, KneeRecord, LoadPlan};
use crate::report::escape::escape;
use crate::report::html::page::{plain_document as page, plain_table as html_table};
use crate::report::numbers::{ms, num, usd};
use crate::report::plot::{Chart, Point, Series, Unit};
use std::path::Path;

const COLUMNS: &[&str] = &[
    "context",
    "load",
    "sent",
    "ok",
    "failed",
    "ttft_p50_ms",
    "ttft_p99_ms",
    "ttft_sched_p99_ms",
    "tpot_p50_ms",
    "tpot_p99_ms",
    "itl_p99_ms",
    "e2e_p50_s",
    "late_p99_ms",
    "output_tps",
    "req_per_s",
    "goodput_rps",
    "goodput_pct",
    "pass",
];

/// Whether the cells carry speculative decoding's acceptance (then a column shows it).
fn with_spec(cells: &[CellRecord]) -> bool {
    cells.iter().any(|c| c.accept_length_median.is_some())
}

/// Whether the cells were graded (`--tasks`): an accuracy column beside TTFT.
fn with_accuracy(cells: &[CellRecord]) -> bool {
    cells.iter().any(|c| !c.accuracy.is_empty())
}

/// The accuracy column's place: right after the TTFT percentiles.
const ACCURACY_AT: usize = 7;

/// Columns shown only where some cell has the figures: accuracy (`--tasks`), speculative
/// decoding's acceptance, the price per token (`--price-per-hour`), GPU energy
/// (`--telemetry-url`).
#[derive(Clone, Copy)]
struct Extra {
    graded: bool,
    spec: bool,
    cost: bool,
    energy: bool,
}

impl Extra {
    fn of(cells: &[CellRecord]) -> Extra {
        Extra {
            graded: with_accuracy(cells),
            spec: with_spec(cells),
            cost: cells.iter().any(|c| c.usd_per_mtok_output.is_some()),
            energy: cells
                .iter()
                .any(|c| c.energy_j_per_output_token.is_some() || c.gpu_power_w.is_some()),
        }
    }
}

fn columns(x: Extra) -> Vec<&'static str> {
    let mut cols = COLUMNS.to_vec();
    if x.graded {
        cols.insert(ACCURACY_AT, "accuracy (95% CI)");
    }
    if x.spec {
        cols.push("accept_len");
        cols.push("steps/s");
    }
    if x.cost {
        cols.extend(["usd/Mtok_out", "usd/Mtok_in", "usd/Mtok_good"]);
    }
    if x.energy {
        cols.extend(["J/out_tok", "gpu_W", "gpu_util%"]);
    }
    cols
}

/// The median accept length, `~` before a proxy figure (as in the sweep's table).
fn accept(c: &CellRecord) -> String {
    match (c.accept_length_median, c.accept_source) {
        (Some(a), Some(crate::record::SpecSource::EventsProxy)) => format!("~{a:.2}"),
        (Some(a), _) => format!("{a:.2}"),
        _ => "-".into(),
    }
}

fn rows(cells: &[CellRecord]) -> impl Iterator<Item = Vec<String>> {
    let x = Extra::of(cells);
    cells.iter().map(move |c| {
        let mut r = row(c);
        if x.graded {
            let a = c.accuracy.get(crate::accuracy::tally::ALL);
            r.insert(
                ACCURACY_AT,
                a.map(crate::report::accuracy::cell_text)
                    .unwrap_or_else(|| "-".into()),
            );
        }
        if x.spec {
            r.push(accept(c));
            r.push(num(c.verify_steps_per_s, 1));
        }
        if x.cost {
            r.push(usd(c.usd_per_mtok_output));
            r.push(usd(c.usd_per_mtok_input));
            r.push(usd(c.usd_per_mtok_goodput));
        }
        if x.energy {
            r.push(num(c.energy_j_per_output_token, 3));
            r.push(num(c.gpu_power_w, 0));
            r.push(num(c.gpu_util_pct, 0));
        }
        r
    })
}

fn row(c: &CellRecord) -> Vec<String> {
    vec![
        format_count(c.cell.context_tokens),
        c.cell.load_label(),
        c.sent.to_string(),
        c.ok.to_string(),
        c.failed.to_string(),
        ms(c.ttft_s, |p| p.p50),
        ms(c.ttft_s, |p| p.p99),
        ms(c.ttft_from_schedule_s, |p| p.p99),
        ms(c.tpot_s, |p| p.p50),
        ms(c.tpot_s, |p| p.p99),
        ms(c.itl_s, |p| p.p99),
        num(c.e2e_s.map(|p| p.p50), 2),
        ms(c.send_lateness_s, |p| p.p99),
        num(c.output_tps, 0),
        num(c.requests_per_s, 2),
        num(c.goodput_rps, 2),
        num(c.goodput_fraction.map(|f| f * 100.0), 0),
        if c.meets_target { "yes" } else { "no" }.into(),
    ]
}

fn knee_row(k: &KneeRecord) -> Vec<String> {
    let v = |x: Option<f64>| x.map(|x| format!("{x}")).unwrap_or_else(|| "-".into());
    vec![
        format_count(k.context_tokens),
        v(k.knee),
        v(k.first_miss),
        v(k.planned),
        k.planned_from.clone().unwrap_or_else(|| "-".into()),
        v(k.queue_onset),
    ]
}

const KNEE_COLUMNS: &[&str] = &[
    "context",
    "knee",
    "first_miss",
    "planned",
    "planned_from",
    "queue_onset",
];

/// The summary in `format`.
pub fn render(
    plan: &LoadPlan,
    cells: &[CellRecord],
    knees: &[KneeRecord],
    format: Format,
) -> String {
    match format {
        Format::Json => {
            let doc = serde_json::json!({"plan": plan, "cells": cells, "knees": knees});
            format!(
                "{}\n",
                serde_json::to_string_pretty(&doc).unwrap_or_default()
            )
        }
        Format::Csv => {
            let mut s = columns(Extra::of(cells)).join(",") + "\n";
            for r in rows(cells) {
                s.push_str(&r.join(","));
                s.push('\n');
            }
            s
        }
        Format::Markdown => {
            let mut s = md(&columns(Extra::of(cells)), rows(cells));
            if !knees.is_empty() {
                s.push('\n');
                s.push_str(&md(KNEE_COLUMNS, knees.iter().map(knee_row)));
            }
            s.push_str(&notes(cells));
            s
        }
        Format::Table => {
            let mut s = table(&columns(Extra::of(cells)), rows(cells).collect());
            if !knees.is_empty() {
                s.push('\n');
                s.push_str(&table(KNEE_COLUMNS, knees.iter().map(knee_row).collect()));
            }
            s.push_str(&notes(cells));
            s
        }
    }
}

/// The summary of a whole result in `format`: a trace replay adds its hits (a section in
/// text, a `trace` member in JSON; CSV stays one table).
pub fn render_result(r: &LoadResult, format: Format) -> String {
    let Some(hits) = super::trace_report::hits(r) else {
        return render(&r.plan, &r.cells, &r.knees, format);
    };
    match format {
        Format::Json => {
            let doc = serde_json::json!({
                "plan": r.plan, "cells": r.cells, "knees": r.knees, "trace": hits
            });
            format!(
                "{}\n",
                serde_json::to_string_pretty(&doc).unwrap_or_default()
            )
        }
        Format::Csv => render(&r.plan, &r.cells, &r.knees, format),
        Format::Table | Format::Markdown => {
            render(&r.plan, &r.cells, &r.knees, format) + &super::trace_report::text(r)
        }
    }
}

fn notes(cells: &[CellRecord]) -> String {
    let mut s = String::new();
    for c in cells {
        for n in &c.notes {
            s.push_str(&format!(
                "note: {} {}: {n}\n",
                format_count(c.cell.context_tokens),
                c.cell.load_label()
            ));
        }
    }
    s
}

fn md(cols: &[&str], rows: impl Iterator<Item = Vec<String>>) -> String {
    let mut s = format!("| {} |\n|{}\n", cols.join(" | "), "---|".repeat(cols.len()));
    for r in rows {
        s.push_str(&format!("| {} |\n", r.join(" | ")));
    }
    s
}

fn table(cols: &[&str], rows: Vec<Vec<String>>) -> String {
    let mut width: Vec<usize> = cols.iter().map(|c| c.len()).collect();
    for r in &rows {
        for (i, v) in r.iter().enumerate() {
            width[i] = width[i].max(v.chars().count());
        }
    }
    let line = |vals: Vec<String>| {
        vals.iter()
            .enumerate()
            .map(|(i, v)| format!("{v:>w$}", w = width[i]))
            .collect::<Vec<_>>()
            .join("  ")
            + "\n"
    };
    let mut s = line(cols.iter().map(|c| c.to_string()).collect());
    for r in rows {
        s.push_str(&line(r));
    }
    s
}

pub(super) fn chart(id: &str, title: &str, x: &str, y: &str, x_unit: Unit, y_unit: Unit) -> Chart {
    Chart::linear(id, title, (x, y), (x_unit, y_unit), "no cells yet")
}

pub(super) fn load_x(c: &CellRecord) -> Option<f64> {
    c.cell.concurrency.map(f64::from).or(c.cell.rate)
}

/// The charts against load per length (latency, goodput) and the Pareto curve; a trace
/// replay, whose one cell has no load axis, gets the Pareto point alone.
fn load_charts(r: &LoadResult) -> Vec<Chart> {
    let mut lengths: Vec<u64> = r.cells.iter().map(|c| c.cell.context_tokens).collect();
    lengths.sort_unstable();
    lengths.dedup();
    let axis = if r.cells.iter().any(|c| c.cell.rate.is_some()) {
        "rate (req/s)"
    } else {
        "concurrency"
    };
    let series =
        |key: &str, n: u64, color: usize, f: &dyn Fn(&CellRecord) -> Option<(f64, f64)>| {
            let mut points: Vec<Point> = r
                .cells
                .iter()
                .filter(|c| c.cell.context_tokens == n)
                .filter_map(|c| {
                    f(c).map(|(x, y)| Point {
                        x,
                        y,
                        spread: None,
                        tip: format!("{} {}", format_count(n), c.cell.load_label()),
                    })
                })
                .collect();
            points.sort_by(|a, b| a.x.total_cmp(&b.x));
            Series {
                key: format!("{key}-{n}"),
                label: format!("{key} {}", format_count(n)),
                color,
                points,
            }
        };
    let mut ttft = chart(
        "ttft",
        "TTFT p50 and p99 against load",
        axis,
        "TTFT",
        Unit::Count,
        Unit::Seconds,
    );
    let mut tpot = chart(
        "tpot",
        "TPOT p50 against load",
        axis,
        "TPOT",
        Unit::Count,
        Unit::Seconds,
    );
    let mut pareto = chart(
        "pareto",
        "Throughput against latency",
        "TTFT p50",
        "output tok/s",
        Unit::Seconds,
        Unit::TokensPerSecond,
    );
    let mut good = chart(
        "goodput",
        "Goodput against load",
        axis,
        "goodput (req/s)",
        Unit::Count,
        Unit::Count,
    );
    for (i, &n) in lengths.iter().enumerate() {
        ttft.series.push(series("p50", n, 2 * i, &|c| {
            Some((load_x(c)?, c.ttft_s?.p50))
        }));
        ttft.series.push(series("p99", n, 2 * i + 1, &|c| {
            Some((load_x(c)?, c.ttft_s?.p99))
        }));
        tpot.series
            .push(series("tpot", n, i, &|c| Some((load_x(c)?, c.tpot_s?.p50))));
        pareto.series.push(series("tps", n, i, &|c| {
            Some((c.ttft_s?.p50, c.output_tps?))
        }));
        good.series.push(series("goodput", n, i, &|c| {
            Some((load_x(c)?, c.goodput_rps?))
        }));
    }
    if r.plan.trace.is_some() {
        // A replay's one cell has no load axis: only the Pareto point is its.
        return vec![pareto];
    }
    vec![ttft, tpot, pareto, good]
}

/// Per cell with scrapes: the server's running and waiting beside the client's in flight.
fn timeline_charts(r: &LoadResult) -> Vec<Chart> {
    let mut charts = Vec::new();
    for c in &r.cells {
        let scrapes: Vec<_> = r
            .server_metrics
            .iter()
            .filter(|m| m.cell.same(&c.cell))
            .collect();
        if scrapes.is_empty() {
            continue;
        }
        let mut t = chart(
            &format!("timeline-{}-{}", c.cell.context_tokens, c.cell.load_label()),
            &format!(
                "{} {}: server running / waiting vs client in flight",
                format_count(c.cell.context_tokens),
                c.cell.load_label()
            ),
            "time (s)",
            "requests",
            Unit::Seconds,
            Unit::Count,
        );
        let mk =
            |key: &str,
             color: usize,
             f: &dyn Fn(&crate::record::load::ServerMetricsRecord) -> Option<f64>| {
                Series {
                    key: key.into(),
                    label: key.into(),
                    color,
                    points: scrapes
                        .iter()
                        .filter_map(|m| {
                            f(m).map(|y| Point {
                                x: m.t_s,
                                y,
                                spread: None,
                                tip: format!("{key} {y}"),
                            })
                        })
                        .collect(),
                }
            };
        t.series.push(mk("client in flight", 0, &|m| {
            Some(m.client_in_flight as f64)
        }));
        t.series
            .push(mk("server running", 1, &|m| m.server.running));
        t.series
            .push(mk("server waiting", 2, &|m| m.server.waiting));
        t.series.push(mk("KV usage x100", 3, &|m| {
            m.server.kv_usage.map(|k| k * 100.0)
        }));
        charts.push(t);
    }
    charts
}

/// Per cell with GPU telemetry: each GPU's power (W) and utilisation (%) over time, beside
/// the server's timeline.
fn gpu_charts(r: &LoadResult) -> Vec<Chart> {
    let mut charts = Vec::new();
    for c in &r.cells {
        let scrapes: Vec<_> = r
            .gpu_metrics
            .iter()
            .filter(|m| m.cell.same(&c.cell))
            .collect();
        if scrapes.iter().all(|m| m.gpus.is_empty()) {
            continue;
        }
        let mut gpus: Vec<(&str, &str)> = scrapes
            .iter()
            .flat_map(|m| m.gpus.iter().map(|g| (m.source.as_str(), g.gpu.as_str())))
            .collect();
        gpus.sort_unstable();
        gpus.dedup();
        let sources = gpus
            .iter()
            .map(|g| g.0)
            .collect::<std::collections::BTreeSet<_>>();
        let label = |(src, gpu): (&str, &str)| {
            if sources.len() > 1 {
                format!("{src} GPU {gpu}")
            } else {
                format!("GPU {gpu}")
            }
        };
        let title = format!(
            "{} {}",
            format_count(c.cell.context_tokens),
            c.cell.load_label()
        );
        let id = format!("gpu-{}-{}", c.cell.context_tokens, c.cell.load_label());
        let mut power = chart(
            &format!("{id}-power"),
            &format!("{title}: GPU power (W)"),
            "time (s)",
            "W",
            Unit::Seconds,
            Unit::Count,
        );
        let mut util = chart(
            &format!("{id}-util"),
            &format!("{title}: GPU utilisation (%)"),
            "time (s)",
            "%",
            Unit::Seconds,
            Unit::Count,
        );
        for (i, &g) in gpus.iter().enumerate() {
            let series = |f: fn(&crate::record::load::GpuReading) -> Option<f64>| Series {
                key: format!("gpu{i}"),
                label: label(g),
                color: i,
                points: scrapes
                    .iter()
                    .filter(|m| m.source == g.0)
                    .filter_map(|m| {
                        let v = m.gpus.iter().find(|x| x.gpu == g.1).and_then(f)?;
                        Some(Point {
                            x: m.t_s,
                            y: v,
                            spread: None,
                            tip: format!("{} {v}", label(g)),
                        })
                    })
                    .collect(),
            };
            power.series.push(series(|x| x.power_w));
            util.series.push(series(|x| x.util_pct));
        }
        charts.push(power);
        charts.push(util);
    }
    charts
}

/// The HTML report: latency and goodput against load per length, the Pareto curve, the
/// knee table, a trace replay's section, and the server's timeline beside the client's
/// in-flight count; each only where the run's plan has it.
pub fn html(r: &LoadResult) -> String {
    let mut charts = load_charts(r);
    charts.extend(timeline_charts(r));
    charts.extend(gpu_charts(r));
    let mut body = String::new();
    body.push_str(&format!(
        "<h1>ctxbench load</h1><p>{} · model {} · plan {} · SLO {} · goodput target {}</p>",
        escape(&r.run.target.url),
        escape(r.run.target.model.as_deref().unwrap_or("-")),
        escape(&r.plan.mode),
        escape(&crate::load::slo::DisplaySlo(&r.plan.slo).to_string()),
        r.plan.goodput_target
    ));
    body.push_str(&html_table(&columns(Extra::of(&r.cells)), rows(&r.cells)));
    if !r.knees.is_empty() {
        body.push_str("<h2>Knee</h2>");
        body.push_str(&html_table(KNEE_COLUMNS, r.knees.iter().map(knee_row)));
    }
    let ns = notes(&r.cells);
    if !ns.is_empty() {
        body.push_str(&format!("<pre>{}</pre>", escape(&ns)));
    }
    body.push_str(&super::trace_report::html(r));
    for c in &charts {
        body.push_str(&c.to_svg());
    }
    page("ctxbench load", &body)
}

pub fn write_html(path: &Path, r: &LoadResult) -> anyhow::Result<()> {
    crate::report::write_atomic(path, &html(r))
}
