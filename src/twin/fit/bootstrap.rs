//! What a prediction's band rests on, measured from the calibration itself: the step model
//! refitted on resamples of its repetitions (each sweep length's repetitions, each cell's
//! requests, the mixed steps, drawn with replacement: the coefficients' uncertainty, the
//! interference's included), and the host's
//! run-to-run spread (the sweep repetitions' scatter). A run's own spread at the predicted
//! cell's size is measured beside the in-sample check (`model/runspread.rs`, via `measure/insample.rs`).
//! Seeded: one calibration gives one profile.

use crate::stats::{median, quantile};
use crate::twin::fit::inputs::{Inputs, fastest};
use crate::twin::model::profile::{Coefficients, Spread, Uncertainty};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Refits per profile: enough for a standard deviation to ±13 % (1/√(2·31)).
pub const REPLICATES: usize = 32;
/// Resamples of a predicted cell's requests for its figures' sampling spread.
const CELL_RESAMPLES: usize = 200;
const SEED: u64 = 35_2026;

/// The bootstrap replicates (each resample refitted by `refit`, the laws' coefficients) and
/// the spread of `inputs`.
pub fn uncertainty(inputs: &Inputs, refit: fn(&Inputs) -> Option<Coefficients>) -> Uncertainty {
    let mut rng = ChaCha8Rng::seed_from_u64(SEED);
    let replicates = (0..REPLICATES)
        .filter_map(|_| refit(&resample(inputs, &mut rng)))
        .collect();
    Uncertainty {
        replicates,
        spread: spread(inputs),
        run: None,
    }
}

fn pick<T: Clone>(v: &[T], rng: &mut ChaCha8Rng) -> Vec<T> {
    (0..v.len())
        .map(|_| v[rng.random_range(0..v.len())].clone())
        .collect()
}

/// The calibration's records drawn again with replacement: per sweep length its
/// repetitions, per cell its requests, and the mixed steps and the prompts sent alone
/// beside them.
fn resample(inputs: &Inputs, rng: &mut ChaCha8Rng) -> Inputs {
    let mut r = inputs.clone();
    for p in &mut r.sweep {
        if p.reps.len() > 1 {
            p.reps = pick(&p.reps, rng);
            (p.ttft_s, p.step_s) = fastest(&p.reps);
        }
    }
    r.cells = inputs
        .cells
        .iter()
        .filter_map(|c| match c.per_request.len() {
            0 | 1 => Some(c.clone()),
            _ => c.with_requests(pick(&c.per_request, rng)),
        })
        .collect();
    r.mixed = pick(&inputs.mixed, rng);
    r.alone = pick(&inputs.alone, rng);
    r
}

/// 1.4826 × the median absolute deviation over the median: a standard deviation, relative,
/// that one stalled repetition does not move.
fn robust_rsd(xs: &[f64]) -> Option<f64> {
    let m = median(xs)?;
    let dev: Vec<f64> = xs.iter().map(|x| (x - m).abs()).collect();
    (m > 0.0).then(|| 1.4826 * median(&dev).unwrap_or(0.0) / m)
}

/// Standard deviation over mean.
fn rsd(xs: &[f64]) -> f64 {
    let n = xs.len() as f64;
    let mean = xs.iter().sum::<f64>() / n;
    let var = xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0).max(1.0);
    if mean > 0.0 { var.sqrt() / mean } else { 0.0 }
}

/// A predicted cell's figures' relative spread over resampled requests (TTFT, TPOT, e2e
/// each): TTFT p50, TTFT p99, TPOT p50, mean e2e (whose inverse is the cell's throughput).
/// `None` with fewer than 4 requests.
pub fn request_spread(requests: &[(f64, f64, f64)]) -> Option<[f64; 4]> {
    if requests.len() < 4 {
        return None;
    }
    let mut rng = ChaCha8Rng::seed_from_u64(SEED);
    let mut figs: [Vec<f64>; 4] = Default::default();
    for _ in 0..CELL_RESAMPLES {
        let r = pick(requests, &mut rng);
        let ttft: Vec<f64> = r.iter().map(|x| x.0).collect();
        let tpot: Vec<f64> = r.iter().map(|x| x.1).collect();
        figs[0].push(quantile(&ttft, 0.5)?);
        figs[1].push(quantile(&ttft, 0.99)?);
        figs[2].push(quantile(&tpot, 0.5)?);
        figs[3].push(r.iter().map(|x| x.2).sum::<f64>() / r.len() as f64);
    }
    Some(figs.map(|v| rsd(&v)))
}

/// The host's spread: the sweep repetitions' scatter (the host and server from one
/// request to the next: TTFT for TTFT, the decode step for TPOT and throughput).
fn spread(inputs: &Inputs) -> Spread {
    let per_len = |f: fn(&(f64, f64)) -> f64| {
        let v: Vec<f64> = inputs
            .sweep
            .iter()
            .filter(|p| p.reps.len() > 1)
            .filter_map(|p| robust_rsd(&p.reps.iter().map(f).collect::<Vec<_>>()))
            .collect();
        median(&v).unwrap_or(0.0)
    };
    let (ttft, step) = (per_len(|r| r.0), per_len(|r| r.1));
    Spread {
        ttft_p50: ttft,
        ttft_p99: ttft,
        tpot_p50: step,
        output_tps: step,
        goodput_rps: step,
        source: format!(
            "relative sd of the sweep's repetitions (1.4826 MAD / median, median over \
             lengths): TTFT {:.1} %, decode step {:.1} %",
            ttft * 100.0,
            step * 100.0
        ),
    }
}
