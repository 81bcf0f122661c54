//! Scriptable fake servers for validity tests: a router the test writes, served on a free
//! loopback port with TCP_NODELAY, and helpers for the wire shapes backends read.
#![allow(dead_code)]

use axum::Router;
use axum::body::Body;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use axum::serve::ListenerExt;
use bytes::Bytes;
use std::net::SocketAddr;
use std::time::Duration;

/// A fake server; stops when dropped.
pub struct Fake {
    pub addr: SocketAddr,
    task: tokio::task::JoinHandle<()>,
}

impl Fake {
    pub async fn start(app: Router) -> Fake {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind loopback");
        let addr = listener.local_addr().unwrap();
        let listener = listener.tap_io(|tcp| {
            let _ = tcp.set_nodelay(true);
        });
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Fake { addr, task }
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }
}

impl Drop for Fake {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// An SSE response: each `(wait, data)` is written `wait` after the previous one.
pub fn sse(events: Vec<(Duration, String)>) -> Response {
    let frames = futures::stream::unfold(events.into_iter(), |mut it| async move {
        let (wait, data) = it.next()?;
        tokio::time::sleep(wait).await;
        Some((
            Ok::<Bytes, std::io::Error>(Bytes::from(format!("data: {data}\n\n"))),
            it,
        ))
    });
    (
        [(header::CONTENT_TYPE, "text/event-stream")],
        Body::from_stream(frames),
    )
        .into_response()
}

/// SGLang-style `/server_info` fields that make `probe` see SGLang.
pub fn sglang_server_info(context: u64, page: u64, cache_report: bool) -> serde_json::Value {
    serde_json::json!({
        "served_model_name": "fake",
        "context_length": context,
        "max_total_num_tokens": context * 4,
        "page_size": page,
        "disable_radix_cache": false,
        "enable_cache_report": cache_report,
        "version": "fake",
    })
}

/// `/tokenize` answer: one id per word, from a small fixed table (ordinary ids 1000+).
pub fn tokenize_words(text: &str) -> Vec<u32> {
    text.split_whitespace()
        .map(|w| {
            1000 + w
                .bytes()
                .fold(0u32, |h, b| h.wrapping_mul(31).wrapping_add(u32::from(b)))
                % 5000
        })
        .collect()
}
