//! The `ollama` persona: `/api/generate` streaming NDJSON, `/api/show`, `/api/tags`, `/api/ps`,
//! `/api/version`, with Ollama's long-context traps: a request without `options.num_ctx` gets
//! the default window (`--ollama-num-ctx`, 4096) and a longer prompt is cut from the front
//! (after `num_keep` tokens) with no sign but a smaller `prompt_eval_count`; a request at a new
//! window waits for the model to go idle and reloads it (`load_duration`, an empty cache).

use super::admission::{GenRequest, admit};
use super::engine::{Finish, Progress};
use super::error::{Dialect, parse_body};
use super::frames::{FrameStream, Frames, Framing, error_body, run_collected, stream_job};
use super::needle;
use super::request::{ChatMessage, chat_prompt, text_prompt};
use super::state::SimState;
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
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::SystemTime;
use tokio::sync::RwLock;
use tokio::time::Instant;

/// Ollama's default `num_keep`: leading tokens a truncation keeps.
const NUM_KEEP: usize = 4;
/// The smallest window Ollama runs (`server/sched.go`).
const MIN_NUM_CTX: u64 = 4;
const VERSION: &str = "0.12.0-ctxbench-sim";

pub struct OllamaSim {
    sim: Arc<SimState>,
    /// The window the model is loaded with; `None` until the first request loads it.
    loaded: Arc<RwLock<Option<u64>>>,
    reloads: AtomicU64,
}

pub fn routes(sim: Arc<SimState>) -> Router<Arc<SimState>> {
    let o = Arc::new(OllamaSim {
        sim,
        loaded: Arc::new(RwLock::new(None)),
        reloads: AtomicU64::new(0),
    });
    Router::new()
        .route("/", get(|| async { "Ollama is running" }))
        .route(
            "/api/version",
            get(|| async { Json(json!({"version": VERSION})) }),
        )
        .route("/api/tags", get(tags))
        .route("/api/ps", get(ps))
        .route("/api/show", post(show))
        .route("/api/generate", post(generate))
        .with_state(o)
}

fn err(status: StatusCode, message: impl AsRef<str>) -> Response {
    (status, Json(error_body(message.as_ref()))).into_response()
}

fn details() -> Value {
    json!({
        "parent_model": "",
        "format": "gguf",
        "family": "llama",
        "families": ["llama"],
        "parameter_size": "8.0B",
        "quantization_level": "Q4_K_M",
    })
}

fn model_entry(o: &OllamaSim) -> Value {
    let name = &o.sim.config.model_name;
    json!({
        "name": name,
        "model": name,
        "modified_at": "2025-01-01T00:00:00Z",
        "size": 4_920_753_328u64,
        "digest": "0000000000000000000000000000000000000000000000000000000000000000",
        "details": details(),
    })
}

async fn tags(State(o): State<Arc<OllamaSim>>) -> Json<Value> {
    Json(json!({ "models": [model_entry(&o)] }))
}

/// Loaded models with their window, as `ollama ps` shows them.
async fn ps(State(o): State<Arc<OllamaSim>>) -> Json<Value> {
    let loaded = *o.loaded.read().await;
    let models: Vec<Value> = loaded
        .map(|window| {
            let mut m = model_entry(&o);
            m["context_length"] = json!(window);
            m["expires_at"] = json!("2099-01-01T00:00:00Z");
            m["size_vram"] = m["size"].clone();
            m
        })
        .into_iter()
        .collect();
    // `sim_reloads` is the simulator's own: how many times the model was (re)loaded.
    Json(json!({ "models": models, "sim_reloads": o.reloads.load(Ordering::SeqCst) }))
}

#[derive(Deserialize)]
struct ShowBody {
    model: Option<String>,
    name: Option<String>,
}

