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
}
