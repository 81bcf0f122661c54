//! State shared by every route: configuration, the compute lock, the prefix cache,
//! admission counting, fault draws and the ground-truth log.

use super::SimConfig;
use super::cache::PrefixCache;
use super::cost::CostModel;
use super::fault::FaultPlan;
use super::truth::TruthLog;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tokio::sync::watch;
use tokio::time::Instant;

/// The KV pool the simulator claims, as a multiple of the context length.
pub const POOL_CONTEXTS: u64 = 4;

pub struct SimState {
    pub config: SimConfig,
    pub cost: CostModel,
    pub faults: FaultPlan,
    pub truth: TruthLog,
    /// Held by one request for its whole prefill and decode: one request computes at a time.
    compute: tokio::sync::Mutex<()>,
    cache: Mutex<PrefixCache>,
    in_flight: AtomicUsize,
    arrivals: AtomicU64,
    stopping: watch::Sender<bool>,
    /// Differs on every start, seed or not: lets a client see that the server restarted.
    pub instance_id: String,
}

/// A request's place among `--max-running`; released on drop.
pub struct Slot {
    state: Arc<SimState>,
}

impl Drop for Slot {
    fn drop(&mut self) {
        self.state.in_flight.fetch_sub(1, Ordering::SeqCst);
    }
}

impl SimState {
    pub fn new(config: SimConfig) -> anyhow::Result<SimState> {
        let cost = CostModel::from_args(&config.cost);
        if let Some(problem) = cost.problem() {
            anyhow::bail!(problem);
        }
        let args = &config.cost;
        if args.page_size == 0 {
            anyhow::bail!("--sim-page-size must be at least 1 token");
        }
        if args.spec == 0 {
            anyhow::bail!("--spec must be at least 1 token per step");
        }
        if args.context_length < 2 {
            anyhow::bail!("--context-length must be at least 2 tokens");
        }
        if args.max_running == 0 {
            anyhow::bail!("--max-running must be at least 1");
        }
        let faults = FaultPlan::new(args.fault_rate, args.fault_kinds.as_deref(), config.seed)?;
        let cache = PrefixCache::new(
            args.page_size,
            pool_tokens(args.context_length),
            !args.no_cache,
        );
        Ok(SimState {
            cost,
            faults,
            truth: TruthLog::default(),
            compute: tokio::sync::Mutex::new(()),
            cache: Mutex::new(cache),
            in_flight: AtomicUsize::new(0),
            arrivals: AtomicU64::new(0),
            stopping: watch::Sender::new(false),
            instance_id: format!("{:016x}", rand::random::<u64>()),
            config,
        })
    }

    pub fn cache(&self) -> MutexGuard<'_, PrefixCache> {
        self.cache
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// A slot, or `None` when `--max-running` requests are already in flight.
    pub fn admit(self: &Arc<Self>) -> Option<Slot> {
        let max = self.config.cost.max_running;
        self.in_flight
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                (n < max).then_some(n + 1)
            })
            .ok()?;
        Some(Slot {
            state: Arc::clone(self),
        })
    }

    pub fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::SeqCst)
    }

    /// The seeded randomness of the next arriving request (early stop, words, spec draws).
    pub fn next_request_rng(&self) -> ChaCha8Rng {
        let index = self.arrivals.fetch_add(1, Ordering::SeqCst);
        let mut rng = ChaCha8Rng::seed_from_u64(self.config.seed);
        rng.set_stream(index);
        rng
    }

    pub fn stop(&self) {
        self.stopping.send_replace(true);
    }

    pub fn is_stopping(&self) -> bool {
        *self.stopping.borrow()
    }

    /// Sleep to an absolute instant; false when the server shuts down first.
    pub async fn sleep_until(&self, at: Instant) -> bool {
        let mut stopping = self.stopping.subscribe();
        tokio::select! {
            _ = tokio::time::sleep_until(at) => true,
            _ = stopping.wait_for(|s| *s) => false,
        }
    }

    /// Like `sleep_until`, but without the timer's millisecond rounding: sleeps to just
    /// before `at`, then yields until it passes. Used where a late wake would bias a
    /// measured figure (TTFT); decode steps use plain absolute sleeps, whose lateness is
    /// the same on every step and cancels out of rates.
    pub async fn sleep_until_precise(&self, at: Instant) -> bool {
        if !self.sleep_until(at - PRECISE_MARGIN).await {
            return false;
        }
        while Instant::now() < at {
            tokio::task::yield_now().await;
        }
        true
    }

    /// Sleep for a while; false when the server shuts down first.
    pub async fn sleep(&self, duration: Duration) -> bool {
        self.sleep_until(Instant::now() + duration).await
    }

    /// Wait for the compute lock; `None` when the server shuts down first.
    pub async fn compute_turn(&self) -> Option<tokio::sync::MutexGuard<'_, ()>> {
        let mut stopping = self.stopping.subscribe();
        tokio::select! {
            guard = self.compute.lock() => Some(guard),
            _ = stopping.wait_for(|s| *s) => None,
        }
    }
}

/// `max_total_num_tokens` the simulator reports.
/// How long before a precise deadline the timer hands over to yielding.
const PRECISE_MARGIN: Duration = Duration::from_millis(2);

pub fn pool_tokens(context_length: u64) -> u64 {
    context_length.saturating_mul(POOL_CONTEXTS)
}

/// `at + seconds`, saturating far in the future instead of overflowing.
pub fn later(at: Instant, seconds: f64) -> Instant {
    let far = Duration::from_secs(365 * 24 * 3600);
    let step = Duration::try_from_secs_f64(seconds.max(0.0))
        .unwrap_or(far)
        .min(far);
    at.checked_add(step).unwrap_or(at)
}
