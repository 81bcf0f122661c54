//! What can go wrong while planning, each message naming the field or flag and what to do.

/// A problem with the model description (a `config.json` or a preset).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ConfigError {
    #[error(
        "{origin}: not valid JSON ({message}); pass a Hugging Face config.json or use --preset"
    )]
    Json { origin: String, message: String },
    #[error("{origin}: the top level must be a JSON object; pass a Hugging Face config.json")]
    NotAnObject { origin: String },
    #[error("{origin}: missing field `{field}` ({meaning}); add it to the file or use --preset")]
    Missing {
        origin: String,
        field: String,
        meaning: &'static str,
    },
    #[error(
        "{origin}: field `{field}` must be {expected}, found {found}; fix the file or use --preset"
    )]
    WrongType {
        origin: String,
        field: String,
        expected: &'static str,
        found: String,
    },
    #[error("{origin}: field `{field}` {problem}")]
    Invalid {
        origin: String,
        field: String,
        problem: String,
    },
}

/// A problem with the flags, or a layout that cannot work.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PlanError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("--{flag} {value}: {problem}")]
    Flag {
        flag: &'static str,
        value: String,
        problem: String,
    },
    #[error(
        "--tp {tp}: num_attention_heads {heads} is not divisible by it, so the attention heads \
         cannot be split evenly; use a --tp that divides {heads}"
    )]
    HeadsNotDivisible { tp: u64, heads: u64 },
    #[error(
        "--tp {tp}: num_key_value_heads {kv_heads} and the TP size must divide one another \
         (servers shard or replicate whole KV heads); use a --tp that divides {kv_heads} or is a \
         multiple of it"
    )]
    KvHeadsIncompatible { tp: u64, kv_heads: u64 },
    #[error(
        "--gpus {gpus} does not equal --tp {tp} × --dp {dp} = {product}; set --dp to --gpus / --tp, \
         or leave --dp out"
    )]
    GpuCountMismatch {
        gpus: u64,
        tp: u64,
        dp: u64,
        product: u64,
    },
    #[error(
        "no room for a KV cache: weights {weights_gib:.2} GiB per GPU + --reserve-gib {reserve_gib:.2} \
         fill the usable {usable_gib:.2} GiB (--gpu-mem-gib {gpu_mem_gib} × --mem-fraction \
         {mem_fraction}); {advice}"
    )]
    NoRoomForKv {
        weights_gib: f64,
        reserve_gib: f64,
        usable_gib: f64,
        gpu_mem_gib: f64,
        mem_fraction: f64,
        advice: String,
    },
    #[error(
        "cannot derive the weight size: {reason}; pass --weights-gib with the checkpoint's size \
         (all TP ranks together)"
    )]
    WeightsUnknown { reason: String },
}

/// A problem reading a live server's report.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LiveError {
    #[error("--url {url}: {problem}")]
    BadUrl { url: String, problem: String },
    #[error(
        "--url {url}: cannot reach the server ({message}); check the address and that it is up"
    )]
    Unreachable { url: String, message: String },
    #[error(
        "--url {url}: neither /server_info nor /get_server_info answered ({statuses}); is this an \
         SGLang server? (vLLM reports its KV pool only in its log, as `GPU KV cache size`)"
    )]
    NoServerInfo { url: String, statuses: String },
    #[error("--url {url}: {route} did not return a JSON object ({message})")]
    NotJson {
        url: String,
        route: String,
        message: String,
    },
}
