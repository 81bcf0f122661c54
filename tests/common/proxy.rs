//! A loopback pass-through that removes the limit fields from `/server_info` and
//! `/v1/models`, as a gateway or an OpenAI-compatible server that does not publish its limit
//! would: where the sweep must not know the server's limit (to reach the server's own 400
//! or its silent truncation), the simulator sits behind it.

use ctxbench::backend::http::Http;
use serde_json::Value;

pub struct LimitHidingProxy {
    pub url: String,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for LimitHidingProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

#[derive(Clone)]
struct Upstream {
    base: String,
    client: reqwest::Client,
}

impl LimitHidingProxy {
    pub async fn start(upstream: &str) -> Self {
        use axum::Router;
        // Installs the TLS crypto provider reqwest needs before building a client.
        let _ = Http::new(upstream, None).unwrap();
        let up = Upstream {
            base: upstream.trim_end_matches('/').to_string(),
            client: reqwest::Client::builder()
                .tcp_nodelay(true)
                .build()
                .unwrap(),
        };
        let app = Router::new()
            .fallback(forward)
            .layer(axum::extract::DefaultBodyLimit::max(512 << 20))
            .with_state(up);
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
        LimitHidingProxy { url, task }
    }
}

/// Remove the fields that publish a context limit.
fn hide_limit(v: &mut Value) {
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
}

async fn forward(
    axum::extract::State(up): axum::extract::State<Upstream>,
    method: axum::http::Method,
    uri: axum::http::Uri,
    headers: axum::http::HeaderMap,
    body: bytes::Bytes,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    let path = uri.path_and_query().map(|p| p.as_str()).unwrap_or("/");
    let mut rb = up
        .client
        .request(
            reqwest::Method::from_bytes(method.as_str().as_bytes()).unwrap(),
            format!("{}{path}", up.base),
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
    let ct = resp
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    if matches!(
        uri.path(),
        "/server_info" | "/get_server_info" | "/v1/models"
    ) && (200..300).contains(&status)
    {
        let mut v: Value = resp.json().await.unwrap();
        hide_limit(&mut v);
        return axum::Json(v).into_response();
    }
    let mut out = axum::http::Response::builder().status(status);
    if let Some(ct) = ct {
        out = out.header("content-type", ct);
    }
    out.body(axum::body::Body::from_stream(resp.bytes_stream()))
        .unwrap()
}
