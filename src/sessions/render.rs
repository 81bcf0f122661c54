//! The printed summary of a sessions run (table, JSON, CSV, Markdown): pure functions of
//! its records, so `ctxbench sessions` and `ctxbench report` print the same.

use super::record::{SessionCapacityRecord, SessionsCellRecord, SessionsPlanRecord};
use crate::choices::Format;
use crate::report::numbers::num;
use serde_json::json;

/// What a summary is made of.
pub struct View<'a> {
    pub plan: Option<&'a SessionsPlanRecord>,
    pub cells: &'a [SessionsCellRecord],
    pub capacity: Option<&'a SessionCapacityRecord>,
}

fn ms(v: Option<f64>) -> String {
    num(v.map(|v| v * 1e3), 1)
}

pub const CELL_HEADER: [&str; 12] = [
    "sessions",
    "turns ok",
    "failed",
    "TTFT t1 p50 ms",
    "warm TTFT p50 ms",
    "warm p95 ms",
    "hits",
    "server hits",
    "ctx at last turn",
    "turns/s",
    "out tok/s",
    "SLO",
];

pub fn cell_rows(cells: &[SessionsCellRecord]) -> Vec<Vec<String>> {
    cells
        .iter()
        .map(|c| {
            let t1 = c
                .ttft_s_by_turn
                .iter()
                .find(|t| t.turn == 1)
                .map(|t| t.ttft_s.p50);
            let server = c.server_hits.as_ref().map_or("-".to_string(), |s| {
                let r = (c.hits.pooled.possible_tokens > 0)
                    .then(|| s.delta_tokens / c.hits.pooled.possible_tokens as f64);
                format!("{}{}", num(r, 2), if s.agrees { "" } else { " (differs)" })
            });
            vec![
                c.sessions.to_string(),
                c.turns_ok.to_string(),
                c.turns_failed.to_string(),
                ms(t1),
                ms(c.ttft_s_warm.map(|q| q.p50)),
                ms(c.ttft_s_warm.map(|q| q.p95)),
                num(c.hits.pooled.ratio, 2),
                server,
                num(c.context_at_last_turn, 0),
                num(c.turns_per_s, 2),
                num(c.output_tps, 0),
                match c.slo_met {
                    Some(true) => "met".into(),
                    Some(false) => "missed".into(),
                    None => "-".into(),
                },
            ]
        })
        .collect()
}

/// Per cell, one figure per turn index.
fn by_turn(
    cells: &[SessionsCellRecord],
    figure: impl Fn(&SessionsCellRecord, u32) -> String,
) -> (Vec<String>, Vec<Vec<String>>) {
    let turns = cells
        .iter()
        .flat_map(|c| c.ttft_s_by_turn.iter().map(|t| t.turn))
        .max()
        .unwrap_or(0);
    let mut header = vec!["sessions".to_string()];
    header.extend((1..=turns).map(|k| format!("t{k}")));
    let rows = cells
        .iter()
        .map(|c| {
            let mut r = vec![c.sessions.to_string()];
            r.extend((1..=turns).map(|k| figure(c, k)));
            r
        })
        .collect();
    (header, rows)
}

fn ttft_p50(c: &SessionsCellRecord, k: u32) -> String {
    ms(c.ttft_s_by_turn
        .iter()
        .find(|t| t.turn == k)
        .map(|t| t.ttft_s.p50))
}

fn hit_ratio(c: &SessionsCellRecord, k: u32) -> String {
    num(
        c.hits
            .by_turn
            .iter()
            .find(|t| t.turn == k)
            .and_then(|t| t.hits.ratio),
        2,
    )
}

pub fn render(v: &View<'_>, format: Format) -> String {
    match format {
        Format::Table => table(v),
        Format::Markdown => markdown(v),
        Format::Csv => csv(v),
        Format::Json => {
            let doc = json!({"plan": v.plan, "cells": v.cells, "capacity": v.capacity});
            serde_json::to_string_pretty(&doc).unwrap_or_default() + "\n"
        }
    }
}

fn header() -> Vec<String> {
    CELL_HEADER.iter().map(|h| h.to_string()).collect()
}

fn table(v: &View<'_>) -> String {
    let mut out = String::new();
    if let Some(p) = v.plan {
        out.push_str(&format!(
            "Sessions: {} turns, {} system + {} first + {}..{} per turn tokens, {}..{} output, \
             think {}..{} s, SLO {}, hit floor {}\n",
            p.turns,
            p.system_tokens,
            p.first_tokens,
            p.turn_tokens[0],
            p.turn_tokens[1],
            p.output_tokens[0],
            p.output_tokens[1],
            p.think_s[0],
            p.think_s[1],
            p.slo,
            p.hit_floor
        ));
    }
    out + &grids(v, crate::report::accuracy::aligned, "\n", "capacity: ")
}

