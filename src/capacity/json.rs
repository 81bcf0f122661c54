//! `--format json`: one object with every input used and every figure, a stable schema kept
//! apart from the internal types.

use super::kv::KvSharding;
use super::model::Attention;
use super::report::{ModelSource, PlanReport};
use super::weights::{GIB, WeightsBasis};
use serde::Serialize;

pub const PLAN_SCHEMA: u32 = 1;

#[derive(Debug, Serialize)]
pub struct PlanJson {
    pub plan_schema: u32,
    // The model.
    pub model: String,
    pub model_source: &'static str,
    pub preset: Option<String>,
    pub config_path: Option<String>,
    pub attention: &'static str,
    pub num_layers: u64,
    pub num_attention_heads: u64,
    pub num_kv_heads: Option<u64>,
    pub kv_heads_per_gpu: Option<u64>,
    pub kv_heads_replicated: bool,
    pub head_dim: Option<u64>,
    pub kv_lora_rank: Option<u64>,
    pub qk_rope_head_dim: Option<u64>,
    pub sliding_window_layers: usize,
    pub sliding_windows_tokens: Vec<u64>,
    pub ignore_sliding_window: bool,
    pub model_context_tokens: Option<u64>,
    pub num_parameters: Option<u64>,
    pub num_parameters_source: Option<&'static str>,
    // The inputs.
    pub gpu_mem_gib: f64,
    pub gpus: u64,
    pub tp: u64,
    pub tp_source: &'static str,
    pub dp: u64,
    pub dp_source: &'static str,
    pub mem_fraction: f64,
    pub mem_fraction_source: &'static str,
    pub kv_dtype: &'static str,
    pub kv_dtype_bytes: u64,
    pub weights_source: &'static str,
    pub weights_dtype: Option<&'static str>,
    pub weights_dtype_source: Option<&'static str>,
    pub reserve_gib: f64,
    pub page_size_tokens: u64,
    pub page_size_source: &'static str,
    pub context_tokens: Option<u64>,
    pub context_source: &'static str,
    pub target_concurrency: Option<u64>,
    // The memory budget, per GPU.
    pub usable_gib: f64,
    pub weights_gib: f64,
    pub weights_per_gpu_gib: f64,
    pub kv_pool_gib: f64,
    pub kv_pool_bytes: u64,
    // The KV cache, per GPU.
    pub kv_bytes_per_token: u64,
    pub kv_bytes_per_token_beyond_window: u64,
    pub pool_tokens: u64,
    pub pool_tokens_total: u64,
    pub kv_max_context_tokens: Option<u64>,
    pub max_context_tokens: Option<u64>,
    // Requests of --context tokens.
    pub request_tokens: Option<u64>,
    pub request_kv_bytes: Option<u64>,
    pub max_concurrency: Option<u64>,
    pub max_concurrency_total: Option<u64>,
    // --target-concurrency.
    pub required_mem_fraction: Option<f64>,
    pub target_fits: Option<bool>,
    pub max_context_at_target_tokens: Option<u64>,
    pub live: Option<LiveJson>,
    pub notes: Vec<String>,
}

#[derive(Debug, Serialize)]
pub struct LiveJson {
    pub source_url: String,
    pub reported_pool_tokens: Option<u64>,
    pub predicted_pool_tokens: u64,
    /// reported / predicted.
    pub ratio: Option<f64>,
    pub gap_gib: Option<f64>,
    pub reported_mem_fraction: Option<f64>,
    pub reported_context_tokens: Option<u64>,
    pub reported_page_size_tokens: Option<u64>,
    pub reported_tp: Option<u64>,
    pub reported_dp: Option<u64>,
    pub reported_kv_dtype: Option<String>,
}

