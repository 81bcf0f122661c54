//! Calibration's mixed cells laid out as a request trace (`load --trace`, jsonl): k
//! requests with short prompts and long outputs start together, and once they decode, one
//! prompt of P tokens at a time is sent beside them, each after the last one's prefill has
//! surely ended. The decoders' stalls are the mixed steps `fit/mixed_steps.rs` reads. The times come
//! from the step model fitted so far (sweep and closed-loop cells), with margins, so that
//! neither the decoders nor the prompts overlap what they should not; where the server is
//! slower than planned, `fit/mixed_steps.rs` leaves the disturbed steps out.

use crate::twin::model::profile::Coefficients;
use serde_json::json;

/// Prompt of each decoding request, tokens.
pub const DECODER_PROMPT: u64 = 128;
/// The most tokens one decoder generates; more probes than fit make another episode.
const MAX_DECODE: u64 = 2048;
/// Margin on every planned duration (host noise, the interference itself).
const MARGIN: f64 = 2.0;

/// One episode's requests as (ms from the trace's start, input, output), decoders first.
type Lines = Vec<(f64, u64, u64)>;

fn prefill_s(c: &Coefficients, n: u64) -> f64 {
    let n = n as f64;
    c.t0_s + n / c.p0_tps + c.q_s_per_token2 * n * n / 2.0
}

/// The trace for mixed cells at each `(k, P)` of `cells`, `reps` prompts each, with the
/// decoders' outputs capped by `context` (the server's per-request context).
pub fn trace(c: &Coefficients, cells: &[(u32, u64)], reps: u32, context: u64) -> Lines {
    let cap = MAX_DECODE
        .min(context.saturating_sub(DECODER_PROMPT + 16))
        .max(32);
    let mut out = Lines::new();
    let mut t = 0.0;
    // First each prompt length alone, `reps` times: the price alone, on the same host.
    let mut lengths: Vec<u64> = cells.iter().map(|x| x.1).collect();
    lengths.sort_unstable();
    lengths.dedup();
    for _ in 0..reps {
        for &p in &lengths {
            out.push((t * 1e3, p, 1));
            t += MARGIN * prefill_s(c, p) + 0.05;
        }
    }
    let mut ks: Vec<u32> = cells.iter().map(|x| x.0).collect();
    ks.dedup();
    for k in ks {
        let prompts: Vec<u64> = (0..reps)
            .flat_map(|_| cells.iter().filter(|x| x.0 == k).map(|x| x.1))
            .collect();
        let ctx = (DECODER_PROMPT + cap / 2) as f64;
        let kf = f64::from(k);
        let step = (c.d0_s + c.d2_s_per_request * kf + c.d1_s_per_token * kf * ctx).max(1e-4);
        // The decoders are prefilled (one after another at worst) and decoding.
        let start = MARGIN * kf * prefill_s(c, DECODER_PROMPT) + 8.0 * step;
        let mut i = 0;
        while i < prompts.len() {
            let mut at = start;
            let mut sends = Vec::new();
            while i < prompts.len() {
                let next = at + MARGIN * prefill_s(c, prompts[i]) + 8.0 * step;
                if !sends.is_empty() && (next * MARGIN / step) as u64 > cap {
                    break;
                }
                sends.push((at, prompts[i]));
                at = next;
                i += 1;
            }
            let decode = ((at * MARGIN / step).ceil() as u64 + 16).clamp(32, cap);
            for _ in 0..k {
                out.push((t * 1e3, DECODER_PROMPT, decode));
            }
            for (s, p) in sends {
                out.push(((t + s) * 1e3, p, 1));
            }
            // The episode ends when the decoders do; the next starts after a margin.
            t += MARGIN * (kf * prefill_s(c, DECODER_PROMPT) + decode as f64 * step) + 0.05;
        }
    }
    out
}

/// The trace as jsonl lines (`--trace-format jsonl`: no `hash_ids`, each prompt its own).
pub fn jsonl(lines: &Lines) -> String {
    lines
        .iter()
        .map(|(ms, input, output)| {
            format!(
                "{}\n",
                json!({"timestamp": (ms * 1000.0).round() / 1000.0, "input_length": input,
                       "output_length": output})
            )
        })
        .collect()
}

/// Planned seconds of the trace (its last episode's end is not in it: a lower bound).
pub fn planned_s(lines: &Lines) -> f64 {
    lines.iter().map(|l| l.0).fold(0.0, f64::max) / 1e3
}

#[cfg(test)]
mod tests {
    use super::*;

    const C: Coefficients = Coefficients {
        t0_s: 0.02,
        p0_tps: 10_000.0,
        q_s_per_token2: 0.0,
        d0_s: 0.001,
        d1_s_per_token: 0.0,
        d2_s_per_request: 0.001,
        interference: None,
    };

    #[test]
    fn decoders_outlast_their_prompts_and_prompts_do_not_overlap() {
        let lines = trace(&C, &[(1, 512), (3, 512), (3, 1024)], 2, 8192);
        // k = 1: one decoder and two prompts; k = 3: three decoders and four prompts.
        assert_eq!(lines.iter().filter(|l| l.2 > 1).count(), 4, "{lines:?}");
        // Alone: two lengths twice; beside decoders: six.
        assert_eq!(lines.iter().filter(|l| l.2 == 1).count(), 4 + 6);
        let decoders: Vec<&(f64, u64, u64)> = lines.iter().filter(|l| l.2 > 1).collect();
        for (i, d) in decoders.iter().enumerate() {
            let k = if i == 0 { 1.0 } else { 3.0 };
            let end = d.0 / 1e3 + d.2 as f64 * (0.001 + 0.001 * k);
            for p in lines.iter().filter(|l| l.2 == 1 && l.0 >= d.0) {
                let t = p.0 / 1e3;
                if t < end {
                    // Planned to finish its prefill (twice over) well before the decoders.
                    assert!(t + 2.0 * prefill_s(&C, p.1) < end, "{p:?} vs {d:?}");
                }
            }
        }
        let text = jsonl(&lines);
        assert_eq!(text.lines().count(), lines.len());
        assert!(text.contains("\"input_length\":1024"), "{text}");
        assert!(planned_s(&lines) > 0.0);
    }
}
