//! Issue 10 item 7: a tokenizer that fails on the filler text (simulator
//! `--tokenize-strict`, like llama-server's `HTTP 500: unordered_map::at`) does not end the
//! sweep: token ids come from the words it does tokenize, lengths stay exact; needles, which
//! need text tokenized, are refused with the reason. A server that takes no text and has
//! no token-id route either is one clear line and exit 1, with no sample sent.

use crate::common;
use crate::fakes;
use axum::Router;
use axum::http::StatusCode;
use axum::routing::{get, post};
use common::bin::{ctxbench, run_bounded, text};
use common::{flags, sim, sweep_args};
use fakes::Fake;
use serde_json::{Value, json};
use std::sync::{Arc, Mutex};
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_tokenizer_falls_back_to_ordinary_ids() {
    let _timing = common::timing_lock().await;
    let server = sim(&["--tokenize-strict"]).await;
    let r = flags("1k,2k", 2, 8).run(&server.url()).await;
    assert_eq!(r.run.config.prompt_mode, "token_ids_by_word");
    assert_eq!(r.samples.len(), 4, "{:?}", r.errors);
    for s in &r.samples {
        assert!(s.valid, "{s:?}");
        assert_eq!(s.prompt_tokens, Some(s.context_tokens), "exact length");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn needles_are_refused_with_the_reason() {
    let server = sim(&["--tokenize-strict"]).await;
    let args = sweep_args(
        &server.url(),
        &[
            "--needle",
            "--raw-completion",
            "--lengths",
            "1k",
            "--reps",
            "1",
            "--no-warmup",
        ],
    );
    let e = match ctxbench::sweep::execute(args).await {
        Ok(_) => panic!("a needle sweep cannot run without a working tokenizer"),
        Err(e) => format!("{e:#}"),
    };
    assert!(
        e.contains("--needle") && e.contains("unordered_map::at"),
        "{e}"
    );
    assert!(e.contains("without --needle"), "{e}");
}

/// An OpenAI-compatible server (no `/tokenize`, so no token-id route) that refuses every text
/// prompt as llama-server does with a vocabulary lacking its pieces.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_id_route_is_one_line_and_exit_1() {
    let seen: Arc<Mutex<Vec<Value>>> = Arc::default();
    let log = seen.clone();
    let app = Router::new()
        .route(
            "/v1/models",
            get(|| async { axum::Json(json!({"object": "list", "data": [{"id": "fake", "object": "model"}]})) }),
        )
        .route(
            "/v1/completions",
            post(move |axum::Json(body): axum::Json<Value>| {
                let log = log.clone();
                async move {
                    log.lock().unwrap().push(body);
                    (
                        StatusCode::BAD_REQUEST,
                        axum::Json(json!({"error": {"code": 400, "message": "unordered_map::at", "type": "invalid_request_error"}})),
                    )
                }
            }),
        );
    let fake = Fake::start(app).await;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run.jsonl");
    let mut cmd = ctxbench();
    cmd.args(["sweep", "--url", &fake.url(), "--lengths", "1k,2k", "--out"])
        .arg(&out);
    let o = tokio::task::spawn_blocking(move || run_bounded(&mut cmd, Duration::from_secs(60)))
        .await
        .unwrap();
    let err = text(&o.stderr);
    assert_eq!(
        o.status.code(),
        Some(i32::from(ctxbench::exit::FAILURE)),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
    let errors: Vec<&str> = err.lines().filter(|l| l.starts_with("error")).collect();
    assert_eq!(errors.len(), 1, "{err}");
    assert!(
        errors[0].contains("no token-id route") && errors[0].contains("unordered_map::at"),
        "{}",
        errors[0]
    );
    // Only the first 1-token calibration request reached the server: no sample was sent.
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert_eq!(seen[0]["max_tokens"], 1);
    let samples = std::fs::read_to_string(&out)
        .unwrap_or_default()
        .lines()
        .filter(|l| l.contains("\"type\":\"sample\""))
        .count();
    assert_eq!(samples, 0);
}
