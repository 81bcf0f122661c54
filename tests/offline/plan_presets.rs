//! The built-in presets: every one parses and plans, and their parameter counts agree with
//! the published totals (checks both the data files and the counting formula).

use ctxbench::capacity::dtype::{KvDtype, WeightsDtype};
use ctxbench::capacity::kv::KvLayout;
use ctxbench::capacity::model::{Attention, ModelSpec, ParamSource};
use ctxbench::capacity::params::count_parameters;
use ctxbench::capacity::presets;

fn preset(name: &str) -> ModelSpec {
    let doc = presets::load(name)
        .unwrap_or_else(|| panic!("no preset {name}"))
        .unwrap_or_else(|e| panic!("preset {name}: {e}"));
    ModelSpec::from_doc(&doc, name).unwrap_or_else(|e| panic!("preset {name}: {e}"))
}

fn billions(name: &str) -> f64 {
    preset(name).params.unwrap().0.total as f64 / 1e9
}

#[test]
fn the_required_presets_exist() {
    let names = presets::names();
    for wanted in [
        "llama-3-8b",
        "llama-3-70b",
        "qwen2.5-7b",
        "qwen3-32b",
        "deepseek-v3",
        "kimi-k2",
        "gemma-2-9b",
        "gemma-3-27b",
        "mistral-7b-v0.1",
        "gpt-oss-120b",
    ] {
        assert!(names.contains(&wanted), "missing preset {wanted}");
    }
    assert!(
        presets::load("LLAMA-3-8B").is_some(),
        "names are case-insensitive"
    );
    assert!(presets::load("no-such-model").is_none());
}

#[test]
fn every_preset_parses_describes_itself_and_plans() {
    for (name, description) in presets::describe_all() {
        assert!(
            !description.is_empty(),
            "{name} has no _ctxbench_description"
        );
        let model = preset(name);
        assert!(model.params.is_ok(), "{name}: {:?}", model.params);
        assert!(
            model.max_context_tokens.is_some(),
            "{name}: no context limit"
        );
        let kv = KvLayout::per_gpu(&model, 1, KvDtype::Bf16).unwrap();
        assert!(kv.bytes_per_token() > 0, "{name}");
    }
}

#[test]
fn given_parameter_counts_match_the_formula_exactly() {
    // Presets that carry num_parameters: the architecture count must agree (no biases in
    // Llama; Qwen2.5's 7,615,616,512 includes 129,024 q/k/v bias parameters the formula omits).
    for (name, tolerance) in [
        ("llama-3-8b", 0),
        ("llama-3-70b", 0),
        ("llama-3.1-8b", 0),
        ("llama-3.1-70b", 0),
        ("qwen2.5-7b", 129_024),
    ] {
        let doc = presets::load(name).unwrap().unwrap();
        let model = ModelSpec::from_doc(&doc, name).unwrap();
        let (given, source) = model.params.unwrap();
        assert_eq!(source, ParamSource::Given, "{name}");
        let computed = count_parameters(&doc).unwrap();
        assert_eq!(given.total - computed.total, tolerance, "{name}");
    }
}

#[test]
fn computed_parameter_counts_match_published_totals() {
    // Published totals (model cards): DeepSeek-V3 671B without its 14B MTP module, Kimi K2
    // "1T" (1.03T on the Hub), Qwen3-235B-A22B 235B, Qwen3-32B 32.8B, gpt-oss-120b 116.8B,
    // gpt-oss-20b 20.9B, Gemma 2 9B 9.24B, Mistral 7B 7.24B; Gemma 3 27B is 27.4B with its
    // 0.4B vision tower, which the text config does not describe.
    for (name, published, tolerance) in [
        ("deepseek-v3", 671.0, 0.005),
        ("kimi-k2", 1030.0, 0.01),
        ("qwen3-235b-a22b", 235.0, 0.005),
        ("qwen3-32b", 32.8, 0.005),
        ("gpt-oss-120b", 116.8, 0.005),
        ("gpt-oss-20b", 20.9, 0.01),
        ("gemma-2-9b", 9.24, 0.005),
        ("mistral-7b-v0.1", 7.24, 0.005),
        ("gemma-3-27b", 27.0, 0.01),
    ] {
        let got = billions(name);
        assert!(
            (got / published - 1.0).abs() < tolerance,
            "{name}: computed {got:.2}B, published {published}B"
        );
    }
}

#[test]
fn checkpoint_dtypes_come_from_the_configs() {
    assert_eq!(
        preset("deepseek-v3").checkpoint_dtype,
        Some(WeightsDtype::Fp8)
    );
    assert_eq!(preset("kimi-k2").checkpoint_dtype, Some(WeightsDtype::Fp8));
    assert_eq!(
        preset("gpt-oss-120b").checkpoint_dtype,
        Some(WeightsDtype::Mxfp4)
    );
    assert_eq!(
        preset("llama-3-70b").checkpoint_dtype,
        Some(WeightsDtype::Bf16)
    );
}

#[test]
fn attention_shapes_of_the_families() {
    // Kimi K2: MLA, 61 layers, kv_lora_rank 512, qk_rope_head_dim 64 → 61 × 576 × 2 B.
    let kimi = preset("kimi-k2");
    assert_eq!(kimi.num_layers, 61);
    assert_eq!(
        kimi.attention,
        Attention::Mla {
            kv_lora_rank: 512,
            qk_rope_head_dim: 64
        }
    );
    assert_eq!(
        KvLayout::per_gpu(&kimi, 8, KvDtype::Bf16)
            .unwrap()
            .bytes_per_token(),
        70_272
    );
    // (preset, KV heads, head_dim, sliding layers). Qwen2.5-7B: its sliding_window is off
    // (use_sliding_window false). Gemma 2: head_dim 256 (not 3584 / 16 = 224), every other
    // layer of 42 windowed.
    for (name, num_kv_heads, head_dim, sliding) in
        [("qwen2.5-7b", 4, 128, 0), ("gemma-2-9b", 8, 256, 21)]
    {
        let p = preset(name);
        assert_eq!(
            p.attention,
            Attention::Gqa {
                num_kv_heads,
                head_dim
            },
            "{name}"
        );
        assert_eq!(p.sliding_layers(), sliding, "{name}");
    }
    // Gemma 3 (nested text_config): 62 layers, a global one every 6th → 10 global, 52 local.
    let gemma3 = preset("gemma-3-27b");
    assert_eq!(gemma3.num_layers, 62);
    assert_eq!(gemma3.sliding_layers(), 52);
    // gpt-oss: 18 of 36 layers with a 128-token window.
    assert_eq!(preset("gpt-oss-120b").sliding_layers(), 18);
    assert_eq!(preset("mistral-7b-v0.1").sliding_layers(), 32);
}
