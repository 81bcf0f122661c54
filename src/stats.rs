//! Pure statistics: medians, quantiles, spread, outliers, Student's t. The one place for
//! each; the scaling-law fits that use them live in `fit`.
//!
//! Every function ignores or refuses non-finite input instead of passing NaN on: a summary
//! or a timeout prediction built from these never holds NaN or infinity.

use serde::{Deserialize, Serialize};

/// The modified z-score above which a value is an outlier (Iglewicz and Hoaglin).
pub const DEFAULT_OUTLIER_THRESHOLD: f64 = 3.5;

/// Ratio of the normal distribution's quartile to its standard deviation, Φ⁻¹(0.75).
const MAD_TO_Z: f64 = 0.6745;

/// `sqrt(π/2)`: the mean absolute deviation of a normal variable is σ / this.
const MEAN_AD_TO_SIGMA: f64 = 1.253_314;

/// The finite values of `xs`, sorted.
fn sorted_finite(xs: &[f64]) -> Vec<f64> {
    let mut v: Vec<f64> = xs.iter().copied().filter(|x| x.is_finite()).collect();
    v.sort_by(f64::total_cmp);
    v
}

/// Quantile of already sorted, finite, non-empty values (linear interpolation, R type 7).
fn quantile_sorted(sorted: &[f64], q: f64) -> f64 {
    let h = (sorted.len() - 1) as f64 * q;
    let lo = h.floor() as usize;
    let hi = (lo + 1).min(sorted.len() - 1);
    let frac = h - lo as f64;
    let (a, b) = (sorted[lo], sorted[hi]);
    if frac == 0.0 || a == b {
        return a;
    }
    let d = b - a;
    // `b − a` overflows only for neighbours of opposite sign near ±f64::MAX, where the
    // weighted sum cannot overflow; rounding must not leave [a, b] either.
    let v = if d.is_finite() {
        a + frac * d
    } else {
        a * (1.0 - frac) + b * frac
    };
    v.clamp(a, b)
}

/// `|x − m|`, saturated at `f64::MAX` so that extreme finite inputs give no infinity.
fn abs_dev(x: f64, m: f64) -> f64 {
    (x - m).abs().min(f64::MAX)
}

/// Median of the finite values; `None` when there are none.
pub fn median(xs: &[f64]) -> Option<f64> {
    quantile(xs, 0.5)
}

/// The `q`-quantile of the finite values, by linear interpolation between order statistics
/// (`h = (n−1)·q`, as R's default and NumPy's `linear`); `None` when there are no finite
/// values or `q` is outside `[0, 1]`.
pub fn quantile(xs: &[f64], q: f64) -> Option<f64> {
    if !(0.0..=1.0).contains(&q) {
        return None;
    }
    let v = sorted_finite(xs);
    (!v.is_empty()).then(|| quantile_sorted(&v, q))
}

/// Median and spread of one metric over the valid samples of a point.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, schemars::JsonSchema, PartialEq)]
pub struct Stat {
    pub median: f64,
    pub min: f64,
    pub max: f64,
    pub p10: f64,
    pub p90: f64,
    pub n: usize,
}

impl Stat {
    /// Median, extremes and p10/p90 of the finite values of `xs`; `None` when there are
    /// none. So `min ≤ p10 ≤ median ≤ p90 ≤ max`, all finite, `n ≥ 1`.
    pub fn of(xs: &[f64]) -> Option<Stat> {
        let v = sorted_finite(xs);
        let (&min, &max) = (v.first()?, v.last()?);
        Some(Stat {
            n: v.len(),
            median: quantile_sorted(&v, 0.5),
            min,
            max,
            p10: quantile_sorted(&v, 0.1),
            p90: quantile_sorted(&v, 0.9),
        })
    }
}

fn mad_sorted(sorted: &[f64], median: f64) -> f64 {
    let mut dev: Vec<f64> = sorted.iter().map(|&x| abs_dev(x, median)).collect();
    dev.sort_by(f64::total_cmp);
    quantile_sorted(&dev, 0.5)
}

