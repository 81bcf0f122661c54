//! One load cell predicted: its clients driven through a fresh engine in virtual time, each
//! request recorded as `load` records it, and the engine's queue read once a second as a
//! `/metrics` scrape would have read it.

use crate::record::load::{
    CellKey, RequestFailure, RequestRecord, ServerMetricsRecord, ServerReading,
};
use crate::sim::scheduler::{EngineConfig, Scheduler, Step};
use crate::sim::virtual_time::{StepHooks, drive};
use crate::twin::predict::clients::{CellClients, Jitter, Outcome, Pace, Prompts};

/// Virtual seconds between two readings of the engine's queue (as `load` scrapes).
const SCRAPE_S: f64 = 1.0;

/// What one predicted cell produced.
pub struct Predicted {
    pub requests: Vec<RequestRecord>,
    pub scrapes: Vec<ServerMetricsRecord>,
    /// Requests the engine could never admit (their prompt does not fit the pool).
    pub stuck: usize,
    /// Most requests running in one step.
    pub running_max: usize,
}

/// Reads the engine once every `SCRAPE_S` of virtual time.
struct Scraper {
    key: CellKey,
    next_s: f64,
    scrapes: Vec<ServerMetricsRecord>,
    running_max: usize,
    /// A jittered schedule's idle-engine wake-up: up to this long after the first arrival.
    wake: Option<Jitter>,
}

impl StepHooks for Scraper {
    fn wake_s(&mut self) -> f64 {
        self.wake.as_mut().map_or(0.0, Jitter::draw)
    }

    fn on_step(&mut self, _i: usize, step: &Step, sched: &Scheduler) {
        self.running_max = self.running_max.max(step.running);
        if step.start_s < self.next_s {
            return;
        }
        self.next_s = (step.start_s / SCRAPE_S).floor() * SCRAPE_S + SCRAPE_S;
        let p = sched.scheduled();
        let capacity = sched.pool().capacity_tokens().max(1) as f64;
        self.scrapes.push(ServerMetricsRecord {
            cell: self.key,
            t_s: step.start_s,
            client_in_flight: (p.running + p.waiting) as u64,
            server: ServerReading {
                running: Some(p.running as f64),
                waiting: Some(p.waiting as f64),
                kv_usage: Some(p.pool_used_tokens as f64 / capacity),
                preemptions_total: Some(sched.stats().preemptions as f64),
                prefix_cache_hits_total: None,
                prefix_cache_queries_total: None,
            },
            shard: None,
        });
    }
}

/// Predict one cell on a fresh engine. `deadline_s`: load's `--timeout`; a request the
/// engine would finish later is recorded as timed out. `schedule`: the twin's
/// (`Twin::schedule`): the arrivals and an idle engine's wake-up each jittered by up to
/// one batch-1 decode step — a real engine woken by one request takes every request that
/// reached it meanwhile (vLLM's takes its whole input queue), where the twin's own
/// schedule starts on the first alone.
pub fn run(
    config: &EngineConfig,
    key: CellKey,
    pace: Pace,
    prompts: impl Prompts,
    seed: u64,
    deadline_s: f64,
    schedule: Option<u64>,
) -> Predicted {
    let mut sched = Scheduler::new(config.clone());
    let mut clients = CellClients::new(pace, prompts, seed);
    let step_s = config.cost.overhead + config.cost.decode_s(1, key.context_tokens);
    if let Some(s) = schedule {
        clients = clients.jittered(s, step_s);
    }
    let mut scraper = Scraper {
        key,
        next_s: 0.0,
        scrapes: Vec::new(),
        running_max: 0,
        wake: schedule.map(|s| Jitter::new(!s, step_s)),
    };
    let ended = drive(&mut sched, &mut clients, &mut scraper);
    let requests = clients
        .into_outcomes()
        .into_iter()
        .map(|o| record(key, o, deadline_s))
        .collect();
    Predicted {
        requests,
        scrapes: scraper.scrapes,
        stuck: ended.stuck,
        running_max: scraper.running_max,
    }
}

/// The record `load` would have written for this request.
pub fn record(cell: CellKey, o: Outcome, deadline_s: f64) -> RequestRecord {
    let mut r = RequestRecord {
        cell,
        index: o.index,
        scheduled_s: o.scheduled_s,
        sent_s: o.sent_s,
        prompt_tokens: Some(o.prompt_tokens),
        ..Default::default()
    };
    let (Some(first), Some(end)) = (o.first_s, o.finished_s) else {
        r.ended_s = Some(o.sent_s + deadline_s);
        r.error = Some(RequestFailure {
            kind: "timeout".into(),
            message: "predicted: the engine never admitted it (its prompt and output do not \
                      fit the pool)"
                .into(),
        });
        return r;
    };
    let e2e = end - o.sent_s;
    if e2e > deadline_s {
        r.ended_s = Some(o.sent_s + deadline_s);
        r.error = Some(RequestFailure {
            kind: "timeout".into(),
            message: format!("predicted to take {e2e:.1} s, beyond --timeout {deadline_s} s"),
        });
        return r;
    }
    let late = (o.sent_s - o.scheduled_s).max(0.0);
    let ttft = first - o.sent_s;
    r.ok = true;
    r.ttft_s = Some(ttft);
    r.ttft_from_schedule_s = Some(ttft + late);
    r.e2e_s = Some(e2e);
    r.e2e_from_schedule_s = Some(e2e + late);
    r.ended_s = Some(end);
    r.tpot_s = (o.output_tokens >= 2).then(|| (e2e - ttft) / (o.output_tokens - 1) as f64);
    r.itl_s = o.itl_s;
    r.cached_tokens = Some(o.cached_tokens);
    r.output_tokens = Some(o.output_tokens);
    r
}
