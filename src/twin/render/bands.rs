//! A prediction's figures beside their 90 % bands, as `twin predict` and `twin whatif`
//! print them.

use crate::record::load::CellRecord;
use crate::twin::model::figure::Figure;
use std::fmt::Write;

/// A figure and its 90 % band, as `457.1 [420.3, 495.0]` (ms for latencies).
pub fn with_band(f: Figure, c: &CellRecord) -> String {
    let Some(v) = f.of(c, None) else {
        return "-".into();
    };
    let scale = match f {
        Figure::TtftP50 | Figure::TtftP90 | Figure::TtftP99 | Figure::TpotP50 => 1e3,
        Figure::OutputTps | Figure::Goodput | Figure::HitRatio => 1.0,
    };
    let digits = if f == Figure::Goodput { 2 } else { 1 };
    let band = c
        .band
        .as_ref()
        .and_then(|b| f.within(b))
        .map_or(String::new(), |[lo, hi]| {
            format!(" [{:.digits$}, {:.digits$}]", lo * scale, hi * scale)
        });
    format!("{:.digits$}{band}", v * scale)
}

/// Each predicted cell's figures beside their 90 % bands.
pub fn bands(cells: &[CellRecord]) -> String {
    let mut out = String::from("\npredicted, with 90 % bands [lo, hi]:\n");
    let _ = writeln!(
        out,
        "{:>7} {:>9}  {:<24} {:<24} {:<22} {:<22} {:<20}",
        "length", "load", "TTFT p50 ms", "TTFT p99 ms", "TPOT p50 ms", "tok/s", "goodput req/s"
    );
    for c in cells {
        let _ = writeln!(
            out,
            "{:>7} {:>9}  {:<24} {:<24} {:<22} {:<22} {:<20}",
            c.cell.context_tokens,
            c.cell.load_label(),
            with_band(Figure::TtftP50, c),
            with_band(Figure::TtftP99, c),
            with_band(Figure::TpotP50, c),
            with_band(Figure::OutputTps, c),
            with_band(Figure::Goodput, c),
        );
    }
    out
}
