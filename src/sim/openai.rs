//! OpenAI-compatible routes (`/v1/completions`, `/v1/chat/completions`): delta streaming,
//! `stream_options` usage chunks and `prompt_tokens_details.cached_tokens`.

use super::Persona;
use super::admission::{GenRequest, admit};
use super::engine::Progress;
use super::error::{ApiError, Dialect, parse_body};
use super::request::{ChatMessage, any_prompt, chat_prompt};
use super::sse::{EventStream, StreamFormat, stream_job};
use super::state::SimState;
use super::whole::{Outcome, run_whole};
use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use serde::Deserialize;
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

const DIALECT: Dialect = Dialect::OpenAi;
/// vLLM's default for `/v1/completions`.
const DEFAULT_COMPLETION_TOKENS: u64 = 16;

#[derive(Debug, Default, Deserialize)]
struct StreamOptions {
    include_usage: Option<bool>,
    continuous_usage_stats: Option<bool>,
}

#[derive(Debug, Deserialize)]
struct CompletionBody {
    model: Option<String>,
    prompt: Option<Value>,
    max_tokens: Option<u64>,
    #[serde(flatten)]
    generation: GenOptions,
}

#[derive(Debug, Deserialize)]
struct ChatBody {
    model: Option<String>,
    messages: Vec<ChatMessage>,
    max_tokens: Option<u64>,
    max_completion_tokens: Option<u64>,
    #[serde(flatten)]
    generation: GenOptions,
}

/// The generation options both routes take.
#[derive(Debug, Deserialize)]
struct GenOptions {
    #[serde(default)]
    stream: bool,
    stream_options: Option<StreamOptions>,
    ignore_eos: Option<bool>,
    min_tokens: Option<u64>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Text,
    Chat,
}

/// What every chunk of one response shares.
struct Shape {
    kind: Kind,
    id: String,
    created: u64,
    model: String,
    include_usage: bool,
    continuous_usage: bool,
    report_cache: bool,
    last_usage: Value,
    /// vLLM's `--per-request-spec-decode-metrics summary`: the last chunk carries
    /// `metrics.speculative_decoding`.
    spec_metrics: bool,
}

pub async fn completions(State(state): State<Arc<SimState>>, body: Bytes) -> Response {
    handle::<CompletionBody>(state, body).await
}

pub async fn chat_completions(State(state): State<Arc<SimState>>, body: Bytes) -> Response {
    handle::<ChatBody>(state, body).await
}

/// What each route's body gives the one handler.
trait RouteBody: serde::de::DeserializeOwned {
    const KIND: Kind;
    const ROUTE: &'static str;
    /// The prompt's tokens, or the message of a 400.
    fn prompt(&self) -> Result<Vec<u32>, String>;
    fn max_tokens(&self, prompt_tokens: u64, state: &SimState) -> u64;
    fn into_parts(self) -> (Option<String>, GenOptions);
}

impl RouteBody for CompletionBody {
    const KIND: Kind = Kind::Text;
    const ROUTE: &'static str = "/v1/completions";

    fn prompt(&self) -> Result<Vec<u32>, String> {
        let prompt = self.prompt.as_ref().ok_or("`prompt` is required")?;
        any_prompt(prompt, "prompt")
    }

    fn max_tokens(&self, _: u64, _: &SimState) -> u64 {
        self.max_tokens.unwrap_or(DEFAULT_COMPLETION_TOKENS)
    }

    fn into_parts(self) -> (Option<String>, GenOptions) {
        (self.model, self.generation)
    }
}

impl RouteBody for ChatBody {
    const KIND: Kind = Kind::Chat;
    const ROUTE: &'static str = "/v1/chat/completions";

    fn prompt(&self) -> Result<Vec<u32>, String> {
        chat_prompt(&self.messages)
    }

