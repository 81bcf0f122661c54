//! Verification steps per second in a load cell: how fast the target model's decode steps
//! ran for the cell's requests, beside their accept length. Output tok/s is about
//! accept_len × steps/s (plus each request's first token), so under load the two together
//! show whether a falling throughput is fewer tokens per step or fewer steps per second.

use crate::record::load::RequestRecord;

/// The verify steps of the cell's successful requests per second of its window `[a, b]`:
/// each request's steps spread evenly over its decode span (first token to end), as
/// output tokens are for `output_tps`. Summed over requests: divide by the in-flight mean
/// for one request's rate. `None` when no request reported verify steps.
pub fn verify_steps_per_s(requests: &[&RequestRecord], a: f64, b: f64) -> Option<f64> {
    if b <= a {
        return None;
    }
    let mut steps = 0.0;
    let mut any = false;
    for r in requests.iter().filter(|r| r.ok) {
        let (Some(ttft), Some(end), Some(v)) = (
            r.ttft_s,
            r.ended_s,
            r.spec.as_ref().and_then(|s| s.verify_steps),
        ) else {
            continue;
        };
        any = true;
        let first = r.sent_s + ttft;
        let span = end - first;
        if span > 0.0 {
            steps += v as f64 * (end.min(b) - first.max(a)).max(0.0) / span;
        } else if (a..=b).contains(&end) {
            steps += v as f64;
        }
    }
    any.then(|| steps / (b - a))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::{SpecSource, SpecStats};

    fn req(sent: f64, ttft: f64, end: f64, steps: Option<u64>) -> RequestRecord {
        RequestRecord {
            sent_s: sent,
            ttft_s: Some(ttft),
            ended_s: Some(end),
            ok: true,
            spec: steps.map(|v| SpecStats {
                verify_steps: Some(v),
                ..SpecStats::empty(SpecSource::Server)
            }),
            ..RequestRecord::default()
        }
    }

    #[test]
    fn steps_are_spread_over_each_decode_span_and_cut_at_the_window() {
        // 100 steps decoding over [1, 11]: half of them inside the window [6, 16].
        let a = req(0.0, 1.0, 11.0, Some(100));
        // 40 steps over [7, 9], all inside.
        let b = req(6.0, 1.0, 9.0, Some(40));
        let got = verify_steps_per_s(&[&a, &b], 6.0, 16.0).unwrap();
        assert!((got - (50.0 + 40.0) / 10.0).abs() < 1e-12, "{got}");
        let none = req(0.0, 1.0, 11.0, None);
        assert_eq!(verify_steps_per_s(&[&none], 6.0, 16.0), None);
        assert_eq!(verify_steps_per_s(&[&a], 6.0, 6.0), None);
    }
}
