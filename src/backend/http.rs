//! HTTP plumbing shared by every backend: one client, credentials kept out of messages,
//! server errors turned into `RequestError`s, and a streaming reader that timestamps bytes
//! the moment they arrive.

use super::RequestError;
use super::conn::{ConnLog, ConnUse, TrackLayer};
use super::sse::{ItemRef, SseBatch, SseParser};
use futures::StreamExt;
use serde_json::Value;
use std::sync::{Arc, OnceLock};
use std::time::Duration;
use tokio::time::Instant;

#[path = "http_text.rs"]
mod text;
pub use text::{error_message, mentions_context_limit, strip_credentials};
use text::{is_stale_connection, whole_body_kind, without_url};

/// The client all requests of a run go through.
#[derive(Clone)]
pub struct Http {
    client: reqwest::Client,
    /// As given, credentials included (reqwest sends them as basic auth).
    raw_base: String,
    /// Credentials removed: the only form that reaches messages.
    base: String,
    api_key: Option<String>,
    /// The URL's password, when it has one long enough to redact safely.
    url_password: Option<String>,
    /// Connections the client made, for per-request new/reused and connect time.
    conns: Arc<ConnLog>,
    /// Sent on every request of this handle (`sessions --session-header`).
    headers: reqwest::header::HeaderMap,
}

/// What `warm` asks for: a cheap route every supported server answers quickly (those
/// without it answer 404, which warms the connection all the same).
const WARM_PATH: &str = "/health";
/// How long a finished stream's body end is waited for, so its connection is kept.
const DRAIN_GRACE: Duration = Duration::from_millis(100);
/// Passes `warm` makes at most, and the pause between them.
const WARM_PASSES: usize = 4;
const WARM_SETTLE: Duration = Duration::from_millis(2);

impl Http {
    pub fn new(base_url: &str, api_key: Option<String>) -> anyhow::Result<Self> {
        Self::with_pool(base_url, api_key, true)
    }

    /// `keep_alive: false` opens a fresh connection for every request (`--fresh-connection`):
    /// slower by one connect, but immune to transport delays on reused connections.
    pub fn with_pool(
        base_url: &str,
        api_key: Option<String>,
        keep_alive: bool,
    ) -> anyhow::Result<Self> {
        install_crypto_provider();
        let conns = Arc::new(ConnLog::default());
        let mut builder = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            // Below the usual 5 s server keep-alive, so idle connections are dropped by us first.
            .pool_idle_timeout(Duration::from_secs(3))
            .tcp_nodelay(true)
            .connector_layer(TrackLayer(Arc::clone(&conns)));
        if !keep_alive {
            builder = builder.pool_max_idle_per_host(0);
        }
        let client = builder.build()?;
        let base = base_url.trim_end_matches('/').to_string();
        let url_password = reqwest::Url::parse(&base)
            .ok()
            .and_then(|u| u.password().map(str::to_string))
            .filter(|p| p.len() >= 4);
        Ok(Http {
            client,
            base: strip_credentials(&base),
            raw_base: base,
            api_key: api_key.filter(|k| !k.is_empty()),
            url_password,
            conns,
            headers: reqwest::header::HeaderMap::new(),
        })
    }

