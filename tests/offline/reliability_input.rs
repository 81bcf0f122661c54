//! Reliability, input and secrets: bad input is refused before anything is written; an API
//! key never reaches output or files, even when a server echoes it.
//!
//! Loopback only, every test bounded in time.

use crate::common;
use common::bin::{ctxbench, run_bounded, text};
use ctxbench::{exit, resultfile};
use std::collections::HashSet;
use std::time::Duration;

// ---------------------------------------------------------------------------------------
// 4. Bad input
// ---------------------------------------------------------------------------------------

/// Each case fails before measuring, names what is wrong, panics nowhere, and leaves no
/// `--out` file behind.
#[test]
fn bad_input_is_refused_before_anything_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let cases: &[(&[&str], &str)] = &[
        (&["--lengths="], "--lengths"),
        (&["--lengths", ","], "--lengths"),
        (&["--lengths", "1k,,abc"], "--lengths"),
        (&["--lengths", "0"], "--lengths"),
        (&["--lengths=-1k"], "--lengths"),
        (&["--lengths", "1.3"], "--lengths"),
        (&["--lengths", "1kk"], "--lengths"),
        (&["--lengths", "k"], "--lengths"),
        (&["--lengths", "1m"], "--lengths"),
        (&["--lengths", "1k;2k"], "--lengths"),
        (&["--lengths", "99999999999999999"], "--lengths"),
        (&["--output-tokens", "0"], "--output-tokens"),
        (&["--output-tokens", "1"], "--output-tokens"),
        (&["--needle", "--needle-depths", "2"], "--needle-depths"),
        (&["--needle-depths", "0.5,x"], "--needle-depths"),
        (&["--needle-depths=-0.1"], "--needle-depths"),
        (&["--timeout", "0"], "--timeout"),
        (&["--lengths", "200k"], "limit"),
        (&["--api", "llamacpp"], "--api llamacpp"),
        (&["--persona", "openai", "--api", "sglang"], "--api sglang"),
        (&["--fault-kinds", "bogus"], "--fault-kinds"),
        (&["--url", "http://127.0.0.1:1"], "cannot probe"),
        (
            &["--api-key-env", "CTXBENCH_SURELY_UNSET_VAR"],
            "--api-key-env",
        ),
    ];
    for (i, (args, needle)) in cases.iter().enumerate() {
        let out = dir.path().join(format!("case{i}.jsonl"));
        let o = run_bounded(
            ctxbench()
                .arg("sweep")
                .args(*args)
                .arg("--out")
                .arg(&out)
                .env_remove("CTXBENCH_SURELY_UNSET_VAR"),
            Duration::from_secs(30),
        );
        let err = text(&o.stderr);
        assert!(!o.status.success(), "{args:?} succeeded");
        assert!(
            matches!(o.status.code(), Some(1 | 2)),
            "{args:?}: {:?}",
            o.status
        );
        assert!(err.contains(needle), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        assert!(o.stdout.is_empty(), "{args:?}: {}", text(&o.stdout));
        assert!(!out.exists(), "{args:?}: left {} behind", out.display());
    }
}

/// The wrong `--api` for the server is one clear line, not a cascade of failed requests.
#[test]
fn wrong_api_is_a_one_line_error() {
    let o = run_bounded(
        ctxbench().args(["sweep", "--api", "llamacpp", "--lengths", "1k"]),
        Duration::from_secs(30),
    );
    assert_eq!(o.status.code(), Some(i32::from(exit::FAILURE)));
    let err = text(&o.stderr);
    let errors: Vec<&str> = err.lines().filter(|l| l.starts_with("error")).collect();
    assert_eq!(errors.len(), 1, "{err}");
    let line = errors[0];
    assert!(
        line.contains("--api llamacpp") && line.contains("sglang"),
        "{line}"
    );
    // Only the simulator notice precedes it: no per-request failures.
    assert!(err.lines().count() <= 2, "{err}");
}

