//! What the simulated server says about itself: `/server_info`, `/model_info`, `/v1/models`,
//! health checks. `probe` reads these exactly as it would a real server's.

use super::Persona;
use super::state::SimState;
use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use serde_json::{Value, json};
use std::sync::Arc;

const MEM_FRACTION_STATIC: f64 = 0.88;

pub fn version() -> String {
    format!("sim-{}", env!("CARGO_PKG_VERSION"))
}

pub async fn server_info(State(state): State<Arc<SimState>>) -> Json<Value> {
    let args = &state.config.cost;
    let spec = args.spec > 1;
    // Cumulative since start (or the last flush), like SGLang's: tokens emitted per verify
    // step, the prefill's first token not included.
    let (pool, used, accept_length) = state.engine.with(|sched, _| {
        let pool = sched.pool();
        (
            pool.capacity_tokens(),
            pool.cached_pages() * pool.page_tokens(),
            sched.stats().spec_since_flush.accept_length(),
        )
    });
    Json(json!({
        "model_path": state.config.model_name,
        "tokenizer_path": state.config.model_name,
        "served_model_name": state.config.model_name,
        "context_length": args.context_length,
        "max_running_requests": args.max_running,
        "max_total_tokens": null,
        "max_total_num_tokens": pool,
        "max_req_input_len": args.context_length - 1,
        "page_size": args.page_size,
        "disable_radix_cache": args.no_cache,
        "enable_cache_report": !args.no_cache_report,
        "speculative_algorithm": if spec { json!("EAGLE") } else { Value::Null },
        "speculative_num_steps": if spec { json!(args.spec - 1) } else { Value::Null },
        "speculative_eagle_topk": if spec { json!(1) } else { Value::Null },
        "speculative_num_draft_tokens": if spec { json!(args.spec) } else { Value::Null },
        "chunked_prefill_size": args.max_batch_tokens,
        "mem_fraction_static": MEM_FRACTION_STATIC,
        "tp_size": 1,
        "dp_size": 1,
        "random_seed": state.config.seed,
        "sim_instance_id": state.instance_id,
        "version": version(),
        "internal_states": [{
            "memory_usage": {"token_capacity": pool, "cached_tokens": used},
            "avg_spec_accept_length": if spec { json!(accept_length) } else { Value::Null },
            "last_gen_throughput": 0.0,
        }],
    }))
}

pub async fn model_info(State(state): State<Arc<SimState>>) -> Json<Value> {
    Json(json!({
        "model_path": state.config.model_name,
        "tokenizer_path": state.config.model_name,
        "is_generation": true,
        "preferred_sampling_params": null,
        "weight_version": "default",
        "model_type": "llama",
        "architectures": ["LlamaForCausalLM"],
    }))
}

pub async fn models(State(state): State<Arc<SimState>>) -> Json<Value> {
    let owner = match state.config.cost.persona {
        Persona::Sglang => "sglang",
        Persona::Vllm => "vllm",
        // A generic OpenAI-compatible server: nothing that names a known engine.
        Persona::Openai => "ctxbench-sim",
        Persona::Ollama => "library",
        Persona::Tgi => "tgi",
    };
    Json(json!({
        "object": "list",
        "data": [{
            "id": state.config.model_name,
            "object": "model",
            "created": 0,
            "owned_by": owner,
            "root": state.config.model_name,
            "max_model_len": state.config.cost.context_length,
        }],
    }))
}

pub async fn health(State(state): State<Arc<SimState>>) -> Response {
    if state.is_stopping() {
        return StatusCode::SERVICE_UNAVAILABLE.into_response();
    }
    StatusCode::OK.into_response()
}

/// Fallback like FastAPI's.
pub async fn not_found() -> Response {
    (StatusCode::NOT_FOUND, Json(json!({"detail": "Not Found"}))).into_response()
}
