//! Pure statistics: medians, spread, outliers, least-squares fits.
//!
//! Every function ignores or refuses non-finite input instead of passing NaN on: a summary
//! or a timeout prediction built from these never holds NaN or infinity.

use crate::record::Stat;

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

/// Location and spread of a set of measurements, over its finite values.
///
/// Only [`Spread::of`] makes one, so `min ≤ p10 ≤ median ≤ p90 ≤ max`, all finite, `n ≥ 1`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Spread {
    /// Finite values counted.
    pub n: usize,
    pub median: f64,
    pub min: f64,
    pub max: f64,
    pub p10: f64,
    pub p90: f64,
    /// Median absolute deviation from the median, unscaled (×1.4826 estimates σ for
    /// normal data).
    pub mad: f64,
}

impl Spread {
    /// The spread of the finite values of `xs`; `None` when there are none.
    pub fn of(xs: &[f64]) -> Option<Spread> {
        let v = sorted_finite(xs);
        let (&min, &max) = (v.first()?, v.last()?);
        let median = quantile_sorted(&v, 0.5);
        Some(Spread {
            n: v.len(),
            median,
            min,
            max,
            p10: quantile_sorted(&v, 0.1),
            p90: quantile_sorted(&v, 0.9),
            mad: mad_sorted(&v, median),
        })
    }

    /// The result file's form of this spread.
    pub fn to_stat(&self) -> Stat {
        Stat {
            median: self.median,
            min: self.min,
            max: self.max,
            p10: self.p10,
            p90: self.p90,
            n: self.n,
        }
    }
}

