//! The `tgi` persona: text-generation-inference's `/generate_stream` (SSE, one token per
//! event, no `[DONE]`, `details` on the last event), `/generate`, `/info` and `/tokenize`.
//! Like TGI, validation failures and overload arrive as an error event in a 200 stream, and
//! there is no `ignore_eos`.

use super::admission::{GenRequest, admit};
use super::engine::{Finish, Progress};
use super::error::Dialect;
use super::frames::{FrameStream, Frames, Framing, run_collected, stream_job};
use super::needle;
use super::request::text_prompt;
use super::state::SimState;
use super::tokenizer::{BOS, EOS, MARKER, word_id};
use super::truth::RequestTruth;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use bytes::Bytes;
use serde::Deserialize;
use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use tokio::time::Instant;

const VERSION: &str = "3.3.6-ctxbench-sim";

pub struct TgiSim {
    sim: Arc<SimState>,
    /// Requests streaming now, against `max_concurrent_requests`.
    running: Arc<AtomicUsize>,
}

pub fn routes(sim: Arc<SimState>) -> Router<Arc<SimState>> {
    let t = Arc::new(TgiSim {
        sim,
        running: Arc::new(AtomicUsize::new(0)),
    });
    Router::new()
        .route("/info", get(info))
        .route("/tokenize", post(tokenize))
        .route("/generate_stream", post(generate_stream))
        .route("/generate", post(generate))
        .with_state(t)
}

impl TgiSim {
    fn max_total(&self) -> u64 {
        self.sim.config.cost.context_length
    }

    /// `--tgi-max-input-tokens`, else TGI's default of one less than the total.
    fn max_input(&self) -> u64 {
        let cost = &self.sim.config.cost;
        cost.tgi_max_input_tokens
            .unwrap_or(cost.context_length - 1)
            .min(cost.context_length - 1)
    }

    fn max_concurrent(&self) -> usize {
        self.sim.config.cost.max_running
    }
}

async fn info(State(t): State<Arc<TgiSim>>) -> Json<Value> {
    Json(json!({
        "model_id": t.sim.config.model_name,
        "model_sha": null,
        "model_pipeline_tag": "text-generation",
        "max_concurrent_requests": t.max_concurrent(),
        "max_best_of": 2,
        "max_stop_sequences": 4,
        "max_input_tokens": t.max_input(),
        "max_total_tokens": t.max_total(),
        "validation_workers": 2,
        "max_client_batch_size": 4,
        "router": "text-generation-router",
        "version": VERSION,
        "sha": null,
        "docker_label": null,
    }))
}

#[derive(Deserialize)]
struct GenerateBody {
    #[serde(default)]
    inputs: String,
    #[serde(default)]
    parameters: Parameters,
}

#[derive(Deserialize, Default)]
struct Parameters {
    max_new_tokens: Option<u64>,
    #[serde(default)]
    details: bool,
    truncate: Option<u64>,
}

fn error_event(message: &str, kind: &str) -> Value {
    json!({ "error": message, "error_type": kind })
}

/// TGI's `Validation::validate_input`, with its messages.
fn validate(t: &TgiSim, body: &GenerateBody) -> Result<(Vec<u32>, u64), String> {
    if body.inputs.is_empty() {
        return Err("Input validation error: `inputs` cannot be empty".into());
    }
    let mut prompt = text_prompt(&body.inputs);
    if let Some(keep) = body.parameters.truncate {
        if keep == 0 || keep > t.max_input() {
            return Err(format!(
                "Input validation error: `truncate` must be strictly positive and less than {}. Given: {keep}",
                t.max_input() + 1
            ));
        }
        let cut = prompt.len().saturating_sub(keep as usize);
        prompt.drain(..cut);
    }
    let input = prompt.len() as u64;
    let max_new = match body.parameters.max_new_tokens {
        Some(0) => {
            return Err(
                "Input validation error: `max_new_tokens` must be strictly positive".into(),
            );
        }
        Some(n) => n,
        None => t.max_total().saturating_sub(input),
    };
    if input + max_new > t.max_total() {
        return Err(format!(
            "Input validation error: `inputs` tokens + `max_new_tokens` must be <= {}. Given: {input} `inputs` tokens and {max_new} `max_new_tokens`",
            t.max_total()
        ));
    }
    if input > t.max_input() {
        return Err(format!(
            "Input validation error: `inputs` must have less than {} tokens. Given: {input}",
            t.max_input()
        ));
    }
    Ok((prompt, max_new))
}

