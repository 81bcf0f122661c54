//! The engine's cumulative counters and latency histograms, the figures `/metrics` exports.

use serde::Serialize;

/// vLLM's and SGLang's time-to-first-token buckets, seconds.
pub const TTFT_BUCKETS: &[f64] = &[
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
    20.0, 40.0, 80.0, 160.0, 640.0, 2560.0,
];
/// Inter-token latency buckets, seconds.
pub const ITL_BUCKETS: &[f64] = &[
    0.002, 0.005, 0.01, 0.015, 0.02, 0.025, 0.03, 0.04, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5,
    0.75, 1.0, 2.5, 5.0, 7.5, 10.0, 20.0, 40.0, 80.0,
];
/// End-to-end and queue-time buckets, seconds.
pub const E2E_BUCKETS: &[f64] = &[
    0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 40.0, 60.0, 120.0, 240.0, 480.0, 960.0, 1920.0,
    7680.0,
];

/// A Prometheus histogram: per-bucket counts (not cumulative; the last bucket is +Inf).
#[derive(Debug, Clone, Serialize)]
pub struct Histogram {
    pub bounds: &'static [f64],
    pub counts: Vec<u64>,
    pub sum: f64,
    pub count: u64,
}

impl Histogram {
    pub fn new(bounds: &'static [f64]) -> Histogram {
        Histogram {
            bounds,
            counts: vec![0; bounds.len() + 1],
            sum: 0.0,
            count: 0,
        }
    }

    pub fn observe(&mut self, v: f64) {
        let i = self.bounds.partition_point(|&b| b < v);
        self.counts[i] += 1;
        self.sum += v;
        self.count += 1;
    }

    /// `(le, cumulative count)` per bucket, `+Inf` last.
    pub fn cumulative(&self) -> Vec<(f64, u64)> {
        let mut total = 0;
        self.counts
            .iter()
            .enumerate()
            .map(|(i, n)| {
                total += n;
                (self.bounds.get(i).copied().unwrap_or(f64::INFINITY), total)
            })
            .collect()
    }
}

/// SGLang's `--decode-log-interval` default: its `spec_accept_length` gauge is set once
/// per this many decode batches, to the mean over them.
pub const DECODE_LOG_INTERVAL: u64 = 40;

/// Speculative verify steps, each one request's share of a decode batch (with `--spec 1`
/// a plain decode step, drafting nothing).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct SpecStats {
    pub verify_steps: u64,
    pub draft_tokens: u64,
    pub accepted_tokens: u64,
    /// Tokens the verify steps emitted: accepted drafts plus one per step.
    pub emitted_tokens: u64,
}

impl SpecStats {
    fn add(&mut self, tokens: u64, drafted: u64, accepted: u64) {
        self.verify_steps += 1;
        self.draft_tokens += drafted;
        self.accepted_tokens += accepted;
        self.emitted_tokens += tokens;
    }

    /// Tokens emitted per verify step (SGLang's accept length, vLLM's mean acceptance
    /// length); 0 before any step.
    pub fn accept_length(&self) -> f64 {
        if self.verify_steps == 0 {
            0.0
        } else {
            self.emitted_tokens as f64 / self.verify_steps as f64
        }
    }
}

/// Counted since the server started.
#[derive(Debug, Clone, Serialize)]
pub struct EngineStats {
    /// Prompt tokens of requests whose prefill finished (each request once).
    pub prompt_tokens: u64,
    pub generation_tokens: u64,
    /// Prompt tokens served from the prefix cache (first admission of each request).
    pub cached_tokens: u64,
    pub preemptions: u64,
    /// Requests that produced their last token.
    pub finished: u64,
    /// Of `finished`, those that reached `max_tokens` (the rest stopped at EOS).
    pub finished_length: u64,
    /// Requests whose client went before their last token.
    pub aborted: u64,
    /// From arrival to the step end that produced the first token.
    pub ttft: Histogram,
    /// Between successive outputs of one request.
    pub itl: Histogram,
    pub e2e: Histogram,
    /// From arrival to first admission.
    pub queue_time: Histogram,
    /// Every verify step since start (vLLM's `spec_decode_*` counters).
    pub spec: SpecStats,
    /// Since start or the last `/flush_cache` (SGLang's `avg_spec_accept_length`).
    pub spec_since_flush: SpecStats,
    /// The decode batches since the `spec_accept_length` gauge was last set.
    pub spec_window: SpecStats,
    pub spec_window_batches: u64,
    /// SGLang's `spec_accept_length` gauge: the accept length over the last
    /// `DECODE_LOG_INTERVAL` decode batches (0 until that many have run).
    pub spec_accept_length_gauge: f64,
}

