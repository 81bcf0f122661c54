//! The serving engine's scheduler as a pure state machine on a clock it is given, like
//! SGLang's and vLLM's: a FIFO waiting queue, continuous batching with chunked prefill,
//! a paged KV pool shared with the prefix cache, and preemption (recompute) when decode
//! growth cannot get a page. The real-time driver (`driver.rs`) and the virtual-time one
//! (`virtual_time.rs`: `run_virtual`, `twin predict`) step it the same way, so its timing is
//! exact and testable.
//!
//! A step is planned at its start (`begin_step`: admissions, decode page growth and
//! preemptions, prefill chunks, cost) and applied at its end (`end_step`: outputs, cache
//! insertion, finishes).

use super::pool::KvPool;
pub use super::sched_io::{
    Emission, EngineConfig, EngineRecord, NewRequest, OutputKind, SeriesPoint, Step, TokenBudget,
};
use super::spec::{self, Verify};
use super::stats::EngineStats;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use std::collections::VecDeque;

/// Series points kept (oldest dropped): bounds memory on a long-running server.
const MAX_SERIES_POINTS: usize = 200_000;

#[derive(Debug)]
struct Req {
    id: u64,
    prompt: Vec<u32>,
    max_tokens: u64,
    target: u64,
    arrival_s: f64,
    rng: ChaCha8Rng,
    /// The `ngram` model's per-draft acceptance; `None`: uniform draws.
    accept_prob: Option<f64>,
    produced: u64,
    // The current admission.
    seq: u64,
    /// Every whole prompt page's cache key; the first `held_keys` are referenced.
    keys: Vec<u128>,
    held_keys: usize,
    private: u64,
    prefill_len: u64,
    prefilled: u64,
    /// `t0` not yet charged for this admission.
    fresh: bool,
    decoding: bool,
    gone: bool,
    // The record.
    admitted_s: Option<f64>,
    first_token_s: Option<f64>,
    cached_tokens: u64,
    /// Leading prompt pages served from the cache, and the pool's evictions before then.
    cached_pages: u64,
    evicted_before: u64,
    prefill_s: f64,
    preemptions: u32,
    last_out_s: f64,
}

impl Req {
    fn held(&self) -> u64 {
        self.held_keys as u64 + self.private
    }

    fn release(&mut self, pool: &mut KvPool) {
        pool.release(&self.keys[..self.held_keys]);
        pool.free(self.private);
        self.held_keys = 0;
        self.private = 0;
    }

    fn record(&self, finished_s: Option<f64>) -> EngineRecord {
        EngineRecord {
            id: self.id,
            arrival_s: self.arrival_s,
            admitted_s: self.admitted_s,
            first_token_s: self.first_token_s,
            finished_s,
            prompt_tokens: self.prompt.len() as u64,
            cached_tokens: self.cached_tokens,
            output_tokens: self.produced,
            preemptions: self.preemptions,
        }
    }
}

pub struct Scheduler {
    config: EngineConfig,
    pool: KvPool,
    waiting: VecDeque<Req>,
    /// In admission order.
    running: Vec<Req>,
    next_seq: u64,
    stats: EngineStats,
    series: VecDeque<SeriesPoint>,
    records: Vec<EngineRecord>,
    in_step: bool,
    not_before_s: f64,
    /// As the last scheduling decision left it (what `/metrics` reports).
    scheduled: SeriesPoint,
}

impl Scheduler {
    pub fn new(config: EngineConfig) -> Scheduler {
        let pool = KvPool::new(config.page_tokens, config.pool_tokens, config.cache);
        Scheduler {
            config,
            pool,
            waiting: VecDeque::new(),
            running: Vec::new(),
            next_seq: 0,
            stats: EngineStats::default(),
            series: VecDeque::new(),
            records: Vec::new(),
            in_step: false,
            not_before_s: 0.0,
            scheduled: SeriesPoint::default(),
        }
    }

    pub fn config(&self) -> &EngineConfig {
        &self.config
    }

    pub fn pool(&self) -> &KvPool {
        &self.pool
    }

    pub fn stats(&self) -> &EngineStats {
        &self.stats
    }

    pub fn running(&self) -> usize {
        self.running.iter().filter(|r| !r.gone).count()
    }

    pub fn waiting(&self) -> usize {
        self.waiting.len()
    }

    pub fn is_idle(&self) -> bool {
        self.running.is_empty() && self.waiting.is_empty()
    }

    pub fn series(&self) -> impl Iterator<Item = &SeriesPoint> {
        self.series.iter()
    }

    /// Running and waiting as of the last scheduling decision, as vLLM and SGLang report
    /// them (their gauges are set once a step is scheduled): a request that arrived since
    /// is not counted as waiting until a decision leaves it out.
    pub fn scheduled(&self) -> SeriesPoint {
        self.scheduled
    }

