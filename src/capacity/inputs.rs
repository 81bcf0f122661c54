//! From flags (and what a live server reported) to the plan's inputs: defaults filled in,
//! every value checked, and where each came from.

use super::dtype::{KvDtype, WeightsDtype};
use super::error::PlanError;
use super::live::ServerReport;
use super::model::ModelSpec;
use super::plan::PlanInputs;
use super::weights::check_weights_gib;

pub const DEFAULT_MEM_FRACTION: f64 = 0.9;

/// Where an input's value came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    Flag,
    Default,
    /// The live server's report (`--url`).
    Server,
    /// The model's config (`max_position_embeddings`, its dtype).
    Model,
    /// Worked out from other flags (`--gpus` / `--tp`).
    Derived,
}

impl Source {
    pub fn name(self) -> &'static str {
        match self {
            Source::Flag => "flag",
            Source::Default => "default",
            Source::Server => "server",
            Source::Model => "model",
            Source::Derived => "derived",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sources {
    pub tp: Source,
    pub dp: Source,
    pub mem_fraction: Source,
    pub page_size: Source,
    pub context: Source,
    pub weights_dtype: Source,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Resolved {
    pub inputs: PlanInputs,
    pub sources: Sources,
    pub notes: Vec<String>,
}

/// The sizing flags as given, before defaults: the planner's own input type, so the
/// planning code does not depend on the command-line struct (built from it in `args`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct PlanFlags {
    pub gpu_mem_gib: Option<f64>,
    pub gpus: Option<u64>,
    pub tp: Option<u64>,
    pub dp: Option<u64>,
    pub mem_fraction: Option<f64>,
    pub weights_gib: Option<f64>,
    pub weights_dtype: Option<WeightsDtype>,
    pub kv_dtype: KvDtype,
    pub reserve_gib: f64,
    pub page_size: Option<u64>,
    pub context: Option<u64>,
    pub target_concurrency: Option<u64>,
}

fn flag_error(flag: &'static str, value: impl ToString, problem: &str) -> PlanError {
    PlanError::Flag {
        flag,
        value: value.to_string(),
        problem: problem.to_string(),
    }
}

pub fn resolve(
    args: &PlanFlags,
    model: &ModelSpec,
    server: Option<&ServerReport>,
) -> Result<Resolved, PlanError> {
    let mut notes = Vec::new();
    let gpu_mem_gib = match args.gpu_mem_gib {
        Some(g) if g.is_finite() && g > 0.0 => g,
        Some(g) => {
            return Err(flag_error(
                "gpu-mem-gib",
                g,
                "must be a positive size in GiB per GPU, e.g. 79.6 for an H100 80GB",
            ));
        }
        None => {
            return Err(flag_error(
                "gpu-mem-gib",
                "",
                "is required: the memory of one GPU",
            ));
        }
    };
    let gpus = match args.gpus {
        Some(n) if n >= 1 => n,
        Some(n) => return Err(flag_error("gpus", n, "must be at least 1")),
        None => return Err(flag_error("gpus", "", "is required: the number of GPUs")),
    };
    let (tp, dp, tp_source, dp_source) = parallel_layout(gpus, args.tp, args.dp)?;

    let (mem_fraction, mem_source) = match (
        args.mem_fraction,
        server.and_then(|s| s.mem_fraction_static),
    ) {
        (Some(f), _) => (check_fraction(f)?, Source::Flag),
        (None, Some(f)) if f > 0.0 && f < 1.0 => (f, Source::Server),
        _ => (DEFAULT_MEM_FRACTION, Source::Default),
    };
    let (page_size_tokens, page_source) = match (args.page_size, server.and_then(|s| s.page_size)) {
        (Some(0), _) => return Err(flag_error("page-size", 0, "must be at least 1 token")),
        (Some(p), _) => (p, Source::Flag),
        (None, Some(p)) if p > 0 => (p, Source::Server),
        _ => (1, Source::Default),
    };
    let (context_tokens, context_source) = match (args.context, model.max_context_tokens) {
        (Some(c), _) => (Some(c), Source::Flag),
        (None, Some(c)) => (Some(c), Source::Model),
        (None, None) => (None, Source::Default),
    };
    if let (Some(c), Some(limit)) = (context_tokens, model.max_context_tokens)
        && c > limit
    {
        notes.push(format!(
            "--context {c} exceeds the model's max_position_embeddings {limit}: the server will \
             refuse longer requests unless its context is extended"
        ));
    }
    let target_concurrency = match args.target_concurrency {
        Some(0) => {
            return Err(flag_error(
                "target-concurrency",
                0,
                "must be at least 1 request",
            ));
        }
        Some(n) if context_tokens.is_none() => {
            return Err(flag_error(
                "target-concurrency",
                n,
                "needs --context (the model's config has no max_position_embeddings to default to)",
            ));
        }
        other => other,
    };
    let weights_gib = args.weights_gib.map(check_weights_gib).transpose()?;
    let (weights_dtype, weights_dtype_source) = match (args.weights_dtype, model.checkpoint_dtype) {
        (Some(d), _) => (d, Source::Flag),
        (None, Some(d)) => (d, Source::Model),
        (None, None) => (WeightsDtype::Bf16, Source::Default),
    };
    if weights_gib.is_some() && args.weights_dtype.is_some() {
        notes.push("--weights-gib gives the weight size, so --weights-dtype is not used".into());
    }
    if !(args.reserve_gib.is_finite() && args.reserve_gib >= 0.0) {
        return Err(flag_error(
            "reserve-gib",
            args.reserve_gib,
            "must be 0 or a positive size in GiB per GPU",
        ));
    }
    Ok(Resolved {
        inputs: PlanInputs {
            gpu_mem_gib,
            gpus,
            tp,
            dp,
            mem_fraction,
            kv_dtype: args.kv_dtype,
            weights_gib,
            weights_dtype,
            reserve_gib: args.reserve_gib,
            page_size_tokens,
            context_tokens,
            target_concurrency,
        },
        sources: Sources {
            tp: tp_source,
            dp: dp_source,
            mem_fraction: mem_source,
            page_size: page_source,
            context: context_source,
            weights_dtype: weights_dtype_source,
        },
        notes,
    })
}

/// `--mem-fraction` must lie strictly between 0 and 1.
pub fn check_fraction(f: f64) -> Result<f64, PlanError> {
    if f.is_finite() && f > 0.0 && f < 1.0 {
        Ok(f)
    } else {
        Err(flag_error(
            "mem-fraction",
            f,
            "is outside (0, 1): it is the share of each GPU's memory for weights and the KV pool, \
             e.g. 0.9",
        ))
    }
}

/// TP × DP = GPUs, filling in whichever of the two is missing.
fn parallel_layout(
    gpus: u64,
    tp: Option<u64>,
    dp: Option<u64>,
) -> Result<(u64, u64, Source, Source), PlanError> {
    if tp == Some(0) {
        return Err(flag_error("tp", 0, "must be at least 1"));
    }
    if dp == Some(0) {
        return Err(flag_error("dp", 0, "must be at least 1"));
    }
    match (tp, dp) {
        (Some(t), Some(d)) => {
            if t.checked_mul(d) != Some(gpus) {
                return Err(PlanError::GpuCountMismatch {
                    gpus,
                    tp: t,
                    dp: d,
                    product: t.saturating_mul(d),
                });
            }
            Ok((t, d, Source::Flag, Source::Flag))
        }
        (Some(t), None) => {
            if !gpus.is_multiple_of(t) {
                return Err(flag_error(
                    "tp",
                    t,
                    &format!(
                        "does not divide --gpus {gpus}; pick a TP size that does, or set --dp"
                    ),
                ));
            }
            Ok((t, gpus / t, Source::Flag, Source::Derived))
        }
        (None, Some(d)) => {
            if !gpus.is_multiple_of(d) {
                return Err(flag_error(
                    "dp",
                    d,
                    &format!(
                        "does not divide --gpus {gpus}; pick a DP size that does, or set --tp"
                    ),
                ));
            }
            Ok((gpus / d, d, Source::Derived, Source::Flag))
        }
        (None, None) => Ok((gpus, 1, Source::Derived, Source::Default)),
    }
}
