//! The `ctxbench plan` flags.

use super::dtype::{KvDtype, WeightsDtype};
use crate::choices::Format;
use crate::lengths::parse_count_arg as parse_token_count;
use clap::Args;
use std::path::PathBuf;

const PLAN_HELP: &str = "\
Terms (all sizes in GiB = 2^30 bytes, per GPU unless said otherwise):
  usable        --gpu-mem-gib × --mem-fraction (SGLang's mem_fraction_static: weights + KV pool)
  weights       --weights-gib, or parameters × bytes per parameter (--weights-dtype), / --tp
  KV pool       usable − weights − --reserve-gib
  KV per token  MHA/GQA: layers × 2 (K,V) × KV heads on this GPU × head_dim × bytes
                (KV heads are split over --tp, one per GPU when --tp exceeds them);
                MLA: layers × (kv_lora_rank + qk_rope_head_dim) × bytes, on every GPU;
                sliding-window layers stop growing at their window
  pool tokens   KV pool / KV per token, rounded down to whole pages
  concurrency   pool / KV of one --context request (rounded up to pages), per replica;
                × --dp in all

Examples:
  ctxbench plan --preset llama-3.1-70b --gpu-mem-gib 79.6 --gpus 4 --context 32k
  ctxbench plan --preset deepseek-v3 --gpu-mem-gib 140.4 --gpus 8 --context 128k --target-concurrency 8
  ctxbench plan --config ./config.json --gpu-mem-gib 79.6 --gpus 2 --tp 1 --format json
  ctxbench plan --preset qwen3-32b --gpu-mem-gib 79.6 --gpus 2 --url http://127.0.0.1:30000";

#[derive(Args, Debug, Clone)]
#[command(after_help = PLAN_HELP)]
pub struct PlanArgs {
    /// A Hugging Face config.json describing the model.
    #[arg(
        long,
        value_name = "FILE",
        conflicts_with = "preset",
        required_unless_present_any = ["preset", "list_presets"]
    )]
    pub config: Option<PathBuf>,
    /// A built-in architecture instead of --config (see --list-presets).
    #[arg(long, value_name = "NAME")]
    pub preset: Option<String>,
    /// List the built-in presets and exit.
    #[arg(long)]
    pub list_presets: bool,
    /// Memory of one GPU in GiB (an H100 80GB has 79.6, an H200 140.4).
    #[arg(long, value_name = "GIB", required_unless_present = "list_presets")]
    pub gpu_mem_gib: Option<f64>,
    /// GPUs in all (--tp × --dp).
    #[arg(long, value_name = "N", required_unless_present = "list_presets")]
    pub gpus: Option<u64>,
    /// Tensor-parallel size [default: --gpus / --dp].
    #[arg(long, value_name = "N")]
    pub tp: Option<u64>,
    /// Data-parallel replicas, each with its own pool [default: --gpus / --tp].
    #[arg(long, value_name = "N")]
    pub dp: Option<u64>,
    /// Share of each GPU's memory for weights + KV pool, in (0, 1) [default: the server's with --url, else 0.9].
    #[arg(long, value_name = "F")]
    pub mem_fraction: Option<f64>,
    /// Weights of one replica in GiB, all TP ranks together [default: parameters × --weights-dtype].
    #[arg(long, value_name = "GIB")]
    pub weights_gib: Option<f64>,
    /// Bytes per parameter when deriving the weights [default: the config's, else bf16].
    #[arg(long, value_enum, value_name = "DTYPE")]
    pub weights_dtype: Option<WeightsDtype>,
    /// KV-cache element type.
    #[arg(long, value_enum, default_value = "bf16", value_name = "DTYPE")]
    pub kv_dtype: KvDtype,
    /// Memory per GPU held back inside the fraction: activations, CUDA graphs, a draft model.
    #[arg(long, value_name = "GIB", default_value_t = 0.0)]
    pub reserve_gib: f64,
    /// KV page size in tokens; requests round up to whole pages [default: the server's, else 1].
    #[arg(long, value_name = "TOKENS")]
    pub page_size: Option<u64>,
    /// Tokens per request (prompt + output) for the concurrency figures; `k` = ×1024
    /// [default: the model's max_position_embeddings].
    #[arg(long, value_name = "TOKENS", value_parser = parse_token_count)]
    pub context: Option<u64>,
    /// Requests of --context tokens wanted at once: reports the mem fraction they need.
    #[arg(long, value_name = "N")]
    pub target_concurrency: Option<u64>,
    /// Treat sliding-window layers as full attention (servers that keep the whole history).
    #[arg(long)]
    pub ignore_sliding_window: bool,
    /// A running SGLang server: compare its reported pool (max_total_num_tokens) with the plan.
    #[arg(long, value_name = "URL")]
    pub url: Option<String>,
    /// Output format (table or json).
    #[arg(long, value_enum, default_value = "table")]
    pub format: Format,
}

impl From<&PlanArgs> for super::inputs::PlanFlags {
    fn from(a: &PlanArgs) -> Self {
        Self {
            gpu_mem_gib: a.gpu_mem_gib,
            gpus: a.gpus,
            tp: a.tp,
            dp: a.dp,
            mem_fraction: a.mem_fraction,
            weights_gib: a.weights_gib,
            weights_dtype: a.weights_dtype,
            kv_dtype: a.kv_dtype,
            reserve_gib: a.reserve_gib,
            page_size: a.page_size,
            context: a.context,
            target_concurrency: a.target_concurrency,
        }
    }
}
