//! The simulator's known cost model: what prefill and each decode step should take.

use super::SimCostArgs;

/// Prefill `t0 + (n−c)/p0 + q·(n²−c²)/2`, decode step `d0 + d1·k`; seconds.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CostModel {
    /// Fixed prefill overhead, s.
    pub t0: f64,
    /// Linear prefill rate, tokens/s.
    pub p0: f64,
    /// Quadratic prefill coefficient, s/token².
    pub q: f64,
    /// Fixed decode step time, s.
    pub d0: f64,
    /// Decode step time per context token, s.
    pub d1: f64,
}

impl CostModel {
    pub fn from_args(args: &SimCostArgs) -> CostModel {
        CostModel {
            t0: args.t0,
            p0: args.p0,
            q: args.q,
            d0: args.d0,
            d1: args.d1,
        }
    }

    /// Seconds to prefill prompt tokens `[cached_tokens, prompt_tokens)`.
    pub fn prefill_s(&self, cached_tokens: u64, prompt_tokens: u64) -> f64 {
        let c = cached_tokens.min(prompt_tokens) as f64;
        let n = prompt_tokens as f64;
        self.t0 + (n - c) / self.p0 + self.q * (n * n - c * c) / 2.0
    }

    /// Seconds for one decode step attending over `context_tokens`.
    pub fn decode_step_s(&self, context_tokens: u64) -> f64 {
        self.d0 + self.d1 * context_tokens as f64
    }

    /// Why these numbers cannot drive real sleeps, naming the flag; `None` when they can.
    pub fn problem(&self) -> Option<String> {
        let finite_non_negative = [
            ("--sim-t0", self.t0),
            ("--sim-q", self.q),
            ("--sim-d0", self.d0),
            ("--sim-d1", self.d1),
        ];
        for (flag, v) in finite_non_negative {
            if !(v.is_finite() && v >= 0.0) {
                return Some(format!("{flag} must be a finite number >= 0, got {v}"));
            }
        }
        if !(self.p0.is_finite() && self.p0 > 0.0) {
            return Some(format!(
                "--sim-p0 must be a positive number of tokens/s, got {}",
                self.p0
            ));
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MODEL: CostModel = CostModel {
        t0: 0.01,
        p0: 1000.0,
        q: 1e-6,
        d0: 0.004,
        d1: 1e-5,
    };

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-12
    }

    #[test]
    fn cold_prefill_is_overhead_plus_linear_plus_quadratic() {
        // 0.01 + 2000/1000 + 1e-6 * 2000^2 / 2
        assert!(close(MODEL.prefill_s(0, 2000), 0.01 + 2.0 + 2.0));
    }

    #[test]
    fn cached_prefix_is_free() {
        // [1000, 2000): 1000/1000 + 1e-6 * (4e6 - 1e6) / 2
        assert!(close(MODEL.prefill_s(1000, 2000), 0.01 + 1.0 + 1.5));
        assert!(close(MODEL.prefill_s(2000, 2000), 0.01));
        assert!(
            close(MODEL.prefill_s(5000, 2000), 0.01),
            "cached beyond the prompt is clipped"
        );
    }

    #[test]
    fn decode_step_grows_with_context() {
        assert!(close(MODEL.decode_step_s(0), 0.004));
        assert!(close(MODEL.decode_step_s(1000), 0.014));
    }

    #[test]
    fn bad_numbers_name_their_flag() {
        let bad = CostModel { p0: 0.0, ..MODEL };
        assert!(bad.problem().unwrap().contains("--sim-p0"));
        let bad = CostModel {
            d1: f64::NAN,
            ..MODEL
        };
        assert!(bad.problem().unwrap().contains("--sim-d1"));
        assert_eq!(MODEL.problem(), None);
    }
}
