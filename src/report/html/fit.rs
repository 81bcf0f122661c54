//! The fitted-laws section: coefficients with 95 % intervals, r², residual tables and plots.

use super::page::{Cell, notes, table};
use crate::fit::{DecodeStepFit, MIN_DECODE_POINTS, MIN_TTFT_POINTS, ScalingFit, TtftFit};
use crate::lengths::format_count;
use crate::record::Summary;
use crate::report::plot::figures;
use crate::report::plot::format::{seconds, si};

pub fn section(summary: &Summary, fit: &ScalingFit) -> String {
    let mut out = String::from(
        "<section id=\"fit\">\n<h2>Fitted scaling laws</h2>\n<p class=\"sub\">Weighted least squares on the per-point medians (weights 1/y², so each length counts by its relative error), n = context tokens; coefficients kept non-negative; intervals are 95 % (Student t).</p>\n",
    );
    match &fit.ttft {
        Some(f) => out.push_str(&ttft(f, summary)),
        None => out.push_str(&format!(
            "<h3>TTFT(n) ≈ a + b·n + c·n²</h3>\n<p class=\"muted\" id=\"fit-ttft-missing\">Needs valid TTFT at {MIN_TTFT_POINTS} or more lengths.</p>\n"
        )),
    }
    match &fit.decode_step {
        Some(f) => out.push_str(&decode(f, summary)),
        None => out.push_str(&format!(
            "<h3>decode step ≈ d + e·n</h3>\n<p class=\"muted\" id=\"fit-decode-missing\">Needs valid decode rates at {MIN_DECODE_POINTS} or more lengths.</p>\n"
        )),
    }
    out.push_str("</section>\n");
    out
}

fn interval(ci: Option<(f64, f64)>, fmt: impl Fn(f64) -> String) -> String {
    ci.map(|(lo, hi)| format!("{} … {}", fmt(lo), fmt(hi)))
        .unwrap_or_else(|| "n/a (no spare points)".into())
}

fn sci(v: f64) -> String {
    format!("{v:.3e}")
}

fn coefficient_table(id: &str, rows: Vec<[String; 4]>) -> String {
    let rows: Vec<(String, Vec<Cell>)> = rows
        .into_iter()
        .map(|[term, value, ci, meaning]| {
            (
                String::new(),
                vec![
                    Cell::text(term),
                    Cell::num(value),
                    Cell::num(ci),
                    Cell::text(meaning),
                ],
            )
        })
        .collect();
    table(
        &format!("fit-coefficients {id}"),
        &["term", "value", "95 % interval", "meaning"],
        &rows,
        1,
    )
}

fn residual_table(
    id: &str,
    lengths: &[u64],
    residuals_s: &[f64],
    measured: impl Fn(u64) -> Option<f64>,
) -> String {
    let rows: Vec<(String, Vec<Cell>)> = lengths
        .iter()
        .zip(residuals_s)
        .map(|(n, r)| {
            let m = measured(*n);
            let pct = m
                .filter(|m| *m != 0.0)
                .map(|m| format!("{:+.1} %", 100.0 * r / m))
                .unwrap_or_else(|| "-".into());
            (
                String::new(),
                vec![
                    Cell::text(format_count(*n)),
                    Cell::num(m.map(seconds).unwrap_or_else(|| "-".into())),
                    Cell::num(m.map(|m| seconds(m - r)).unwrap_or_else(|| "-".into())),
                    Cell::num(seconds(*r)),
                    Cell::num(pct),
                ],
            )
        })
        .collect();
    table(
        &format!("fit-residuals {id}"),
        &["context", "measured", "fitted", "residual", "residual %"],
        &rows,
        1,
    )
}

fn ttft(f: &TtftFit, summary: &Summary) -> String {
    let ci = f.ci95;
    let rate = if f.b_s_per_token > 0.0 {
        format!("linear prefill ≈ {} tok/s", si(1.0 / f.b_s_per_token))
    } else {
        "no linear term".into()
    };
    let rows = vec![
        [
            "a".into(),
            seconds(f.a_s),
            interval(ci.map(|c| c.a_s), seconds),
            "fixed overhead per request".into(),
        ],
        [
            "b".into(),
            format!("{} s/token", sci(f.b_s_per_token)),
            interval(ci.map(|c| c.b_s_per_token), sci),
            rate,
        ],
        [
            "c".into(),
            format!("{} s/token²", sci(f.c_s_per_token2)),
            interval(ci.map(|c| c.c_s_per_token2), sci),
            "attention (quadratic) cost".into(),
        ],
    ];
    let measured = |n: u64| {
        summary
            .points
            .iter()
            .find(|p| p.context_tokens == n)
            .and_then(|p| p.ttft_s)
            .map(|s| s.median)
    };
    format!(
        "<h3>TTFT(n) ≈ a + b·n + c·n²</h3>\n<p class=\"fit-stats\" data-fit=\"ttft\" data-a-s=\"{}\" data-b-s-per-token=\"{}\" data-c-s-per-token2=\"{}\" data-r2=\"{}\" data-n=\"{}\">r² = {:.4} over {} lengths</p>\n{}<div class=\"fit-row\"><div>{}{}</div>{}</div>\n",
        f.a_s,
        f.b_s_per_token,
        f.c_s_per_token2,
        f.r2,
        f.n,
        f.r2,
        f.n,
        notes(&f.note.iter().cloned().collect::<Vec<_>>()),
        coefficient_table("ttft", rows),
        residual_table("ttft", &f.context_tokens, &f.residuals_s, measured),
        figures::residual_chart(
            "ttft-residuals",
            "TTFT fit residuals",
            &f.context_tokens,
            &f.residuals_s
        )
        .to_svg(),
    )
}

fn decode(f: &DecodeStepFit, summary: &Summary) -> String {
    let ci = f.ci95;
    let rows = vec![
        [
            "d".into(),
            seconds(f.d_s),
            interval(ci.map(|c| c.d_s), seconds),
            if f.d_s > 0.0 {
                format!(
                    "fixed step time (≈ {} tok/s at short context)",
                    si(1.0 / f.d_s)
                )
            } else {
                "fixed step time".into()
            },
        ],
        [
            "e".into(),
            format!("{} s/token", sci(f.e_s_per_token)),
            interval(ci.map(|c| c.e_s_per_token), sci),
            "step time added per context token (KV reads)".into(),
        ],
    ];
    let measured = |n: u64| {
        summary
            .points
            .iter()
            .find(|p| p.context_tokens == n)
            .and_then(|p| p.decode_tps.or(p.two_point_decode_tps))
            .filter(|s| s.median > 0.0)
            .map(|s| 1.0 / s.median)
    };
    format!(
        "<h3>decode step ≈ d + e·n (step = 1 / decode tok/s)</h3>\n<p class=\"fit-stats\" data-fit=\"decode_step\" data-d-s=\"{}\" data-e-s-per-token=\"{}\" data-r2=\"{}\" data-n=\"{}\">r² = {:.4} over {} lengths</p>\n{}<div class=\"fit-row\"><div>{}{}</div>{}</div>\n",
        f.d_s,
        f.e_s_per_token,
        f.r2,
        f.n,
        f.r2,
        f.n,
        notes(&f.note.iter().cloned().collect::<Vec<_>>()),
        coefficient_table("decode_step", rows),
        residual_table("decode_step", &f.context_tokens, &f.residuals_s, measured),
        figures::residual_chart(
            "decode_step-residuals",
            "Decode step fit residuals",
            &f.context_tokens,
            &f.residuals_s
        )
        .to_svg(),
    )
}
