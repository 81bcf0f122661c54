//! `--format table`: every term of the arithmetic on its own row, with how it was derived.

use super::inputs::Source;
use super::json::attention_kind;
use super::kv::KvSharding;
use super::model::Attention;
use super::plan::ContextFit;
use super::report::{ModelSource, PlanReport};
use super::weights::{GIB, WeightsBasis};

/// A titled block of (term, value, derivation) rows.
struct Section {
    title: String,
    rows: Vec<[String; 3]>,
}

impl Section {
    fn new(title: impl Into<String>) -> Section {
        Section {
            title: title.into(),
            rows: Vec::new(),
        }
    }
    fn row(&mut self, term: &str, value: impl Into<String>, how: impl Into<String>) {
        self.rows.push([term.to_string(), value.into(), how.into()]);
    }
}

pub fn to_table(report: &PlanReport) -> String {
    let inputs = &report.resolved.inputs;
    let mut out = format!(
        "ctxbench plan: {} ({}) on {} × {} GiB GPUs, TP {} × DP {}\n",
        report.model.name,
        match &report.source {
            ModelSource::Preset(p) => format!("preset {p}"),
            ModelSource::Config(p) => p.display().to_string(),
        },
        inputs.gpus,
        trim_float(inputs.gpu_mem_gib),
        inputs.tp,
        inputs.dp
    );
    let sections = [
        model_section(report),
        memory_section(report),
        kv_section(report),
    ]
    .into_iter()
    .chain(request_section(report))
    .chain(target_section(report))
    .chain(live_section(report))
    .collect::<Vec<_>>();
    let width = |i: usize| {
        sections
            .iter()
            .flat_map(|s| s.rows.iter())
            .map(|r| r[i].chars().count())
            .max()
            .unwrap_or(0)
    };
    let (term_w, value_w) = (width(0), width(1));
    for section in &sections {
        out.push('\n');
        out.push_str(&section.title);
        out.push('\n');
        for [term, value, how] in &section.rows {
            let line = format!("  {term:<term_w$}  {value:>value_w$}  {how}");
            out.push_str(line.trim_end());
            out.push('\n');
        }
    }
    let notes = report.notes();
    if !notes.is_empty() {
        out.push_str("\nNotes\n");
        for note in notes {
            out.push_str(&format!("  - {note}\n"));
        }
    }
    out
}

fn model_section(report: &PlanReport) -> Section {
    let (model, plan, inputs) = (&report.model, &report.plan, &report.resolved.inputs);
    let mut s = Section::new("Model");
    match model.attention {
        Attention::Gqa {
            num_kv_heads,
            head_dim,
        } => {
            s.row(
                "attention",
                attention_kind(model).to_uppercase(),
                format!(
                    "{} layers, {} query heads, {num_kv_heads} KV heads × head_dim {head_dim}",
                    model.num_layers, model.num_attention_heads
                ),
            );
        }
        Attention::Mla {
            kv_lora_rank,
            qk_rope_head_dim,
        } => {
            s.row(
                "attention",
                "MLA",
                format!(
                    "{} layers, latent kv_lora_rank {kv_lora_rank} + qk_rope_head_dim \
                     {qk_rope_head_dim} = {} per layer",
                    model.num_layers,
                    kv_lora_rank + qk_rope_head_dim
                ),
            );
        }
    }
    match plan.kv.sharding {
        KvSharding::Gqa {
            num_kv_heads,
            kv_heads_per_gpu,
            replicated,
            ..
        } => {
            let how = if replicated {
                format!(
                    "{num_kv_heads} KV heads < TP {}: each head replicated on {} GPUs",
                    inputs.tp,
                    inputs.tp / num_kv_heads.max(1)
                )
            } else {
                format!("{num_kv_heads} KV heads / TP {}", inputs.tp)
            };
            s.row("KV heads per GPU", kv_heads_per_gpu.to_string(), how);
        }
        KvSharding::Mla { .. } => {
            s.row(
                "latent per GPU",
                "all",
                format!("replicated on every one of the {} TP ranks", inputs.tp),
            );
        }
    }
    if !plan.kv.windows.is_empty() {
        let windows = plan
            .kv
            .windows
            .iter()
            .map(|(w, n)| format!("{n} layers window {}", group(*w)))
            .collect::<Vec<_>>()
            .join(", ");
        s.row(
            "sliding window",
            format!("{} of {}", model.sliding_layers(), model.num_layers),
            windows,
        );
    } else if report.ignore_sliding_window {
        s.row("sliding window", "off", "--ignore-sliding-window");
    }
    if let Ok((params, source)) = &model.params {
        s.row(
            "parameters",
            format!("{:.2} B", params.total as f64 / 1e9),
            source.name(),
        );
    }
    if let Some(limit) = model.max_context_tokens {
        s.row("context limit", group(limit), "max_position_embeddings");
    }
    s
}

