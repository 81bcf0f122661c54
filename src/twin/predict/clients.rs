//! Load's clients in virtual time: a closed loop's workers (each sends its next request
//! when its last one finished) or an open loop's schedule (optionally capped), each request
//! followed from arrival to its last token, as `load` would have recorded it.

use crate::run::arrivals::Arrivals;
use crate::run::{Budget, Chains};
use crate::sim::scheduler::{Emission, NewRequest, OutputKind};
use crate::sim::virtual_time::Clients;
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

/// How long after its worker saw the last token a closed loop's next request (or a capped
/// open loop's waiting one) reaches the engine. Any time above zero and below a step puts
/// it where a real server puts it: the engine plans its next step the instant the last one
/// ends, so the request joins the step after that (a zero gap would join it at once, a
/// step sooner than any client can).
pub const CLIENT_GAP_S: f64 = 1e-6;

/// What each request of a cell is.
pub trait Prompts {
    /// Request `index`'s prompt token ids and output tokens.
    fn request(&mut self, index: u64) -> (Vec<u32>, u64);
}

/// How a cell's requests are offered.
#[derive(Debug, Clone)]
pub enum Pace {
    /// `workers` back to back until the budget is spent.
    Closed { workers: usize, budget: Budget },
    /// Send times (s from the cell's start); with a cap, a request finding `cap` in flight
    /// waits for one to finish. With chains, a request that waits on another is sent its
    /// delay after that one's last token, its own time unused (an agent trace).
    Open {
        at_s: Vec<f64>,
        cap: Option<usize>,
        chains: Option<Arc<Chains>>,
    },
}

/// One request as the client saw it; times in seconds from the cell's start.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Outcome {
    pub index: u64,
    pub scheduled_s: f64,
    pub sent_s: f64,
    pub prompt_tokens: u64,
    pub first_s: Option<f64>,
    pub last_s: Option<f64>,
    pub finished_s: Option<f64>,
    pub output_tokens: u64,
    pub cached_tokens: u64,
    /// Per event after the first: the gap divided over its tokens, to the microsecond.
    pub itl_s: Vec<f64>,
    pub preemptions: u32,
}

enum State {
    Closed {
        /// When each idle worker's next request arrives, earliest first.
        free: VecDeque<f64>,
        budget: Budget,
    },
    Open {
        at_s: Vec<f64>,
        /// When each free slot of a capped loop became free, earliest first (`None`:
        /// uncapped).
        permits: Option<VecDeque<f64>>,
        /// An agent trace's chains; without them request `i` is the `i`-th sent.
        chained: Option<Chained>,
    },
}

/// An open loop whose requests may wait on earlier ones.
struct Chained {
    chains: Arc<Chains>,
    /// The requests sent at their own time, in time order, and how many have gone.
    roots: Vec<usize>,
    sent_roots: usize,
    /// Waiting requests whose predecessor ended: (due, index), earliest first.
    ready: VecDeque<(f64, usize)>,
}

impl Chained {
    fn new(chains: Arc<Chains>, at_s: &[f64]) -> Chained {
        let mut roots: Vec<usize> = (0..at_s.len()).filter(|&i| chains.is_root(i)).collect();
        roots.sort_by(|a, b| at_s[*a].total_cmp(&at_s[*b]));
        Chained {
            chains,
            roots,
            sent_roots: 0,
            ready: VecDeque::new(),
        }
    }

    /// The next request due, and its time: a root or a ready one, whichever is earlier.
    fn next(&self, at_s: &[f64]) -> Option<(f64, usize)> {
        let root = self.roots.get(self.sent_roots).map(|&i| (at_s[i], i));
        match (root, self.ready.front().copied()) {
            (Some(r), Some(w)) => Some(if w.0 < r.0 { w } else { r }),
            (r, w) => r.or(w),
        }
    }

    fn take(&mut self, index: usize) {
        if self.ready.front().is_some_and(|w| w.1 == index) {
            self.ready.pop_front();
        } else {
            self.sent_roots += 1;
        }
    }
}

/// A cell's clients, recording every request's outcome.
pub struct CellClients<P> {
    state: State,
    prompts: P,
    seed: u64,
    outcomes: Vec<Outcome>,
    /// Each request's place in `outcomes` (send order), by its index.
    place: Vec<usize>,
    /// How late each request reaches the engine after it is sent (`jittered`); none by
    /// default.
    jitter: Option<Jitter>,
}