/// The cell table, TTFT and hit ratio by turn, and the capacity line, each grid drawn by
/// `grid` (aligned text or a pipe table); `gap` follows each title.
fn grids(
    v: &View<'_>,
    grid: fn(&[String], &[Vec<String>]) -> String,
    gap: &str,
    capacity: &str,
) -> String {
    let mut out = grid(&header(), &cell_rows(v.cells));
    for (title, figure) in [
        (
            "TTFT p50 ms by turn",
            ttft_p50 as fn(&SessionsCellRecord, u32) -> String,
        ),
        (
            "hit ratio (observed / possible cached tokens) by turn",
            hit_ratio,
        ),
    ] {
        let (h, rows) = by_turn(v.cells, figure);
        out.push_str(&format!("\n{title}{gap}"));
        out.push_str(&grid(&h, &rows));
    }
    if let Some(c) = v.capacity {
        out.push_str(&format!("\n{capacity}{}\n", c.line));
    }
    out
}

fn pipe(header: &[String], rows: &[Vec<String>]) -> String {
    let mut out = format!(
        "| {} |\n|{}\n",
        header.join(" | "),
        "---|".repeat(header.len())
    );
    for r in rows {
        out.push_str(&format!("| {} |\n", r.join(" | ")));
    }
    out
}

fn markdown(v: &View<'_>) -> String {
    grids(v, pipe, "\n\n", "**Capacity:** ")
}

/// One row per cell and turn index.
fn csv(v: &View<'_>) -> String {
    let mut out = String::from(
        "sessions,turn,n,ttft_p50_s,ttft_p95_s,ttft_p99_s,observed_cached_tokens,possible_cached_tokens,hit_ratio\n",
    );
    let opt = |x: Option<f64>| x.map(|x| x.to_string()).unwrap_or_default();
    for c in v.cells {
        for t in &c.ttft_s_by_turn {
            let h = c
                .hits
                .by_turn
                .iter()
                .find(|h| h.turn == t.turn)
                .map(|h| h.hits);
            out.push_str(&format!(
                "{},{},{},{},{},{},{},{},{}\n",
                c.sessions,
                t.turn,
                t.ttft_s.n,
                t.ttft_s.p50,
                t.ttft_s.p95,
                t.ttft_s.p99,
                h.map(|h| h.observed_tokens.to_string()).unwrap_or_default(),
                h.map(|h| h.possible_tokens.to_string()).unwrap_or_default(),
                opt(h.and_then(|h| h.ratio)),
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sessions::record::{HitCount, Quantiles, TurnHits, TurnTtft};

    fn cell() -> SessionsCellRecord {
        let q = Quantiles {
            n: 2,
            p50: 0.1,
            p95: 0.2,
            p99: 0.2,
        };
        let h = HitCount {
            observed_tokens: 90,
            possible_tokens: 100,
            ratio: Some(0.9),
        };
        let mut c = SessionsCellRecord {
            sessions: 4,
            ttft_s_by_turn: vec![
                TurnTtft { turn: 1, ttft_s: q },
                TurnTtft { turn: 2, ttft_s: q },
            ],
            ttft_s_warm: Some(q),
            ..Default::default()
        };
        c.hits.pooled = h;
        c.hits.by_turn = vec![TurnHits { turn: 2, hits: h }];
        c
    }

    #[test]
    fn every_format_shows_the_cell_and_its_turns() {
        let cells = [cell()];
        let v = View {
            plan: None,
            cells: &cells,
            capacity: None,
        };
        let t = render(&v, Format::Table);
        assert!(
            t.contains("warm TTFT p50 ms") && t.contains("100.0") && t.contains("t2"),
            "{t}"
        );
        let m = render(&v, Format::Markdown);
        assert!(m.starts_with("| sessions |"), "{m}");
        let c = render(&v, Format::Csv);
        assert_eq!(c.lines().count(), 3, "{c}");
        assert!(c.contains("4,2,2,0.1,0.2,0.2,90,100,0.9"), "{c}");
        let j: serde_json::Value = serde_json::from_str(&render(&v, Format::Json)).unwrap();
        assert_eq!(j["cells"][0]["sessions"], 4);
    }
}
