//! Axis scales and their ticks: log₂ context axes with ticks at powers of two, linear axes
//! with 1-2-5 steps, log₁₀ axes with 1-2-5 ticks per decade. Pure arithmetic, no drawing.

/// How data values map onto an axis.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ScaleKind {
    Linear,
    /// Logarithmic with ticks at powers of two (context lengths).
    Log2,
    /// Logarithmic with ticks at 1, 2, 5 × 10ᵏ.
    Log10,
}

impl ScaleKind {
    pub fn name(self) -> &'static str {
        match self {
            ScaleKind::Linear => "linear",
            ScaleKind::Log2 => "log2",
            ScaleKind::Log10 => "log10",
        }
    }

    pub fn is_log(self) -> bool {
        !matches!(self, ScaleKind::Linear)
    }
}

/// A data domain mapped onto a pixel range, with the tick values chosen for it.
#[derive(Debug, Clone, PartialEq)]
pub struct Scale {
    pub kind: ScaleKind,
    pub lo: f64,
    pub hi: f64,
    pub px_lo: f64,
    pub px_hi: f64,
    pub ticks: Vec<f64>,
}

/// Most ticks an axis gets before thinning.
const MAX_TICKS: usize = 12;

impl Scale {
    /// A scale covering the finite (and, for log scales, positive) values, with ticks.
    /// `include_zero` extends a linear domain to 0 (rates, residuals).
    pub fn fit(
        kind: ScaleKind,
        values: &[f64],
        include_zero: bool,
        px_lo: f64,
        px_hi: f64,
    ) -> Scale {
        let usable: Vec<f64> = values
            .iter()
            .copied()
            .filter(|v| v.is_finite() && (!kind.is_log() || *v > 0.0))
            .collect();
        let (lo, hi, ticks) = match kind {
            ScaleKind::Linear => {
                let (mut lo, mut hi) = min_max(&usable).unwrap_or((0.0, 1.0));
                if include_zero {
                    lo = lo.min(0.0);
                    hi = hi.max(0.0);
                }
                linear_ticks(lo, hi)
            }
            ScaleKind::Log2 => log2_ticks(min_max(&usable).unwrap_or((1024.0, 2048.0))),
            ScaleKind::Log10 => log10_ticks(min_max(&usable).unwrap_or((1.0, 10.0))),
        };
        Scale {
            kind,
            lo,
            hi,
            px_lo,
            px_hi,
            ticks,
        }
    }

    /// Whether `v` can be placed on this scale (finite, positive on a log scale, in range).
    pub fn contains(&self, v: f64) -> bool {
        v.is_finite()
            && (!self.kind.is_log() || v > 0.0)
            && v >= self.lo * (1.0 - 1e-9) - 1e-300
            && v <= self.hi * (1.0 + 1e-9) + 1e-300
    }

    /// Pixel position of `v`; `None` when it cannot be placed on a log scale.
    pub fn map(&self, v: f64) -> Option<f64> {
        if !v.is_finite() || (self.kind.is_log() && v <= 0.0) {
            return None;
        }
        let t = |x: f64| if self.kind.is_log() { x.ln() } else { x };
        let span = t(self.hi) - t(self.lo);
        let frac = if span > 0.0 {
            (t(v) - t(self.lo)) / span
        } else {
            0.5
        };
        Some(self.px_lo + frac * (self.px_hi - self.px_lo))
    }

    /// The ticks that get a label: all of them, or every other one on a crowded axis.
    pub fn labelled_ticks(&self) -> Vec<f64> {
        let step = self.ticks.len().div_ceil(MAX_TICKS).max(1);
        self.ticks.iter().copied().step_by(step).collect()
    }
}

fn min_max(values: &[f64]) -> Option<(f64, f64)> {
    let lo = values.iter().copied().reduce(f64::min)?;
    let hi = values.iter().copied().reduce(f64::max)?;
    Some((lo, hi))
}

/// Powers of two enclosing `[lo, hi]`, one tick per power.
fn log2_ticks((lo, hi): (f64, f64)) -> (f64, f64, Vec<f64>) {
    let mut e_lo = lo.log2().floor() as i32;
    let mut e_hi = hi.log2().ceil() as i32;
    if e_lo == e_hi {
        e_lo -= 1;
        e_hi += 1;
    }
    let ticks = (e_lo..=e_hi).map(|e| 2f64.powi(e)).collect();
    (2f64.powi(e_lo), 2f64.powi(e_hi), ticks)
}

/// A 1-2-5 step giving about five intervals over `[lo, hi]`, the domain rounded out to it.
fn linear_ticks(lo: f64, hi: f64) -> (f64, f64, Vec<f64>) {
    let (lo, hi) = if hi > lo {
        (lo, hi)
    } else if lo == 0.0 {
        (0.0, 1.0)
    } else {
        let pad = lo.abs() * 0.1;
        (lo - pad, hi + pad)
    };
    let raw = (hi - lo) / 5.0;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 2.5, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * mag);
    let first = (lo / step).floor() as i64;
    let last = (hi / step).ceil() as i64;
    let ticks: Vec<f64> = (first..=last).map(|k| clean(k as f64 * step)).collect();
    (clean(first as f64 * step), clean(last as f64 * step), ticks)
}

