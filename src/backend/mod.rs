//! One module per server API behind one trait; the sweep never sees wire formats.

pub mod ndjson;
pub mod sse;

use async_trait::async_trait;
use serde_json::Value;
use std::time::Duration;

/// A prompt as the API takes it.
#[derive(Debug, Clone, PartialEq)]
pub enum Prompt {
    Ids(Vec<u32>),
    Text(String),
}

/// One generation request, API-neutral.
#[derive(Debug, Clone)]
pub struct GenRequest {
    pub prompt: Prompt,
    pub max_tokens: u64,
    /// Force the output length (`ignore_eos`, and `min_tokens` where known).
    pub ignore_eos: bool,
    /// llama.cpp's `cache_prompt`; false for cold measurements.
    pub cache_prompt: bool,
    /// Whole-request deadline: a stall with keep-alives is caught by this, not by an idle timeout.
    pub deadline: Duration,
}

/// A content-bearing stream event as the client saw it.
#[derive(Debug, Clone, PartialEq)]
pub struct StreamEvent {
    /// Since the request was sent.
    pub at: Duration,
    /// Tokens this event carries, from the server's counts.
    pub tokens: u64,
}

/// What one streamed request produced.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Completion {
    pub events: Vec<StreamEvent>,
    /// Since the request was sent, to the end of the stream.
    pub e2e: Duration,
    pub prompt_tokens: Option<u64>,
    pub cached_tokens: Option<u64>,
    pub completion_tokens: Option<u64>,
    pub finish_reason: Option<String>,
    /// The server's own timings, verbatim.
    pub server_timings: Option<Value>,
    /// The generated text.
    pub text: String,
    /// False when per-event token counts had to be estimated (no server counts).
    pub counts_from_server: bool,
}

#[derive(Debug, Clone, thiserror::Error, PartialEq)]
pub enum RequestError {
    #[error("cannot connect: {0}")]
    Connect(String),
    #[error("HTTP {status}: {message}")]
    Http { status: u16, message: String },
    #[error("the prompt exceeds the server's context: {0}")]
    ContextExceeded(String),
    #[error("no complete response within the {0:.1} s deadline")]
    Timeout(f64),
    #[error("connection lost mid-stream: {0}")]
    Reset(String),
    #[error("stream ended without its final event")]
    Incomplete,
    #[error("malformed event at byte {offset}: {message}")]
    Malformed { offset: u64, message: String },
    #[error("server error event: {0}")]
    ServerEvent(String),
}

impl RequestError {
    /// The `kind` written in error records.
    pub fn kind(&self) -> &'static str {
        match self {
            RequestError::Connect(_) => "connect",
            RequestError::Http { status, .. } if *status >= 500 => "http_5xx",
            RequestError::Http { .. } => "http_4xx",
            RequestError::ContextExceeded(_) => "context_exceeded",
            RequestError::Timeout(_) => "timeout",
            RequestError::Reset(_) => "reset",
            RequestError::Incomplete => "incomplete",
            RequestError::Malformed { .. } => "malformed",
            RequestError::ServerEvent(_) => "server_error_event",
        }
    }
}

/// What a cache flush did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flush {
    /// The server offers no flush.
    NotOffered,
    Done,
}

#[async_trait]
pub trait Backend: Send + Sync {
    /// The API name recorded in results (`sglang`, `openai`, `llamacpp`, …).
    fn api(&self) -> &'static str;
    /// Whether prompts may be sent as token ids.
    fn takes_token_ids(&self) -> bool;
    async fn generate(&self, req: &GenRequest) -> Result<Completion, RequestError>;
    /// Empty the server's prefix cache where it offers a way.
    async fn flush(&self) -> Result<Flush, RequestError>;
    /// The server's tokenizer, when it exposes one.
    async fn tokenize(&self, text: &str) -> Result<Option<Vec<u32>>, RequestError>;
}
