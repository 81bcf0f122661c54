//! What the runner, the closed loop and the job sources share: a request's slot, the
//! in-flight count, a closed loop's budget, and the task helpers (below all three, so none
//! of them imports another's internals).

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tokio::time::Instant;

/// When a closed loop stops starting requests (an open loop sends its whole schedule).
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Budget {
    Requests(u64),
    Duration(Duration),
}

/// One request as the runner hands it to the sender.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Slot {
    /// 0-based, in send order.
    pub index: u64,
    /// When it should have been sent (open loop), or when its worker was free (closed).
    pub scheduled: Duration,
    /// When it was sent; both since the cell's start.
    pub sent: Duration,
    /// The cell's start, for timing what follows.
    pub start: Instant,
}

/// The client's own count of requests in flight, readable while the cell runs.
#[derive(Debug, Clone, Default)]
pub struct InFlight(Arc<AtomicU64>);

impl InFlight {
    pub fn get(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// A finished task's output; a panic inside it is resumed here, never taken for a request
/// that ended (`None`: cancelled, as when the runtime shuts down).
pub(super) fn rethrow<T>(done: Result<T, tokio::task::JoinError>) -> Option<T> {
    match done {
        Ok(x) => Some(x),
        Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
        Err(_) => None,
    }
}

pub(super) async fn timed<T>(in_flight: &InFlight, work: impl Future<Output = T>) -> T {
    in_flight.0.fetch_add(1, Ordering::Relaxed);
    let out = work.await;
    in_flight.0.fetch_sub(1, Ordering::Relaxed);
    out
}
