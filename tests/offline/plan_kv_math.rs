//! Hand-computed capacity cases: each expected figure is derived in the comment above it.
//! GiB = 2^30 bytes throughout.

use ctxbench::capacity::config::ConfigDoc;
use ctxbench::capacity::dtype::{KvDtype, WeightsDtype};
use ctxbench::capacity::error::PlanError;
use ctxbench::capacity::kv::{KvLayout, KvSharding};
use ctxbench::capacity::model::ModelSpec;
use ctxbench::capacity::plan::{ContextFit, PlanInputs, compute};

const GIB: u64 = 1 << 30;

fn model(json: &str) -> ModelSpec {
    let doc = ConfigDoc::parse("test config", json).expect("valid JSON");
    ModelSpec::from_doc(&doc, "test").expect("valid config")
}

fn inputs(gpu_mem_gib: f64, tp: u64, mem_fraction: f64, weights_gib: f64) -> PlanInputs {
    PlanInputs {
        gpu_mem_gib,
        gpus: tp,
        tp,
        dp: 1,
        mem_fraction,
        kv_dtype: KvDtype::Bf16,
        weights_gib: Some(weights_gib),
        weights_dtype: WeightsDtype::Bf16,
        reserve_gib: 0.0,
        page_size_tokens: 1,
        context_tokens: None,
        target_concurrency: None,
    }
}

/// Llama-3-8B shape: 32 layers, 32 query heads, 8 KV heads, head_dim = 4096 / 32 = 128.
const LLAMA3_8B: &str = r#"{
    "model_type": "llama", "hidden_size": 4096, "intermediate_size": 14336,
    "num_hidden_layers": 32, "num_attention_heads": 32, "num_key_value_heads": 8,
    "vocab_size": 128256, "max_position_embeddings": 8192, "tie_word_embeddings": false,
    "torch_dtype": "bfloat16"
}"#;

#[test]
fn gqa_llama3_8b_kv_per_token() {
    let m = model(LLAMA3_8B);
    // TP 1: per layer 2 (K,V) × 8 heads × 128 × 2 B = 4,096 B; × 32 layers = 131,072 B.
    let tp1 = KvLayout::per_gpu(&m, 1, KvDtype::Bf16).unwrap();
    assert_eq!(tp1.bytes_per_token(), 131_072);
    // TP 2: 8 / 2 = 4 heads per GPU → half: 65,536 B.
    let tp2 = KvLayout::per_gpu(&m, 2, KvDtype::Bf16).unwrap();
    assert_eq!(tp2.bytes_per_token(), 65_536);
    // TP 8: 1 head per GPU, no replication yet: 131,072 / 8 = 16,384 B.
    let tp8 = KvLayout::per_gpu(&m, 8, KvDtype::Bf16).unwrap();
    assert_eq!(tp8.bytes_per_token(), 16_384);
    assert!(matches!(
        tp8.sharding,
        KvSharding::Gqa {
            replicated: false,
            ..
        }
    ));
    // fp8 halves it: 65,536 B at TP 1.
    assert_eq!(
        KvLayout::per_gpu(&m, 1, KvDtype::Fp8)
            .unwrap()
            .bytes_per_token(),
        65_536
    );
}

