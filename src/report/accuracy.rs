//! Accuracy in the reports: the column beside TTFT, the task × length table with 95 %
//! intervals, the length × depth grid, and the effective-context lines (table, markdown,
//! CSV).

use crate::accuracy::effective;
use crate::accuracy::tally::ALL;
use crate::accuracy::threshold::Threshold;
use crate::lengths::format_count;
use crate::record::{AccuracyCell, EffectiveContextRecord, RunRecord, Summary};

/// The column inserted after `TTFT ms` when any point was graded.
pub const COLUMN: &str = "accuracy (95% CI)";

pub fn any(summary: &Summary) -> bool {
    summary.points.iter().any(|p| !p.accuracy.is_empty())
}

/// `0.80 [0.49–0.94]`.
pub fn cell_text(a: &AccuracyCell) -> String {
    format!("{:.2} [{:.2}–{:.2}]", a.rate, a.ci95[0], a.ci95[1])
}

/// The point's overall accuracy cell, `-` when it was not graded.
pub fn column_cell(p: &crate::record::PointSummary) -> String {
    p.accuracy
        .get(ALL)
        .map(cell_text)
        .unwrap_or_else(|| "-".into())
}

/// The run's effective-context records, from its summary and its threshold.
pub fn effective_records(run: &RunRecord, summary: &Summary) -> Vec<EffectiveContextRecord> {
    let threshold = run
        .config
        .accuracy_threshold
        .as_deref()
        .and_then(|t| Threshold::parse(t).ok())
        .unwrap_or_default();
    effective::records(&summary.points, threshold, run.config.content.as_deref())
}

/// Task names of the summary's points, `all` last.
fn tasks(summary: &Summary) -> Vec<String> {
    let mut t: Vec<String> = summary
        .points
        .iter()
        .flat_map(|p| p.accuracy.keys().cloned())
        .filter(|k| k != ALL)
        .collect();
    t.sort();
    t.dedup();
    t.push(ALL.into());
    t
}

/// Rows: length, then per task `rate [lo–hi]`.
fn rows(summary: &Summary) -> (Vec<String>, Vec<Vec<String>>) {
    let tasks = tasks(summary);
    let mut header = vec!["context".to_string()];
    header.extend(tasks.iter().cloned());
    let rows = summary
        .points
        .iter()
        .filter(|p| !p.accuracy.is_empty())
        .map(|p| {
            let mut r = vec![format_count(p.context_tokens)];
            for t in &tasks {
                r.push(
                    p.accuracy
                        .get(t)
                        .map(cell_text)
                        .unwrap_or_else(|| "-".into()),
                );
            }
            r
        })
        .collect();
    (header, rows)
}

/// The fact depths any point was graded at, ascending, once each.
pub fn depths(summary: &Summary) -> Vec<f64> {
    let mut depths: Vec<f64> = summary
        .points
        .iter()
        .flat_map(|p| p.accuracy_by_depth.iter().map(|d| d.depth))
        .collect();
    depths.sort_by(f64::total_cmp);
    depths.dedup();
    depths
}

/// Accuracy by fact depth, length × depth, all tasks together.
fn depth_rows(summary: &Summary) -> (Vec<String>, Vec<Vec<String>>) {
    let depths = depths(summary);
    let mut header = vec!["context".to_string()];
    header.extend(depths.iter().map(|d| format!("d={d}")));
    let rows = summary
        .points
        .iter()
        .filter(|p| !p.accuracy_by_depth.is_empty())
        .map(|p| {
            let mut r = vec![format_count(p.context_tokens)];
            for d in &depths {
                r.push(
                    p.accuracy_by_depth
                        .iter()
                        .find(|a| a.depth == *d)
                        .map(|a| format!("{:.2}", a.accuracy.rate))
                        .unwrap_or_else(|| "-".into()),
                );
            }
            r
        })
        .collect();
    (header, rows)
}

pub(crate) fn aligned(header: &[String], rows: &[Vec<String>]) -> String {
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for r in rows {
        for (w, c) in widths.iter_mut().zip(r) {
            *w = (*w).max(c.chars().count());
        }
    }
    let line = |cells: &[String]| {
        let mut s = String::new();
        for (i, (c, w)) in cells.iter().zip(&widths).enumerate() {
            let pad = " ".repeat(w - c.chars().count());
            if i == 0 {
                s.push_str(&format!("{c}{pad}  "));
            } else {
                s.push_str(&format!("{pad}{c}  "));
            }
        }
        s.trim_end().to_string() + "\n"
    };
    let mut out = line(header);
    for r in rows {
        out.push_str(&line(r));
    }
    out
}

/// The accuracy sections of the terminal table.
pub fn text(run: &RunRecord, summary: &Summary) -> String {
    if !any(summary) {
        return String::new();
    }
    let (h, r) = rows(summary);
    let mut out = format!(
        "\naccuracy by task (RULER scoring; 95% Wilson interval) · haystack: {} · prompts: {}\n",
        run.config.content.as_deref().unwrap_or("filler"),
        run.config.prompt_style.as_deref().unwrap_or("raw")
    );
    out.push_str(&aligned(&h, &r));
    let (h, r) = depth_rows(summary);
    if h.len() > 2 {
        out.push_str("\naccuracy by depth (all tasks)\n");
        out.push_str(&aligned(&h, &r));
    }
    for e in effective_records(run, summary) {
        out.push_str(&effective::describe(&e));
        out.push('\n');
    }
    out
}

/// The accuracy sections as markdown.
pub fn markdown(run: &RunRecord, summary: &Summary) -> String {
    if !any(summary) {
        return String::new();
    }
    let table = |h: &[String], r: &[Vec<String>]| {
        let mut out = format!("| {} |\n|{}\n", h.join(" | "), "---|".repeat(h.len()));
        for row in r {
            out.push_str(&format!("| {} |\n", row.join(" | ")));
        }
        out
    };
    let (h, r) = rows(summary);
    let mut out = format!(
        "\n**Accuracy by task** (RULER scoring, 95% Wilson interval; haystack: {})\n\n",
        run.config.content.as_deref().unwrap_or("filler")
    );
    out.push_str(&table(&h, &r));
    let (h, r) = depth_rows(summary);
    if h.len() > 2 {
        out.push_str("\n**Accuracy by depth** (all tasks)\n\n");
        out.push_str(&table(&h, &r));
    }
    out.push('\n');
    for e in effective_records(run, summary) {
        out.push_str(&format!("- {}\n", effective::describe(&e)));
    }
    out
}

/// CSV rows `accuracy,TASK,context_tokens,correct,total,rate,ci95_lo,ci95_hi` after the
/// points (a second table, as the depth mode adds its own).
pub fn csv(summary: &Summary) -> String {
    if !any(summary) {
        return String::new();
    }
    let mut out = String::from("\ntable,task,context_tokens,correct,total,rate,ci95_lo,ci95_hi\n");
    for p in &summary.points {
        for (t, a) in &p.accuracy {
            out.push_str(&format!(
                "accuracy,{t},{},{},{},{},{},{}\n",
                p.context_tokens, a.correct, a.total, a.rate, a.ci95[0], a.ci95[1]
            ));
        }
    }
    out
}
