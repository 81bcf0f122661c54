//! SGLang's native routes: `/generate` (cumulative-text streaming with `meta_info`),
//! `/flush_cache` (refused while busy) and `/tokenize`.

use super::admission::{GenRequest, admit};
use super::engine::{Finish, Progress};
use super::error::{ApiError, Dialect, parse_body};
use super::fault::{Fault, Site};
use super::request::{any_prompt, id_prompt, text_prompt};
use super::sse::{EventStream, StreamFormat, stream_job};
use super::state::SimState;
use super::tokenizer::{BOS, EOS, tokenize};
use super::whole::run_whole;
use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use serde::Deserialize;
use serde_json::{Value, json};
use std::sync::Arc;
use tokio::time::Instant;

const DIALECT: Dialect = Dialect::Native;
const DEFAULT_MAX_NEW_TOKENS: u64 = 128;

#[derive(Debug, Deserialize)]
struct GenerateBody {
    text: Option<Value>,
    input_ids: Option<Value>,
    input_embeds: Option<Value>,
    sampling_params: Option<SamplingParams>,
    #[serde(default)]
    stream: bool,
    rid: Option<Value>,
}

#[derive(Debug, Default, Deserialize)]
struct SamplingParams {
    max_new_tokens: Option<u64>,
    min_new_tokens: Option<u64>,
    ignore_eos: Option<bool>,
}

pub async fn generate(State(state): State<Arc<SimState>>, body: Bytes) -> Response {
    let arrived = Instant::now();
    match start_generate(&state, &body, arrived).await {
        Ok(response) | Err(response) => response,
    }
}

async fn start_generate(
    state: &Arc<SimState>,
    body: &[u8],
    arrived: Instant,
) -> Result<Response, Response> {
    let bad = |m: String| ApiError::bad_request(DIALECT, m).into_response();
    let req: GenerateBody = parse_body(body, DIALECT).map_err(IntoResponse::into_response)?;
    if req.input_embeds.is_some() {
        return Err(bad("input_embeds is not supported by the simulator".into()));
    }
    let prompt = match (&req.text, &req.input_ids) {
        (Some(Value::String(text)), None) => text_prompt(text),
        (Some(text @ Value::Array(_)), None) => any_prompt(text, "text").map_err(bad)?,
        (None, Some(Value::Array(ids))) if ids.iter().all(|v| !v.is_array()) => {
            id_prompt(ids).map_err(bad)?
        }
        (None, Some(Value::Array(_))) => {
            return Err(bad(
                "batched input_ids are not supported by the simulator".into()
            ));
        }
        (Some(_), Some(_)) | (None, None) => {
            return Err(bad("send exactly one of `text` or `input_ids`".into()));
        }
        (Some(other), None) | (None, Some(other)) => {
            return Err(bad(format!(
                "`text` must be a string and `input_ids` a list, got {other}"
            )));
        }
    };
    let params = req.sampling_params.unwrap_or_default();
    let max_tokens = params.max_new_tokens.unwrap_or(DEFAULT_MAX_NEW_TOKENS);
    let min_tokens = params.min_new_tokens.unwrap_or(0);
    let admitted = admit(
        state,
        GenRequest {
            route: "/generate",
            dialect: DIALECT,
            prompt,
            max_tokens,
            min_tokens,
            ignore_eos: params.ignore_eos.unwrap_or(false) || min_tokens >= max_tokens,
            stream: req.stream,
            arrived,
        },
    )
    .map_err(IntoResponse::into_response)?;
    let id = match req.rid {
        Some(Value::String(rid)) => rid,
        Some(other) if !other.is_null() => other.to_string(),
        _ => admitted.request_id.clone(),
    };
    let mut format = NativeFormat {
        id,
        arrived,
        spec: state.config.cost.spec > 1,
    };
    if req.stream {
        let (out, response) = EventStream::open();
        tokio::spawn(stream_job(
            Arc::clone(state),
            admitted.slot,
            admitted.job,
            out,
            format,
        ));
        return Ok(response);
    }
    let outcome = run_whole(state, admitted.slot, admitted.job).await?;
    let progress = Progress {
        prompt_tokens: outcome.prompt_tokens,
        cached_tokens: outcome.cached_tokens,
        max_tokens,
        text: &outcome.text,
        delta: &outcome.text,
        completion_tokens: outcome.completion_tokens,
        decode_steps: outcome.decode_steps,
        spec_verify_steps: outcome.spec_verify_steps,
        spec_draft_tokens: outcome.spec_draft_tokens,
        spec_accepted_tokens: outcome.spec_accepted_tokens,
        finish: outcome.finish,
    };
    Ok(Json(format.event(&progress)).into_response())
}