#[test]
fn gqa_llama3_8b_pool_concurrency_and_inverse() {
    let m = model(LLAMA3_8B);
    let mut i = inputs(80.0, 1, 0.9, 16.0);
    i.reserve_gib = 2.0;
    i.context_tokens = Some(32_768);
    i.target_concurrency = Some(13);
    let plan = compute(&m, &i).unwrap();
    // usable 80 × 0.9 = 72 GiB; pool = 72 − 16 (weights) − 2 (reserve) = 54 GiB.
    assert_eq!(plan.budget.kv_pool_bytes, 54 * GIB);
    // 54 × 2^30 / 131,072 = 54 × 8,192 = 442,368 tokens.
    assert_eq!(plan.pool_tokens, 442_368);
    // The longest single request is the whole pool (8,192 is the model's own limit).
    assert_eq!(plan.kv_max_context, ContextFit::Tokens(442_368));
    // 442,368 / 32,768 = 13.5 → 13 requests at once.
    let req = plan.request.unwrap();
    assert_eq!(req.kv_bytes, 32_768 * 131_072); // 4 GiB a request
    assert_eq!(req.max_concurrency, 13);
    // Inverse: 13 × 4 GiB = 52 GiB + 16 + 2 = 70 GiB (+ one page, 131,072 B) over 80 GiB
    // = 0.8750015 → 0.876 rounded up to the next thousandth.
    let target = plan.target.unwrap();
    assert_eq!(target.required_mem_fraction, 0.876);
    assert!(target.fits);
    // At the current 0.9, each of 13 requests can have 442,368 / 13 = 34,028.3 → 34,028.
    assert_eq!(target.max_context_each, ContextFit::Tokens(34_028));
}

#[test]
fn pages_and_data_parallel() {
    let m = model(LLAMA3_8B);
    let mut i = inputs(80.0, 1, 0.9, 16.0);
    i.reserve_gib = 2.0;
    i.gpus = 2;
    i.dp = 2;
    i.page_size_tokens = 16;
    i.context_tokens = Some(1_000);
    let plan = compute(&m, &i).unwrap();
    // 442,368 is a multiple of 16, so page alignment keeps it.
    assert_eq!(plan.pool_tokens, 442_368);
    assert_eq!(plan.pool_tokens_total, 2 * 442_368);
    // 1,000 tokens round up to 63 pages = 1,008; 442,368 / 1,008 = 438.9 → 438 per replica.
    let req = plan.request.unwrap();
    assert_eq!(req.paged_tokens, 1_008);
    assert_eq!(req.max_concurrency, 438);
    // Two replicas, each its own pool: 876.
    assert_eq!(req.max_concurrency_total, 876);
}

/// Qwen3-235B-A22B shape: 94 layers, 64 query heads, 4 KV heads, head_dim 128.
const QWEN3_235B: &str = r#"{
    "model_type": "qwen3_moe", "hidden_size": 4096, "num_hidden_layers": 94,
    "num_attention_heads": 64, "num_key_value_heads": 4, "head_dim": 128,
    "moe_intermediate_size": 1536, "num_experts": 128, "vocab_size": 151936,
    "max_position_embeddings": 40960, "use_sliding_window": false, "sliding_window": null
}"#;

#[test]
fn qwen_gqa_with_tp_larger_than_kv_heads() {
    let m = model(QWEN3_235B);
    // TP 2: 4 / 2 = 2 heads per GPU: 94 × 2 × 2 × 128 × 2 B = 96,256 B.
    assert_eq!(
        KvLayout::per_gpu(&m, 2, KvDtype::Bf16)
            .unwrap()
            .bytes_per_token(),
        96_256
    );
    // TP 4: one head each: 94 × 2 × 1 × 128 × 2 B = 48,128 B.
    assert_eq!(
        KvLayout::per_gpu(&m, 4, KvDtype::Bf16)
            .unwrap()
            .bytes_per_token(),
        48_128
    );
    // TP 8 > 4 KV heads: each GPU still holds one whole head (each head on 2 GPUs), so the
    // figure stops shrinking: 48,128 B, not 24,064.
    let tp8 = KvLayout::per_gpu(&m, 8, KvDtype::Bf16).unwrap();
    assert_eq!(tp8.bytes_per_token(), 48_128);
    assert!(matches!(
        tp8.sharding,
        KvSharding::Gqa {
            kv_heads_per_gpu: 1,
            replicated: true,
            ..
        }
    ));
    // Pool at TP 8 on 140 GiB GPUs, fraction 0.85, 440 GiB of weights:
    // usable 119 GiB − 440 / 8 = 55 GiB → 64 GiB = 68,719,476,736 B / 48,128 = 1,427,848.6.
    let mut i = inputs(140.0, 8, 0.85, 440.0);
    i.context_tokens = Some(40_960);
    let plan = compute(&m, &i).unwrap();
    assert_eq!(plan.budget.kv_pool_bytes, 64 * GIB);
    assert_eq!(plan.pool_tokens, 1_427_848);
    // 1,427,848 / 40,960 = 34.9 → 34 full-length requests.
    assert_eq!(plan.request.unwrap().max_concurrency, 34);
}

