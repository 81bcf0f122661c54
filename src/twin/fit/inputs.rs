//! What `twin fit` reads from result files: the sweep's per-length medians (prefill and
//! batch-1 decode), the closed-loop load cells' decode steps labelled by the batch that ran
//! them (`batch_steps.rs`), the run record's target, and speculative acceptance where measured.
//! Each keeps the repetitions it rests on, for the bootstrap (`bootstrap.rs`).

use crate::record::Sample;
use crate::record::load::RequestRecord;
use crate::resultfile::{self, ResultFile};
use crate::stats::median;
use serde::Serialize;
use serde_json::Value;
use std::collections::BTreeMap;
use std::path::Path;

/// One context length of the sweep, over its valid streamed samples: the fastest TTFT and
/// the fastest decode step (each sample's median gap), the least disturbed repetitions.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SweepPoint {
    pub context_tokens: u64,
    /// Median of the server's prompt-token counts (the requested length where not reported).
    pub prompt_tokens: u64,
    pub output_tokens: u64,
    pub ttft_s: f64,
    /// One decode step, s: tokens per verification step over decode tok/s.
    pub step_s: f64,
    pub samples: usize,
    /// Each repetition's (TTFT, decode step), for resampling.
    #[serde(skip)]
    pub reps: Vec<(f64, f64)>,
}

impl SweepPoint {
    /// Mean context of the decode steps: prompt plus half the output.
    pub fn decode_context(&self) -> u64 {
        self.prompt_tokens + self.output_tokens / 2
    }
}

pub use crate::twin::fit::batch_steps::CellSteps;

/// Everything the fit uses, gathered from any number of files.
#[derive(Debug, Clone, Default)]
pub struct Inputs {
    pub files: Vec<String>,
    /// The first run record's target (url, api, model, server_info).
    pub target: Option<Value>,
    pub sweep: Vec<SweepPoint>,
    pub cells: Vec<CellSteps>,
    /// Prompts prefilled whole beside decoding requests (the mixed cells: load cells of
    /// neither a concurrency nor a rate, as `load --trace` writes).
    pub mixed: Vec<crate::twin::fit::mixed_steps::MixedStep>,
    /// The same cells' prompts prefilled with nothing else running: the price alone.
    pub alone: Vec<crate::twin::fit::mixed_steps::AloneStep>,
    /// Closed-loop cells left out for being above the fitted concurrency (held out).
    pub held_out_cells: usize,
    /// Median accept length per content, with the samples it rests on.
    pub accept: Vec<(String, f64, usize)>,
    /// The longest context (prompt + output) any request reached.
    pub max_context_tokens: u64,
}

impl Inputs {
    pub fn server_info(&self) -> Value {
        self.target
            .as_ref()
            .and_then(|t| t.get("server_info"))
            .cloned()
            .unwrap_or(Value::Null)
    }
}

/// Read `paths`, using load cells at concurrency `<= max_concurrency` only.
pub fn gather(paths: &[impl AsRef<Path>], max_concurrency: u32) -> anyhow::Result<Inputs> {
    let mut inputs = Inputs::default();
    let mut samples: Vec<(String, Sample)> = Vec::new();
    for path in paths {
        let path = path.as_ref();
        let file = resultfile::read(path).map_err(|e| anyhow::anyhow!("{e}"))?;
        let Some(run) = &file.run else {
            anyhow::bail!("{}: no complete run record: nothing to fit", path.display());
        };
        if inputs.target.is_none() {
            inputs.target = Some(serde_json::to_value(&run.target)?);
        }
        let content = run
            .config
            .content
            .clone()
            .unwrap_or_else(|| "filler".to_string());
        let no_spec = states_no_speculation(&run.target.server_info);
        samples.extend(file.samples.iter().cloned().map(|mut s| {
            // Several tokens per event from a server that states it does not speculate are
            // merged deltas (vLLM's frontend lagging), not acceptance.
            if no_spec && s.spec.is_some_and(|sp| sp.source.is_proxy()) {
                s.spec = None;
            }
            (content.clone(), s)
        }));
        gather_cells(&file, max_concurrency, &mut inputs);
        inputs.files.push(path.display().to_string());
    }
    let usable: Vec<&(String, Sample)> = samples.iter().filter(|(_, s)| usable(s)).collect();
    for (_, s) in &usable {
        let reached = s.prompt_tokens.unwrap_or(s.context_tokens) + s.output_tokens.unwrap_or(0);
        inputs.max_context_tokens = inputs.max_context_tokens.max(reached);
    }
    inputs.sweep = sweep_points(usable.iter().map(|(_, s)| s));
    inputs.accept = acceptance(&usable);
    inputs
        .cells
        .sort_by_key(|c| (c.context_tokens, c.concurrency, c.batch));
    Ok(inputs)
}

