//! Where a closed loop's requests come from: a request count or time budget (load), or jobs
//! released one at a time by whoever handles the records (sweep: each next job is made after
//! the previous record was handled, so its deadline learns from the sample before it).

use super::slot::Budget;
use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tokio::sync::{Mutex, mpsc};

/// A closed loop's source of requests, shared by its workers.
pub trait Jobs: Send + Sync + 'static {
    type Job: Send + 'static;
    /// Whether `next` may wait for a job: then a request is sent when its job came, not
    /// when its worker became free.
    const WAITS: bool = false;
    /// The next request's index (0-based, in send order) and job; `None` ends the worker.
    /// `now`: time since the cell's start when the worker became free.
    fn next(&self, now: Duration) -> impl Future<Output = Option<(u64, Self::Job)>> + Send;
}

/// Requests numbered 0, 1, … until the budget is spent.
pub struct Counted {
    next: AtomicU64,
    budget: Budget,
}

impl Counted {
    pub fn new(budget: Budget) -> Self {
        Counted {
            next: AtomicU64::new(0),
            budget,
        }
    }
}

impl Jobs for Counted {
    type Job = ();

    async fn next(&self, now: Duration) -> Option<(u64, ())> {
        let index = self.next.fetch_add(1, Ordering::Relaxed);
        let more = match self.budget {
            Budget::Requests(n) => index < n,
            Budget::Duration(d) => now < d,
        };
        more.then_some((index, ()))
    }
}

/// Jobs sent by the record handler through the paired sender; the loop ends when that
/// sender is dropped.
pub struct Released<J> {
    rx: Mutex<mpsc::UnboundedReceiver<J>>,
    next: AtomicU64,
}

impl<J: Send + 'static> Released<J> {
    pub fn new() -> (mpsc::UnboundedSender<J>, Self) {
        let (tx, rx) = mpsc::unbounded_channel();
        let released = Released {
            rx: Mutex::new(rx),
            next: AtomicU64::new(0),
        };
        (tx, released)
    }
}

impl<J: Send + 'static> Jobs for Released<J> {
    type Job = J;
    const WAITS: bool = true;

    async fn next(&self, _now: Duration) -> Option<(u64, J)> {
        let job = self.rx.lock().await.recv().await?;
        Some((self.next.fetch_add(1, Ordering::Relaxed), job))
    }
}