fn mad_sorted(sorted: &[f64], median: f64) -> f64 {
    let mut dev: Vec<f64> = sorted.iter().map(|&x| abs_dev(x, median)).collect();
    dev.sort_by(f64::total_cmp);
    quantile_sorted(&dev, 0.5)
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

/// A least-squares polynomial `y ≈ Σ coeffs[k]·xᵏ`, in the units of the data.
#[derive(Debug, Clone, PartialEq)]
pub struct PolyFit {
    /// `coeffs[k]` multiplies `xᵏ`.
    pub coeffs: Vec<f64>,
    /// Standard error of each coefficient, from the residual variance and `(XᵀX)⁻¹`.
    /// Empty when there are no residual degrees of freedom (`n` equal to the number of
    /// fitted terms). A coefficient fixed at 0 by [`fit_poly_nonneg`] has error 0.
    pub std_errors: Vec<f64>,
    /// 95 % confidence interval of each coefficient (Student's t, `dof` degrees of
    /// freedom); empty exactly when `std_errors` is.
    pub ci95: Vec<(f64, f64)>,
    /// `y − fit(x)` per point, in input order.
    pub residuals: Vec<f64>,
    /// Coefficient of determination `1 − RSS/TSS` (TSS about the mean of y). 1 when y is
    /// constant and fitted exactly; may be negative for a model without intercept.
    pub r2: f64,
    /// Points fitted.
    pub n: usize,
    /// Residual degrees of freedom: `n` minus the number of fitted terms.
    pub dof: usize,
}

impl PolyFit {
    /// The fitted polynomial at `x`.
    pub fn eval(&self, x: f64) -> f64 {
        self.coeffs.iter().rev().fold(0.0, |acc, c| acc * x + c)
    }

    /// The polynomial's degree (the number of coefficients minus one).
    pub fn degree(&self) -> usize {
        self.coeffs.len().saturating_sub(1)
    }
}

/// Least-squares fit of a polynomial of `degree` to the points `(xs[i], ys[i])`.
///
/// `None` when the slices differ in length, hold a non-finite value, have fewer than
/// `degree + 1` points or fewer distinct x than that (the fit is not determined).
/// Standard errors need at least `degree + 2` points. x is centred and scaled before a
/// Householder QR solve, so x spanning 10³..10⁶ is as well conditioned as 0..1.
pub fn fit_poly(xs: &[f64], ys: &[f64], degree: usize) -> Option<PolyFit> {
    if degree >= xs.len() {
        return None;
    }
    let powers: Vec<usize> = (0..=degree).collect();
    fit_terms(xs, ys, &powers, degree, true)
}

/// Least-squares fit of `y = c₀ + c₁x + … + c_d x^d` with every `cₖ ≥ 0`, for physical
/// models such as TTFT = a + b·n + c·n² (a fixed overhead, linear and quadratic work).
///
/// Exact non-negative least squares by enumerating the sets of free terms (2^(d+1) fits,
/// so `degree` is capped at 6): the best fit among those whose unconstrained solution is
/// non-negative. Dropped terms have coefficient, error and interval 0; errors of the others
/// are conditional on that choice. `None` on the same inputs as [`fit_poly`], or a degree
/// above 6.
pub fn fit_poly_nonneg(xs: &[f64], ys: &[f64], degree: usize) -> Option<PolyFit> {
    if degree > 6 {
        return None;
    }
    // Refuse what fit_poly refuses, so a sub-fit cannot succeed on data the full one rejects.
    let full = fit_poly(xs, ys, degree)?;
    if full.coeffs.iter().all(|&c| c >= 0.0) {
        return Some(full);
    }
    let mut best: Option<(f64, usize, PolyFit)> = None;
    for mask in 0u32..(1 << (degree + 1)) {
        let powers: Vec<usize> = (0..=degree).filter(|k| mask & (1 << k) != 0).collect();
        let fit = if powers.is_empty() {
            zero_fit(xs, ys, degree)
        } else {
            match fit_terms(xs, ys, &powers, degree, false) {
                Some(f) => f,
                None => continue,
            }
        };
        if fit.coeffs.iter().any(|&c| c < 0.0) {
            continue;
        }
        let rss: f64 = fit.residuals.iter().map(|r| r * r).sum();
        let better = match &best {
            None => true,
            Some((best_rss, best_terms, _)) => {
                let tol = 1e-12 * best_rss.max(f64::MIN_POSITIVE);
                rss < best_rss - tol || (rss <= best_rss + tol && powers.len() < *best_terms)
            }
        };
        if better {
            best = Some((rss, powers.len(), fit));
        }
    }
    best.map(|(_, _, f)| f)
}

/// The all-zero model, for the non-negative search.
fn zero_fit(xs: &[f64], ys: &[f64], degree: usize) -> PolyFit {
    let p = degree + 1;
    PolyFit {
        coeffs: vec![0.0; p],
        std_errors: vec![0.0; p],
        ci95: vec![(0.0, 0.0); p],
        residuals: ys.to_vec(),
        r2: r_squared(ys, ys),
        n: xs.len(),
        dof: xs.len(),
    }
}

fn r_squared(ys: &[f64], residuals: &[f64]) -> f64 {
    let mean = ys.iter().sum::<f64>() / ys.len() as f64;
    let tss: f64 = ys.iter().map(|y| (y - mean) * (y - mean)).sum();
    let rss: f64 = residuals.iter().map(|r| r * r).sum();
    let scale: f64 = ys.iter().map(|y| y * y).sum();
    if tss > 1e-24 * scale {
        1.0 - rss / tss
    } else if rss <= 1e-24 * scale.max(f64::MIN_POSITIVE) {
        1.0
    } else {
        0.0
    }
}

/// Fits `y = Σ_{k ∈ powers} aₖ xᵏ`; the result has `degree + 1` coefficients, zero outside
/// `powers`. `centre` shifts x by its mean, which is valid only when `powers` is `0..=degree`
/// (a shifted polynomial mixes all lower powers).
fn fit_terms(
    xs: &[f64],
    ys: &[f64],
    powers: &[usize],
    degree: usize,
    centre: bool,
) -> Option<PolyFit> {
    let n = xs.len();
    let p = powers.len();
    if ys.len() != n || n < p || p == 0 {
        return None;
    }
    if xs.iter().chain(ys).any(|v| !v.is_finite()) {
        return None;
    }
    let shift = if centre {
        xs.iter().sum::<f64>() / n as f64
    } else {
        0.0
    };
    let scale = xs.iter().map(|x| (x - shift).abs()).fold(0.0, f64::max);
    let scale = if scale > 0.0 { scale } else { 1.0 };

    // Design matrix in u = (x − shift)/scale, column-major.
    let mut a = vec![0.0; n * p];
    for (i, &x) in xs.iter().enumerate() {
        let u = (x - shift) / scale;
        for (j, &k) in powers.iter().enumerate() {
            a[j * n + i] = u.powi(k as i32);
        }
    }
    let design = a.clone();
    let mut qty = ys.to_vec();
    householder_qr(&mut a, &mut qty, n, p)?;
    let r = |i: usize, j: usize| a[j * n + i];
    // A rank-deficient design (too few distinct x) shows as a negligible pivot.
    let max_pivot = (0..p).map(|j| r(j, j).abs()).fold(0.0, f64::max);
    if (0..p).any(|j| r(j, j).abs() <= 1e-10 * max_pivot) || max_pivot == 0.0 {
        return None;
    }
    // Back substitution: R β = Qᵀy.
    let mut beta = vec![0.0; p];
    for j in (0..p).rev() {
        let s: f64 = (j + 1..p).map(|k| r(j, k) * beta[k]).sum();
        beta[j] = (qty[j] - s) / r(j, j);
    }
    let residuals: Vec<f64> = (0..n)
        .map(|i| ys[i] - (0..p).map(|j| design[j * n + i] * beta[j]).sum::<f64>())
        .collect();

    // Map u-basis coefficients to powers of x: t[m][j] = C(P_j, P_m)·(−shift)^(P_j−P_m)/scale^P_j.
    let t = |m: usize, j: usize| -> f64 {
        let (pm, pj) = (powers[m], powers[j]);
        if pm > pj {
            0.0
        } else {
            binomial(pj, pm) * (-shift).powi((pj - pm) as i32) / scale.powi(pj as i32)
        }
    };
    let coeffs_sub: Vec<f64> = (0..p)
        .map(|m| (0..p).map(|j| t(m, j) * beta[j]).sum())
        .collect();

    let dof = n - p;
    let (mut se_sub, mut ci_sub) = (Vec::new(), Vec::new());
    if dof > 0 {
        let rss: f64 = residuals.iter().map(|e| e * e).sum();
        let sigma2 = rss / dof as f64;
        let rinv = upper_inverse(&a, n, p);
        // Cov(β) = σ² R⁻¹R⁻ᵀ; Cov(a) = T Cov(β) Tᵀ. Only the diagonal is needed:
        // Var(a_m) = σ² Σ_k (Σ_j t[m][j]·R⁻¹[j][k])².
        let t_crit = student_t_975(dof)?;
        for (m, &coeff) in coeffs_sub.iter().enumerate() {
            let var: f64 = (0..p)
                .map(|k| {
                    let s: f64 = (0..p).map(|j| t(m, j) * rinv[j * p + k]).sum();
                    s * s
                })
                .sum::<f64>()
                * sigma2;
            let se = var.sqrt();
            se_sub.push(se);
            ci_sub.push((coeff - t_crit * se, coeff + t_crit * se));
        }
    }

    let mut coeffs = vec![0.0; degree + 1];
    let mut std_errors = if dof > 0 {
        vec![0.0; degree + 1]
    } else {
        Vec::new()
    };
    let mut ci95 = if dof > 0 {
        vec![(0.0, 0.0); degree + 1]
    } else {
        Vec::new()
    };
    for (m, &k) in powers.iter().enumerate() {
        coeffs[k] = coeffs_sub[m];
        if dof > 0 {
            std_errors[k] = se_sub[m];
            ci95[k] = ci_sub[m];
        }
    }
    let fit = PolyFit {
        r2: r_squared(ys, &residuals),
        coeffs,
        std_errors,
        ci95,
        residuals,
        n,
        dof,
    };
    let finite = fit
        .coeffs
        .iter()
        .chain(&fit.std_errors)
        .chain(&fit.residuals)
        .chain(fit.ci95.iter().flat_map(|(lo, hi)| [lo, hi]))
        .all(|v| v.is_finite())
        && fit.r2.is_finite();
    finite.then_some(fit)
}

/// In-place Householder QR of the column-major `n×p` matrix `a` (n ≥ p): leaves R in the
/// upper triangle and applies Qᵀ to `y`. `None` if a column is entirely zero.
fn householder_qr(a: &mut [f64], y: &mut [f64], n: usize, p: usize) -> Option<()> {
    for j in 0..p {
        let col = j * n;
        let norm = (j..n).map(|i| a[col + i] * a[col + i]).sum::<f64>().sqrt();
        if norm == 0.0 {
            return None;
        }
        // Reflect onto −sign(a_jj)·‖x‖ e₁ to avoid cancellation.
        let alpha = if a[col + j] > 0.0 { -norm } else { norm };
        let mut v: Vec<f64> = (j..n).map(|i| a[col + i]).collect();
        v[0] -= alpha;
        let vnorm2: f64 = v.iter().map(|x| x * x).sum();
        if vnorm2 == 0.0 {
            continue;
        }
        let reflect = |target: &mut [f64], off: usize| {
            let dot: f64 = v
                .iter()
                .enumerate()
                .map(|(i, vi)| vi * target[off + j + i])
                .sum();
            let f = 2.0 * dot / vnorm2;
            for (i, vi) in v.iter().enumerate() {
                target[off + j + i] -= f * vi;
            }
        };
        for k in j..p {
            reflect(a, k * n);
        }
        reflect(y, 0);
    }
    Some(())
}

/// Inverse of the upper-triangular `p×p` R held in the top of the column-major `n×p` `a`;
/// returned row-major `p×p`.
fn upper_inverse(a: &[f64], n: usize, p: usize) -> Vec<f64> {
    let r = |i: usize, j: usize| a[j * n + i];
    let mut inv = vec![0.0; p * p];
    for col in 0..p {
        // Solve R x = e_col.
        for i in (0..=col).rev() {
            let rhs = if i == col { 1.0 } else { 0.0 };
            let s: f64 = (i + 1..=col).map(|k| r(i, k) * inv[k * p + col]).sum();
            inv[i * p + col] = (rhs - s) / r(i, i);
        }
    }
    inv
}

fn binomial(n: usize, k: usize) -> f64 {
    (0..k).fold(1.0, |acc, i| acc * (n - i) as f64 / (i + 1) as f64)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{RngExt, SeedableRng};
    use rand_chacha::ChaCha8Rng;

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
        let s = Spread::of(&[-f64::MAX, 0.0, f64::MAX]).unwrap();
        assert!(s.mad.is_finite() && s.p10.is_finite() && s.p90.is_finite());
        assert_eq!(
            outliers(&[-f64::MAX, 0.0, 0.0, 0.0, f64::MAX], 3.5).len(),
            5
        );
        let fit = fit_poly(&[-f64::MAX, 0.0, f64::MAX], &[1.0, 2.0, 3.0], 1);
        assert!(fit.is_none_or(|f| f.coeffs.iter().all(|c| c.is_finite())));
        assert!(fit_poly(&[1.0, 2.0], &[1.0, 2.0], usize::MAX).is_none());
        assert!(fit_poly_nonneg(&[1.0, 2.0], &[1.0, 2.0], usize::MAX).is_none());
    }

    #[test]
    fn spread() {
        assert_eq!(Spread::of(&[f64::NAN]), None);
        let s = Spread::of(&[5.0, 1.0, f64::NAN, 3.0, 2.0, 4.0, f64::NEG_INFINITY]).unwrap();
        assert_eq!(s.n, 5);
        assert_eq!((s.min, s.median, s.max), (1.0, 3.0, 5.0));
        assert!(close(s.p10, 1.4, 1e-12) && close(s.p90, 4.6, 1e-12));
        assert_eq!(s.mad, 1.0);
        let one = Spread::of(&[7.0]).unwrap();
        assert_eq!((one.p10, one.p90, one.mad), (7.0, 7.0, 0.0));
        let st = s.to_stat();
        assert_eq!((st.n, st.median, st.p90), (5, 3.0, s.p90));
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

    #[test]
    fn exact_recovery_on_noise_free_quadratic() {
        // TTFT-like: 50 ms overhead, 1/20k s per token, quadratic attention term.
        let (a, b, c) = (0.05, 5e-5, 2e-10);
        let xs: Vec<f64> = [1e3, 4e3, 8e3, 16e3, 32e3, 64e3, 128e3, 2e5].to_vec();
        let ys: Vec<f64> = xs.iter().map(|x| a + b * x + c * x * x).collect();
        let fit = fit_poly(&xs, &ys, 2).unwrap();
        assert_eq!((fit.n, fit.dof, fit.degree()), (8, 5, 2));
        assert!(close(fit.coeffs[0], a, 1e-9), "{:?}", fit.coeffs);
        assert!(close(fit.coeffs[1], b, 1e-9), "{:?}", fit.coeffs);
        assert!(close(fit.coeffs[2], c, 1e-9), "{:?}", fit.coeffs);
        assert!(fit.r2 > 1.0 - 1e-12);
        assert!(fit.residuals.iter().all(|r| r.abs() < 1e-9));
        assert!(fit.std_errors.iter().all(|s| *s < 1e-9));
        assert!(close(fit.eval(1e5), a + b * 1e5 + c * 1e10, 1e-12));

        let line = fit_poly(&[1.0, 2.0, 3.0], &[3.0, 5.0, 7.0], 1).unwrap();
        assert!(close(line.coeffs[0], 1.0, 1e-12) && close(line.coeffs[1], 2.0, 1e-12));
    }

    #[test]
    fn too_few_points_or_bad_input() {
        assert!(fit_poly(&[1.0, 2.0], &[1.0, 2.0], 2).is_none());
        assert!(fit_poly(&[1.0, 1.0, 1.0], &[1.0, 2.0, 3.0], 1).is_none());
        assert!(fit_poly(&[1.0, 2.0, 2.0, 1.0], &[1.0, 2.0, 2.0, 1.0], 2).is_none());
        assert!(fit_poly(&[1.0, 2.0, 3.0], &[1.0, 2.0], 1).is_none());
        assert!(fit_poly(&[1.0, 2.0, f64::NAN], &[1.0, 2.0, 3.0], 1).is_none());
        assert!(fit_poly(&[], &[], 0).is_none());
        // Exactly determined: a fit, but no errors.
        let exact = fit_poly(&[1.0, 2.0, 4.0], &[1.0, 4.0, 16.0], 2).unwrap();
        assert!(exact.std_errors.is_empty() && exact.ci95.is_empty());
        assert_eq!(exact.dof, 0);
        assert!(close(exact.coeffs[2], 1.0, 1e-12));
        // Constant data.
        let flat = fit_poly(&[1.0, 2.0, 3.0, 4.0], &[2.0; 4], 1).unwrap();
        assert_eq!(flat.r2, 1.0);
        assert!(flat.coeffs[1].abs() < 1e-12);
    }

    #[test]
    fn known_standard_errors_for_a_line() {
        // x = 1..5, y = 2x + e with e = (0.1, −0.1, 0, 0.1, −0.1): closed-form OLS.
        let xs = [1.0, 2.0, 3.0, 4.0, 5.0];
        let e = [0.1, -0.1, 0.0, 0.1, -0.1];
        let ys: Vec<f64> = xs.iter().zip(e).map(|(x, e)| 2.0 * x + e).collect();
        let fit = fit_poly(&xs, &ys, 1).unwrap();
        let sxx = 10.0;
        let xbar = 3.0;
        let slope = xs.iter().zip(&e).map(|(x, e)| (x - xbar) * e).sum::<f64>() / sxx + 2.0;
        let intercept = ys.iter().sum::<f64>() / 5.0 - slope * xbar;
        let rss: f64 = fit.residuals.iter().map(|r| r * r).sum();
        let s2 = rss / 3.0;
        assert!(close(fit.coeffs[1], slope, 1e-12));
        assert!(close(fit.coeffs[0], intercept, 1e-10));
        assert!(close(fit.std_errors[1], (s2 / sxx).sqrt(), 1e-10));
        assert!(close(
            fit.std_errors[0],
            (s2 * (0.2 + xbar * xbar / sxx)).sqrt(),
            1e-10
        ));
        let t = student_t_975(3).unwrap();
        assert!(close(fit.ci95[1].1, slope + t * fit.std_errors[1], 1e-12));
    }

    #[test]
    fn ci_covers_truth_on_noisy_data() {
        let (a, b, c) = (0.2, 6e-5, 3e-10);
        let xs: Vec<f64> = (0..24).map(|i| 1e3 + i as f64 * 8.6e3).collect();
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let mut covered = [0usize; 3];
        let trials = 200;
        for _ in 0..trials {
            let ys: Vec<f64> = xs
                .iter()
                .map(|x| {
                    // Sum of uniforms: near-normal noise, σ = 0.05 s.
                    let u: f64 = (0..12).map(|_| rng.random::<f64>()).sum::<f64>() - 6.0;
                    a + b * x + c * x * x + 0.05 * u
                })
                .collect();
            let fit = fit_poly(&xs, &ys, 2).unwrap();
            for (k, truth) in [a, b, c].into_iter().enumerate() {
                let (lo, hi) = fit.ci95[k];
                assert!(lo <= fit.coeffs[k] && fit.coeffs[k] <= hi);
                if lo <= truth && truth <= hi {
                    covered[k] += 1;
                }
            }
        }
        // Nominal 95 %: 190 of 200; allow sampling slack.
        for (k, &c) in covered.iter().enumerate() {
            assert!(
                (180..=200).contains(&c),
                "coefficient {k} covered {c}/{trials}"
            );
        }
    }

    #[test]
    fn nonneg_fit_drops_a_negative_term() {
        // Pure linear data with a slight downward curve: the free fit's c is negative.
        let xs: Vec<f64> = [1e3, 2e3, 4e3, 8e3, 16e3, 32e3, 64e3].to_vec();
        let ys: Vec<f64> = xs.iter().map(|x| 0.1 + 1e-4 * x - 1e-11 * x * x).collect();
        let free = fit_poly(&xs, &ys, 2).unwrap();
        assert!(free.coeffs[2] < 0.0);
        let fit = fit_poly_nonneg(&xs, &ys, 2).unwrap();
        assert_eq!(fit.coeffs[2], 0.0);
        assert_eq!(fit.std_errors[2], 0.0);
        assert!(fit.coeffs.iter().all(|&c| c >= 0.0));
        assert_eq!(fit.dof, 5);
        let line = fit_poly(&xs, &ys, 1).unwrap();
        assert!(close(fit.coeffs[0], line.coeffs[0], 1e-9));
        assert!(close(fit.coeffs[1], line.coeffs[1], 1e-9));

        // Non-negative data fitted exactly stays as it is.
        let ys2: Vec<f64> = xs.iter().map(|x| 0.1 + 1e-4 * x + 1e-10 * x * x).collect();
        assert_eq!(fit_poly_nonneg(&xs, &ys2, 2), fit_poly(&xs, &ys2, 2));

        // A negative intercept is dropped, and the rest refitted through the origin.
        let ys3: Vec<f64> = xs.iter().map(|x| -0.5 + 1e-4 * x).collect();
        let f3 = fit_poly_nonneg(&xs, &ys3, 1).unwrap();
        assert_eq!(f3.coeffs[0], 0.0);
        assert!(f3.coeffs[1] > 0.0);
        assert!(fit_poly_nonneg(&xs, &ys3, 7).is_none());
    }
}