    /// This client (the same connection pool) sending `name: value` on every request, as a
    /// session-affine router expects of one conversation's requests.
    pub fn with_header(&self, name: &str, value: &str) -> Result<Http, String> {
        let name = reqwest::header::HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| format!("`{name}` is not an HTTP header name"))?;
        let value = reqwest::header::HeaderValue::from_str(value)
            .map_err(|_| format!("`{value}` is not an HTTP header value"))?;
        let mut h = self.clone();
        h.headers.insert(name, value);
        Ok(h)
    }

    /// The base URL without credentials (for messages).
    pub fn base(&self) -> &str {
        &self.base
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{}", self.raw_base, path)
    }

    /// Remove the API key from any text that may reach output (servers echo headers).
    /// Also removes the URL's credentials.
    pub fn redact(&self, text: &str) -> String {
        let mut out = text.replace(self.raw_base.as_str(), &self.base);
        for secret in [&self.api_key, &self.url_password].into_iter().flatten() {
            if secret.len() >= 4 {
                out = out.replace(secret.as_str(), "[redacted]");
            }
        }
        out
    }

    /// `redact` applied to every message an error carries.
    pub fn redact_error(&self, e: RequestError) -> RequestError {
        let r = |m: String| self.redact(&m);
        match e {
            RequestError::Connect(m) => RequestError::Connect(r(m)),
            RequestError::Http { status, message } => RequestError::Http {
                status,
                message: r(message),
            },
            RequestError::ContextExceeded(m) => RequestError::ContextExceeded(r(m)),
            RequestError::Reset(m) => RequestError::Reset(r(m)),
            RequestError::Malformed { offset, message } => RequestError::Malformed {
                offset,
                message: r(message),
            },
            RequestError::ServerEvent(m) => RequestError::ServerEvent(r(m)),
            RequestError::NotStreamed(m) => RequestError::NotStreamed(r(m)),
            RequestError::Prompt(m) => RequestError::Prompt(r(m)),
            e @ (RequestError::Timeout(_) | RequestError::Incomplete) => e,
        }
    }

    fn request(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        let mut rb = self.client.request(method, self.url(path));
        if !self.headers.is_empty() {
            rb = rb.headers(self.headers.clone());
        }
        match &self.api_key {
            Some(k) => rb.bearer_auth(k),
            None => rb,
        }
    }

    fn connect_error(&self, e: reqwest::Error) -> RequestError {
        RequestError::Connect(self.redact(&without_url(&e)))
    }

    /// GET a JSON document; `Ok(None)` when the route does not exist (404/405).
    pub async fn get_json(
        &self,
        path: &str,
        timeout: Duration,
    ) -> Result<Option<Value>, RequestError> {
        let resp = tokio::time::timeout(timeout, self.request(reqwest::Method::GET, path).send())
            .await
            .map_err(|_| RequestError::Timeout(timeout.as_secs_f64()))?
            .map_err(|e| self.connect_error(e))?;
        let status = resp.status();
        if status == 404 || status == 405 {
            return Ok(None);
        }
        let body = tokio::time::timeout(timeout, resp.bytes())
            .await
            .map_err(|_| RequestError::Timeout(timeout.as_secs_f64()))?
            .map_err(|e| RequestError::Reset(self.redact(&without_url(&e))))?;
        if !status.is_success() {
            return Err(self.status_error(status.as_u16(), &body));
        }
        Ok(Some(serde_json::from_slice(&body).unwrap_or_else(|_| {
            Value::String(String::from_utf8_lossy(&body).into_owned())
        })))
    }

    /// GET `path` and return the response's `Date` header (any status will do); `None`
    /// when it has none or one that does not parse.
    pub async fn date(
        &self,
        path: &str,
        timeout: Duration,
    ) -> Result<Option<std::time::SystemTime>, RequestError> {
        let resp = tokio::time::timeout(timeout, self.request(reqwest::Method::GET, path).send())
            .await
            .map_err(|_| RequestError::Timeout(timeout.as_secs_f64()))?
            .map_err(|e| self.connect_error(e))?;
        Ok(resp
            .headers()
            .get(reqwest::header::DATE)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| httpdate::parse_http_date(v).ok()))
    }

    /// Send a request and return status and body text (for flushes and small calls).
    pub async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<&Value>,
        timeout: Duration,
    ) -> Result<(u16, String), RequestError> {
        let mut rb = self.request(method, path);
        if let Some(b) = body {
            rb = rb.json(b);
        }
        let work = async {
            let resp = rb.send().await.map_err(|e| self.connect_error(e))?;
            let status = resp.status().as_u16();
            let text = resp
                .text()
                .await
                .map_err(|e| RequestError::Reset(self.redact(&without_url(&e))))?;
            Ok((status, self.redact(&text)))
        };
        tokio::time::timeout(timeout, work)
            .await
            .map_err(|_| RequestError::Timeout(timeout.as_secs_f64()))?
    }

    /// Open `n` connections and leave them idle in the pool, so that `n` requests sent at
    /// once next need no connect: `n` cheap GETs (`WARM_PATH`) at once, each answer read to
    /// its end (any status, a 404 too, leaves its connection open). An answer can hand its
    /// connection to a GET of the same pass whose own connect then ends idle in the pool, so
    /// the connections counted are those that answered or were made, once their connects
    /// have ended; a pass is repeated while fewer than `n`. Returns how many of the `n` are
    /// open.
    ///
    /// A GET that fails does not end the warming: the pool may hold a connection the server
    /// closed after its last answer without saying so (llama-server closes a finished
    /// stream's connection; the warm-up request's, just before a cell, is still pooled when
    /// its close has not been read yet), and a GET sent on it fails with "connection closed
    /// before message completed"; the next pass opens a new one. Only when no connection
    /// could be opened at all is the last error returned.
    pub async fn warm(&self, n: usize, timeout: Duration) -> Result<usize, RequestError> {
        let mut open = std::collections::HashSet::new();
        let mut failed = None;
        for _ in 0..WARM_PASSES {
            let gets = (0..n).map(|_| async {
                let resp = self
                    .request(reqwest::Method::GET, WARM_PATH)
                    .send()
                    .await
                    .map_err(|e| self.connect_error(e))?;
                let local = resp
                    .extensions()
                    .get::<hyper_util::client::legacy::connect::HttpInfo>()
                    .map(|i| i.local_addr());
                resp.bytes().await.map_err(|e| self.reset_error(&e))?;
                Ok::<_, RequestError>(local)
            });
            let answered = tokio::time::timeout(timeout, futures::future::join_all(gets))
                .await
                .map_err(|_| RequestError::Timeout(timeout.as_secs_f64()))?;
            for a in answered {
                match a {
                    Ok(local) => open.extend(local),
                    Err(e) => failed = Some(e),
                }
            }
            // Let the connects this pass began in the background end in the pool before
            // they are counted or the cell's clock starts.
            let settle = tokio::time::Instant::now() + timeout;
            while self.conns.connecting() > 0 && tokio::time::Instant::now() < settle {
                tokio::time::sleep(WARM_SETTLE).await;
            }
            open.extend(self.conns.note_warmed());
            if open.len() >= n {
                break;
            }
        }
        match failed {
            Some(e) if open.is_empty() => Err(e),
            _ => Ok(open.len().min(n)),
        }
    }

    /// POST JSON and read the response as a stream of SSE items, timestamped on arrival.
    /// `on_item` sees each item with the time since the request was sent; it returns
    /// `true` once the response is complete (the final event seen).
    pub async fn post_sse<F>(
        &self,
        path: &str,
        body: &Value,
        deadline: Duration,
        on_item: F,
    ) -> Result<SseEnd, RequestError>
    where
        F: FnMut(Duration, ItemRef<'_>) -> Result<bool, RequestError>,
    {
        let payload = Self::payload(body)?;
        self.post_sse_parts(path, vec![payload], deadline, on_item)
            .await
    }

    /// `post_sse` with the JSON body given as chunks sent one after another (so a large
    /// prompt shared by many requests is never copied per request).
    pub async fn post_sse_parts<F>(
        &self,
        path: &str,
        parts: Vec<bytes::Bytes>,
        deadline: Duration,
        mut on_item: F,
    ) -> Result<SseEnd, RequestError>
    where
        F: FnMut(Duration, ItemRef<'_>) -> Result<bool, RequestError>,
    {
        let work = async {
            let (sent, conn, resp) = self.post_streaming(path, &parts).await?;
            let mut parser = SseParser::new();
            let mut stream = resp.bytes_stream();
            let mut items = SseBatch::default();
            while let Some(chunk) = stream.next().await {
                let at = sent.elapsed();
                let chunk =
                    chunk.map_err(|e| RequestError::Reset(self.redact(&without_url(&e))))?;
                // Servers echo requests in their error events: keep the key out.
                if super::feed(&mut parser, &mut items, &chunk, |item| on_item(at, item))
                    .map_err(|e| self.redact_error(e))?
                {
                    let end = SseEnd {
                        complete: true,
                        elapsed: sent.elapsed(),
                        conn,
                    };
                    return Ok::<_, RequestError>((end, Some(stream)));
                }
            }
            let end = SseEnd {
                complete: false,
                elapsed: sent.elapsed(),
                conn,
            };
            Ok((end, None))
        };
        let (end, rest) = tokio::time::timeout(deadline, work)
            .await
            .map_err(|_| RequestError::Timeout(deadline.as_secs_f64()))??;
        if let Some(rest) = rest {
            drain(rest).await;
        }
        Ok(end)
    }

    /// POST JSON for a streamed answer: when it was sent, and the successful response.
    pub(crate) async fn post_streaming(
        &self,
        path: &str,
        parts: &[bytes::Bytes],
    ) -> Result<(Instant, ConnUse, reqwest::Response), RequestError> {
        let length: usize = parts.iter().map(|p| p.len()).sum();
        // The body as a stream that notes when the connection first asks it for bytes: the
        // moment the request goes onto the wire, after any wait for the connection's task.
        let body = || -> (reqwest::Body, Arc<OnceLock<Instant>>) {
            let polled = Arc::new(OnceLock::new());
            let note = Arc::clone(&polled);
            // The body stream must own its chunks; cloning `Bytes` copies no data.
            let chunks = futures::stream::iter(parts.to_vec()).map(move |c| {
                note.get_or_init(Instant::now);
                Ok::<_, std::io::Error>(c)
            });
            (reqwest::Body::wrap_stream(chunks), polled)
        };
        let mut retried = false;
        let (sent, conn, resp) = loop {
            let mark = self.conns.begin();
            let sent = Instant::now();
            let (body, polled) = body();
            match self
                .request(reqwest::Method::POST, path)
                .header(reqwest::header::CONTENT_TYPE, "application/json")
                .header(reqwest::header::CONTENT_LENGTH, length)
                .body(body)
                .send()
                .await
            {
                Ok(resp) => {
                    // TTFT's clock starts when the request's bytes are handed to a ready
                    // connection: neither a new one's connect time (recorded, not counted)
                    // nor the client's own queue before the write is the server's.
                    let local = resp
                        .extensions()
                        .get::<hyper_util::client::legacy::connect::HttpInfo>()
                        .map(|i| i.local_addr());
                    let conn = self.conns.finish(mark, local);
                    let ready = conn.ready_at.map_or(sent, |r| r.max(sent));
                    let handed = polled.get().map_or(ready, |p| (*p).max(ready));
                    break (handed, conn, resp);
                }
                // A pooled keep-alive connection the server closed just as it was reused:
                // the request never reached it, so sending it once more is safe.
                Err(e) if !retried && is_stale_connection(&e) => {
                    self.conns.abandon(mark);
                    retried = true;
                }
                Err(e) => {
                    self.conns.abandon(mark);
                    return Err(self.connect_error(e));
                }
            }
        };
        let status = resp.status();
        if !status.is_success() {
            let bytes = resp.bytes().await.unwrap_or_default();
            return Err(self.status_error(status.as_u16(), &bytes));
        }
        if let Some(kind) = whole_body_kind(resp.headers()) {
            return Err(RequestError::NotStreamed(kind));
        }
        Ok((sent, conn, resp))
    }

    /// Serialise a request body before any clock starts: a long id list takes a while, and
    /// that is the client's time, not the server's.
    pub(crate) fn payload(body: &Value) -> Result<bytes::Bytes, RequestError> {
        serde_json::to_vec(body)
            .map(bytes::Bytes::from)
            .map_err(|e| RequestError::Prompt(e.to_string()))
    }

    /// A body read that broke off, as a `RequestError` without the URL.
    pub(crate) fn reset_error(&self, e: &reqwest::Error) -> RequestError {
        RequestError::Reset(self.redact(&without_url(e)))
    }

    /// Turn an error status and body into a `RequestError` with the server's own message.
    pub fn status_error(&self, status: u16, body: &[u8]) -> RequestError {
        let message = self.redact(&error_message(body));
        if status == 400 && mentions_context_limit(&message) {
            RequestError::ContextExceeded(message)
        } else {
            RequestError::Http { status, message }
        }
    }
}

/// Read what follows a stream's final event (the body's end, usually in the same packet)
/// for at most `DRAIN_GRACE`: a response dropped before its end closes its connection, and
/// a closed loop's next request would then pay a connect inside its TTFT.
async fn drain<S>(mut rest: S)
where
    S: futures::Stream<Item = reqwest::Result<bytes::Bytes>> + Unpin,
{
    let to_end = async { while let Some(Ok(_)) = rest.next().await {} };
    let _ = tokio::time::timeout(DRAIN_GRACE, to_end).await;
}

/// How a stream ended.
#[derive(Debug, Clone, Copy)]
pub struct SseEnd {
    /// The final event was seen.
    pub complete: bool,
    pub elapsed: Duration,
    /// The connection the request went out on.
    pub conn: ConnUse,
}

fn install_crypto_provider() {
    // Fails only if a provider is already installed, which is what we want anyway.
    let _ = rustls::crypto::ring::default_provider().install_default();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn error_messages_are_extracted() {
        assert_eq!(
            error_message(br#"{"error":{"message":"too big"}}"#),
            "too big"
        );
        assert_eq!(error_message(br#"{"object":"error","message":"m"}"#), "m");
        assert_eq!(error_message(br#"{"detail":"d"}"#), "d");
        assert_eq!(error_message(b"plain text\n"), "plain text");
    }

    #[test]
    fn context_limit_messages_are_recognised() {
        assert!(mentions_context_limit(
            "The input (40000 tokens) is longer than the model's context length (32768 tokens)."
        ));
        assert!(mentions_context_limit(
            "the request exceeds the available context size"
        ));
        assert!(!mentions_context_limit("invalid temperature"));
    }

    #[test]
    fn keys_and_credentials_are_removed() {
        let h = Http::new("http://127.0.0.1:1", Some("sk-canary-123".into())).unwrap();
        assert_eq!(
            h.redact("auth: Bearer sk-canary-123"),
            "auth: Bearer [redacted]"
        );
        assert_eq!(
            strip_credentials("http://u:p@127.0.0.1:8/x"),
            "http://127.0.0.1:8/x"
        );
    }
}
