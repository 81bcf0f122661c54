//! Drives requests: closed loop (N workers, each sending its next request when the previous
//! ends) or open loop (absolute send times, optionally capped). Every request is sent and
//! accounted for; a late send is recorded as late, never shifted or dropped.

use super::chains::Chains;
use super::closed::run_jobs;
use super::jobs::Counted;
pub use super::slot::{Budget, InFlight, Slot};
use super::slot::{rethrow, timed};
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{Semaphore, mpsc};
use tokio::task::JoinSet;
use tokio::time::Instant;

/// How requests are offered.
#[derive(Debug, Clone)]
pub enum Load {
    /// `concurrency` workers back to back.
    Closed { concurrency: usize },
    /// Send offsets from the start (see `schedule::schedule`); with a cap, a request that
    /// finds `max_concurrency` in flight waits for a slot (its lateness is recorded). With
    /// chains, a request that waits on another is sent its delay after that one ended, and
    /// its offset in `at` is not used.
    Open {
        at: Vec<Duration>,
        max_concurrency: Option<usize>,
        pacing: Pacing,
        chains: Option<Arc<Chains>>,
    },
}

/// What keeps an open loop's send times.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Pacing {
    /// The runtime's timer: 1 ms ticks, too coarse for send times, but it follows paused
    /// time (tests).
    Timer,
    /// A thread of its own that sleeps with the OS's high-resolution timer to `spin`
    /// before each send, spins to it, and starts the request on the runtime. Nothing it
    /// does competes with the requests in flight for a worker.
    Thread { spin: Duration },
}

/// Run one cell: every request is `send(slot)`, whose output goes to `tx` (to the
/// collector). Returns when every request has finished.
pub async fn run<T, F, Fut>(
    load: Load,
    budget: Budget,
    start: Instant,
    in_flight: InFlight,
    send: F,
    tx: mpsc::UnboundedSender<T>,
) where
    T: Send + 'static,
    F: Fn(Slot) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = T> + Send + 'static,
{
    let send = Arc::new(send);
    match load {
        Load::Closed { concurrency } => {
            let jobs = Counted::new(budget);
            let send = move |slot, ()| (*send)(slot);
            run_jobs(concurrency, jobs, start, in_flight, send, tx).await;
        }
        Load::Open {
            at,
            max_concurrency,
            pacing,
            chains,
        } => {
            let cap = max_concurrency.map(|n| Arc::new(Semaphore::new(n.max(1))));
            let chains = chains.unwrap_or_default();
            let roots: Vec<(usize, Duration)> = (at.iter().copied().enumerate())
                .filter(|(i, _)| chains.is_root(*i))
                .collect();
            // A root and then each request that waits on the one before it, in one task.
            let request = move |i: usize, offset: Duration| {
                let (send, tx, cap, in_flight, chains) = (
                    send.clone(),
                    tx.clone(),
                    cap.clone(),
                    in_flight.clone(),
                    chains.clone(),
                );
                async move {
                    let (mut i, mut offset) = (i, offset);
                    loop {
                        // Semaphore permits are granted in FIFO order: capped requests keep
                        // their schedule order.
                        let permit = match &cap {
                            Some(c) => c.clone().acquire_owned().await.ok(),
                            None => None,
                        };
                        let slot = Slot {
                            index: i as u64,
                            scheduled: offset,
                            sent: start.elapsed(),
                            start,
                        };
                        let out = timed(&in_flight, send(slot)).await;
                        drop(permit);
                        let _ = tx.send(out);
                        let Some((k, delay)) = chains.next(i) else {
                            break;
                        };
                        tokio::time::sleep(delay).await;
                        (i, offset) = (k, start.elapsed());
                    }
                }
            };
            match pacing {
                Pacing::Timer => {
                    let mut tasks = JoinSet::new();
                    for (i, offset) in roots {
                        tokio::time::sleep_until(start + offset).await;
                        tasks.spawn(request(i, offset));
                        while tasks.try_join_next().is_some() {}
                    }
                    while let Some(done) = tasks.join_next().await {
                        rethrow(done);
                    }
                }
                Pacing::Thread { spin } => {
                    let runtime = tokio::runtime::Handle::current();
                    let start_std = start.into_std();
                    let paced = tokio::task::spawn_blocking(move || {
                        roots
                            .into_iter()
                            .map(|(i, offset)| {
                                pace(start_std + offset, spin);
                                runtime.spawn(request(i, offset))
                            })
                            .collect::<Vec<_>>()
                    })
                    .await;
                    for t in rethrow(paced).unwrap_or_default() {
                        rethrow(t.await);
                    }
                }
            }
        }
    }
}

