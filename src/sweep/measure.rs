//! Turning what a request produced into a `Sample`: the metric definitions and the flags,
//! as pure functions, so each rule is testable without a server.

use crate::backend::Completion;
use crate::choices::Method;
use crate::record::{NeedleResult, Sample, flag};
use crate::stats::quantile;
use crate::workload::Needle;

/// What a measured request was meant to be.
#[derive(Debug, Clone)]
pub struct Expectation {
    pub context_tokens: u64,
    /// Prompt tokens sent, when known exactly (token-id prompts).
    pub sent_tokens: Option<u64>,
    pub output_tokens: u64,
    /// Cached tokens tolerated before `cache_hit` (one cache page).
    pub cache_allowance_tokens: u64,
    pub needle: Option<Needle>,
    pub rep: u32,
}

pub use crate::record::LENGTH_TOLERANCE;

/// Metrics of one streamed request (rule 5 of the measurement rules).
pub fn stream_sample(c: &Completion, e: &Expectation) -> Sample {
    let mut s = base_sample(c, e, Method::Stream);
    let first = c.events.first();
    let ttft = first.map(|f| f.at.as_secs_f64());
    s.ttft_s = ttft;
    s.e2e_s = Some(c.e2e.as_secs_f64());
    if let (Some(t), Some(p)) = (ttft, c.prompt_tokens) {
        let uncached = p.saturating_sub(c.cached_tokens.unwrap_or(0));
        s.prefill_tps = (t > 0.0).then(|| uncached as f64 / t);
    }
    if let (Some(f), Some(l), Some(n)) = (first, c.events.last(), c.completion_tokens) {
        let dt = (l.at - f.at).as_secs_f64();
        let decoded = n.saturating_sub(f.tokens);
        s.decode_tps =
            (c.events.len() >= 2 && dt > 0.0 && decoded > 0).then(|| decoded as f64 / dt);
    }
    let itls = inter_token_latencies(c);
    s.itl_p50_s = quantile(&itls, 0.5);
    s.itl_p99_s = quantile(&itls, 0.99);
    if !c.events.is_empty() {
        s.event_counts = Some(
            if c.counts_from_server {
                "server"
            } else {
                "derived"
            }
            .into(),
        );
    }
    // A per-event figure only from the server's own per-event counts, never a guess.
    let event_tokens: u64 = c.events.iter().map(|e| e.tokens).sum();
    s.tokens_per_event_mean = (c.counts_from_server && !c.events.is_empty())
        .then(|| event_tokens as f64 / c.events.len() as f64);
    finish_flags(s)
}

/// Two-point metrics from a 1-token request `a` and an N-token request `b`, both cold.
pub fn two_point_sample(a: &Completion, b: &Completion, e: &Expectation) -> Sample {
    let mut s = base_sample(b, e, Method::TwoPoint);
    let (ta, tb) = (a.e2e.as_secs_f64(), b.e2e.as_secs_f64());
    let (na, nb) = (
        a.completion_tokens.unwrap_or(1),
        b.completion_tokens.unwrap_or(0),
    );
    s.ttft_s = Some(ta);
    s.e2e_s = Some(tb);
    if let Some(p) = a.prompt_tokens {
        let uncached = p.saturating_sub(a.cached_tokens.unwrap_or(0));
        s.prefill_tps = (ta > 0.0).then(|| uncached as f64 / ta);
    }
    if tb <= ta {
        s.push_flag(flag::TWO_POINT_INVERTED);
    } else if nb > na {
        s.decode_tps = Some((nb - na) as f64 / (tb - ta));
    }
    // Either call served from cache corrupts the difference.
    let hit_a = a.cached_tokens.unwrap_or(0) > e.cache_allowance_tokens;
    if hit_a {
        s.push_flag(flag::CACHE_HIT);
    }
    s.cached_tokens = match (a.cached_tokens, b.cached_tokens) {
        (Some(x), Some(y)) => Some(x.max(y)),
        (x, y) => x.or(y),
    };
    finish_flags(s)
}