async fn show(State(o): State<Arc<OllamaSim>>, body: Bytes) -> Response {
    let req: ShowBody = match serde_json::from_slice(&body) {
        Ok(r) => r,
        Err(e) => return err(StatusCode::BAD_REQUEST, e.to_string()),
    };
    let name = req.model.or(req.name).unwrap_or_default();
    if let Some(resp) = unknown_model(&o, &name) {
        return resp;
    }
    let args = &o.sim.config.cost;
    Json(json!({
        "modelfile": format!("FROM {name}\n"),
        "parameters": "",
        "template": "{{ .Prompt }}",
        "details": details(),
        "model_info": {
            "general.architecture": "llama",
            "general.parameter_count": 8_030_261_248u64,
            "llama.context_length": args.context_length,
            "llama.block_count": 32,
            "llama.embedding_length": 4096,
            "llama.attention.head_count": 32,
            "llama.attention.head_count_kv": 8,
        },
        "capabilities": ["completion"],
        "modified_at": "2025-01-01T00:00:00Z",
    }))
    .into_response()
}

fn unknown_model(o: &OllamaSim, name: &str) -> Option<Response> {
    let served = &o.sim.config.model_name;
    let base = |n: &str| n.strip_suffix(":latest").unwrap_or(n).to_string();
    (base(name) != base(served)).then(|| {
        err(
            StatusCode::NOT_FOUND,
            format!("model '{name}' not found, try pulling it first"),
        )
    })
}

#[derive(Deserialize)]
struct GenerateBody {
    model: String,
    #[serde(default)]
    prompt: String,
    #[serde(default)]
    raw: bool,
    stream: Option<bool>,
    #[serde(default)]
    options: Options,
    /// Accepted and ignored: the simulated model never unloads on its own.
    #[allow(dead_code)]
    keep_alive: Option<Value>,
}

#[derive(Deserialize, Default)]
struct Options {
    num_ctx: Option<u64>,
    num_predict: Option<i64>,
    num_keep: Option<i64>,
}

async fn generate(State(o): State<Arc<OllamaSim>>, body: Bytes) -> Response {
    let arrived = Instant::now();
    let req: GenerateBody = match parse_body(&body, Dialect::Native) {
        Ok(r) => r,
        Err(e) => return err(StatusCode::BAD_REQUEST, e.message),
    };
    if let Some(resp) = unknown_model(&o, &req.model) {
        return resp;
    }
    let args = &o.sim.config.cost;
    // Ollama caps a window beyond what the model was trained for.
    let window = req
        .options
        .num_ctx
        .unwrap_or(args.ollama_num_ctx)
        .clamp(MIN_NUM_CTX, args.context_length);
    let lease = o.lease(window).await;
    let load_s = arrived.elapsed().as_secs_f64();
    let mut prompt = if req.raw {
        text_prompt(&req.prompt)
    } else {
        let message = ChatMessage {
            role: "user".into(),
            content: Value::String(req.prompt.clone()),
        };
        match chat_prompt(&[message]) {
            Ok(p) => p,
            Err(m) => return err(StatusCode::BAD_REQUEST, m),
        }
    };
    let keep = req
        .options
        .num_keep
        .map_or(NUM_KEEP, |k| k.max(0) as usize)
        .min(window as usize - 1);
    truncate_to_window(&mut prompt, window as usize, keep);
    let room = window.saturating_sub(prompt.len() as u64).max(1);
    let max_tokens = match req.options.num_predict {
        Some(n) if n > 0 => n as u64,
        // -1 (and Ollama's default): until the window is full.
        _ => room,
    };
    // No ignore_eos in Ollama: a raw prose continuation runs on, while a templated turn or a
    // question is answered and ends.
    let ignore_eos = req.raw && needle::answer_ids(&prompt).is_none();
    let admitted = match admit(
        &o.sim,
        GenRequest {
            route: "/api/generate",
            dialect: Dialect::Native,
            prompt,
            max_tokens,
            min_tokens: 0,
            ignore_eos,
            stream: req.stream.unwrap_or(true),
            arrived,
        },
    ) {
        Ok(a) => a,
        Err(e) => return e.into_response(),
    };
    let format = Ndjson {
        model: req.model,
        arrived,
        load_s,
    };
    if req.stream.unwrap_or(true) {
        let (out, response) = FrameStream::open(Framing::Ndjson);
        tokio::spawn(stream_job(
            Arc::clone(&o.sim),
            admitted.slot,
            lease,
            admitted.job,
            out,
            format,
        ));
        return response;
    }
    let result = run_collected(&o.sim, admitted.slot, admitted.job, format).await;
    drop(lease);
    match result {
        Some(mut ended) => {
            let mut last = ended.after.pop().unwrap_or(Value::Null);
            last["response"] = json!(ended.text);
            Json(last).into_response()
        }
        None => err(
            StatusCode::SERVICE_UNAVAILABLE,
            "the simulator is shutting down",
        ),
    }
}

