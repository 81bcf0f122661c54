//! Every predicted figure's 90 % prediction interval: where one run of the predicted cell
//! on the real server will land, nine times in ten. The prediction × e^(±1.645 σ), σ the
//! coefficients' (bootstrap replicates), the host's and one run's spread in quadrature,
//! stretched over the unidentified terms' alternatives and the jittered schedules; how
//! far the schedules moved each figure is returned ([`ScheduleMoves`]). The method and its
//! measured figures: docs/twin.md, "Bands: what they rest on".

use crate::load::LoadResult;
use crate::record::load::{CellBand, CellKey, CellRecord, Interval, TpotBand, TtftBand};
use crate::twin::model::figure::Figure;
use crate::twin::model::profile::{Coefficients, Spread};
use crate::twin::model::runspread::RunSpread;
use crate::twin::model::twin::Twin;
use crate::twin::uncertainty::reruns::{Cells, Figures, Judge, Reran, Reruns, figures, rerun};
use crate::twin::uncertainty::unknowns::Unknown;

/// z of a two-sided 90 % interval.
pub const Z90: f64 = 1.645;

/// Jittered schedules a band spans beside the twin's own.
pub const SCHEDULES: u64 = 8;

/// One figure's interval: `point` × e^(± Z90 σ), σ the replicates' and the server's
/// spread combined (relative, as logs: a time or a rate is positive, and its noise is a
/// factor — 30 % slower and 30 % faster are not the same distance below and above),
/// stretched over `extremes` (each × e^(± Z90 × the server's spread)).
pub fn interval(point: f64, replicates: &[f64], spread: f64, extremes: &[f64]) -> Interval {
    if !(point.is_finite() && point > 0.0) {
        let p = if point.is_finite() {
            point.max(0.0)
        } else {
            0.0
        };
        return [p, p];
    }
    let logs: Vec<f64> = replicates
        .iter()
        .filter(|x| x.is_finite() && **x > 0.0)
        .map(|x| (x / point).ln())
        .collect();
    let n = logs.len() as f64;
    let coef = if n >= 2.0 {
        let mean = logs.iter().sum::<f64>() / n;
        let var = logs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0);
        // The replicates' offset from the point counts too: a band is around the prediction.
        (var + mean.powi(2)).sqrt()
    } else {
        0.0
    };
    let half = Z90 * coef.hypot(spread);
    let mut lo = point * (-half).exp();
    let mut hi = point * half.exp();
    let k = (Z90 * spread).exp();
    for &x in extremes.iter().filter(|x| x.is_finite() && **x >= 0.0) {
        lo = lo.min(x / k);
        hi = hi.max(x * k);
    }
    [lo, hi]
}

/// The figures of the cell `key` in `cells`.
fn find(cells: &Cells, key: &CellKey) -> Option<Figures> {
    cells.iter().find(|(k, _)| k.same(key)).map(|(_, f)| *f)
}

/// How far each predicted cell's figures move over the jittered schedules: the largest
/// |schedule − point| / point, per banded figure.
#[derive(Debug, Clone, Default)]
pub struct ScheduleMoves(Vec<(CellKey, [f64; 5])>);

impl ScheduleMoves {
    /// `f`'s move in the cell `key` (0 where no schedule was run).
    pub fn of(&self, key: &CellKey, f: Figure) -> f64 {
        self.0
            .iter()
            .find(|(k, _)| k.same(key))
            .map_or(0.0, |(_, m)| f.band_index().map_or(0.0, |i| m[i]))
    }

    /// Every cell's key, in the prediction's order.
    pub fn keys(&self) -> impl Iterator<Item = &CellKey> {
        self.0.iter().map(|(k, _)| k)
    }

    fn measure(point: &Figures, schedules: &[Figures]) -> [f64; 5] {
        std::array::from_fn(|i| {
            let Some(p) = point[i].filter(|p| *p > 0.0 && p.is_finite()) else {
                return 0.0;
            };
            schedules
                .iter()
                .filter_map(|c| c[i])
                .filter(|x| x.is_finite())
                .map(|x| (x / p - 1.0).abs())
                .fold(0.0, f64::max)
        })
    }
}

/// Bands for every cell of `point` (a prediction by `twin`): `predict` re-runs the same
/// plan on another twin. Cells of `point` are matched by key. Returns how far each cell's
/// figures moved over the schedules.
pub fn bands(
    twin: &Twin,
    point: &mut LoadResult,
    unknown: &[Unknown],
    predict: impl Fn(&Twin) -> anyhow::Result<LoadResult> + Sync,
) -> anyhow::Result<ScheduleMoves> {
    let reruns = Reruns {
        predict: &predict,
        sampled: false,
    };
    bands_by(twin, point, unknown, &reruns)
}

