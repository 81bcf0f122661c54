//! A loopback pass-through in front of a server under test, with two optional hooks: see
//! every request (to count them by kind), and rewrite a JSON answer (to remove the limit
//! fields from `/server_info` and `/v1/models`, as a gateway or an OpenAI-compatible server
//! that does not publish its limit would). Its upstream can be switched, as a restarted
//! server behind the same URL.

use ctxbench::backend::http::Http;
use serde_json::Value;
use std::sync::{Arc, Mutex};

/// Called with each request's method, path and headers before it is forwarded.
pub type Seen = Arc<dyn Fn(&axum::http::Method, &str, &axum::http::HeaderMap) + Send + Sync>;
/// Called with a successful JSON answer's path; edits it in place, true when it applies.
pub type Rewrite = fn(&str, &mut Value) -> bool;

pub struct Proxy {
    pub url: String,
    upstream: Arc<Mutex<String>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

#[derive(Clone)]
struct State {
    upstream: Arc<Mutex<String>>,
    client: reqwest::Client,
    seen: Option<Seen>,
    rewrite: Option<Rewrite>,
}

impl Proxy {
    /// A plain pass-through that hides the server's context limit.
    pub async fn hiding_limits(upstream: &str) -> Self {
        Self::start(upstream, None, Some(hide_limit)).await
    }

    /// A pass-through that shows `seen` every request.
    pub async fn watching(upstream: &str, seen: Seen) -> Self {
        Self::start(upstream, Some(seen), None).await
    }

    async fn start(upstream: &str, seen: Option<Seen>, rewrite: Option<Rewrite>) -> Self {
        // Installs the TLS crypto provider reqwest needs before building a client.
        let _ = Http::new(upstream, None).unwrap();
        let state = State {
            upstream: Arc::new(Mutex::new(upstream.trim_end_matches('/').to_string())),
            client: reqwest::Client::builder()
                .tcp_nodelay(true)
                .build()
                .unwrap(),
            seen,
            rewrite,
        };
        let app = axum::Router::new()
            .fallback(forward)
            .layer(axum::extract::DefaultBodyLimit::max(512 << 20))
            .with_state(state.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        // Servers written for the tests set TCP_NODELAY: with Nagle on, the sweep rightly
        // finds (and flags) the delayed-ACK transport delay.
        let listener = axum::serve::ListenerExt::tap_io(listener, |tcp| {
            let _ = tcp.set_nodelay(true);
        });
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        Proxy {
            url,
            upstream: state.upstream,
            task,
        }
    }

    /// Forward to another server from now on.
    pub fn point_at(&self, upstream: &str) {
        *self.upstream.lock().unwrap() = upstream.trim_end_matches('/').to_string();
    }
}

/// Remove the fields that publish a context limit.
fn hide_limit(path: &str, v: &mut Value) -> bool {
    if !matches!(path, "/server_info" | "/get_server_info" | "/v1/models") {
        return false;
    }
    if let Some(o) = v.as_object_mut() {
        o.remove("context_length");
        o.remove("max_req_input_len");
    }
    if let Some(models) = v.get_mut("data").and_then(Value::as_array_mut) {
        for m in models {
            if let Some(o) = m.as_object_mut() {
                o.remove("max_model_len");
            }
        }
    }
    true
}

async fn forward(
    axum::extract::State(st): axum::extract::State<State>,
    method: axum::http::Method,
    uri: axum::http::Uri,
    headers: axum::http::HeaderMap,
    body: bytes::Bytes,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    if let Some(seen) = &st.seen {
        seen(&method, uri.path(), &headers);
    }
    let path = uri.path_and_query().map(|p| p.as_str()).unwrap_or("/");
    let base = st.upstream.lock().unwrap().clone();
    let mut rb = st
        .client
        .request(
            reqwest::Method::from_bytes(method.as_str().as_bytes()).unwrap(),
            format!("{base}{path}"),
        )
        .body(body);
    if let Some(ct) = headers.get("content-type").and_then(|v| v.to_str().ok()) {
        rb = rb.header("content-type", ct);
    }
    let resp = match rb.send().await {
        Ok(r) => r,
        Err(e) => return (axum::http::StatusCode::BAD_GATEWAY, e.to_string()).into_response(),
    };
    let status = resp.status().as_u16();
    let ct = resp.headers().get("content-type").cloned();
    let is_json = ct
        .as_ref()
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains("json"));
    if let Some(rewrite) = st.rewrite
        && is_json
        && (200..300).contains(&status)
    {
        let bytes = resp.bytes().await.unwrap();
        let mut v: Value = serde_json::from_slice(&bytes).unwrap();
        return if rewrite(uri.path(), &mut v) {
            axum::Json(v).into_response()
        } else {
            (
                axum::http::StatusCode::from_u16(status).unwrap(),
                axum::Json(v),
            )
                .into_response()
        };
    }
    let mut out = axum::http::Response::builder().status(status);
    if let Some(ct) = ct {
        out = out.header("content-type", ct);
    }
    out.body(axum::body::Body::from_stream(resp.bytes_stream()))
        .unwrap()
}
