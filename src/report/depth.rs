//! The depth section of every report (`sweep --depth`): per depth, the warm turn beside the
//! cold request of the same total length — table, markdown, CSV and an HTML chart.

use crate::lengths::format_count;
use crate::record::{DepthPoint, Stat, Summary};
use crate::report::cells;
use crate::report::plot::{Chart, Point, ScaleKind, Series, Unit};

pub const HEADER: [&str; 11] = [
    "depth",
    "turn",
    "cached",
    "turn TTFT ms",
    "cold TTFT ms",
    "cold/turn",
    "marginal prefill tok/s",
    "decode tok/s",
    "cold decode tok/s",
    "valid",
    "flags",
];

pub fn rows(summary: &Summary) -> Vec<[String; 11]> {
    summary
        .depth
        .iter()
        .map(|p| {
            [
                format_count(p.depth_tokens),
                p.turn_tokens.to_string(),
                p.cached_tokens
                    .map(|c| c.to_string())
                    .unwrap_or_else(|| "-".into()),
                cells::ms_spread(p.ttft_s),
                cells::ms(p.cold_ttft_s),
                p.ttft_speedup
                    .map(|r| format!("{r:.1}x"))
                    .unwrap_or_else(|| "-".into()),
                cells::rate(p.prefill_tps),
                cells::rate(p.decode_tps),
                cells::rate(p.cold_decode_tps),
                format!("{}/{}", p.n_valid, p.attempts),
                flags(p),
            ]
        })
        .collect()
}

fn flags(p: &DepthPoint) -> String {
    let mut parts: Vec<String> = p.flags.iter().map(|(k, v)| format!("{k}×{v}")).collect();
    if p.n_failed > 0 {
        parts.push(format!("err×{}", p.n_failed));
    }
    if parts.is_empty() {
        "-".into()
    } else {
        parts.join(" ")
    }
}

/// The depth table as aligned text, or nothing when the run has no depths.
pub fn text(summary: &Summary) -> String {
    if summary.depth.is_empty() {
        return String::new();
    }
    let rows = rows(summary);
    let mut widths: Vec<usize> = HEADER.iter().map(|h| h.chars().count()).collect();
    for r in &rows {
        for (w, c) in widths.iter_mut().zip(r) {
            *w = (*w).max(c.chars().count());
        }
    }
    let line = |cells: &[&str]| -> String {
        let last = cells.len() - 1;
        let parts: Vec<String> = cells
            .iter()
            .zip(&widths)
            .enumerate()
            .map(|(i, (c, w))| {
                if i == last {
                    c.to_string()
                } else {
                    format!("{c:>w$}")
                }
            })
            .collect();
        parts.join("  ").trim_end().to_string() + "\n"
    };
    let mut out = String::from(
        "\nDepth: a new turn on a cached prefix, beside a cold request of depth + turn tokens\n",
    );
    out.push_str(&line(&HEADER));
    for r in &rows {
        out.push_str(&line(&r.iter().map(String::as_str).collect::<Vec<_>>()));
    }
    out
}

pub fn markdown(summary: &Summary) -> String {
    if summary.depth.is_empty() {
        return String::new();
    }
    let mut out = String::from(
        "\n**Depth**: a new turn on a cached prefix, beside a cold request of depth + turn tokens\n\n",
    );
    out.push_str(&format!("| {} |\n", HEADER.join(" | ")));
    out.push_str(&format!("|{}\n", "---|".repeat(HEADER.len())));
    for r in rows(summary) {
        out.push_str(&format!("| {} |\n", r.join(" | ")));
    }
    out
}

const CSV_COLUMNS: &str = "depth_tokens,turn_tokens,attempts,n_valid,n_failed,cached_tokens_median,ttft_s_median,cold_ttft_s_median,ttft_speedup,prefill_tps_median,cold_prefill_tps_median,decode_tps_median,cold_decode_tps_median,flags";

