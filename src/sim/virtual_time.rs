//! The scheduler in virtual time: the same `Scheduler` the real-time driver (`driver.rs`)
//! steps, stepped here on its own clock with no sleeping. Requests arrive when their
//! clients say (an open loop's schedule, a closed loop's worker freed by a finish); each
//! step is planned at its start, the clock jumps to its end, and its outputs go back to the
//! clients at that instant, exactly as the real-time driver hands them out.
//!
//! The rules the real-time driver follows, and so this one: a request arriving during a
//! step joins at the next step's start (`Scheduler::admit` admits none that arrived after
//! a step began); an idle engine starts its next step on the next arrival (or
//! `StepHooks::wake_s` after it); the next step starts at the previous one's end however
//! long planning took.

use super::scheduler::{
    Emission, EngineConfig, EngineRecord, NewRequest, Scheduler, SeriesPoint, Step,
};
use super::stats::EngineStats;

/// Where requests come from, and who hears their outputs.
pub trait Clients {
    /// When the next request reaches the engine (engine clock, s), if one is known now: a
    /// closed loop knows its next only once a request has finished.
    fn next_arrival_s(&self) -> Option<f64>;
    /// The request arriving at `next_arrival_s`, and its per-draft speculative acceptance
    /// (`None`: uniform draws, as `Scheduler::submit`).
    fn arrive(&mut self) -> (NewRequest, Option<f64>);
    /// One output, at its step's end.
    fn on_output(&mut self, em: &Emission);
}

/// How a virtual-time run ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ended {
    /// Steps run.
    pub steps: usize,
    /// Requests still waiting when nothing more could run and no client had more to send
    /// (a pool too small to admit them).
    pub stuck: usize,
}

/// Hooks around each step, for callers that change the engine mid-run or keep the steps.
pub trait StepHooks {
    /// Before step `i` is planned (e.g. shrink the pool).
    fn before_step(&mut self, _i: usize, _sched: &mut Scheduler) {}
    /// Step `i` as planned, before it is applied, with the engine as it planned it.
    fn on_step(&mut self, _i: usize, _step: &Step, _sched: &Scheduler) {}
    /// How long after the first arrival an idle engine starts its step (every arrival
    /// until then joins it); none by default.
    fn wake_s(&mut self) -> f64 {
        0.0
    }
}

/// No hooks.
pub struct NoHooks;

impl StepHooks for NoHooks {}

fn submit(sched: &mut Scheduler, clients: &mut impl Clients) {
    let (req, accept) = clients.arrive();
    sched.submit_with_acceptance(req, accept);
}

/// Step `sched` until no client has anything more to send and nothing more can run.
pub fn drive(
    sched: &mut Scheduler,
    clients: &mut impl Clients,
    hooks: &mut impl StepHooks,
) -> Ended {
    let mut steps = 0;
    let mut last_end = 0.0;
    loop {
        if sched.is_idle() {
            if clients.next_arrival_s().is_none() {
                break;
            }
            submit(sched, clients);
        }
        hooks.before_step(steps, sched);
        let mut start = sched.next_start(last_end);
        if sched.running() == 0 {
            start += hooks.wake_s();
        }
        while clients.next_arrival_s().is_some_and(|t| t <= start) {
            submit(sched, clients);
        }
        let Some(step) = sched.begin_step(start) else {
            // Nothing can run: the waiting requests need room only a later arrival's
            // timing could change; with no arrival left they are stuck.
            match clients.next_arrival_s() {
                Some(t) => {
                    last_end = f64::max(last_end, t);
                    submit(sched, clients);
                    continue;
                }
                None => break,
            }
        };
        // Arrivals during the step wait (in the queue) for the next step's start.
        while clients.next_arrival_s().is_some_and(|t| t < step.end_s) {
            submit(sched, clients);
        }
        last_end = step.end_s;
        hooks.on_step(steps, &step, sched);
        steps += 1;
        for em in sched.end_step(step) {
            clients.on_output(&em);
        }
    }
    Ended {
        steps,
        stuck: sched.waiting(),
    }
}

/// Requests known up front, arriving at their own `arrival_s` (sorted here).
pub struct Scheduled {
    pending: std::collections::VecDeque<NewRequest>,
}

impl Scheduled {
    pub fn new(mut requests: Vec<NewRequest>) -> Scheduled {
        requests.sort_by(|a, b| a.arrival_s.total_cmp(&b.arrival_s));
        Scheduled {
            pending: requests.into(),
        }
    }
}

impl Clients for Scheduled {
    fn next_arrival_s(&self) -> Option<f64> {
        self.pending.front().map(|r| r.arrival_s)
    }

    fn arrive(&mut self) -> (NewRequest, Option<f64>) {
        (self.pending.pop_front().expect("an arrival is due"), None)
    }

    fn on_output(&mut self, _em: &Emission) {}
}

/// What a virtual-clock run did.
pub struct VirtualRun {
    pub steps: Vec<Step>,
    /// Every request, in the order it left.
    pub records: Vec<EngineRecord>,
    pub series: Vec<SeriesPoint>,
    pub stats: EngineStats,
    /// Still waiting when nothing more could run (a pool too small for them).
    pub stuck: usize,
}

/// Run `arrivals` through the scheduler on a virtual clock (`virtual_time::drive`, the
/// driver `twin predict` uses): a request arriving during a step joins at the next step's
/// start; an idle engine starts on the next arrival. `before_step(i, sched)` may change the
/// engine before step `i` is planned (e.g. shrink the pool).
pub fn run_virtual(
    config: EngineConfig,
    arrivals: Vec<NewRequest>,
    before_step: impl FnMut(usize, &mut Scheduler),
) -> VirtualRun {
    struct Keep<F> {
        before: F,
        steps: Vec<Step>,
    }
    impl<F: FnMut(usize, &mut Scheduler)> StepHooks for Keep<F> {
        fn before_step(&mut self, i: usize, sched: &mut Scheduler) {
            (self.before)(i, sched);
        }
        fn on_step(&mut self, _i: usize, step: &Step, _sched: &Scheduler) {
            self.steps.push(step.clone());
        }
    }
    let mut sched = Scheduler::new(config);
    let mut clients = Scheduled::new(arrivals);
    let mut hooks = Keep {
        before: before_step,
        steps: Vec::new(),
    };
    let ended = drive(&mut sched, &mut clients, &mut hooks);
    VirtualRun {
        steps: hooks.steps,
        records: sched.records().to_vec(),
        series: sched.series().copied().collect(),
        stats: sched.stats().clone(),
        stuck: ended.stuck,
    }
}
