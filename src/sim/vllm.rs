//! vLLM's routes beside the OpenAI ones: `/tokenize`, `/metrics`, `/version`, and
//! `POST /reset_prefix_cache` only in dev mode (vLLM registers it only with
//! `VLLM_SERVER_DEV_MODE=1`; elsewhere it is a 404).

use super::state::SimState;
use super::{info, metrics, sglang};
use axum::Json;
use axum::Router;
use axum::extract::State;
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

/// Always 200, like vLLM; as in 0.32, `{"success": false}` and nothing reset while running
/// requests hold pages.
async fn reset_prefix_cache(State(state): State<Arc<SimState>>) -> Json<serde_json::Value> {
    if state.in_flight() > 0 {
        return Json(json!({ "success": false }));
    }
    state.engine.with(|sched, _| sched.flush_cache());
    Json(json!({ "success": true }))
}