/// `{"text": cumulative, "meta_info": {…}}`, SGLang's default (non-incremental) streaming.
struct NativeFormat {
    id: String,
    arrived: Instant,
    spec: bool,
}

impl StreamFormat for NativeFormat {
    fn event(&mut self, p: &Progress<'_>) -> Value {
        let finish_reason = match p.finish {
            None => Value::Null,
            Some(Finish::Length) => json!({"type": "length", "length": p.max_tokens}),
            Some(Finish::Stop) => json!({"type": "stop", "matched": EOS}),
        };
        let mut meta = json!({
            "id": self.id,
            "finish_reason": finish_reason,
            "prompt_tokens": p.prompt_tokens,
            "completion_tokens": p.completion_tokens,
            "cached_tokens": p.cached_tokens,
        });
        if p.finish.is_some() {
            meta["e2e_latency"] = json!(self.arrived.elapsed().as_secs_f64());
            // SGLang's per-request counters: verify steps, accept length = completion
            // tokens (the prefill's first included) / verify steps, drafts proposed and
            // accepted, and their ratio.
            if self.spec {
                let verify_ct = p.spec_verify_steps.max(1);
                let drafts = p.spec_draft_tokens;
                meta["spec_verify_ct"] = json!(p.spec_verify_steps);
                meta["spec_accept_length"] = json!(p.completion_tokens as f64 / verify_ct as f64);
                meta["spec_draft_token_num"] = json!(drafts);
                meta["spec_accept_token_num"] = json!(p.spec_accepted_tokens);
                meta["spec_accept_rate"] = json!(if drafts == 0 {
                    0.0
                } else {
                    p.spec_accepted_tokens as f64 / drafts as f64
                });
            }
        }
        json!({ "text": p.text, "meta_info": meta })
    }

    fn trailer(&mut self) -> Vec<Value> {
        Vec::new()
    }
}

/// GET or POST: 200 `Cache flushed.` when idle, else 400 (like SGLang).
pub async fn flush_cache(State(state): State<Arc<SimState>>) -> Response {
    let busy = state.in_flight();
    let simulated_busy = state.faults.draw(Site::Flush) == Some(Fault::FlushBusy);
    if busy > 0 || simulated_busy {
        let running = busy.max(1);
        let message = format!(
            "Cache not flushed: {running} request(s) are running or waiting. \
             The cache can only be flushed when the server is idle; retry shortly.\n"
        );
        return (StatusCode::BAD_REQUEST, message).into_response();
    }
    state.engine.with(|sched, _| sched.flush_cache());
    (
        StatusCode::OK,
        "Cache flushed.\nPlease check backend logs for more details. \
         (When there are running or waiting requests, the operation will not be performed.)\n",
    )
        .into_response()
}

#[derive(Debug, Deserialize)]
struct TokenizeBody {
    prompt: String,
    add_special_tokens: Option<bool>,
}

pub async fn tokenize_route(State(state): State<Arc<SimState>>, body: Bytes) -> Response {
    let req: TokenizeBody = match parse_body(&body, DIALECT) {
        Ok(req) => req,
        Err(e) => return e.into_response(),
    };
    // `--tokenize-strict`: like a llama-server whose vocabulary lacks a piece, a word that
    // needs byte fallback fails the whole call.
    if state.config.cost.tokenize_strict
        && req
            .prompt
            .split_whitespace()
            .any(|w| super::tokenizer::word_id(w).is_none())
    {
        return ApiError::new(
            DIALECT,
            axum::http::StatusCode::INTERNAL_SERVER_ERROR,
            "unordered_map::at",
        )
        .into_response();
    }
    let mut tokens = Vec::new();
    if req.add_special_tokens.unwrap_or(true) {
        tokens.push(BOS);
    }
    tokens.extend(tokenize(&req.prompt));
    Json(json!({
        "tokens": tokens,
        "count": tokens.len(),
        "max_model_len": state.config.cost.context_length,
    }))
    .into_response()
}