/// A seeded delay, uniform from none to `max_s`: where in a step a real server's request
/// handling lands a request, or when an idle engine wakes (a jittered schedule).
pub struct Jitter {
    rng: ChaCha8Rng,
    max_s: f64,
}

impl Jitter {
    pub fn new(seed: u64, max_s: f64) -> Jitter {
        Jitter {
            rng: ChaCha8Rng::seed_from_u64(seed),
            max_s: max_s.max(0.0),
        }
    }

    /// The next delay, s.
    pub fn draw(&mut self) -> f64 {
        self.rng.random_range(0.0..=1.0) * self.max_s
    }
}

/// Where `t` goes in `q` (earliest first), after any equal.
fn insert_sorted(q: &mut VecDeque<f64>, t: f64) {
    let at = q.partition_point(|x| *x <= t);
    q.insert(at, t);
}

impl<P: Prompts> CellClients<P> {
    pub fn new(pace: Pace, prompts: P, seed: u64) -> Self {
        let state = match pace {
            // Workers start one after another, as load's do (µs apart): an idle engine
            // starts its step on the first to arrive, and the rest join the next one.
            Pace::Closed { workers, budget } => State::Closed {
                free: (0..workers.max(1))
                    .map(|w| w as f64 * CLIENT_GAP_S)
                    .collect(),
                budget,
            },
            Pace::Open { at_s, cap, chains } => State::Open {
                chained: chains.map(|c| Chained::new(c, &at_s)),
                at_s,
                permits: cap.map(|c| vec![0.0; c.max(1)].into()),
            },
        };
        CellClients {
            state,
            prompts,
            seed,
            outcomes: Vec::new(),
            place: Vec::new(),
            jitter: None,
        }
    }

    /// Each request reaching the engine up to `max_s` later than sent, uniformly, drawn
    /// from `seed`: one of the schedules a real server's request handling (parsing,
    /// tokenizing, the hand-off to its engine loop) could give the same clients, where
    /// the twin's own puts every request at the next step's start.
    pub fn jittered(mut self, seed: u64, max_s: f64) -> Self {
        let mut jitter = Jitter::new(seed, max_s);
        let mut late = |t: f64| t + jitter.draw();
        match &mut self.state {
            State::Closed { free, .. } => {
                let mut v: Vec<f64> = free.iter().map(|t| late(*t)).collect();
                v.sort_by(f64::total_cmp);
                *free = v.into();
            }
            State::Open { at_s, chained, .. } => {
                for t in at_s.iter_mut() {
                    *t = late(*t);
                }
                match chained {
                    // Each request keeps its own (jittered) time.
                    Some(c) => *c = Chained::new(c.chains.clone(), at_s),
                    None => at_s.sort_by(f64::total_cmp),
                }
            }
        }
        self.jitter = Some(jitter);
        self
    }

    /// Every request sent, in send order.
    pub fn into_outcomes(self) -> Vec<Outcome> {
        self.outcomes
    }

    /// The next request's (scheduled, arrival) times and its index, if one is due.
    fn next(&self) -> Option<(f64, f64, usize)> {
        let i = self.outcomes.len();
        match &self.state {
            State::Closed { free, budget } => {
                let t = *free.front()?;
                let more = match budget {
                    Budget::Requests(n) => (i as u64) < *n,
                    Budget::Duration(d) => t < d.as_secs_f64(),
                };
                more.then_some((t, t, i))
            }
            State::Open {
                at_s,
                permits,
                chained,
            } => {
                let (at, i) = match chained {
                    Some(c) => c.next(at_s)?,
                    None => (*at_s.get(i)?, i),
                };
                match permits {
                    None => Some((at, at, i)),
                    Some(p) => Some((at, at.max(*p.front()?), i)),
                }
            }
        }
    }

    /// Request `index` ended at `at_s`: its worker or slot is free, and a request waiting
    /// on it is due its delay later.
    fn release(&mut self, index: usize, at_s: f64) {
        let late = self.jitter.as_mut().map_or(0.0, Jitter::draw);
        let t = at_s + CLIENT_GAP_S + late;
        match &mut self.state {
            State::Closed { free, .. } => insert_sorted(free, t),
            State::Open {
                permits, chained, ..
            } => {
                if let Some(p) = permits {
                    insert_sorted(p, t);
                }
                if let Some(c) = chained
                    && let Some((k, delay)) = c.chains.next(index)
                {
                    let due = t + delay.as_secs_f64();
                    let at = c.ready.partition_point(|w| w.0 <= due);
                    c.ready.insert(at, (due, k));
                }
            }
        }
    }
}