#[test]
fn tp_must_split_heads_evenly() {
    // Qwen2.5-7B: 28 query heads, 4 KV heads; TP 8 does not divide 28.
    let m = model(
        r#"{"hidden_size": 3584, "num_hidden_layers": 28, "num_attention_heads": 28,
            "num_key_value_heads": 4, "vocab_size": 152064, "intermediate_size": 18944}"#,
    );
    assert_eq!(
        KvLayout::per_gpu(&m, 8, KvDtype::Bf16).unwrap_err(),
        PlanError::HeadsNotDivisible { tp: 8, heads: 28 }
    );
    // TP 4 = the KV heads: 28 × 2 × 1 × 128 × 2 B = 14,336 B (head_dim 3584 / 28 = 128).
    assert_eq!(
        KvLayout::per_gpu(&m, 4, KvDtype::Bf16)
            .unwrap()
            .bytes_per_token(),
        14_336
    );
    // 12 heads, 8 KV heads, TP 6: 6 divides 12 but neither 8 | 6 nor 6 | 8.
    let odd = model(
        r#"{"hidden_size": 1536, "num_hidden_layers": 2, "num_attention_heads": 24,
            "num_key_value_heads": 8, "vocab_size": 10, "intermediate_size": 10}"#,
    );
    assert!(matches!(
        KvLayout::per_gpu(&odd, 6, KvDtype::Bf16),
        Err(PlanError::KvHeadsIncompatible { tp: 6, kv_heads: 8 })
    ));
}

/// DeepSeek-V3 shape: 61 layers of MLA with kv_lora_rank 512 and qk_rope_head_dim 64.
const DEEPSEEK_V3: &str = r#"{
    "model_type": "deepseek_v3", "hidden_size": 7168, "intermediate_size": 18432,
    "moe_intermediate_size": 2048, "n_routed_experts": 256, "n_shared_experts": 1,
    "first_k_dense_replace": 3, "num_hidden_layers": 61, "num_attention_heads": 128,
    "num_key_value_heads": 128, "q_lora_rank": 1536, "kv_lora_rank": 512,
    "qk_nope_head_dim": 128, "qk_rope_head_dim": 64, "v_head_dim": 128,
    "vocab_size": 129280, "max_position_embeddings": 163840
}"#;

#[test]
fn mla_deepseek_v3_latent_is_replicated() {
    let m = model(DEEPSEEK_V3);
    // One latent of 512 + 64 = 576 elements per layer × 2 B = 1,152 B; × 61 = 70,272 B.
    // num_key_value_heads (128) plays no part: MLA caches the latent, not per-head K and V.
    let tp1 = KvLayout::per_gpu(&m, 1, KvDtype::Bf16).unwrap();
    assert_eq!(tp1.bytes_per_token(), 70_272);
    // Every TP rank keeps the whole latent: TP 8 is still 70,272 B per GPU.
    let tp8 = KvLayout::per_gpu(&m, 8, KvDtype::Bf16).unwrap();
    assert_eq!(tp8.bytes_per_token(), 70_272);
    assert_eq!(tp8.sharding, KvSharding::Mla { latent_dim: 576 });
    // fp8: 576 × 1 B × 61 = 35,136 B.
    assert_eq!(
        KvLayout::per_gpu(&m, 8, KvDtype::Fp8)
            .unwrap()
            .bytes_per_token(),
        35_136
    );
}

