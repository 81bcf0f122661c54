//! `twin check`'s report as printed: per cell, each figure predicted against measured with
//! its band, error, spread and bound; then per figure, coverage and bias.

use crate::twin::check::{CheckReport, Slack};
use crate::twin::model::figure::Figure;
use std::fmt::Write;

/// What a bound adds to the issue's, where it adds anything: `  (+x one request, +y
/// decode step)`.
fn slack(s: &Slack, pct: impl Fn(f64) -> String) -> String {
    let parts: Vec<String> = [(s.resolution, "one request"), (s.carried, "decode step")]
        .into_iter()
        .filter(|(x, _)| *x >= 0.0005)
        .map(|(x, what)| format!("+{} {what}", pct(x)))
        .collect();
    if parts.is_empty() {
        String::new()
    } else {
        format!("  ({})", parts.join(", "))
    }
}

/// The report as printed.
pub fn render(r: &CheckReport) -> String {
    let mut s = String::new();
    let _ = writeln!(
        s,
        "twin check: profile {} against {}{}",
        r.profile,
        r.files[0],
        match r.files.len() {
            1 => String::new(),
            n => format!(" and {} repeat(s) of its plan", n - 1),
        }
    );
    for c in &r.cells {
        let _ = writeln!(
            s,
            "\ncell {} {}: mean error {:.1} %",
            c.key.context_tokens,
            c.key.load_label(),
            c.mean_error * 100.0
        );
        let mut terms: Vec<&str> = c.rows.iter().flat_map(|r| r.unidentified.clone()).collect();
        terms.sort_unstable();
        terms.dedup();
        if !terms.is_empty() {
            let _ = writeln!(
                s,
                "  warning: this cell leans on unidentified {}: its figures are marked",
                terms.join(", ")
            );
        }
        let _ = writeln!(
            s,
            "  {:<14} {:>12} {:>12} {:>26} {:>8} {:>8} {:>8}",
            "figure", "measured", "predicted", "90 % band", "error", "spread", "bound"
        );
        for row in &c.rows {
            let f = row.figure;
            let pct = |x: f64| {
                let unit = if f == Figure::HitRatio { " pt" } else { " %" };
                format!("{:.1}{unit}", x * 100.0)
            };
            let band = row.band.map_or("-".into(), |[lo, hi]| {
                format!("[{}, {}]", f.show(lo), f.show(hi))
            });
            let outside = row.band.is_some() && row.inside() < row.measured.len();
            let _ = writeln!(
                s,
                "  {:<14} {:>12} {:>12} {:>26} {:>8} {:>8} {:>8}{}{}{}{}",
                f.name(),
                f.show(row.measured_mean()),
                f.show(row.predicted),
                band,
                pct(row.error),
                row.spread.map_or("-".into(), pct),
                pct(row.bound),
                slack(&row.slack, pct),
                if row.flagged { "  BEYOND BOUND" } else { "" },
                if outside { "  OUTSIDE BAND" } else { "" },
                if row.unidentified.is_empty() {
                    String::new()
                } else {
                    format!("  (unidentified: {})", row.unidentified.join(", "))
                }
            );
        }
    }
    let _ = writeln!(
        s,
        "\n{:<14} {:>10} {:>10} {:>14} {:>16}",
        "figure", "coverage", "bias", "median |error|", "median half-band"
    );
    for f in r.per_figure() {
        let pct = |x: f64| format!("{:.1} %", x * 100.0);
        let _ = writeln!(
            s,
            "{:<14} {:>10} {:>10} {:>14} {:>16}",
            f.figure.name(),
            if f.measured > 0 {
                format!("{}/{}", f.inside, f.measured)
            } else {
                "-".into()
            },
            format!("{:+.1} %", f.bias * 100.0),
            pct(f.median_error),
            f.median_half_width.map_or("-".into(), pct)
        );
    }
    match r.coverage() {
        Some(c) => {
            let _ = writeln!(
                s,
                "coverage: {:.1} % of measured figures inside their 90 % bands",
                c * 100.0
            );
        }
        None => {
            let _ = writeln!(s, "coverage: no figure has a band");
        }
    }
    let total: usize = r.cells.iter().map(|c| c.rows.len()).sum();
    let _ = writeln!(
        s,
        "\n{} of {total} figures beyond their bounds",
        r.flagged()
    );
    s
}
