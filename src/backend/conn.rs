//! Which requests opened a connection, and how long connecting took: a layer on the HTTP
//! client's connector, so TTFT's clock can start when the request is handed to a ready
//! connection and each sample can say whether its connection was new.
//!
//! Attribution is by the count of connections made during a request's send, which is exact
//! for the sweep's one-request-at-a-time measuring.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::time::Instant;

/// Connections made so far and the last one's timing.
#[derive(Debug, Default)]
pub struct ConnLog {
    inner: Mutex<Made>,
}

#[derive(Debug, Default, Clone, Copy)]
struct Made {
    count: u64,
    last_connect: Duration,
    last_ready: Option<Instant>,
}

/// The connection one request went out on.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ConnUse {
    /// Opened for this request (not taken from the keep-alive pool).
    pub new: bool,
    /// TCP (and TLS) connect time, for a new connection.
    pub connect: Option<Duration>,
    /// When the new connection was ready.
    pub ready_at: Option<Instant>,
}

impl ConnLog {
    fn made(&self) -> Made {
        *self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A mark to take before sending.
    pub fn mark(&self) -> u64 {
        self.made().count
    }

    /// What the request sent since `mark` went out on.
    pub fn since(&self, mark: u64) -> ConnUse {
        let m = self.made();
        let new = m.count > mark;
        ConnUse {
            new,
            connect: new.then_some(m.last_connect),
            ready_at: if new { m.last_ready } else { None },
        }
    }

    fn record(&self, took: Duration, ready: Instant) {
        let mut m = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        m.count += 1;
        m.last_connect = took;
        m.last_ready = Some(ready);
    }
}

/// The connector layer that feeds a `ConnLog`.
#[derive(Clone)]
pub struct TrackLayer(pub Arc<ConnLog>);

impl<S> tower_layer::Layer<S> for TrackLayer {
    type Service = Track<S>;
    fn layer(&self, inner: S) -> Track<S> {
        Track {
            inner,
            log: Arc::clone(&self.0),
        }
    }
}

#[derive(Clone)]
pub struct Track<S> {
    inner: S,
    log: Arc<ConnLog>,
}

impl<S, R> tower_service::Service<R> for Track<S>
where
    S: tower_service::Service<R>,
    S::Future: Send + 'static,
    S::Response: Send + 'static,
    S::Error: Send + 'static,
{
    type Response = S::Response;
    type Error = S::Error;
    type Future = Pin<Box<dyn Future<Output = Result<S::Response, S::Error>> + Send>>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), S::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: R) -> Self::Future {
        let log = Arc::clone(&self.log);
        let fut = self.inner.call(req);
        Box::pin(async move {
            let start = Instant::now();
            let out = fut.await;
            if out.is_ok() {
                let ready = Instant::now();
                log.record(ready - start, ready);
            }
            out
        })
    }
}