/// The server's own config was read and holds no speculation (probe recorded where).
fn states_no_speculation(info: &Value) -> bool {
    info.get("speculative").is_none_or(Value::is_null)
        && info
            .pointer("/sources/speculative")
            .is_some_and(Value::is_string)
}

/// A cold, streamed, valid sweep sample (not a depth turn, not a two-point pair).
fn usable(s: &Sample) -> bool {
    s.valid
        && s.method == "stream"
        && s.depth_tokens.is_none()
        && s.ttft_s.is_some_and(|t| t > 0.0)
        && s.decode_tps.is_some_and(|d| d > 0.0 && d.is_finite())
}

fn sweep_points<'a>(samples: impl Iterator<Item = &'a Sample>) -> Vec<SweepPoint> {
    let mut by_len: BTreeMap<u64, Vec<&Sample>> = BTreeMap::new();
    for s in samples {
        by_len.entry(s.context_tokens).or_default().push(s);
    }
    by_len
        .into_iter()
        .filter_map(|(context_tokens, v)| {
            let prompt = v
                .iter()
                .map(|s| s.prompt_tokens.unwrap_or(context_tokens) as f64)
                .collect::<Vec<_>>();
            let output = v
                .iter()
                .filter_map(|s| s.output_tokens.map(|o| o as f64))
                .collect::<Vec<_>>();
            // The fastest repetition: waiting behind other work on the host (CPU
            // contention, another tenant) only adds time, and the twin models the server's
            // own cost. On a quiet machine it is within the spread of the median. The same
            // for the decode step (the cells' pooled median gaps need no such care: a
            // cell has hundreds of gaps where a sample has one median).
            let fastest_ttft = v
                .iter()
                .filter_map(|s| s.ttft_s)
                .filter(|t| t.is_finite())
                .fold(f64::INFINITY, f64::min);
            let reps: Vec<(f64, f64)> = v
                .iter()
                .filter_map(|s| Some((s.ttft_s?, unbunched(s, step_of(s)?, fastest_ttft))))
                .filter(|(t, d)| t.is_finite() && d.is_finite())
                .collect();
            let (ttft, step) = fastest(&reps);
            Some(SweepPoint {
                context_tokens,
                prompt_tokens: median(&prompt)?.round() as u64,
                output_tokens: median(&output)?.round() as u64,
                ttft_s: ttft.is_finite().then_some(ttft)?,
                step_s: step.is_finite().then_some(step)?,
                samples: v.len(),
                reps,
            })
        })
        .collect()
}

/// The fastest TTFT and the fastest decode step over repetitions (∞ where there are none).
pub fn fastest(reps: &[(f64, f64)]) -> (f64, f64) {
    reps.iter()
        .fold((f64::INFINITY, f64::INFINITY), |(t, d), r| {
            (t.min(r.0), d.min(r.1))
        })
}

/// One decode step of a sample: the median inter-token gap (a verification step yields
/// `accept_length` tokens), which a stall of the server's process (CPU contention, a GC)
/// does not move; the mean (1 / decode tok/s) where the sample has no gaps.
fn step_of(s: &Sample) -> Option<f64> {
    let per_step = tokens_per_step(s);
    match s.itl_p50_s.filter(|g| g.is_finite() && *g > 0.0) {
        Some(gap) => Some(per_step * gap),
        None => Some(per_step / s.decode_tps?),
    }
}

/// Tokens one decode step yields: the sample's acceptance length, 1 without speculation.
fn tokens_per_step(s: &Sample) -> f64 {
    s.spec
        .and_then(|sp| sp.accept_length)
        .filter(|a| a.is_finite() && *a >= 1.0)
        .unwrap_or(1.0)
}

/// A sample's gaps are bunched below this share of its decode time per token: the stream
/// was buffered (a frontend starved of CPU delivers a request's tokens together), and its
/// gaps time the buffer, not the engine.
const BUNCHED_SHARE: f64 = 0.1;
/// ... and below this median gap, which no engine's decode step reaches (a buffered stream's
/// gaps are microseconds; the tiny model's step on one CPU thread is 0.7 ms). Without it a
/// long prompt's slower repetition (its TTFT a few per cent above the fastest, hundreds of
/// milliseconds at 32k) read as bunched and its decode step as ten times its gaps.
const BUNCHED_GAP_S: f64 = 50e-6;

