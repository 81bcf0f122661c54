//! The scheduler in real time: one OS thread steps it and sleeps to each step's absolute
//! end (the OS timer, not the async runtime's millisecond wheel, so steps land within tens
//! of microseconds), then hands each request its tokens over a channel. Requests join
//! and leave through a shared lock held only for bookkeeping, never across a sleep.

use super::scheduler::{Emission, EngineConfig, NewRequest, Scheduler, Step};
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

/// Longest single sleep, so shutdown is seen promptly even during a long prefill step.
const SLEEP_SLICE: Duration = Duration::from_millis(50);
/// Step timings kept for `step_timings` (the most recent).
const MAX_TIMING_SAMPLES: usize = 100_000;

struct Inner {
    sched: Scheduler,
    outputs: HashMap<u64, mpsc::UnboundedSender<Emission>>,
    next_id: u64,
}

struct Shared {
    inner: Mutex<Inner>,
    wake: Condvar,
    epoch: Instant,
    stopping: AtomicBool,
    timings: Mutex<VecDeque<StepTiming>>,
}

/// How one step went in real time.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StepTiming {
    /// How late the engine woke for the step's end, s.
    pub late_s: f64,
    /// The engine's own work for the step (delivering its outputs, planning the next), s.
    pub busy_s: f64,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn now_s(&self) -> f64 {
        self.epoch.elapsed().as_secs_f64()
    }
}

/// A running engine; its thread ends when it is stopped or dropped.
pub struct Engine {
    shared: Arc<Shared>,
}

/// A submitted request: its outputs arrive on `outputs`; dropping it cancels the request.
pub struct Ticket {
    pub id: u64,
    pub outputs: mpsc::UnboundedReceiver<Emission>,
    shared: Arc<Shared>,
    done: bool,
}

impl Ticket {
    /// The request finished: nothing to cancel on drop.
    pub fn finish(&mut self) {
        self.done = true;
    }
}

impl Drop for Ticket {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        let now = self.shared.now_s();
        let mut inner = self.shared.lock();
        inner.outputs.remove(&self.id);
        inner.sched.abort(self.id, now);
        drop(inner);
        self.shared.wake.notify_one();
    }
}

/// What a request asks of the engine.
pub struct Submit {
    pub prompt: Vec<u32>,
    pub max_tokens: u64,
    pub target_tokens: u64,
    pub arrived: Instant,
    pub seed: u64,
}

impl Engine {
    pub fn start(config: EngineConfig) -> Engine {
        let shared = Arc::new(Shared {
            inner: Mutex::new(Inner {
                sched: Scheduler::new(config),
                outputs: HashMap::new(),
                next_id: 0,
            }),
            wake: Condvar::new(),
            epoch: Instant::now(),
            stopping: AtomicBool::new(false),
            timings: Mutex::new(VecDeque::new()),
        });
        let thread_shared = Arc::clone(&shared);
        std::thread::Builder::new()
            .name("ctxbench-sim-engine".to_string())
            .spawn(move || step_loop(&thread_shared))
            .expect("the engine thread starts");
        Engine { shared }
    }

    /// Seconds on the engine clock (since it started).
    pub fn now_s(&self) -> f64 {
        self.shared.now_s()
    }

    /// An instant on the engine clock (0 for instants before it started).
    pub fn at_s(&self, t: Instant) -> f64 {
        t.saturating_duration_since(self.shared.epoch).as_secs_f64()
    }

    pub fn submit(&self, req: Submit) -> Ticket {
        let (tx, rx) = mpsc::unbounded_channel();
        let arrival_s = self.at_s(req.arrived);
        let mut inner = self.shared.lock();
        let id = inner.next_id;
        inner.next_id += 1;
        inner.outputs.insert(id, tx);
        inner.sched.submit(NewRequest {
            id,
            prompt: req.prompt,
            max_tokens: req.max_tokens,
            target_tokens: req.target_tokens,
            arrival_s,
            seed: req.seed,
        });
        drop(inner);
        self.shared.wake.notify_one();
        Ticket {
            id,
            outputs: rx,
            shared: Arc::clone(&self.shared),
            done: false,
        }
    }

    /// Read or change the scheduler (metrics, flush, pool resize) under its lock.
    pub fn with<R>(&self, f: impl FnOnce(&mut Scheduler, f64) -> R) -> R {
        let now = self.now_s();
        let r = f(&mut self.shared.lock().sched, now);
        self.shared.wake.notify_one();
        r
    }

    /// Real-time figures of recent steps, most recent last.
    pub fn step_timings(&self) -> Vec<StepTiming> {
        self.timings().iter().copied().collect()
    }

    pub fn clear_step_timings(&self) {
        self.timings().clear();
    }

    fn timings(&self) -> MutexGuard<'_, VecDeque<StepTiming>> {
        self.shared
            .timings
            .lock()
            .unwrap_or_else(|p| p.into_inner())
    }

    /// Stop stepping; every request's output channel closes.
    pub fn stop(&self) {
        self.shared.stopping.store(true, Ordering::SeqCst);
        self.shared.wake.notify_all();
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        self.stop();
    }
}

fn step_loop(shared: &Shared) {
    let mut last_end = 0.0;
    let mut woke: Option<(Instant, f64)> = None;
    loop {
        let Some((step, planned)) = next_step(shared, last_end) else {
            shared.lock().outputs.clear();
            return;
        };
        if let Some((at, late_s)) = woke.take() {
            // Delivery of the last step, then planning this one (idle waits excluded).
            let busy_s = (planned - at).as_secs_f64();
            let mut timings = shared.timings.lock().unwrap_or_else(|p| p.into_inner());
            if timings.len() >= MAX_TIMING_SAMPLES {
                timings.pop_front();
            }
            timings.push_back(StepTiming { late_s, busy_s });
        }
        let due = shared.epoch + Duration::from_secs_f64(step.end_s.max(0.0));
        if !sleep_until(shared, due) {
            continue;
        }
        let now = Instant::now();
        woke = Some((now, now.saturating_duration_since(due).as_secs_f64()));
        last_end = step.end_s;
        deliver(shared, step);
    }
}

/// Wait until a step can run and plan it; `None` once stopping. Also says when the plan
/// was made.
fn next_step(shared: &Shared, last_end: f64) -> Option<(Step, Instant)> {
    let mut inner = shared.lock();
    loop {
        if shared.stopping.load(Ordering::SeqCst) {
            return None;
        }
        let start = inner.sched.next_start(last_end);
        if let Some(step) = inner.sched.begin_step(start) {
            return Some((step, Instant::now()));
        }
        inner = shared
            .wake
            .wait_timeout(inner, SLEEP_SLICE)
            .unwrap_or_else(|p| p.into_inner())
            .0;
    }
}

fn deliver(shared: &Shared, step: Step) {
    let end = step.end_s;
    let mut inner = shared.lock();
    let outputs = inner.sched.end_step(step);
    let mut gone = Vec::new();
    for em in outputs {
        let Some(tx) = inner.outputs.get(&em.id) else {
            continue;
        };
        if tx.send(em).is_err() {
            gone.push(em.id);
        } else if em.finished {
            inner.outputs.remove(&em.id);
        }
    }
    for id in gone {
        inner.outputs.remove(&id);
        inner.sched.abort(id, end);
    }
}

/// Sleep to `due`; false when stopping first.
fn sleep_until(shared: &Shared, due: Instant) -> bool {
    loop {
        if shared.stopping.load(Ordering::SeqCst) {
            return false;
        }
        let now = Instant::now();
        if now >= due {
            return true;
        }
        std::thread::sleep((due - now).min(SLEEP_SLICE));
    }
}
