//! Issue 10 item 8: what a server's answer means, said precisely: `"error": null` is no
//! error, a 501 slot erase is no flush, a refused connection is not a refused key, a whole
//! JSON body is not a stream, and a prompt that could not be built is its own kind.

use crate::fakes;
use axum::Router;
use axum::http::StatusCode;
use axum::response::IntoResponse;
use axum::routing::{get, post};
use ctxbench::backend::flush::Flusher;
use ctxbench::backend::http::Http;
use ctxbench::backend::openai::{OpenAi, TokenizeRoute};
use ctxbench::backend::{Backend, Flush, GenRequest, Prompt, RequestError};
use ctxbench::cli::{ApiChoice, Endpoint};
use fakes::{Fake, sse};
use serde_json::json;
use std::time::Duration;

fn request(prompt: Prompt) -> GenRequest {
    GenRequest {
        prompt,
        max_tokens: 4,
        ignore_eos: true,
        cache_prompt: false,
        deadline: Duration::from_secs(10),
    }
}

fn openai(url: &str, endpoint: Endpoint) -> OpenAi {
    OpenAi {
        http: Http::new(url, None).unwrap(),
        flusher: Flusher::None,
        model: "fake".into(),
        endpoint,
        api: "openai",
        tokenize_route: TokenizeRoute::None,
    }
}

#[tokio::test]
async fn a_501_slot_erase_is_not_a_flush() {
    // Slot 0 erases; slot 1 cannot (llama-server without --slot-save-path answers 501).
    let app = Router::new()
        .route(
            "/slots/0",
            post(|| async { axum::Json(json!({"id_slot": 0, "n_erased": 0})) }),
        )
        .route(
            "/slots/1",
            post(|| async {
                (
                    StatusCode::NOT_IMPLEMENTED,
                    axum::Json(json!({"error": {"code": 501, "message": "This server does not support slots action."}})),
                )
            }),
        );
    let fake = Fake::start(app).await;
    let http = Http::new(&fake.url(), None).unwrap();
    let r = Flusher::LlamacppEraseSlots { slots: 2 }.flush(&http).await;
    assert_eq!(r, Ok(Flush::NotOffered), "one slot kept its cache");
}

#[tokio::test]
async fn error_null_in_a_stream_event_is_not_an_error() {
    let chunk = |text: &str, finish: serde_json::Value, n: u64| {
        json!({"choices":[{"index":0,"text":text,"finish_reason":finish}],"error":null,
               "usage":{"prompt_tokens":3,"completion_tokens":n}})
        .to_string()
    };
    let events = vec![
        (Duration::ZERO, chunk("a", json!(null), 1)),
        (Duration::ZERO, chunk("b", json!("length"), 2)),
        (Duration::ZERO, "[DONE]".to_string()),
    ];
    let app = Router::new().route("/v1/completions", post(move || async move { sse(events) }));
    let fake = Fake::start(app).await;
    let c = openai(&fake.url(), Endpoint::Completions)
        .generate(&request(Prompt::Text("x".into())))
        .await
        .expect("`\"error\": null` is no error");
    assert_eq!(c.completion_tokens, Some(2));
}

#[tokio::test]
async fn a_server_that_ignores_stream_true_is_named() {
    let app = Router::new().route(
        "/v1/completions",
        post(|| async {
            axum::Json(
                json!({"choices":[{"index":0,"text":"ab","finish_reason":"length"}],
                              "usage":{"prompt_tokens":3,"completion_tokens":2}}),
            )
        }),
    );
    let fake = Fake::start(app).await;
    let e = openai(&fake.url(), Endpoint::Completions)
        .generate(&request(Prompt::Text("x".into())))
        .await
        .unwrap_err();
    assert!(matches!(e, RequestError::NotStreamed(_)), "{e:?}");
    assert_eq!(e.kind(), "not_streamed");
    assert!(e.to_string().contains("stream: true"), "{e}");
}

#[tokio::test]
async fn a_prompt_that_cannot_be_built_is_its_own_kind() {
    // Nothing listens: the error must come from building, before any connection.
    let e = openai("http://127.0.0.1:9", Endpoint::Chat)
        .generate(&request(Prompt::Ids(vec![1, 2, 3])))
        .await
        .unwrap_err();
    assert_eq!(e.kind(), "prompt", "{e:?}");
}

async fn connect_error(url: &str) -> String {
    match ctxbench::backend::connect(url, ApiChoice::Auto, Endpoint::Completions, None, None).await
    {
        Ok(_) => panic!("connect to {url} should fail"),
        Err(e) => format!("{e:#}"),
    }
}

#[tokio::test]
async fn refused_connection_and_401_say_different_things_once() {
    // A port that was free a moment ago: nothing listens there.
    let closed = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap()
    };
    let refused = connect_error(&format!("http://{closed}")).await;
    assert!(refused.to_lowercase().contains("refused"), "{refused}");
    assert_eq!(
        refused.matches("check --url").count(),
        1,
        "one hint: {refused}"
    );
    assert_eq!(
        refused.to_lowercase().matches("connection refused").count(),
        1,
        "the underlying error once: {refused}"
    );
    assert!(!refused.contains("API key"), "{refused}");

    let app = Router::new().fallback(get(|| async {
        (
            StatusCode::UNAUTHORIZED,
            axum::Json(json!({"error": {"message": "Invalid API key"}})),
        )
            .into_response()
    }));
    let fake = Fake::start(app).await;
    let denied = connect_error(&fake.url()).await;
    assert!(denied.contains("401"), "{denied}");
    assert!(denied.contains("--api-key-env"), "{denied}");
    assert_eq!(denied.matches("Invalid API key").count(), 1, "{denied}");
    assert!(!denied.contains("check --url"), "{denied}");
    assert_ne!(refused, denied);
}