impl EngineStats {
    /// Count one engine step's verify steps, `(tokens, drafted, accepted)` per decoding
    /// request; a step without any is no decode batch.
    pub fn observe_verify_batch(&mut self, steps: impl Iterator<Item = (u64, u64, u64)>) {
        let mut any = false;
        for (tokens, drafted, accepted) in steps {
            any = true;
            self.spec.add(tokens, drafted, accepted);
            self.spec_since_flush.add(tokens, drafted, accepted);
            self.spec_window.add(tokens, drafted, accepted);
        }
        if !any {
            return;
        }
        self.spec_window_batches += 1;
        if self.spec_window_batches == DECODE_LOG_INTERVAL {
            self.spec_accept_length_gauge = self.spec_window.accept_length();
            self.spec_window = SpecStats::default();
            self.spec_window_batches = 0;
        }
    }
}

impl Default for EngineStats {
    fn default() -> EngineStats {
        EngineStats {
            prompt_tokens: 0,
            generation_tokens: 0,
            cached_tokens: 0,
            preemptions: 0,
            finished: 0,
            finished_length: 0,
            aborted: 0,
            ttft: Histogram::new(TTFT_BUCKETS),
            itl: Histogram::new(ITL_BUCKETS),
            e2e: Histogram::new(E2E_BUCKETS),
            queue_time: Histogram::new(E2E_BUCKETS),
            spec: SpecStats::default(),
            spec_since_flush: SpecStats::default(),
            spec_window: SpecStats::default(),
            spec_window_batches: 0,
            spec_accept_length_gauge: 0.0,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buckets_are_upper_inclusive_and_cumulative() {
        let mut h = Histogram::new(&[0.1, 1.0]);
        for v in [0.1, 0.5, 2.0] {
            h.observe(v);
        }
        assert_eq!(h.cumulative(), vec![(0.1, 1), (1.0, 2), (f64::INFINITY, 3)]);
        assert_eq!(h.count, 3);
        assert!((h.sum - 2.6).abs() < 1e-12);
    }

    #[test]
    fn the_accept_length_gauge_is_set_per_log_interval() {
        let mut stats = EngineStats::default();
        // Two requests per batch: one emitting 3 tokens (2 of 3 drafts kept), one 1.
        for _ in 0..DECODE_LOG_INTERVAL - 1 {
            stats.observe_verify_batch([(3, 3, 2), (1, 3, 0)].into_iter());
        }
        stats.observe_verify_batch(std::iter::empty());
        assert_eq!(
            stats.spec_accept_length_gauge, 0.0,
            "not a whole interval yet"
        );
        stats.observe_verify_batch([(4, 3, 3), (4, 3, 3)].into_iter());
        let emitted = 4 * (DECODE_LOG_INTERVAL - 1) + 8;
        let expected = emitted as f64 / (2 * DECODE_LOG_INTERVAL) as f64;
        assert!((stats.spec_accept_length_gauge - expected).abs() < 1e-12);
        assert_eq!(stats.spec_window, SpecStats::default());
        assert_eq!(stats.spec.verify_steps, 2 * DECODE_LOG_INTERVAL);
        assert_eq!(
            stats.spec.accepted_tokens,
            2 * (DECODE_LOG_INTERVAL - 1) + 6
        );
        assert_eq!(stats.spec.emitted_tokens, emitted);
    }
}
