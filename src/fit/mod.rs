//! Fitted scaling laws: TTFT(n) ≈ a + b·n + c·n² (fixed overhead, linear work, attention)
//! and decode step time ≈ d + e·n, weighted least squares on the per-point medians (weights
//! 1/y², see `wls`), with 95 % intervals and residuals. Physical coefficients are kept
//! non-negative; a term the data would make negative is fixed at 0, and the fit says so.

mod wls;

use crate::record::{PointSummary, Summary};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use wls::WeightedFit;

/// Fewest distinct lengths for the TTFT fit (three coefficients).
pub const MIN_TTFT_POINTS: usize = 3;
/// Fewest distinct lengths for the decode-step fit (two coefficients).
pub const MIN_DECODE_POINTS: usize = 2;

/// One fitted law: its coefficients `C` (flattened into the JSON, and reachable as fields
/// of the fit through `Deref`), their 95 % intervals `I`, and how well it fits.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LawFit<C, I> {
    #[serde(flatten)]
    pub coeffs: C,
    /// 95 % intervals; `None` when no degrees of freedom are left (as many points as terms).
    pub ci95: Option<I>,
    pub r2: f64,
    /// The lengths fitted, in order, with the measured-minus-fitted value of each.
    pub context_tokens: Vec<u64>,
    pub residuals_s: Vec<f64>,
    pub n: usize,
    /// Coefficients fixed at 0 because the unconstrained fit made them negative.
    pub fixed_at_zero: Vec<String>,
    /// Why terms were fixed, for a reader.
    pub note: Option<String>,
}

impl<C, I> std::ops::Deref for LawFit<C, I> {
    type Target = C;
    fn deref(&self) -> &C {
        &self.coeffs
    }
}

/// TTFT(n) = a + b·n + c·n², n in tokens: the coefficients (`T = f64`) or their intervals.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Ttft<T> {
    /// Fixed overhead per request, seconds.
    pub a_s: T,
    /// Linear prefill cost, seconds per token (1/b is the asymptotic linear rate).
    pub b_s_per_token: T,
    /// Quadratic (attention) cost, seconds per token².
    pub c_s_per_token2: T,
}

/// Decode step time(n) = d + e·n (the inverse of decode tok/s), n in tokens.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct DecodeStep<T> {
    /// Fixed step time, seconds.
    pub d_s: T,
    /// Step time added per context token, seconds per token.
    pub e_s_per_token: T,
}

pub type TtftFit = LawFit<Ttft<f64>, Ttft<(f64, f64)>>;
pub type TtftCi = Ttft<(f64, f64)>;
pub type DecodeStepFit = LawFit<DecodeStep<f64>, DecodeStep<(f64, f64)>>;
pub type DecodeCi = DecodeStep<(f64, f64)>;

/// A law's terms in polynomial order (constant first), so one fit serves every law.
trait Terms<T>: Sized {
    /// Each term's name and unit, in polynomial order.
    const TERMS: &'static [(&'static str, &'static str)];
    /// Fewest distinct lengths that determine the law.
    const MIN_POINTS: usize;
    /// From values in polynomial order; `None` unless there is one per term.
    fn from_terms(v: &[T]) -> Option<Self>;
}

impl<T: Copy> Terms<T> for Ttft<T> {
    const TERMS: &'static [(&'static str, &'static str)] = &[
        ("a_s", "s"),
        ("b_s_per_token", "s/token"),
        ("c_s_per_token2", "s/token²"),
    ];
    const MIN_POINTS: usize = MIN_TTFT_POINTS;
    fn from_terms(v: &[T]) -> Option<Self> {
        match *v {
            [a_s, b_s_per_token, c_s_per_token2] => Some(Ttft {
                a_s,
                b_s_per_token,
                c_s_per_token2,
            }),
            _ => None,
        }
    }
}

impl<T: Copy> Terms<T> for DecodeStep<T> {
    const TERMS: &'static [(&'static str, &'static str)] =
        &[("d_s", "s"), ("e_s_per_token", "s/token")];
    const MIN_POINTS: usize = MIN_DECODE_POINTS;
    fn from_terms(v: &[T]) -> Option<Self> {
        match *v {
            [d_s, e_s_per_token] => Some(DecodeStep { d_s, e_s_per_token }),
            _ => None,
        }
    }
}

