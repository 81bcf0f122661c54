//! The decode law's batch terms: d1 and the batch-1 intercept from the sweep, the
//! per-decoding-request cost d2 from the closed-loop cells' steps labelled by batch
//! (`batch_steps.rs`), whose median gap at batch b is I + d2·(b−1) + d1·Σcontext, and d0 = I − d2.
//! Split from `laws.rs`: the batch law's estimators, their intervals, and when they are
//! unidentified (bimodal cells, an interval reaching zero, no batch ≥ 2 measured).

use crate::fit::DecodeStepFit;
use crate::twin::fit::inputs::CellSteps;
use crate::twin::fit::interval::{Z95, half_width, interval};
use crate::twin::model::profile::Estimate;
use serde_json::{Value, json};

/// A cell's decoding batch b (as labelled from the requests' timelines) and its step less
/// attention, gap − d1·Σcontext: one point of the per-request law. `mean`: the mean gap
/// rather than the median.
fn batch_point(c: &CellSteps, d1: &Estimate, mean: bool) -> (f64, f64) {
    let b = f64::from(c.batch.max(1));
    let gap = if mean { c.itl_mean_s } else { c.itl_p50_s };
    (b, gap - d1.value * b * c.decode_context() as f64)
}

/// The slope of the per-request law through the cells' mean gaps: what d2 would be if the
/// medians of bimodal cells misled.
fn mean_slope(cells: &[CellSteps], d1: &Estimate) -> Option<f64> {
    let pts: Vec<(f64, f64)> = cells.iter().map(|c| batch_point(c, d1, true)).collect();
    let n = pts.len() as f64;
    let mb = pts.iter().map(|p| p.0).sum::<f64>() / n;
    let my = pts.iter().map(|p| p.1).sum::<f64>() / n;
    let sxx: f64 = pts.iter().map(|p| (p.0 - mb).powi(2)).sum();
    (sxx > 0.0).then(|| pts.iter().map(|p| (p.0 - mb) * (p.1 - my)).sum::<f64>() / sxx)
}

/// d2 from the cells: a straight line through their `batch_point`s; its interval
/// propagates each median's interval and d1's.
fn per_request(cells: &[CellSteps], d1: &Estimate) -> Option<(Estimate, Value)> {
    let pts: Vec<(f64, f64, f64, f64)> = cells
        .iter()
        .map(|c| {
            let (b, y) = batch_point(c, d1, false);
            let sigma = (c.itl_p50_ci95_s[1] - c.itl_p50_ci95_s[0]) / (2.0 * Z95);
            (b, y, sigma, c.decode_context() as f64)
        })
        .collect();
    if pts.is_empty() {
        return None;
    }
    let n = pts.len() as f64;
    let mean_b = pts.iter().map(|p| p.0).sum::<f64>() / n;
    let sxx: f64 = pts.iter().map(|p| (p.0 - mean_b).powi(2)).sum();
    if sxx <= 0.0 {
        return None;
    }
    let mean_y = pts.iter().map(|p| p.1).sum::<f64>() / n;
    let slope = pts
        .iter()
        .map(|p| (p.0 - mean_b) * (p.1 - mean_y))
        .sum::<f64>()
        / sxx;
    let var_medians: f64 = pts
        .iter()
        .map(|p| (p.0 - mean_b).powi(2) * p.2 * p.2)
        .sum::<f64>()
        / (sxx * sxx);
    // A d1 error δ moves each point by δ·b·context: the slope by about δ·context.
    let ctx = pts.iter().map(|p| p.3).sum::<f64>() / n;
    let sigma_d1 = half_width(d1) / Z95 * ctx;
    let half = Z95 * (var_medians + sigma_d1 * sigma_d1).sqrt();
    let batches: Vec<u64> = pts.iter().map(|p| p.0 as u64).collect();
    let value = slope.max(0.0);
    let note = (slope < 0.0).then(|| format!("the fit gave {slope:.3e} s (negative): fixed at 0"));
    let est = Estimate::new(
        value,
        interval(slope - half, slope + half),
        format!(
            "closed-loop cells, batch {batches:?}: slope of median gap − d1·Σcontext over decoding requests"
        ),
    );
    let quality = json!({"cells": cells, "batches": batches, "d2_s": slope, "note": note});
    Some((identify(est, cells, d1), quality))
}

/// d2 marked unidentified where the cells cannot pin it down: its interval spans zero, or
/// a cell's steps are bimodal (then the interval is stretched to the slope through the
/// mean gaps, so that a band over it covers either reading).
fn identify(mut d2: Estimate, cells: &[CellSteps], d1: &Estimate) -> Estimate {
    let bimodal: Vec<String> = cells
        .iter()
        .filter(|c| c.bimodal())
        .map(|c| {
            format!(
                "c={} batch {}: median gap {:.3} ms [{:.3}, {:.3}], mean {:.3} ms",
                c.concurrency,
                c.batch,
                c.itl_p50_s * 1e3,
                c.itl_p50_ci95_s[0] * 1e3,
                c.itl_p50_ci95_s[1] * 1e3,
                c.itl_mean_s * 1e3
            )
        })
        .collect();
    let top = cells.iter().map(|c| c.concurrency).max().unwrap_or(1);
    let more = format!(
        "calibrate --concurrency-up-to {} --requests 32",
        (top * 2).max(4)
    );
    if !bimodal.is_empty() {
        if let (Some(alt), Some([lo, hi])) = (mean_slope(cells, d1), d2.ci95) {
            d2.ci95 = Some([lo.min(alt), hi.max(alt)]);
        }
        d2.unidentified = Some(format!(
            "bimodal decode steps ({}): the median gap does not say what a request's step \
             costs; {more} would measure the batch law over more steps",
            bimodal.join("; ")
        ));
    } else if d2.ci95.is_none_or(|[lo, _]| lo <= 0.0) {
        d2.unidentified = Some(format!(
            "its 95 % interval {} reaches zero: batching's cost is not measured; {more}",
            d2.ci95.map_or("(none)".to_string(), |[lo, hi]| format!(
                "[{:.3}, {:.3}] ms",
                lo * 1e3,
                hi * 1e3
            ))
        ));
    }
    d2
}

