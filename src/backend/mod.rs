//! One module per server API behind one trait; the sweep never sees wire formats.

pub mod conn;
pub mod detect;
pub mod fake;
pub mod flush;
pub mod http;
pub mod instance;
pub mod llamacpp;
pub mod metrics_delta;
pub mod ndjson;
pub mod ollama;
pub mod openai;
pub mod prometheus;
pub mod server_info;
pub mod sglang;
pub mod shared;
pub mod spec;
pub mod sse;
pub mod tgi;
pub mod tokenize;
pub(crate) mod typed;
pub mod vllm_info;
pub mod vllm_timings;
pub mod vocab;

use async_trait::async_trait;
use serde_json::Value;
use std::time::Duration;

/// A prompt as the API takes it.
#[derive(Debug, Clone, PartialEq)]
pub enum Prompt {
    Ids(Vec<u32>),
    Text(String),
    /// A load request: this request's nonce head before a tail shared by its length.
    Shared(shared::SharedPrompt),
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
    /// Sample flags the backend saw on the wire (`record::flag`, e.g. `model_reload`).
    pub flags: Vec<crate::record::Flag>,
    /// Whether the request opened a new connection (else reused a pooled one).
    pub new_connection: Option<bool>,
    /// Connect time of that new connection, seconds.
    pub connect_s: Option<f64>,
    /// Speculative-decoding counts for this request, where the server (or its metrics)
    /// gave some.
    pub spec: Option<spec::SpecCounts>,
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
    /// The server answered a streamed request with one whole body.
    #[error(
        "the server ignored `stream: true` and answered one {0} body: it cannot be measured \
         event by event (TTFT needs a stream); check the server's streaming support or a proxy \
         that buffers responses"
    )]
    NotStreamed(String),
    /// The prompt could not be built (tokenizer call failed, …): nothing was sent.
    #[error("building the prompt: {0}")]
    Prompt(String),
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
            RequestError::NotStreamed(_) => "not_streamed",
            RequestError::Prompt(_) => "prompt",
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
    /// What the server says of its vocabulary (size, special pieces), for prompts of ids
    /// alone when its tokenizer can encode no text.
    async fn vocabulary(&self) -> vocab::VocabInfo {
        vocab::VocabInfo::default()
    }
    /// Ids back to text with the server's own detokenizer; `Ok(None)` where it has none.
    async fn detokenize(&self, _ids: &[u32]) -> Result<Option<String>, RequestError> {
        Ok(None)
    }
    /// Whether `tokenize` counts exactly the tokens a text prompt becomes (special tokens
    /// included, no template added), so text prompts can be cut to an exact length.
    fn exact_text_lengths(&self) -> bool {
        false
    }
    /// What tells this run of the server from the next, where it exposes something.
    async fn instance_marker(&self) -> Option<instance::InstanceMarker> {
        None
    }
}

/// Folds one API's stream items into a `Completion`.
pub(crate) trait StreamFold {
    /// Take one item seen `at` after sending; `true` once the response is complete.
    fn on_item(&mut self, at: Duration, item: sse::ItemRef<'_>) -> Result<bool, RequestError>;
    /// The completion, or why the stream did not make one.
    fn finish(self, complete: bool, elapsed: Duration) -> Result<Completion, RequestError>;
}

/// A fold's completion once its stream has ended: `Incomplete` unless it ended `complete`.
pub(crate) fn completed(
    mut out: Completion,
    complete: bool,
    elapsed: Duration,
) -> Result<Completion, RequestError> {
    if !complete {
        return Err(RequestError::Incomplete);
    }
    out.e2e = elapsed;
    Ok(out)
}

/// Stream APIs whose folds [`fold_chunks`] drives.
#[doc(hidden)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FoldApi {
    Sglang,
    Openai,
    Llamacpp,
}

/// Folds a stream already received as `chunks` through the parser and fold a streamed
/// request of `api` uses, chunk `i` seen `i` µs after sending: the client's whole per-event
/// work without the network, for benches.
#[doc(hidden)]
pub fn fold_chunks<'c>(
    api: FoldApi,
    chunks: impl IntoIterator<Item = &'c [u8]>,
) -> Result<Completion, RequestError> {
    match api {
        FoldApi::Sglang => fold_all(sglang::Cumulative::default(), chunks),
        FoldApi::Openai => fold_all(openai::Deltas::default(), chunks),
        FoldApi::Llamacpp => fold_all(llamacpp::Events::default(), chunks),
    }
}

fn fold_all<'c, F: StreamFold>(
    mut fold: F,
    chunks: impl IntoIterator<Item = &'c [u8]>,
) -> Result<Completion, RequestError> {
    let mut parser = sse::SseParser::new();
    let mut items = sse::SseBatch::default();
    let mut at = Duration::ZERO;
    for chunk in chunks {
        if feed(&mut parser, &mut items, chunk, |item| {
            fold.on_item(at, item)
        })? {
            return fold.finish(true, at);
        }
        at += Duration::from_micros(1);
    }
    fold.finish(false, at)
}

