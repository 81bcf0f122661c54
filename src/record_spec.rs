//! Speculative-decoding records: a sample's acceptance figures and where they came from.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Where a sample's speculative-decoding figures came from.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum SpecSource {
    /// Per-request counts from the server itself (SGLang `meta_info`, llama.cpp `timings`,
    /// vLLM per-request metrics).
    Server,
    /// The server's `/metrics` counters read before and after a request that ran alone.
    MetricsDelta,
    /// Tokens per stream event: a proxy for the accept length, not a count of it.
    EventsProxy,
}

impl SpecSource {
    /// The on-disk name.
    pub fn name(self) -> &'static str {
        match self {
            SpecSource::Server => "server",
            SpecSource::MetricsDelta => "metrics_delta",
            SpecSource::EventsProxy => "events_proxy",
        }
    }

    pub fn is_proxy(self) -> bool {
        self == SpecSource::EventsProxy
    }
}

impl std::fmt::Display for SpecSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// Speculative-decoding acceptance of one request.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct SpecStats {
    /// Decode tokens per verification step: (output − 1) / verify steps, the first
    /// (prefill) token left out — one definition for every source (see `backend::spec`);
    /// for `events_proxy`, tokens per stream event after the first. Files written before
    /// this definition counted the first token in the numerator (SGLang's, llama.cpp's).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accept_length: Option<f64>,
    /// Accepted draft tokens / drafted tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accept_rate: Option<f64>,
    /// Target-model steps that produced the output (see `backend::spec`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verify_steps: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub draft_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accepted_tokens: Option<u64>,
    /// The acceptance length the server states itself, by its own definition: SGLang's
    /// `spec_accept_length` (completion tokens / verify steps = ours + 1 / steps), vLLM's
    /// `mean_acceptance_length` or, from `/metrics` deltas, 1 + accepted / drafts (equal to
    /// ours when every decode step drafts). None where the server states none (llama.cpp).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_accept_length: Option<f64>,
    pub source: SpecSource,
}

impl SpecStats {
    /// No figure yet, from `source`: a literal sets the ones it has over this.
    pub fn empty(source: SpecSource) -> Self {
        SpecStats {
            accept_length: None,
            accept_rate: None,
            verify_steps: None,
            draft_tokens: None,
            accepted_tokens: None,
            server_accept_length: None,
            source,
        }
    }
}
