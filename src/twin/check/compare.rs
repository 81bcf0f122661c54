//! A predicted figure held to one or several measurements of it (pure, for tests).
//!
//! A figure's error is its absolute percentage error against the measured mean (against
//! the prediction when the measurement is 0; hit ratios, themselves fractions, in points).
//! Its bound is the (10 % for medians and throughput, 25 % for tails), never tighter
//! than 1.5 times the spread of repeated measurements: no bound asks the twin to be closer
//! to the server than the server is to itself. Two shares are added to it (`Slack`): a
//! count over a window (goodput: requests that ended in it) moves a whole request at a
//! time, so its bound adds one request's share of the measured count; and a figure that
//! the decode step drives (a queued request's TTFT waits for others to decode) adds what
//! an error of the decode step within TPOT's own bound carries into it.

use super::slack::Slack;
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
    /// What the bound adds to the (before the spread's floor).
    pub slack: Slack,
    pub flagged: bool,
    /// The prediction's 90 % band, where it has one.
    pub band: Option<[f64; 2]>,
    /// Terms the prediction leans on that the calibration did not identify.
    pub unidentified: Vec<&'static str>,
}

impl Compared {
    pub fn measured_mean(&self) -> f64 {
        mean(&self.measured)
    }

    /// Measured values inside the band (0 without one).
    pub fn inside(&self) -> usize {
        self.band.map_or(0, |band| self.inside_of(band))
    }

    /// Measured values inside `[lo, hi]`.
    pub fn inside_of(&self, [lo, hi]: [f64; 2]) -> usize {
        self.measured
            .iter()
            .filter(|&&m| lo <= m && m <= hi)
            .count()
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

/// Hold `predicted` to `measured` (at least one value), its bound widened by `slack`.
pub fn compare(figure: Figure, measured: Vec<f64>, predicted: f64, slack: Slack) -> Compared {
    let mean = mean(&measured);
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
    let bound = (figure.bound() + slack.total()).max(spread.map_or(0.0, |s| SPREAD_FACTOR * s));
    Compared {
        figure,
        measured,
        predicted,
        error,
        spread,
        bound,
        slack,
        flagged: error.is_nan() || error > bound,
        band: None,
        unidentified: Vec::new(),
    }
}

/// The mean of measured values, as every figure's error is taken against (0 for none;
/// NaN carried, so a broken measurement is flagged rather than dropped).
pub fn mean(xs: &[f64]) -> f64 {
    xs.iter().sum::<f64>() / xs.len().max(1) as f64
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
        let c = compare(Figure::TtftP50, vec![0.100], 0.109, Slack::default());
        assert!((c.error - 0.09).abs() < 1e-12);
        assert!(!c.flagged);
        assert_eq!(c.spread, None);
        let c = compare(Figure::TtftP50, vec![0.100], 0.111, Slack::default());
        assert!(c.flagged, "{c:?}");
        // A tail gets 25 %.
        assert!(!compare(Figure::TtftP99, vec![0.100], 0.124, Slack::default()).flagged);
        assert!(compare(Figure::TtftP99, vec![0.100], 0.126, Slack::default()).flagged);
    }

    #[test]
    fn a_server_that_differs_from_itself_widens_the_bound() {
        // Two runs 20 % apart (of their mean 0.1): the bound is 1.5 × 20 % = 30 %.
        let c = compare(Figure::TtftP50, vec![0.09, 0.11], 0.128, Slack::default());
        assert!((c.spread.unwrap() - 0.2).abs() < 1e-12);
        assert!((c.bound - 0.3).abs() < 1e-12);
        assert!((c.error - 0.28).abs() < 1e-12);
        assert!(!c.flagged);
        // Two runs that agree leave the bound.
        let c = compare(
            Figure::TpotP50,
            vec![0.0100, 0.0101],
            0.0112,
            Slack::default(),
        );
        assert!((c.bound - 0.10).abs() < 1e-12);
        assert!(c.flagged);
    }

    #[test]
    fn a_count_is_held_to_its_rate_and_one_request_more() {
        // vLLM's Poisson cell in CI: 9 requests ended in the window in each of three runs
        // (spread 0), the twin had 10 end there: 11.1 % off, a whole request at the edge.
        let (measured, one) = (
            3.618,
            Slack {
                resolution: 1.0 / 9.0,
                carried: 0.0,
            },
        );
        let c = compare(
            Figure::Goodput,
            vec![measured; 3],
            measured * 10.0 / 9.0,
            one,
        );
        assert!((c.bound - (0.10 + 1.0 / 9.0)).abs() < 1e-12);
        assert!(!c.flagged, "{c:?}");
        // A rate 10 % off and a request more is beyond.
        let c = compare(
            Figure::Goodput,
            vec![measured; 3],
            measured * 1.11 * 10.0 / 9.0,
            one,
        );
        assert!(c.flagged, "{c:?}");
        // Without the resolution the request alone was beyond.
        assert!(
            compare(
                Figure::Goodput,
                vec![measured; 3],
                measured * 10.0 / 9.0,
                Slack::default()
            )
            .flagged
        );
    }

    #[test]
    fn what_the_decode_step_carries_in_widens_the_bound() {
        // vLLM's Poisson cell in CI: TTFT p50 (slot waits) 18.9 % below the measured 316.7
        // ms; with the decode step set to the measured TPOT the twin said 290.0 against
        // its 256.8 ms, 10.5 % of the measured carried in.
        let slack = Slack {
            resolution: 0.0,
            carried: (290.0 - 256.8) / 316.7,
        };
        let c = compare(Figure::TtftP50, vec![0.3167], 0.2568, slack);
        assert!((c.bound - (0.10 + slack.carried)).abs() < 1e-12);
        assert!(!c.flagged, "{c:?}");
        assert!(compare(Figure::TtftP50, vec![0.3167], 0.2568, Slack::default()).flagged);
        // The spread's floor still applies where it is the larger.
        let c = compare(Figure::TtftP50, vec![0.2, 0.4], 0.3, slack);
        assert!((c.bound - 1.5 * 2.0 / 3.0).abs() < 1e-12, "{c:?}");
    }

    #[test]
    fn zeros_and_ratios_have_errors_that_mean_something() {
        assert_eq!(
            compare(Figure::Goodput, vec![0.0], 0.0, Slack::default()).error,
            0.0
        );
        assert_eq!(
            compare(Figure::Goodput, vec![0.0], 2.0, Slack::default()).error,
            1.0
        );
        let c = compare(Figure::HitRatio, vec![0.60], 0.52, Slack::default());
        assert!(
            (c.error - 0.08).abs() < 1e-12,
            "points, not a ratio of ratios"
        );
        assert!(!c.flagged);
        assert!(compare(Figure::HitRatio, vec![0.60], 0.45, Slack::default()).flagged);
        assert!(compare(Figure::TtftP50, vec![0.1], f64::NAN, Slack::default()).flagged);
    }
}
