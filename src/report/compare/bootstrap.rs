//! A seeded percentile bootstrap for the ratio of two medians: how large a change between
//! two runs the repetitions alone could produce.

use crate::stats::{median, quantile};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Bootstrap resamples per interval.
pub const RESAMPLES: usize = 2000;

/// 95 % percentile-bootstrap interval of median(b) / median(a), resampling each side with
/// replacement. `None` when either side has fewer than two usable (finite, positive) values:
/// one repetition says nothing about noise.
pub fn median_ratio_interval(a: &[f64], b: &[f64], seed: u64) -> Option<(f64, f64)> {
    let usable = |xs: &[f64]| -> Vec<f64> {
        xs.iter()
            .copied()
            .filter(|x| x.is_finite() && *x > 0.0)
            .collect()
    };
    let (a, b) = (usable(a), usable(b));
    if a.len() < 2 || b.len() < 2 {
        return None;
    }
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut draw = |xs: &[f64], buf: &mut Vec<f64>| {
        buf.clear();
        buf.extend((0..xs.len()).map(|_| xs[rng.random_range(0..xs.len())]));
        median(buf)
    };
    let (mut buf_a, mut buf_b) = (Vec::with_capacity(a.len()), Vec::with_capacity(b.len()));
    let mut ratios = Vec::with_capacity(RESAMPLES);
    for _ in 0..RESAMPLES {
        let ma = draw(&a, &mut buf_a)?;
        let mb = draw(&b, &mut buf_b)?;
        ratios.push(mb / ma);
    }
    Some((quantile(&ratios, 0.025)?, quantile(&ratios, 0.975)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn identical_noisy_runs_bracket_one() {
        let a = [1.0, 1.1, 0.9, 1.05, 0.95];
        let (lo, hi) = median_ratio_interval(&a, &a, 7).unwrap();
        assert!(lo < 1.0 && hi > 1.0, "{lo} {hi}");
    }

    #[test]
    fn a_clear_shift_excludes_one() {
        let a = [1.0, 1.01, 0.99];
        let b = [2.0, 2.02, 1.98];
        let (lo, hi) = median_ratio_interval(&a, &b, 7).unwrap();
        assert!(lo > 1.9 && hi < 2.1, "{lo} {hi}");
    }

    #[test]
    fn seeded_and_needs_repetitions() {
        let a = [1.0, 1.2, 0.8];
        let b = [1.1, 1.3, 0.9];
        assert_eq!(
            median_ratio_interval(&a, &b, 1),
            median_ratio_interval(&a, &b, 1)
        );
        assert_eq!(median_ratio_interval(&[1.0], &b, 1), None);
        assert_eq!(median_ratio_interval(&a, &[0.0, f64::NAN], 1), None);
    }
}
