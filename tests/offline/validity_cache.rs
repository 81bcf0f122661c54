//! Issue 10 items 1 and 2: the cache check tolerates exactly the prefix the API itself adds
//! (measured per target), flags a real hit, and checks every sample by whatever evidence
//! it carries.

use crate::common;
use crate::fakes;
use axum::Router;
use axum::extract::State;
use axum::routing::{get, post};
use common::{sim, sweep};
use ctxbench::record::flag;
use fakes::{Fake, sglang_server_info, sse, tokenize_words};
use serde_json::{Value, json};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// The simulator's chat template puts BOS and the role word `user` before the content, and
/// its tokenizer starts every non-vocabulary word (the nonce) with a word-boundary token:
/// three tokens every chat prompt shares.
const SIM_CHAT_PREFIX: u64 = 3;

const CHAT_NONCE: &[&str] = &[
    "--api",
    "openai",
    "--endpoint",
    "chat",
    "--lengths",
    "1k,2k",
    "--reps",
    "3",
    "--output-tokens",
    "8",
    "--no-warmup",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chat_with_only_a_nonce_at_page_size_one_is_valid() {
    let _timing = common::timing_lock().await;
    let server = sim(&["--sim-page-size", "1"]).await;
    let mut flags = CHAT_NONCE.to_vec();
    flags.extend(["--cache-bust", "nonce"]);
    let r = sweep(&server.url(), &flags).await;
    assert_eq!(r.run.target.checks.api_prefix_tokens, Some(SIM_CHAT_PREFIX));
    assert_eq!(r.samples.len(), 6, "{:?}", r.errors);
    for s in &r.samples {
        assert!(s.valid, "{s:?}");
        // The server did serve the template from cache: the tolerance is what made it valid.
        assert!(s.cached_tokens.unwrap_or(0) >= SIM_CHAT_PREFIX, "{s:?}");
    }
    // Ground truth agrees: no sample's prompt was served beyond the API's prefix and one page.
    let truth = server.truth();
    assert!(
        truth
            .iter()
            .filter(|t| t.output_tokens == 8)
            .all(|t| t.cached_tokens <= SIM_CHAT_PREFIX + 1),
        "{truth:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_repeated_chat_prompt_is_still_a_cache_hit() {
    let _timing = common::timing_lock().await;
    let server = sim(&["--sim-page-size", "1"]).await;
    let mut flags = CHAT_NONCE.to_vec();
    flags.extend(["--cache-bust", "off"]);
    let r = sweep(&server.url(), &flags).await;
    assert_eq!(r.run.target.checks.api_prefix_tokens, Some(SIM_CHAT_PREFIX));
    let repeats: Vec<_> = r.samples.iter().filter(|s| s.rep > 0).collect();
    assert_eq!(repeats.len(), 4);
    for s in repeats {
        assert!(s.flags.contains(&flag::CACHE_HIT) && !s.valid, "{s:?}");
    }
}

/// A fake SGLang that claims `enable_cache_report` but sends no cached-token count, and
/// answers the third 1k request from "cache" (in 1 ms instead of 60 ms).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sample_without_a_count_is_checked_by_timing_whatever_the_server_claims() {
    let _timing = common::timing_lock().await;
    let seen = Arc::new(AtomicU64::new(0));
    let app = Router::new()
        .route(
            "/server_info",
            get(|| async { axum::Json(sglang_server_info(65536, 1, true)) }),
        )
        .route(
            "/v1/models",
            get(|| async { axum::Json(json!({"data":[{"id":"fake","owned_by":"sglang"}]})) }),
        )
        .route(
            "/tokenize",
            post(|axum::Json(b): axum::Json<Value>| async move {
                let ids = tokenize_words(b["prompt"].as_str().unwrap_or(""));
                axum::Json(json!({"tokens": ids, "count": ids.len()}))
            }),
        )
        .route("/flush_cache", post(|| async { "ok" }))
        .route("/generate", post(generate))
        .with_state(seen.clone());
    let fake = Fake::start(app).await;
    let r = common::flags("1k", 3, 4).run(&fake.url()).await;
    assert_eq!(r.samples.len(), 3, "{:?}", r.errors);
    assert!(r.samples[..2].iter().all(|s| s.valid), "{:?}", r.samples);
    let third = &r.samples[2];
    assert!(third.cached_tokens.is_none());
    assert!(
        third.flags.contains(&flag::CACHE_HIT_INFERRED) && !third.valid,
        "{third:?}"
    );
}

async fn generate(
    State(seen): State<Arc<AtomicU64>>,
    axum::Json(b): axum::Json<Value>,
) -> axum::response::Response {
    let n = b["input_ids"].as_array().map_or(0, Vec::len) as u64;
    let max = b["sampling_params"]["max_new_tokens"].as_u64().unwrap_or(1);
    let ttft = if n == 1024 && seen.fetch_add(1, Ordering::SeqCst) == 2 {
        Duration::from_millis(1)
    } else {
        Duration::from_millis(60)
    };
    let mut events = Vec::new();
    for k in 1..=max {
        let finish = if k == max {
            json!({"type": "length"})
        } else {
            Value::Null
        };
        let data = json!({"text": "w ".repeat(k as usize), "meta_info":
            {"prompt_tokens": n, "completion_tokens": k, "finish_reason": finish}});
        let wait = if k == 1 {
            ttft
        } else {
            Duration::from_millis(5)
        };
        events.push((wait, data.to_string()));
    }
    events.push((Duration::ZERO, "[DONE]".into()));
    sse(events)
}
