//! The live check: read a server's reported KV pool (SGLang `max_total_num_tokens`) and
//! compare it with the prediction. Parsing and comparing are pure; `fetch` is the only I/O.

use super::dtype::KvDtype;
use super::error::LiveError;
use super::model::ModelSpec;
use super::plan::{Plan, PlanInputs};
use super::weights::GIB;
use serde_json::Value;
use std::time::Duration;

/// What the server said about its memory, as far as it said it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ServerReport {
    /// The URL that answered.
    pub source_url: String,
    pub max_total_num_tokens: Option<u64>,
    pub mem_fraction_static: Option<f64>,
    pub context_length: Option<u64>,
    pub page_size: Option<u64>,
    pub tp_size: Option<u64>,
    pub dp_size: Option<u64>,
    pub kv_cache_dtype: Option<String>,
    /// `--max-total-tokens`: an explicit cap on the pool, not a memory figure.
    pub max_total_tokens_cap: Option<u64>,
}

/// Read SGLang's `/server_info` body: server args, scheduler info and `internal_states`.
pub fn parse_server_info(source_url: &str, body: &Value) -> ServerReport {
    let internal = body
        .get("internal_states")
        .and_then(Value::as_array)
        .and_then(|states| states.first());
    let int = |key: &str| {
        body.get(key)
            .and_then(Value::as_u64)
            .or_else(|| internal.and_then(|s| s.get(key)).and_then(Value::as_u64))
    };
    let float = |key: &str| {
        body.get(key)
            .and_then(Value::as_f64)
            .or_else(|| internal.and_then(|s| s.get(key)).and_then(Value::as_f64))
    };
    let text = |key: &str| {
        body.get(key)
            .and_then(Value::as_str)
            .or_else(|| internal.and_then(|s| s.get(key)).and_then(Value::as_str))
            .map(str::to_string)
    };
    ServerReport {
        source_url: source_url.to_string(),
        max_total_num_tokens: int("max_total_num_tokens"),
        mem_fraction_static: float("mem_fraction_static"),
        context_length: int("context_length").or_else(|| int("context_len")),
        page_size: int("page_size"),
        tp_size: int("tp_size"),
        dp_size: int("dp_size"),
        kv_cache_dtype: text("kv_cache_dtype"),
        max_total_tokens_cap: int("max_total_tokens"),
    }
}

/// GET `{url}/server_info`, falling back to `{url}/get_server_info`; only the given URL.
pub async fn fetch(url: &str) -> Result<ServerReport, LiveError> {
    let base = url.trim_end_matches('/');
    if !(base.starts_with("http://") || base.starts_with("https://")) {
        return Err(LiveError::BadUrl {
            url: url.to_string(),
            problem: "must start with http:// or https://, e.g. http://127.0.0.1:30000".into(),
        });
    }
    // reqwest is built without a default TLS provider; install ring's once (a no-op if set).
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(10))
        .build()
        .map_err(|e| LiveError::Unreachable {
            url: url.to_string(),
            message: e.to_string(),
        })?;
    let mut statuses = Vec::new();
    for route in ["/server_info", "/get_server_info"] {
        let full = format!("{base}{route}");
        let response = client
            .get(&full)
            .send()
            .await
            .map_err(|e| LiveError::Unreachable {
                url: url.to_string(),
                message: e.to_string(),
            })?;
        let status = response.status();
        if !status.is_success() {
            statuses.push(format!("{route}: HTTP {}", status.as_u16()));
            continue;
        }
        let not_json = |message: String| LiveError::NotJson {
            url: url.to_string(),
            route: route.to_string(),
            message,
        };
        let body: Value = response.json().await.map_err(|e| not_json(e.to_string()))?;
        if !body.is_object() {
            return Err(not_json("the body is not an object".into()));
        }
        return Ok(parse_server_info(&full, &body));
    }
    Err(LiveError::NoServerInfo {
        url: url.to_string(),
        statuses: statuses.join(", "),
    })
}

/// Predicted against reported, with what might explain a gap.
#[derive(Debug, Clone, PartialEq)]
pub struct LiveComparison {
    pub report: ServerReport,
    pub predicted_pool_tokens: u64,
    /// reported / predicted.
    pub ratio: Option<f64>,
    /// The KV bytes per GPU the server holds less than predicted, in GiB (negative: more).
    pub gap_gib: Option<f64>,
    pub hints: Vec<String>,
}

pub fn compare(
    model: &ModelSpec,
    inputs: &PlanInputs,
    plan: &Plan,
    report: &ServerReport,
) -> LiveComparison {
    let predicted = plan.pool_tokens;
    let bytes_per_token = plan.kv.bytes_per_token() as f64;
    let ratio = report
        .max_total_num_tokens
        .filter(|_| predicted > 0)
        .map(|reported| reported as f64 / predicted as f64);
    let gap_gib = report
        .max_total_num_tokens
        .map(|reported| (predicted as f64 - reported as f64) * bytes_per_token / GIB);
    let mut hints = Vec::new();
    if report.max_total_num_tokens.is_none() {
        hints.push(
            "the server does not report max_total_num_tokens (SGLang does; vLLM logs its pool as \
             `GPU KV cache size`), so only the prediction is shown"
                .into(),
        );
    }
    if let Some(cap) = report.max_total_tokens_cap {
        hints.push(format!(
            "the server was started with --max-total-tokens {cap}, which caps the pool: the \
             comparison says nothing about memory"
        ));
    }
    if let Some(f) = report.mem_fraction_static
        && (f - inputs.mem_fraction).abs() > 1e-6
    {
        hints.push(format!(
            "the server runs with mem_fraction_static {f} but the plan used {}; leave \
             --mem-fraction out to use the server's",
            inputs.mem_fraction
        ));
    }
    if let Some(tp) = report.tp_size
        && tp != inputs.tp
    {
        hints.push(format!(
            "the server reports tp_size {tp} but the plan used --tp {}",
            inputs.tp
        ));
    }
    if let Some(page) = report.page_size
        && page != inputs.page_size_tokens
    {
        hints.push(format!(
            "the server reports page_size {page} but the plan used --page-size {}",
            inputs.page_size_tokens
        ));
    }
    if let Some(name) = &report.kv_cache_dtype
        && let Some(server_dtype) = KvDtype::from_server(name)
        && server_dtype != inputs.kv_dtype
    {
        hints.push(format!(
            "the server stores the KV cache as {name} but the plan used --kv-dtype {}; pass \
             --kv-dtype {}",
            inputs.kv_dtype.name(),
            server_dtype.name()
        ));
    }
    if model.sliding_layers() > 0 {
        hints.push(
            "this model has sliding-window layers: SGLang splits its pool into a full-attention \
             part and a window part (swa_full_tokens_ratio), so max_total_num_tokens need not \
             match a single-pool prediction"
                .into(),
        );
    }
    if let (Some(gap), Some(r)) = (gap_gib, ratio) {
        if r < 0.98 {
            hints.push(format!(
                "the server holds {gap:.2} GiB per GPU less KV than predicted: CUDA context, \
                 graphs, activations or a draft model; pass --reserve-gib {gap:.2} to plan with it"
            ));
        } else if r > 1.02 {
            hints.push(format!(
                "the server holds {:.2} GiB per GPU more KV than predicted: the weights are \
                 smaller than assumed (pass --weights-gib) or the GPU larger",
                -gap
            ));
        }
    }
    LiveComparison {
        report: report.clone(),
        predicted_pool_tokens: predicted,
        ratio,
        gap_gib,
        hints,
    }
}
