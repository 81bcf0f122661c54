//! Which requests opened a connection, and how long connecting took: a layer on the HTTP
//! client's connector, so TTFT's clock can start when the request is handed to a ready
//! connection and each sample can say whether its connection was new.
//!
//! Whether a request's connection was new comes from its local address (the transport's
//! `HttpInfo` on the response) together with the connector's count: a connection was made
//! during the send, and no measured request has come back over that address before. Connect time and the ready instant come from the connector and are
//! attributed only to a send that had the client to itself (no other send in flight while
//! it connected), since the connector cannot say which request a connection was made for.

use hyper_util::client::legacy::connect::{Connection, HttpInfo};
use std::collections::HashSet;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::time::Instant;

/// Connections made so far and the last one's timing, and the sends in flight.
#[derive(Debug, Default)]
pub struct ConnLog {
    inner: Mutex<Made>,
}

#[derive(Debug, Default)]
struct Made {
    count: u64,
    last_connect: Duration,
    last_ready: Option<Instant>,
    /// Sends begun so far, and those not yet answered.
    sends: u64,
    in_flight: u64,
    /// Local addresses of connections a response has come back on.
    seen: HashSet<SocketAddr>,
    /// Connects begun and not yet ended (a connect a request stopped waiting for goes on in
    /// the background and ends in the pool).
    connecting: u64,
    /// Local addresses of connections made since the last `note_warmed`.
    made_since_warm: Vec<SocketAddr>,
}

/// Taken as a send begins; hand it back with [`ConnLog::finish`] or [`ConnLog::abandon`].
#[derive(Debug)]
pub struct Mark {
    count: u64,
    sends: u64,
    others_in_flight: u64,
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
    fn lock(&self) -> std::sync::MutexGuard<'_, Made> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A send begins.
    pub fn begin(&self) -> Mark {
        let mut m = self.lock();
        m.sends += 1;
        m.in_flight += 1;
        Mark {
            count: m.count,
            sends: m.sends,
            others_in_flight: m.in_flight - 1,
        }
    }

    /// A send that got no response (it is retried or has failed).
    pub fn abandon(&self, _mark: Mark) {
        let mut m = self.lock();
        m.in_flight = m.in_flight.saturating_sub(1);
    }

    /// The response to the send of `mark` came back over the connection at `local`.
    pub fn finish(&self, mark: Mark, local: Option<SocketAddr>) -> ConnUse {
        let mut m = self.lock();
        m.in_flight = m.in_flight.saturating_sub(1);
        let made_since = m.count - mark.count;
        // A connection is new to this send when one was made during it and its address had
        // not carried a measured request before (other requests — health checks, probes —
        // also open connections that a later send reuses).
        let new = made_since > 0 && local.is_none_or(|addr| m.seen.insert(addr));
        if let Some(addr) = local {
            m.seen.insert(addr);
        }
        // Alone: nobody else was sending, so the one connection made is this send's.
        let alone = mark.others_in_flight == 0 && m.sends == mark.sends && made_since == 1;
        ConnUse {
            new,
            connect: (new && alone).then_some(m.last_connect),
            ready_at: if new && alone { m.last_ready } else { None },
        }
    }

    /// Every connection made so far was warmed (one whose connect a warm-up request stopped
    /// waiting for ended idle in the pool without carrying it): a later send over one is
    /// not on a new connection.
    /// Returns the local addresses of the connections made since the last call.
    pub fn note_warmed(&self) -> Vec<SocketAddr> {
        let mut m = self.lock();
        let made = std::mem::take(&mut m.made_since_warm);
        m.seen.extend(made.iter().copied());
        made
    }

    /// Connects begun and not yet ended.
    pub fn connecting(&self) -> u64 {
        self.lock().connecting
    }

    fn record(&self, took: Duration, ready: Instant, local: Option<SocketAddr>) {
        let mut m = self.lock();
        m.made_since_warm.extend(local);
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
    S::Response: Connection + Send + 'static,
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
        let connecting = Connecting::begin(Arc::clone(&self.log));
        Box::pin(async move {
            let _connecting = connecting;
            let start = Instant::now();
            let out = fut.await;
            if let Ok(conn) = &out {
                let ready = Instant::now();
                log.record(ready - start, ready, local_addr(conn));
            }
            out
        })
    }
}

/// A connection's local address, from what its connector attached to it.
fn local_addr(conn: &impl Connection) -> Option<SocketAddr> {
    let mut extensions = http::Extensions::new();
    conn.connected().get_extras(&mut extensions);
    extensions.get::<HttpInfo>().map(|i| i.local_addr())
}

/// One connect in progress, counted in its log until it ends (made, failed or dropped).
struct Connecting(Arc<ConnLog>);

impl Connecting {
    fn begin(log: Arc<ConnLog>) -> Self {
        log.lock().connecting += 1;
        Connecting(log)
    }
}

impl Drop for Connecting {
    fn drop(&mut self) {
        let mut m = self.0.lock();
        m.connecting = m.connecting.saturating_sub(1);
    }
}