/// [`bands`], its reruns made by `reruns`.
pub fn bands_by(
    twin: &Twin,
    point: &mut LoadResult,
    unknown: &[Unknown],
    reruns: &Reruns,
) -> anyhow::Result<ScheduleMoves> {
    // An exact profile (the simulator's own parameters) states no uncertainty: its band is
    // the point.
    let (coefs, host, run) = match &twin.profile.uncertainty {
        Some(u) => (u.replicates.as_slice(), u.spread.clone(), u.run.as_ref()),
        None => (&[][..], zero_spread(), None),
    };
    let alternatives: Vec<&Coefficients> = unknown.iter().flat_map(|k| &k.alternatives).collect();
    let schedules = if twin.profile.uncertainty.is_some() {
        SCHEDULES
    } else {
        0
    };
    let spreads: Vec<Spread> = point
        .cells
        .iter()
        .map(|c| {
            let requests: Vec<(f64, f64, f64)> = point
                .requests
                .iter()
                .filter(|q| q.ok && q.cell.same(&c.cell))
                .filter_map(|q| Some((q.ttft_s?, q.tpot_s?, q.e2e_s?)))
                .collect();
            with_luck(&host, luck(run, &requests))
        })
        .collect();
    let cells: &[CellRecord] = &point.cells;
    let edges = |r: &Reran| -> Vec<f64> {
        judged(cells, r, &spreads)
            .0
            .iter()
            .flat_map(|b| Figure::BANDED.into_iter().filter_map(|f| f.within(b)))
            .flatten()
            .collect()
    };
    let schedules_move = |r: &Reran| {
        let moves = judged(cells, r, &spreads).1;
        moves.0.iter().any(|(_, m)| {
            Figure::BANDED
                .into_iter()
                .enumerate()
                .any(|(i, f)| m[i] > f.bound() / 2.0)
        })
    };
    let judge = Judge {
        edges: &edges,
        schedules_move: &schedules_move,
    };
    let reran = rerun(twin, coefs, &alternatives, schedules, reruns, &judge)?;
    let (bands, moves) = judged(&point.cells, &reran, &spreads);
    for (c, b) in point.cells.iter_mut().zip(bands) {
        c.band = Some(b);
    }
    Ok(moves)
}

/// Each cell's band (`spreads`: each cell's host and run spread) and how far the schedules
/// moved its figures, from what the reruns gave.
fn judged(cells: &[CellRecord], r: &Reran, spreads: &[Spread]) -> (Vec<CellBand>, ScheduleMoves) {
    let mut moves = ScheduleMoves::default();
    let mut bands = Vec::new();
    for (c, spread) in cells.iter().zip(spreads) {
        let p = figures(c);
        // A sample's figures, relative to the sample on the twin itself, applied to the
        // point; the whole plan's as they are.
        let of = |x: &Cells| -> Option<Figures> {
            let x = find(x, &c.cell)?;
            let Some(reference) = &r.reference else {
                return Some(x);
            };
            let base = find(reference, &c.cell)?;
            Some(std::array::from_fn(|i| match (p[i], base[i], x[i]) {
                (Some(p), Some(b), Some(x)) if b > 0.0 && b.is_finite() => Some(p * (x / b)),
                _ => None,
            }))
        };
        let reps: Vec<Figures> = r.replicates.iter().filter_map(of).collect();
        let sched: Vec<Figures> = r.schedules.iter().filter_map(of).collect();
        moves.0.push((c.cell, ScheduleMoves::measure(&p, &sched)));
        let ext: Vec<Figures> = r.alternatives.iter().filter_map(of).chain(sched).collect();
        bands.push(band_of(&p, &reps, &ext, spread));
    }
    (bands, moves)
}

/// One run's own luck at a cell of these predicted requests: the larger, per figure, of
/// the calibration's measured run spread at the cell's size and the predicted requests'
/// resampled spread (`None` where neither is known).
fn luck(run: Option<&RunSpread>, requests: &[(f64, f64, f64)]) -> Option<[f64; 4]> {
    let measured = run.map(|r| r.at(requests.len()));
    let sampled = crate::twin::fit::bootstrap::request_spread(requests);
    match (measured, sampled) {
        (Some(m), Some(s)) => Some(std::array::from_fn(|i| m[i].max(s[i]))),
        (m, s) => m.or(s),
    }
}

