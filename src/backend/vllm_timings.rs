//! vLLM's own per-request times: it reports request phases only as Prometheus histograms,
//! so while one request is in flight the deltas of their `_sum` and `_count` between two
//! `/metrics` reads are that request's server-side times. Recorded as the sample's
//! `server_timings`, beside llama.cpp's own `timings`.

use super::prometheus::Exposition;
use serde_json::{Map, Value, json};

/// The phase histograms and the keys they take in `server_timings` (seconds). vLLM 0.32
/// (`vllm/v1/metrics/stats.py`): TTFT runs from the request's arrival in the API server
/// to its first token; queue from queued to scheduled; prefill from scheduled to the first
/// token; decode from the first token to the last; e2e from arrival to finish.
pub const PHASES: [(&str, &str); 5] = [
    ("vllm:time_to_first_token_seconds", "ttft_s"),
    ("vllm:request_queue_time_seconds", "queue_s"),
    ("vllm:request_prefill_time_seconds", "prefill_s"),
    ("vllm:request_decode_time_seconds", "decode_s"),
    ("vllm:e2e_request_latency_seconds", "e2e_s"),
];

/// The `source` value of timings taken this way.
pub const SOURCE: &str = "vllm_metrics_delta";

/// The phase histograms' `_sum` and `_count` in one scrape (summed over engines and models).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct PhaseTotals {
    pub sums: [f64; PHASES.len()],
    pub counts: [f64; PHASES.len()],
}

/// The totals in a scrape, or `None` when the server exports none of the histograms.
pub fn read(m: &Exposition) -> Option<PhaseTotals> {
    let mut t = PhaseTotals::default();
    let mut seen = false;
    for (i, (family, _)) in PHASES.iter().enumerate() {
        let total = |suffix: &str| -> Option<f64> {
            let v: Vec<f64> = m.scalars(&format!("{family}{suffix}")).collect();
            (!v.is_empty()).then(|| v.iter().sum())
        };
        if let (Some(s), Some(c)) = (total("_sum"), total("_count")) {
            t.sums[i] = s;
            t.counts[i] = c;
            seen = true;
        }
    }
    seen.then_some(t)
}

/// What the histograms moved by around one request.
#[derive(Debug, Clone, PartialEq)]
pub enum PhaseDelta {
    /// Every phase moved by exactly one observation: that request's times.
    One(Value),
    /// A phase moved by more than one observation: other requests ran too; nothing is
    /// recorded.
    Several(u64),
    /// The request has not been counted yet (or a counter fell: the server restarted).
    NotYet,
}

/// The delta between two scrapes around one request.
pub fn delta(before: &PhaseTotals, after: &PhaseTotals) -> PhaseDelta {
    let counts: Vec<f64> = (0..PHASES.len())
        .map(|i| after.counts[i] - before.counts[i])
        .collect();
    if counts.iter().any(|&c| c < -0.5) {
        return PhaseDelta::NotYet;
    }
    let most = counts.iter().copied().fold(0.0, f64::max).round() as u64;
    if most > 1 {
        return PhaseDelta::Several(most);
    }
    if counts.iter().any(|&c| c.round() as u64 != 1) {
        return PhaseDelta::NotYet;
    }
    let mut out = Map::new();
    out.insert("source".into(), json!(SOURCE));
    for (i, (_, key)) in PHASES.iter().enumerate() {
        out.insert((*key).into(), json!(after.sums[i] - before.sums[i]));
    }
    PhaseDelta::One(Value::Object(out))
}

/// The server's prefill and decode seconds from `server_timings` taken this way.
pub fn prefill_decode_s(timings: &Value) -> Option<(f64, f64)> {
    if timings.get("source").and_then(Value::as_str) != Some(SOURCE) {
        return None;
    }
    let get = |k: &str| timings.get(k).and_then(Value::as_f64);
    Some((get("prefill_s")?, get("decode_s")?))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scrape(n: u32, ttft: f64, e2e: f64) -> String {
        let mut s = String::new();
        for (family, _) in PHASES {
            let sum = match family {
                "vllm:time_to_first_token_seconds" => ttft,
                "vllm:e2e_request_latency_seconds" => e2e,
                _ => 0.25 * f64::from(n),
            };
            s += &format!(
                "{family}_count{{engine=\"0\",model_name=\"m\"}} {n}.0\n{family}_sum{{engine=\"0\",model_name=\"m\"}} {sum}\n"
            );
        }
        s
    }

    fn totals(text: &str) -> PhaseTotals {
        read(&super::super::prometheus::read(text)).expect("histograms")
    }

    #[test]
    fn one_request_gives_its_phase_times() {
        let before = totals(&scrape(3, 1.0, 2.0));
        let after = totals(&scrape(4, 1.125, 2.5));
        let PhaseDelta::One(t) = delta(&before, &after) else {
            panic!("one request")
        };
        assert_eq!(t["source"], SOURCE);
        assert_eq!(t["ttft_s"], 0.125);
        assert_eq!(t["e2e_s"], 0.5);
        assert_eq!(prefill_decode_s(&t), Some((0.25, 0.25)));
    }

    #[test]
    fn several_or_none_record_nothing() {
        let before = totals(&scrape(3, 1.0, 2.0));
        assert_eq!(
            delta(&before, &totals(&scrape(5, 1.5, 3.0))),
            PhaseDelta::Several(2)
        );
        assert_eq!(delta(&before, &before), PhaseDelta::NotYet);
        // A restart: the counters fell.
        assert_eq!(
            delta(&before, &totals(&scrape(1, 0.1, 0.2))),
            PhaseDelta::NotYet
        );
    }

    #[test]
    fn a_server_without_the_histograms_has_none() {
        assert_eq!(
            read(&super::super::prometheus::read("other_total 3\n")),
            None
        );
    }
}
