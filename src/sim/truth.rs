//! Ground truth the simulator records per request, for checking what a client measured.

use serde::Serialize;
use std::sync::Mutex;

/// One decode step as the cost model charged it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct DecodeStep {
    /// Tokens the step emitted (in one event).
    pub tokens: u64,
    /// Prompt plus tokens generated before the step.
    pub context_tokens: u64,
    pub cost_s: f64,
}

/// What the simulator did for one generation request. Times are seconds on the engine's
/// clock (`SimServer::now_s`, `/sim/truth`'s `now_s`).
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct RequestTruth {
    /// `/generate`, `/v1/completions` or `/v1/chat/completions`.
    pub route: String,
    /// After truncation.
    pub prompt_tokens: u64,
    pub cached_tokens: u64,
    /// The prompt's leading cache pages the radix cache held and served (whole pages; the
    /// blocks a trace request reused are these pages).
    pub cached_pages: u64,
    /// Cached pages the pool had evicted to make room before this request was admitted.
    pub pool_evicted_pages: u64,
    /// Cost-model prefill time (0 when a fault answered before prefill).
    pub prefill_s: f64,
    /// Tokens carried by the first content event (1, or 0 when none was sent).
    pub first_event_tokens: u64,
    pub decode_steps: Vec<DecodeStep>,
    /// Tokens delivered to the client.
    pub output_tokens: u64,
    /// `length` | `stop`; `abort` when cut short (client gone, fault); `error` for HTTP faults.
    pub finish: String,
    /// The answer given to a "What is the secret X?" prompt.
    pub needle_answer: Option<String>,
    /// The injected fault's kind, e.g. `reset`.
    pub fault: Option<String>,
    /// When the request had arrived (its body parsed).
    pub arrival_s: f64,
    /// When the engine got it (its prompt tokenized): the first step it can join starts
    /// after this, so a wait from here beyond one step is queueing.
    pub submitted_s: f64,
    /// When it left the queue (first admission).
    pub admitted_s: Option<f64>,
    /// When its first token was handed to the connection.
    pub first_token_s: Option<f64>,
    /// When its last token was handed to the connection.
    pub finished_s: Option<f64>,
    /// Times the engine preempted it (pages freed, recomputed later).
    pub preemptions: u32,
    /// Speculative verify steps: its decode steps (the first token's prefill and any
    /// recompute after a preemption are none). With `--spec 1`, plain decode steps.
    pub spec_verify_steps: u64,
    /// Draft tokens those steps verified: K−1 each, fewer when fewer than K tokens were
    /// left to produce (only what can be accepted is proposed).
    pub spec_draft_tokens: u64,
    /// Of those, accepted: each verify step emitted its accepted drafts plus one.
    pub spec_accepted_tokens: u64,
    /// The `ngram` model's per-draft acceptance α for this prompt; null with `uniform` or
    /// without speculative decoding.
    pub spec_accept_prob: Option<f64>,
}

impl RequestTruth {
    /// The configured prefill rate this request got: uncached prompt tokens / prefill cost.
    pub fn prefill_tps(&self) -> f64 {
        (self.prompt_tokens - self.cached_tokens) as f64 / self.prefill_s
    }

    /// SGLang's accept length, `completion_tokens / spec_verify_ct`: every output token
    /// (the prefill's first one included) over the verify steps; what
    /// `meta_info.spec_accept_length` says. `None` without a verify step.
    pub fn accept_length(&self) -> Option<f64> {
        (self.spec_verify_steps > 0)
            .then(|| self.output_tokens as f64 / self.spec_verify_steps as f64)
    }

    /// Tokens per verify step, vLLM's mean acceptance length `1 + accepted / drafts`:
    /// the quantity the acceptance model's (1 − α^K)/(1 − α) predicts. `None` without a
    /// verify step.
    pub fn tokens_per_verify_step(&self) -> Option<f64> {
        (self.spec_verify_steps > 0)
            .then(|| 1.0 + self.spec_accepted_tokens as f64 / self.spec_verify_steps as f64)
    }

    /// The configured decode rate, as ctxbench defines it: tokens after the first event over
    /// the decode steps' cost.
    pub fn decode_tps(&self) -> f64 {
        let decode_s: f64 = self.decode_steps.iter().map(|d| d.cost_s).sum();
        (self.output_tokens - self.first_event_tokens) as f64 / decode_s
    }
}

/// Finished requests in the order they finished.
#[derive(Debug, Default)]
pub struct TruthLog {
    entries: Mutex<Vec<RequestTruth>>,
}

impl TruthLog {
    pub fn push(&self, truth: RequestTruth) {
        self.lock().push(truth);
    }

    pub fn snapshot(&self) -> Vec<RequestTruth> {
        self.lock().clone()
    }

    pub fn clear(&self) {
        self.lock().clear();
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<RequestTruth>> {
        self.entries
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}
