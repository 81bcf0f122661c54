//! `report` and `compare` on sessions files: the same summary the run printed, and two
//! runs side by side per cell and per turn index. Pure apart from the entry points.

use super::file::SessionsRecords;
use super::record::SessionsCellRecord;
use super::render::{self, View};
use crate::choices::Format;
use crate::report::args::{CompareArgs, ReportArgs};
use crate::report::numbers::num;
use crate::resultfile::ResultFile;
use serde_json::json;

/// `ctxbench report FILE` on a sessions file.
pub fn report_file(args: &ReportArgs, file: ResultFile) -> anyhow::Result<u8> {
    let f = &file.sessions;
    let cells = f.latest_cells();
    let view = View {
        plan: f.plan.as_ref(),
        cells: &cells,
        capacity: f.capacity.as_ref(),
    };
    let mut out = render::render(&view, args.format);
    if args.format == Format::Table {
        out.push_str(&cut_short_note(f));
    }
    crate::stdout::print_stdout(out.as_bytes())?;
    if let (Some(h), Some(run)) = (&args.html, &file.run) {
        crate::report::write_atomic(h, &super::html::page(run, f))?;
    }
    Ok(crate::exit::OK)
}

/// Cells whose last attempt has turns but no cell record: cut short, rerun by `--resume`.
fn cut_short_note(f: &SessionsRecords) -> String {
    let mut out = String::new();
    let mut seen = std::collections::BTreeSet::new();
    for t in &f.turns {
        seen.insert(t.sessions);
    }
    for n in seen {
        if f.finished(n).is_none() {
            let k = f.turns.iter().filter(|t| t.sessions == n).count();
            out.push_str(&format!(
                "note: cell {n} was cut short after {k} turns; --resume runs it again\n"
            ));
        }
    }
    out
}

/// One compared figure: A, B and B ÷ A.
fn trio(a: Option<f64>, b: Option<f64>, scale: f64, digits: usize) -> [String; 3] {
    let ratio = match (a, b) {
        (Some(a), Some(b)) if a > 0.0 => Some(b / a),
        _ => None,
    };
    [
        num(a.map(|v| v * scale), digits),
        num(b.map(|v| v * scale), digits),
        ratio.map_or("-".into(), |r| format!("{r:.2}x")),
    ]
}

/// Rows per cell present in both: warm TTFT p50/p95 and the hit ratio, A then B.
pub fn cell_rows(a: &[SessionsCellRecord], b: &[SessionsCellRecord]) -> Vec<Vec<String>> {
    let mut rows = Vec::new();
    for ca in a {
        let Some(cb) = b.iter().find(|c| c.sessions == ca.sessions) else {
            continue;
        };
        let mut r = vec![ca.sessions.to_string()];
        r.extend(trio(
            ca.ttft_s_warm.map(|q| q.p50),
            cb.ttft_s_warm.map(|q| q.p50),
            1e3,
            1,
        ));
        r.extend(trio(
            ca.ttft_s_warm.map(|q| q.p95),
            cb.ttft_s_warm.map(|q| q.p95),
            1e3,
            1,
        ));
        r.extend(trio(ca.hits.pooled.ratio, cb.hits.pooled.ratio, 1.0, 2));
        rows.push(r);
    }
    rows
}

/// Rows per cell and turn index present in both: TTFT p50, A then B.
pub fn turn_rows(a: &[SessionsCellRecord], b: &[SessionsCellRecord]) -> Vec<Vec<String>> {
    let mut rows = Vec::new();
    for ca in a {
        let Some(cb) = b.iter().find(|c| c.sessions == ca.sessions) else {
            continue;
        };
        for ta in &ca.ttft_s_by_turn {
            let Some(tb) = cb.ttft_s_by_turn.iter().find(|t| t.turn == ta.turn) else {
                continue;
            };
            let mut r = vec![ca.sessions.to_string(), ta.turn.to_string()];
            r.extend(trio(Some(ta.ttft_s.p50), Some(tb.ttft_s.p50), 1e3, 1));
            rows.push(r);
        }
    }
    rows
}