#[test]
fn mla_deepseek_v3_plan_and_inverse() {
    let m = model(DEEPSEEK_V3);
    let mut i = inputs(140.0, 8, 0.9, 640.0);
    i.reserve_gib = 4.0;
    i.context_tokens = Some(131_072);
    i.target_concurrency = Some(8);
    let plan = compute(&m, &i).unwrap();
    // usable 140 × 0.9 = 126 GiB − 640 / 8 = 80 GiB − 4 GiB reserve = 42 GiB
    // = 45,097,156,608 B / 70,272 = 641,751.6 → 641,751 tokens.
    assert_eq!(plan.budget.kv_pool_bytes, 42 * GIB);
    assert_eq!(plan.pool_tokens, 641_751);
    // 641,751 / 131,072 = 4.9 → 4 requests of 128k.
    assert_eq!(plan.request.unwrap().max_concurrency, 4);
    // 8 × 131,072 × 70,272 B = 68.625 GiB + 80 + 4 = 152.625 GiB (+ one page) over 140 GiB
    // = 1.09018 → 1.091: it does not fit.
    let target = plan.target.unwrap();
    assert_eq!(target.required_mem_fraction, 1.091);
    assert!(!target.fits);
    // fp8 KV halves the KV term: 34.3125 + 84 = 118.3125 GiB / 140 = 0.84509 → 0.846.
    i.kv_dtype = KvDtype::Fp8;
    let target = compute(&m, &i).unwrap().target.unwrap();
    assert_eq!(target.required_mem_fraction, 0.846);
    assert!(target.fits);
}

/// gpt-oss-120b shape: 36 layers alternating sliding (window 128) and full attention,
/// 8 KV heads of 64.
fn gpt_oss_like() -> String {
    let types: Vec<&str> = (0..36)
        .map(|i| {
            if i % 2 == 0 {
                "\"sliding_attention\""
            } else {
                "\"full_attention\""
            }
        })
        .collect();
    format!(
        r#"{{"model_type": "gpt_oss", "hidden_size": 2880, "num_hidden_layers": 36,
            "num_attention_heads": 64, "num_key_value_heads": 8, "head_dim": 64,
            "intermediate_size": 2880, "num_local_experts": 128, "vocab_size": 201088,
            "sliding_window": 128, "max_position_embeddings": 131072,
            "layer_types": [{}]}}"#,
        types.join(",")
    )
}

#[test]
fn sliding_window_layers_cap_at_the_window() {
    let m = model(&gpt_oss_like());
    assert_eq!(m.sliding_layers(), 18);
    let kv = KvLayout::per_gpu(&m, 1, KvDtype::Bf16).unwrap();
    // Per layer 2 × 8 × 64 × 2 B = 2,048 B. Inside the window all 36 layers: 73,728 B;
    // past it only the 18 full layers grow: 36,864 B.
    assert_eq!(kv.bytes_per_token(), 73_728);
    assert_eq!(kv.bytes_per_token_beyond_windows(), 36_864);
    // 100 tokens (inside the window): 100 × 73,728 = 7,372,800 B.
    assert_eq!(kv.request_bytes(100), 7_372_800);
    // 131,072 tokens: 18 × 2,048 × 131,072 + 18 × 2,048 × 128 = 36,864 × 131,200
    // = 4,836,556,800 B.
    assert_eq!(kv.request_bytes(131_072), 4_836_556_800);

    let mut i = inputs(80.0, 1, 0.9, 61.0);
    i.context_tokens = Some(131_072);
    let plan = compute(&m, &i).unwrap();
    // usable 72 GiB − 61 = 11 GiB = 11,811,160,064 B / 73,728 = 160,199.1 → 160,199 slots,
    // holding 160,199 × 73,728 = 11,811,151,872 B.
    assert_eq!(plan.pool_tokens, 160_199);
    // 11,811,151,872 / 4,836,556,800 = 2.44 → 2 requests of 128k.
    assert_eq!(plan.request.unwrap().max_concurrency, 2);
    // Longest single request: 36,864 × (C + 128) ≤ 11,811,151,872 → C + 128 ≤ 320,398
    // → C = 320,270 (the model itself stops at 131,072).
    assert_eq!(plan.kv_max_context, ContextFit::Tokens(320_270));

    // Without the cap every token costs 73,728 B: 131,072 × 73,728 = 9 GiB, so just 1 fits.
    let full = model(&gpt_oss_like()).without_windows();
    let plan = compute(&full, &i).unwrap();
    assert_eq!(plan.request.unwrap().kv_bytes, 131_072 * 73_728);
    assert_eq!(plan.request.unwrap().max_concurrency, 1);
    assert_eq!(plan.kv_max_context, ContextFit::Tokens(160_199));
}

