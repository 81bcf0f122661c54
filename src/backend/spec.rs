//! Speculative decoding: under EAGLE, MTP, n-gram or draft-model decoding the tokens a
//! verification step yields depend on the text, so a decode rate means little without the
//! acceptance that produced it. This module reads that acceptance per request — from the
//! server's own per-request counts, or from its `/metrics` counters around a request that
//! ran alone — and turns counts into the figures samples record.
//!
//! **One definition of acceptance, whatever the source.** `accept_length` is the decode
//! tokens per verification step: (output − 1) / verify steps, where the verify steps are
//! the target model's decode steps after the prefill, each yielding its accepted drafts
//! plus one token of its own. The first token is left out because the prefill produces it
//! without any speculation: counting it makes a request with no accepted draft at all read
//! above 1 (n / (n − 1)), and more so the shorter its output, so two servers or two output
//! lengths would differ by a bias no one can see. This is vLLM's mean acceptance length,
//! 1 + accepted / drafts, when every decode step drafts. Each source's raw counts become
//! verify steps by that one rule:
//! - SGLang `spec_verify_ct`: its verify (decode) steps, as sent. SGLang's own
//!   `spec_accept_length` is completion tokens / `spec_verify_ct` (the first token counted):
//!   ours + 1 / steps.
//! - llama.cpp `timings`: each step yields 1 + its accepted drafts, so steps =
//!   `predicted_n` − 1 − `draft_n_accepted`. llama.cpp prints no acceptance length, only
//!   the draft acceptance rate (`accept_rate` here).
//! - vLLM per request: output − 1 − `num_accepted_draft_tokens` (its `num_spec_steps`
//!   counts only the steps that had a draft to verify, and serves where the output is not
//!   in the same event); its `mean_acceptance_length` (1 + accepted / drafting steps) is
//!   kept beside ours.
//! - `/metrics` deltas around a lone request: steps = output − 1 − accepted; the server's
//!   figure is 1 + Δaccepted / Δdrafts, as vLLM's dashboards compute it.
//!
//! The raw counts (verify steps, drafted, accepted; output on the sample) are kept, and
//! the server's own figure, where it gives one, is recorded as `server_accept_length`.

use super::Completion;
pub use crate::record::SpecSource;
use crate::record::SpecStats;
use serde_json::Value;

/// Speculative-decoding counts of one request, as a source reported them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SpecCounts {
    /// Decode (verification) steps after the prefill, by the module's one rule.
    pub verify_steps: Option<u64>,
    pub draft_tokens: Option<u64>,
    pub accepted_tokens: Option<u64>,
    /// The acceptance length the server itself states, by its own definition (see the
    /// module's docs for how each relates to ours).
    pub server_accept_length: Option<f64>,
    pub source: SpecSource,
}

/// Tokens per event above which a server's own per-event counts say something about
/// acceptance: a server without speculative decoding sends one token per event, and an
/// occasional merged event (2 tokens in a 32-token answer: mean 1.03) stays below it.
pub const PROXY_MIN_TOKENS_PER_EVENT: f64 = 1.05;

/// A count that may arrive as a number or a string (SGLang sends either).
pub fn count(v: &Value) -> Option<u64> {
    match v {
        Value::Number(n) => n.as_u64().or_else(|| {
            n.as_f64()
                .filter(|x| x.is_finite() && *x >= 0.0)
                .map(|x| x.round() as u64)
        }),
        Value::String(s) => {
            let s = s.trim();
            s.parse::<u64>().ok().or_else(|| {
                s.parse::<f64>()
                    .ok()
                    .filter(|x| x.is_finite() && *x >= 0.0)
                    .map(|x| x.round() as u64)
            })
        }
        _ => None,
    }
}

/// A real number that may arrive as a number or a string.
pub fn real(v: &Value) -> Option<f64> {
    match v {
        Value::Number(n) => n.as_f64(),
        Value::String(s) => s.trim().parse::<f64>().ok(),
        _ => None,
    }
    .filter(|x| x.is_finite())
}

/// Verification steps from SGLang's accept length (completion tokens / steps), when only
/// that was sent.
fn steps_from_length(output: Option<u64>, accept_length: Option<f64>) -> Option<u64> {
    let (n, a) = (output?, accept_length.filter(|a| *a > 0.0)?);
    Some((n as f64 / a).round() as u64)
}