fn memory_section(report: &PlanReport) -> Section {
    let (plan, inputs, sources) = (
        &report.plan,
        &report.resolved.inputs,
        &report.resolved.sources,
    );
    let b = &plan.budget;
    let mut s = Section::new("Memory per GPU (GiB)");
    s.row("GPU memory", gib(b.gpu_mem_bytes), "--gpu-mem-gib");
    s.row(
        "usable",
        gib(b.usable_bytes),
        format!(
            "× mem fraction {} ({})",
            trim_float(inputs.mem_fraction),
            source_words(sources.mem_fraction, "--mem-fraction")
        ),
    );
    let weights_how = match plan.weights.basis {
        WeightsBasis::Given => format!(
            "--weights-gib {} / TP {}",
            trim_float(plan.weights.total_gib()),
            inputs.tp
        ),
        WeightsBasis::Parameters { params, dtype } => format!(
            "{:.2} GiB = {:.2} B params × {} ({}, {}) / TP {}",
            plan.weights.total_gib(),
            params.total as f64 / 1e9,
            dtype.describe(),
            dtype.name(),
            source_words(report.resolved.sources.weights_dtype, "--weights-dtype"),
            inputs.tp
        ),
    };
    s.row("weights", minus_gib(b.weights_bytes), weights_how);
    s.row(
        "reserve",
        minus_gib(b.reserve_bytes),
        "--reserve-gib (activations, CUDA graphs, draft model)",
    );
    s.row(
        "KV pool",
        gib(b.kv_pool_bytes),
        "usable − weights − reserve",
    );
    s
}

fn kv_section(report: &PlanReport) -> Section {
    let (plan, inputs) = (&report.plan, &report.resolved.inputs);
    let kv = &plan.kv;
    let dtype = format!("{} B ({})", kv.elem_bytes, inputs.kv_dtype.name());
    let per_layer = match kv.sharding {
        KvSharding::Gqa {
            kv_heads_per_gpu,
            head_dim,
            ..
        } => format!(
            "2 (K,V) × {kv_heads_per_gpu} KV head{} × {head_dim} × {dtype}",
            if kv_heads_per_gpu == 1 { "" } else { "s" }
        ),
        KvSharding::Mla { latent_dim } => format!("{latent_dim} × {dtype}"),
    };
    let mut s = Section::new("KV cache per GPU");
    s.row(
        "KV per token",
        format!("{} B", group(kv.bytes_per_token())),
        format!("{} layers × {per_layer}", kv.num_layers),
    );
    if !kv.windows.is_empty() {
        s.row(
            "  past the window",
            format!("{} B", group(kv.bytes_per_token_beyond_windows())),
            if kv.full_layers == 0 {
                "every layer is windowed: a request stops growing at its window".to_string()
            } else {
                format!("{} full-attention layers only", kv.full_layers)
            },
        );
    }
    s.row(
        "pool tokens",
        group(plan.pool_tokens),
        format!(
            "KV pool / KV per token, in whole pages of {}",
            inputs.page_size_tokens
        ),
    );
    if inputs.dp > 1 {
        s.row(
            "  all replicas",
            group(plan.pool_tokens_total),
            format!("× DP {}", inputs.dp),
        );
    }
    let kv_limit = match plan.kv_max_context {
        ContextFit::Tokens(t) => format!("the pool holds one request of {}", group(t)),
        ContextFit::Unbounded => "every layer is windowed: the pool sets no limit".into(),
    };
    let how = match report.model.max_context_tokens {
        Some(limit) => format!("{kv_limit}; the model's limit is {}", group(limit)),
        None => kv_limit,
    };
    s.row(
        "longest context",
        report
            .max_context_tokens()
            .map_or_else(|| "unbounded".to_string(), group),
        how,
    );
    s
}

