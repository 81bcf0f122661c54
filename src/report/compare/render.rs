//! A comparison as text: aligned table, Markdown, CSV or JSON — pure functions of it.

use super::row::{cells, key};
use super::{Comparison, Side};
use crate::choices::Format;
use serde_json::{Value, json};

pub const HEADER: [&str; 7] = [
    "context",
    "metric",
    "A",
    "B",
    "B/A",
    "95% interval",
    "verdict",
];

pub fn render(c: &Comparison, format: Format) -> String {
    let depth = super::depth::text(&c.depth, format) + &super::accuracy::text(c, format);
    match format {
        Format::Table => table(c) + &super::spec::text(&c.spec, "  ") + &depth,
        Format::Markdown => markdown(c) + &super::spec::text(&c.spec, "- ") + &depth,
        Format::Csv => csv(c) + &depth,
        Format::Json => {
            let mut s = serde_json::to_string_pretty(&to_json(c)).unwrap_or_default();
            s.push('\n');
            s
        }
    }
}

pub fn rows(c: &Comparison) -> Vec<[String; 7]> {
    c.points
        .iter()
        .flat_map(|p| p.changes.iter().map(|ch| cells(p.context_tokens, ch)))
        .collect()
}

/// `A: file — url (api, model `m`), 64 output tokens, 3 reps, method stream`.
pub fn side_line(tag: &str, s: &Side) -> String {
    format!(
        "{tag}: {} — {} ({}, model {}), {} output tokens, {} reps, method {}",
        s.label,
        s.run.target.url,
        s.run.target.api,
        s.run.target.model.as_deref().unwrap_or("?"),
        s.run.config.output_tokens,
        s.run.config.reps,
        s.run.config.method
    )
}

fn table(c: &Comparison) -> String {
    let rows = rows(c);
    let mut widths: Vec<usize> = HEADER.iter().map(|h| h.chars().count()).collect();
    for r in &rows {
        for (w, cell) in widths.iter_mut().zip(r) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |cells: Vec<&str>| {
        let mut s = String::new();
        for (i, (cell, w)) in cells.iter().zip(&widths).enumerate() {
            let pad = " ".repeat(w - cell.chars().count());
            // Names and the verdict left-aligned, numbers right-aligned.
            if i < 2 || i == cells.len() - 1 {
                s.push_str(cell);
                s.push_str(&pad);
            } else {
                s.push_str(&pad);
                s.push_str(cell);
            }
            s.push_str("  ");
        }
        s.trim_end().to_string() + "\n"
    };
    let mut out = format!("{}\n{}\n", side_line("A", &c.a), side_line("B", &c.b));
    out.push_str(&line(HEADER.to_vec()));
    for r in &rows {
        out.push_str(&line(r.iter().map(String::as_str).collect()));
    }
    out.push_str("~ = the 95% bootstrap interval of B/A contains 1 (the change is inside the repetition noise)\n");
    for n in &c.notes {
        out.push_str(&format!("note: {n}\n"));
    }
    out
}

fn markdown(c: &Comparison) -> String {
    let mut out = format!(
        "- {}\n- {}\n\n",
        side_line("**A**", &c.a),
        side_line("**B**", &c.b)
    );
    out.push_str(&format!("| {} |\n", HEADER.join(" | ")));
    out.push_str(&format!("|{}\n", "---|".repeat(HEADER.len())));
    for r in rows(c) {
        out.push_str(&format!("| {} |\n", r.join(" | ")));
    }
    out.push_str(
        "\n~ = the 95% bootstrap interval of B/A contains 1 (inside the repetition noise)\n",
    );
    for n in &c.notes {
        out.push_str(&format!("\n> note: {n}\n"));
    }
    out
}

fn csv(c: &Comparison) -> String {
    let mut out = String::from(
        "context_tokens,metric,a_median,b_median,a_n,b_n,ratio,ratio_lo,ratio_hi,verdict\n",
    );
    // Nine significant digits: enough for any measurement, without binary noise.
    let num = |v: Option<f64>| {
        v.and_then(|v| format!("{v:.8e}").parse::<f64>().ok())
            .map(|v| v.to_string())
            .unwrap_or_default()
    };
    for p in &c.points {
        for ch in &p.changes {
            out.push_str(&format!(
                "{},{},{},{},{},{},{},{},{},{}\n",
                p.context_tokens,
                key(ch.metric),
                num(ch.a.map(|s| s.median)),
                num(ch.b.map(|s| s.median)),
                ch.a.map(|s| s.n).unwrap_or(0),
                ch.b.map(|s| s.n).unwrap_or(0),
                num(ch.ratio),
                num(ch.interval.map(|i| i.0)),
                num(ch.interval.map(|i| i.1)),
                ch.verdict.name()
            ));
        }
    }
    out
}

pub fn to_json(c: &Comparison) -> Value {
    let side = |s: &Side| json!({"file": s.label, "target": s.run.target, "config": s.run.config});
    let points: Vec<Value> = c
        .points
        .iter()
        .map(|p| {
            let metrics: serde_json::Map<String, Value> = p
                .changes
                .iter()
                .map(|ch| {
                    (
                        key(ch.metric).to_string(),
                        json!({
                            "a": ch.a,
                            "b": ch.b,
                            "ratio": ch.ratio,
                            "ci95": ch.interval.map(|(lo, hi)| [lo, hi]),
                            "verdict": ch.verdict.name(),
                        }),
                    )
                })
                .collect();
            json!({"context_tokens": p.context_tokens, "metrics": metrics})
        })
        .collect();
    json!({
        "a": side(&c.a),
        "b": side(&c.b),
        "points": points,
        "only_in_a": c.only_in_a,
        "only_in_b": c.only_in_b,
        "notes": c.notes,
        "depth": super::depth::json(&c.depth),
        "spec": super::spec::json(&c.spec),
        "accuracy": super::accuracy::json(c),
    })
}