/// A second CSV block (after a blank line) with one row per depth, or nothing.
pub fn csv(summary: &Summary) -> String {
    if summary.depth.is_empty() {
        return String::new();
    }
    let med = |s: Option<Stat>| s.map(|s| s.median.to_string()).unwrap_or_default();
    let mut out = format!("\n{CSV_COLUMNS}\n");
    for p in &summary.depth {
        let flags: Vec<String> = p.flags.iter().map(|(k, v)| format!("{k}:{v}")).collect();
        out.push_str(&format!(
            "{},{},{},{},{},{},{},{},{},{},{},{},{},{}\n",
            p.depth_tokens,
            p.turn_tokens,
            p.attempts,
            p.n_valid,
            p.n_failed,
            p.cached_tokens.map(|c| c.to_string()).unwrap_or_default(),
            med(p.ttft_s),
            med(p.cold_ttft_s),
            p.ttft_speedup.map(|r| r.to_string()).unwrap_or_default(),
            med(p.prefill_tps),
            med(p.cold_prefill_tps),
            med(p.decode_tps),
            med(p.cold_decode_tps),
            flags.join(";"),
        ));
    }
    out
}

/// TTFT against depth: the warm turn and the cold request of the same total length.
pub fn chart(summary: &Summary) -> Chart {
    let series =
        |key: &str, label: &str, color: usize, pick: fn(&DepthPoint) -> Option<Stat>| Series {
            key: key.into(),
            label: label.into(),
            color,
            points: summary
                .depth
                .iter()
                .filter_map(|p| {
                    let s = pick(p)?;
                    Some(Point {
                        x: p.depth_tokens as f64,
                        y: s.median,
                        spread: Some((s.p10, s.p90)),
                        tip: format!(
                            "depth {} + {}: {label} {}",
                            format_count(p.depth_tokens),
                            p.turn_tokens,
                            Unit::Seconds.label(s.median)
                        ),
                    })
                })
                .collect(),
        };
    Chart {
        id: "depth_ttft".into(),
        title: "TTFT of a new turn vs depth".into(),
        x_label: "depth: cached prefix (tokens)".into(),
        y_label: "TTFT".into(),
        x_scale: ScaleKind::Linear,
        y_scale: ScaleKind::Log10,
        x_unit: Unit::Tokens,
        y_unit: Unit::Seconds,
        y_zero: false,
        series: vec![
            series("turn_ttft", "turn on cached prefix", 0, |p| p.ttft_s),
            series("cold_ttft", "cold, same total length", 1, |p| p.cold_ttft_s),
        ],
        curves: Vec::new(),
        shades: Vec::new(),
        empty_text: "no valid depth turns yet".into(),
    }
}

/// The HTML depth section, or nothing when the run has no depths.
pub fn html(summary: &Summary) -> String {
    use crate::report::html::page::{number_rows, table};
    if summary.depth.is_empty() {
        return String::new();
    }
    let valid = summary.depth.iter().map(|p| p.n_valid > 0);
    let rows = number_rows(rows(summary).into_iter().zip(valid));
    format!(
        "<section id=\"depth\">\n<h2>Depth: a new turn on a cached prefix</h2>\n<p class=\"sub\">Each depth's prefix is primed once; every turn adds a fresh suffix. Cold: a request of the same total length with caches defeated. Marginal prefill = uncached suffix tokens / turn TTFT.</p>\n{}<div class=\"charts\">\n{}\n</div>\n</section>\n",
        table("depth", &HEADER, &rows, 1),
        chart(summary).to_svg()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn summary() -> Summary {
        let stat = |m: f64| {
            Some(Stat {
                median: m,
                min: m,
                max: m,
                p10: m,
                p90: m,
                n: 2,
            })
        };
        Summary {
            depth: vec![DepthPoint {
                depth_tokens: 8192,
                turn_tokens: 512,
                attempts: 2,
                n_valid: 2,
                cached_tokens: Some(8192),
                ttft_s: stat(0.05),
                prefill_tps: stat(10240.0),
                decode_tps: stat(200.0),
                cold_ttft_s: stat(0.5),
                cold_decode_tps: stat(201.0),
                ttft_speedup: Some(10.0),
                ..DepthPoint::default()
            }],
            ..Summary::default()
        }
    }

    #[test]
    fn every_format_shows_the_turn_beside_the_cold_figure() {
        let s = summary();
        let t = text(&s);
        assert!(
            t.contains("8k") && t.contains("50.0") && t.contains("500.0") && t.contains("10.0x"),
            "{t}"
        );
        assert!(markdown(&s).contains("| 8k | 512 | 8192 |"));
        let c = csv(&s);
        assert!(c.contains("\n8192,512,2,2,0,8192,0.05,0.5,10,"), "{c}");
        let h = html(&s);
        assert!(
            h.contains("id=\"depth\"") && h.contains("chart-depth_ttft"),
            "{h}"
        );
        assert!(text(&Summary::default()).is_empty() && html(&Summary::default()).is_empty());
    }
}