/// The host's spread combined with one run's luck.
fn with_luck(host: &Spread, luck: Option<[f64; 4]>) -> Spread {
    let Some([p50, p99, tpot, e2e]) = luck else {
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

fn band_of(p: &Figures, reps: &[Figures], ext: &[Figures], s: &Spread) -> CellBand {
    let one = |f: Figure| -> Option<Interval> {
        let i = f.band_index()?;
        let point = p[i]?;
        let r: Vec<f64> = reps.iter().filter_map(|x| x[i]).collect();
        let e: Vec<f64> = ext.iter().filter_map(|x| x[i]).collect();
        Some(interval(point, &r, f.spread(s)?, &e))
    };
    CellBand {
        ttft_s: match (one(Figure::TtftP50), one(Figure::TtftP99)) {
            (Some(p50), Some(p99)) => Some(TtftBand { p50, p99 }),
            _ => None,
        },
        tpot_s: one(Figure::TpotP50).map(|p50| TpotBand { p50 }),
        output_tps: one(Figure::OutputTps),
        goodput_rps: one(Figure::Goodput),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_interval_combines_the_replicates_and_the_spread_and_covers_the_extremes() {
        // Replicates e^∓0.1 around 1.0: log sd 0.1414; spread 0.1 → half 1.645 × 0.1732.
        let r = [(-0.1f64).exp(), 0.1f64.exp()];
        let [lo, hi] = interval(1.0, &r, 0.1, &[]);
        let half = Z90 * (0.02f64 + 0.01).sqrt();
        assert!((lo - (-half).exp()).abs() < 1e-12 && (hi - half.exp()).abs() < 1e-12);
        // A factor either way: as far below as above, in ratio.
        assert!((hi * lo - 1.0).abs() < 1e-12);
        // An unidentified term's interval end predicts 2.0: the band reaches past it.
        let [_, hi] = interval(1.0, &r, 0.1, &[2.0]);
        assert!((hi - 2.0 * (Z90 * 0.1).exp()).abs() < 1e-12);
        // No spread, no replicates: the point; a zero point stays zero, never below.
        assert_eq!(interval(3.0, &[], 0.0, &[]), [3.0, 3.0]);
        assert_eq!(interval(0.0, &[1.0, 2.0], 1.0, &[]), [0.0, 0.0]);
        assert!(interval(1.0, &[], 5.0, &[])[0] > 0.0);
    }

    #[test]
    fn a_run_adds_its_spread_at_the_cells_size() {
        let host = Spread {
            ttft_p50: 0.03,
            ttft_p99: 0.03,
            tpot_p50: 0.04,
            output_tps: 0.04,
            goodput_rps: 0.04,
            source: String::new(),
        };
        let run = RunSpread {
            block_requests: 4,
            ttft_p50: 0.08,
            ttft_p99: 0.2,
            tpot_p50: 0.06,
            e2e_mean: 0.06,
            dof: 9,
        };
        // 16 requests: four blocks, half the block's spread on the medians and the mean.
        let s = with_luck(&host, Some(run.at(16)));
        assert!((s.ttft_p50 - 0.03f64.hypot(0.04)).abs() < 1e-12);
        assert!((s.ttft_p99 - 0.03f64.hypot(0.2)).abs() < 1e-12);
        assert!((s.tpot_p50 - 0.04f64.hypot(0.03)).abs() < 1e-12);
        assert!((s.output_tps - 0.04f64.hypot(0.03)).abs() < 1e-12);
        // More requests, a narrower band; none measured, the host's spread alone.
        assert!(with_luck(&host, Some(run.at(64))).tpot_p50 < s.tpot_p50);
        assert_eq!(with_luck(&host, None), host);
        // Identical predicted requests resample to no spread: the measured run spread wins;
        // without either, no luck term.
        let same = vec![(0.1, 0.01, 0.5); 16];
        assert_eq!(luck(Some(&run), &same), Some(run.at(16)));
        assert_eq!(luck(None, &[]), None);
        // Requests that differ (a queue) resample to a spread the c ≤ slots blocks miss.
        let queued: Vec<_> = (0..16)
            .map(|i| (0.1 * (1 + i / 4) as f64, 0.01, 0.5))
            .collect();
        assert!(luck(Some(&run), &queued).unwrap()[0] > run.at(16)[0]);
    }
}
