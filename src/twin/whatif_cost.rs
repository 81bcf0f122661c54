//! `twin whatif --price-per-hour`: the configurations ranked by what a good token costs at
//! the SLO, one line each, cheapest first; those that meet the SLO nowhere said last.

use super::whatif_outcome::Outcome;
use crate::lengths::format_count;
use crate::record::load::CellRecord;
use std::fmt::Write;

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
