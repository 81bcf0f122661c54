//! A predicted figure held to one or several measurements of it (pure, for tests).
//!
//! A figure's error is its absolute percentage error against the measured mean (against
//! the prediction when the measurement is 0; hit ratios, themselves fractions, in points).
//! Its bound is the (10 % for medians and throughput, 25 % for tails), never tighter
//! than 1.5 times the spread of repeated measurements: no bound asks the twin to be closer
//! to the server than the server is to itself.

use crate::twin::model::figure::Figure;

/// Repeated measurements of a figure bound it at this many times their spread.
pub const SPREAD_FACTOR: f64 = 1.5;

/// One figure predicted against its measurements.
#[derive(Debug, Clone, PartialEq)]
pub struct Compared {
    pub figure: Figure,
    /// One value per measured file.
    pub measured: Vec<f64>,
    pub predicted: f64,
    /// Absolute error as a fraction (points for the hit ratio).
    pub error: f64,
    /// (max − min) / mean of the measurements; `None` with one measurement.
    pub spread: Option<f64>,
    pub bound: f64,
    pub flagged: bool,
    /// The prediction's 90 % band, where it has one.
    pub band: Option<[f64; 2]>,
    /// Terms the prediction leans on that the calibration did not identify.
    pub unidentified: Vec<&'static str>,
}

impl Compared {
    pub fn measured_mean(&self) -> f64 {
        self.measured.iter().sum::<f64>() / self.measured.len().max(1) as f64
    }

    /// Measured values inside the band (0 without one).
    pub fn inside(&self) -> usize {
        self.band.map_or(0, |[lo, hi]| {
            self.measured
                .iter()
                .filter(|&&m| lo <= m && m <= hi)
                .count()
        })
    }

    /// (predicted − measured mean) / measured mean: positive when the twin says more.
    pub fn signed_error(&self) -> f64 {
        let m = self.measured_mean();
        if self.figure == Figure::HitRatio {
            self.predicted - m
        } else if m != 0.0 {
            (self.predicted - m) / m.abs()
        } else {
            0.0
        }
    }
}

/// Hold `predicted` to `measured` (at least one value).
pub fn compare(figure: Figure, measured: Vec<f64>, predicted: f64) -> Compared {
    let mean = measured.iter().sum::<f64>() / measured.len().max(1) as f64;
    let error = if figure == Figure::HitRatio {
        (predicted - mean).abs()
    } else {
        relative(predicted, mean)
    };
    let spread = (measured.len() > 1).then(|| {
        let (lo, hi) = measured
            .iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), &x| {
                (lo.min(x), hi.max(x))
            });
        let d = hi - lo;
        if figure == Figure::HitRatio {
            d
        } else if d == 0.0 {
            0.0
        } else if mean != 0.0 {
            d / mean.abs()
        } else {
            1.0
        }
    });
    let bound = figure
        .bound()
        .max(spread.map_or(0.0, |s| SPREAD_FACTOR * s));
    Compared {
        figure,
        measured,
        predicted,
        error,
        spread,
        bound,
        flagged: error.is_nan() || error > bound,
        band: None,
        unidentified: Vec::new(),
    }
}

/// |a − b| / |b|; against `a` when `b` is 0; 0 when both are.
fn relative(a: f64, b: f64) -> f64 {
    let d = (a - b).abs();
    if d == 0.0 {
        0.0
    } else if b != 0.0 {
        d / b.abs()
    } else {
        d / a.abs()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_are_relative_to_the_measured_mean_and_flag_beyond_the_bound() {
        let c = compare(Figure::TtftP50, vec![0.100], 0.109);
        assert!((c.error - 0.09).abs() < 1e-12);
        assert!(!c.flagged);
        assert_eq!(c.spread, None);
        let c = compare(Figure::TtftP50, vec![0.100], 0.111);
        assert!(c.flagged, "{c:?}");
        // A tail gets 25 %.
        assert!(!compare(Figure::TtftP99, vec![0.100], 0.124).flagged);
        assert!(compare(Figure::TtftP99, vec![0.100], 0.126).flagged);
    }

    #[test]
    fn a_server_that_differs_from_itself_widens_the_bound() {
        // Two runs 20 % apart (of their mean 0.1): the bound is 1.5 × 20 % = 30 %.
        let c = compare(Figure::TtftP50, vec![0.09, 0.11], 0.128);
        assert!((c.spread.unwrap() - 0.2).abs() < 1e-12);
        assert!((c.bound - 0.3).abs() < 1e-12);
        assert!((c.error - 0.28).abs() < 1e-12);
        assert!(!c.flagged);
        // Two runs that agree leave the bound.
        let c = compare(Figure::TpotP50, vec![0.0100, 0.0101], 0.0112);
        assert!((c.bound - 0.10).abs() < 1e-12);
        assert!(c.flagged);
    }

    #[test]
    fn zeros_and_ratios_have_errors_that_mean_something() {
        assert_eq!(compare(Figure::Goodput, vec![0.0], 0.0).error, 0.0);
        assert_eq!(compare(Figure::Goodput, vec![0.0], 2.0).error, 1.0);
        let c = compare(Figure::HitRatio, vec![0.60], 0.52);
        assert!(
            (c.error - 0.08).abs() < 1e-12,
            "points, not a ratio of ratios"
        );
        assert!(!c.flagged);
        assert!(compare(Figure::HitRatio, vec![0.60], 0.45).flagged);
        assert!(compare(Figure::TtftP50, vec![0.1], f64::NAN).flagged);
    }
}