/// 1-2-5 values enclosing `[lo, hi]`; ticks at each of them, or only at decades when the
/// domain spans many.
fn log10_ticks((lo, hi): (f64, f64)) -> (f64, f64, Vec<f64>) {
    let (lo, hi) = if hi > lo {
        (lo, hi)
    } else {
        (lo / 2.0, hi * 2.0)
    };
    let d_lo = lo.log10().floor() as i32;
    let d_hi = hi.log10().ceil() as i32;
    let mut all = Vec::new();
    for d in d_lo..=d_hi {
        for m in [1.0, 2.0, 5.0] {
            all.push(clean(m * 10f64.powi(d)));
        }
    }
    let lo_t = all.iter().copied().rfind(|v| *v <= lo).unwrap_or(lo);
    let hi_t = all.iter().copied().find(|v| *v >= hi).unwrap_or(hi);
    let inside: Vec<f64> = all
        .into_iter()
        .filter(|v| *v >= lo_t && *v <= hi_t)
        .collect();
    let ticks = if inside.len() > MAX_TICKS {
        let decades: Vec<f64> = inside.iter().copied().filter(|v| is_decade(*v)).collect();
        // Keep the ends so the domain stays labelled.
        let mut t = vec![lo_t];
        t.extend(decades.into_iter().filter(|v| *v > lo_t && *v < hi_t));
        t.push(hi_t);
        t
    } else {
        inside
    };
    (lo_t, hi_t, ticks)
}

fn is_decade(v: f64) -> bool {
    let l = v.log10();
    (l - l.round()).abs() < 1e-9
}

/// Round away binary noise (0.30000000000000004 → 0.3) so labels and data attributes are clean.
fn clean(v: f64) -> f64 {
    if v == 0.0 {
        return 0.0;
    }
    let digits = 12 - v.abs().log10().floor() as i32;
    let p = 10f64.powi(digits.clamp(-300, 300));
    (v * p).round() / p
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn context_axis_has_powers_of_two() {
        let s = Scale::fit(ScaleKind::Log2, &[1024.0, 32768.0], false, 0.0, 100.0);
        assert_eq!((s.lo, s.hi), (1024.0, 32768.0));
        assert_eq!(
            s.ticks,
            vec![1024.0, 2048.0, 4096.0, 8192.0, 16384.0, 32768.0]
        );
        assert_eq!(s.map(1024.0), Some(0.0));
        assert_eq!(s.map(32768.0), Some(100.0));
        assert!((s.map(4096.0).unwrap() - 40.0).abs() < 1e-9);
        // Not a power of two: rounded out.
        let s = Scale::fit(ScaleKind::Log2, &[1000.0, 5000.0], false, 0.0, 1.0);
        assert_eq!((s.lo, s.hi), (512.0, 8192.0));
    }

    #[test]
    fn a_single_length_gets_a_domain_around_it() {
        let s = Scale::fit(ScaleKind::Log2, &[8192.0], false, 0.0, 1.0);
        assert_eq!((s.lo, s.hi), (4096.0, 16384.0));
    }

    #[test]
    fn linear_ticks_are_nice() {
        let s = Scale::fit(ScaleKind::Linear, &[130.0, 970.0], true, 0.0, 1.0);
        assert_eq!((s.lo, s.hi), (0.0, 1000.0));
        assert_eq!(s.ticks, vec![0.0, 200.0, 400.0, 600.0, 800.0, 1000.0]);
        let s = Scale::fit(ScaleKind::Linear, &[-0.003, 0.002], true, 0.0, 1.0);
        assert_eq!(s.ticks.first(), Some(&-0.003));
        assert!(s.ticks.contains(&0.0));
    }

    #[test]
    fn log_ticks_use_1_2_5() {
        let s = Scale::fit(ScaleKind::Log10, &[0.013, 0.7], false, 0.0, 1.0);
        assert_eq!((s.lo, s.hi), (0.01, 1.0));
        assert_eq!(s.ticks, vec![0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0]);
        let wide = Scale::fit(ScaleKind::Log10, &[0.001, 500.0], false, 0.0, 1.0);
        assert_eq!(wide.ticks, vec![0.001, 0.01, 0.1, 1.0, 10.0, 100.0, 500.0]);
    }

    #[test]
    fn unplaceable_values_are_refused() {
        let s = Scale::fit(
            ScaleKind::Log10,
            &[0.0, -1.0, f64::NAN, 2.0],
            false,
            0.0,
            1.0,
        );
        assert_eq!(s.map(0.0), None);
        assert_eq!(s.map(f64::INFINITY), None);
        assert!(s.map(2.0).is_some());
    }
}