/// SGLang's final `meta_info`: `spec_verify_ct` (its decode steps; older and newer
/// releases), else steps from `spec_accept_length` (= completion tokens / verify steps).
/// SGLang sends no reliable total of drafted or accepted tokens, so those stay unknown.
pub fn from_sglang_meta(meta: &Value, completion_tokens: Option<u64>) -> Option<SpecCounts> {
    let stated = meta.get("spec_accept_length").and_then(real);
    let verify = meta
        .get("spec_verify_ct")
        .and_then(count)
        .or_else(|| steps_from_length(completion_tokens, stated))?;
    let own = match (completion_tokens, verify) {
        (Some(n), v) if v > 0 => Some(n as f64 / v as f64),
        _ => None,
    };
    Some(SpecCounts {
        verify_steps: Some(verify),
        draft_tokens: None,
        accepted_tokens: None,
        server_accept_length: stated.or(own),
        source: SpecSource::Server,
    })
}

/// llama.cpp's `timings` (native `/completion` final event, or the OpenAI final chunk):
/// `draft_n` drafted, `draft_n_accepted` kept; steps = `predicted_n − 1 − draft_n_accepted`
/// (the first token is the prefill's). Absent `draft_n` means no draft ran (the server
/// sends it only with speculation on).
pub fn from_llamacpp_timings(t: &Value) -> Option<SpecCounts> {
    let drafted = t.get("draft_n").and_then(count)?;
    let accepted = t.get("draft_n_accepted").and_then(count);
    let predicted = t.get("predicted_n").and_then(count);
    let verify = match (predicted, accepted) {
        (Some(p), Some(a)) if p > a => Some(p - 1 - a),
        _ => None,
    };
    Some(SpecCounts {
        verify_steps: verify,
        draft_tokens: Some(drafted),
        accepted_tokens: accepted,
        server_accept_length: None,
        source: SpecSource::Server,
    })
}

/// vLLM's per-request `metrics.speculative_decoding` (with
/// `--per-request-spec-decode-metrics`), given the response object that holds `metrics`.
pub fn from_vllm_metrics(v: &Value) -> Option<SpecCounts> {
    let m = v
        .pointer("/metrics/speculative_decoding")
        .filter(|m| m.is_object())?;
    let get = |k: &str| m.get(k).and_then(count);
    let accepted = get("num_accepted_draft_tokens");
    let drafted = get("num_draft_tokens");
    let stated = m.get("mean_acceptance_length").and_then(real);
    // vLLM's `num_spec_steps` counts only the steps that verified a draft (vLLM 0.32 on
    // ngram: 15 of a 64-token answer's 21 decode steps; the others found no n-gram to
    // propose and yielded one token each), so where the output is known the verify steps
    // come from it by the module's one rule.
    let from_output = v
        .pointer("/usage/completion_tokens")
        .and_then(count)
        .zip(accepted)
        .and_then(|(out, a)| out.checked_sub(1 + a));
    let verify = from_output.or(get("num_spec_steps")).or_else(|| {
        // Peers report the mean acceptance length as 1 + accepted / drafts per step.
        let mean = stated?;
        let a = accepted? as f64;
        (mean > 1.0).then(|| (a / (mean - 1.0)).round() as u64)
    });
    if verify.is_none() && accepted.is_none() && drafted.is_none() {
        return None;
    }
    Some(SpecCounts {
        verify_steps: verify,
        draft_tokens: drafted,
        accepted_tokens: accepted,
        server_accept_length: stated,
        source: SpecSource::Server,
    })
}

/// The figures a record keeps: the server's or the metrics' counts where there are some,
/// else the events proxy where the server's own per-event counts exceed one token. The
/// proxy follows the one definition too: tokens per event after the first (the prefill's).
pub fn stats(c: &Completion) -> Option<SpecStats> {
    if let Some(k) = &c.spec {
        return Some(stats_of(k, c.completion_tokens));
    }
    if !c.counts_from_server || c.events.len() < 2 {
        return None;
    }
    let tokens: u64 = c.events[1..].iter().map(|e| e.tokens).sum();
    let mean = tokens as f64 / (c.events.len() - 1) as f64;
    (mean > PROXY_MIN_TOKENS_PER_EVENT).then_some(SpecStats {
        accept_length: Some(mean),
        ..SpecStats::empty(SpecSource::EventsProxy)
    })
}

