//! Mixed steps as the client saw them: a prompt prefilled in one step beside k requests
//! that were decoding through it. The decoders' inter-token gap that ends with the prompt's
//! first token is that step (calibration's mixed cells hold k requests decoding and send one
//! prompt beside them, `measure/calibrate.rs`); its length, less what the prefill alone and the
//! decode part (the same decoders' ordinary step) cost, is the interference `interference.rs`
//! fits.

use crate::record::load::RequestRecord;
use crate::stats::median;
use serde::Serialize;

/// One mixed step: `prompt_tokens` prefilled whole beside `decoding` requests.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct MixedStep {
    /// Requests decoding through the whole step.
    pub decoding: u32,
    /// The prompt prefilled in it.
    pub prompt_tokens: u64,
    /// Σ of the decoding requests' contexts in that step.
    pub context_sum: u64,
    /// The step as the decoders saw it (median over their gaps), s.
    pub step_s: f64,
    /// The same decoders' ordinary step, s: the median over them of each one's median gap
    /// over its whole stream (hundreds of gaps, of which its probes' stalls are a few). The
    /// decode part of the mixed step, measured where the law fitted to the sweep's short
    /// streams can be far off (a starved client reads their tokens bunched).
    pub decode_s: Option<f64>,
}

/// A prompt prefilled with nothing else running: its TTFT is the price alone.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AloneStep {
    pub prompt_tokens: u64,
    pub ttft_s: f64,
}

/// One request's stream on the cell's clock: when sent, its first token, each later
/// token's time, its end.
struct Stream {
    sent: f64,
    first: f64,
    tokens: Vec<f64>,
    end: f64,
    prompt: u64,
    /// Its median inter-token gap: its ordinary decode step.
    ordinary: Option<f64>,
}

fn stream(q: &RequestRecord) -> Option<Stream> {
    let first = q.sent_s + q.ttft_s?;
    let mut t = first;
    let mut tokens = vec![first];
    for g in &q.itl_s {
        if !(g.is_finite() && *g >= 0.0) {
            return None;
        }
        t += g;
        tokens.push(t);
    }
    Some(Stream {
        sent: q.sent_s,
        first,
        end: q.ended_s.unwrap_or(t).max(t),
        tokens,
        prompt: q.prompt_tokens.unwrap_or(q.cell.context_tokens),
        ordinary: median(&q.itl_s),
    })
}

/// The requests of a cell that ran with no other request in flight from their sending to
/// their end (calibration's mixed trace sends such probes first: the price alone measured
/// on the same host within seconds of the mixed steps).
pub fn alone_steps(requests: &[&RequestRecord]) -> Vec<AloneStep> {
    let streams: Vec<Stream> = requests
        .iter()
        .filter(|q| q.ok)
        .filter_map(|q| stream(q))
        .collect();
    streams
        .iter()
        .enumerate()
        .filter(|(i, s)| {
            streams
                .iter()
                .enumerate()
                .all(|(j, o)| j == *i || o.end <= s.sent || o.sent >= s.end)
        })
        .map(|(_, s)| AloneStep {
            prompt_tokens: s.prompt,
            ttft_s: s.first - s.sent,
        })
        .collect()
}

