//! Every predicted figure's 90 % prediction interval. The prediction is run again on each
//! bootstrap replicate of the step model (the coefficients' uncertainty: the profile's
//! `uncertainty.replicates`); the replicates' relative standard deviation is combined with
//! the server's own run-to-run spread (`uncertainty.spread`) into ±1.645 σ around the
//! prediction. Where the prediction leans on a term the calibration did not identify
//! (`envelope.rs` says which), the band is stretched over the predictions at that term's
//! interval ends, so that it still covers.

use super::engine::Twin;
use super::envelope::Unknown;
use super::profile::{Coefficients, Spread};
use crate::load::LoadResult;
use crate::record::load::{CellBand, CellRecord, Interval, TpotBand, TtftBand};
use crate::sim::scheduler::EngineConfig;

/// z of a two-sided 90 % interval.
pub const Z90: f64 = 1.645;

/// The engine of `engine` with the step model's coefficients `c` (limits unchanged: a
/// what-if's knobs stay as set).
pub fn apply(engine: &EngineConfig, c: &Coefficients) -> EngineConfig {
    let mut e = engine.clone();
    let m = &mut e.cost.model;
    m.t0 = c.t0_s;
    m.p0 = c.p0_tps;
    m.q = c.q_s_per_token2;
    m.d0 = c.d0_s;
    m.d1 = c.d1_s_per_token;
    e.cost.d2 = c.d2_s_per_request;
    e
}

/// The figures a band is given for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BandFigure {
    TtftP50,
    TtftP99,
    TpotP50,
    OutputTps,
    Goodput,
}

impl BandFigure {
    pub const ALL: [BandFigure; 5] = [
        BandFigure::TtftP50,
        BandFigure::TtftP99,
        BandFigure::TpotP50,
        BandFigure::OutputTps,
        BandFigure::Goodput,
    ];

    pub fn of(self, c: &CellRecord) -> Option<f64> {
        match self {
            BandFigure::TtftP50 => c.ttft_s.map(|p| p.p50),
            BandFigure::TtftP99 => c.ttft_s.map(|p| p.p99),
            BandFigure::TpotP50 => c.tpot_s.map(|p| p.p50),
            BandFigure::OutputTps => c.output_tps,
            BandFigure::Goodput => c.goodput_rps,
        }
    }

    fn spread(self, s: &Spread) -> f64 {
        match self {
            BandFigure::TtftP50 => s.ttft_p50,
            BandFigure::TtftP99 => s.ttft_p99,
            BandFigure::TpotP50 => s.tpot_p50,
            BandFigure::OutputTps => s.output_tps,
            BandFigure::Goodput => s.goodput_rps,
        }
    }

    /// This figure's interval in a band.
    pub fn within(self, b: &CellBand) -> Option<Interval> {
        match self {
            BandFigure::TtftP50 => b.ttft_s.as_ref().map(|t| t.p50),
            BandFigure::TtftP99 => b.ttft_s.as_ref().map(|t| t.p99),
            BandFigure::TpotP50 => b.tpot_s.as_ref().map(|t| t.p50),
            BandFigure::OutputTps => b.output_tps,
            BandFigure::Goodput => b.goodput_rps,
        }
    }
}

/// One figure's interval: `point` ± Z90 × the replicates' and the server's spread
/// combined, stretched over `extremes` (each ± the server's spread).
pub fn interval(point: f64, replicates: &[f64], spread: f64, extremes: &[f64]) -> Interval {
    let n = replicates.len() as f64;
    let coef = if n >= 2.0 && point != 0.0 {
        let mean = replicates.iter().sum::<f64>() / n;
        let var = replicates.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0);
        // The replicates' bias from the point counts too: a band is around the prediction.
        (var + (mean - point).powi(2)).sqrt() / point.abs()
    } else {
        0.0
    };
    let half = Z90 * coef.hypot(spread);
    let mut lo = point * (1.0 - half);
    let mut hi = point * (1.0 + half);
    for &x in extremes.iter().filter(|x| x.is_finite()) {
        lo = lo.min(x * (1.0 - Z90 * spread));
        hi = hi.max(x * (1.0 + Z90 * spread));
    }
    [lo.max(0.0), hi]
}

