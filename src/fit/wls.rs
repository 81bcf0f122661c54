//! Weighted least squares for the small polynomial laws of `fit`, with non-negative
//! coefficients: timings are noisy in proportion to their size (a 1 % jitter is 0.2 ms at 1k
//! and 50 ms at 128k), so each point is weighted by 1/y², which keeps the small lengths in the
//! fit and gives intervals that cover the truth; ordinary least squares does neither.

use crate::stats::student_t_975;

/// `y ≈ Σ coeffs[k]·xᵏ`, fitted to minimise `Σ wᵢ (yᵢ − f(xᵢ))²`.
#[derive(Debug, Clone, PartialEq)]
pub struct WeightedFit {
    /// `coeffs[k]` multiplies `xᵏ`; a term left out of the model is 0.
    pub coeffs: Vec<f64>,
    /// 95 % intervals (Student t); empty when no degrees of freedom are left. A term left
    /// out has the interval (0, 0).
    pub ci95: Vec<(f64, f64)>,
    /// `y − f(x)` per point, in input order, in the units of y.
    pub residuals: Vec<f64>,
    /// Weighted coefficient of determination.
    pub r2: f64,
    pub n: usize,
    weighted_rss: f64,
}

/// Relative weights: 1/y² for positive finite y.
pub fn relative_weights(ys: &[f64]) -> Vec<f64> {
    ys.iter().map(|y| 1.0 / (y * y)).collect()
}

/// The fit with every coefficient ≥ 0 (exact: the best of all subsets of terms whose own fit
/// is non-negative), and the unconstrained coefficients for comparison. `None` when the inputs
/// differ in length, hold non-finite values or non-positive weights, or do not determine the
/// model (fewer distinct x than terms).
pub fn fit_nonneg(
    xs: &[f64],
    ys: &[f64],
    ws: &[f64],
    degree: usize,
) -> Option<(WeightedFit, Vec<f64>)> {
    if xs.len() != ys.len() || xs.len() != ws.len() || degree > 4 {
        return None;
    }
    if xs.iter().chain(ys).chain(ws).any(|v| !v.is_finite()) || ws.iter().any(|w| *w <= 0.0) {
        return None;
    }
    let all: Vec<usize> = (0..=degree).collect();
    let free = solve(xs, ys, ws, &all, degree)?;
    if free.coeffs.iter().all(|c| *c >= 0.0) {
        let coeffs = free.coeffs.clone();
        return Some((free, coeffs));
    }
    let mut best: Option<(usize, WeightedFit)> = None;
    for mask in 1u32..(1 << (degree + 1)) {
        let powers: Vec<usize> = all
            .iter()
            .copied()
            .filter(|k| mask & (1 << k) != 0)
            .collect();
        let Some(fit) = solve(xs, ys, ws, &powers, degree) else {
            continue;
        };
        if fit.coeffs.iter().any(|c| *c < 0.0) {
            continue;
        }
        let better = match &best {
            None => true,
            Some((terms, b)) => {
                let tol = 1e-12 * b.weighted_rss.max(f64::MIN_POSITIVE);
                fit.weighted_rss < b.weighted_rss - tol
                    || (fit.weighted_rss <= b.weighted_rss + tol && powers.len() < *terms)
            }
        };
        if better {
            best = Some((powers.len(), fit));
        }
    }
    best.map(|(_, f)| (f, free.coeffs))
}

