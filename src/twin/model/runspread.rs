//! How much one run of a cell moves from the next, measured on the real server rather than
//! read off the twin's own (deterministic) requests: calibration's closed-loop cells held
//! request by request against the twin's prediction of them, in blocks of `BLOCK`; the
//! blocks' pooled scatter is a figure's spread over `BLOCK` requests, which the bands scale
//! to each cell's size. The method: docs/twin.md, "Bands: what they rest on", term 3.

use crate::record::load::RequestRecord;
use crate::stats::quantile;
use serde::{Deserialize, Serialize};

/// Requests per block: four blocks in a 16-request calibration cell, three degrees of
/// freedom each, nine over the default c = 1, 2, 4.
pub const BLOCK: usize = 4;

/// Each figure's relative spread over `BLOCK` consecutive requests (a standard deviation
/// of log measured / predicted), pooled over calibration's cells.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunSpread {
    pub block_requests: usize,
    pub ttft_p50: f64,
    pub ttft_p99: f64,
    pub tpot_p50: f64,
    /// Mean e2e: a closed loop's throughput is its clients over it.
    pub e2e_mean: f64,
    /// Degrees of freedom the pooled variances rest on.
    pub dof: usize,
}

impl RunSpread {
    pub fn values(&self) -> [(&'static str, f64); 4] {
        [
            ("ttft_p50", self.ttft_p50),
            ("ttft_p99", self.ttft_p99),
            ("tpot_p50", self.tpot_p50),
            ("e2e_mean", self.e2e_mean),
        ]
    }

    /// The spreads at a cell of `n` requests: TTFT p50, TTFT p99, TPOT p50, mean e2e.
    pub fn at(&self, n: usize) -> [f64; 4] {
        let k = (self.block_requests as f64 / n.max(1) as f64).sqrt();
        [
            self.ttft_p50 * k,
            self.ttft_p99,
            self.tpot_p50 * k,
            self.e2e_mean * k,
        ]
    }
}

/// A request's send order, and its TTFT, TPOT and e2e.
pub type Req = (u64, [f64; 3]);

/// The requests of `qs` that completed with every figure.
pub fn requests<'a>(qs: impl IntoIterator<Item = &'a RequestRecord>) -> Vec<Req> {
    qs.into_iter()
        .filter(|q| q.ok)
        .filter_map(|q| Some((q.index, [q.ttft_s?, q.tpot_s?, q.e2e_s?])))
        .filter(|(_, v)| v.iter().all(|x| x.is_finite() && *x > 0.0))
        .collect()
}

/// A block's figures: TTFT p50, TTFT p99, TPOT p50, mean e2e.
fn figures(block: &[[f64; 3]]) -> Option<[f64; 4]> {
    let col = |i: usize| block.iter().map(|r| r[i]).collect::<Vec<f64>>();
    let (ttft, tpot, e2e) = (col(0), col(1), col(2));
    Some([
        quantile(&ttft, 0.5)?,
        quantile(&ttft, 0.99)?,
        quantile(&tpot, 0.5)?,
        e2e.iter().sum::<f64>() / e2e.len() as f64,
    ])
}

/// Per block of one cell: log measured / predicted of each figure. Requests are matched by
/// send order; those either side lacks are left out.
fn cell_blocks(measured: &[Req], predicted: &[Req]) -> Vec<[f64; 4]> {
    let pred: std::collections::BTreeMap<u64, [f64; 3]> = predicted.iter().copied().collect();
    let mut pairs: Vec<(u64, [f64; 3], [f64; 3])> = measured
        .iter()
        .filter_map(|&(i, m)| Some((i, m, *pred.get(&i)?)))
        .collect();
    pairs.sort_by_key(|p| p.0);
    pairs
        .chunks_exact(BLOCK)
        .filter_map(|b| {
            let m = figures(&b.iter().map(|p| p.1).collect::<Vec<_>>())?;
            let p = figures(&b.iter().map(|p| p.2).collect::<Vec<_>>())?;
            let r: [f64; 4] = std::array::from_fn(|i| (m[i] / p[i]).ln());
            r.iter().all(|x| x.is_finite()).then_some(r)
        })
        .collect()
}

/// The pooled within-cell spread over `cells` (each: its measured requests, the twin's
/// prediction of them); `None` without two blocks in any cell.
pub fn estimate(cells: &[(Vec<Req>, Vec<Req>)]) -> Option<RunSpread> {
    let mut ss = [0.0; 4];
    let mut dof = 0;
    for (m, p) in cells {
        let blocks = cell_blocks(m, p);
        if blocks.len() < 2 {
            continue;
        }
        for (i, s) in ss.iter_mut().enumerate() {
            let mean = blocks.iter().map(|b| b[i]).sum::<f64>() / blocks.len() as f64;
            *s += blocks.iter().map(|b| (b[i] - mean).powi(2)).sum::<f64>();
        }
        dof += blocks.len() - 1;
    }
    (dof > 0).then(|| {
        let sd = ss.map(|s| (s / dof as f64).sqrt());
        RunSpread {
            block_requests: BLOCK,
            ttft_p50: sd[0],
            ttft_p99: sd[1],
            tpot_p50: sd[2],
            e2e_mean: sd[3],
            dof,
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(index: u64, ttft: f64, tpot: f64) -> Req {
        (index, [ttft, tpot, ttft + 31.0 * tpot])
    }

    #[test]
    fn the_schedule_cancels_and_the_noise_remains() {
        // The twin's schedule: TTFT grows with the queue position (0.1 … 1.6 s). The server
        // is that schedule, every other block 10 % slow, the rest 10 % fast.
        let predicted: Vec<Req> = (0..16)
            .map(|i| req(i, 0.1 * (i + 1) as f64, 0.01))
            .collect();
        let measured: Vec<Req> = predicted
            .iter()
            .map(|&(i, [ttft, ..])| {
                let f = if (i / BLOCK as u64).is_multiple_of(2) {
                    1.1
                } else {
                    0.9
                };
                req(i, ttft * f, 0.01 * f)
            })
            .collect();
        let s = estimate(&[(measured, predicted.clone())]).expect("four blocks");
        assert_eq!(s.dof, 3);
        // ln 1.1 and ln 0.9, two blocks each: their sd about the mean, n − 1 = 3.
        let (a, b) = (1.1f64.ln(), 0.9f64.ln());
        let mean = (a + b) / 2.0;
        let sd = ((2.0 * (a - mean).powi(2) + 2.0 * (b - mean).powi(2)) / 3.0).sqrt();
        for (n, v) in s.values() {
            assert!((v - sd).abs() < 1e-9, "{n}: {v} vs {sd}");
        }
        // The same server without noise: nothing left, however wide the schedule.
        let s = estimate(&[(predicted.clone(), predicted.clone())]).expect("four blocks");
        assert!(s.values().iter().all(|(_, v)| *v < 1e-12), "{s:?}");
        // A cell of 16 requests is four blocks: the p50's spread halves, the tail's stays.
        let at = RunSpread {
            block_requests: 4,
            ttft_p50: 0.2,
            ttft_p99: 0.2,
            tpot_p50: 0.2,
            e2e_mean: 0.2,
            dof: 3,
        }
        .at(16);
        assert_eq!(at, [0.1, 0.2, 0.1, 0.1]);
        // Fewer than two blocks: nothing to compare.
        let few: Vec<Req> = predicted.iter().take(5).copied().collect();
        assert!(estimate(&[(few.clone(), few)]).is_none());
    }
}