/// The decode step of a sample whose gaps are bunched: its decode time measured from the
/// length's fastest TTFT (the first token of a buffered stream arrives late, so its own TTFT
/// swallows the decode) to its last token, per token. `step` otherwise.
fn unbunched(s: &Sample, step: f64, fastest_ttft: f64) -> f64 {
    let (Some(e2e), Some(out)) = (s.e2e_s, s.output_tokens) else {
        return step;
    };
    if out < 2 || !fastest_ttft.is_finite() {
        return step;
    }
    let per_step = tokens_per_step(s) * (e2e - fastest_ttft) / (out - 1) as f64;
    if per_step > 0.0 && step < BUNCHED_GAP_S && step < BUNCHED_SHARE * per_step {
        per_step
    } else {
        step
    }
}

fn acceptance(samples: &[&(String, Sample)]) -> Vec<(String, f64, usize)> {
    let mut by_content: BTreeMap<&str, Vec<f64>> = BTreeMap::new();
    for (content, s) in samples {
        if let Some(a) = s.spec.and_then(|sp| sp.accept_length) {
            by_content.entry(content.as_str()).or_default().push(a);
        }
    }
    by_content
        .into_iter()
        .filter_map(|(c, v)| Some((c.to_string(), median(&v)?, v.len())))
        .collect()
}

fn gather_cells(file: &ResultFile, max_concurrency: u32, inputs: &mut Inputs) {
    for cell in &file.load.cells {
        let Some(c) = cell.cell.concurrency else {
            if cell.cell.rate.is_none() {
                let requests: Vec<&RequestRecord> = file.load.requests_in(&cell.cell).collect();
                inputs
                    .mixed
                    .extend(crate::twin::fit::mixed_steps::mixed_steps(&requests));
                inputs
                    .alone
                    .extend(crate::twin::fit::mixed_steps::alone_steps(&requests));
            }
            continue;
        };
        if c > max_concurrency {
            inputs.held_out_cells += 1;
            continue;
        }
        let requests: Vec<&RequestRecord> = file.load.requests_in(&cell.cell).collect();
        for q in requests.iter().filter(|q| q.ok) {
            let reached =
                q.prompt_tokens.unwrap_or(q.cell.context_tokens) + q.output_tokens.unwrap_or(0);
            inputs.max_context_tokens = inputs.max_context_tokens.max(reached);
        }
        inputs
            .cells
            .extend(crate::twin::fit::batch_steps::cell_steps(
                cell, c, &requests,
            ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_buffered_streams_step_is_its_decode_time_from_the_fastest_ttft() {
        // vLLM on a starved CPU: 64 tokens delivered together after a late first token
        // (TTFT 240 ms against 84 ms in the length's fastest repetition).
        let mut s: Sample = serde_json::from_value(serde_json::json!({
            "context_tokens": 1024, "prompt_tokens": 1024, "output_tokens": 64,
            "method": "stream", "rep": 1, "valid": true, "flags": [],
            "ttft_s": 0.240, "e2e_s": 0.2402, "itl_p50_s": 1.5e-6, "decode_tps": 3.0e5
        }))
        .unwrap();
        let step = unbunched(&s, step_of(&s).unwrap(), 0.084);
        assert!((step - 0.1562 / 63.0).abs() < 1e-9, "{step}");
        // A stream with its own gaps keeps its median gap, stalls or not.
        s.itl_p50_s = Some(2.4e-3);
        s.e2e_s = Some(0.084 + 63.0 * 4e-3);
        assert_eq!(unbunched(&s, step_of(&s).unwrap(), 0.084), 2.4e-3);
        // A long prompt's slower repetition: TTFT 300 ms above the length's fastest, 0.7 ms
        // gaps; its step is its gaps, not 300 ms spread over its 31 tokens.
        s.output_tokens = Some(32);
        s.itl_p50_s = Some(0.7e-3);
        s.ttft_s = Some(3.3);
        s.e2e_s = Some(3.3 + 31.0 * 0.7e-3);
        assert_eq!(unbunched(&s, step_of(&s).unwrap(), 3.0), 0.7e-3);
    }
}
