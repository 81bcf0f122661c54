//! When requests go out, as one idea: closed-loop workers, seeded open-loop arrivals
//! (poisson, constant, gamma) and a trace's timestamps are one plan of cells. The plan is
//! data, built from flags without a server; an executor (load's HTTP cells, or one in
//! virtual time) iterates its cells and sends them.

use super::chains::Chains;
use super::schedule::{Arrival, schedule};
use super::shard::Shard;
use super::slot::Budget;
use crate::record::load::CellKey;
use std::sync::Arc;
use std::time::Duration;

/// Default requests per closed-loop worker, and the floor for any cell.
pub const REQUESTS_PER_WORKER: u64 = 4;
pub const MIN_REQUESTS: u64 = 16;
/// Default open-loop arrival span, seconds.
pub const DEFAULT_OPEN_SPAN_S: f64 = 10.0;

/// What cells the plan has at each context length.
#[derive(Debug, Clone, PartialEq)]
pub enum Shape {
    /// One closed-loop cell per concurrency, ascending.
    Closed(Vec<u32>),
    /// One open-loop cell per rate, ascending, its send times drawn from the seed.
    Open { rates: Vec<f64>, arrival: Arrival },
    /// Closed-loop cells chosen by the knee search up to `max` workers: each probe depends
    /// on the one before, so the executor asks [`ArrivalPlan::closed`] per probe.
    Knee { max: u32 },
    /// One open-loop cell at the trace's send times (offsets from its first request, scaled),
    /// each request in a prefix group; a shard replays whole groups. An agent trace's turns
    /// wait on their session's previous turn (`chains`; a session is one group).
    Trace {
        at: Vec<Duration>,
        groups: Arc<[usize]>,
        chains: Option<Arc<Chains>>,
    },
}

/// A load plan's arrivals: the shape and the budget every cell shares.
#[derive(Debug, Clone, PartialEq)]
pub struct ArrivalPlan {
    pub shape: Shape,
    /// `--requests`: per cell.
    pub requests: Option<u64>,
    /// `--duration`: per cell.
    pub duration: Option<Duration>,
    /// `--max-concurrency`: an open loop's cap on requests in flight.
    pub max_concurrency: Option<u32>,
    pub seed: u64,
}

/// One cell's arrivals, as an executor sends them.
#[derive(Debug, Clone, PartialEq)]
pub enum Arrivals {
    /// `concurrency` workers back to back until the budget is spent.
    Closed { concurrency: u32, budget: Budget },
    /// Send offsets from the cell's start; with a cap, a request that finds
    /// `max_concurrency` in flight waits for a slot (its lateness is recorded).
    Open {
        at: Vec<Duration>,
        max_concurrency: Option<u32>,
        /// A trace's prefix groups (a shard takes whole groups); `None`: a shard takes
        /// every n-th arrival.
        groups: Option<Arc<[usize]>>,
        /// Requests sent after an earlier one ends, not at their time (`run::chains`).
        chains: Option<Arc<Chains>>,
    },
}

/// One cell of the plan: its key and its arrivals.
#[derive(Debug, Clone, PartialEq)]
pub struct PlannedCell {
    pub key: CellKey,
    pub arrivals: Arrivals,
}

/// This process's part of a cell.
#[derive(Debug, Clone, PartialEq)]
pub enum Share {
    /// Run these arrivals. `workers`: a shard's part of a closed cell's concurrency;
    /// `indices`: each arrival's index in the unsharded cell, in send order.
    Run {
        arrivals: Arrivals,
        workers: Option<u32>,
        indices: Option<Arc<[u64]>>,
    },
    /// Nothing of the cell falls to this shard; the note says why.
    Nothing { workers: Option<u32>, note: String },
}

impl ArrivalPlan {
    /// The cells at context length `n` (the `li`-th length), in run order; a knee plan has
    /// none fixed (see [`Shape::Knee`]).
    pub fn cells(&self, li: usize, n: u64) -> Vec<PlannedCell> {
        match &self.shape {
            Shape::Closed(cs) => cs.iter().map(|&c| self.closed(n, c)).collect(),
            Shape::Open { rates, .. } => rates
                .iter()
                .enumerate()
                .map(|(ri, &r)| self.open(li, ri, n, r))
                .collect(),
            Shape::Knee { .. } => Vec::new(),
            Shape::Trace { at, groups, chains } => vec![PlannedCell {
                key: CellKey {
                    context_tokens: n,
                    concurrency: None,
                    rate: None,
                },
                arrivals: Arrivals::Open {
                    at: at.clone(),
                    max_concurrency: self.max_concurrency,
                    groups: Some(groups.clone()),
                    chains: chains.clone(),
                },
            }],
        }
    }

    /// The closed-loop cell of `c` workers at length `n`.
    pub fn closed(&self, n: u64, c: u32) -> PlannedCell {
        let budget = match (self.requests, self.duration) {
            (Some(r), _) => Budget::Requests(r),
            (None, Some(d)) => Budget::Duration(d),
            (None, None) => {
                Budget::Requests((u64::from(c) * REQUESTS_PER_WORKER).max(MIN_REQUESTS))
            }
        };
        PlannedCell {
            key: CellKey {
                context_tokens: n,
                concurrency: Some(c),
                rate: None,
            },
            arrivals: Arrivals::Closed {
                concurrency: c,
                budget,
            },
        }
    }