/// Both laws; each is `None` when too few points have a valid median.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct ScalingFit {
    pub ttft: Option<TtftFit>,
    pub decode_step: Option<DecodeStepFit>,
}

impl TtftFit {
    /// Predicted TTFT at `context_tokens`, seconds.
    pub fn predict_s(&self, context_tokens: u64) -> f64 {
        let n = context_tokens as f64;
        self.a_s + self.b_s_per_token * n + self.c_s_per_token2 * n * n
    }
}

impl DecodeStepFit {
    /// Predicted time of one decode step at `context_tokens`, seconds.
    pub fn step_s(&self, context_tokens: u64) -> f64 {
        self.d_s + self.e_s_per_token * context_tokens as f64
    }

    /// Predicted decode tok/s at `context_tokens`; `None` where the step time is not positive.
    pub fn tps(&self, context_tokens: u64) -> Option<f64> {
        let s = self.step_s(context_tokens);
        (s > 0.0).then(|| 1.0 / s)
    }
}

impl ScalingFit {
    /// Predicted time of a whole request (prefill, then `output_tokens` decode steps at the
    /// mean context they run at), seconds; `None` without a TTFT fit. For `--timeout auto`.
    pub fn predict_request_s(&self, context_tokens: u64, output_tokens: u64) -> Option<f64> {
        let ttft = self.ttft.as_ref()?.predict_s(context_tokens);
        let decode = self
            .decode_step
            .as_ref()
            .map(|d| output_tokens as f64 * d.step_s(context_tokens + output_tokens / 2))
            .unwrap_or(0.0);
        Some(ttft + decode)
    }

    /// The fit as the JSON stored in `summary.fit`.
    pub fn to_json(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }

    /// Read back `summary.fit`; `None` when it is absent or not this shape.
    pub fn from_json(value: &Value) -> Option<ScalingFit> {
        serde_json::from_value(value.clone()).ok()
    }
}

/// Fit TTFT(n) = a + b·n + c·n² to `(context_tokens, ttft_s)` pairs (e.g. per-point medians);
/// `None` with fewer than [`MIN_TTFT_POINTS`] distinct lengths or non-finite values.
pub fn fit_ttft(points: &[(u64, f64)]) -> Option<TtftFit> {
    fit_law(points)
}

/// Fit step time = d + e·n to `(context_tokens, step_s)` pairs; `None` with fewer than
/// [`MIN_DECODE_POINTS`] distinct lengths.
pub fn fit_decode_step(points: &[(u64, f64)]) -> Option<DecodeStepFit> {
    fit_law(points)
}

/// The non-negative weighted fit of the polynomial law `C` (its intervals `I`).
fn fit_law<C: Terms<f64>, I: Terms<(f64, f64)>>(points: &[(u64, f64)]) -> Option<LawFit<C, I>> {
    let Constrained {
        lengths,
        fit,
        fixed,
        note,
    } = fit_nonneg(points, C::TERMS.len() - 1, C::MIN_POINTS, C::TERMS)?;
    Some(LawFit {
        coeffs: C::from_terms(&fit.coeffs)?,
        ci95: I::from_terms(&fit.ci95),
        r2: fit.r2,
        context_tokens: lengths,
        residuals_s: fit.residuals,
        n: fit.n,
        fixed_at_zero: fixed,
        note,
    })
}

/// Both laws from per-point medians: TTFT medians, and decode step = 1 / decode tok/s median
/// (the streamed rate, else the two-point one).
pub fn fit_points(points: &[PointSummary]) -> ScalingFit {
    let ttft: Vec<(u64, f64)> = points
        .iter()
        .filter_map(|p| Some((p.context_tokens, p.ttft_s?.median)))
        .collect();
    let step: Vec<(u64, f64)> = points
        .iter()
        .filter_map(|p| {
            let tps = p.decode_tps.or(p.two_point_decode_tps)?.median;
            (tps > 0.0 && tps.is_finite()).then(|| (p.context_tokens, 1.0 / tps))
        })
        .collect();
    ScalingFit {
        ttft: fit_ttft(&ttft),
        decode_step: fit_decode_step(&step),
    }
}

/// The fit of a summary's medians, as JSON: `{"ttft": …|null, "decode_step": …|null}`.
pub fn fit_summary(summary: &Summary) -> Value {
    fit_points(&summary.points).to_json()
}