/// Block this thread until `due`: an OS sleep to `spin` before it, then a spin.
fn pace(due: std::time::Instant, spin: Duration) {
    if let Some(early) = due.checked_sub(spin) {
        let now = std::time::Instant::now();
        if now < early {
            std::thread::sleep(early - now);
        }
    }
    while std::time::Instant::now() < due {
        std::hint::spin_loop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type Served = std::pin::Pin<Box<dyn Future<Output = (Slot, Duration, Duration)> + Send>>;

    /// A fake server that takes `cost` per request, serving at most `servers` at once.
    fn fake(cost: Duration, servers: usize) -> impl Fn(Slot) -> Served + Send + Sync + 'static {
        let sem = Arc::new(Semaphore::new(servers));
        move |slot: Slot| -> Served {
            let sem = sem.clone();
            Box::pin(async move {
                let _p = sem.acquire().await.unwrap();
                let began = slot.start.elapsed();
                tokio::time::sleep(cost).await;
                (slot, began, slot.start.elapsed())
            })
        }
    }

    /// Run `load` against `fake(cost, servers)`: each request's slot, service start and end,
    /// in send order.
    async fn served(
        load: Load,
        budget: Budget,
        cost: Duration,
        servers: usize,
    ) -> Vec<(Slot, Duration, Duration)> {
        let (tx, mut rx) = mpsc::unbounded_channel();
        let (start, in_flight) = (Instant::now(), InFlight::default());
        run(load, budget, start, in_flight, fake(cost, servers), tx).await;
        let mut v = Vec::new();
        while let Some(x) = rx.recv().await {
            v.push(x);
        }
        v.sort_by_key(|o| o.0.index);
        v
    }

    /// `n` sends 10 ms apart.
    fn open_every_10ms(n: u64, max_concurrency: Option<usize>) -> Load {
        Load::Open {
            at: (0..n).map(|i| Duration::from_millis(10 * i)).collect(),
            max_concurrency,
            pacing: Pacing::Timer,
            chains: None,
        }
    }

    #[tokio::test(start_paused = true)]
    async fn closed_loop_keeps_n_in_flight_and_sends_every_request() {
        let closed = Load::Closed { concurrency: 4 };
        let out = served(
            closed,
            Budget::Requests(10),
            Duration::from_millis(100),
            100,
        )
        .await;
        assert_eq!(out.len(), 10);
        let sends: Vec<u64> = out.iter().map(|o| o.0.sent.as_millis() as u64).collect();
        assert_eq!(sends, vec![0, 0, 0, 0, 100, 100, 100, 100, 200, 200]);
    }

    #[tokio::test(start_paused = true)]
    async fn open_loop_sends_on_schedule_even_when_the_server_is_slow() {
        let out = served(
            open_every_10ms(20, None),
            Budget::Requests(0),
            Duration::from_millis(500),
            1,
        )
        .await;
        assert_eq!(out.len(), 20);
        for (slot, _, _) in &out {
            assert_eq!(
                slot.sent, slot.scheduled,
                "open loop never waits for the server"
            );
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn the_pacing_thread_sends_every_request_and_never_early() {
        let load = Load::Open {
            at: (0..20).map(|i| Duration::from_micros(500 * i)).collect(),
            max_concurrency: None,
            pacing: Pacing::Thread {
                spin: Duration::from_micros(200),
            },
            chains: None,
        };
        let out = served(load, Budget::Requests(0), Duration::from_millis(5), 100).await;
        let indices: Vec<u64> = out.iter().map(|o| o.0.index).collect();
        assert_eq!(indices, (0..20).collect::<Vec<_>>());
        for (slot, _, _) in &out {
            assert!(slot.sent >= slot.scheduled, "{slot:?}");
        }
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    #[should_panic(expected = "the request panicked")]
    async fn a_panicking_open_loop_request_is_not_taken_for_a_finished_one() {
        let (tx, _rx) = mpsc::unbounded_channel::<()>();
        let load = Load::Open {
            at: vec![Duration::ZERO; 3],
            max_concurrency: None,
            pacing: Pacing::Thread {
                spin: Duration::from_micros(200),
            },
            chains: None,
        };
        let send = |_: Slot| async { panic!("the request panicked") };
        run(
            load,
            Budget::Requests(0),
            Instant::now(),
            InFlight::default(),
            send,
            tx,
        )
        .await;
    }

    #[tokio::test(start_paused = true)]
    async fn a_cap_delays_sends_and_the_delay_is_recorded() {
        let out = served(
            open_every_10ms(6, Some(2)),
            Budget::Requests(0),
            Duration::from_millis(100),
            100,
        )
        .await;
        let late: Vec<u64> = out
            .iter()
            .map(|o| (o.0.sent - o.0.scheduled).as_millis() as u64)
            .collect();
        // Slots free at 100, 110, 200, 210: requests 2..5 wait for them, in order.
        assert_eq!(late, vec![0, 0, 80, 80, 160, 160]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_chained_request_goes_its_delay_after_its_predecessor_ended() {
        let ms = Duration::from_millis;
        let chains = Chains::new(&[None, None, Some((0, ms(50))), Some((2, ms(5)))]).unwrap();
        let load = Load::Open {
            // The waiting requests' own times are not used.
            at: vec![ms(0), ms(10), ms(0), ms(0)],
            max_concurrency: None,
            pacing: Pacing::Timer,
            chains: Some(Arc::new(chains)),
        };
        let out = served(load, Budget::Requests(0), ms(100), 100).await;
        let sent: Vec<u64> = out.iter().map(|o| o.0.sent.as_millis() as u64).collect();
        // 0 ends at 100, 2 goes at 150 and ends at 250, 3 goes at 255.
        assert_eq!(sent, vec![0, 10, 150, 255]);
        assert!(
            out.iter().all(|o| o.0.sent == o.0.scheduled),
            "none waited for a slot"
        );
    }
}