/// How many of `xs` are outliers by [`outliers`] at [`DEFAULT_OUTLIER_THRESHOLD`] (a
/// point's TTFTs, in the summary).
pub fn outlier_count(xs: &[f64]) -> usize {
    outliers(xs, DEFAULT_OUTLIER_THRESHOLD)
        .into_iter()
        .filter(|&o| o)
        .count()
}

/// Flags outliers by the modified z-score `0.6745·|x − median| / MAD > threshold`
/// (use [`DEFAULT_OUTLIER_THRESHOLD`]); one flag per input value, in order.
///
/// When more than half the values are equal the MAD is 0 and that score is useless; the
/// score then becomes `|x − median| / (1.2533·meanAD)`, meanAD being the mean absolute
/// deviation from the median (the usual fallback, equal in expectation for normal data).
/// If that is 0 too, all values are equal and none is an outlier. Non-finite values are
/// always flagged and take no part in the median or the deviations.
pub fn outliers(xs: &[f64], threshold: f64) -> Vec<bool> {
    let v = sorted_finite(xs);
    if v.is_empty() {
        return vec![true; xs.len()];
    }
    let median = quantile_sorted(&v, 0.5);
    let mad = mad_sorted(&v, median);
    let scale = if mad > 0.0 {
        mad / MAD_TO_Z
    } else {
        // Divide before summing: the sum of saturated deviations would overflow.
        let n = v.len() as f64;
        let mean_ad: f64 = v.iter().map(|&x| abs_dev(x, median) / n).sum();
        MEAN_AD_TO_SIGMA * mean_ad
    };
    xs.iter()
        .map(|&x| {
            if !x.is_finite() {
                true
            } else if scale > 0.0 {
                // An infinite scale makes every score 0, never NaN: the deviation is finite.
                abs_dev(x, median) / scale > threshold
            } else {
                false
            }
        })
        .collect()
}

