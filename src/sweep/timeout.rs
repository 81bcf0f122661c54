//! Per-request deadlines sized to the work: predicted from the points already measured,
//! times a safety factor, with a floor — so a slow point fails alone.

use std::time::Duration;

/// Multiplier on the predicted time.
const SAFETY: f64 = 4.0;
/// No deadline is shorter than this.
const FLOOR: Duration = Duration::from_secs(30);
/// Before anything is measured.
const FIRST: Duration = Duration::from_secs(600);

#[derive(Debug, Clone)]
pub enum TimeoutPolicy {
    Fixed(Duration),
    Auto(Predictor),
}

impl TimeoutPolicy {
    pub fn parse(text: &str) -> anyhow::Result<Self> {
        if text.eq_ignore_ascii_case("auto") {
            return Ok(TimeoutPolicy::Auto(Predictor::default()));
        }
        match text.parse::<f64>() {
            Ok(s) if s > 0.0 && s.is_finite() => {
                Ok(TimeoutPolicy::Fixed(Duration::from_secs_f64(s)))
            }
            _ => anyhow::bail!("--timeout `{text}`: use `auto` or a positive number of seconds"),
        }
    }

    pub fn deadline(&self, context_tokens: u64, output_tokens: u64) -> Duration {
        match self {
            TimeoutPolicy::Fixed(d) => *d,
            TimeoutPolicy::Auto(p) => p.deadline(context_tokens, output_tokens),
        }
    }

    /// The predicted time of a request (`--timeout auto` only: a fixed deadline keeps no
    /// measurements), an upper-side estimate from the points measured so far.
    pub fn predicted_s(&self, context_tokens: u64, output_tokens: u64) -> Option<f64> {
        match self {
            TimeoutPolicy::Fixed(_) => None,
            TimeoutPolicy::Auto(p) => p.predicted_s(context_tokens, output_tokens),
        }
    }

    pub fn observe(&mut self, context_tokens: u64, ttft_s: f64, decode_tps: Option<f64>) {
        if let TimeoutPolicy::Auto(p) = self {
            p.observe(context_tokens, ttft_s, decode_tps);
        }
    }
}

/// Predicts a request's time from measured points. With three or more lengths measured,
/// from the fitted scaling laws (TTFT ≈ a + b·n + c·n², decode step ≈ d + e·n) over each
/// length's slowest sample; before that, TTFT grows at most quadratically with the context
/// (attention), so scaling the largest point by (n/n0)² bounds it, and decode slows at most
/// linearly. Never below what the largest point measured took.
#[derive(Debug, Clone, Default)]
pub struct Predictor {
    /// Per context length: slowest TTFT and slowest decode rate seen.
    points: std::collections::BTreeMap<u64, (f64, Option<f64>)>,
}

impl Predictor {
    pub fn observe(&mut self, n: u64, ttft_s: f64, decode_tps: Option<f64>) {
        let e = self.points.entry(n).or_insert((ttft_s, decode_tps));
        e.0 = e.0.max(ttft_s);
        e.1 = match (e.1, decode_tps) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
    }

    fn bound_s(&self, n: u64, output_tokens: u64) -> Option<f64> {
        let (&n0, &(t0, d0)) = self.points.iter().next_back()?;
        let scale = (n as f64 / n0 as f64).max(1.0);
        let ttft = t0 * scale * scale;
        let decode = d0.map(|d| output_tokens as f64 / d * scale).unwrap_or(ttft);
        Some(ttft + decode)
    }

    fn fitted_s(&self, n: u64, output_tokens: u64) -> Option<f64> {
        let ttfts: Vec<(u64, f64)> = self.points.iter().map(|(n, (t, _))| (*n, *t)).collect();
        let steps: Vec<(u64, f64)> = self
            .points
            .iter()
            .filter_map(|(n, (_, d))| d.filter(|d| *d > 0.0).map(|d| (*n, 1.0 / d)))
            .collect();
        if ttfts.len() < 3 {
            return None;
        }
        let ttft = crate::fit::fit_ttft(&ttfts)?.predict_s(n);
        let step = crate::fit::fit_decode_step(&steps).map(|f| f.step_s(n + output_tokens))?;
        Some(ttft + step * output_tokens as f64)
    }

    pub fn predicted_s(&self, n: u64, output_tokens: u64) -> Option<f64> {
        let (&n0, &(t0, _)) = self.points.iter().next_back()?;
        match self.fitted_s(n, output_tokens) {
            Some(f) if f.is_finite() && f > 0.0 => Some(if n >= n0 { f.max(t0) } else { f }),
            _ => self.bound_s(n, output_tokens),
        }
    }

    pub fn deadline(&self, n: u64, output_tokens: u64) -> Duration {
        match self.predicted_s(n, output_tokens) {
            Some(p) => Duration::from_secs_f64((p * SAFETY).min(86_400.0)).max(FLOOR),
            None => FIRST,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parse_policy() {
        assert!(matches!(
            TimeoutPolicy::parse("auto").unwrap(),
            TimeoutPolicy::Auto(_)
        ));
        assert!(
            matches!(TimeoutPolicy::parse("2.5").unwrap(), TimeoutPolicy::Fixed(d) if d == Duration::from_millis(2500))
        );
        assert!(TimeoutPolicy::parse("-1").is_err());
        assert!(TimeoutPolicy::parse("soon").is_err());
    }

    #[test]
    fn deadlines_scale_with_the_work() {
        let mut p = Predictor::default();
        assert_eq!(p.deadline(1024, 64), FIRST);
        p.observe(8192, 10.0, Some(50.0));
        // 16k: ttft 10·4 = 40 s, decode 64/50·2 = 2.56 s -> x4 = 170.24 s.
        let d = p.deadline(16384, 64).as_secs_f64();
        assert!((d - 170.24).abs() < 1e-6, "{d}");
        // Small points get their own bound, at least the floor.
        assert_eq!(
            p.deadline(1024, 1),
            Duration::from_secs_f64(10.0 * SAFETY + 1.0 / 50.0 * SAFETY).max(FLOOR)
        );
    }

    #[test]
    fn with_three_lengths_the_fit_predicts() {
        // TTFT = 0.01 + 1e-5 n + 1e-10 n², decode step = 4 ms + 1e-7 n, exact.
        let mut p = Predictor::default();
        for n in [1024u64, 4096, 16384, 32768] {
            let t = 0.01 + 1e-5 * n as f64 + 1e-10 * (n as f64).powi(2);
            p.observe(n, t, Some(1.0 / (0.004 + 1e-7 * n as f64)));
        }
        let n = 131072u64;
        let want = 0.01
            + 1e-5 * n as f64
            + 1e-10 * (n as f64).powi(2)
            + 64.0 * (0.004 + 1e-7 * (n + 64) as f64);
        let got = p.predicted_s(n, 64).unwrap();
        assert!((got - want).abs() / want < 0.02, "{got} vs {want}");
        // The quadratic bound would have said 16x the 32k TTFT alone.
        assert!(got < p.bound_s(n, 64).unwrap());
    }
}