/// Parse one chunk of a stream into `items` (emptied first) and hand them to `on_item` in
/// order; `true` as soon as it returns `true` (the chunk's later items left unseen). A
/// malformed stream fails before any of the chunk's items is handed on.
pub(crate) fn feed(
    parser: &mut sse::SseParser,
    items: &mut sse::SseBatch,
    chunk: &[u8],
    mut on_item: impl FnMut(sse::ItemRef<'_>) -> Result<bool, RequestError>,
) -> Result<bool, RequestError> {
    items.clear();
    parser.push_batch(chunk, items)?;
    for item in items.iter() {
        if on_item(item)? {
            return Ok(true);
        }
    }
    Ok(false)
}

/// POST a generation request and fold its stream.
pub(crate) async fn stream_completion<F: StreamFold>(
    http: &http::Http,
    path: &str,
    body: &Value,
    prompt: &Prompt,
    deadline: Duration,
    mut fold: F,
) -> Result<Completion, RequestError> {
    let parts = match prompt.shared() {
        Some(p) => p.splice(body)?,
        None => vec![bytes::Bytes::from(serde_json::to_vec(body).map_err(
            |e| RequestError::Http {
                status: 0,
                message: format!("serialising the request: {e}"),
            },
        )?)],
    };
    let end = http
        .post_sse_parts(path, parts, deadline, |at, item| fold.on_item(at, item))
        .await?;
    let mut c = fold.finish(end.complete, end.elapsed)?;
    c.new_connection = Some(end.conn.new);
    c.connect_s = end.conn.connect.map(|d| d.as_secs_f64());
    Ok(c)
}

/// What one SSE item of a generation stream holds, once the common cases are handled.
pub(crate) enum EventJson {
    /// A keep-alive comment: nothing to fold.
    Skip,
    /// `data: [DONE]`.
    Done,
    Data(Value),
}

/// Parse an item as JSON, turning malformed data and in-stream error events into errors.
pub(crate) fn event_json(item: sse::ItemRef<'_>) -> Result<EventJson, RequestError> {
    let sse::ItemRef::Event(ev) = item else {
        return Ok(EventJson::Skip);
    };
    if ev.data.trim() == "[DONE]" {
        return Ok(EventJson::Done);
    }
    value_event(ev).map(EventJson::Data)
}

/// An event's data (not `[DONE]`) as JSON, turning malformed data and in-stream error
/// events into errors.
pub(crate) fn value_event(ev: sse::EventRef<'_>) -> Result<Value, RequestError> {
    let v: Value = serde_json::from_str(ev.data).map_err(|e| RequestError::Malformed {
        offset: ev.offset,
        message: format!("not JSON: {e}"),
    })?;
    // `"error": null` is a field some servers always send: only a value is an error.
    if let Some(err) = v.get("error").filter(|e| !e.is_null()) {
        return Err(RequestError::ServerEvent(event_error_message(err)));
    }
    Ok(v)
}

/// A stream event as tests build it.
#[cfg(test)]
pub(crate) fn test_event(data: &str) -> sse::ItemRef<'_> {
    sse::ItemRef::Event(sse::EventRef {
        data,
        event: None,
        offset: 0,
    })
}

/// Folds `events` through `fold`'s `on_item` (typed where it can), or, with `typed: false`,
/// every data event through `on_value`: the `Value` path the folds had before typed parses.
#[cfg(test)]
pub(crate) fn fold_events<F: StreamFold>(
    mut fold: F,
    events: &[&str],
    typed: bool,
    on_value: impl Fn(&mut F, Duration, &Value) -> bool,
) -> Result<Completion, RequestError> {
    let mut done = false;
    for (i, data) in events.iter().enumerate() {
        let at = Duration::from_millis(i as u64);
        done = match event_json(test_event(data))? {
            EventJson::Data(v) if !typed => on_value(&mut fold, at, &v),
            _ => fold.on_item(at, test_event(data))?,
        };
        if done {
            break;
        }
    }
    fold.finish(done, Duration::from_secs(1))
}

/// Checks a fold's typed parse against its `Value` path: each of `typed` parses as `T`, each
/// of `untyped` falls back to a `Value`, and every stream folds (`F` from its default, with
/// `on_value` as the `Value` path) to the same result both ways. Returns the typed folds.
#[cfg(test)]
pub(crate) fn check_typed_against_value<T: typed::TypedEvent<'static>, F: StreamFold + Default>(
    on_value: impl Fn(&mut F, Duration, &Value) -> bool,
    typed: &[&'static str],
    untyped: &[&'static str],
    streams: &[&[&str]],
) -> Vec<Result<Completion, RequestError>> {
    let is_typed = |e: &'static str| {
        matches!(
            typed::event_typed::<T>(test_event(e)),
            Ok(typed::Event::Typed(_))
        )
    };
    for e in typed {
        assert!(is_typed(e), "{e}");
    }
    for e in untyped {
        assert!(!is_typed(e), "{e}");
    }
    let fold = |events: &[&str], typed: bool| fold_events(F::default(), events, typed, &on_value);
    streams
        .iter()
        .map(|events| {
            let out = fold(events, true);
            assert_eq!(out, fold(events, false), "{events:?}");
            out
        })
        .collect()
}