fn request_section(report: &PlanReport) -> Option<Section> {
    let (plan, inputs, sources) = (
        &report.plan,
        &report.resolved.inputs,
        &report.resolved.sources,
    );
    let req = plan.request?;
    let mut s = Section::new(format!(
        "Requests of {} tokens ({})",
        group(req.context_tokens),
        source_words(sources.context, "--context")
    ));
    let rounded = if req.paged_tokens != req.context_tokens {
        format!(", rounded up to {} (whole pages)", group(req.paged_tokens))
    } else {
        String::new()
    };
    s.row(
        "KV per request",
        format!("{:.2} GiB", req.kv_bytes as f64 / GIB),
        format!("{} tokens{rounded}", group(req.context_tokens)),
    );
    s.row(
        "concurrent",
        group(req.max_concurrency),
        "per replica: pool / KV per request, rounded down",
    );
    if inputs.dp > 1 {
        s.row(
            "  all replicas",
            group(req.max_concurrency_total),
            format!("× DP {}", inputs.dp),
        );
    }
    Some(s)
}

fn target_section(report: &PlanReport) -> Option<Section> {
    let (plan, inputs) = (&report.plan, &report.resolved.inputs);
    let target = plan.target?;
    let mut s = Section::new(format!(
        "Target: {} requests of {} tokens per replica",
        target.concurrency,
        group(inputs.context_tokens.unwrap_or(0))
    ));
    s.row(
        "mem fraction needed",
        format!("{:.3}", target.required_mem_fraction),
        if target.fits {
            format!(
                "(weights + reserve + {} × KV per request) / GPU memory",
                target.concurrency
            )
        } else {
            "not below 1: the target does not fit on these GPUs".into()
        },
    );
    let capped = match (target.max_context_each, report.model.max_context_tokens) {
        (ContextFit::Tokens(kv), Some(limit)) if kv > limit => " (capped at the model's limit)",
        (ContextFit::Unbounded, Some(_)) => " (the model's limit)",
        _ => "",
    };
    s.row(
        "context each",
        report
            .max_context_at_target_tokens()
            .map_or_else(|| "unbounded".to_string(), group),
        format!(
            "the longest context {} requests can each have at mem fraction {}{capped}",
            target.concurrency,
            trim_float(inputs.mem_fraction)
        ),
    );
    Some(s)
}

fn live_section(report: &PlanReport) -> Option<Section> {
    let live = report.live.as_ref()?;
    let mut s = Section::new(format!("Live server ({})", live.report.source_url));
    match live.report.max_total_num_tokens {
        Some(reported) => {
            s.row("reported pool", group(reported), "max_total_num_tokens");
            s.row(
                "predicted pool",
                group(live.predicted_pool_tokens),
                "pool tokens above",
            );
            if let Some(ratio) = live.ratio {
                s.row("ratio", format!("{ratio:.3}"), "reported / predicted");
            }
        }
        None => s.row(
            "reported pool",
            "n/a",
            "the server does not report max_total_num_tokens",
        ),
    }
    if let Some(f) = live.report.mem_fraction_static {
        s.row("server fraction", trim_float(f), "mem_fraction_static");
    }
    if let Some(c) = live.report.context_length {
        s.row("server context", group(c), "context_length");
    }
    Some(s)
}

fn source_words(source: Source, flag: &str) -> String {
    match source {
        Source::Flag => flag.to_string(),
        Source::Default => "default".to_string(),
        Source::Server => "from the server".to_string(),
        Source::Model => "from the model".to_string(),
        Source::Derived => "derived".to_string(),
    }
}

/// A deduction: `−16.43`, or `0.00` when there is nothing to take.
fn minus_gib(bytes: u64) -> String {
    if bytes == 0 {
        gib(0)
    } else {
        format!("−{}", gib(bytes))
    }
}

fn gib(bytes: u64) -> String {
    format!("{:.2}", bytes as f64 / GIB)
}

/// `0.9`, `80`, `79.6`: no trailing zeros.
fn trim_float(x: f64) -> String {
    let s = format!("{x:.4}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// Thousands separators: 1,456,789.
pub fn group(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::{group, trim_float};

    #[test]
    fn numbers_read_well() {
        assert_eq!(group(0), "0");
        assert_eq!(group(999), "999");
        assert_eq!(group(1_000), "1,000");
        assert_eq!(group(1_456_789), "1,456,789");
        assert_eq!(trim_float(0.9), "0.9");
        assert_eq!(trim_float(80.0), "80");
        assert_eq!(trim_float(79.6), "79.6");
    }
}
