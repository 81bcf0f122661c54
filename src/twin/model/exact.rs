//! A profile that states a known engine exactly (the simulator's own parameters, no
//! intervals): for tests, benches, and holding the twin against the simulator it describes.

use crate::sim::scheduler::EngineConfig;
use crate::twin::model::profile::{
    Envelope, Estimate, Limits, PROFILE_VERSION, Profile, StepModel,
};

/// The profile whose `engine_config()` is `config` (new-token ratio 1, no speculation),
/// with a `context_tokens` limit and an envelope as wide as the limits.
pub fn profile_of(config: &EngineConfig, context_tokens: u64) -> Profile {
    let known = |v: f64| Estimate::new(v, None, "known: simulator parameter");
    let c = &config.cost;
    Profile {
        profile_version: PROFILE_VERSION,
        tool_version: env!("CARGO_PKG_VERSION").to_string(),
        created_at: "known".into(),
        server: serde_json::json!({"url": "sim:known", "api": "sglang"}),
        step: StepModel {
            t0_s: known(c.model.t0),
            p0_tps: known(c.model.p0),
            q_s_per_token2: known(c.model.q),
            chunk_tokens: known(config.max_batch_tokens as f64),
            budget: config.budget,
            d0_s: known(c.model.d0),
            d1_s_per_token: known(c.model.d1),
            d2_s_per_request: known(c.d2),
            step_overhead_s: known(c.overhead),
            interference: known(c.interference),
        },
        limits: Limits {
            max_running: known(config.max_running as f64),
            pool_tokens: known(config.pool_tokens as f64),
            page_tokens: known(config.page_tokens as f64),
            context_tokens: known(context_tokens as f64),
            prefix_cache: config.cache,
        },
        envelope: Envelope {
            max_context_tokens: context_tokens,
            max_concurrency: config.max_running as u64,
        },
        speculation: None,
        caveats: Vec::new(),
        fit_quality: serde_json::Value::Null,
        uncertainty: None,
    }
}

/// A small engine for unit tests: prefill 20 ms + 10k tokens/s, decode 5 ms + 1 ms per
/// request beside the first, 4 slots, a 2048-token budget.
#[cfg(test)]
pub(crate) fn test_engine() -> EngineConfig {
    EngineConfig {
        cost: crate::sim::stepcost::StepCost {
            model: crate::sim::CostModel {
                t0: 0.02,
                p0: 10_000.0,
                q: 0.0,
                d0: 0.005,
                d1: 1e-8,
            },
            overhead: 0.0,
            d2: 0.001,
            interference: 0.0,
            spec_draft: Default::default(),
        },
        max_batch_tokens: 2048,
        budget: crate::sim::TokenBudget::All,
        max_running: 4,
        spec: 1,
        new_token_ratio: 1.0,
        page_tokens: 16,
        pool_tokens: 100_000,
        cache: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::CostModel;
    use crate::sim::stepcost::StepCost;

    #[test]
    fn the_profile_configures_the_engine_it_was_made_from() {
        let cfg = EngineConfig {
            cost: StepCost {
                model: CostModel {
                    t0: 0.025,
                    p0: 40_000.0,
                    q: 1e-10,
                    d0: 0.008,
                    d1: 3e-8,
                },
                overhead: 0.001,
                d2: 0.001,
                interference: 0.0,
                spec_draft: Default::default(),
            },
            max_batch_tokens: 2048,
            budget: crate::sim::TokenBudget::All,
            max_running: 6,
            spec: 1,
            new_token_ratio: 1.0,
            page_tokens: 16,
            pool_tokens: 200_000,
            cache: true,
        };
        let p = profile_of(&cfg, 32_768);
        assert_eq!(p.engine_config(), cfg);
        let back = Profile::parse(&p.to_json_pretty(), "mem").unwrap();
        assert_eq!(back, p);
    }
}
