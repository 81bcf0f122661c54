//! Human labels for axis ticks and tooltips: seconds as s/ms/µs, rates with k/M suffixes,
//! context lengths as 1k, 2k, …

use crate::lengths::format_count;

/// What a chart axis measures, which decides how its numbers are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unit {
    /// Seconds, written as s / ms / µs.
    Seconds,
    /// Tokens per second, written with k / M suffixes.
    TokensPerSecond,
    /// A token count (context length), written 1k, 2k, … at multiples of 1024.
    Tokens,
    /// A dimensionless ratio, written 1.05×.
    Ratio,
    /// A fraction of a whole, written as a percentage: 0.8 as 80 %.
    Percent,
    /// A plain number (requests, workers, a rate): 4, 2.5.
    Count,
}

impl Unit {
    /// A short label for `v`, e.g. tick text.
    pub fn label(self, v: f64) -> String {
        match self {
            Unit::Seconds => seconds(v),
            Unit::TokensPerSecond => si(v),
            Unit::Tokens if v >= 0.0 && v.fract() == 0.0 => format_count(v as u64),
            Unit::Tokens => sig(v, 3),
            Unit::Ratio => format!("{}×", sig(v, 3)),
            Unit::Percent => format!("{} %", sig(v * 100.0, 3)),
            Unit::Count => sig(v, 3),
        }
    }
}

/// `v` seconds as `1.5 s`, `250 ms`, `40 µs` (three significant digits).
pub fn seconds(v: f64) -> String {
    let a = v.abs();
    if a == 0.0 {
        "0".into()
    } else if a >= 1.0 {
        format!("{} s", sig(v, 3))
    } else if a >= 1e-3 {
        format!("{} ms", sig(v * 1e3, 3))
    } else {
        format!("{} µs", sig(v * 1e6, 3))
    }
}

/// `v` with a k / M suffix: 1500 → `1.5k`, 100000 → `100k`, 250 → `250`.
pub fn si(v: f64) -> String {
    let a = v.abs();
    if a >= 1e6 {
        format!("{}M", sig(v / 1e6, 3))
    } else if a >= 1e3 {
        format!("{}k", sig(v / 1e3, 3))
    } else {
        sig(v, 3)
    }
}

/// `v` to `digits` significant digits, without trailing zeros (never scientific notation
/// for the magnitudes charts show).
pub fn sig(v: f64, digits: i32) -> String {
    if v == 0.0 || !v.is_finite() {
        return if v.is_finite() {
            "0".into()
        } else {
            "-".into()
        };
    }
    let magnitude = v.abs().log10().floor() as i32;
    let decimals = (digits - 1 - magnitude).clamp(0, 12) as usize;
    let s = format!("{v:.decimals$}");
    if s.contains('.') {
        s.trim_end_matches('0').trim_end_matches('.').to_string()
    } else {
        s
    }
}

/// A raw number for a `data-*` attribute: full precision, so tests can compare with the data.
pub fn raw(v: f64) -> String {
    format!("{v}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seconds_pick_their_unit() {
        assert_eq!(seconds(0.02), "20 ms");
        assert_eq!(seconds(0.25), "250 ms");
        assert_eq!(seconds(2.5), "2.5 s");
        assert_eq!(seconds(60.0), "60 s");
        assert_eq!(seconds(0.00004), "40 µs");
        assert_eq!(seconds(-0.005), "-5 ms");
        assert_eq!(seconds(0.0), "0");
    }

    #[test]
    fn rates_and_counts() {
        assert_eq!(si(100_000.0), "100k");
        assert_eq!(si(1500.0), "1.5k");
        assert_eq!(si(250.0), "250");
        assert_eq!(si(2_500_000.0), "2.5M");
        assert_eq!(Unit::Tokens.label(32768.0), "32k");
        assert_eq!(Unit::Tokens.label(512.0), "512");
        assert_eq!(Unit::Ratio.label(1.05), "1.05×");
        assert_eq!(Unit::Percent.label(0.8), "80 %");
        assert_eq!(Unit::Percent.label(0.125), "12.5 %");
        assert_eq!(Unit::Count.label(4.0), "4");
        assert_eq!(sig(0.1234567, 3), "0.123");
        assert_eq!(sig(1234.6, 3), "1235");
    }
}