    /// Like vLLM: without a limit the answer may fill the rest of the context.
    fn max_tokens(&self, prompt_tokens: u64, state: &SimState) -> u64 {
        let room = state
            .config
            .cost
            .context_length
            .saturating_sub(prompt_tokens)
            .max(1);
        self.max_completion_tokens
            .or(self.max_tokens)
            .unwrap_or(room)
    }

    fn into_parts(self) -> (Option<String>, GenOptions) {
        (self.model, self.generation)
    }
}

async fn handle<B: RouteBody>(state: Arc<SimState>, body: Bytes) -> Response {
    let arrived = tokio::time::Instant::now();
    let req: B = match parse_body(&body, DIALECT) {
        Ok(req) => req,
        Err(e) => return e.into_response(),
    };
    let prompt = match req.prompt() {
        Ok(prompt) if B::KIND == Kind::Chat => {
            super::chat_template::apply(prompt, state.config.cost.chat_template_words)
        }
        Ok(prompt) => prompt,
        Err(message) => return ApiError::bad_request(DIALECT, message).into_response(),
    };
    let max_tokens = req.max_tokens(prompt.len() as u64, &state);
    let (model, generation) = req.into_parts();
    let call = Call {
        kind: B::KIND,
        route: B::ROUTE,
        model,
        prompt,
        max_tokens,
        generation,
        arrived,
    };
    serve(&state, call).await
}

struct Call {
    /// When the request body had arrived: the simulated clock starts here.
    arrived: tokio::time::Instant,
    kind: Kind,
    route: &'static str,
    model: Option<String>,
    prompt: Vec<u32>,
    max_tokens: u64,
    generation: GenOptions,
}

async fn serve(state: &Arc<SimState>, call: Call) -> Response {
    let served = &state.config.model_name;
    if state.config.cost.persona == Persona::Openai
        && call.model.as_ref().is_some_and(|m| m != served)
    {
        let message = format!(
            "The model `{}` does not exist; this server serves `{served}`.",
            call.model.unwrap_or_default()
        );
        return ApiError::new(DIALECT, StatusCode::NOT_FOUND, message).into_response();
    }
    let min_tokens = call.generation.min_tokens.unwrap_or(0);
    let admitted = match admit(
        state,
        GenRequest {
            route: call.route,
            dialect: DIALECT,
            prompt: call.prompt,
            max_tokens: call.max_tokens,
            min_tokens,
            ignore_eos: call.generation.ignore_eos.unwrap_or(false)
                || min_tokens >= call.max_tokens,
            stream: call.generation.stream,
            arrived: call.arrived,
        },
    ) {
        Ok(admitted) => admitted,
        Err(e) => return e.into_response(),
    };
    let prefix = match call.kind {
        Kind::Text => "cmpl",
        Kind::Chat => "chatcmpl",
    };
    let options = call.generation.stream_options.unwrap_or_default();
    let shape = Shape {
        kind: call.kind,
        id: format!("{prefix}-{}", admitted.request_id),
        created: unix_now_s(),
        model: served.clone(),
        include_usage: options.include_usage.unwrap_or(false),
        continuous_usage: options.continuous_usage_stats.unwrap_or(false)
            && !state.config.cost.no_continuous_usage,
        report_cache: !state.config.cost.no_cache_report,
        last_usage: Value::Null,
        spec_metrics: state.config.cost.per_request_spec_metrics && state.config.cost.spec > 1,
    };
    if call.generation.stream {
        let (out, response) = EventStream::open();
        if shape.kind == Kind::Chat {
            // Sent as soon as the request arrives, before prefill: not a token.
            out.data(&shape.chunk(
                json!({"role": "assistant", "content": ""}),
                None,
                Value::Null,
            ));
        }
        tokio::spawn(stream_job(
            Arc::clone(state),
            admitted.slot,
            admitted.job,
            out,
            shape,
        ));
        return response;
    }
    match run_whole(state, admitted.slot, admitted.job).await {
        Ok(outcome) => Json(shape.whole(&outcome)).into_response(),
        Err(response) => response,
    }
}

