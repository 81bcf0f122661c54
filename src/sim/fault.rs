//! Injected faults for reliability tests: which kinds exist, and a seeded plan drawing one
//! (or none) per request in arrival order.

use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::sync::Mutex;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Fault {
    Http500,
    Http503,
    Http400,
    /// The connection drops mid-stream (no terminating chunk).
    Reset,
    /// After the first event only keep-alive comments, until the client leaves.
    Stall,
    /// A `data: {not json` event.
    Malformed,
    /// A `data: {"error":…}` event, then the stream ends.
    ErrorEvent,
    /// The stream ends cleanly without its finish event and `[DONE]`.
    NoFinal,
    /// `/flush_cache` answers 400 as if busy.
    FlushBusy,
}

pub const ALL: [Fault; 9] = [
    Fault::Http500,
    Fault::Http503,
    Fault::Http400,
    Fault::Reset,
    Fault::Stall,
    Fault::Malformed,
    Fault::ErrorEvent,
    Fault::NoFinal,
    Fault::FlushBusy,
];

/// Where a fault is drawn: it is only drawn among kinds that can happen there.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Site {
    StreamedGeneration,
    WholeGeneration,
    Flush,
}

impl Fault {
    pub fn name(self) -> &'static str {
        match self {
            Fault::Http500 => "http500",
            Fault::Http503 => "http503",
            Fault::Http400 => "http400",
            Fault::Reset => "reset",
            Fault::Stall => "stall",
            Fault::Malformed => "malformed",
            Fault::ErrorEvent => "error_event",
            Fault::NoFinal => "no_final",
            Fault::FlushBusy => "flush_busy",
        }
    }

    fn parse(name: &str) -> Option<Fault> {
        ALL.into_iter().find(|f| f.name() == name)
    }

    fn happens_at(self, site: Site) -> bool {
        use Fault::*;
        match site {
            Site::Flush => self == FlushBusy,
            Site::StreamedGeneration => self != FlushBusy,
            Site::WholeGeneration => {
                matches!(self, Http500 | Http503 | Http400 | Reset | Malformed)
            }
        }
    }
}

/// Seeded fault draws; identical request sequences meet identical faults.
#[derive(Debug)]
pub struct FaultPlan {
    rate: f64,
    kinds: Vec<Fault>,
    rng: Mutex<ChaCha8Rng>,
}

impl FaultPlan {
    /// `kinds`: comma-separated names, `None` = all. Errors name the flag and the valid kinds.
    pub fn new(rate: f64, kinds: Option<&str>, seed: u64) -> anyhow::Result<FaultPlan> {
        if !(0.0..=1.0).contains(&rate) {
            anyhow::bail!("--fault-rate must be a probability between 0 and 1, got {rate}");
        }
        let kinds = match kinds {
            None => ALL.to_vec(),
            Some(list) => list
                .split(',')
                .map(str::trim)
                .filter(|s| !s.is_empty())
                .map(|name| {
                    Fault::parse(name).ok_or_else(|| {
                        let valid: Vec<&str> = ALL.iter().map(|f| f.name()).collect();
                        anyhow::anyhow!(
                            "--fault-kinds: unknown kind {name:?}; valid kinds: {}",
                            valid.join(",")
                        )
                    })
                })
                .collect::<anyhow::Result<Vec<_>>>()?,
        };
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        rng.set_stream(u64::MAX);
        Ok(FaultPlan {
            rate,
            kinds,
            rng: Mutex::new(rng),
        })
    }

    pub fn is_active(&self) -> bool {
        self.rate > 0.0 && !self.kinds.is_empty()
    }

    pub fn kind_names(&self) -> Vec<&'static str> {
        self.kinds.iter().map(|f| f.name()).collect()
    }

    pub fn rate(&self) -> f64 {
        self.rate
    }

    /// The fault this request meets, if any.
    pub fn draw(&self, site: Site) -> Option<Fault> {
        if !self.is_active() {
            return None;
        }
        let eligible: Vec<Fault> = self
            .kinds
            .iter()
            .copied()
            .filter(|f| f.happens_at(site))
            .collect();
        let mut rng = self.rng.lock().unwrap_or_else(|p| p.into_inner());
        let hit = rng.random_bool(self.rate);
        if !hit || eligible.is_empty() {
            return None;
        }
        Some(eligible[rng.random_range(0..eligible.len())])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unknown_kind_is_refused_naming_the_valid_ones() {
        let err = FaultPlan::new(0.5, Some("reset,bogus"), 0)
            .unwrap_err()
            .to_string();
        assert!(err.contains("bogus") && err.contains("no_final"), "{err}");
        assert!(FaultPlan::new(1.5, None, 0).is_err());
    }

    #[test]
    fn draws_are_deterministic_and_respect_the_site() {
        let draws = |seed| {
            let plan = FaultPlan::new(0.5, None, seed).unwrap();
            (0..64)
                .map(|_| plan.draw(Site::StreamedGeneration))
                .collect::<Vec<_>>()
        };
        assert_eq!(draws(7), draws(7));
        assert_ne!(draws(7), draws(8));
        let faults = draws(7);
        assert!(faults.iter().any(|f| f.is_none()) && faults.iter().any(|f| f.is_some()));
        assert!(!faults.contains(&Some(Fault::FlushBusy)));
    }

    #[test]
    fn rate_one_always_faults_with_a_listed_kind() {
        let plan = FaultPlan::new(1.0, Some("stall, flush_busy"), 3).unwrap();
        for _ in 0..20 {
            assert_eq!(plan.draw(Site::StreamedGeneration), Some(Fault::Stall));
            assert_eq!(plan.draw(Site::Flush), Some(Fault::FlushBusy));
            assert_eq!(plan.draw(Site::WholeGeneration), None);
        }
        assert_eq!(
            FaultPlan::new(0.0, None, 0).unwrap().draw(Site::Flush),
            None
        );
    }
}