/// Weighted fit of `y = Σ_{k ∈ powers} cₖ xᵏ` via the normal equations in x scaled to
/// [−1, 1], equilibrated; `None` when the design is rank deficient.
fn solve(
    xs: &[f64],
    ys: &[f64],
    ws: &[f64],
    powers: &[usize],
    degree: usize,
) -> Option<WeightedFit> {
    let (n, p) = (xs.len(), powers.len());
    if n < p || p == 0 {
        return None;
    }
    let scale = xs.iter().map(|x| x.abs()).fold(0.0, f64::max);
    let scale = if scale > 0.0 { scale } else { 1.0 };
    let phi = |i: usize, j: usize| (xs[i] / scale).powi(powers[j] as i32);
    // M = ΦᵀWΦ, v = ΦᵀWy.
    let mut m = vec![0.0; p * p];
    let mut v = vec![0.0; p];
    for i in 0..n {
        for j in 0..p {
            v[j] += ws[i] * phi(i, j) * ys[i];
            for k in 0..p {
                m[j * p + k] += ws[i] * phi(i, j) * phi(i, k);
            }
        }
    }
    // Equilibrate: D M D with D = diag(1/sqrt(M_jj)).
    let d: Vec<f64> = (0..p).map(|j| 1.0 / m[j * p + j].sqrt()).collect();
    if d.iter().any(|x| !x.is_finite()) {
        return None;
    }
    for j in 0..p {
        for k in 0..p {
            m[j * p + k] *= d[j] * d[k];
        }
    }
    let inv = invert(&m, p)?;
    // β = D (DMD)⁻¹ D v; Cov(β)/σ² = D (DMD)⁻¹ D.
    let cov = |j: usize, k: usize| d[j] * inv[j * p + k] * d[k];
    let beta: Vec<f64> = (0..p)
        .map(|j| (0..p).map(|k| cov(j, k) * v[k]).sum())
        .collect();
    let residuals: Vec<f64> = (0..n)
        .map(|i| ys[i] - (0..p).map(|j| beta[j] * phi(i, j)).sum::<f64>())
        .collect();
    let weighted_rss: f64 = (0..n).map(|i| ws[i] * residuals[i] * residuals[i]).sum();
    let sw: f64 = ws.iter().sum();
    let mean = (0..n).map(|i| ws[i] * ys[i]).sum::<f64>() / sw;
    let tss: f64 = (0..n).map(|i| ws[i] * (ys[i] - mean).powi(2)).sum();
    let r2 = if tss > 0.0 {
        1.0 - weighted_rss / tss
    } else {
        1.0
    };
    let unscale = |j: usize| scale.powi(powers[j] as i32);
    let mut coeffs = vec![0.0; degree + 1];
    for j in 0..p {
        coeffs[powers[j]] = beta[j] / unscale(j);
    }
    let dof = n - p;
    let mut ci95 = Vec::new();
    if dof > 0 {
        let t = student_t_975(dof)?;
        let s2 = weighted_rss / dof as f64;
        ci95 = vec![(0.0, 0.0); degree + 1];
        for j in 0..p {
            let se = (s2 * cov(j, j)).max(0.0).sqrt() / unscale(j);
            let c = coeffs[powers[j]];
            ci95[powers[j]] = (c - t * se, c + t * se);
        }
    }
    Some(WeightedFit {
        coeffs,
        ci95,
        residuals,
        r2,
        n,
        weighted_rss,
    })
}

/// Inverse of a small symmetric positive-definite matrix by Gauss–Jordan with partial
/// pivoting; `None` when it is singular to working precision.
fn invert(m: &[f64], p: usize) -> Option<Vec<f64>> {
    let mut a = m.to_vec();
    let mut inv: Vec<f64> = (0..p * p)
        .map(|i| if i / p == i % p { 1.0 } else { 0.0 })
        .collect();
    for col in 0..p {
        let pivot =
            (col..p).max_by(|&i, &j| a[i * p + col].abs().total_cmp(&a[j * p + col].abs()))?;
        if a[pivot * p + col].abs() < 1e-12 {
            return None;
        }
        for k in 0..p {
            a.swap(col * p + k, pivot * p + k);
            inv.swap(col * p + k, pivot * p + k);
        }
        let diag = a[col * p + col];
        for k in 0..p {
            a[col * p + k] /= diag;
            inv[col * p + k] /= diag;
        }
        for row in 0..p {
            if row != col {
                let f = a[row * p + col];
                for k in 0..p {
                    a[row * p + k] -= f * a[col * p + k];
                    inv[row * p + k] -= f * inv[col * p + k];
                }
            }
        }
    }
    Some(inv)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_data_is_fitted_exactly_with_any_weights() {
        let xs = [1.0e3, 4.0e3, 1.6e4, 6.4e4, 1.28e5];
        let ys: Vec<f64> = xs.iter().map(|x| 0.01 + 1e-5 * x + 2e-10 * x * x).collect();
        let (f, free) = fit_nonneg(&xs, &ys, &relative_weights(&ys), 2).unwrap();
        assert_eq!(f.coeffs, free);
        assert!((f.coeffs[0] - 0.01).abs() < 1e-10);
        assert!((f.coeffs[1] - 1e-5).abs() < 1e-15);
        assert!((f.coeffs[2] - 2e-10).abs() < 1e-19);
        assert!(f.residuals.iter().all(|r| r.abs() < 1e-12));
        assert_eq!(f.ci95.len(), 3);
    }

    #[test]
    fn a_negative_term_is_left_out() {
        let xs = [1.0, 2.0, 3.0, 4.0];
        let ys = [1.0, 1.9, 2.6, 3.1]; // concave
        let (f, free) = fit_nonneg(&xs, &ys, &[1.0; 4], 2).unwrap();
        assert!(free[2] < 0.0);
        assert_eq!(f.coeffs[2], 0.0);
        assert_eq!(f.ci95[2], (0.0, 0.0));
        assert!(f.coeffs[1] > 0.0);
    }

    #[test]
    fn undetermined_models_are_refused() {
        assert!(fit_nonneg(&[1.0, 1.0, 1.0], &[1.0, 2.0, 3.0], &[1.0; 3], 2).is_none());
        assert!(fit_nonneg(&[1.0, 2.0], &[1.0, 2.0], &[1.0; 2], 2).is_none());
        assert!(fit_nonneg(&[1.0, 2.0], &[1.0, f64::NAN], &[1.0; 2], 1).is_none());
        assert!(fit_nonneg(&[1.0, 2.0], &[1.0, 2.0], &[1.0, 0.0], 1).is_none());
    }
}
