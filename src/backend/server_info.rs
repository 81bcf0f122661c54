//! `ServerInfo` and `ServerKind` apart from `detect`, so `vllm_info` can fill one without a cycle.

use super::flush::Flusher;
use serde::Serialize;
use serde_json::Value;
use std::collections::BTreeMap;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ServerKind {
    Sglang,
    Vllm,
    Llamacpp,
    Tgi,
    Ollama,
    Openai,
}

impl ServerKind {
    pub fn name(self) -> &'static str {
        match self {
            ServerKind::Sglang => "sglang",
            ServerKind::Vllm => "vllm",
            ServerKind::Llamacpp => "llamacpp",
            ServerKind::Tgi => "tgi",
            ServerKind::Ollama => "ollama",
            ServerKind::Openai => "openai",
        }
    }
}

/// What probing found. `None` means the server does not say.
#[derive(Debug, Clone, Serialize)]
pub struct ServerInfo {
    pub kind: ServerKind,
    pub model: Option<String>,
    pub context_length: Option<u64>,
    /// Where `context_length` came from (endpoint and field).
    pub context_source: Option<String>,
    pub max_running_requests: Option<u64>,
    pub slots: Option<u64>,
    pub kv_pool_tokens: Option<u64>,
    pub page_size: Option<u64>,
    /// Prefill tokens per engine step (SGLang `chunked_prefill_size`), where reported.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub chunked_prefill_tokens: Option<u64>,
    pub prefix_cache: Option<bool>,
    pub reports_cached_tokens: Option<bool>,
    pub flush: &'static str,
    #[serde(skip)]
    pub flusher: Flusher,
    pub tokenize: bool,
    pub speculative: Value,
    /// The longest prompt accepted, where it is below the context limit (TGI `max_input_tokens`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub max_input_tokens: Option<u64>,
    /// Whether the output length can be forced (`ignore_eos`); `Some(false)` for APIs
    /// without it (Ollama, TGI), where a shorter answer is flagged `early_stop`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ignore_eos: Option<bool>,
    pub version: Option<String>,
    pub rtt_s: Option<f64>,
    /// Whatever the server exposes that changes on restart.
    pub instance_marker: Option<String>,
    /// Where each stated figure came from (endpoint and field), by field name
    /// (`page_size`, `kv_pool_tokens`, …); a figure without an entry was not reported.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub sources: BTreeMap<&'static str, String>,
}

impl ServerInfo {
    pub(crate) fn new(kind: ServerKind) -> Self {
        ServerInfo {
            kind,
            model: None,
            context_length: None,
            context_source: None,
            max_running_requests: None,
            slots: None,
            kv_pool_tokens: None,
            page_size: None,
            chunked_prefill_tokens: None,
            prefix_cache: None,
            reports_cached_tokens: None,
            flush: Flusher::None.name(),
            flusher: Flusher::None,
            tokenize: false,
            speculative: Value::Null,
            max_input_tokens: None,
            ignore_eos: None,
            version: None,
            rtt_s: None,
            instance_marker: None,
            sources: BTreeMap::new(),
        }
    }

    /// Record where field `field` came from.
    pub(crate) fn source(&mut self, field: &'static str, from: impl Into<String>) {
        self.sources.insert(field, from.into());
    }
}