#[test]
fn all_layers_windowed_sets_no_kv_limit() {
    // Mistral-7B-v0.1: every layer has a 4,096-token window; per token 32 × 2 × 8 × 128 × 2
    // = 131,072 B, and a request never holds more than 4,096 × 131,072 = 0.5 GiB.
    let m = model(
        r#"{"hidden_size": 4096, "num_hidden_layers": 32, "num_attention_heads": 32,
            "num_key_value_heads": 8, "sliding_window": 4096, "vocab_size": 32000,
            "intermediate_size": 14336, "max_position_embeddings": 32768}"#,
    );
    let mut i = inputs(24.0, 1, 0.9, 14.0);
    i.context_tokens = Some(32_768);
    let plan = compute(&m, &i).unwrap();
    // usable 21.6 GiB − 14 = 7.6 GiB ≥ 0.5 GiB: any length fits the pool.
    assert_eq!(plan.kv_max_context, ContextFit::Unbounded);
    // 32k requests cost the same as 4k ones: 7.6 / 0.5 = 15.2 → 15.
    assert_eq!(plan.request.unwrap().kv_bytes, 4_096 * 131_072);
    assert_eq!(plan.request.unwrap().max_concurrency, 15);
}

#[test]
fn weights_from_parameters() {
    let m = model(LLAMA3_8B);
    // Embeddings 128,256 × 4,096 × 2 (untied) = 1,050,673,152; per layer q,o 4,096² each,
    // k,v 4,096 × 1,024 each = 41,943,040, MLP 3 × 4,096 × 14,336 = 176,160,768, norms
    // 2 × 4,096: 218,112,000 × 32 = 6,979,584,000; final norm 4,096 → 8,030,261,248,
    // Meta's published count.
    let (params, _) = m.params.clone().unwrap();
    assert_eq!(params.total, 8_030_261_248);
    assert_eq!(params.experts, 0);
    let mut i = inputs(80.0, 2, 0.9, 0.0);
    i.weights_gib = None;
    let plan = compute(&m, &i).unwrap();
    // bf16: × 2 B = 16,060,522,496 B, / TP 2 = 8,030,261,248 B per GPU.
    assert_eq!(plan.weights.total_bytes, 16_060_522_496);
    assert_eq!(plan.weights.per_gpu_bytes, 8_030_261_248);
    // int4: a quarter of that.
    i.weights_dtype = WeightsDtype::Int4;
    assert_eq!(compute(&m, &i).unwrap().weights.total_bytes, 4_015_130_624);
}

#[test]
fn weights_larger_than_memory_are_an_error() {
    let m = model(LLAMA3_8B);
    // 80 GiB of weights on one 80 GiB GPU at 0.9: nothing left.
    let err = compute(&m, &inputs(80.0, 1, 0.9, 80.0)).unwrap_err();
    let text = err.to_string();
    assert!(matches!(err, PlanError::NoRoomForKv { .. }), "{text}");
    assert!(
        text.contains("--tp") && text.contains("--weights-dtype"),
        "{text}"
    );
    // 70 GiB fits at a higher fraction: the advice names it (70 / 80 = 0.875).
    let text = compute(&m, &inputs(80.0, 1, 0.8, 70.0))
        .unwrap_err()
        .to_string();
    assert!(text.contains("--mem-fraction above 0.875"), "{text}");
}