/// A concurrency permit against `max_concurrent_requests`; released on drop.
struct Permit(Arc<AtomicUsize>);

impl Drop for Permit {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

fn permit(t: &TgiSim) -> Option<Permit> {
    let max = t.max_concurrent();
    t.running
        .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
            (n < max).then_some(n + 1)
        })
        .ok()?;
    Some(Permit(Arc::clone(&t.running)))
}

/// A request validated and admitted, or the error TGI would give (message, type, status).
fn start(
    t: &Arc<TgiSim>,
    body: &[u8],
    stream: bool,
    arrived: Instant,
) -> Result<(super::admission::Admitted, Permit, Tokens), (String, &'static str, StatusCode)> {
    let req: GenerateBody = serde_json::from_slice(body).map_err(|e| {
        (
            format!("Failed to deserialize the JSON body into the target type: {e}"),
            "validation",
            StatusCode::UNPROCESSABLE_ENTITY,
        )
    })?;
    let (prompt, max_new) =
        validate(t, &req).map_err(|m| (m, "validation", StatusCode::UNPROCESSABLE_ENTITY))?;
    let permit = permit(t).ok_or_else(|| {
        (
            "Model is overloaded".to_string(),
            "overloaded",
            StatusCode::TOO_MANY_REQUESTS,
        )
    })?;
    let input_length = prompt.len() as u64;
    // No ignore_eos in TGI: prose runs on, a question is answered and ends.
    let ignore_eos = needle::answer_ids(&prompt).is_none();
    let admitted = admit(
        &t.sim,
        GenRequest {
            route: if stream {
                "/generate_stream"
            } else {
                "/generate"
            },
            dialect: Dialect::Native,
            prompt,
            max_tokens: max_new,
            min_tokens: 0,
            ignore_eos,
            stream,
            arrived,
        },
    )
    .map_err(|e| (e.message, "generation", e.status))?;
    let tokens = Tokens {
        index: 0,
        details: req.parameters.details,
        input_length,
    };
    Ok((admitted, permit, tokens))
}

async fn generate_stream(State(t): State<Arc<TgiSim>>, body: Bytes) -> Response {
    let arrived = Instant::now();
    let (out, response) = FrameStream::open(Framing::Sse);
    match start(&t, &body, true, arrived) {
        Ok((admitted, permit, tokens)) => {
            tokio::spawn(stream_job(
                Arc::clone(&t.sim),
                admitted.slot,
                permit,
                admitted.job,
                out,
                tokens,
            ));
        }
        // TGI streams its errors: a 200 whose only event is the error.
        Err((message, kind, _)) => {
            out.json(&error_event(&message, kind));
        }
    }
    response
}

async fn generate(State(t): State<Arc<TgiSim>>, body: Bytes) -> Response {
    let arrived = Instant::now();
    let (admitted, permit, tokens) = match start(&t, &body, false, arrived) {
        Ok(a) => a,
        Err((message, kind, status)) => {
            return (status, Json(error_event(&message, kind))).into_response();
        }
    };
    let details = tokens.details;
    let result = run_collected(&t.sim, admitted.slot, admitted.job, tokens).await;
    drop(permit);
    match result {
        Some(ended) => {
            let mut v = json!({ "generated_text": ended.text });
            if details && let Some(d) = ended.last.last().map(|e| e["details"].clone()) {
                v["details"] = d;
            }
            Json(v).into_response()
        }
        None => (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(error_event("the simulator is shutting down", "generation")),
        )
            .into_response(),
    }
}

