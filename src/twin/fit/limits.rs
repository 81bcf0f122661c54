//! The profile's limits and chunk budget from what `probe` found (the run record's
//! `server_info`), each with where it came from: the server's own report (the endpoint and
//! field probe read it from: vLLM's `/metrics` `vllm:cache_config_info` and dev-mode
//! `/server_info`, llama.cpp's `/props`, SGLang's `/server_info`), a rule of the engine
//! (llama.cpp: slots × per-slot context), or a stated default, which is also a caveat.

use crate::sim::scheduler::TokenBudget;
use crate::twin::model::profile::{Caveat, Estimate, Limits};
use serde_json::Value;

/// Chunk budget when the server does not report one: llama.cpp's `-b` default and vLLM's
/// `max_num_batched_tokens` on smaller GPUs (see docs/twin.md).
pub const DEFAULT_CHUNK_TOKENS: u64 = 2048;
/// Requests running at once when the server does not say (vLLM's `max_num_seqs` on
/// smaller GPUs).
pub const DEFAULT_MAX_RUNNING: u64 = 256;
/// Pool page when the server does not say (SGLang's and the simulator's default is 1 and
/// 16; vLLM's block is 16).
pub const DEFAULT_PAGE_TOKENS: u64 = 16;
/// Pool, in contexts, when the server does not say (the simulator's default).
pub const DEFAULT_POOL_CONTEXTS: u64 = 4;

fn u64_at(v: &Value, key: &str) -> Option<u64> {
    v.get(key).and_then(Value::as_u64).filter(|&n| n > 0)
}

fn exact(value: u64, source: impl Into<String>) -> Estimate {
    Estimate::new(value as f64, None, source)
}

/// `probe: ENDPOINT FIELD` for `field`, from the sources probe recorded, else `fallback`
/// (records written before probe named its sources).
fn probed(info: &Value, field: &str, fallback: &str) -> String {
    let src = info
        .pointer(&format!("/sources/{field}"))
        .and_then(Value::as_str)
        .unwrap_or(fallback);
    format!("probe: {src}")
}

/// Sources that are stated defaults rather than what the server reported.
const DEFAULT_PREFIX: &str = "default:";

/// The server's kind as probe named it (`sglang`, `llamacpp`, …), or "".
pub fn kind(info: &Value) -> &str {
    info.get("kind").and_then(Value::as_str).unwrap_or("")
}

/// What the server's step budget counts: llama.cpp's n_batch and vLLM's
/// max_num_batched_tokens hold the running decodes' tokens too, SGLang's chunked prefill
/// (and the simulator's default) only prefill tokens.
pub fn budget(info: &Value) -> TokenBudget {
    match kind(info) {
        "llamacpp" | "vllm" => TokenBudget::All,
        _ => TokenBudget::Prefill,
    }
}

/// Limits and the chunk budget; `longest_measured` stands in for an unreported context limit.
pub fn limits(info: &Value, longest_measured: u64) -> (Limits, Estimate) {
    let llamacpp = kind(info) == "llamacpp";
    let context_tokens = match u64_at(info, "context_length") {
        Some(n) => exact(
            n,
            format!(
                "probe: {}",
                info.get("context_source")
                    .and_then(Value::as_str)
                    .unwrap_or("context_length")
            ),
        ),
        None => exact(
            longest_measured.max(1),
            "not reported: the longest context measured",
        ),
    };
    let max_running = match (u64_at(info, "max_running_requests"), u64_at(info, "slots")) {
        (_, Some(s)) if llamacpp => exact(s, probed(info, "slots", "/props total_slots")),
        (Some(m), _) => exact(
            m,
            probed(info, "max_running_requests", "max_running_requests"),
        ),
        (None, Some(s)) => exact(s, probed(info, "slots", "slots")),
        (None, None) => exact(
            DEFAULT_MAX_RUNNING,
            "default: not reported by the server (vLLM's max-num-seqs on smaller GPUs)",
        ),
    };
    let ctx = context_tokens.value as u64;
    let pool_tokens = match u64_at(info, "kv_pool_tokens") {
        Some(p) => exact(p, probed(info, "kv_pool_tokens", "kv_pool_tokens")),
        None if llamacpp => exact(
            ctx * max_running.value as u64,
            "llama.cpp: slots × per-slot n_ctx (each slot owns its share of -c)",
        ),
        None => exact(
            ctx * DEFAULT_POOL_CONTEXTS,
            format!("default: not reported; {DEFAULT_POOL_CONTEXTS} × the context limit"),
        ),
    };
    let page_tokens = match u64_at(info, "page_size") {
        Some(p) => exact(p, probed(info, "page_size", "page_size")),
        None if llamacpp => exact(1, "llama.cpp: KV cells are per token"),
        None => exact(DEFAULT_PAGE_TOKENS, "default: not reported"),
    };
    let prefix_cache = info
        .get("prefix_cache")
        .and_then(Value::as_bool)
        .unwrap_or(false);
    let chunk = match u64_at(info, "chunked_prefill_tokens") {
        Some(c) => exact(
            c,
            probed(info, "chunked_prefill_tokens", "chunked_prefill_tokens"),
        ),
        None if llamacpp => exact(
            DEFAULT_CHUNK_TOKENS,
            "default: llama.cpp's -b (n_batch) 2048; /props does not report it",
        ),
        None => exact(DEFAULT_CHUNK_TOKENS, "default: not reported by the server"),
    };
    let limits = Limits {
        max_running,
        pool_tokens,
        page_tokens,
        context_tokens,
        prefix_cache,
    };
    (limits, chunk)
}

