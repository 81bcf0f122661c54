//! What a prediction's band rests on, measured from the calibration itself: the step model
//! refitted on resamples of its repetitions (each sweep length's repetitions, each cell's
//! requests, drawn with replacement: the coefficients' uncertainty), and the host's
//! run-to-run spread (the sweep repetitions' scatter). A run's own spread at the predicted
//! cell's size is measured beside the in-sample check (`runspread.rs`, via `insample.rs`).
//! Seeded: one calibration gives one profile.

use super::fit;
use super::inputs::{Inputs, fastest};
use super::profile::{Spread, Uncertainty};
use crate::stats::median;
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Refits per profile: enough for a standard deviation to ±13 % (1/√(2·31)).
pub const REPLICATES: usize = 32;
const SEED: u64 = 35_2026;

/// The bootstrap replicates and the spread of `inputs`.
pub fn uncertainty(inputs: &Inputs) -> Uncertainty {
    let mut rng = ChaCha8Rng::seed_from_u64(SEED);
    let replicates = (0..REPLICATES)
        .filter_map(|_| fit::coefficients(&resample(inputs, &mut rng)))
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
/// repetitions, per cell its requests.
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
    r
}

/// 1.4826 × the median absolute deviation over the median: a standard deviation, relative,
/// that one stalled repetition does not move.
fn robust_rsd(xs: &[f64]) -> Option<f64> {
    let m = median(xs)?;
    let dev: Vec<f64> = xs.iter().map(|x| (x - m).abs()).collect();
    (m > 0.0).then(|| 1.4826 * median(&dev).unwrap_or(0.0) / m)
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