/// Counts to figures: accept length = (output − 1) / verify steps (the module's one
/// definition), rate = accepted / drafted.
pub fn stats_of(k: &SpecCounts, output_tokens: Option<u64>) -> SpecStats {
    let accept_length = match (output_tokens, k.verify_steps) {
        (Some(n), Some(v)) if v > 0 && n > 1 => Some((n - 1) as f64 / v as f64),
        _ => None,
    };
    let accept_rate = match (k.accepted_tokens, k.draft_tokens) {
        (Some(a), Some(d)) if d > 0 => Some(a as f64 / d as f64),
        _ => None,
    };
    SpecStats {
        accept_length,
        accept_rate,
        verify_steps: k.verify_steps,
        draft_tokens: k.draft_tokens,
        accepted_tokens: k.accepted_tokens,
        server_accept_length: k.server_accept_length,
        source: k.source,
    }
}

/// The speculative-decoding counters of one `/metrics` scrape (summed over engines).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct SpecCounters {
    /// Drafting steps (`*:spec_decode_num_drafts_total`).
    pub drafts: f64,
    pub draft_tokens: f64,
    pub accepted_tokens: f64,
}

/// Prefixes of servers exporting vLLM-style `spec_decode` counters.
const COUNTER_PREFIXES: [&str; 2] = ["vllm:", "llamacpp:"];

/// The counters in Prometheus text, or `None` when the server exports none of them.
pub fn read_counters(text: &str) -> Option<SpecCounters> {
    counters_in(&super::prometheus::read(text))
}

/// The counters in a parsed scrape, or `None` when the server exports none of them.
pub fn counters_in(e: &super::prometheus::Exposition) -> Option<SpecCounters> {
    COUNTER_PREFIXES.iter().find_map(|p| {
        let sum = |name: &str| -> Option<f64> {
            let v: Vec<f64> = e
                .scalars(&format!("{p}spec_decode_{name}"))
                .filter(|x| x.is_finite())
                .collect();
            (!v.is_empty()).then(|| v.iter().sum())
        };
        let accepted = sum("num_accepted_tokens_total")?;
        Some(SpecCounters {
            drafts: sum("num_drafts_total").unwrap_or(0.0),
            draft_tokens: sum("num_draft_tokens_total").unwrap_or(0.0),
            accepted_tokens: accepted,
        })
    })
}

