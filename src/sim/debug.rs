//! `GET /sim/truth`: the simulator's ground truth over HTTP (every persona), so a client-side
//! load test in another process can compare what it measured with what the engine did.

use super::state::SimState;
use axum::Json;
use axum::extract::State;
use serde_json::{Value, json};
use std::sync::Arc;

/// `{now_s, requests: [RequestTruth…], series: [SeriesPoint…], stats}`; times are seconds
/// on the engine clock, whose current reading is `now_s`.
pub async fn truth(State(state): State<Arc<SimState>>) -> Json<Value> {
    let requests = state.truth.snapshot();
    let (now_s, series, stats) = state.engine.with(|sched, now| {
        let series: Vec<_> = sched.series().copied().collect();
        (now, series, sched.stats().clone())
    });
    Json(json!({
        "now_s": now_s,
        "requests": requests,
        "series": series,
        "stats": stats,
    }))
}
