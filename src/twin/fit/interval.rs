//! A fitted estimate's 95 % interval, as the laws and the batch terms build it.

use crate::twin::model::profile::Estimate;

/// z for a two-sided 95 % interval.
pub(crate) const Z95: f64 = 1.96;

pub(crate) fn interval(lo: f64, hi: f64) -> Option<[f64; 2]> {
    (lo.is_finite() && hi.is_finite() && lo <= hi).then_some([lo, hi])
}

pub(crate) fn half_width(e: &Estimate) -> f64 {
    e.ci95.map_or(0.0, |[lo, hi]| (hi - lo) / 2.0)
}
