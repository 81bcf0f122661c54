//! Issue 10 item 6: restart detection through the `Backend` trait, for a server that is
//! not the simulator: an OpenAI-compatible fake whose Prometheus `/metrics` gives
//! `process_start_time_seconds`, restarting during the second sample.

use crate::common;
use crate::fakes;
use axum::Router;
use axum::extract::State;
use axum::routing::{get, post};
use ctxbench::record::flag;
use fakes::{Fake, sse};
use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

#[derive(Default)]
struct Server {
    start: AtomicU64,
    samples: AtomicU64,
}

async fn completions(
    State(s): State<Arc<Server>>,
    axum::Json(b): axum::Json<Value>,
) -> axum::response::Response {
    let words = b["prompt"]
        .as_str()
        .unwrap_or("")
        .split_whitespace()
        .count() as u64;
    let max = b["max_tokens"].as_u64().unwrap_or(1);
    // The second measured request (8 tokens) meets a restart.
    if max == 8 && s.samples.fetch_add(1, Ordering::SeqCst) == 1 {
        s.start.fetch_add(1, Ordering::SeqCst);
    }
    let mut events = Vec::new();
    for k in 1..=max {
        let finish = if k == max {
            json!("length")
        } else {
            Value::Null
        };
        let data = json!({"choices":[{"index":0,"text":" w","finish_reason":finish}],
                          "usage":{"prompt_tokens":words,"completion_tokens":k}});
        let wait = Duration::from_millis(if k == 1 { 20 } else { 2 });
        events.push((wait, data.to_string()));
    }
    events.push((Duration::ZERO, "[DONE]".into()));
    sse(events)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restart_seen_in_prometheus_metrics_is_flagged() {
    let state = Arc::new(Server {
        start: AtomicU64::new(1_700_000_000),
        samples: AtomicU64::new(0),
    });
    let app = Router::new()
        .route(
            "/v1/models",
            get(|| async { axum::Json(json!({"data":[{"id":"fake","owned_by":"someone"}]})) }),
        )
        .route(
            "/metrics",
            get(|State(s): State<Arc<Server>>| async move {
                format!(
                    "# TYPE process_start_time_seconds gauge\nprocess_start_time_seconds {}.25\n",
                    s.start.load(Ordering::SeqCst)
                )
            }),
        )
        .route("/v1/completions", post(completions))
        .with_state(state.clone());
    let fake = Fake::start(app).await;
    let r = common::flags("1k", 3, 8).run(&fake.url()).await;
    assert_eq!(r.samples.len(), 3, "{:?}", r.errors);
    let flagged: Vec<bool> = r
        .samples
        .iter()
        .map(|s| s.flags.contains(&flag::SERVER_RESTARTED))
        .collect();
    assert_eq!(flagged, vec![false, true, false], "{:?}", r.samples);
    assert!(!r.samples[1].valid);
}
