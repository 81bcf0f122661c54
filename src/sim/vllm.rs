//! vLLM's routes beside the OpenAI ones: `/tokenize`, `/metrics`, `/version`, and
//! `POST /reset_prefix_cache` only in dev mode (vLLM registers it only with
//! `VLLM_SERVER_DEV_MODE=1`; elsewhere it is a 404).

use super::state::SimState;
use super::{info, metrics, sglang};
use axum::Json;
use axum::Router;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::json;
use std::sync::Arc;

pub fn routes(openai: Router<Arc<SimState>>, dev_mode: bool) -> Router<Arc<SimState>> {
    let routes = openai
        .route("/tokenize", post(sglang::tokenize_route))
        .route("/metrics", get(metrics::metrics))
        .route("/version", get(version));
    if dev_mode {
        routes.route("/reset_prefix_cache", post(reset_prefix_cache))
    } else {
        routes
    }
}

async fn version() -> Json<serde_json::Value> {
    Json(json!({ "version": info::version() }))
}

/// Always 200, like vLLM, even when pages in use keep part of the cache.
async fn reset_prefix_cache(State(state): State<Arc<SimState>>) -> Response {
    state.engine.with(|sched, _| sched.flush_cache());
    StatusCode::OK.into_response()
}
