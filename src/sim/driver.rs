//! The scheduler in real time, on its own OS thread: plan a step, sleep with the kernel's
//! high-resolution timer (tens of µs, where the async runtime's timer rounds to the
//! millisecond) to just before its absolute end and spin the rest, apply it, and hand every request its outputs at that
//! instant; the request tasks write them as soon as they arrive, without sleeping or
//! spinning of their own. Steps are scheduled on the engine clock — the next starts at the
//! previous end however late the thread woke — so the truth records do not depend on the
//! thread's wake-up lateness, only what clients see does (measured by `benches/sim_engine`).
//! Requests join and leave through a shared lock held only for bookkeeping, never across
//! a sleep.

use super::scheduler::{Emission, EngineConfig, NewRequest, Scheduler};
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

/// Step timings kept for `step_timings` (the most recent).
const MAX_TIMING_SAMPLES: usize = 100_000;

struct Inner {
    sched: Scheduler,
    outputs: HashMap<u64, mpsc::UnboundedSender<Emission>>,
    next_id: u64,
    stopping: bool,
}

struct Shared {
    inner: Mutex<Inner>,
    /// New work (a request, a cancel, a resized pool) or a stop.
    wake: Condvar,
    epoch: Instant,
    timings: Recent<StepTiming>,
    output_lateness: Recent<f64>,
}

/// The most recent `MAX_TIMING_SAMPLES` figures of one kind, for benches.
struct Recent<T>(Mutex<VecDeque<T>>);

impl<T: Copy> Recent<T> {
    fn new() -> Self {
        Recent(Mutex::new(VecDeque::new()))
    }

    fn lock(&self) -> MutexGuard<'_, VecDeque<T>> {
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn push(&self, x: T) {
        let mut q = self.lock();
        if q.len() >= MAX_TIMING_SAMPLES {
            q.pop_front();
        }
        q.push_back(x);
    }

    /// Oldest first.
    fn snapshot(&self) -> Vec<T> {
        self.lock().iter().copied().collect()
    }
}

/// How one step went in real time.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StepTiming {
    /// How late the engine thread woke after the step's scheduled end, s: every output of
    /// the step reaches its request at least this late.
    pub late_s: f64,
    /// The engine's own work at the step's end (applying it, handing out its outputs,
    /// planning the next), s: the last output handed out is this much later still.
    pub busy_s: f64,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn now_s(&self) -> f64 {
        self.epoch.elapsed().as_secs_f64()
    }

    fn instant(&self, at_s: f64) -> Instant {
        self.epoch + Duration::from_secs_f64(at_s.max(0.0))
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
    /// The `ngram` model's per-draft acceptance; `None`: uniform draws.
    pub accept_prob: Option<f64>,
}

impl Engine {
    /// Start stepping on a thread of its own.
    pub fn start(config: EngineConfig) -> anyhow::Result<Engine> {
        let shared = Arc::new(Shared {
            inner: Mutex::new(Inner {
                sched: Scheduler::new(config),
                outputs: HashMap::new(),
                next_id: 0,
                stopping: false,
            }),
            wake: Condvar::new(),
            epoch: Instant::now(),
            timings: Recent::new(),
            output_lateness: Recent::new(),
        });
        let stepper = Arc::clone(&shared);
        std::thread::Builder::new()
            .name("sim-engine".into())
            .spawn(move || step_loop(&stepper))
            .map_err(|e| anyhow::anyhow!("cannot start the simulator engine thread: {e}"))?;
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
        self.shared.instant(at_s)
    }

    /// Note how late an output reached its connection (s), for benches.
    pub fn note_output_lateness(&self, late_s: f64) {
        self.shared.output_lateness.push(late_s);
    }

    /// How late recent outputs reached their connections, s, most recent last.
    pub fn output_lateness_s(&self) -> Vec<f64> {
        self.shared.output_lateness.snapshot()
    }

    pub fn submit(&self, req: Submit) -> Ticket {
        let (tx, rx) = mpsc::unbounded_channel();
        let arrival_s = self.at_s(req.arrived);
        let mut inner = self.shared.lock();
        let id = inner.next_id;
        inner.next_id += 1;
        inner.outputs.insert(id, tx);
        inner.sched.submit_with_acceptance(
            NewRequest {
                id,
                prompt: req.prompt,
                max_tokens: req.max_tokens,
                target_tokens: req.target_tokens,
                arrival_s,
                seed: req.seed,
            },
            req.accept_prob,
        );
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
        self.shared.timings.snapshot()
    }

    pub fn clear_step_timings(&self) {
        self.shared.timings.lock().clear();
        self.shared.output_lateness.lock().clear();
    }

    /// Stop stepping; every request's output channel closes.
    pub fn stop(&self) {
        self.shared.lock().stopping = true;
        self.shared.wake.notify_one();
    }
}

impl Drop for Engine {
    fn drop(&mut self) {
        self.stop();
    }
}

/// How long before a step's end the engine's timer fires; it spins the rest. On a busy
/// machine a woken thread can wait a millisecond for a core: the spin absorbs that wait
/// (up to this much) before the step's end instead of after it, for 3 % of a core at
/// 10 ms steps.
const WAKE_EARLY: Duration = Duration::from_micros(300);

fn step_loop(shared: &Shared) {
    let mut last_end = 0.0;
    // When the thread woke for the last step's end, and how late.
    let mut woke: Option<(Instant, f64)> = None;
    let mut inner = shared.lock();
    loop {
        // Plan the next step, or wait until one can run.
        let step = loop {
            if inner.stopping {
                inner.outputs.clear();
                return;
            }
            let start = inner.sched.next_start(last_end);
            let planned = inner.sched.begin_step(start);
            if let Some((at, late_s)) = woke.take() {
                shared.timings.push(StepTiming {
                    late_s,
                    busy_s: at.elapsed().as_secs_f64(),
                });
            }
            if let Some(step) = planned {
                break step;
            }
            inner = shared.wake.wait(inner).unwrap_or_else(|p| p.into_inner());
        };
        // Sleep to just before its end; new work does not cut a step short, a stop does.
        let end = shared.instant(step.end_s);
        let early = end.checked_sub(WAKE_EARLY).unwrap_or(end);
        loop {
            let now = Instant::now();
            if inner.stopping || now >= early {
                break;
            }
            inner = match shared.wake.wait_timeout(inner, early - now) {
                Ok((guard, _)) => guard,
                Err(p) => p.into_inner().0,
            };
        }
        if inner.stopping {
            continue;
        }
        // Spin the last stretch with the lock free: a thread that waits for a core after
        // its timer fires does so here, not past the step's end.
        drop(inner);
        while Instant::now() < end {
            std::hint::spin_loop();
        }
        inner = shared.lock();
        if inner.stopping {
            continue;
        }
        let now = Instant::now();
        woke = Some((now, now.saturating_duration_since(end).as_secs_f64()));
        last_end = step.end_s;
        let outputs = inner.sched.end_step(step);
        dispatch(&mut inner, outputs, last_end);
    }
}

/// Hand each request its outputs; a request whose receiver is gone is aborted.
fn dispatch(inner: &mut Inner, outputs: Vec<Emission>, now_s: f64) {
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
        inner.sched.abort(id, now_s);
    }
}