#[test]
fn credentials_in_an_unreachable_url_are_never_printed() {
    for url in [
        "http://alice:hunter2-pw@127.0.0.1:1",
        "http://alice:hunter2-pw@127.0.0.1:1/v1",
        "https://alice:hunter2-pw@127.0.0.1:1",
        "http://alice:hunter2-pw@bad host:1",
        "http://alice:hunter2-pw@[::1",
        "ftp://alice:hunter2-pw@127.0.0.1:1",
        "alice:hunter2-pw@127.0.0.1:1",
    ] {
        let o = run_bounded(
            ctxbench().args(["sweep", "--lengths", "1k", "--url", url]),
            Duration::from_secs(30),
        );
        let all = format!("{}{}", text(&o.stdout), text(&o.stderr));
        assert!(!o.status.success(), "{url}");
        assert!(
            all.contains("--url") || all.contains("cannot probe"),
            "{url}: {all}"
        );
        assert!(
            !all.contains("hunter2-pw"),
            "{url}: the password leaked: {all}"
        );
        assert!(!all.contains("panicked"), "{url}: {all}");
    }
}

// ---------------------------------------------------------------------------------------
// 5. Secrets
// ---------------------------------------------------------------------------------------

const CANARY: &str = "sk-canary-7f3a9c1e5b2d4680";