    /// The open-loop cell of rate `r` (the `ri`-th) at length `n` (the `li`-th): its send
    /// times drawn from the seed, so every run and every shard draws the same.
    fn open(&self, li: usize, ri: usize, n: u64, r: f64) -> PlannedCell {
        let arrival = match &self.shape {
            Shape::Open { arrival, .. } => *arrival,
            _ => Arrival::Poisson,
        };
        let requests = self.requests.or_else(|| {
            self.duration
                .is_none()
                .then(|| ((r * DEFAULT_OPEN_SPAN_S).ceil() as u64).max(MIN_REQUESTS))
        });
        let at = schedule(
            arrival,
            r,
            self.seed ^ ((li as u64) << 32) ^ ri as u64,
            requests,
            self.duration,
        );
        PlannedCell {
            key: CellKey {
                context_tokens: n,
                concurrency: None,
                rate: Some(r),
            },
            arrivals: Arrivals::Open {
                at,
                max_concurrency: self.max_concurrency,
                groups: None,
                chains: None,
            },
        }
    }
}

impl Arrivals {
    /// This process's part of the cell under `shard` (all of it without one).
    pub fn share(self, shard: Option<Shard>) -> Share {
        let Some(s) = shard else {
            return Share::Run {
                arrivals: self,
                workers: None,
                indices: None,
            };
        };
        match self {
            Arrivals::Closed {
                concurrency: c,
                mut budget,
            } => {
                let workers = s.workers(c);
                if workers == 0 {
                    let note = format!("shard {s} runs none of this cell's {c} workers");
                    return Share::Nothing {
                        workers: Some(0),
                        note,
                    };
                }
                if let Budget::Requests(n) = budget {
                    budget = Budget::Requests(s.requests(n, c));
                }
                Share::Run {
                    arrivals: Arrivals::Closed {
                        concurrency: workers,
                        budget,
                    },
                    workers: Some(workers),
                    indices: None,
                }
            }
            Arrivals::Open {
                at,
                max_concurrency,
                groups,
                chains,
            } => {
                let (mine, note): (Vec<(u64, Duration)>, _) = match &groups {
                    Some(g) => (
                        (0..at.len())
                            .filter(|&i| s.owns_group(g[i]))
                            .map(|i| (i as u64, at[i]))
                            .collect(),
                        format!("no prefix group of the trace falls to shard {s}"),
                    ),
                    None => (
                        s.arrivals(&at),
                        format!("no arrival of this cell's schedule falls to shard {s}"),
                    ),
                };
                if mine.is_empty() {
                    return Share::Nothing {
                        workers: None,
                        note,
                    };
                }
                let indices: Arc<[u64]> = mine.iter().map(|a| a.0).collect();
                // Whole groups are kept, and a session is one group: no link is cut.
                let chains = chains.map(|c| Arc::new(c.among(&indices)));
                Share::Run {
                    indices: Some(indices),
                    arrivals: Arrivals::Open {
                        at: mine.into_iter().map(|a| a.1).collect(),
                        max_concurrency,
                        groups,
                        chains,
                    },
                    workers: None,
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plan(shape: Shape) -> ArrivalPlan {
        ArrivalPlan {
            shape,
            requests: None,
            duration: None,
            max_concurrency: Some(3),
            seed: 7,
        }
    }

    #[test]
    fn closed_cells_default_to_four_requests_a_worker_and_at_least_sixteen() {
        let p = plan(Shape::Closed(vec![2, 8]));
        let cells = p.cells(0, 1024);
        let budgets: Vec<_> = cells
            .iter()
            .map(|c| match c.arrivals {
                Arrivals::Closed { budget, .. } => format!("{budget:?}"),
                _ => unreachable!(),
            })
            .collect();
        assert_eq!(budgets, ["Requests(16)", "Requests(32)"]);
        assert_eq!(cells[1].key.concurrency, Some(8));
    }

    #[test]
    fn open_cells_are_drawn_from_the_seed_and_differ_by_length_and_rate() {
        let p = plan(Shape::Open {
            rates: vec![5.0, 10.0],
            arrival: Arrival::Poisson,
        });
        assert_eq!(p.cells(0, 1024), p.cells(0, 1024), "same seed, same times");
        let (a, b) = (p.cells(0, 1024), p.cells(1, 2048));
        assert_ne!(a[0].arrivals, b[0].arrivals, "each length draws its own");
        let Arrivals::Open { at, .. } = &a[1].arrivals else {
            unreachable!()
        };
        assert_eq!(at.len(), 100, "10 s at 10/s");
    }

    #[test]
    fn shards_split_arrivals_by_index_and_traces_by_group() {
        let s = Shard::new(1, 2).unwrap();
        let at: Vec<Duration> = (0..6).map(Duration::from_secs).collect();
        let open = Arrivals::Open {
            at: at.clone(),
            max_concurrency: None,
            groups: None,
            chains: None,
        };
        let Share::Run { indices, .. } = open.share(Some(s)) else {
            panic!("shard 1/2 owns some arrivals")
        };
        let trace = Arrivals::Open {
            at,
            max_concurrency: None,
            groups: Some(vec![0, 0, 0, 0, 0, 0].into()),
            chains: None,
        };
        let both = [0, 1].map(|i| {
            matches!(
                trace.clone().share(Some(Shard::new(i, 2).unwrap())),
                Share::Run { .. }
            )
        });
        assert_eq!(
            both.iter().filter(|x| **x).count(),
            1,
            "one group, one shard"
        );
        let ix = indices.unwrap();
        assert!(
            ix.len() == 3 && ix.iter().all(|&i| s.owns_arrival(i)),
            "{ix:?}"
        );
    }
}