impl<P: Prompts> Clients for CellClients<P> {
    fn next_arrival_s(&self) -> Option<f64> {
        self.next().map(|(_, arrival, _)| arrival)
    }

    fn arrive(&mut self) -> (NewRequest, Option<f64>) {
        let (scheduled_s, sent_s, i) = self.next().expect("an arrival is due");
        match &mut self.state {
            State::Closed { free, .. } => {
                free.pop_front();
            }
            State::Open {
                permits, chained, ..
            } => {
                if let Some(p) = permits {
                    p.pop_front();
                }
                if let Some(c) = chained {
                    c.take(i);
                }
            }
        }
        if self.place.len() <= i {
            self.place.resize(i + 1, usize::MAX);
        }
        self.place[i] = self.outcomes.len();
        let index = i as u64;
        let (prompt, output) = self.prompts.request(index);
        self.outcomes.push(Outcome {
            index,
            scheduled_s,
            sent_s,
            prompt_tokens: prompt.len() as u64,
            ..Outcome::default()
        });
        let req = NewRequest {
            id: index,
            prompt,
            max_tokens: output,
            target_tokens: output,
            arrival_s: sent_s,
            seed: self.seed ^ index.wrapping_mul(0x9E37_79B9_7F4A_7C15),
        };
        (req, None)
    }

    fn on_output(&mut self, em: &Emission) {
        let o = &mut self.outcomes[self.place[em.id as usize]];
        match (em.kind, o.last_s) {
            (OutputKind::First, _) | (_, None) => o.first_s = Some(em.at_s),
            (_, Some(last)) if em.tokens > 0 => {
                let gap = (em.at_s - last) / em.tokens as f64;
                o.itl_s.push((gap * 1e6).round() / 1e6);
            }
            _ => {}
        }
        o.last_s = Some(em.at_s);
        o.output_tokens += em.tokens;
        o.cached_tokens = em.cached_tokens;
        o.preemptions = em.preemptions;
        if em.finished {
            o.finished_s = Some(em.at_s);
            self.release(em.id as usize, em.at_s);
        }
    }
}

/// Distinct prompts of one length, as `load` sends them: each request's leading nonce makes
/// its first page its own, so no request's cache serves another.
pub struct Fresh {
    pub prompt_tokens: u64,
    pub output_tokens: u64,
    /// Told apart from other cells' prompts (one engine may serve several cells).
    pub salt: u32,
}

impl Prompts for Fresh {
    fn request(&mut self, index: u64) -> (Vec<u32>, u64) {
        let n = self.prompt_tokens.max(1) as usize;
        let mut p: Vec<u32> = (0..n).map(|i| (i % 30_011) as u32 + 100).collect();
        // The first token is the request's own (a page of one token would otherwise be a
        // hit shared by the whole cell), the next two tell cells and indices apart exactly.
        let nonce = (u64::from(self.salt) << 40 ^ index).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        p[0] = (nonce >> 32) as u32;
        if n > 1 {
            p[1] = self.salt ^ (index as u32);
        }
        if n > 2 {
            p[2] = (index >> 32) as u32 ^ self.salt.rotate_left(16);
        }
        (p, self.output_tokens)
    }
}

