//! Speculative decoding's acceptance model: how many draft tokens a verify step keeps,
//! depending on the prompt's content, so the decode rate measured on filler text can be
//! told apart from the rate on real text (and a client's acceptance counters checked
//! against ground truth).
//!
//! `--spec K` makes every decode step a verify step that emits 1..=K tokens. Two models
//! say how many (`--spec-model`):
//!
//! - `uniform` (default): the step emits a count drawn uniformly from 1..=K, whatever the
//!   prompt. Counted as K−1 drafts with `emitted − 1` of them accepted.
//! - `ngram`: a prompt-lookup drafter. It proposes K−1 tokens per step; each is accepted in
//!   turn with probability α until the first rejection; the step emits the accepted tokens
//!   plus the one the target model computes itself (the bonus token). α depends only on
//!   the prompt's token ids:
//!
//!   α = α_min + (α_max − α_min) · r,   α_min = 0.1, α_max = 0.95,
//!
//!   where r is the share of the prompt's bigrams (adjacent id pairs) that occurred earlier
//!   in the prompt: repeated n-grams are what a prompt-lookup drafter can copy. Filler
//!   (one paragraph repeated) has r ≈ 1, text without repeats r = 0. The expected tokens per
//!   verify step is Σ_{j<K} α^j = (1 − α^K)/(1 − α).
//!
//! Both models never emit beyond the request's remaining budget R: a step then proposes
//! only min(K−1, R−1) drafts (what the drafter may usefully propose) and counts those.
//! Every decode step of a request is a verify step (with K = 1, one with no drafts); the
//! step finishing a prefill (the first token, or a recompute after preemption) is not.

use clap::ValueEnum;
use rand::RngExt;
use rand_chacha::ChaCha8Rng;
use std::collections::HashSet;
use std::hash::{BuildHasherDefault, Hasher};

/// Acceptance probability of a prompt with no repeated bigram.
pub const ALPHA_MIN: f64 = 0.1;
/// Acceptance probability of a prompt whose every bigram repeats an earlier one.
pub const ALPHA_MAX: f64 = 0.95;

/// How many tokens a speculative verify step emits (`--spec-model`).
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum SpecModel {
    /// 1..=K tokens per step, uniformly, whatever the prompt.
    #[default]
    Uniform,
    /// A prompt-lookup drafter: per-draft acceptance α grows with the prompt's repeated
    /// bigrams, from 0.1 (none) to 0.95 (all).
    Ngram,
}

/// What one verify step did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Verify {
    /// Tokens the step emits: accepted drafts plus one.
    pub tokens: u64,
    /// Draft tokens proposed.
    pub drafted: u64,
    /// Of those, accepted.
    pub accepted: u64,
}

/// Share of `ids`' bigrams that occurred earlier in `ids` (0 with fewer than two ids).
/// One pass over the ids with a hash set of the bigrams seen.
pub fn repeated_bigram_share(ids: &[u32]) -> f64 {
    if ids.len() < 2 {
        return 0.0;
    }
    let mut seen: HashSet<u64, BuildHasherDefault<PairHasher>> =
        HashSet::with_capacity_and_hasher(ids.len() - 1, BuildHasherDefault::default());
    let repeated = ids
        .windows(2)
        .filter(|w| !seen.insert((u64::from(w[0]) << 32) | u64::from(w[1])))
        .count();
    repeated as f64 / (ids.len() - 1) as f64
}

/// The `ngram` model's per-draft acceptance probability α for a prompt.
pub fn accept_prob(ids: &[u32]) -> f64 {
    ALPHA_MIN + (ALPHA_MAX - ALPHA_MIN) * repeated_bigram_share(ids)
}

/// Expected tokens one unconstrained verify step emits with `k` tokens per step at
/// acceptance `alpha`: (1 − α^k)/(1 − α), `k` when α = 1.
pub fn expected_tokens_per_step(alpha: f64, k: u32) -> f64 {
    if alpha >= 1.0 {
        return f64::from(k);
    }
    (1.0 - alpha.powi(k as i32)) / (1.0 - alpha)
}

/// One verify step with up to `k` tokens and `remaining` still to produce (a step with
/// nothing left emits nothing). `alpha`: `None` for the uniform model (one draw from
/// 1..=k, as the simulator always drew), `Some(α)` for the ngram model (one draw per
/// proposed draft until a rejection).
pub fn verify(rng: &mut ChaCha8Rng, k: u64, alpha: Option<f64>, remaining: u64) -> Verify {
    let k = k.max(1);
    let drafted = (k - 1).min(remaining.saturating_sub(1));
    let accepted = match alpha {
        None => rng.random_range(1..=k).min(remaining).saturating_sub(1),
        Some(alpha) => {
            let mut accepted = 0;
            while accepted < drafted && rng.random::<f64>() < alpha {
                accepted += 1;
            }
            accepted
        }
    };
    Verify {
        tokens: (accepted + 1).min(remaining),
        drafted,
        accepted,
    }
}