/// Bands for every cell of `point` (a prediction by `twin`): `predict` re-runs the same
/// plan on another twin. Cells of `point` are matched by key.
pub fn bands(
    twin: &Twin,
    point: &mut LoadResult,
    unknown: &[Unknown],
    predict: impl Fn(&Twin) -> anyhow::Result<LoadResult>,
) -> anyhow::Result<()> {
    // An exact profile (the simulator's own parameters) has no replicates and no host
    // spread: its bands are the cells' sampling spread alone.
    let (coefs, host) = match &twin.profile.uncertainty {
        Some(u) => (u.replicates.as_slice(), u.spread.clone()),
        None => (&[][..], zero_spread()),
    };
    let rerun = |c: &Coefficients| -> anyhow::Result<LoadResult> {
        let mut t = twin.clone();
        t.engine = apply(&twin.engine, c);
        predict(&t)
    };
    let replicates = coefs
        .iter()
        .map(rerun)
        .collect::<anyhow::Result<Vec<_>>>()?;
    let extremes = unknown
        .iter()
        .flat_map(|k| k.alternatives.iter())
        .map(rerun)
        .collect::<anyhow::Result<Vec<_>>>()?;
    for c in &mut point.cells {
        let find = |r: &LoadResult| r.cells.iter().find(|x| x.cell.same(&c.cell)).cloned();
        let reps: Vec<CellRecord> = replicates.iter().filter_map(find).collect();
        let ext: Vec<CellRecord> = extremes.iter().filter_map(find).collect();
        let requests: Vec<(f64, f64, f64)> = point
            .requests
            .iter()
            .filter(|q| q.ok && q.cell.same(&c.cell))
            .filter_map(|q| Some((q.ttft_s?, q.tpot_s?, q.e2e_s?)))
            .collect();
        let spread = with_sampling(&host, &requests);
        c.band = Some(band_of(c, &reps, &ext, &spread));
    }
    Ok(())
}

/// The host's spread combined with the cell's own sampling spread (its figures over
/// resampled requests of the prediction: a p50 of 8 requests moves more than one of 64).
fn with_sampling(host: &Spread, requests: &[(f64, f64, f64)]) -> Spread {
    let Some([p50, p99, tpot, e2e]) = super::bootstrap::request_spread(requests) else {
        return host.clone();
    };
    Spread {
        ttft_p50: host.ttft_p50.hypot(p50),
        ttft_p99: host.ttft_p99.hypot(p99),
        tpot_p50: host.tpot_p50.hypot(tpot),
        output_tps: host.output_tps.hypot(e2e),
        goodput_rps: host.goodput_rps.hypot(e2e),
        source: host.source.clone(),
    }
}

fn zero_spread() -> Spread {
    Spread {
        ttft_p50: 0.0,
        ttft_p99: 0.0,
        tpot_p50: 0.0,
        output_tps: 0.0,
        goodput_rps: 0.0,
        source: String::new(),
    }
}

fn band_of(c: &CellRecord, reps: &[CellRecord], ext: &[CellRecord], s: &Spread) -> CellBand {
    let one = |f: BandFigure| -> Option<Interval> {
        let point = f.of(c)?;
        let r: Vec<f64> = reps.iter().filter_map(|x| f.of(x)).collect();
        let e: Vec<f64> = ext.iter().filter_map(|x| f.of(x)).collect();
        Some(interval(point, &r, f.spread(s), &e))
    };
    CellBand {
        ttft_s: match (one(BandFigure::TtftP50), one(BandFigure::TtftP99)) {
            (Some(p50), Some(p99)) => Some(TtftBand { p50, p99 }),
            _ => None,
        },
        tpot_s: one(BandFigure::TpotP50).map(|p50| TpotBand { p50 }),
        output_tps: one(BandFigure::OutputTps),
        goodput_rps: one(BandFigure::Goodput),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_interval_combines_the_replicates_and_the_spread_and_covers_the_extremes() {
        // Replicates 0.9, 1.1 around 1.0: sd 0.1414; spread 0.1 → half 1.645 × 0.1732.
        let [lo, hi] = interval(1.0, &[0.9, 1.1], 0.1, &[]);
        let half = Z90 * (0.02f64 + 0.01).sqrt();
        assert!((lo - (1.0 - half)).abs() < 1e-12 && (hi - (1.0 + half)).abs() < 1e-12);
        // An unidentified term's interval end predicts 2.0: the band reaches past it.
        let [_, hi] = interval(1.0, &[0.9, 1.1], 0.1, &[2.0]);
        assert!((hi - 2.0 * (1.0 + Z90 * 0.1)).abs() < 1e-12);
        // No spread, no replicates: the point.
        assert_eq!(interval(3.0, &[], 0.0, &[]), [3.0, 3.0]);
        // Never below zero.
        assert_eq!(interval(1.0, &[], 1.0, &[])[0], 0.0);
    }
}
