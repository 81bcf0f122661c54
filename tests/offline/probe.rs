//! `probe` against each simulator persona, as a library call and as the binary.

use crate::common;
use common::{probe_url, sim};
use serde_json::Value;

/// `ctxbench probe --url URL [--format F]` as a child process; the simulator keeps serving
/// on this test's multi-threaded runtime while the child runs.
async fn probe_bin(url: &str, format: &str) -> (i32, String, String) {
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_ctxbench"))
        .args(["probe", "--url", url, "--format", format])
        .env_remove("OPENAI_API_KEY")
        .output()
        .await
        .expect("ctxbench runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

// ---------------------------------------------------------------------------------------
// probe

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probe_sglang_persona_library() {
    let _timing = common::timing_lock().await;
    let server = sim(&["--context-length", "8192"]).await;
    let i = probe_url(&server.url()).await;
    assert_eq!(i.kind.name(), "sglang");
    assert_eq!(i.context_length, Some(8192));
    assert_eq!(
        i.context_source.as_deref(),
        Some("/server_info context_length")
    );
    assert_eq!(i.flush, "/flush_cache");
    assert!(i.tokenize, "the sglang persona serves /tokenize");
    assert_eq!(i.prefix_cache, Some(true));
    assert_eq!(i.reports_cached_tokens, Some(true));
    assert_eq!(i.page_size, Some(16));
    assert_eq!(i.model.as_deref(), Some("ctxbench-sim"));
    assert!(i.rtt_s.is_some_and(|r| r > 0.0 && r < 0.1), "{:?}", i.rtt_s);
    // Probing sends no generation.
    assert!(server.truth().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probe_sglang_persona_without_cache_report_or_cache() {
    let _timing = common::timing_lock().await;
    let server = sim(&["--no-cache-report", "--no-cache"]).await;
    let i = probe_url(&server.url()).await;
    assert_eq!(i.kind.name(), "sglang");
    assert_eq!(i.reports_cached_tokens, Some(false));
    assert_eq!(i.prefix_cache, Some(false));
    let table = ctxbench::probe::render(&server.url(), &i);
    assert!(table.contains("--enable-cache-report"), "{table}");
}

/// The OpenAI persona serves `/v1/*` and `/health` only: its limit comes from `/v1/models`,
/// and it offers neither a flush nor a tokenize endpoint, so probe must not claim either.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probe_openai_persona_library() {
    let _timing = common::timing_lock().await;
    let server = sim(&["--persona", "openai", "--context-length", "8192"]).await;
    let url = server.url();
    let i = probe_url(&url).await;
    // The persona's /v1/models names its owner; probe's kind follows it (vLLM shapes
    // /v1/models this way, with `max_model_len`), else it is a generic OpenAI server.
    let owner = reqwest::get(format!("{url}/v1/models"))
        .await
        .unwrap()
        .json::<Value>()
        .await
        .unwrap()["data"][0]["owned_by"]
        .as_str()
        .unwrap()
        .to_string();
    assert_ne!(owner, "vllm", "the generic persona must not pose as vLLM");
    let want_kind = "openai";
    assert_eq!(i.kind.name(), want_kind, "owned_by {owner}");
    assert_eq!(i.context_length, Some(8192));
    assert_eq!(
        i.context_source.as_deref(),
        Some("/v1/models data[0].max_model_len")
    );
    assert_eq!(i.flush, "none", "the openai persona has no flush route");
    assert!(!i.tokenize, "the openai persona has no /tokenize");
    assert_eq!(i.model.as_deref(), Some("ctxbench-sim"));
    assert!(i.rtt_s.is_some());
    assert!(server.truth().is_empty());
}

/// A vLLM in dev mode does offer `/reset_prefix_cache` (POST only) and `/tokenize`: probe
/// finds both without calling the flush (a stub server counts the calls).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probe_finds_a_vllm_dev_mode_flush_without_flushing() {
    let _timing = common::timing_lock().await;
    use axum::routing::{get, post};
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    let resets = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&resets);
    let app = axum::Router::new()
        .route(
            "/v1/models",
            get(|| async {
                axum::Json(serde_json::json!({"object": "list", "data": [{
                    "id": "m", "object": "model", "owned_by": "vllm", "max_model_len": 32768
                }]}))
            }),
        )
        .route(
            "/reset_prefix_cache",
            post(move || {
                counter.fetch_add(1, Ordering::SeqCst);
                async { "" }
            }),
        )
        .route(
            "/tokenize",
            post(|| async { axum::Json(serde_json::json!({"tokens": [1, 2], "count": 2})) }),
        )
        .route("/health", get(|| async { "" }));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let task = tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    let i = probe_url(&url).await;
    task.abort();
    assert_eq!(i.kind.name(), "vllm");
    assert_eq!(i.flush, "/reset_prefix_cache");
    assert!(i.tokenize);
    assert_eq!(i.context_length, Some(32768));
    assert_eq!(resets.load(Ordering::SeqCst), 0, "probing must not flush");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probe_binary_json_and_table_for_both_personas() {
    let _timing = common::timing_lock().await;
    for (sim_flags, source) in common::PERSONAS_8192 {
        let server = sim(sim_flags).await;
        let url = server.url();
        let lib = probe_url(&url).await;

        let (code, stdout, stderr) = probe_bin(&url, "json").await;
        assert_eq!(code, 0, "{stderr}");
        let v: Value = serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"));
        assert_eq!(v["kind"], lib.kind.name(), "{stdout}");
        assert_eq!(v["context_length"], 8192, "{stdout}");
        assert_eq!(v["context_source"], source, "{stdout}");
        assert_eq!(v["flush"], lib.flush);
        assert_eq!(v["tokenize"], lib.tokenize);
        assert!(
            v.get("flusher").is_none(),
            "internal fields stay out: {stdout}"
        );

        let (code, table, stderr) = probe_bin(&url, "table").await;
        assert_eq!(code, 0, "{stderr}");
        assert!(
            table.contains(&format!("8192 tokens (from {source})")),
            "{table}"
        );
        assert!(
            table.contains(&format!("{} at {url}", lib.kind.name())),
            "{table}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probe_binary_fails_cleanly_when_nothing_answers() {
    let _timing = common::timing_lock().await;
    // A port that was just free: nothing listens there.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let (code, stdout, stderr) = probe_bin(&format!("http://127.0.0.1:{port}"), "json").await;
    assert_ne!(code, 0);
    assert!(stdout.is_empty(), "{stdout}");
    // The refused connection itself, not a list of routes that did not answer.
    assert!(stderr.to_lowercase().contains("refused"), "{stderr}");
}