pub const CELL_HEADER: [&str; 10] = [
    "sessions",
    "A warm p50 ms",
    "B warm p50 ms",
    "B/A",
    "A warm p95 ms",
    "B warm p95 ms",
    "B/A",
    "A hits",
    "B hits",
    "B/A",
];
pub const TURN_HEADER: [&str; 5] = ["sessions", "turn", "A TTFT p50 ms", "B TTFT p50 ms", "B/A"];

/// The comparison of two sessions files, in `format`.
pub fn compare(
    a: &SessionsRecords,
    b: &SessionsRecords,
    names: (&str, &str),
    format: Format,
) -> String {
    let (ca, cb) = (a.latest_cells(), b.latest_cells());
    let cells = cell_rows(&ca, &cb);
    let turns = turn_rows(&ca, &cb);
    let strings = |h: &[&str]| h.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    match format {
        Format::Json => {
            let doc = json!({"a": names.0, "b": names.1, "cells": cells, "turns": turns,
                "cell_columns": CELL_HEADER, "turn_columns": TURN_HEADER});
            serde_json::to_string_pretty(&doc).unwrap_or_default() + "\n"
        }
        Format::Csv => {
            let mut out = CELL_HEADER.join(",") + "\n";
            for r in &cells {
                out.push_str(&(r.join(",") + "\n"));
            }
            out.push('\n');
            out.push_str(&(TURN_HEADER.join(",") + "\n"));
            for r in &turns {
                out.push_str(&(r.join(",") + "\n"));
            }
            out
        }
        Format::Table | Format::Markdown => {
            let aligned = crate::report::accuracy::aligned;
            let mut out = format!("A = {}, B = {}\n", names.0, names.1);
            out.push_str(&aligned(&strings(&CELL_HEADER), &cells));
            out.push_str("\nTTFT p50 by turn\n");
            out.push_str(&aligned(&strings(&TURN_HEADER), &turns));
            if cells.is_empty() {
                out.push_str("note: the two files share no cell (--sessions value)\n");
            }
            out
        }
    }
}

/// `ctxbench compare A B` on sessions files.
pub fn compare_files(
    args: &CompareArgs,
    a: (String, ResultFile),
    b: (String, ResultFile),
) -> anyhow::Result<u8> {
    for (name, f) in [(&a.0, &a.1), (&b.0, &b.1)] {
        if f.sessions.cells.is_empty() {
            anyhow::bail!("{name}: no finished sessions cell to compare (is it a sessions file?)");
        }
    }
    let out = compare(&a.1.sessions, &b.1.sessions, (&a.0, &b.0), args.format);
    crate::stdout::print_stdout(out.as_bytes())?;
    if args.html.is_some() {
        eprintln!("note: --html is not drawn for compared sessions files; the table is printed");
    }
    Ok(crate::exit::OK)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sessions::record::{Quantiles, TurnTtft};

    fn cell(n: u32, p50: f64) -> SessionsCellRecord {
        let q = Quantiles {
            n: 1,
            p50,
            p95: p50,
            p99: p50,
        };
        SessionsCellRecord {
            sessions: n,
            ttft_s_warm: Some(q),
            ttft_s_by_turn: vec![TurnTtft { turn: 2, ttft_s: q }],
            ..Default::default()
        }
    }

    #[test]
    fn compares_per_cell_and_turn_in_both_files() {
        let a = [cell(1, 0.1), cell(4, 0.2)];
        let b = [cell(4, 0.4), cell(16, 1.0)];
        let c = cell_rows(&a, &b);
        assert_eq!(c.len(), 1);
        assert_eq!(&c[0][..4], &["4", "200.0", "400.0", "2.00x"]);
        let t = turn_rows(&a, &b);
        assert_eq!(t, vec![vec!["4", "2", "200.0", "400.0", "2.00x"]]);
    }
}