    /// Finished and aborted requests, in the order they left.
    pub fn records(&self) -> &[EngineRecord] {
        &self.records
    }

    /// Queue a request (it joins at the next step start); speculative steps draw their
    /// token counts uniformly.
    pub fn submit(&mut self, req: NewRequest) {
        self.submit_with_acceptance(req, None);
    }

    /// Queue a request whose speculative drafts are each accepted with probability
    /// `accept_prob` until the first rejection (`None`: uniform draws, as `submit`).
    pub fn submit_with_acceptance(&mut self, req: NewRequest, accept_prob: Option<f64>) {
        let target = req.target_tokens.min(req.max_tokens);
        let keys = self.pool.keys(&req.prompt);
        self.waiting.push_back(Req {
            id: req.id,
            max_tokens: req.max_tokens,
            target,
            arrival_s: req.arrival_s,
            rng: ChaCha8Rng::seed_from_u64(req.seed),
            accept_prob,
            produced: 0,
            seq: 0,
            keys,
            held_keys: 0,
            private: 0,
            prefill_len: req.prompt.len() as u64,
            prefilled: 0,
            fresh: true,
            decoding: false,
            gone: false,
            admitted_s: None,
            first_token_s: None,
            cached_tokens: 0,
            cached_pages: 0,
            evicted_before: 0,
            prefill_s: 0.0,
            preemptions: 0,
            last_out_s: req.arrival_s,
            prompt: req.prompt,
        });
        self.mark(req.arrival_s);
    }

    /// Forget a request whose client has gone: its pages are released.
    pub fn abort(&mut self, id: u64, now_s: f64) {
        if let Some(i) = self.waiting.iter().position(|r| r.id == id) {
            let r = self.waiting.remove(i).expect("index found");
            self.stats.aborted += 1;
            self.records.push(r.record(None));
            self.mark(now_s);
        } else if let Some(r) = self.running.iter_mut().find(|r| r.id == id) {
            // One whose last token is already computed counts as finished at the step's end.
            let last_computed = r.decoding && r.produced == r.target;
            self.stats.aborted += u64::from(!r.gone && !last_computed);
            r.gone = true;
            if !self.in_step {
                self.sweep(now_s);
            }
        }
    }

    /// Evict every unreferenced cached page (`/flush_cache`); like SGLang's, it also
    /// restarts the cumulative speculative acceptance `/server_info` reports.
    /// Keep a finished request's prompt and generated tokens in the prefix cache
    /// (`--cache-replies`).
    pub fn cache_finished(&mut self, tokens: &[u32]) {
        let keys = self.pool.keys(tokens);
        self.pool.cache_finished(&keys);
    }

    pub fn flush_cache(&mut self) {
        self.pool.flush();
        self.stats.spec_since_flush = Default::default();
    }

    /// Resize the pool; running requests keep their pages, decode growth that no longer
    /// fits preempts.
    pub fn resize_pool(&mut self, tokens: u64, now_s: f64) {
        self.pool.resize(tokens);
        self.not_before_s = now_s;
    }

    /// When the next step may start, given the last step's end: at once when busy; when
    /// idle, on the first waiting request's arrival (parsing and hand-over are absorbed).
    pub fn next_start(&self, last_end_s: f64) -> f64 {
        let mut start = last_end_s.max(self.not_before_s);
        if self.running.is_empty()
            && let Some(front) = self.waiting.front()
        {
            start = start.max(front.arrival_s);
        }
        start
    }

