//! The closed loop: `concurrency` workers, each taking its next job when its previous
//! request ended. Load runs it over a request budget; the sweep is its concurrency-1 case
//! over jobs its record handler releases one by one.

use super::jobs::Jobs;
use super::slot::{InFlight, Slot, rethrow, timed};
use std::future::Future;
use std::sync::Arc;
use tokio::sync::mpsc;
use tokio::task::JoinSet;
use tokio::time::Instant;

/// Run every job of `jobs` as `send(slot, job)`, whose output goes to `tx` (to the
/// collector). Returns when every worker has finished.
pub async fn run_jobs<J, T, F, Fut>(
    concurrency: usize,
    jobs: J,
    start: Instant,
    in_flight: InFlight,
    send: F,
    tx: mpsc::UnboundedSender<T>,
) where
    J: Jobs,
    T: Send + 'static,
    F: Fn(Slot, J::Job) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = T> + Send + 'static,
{
    let (send, jobs) = (Arc::new(send), Arc::new(jobs));
    let mut workers = JoinSet::new();
    for _ in 0..concurrency.max(1) {
        let (send, tx, jobs, in_flight) =
            (send.clone(), tx.clone(), jobs.clone(), in_flight.clone());
        workers.spawn(async move {
            loop {
                let now = start.elapsed();
                let Some((index, job)) = jobs.next(now).await else {
                    break;
                };
                let slot = Slot {
                    index,
                    scheduled: now,
                    sent: if J::WAITS { start.elapsed() } else { now },
                    start,
                };
                let out = timed(&in_flight, send(slot, job)).await;
                if tx.send(out).is_err() {
                    break;
                }
            }
        });
    }
    // A worker that panicked must not end the loop as if its jobs were done.
    while let Some(done) = workers.join_next().await {
        rethrow(done);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::Budget;
    use crate::run::jobs::{Counted, Released};
    use std::time::Duration;

    /// Each released job is sent, in order, carrying what the handler had seen when it
    /// released it; the loop ends when the handler stops releasing.
    #[tokio::test(start_paused = true)]
    async fn released_jobs_run_in_order_until_the_handler_stops() {
        let (release, jobs) = Released::<u64>::new();
        let (tx, mut rx) = mpsc::unbounded_channel::<(u64, u64)>();
        release.send(0).unwrap();
        let send = |slot: Slot, seen: u64| async move {
            tokio::time::sleep(Duration::from_millis(5)).await;
            (slot.index, seen)
        };
        let runner = run_jobs(1, jobs, Instant::now(), InFlight::default(), send, tx);
        let handler = async move {
            let (mut handled, mut release, mut out) = (0, Some(release), Vec::new());
            while let Some(r) = rx.recv().await {
                handled += 1;
                out.push(r);
                match &release {
                    Some(tx) if handled < 5 => tx.send(handled).unwrap(),
                    _ => release = None,
                }
            }
            out
        };
        let ((), out) = tokio::join!(runner, handler);
        assert_eq!(out, vec![(0, 0), (1, 1), (2, 2), (3, 3), (4, 4)]);
    }

    #[tokio::test]
    #[should_panic(expected = "the request panicked")]
    async fn a_panicking_request_is_not_taken_for_a_finished_loop() {
        let (tx, _rx) = mpsc::unbounded_channel::<()>();
        let send = |_: Slot, ()| async { panic!("the request panicked") };
        let jobs = Counted::new(Budget::Requests(3));
        run_jobs(2, jobs, Instant::now(), InFlight::default(), send, tx).await;
    }
}
