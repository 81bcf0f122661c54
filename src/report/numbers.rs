//! Numbers as report cells, shared by the load and trace sections: a percentile in ms, a
//! figure to a number of places, dollars, `-` for none.

use crate::record::load::Percentiles;

/// A percentile in ms, `-` when there is none.
pub fn ms(p: Option<Percentiles>, f: fn(&Percentiles) -> f64) -> String {
    p.map(|p| format!("{:.1}", f(&p) * 1e3))
        .unwrap_or_else(|| "-".into())
}

/// A number to `digits` places, `-` when there is none.
pub fn num(v: Option<f64>, digits: usize) -> String {
    v.map(|v| format!("{v:.digits$}"))
        .unwrap_or_else(|| "-".into())
}

/// Dollars with three significant digits (a cheap token costs well under a cent).
pub fn usd(x: Option<f64>) -> String {
    match x {
        Some(v) if v >= 100.0 => format!("{v:.0}"),
        Some(v) if v >= 1.0 => format!("{v:.2}"),
        Some(v) => format!("{v:.3}"),
        None => "-".into(),
    }
}
