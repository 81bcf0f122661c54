//! State shared by every route: configuration, the serving engine (scheduler, KV pool and
//! prefix cache), admission counting, fault draws and the ground-truth log.

use super::SimConfig;
use super::cost::CostModel;
use super::driver::Engine;
use super::fault::FaultPlan;
use super::scheduler::EngineConfig;
use super::stepcost::StepCost;
use super::truth::TruthLog;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;
use tokio::sync::watch;
use tokio::time::Instant;

/// The KV pool the simulator claims, as a multiple of the context length.
pub const POOL_CONTEXTS: u64 = 4;

pub struct SimState {
    pub config: SimConfig,
    /// The one-request cost model, for front ends that report cost-model durations.
    #[allow(dead_code)]
    pub cost: CostModel,
    pub faults: FaultPlan,
    pub truth: TruthLog,
    /// The step loop that computes every request.
    pub engine: Engine,
    in_flight: AtomicUsize,
    arrivals: AtomicU64,
    stopping: watch::Sender<bool>,
    /// Differs on every start, seed or not: lets a client see that the server restarted.
    pub instance_id: String,
}

/// A request in flight over HTTP (queued or running); released on drop.
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
        let engine = Engine::start(engine_config(&config)?)?;
        Ok(SimState {
            cost,
            faults,
            truth: TruthLog::default(),
            engine,
            in_flight: AtomicUsize::new(0),
            arrivals: AtomicU64::new(0),
            stopping: watch::Sender::new(false),
            instance_id: format!("{:016x}", rand::random::<u64>()),
            config,
        })
    }

    /// A slot; with `--reject-when-full`, `None` when `--max-running` requests are already
    /// in flight (otherwise requests beyond it queue in the engine).
    pub fn admit(self: &Arc<Self>) -> Option<Slot> {
        let max = if self.config.cost.reject_when_full {
            self.config.cost.max_running
        } else {
            usize::MAX
        };
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
        self.engine.stop();
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

    /// Sleep for a while; false when the server shuts down first.
    pub async fn sleep(&self, duration: Duration) -> bool {
        self.sleep_until(Instant::now() + duration).await
    }
}

/// The engine's settings from the flags, each checked and named when wrong.
fn engine_config(config: &SimConfig) -> anyhow::Result<EngineConfig> {
    let args = &config.cost;
    let cost = StepCost {
        model: CostModel::from_args(args),
        overhead: args.step_overhead,
        d2: args.d2,
        interference: args.interference,
        spec_draft: super::stepcost::SpecDraftCost {
            per_draft_token_s: args.spec_draft_token_s,
            drafter_step_s: args.spec_drafter_step_s,
        },
    };
    if let Some(problem) = cost.problem() {
        anyhow::bail!(problem);
    }
    if args.max_batch_tokens == 0 {
        anyhow::bail!("--max-batch-tokens must be at least 1 token per step");
    }
    if !(args.new_token_ratio.is_finite() && (0.0..=1.0).contains(&args.new_token_ratio)) {
        anyhow::bail!(
            "--sim-new-token-ratio must be between 0 and 1, got {}",
            args.new_token_ratio
        );
    }
    let pool = args
        .kv_pool_tokens
        .unwrap_or_else(|| pool_tokens(args.context_length));
    let page = args.page_size.max(1);
    if pool / page < args.context_length.div_ceil(page) {
        anyhow::bail!(
            "--kv-pool-tokens {pool} is smaller than --context-length {}: a request of the full \
             context could never run; raise the pool or lower the context",
            args.context_length
        );
    }
    Ok(EngineConfig {
        cost,
        max_batch_tokens: args.max_batch_tokens,
        budget: args.budget,
        max_running: args.max_running,
        spec: args.spec,
        new_token_ratio: args.new_token_ratio,
        page_tokens: args.page_size,
        pool_tokens: pool,
        cache: !args.no_cache,
    })
}

/// The default KV pool: `POOL_CONTEXTS` contexts.
pub fn pool_tokens(context_length: u64) -> u64 {
    context_length.saturating_mul(POOL_CONTEXTS)
}
