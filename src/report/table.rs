//! The terminal table: aligned columns, medians with min–max where there are repetitions.

use super::cells;
use crate::lengths::format_count;
use crate::record::{RunRecord, Summary};

pub const HEADER: [&str; 9] = [
    "context",
    "prompt",
    "TTFT ms",
    "prefill tok/s",
    "decode tok/s",
    "ITL p50 ms",
    "ITL p99 ms",
    "valid",
    "flags",
];

/// The column inserted after `decode tok/s` when any point has acceptance data.
pub const ACCEPT: &str = "accept";

/// The columns inserted before `valid` when any point has the server's own timings
/// (llama.cpp's `timings`, Ollama's durations, vLLM's `/metrics` deltas): client TTFT minus
/// the server's prefill time, client decode window minus the server's (medians).
pub const SERVER: [&str; 2] = ["TTFT−server ms", "decode−server ms"];

fn any_server(summary: &Summary) -> bool {
    summary
        .points
        .iter()
        .any(|p| p.ttft_minus_server_s.is_some() || p.decode_minus_server_s.is_some())
}

/// The header of this summary's table: `HEADER`, with `accept` and the server columns
/// when they apply.
pub fn header(summary: &Summary) -> Vec<&'static str> {
    let mut h = HEADER.to_vec();
    if super::spec::any(summary) {
        h.insert(5, ACCEPT);
    }
    if super::accuracy::any(summary) {
        h.insert(3, super::accuracy::COLUMN);
    }
    if any_server(summary) {
        let at = h.len() - 2;
        h.splice(at..at, SERVER);
    }
    h
}

pub fn rows(summary: &Summary) -> Vec<Vec<String>> {
    let accept = super::spec::any(summary);
    let graded = super::accuracy::any(summary);
    let server = any_server(summary);
    summary
        .points
        .iter()
        .map(|p| {
            let mut r = vec![
                format_count(p.context_tokens),
                cells::prompt(p),
                cells::ms_spread(p.ttft_s),
                cells::rate(p.prefill_tps),
                cells::rate(p.decode_tps.or(p.two_point_decode_tps)),
                cells::ms(p.itl_p50_s),
                cells::ms(p.itl_p99_s),
                format!("{}/{}", p.n_valid, p.attempts),
                cells::flags(p),
            ];
            if accept {
                r.insert(5, super::spec::cell(p));
            }
            if graded {
                r.insert(3, super::accuracy::column_cell(p));
            }
            if server {
                let at = r.len() - 2;
                r.splice(
                    at..at,
                    [
                        cells::ms_delta(p.ttft_minus_server_s),
                        cells::ms_delta(p.decode_minus_server_s),
                    ],
                );
            }
            r
        })
        .collect()
}

pub fn render(run: &RunRecord, summary: &Summary) -> String {
    let rows = rows(summary);
    let header = header(summary);
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for r in &rows {
        for (w, c) in widths.iter_mut().zip(r.iter()) {
            *w = (*w).max(c.chars().count());
        }
    }
    let line = |cells: Vec<&str>| {
        let mut s = String::new();
        for (i, (c, w)) in cells.iter().zip(&widths).enumerate() {
            let pad = w - c.chars().count();
            // Text columns left-aligned, numbers right-aligned.
            if i == 0 || i == cells.len() - 1 {
                s.push_str(c);
                s.push_str(&" ".repeat(pad));
            } else {
                s.push_str(&" ".repeat(pad));
                s.push_str(c);
            }
            s.push_str("  ");
        }
        s.trim_end().to_string() + "\n"
    };
    let mut out = format!(
        "{} ({}) · model {} · {} output tokens · {} reps · method {} · cache-bust {} · RTT {}\n",
        run.target.url,
        run.target.api,
        run.target.model.as_deref().unwrap_or("?"),
        run.config.output_tokens,
        run.config.reps,
        run.config.method,
        run.config.cache_bust,
        run.config
            .rtt_s
            .map(|r| format!("{:.2} ms", r * 1e3))
            .unwrap_or_else(|| "n/a".into()),
    );
    out.push_str(&super::spec::content_line(run, summary));
    out.push_str(&line(header));
    for r in &rows {
        out.push_str(&line(r.iter().map(String::as_str).collect()));
    }
    out.push_str(&super::spec::text(summary));
    out.push_str(&needle_table(summary));
    out.push_str(&super::accuracy::text(run, summary));
    out.push_str(&super::depth::text(summary));
    for n in &summary.notes {
        out.push_str(&format!("note: {n}\n"));
    }
    out
}

/// Needle pass counts, length × depth.
pub fn needle_table(summary: &Summary) -> String {
    let depths = super::needle_depths(summary);
    if depths.is_empty() {
        return String::new();
    }
    let mut out = String::from("\nneedle (passed/total)\ncontext");
    for d in &depths {
        out.push_str(&format!("  {:>7}", format!("d={d}")));
    }
    out.push('\n');
    for p in summary.points.iter().filter(|p| !p.needle.is_empty()) {
        out.push_str(&format!("{:<7}", format_count(p.context_tokens)));
        for d in &depths {
            let cell = p
                .needle
                .iter()
                .find(|c| c.depth == *d)
                .map(|c| format!("{}/{}", c.passed, c.total))
                .unwrap_or_else(|| "-".into());
            out.push_str(&format!("  {cell:>7}"));
        }
        out.push('\n');
    }
    out
}