/// Fields and flags common to both methods, from the server's counts.
fn base_sample(c: &Completion, e: &Expectation, method: Method) -> Sample {
    let mut s = Sample {
        context_tokens: e.context_tokens,
        prompt_tokens: c.prompt_tokens,
        cached_tokens: c.cached_tokens,
        output_tokens: c.completion_tokens,
        method: method.name().to_string(),
        rep: e.rep,
        server_timings: c.server_timings.clone(),
        new_connection: c.new_connection,
        connect_s: c.connect_s,
        spec: crate::backend::spec::stats(c),
        ..Sample::default()
    };
    for &f in &c.flags {
        s.push_flag(f);
    }
    if c.cached_tokens.unwrap_or(0) > e.cache_allowance_tokens {
        s.push_flag(flag::CACHE_HIT);
    }
    if c.completion_tokens.unwrap_or(0) < e.output_tokens {
        s.push_flag(flag::EARLY_STOP);
    }
    match c.prompt_tokens {
        Some(p) => {
            let off = |want: u64| (p as f64 - want as f64).abs() > LENGTH_TOLERANCE * want as f64;
            // Token-id prompts are sent at an exact length, so any shortfall is the server
            // cutting the prompt (from the front, losing the nonce). Text is sized by the
            // server's counts of other texts, so a short count alone may be a sizing error:
            // truncation needs evidence beyond it, here a needle lost with it (the sweep's
            // summary adds counts that stop growing with the text).
            let cut = match e.sent_tokens {
                Some(sent) => p < sent,
                None => {
                    let short = (p as f64) < e.context_tokens as f64 * (1.0 - LENGTH_TOLERANCE);
                    short && e.needle.as_ref().is_some_and(|n| !found(n, &c.text))
                }
            };
            if cut || c.finish_reason.as_deref() == Some("truncated") {
                s.push_flag(flag::TRUNCATED);
            }
            if off(e.context_tokens) {
                s.push_flag(flag::LENGTH_MISMATCH);
            }
        }
        None => s.push_flag(flag::NO_USAGE),
    }
    if let Some(t) = e
        .needle
        .as_ref()
        .and_then(|n| crate::accuracy::grade(n, &c.text))
    {
        s.task = Some(t);
    } else if let Some(n) = &e.needle {
        let ok = n.check(&c.text);
        if !ok {
            s.push_flag(flag::NEEDLE_FAILED);
        }
        s.needle = Some(NeedleResult {
            depth: n.depth,
            expected: n.expected.clone(),
            answer: c.text.chars().take(80).collect(),
            ok,
        });
    }
    s
}

/// Whether the answer holds what the needle hid (any of a task's expected strings).
fn found(n: &Needle, text: &str) -> bool {
    match &n.graded {
        Some(_) => crate::accuracy::grade(n, text).is_some_and(|t| t.score > 0.0),
        None => n.check(text),
    }
}

fn finish_flags(mut s: Sample) -> Sample {
    s.valid = s.derive_valid();
    s
}

/// Events that reached the client in one network read: they share a timestamp, so they
/// are one arrival, whose tokens came together.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Arrival {
    pub at: std::time::Duration,
    pub tokens: f64,
}

/// The arrivals of a completion. Without the server's per-event counts, the tokens after
/// the first arrival are the reported total spread evenly over the later arrivals.
pub fn arrivals(c: &Completion) -> Vec<Arrival> {
    let mut out: Vec<Arrival> = Vec::new();
    for e in &c.events {
        match out.last_mut() {
            Some(a) if a.at == e.at => a.tokens += e.tokens as f64,
            _ => out.push(Arrival {
                at: e.at,
                tokens: e.tokens as f64,
            }),
        }
    }
    if !c.counts_from_server && out.len() >= 2 {
        let total = c
            .completion_tokens
            .unwrap_or_else(|| c.events.iter().map(|e| e.tokens).sum());
        let later = total.saturating_sub(out[0].tokens as u64) as f64 / (out.len() - 1) as f64;
        for a in &mut out[1..] {
            a.tokens = later;
        }
    }
    out
}

