//! The capacity arithmetic, pure: pool tokens, the longest context, concurrent requests at a
//! context, and the inverse questions (mem fraction for a target, context per request).

use super::budget::MemoryBudget;
use super::dtype::{KvDtype, WeightsDtype};
use super::error::PlanError;
use super::kv::KvLayout;
use super::model::ModelSpec;
use super::weights::{GIB, Weights};

/// Every input the arithmetic uses, defaults already filled in.
#[derive(Debug, Clone, PartialEq)]
pub struct PlanInputs {
    pub gpu_mem_gib: f64,
    pub gpus: u64,
    pub tp: u64,
    pub dp: u64,
    pub mem_fraction: f64,
    pub kv_dtype: KvDtype,
    /// Total weights of one replica, when given instead of derived.
    pub weights_gib: Option<f64>,
    pub weights_dtype: WeightsDtype,
    pub reserve_gib: f64,
    pub page_size_tokens: u64,
    pub context_tokens: Option<u64>,
    pub target_concurrency: Option<u64>,
}

/// How long a context fits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ContextFit {
    Tokens(u64),
    /// Every layer is windowed and the windows fit: the KV cache sets no limit.
    Unbounded,
}

impl ContextFit {
    pub fn tokens(self) -> Option<u64> {
        match self {
            ContextFit::Tokens(t) => Some(t),
            ContextFit::Unbounded => None,
        }
    }
}

/// Requests of `--context` tokens.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RequestFit {
    pub context_tokens: u64,
    /// Rounded up to whole pages.
    pub paged_tokens: u64,
    pub kv_bytes: u128,
    /// Per replica (one TP group's pool).
    pub max_concurrency: u64,
    /// Over all `--dp` replicas.
    pub max_concurrency_total: u64,
}

/// `--target-concurrency` requests of `--context` tokens.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TargetFit {
    pub concurrency: u64,
    /// The smallest mem fraction (to 0.001) at which the target fits; may be ≥ 1.
    pub required_mem_fraction: f64,
    pub fits: bool,
    /// The longest context each of `concurrency` requests can have at the current fraction.
    pub max_context_each: ContextFit,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    pub kv: KvLayout,
    pub weights: Weights,
    pub budget: MemoryBudget,
    /// Tokens the pool holds (page-aligned), per GPU and so per replica.
    pub pool_tokens: u64,
    pub pool_tokens_total: u64,
    /// The longest single request the pool holds.
    pub kv_max_context: ContextFit,
    pub request: Option<RequestFit>,
    pub target: Option<TargetFit>,
}

impl Plan {
    /// Bytes the pool's token slots hold.
    pub fn pool_kv_bytes(&self) -> u128 {
        u128::from(self.pool_tokens) * u128::from(self.kv.bytes_per_token())
    }
}

pub fn compute(model: &ModelSpec, inputs: &PlanInputs) -> Result<Plan, PlanError> {
    let kv = KvLayout::per_gpu(model, inputs.tp, inputs.kv_dtype)?;
    let weights = match inputs.weights_gib {
        Some(gib) => Weights::given(gib, inputs.tp),
        None => match &model.params {
            Ok((params, _)) => Weights::from_params(*params, inputs.weights_dtype, inputs.tp),
            Err(e) => {
                return Err(PlanError::WeightsUnknown {
                    reason: e.to_string(),
                });
            }
        },
    };
    let page = inputs.page_size_tokens.max(1);
    let budget = MemoryBudget::new(
        inputs.gpu_mem_gib,
        inputs.mem_fraction,
        weights.per_gpu_bytes,
        inputs.reserve_gib,
    )?;
    let pool_tokens = pool_tokens(&kv, &budget, page);
    let pool_kv_bytes = u128::from(pool_tokens) * u128::from(kv.bytes_per_token());
    let kv_max_context = longest_fitting(&kv, pool_kv_bytes, page);

    let request = inputs.context_tokens.map(|context| {
        let paged = context.div_ceil(page).saturating_mul(page);
        let kv_bytes = kv.request_bytes(paged);
        let max_concurrency = concurrency(pool_kv_bytes, kv_bytes);
        RequestFit {
            context_tokens: context,
            paged_tokens: paged,
            kv_bytes,
            max_concurrency,
            max_concurrency_total: max_concurrency.saturating_mul(inputs.dp),
        }
    });
    let sizing = Sizing {
        kv: &kv,
        weights: &weights,
        inputs,
        page,
    };
    let target = match (inputs.target_concurrency, request) {
        (Some(n), Some(req)) => Some(target_fit(&sizing, pool_kv_bytes, n, &req)?),
        _ => None,
    };
    Ok(Plan {
        kv,
        weights,
        budget,
        pool_tokens,
        pool_tokens_total: pool_tokens.saturating_mul(inputs.dp),
        kv_max_context,
        request,
        target,
    })
}

