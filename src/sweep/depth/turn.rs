//! One depth turn as a sample: the sweep's metric definitions, plus the reuse check — the
//! prefix must come from cache (else `prefix_miss`) and the suffix must not (else `cache_hit`).

use crate::backend::Completion;
use crate::record::{Sample, flag};
use crate::sweep::measure::{self, Expectation};

/// What a turn was meant to be.
#[derive(Debug, Clone)]
pub struct TurnShape {
    pub depth_tokens: u64,
    pub turn_tokens: u64,
    /// Prompt tokens sent, when known exactly (token-id prompts).
    pub sent_tokens: Option<u64>,
    pub output_tokens: u64,
    /// One cache page: cached counts are whole pages, so they may fall short of the depth or
    /// pass it by up to this much.
    pub page_tokens: u64,
    pub rep: u32,
}

/// Metrics and flags of one turn: TTFT, marginal prefill rate (uncached suffix tokens /
/// TTFT), decode at depth + suffix.
pub fn turn_sample(c: &Completion, t: &TurnShape) -> Sample {
    let page = t.page_tokens.max(1);
    // The prefix is meant to be cached: only reuse beyond it (the suffix) is a cache hit.
    let e = Expectation {
        context_tokens: t.depth_tokens + t.turn_tokens,
        sent_tokens: t.sent_tokens,
        output_tokens: t.output_tokens,
        cache_allowance_tokens: t.depth_tokens + page,
        needle: None,
        rep: t.rep,
    };
    let mut s = measure::stream_sample(c, &e);
    s.method = super::TURN.into();
    s.depth_tokens = Some(t.depth_tokens);
    s.turn_tokens = Some(t.turn_tokens);
    match c.cached_tokens {
        Some(cached) if cached + page < t.depth_tokens => {
            s.push_flag(flag::PREFIX_MISS);
        }
        Some(_) => {}
        // No cached count: the marginal rate is over the tokens beyond the depth.
        None => {
            if let (Some(p), Some(ttft)) = (c.prompt_tokens, s.ttft_s) {
                let suffix = p.saturating_sub(t.depth_tokens);
                s.prefill_tps = (ttft > 0.0).then(|| suffix as f64 / ttft);
            }
        }
    }
    s
}

/// Without cached-token counts a miss shows only in timing. A reused prefix leaves about the
/// cold TTFT at depth + suffix minus the priming TTFT at the depth; a miss costs the whole
/// cold TTFT. A turn nearer the cold figure than the reused prediction is flagged
/// `prefix_miss_inferred`. Where the two predictions are too close to tell apart (shallow
/// depths), nothing is flagged and the report says reuse is unverified.
pub fn infer_prefix_miss(s: &mut Sample, cold_ttft_s: Option<f64>, prime_ttft_s: Option<f64>) {
    if s.cached_tokens.is_some() {
        return;
    }
    let (Some(t), Some(cold), Some(prime)) = (s.ttft_s, cold_ttft_s, prime_ttft_s) else {
        return;
    };
    if let Some(threshold) = timing_threshold(cold, prime)
        && t > threshold
    {
        s.push_flag(flag::PREFIX_MISS_INFERRED);
    }
}

/// Smallest saving (as a fraction of the cold TTFT) that timing can tell from noise.
pub const MIN_TELLABLE_SAVING: f64 = 0.3;

/// The TTFT above which a turn looks like a miss, or `None` when reuse cannot be told from
/// timing: the midpoint between the reused prediction and the cold figure.
pub fn timing_threshold(cold_ttft_s: f64, prime_ttft_s: f64) -> Option<f64> {
    let reused = (cold_ttft_s - prime_ttft_s).max(0.0);
    (cold_ttft_s - reused >= MIN_TELLABLE_SAVING * cold_ttft_s)
        .then_some((reused + cold_ttft_s) / 2.0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::StreamEvent;
    use std::time::Duration;

    fn completion(prompt: u64, cached: Option<u64>, ttft_ms: u64) -> Completion {
        let events = vec![
            StreamEvent {
                at: Duration::from_millis(ttft_ms),
                tokens: 1,
            },
            StreamEvent {
                at: Duration::from_millis(ttft_ms + 10),
                tokens: 1,
            },
        ];
        Completion {
            e2e: Duration::from_millis(ttft_ms + 10),
            events,
            prompt_tokens: Some(prompt),
            cached_tokens: cached,
            completion_tokens: Some(2),
            finish_reason: Some("length".into()),
            counts_from_server: true,
            ..Completion::default()
        }
    }

    fn shape(d: u64) -> TurnShape {
        TurnShape {
            depth_tokens: d,
            turn_tokens: 512,
            sent_tokens: Some(d + 512),
            output_tokens: 2,
            page_tokens: 16,
            rep: 0,
        }
    }

    #[test]
    fn a_reused_prefix_is_valid_and_the_rate_is_marginal() {
        let s = turn_sample(&completion(8704, Some(8192), 50), &shape(8192));
        assert!(s.valid, "{:?}", s.flags);
        assert_eq!((s.depth_tokens, s.turn_tokens), (Some(8192), Some(512)));
        assert_eq!(s.method, "turn");
        assert!((s.prefill_tps.unwrap() - 512.0 / 0.05).abs() < 1e-6);
    }

    #[test]
    fn a_prefix_short_by_more_than_a_page_is_a_miss() {
        // Whole pages: 8176 of 8192 is within a page, 8160 is not.
        assert!(turn_sample(&completion(8704, Some(8176), 50), &shape(8192)).valid);
        let s = turn_sample(&completion(8704, Some(8160), 50), &shape(8192));
        assert!(s.flags.contains(&flag::PREFIX_MISS) && !s.valid);
        let s = turn_sample(&completion(8704, Some(0), 500), &shape(8192));
        assert!(s.flags.contains(&flag::PREFIX_MISS) && !s.valid);
    }

    #[test]
    fn a_cached_suffix_is_a_cache_hit() {
        let s = turn_sample(&completion(8704, Some(8192 + 256), 20), &shape(8192));
        assert!(s.flags.contains(&flag::CACHE_HIT) && !s.valid);
        assert!(!s.flags.contains(&flag::PREFIX_MISS));
    }

    #[test]
    fn without_counts_a_miss_is_inferred_from_timing() {
        // Cold 1 s at depth + suffix, priming 0.9 s: reuse predicts 0.1 s, threshold 0.55 s.
        assert!((timing_threshold(1.0, 0.9).unwrap() - 0.55).abs() < 1e-12);
        let mut hit = turn_sample(&completion(8704, None, 120), &shape(8192));
        assert!((hit.prefill_tps.unwrap() - 512.0 / 0.12).abs() < 1e-6);
        infer_prefix_miss(&mut hit, Some(1.0), Some(0.9));
        assert!(hit.valid, "{:?}", hit.flags);
        let mut miss = turn_sample(&completion(8704, None, 950), &shape(8192));
        infer_prefix_miss(&mut miss, Some(1.0), Some(0.9));
        assert!(miss.flags.contains(&flag::PREFIX_MISS_INFERRED) && !miss.valid);
        // A shallow prefix saves too little to tell.
        assert_eq!(timing_threshold(1.0, 0.1), None);
    }
}
