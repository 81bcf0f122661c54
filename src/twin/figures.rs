//! The figures `twin check` holds a prediction to, each with its bound, and the error of a
//! predicted figure against one or several measurements of it (pure, for tests).
//!
//! A figure's error is its absolute percentage error against the measured mean (against
//! the prediction when the measurement is 0; hit ratios, themselves fractions, in points).
//! Its bound is the (10 % for medians and throughput, 25 % for tails), never tighter
//! than 1.5 times the spread of repeated measurements: no bound asks the twin to be closer
//! to the server than the server is to itself.

use crate::record::load::CellRecord;

/// Repeated measurements of a figure bound it at this many times their spread.
pub const SPREAD_FACTOR: f64 = 1.5;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Figure {
    TtftP50,
    TtftP90,
    TtftP99,
    TpotP50,
    OutputTps,
    Goodput,
    HitRatio,
}

impl Figure {
    pub const ALL: [Figure; 7] = [
        Figure::TtftP50,
        Figure::TtftP90,
        Figure::TtftP99,
        Figure::TpotP50,
        Figure::OutputTps,
        Figure::Goodput,
        Figure::HitRatio,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Figure::TtftP50 => "TTFT p50",
            Figure::TtftP90 => "TTFT p90",
            Figure::TtftP99 => "TTFT p99",
            Figure::TpotP50 => "TPOT p50",
            Figure::OutputTps => "output tok/s",
            Figure::Goodput => "goodput req/s",
            Figure::HitRatio => "hit ratio",
        }
    }

    /// The error a prediction may have, as a fraction (points for the hit ratio).
    pub fn bound(self) -> f64 {
        match self {
            Figure::TtftP50 | Figure::TpotP50 | Figure::OutputTps | Figure::Goodput => 0.10,
            Figure::TtftP90 | Figure::TtftP99 => 0.25,
            Figure::HitRatio => 0.10,
        }
    }

    /// The figure of a cell; `hit_ratio`: the replay's observed cached / input tokens.
    pub fn of(self, c: &CellRecord, hit_ratio: Option<f64>) -> Option<f64> {
        match self {
            Figure::TtftP50 => c.ttft_s.map(|p| p.p50),
            Figure::TtftP90 => c.ttft_s.map(|p| p.p90),
            Figure::TtftP99 => c.ttft_s.map(|p| p.p99),
            Figure::TpotP50 => c.tpot_s.map(|p| p.p50),
            Figure::OutputTps => c.output_tps,
            Figure::Goodput => c.goodput_rps,
            Figure::HitRatio => hit_ratio,
        }
    }

    /// The banded figure this is, if any.
    pub fn banded(self) -> Option<crate::twin::band::BandFigure> {
        use crate::twin::band::BandFigure as B;
        match self {
            Figure::TtftP50 => Some(B::TtftP50),
            Figure::TtftP99 => Some(B::TtftP99),
            Figure::TpotP50 => Some(B::TpotP50),
            Figure::OutputTps => Some(B::OutputTps),
            Figure::Goodput => Some(B::Goodput),
            Figure::TtftP90 | Figure::HitRatio => None,
        }
    }

    /// The value for a reader: ms for latencies, plain otherwise.
    pub fn show(self, v: f64) -> String {
        match self {
            Figure::TtftP50 | Figure::TtftP90 | Figure::TtftP99 | Figure::TpotP50 => {
                format!("{:.1} ms", v * 1e3)
            }
            Figure::OutputTps => format!("{v:.1}"),
            Figure::Goodput => format!("{v:.3}"),
            Figure::HitRatio => format!("{:.1} %", v * 100.0),
        }
    }
}

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

/// The term a figure leans on when the jittered schedules move it beyond its bound: which
/// path (prompts prefilled together or staggered, decoders in lockstep or behind each
/// other's prefill) the server takes run to run.
pub const SCHEDULE: &str = "schedule";

/// How far the schedules move `f` in the cell `key`, where that is beyond its bound.
fn schedule_move(
    moves: &crate::twin::band::ScheduleMoves,
    key: &crate::record::load::CellKey,
    f: Figure,
) -> Option<f64> {
    let m = moves.of(key, f.banded()?);
    (m > f.bound()).then_some(m)
}

/// Whether the schedules move `f` beyond its bound in the cell `key`.
pub fn leans_on_schedule(
    moves: &crate::twin::band::ScheduleMoves,
    key: &crate::record::load::CellKey,
    f: Figure,
) -> bool {
    schedule_move(moves, key, f).is_some()
}

/// One `warning:` line per cell whose figures the schedules move beyond their bounds.
pub fn schedule_warnings(moves: &crate::twin::band::ScheduleMoves) -> Vec<String> {
    moves
        .keys()
        .filter_map(|key| {
            let moved: Vec<String> = Figure::ALL
                .into_iter()
                .filter_map(|f| {
                    let m = schedule_move(moves, key, f)?;
                    Some(format!("{} by {:.0} %", f.name(), m * 100.0))
                })
                .collect();
            (!moved.is_empty()).then(|| {
                format!(
                    "cell {} {}: the {SCHEDULE} is not identified: requests landing elsewhere \
                     in a step move {} (prompts prefilled together or staggered); its band \
                     spans those paths, and only measuring the cell shows which this server takes",
                    key.context_tokens,
                    key.load_label(),
                    moved.join(", ")
                )
            })
        })
        .collect()
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