    /// Plan and commit the step starting at `start_s`; `None` when nothing can run.
    pub fn begin_step(&mut self, start_s: f64) -> Option<Step> {
        self.sweep(start_s);
        self.admit(start_s);
        if self.running.is_empty() {
            self.decided(start_s);
            return None;
        }
        let spec = u64::from(self.config.spec.max(1));
        // Decode growth, oldest first; the newest request yields its pages when short.
        let mut decode: Vec<(usize, Verify, u64)> = Vec::new();
        let mut i = 0;
        while i < self.running.len() {
            if !self.running[i].decoding {
                i += 1;
                continue;
            }
            let r = &mut self.running[i];
            let v = spec::verify(&mut r.rng, spec, r.accept_prob, r.target - r.produced);
            let tokens = v.tokens;
            let context = r.prompt.len() as u64 + r.produced;
            let need = self
                .pool
                .pages_for(context + tokens)
                .saturating_sub(r.held());
            let mut lost_self = false;
            while need > 0 && !self.pool.alloc(need) {
                let victim = self.running.len() - 1;
                self.preempt(victim);
                if victim == i {
                    lost_self = true;
                    break;
                }
            }
            if lost_self {
                break;
            }
            self.running[i].private += need;
            decode.push((i, v, context));
            i += 1;
        }
        // Prefill chunks within the budget, in admission order.
        let cost = self.config.cost;
        let drafted: u64 = decode.iter().map(|(_, v, _)| v.drafted).sum();
        let mut budget = self.config.max_batch_tokens.max(1);
        if self.config.budget == TokenBudget::All {
            budget = budget.saturating_sub(decode.len() as u64 + drafted);
        }
        let mut prefill_s = 0.0;
        let mut prefill_tokens = 0;
        let mut chunked: Vec<(usize, bool)> = Vec::new();
        for (idx, r) in self.running.iter_mut().enumerate() {
            if r.decoding || budget == 0 {
                continue;
            }
            let c = r.prefilled;
            let e = (c + budget).min(r.prefill_len);
            if e <= c {
                continue;
            }
            let mut chunk_s = cost.chunk_s(c, e);
            if r.fresh {
                chunk_s += cost.model.t0;
                r.fresh = false;
            }
            prefill_s += chunk_s;
            budget -= e - c;
            prefill_tokens += e - c;
            r.prefilled = e;
            chunked.push((idx, e == r.prefill_len));
        }
        let context_sum: u64 = decode.iter().map(|&(_, _, ctx)| ctx).sum();
        let duration = cost.overhead
            + prefill_s * cost.prefill_factor(decode.len() as u64)
            + cost.decode_s(decode.len() as u64, context_sum)
            + cost.spec_draft.step_s(drafted);
        let end_s = start_s + duration;
        let mut emissions = Vec::with_capacity(decode.len() + chunked.len());
        for &(idx, done) in &chunked {
            let r = &mut self.running[idx];
            if r.first_token_s.is_none() {
                r.prefill_s += duration;
            }
            if !done {
                continue;
            }
            let kind = if r.first_token_s.is_none() {
                OutputKind::First
            } else {
                OutputKind::Recomputed
            };
            let v = Verify {
                tokens: (r.target - r.produced).min(1),
                drafted: 0,
                accepted: 0,
            };
            emissions.push(emit(r, idx, kind, v, duration, end_s));
            r.decoding = true;
        }
        for &(idx, v, _) in &decode {
            let r = &mut self.running[idx];
            emissions.push(emit(r, idx, OutputKind::Decode, v, duration, end_s));
        }
        self.in_step = true;
        self.mark(start_s);
        self.decided(start_s);
        Some(Step {
            start_s,
            end_s,
            prefill_tokens,
            decoding: decode.len() as u64,
            running: self.running.len(),
            emissions,
        })
    }

    /// Apply a step at its end; returns the outputs still wanted (aborted requests dropped).
    pub fn end_step(&mut self, step: Step) -> Vec<Emission> {
        self.in_step = false;
        let end = step.end_s;
        self.stats.observe_verify_batch(
            step.emissions
                .iter()
                .filter(|em| em.kind == OutputKind::Decode)
                .map(|em| (em.tokens, em.drafted, em.accepted)),
        );
        let mut out = Vec::with_capacity(step.emissions.len());
        for em in step.emissions {
            let r = &mut self.running[em.slot];
            debug_assert_eq!(r.id, em.id);
            self.stats.generation_tokens += em.tokens;
            match em.kind {
                OutputKind::First => {
                    self.stats.ttft.observe(end - r.arrival_s);
                    self.stats.prompt_tokens += r.prompt.len() as u64;
                    self.stats.cached_tokens += r.cached_tokens;
                    r.first_token_s = Some(end);
                }
                OutputKind::Decode | OutputKind::Recomputed => {
                    self.stats.itl.observe(end - r.last_out_s);
                }
            }
            r.last_out_s = end;
            if em.kind != OutputKind::Decode {
                let added = self.pool.insert(&r.keys, r.held_keys);
                r.private -= added as u64;
                r.held_keys += added;
            }
            if em.finished {
                self.stats.finished += 1;
                self.stats.finished_length += u64::from(r.produced == r.max_tokens);
                self.stats.e2e.observe(end - r.arrival_s);
            }
            if !r.gone {
                out.push(em);
            }
        }
        self.sweep(end);
        out
    }

    /// Remove finished and aborted requests, releasing their pages.
    fn sweep(&mut self, now_s: f64) {
        if !self
            .running
            .iter()
            .any(|r| r.gone || r.produced == r.target && r.decoding)
        {
            return;
        }
        let running = std::mem::take(&mut self.running);
        for mut r in running {
            let finished = r.decoding && r.produced == r.target;
            if r.gone || finished {
                r.release(&mut self.pool);
                self.records.push(r.record(finished.then_some(now_s)));
            } else {
                self.running.push(r);
            }
        }
        self.mark(now_s);
    }