/// What the engine model cannot express about this kind of server.
pub fn caveats(info: &Value, limits: &Limits) -> Vec<Caveat> {
    let mut out = Vec::new();
    if kind(info) == "llamacpp" {
        out.push(Caveat {
            what: format!(
                "llama.cpp gives each of its {} slots a fixed share of the context ({} tokens), \
                 where the engine model has one shared pool",
                limits.max_running.value, limits.context_tokens.value
            ),
            effect: "a prompt longer than one slot's share fails on the server but would run \
                     in the model; the pool never preempts on the server"
                .into(),
        });
        out.push(Caveat {
            what: "llama.cpp picks the idle slot whose cached prompt shares the longest prefix \
                   (above -sps), else the least recently used; its prefix cache is per slot"
                .into(),
            effect: "prefix hits in a trace depend on which slot a request lands in: the \
                     model's shared radix cache can overstate the hit ratio"
                .into(),
        });
        out.push(Caveat {
            what: "a prompt prefilled beside several decoding slots can run slower than alone \
                   (on a CPU, one compute thread: a 1k prompt took 155–170 ms beside three, \
                   145–150 ms alone or beside one); calibration at concurrency ≤ 2 sees at \
                   most one"
                .into(),
            effect: "the model charges the alone price: with 3 or more slots busy it can be \
                     optimistic on tok/s and TTFT (4–13 % at 8 clients on 4 slots there)"
                .into(),
        });
    }
    let defaulted = [
        (
            "the chunk budget",
            info.get("chunked_prefill_tokens")
                .and_then(Value::as_u64)
                .is_none(),
            "prompts longer than the real budget take more steps than modelled, which \
             stalls running decodes differently",
        ),
        (
            "the running-request limit",
            limits.max_running.source.starts_with(DEFAULT_PREFIX),
            "queueing starts at a different concurrency than on the server",
        ),
        (
            "the KV pool",
            limits.pool_tokens.source.starts_with(DEFAULT_PREFIX),
            "preemption and prefix-cache eviction start at a different load than on the \
             server",
        ),
        (
            "the cache page",
            limits.page_tokens.source.starts_with(DEFAULT_PREFIX),
            "prefix hits are rounded to a different page than the server's",
        ),
    ];
    for (what, is_default, effect) in defaulted {
        if is_default {
            out.push(Caveat {
                what: format!("{what} is a default, not a reported value"),
                effect: effect.into(),
            });
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn vllm_limits_name_the_endpoint_and_field_probe_read() {
        let info = json!({
            "kind": "vllm", "context_length": 8192, "max_running_requests": 128,
            "kv_pool_tokens": 262144, "page_size": 128, "chunked_prefill_tokens": 2048,
            "prefix_cache": true,
            "sources": {
                "context_length": "/v1/models data[0].max_model_len",
                "page_size": crate::backend::vllm_info::SRC_PAGE,
                "kv_pool_tokens": crate::backend::vllm_info::SRC_POOL,
                "max_running_requests": crate::backend::vllm_info::SRC_MAX_SEQS,
                "chunked_prefill_tokens": crate::backend::vllm_info::SRC_BATCHED,
            }
        });
        let (l, chunk) = limits(&info, 4096);
        assert_eq!(
            (l.page_tokens.value, l.pool_tokens.value),
            (128.0, 262144.0)
        );
        assert_eq!(
            l.page_tokens.source,
            "probe: /metrics vllm:cache_config_info block_size"
        );
        assert!(l.pool_tokens.source.contains("kv_cache_size_tokens"));
        assert!(l.max_running.source.contains("max_num_seqs"));
        assert!(chunk.source.contains("max_num_batched_tokens"));
        assert!(
            caveats(&info, &l)
                .iter()
                .all(|c| !c.what.contains("default")),
            "every limit was reported"
        );
    }

    #[test]
    fn every_default_is_a_caveat() {
        let info = json!({"kind": "vllm", "context_length": 8192});
        let (l, _) = limits(&info, 4096);
        assert!(l.page_tokens.source.starts_with(DEFAULT_PREFIX));
        let what: Vec<String> = caveats(&info, &l).into_iter().map(|c| c.what).collect();
        for limit in [
            "the chunk budget",
            "the running-request limit",
            "the KV pool",
            "the cache page",
        ] {
            assert!(
                what.iter().any(|w| w.starts_with(limit)),
                "{limit}: {what:?}"
            );
        }
    }
}