/// Two-sided 95 % quantile of Student's t with `dof` degrees of freedom (`t₀.₉₇₅`);
/// `None` for 0 degrees of freedom.
///
/// Exact table to 30, then the Cornish–Fisher expansion (error below 2·10⁻⁵).
pub fn student_t_975(dof: usize) -> Option<f64> {
    const TABLE: [f64; 30] = [
        12.706_204_736,
        4.302_652_730,
        3.182_446_305,
        2.776_445_105,
        2.570_581_836,
        2.446_911_851,
        2.364_624_252,
        2.306_004_135,
        2.262_157_163,
        2.228_138_852,
        2.200_985_160,
        2.178_812_830,
        2.160_368_656,
        2.144_786_688,
        2.131_449_546,
        2.119_905_299,
        2.109_815_578,
        2.100_922_040,
        2.093_024_054,
        2.085_963_447,
        2.079_613_845,
        2.073_873_068,
        2.068_657_610,
        2.063_898_562,
        2.059_538_553,
        2.055_529_439,
        2.051_830_516,
        2.048_407_142,
        2.045_229_642,
        2.042_272_456,
    ];
    match dof {
        0 => None,
        1..=30 => Some(TABLE[dof - 1]),
        _ => {
            let z: f64 = 1.959_963_985;
            let v = dof as f64;
            let (z2, z3) = (z * z, z * z * z);
            let (z5, z7) = (z3 * z2, z3 * z2 * z2);
            Some(
                z + (z3 + z) / (4.0 * v)
                    + (5.0 * z5 + 16.0 * z3 + 3.0 * z) / (96.0 * v * v)
                    + (3.0 * z7 + 19.0 * z5 + 17.0 * z3 - 15.0 * z) / (384.0 * v * v * v),
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, rel: f64) -> bool {
        (a - b).abs() <= rel * a.abs().max(b.abs()).max(1e-300)
    }

    #[test]
    fn median_and_quantiles() {
        assert_eq!(median(&[]), None);
        assert_eq!(median(&[f64::NAN, f64::INFINITY]), None);
        assert_eq!(median(&[3.0]), Some(3.0));
        assert_eq!(median(&[3.0, 1.0, 2.0]), Some(2.0));
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), Some(2.5));
        assert_eq!(median(&[1.0, f64::NAN, 3.0]), Some(2.0));
        let xs = [10.0, 20.0, 30.0, 40.0, 50.0];
        assert_eq!(quantile(&xs, 0.0), Some(10.0));
        assert_eq!(quantile(&xs, 1.0), Some(50.0));
        assert_eq!(quantile(&xs, 0.1), Some(14.0));
        assert_eq!(quantile(&xs, 0.9), Some(46.0));
        assert_eq!(quantile(&xs, 0.625), Some(35.0));
        assert_eq!(quantile(&xs, -0.1), None);
        assert_eq!(quantile(&xs, 1.5), None);
        assert_eq!(quantile(&xs, f64::NAN), None);
    }

    #[test]
    fn extreme_finite_values_give_no_nan_or_infinity() {
        let xs = [-f64::MAX, f64::MAX];
        for q in [0.0, 0.1, 0.5, 0.9, 1.0] {
            let v = quantile(&xs, q).unwrap();
            assert!(v.is_finite(), "q {q}: {v}");
        }
        let s = Stat::of(&[-f64::MAX, 0.0, f64::MAX]).unwrap();
        assert!(s.p10.is_finite() && s.p90.is_finite());
        assert_eq!(
            outliers(&[-f64::MAX, 0.0, 0.0, 0.0, f64::MAX], 3.5).len(),
            5
        );
    }

    #[test]
    fn spread() {
        assert_eq!(Stat::of(&[f64::NAN]), None);
        let s = Stat::of(&[5.0, 1.0, f64::NAN, 3.0, 2.0, 4.0, f64::NEG_INFINITY]).unwrap();
        assert_eq!(s.n, 5);
        assert_eq!((s.min, s.median, s.max), (1.0, 3.0, 5.0));
        assert!(close(s.p10, 1.4, 1e-12) && close(s.p90, 4.6, 1e-12));
        let one = Stat::of(&[7.0]).unwrap();
        assert_eq!((one.p10, one.p90, one.median), (7.0, 7.0, 7.0));
    }

    #[test]
    fn outliers_by_modified_z() {
        // median 10, MAD 0.5: z(12) = 0.6745·2/0.5 = 2.7, z(30) = 27.
        let xs = [9.5, 10.0, 10.5, 10.0, 9.5, 10.5, 12.0, 30.0];
        assert_eq!(
            outliers(&xs, DEFAULT_OUTLIER_THRESHOLD),
            [false, false, false, false, false, false, false, true]
        );
        assert!(outliers(&xs, 2.0)[6]);
        assert!(outliers(&[], 3.5).is_empty());
        assert_eq!(outliers(&[1.0, f64::NAN], 3.5), [false, true]);
        assert_eq!(outliers(&[f64::NAN], 3.5), [true]);
    }

    #[test]
    fn outliers_when_mad_is_zero() {
        assert_eq!(outliers(&[2.0; 6], 3.5), [false; 6]);
        // meanAD = 4/5: score(5) = 4/(1.2533·0.8) ≈ 3.99.
        assert_eq!(
            outliers(&[1.0, 1.0, 1.0, 1.0, 5.0], 3.5),
            [false, false, false, false, true]
        );
        // meanAD = 1/4: score(2) ≈ 3.19, not an outlier.
        assert_eq!(outliers(&[1.0, 1.0, 1.0, 2.0], 3.5), [false; 4]);
    }

    #[test]
    fn student_t() {
        assert_eq!(student_t_975(0), None);
        assert!(close(student_t_975(1).unwrap(), 12.7062, 1e-5));
        assert!(close(student_t_975(10).unwrap(), 2.2281, 1e-4));
        // Reference values: 40 → 2.021075, 60 → 2.000298, 120 → 1.979930.
        assert!((student_t_975(40).unwrap() - 2.021_075).abs() < 2e-5);
        assert!((student_t_975(60).unwrap() - 2.000_298).abs() < 2e-5);
        assert!((student_t_975(120).unwrap() - 1.979_930).abs() < 2e-5);
        assert!((student_t_975(1_000_000).unwrap() - 1.959_964).abs() < 1e-5);
        // The expansion joins the table without a jump.
        assert!((student_t_975(31).unwrap() - 2.039_513).abs() < 2e-5);
    }
}
