//! A closed-loop cell's decode steps as the client saw them, each inter-token gap labelled
//! by the batch that ran it: how many of the cell's requests were decoding through the
//! whole gap. A gap during which another request was being prefilled (or started or
//! finished decoding) is a mixed step and left out, so neither a neighbour's prompt nor a
//! batch that changed mid-gap is read as a decode step. Per batch, the median gap and the
//! mean (the rate a request sees): far apart when the steps are bimodal, as on a server
//! that decodes one request at a time under an unfair lock.

use crate::record::load::{CellRecord, RequestRecord};
use crate::stats::median;
use serde::Serialize;
use std::collections::BTreeMap;

/// Mean and median of a batch's gaps further apart than this (relative to the median), or
/// a median whose 95 % interval is wider than ± this: the steps are bimodal and the median
/// does not say what a request's step costs.
pub const BIMODAL: f64 = 0.25;
/// Fewest clean gaps a batch's point rests on.
const MIN_GAPS: usize = 8;

/// The decode steps of one cell at one batch.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CellSteps {
    pub concurrency: u32,
    /// Requests decoding through each of these gaps.
    pub batch: u32,
    pub context_tokens: u64,
    pub prompt_tokens: u64,
    pub output_tokens: u64,
    /// Median of the clean gaps.
    pub itl_p50_s: f64,
    /// 95 % interval of that median, from the order statistics of the pooled gaps.
    pub itl_p50_ci95_s: [f64; 2],
    /// Mean of the clean gaps.
    pub itl_mean_s: f64,
    pub gaps: usize,
    pub requests: usize,
    /// Each request's clean gaps at this batch, for resampling.
    #[serde(skip)]
    pub per_request: Vec<Vec<f64>>,
}

impl CellSteps {
    /// A cell's point with no gaps yet (`with_requests` fills them in).
    pub fn empty(concurrency: u32, batch: u32, prompt_tokens: u64, output_tokens: u64) -> Self {
        CellSteps {
            concurrency,
            batch,
            context_tokens: prompt_tokens,
            prompt_tokens,
            output_tokens,
            itl_p50_s: 0.0,
            itl_p50_ci95_s: [0.0, 0.0],
            itl_mean_s: 0.0,
            gaps: 0,
            requests: 0,
            per_request: Vec::new(),
        }
    }

    /// Mean context of one request's decode steps.
    pub fn decode_context(&self) -> u64 {
        self.prompt_tokens + self.output_tokens / 2
    }

    /// Whether the median misleads: see [`BIMODAL`].
    pub fn bimodal(&self) -> bool {
        let m = self.itl_p50_s;
        let [lo, hi] = self.itl_p50_ci95_s;
        (self.itl_mean_s / m - 1.0).abs() > BIMODAL || (hi - lo) / 2.0 > BIMODAL * m
    }

    /// The same cell with its statistics recomputed over `per_request` (a resample).
    pub fn with_requests(&self, per_request: Vec<Vec<f64>>) -> Option<CellSteps> {
        let mut gaps: Vec<f64> = per_request.iter().flatten().copied().collect();
        if gaps.len() < 2 {
            return None;
        }
        gaps.sort_by(f64::total_cmp);
        Some(CellSteps {
            itl_p50_s: sorted_median(&gaps),
            itl_p50_ci95_s: median_ci95(&gaps),
            itl_mean_s: gaps.iter().sum::<f64>() / gaps.len() as f64,
            gaps: gaps.len(),
            requests: per_request.iter().filter(|g| !g.is_empty()).count(),
            per_request,
            ..self.clone()
        })
    }
}

/// One request's decode phase on the cell's clock.
struct Span {
    sent: f64,
    first: f64,
    end: f64,
}

fn span(q: &RequestRecord) -> Option<Span> {
    let first = q.sent_s + q.ttft_s?;
    let end = q.ended_s.unwrap_or(first + q.itl_s.iter().sum::<f64>());
    Some(Span {
        sent: q.sent_s,
        first,
        end,
    })
}

/// The cell's clean gaps grouped by batch, one point per batch with enough of them.
pub fn cell_steps(cell: &CellRecord, c: u32, requests: &[&RequestRecord]) -> Vec<CellSteps> {
    let ok: Vec<&RequestRecord> = requests.iter().copied().filter(|q| q.ok).collect();
    let spans: Vec<Option<Span>> = ok.iter().map(|q| span(q)).collect();
    // batch → one list of clean gaps per request.
    let mut by_batch: BTreeMap<u32, Vec<Vec<f64>>> = BTreeMap::new();
    for (i, q) in ok.iter().enumerate() {
        let Some(me) = &spans[i] else { continue };
        let mut t = me.first;
        let mut mine: BTreeMap<u32, Vec<f64>> = BTreeMap::new();
        for &g in &q.itl_s {
            let (a, b) = (t, t + g);
            t = b;
            if !(g.is_finite() && g > 0.0) {
                continue;
            }
            // Streams of one step reach the client microseconds apart: an event within a
            // quarter of the gap of its boundary belongs to that boundary.
            let slack = g / 4.0;
            let mut batch = 1;
            let mut mixed = false;
            for (j, o) in spans.iter().enumerate() {
                let Some(o) = o else { continue };
                if j == i {
                    continue;
                }
                if o.first <= a + slack && o.end >= b - slack {
                    batch += 1;
                } else if o.sent < b - slack && o.end > a + slack {
                    // Its prefill, its start or its finish fell inside this gap.
                    mixed = true;
                }
            }
            if !mixed {
                mine.entry(batch).or_default().push(g);
            }
        }
        for (b, gaps) in mine {
            by_batch.entry(b).or_default().push(gaps);
        }
    }
    let prompt: Vec<f64> = ok
        .iter()
        .map(|q| q.prompt_tokens.unwrap_or(cell.cell.context_tokens) as f64)
        .collect();
    let output: Vec<f64> = ok
        .iter()
        .filter_map(|q| q.output_tokens.map(|o| o as f64))
        .collect();
    let (Some(prompt), Some(output)) = (median(&prompt), median(&output)) else {
        return Vec::new();
    };
    by_batch
        .into_iter()
        .filter(|(_, per)| per.iter().map(Vec::len).sum::<usize>() >= MIN_GAPS)
        .filter_map(|(batch, per)| {
            let empty = CellSteps {
                context_tokens: cell.cell.context_tokens,
                ..CellSteps::empty(c, batch, prompt.round() as u64, output.round() as u64)
            };
            empty.with_requests(per)
        })
        .collect()
}