impl OllamaSim {
    /// Hold the model at `window`, reloading it first (once in-flight requests are done)
    /// when it is loaded with another window or not at all.
    async fn lease(&self, window: u64) -> tokio::sync::OwnedRwLockReadGuard<Option<u64>> {
        let read = Arc::clone(&self.loaded).read_owned().await;
        if *read == Some(window) {
            return read;
        }
        drop(read);
        let mut write = Arc::clone(&self.loaded).write_owned().await;
        // Another request may have loaded this window while this one waited.
        if *write != Some(window) {
            self.sim
                .sleep(secs(self.sim.config.cost.ollama_load_s))
                .await;
            // A reload starts with an empty KV cache.
            self.sim.cache().flush();
            *write = Some(window);
            self.reloads.fetch_add(1, Ordering::SeqCst);
        }
        write.downgrade()
    }
}

fn secs(s: f64) -> std::time::Duration {
    std::time::Duration::try_from_secs_f64(s.max(0.0)).unwrap_or_default()
}

/// Ollama's runner: keep the first `keep` tokens and the tail, `window` tokens in all.
fn truncate_to_window(prompt: &mut Vec<u32>, window: usize, keep: usize) {
    if prompt.len() > window {
        let discard = prompt.len() - window;
        prompt.drain(keep..keep + discard);
    }
}

fn ns(s: f64) -> u64 {
    (s.max(0.0) * 1e9).round() as u64
}

fn now_rfc3339() -> String {
    humantime::format_rfc3339_nanos(SystemTime::now()).to_string()
}

/// `{"model","created_at","response","done":false}` per event, then the `done:true` object.
struct Ndjson {
    model: String,
    arrived: Instant,
    load_s: f64,
}

impl Frames for Ndjson {
    fn event(&mut self, p: &Progress<'_>) -> Vec<Value> {
        // Ollama sends text pieces without token counts.
        vec![json!({
            "model": self.model,
            "created_at": now_rfc3339(),
            "response": p.delta,
            "done": false,
        })]
    }

    fn after(&mut self, t: &RequestTruth) -> Vec<Value> {
        let eval_s: f64 = t.decode_steps.iter().map(|d| d.cost_s).sum();
        let reason = if t.finish == Finish::Length.name() {
            "length"
        } else {
            "stop"
        };
        vec![json!({
            "model": self.model,
            "created_at": now_rfc3339(),
            "response": "",
            "done": true,
            "done_reason": reason,
            "total_duration": ns(self.arrived.elapsed().as_secs_f64()),
            "load_duration": ns(self.load_s),
            // Cached tokens included, as Ollama counts them; the duration covers only the
            // tokens computed.
            "prompt_eval_count": t.prompt_tokens,
            "prompt_eval_duration": ns(t.prefill_s),
            "eval_count": t.output_tokens,
            "eval_duration": ns(eval_s),
        })]
    }

    fn error(&self, message: &str) -> Value {
        error_body(message)
    }
}

#[cfg(test)]
mod tests {
    use super::truncate_to_window;

    #[test]
    fn truncation_keeps_the_head_and_the_tail() {
        let mut p: Vec<u32> = (0..10).collect();
        truncate_to_window(&mut p, 6, 2);
        assert_eq!(p, vec![0, 1, 6, 7, 8, 9]);
        let mut short: Vec<u32> = (0..3).collect();
        truncate_to_window(&mut short, 6, 2);
        assert_eq!(short.len(), 3);
    }
}