impl Shape {
    fn usage(&self, prompt_tokens: u64, completion_tokens: u64, cached_tokens: u64) -> Value {
        let mut usage = json!({
            "prompt_tokens": prompt_tokens,
            "completion_tokens": completion_tokens,
            "total_tokens": prompt_tokens + completion_tokens,
        });
        if self.report_cache && cached_tokens > 0 {
            usage["prompt_tokens_details"] = json!({ "cached_tokens": cached_tokens });
        }
        usage
    }

    /// The fields every completion object carries around its one choice.
    fn envelope(&self, object: &str, choice: Value, usage: Value) -> Value {
        json!({
            "id": self.id,
            "object": object,
            "created": self.created,
            "model": self.model,
            "choices": [choice],
            "usage": usage,
        })
    }

    fn chunk(&self, content: Value, finish: Option<&str>, usage: Value) -> Value {
        let (object, choice) = match self.kind {
            Kind::Text => (
                "text_completion",
                json!({"index": 0, "text": content, "logprobs": null, "finish_reason": finish}),
            ),
            Kind::Chat => (
                "chat.completion.chunk",
                json!({"index": 0, "delta": content, "logprobs": null, "finish_reason": finish}),
            ),
        };
        self.envelope(object, choice, usage)
    }

    fn whole(&self, outcome: &Outcome) -> Value {
        let finish = outcome.finish.map(|f| f.name());
        let usage = self.usage(
            outcome.prompt_tokens,
            outcome.completion_tokens,
            outcome.cached_tokens,
        );
        let (object, choice) = match self.kind {
            Kind::Text => (
                "text_completion",
                json!({"index": 0, "text": outcome.text, "logprobs": null, "finish_reason": finish}),
            ),
            Kind::Chat => (
                "chat.completion",
                json!({
                    "index": 0,
                    "message": {"role": "assistant", "content": outcome.text},
                    "logprobs": null,
                    "finish_reason": finish,
                }),
            ),
        };
        self.envelope(object, choice, usage)
    }
}

impl StreamFormat for Shape {
    fn event(&mut self, p: &Progress<'_>) -> Value {
        self.last_usage = self.usage(p.prompt_tokens, p.completion_tokens, p.cached_tokens);
        let usage = if self.continuous_usage {
            self.last_usage.clone()
        } else {
            Value::Null
        };
        let content = match self.kind {
            Kind::Text => json!(p.delta),
            Kind::Chat => json!({ "content": p.delta }),
        };
        let mut chunk = self.chunk(content, p.finish.map(|f| f.name()), usage);
        if self.spec_metrics && p.finish.is_some() {
            chunk["metrics"] = json!({"speculative_decoding": per_request_summary(p)});
        }
        chunk
    }

    fn trailer(&mut self) -> Vec<Value> {
        if !self.include_usage {
            return Vec::new();
        }
        let mut last = self.chunk(Value::Null, None, self.last_usage.clone());
        last["choices"] = json!([]);
        vec![last]
    }
}

fn unix_now_s() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0)
}

/// One request's `metrics.speculative_decoding`, as vLLM's
/// `--per-request-spec-decode-metrics summary` sends it: its verify steps, drafted and
/// accepted tokens, and vLLM's mean acceptance length 1 + accepted / steps.
fn per_request_summary(p: &Progress<'_>) -> serde_json::Value {
    let steps = p.spec_verify_steps;
    let ratio = |a: u64, b: u64| if b == 0 { 0.0 } else { a as f64 / b as f64 };
    serde_json::json!({
        "num_spec_steps": steps,
        "num_draft_tokens": p.spec_draft_tokens,
        "num_accepted_draft_tokens": p.spec_accepted_tokens,
        "mean_acceptance_length": 1.0 + ratio(p.spec_accepted_tokens, steps),
        "draft_acceptance_rate": ratio(p.spec_accepted_tokens, p.spec_draft_tokens),
    })
}