/// ITL: each gap between arrivals, divided over the tokens the later arrival carries,
/// counted once per token (a fractional share counts as one value).
pub fn inter_token_latencies(c: &Completion) -> Vec<f64> {
    arrivals(c)
        .windows(2)
        .flat_map(|w| {
            let gap = (w[1].at - w[0].at).as_secs_f64();
            let k = w[1].tokens.max(1.0);
            std::iter::repeat_n(gap / k, k.round().max(1.0) as usize)
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::StreamEvent;
    use std::time::Duration;

    fn completion(events: &[(u64, u64)], prompt: u64, cached: u64) -> Completion {
        let events: Vec<StreamEvent> = events
            .iter()
            .map(|(ms, t)| StreamEvent {
                at: Duration::from_millis(*ms),
                tokens: *t,
            })
            .collect();
        let n = events.iter().map(|e| e.tokens).sum();
        Completion {
            e2e: events.last().map(|e| e.at).unwrap_or_default(),
            events,
            prompt_tokens: Some(prompt),
            cached_tokens: Some(cached),
            completion_tokens: Some(n),
            finish_reason: Some("length".into()),
            counts_from_server: true,
            ..Completion::default()
        }
    }

    fn expect(n: u64, out: u64) -> Expectation {
        Expectation {
            context_tokens: n,
            sent_tokens: Some(n),
            output_tokens: out,
            cache_allowance_tokens: 16,
            needle: None,
            rep: 0,
        }
    }

    #[test]
    fn definitions() {
        // First event at 100 ms with 1 token, then 3 events of 3 tokens 30 ms apart.
        let c = completion(&[(100, 1), (130, 3), (160, 3), (190, 3)], 1000, 0);
        let s = stream_sample(&c, &expect(1000, 10));
        assert!((s.ttft_s.unwrap() - 0.1).abs() < 1e-12);
        assert!((s.prefill_tps.unwrap() - 10_000.0).abs() < 1e-6);
        // (10 - 1) tokens over 90 ms, not 3 events over 90 ms.
        assert!((s.decode_tps.unwrap() - 100.0).abs() < 1e-9);
        assert!((s.itl_p50_s.unwrap() - 0.01).abs() < 1e-12);
        assert!((s.tokens_per_event_mean.unwrap() - 2.5).abs() < 1e-12);
        assert!(s.valid, "{:?}", s.flags);
    }

    #[test]
    fn events_of_one_read_are_one_arrival() {
        // A proxy or Nagle batches three 1-token events per read, 30 ms apart: ITL is
        // 10 ms, not 0 (two gaps of 0 per read would pull p50 to 0).
        let c = completion(
            &[
                (100, 1),
                (130, 1),
                (130, 1),
                (130, 1),
                (160, 1),
                (160, 1),
                (160, 1),
            ],
            1000,
            0,
        );
        let s = stream_sample(&c, &expect(1000, 7));
        assert!(
            (s.itl_p50_s.unwrap() - 0.01).abs() < 1e-12,
            "{:?}",
            s.itl_p50_s
        );
        assert_eq!(s.event_counts.as_deref(), Some("server"));
    }

    #[test]
    fn without_per_event_counts_the_total_is_spread_and_no_per_event_figure_kept() {
        // One event per step, each step 40 ms, 9 tokens in all: 8 after the first event,
        // over 4 later arrivals, 2 each: ITL 20 ms.
        let mut c = completion(&[(100, 1), (140, 1), (180, 1), (220, 1), (260, 1)], 1000, 0);
        c.completion_tokens = Some(9);
        c.counts_from_server = false;
        let s = stream_sample(&c, &expect(1000, 9));
        assert!(
            (s.itl_p50_s.unwrap() - 0.02).abs() < 1e-12,
            "{:?}",
            s.itl_p50_s
        );
        assert_eq!(s.event_counts.as_deref(), Some("derived"));
        assert_eq!(s.tokens_per_event_mean, None);
        assert!((s.decode_tps.unwrap() - 8.0 / 0.16).abs() < 1e-9);
    }

    #[test]
    fn prefill_counts_only_uncached_tokens() {
        let c = completion(&[(50, 1), (60, 1)], 1000, 16);
        let s = stream_sample(&c, &expect(1000, 2));
        assert!((s.prefill_tps.unwrap() - 984.0 / 0.05).abs() < 1e-6);
        assert!(s.valid);
    }

    #[test]
    fn cache_hits_beyond_a_page_invalidate() {
        let c = completion(&[(5, 1), (10, 1)], 1000, 992);
        let s = stream_sample(&c, &expect(1000, 2));
        assert!(s.flags.iter().any(|f| f.name() == "cache_hit"));
        assert!(!s.valid);
    }

    #[test]
    fn early_stop_truncation_and_mismatch() {
        let c = completion(&[(5, 1), (10, 1)], 1000, 0);
        let s = stream_sample(&c, &expect(1000, 8));
        assert!(s.flags.iter().any(|f| f.name() == "early_stop") && !s.valid);

        let c = completion(&[(5, 1), (10, 1)], 900, 0);
        let s = stream_sample(&c, &expect(1000, 2));
        assert!(s.flags.iter().any(|f| f.name() == "truncated"));
        assert!(s.flags.iter().any(|f| f.name() == "length_mismatch"));

        // Within 1 %: fine.
        let c = completion(&[(5, 1), (10, 1)], 1009, 0);
        assert!(stream_sample(&c, &expect(1000, 2)).valid);

        // An exact-length (token-id) prompt cut by even 16 tokens is truncated, though
        // within the length tolerance; a text prompt as far off is not.
        let c = completion(&[(5, 1), (10, 1)], 4080, 0);
        let s = stream_sample(&c, &expect(4096, 2));
        assert!(s.flags.iter().any(|f| f.name() == "truncated") && !s.valid);
        assert!(!s.flags.iter().any(|f| f.name() == "length_mismatch"));
        let mut text = expect(4096, 2);
        text.sent_tokens = None;
        assert!(stream_sample(&c, &text).valid);
    }

    /// Calibrated or probed text is only sized by the server's counts of other texts: a
    /// short count alone is a length mismatch, and truncation needs evidence besides it.
    #[test]
    fn a_short_text_count_is_truncation_only_with_a_lost_needle() {
        let mut text = expect(4096, 2);
        text.sent_tokens = None;
        let c = completion(&[(5, 1), (10, 1)], 3900, 0);
        let s = stream_sample(&c, &text);
        assert!(s.flags.iter().any(|f| f.name() == "length_mismatch"));
        assert!(
            !s.flags.iter().any(|f| f.name() == "truncated"),
            "{:?}",
            s.flags
        );
        text.needle = Some(Needle::secret(0.1, "okapi"));
        let s = stream_sample(&c, &text);
        assert!(
            s.flags.iter().any(|f| f.name() == "truncated"),
            "{:?}",
            s.flags
        );
        // The needle found: the short count is missizing, not a cut.
        let mut found = completion(&[(5, 1), (10, 1)], 3900, 0);
        found.text = "okapi".into();
        let s = stream_sample(&found, &text);
        assert!(
            !s.flags.iter().any(|f| f.name() == "truncated"),
            "{:?}",
            s.flags
        );
    }

    #[test]
    fn two_point_inversion_is_flagged() {
        let a = completion(&[(460, 1)], 1000, 0);
        let b = completion(&[(150, 1), (200, 16)], 1000, 992);
        let s = two_point_sample(&a, &b, &expect(1000, 17));
        assert!(s.flags.iter().any(|f| f.name() == "two_point_inverted"));
        assert!(s.flags.iter().any(|f| f.name() == "cache_hit"));
        assert!(s.decode_tps.is_none() && !s.valid);

        let b = completion(&[(470, 1), (620, 16)], 1000, 0);
        let s = two_point_sample(&a, &b, &expect(1000, 17));
        assert!((s.decode_tps.unwrap() - 16.0 / 0.16).abs() < 1e-6);
        assert!(s.valid, "{:?}", s.flags);
    }

    #[test]
    fn speculative_counts_become_the_samples_acceptance() {
        use crate::backend::spec::{SpecCounts, SpecSource};
        // 4 events of 1, 3, 3, 3 tokens: the prefill's first token, then 3 verification
        // steps of 1 + 2 accepted drafts each.
        let mut c = completion(&[(100, 1), (130, 3), (160, 3), (190, 3)], 1000, 0);
        c.spec = Some(SpecCounts {
            verify_steps: Some(3),
            draft_tokens: Some(12),
            accepted_tokens: Some(6),
            server_accept_length: None,
            source: SpecSource::Server,
        });
        let s = stream_sample(&c, &expect(1000, 10));
        let spec = s.spec.unwrap();
        assert_eq!(spec.source, SpecSource::Server);
        // (10 − 1) / 3: decode tokens per verification step.
        assert!((spec.accept_length.unwrap() - 3.0).abs() < 1e-12);
        assert!((spec.accept_rate.unwrap() - 0.5).abs() < 1e-12);
        // Without counts the same events give the labelled proxy by the same definition:
        // 9 tokens over the 3 events after the first.
        c.spec = None;
        let spec = stream_sample(&c, &expect(1000, 10)).spec.unwrap();
        assert_eq!(spec.source, SpecSource::EventsProxy);
        assert!((spec.accept_length.unwrap() - 3.0).abs() < 1e-12);
        // One token per event says nothing: no figure.
        let c = completion(&[(100, 1), (130, 1), (160, 1)], 1000, 0);
        assert_eq!(stream_sample(&c, &expect(1000, 3)).spec, None);
    }

    #[test]
    fn needle_failure_keeps_the_timing_valid() {
        let mut c = completion(&[(5, 1), (10, 1)], 1000, 0);
        c.text = "unknown".into();
        let mut e = expect(1000, 2);
        e.needle = Some(Needle::secret(0.5, "okapi"));
        let s = stream_sample(&c, &e);
        assert!(s.flags.iter().any(|f| f.name() == "needle_failed"));
        assert!(s.valid);
        assert!(!s.needle.unwrap().ok);
    }
}