/// One SSE event per generated token, `generated_text` and `details` on the last.
struct Tokens {
    index: u64,
    details: bool,
    input_length: u64,
}

impl Tokens {
    fn token_event(&mut self, id: u32, text: &str, special: bool) -> Value {
        self.index += 1;
        json!({
            "index": self.index,
            "token": {"id": id, "text": text, "logprob": -0.25, "special": special},
            "generated_text": null,
            "details": null,
        })
    }

    fn details(&self, finish: &str, generated: u64) -> Value {
        json!({
            "finish_reason": finish,
            "generated_tokens": generated,
            "seed": null,
            "input_length": self.input_length,
        })
    }
}

impl Frames for Tokens {
    fn event(&mut self, p: &Progress<'_>) -> Vec<Value> {
        // Speculative steps deliver several tokens; TGI still sends one event per token.
        let mut events: Vec<Value> = p
            .delta
            .split_whitespace()
            .map(|w| {
                let id = word_id(w).unwrap_or(MARKER);
                self.token_event(id, &format!(" {w}"), false)
            })
            .collect();
        if let Some(finish) = p.finish {
            let (reason, generated) = match finish {
                Finish::Length => ("length", p.completion_tokens),
                Finish::Stop => {
                    // The EOS token ends the stream as its own, special, event.
                    events.push(self.token_event(EOS, "</s>", true));
                    ("eos_token", p.completion_tokens + 1)
                }
            };
            if let Some(last) = events.last_mut() {
                last["generated_text"] = json!(p.text);
                if self.details {
                    last["details"] = self.details(reason, generated);
                }
            }
        }
        events
    }

    /// TGI sends nothing after the last token.
    fn after(&mut self, _: &RequestTruth) -> Vec<Value> {
        Vec::new()
    }

    fn error(&self, message: &str) -> Value {
        error_event(message, "generation")
    }
}

/// `{inputs}` -> `[{id, text, start, stop}]`, BOS included as in a generation.
async fn tokenize(body: Bytes) -> Response {
    let req: GenerateBody = match serde_json::from_slice(&body) {
        Ok(r) => r,
        Err(e) => {
            return (
                StatusCode::UNPROCESSABLE_ENTITY,
                Json(error_event(&e.to_string(), "validation")),
            )
                .into_response();
        }
    };
    let tokens: Vec<Value> = with_offsets(&req.inputs)
        .into_iter()
        .map(
            |(id, text, start, stop)| json!({"id": id, "text": text, "start": start, "stop": stop}),
        )
        .collect();
    Json(Value::Array(tokens)).into_response()
}

/// The simulator's tokenization with each token's text and byte span in the input.
fn with_offsets(text: &str) -> Vec<(u32, String, usize, usize)> {
    let mut out = vec![(BOS, "<s>".to_string(), 0, 0)];
    for word in text.split_whitespace() {
        let start = word.as_ptr() as usize - text.as_ptr() as usize;
        match word_id(word) {
            Some(id) => out.push((id, format!("▁{word}"), start, start + word.len())),
            None => {
                out.push((MARKER, "▁".to_string(), start, start));
                for (i, b) in word.bytes().enumerate() {
                    out.push((
                        u32::from(b),
                        format!("<0x{b:02X}>"),
                        start + i,
                        start + i + 1,
                    ));
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_agree_with_the_model_tokenization() {
        let text = "Session 1f. the river  runs über";
        let ids: Vec<u32> = with_offsets(text).iter().map(|t| t.0).collect();
        assert_eq!(ids, text_prompt(text));
        for (_, _, start, stop) in with_offsets(text) {
            assert!(start <= stop && stop <= text.len());
        }
    }
}