/// Whole pages of token slots in the pool.
fn pool_tokens(kv: &KvLayout, budget: &MemoryBudget, page: u64) -> u64 {
    let tokens = budget.kv_pool_bytes / kv.bytes_per_token().max(1);
    tokens / page * page
}

fn concurrency(pool_kv_bytes: u128, request_bytes: u128) -> u64 {
    if request_bytes == 0 {
        return 0;
    }
    u64::try_from(pool_kv_bytes / request_bytes).unwrap_or(u64::MAX)
}

/// The longest page-aligned request whose KV fits in `budget_bytes`.
pub fn longest_fitting(kv: &KvLayout, budget_bytes: u128, page: u64) -> ContextFit {
    if let Some(limit) = kv.request_bytes_limit()
        && limit <= budget_bytes
    {
        return ContextFit::Unbounded;
    }
    let page = page.max(1);
    let per_token_beyond = u128::from(kv.bytes_per_token_beyond_windows());
    let bound_tokens = match budget_bytes.checked_div(per_token_beyond) {
        Some(tokens) => u64::try_from(tokens).unwrap_or(u64::MAX),
        None => kv.windows.last().map_or(0, |(w, _)| *w),
    };
    let (mut lo, mut hi) = (0u64, (bound_tokens / page).saturating_add(1));
    while lo < hi {
        let mid = lo + (hi - lo).div_ceil(2);
        if kv.request_bytes(mid.saturating_mul(page)) <= budget_bytes {
            lo = mid;
        } else {
            hi = mid - 1;
        }
    }
    ContextFit::Tokens(lo.saturating_mul(page))
}

/// What stays fixed while the mem fraction varies, for the inverse question.
struct Sizing<'a> {
    kv: &'a KvLayout,
    weights: &'a Weights,
    inputs: &'a PlanInputs,
    page: u64,
}

impl Sizing<'_> {
    /// Bytes the pool's token slots hold at `fraction`; `None` when nothing is left for KV.
    fn pool_kv_bytes_at(&self, fraction: f64) -> Option<u128> {
        let budget = MemoryBudget::new(
            self.inputs.gpu_mem_gib,
            fraction,
            self.weights.per_gpu_bytes,
            self.inputs.reserve_gib,
        )
        .ok()?;
        let tokens = pool_tokens(self.kv, &budget, self.page);
        Some(u128::from(tokens) * u128::from(self.kv.bytes_per_token()))
    }
}

fn target_fit(
    sizing: &Sizing<'_>,
    pool_kv_bytes: u128,
    target: u64,
    request: &RequestFit,
) -> Result<TargetFit, PlanError> {
    if target == 0 {
        return Err(PlanError::Flag {
            flag: "target-concurrency",
            value: "0".into(),
            problem: "must be at least 1 request".into(),
        });
    }
    let gpu_mem_bytes = (sizing.inputs.gpu_mem_gib * GIB).round().max(1.0);
    let reserve_bytes = (sizing.inputs.reserve_gib * GIB).round();
    // One page of slack covers the pool's rounding down to whole pages.
    let kv_needed = request
        .kv_bytes
        .saturating_mul(u128::from(target))
        .saturating_add(u128::from(sizing.page) * u128::from(sizing.kv.bytes_per_token()));
    let needed = sizing.weights.per_gpu_bytes as f64 + reserve_bytes + kv_needed as f64;
    let mut fraction = (needed / gpu_mem_bytes * 1000.0).ceil() / 1000.0;
    // Float rounding in the budget can leave a byte short: step up until it really fits.
    for _ in 0..5 {
        let fits = sizing
            .pool_kv_bytes_at(fraction)
            .is_some_and(|pool| concurrency(pool, request.kv_bytes) >= target);
        if fraction >= 1.0 || fits {
            break;
        }
        fraction += 0.001;
    }
    Ok(TargetFit {
        concurrency: target,
        required_mem_fraction: fraction,
        fits: fraction < 1.0,
        max_context_each: longest_fitting(
            sizing.kv,
            pool_kv_bytes / u128::from(target),
            sizing.page,
        ),
    })
}
