//! Properties of the capacity arithmetic over random models and GPUs: the inverse answers
//! agree with the forward ones, and more memory never means less room.

use ctxbench::capacity::config::ConfigDoc;
use ctxbench::capacity::dtype::{KvDtype, WeightsDtype};
use ctxbench::capacity::model::ModelSpec;
use ctxbench::capacity::plan::{ContextFit, PlanInputs, compute};
use proptest::prelude::*;

fn model(layers: u64, kv_heads: u64, window: Option<u64>, windowed_every: u64) -> ModelSpec {
    let heads = kv_heads * 4;
    let types: Vec<String> = (0..layers)
        .map(|i| {
            if window.is_some() && i % windowed_every != 0 {
                "\"sliding_attention\"".to_string()
            } else {
                "\"full_attention\"".to_string()
            }
        })
        .collect();
    let json = format!(
        r#"{{"hidden_size": {}, "num_hidden_layers": {layers}, "num_attention_heads": {heads},
            "num_key_value_heads": {kv_heads}, "head_dim": 128, "vocab_size": 32000,
            "intermediate_size": 8192, "sliding_window": {}, "layer_types": [{}]}}"#,
        heads * 128,
        window.map_or("null".to_string(), |w| w.to_string()),
        types.join(",")
    );
    ModelSpec::from_doc(&ConfigDoc::parse("prop", &json).unwrap(), "prop").unwrap()
}

fn inputs(gpu: f64, fraction: f64, weights: f64, page: u64, ctx: u64, target: u64) -> PlanInputs {
    PlanInputs {
        gpu_mem_gib: gpu,
        gpus: 1,
        tp: 1,
        dp: 1,
        mem_fraction: fraction,
        kv_dtype: KvDtype::Bf16,
        weights_gib: Some(weights),
        weights_dtype: WeightsDtype::Bf16,
        reserve_gib: 0.5,
        page_size_tokens: page,
        context_tokens: Some(ctx),
        target_concurrency: Some(target),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn the_required_fraction_really_fits_the_target(
        layers in 1u64..80,
        kv_heads in prop::sample::select(vec![1u64, 2, 4, 8]),
        window in prop::option::of(64u64..8192),
        every in 1u64..6,
        gpu in 16.0f64..200.0,
        weights_share in 0.05f64..0.6,
        page in prop::sample::select(vec![1u64, 16, 64]),
        ctx in 1u64..300_000,
        target in 1u64..64,
    ) {
        let m = model(layers, kv_heads, window, every);
        let i = inputs(gpu, 0.9, gpu * weights_share, page, ctx, target);
        let plan = compute(&m, &i).unwrap();
        let t = plan.target.unwrap();
        if t.fits {
            // Planning again at the required fraction fits the target…
            let again = compute(&m, &PlanInputs { mem_fraction: t.required_mem_fraction, ..i.clone() })
                .unwrap();
            prop_assert!(again.request.unwrap().max_concurrency >= target);
            // …and 0.002 less does not (the answer is the smallest, to the thousandth).
            let lower = t.required_mem_fraction - 0.002;
            if lower > 0.0
                && let Ok(p) = compute(&m, &PlanInputs { mem_fraction: lower, ..i.clone() })
            {
                prop_assert!(p.request.unwrap().max_concurrency < target);
            }
        }
        // Concurrent requests never hold more than the pool.
        let req = plan.request.unwrap();
        prop_assert!(u128::from(req.max_concurrency) * req.kv_bytes <= plan.pool_kv_bytes());
        prop_assert!(u128::from(req.max_concurrency + 1) * req.kv_bytes > plan.pool_kv_bytes());
        // The longest context fits, one page more does not.
        if let ContextFit::Tokens(longest) = plan.kv_max_context {
            prop_assert_eq!(longest % page, 0);
            prop_assert!(plan.kv.request_bytes(longest) <= plan.pool_kv_bytes());
            prop_assert!(plan.kv.request_bytes(longest + page) > plan.pool_kv_bytes());
        }
    }

    #[test]
    fn more_memory_never_holds_less(
        layers in 1u64..80,
        window in prop::option::of(64u64..8192),
        gpu in 16.0f64..200.0,
        extra in 0.0f64..50.0,
        ctx in 1u64..300_000,
    ) {
        let m = model(layers, 8, window, 2);
        let small = compute(&m, &inputs(gpu, 0.9, gpu * 0.3, 16, ctx, 1)).unwrap();
        let big = compute(&m, &inputs(gpu + extra, 0.9, gpu * 0.3, 16, ctx, 1)).unwrap();
        prop_assert!(big.pool_tokens >= small.pool_tokens);
        prop_assert!(big.request.unwrap().max_concurrency >= small.request.unwrap().max_concurrency);
        prop_assert!(big.target.unwrap().required_mem_fraction <= small.target.unwrap().required_mem_fraction);
    }

    #[test]
    fn arbitrary_configs_never_panic(json in "\\{[\"a-z_:0-9, \\[\\]{}.-]{0,200}\\}") {
        if let Ok(doc) = ConfigDoc::parse("fuzz", &json)
            && let Ok(m) = ModelSpec::from_doc(&doc, "fuzz")
        {
            let _ = compute(&m, &inputs(80.0, 0.9, 10.0, 1, 4096, 2));
        }
    }

    #[test]
    fn extreme_field_values_are_errors_not_panics(
        fields in prop::collection::vec(
            (
                prop::sample::select(vec![
                    "hidden_size", "num_hidden_layers", "num_attention_heads",
                    "num_key_value_heads", "head_dim", "vocab_size", "intermediate_size",
                    "kv_lora_rank", "qk_rope_head_dim", "qk_nope_head_dim", "v_head_dim",
                    "q_lora_rank", "sliding_window", "n_routed_experts", "moe_intermediate_size",
                    "n_shared_experts", "first_k_dense_replace", "max_position_embeddings",
                    "num_parameters",
                ]),
                prop::sample::select(vec![0u64, 1, 2, 3, 7, 64, 4096, 1 << 24, (1 << 24) + 1, u64::MAX]),
            ),
            0..20,
        ),
        tp in 1u64..16,
        gpu in prop::sample::select(vec![0.001f64, 1.0, 80.0, 1e12]),
        ctx in prop::sample::select(vec![1u64, 4096, 1 << 40, u64::MAX]),
    ) {
        let object: serde_json::Map<String, serde_json::Value> = fields
            .into_iter()
            .map(|(k, v)| (k.to_string(), serde_json::Value::from(v)))
            .collect();
        let doc = ConfigDoc::from_value("fuzz", serde_json::Value::Object(object)).unwrap();
        if let Ok(m) = ModelSpec::from_doc(&doc, "fuzz") {
            let mut i = inputs(gpu, 0.9, 1.0, 16, ctx, 3);
            i.tp = tp;
            i.gpus = tp;
            i.weights_gib = None;
            let _ = compute(&m, &i);
        }
    }
}
