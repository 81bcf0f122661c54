//! The HTML page of a sessions file: TTFT by turn index per cell, the hit ratio by turn,
//! open sessions and requests in flight over time, and the capacity table. Pure.

use super::file::SessionsRecords;
use super::render::{CELL_HEADER, cell_rows};
use crate::record::RunRecord;
use crate::report::escape::escape;
use crate::report::html::page::{Cell, document, table};
use crate::report::plot::{Chart, Point, Series, Unit};

fn point(x: f64, y: f64, tip: String) -> Point {
    Point {
        x,
        y,
        spread: None,
        tip,
    }
}

/// TTFT p50 (p95 as the bar's top) by turn index, one line per cell.
pub fn ttft_chart(f: &SessionsRecords) -> Chart {
    let mut c = Chart::linear(
        "sessions-ttft",
        "TTFT by turn",
        ("turn", "TTFT p50 (bar to p95)"),
        (Unit::Count, Unit::Seconds),
        "no turns yet",
    );
    for (i, cell) in f.latest_cells().iter().enumerate() {
        c.series.push(Series {
            key: format!("ttft-{}", cell.sessions),
            label: format!("{} sessions", cell.sessions),
            color: i,
            points: cell
                .ttft_s_by_turn
                .iter()
                .map(|t| Point {
                    spread: Some((t.ttft_s.p50, t.ttft_s.p95)),
                    ..point(
                        t.turn as f64,
                        t.ttft_s.p50,
                        format!(
                            "{} sessions, turn {}: p50 {:.1} ms, p95 {:.1} ms, n {}",
                            cell.sessions,
                            t.turn,
                            t.ttft_s.p50 * 1e3,
                            t.ttft_s.p95 * 1e3,
                            t.ttft_s.n
                        ),
                    )
                })
                .collect(),
        });
    }
    c
}

/// Observed ÷ possible cached tokens by turn index, one line per cell.
pub fn hits_chart(f: &SessionsRecords) -> Chart {
    let mut c = Chart::linear(
        "sessions-hits",
        "Hit ratio by turn",
        ("turn", "observed / possible cached tokens"),
        (Unit::Count, Unit::Percent),
        "no hits possible yet",
    );
    for (i, cell) in f.latest_cells().iter().enumerate() {
        c.series.push(Series {
            key: format!("hits-{}", cell.sessions),
            label: format!("{} sessions", cell.sessions),
            color: i,
            points: cell
                .hits
                .by_turn
                .iter()
                .filter_map(|t| {
                    let r = t.hits.ratio?;
                    Some(point(
                        t.turn as f64,
                        r,
                        format!(
                            "{} sessions, turn {}: {} of {} tokens",
                            cell.sessions, t.turn, t.hits.observed_tokens, t.hits.possible_tokens
                        ),
                    ))
                })
                .collect(),
        });
    }
    c
}

/// Open sessions and requests in flight over each cell's time.
pub fn timeline_chart(f: &SessionsRecords) -> Chart {
    let mut c = Chart::linear(
        "sessions-timeline",
        "Open sessions and requests in flight",
        ("seconds into the cell", "count"),
        (Unit::Seconds, Unit::Count),
        "no timeline yet",
    );
    for (i, cell) in f.latest_cells().iter().enumerate() {
        let pts = |inflight: bool| {
            cell.timeline
                .iter()
                .map(|p| {
                    let y = if inflight {
                        p.in_flight
                    } else {
                        p.open_sessions
                    };
                    point(p.t_s, y as f64, format!("{:.2} s: {y}", p.t_s))
                })
                .collect()
        };
        c.series.push(Series {
            key: format!("open-{}", cell.sessions),
            label: format!("{} sessions: open", cell.sessions),
            color: 2 * i,
            points: pts(false),
        });
        c.series.push(Series {
            key: format!("inflight-{}", cell.sessions),
            label: format!("{} sessions: in flight", cell.sessions),
            color: 2 * i + 1,
            points: pts(true),
        });
    }
    c
}

pub fn page(run: &RunRecord, f: &SessionsRecords) -> String {
    let cells = f.latest_cells();
    let rows: Vec<(String, Vec<Cell>)> = cell_rows(&cells)
        .into_iter()
        .map(|r| (String::new(), r.into_iter().map(Cell::num).collect()))
        .collect();
    let mut body = format!(
        "<h1>ctxbench sessions</h1>\n<p class=\"sub\">{} ({}) · model {}</p>\n",
        escape(&run.target.url),
        escape(&run.target.api),
        escape(run.target.model.as_deref().unwrap_or("?"))
    );
    body.push_str("<h2>Cells</h2>\n");
    body.push_str(&table("sessions-cells", &CELL_HEADER, &rows, 1));
    if let Some(c) = &f.capacity {
        body.push_str("<h2>Capacity</h2>\n");
        let fmt = |v: Option<u32>| v.map_or("-".to_string(), |v| v.to_string());
        let cap = vec![(
            String::new(),
            vec![
                Cell::num(fmt(c.holds)),
                Cell::num(fmt(c.thrash)),
                Cell::num(c.pool_tokens.map_or("-".into(), |p| p.to_string())),
                Cell::num(
                    c.context_at_last_turn
                        .map_or("-".into(), |v| format!("{v:.0}")),
                ),
                Cell::num(c.predicted_fit.map_or("-".into(), |v| v.to_string())),
                Cell::text(c.line.clone()),
            ],
        )];
        body.push_str(&table(
            "sessions-capacity",
            &[
                "holds",
                "thrash",
                "pool tokens",
                "context at last turn",
                "pool ÷ context",
                "line",
            ],
            &cap,
            0,
        ));
    }
    body.push_str("<h2>Charts</h2>\n<div class=\"charts\">\n");
    for chart in [ttft_chart(f), hits_chart(f), timeline_chart(f)] {
        body.push_str(&chart.to_svg());
        body.push('\n');
    }
    body.push_str("</div>\n");
    document("ctxbench sessions", &body)
}
