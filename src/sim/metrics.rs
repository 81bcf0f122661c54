//! Prometheus `/metrics` in each persona's dialect (SGLang's `sglang:` names, vLLM's
//! `vllm:` names), from the engine's own counters, so a scraper sees what it would see
//! on the real server and a test can check it against the truth log.

use super::Persona;
use super::scheduler::Scheduler;
use super::state::SimState;
use super::stats::Histogram;
use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use std::fmt::Write;
use std::sync::Arc;

/// Prometheus text exposition format 0.0.4.
const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

pub async fn metrics(State(state): State<Arc<SimState>>) -> Response {
    let persona = state.config.cost.persona;
    let model = &state.config.model_name;
    let text = state.engine.with(|sched, _| render(persona, model, sched));
    ([(header::CONTENT_TYPE, CONTENT_TYPE)], text).into_response()
}

enum Value<'a> {
    Gauge(f64),
    Counter(f64),
    /// A counter per finish reason, labelled `finished_reason` as vLLM does.
    ByReason([(&'static str, f64); 3]),
    Histogram(&'a Histogram),
}

/// What `/metrics` exports; each dialect names the figures it has.
#[derive(Debug, Clone, Copy)]
enum Figure {
    Running,
    Waiting,
    Usage,
    UsedTokens,
    PoolTokens,
    Preemptions,
    PromptTokens,
    GenerationTokens,
    /// Prompt tokens looked up in the prefix cache (every prompt token is).
    CacheQueries,
    CachedTokens,
    Finished,
    Success,
    Ttft,
    Itl,
    E2e,
    QueueTime,
    /// SGLang's accept length over the last decode-log interval.
    SpecAcceptLength,
    /// Speculative verify steps.
    SpecDrafts,
    SpecDraftTokens,
    SpecAccepted,
    /// Tokens the verify steps emitted (accepted plus one each).
    SpecEmitted,
}

use Figure::*;

/// vLLM's series (its `v1/metrics/loggers.py`): name, help, figure.
#[rustfmt::skip]
const VLLM: &[(&str, &str, Figure)] = &[
    ("vllm:num_requests_running", "Number of requests in model execution batches.", Running),
    ("vllm:num_requests_waiting", "Number of requests waiting to be processed.", Waiting),
    ("vllm:kv_cache_usage_perc", "KV-cache usage. 1 means 100 percent usage.", Usage),
    ("vllm:num_preemptions_total", "Cumulative number of preemption from the engine.", Preemptions),
    ("vllm:prompt_tokens_total", "Number of prefill tokens processed.", PromptTokens),
    ("vllm:generation_tokens_total", "Number of generation tokens processed.", GenerationTokens),
    ("vllm:request_success_total", "Count of successfully processed requests.", Success),
    ("vllm:prefix_cache_queries_total", "Prefix cache queries, in terms of number of queried tokens.", CacheQueries),
    ("vllm:prefix_cache_hits_total", "Prefix cache hits, in terms of number of cached tokens.", CachedTokens),
    ("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", Ttft),
    ("vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", Itl),
    ("vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.", E2e),
    ("vllm:request_queue_time_seconds", "Histogram of time spent in WAITING phase for request.", QueueTime),
];

/// vLLM's speculative decoding counters, exported only with speculative decoding on.
#[rustfmt::skip]
const VLLM_SPEC: &[(&str, &str, Figure)] = &[
    ("vllm:spec_decode_num_drafts_total", "Number of spec decoding drafts.", SpecDrafts),
    ("vllm:spec_decode_num_draft_tokens_total", "Number of draft tokens.", SpecDraftTokens),
    ("vllm:spec_decode_num_accepted_tokens_total", "Number of accepted tokens.", SpecAccepted),
    ("vllm:spec_decode_num_emitted_tokens_total", "Number of emitted tokens.", SpecEmitted),
];

/// SGLang's series (its `metrics/collector.py`): name, help, figure.
#[rustfmt::skip]
const SGLANG: &[(&str, &str, Figure)] = &[
    ("sglang:num_running_reqs", "The number of running requests.", Running),
    ("sglang:num_queue_reqs", "The number of requests in the waiting queue.", Waiting),
    ("sglang:token_usage", "The token usage.", Usage),
    ("sglang:num_used_tokens", "The number of used tokens.", UsedTokens),
    ("sglang:max_total_num_tokens", "Maximum total number of tokens in the KV cache pool.", PoolTokens),
    ("sglang:num_retracted_requests_total", "Total number of retracted requests.", Preemptions),
    ("sglang:prompt_tokens_total", "Number of prefill tokens processed.", PromptTokens),
    ("sglang:generation_tokens_total", "Number of generation tokens processed.", GenerationTokens),
    ("sglang:cached_tokens_total", "Number of cached prompt tokens.", CachedTokens),
    ("sglang:num_requests_total", "Number of requests processed.", Finished),
    ("sglang:time_to_first_token_seconds", "Histogram of time to first token in seconds.", Ttft),
    ("sglang:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", Itl),
    ("sglang:e2e_request_latency_seconds", "Histogram of End-to-end request latency in seconds", E2e),
    ("sglang:queue_time_seconds", "Histogram of queueing time in seconds.", QueueTime),
    ("sglang:spec_accept_length", "The average acceptance length of speculative decoding.", SpecAcceptLength),
];

/// The exposition text of `sched`'s state in `persona`'s names. A generic OpenAI server
/// speaks vLLM's dialect, the one most OpenAI-compatible servers copy; SGLang its own.
pub fn render(persona: Persona, model: &str, sched: &Scheduler) -> String {
    let model = model.replace('\\', "\\\\").replace('"', "\\\"");
    let spec = sched.config().spec > 1;
    let (labels, table, extra) = match persona {
        Persona::Vllm | Persona::Openai => (
            format!("model_name=\"{model}\",engine=\"0\""),
            VLLM,
            if spec { VLLM_SPEC } else { &[] },
        ),
        // Only the SGLang, vLLM and OpenAI personas serve `/metrics`.
        Persona::Sglang | Persona::Ollama | Persona::Tgi => {
            (format!("model_name=\"{model}\""), SGLANG, &[][..])
        }
    };
    let mut out = String::new();
    for &(name, help, figure) in table.iter().chain(extra) {
        write_series(&mut out, name, help, &labels, &value(figure, sched));
    }
    out
}

fn value(figure: Figure, sched: &Scheduler) -> Value<'_> {
    let stats = sched.stats();
    let pool = sched.pool();
    match figure {
        Running => Value::Gauge(sched.scheduled().running as f64),
        Waiting => Value::Gauge(sched.scheduled().waiting as f64),
        Usage => Value::Gauge(pool.referenced_pages() as f64 / pool.capacity_pages() as f64),
        UsedTokens => Value::Gauge((pool.referenced_pages() * pool.page_tokens()) as f64),
        PoolTokens => Value::Gauge(pool.capacity_tokens() as f64),
        Preemptions => Value::Counter(stats.preemptions as f64),
        PromptTokens | CacheQueries => Value::Counter(stats.prompt_tokens as f64),
        GenerationTokens => Value::Counter(stats.generation_tokens as f64),
        CachedTokens => Value::Counter(stats.cached_tokens as f64),
        Finished => Value::Counter(stats.finished as f64),
        Success => Value::ByReason([
            ("stop", (stats.finished - stats.finished_length) as f64),
            ("length", stats.finished_length as f64),
            ("abort", stats.aborted as f64),
        ]),
        Ttft => Value::Histogram(&stats.ttft),
        Itl => Value::Histogram(&stats.itl),
        E2e => Value::Histogram(&stats.e2e),
        QueueTime => Value::Histogram(&stats.queue_time),
        SpecAcceptLength => Value::Gauge(stats.spec_accept_length_gauge),
        SpecDrafts => Value::Counter(stats.spec.verify_steps as f64),
        SpecDraftTokens => Value::Counter(stats.spec.draft_tokens as f64),
        SpecAccepted => Value::Counter(stats.spec.accepted_tokens as f64),
        SpecEmitted => Value::Counter(stats.spec.emitted_tokens as f64),
    }
}

fn write_series(out: &mut String, name: &str, help: &str, labels: &str, value: &Value) {
    let kind = match value {
        Value::Gauge(_) => "gauge",
        Value::Counter(_) | Value::ByReason(_) => "counter",
        Value::Histogram(_) => "histogram",
    };
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
    match value {
        Value::Gauge(v) | Value::Counter(v) => {
            let _ = writeln!(out, "{name}{{{labels}}} {}", number(*v));
        }
        Value::ByReason(counts) => {
            for (reason, v) in counts {
                let _ = writeln!(
                    out,
                    "{name}{{{labels},finished_reason=\"{reason}\"}} {}",
                    number(*v)
                );
            }
        }
        Value::Histogram(h) => {
            for (le, count) in h.cumulative() {
                let _ = writeln!(
                    out,
                    "{name}_bucket{{{labels},le=\"{}\"}} {count}",
                    number(le)
                );
            }
            let _ = writeln!(out, "{name}_sum{{{labels}}} {}", number(h.sum));
            let _ = writeln!(out, "{name}_count{{{labels}}} {}", h.count);
        }
    }
}

/// Prometheus spelling of a sample value.
fn number(v: f64) -> String {
    if v == f64::INFINITY {
        "+Inf".to_string()
    } else if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{v:.1}")
    } else {
        format!("{v}")
    }
}
