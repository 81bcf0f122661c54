//! The line each finished cell prints on stderr while load runs.

use crate::lengths::format_count;
use crate::record::load::CellRecord;
use crate::report::numbers::{ms, num, usd};

/// One line per finished cell, on stderr.
pub fn line(c: &CellRecord) -> String {
    let mut extra = match c.accuracy.get(crate::accuracy::tally::ALL) {
        Some(a) => format!(", accuracy {}", crate::report::accuracy::cell_text(a)),
        None => String::new(),
    };
    if c.usd_per_mtok_output.is_some() {
        extra.push_str(&format!(
            ", ${} per M out tok (${} per M good)",
            usd(c.usd_per_mtok_output),
            usd(c.usd_per_mtok_goodput)
        ));
    }
    if let Some(j) = c.energy_j_per_output_token {
        extra.push_str(&format!(", {j:.3} J/out tok"));
    }
    format!(
        "{:>6} {:>8}: {}/{} ok, TTFT p50 {} ms p99 {} ms, TPOT p50 {} ms, {} out tok/s, goodput {}%{}{extra}",
        format_count(c.cell.context_tokens),
        c.cell.load_label(),
        c.ok,
        c.sent,
        ms(c.ttft_s, |p| p.p50),
        ms(c.ttft_s, |p| p.p99),
        ms(c.tpot_s, |p| p.p50),
        num(c.output_tps, 0),
        num(c.goodput_fraction.map(|f| f * 100.0), 0),
        if c.meets_target {
            ""
        } else {
            " (misses the target)"
        }
    )
}