/// A multiplicative hash for the bigram keys (the default SipHash is several times slower
/// on a 128k-token prompt and resists no attacker here: the keys are the caller's own ids).
#[derive(Default)]
pub struct PairHasher(u64);

impl Hasher for PairHasher {
    fn finish(&self) -> u64 {
        self.0
    }

    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }

    fn write_u64(&mut self, v: u64) {
        // Fibonacci hashing; the rotation brings the well-mixed high bits down to where
        // the table takes its index.
        self.0 = (self.0 ^ v)
            .wrapping_mul(0x9E37_79B9_7F4A_7C15)
            .rotate_left(32);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn cycled_filler_is_almost_all_repeats() {
        // An 80-token paragraph repeated 100 times: every bigram after the first lap (and
        // the one wrapping the lap) repeats, so r = (n − 1 − 80)/(n − 1).
        let ids: Vec<u32> = (0..8000).map(|i| 1000 + (i % 80)).collect();
        let r = repeated_bigram_share(&ids);
        assert!((r - 7919.0 / 7999.0).abs() < 1e-12, "r = {r}");
        assert!(accept_prob(&ids) > 0.93, "{}", accept_prob(&ids));
    }

    #[test]
    fn distinct_ids_have_no_repeats() {
        let ids: Vec<u32> = (0..5000).collect();
        assert_eq!(repeated_bigram_share(&ids), 0.0);
        assert_eq!(accept_prob(&ids), ALPHA_MIN);
        // The same id twice in different pairs is not a repeated bigram.
        assert_eq!(repeated_bigram_share(&[1, 2, 1, 3, 2, 4]), 0.0);
        assert_eq!(repeated_bigram_share(&[1, 2, 1, 2]), 1.0 / 3.0);
    }

    #[test]
    fn short_prompts_have_no_bigrams() {
        assert_eq!(repeated_bigram_share(&[]), 0.0);
        assert_eq!(repeated_bigram_share(&[7]), 0.0);
        assert_eq!(accept_prob(&[7]), ALPHA_MIN);
    }

    #[test]
    fn expected_tokens_matches_the_geometric_sum() {
        assert!((expected_tokens_per_step(0.5, 4) - 1.875).abs() < 1e-12);
        assert_eq!(expected_tokens_per_step(1.0, 4), 4.0);
        assert_eq!(expected_tokens_per_step(0.0, 4), 1.0);
        assert!((expected_tokens_per_step(0.3, 1) - 1.0).abs() < 1e-12);
    }

    #[test]
    fn steps_never_pass_the_budget_and_count_consistently() {
        let mut rng = ChaCha8Rng::seed_from_u64(3);
        for alpha in [None, Some(0.0), Some(0.5), Some(1.0)] {
            for remaining in 1..6 {
                for _ in 0..200 {
                    let v = verify(&mut rng, 4, alpha, remaining);
                    assert!(v.tokens >= 1 && v.tokens <= remaining.min(4), "{v:?}");
                    assert_eq!(v.tokens, v.accepted + 1);
                    assert!(v.accepted <= v.drafted);
                    assert_eq!(v.drafted, 3.min(remaining - 1));
                }
            }
        }
        // α = 1 keeps every draft; K = 1 drafts nothing.
        assert_eq!(verify(&mut rng, 4, Some(1.0), 100).tokens, 4);
        assert_eq!(
            verify(&mut rng, 1, Some(1.0), 100),
            Verify {
                tokens: 1,
                drafted: 0,
                accepted: 0
            }
        );
    }

    #[test]
    fn uniform_draws_as_the_simulator_always_did() {
        // The uniform model must keep old runs' draws: one `random_range(1..=k)` per step.
        let (mut a, mut b) = (ChaCha8Rng::seed_from_u64(9), ChaCha8Rng::seed_from_u64(9));
        for _ in 0..100 {
            let old = b.random_range(1..=4u64).min(3);
            assert_eq!(verify(&mut a, 4, None, 3).tokens, old);
        }
    }

    #[test]
    fn a_long_prompt_is_cheap() {
        // 128k tokens in one pass; generous bound for an unoptimised build on a busy machine.
        let ids: Vec<u32> = (0..131_072u32)
            .map(|i| i.wrapping_mul(2_654_435_761) % 60_000)
            .collect();
        let t = std::time::Instant::now();
        let r = repeated_bigram_share(&ids);
        assert!(
            t.elapsed() < std::time::Duration::from_millis(500),
            "{:?}",
            t.elapsed()
        );
        assert!((0.0..1.0).contains(&r));
    }
}