/// An SGLang-shaped server that answers every generation with an error carrying the
/// Authorization header it received: a 500, a 400, a 400 that reads like a context-limit
/// refusal, and an in-stream error event. It records every Authorization header.
async fn echoing_server() -> (String, std::sync::Arc<std::sync::Mutex<Vec<String>>>) {
    use axum::http::{HeaderMap, StatusCode, header};
    use axum::response::{IntoResponse, Response};
    use axum::routing::{get, post};
    use serde_json::json;
    use std::sync::atomic::{AtomicUsize, Ordering};

    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let n = std::sync::Arc::new(AtomicUsize::new(0));
    let auth = |h: &HeaderMap| {
        h.get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string()
    };
    let s1 = seen.clone();
    let s2 = seen.clone();
    let app = axum::Router::new()
        .route(
            "/server_info",
            get(|| async {
                axum::Json(json!({
                    "max_total_num_tokens": 200000,
                    "context_length": 32768,
                    "page_size": 16,
                    "served_model_name": "echo",
                    "enable_cache_report": true
                }))
            }),
        )
        .route("/health", get(|| async { "ok" }))
        .route("/flush_cache", post(|| async { "Cache flushed." }))
        .route(
            "/tokenize",
            post(move |h: HeaderMap, body: axum::Json<serde_json::Value>| {
                let s = s1.clone();
                async move {
                    s.lock().unwrap().push(auth(&h));
                    let words = body["prompt"].as_str().unwrap_or("").split_whitespace().count();
                    let tokens: Vec<u32> = (0..words.max(1) as u32).map(|i| 100 + i % 37).collect();
                    axum::Json(json!({"tokens": tokens, "count": tokens.len()}))
                }
            }),
        )
        .route(
            "/generate",
            post(move |h: HeaderMap| {
                let s = s2.clone();
                let n = n.clone();
                async move {
                    let a = auth(&h);
                    s.lock().unwrap().push(a.clone());
                    let echoed = format!("request headers: Authorization: {a}");
                    let r: Response = match n.fetch_add(1, Ordering::SeqCst) % 4 {
                        0 => (
                            StatusCode::INTERNAL_SERVER_ERROR,
                            axum::Json(json!({"error": {"message": format!("internal error; {echoed}")}})),
                        )
                            .into_response(),
                        1 => (StatusCode::BAD_REQUEST, format!("bad request; {echoed}")).into_response(),
                        2 => (
                            StatusCode::BAD_REQUEST,
                            axum::Json(json!({"detail": format!("prompt too long, exceeds context; {echoed}")})),
                        )
                            .into_response(),
                        _ => (
                            [(header::CONTENT_TYPE, "text/event-stream")],
                            format!(
                                "data: {}\n\n",
                                json!({"error": {"message": format!("invalid key; {echoed}")}})
                            ),
                        )
                            .into_response(),
                    };
                    r
                }
            }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    (url, seen)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_echoed_api_key_never_reaches_output_or_files() {
    let (url, seen) = echoing_server().await;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("secret.jsonl");
    let html = dir.path().join("secret.html");
    for format in ["table", "json"] {
        let _ = std::fs::remove_file(&out);
        let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_ctxbench"));
        cmd.args([
            "sweep",
            "--url",
            &url,
            "--api-key-env",
            "CANARY_KEY",
            "--lengths",
            "1k,2k",
            "--reps",
            "4",
            "--output-tokens",
            "8",
            "--timeout",
            "5",
            "--format",
            format,
            "--out",
        ])
        .arg(&out)
        .arg("--html")
        .arg(&html)
        .env("CANARY_KEY", CANARY)
        .env_remove("OPENAI_API_KEY")
        .kill_on_drop(true);
        let o = tokio::time::timeout(Duration::from_secs(60), cmd.output())
            .await
            .expect("the sweep finishes")
            .unwrap();
        let stdout = text(&o.stdout);
        let stderr = text(&o.stderr);
        let file = std::fs::read_to_string(&out).unwrap_or_default();
        let page = std::fs::read_to_string(&html).unwrap_or_default();
        assert_eq!(
            o.status.code(),
            Some(i32::from(exit::NOTHING_VALID)),
            "{stderr}"
        );
        for (what, body) in [
            ("stdout", &stdout),
            ("stderr", &stderr),
            ("--out", &file),
            ("--html", &page),
        ] {
            assert!(
                !body.contains(CANARY),
                "{format}: the key leaked into {what}:\n{body}"
            );
            assert!(
                !body.contains("canary"),
                "{format}: part of the key leaked into {what}"
            );
        }
        // The failures were recorded, with the server's message minus the key.
        let rf = resultfile::read(&out).unwrap();
        let kinds: HashSet<&str> = rf.errors.iter().map(|e| e.kind.as_str()).collect();
        for k in [
            "http_5xx",
            "http_4xx",
            "context_exceeded",
            "server_error_event",
        ] {
            assert!(kinds.contains(k), "{format}: {kinds:?}");
        }
        assert!(
            rf.errors.iter().any(|e| e.message.contains("[redacted]")),
            "{:?}",
            rf.errors
        );
    }
    let seen = seen.lock().unwrap();
    assert!(!seen.is_empty());
    assert!(
        seen.iter().all(|a| a == &format!("Bearer {CANARY}")),
        "the key was sent on every request: {seen:?}"
    );
}

#[test]
fn url_credentials_and_keys_are_redacted_from_messages() {
    use ctxbench::backend::RequestError;
    use ctxbench::backend::http::{Http, strip_credentials};
    assert_eq!(
        strip_credentials("http://u:p@127.0.0.1:8/x"),
        "http://127.0.0.1:8/x"
    );
    // Text that does not parse as a URL loses its credentials too.
    assert_eq!(
        strip_credentials("http://u:secret@bad host:8/x"),
        "http://bad host:8/x"
    );
    assert_eq!(strip_credentials("u:secret@[::1"), "[::1");
    assert_eq!(strip_credentials("not a url"), "not a url");

    let h = Http::new("http://alice:hunter2@127.0.0.1:1/", Some("sk-k1".into())).unwrap();
    assert_eq!(h.base(), "http://127.0.0.1:1");
    assert_eq!(
        h.redact("GET http://alice:hunter2@127.0.0.1:1/x, pw hunter2, key sk-k1"),
        "GET http://127.0.0.1:1/x, pw [redacted], key [redacted]"
    );
    assert_eq!(
        h.redact_error(RequestError::ServerEvent("echo sk-k1".into())),
        RequestError::ServerEvent("echo [redacted]".into())
    );
    assert_eq!(
        h.redact_error(RequestError::Incomplete),
        RequestError::Incomplete
    );
}