pub fn sorted_median(sorted: &[f64]) -> f64 {
    let n = sorted.len();
    if n % 2 == 1 {
        sorted[n / 2]
    } else {
        (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0
    }
}

/// Distribution-free 95 % interval of the median of sorted values: the order statistics
/// n/2 ∓ 1.96·√n/2 (the binomial count below the median, normal approximation).
pub fn median_ci95(sorted: &[f64]) -> [f64; 2] {
    let n = sorted.len() as f64;
    let half = 1.96 * n.sqrt() / 2.0;
    let lo = ((n / 2.0 - half).floor().max(0.0)) as usize;
    let hi = ((n / 2.0 + half).ceil() as usize).min(sorted.len() - 1);
    [sorted[lo], sorted[hi]]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::load::CellKey;

    fn request(sent: f64, ttft: f64, gaps: Vec<f64>) -> RequestRecord {
        let end = sent + ttft + gaps.iter().sum::<f64>();
        RequestRecord {
            cell: CellKey::default(),
            sent_s: sent,
            ttft_s: Some(ttft),
            ended_s: Some(end),
            itl_s: gaps,
            prompt_tokens: Some(1000),
            output_tokens: Some(9),
            ok: true,
            ..Default::default()
        }
    }

    #[test]
    fn gaps_are_labelled_by_the_batch_and_mixed_steps_left_out() {
        // A decodes alone for eight 1 ms steps; B is sent at 18.5 ms and prefilled in a
        // step that stalls A (11.5 ms); then both decode at 2 ms a step, A for eight steps,
        // B for ten (its last two alone, at 1 ms).
        let mut ga = vec![0.001; 8];
        ga.push(0.0115);
        ga.extend([0.002; 8]);
        let a = request(0.0, 0.010, ga);
        let mut gb = vec![0.002; 8];
        gb.extend([0.001; 2]);
        let b = request(0.0185, 0.011, gb);
        let pts = cell_steps(&CellRecord::default(), 2, &[&a, &b]);
        let got: Vec<(u32, usize, f64)> = pts
            .iter()
            .map(|p| (p.batch, p.gaps, (p.itl_p50_s * 1e6).round()))
            .collect();
        // Batch 1: A's eight and B's two; batch 2: eight each; A's stall is left out.
        assert_eq!(got, vec![(1, 10, 1000.0), (2, 16, 2000.0)], "{pts:?}");
        assert_eq!(pts[1].requests, 2);
    }

    #[test]
    fn an_unfair_lock_reads_as_bimodal() {
        // Two requests sharing one lock unfairly: each gets five 1 ms tokens in a row,
        // then waits 5 ms. Median 1 ms, mean 1.8 ms.
        let pattern: Vec<f64> = (0..40)
            .map(|i| if i % 5 == 4 { 0.005 } else { 0.001 })
            .collect();
        let steps = CellSteps::empty(2, 2, 1000, 41);
        let s = steps.with_requests(vec![pattern.clone(), pattern]).unwrap();
        assert!((s.itl_p50_s - 0.001).abs() < 1e-12);
        assert!((s.itl_mean_s - 0.0018).abs() < 1e-12);
        assert!(s.bimodal());
        let even = steps.with_requests(vec![vec![0.002; 40]; 2]).unwrap();
        assert!(!even.bimodal());
    }

    #[test]
    fn the_median_interval_brackets_the_median_and_narrows_with_n() {
        let few: Vec<f64> = (0..10).map(f64::from).collect();
        let many: Vec<f64> = (0..1000).map(|i| f64::from(i) / 100.0).collect();
        let [a, b] = median_ci95(&few);
        assert!(a <= sorted_median(&few) && sorted_median(&few) <= b);
        let [c, d] = median_ci95(&many);
        assert!(c <= sorted_median(&many) && sorted_median(&many) <= d);
        // Both span 0..10: the interval over 1000 values is a fraction of the one over 10.
        assert!((d - c) < (b - a) / 4.0, "{c}..{d} vs {a}..{b}");
    }
}