/// d2 with d0 = 0: Σ b·y / Σ b² over the cells' `batch_point`s and (1, the sweep's batch-1
/// intercept).
fn through_origin(intercept: f64, cells: &[CellSteps], d1: &Estimate) -> (f64, Option<[f64; 2]>) {
    let mut pts = vec![(1.0, intercept)];
    pts.extend(cells.iter().map(|c| batch_point(c, d1, false)));
    let sxy: f64 = pts.iter().map(|(b, y)| b * y).sum();
    let sxx: f64 = pts.iter().map(|(b, _)| b * b).sum();
    let slope = (sxy / sxx).max(0.0);
    // Student-t interval from the residuals (n − 1 degrees of freedom).
    let dof = pts.len() - 1;
    let rss: f64 = pts.iter().map(|(b, y)| (y - slope * b).powi(2)).sum();
    let ci = crate::stats::student_t_975(dof).and_then(|t| {
        let half = t * (rss / dof as f64 / sxx).sqrt();
        interval(slope - half, slope + half)
    });
    (slope, ci)
}

/// The decode coefficients: d1 and the batch-1 intercept from the sweep, d2 from the cells,
/// d0 = intercept − d2 (the step overhead is folded into d0 and t0).
pub(super) fn decode(
    law: &DecodeStepFit,
    cells: &[CellSteps],
) -> (Estimate, Estimate, Estimate, Estimate, Value) {
    let ci = law.ci95;
    let d1 = Estimate::new(
        law.e_s_per_token,
        ci.and_then(|c| interval(c.e_s_per_token.0, c.e_s_per_token.1)),
        "sweep decode step (median inter-token gap at batch 1): slope over mean decode context",
    );
    let intercept = Estimate::new(law.d_s, ci.and_then(|c| interval(c.d_s.0, c.d_s.1)), "");
    let (d2, batch) = per_request(cells, &d1).unwrap_or_else(|| {
        (
            Estimate::new(
                0.0,
                None,
                "not measured: no closed-loop cell with two requests decoding at once (d0 holds it)",
            )
            .unidentified(
                "no decode step ran two requests at once: calibrate --concurrency-up-to 4",
            ),
            Value::Null,
        )
    });
    let h = (half_width(&intercept).powi(2) + half_width(&d2).powi(2)).sqrt();
    let raw = law.d_s - d2.value;
    let raw_ci = (h > 0.0).then(|| interval(raw - h, raw + h)).flatten();
    let (d0, d2) = if raw < 0.0 {
        // The batch-1 step is cheaper than the cells' slope allows with d0 ≥ 0 (on a CPU,
        // llama.cpp's batch of one takes a matrix-vector path). Keeping that slope with d0
        // at 0 would charge every batch-1 step the whole slope; instead refit d2 with d0 = 0
        // through all the step measurements, the sweep's batch-1 intercept among them.
        let (fixed, ci) = through_origin(law.d_s, cells, &d1);
        let d0 = Estimate::new(
            0.0,
            raw_ci,
            format!(
                "sweep decode step at batch 1: intercept − d2 = {raw:.3e} s, negative (the \
                 batch-1 step is cheaper than the cells' slope): fixed at 0 and d2 refitted \
                 through the origin; the interval is of the unfixed value"
            ),
        );
        let refit = Estimate::new(
            fixed,
            ci,
            format!(
                "closed-loop cells and the sweep's batch-1 intercept, d0 fixed at 0: least \
                 squares through the origin of (step − d1·Σcontext) over decoding requests \
                 (the cells' slope alone was {:.3e} s)",
                d2.value
            ),
        );
        (d0, identify(refit, cells, &d1))
    } else {
        let d0 = Estimate::new(
            raw,
            raw_ci,
            "sweep decode step at batch 1: intercept − d2 (the step overhead folded in)",
        );
        (d0, d2)
    };
    let overhead = Estimate::new(
        0.0,
        None,
        "not separable by a client: folded into t0 (prefill steps) and d0 \
         (decode steps)",
    );
    let batch1 = cells
        .iter()
        .filter(|c| c.concurrency == 1)
        .map(|c| {
            let law_s = law.step_s(c.decode_context());
            json!({"context_tokens": c.context_tokens, "cell_itl_p50_s": c.itl_p50_s,
                   "sweep_law_s": law_s, "gap_pct": (c.itl_p50_s / law_s - 1.0) * 100.0})
        })
        .collect::<Vec<_>>();
    let quality = json!({"batch": batch, "batch1_cells_vs_sweep_law": batch1});
    (d0, d1, d2, overhead, quality)
}
