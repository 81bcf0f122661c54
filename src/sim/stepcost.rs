//! The engine's step cost model, the ground truth every timing test uses. One step costs
//!
//! ```text
//! step = overhead
//!      + Σ over prefill chunks [c, e):  (t0 on a request's first chunk) + (e−c)/p0 + q·(e²−c²)/2
//!      + if any request decodes:        d0 + d1·Σ(context of each decoding request) + d2·(decoding requests)
//!      + if any request drafted:        drafter_step + per_draft_token·Σ(draft tokens each decoding request verifies)
//! ```
//!
//! where the prefill chunks' sum is multiplied by (1 + interference·decoding requests) when
//! the step also decodes: a prompt prefilled beside k decoding requests costs more than
//! alone (llama.cpp on a CPU: a 1k prompt 145–150 ms alone, 155–170 ms beside three).
//!
//! The speculative terms (`spec_draft`, default zero) are why speculation stops paying under
//! load: a verify step of B requests with K−1 drafts each costs B·(K−1) more token slots
//! than a plain decode step, while the weights it saves re-reading (d0) are shared by the
//! batch. With E tokens per verify step, speculation pays while
//! E·(d0 + B·a) > d0 + B·a + drafter_step + per_draft_token·B·(K−1), a = d1·context + d2:
//! below the crossover B* = ((E−1)·d0 − drafter_step) / (per_draft_token·(K−1) − (E−1)·a).
//!
//! The chunk terms telescope, so a prompt split into chunks costs what it costs whole, and
//! with one request in flight (overhead 0, d2 0, the defaults) every prefill and decode step
//! takes exactly what the one-request-at-a-time simulator charged.

use super::cost::CostModel;

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StepCost {
    pub model: CostModel,
    /// Fixed cost of every step, s.
    pub overhead: f64,
    /// Decode cost per decoding request, s.
    pub d2: f64,
    /// Extra share of a step's prefill work per request decoding in the same step: the
    /// prefill part costs (1 + interference·k) beside k decodes. 0: none.
    pub interference: f64,
    /// What speculative decoding adds to a decode step; the default adds nothing.
    pub spec_draft: SpecDraftCost,
}

/// Speculative decoding's cost in a decode step: the drafter's own step and each draft
/// token the target model verifies. `Default` is no cost at all (the simulator's truth
/// before this term existed).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct SpecDraftCost {
    /// Cost per draft token verified, per decoding request, s.
    pub per_draft_token_s: f64,
    /// The drafter's own step, once per decode step in which any request drafted, s.
    pub drafter_step_s: f64,
}

impl SpecDraftCost {
    /// No speculation cost (`Default`), usable in constants.
    pub const NONE: SpecDraftCost = SpecDraftCost {
        per_draft_token_s: 0.0,
        drafter_step_s: 0.0,
    };

    /// What `drafted` draft tokens verified in one step (over all its requests) add.
    pub fn step_s(&self, drafted: u64) -> f64 {
        if drafted == 0 {
            return 0.0;
        }
        self.drafter_step_s + self.per_draft_token_s * drafted as f64
    }
}

impl StepCost {
    /// Prefill chunk `[c, e)` of a prompt, without `t0`.
    pub fn chunk_s(&self, c: u64, e: u64) -> f64 {
        let (c, e) = (c as f64, e.max(c) as f64);
        (e - c) / self.model.p0 + self.model.q * (e * e - c * c) / 2.0
    }

    /// What the prefill part of a step costs beside `decoding` requests, relative to alone.
    pub fn prefill_factor(&self, decoding: u64) -> f64 {
        1.0 + self.interference * decoding as f64
    }

    /// One batched decode step: `context_sum` over `requests` decoding requests.
    pub fn decode_s(&self, requests: u64, context_sum: u64) -> f64 {
        if requests == 0 {
            return 0.0;
        }
        self.model.d0 + self.model.d1 * context_sum as f64 + self.d2 * requests as f64
    }

    /// Why these numbers cannot drive the engine, naming the flag.
    pub fn problem(&self) -> Option<String> {
        if let Some(problem) = self.model.problem() {
            return Some(problem);
        }
        for (flag, v) in [
            ("--sim-step-overhead", self.overhead),
            ("--sim-d2", self.d2),
            ("--sim-interference", self.interference),
            (
                "--sim-spec-draft-token-s",
                self.spec_draft.per_draft_token_s,
            ),
            ("--sim-spec-drafter-step-s", self.spec_draft.drafter_step_s),
        ] {
            if !(v.is_finite() && v >= 0.0) {
                return Some(format!("{flag} must be a finite number >= 0, got {v}"));
            }
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const COST: StepCost = StepCost {
        model: CostModel {
            t0: 0.01,
            p0: 1000.0,
            q: 1e-6,
            d0: 0.004,
            d1: 1e-5,
        },
        overhead: 0.0,
        d2: 0.001,
        interference: 0.0,
        spec_draft: SpecDraftCost::NONE,
    };

    #[test]
    fn drafts_cost_per_token_plus_one_drafter_step() {
        let d = SpecDraftCost {
            per_draft_token_s: 0.001,
            drafter_step_s: 0.002,
        };
        assert_eq!(d.step_s(0), 0.0);
        assert!((d.step_s(12) - (0.002 + 0.012)).abs() < 1e-12);
        assert_eq!(SpecDraftCost::default(), SpecDraftCost::NONE);
        assert_eq!(SpecDraftCost::NONE.step_s(12), 0.0);
        let bad = StepCost {
            spec_draft: SpecDraftCost {
                per_draft_token_s: -1.0,
                ..d
            },
            ..COST
        };
        assert!(bad.problem().unwrap().contains("--sim-spec-draft-token-s"));
    }

    #[test]
    fn chunks_telescope_to_the_whole_prefill() {
        let whole = COST.model.t0 + COST.chunk_s(100, 2000);
        let split = COST.model.t0 + COST.chunk_s(100, 700) + COST.chunk_s(700, 2000);
        assert!((whole - split).abs() < 1e-12);
        assert!((whole - COST.model.prefill_s(100, 2000)).abs() < 1e-12);
    }

    #[test]
    fn one_decoder_pays_the_old_step_plus_d2() {
        assert!((COST.decode_s(1, 1000) - (COST.model.decode_step_s(1000) + 0.001)).abs() < 1e-12);
        assert_eq!(COST.decode_s(0, 0), 0.0);
        // Batched: weights read once, attention per request.
        assert!((COST.decode_s(4, 4000) - (0.004 + 0.04 + 0.004)).abs() < 1e-12);
    }

    #[test]
    fn interference_scales_the_prefill_part_per_decoding_request() {
        let c = StepCost {
            interference: 0.05,
            ..COST
        };
        assert_eq!(c.prefill_factor(0), 1.0);
        assert!((c.prefill_factor(3) - 1.15).abs() < 1e-12);
        assert_eq!(COST.prefill_factor(3), 1.0);
        let bad = StepCost {
            interference: -0.1,
            ..COST
        };
        assert!(bad.problem().unwrap().contains("--sim-interference"));
    }

    #[test]
    fn bad_numbers_name_their_flag() {
        let bad = StepCost { d2: -1.0, ..COST };
        assert!(bad.problem().unwrap().contains("--sim-d2"));
        let bad = StepCost {
            overhead: f64::INFINITY,
            ..COST
        };
        assert!(bad.problem().unwrap().contains("--sim-step-overhead"));
    }
}
