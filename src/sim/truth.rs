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
}

impl RequestTruth {
    /// The configured prefill rate this request got: uncached prompt tokens / prefill cost.
    pub fn prefill_tps(&self) -> f64 {
        (self.prompt_tokens - self.cached_tokens) as f64 / self.prefill_s
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
