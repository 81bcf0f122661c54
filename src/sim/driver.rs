//! The scheduler in real time: one task plans each step, hands every request its outputs
//! stamped with the step's end (each request sleeps to that instant itself), then sleeps to
//! just before the step's absolute end, applies it and plans the next — so the engine's own
//! lateness (the runtime timer's millisecond rounding included) reaches no client unless it
//! exceeds `PLAN_AHEAD`. It runs on the server's runtime, so a step's outputs wake their
//! requests on the same worker without another thread in between. Requests join and leave
//! through a shared lock held only for bookkeeping, never across a sleep.

use super::scheduler::{Emission, EngineConfig, NewRequest, Scheduler, Step};
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use tokio::sync::{Notify, mpsc};

/// How long before a step's end the engine plans the next one. Its own lateness up to
/// this never reaches a client; a request arriving in this window joins one step later.
const PLAN_AHEAD: Duration = Duration::from_millis(5);
/// Step timings kept for `step_timings` (the most recent).
const MAX_TIMING_SAMPLES: usize = 100_000;

struct Inner {
    sched: Scheduler,
    outputs: HashMap<u64, mpsc::UnboundedSender<Emission>>,
    next_id: u64,
}

struct Shared {
    inner: Mutex<Inner>,
    /// New work (a request, a cancel, a resized pool) or a stop.
    wake: Notify,
    epoch: Instant,
    stopping: AtomicBool,
    timings: Mutex<VecDeque<StepTiming>>,
    output_lateness: Mutex<VecDeque<f64>>,
}

/// How one step went in real time.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StepTiming {
    /// How late the engine woke to plan the next step (`PLAN_AHEAD` before this one's
    /// end), s: up to `PLAN_AHEAD` costs clients nothing.
    pub late_s: f64,
    /// The engine's own work for the step (applying it, planning and dispatching the
    /// next), s.
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

/// A running engine; its task ends when it is stopped or dropped.
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
    /// Start stepping on the current tokio runtime.
    pub fn start(config: EngineConfig) -> anyhow::Result<Engine> {
        let runtime = tokio::runtime::Handle::try_current()
            .map_err(|_| anyhow::anyhow!("the simulator engine needs a tokio runtime"))?;
        let shared = Arc::new(Shared {
            inner: Mutex::new(Inner {
                sched: Scheduler::new(config),
                outputs: HashMap::new(),
                next_id: 0,
            }),
            wake: Notify::new(),
            epoch: Instant::now(),
            stopping: AtomicBool::new(false),
            timings: Mutex::new(VecDeque::new()),
            output_lateness: Mutex::new(VecDeque::new()),
        });
        runtime.spawn(step_loop(Arc::clone(&shared)));
        Ok(Engine { shared })
    }

    /// Seconds on the engine clock (since it started).
    pub fn now_s(&self) -> f64 {
        self.shared.now_s()
    }

    /// An instant on the engine clock (0 for instants before it started).
    pub fn at_s(&self, t: Instant) -> f64 {
        t.saturating_duration_since(self.shared.epoch).as_secs_f64()
    }

    /// The instant of engine-clock time `at_s`.
    pub fn instant(&self, at_s: f64) -> Instant {
        self.shared.epoch + Duration::from_secs_f64(at_s.max(0.0))
    }

    /// Note how late an output reached its connection (s), for benches.
    pub fn note_output_lateness(&self, late_s: f64) {
        let mut late = self.output_lateness();
        if late.len() >= MAX_TIMING_SAMPLES {
            late.pop_front();
        }
        late.push_back(late_s);
    }

    /// How late recent outputs reached their connections, s, most recent last.
    pub fn output_lateness_s(&self) -> Vec<f64> {
        self.output_lateness().iter().copied().collect()
    }

    fn output_lateness(&self) -> MutexGuard<'_, VecDeque<f64>> {
        self.shared
            .output_lateness
            .lock()
            .unwrap_or_else(|p| p.into_inner())
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
        self.output_lateness().clear();
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
        self.shared.wake.notify_one();
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        self.stop();
    }
}

async fn step_loop(shared: Arc<Shared>) {
    let mut last_end = 0.0;
    let mut woke: Option<(Instant, f64)> = None;
    loop {
        let Some(step) = next_step(&shared, last_end).await else {
            shared.lock().outputs.clear();
            return;
        };
        // Outputs leave at the step's start, stamped with its end.
        dispatch(&shared, &step);
        if let Some((at, late_s)) = woke.take() {
            let busy_s = at.elapsed().as_secs_f64();
            let mut timings = shared.timings.lock().unwrap_or_else(|p| p.into_inner());
            if timings.len() >= MAX_TIMING_SAMPLES {
                timings.pop_front();
            }
            timings.push_back(StepTiming { late_s, busy_s });
        }
        // Wake a little before the step's end to plan the next one, so the next outputs
        // are already with their requests when this step ends.
        let end = shared.epoch + Duration::from_secs_f64(step.end_s.max(0.0));
        let due = end.checked_sub(PLAN_AHEAD).unwrap_or(end);
        if !sleep_until(&shared, due).await {
            continue;
        }
        let now = Instant::now();
        woke = Some((now, now.saturating_duration_since(due).as_secs_f64()));
        last_end = step.end_s;
        shared.lock().sched.end_step(step);
    }
}

/// Wait until a step can run and plan it; `None` once stopping.
async fn next_step(shared: &Shared, last_end: f64) -> Option<Step> {
    loop {
        if shared.stopping.load(Ordering::SeqCst) {
            return None;
        }
        let planned = {
            let mut inner = shared.lock();
            let start = inner.sched.next_start(last_end);
            inner.sched.begin_step(start)
        };
        if planned.is_some() {
            return planned;
        }
        shared.wake.notified().await;
    }
}

/// Hand each request its outputs of `step`; a request whose receiver is gone is aborted.
fn dispatch(shared: &Shared, step: &Step) {
    let mut inner = shared.lock();
    let mut gone = Vec::new();
    for em in &step.emissions {
        let Some(tx) = inner.outputs.get(&em.id) else {
            continue;
        };
        if tx.send(*em).is_err() {
            gone.push(em.id);
        } else if em.finished {
            inner.outputs.remove(&em.id);
        }
    }
    for id in gone {
        inner.outputs.remove(&id);
        inner.sched.abort(id, step.start_s);
    }
}

/// Sleep to `due`; false when stopping first. New requests do not cut a step short.
async fn sleep_until(shared: &Shared, due: Instant) -> bool {
    let sleep = tokio::time::sleep_until(due.into());
    tokio::pin!(sleep);
    loop {
        if shared.stopping.load(Ordering::SeqCst) {
            return false;
        }
        tokio::select! {
            _ = &mut sleep => return true,
            _ = shared.wake.notified() => {}
        }
    }
}
