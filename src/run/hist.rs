//! Latency percentiles from HDR histograms: bounded relative error, constant memory.

pub use crate::record::Percentiles;
use hdrhistogram::Histogram;

/// Recorded resolution: 1 µs; highest value: one day.
const UNIT_S: f64 = 1e-6;
const HIGHEST_US: u64 = 86_400_000_000;
/// Three significant digits: values are kept within 0.1 %.
const SIGFIG: u8 = 3;

/// A latency histogram in seconds.
pub struct LatencyHist(Histogram<u64>);

impl Default for LatencyHist {
    fn default() -> Self {
        LatencyHist(
            Histogram::new_with_bounds(1, HIGHEST_US, SIGFIG).expect("static bounds are valid"),
        )
    }
}

impl LatencyHist {
    /// Record `s` seconds; negative or non-finite values are refused (returns false).
    pub fn record(&mut self, s: f64) -> bool {
        if !s.is_finite() || s < 0.0 {
            return false;
        }
        let us = ((s / UNIT_S).round() as u64).clamp(1, HIGHEST_US);
        self.0.record(us).is_ok()
    }

    pub fn len(&self) -> u64 {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    pub fn percentiles(&self) -> Option<Percentiles> {
        if self.0.is_empty() {
            return None;
        }
        let q = |p: f64| self.0.value_at_quantile(p) as f64 * UNIT_S;
        Some(Percentiles {
            p50: q(0.50),
            p90: q(0.90),
            p99: q(0.99),
            mean: self.0.mean() * UNIT_S,
            max: self.0.max() as f64 * UNIT_S,
            n: self.0.len(),
        })
    }

    pub fn of(xs: impl IntoIterator<Item = f64>) -> LatencyHist {
        let mut h = LatencyHist::default();
        for x in xs {
            h.record(x);
        }
        h
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percentiles_are_within_the_histogram_precision() {
        let h = LatencyHist::of((1..=1000).map(|i| i as f64 * 1e-3));
        let p = h.percentiles().unwrap();
        // 3 significant digits: within 0.1 % (plus one bucket) of the exact order statistic.
        assert!((p.p50 - 0.500).abs() < 0.5e-3 + 1e-6, "{p:?}");
        assert!((p.p99 - 0.990).abs() < 1.0e-3 + 1e-6, "{p:?}");
        assert_eq!(p.n, 1000);
        assert!(LatencyHist::default().percentiles().is_none());
        let mut h = LatencyHist::default();
        assert!(!h.record(f64::NAN) && !h.record(-1.0));
    }
}
