//! One finished plan: the model, the resolved inputs, the arithmetic and the live check,
//! plus the notes that explain what the figures assume. Renderers read only this.

use super::inputs::Resolved;
use super::kv::KvSharding;
use super::live::LiveComparison;
use super::model::{ModelSpec, ParamSource};
use super::plan::{ContextFit, Plan};
use super::weights::WeightsBasis;
use std::path::PathBuf;

#[derive(Debug, Clone, PartialEq)]
pub enum ModelSource {
    Preset(String),
    Config(PathBuf),
}

impl ModelSource {
    pub fn kind(&self) -> &'static str {
        match self {
            ModelSource::Preset(_) => "preset",
            ModelSource::Config(_) => "config",
        }
    }
}

#[derive(Debug, Clone)]
pub struct PlanReport {
    pub source: ModelSource,
    pub model: ModelSpec,
    pub resolved: Resolved,
    pub plan: Plan,
    pub live: Option<LiveComparison>,
    pub ignore_sliding_window: bool,
}

impl PlanReport {
    /// The longest request that fits both the pool and the model's position limit.
    pub fn max_context_tokens(&self) -> Option<u64> {
        self.within_model_limit(self.plan.kv_max_context)
    }

    /// The longest context each of `--target-concurrency` requests can have, capped likewise.
    pub fn max_context_at_target_tokens(&self) -> Option<u64> {
        self.plan
            .target
            .and_then(|t| self.within_model_limit(t.max_context_each))
    }

    /// A KV-limited length capped at `max_position_embeddings` (`None`: no limit at all).
    fn within_model_limit(&self, fit: ContextFit) -> Option<u64> {
        match (fit, self.model.max_context_tokens) {
            (ContextFit::Tokens(kv), Some(limit)) => Some(kv.min(limit)),
            (ContextFit::Tokens(kv), None) => Some(kv),
            (ContextFit::Unbounded, limit) => limit,
        }
    }

    /// What the figures assume, in the order a reader needs it.
    pub fn notes(&self) -> Vec<String> {
        let inputs = &self.resolved.inputs;
        let mut notes = self.model.notes.clone();
        notes.extend(self.resolved.notes.iter().cloned());
        match self.plan.kv.sharding {
            KvSharding::Mla { .. } if inputs.tp > 1 => notes.push(format!(
                "MLA keeps the whole latent on every one of the {} TP ranks, so more TP does not \
                 add KV room; SGLang's data-parallel attention (--enable-dp-attention) would, \
                 and is not modelled here",
                inputs.tp
            )),
            KvSharding::Gqa {
                num_kv_heads,
                replicated: true,
                ..
            } => notes.push(format!(
                "TP {} exceeds the {num_kv_heads} KV heads: each head is stored on {} GPUs, so \
                 KV per token per GPU no longer shrinks with TP",
                inputs.tp,
                inputs.tp / num_kv_heads.max(1)
            )),
            _ => {}
        }
        if self.model.sliding_layers() > 0 {
            notes.push(
                "request sizes assume the server frees KV outside each sliding window (SGLang's \
                 hybrid SWA pool, vLLM's hybrid allocator); pass --ignore-sliding-window for a \
                 server that keeps it"
                    .into(),
            );
        } else if self.ignore_sliding_window {
            notes.push("--ignore-sliding-window: every layer keeps the whole context".into());
        }
        if let WeightsBasis::Parameters { .. } = self.plan.weights.basis
            && matches!(self.model.params, Ok((_, ParamSource::Computed)))
        {
            notes.push(
                "the parameter count is computed from the architecture (biases, vision towers \
                 and MTP layers left out); pass --weights-gib with the checkpoint's size to be \
                 exact"
                    .into(),
            );
        }
        if let Some(req) = &self.plan.request
            && req.max_concurrency == 0
        {
            notes.push(format!(
                "one request of {} tokens does not fit in the pool of {} tokens",
                req.context_tokens, self.plan.pool_tokens
            ));
        }
        if let Some(target) = &self.plan.target
            && !target.fits
        {
            notes.push(format!(
                "{} requests of {} tokens need a mem fraction of {:.3}, which is not below 1: \
                 they do not fit; add GPUs, use --kv-dtype fp8, or shorten the context",
                target.concurrency,
                inputs.context_tokens.unwrap_or(0),
                target.required_mem_fraction
            ));
        }
        if let Some(live) = &self.live {
            notes.extend(live.hints.iter().cloned());
        }
        notes
    }
}