/// How a planned cell's requests are offered, in virtual time.
pub fn pace(arrivals: &Arrivals) -> Pace {
    match arrivals {
        Arrivals::Closed {
            concurrency,
            budget,
        } => Pace::Closed {
            workers: *concurrency as usize,
            budget: *budget,
        },
        Arrivals::Open {
            at,
            max_concurrency,
            chains,
            ..
        } => Pace::Open {
            at_s: at.iter().map(Duration::as_secs_f64).collect(),
            cap: max_concurrency.map(|m| m as usize),
            chains: chains.clone(),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fresh(salt: u32) -> Fresh {
        Fresh {
            prompt_tokens: 64,
            output_tokens: 8,
            salt,
        }
    }

    #[test]
    fn closed_loop_workers_start_one_after_another() {
        let pace = Pace::Closed {
            workers: 4,
            budget: Budget::Requests(8),
        };
        let mut c = CellClients::new(pace, fresh(1), 0);
        let mut at = Vec::new();
        while at.len() < 4 {
            at.push(c.next_arrival_s().expect("a worker is free"));
            c.arrive();
        }
        // An idle engine starts on the first; the other three join its next step.
        for (w, t) in at.iter().enumerate() {
            assert!((t - w as f64 * CLIENT_GAP_S).abs() < 1e-15, "{at:?}");
        }
        assert_eq!(c.next_arrival_s(), None, "all four are out");
    }

    /// Every request's send time, through an engine of 2 ms steps.
    fn sends(pace: Pace, jitter: Option<u64>) -> Vec<f64> {
        use crate::sim::scheduler::Scheduler;
        let cfg = crate::twin::model::exact::test_engine();
        let mut c = CellClients::new(pace, fresh(1), 0);
        if let Some(seed) = jitter {
            c = c.jittered(seed, 0.002);
        }
        let mut sched = Scheduler::new(cfg);
        crate::sim::virtual_time::drive(&mut sched, &mut c, &mut crate::sim::virtual_time::NoHooks);
        c.into_outcomes().iter().map(|o| o.sent_s).collect()
    }

    #[test]
    fn jittered_clients_arrive_up_to_the_jitter_later_in_order_and_as_seeded() {
        let open = || Pace::Open {
            at_s: (0..32).map(|i| f64::from(i) * 0.003).collect(),
            cap: None,
            chains: None,
        };
        let plain = sends(open(), None);
        let late = sends(open(), Some(7));
        assert_eq!(late.len(), plain.len());
        assert!(late.windows(2).all(|w| w[0] <= w[1]), "in order: {late:?}");
        // Each send time (in order) is its plain one's, up to the jitter later.
        for (l, p) in late.iter().zip(&plain) {
            assert!(*l >= *p && *l <= p + 0.002, "{l} against {p}");
        }
        assert!(late.iter().zip(&plain).filter(|(l, p)| l > p).count() > 16);
        let closed = || Pace::Closed {
            workers: 3,
            budget: Budget::Requests(24),
        };
        let plain = sends(closed(), None);
        let late = sends(closed(), Some(7));
        assert_eq!(late.len(), 24);
        assert!(late.windows(2).all(|w| w[0] <= w[1]), "in order: {late:?}");
        assert_ne!(late, plain);
        assert_eq!(sends(closed(), Some(7)), late, "one seed, one schedule");
        assert_ne!(sends(closed(), Some(8)), late);
    }

    #[test]
    fn a_chained_request_arrives_its_delay_after_its_predecessor_finished() {
        use crate::sim::scheduler::Scheduler;
        let chains = Chains::new(&[None, None, Some((0, Duration::from_millis(50)))]).unwrap();
        let pace = Pace::Open {
            // Request 2's own time (0) is not used.
            at_s: vec![0.0, 0.01, 0.0],
            cap: None,
            chains: Some(Arc::new(chains)),
        };
        let mut c = CellClients::new(pace, fresh(1), 0);
        let mut sched = Scheduler::new(crate::twin::model::exact::test_engine());
        crate::sim::virtual_time::drive(&mut sched, &mut c, &mut crate::sim::virtual_time::NoHooks);
        let o = c.into_outcomes();
        let order: Vec<u64> = o.iter().map(|o| o.index).collect();
        assert_eq!(order, [0, 1, 2], "sent in time order");
        let ended = o[0].finished_s.unwrap();
        assert!(
            (o[2].sent_s - (ended + CLIENT_GAP_S + 0.05)).abs() < 1e-12,
            "{} after {ended}",
            o[2].sent_s
        );
        assert!(o.iter().all(|o| o.finished_s.is_some()));
    }

    #[test]
    fn fresh_prompts_share_no_first_token() {
        let mut seen = std::collections::HashSet::new();
        for salt in 0..4 {
            let mut f = fresh(salt);
            for index in 0..256 {
                let (p, out) = f.request(index);
                assert_eq!((p.len(), out), (64, 8));
                assert!(
                    seen.insert(p[0]),
                    "salt {salt} index {index}: first token reused"
                );
            }
        }
    }
}