pub fn to_json(report: &PlanReport) -> PlanJson {
    let (model, plan, inputs, sources) = (
        &report.model,
        &report.plan,
        &report.resolved.inputs,
        &report.resolved.sources,
    );
    let (num_kv_heads, head_dim, kv_lora_rank, qk_rope_head_dim) = match model.attention {
        Attention::Gqa {
            num_kv_heads,
            head_dim,
        } => (Some(num_kv_heads), Some(head_dim), None, None),
        Attention::Mla {
            kv_lora_rank,
            qk_rope_head_dim,
        } => (None, None, Some(kv_lora_rank), Some(qk_rope_head_dim)),
    };
    let (kv_heads_per_gpu, replicated) = match plan.kv.sharding {
        KvSharding::Gqa {
            kv_heads_per_gpu,
            replicated,
            ..
        } => (Some(kv_heads_per_gpu), replicated),
        KvSharding::Mla { .. } => (None, false),
    };
    let (weights_source, weights_dtype) = match plan.weights.basis {
        WeightsBasis::Given => ("flag", None),
        WeightsBasis::Parameters { dtype, .. } => ("parameters", Some(dtype.name())),
    };
    let params = model.params.as_ref().ok();
    PlanJson {
        plan_schema: PLAN_SCHEMA,
        model: model.name.clone(),
        model_source: report.source.kind(),
        preset: match &report.source {
            ModelSource::Preset(p) => Some(p.clone()),
            ModelSource::Config(_) => None,
        },
        config_path: match &report.source {
            ModelSource::Config(p) => Some(p.display().to_string()),
            ModelSource::Preset(_) => None,
        },
        attention: attention_kind(model),
        num_layers: model.num_layers,
        num_attention_heads: model.num_attention_heads,
        num_kv_heads,
        kv_heads_per_gpu,
        kv_heads_replicated: replicated,
        head_dim,
        kv_lora_rank,
        qk_rope_head_dim,
        sliding_window_layers: model.sliding_layers(),
        sliding_windows_tokens: plan.kv.windows.iter().map(|(w, _)| *w).collect(),
        ignore_sliding_window: report.ignore_sliding_window,
        model_context_tokens: model.max_context_tokens,
        num_parameters: params.map(|(p, _)| p.total),
        num_parameters_source: params.map(|(_, s)| match s {
            super::model::ParamSource::Given => "config",
            super::model::ParamSource::Computed => "computed",
        }),
        gpu_mem_gib: inputs.gpu_mem_gib,
        gpus: inputs.gpus,
        tp: inputs.tp,
        tp_source: sources.tp.name(),
        dp: inputs.dp,
        dp_source: sources.dp.name(),
        mem_fraction: inputs.mem_fraction,
        mem_fraction_source: sources.mem_fraction.name(),
        kv_dtype: inputs.kv_dtype.name(),
        kv_dtype_bytes: inputs.kv_dtype.bytes(),
        weights_source,
        weights_dtype,
        weights_dtype_source: weights_dtype.map(|_| sources.weights_dtype.name()),
        reserve_gib: inputs.reserve_gib,
        page_size_tokens: inputs.page_size_tokens,
        page_size_source: sources.page_size.name(),
        context_tokens: inputs.context_tokens,
        context_source: sources.context.name(),
        target_concurrency: inputs.target_concurrency,
        usable_gib: round6(plan.budget.usable_bytes as f64 / GIB),
        weights_gib: round6(plan.weights.total_gib()),
        weights_per_gpu_gib: round6(plan.weights.per_gpu_gib()),
        kv_pool_gib: round6(plan.budget.kv_pool_bytes as f64 / GIB),
        kv_pool_bytes: plan.budget.kv_pool_bytes,
        kv_bytes_per_token: plan.kv.bytes_per_token(),
        kv_bytes_per_token_beyond_window: plan.kv.bytes_per_token_beyond_windows(),
        pool_tokens: plan.pool_tokens,
        pool_tokens_total: plan.pool_tokens_total,
        kv_max_context_tokens: plan.kv_max_context.tokens(),
        max_context_tokens: report.max_context_tokens(),
        request_tokens: plan.request.map(|r| r.paged_tokens),
        request_kv_bytes: plan
            .request
            .map(|r| u64::try_from(r.kv_bytes).unwrap_or(u64::MAX)),
        max_concurrency: plan.request.map(|r| r.max_concurrency),
        max_concurrency_total: plan.request.map(|r| r.max_concurrency_total),
        required_mem_fraction: plan.target.map(|t| t.required_mem_fraction),
        target_fits: plan.target.map(|t| t.fits),
        max_context_at_target_tokens: report.max_context_at_target_tokens(),
        live: report.live.as_ref().map(|l| LiveJson {
            source_url: l.report.source_url.clone(),
            reported_pool_tokens: l.report.max_total_num_tokens,
            predicted_pool_tokens: l.predicted_pool_tokens,
            ratio: l.ratio,
            gap_gib: l.gap_gib.map(round6),
            reported_mem_fraction: l.report.mem_fraction_static,
            reported_context_tokens: l.report.context_length,
            reported_page_size_tokens: l.report.page_size,
            reported_tp: l.report.tp_size,
            reported_dp: l.report.dp_size,
            reported_kv_dtype: l.report.kv_cache_dtype.clone(),
        }),
        notes: report.notes(),
    }
}

/// GiB to six decimals (a kilobyte), so the JSON does not carry float noise.
fn round6(x: f64) -> f64 {
    (x * 1e6).round() / 1e6
}

/// `mha` when every query head has its own KV head, `gqa` when they share, `mla` for latents.
pub fn attention_kind(model: &super::model::ModelSpec) -> &'static str {
    match model.attention {
        Attention::Gqa { num_kv_heads, .. } if num_kv_heads == model.num_attention_heads => "mha",
        Attention::Gqa { .. } => "gqa",
        Attention::Mla { .. } => "mla",
    }
}