/// A non-negative fit with what a reader needs to know about it.
struct Constrained {
    /// The lengths fitted, in the order of the residuals.
    lengths: Vec<u64>,
    fit: WeightedFit,
    /// Terms fixed at 0.
    fixed: Vec<String>,
    note: Option<String>,
}

/// Least squares with non-negative coefficients; names the terms it had to fix at 0.
fn fit_nonneg(
    points: &[(u64, f64)],
    degree: usize,
    min_points: usize,
    terms: &[(&str, &str)],
) -> Option<Constrained> {
    let usable: Vec<(u64, f64)> = points
        .iter()
        .copied()
        .filter(|(_, y)| y.is_finite() && *y > 0.0)
        .collect();
    let mut distinct: Vec<u64> = usable.iter().map(|(n, _)| *n).collect();
    distinct.sort_unstable();
    distinct.dedup();
    if distinct.len() < min_points {
        return None;
    }
    let xs: Vec<f64> = usable.iter().map(|(n, _)| *n as f64).collect();
    let ys: Vec<f64> = usable.iter().map(|(_, y)| *y).collect();
    let (fit, free) = wls::fit_nonneg(&xs, &ys, &wls::relative_weights(&ys), degree)?;
    let lengths = usable.iter().map(|(n, _)| *n).collect();
    let mut fixed = Vec::new();
    let mut why = Vec::new();
    for (k, (name, unit)) in terms.iter().enumerate() {
        if fit.coeffs[k] == 0.0 && free[k] != 0.0 {
            fixed.push(name.to_string());
        }
        if free[k] < 0.0 {
            why.push(format!("{name} = {:.3e} {unit}", free[k]));
        }
    }
    let note = (!fixed.is_empty()).then(|| {
        format!(
            "the unconstrained fit gave {} (negative, not physical); refitted with {} fixed at 0",
            why.join(", "),
            fixed.join(", ")
        )
    });
    Some(Constrained {
        lengths,
        fit,
        fixed,
        note,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exact_quadratic_is_recovered() {
        let pts: Vec<(u64, f64)> = [1024u64, 4096, 16384, 65536]
            .iter()
            .map(|&n| (n, 0.01 + 1e-5 * n as f64 + 2e-10 * (n as f64).powi(2)))
            .collect();
        let f = fit_ttft(&pts).unwrap();
        assert!((f.a_s - 0.01).abs() < 1e-9, "{f:?}");
        assert!((f.b_s_per_token - 1e-5).abs() < 1e-12);
        assert!((f.c_s_per_token2 - 2e-10).abs() < 1e-16);
        assert!(f.fixed_at_zero.is_empty() && f.note.is_none());
        assert!((f.predict_s(8192) - (0.01 + 0.08192 + 2e-10 * 8192.0 * 8192.0)).abs() < 1e-9);
    }

    #[test]
    fn a_negative_quadratic_term_is_fixed_at_zero_and_said() {
        // Concave data: the free fit wants c < 0.
        let pts: Vec<(u64, f64)> = [1024u64, 2048, 4096, 8192]
            .iter()
            .map(|&n| (n, 0.02 + 1e-5 * n as f64 - 3e-10 * (n as f64).powi(2)))
            .collect();
        let f = fit_ttft(&pts).unwrap();
        assert_eq!(f.c_s_per_token2, 0.0);
        assert_eq!(f.fixed_at_zero, vec!["c_s_per_token2".to_string()]);
        assert!(f.note.as_deref().unwrap().contains("c_s_per_token2"));
        assert!(f.a_s >= 0.0 && f.b_s_per_token >= 0.0);
    }

    #[test]
    fn too_few_points_give_null_parts() {
        let f = fit_points(&[]);
        assert_eq!(f, ScalingFit::default());
        assert_eq!(
            f.to_json(),
            serde_json::json!({"ttft": null, "decode_step": null})
        );
        assert!(fit_ttft(&[(1024, 0.1), (2048, 0.2)]).is_none());
        assert!(fit_ttft(&[(1024, 0.1), (1024, 0.2), (1024, 0.3)]).is_none());
        assert!(fit_decode_step(&[(1024, 0.01)]).is_none());
    }
}