    /// Pages a request may still grow into beyond those it holds, by the new-token ratio.
    fn reserve_deficit(&self, r: &Req) -> u64 {
        let remaining = r.max_tokens.saturating_sub(r.produced);
        let reserve = (self.config.new_token_ratio * remaining as f64).ceil() as u64;
        let tokens = r.prompt.len() as u64 + r.produced + reserve.min(remaining);
        self.pool.pages_for(tokens).saturating_sub(r.held())
    }

    /// Move waiting requests to running, in order, while they fit.
    fn admit(&mut self, now_s: f64) {
        let mut growth: u64 = self.running.iter().map(|r| self.reserve_deficit(r)).sum();
        while let Some(front) = self.waiting.front() {
            if self.running.len() >= self.config.max_running.max(1) {
                break;
            }
            // No request joins a step that began before it arrived: a step loop that wakes
            // late on a loaded machine plans a step whose start is already past.
            if front.arrival_s > now_s {
                break;
            }
            let hit = self.pool.matched(&front.keys, front.prompt.len() as u64);
            let prefill_len = front.prompt.len() as u64 + front.produced;
            let prompt_pages = self.pool.pages_for(prefill_len) - hit as u64;
            let avail =
                self.pool.available() - self.pool.unreferenced_among(&front.keys[..hit]) as i64;
            // Held pages are zero while waiting: the deficit is everything it will need.
            let need = self.reserve_deficit(front) - hit as u64;
            let fits = (need + growth) as i64 <= avail;
            let alone = self.running.is_empty() && prompt_pages as i64 <= avail;
            if !fits && !alone {
                break;
            }
            let mut r = self.waiting.pop_front().expect("front exists");
            self.pool.acquire(&r.keys[..hit]);
            let got = self.pool.alloc(prompt_pages);
            debug_assert!(got, "admission checked the room");
            r.prefilled = hit as u64 * self.pool.page_tokens();
            r.held_keys = hit;
            r.private = prompt_pages;
            r.prefill_len = prefill_len;
            r.fresh = true;
            r.decoding = false;
            r.seq = self.next_seq;
            self.next_seq += 1;
            if r.admitted_s.is_none() {
                r.admitted_s = Some(now_s);
                r.cached_tokens = r.prefilled;
                r.cached_pages = hit as u64;
                r.evicted_before = self.pool.evicted_pages();
                self.stats.queue_time.observe(now_s - r.arrival_s);
            }
            growth += self.reserve_deficit(&r);
            self.running.push(r);
        }
    }

    /// Preempt `running[idx]`: its pages go back, it waits at the front to be recomputed.
    fn preempt(&mut self, idx: usize) {
        let mut r = self.running.remove(idx);
        r.release(&mut self.pool);
        r.decoding = false;
        r.preemptions += 1;
        self.stats.preemptions += 1;
        self.waiting.push_front(r);
    }

    /// Note the running and waiting counts a scheduling decision left. Requests that
    /// arrived after the step's start wait for the next decision without having been
    /// refused, like those still in vLLM's input queue: not counted.
    fn decided(&mut self, t_s: f64) {
        self.scheduled = SeriesPoint {
            waiting: self.waiting.iter().filter(|r| r.arrival_s <= t_s).count(),
            ..self.point(t_s)
        };
    }

    fn point(&self, t_s: f64) -> SeriesPoint {
        let page = self.pool.page_tokens();
        SeriesPoint {
            t_s,
            running: self.running(),
            waiting: self.waiting.len(),
            pool_used_tokens: self.pool.referenced_pages() * page,
            pool_cached_tokens: self.pool.evictable_pages() * page,
        }
    }

    fn mark(&mut self, t_s: f64) {
        let point = self.point(self.series.back().map_or(t_s, |p| p.t_s.max(t_s)));
        if self.series.len() >= MAX_SERIES_POINTS {
            self.series.pop_front();
        }
        self.series.push_back(point);
    }
}

fn emit(r: &mut Req, slot: usize, kind: OutputKind, v: Verify, step_s: f64, at_s: f64) -> Emission {
    let context_tokens = r.prompt.len() as u64 + r.produced;
    r.produced += v.tokens;
    Emission {
        id: r.id,
        kind,
        tokens: v.tokens,
        drafted: v.drafted,
        accepted: v.accepted,
        context_tokens,
        step_s,
        at_s,
        finished: r.produced == r.target,
        cached_tokens: r.cached_tokens,
        cached_pages: r.cached_pages,
        evicted_before: r.evicted_before,
        admitted_s: r.admitted_s.unwrap_or(r.arrival_s),
        prefill_s: r.prefill_s,
        preemptions: r.preemptions,
        slot,
    }
}
