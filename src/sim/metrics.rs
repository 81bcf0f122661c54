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
    Histogram(&'a Histogram),
}

/// The exposition text of `sched`'s state in `persona`'s names.
pub fn render(persona: Persona, model: &str, sched: &Scheduler) -> String {
    let stats = sched.stats();
    let pool = sched.pool();
    let used_tokens = pool.referenced_pages() * pool.page_tokens();
    let usage = pool.referenced_pages() as f64 / pool.capacity_pages() as f64;
    let (running, waiting) = (sched.running() as f64, sched.waiting() as f64);
    let model = model.replace('\\', "\\\\").replace('"', "\\\"");
    let (labels, series): (String, Vec<(&str, &str, Value)>) = match persona {
        Persona::Vllm => (
            format!("model_name=\"{model}\",engine=\"0\""),
            vec![
                (
                    "vllm:num_requests_running",
                    "Number of requests in model execution batches.",
                    Value::Gauge(running),
                ),
                (
                    "vllm:num_requests_waiting",
                    "Number of requests waiting to be processed.",
                    Value::Gauge(waiting),
                ),
                (
                    "vllm:kv_cache_usage_perc",
                    "KV-cache usage. 1 means 100 percent usage.",
                    Value::Gauge(usage),
                ),
                (
                    "vllm:num_preemptions_total",
                    "Cumulative number of preemption from the engine.",
                    Value::Counter(stats.preemptions as f64),
                ),
                (
                    "vllm:prompt_tokens_total",
                    "Number of prefill tokens processed.",
                    Value::Counter(stats.prompt_tokens as f64),
                ),
                (
                    "vllm:generation_tokens_total",
                    "Number of generation tokens processed.",
                    Value::Counter(stats.generation_tokens as f64),
                ),
                (
                    "vllm:prefix_cache_queries_total",
                    "Prefix cache queries, in terms of number of queried tokens.",
                    Value::Counter(stats.prompt_tokens as f64),
                ),
                (
                    "vllm:prefix_cache_hits_total",
                    "Prefix cache hits, in terms of number of cached tokens.",
                    Value::Counter(stats.cached_tokens as f64),
                ),
                (
                    "vllm:time_to_first_token_seconds",
                    "Histogram of time to first token in seconds.",
                    Value::Histogram(&stats.ttft),
                ),
                (
                    "vllm:inter_token_latency_seconds",
                    "Histogram of inter-token latency in seconds.",
                    Value::Histogram(&stats.itl),
                ),
                (
                    "vllm:e2e_request_latency_seconds",
                    "Histogram of e2e request latency in seconds.",
                    Value::Histogram(&stats.e2e),
                ),
                (
                    "vllm:request_queue_time_seconds",
                    "Histogram of time spent in WAITING phase for request.",
                    Value::Histogram(&stats.queue_time),
                ),
            ],
        ),
        // Only the SGLang and vLLM personas serve `/metrics`.
        Persona::Sglang | Persona::Openai | Persona::Ollama | Persona::Tgi => (
            format!("model_name=\"{model}\""),
            vec![
                (
                    "sglang:num_running_reqs",
                    "The number of running requests.",
                    Value::Gauge(running),
                ),
                (
                    "sglang:num_queue_reqs",
                    "The number of requests in the waiting queue.",
                    Value::Gauge(waiting),
                ),
                (
                    "sglang:token_usage",
                    "The token usage.",
                    Value::Gauge(usage),
                ),
                (
                    "sglang:num_used_tokens",
                    "The number of used tokens.",
                    Value::Gauge(used_tokens as f64),
                ),
                (
                    "sglang:max_total_num_tokens",
                    "Maximum total number of tokens in the KV cache pool.",
                    Value::Gauge(pool.capacity_tokens() as f64),
                ),
                (
                    "sglang:num_retracted_requests_total",
                    "Total number of retracted requests.",
                    Value::Counter(stats.preemptions as f64),
                ),
                (
                    "sglang:prompt_tokens_total",
                    "Number of prefill tokens processed.",
                    Value::Counter(stats.prompt_tokens as f64),
                ),
                (
                    "sglang:generation_tokens_total",
                    "Number of generation tokens processed.",
                    Value::Counter(stats.generation_tokens as f64),
                ),
                (
                    "sglang:cached_tokens_total",
                    "Number of cached prompt tokens.",
                    Value::Counter(stats.cached_tokens as f64),
                ),
                (
                    "sglang:num_requests_total",
                    "Number of requests processed.",
                    Value::Counter(stats.finished as f64),
                ),
                (
                    "sglang:time_to_first_token_seconds",
                    "Histogram of time to first token in seconds.",
                    Value::Histogram(&stats.ttft),
                ),
                (
                    "sglang:inter_token_latency_seconds",
                    "Histogram of inter-token latency in seconds.",
                    Value::Histogram(&stats.itl),
                ),
                (
                    "sglang:e2e_request_latency_seconds",
                    "Histogram of End-to-end request latency in seconds",
                    Value::Histogram(&stats.e2e),
                ),
                (
                    "sglang:queue_time_seconds",
                    "Histogram of queueing time in seconds.",
                    Value::Histogram(&stats.queue_time),
                ),
            ],
        ),
    };
    let mut out = String::new();
    for (name, help, value) in series {
        write_series(&mut out, name, help, &labels, &value);
    }
    out
}

fn write_series(out: &mut String, name: &str, help: &str, labels: &str, value: &Value) {
    let kind = match value {
        Value::Gauge(_) => "gauge",
        Value::Counter(_) => "counter",
        Value::Histogram(_) => "histogram",
    };
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
    match value {
        Value::Gauge(v) | Value::Counter(v) => {
            let _ = writeln!(out, "{name}{{{labels}}} {}", number(*v));
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
