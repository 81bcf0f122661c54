//! `twin whatif`'s comparison as printed: per configuration and cell the figures, cost and
//! SLO verdict, their bands, the knees and warnings, the ranking by what a good token costs
//! (`--price-per-hour`: cheapest first, those meeting the SLO nowhere last) and the best.

use crate::lengths::format_count;
use crate::record::load::CellRecord;
use crate::twin::model::figure::Figure;
use crate::twin::render::bands::with_band;
use crate::twin::whatif::{Outcome, best, knees};
use std::fmt::Write;

/// The table, the knees, the warnings and the verdict.
pub fn render(outcomes: &[Outcome]) -> String {
    let mut s = String::new();
    let ms = |p: Option<crate::record::Percentiles>, f: fn(&crate::record::Percentiles) -> f64| {
        p.map_or("-".into(), |p| format!("{:.0}", f(&p) * 1e3))
    };
    let _ = writeln!(
        s,
        "{:<32} {:>7} {:>9} {:>10} {:>10} {:>9} {:>9} {:>9} {:>7} {:>9}  SLO",
        "configuration",
        "length",
        "load",
        "TTFT p50",
        "TTFT p99",
        "TPOT p50",
        "tok/s",
        "goodput",
        "good %",
        "$/Mtok"
    );
    let _ = writeln!(
        s,
        "{:<32} {:>7} {:>9} {:>10} {:>10} {:>9}",
        "", "", "", "ms", "ms", "ms"
    );
    for o in outcomes {
        for c in &o.result.cells {
            let _ = writeln!(
                s,
                "{:<32} {:>7} {:>9} {:>10} {:>10} {:>9} {:>9} {:>9} {:>7} {:>9}  {}",
                o.config.label(),
                c.cell.context_tokens,
                c.cell.load_label(),
                ms(c.ttft_s, |p| p.p50),
                ms(c.ttft_s, |p| p.p99),
                ms(c.tpot_s, |p| p.p50),
                c.output_tps.map_or("-".into(), |x| format!("{x:.0}")),
                c.goodput_rps.map_or("-".into(), |x| format!("{x:.2}/s")),
                c.goodput_fraction
                    .map_or("-".into(), |x| format!("{:.0}", x * 100.0)),
                column(c),
                if c.meets_target { "meets" } else { "misses" }
            );
        }
    }
    s.push_str("\n90 % bands [lo, hi]:\n");
    for o in outcomes {
        for c in &o.result.cells {
            let _ = writeln!(
                s,
                "{:<32} {:>7} {:>9}  TTFT p50 {} ms  p99 {} ms  TPOT p50 {} ms  tok/s {}  goodput {}",
                o.config.label(),
                c.cell.context_tokens,
                c.cell.load_label(),
                with_band(Figure::TtftP50, c),
                with_band(Figure::TtftP99, c),
                with_band(Figure::TpotP50, c),
                with_band(Figure::OutputTps, c),
                with_band(Figure::Goodput, c),
            );
        }
    }
    s.push('\n');
    for o in outcomes {
        let k: Vec<String> = knees(&o.result)
            .iter()
            .map(|(n, k)| match k {
                Some(k) => format!("{n} tokens: {k}"),
                None => format!("{n} tokens: none meets"),
            })
            .collect();
        let _ = writeln!(s, "knee, {}: {}", o.config.label(), k.join("; "));
        for w in &o.warnings {
            let _ = writeln!(s, "  warning: {w}");
        }
    }
    s.push_str(&ranking(outcomes));
    match best(outcomes) {
        Some(i) => {
            let _ = writeln!(
                s,
                "\nbest: {} (meets the SLOs at the most load, then the most goodput)",
                outcomes[i].config.label()
            );
        }
        None => {
            let _ = writeln!(s, "\nno configuration meets the SLOs in any cell");
        }
    }
    s
}

/// A configuration's cheapest cell meeting the SLOs at the goodput target at length `n`.
fn cheapest(o: &Outcome, n: u64) -> Option<&CellRecord> {
    o.result
        .cells
        .iter()
        .filter(|c| c.cell.context_tokens == n && c.meets_target)
        .filter(|c| c.usd_per_mtok_goodput.is_some())
        .min_by(|a, b| usd(a).total_cmp(&usd(b)))
}

fn usd(c: &CellRecord) -> f64 {
    c.usd_per_mtok_goodput.unwrap_or(f64::INFINITY)
}

/// The cost column: dollars per million good output tokens, `-` where none.
pub fn column(c: &CellRecord) -> String {
    c.usd_per_mtok_goodput
        .map_or("-".into(), |x| format!("${x:.3}"))
}

/// The ranking per length, or nothing when the plan has no price.
pub fn ranking(outcomes: &[Outcome]) -> String {
    let Some(first) = outcomes.first() else {
        return String::new();
    };
    let Some(price) = first.result.plan.price_per_hour else {
        return String::new();
    };
    let mut s = String::new();
    for &n in &first.result.plan.lengths {
        let mut ranked: Vec<(&Outcome, Option<&CellRecord>)> =
            outcomes.iter().map(|o| (o, cheapest(o, n))).collect();
        // Cheapest first; those missing the SLO keep their order, after the rest.
        ranked.sort_by(|a, b| match (a.1, b.1) {
            (Some(x), Some(y)) => usd(x).total_cmp(&usd(y)),
            (Some(_), None) => std::cmp::Ordering::Less,
            (None, Some(_)) => std::cmp::Ordering::Greater,
            (None, None) => std::cmp::Ordering::Equal,
        });
        let parts: Vec<String> = ranked
            .iter()
            .map(|(o, c)| match c {
                Some(c) => format!(
                    "{}: ${:.2} per M tokens at goodput {:.0} % ({})",
                    o.config.label(),
                    usd(c),
                    c.goodput_fraction.unwrap_or(0.0) * 100.0,
                    c.cell.load_label()
                ),
                None => format!("{}: misses the SLO", o.config.label()),
            })
            .collect();
        let _ = writeln!(
            s,
            "cost at the SLO, {} tokens, ${price}/h (per M good output tokens, cheapest first): {}",
            format_count(n),
            parts.join("; ")
        );
    }
    s
}