/// The message of an in-stream error event (`{"error":{"message":…}}` or `{"error":"…"}`).
pub fn event_error_message(err: &Value) -> String {
    err.get("message")
        .and_then(Value::as_str)
        .or_else(|| err.as_str())
        .map(str::to_string)
        .unwrap_or_else(|| err.to_string())
}

/// A backend ready to measure, and what probing found.
pub struct Connected {
    pub backend: Box<dyn Backend>,
    /// The same backend on a client that opens a fresh connection per request
    /// (`--fresh-connection`, and the transport check's reference).
    pub fresh: Box<dyn Backend>,
    pub info: detect::ServerInfo,
    pub http: http::Http,
    pub model: String,
}

/// Probe the server at `url` and build the backend for `api` (or the detected one).
pub async fn connect(
    url: &str,
    api: crate::choices::ApiChoice,
    endpoint: crate::choices::Endpoint,
    model: Option<String>,
    api_key: Option<String>,
) -> anyhow::Result<Connected> {
    use crate::choices::ApiChoice as A;
    use detect::ServerKind as K;
    let parsed = reqwest::Url::parse(url).map_err(|e| {
        anyhow::anyhow!(
            "--url `{}` is not a URL ({e}): use e.g. http://127.0.0.1:30000",
            http::strip_credentials(url)
        )
    })?;
    if !matches!(parsed.scheme(), "http" | "https") {
        anyhow::bail!(
            "--url must start with http:// or https://, got `{}`",
            parsed.scheme()
        );
    }
    let http_key = api_key.clone();
    let http = http::Http::new(url, api_key)?;
    let mut info = detect::probe(&http).await.map_err(|e| {
        anyhow::anyhow!(
            "cannot probe {}: {}",
            http::strip_credentials(url),
            http.redact(&format!("{e:#}"))
        )
    })?;
    let chosen = match (api, info.kind) {
        (A::Auto, K::Sglang) | (A::Sglang, _) => A::Sglang,
        (A::Auto, K::Llamacpp) | (A::Llamacpp, _) => A::Llamacpp,
        (A::Auto, K::Vllm) | (A::Vllm, _) => A::Vllm,
        (A::Auto, K::Openai) | (A::Openai, _) => A::Openai,
        (A::Auto, K::Tgi) | (A::Tgi, _) => A::Tgi,
        (A::Auto, K::Ollama) | (A::Ollama, _) => A::Ollama,
    };
    let wants = match chosen {
        A::Sglang => Some(K::Sglang),
        A::Llamacpp => Some(K::Llamacpp),
        A::Tgi => Some(K::Tgi),
        A::Ollama => Some(K::Ollama),
        _ => None,
    };
    if let Some(k) = wants.filter(|k| *k != info.kind) {
        anyhow::bail!(
            "--api {} does not match the server, which looks like {}: use --api auto or --api {}",
            k.name(),
            info.kind.name(),
            info.kind.name()
        );
    }
    let model = model
        .or_else(|| info.model.clone())
        .unwrap_or_else(|| "default".to_string());
    if chosen == A::Ollama {
        // The limit of the model measured, which --model may have chosen.
        if let Some((n, source)) = ollama::model_limit(&http, &model).await {
            info.context_length = Some(n);
            info.context_source = Some(source);
        }
    }
    let fresh_http = http::Http::with_pool(url, http_key, false)?;
    let make = |http: &http::Http| -> Box<dyn Backend> {
        match chosen {
            A::Sglang => Box::new(sglang::Sglang {
                http: http.clone(),
                flusher: info.flusher.clone(),
            }),
            A::Llamacpp => Box::new(llamacpp::LlamaCpp {
                http: http.clone(),
                flusher: info.flusher.clone(),
            }),
            A::Tgi => Box::new(tgi::Tgi::new(http.clone(), &info)),
            A::Ollama => Box::new(ollama::Ollama::new(
                http.clone(),
                model.clone(),
                info.context_length,
                ollama::NumCtx::Cover,
            )),
            _ => Box::new(openai::OpenAi {
                http: http.clone(),
                flusher: info.flusher.clone(),
                model: model.clone(),
                endpoint,
                api: if chosen == A::Vllm { "vllm" } else { "openai" },
                tokenize_route: match info.kind {
                    K::Llamacpp => openai::TokenizeRoute::LlamacppStyle,
                    K::Sglang | K::Vllm if info.tokenize => openai::TokenizeRoute::VllmStyle,
                    K::Openai if info.tokenize => openai::TokenizeRoute::VllmStyle,
                    _ => openai::TokenizeRoute::None,
                },
            }),
        }
    };
    let backend = make(&http);
    let fresh = make(&fresh_http);
    Ok(Connected {
        backend,
        fresh,
        info,
        http,
        model,
    })
}