/// One request's counts from the counters read before and after it (it ran alone);
/// `None` when a counter fell (the server restarted in between).
pub fn delta(
    before: &SpecCounters,
    after: &SpecCounters,
    output: Option<u64>,
) -> Option<SpecCounts> {
    let d = |a: f64, b: f64| (b >= a).then(|| (b - a).round() as u64);
    let accepted = d(before.accepted_tokens, after.accepted_tokens)?;
    let drafted = d(before.draft_tokens, after.draft_tokens)?;
    let drafts = d(before.drafts, after.drafts)?;
    Some(SpecCounts {
        verify_steps: output.and_then(|n| n.checked_sub(1 + accepted)),
        draft_tokens: Some(drafted),
        accepted_tokens: Some(accepted),
        server_accept_length: (drafts > 0).then(|| 1.0 + accepted as f64 / drafts as f64),
        source: SpecSource::MetricsDelta,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::StreamEvent;
    use serde_json::json;
    use std::time::Duration;

    #[test]
    fn counts_may_be_strings() {
        assert_eq!(count(&json!(12)), Some(12));
        assert_eq!(count(&json!("12")), Some(12));
        assert_eq!(count(&json!(" 12.0 ")), Some(12));
        assert_eq!(count(&json!(-1)), None);
        assert_eq!(count(&json!("many")), None);
        assert_eq!(count(&Value::Null), None);
        assert_eq!(real(&json!("2.5")), Some(2.5));
    }

    #[test]
    fn sglang_meta_info() {
        let meta =
            json!({"completion_tokens": 64, "spec_verify_ct": "20", "spec_accept_length": 3.2});
        let k = from_sglang_meta(&meta, Some(64)).unwrap();
        assert_eq!(k.verify_steps, Some(20));
        let s = stats_of(&k, Some(64));
        // Ours leaves the prefill's token out: 63 / 20; SGLang's own 64 / 20 kept beside.
        assert_eq!(s.accept_length, Some(63.0 / 20.0));
        assert_eq!(s.server_accept_length, Some(3.2));
        assert_eq!(s.accept_rate, None);
        assert_eq!(s.source, SpecSource::Server);
        // Only the accept length: steps from it.
        let meta = json!({"spec_accept_length": "3.2", "spec_draft_token_num": 4});
        assert_eq!(
            from_sglang_meta(&meta, Some(64)).unwrap().verify_steps,
            Some(20)
        );
        assert_eq!(
            from_sglang_meta(&json!({"e2e_latency": 1.0}), Some(64)),
            None
        );
    }

    #[test]
    fn llamacpp_timings() {
        // As llama-server sent them with a draft model (`--spec-type draft-simple`).
        let t = json!({"cache_n":0,"prompt_n":11,"prompt_ms":11.9,"predicted_n":32,"predicted_ms":82.4,"draft_n":24,"draft_n_accepted":18});
        let k = from_llamacpp_timings(&t).unwrap();
        // 32 tokens: the prefill's first, then 13 steps of 1 + their accepted drafts (18).
        assert_eq!(k.verify_steps, Some(13));
        assert_eq!((k.draft_tokens, k.accepted_tokens), (Some(24), Some(18)));
        let s = stats_of(&k, Some(32));
        assert!((s.accept_length.unwrap() - 31.0 / 13.0).abs() < 1e-12);
        assert_eq!(s.server_accept_length, None);
        assert!((s.accept_rate.unwrap() - 0.75).abs() < 1e-12);
        // Without a draft model llama-server sends no draft_n.
        assert_eq!(
            from_llamacpp_timings(&json!({"predicted_n": 32, "predicted_ms": 5.0})),
            None
        );
    }

    #[test]
    fn vllm_per_request_metrics() {
        let v = json!({"choices": [], "metrics": {"speculative_decoding": {
            "mean_acceptance_length": 2.5, "draft_acceptance_rate": 0.5,
            "num_spec_steps": 20, "num_accepted_draft_tokens": 30, "num_draft_tokens": 60}}});
        let k = from_vllm_metrics(&v).unwrap();
        assert_eq!(k.verify_steps, Some(20));
        let s = stats_of(&k, Some(51));
        assert_eq!(s.accept_rate, Some(0.5));
        // 51 = 1 + 20 steps × 1 + 30 accepted: ours equals vLLM's 2.5.
        assert_eq!(
            (s.accept_length, s.server_accept_length),
            (Some(2.5), Some(2.5))
        );
        // Without num_spec_steps: 30 accepted at 1.5 per step = 20 steps.
        let v = json!({"metrics": {"speculative_decoding": {
            "mean_acceptance_length": "2.5", "num_accepted_draft_tokens": 30}}});
        assert_eq!(from_vllm_metrics(&v).unwrap().verify_steps, Some(20));
        assert_eq!(from_vllm_metrics(&json!({"metrics": {}})), None);
    }

    #[test]
    fn metrics_counters_and_their_delta() {
        let before = "# TYPE vllm:spec_decode_num_drafts_total counter\n\
             vllm:spec_decode_num_drafts_total{engine=\"0\"} 10\n\
             vllm:spec_decode_num_drafts_total{engine=\"1\"} 5\n\
             vllm:spec_decode_num_draft_tokens_total{engine=\"0\"} 60\n\
             vllm:spec_decode_num_accepted_tokens_total{engine=\"0\"} 30\n\
             vllm:spec_decode_num_accepted_tokens_per_pos_total{position=\"0\"} 12\n";
        let b = read_counters(before).unwrap();
        assert_eq!(
            (b.drafts, b.draft_tokens, b.accepted_tokens),
            (15.0, 60.0, 30.0)
        );
        let after = read_counters(
            "llamacpp:spec_decode_num_drafts_total 18\n\
             llamacpp:spec_decode_num_draft_tokens_total 72\n\
             llamacpp:spec_decode_num_accepted_tokens_total 39\n",
        )
        .unwrap();
        // 3 drafts of 4: 12 drafted, 9 accepted; 13 output tokens: the prefill's first,
        // then 13 − 1 − 9 = 3 verify steps.
        let k = delta(&b, &after, Some(13)).unwrap();
        assert_eq!(k.source, SpecSource::MetricsDelta);
        assert_eq!(
            (k.draft_tokens, k.accepted_tokens, k.verify_steps),
            (Some(12), Some(9), Some(3))
        );
        assert_eq!(k.server_accept_length, Some(4.0));
        assert_eq!(stats_of(&k, Some(13)).accept_length, Some(4.0));
        // A counter that fell: the server restarted, no delta.
        assert_eq!(delta(&after, &b, Some(13)), None);
        assert_eq!(read_counters("vllm:num_requests_running 1\n"), None);
    }

    /// The request, 64 tokens with 25 drafts accepted over 38 drafting steps, as
    /// each source reports it: once SGLang's 64 / 38, llama.cpp's 64 / 39 and vLLM's
    /// 1 + 25 / 38 differed (1.68, 1.64, 1.66); now every source gives 63 / 38.
    #[test]
    fn every_source_gives_one_acceptance_for_one_request() {
        let want = 63.0 / 38.0;
        let sglang = from_sglang_meta(&json!({"spec_verify_ct": 38}), Some(64)).unwrap();
        let llama = from_llamacpp_timings(
            &json!({"predicted_n": 64, "draft_n": 152, "draft_n_accepted": 25}),
        )
        .unwrap();
        let vllm = from_vllm_metrics(&json!({"metrics": {"speculative_decoding": {
            "mean_acceptance_length": 1.0 + 25.0 / 38.0, "num_accepted_draft_tokens": 25,
            "num_draft_tokens": 152}}}))
        .unwrap();
        let before = SpecCounters::default();
        let after = SpecCounters {
            drafts: 38.0,
            draft_tokens: 152.0,
            accepted_tokens: 25.0,
        };
        let metrics = delta(&before, &after, Some(64)).unwrap();
        for k in [sglang, llama, vllm, metrics] {
            let s = stats_of(&k, Some(64));
            assert_eq!(s.verify_steps, Some(38), "{k:?}");
            assert!((s.accept_length.unwrap() - want).abs() < 1e-12, "{k:?}");
        }
        // The servers' own figures, kept beside: SGLang's counts the first token.
        assert_eq!(
            stats_of(&sglang, Some(64)).server_accept_length,
            Some(64.0 / 38.0)
        );
        assert!((metrics.server_accept_length.unwrap() - want).abs() < 1e-12);
    }

    fn completion(tokens: &[u64], from_server: bool) -> Completion {
        Completion {
            events: tokens
                .iter()
                .enumerate()
                .map(|(i, &t)| StreamEvent {
                    at: Duration::from_millis(i as u64),
                    tokens: t,
                })
                .collect(),
            completion_tokens: Some(tokens.iter().sum()),
            counts_from_server: from_server,
            ..Completion::default()
        }
    }

    #[test]
    fn events_proxy_only_from_the_servers_counts_and_only_when_it_says_something() {
        let s = stats(&completion(&[1, 3, 2, 2], true)).unwrap();
        assert_eq!(s.source, SpecSource::EventsProxy);
        // The first event is the prefill's: 7 tokens over the 3 events after it.
        assert_eq!(s.accept_length, Some(7.0 / 3.0));
        assert_eq!(stats(&completion(&[1, 3, 2, 2], false)), None);
        assert_eq!(stats(&completion(&[1; 32], true)), None);
        // Counts from the server win over the proxy.
        let mut c = completion(&[1, 3, 2, 2], true);
        c.spec = Some(SpecCounts {
            verify_steps: Some(4),
            draft_tokens: None,
            accepted_tokens: None,
            server_accept_length: None,
            source: SpecSource::Server,
        });
        assert_eq!(stats(&c).unwrap().source, SpecSource::Server);
    }
}
