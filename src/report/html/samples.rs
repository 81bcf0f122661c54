//! Per-sample sections: the needle pass grid (length × depth), every flagged or invalid
//! sample, and every failed request with its message.

use super::page::{Cell, table};
use crate::lengths::format_count;
use crate::record::{ErrorRecord, Sample, Summary};
use crate::report::plot::format::seconds;

/// The needle grid, or nothing when no point ran the needle test.
pub fn needle_grid(summary: &Summary) -> String {
    let depths = crate::report::needle_depths(summary);
    if depths.is_empty() {
        return String::new();
    }
    let mut out = String::from(
        "<section id=\"needle\">\n<h2>Needle retrieval (passed / total)</h2>\n<table class=\"needle\">\n<thead><tr><th class=\"text\">context</th>",
    );
    for d in &depths {
        out.push_str(&format!("<th>depth {d}</th>"));
    }
    out.push_str("</tr></thead>\n<tbody>\n");
    for p in summary.points.iter().filter(|p| !p.needle.is_empty()) {
        out.push_str(&format!(
            "<tr><td class=\"text\">{}</td>",
            format_count(p.context_tokens)
        ));
        for d in &depths {
            match p.needle.iter().find(|c| c.depth == *d) {
                Some(c) => {
                    let class = if c.passed == c.total {
                        "pass"
                    } else if c.passed == 0 {
                        "fail"
                    } else {
                        "partial"
                    };
                    out.push_str(&format!(
                        "<td class=\"needle-cell {class}\" data-context=\"{}\" data-depth=\"{d}\" data-passed=\"{}\" data-total=\"{}\">{}/{}</td>",
                        p.context_tokens, c.passed, c.total, c.passed, c.total
                    ));
                }
                None => out.push_str("<td class=\"needle-cell none\">-</td>"),
            }
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</tbody>\n</table>\n</section>\n");
    out
}

fn opt<T: ToString>(v: Option<T>) -> String {
    v.map(|v| v.to_string()).unwrap_or_else(|| "-".into())
}

/// Every sample that carries a flag or is invalid, then every error.
pub fn flagged(samples: &[Sample], errors: &[ErrorRecord]) -> String {
    let flagged: Vec<&Sample> = samples
        .iter()
        .filter(|s| !s.valid || !s.flags.is_empty())
        .collect();
    let mut out = format!(
        "<section id=\"flagged\">\n<h2>Flagged samples ({})</h2>\n",
        flagged.len()
    );
    if flagged.is_empty() {
        out.push_str("<p class=\"muted\">No sample was flagged.</p>\n");
    } else {
        let rows: Vec<(String, Vec<Cell>)> = flagged
            .iter()
            .map(|s| {
                let needle = s
                    .needle
                    .as_ref()
                    .map(|n| format!("expected {:?}, got {:?}", n.expected, n.answer))
                    .unwrap_or_else(|| "-".into());
                (
                    if s.valid {
                        "flagged"
                    } else {
                        "flagged invalid"
                    }
                    .to_string(),
                    vec![
                        Cell::text(format_count(s.context_tokens)),
                        Cell::num((s.rep + 1).to_string()),
                        Cell::text(s.method.clone()),
                        Cell::text(if s.valid { "yes" } else { "no" }),
                        Cell::text(
                            s.flags
                                .iter()
                                .map(|f| f.name())
                                .collect::<Vec<_>>()
                                .join(", "),
                        )
                        .with_class("flags"),
                        Cell::num(s.ttft_s.map(seconds).unwrap_or_else(|| "-".into())),
                        Cell::num(opt(s.prompt_tokens)),
                        Cell::num(opt(s.cached_tokens)),
                        Cell::num(opt(s.output_tokens)),
                        Cell::text(needle),
                    ],
                )
            })
            .collect();
        out.push_str(&table(
            "flagged-samples",
            &[
                "context", "rep", "method", "valid", "flags", "TTFT", "prompt", "cached", "output",
                "needle",
            ],
            &rows,
            1,
        ));
    }
    out.push_str(&format!("<h2>Errors ({})</h2>\n", errors.len()));
    if errors.is_empty() {
        out.push_str("<p class=\"muted\">No request failed.</p>\n");
    } else {
        let rows: Vec<(String, Vec<Cell>)> = errors
            .iter()
            .map(|e| {
                (
                    "error".to_string(),
                    vec![
                        Cell::text(format_count(e.context_tokens)),
                        Cell::num((e.rep + 1).to_string()),
                        Cell::text(e.method.clone().unwrap_or_else(|| "-".into())),
                        Cell::text(e.kind.clone()),
                        Cell::text(e.message.clone()).with_class("message"),
                    ],
                )
            })
            .collect();
        out.push_str(&table(
            "errors",
            &["context", "rep", "method", "kind", "message"],
            &rows,
            1,
        ));
    }
    out.push_str("</section>\n");
    out
}
