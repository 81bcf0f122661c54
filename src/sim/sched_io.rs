//! What the scheduler takes and gives: its configuration, the requests handed to it, the
//! steps it plans, the tokens each step emits, and its records and series. Apart from the
//! state machine (`scheduler.rs`) so a reader of either finds one job.

use super::stepcost::StepCost;
use serde::Serialize;

/// What a step's token budget (`max_batch_tokens`) counts.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, serde::Deserialize, clap::ValueEnum,
)]
#[serde(rename_all = "snake_case")]
pub enum TokenBudget {
    /// Prefill tokens only, decodes ride free (SGLang's chunked_prefill_size).
    #[default]
    Prefill,
    /// Every token the step feeds, the running decodes' first (llama.cpp's n_batch, vLLM's
    /// max_num_batched_tokens): a prompt beside B decodes gets B fewer tokens that step.
    All,
}

#[derive(Debug, Clone, PartialEq)]
pub struct EngineConfig {
    pub cost: StepCost,
    /// Tokens per step (chunked prefill budget), at least 1; `budget` says which count.
    pub max_batch_tokens: u64,
    pub budget: TokenBudget,
    /// Running requests at most, at least 1.
    pub max_running: usize,
    /// Tokens per decode step: at most `spec`, how many by the request's acceptance
    /// (see `spec.rs`); 1..=spec uniformly for requests submitted without one.
    pub spec: u32,
    /// Share of each request's remaining `max_tokens` reserved in the pool at admission
    /// (SGLang's new-token ratio): 1 never preempts, 0 admits on the prompt alone.
    pub new_token_ratio: f64,
    pub page_tokens: u64,
    pub pool_tokens: u64,
    pub cache: bool,
}

/// A request handed to the engine.
#[derive(Debug, Clone)]
pub struct NewRequest {
    pub id: u64,
    pub prompt: Vec<u32>,
    /// What the pool reserves for.
    pub max_tokens: u64,
    /// When it stops (early EOS or `max_tokens`), at most `max_tokens`.
    pub target_tokens: u64,
    /// Engine clock, s.
    pub arrival_s: f64,
    /// Seeds the speculative token draws.
    pub seed: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub enum OutputKind {
    /// The step finishing the prompt's prefill: the first token.
    First,
    /// A decode step.
    Decode,
    /// The step finishing the recompute after a preemption.
    Recomputed,
}

/// Tokens one request produced in one step.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Emission {
    pub id: u64,
    pub kind: OutputKind,
    pub tokens: u64,
    /// Prompt plus tokens produced before this step.
    pub context_tokens: u64,
    /// The whole step's duration (what the request waited for these tokens).
    pub step_s: f64,
    /// Step end, engine clock.
    pub at_s: f64,
    pub finished: bool,
    pub cached_tokens: u64,
    /// Leading prompt pages the cache served at admission.
    pub cached_pages: u64,
    /// Cached pages the pool had evicted before this request was admitted.
    pub evicted_before: u64,
    pub admitted_s: f64,
    /// Durations of the steps that carried the first prefill's chunks.
    pub prefill_s: f64,
    pub preemptions: u32,
    /// Draft tokens the step verified (decode steps only).
    pub drafted: u64,
    /// Of those, accepted (`tokens − 1` on a decode step).
    pub accepted: u64,
    /// Index in `running` while the step is in flight.
    #[serde(skip)]
    pub(super) slot: usize,
}

/// One planned step.
#[derive(Debug, Clone)]
pub struct Step {
    pub start_s: f64,
    pub end_s: f64,
    pub prefill_tokens: u64,
    pub decoding: u64,
    pub running: usize,
    pub emissions: Vec<Emission>,
}

impl Step {
    pub fn duration_s(&self) -> f64 {
        self.end_s - self.start_s
    }
}

/// The engine's state at one instant.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize)]
pub struct SeriesPoint {
    pub t_s: f64,
    pub running: usize,
    pub waiting: usize,
    /// Pages referenced by requests, in tokens.
    pub pool_used_tokens: u64,
    /// Unreferenced cached pages, in tokens.
    pub pool_cached_tokens: u64,
}

/// What the engine did for one finished (or aborted) request; engine clock, s.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct EngineRecord {
    pub id: u64,
    pub arrival_s: f64,
    pub admitted_s: Option<f64>,
    pub first_token_s: Option<f64>,
    pub finished_s: Option<f64>,
    pub prompt_tokens: u64,
    pub cached_tokens: u64,
    pub output_tokens: u64,
    pub preemptions: u32,
}