/// The mixed steps of one cell's requests: for each request whose first token ends a gap
/// of others' streams, where the gap before was an ordinary step (under half this one: the
/// prefill was not chunked over several steps) and nothing else started, finished or was
/// prefilled inside the gap.
pub fn mixed_steps(requests: &[&RequestRecord]) -> Vec<MixedStep> {
    let streams: Vec<Stream> = requests
        .iter()
        .filter(|q| q.ok)
        .filter_map(|q| stream(q))
        .collect();
    let mut out = Vec::new();
    for (p, probe) in streams.iter().enumerate() {
        let mut gaps = Vec::new();
        let mut ordinary = Vec::new();
        let mut contexts = 0u64;
        let mut clean = true;
        for (j, o) in streams.iter().enumerate() {
            if j == p {
                continue;
            }
            // The decoder's token that the probe's first token ends a gap at: a gap of o's
            // stream [a, b] with b within a quarter of the gap of the probe's first token.
            let hit = o.tokens.windows(2).enumerate().find(|(_, w)| {
                let slack = (w[1] - w[0]) / 4.0;
                (w[1] - probe.first).abs() <= slack
            });
            match hit {
                Some((i, w)) if i >= 1 && (w[0] - o.tokens[i - 1]) < (w[1] - w[0]) / 2.0 => {
                    gaps.push(w[1] - w[0]);
                    ordinary.extend(o.ordinary);
                    contexts += o.prompt + i as u64 + 1;
                }
                Some(_) => clean = false,
                None => {
                    // Not decoding through that moment: it must not touch the probe's step.
                    let (a, b) = (probe.sent, probe.first);
                    if o.sent < b && o.end > a {
                        clean = false;
                    }
                }
            }
        }
        if !clean || gaps.is_empty() {
            continue;
        }
        // Nothing but the probe happened inside the step: no other request sent, started or
        // finished between the step's start and end.
        let step = median(&gaps).unwrap_or(0.0);
        let (a, b) = (probe.first - step, probe.first);
        let slack = step / 4.0;
        let quiet = streams.iter().enumerate().all(|(j, o)| {
            j == p
                || !((o.sent > a + slack && o.sent < b - slack)
                    || (o.first > a + slack && o.first < b - slack)
                    || (o.end > a + slack && o.end < b - slack))
        });
        if quiet {
            out.push(MixedStep {
                decoding: gaps.len() as u32,
                prompt_tokens: probe.prompt,
                context_sum: contexts,
                step_s: step,
                decode_s: median(&ordinary),
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(sent: f64, ttft: f64, gaps: Vec<f64>, prompt: u64) -> RequestRecord {
        let end = sent + ttft + gaps.iter().sum::<f64>();
        RequestRecord {
            sent_s: sent,
            ttft_s: Some(ttft),
            ended_s: Some(end),
            itl_s: gaps,
            prompt_tokens: Some(prompt),
            output_tokens: Some(9),
            ok: true,
            ..Default::default()
        }
    }

    #[test]
    fn the_gap_ending_at_a_prompts_first_token_is_its_mixed_step() {
        // Two decoders at 1 ms a step from t = 10 ms (tokens at 10, 11, … ms); a 512-token
        // prompt sent at 14.5 ms is prefilled in the step 15 → 40 ms, which stalls both.
        let gaps = || {
            let mut g = vec![0.001; 5];
            g.push(0.025);
            g.extend([0.001; 10]);
            g
        };
        let a = request(0.0, 0.010, gaps(), 64);
        let b = request(0.0, 0.010, gaps(), 64);
        let probe = request(0.0145, 0.0255, vec![], 512);
        let got = mixed_steps(&[&a, &b, &probe]);
        assert_eq!(got.len(), 1, "{got:?}");
        let m = &got[0];
        assert_eq!((m.decoding, m.prompt_tokens), (2, 512));
        assert!((m.step_s - 0.025).abs() < 1e-12, "{m:?}");
        // Their ordinary step: the 1 ms of fifteen gaps, the stall one among them.
        assert!((m.decode_s.unwrap() - 0.001).abs() < 1e-12, "{m:?}");
        // Each decoder's context in that step: 64 prompt + 6 tokens before it… + this one.
        assert_eq!(m.context_sum, 2 * (64 + 6));
        // A prefill chunked over two steps (the gap before is a stall too) is not one step.
        let chunked = || {
            let mut g = vec![0.001; 4];
            g.extend([0.015, 0.025]);
            g.extend([0.001; 10]);
            g
        };
        let (ca, cb) = (
            request(0.0, 0.010, chunked(), 64),
            request(0.0, 0.010, chunked(), 64),
        );
        let early = request(0.0135, 0.0405, vec![], 512);
        assert!(mixed_steps(&[&ca, &cb, &early]).is_empty());
        // Alone: the probe with nothing else in flight.
        let alone = request(1.0, 0.05, vec![], 512);
        // (a, running before it, was alone too.)
        let got = alone_steps(&[&a, &alone]);
        assert_eq!(got.len(), 2, "{got:?}");
        assert_eq!(got[1].prompt_tokens, 512);
        assert!((got[1].ttft_s - 0.05).abs() < 1e-9, "{got:?}");
        // Beside a decoder, not alone.
        assert!(
            alone_steps(&[&a, &probe])
                .iter()
                .all(|s| s.prompt_tokens != 512)
        );
        // A neighbour sent inside the step makes it unclean.
        let intruder = request(0.030, 0.02, vec![0.001], 64);
        let got = mixed_steps(&[&a, &b, &probe, &intruder]);
        assert!(got.iter().all(|m| m.prompt_tokens != 512), "{got:?}");
    }
}
