//! What a vLLM server states about itself beyond `/v1/models`, read by `probe`: its version
//! (`/version`), its KV cache (`vllm:cache_config_info` in `/metrics`), its speculation (the
//! `spec_decode` counters in `/metrics`; the method from dev mode's `/server_info`), its
//! scheduler limits (dev mode's `/server_info`), and whether it reports cached tokens (asked
//! with one 1-token request, not guessed). Each value's source goes into `sources`.

use super::http::Http;
use super::prometheus::Exposition;
use super::server_info::ServerInfo;
use serde_json::{Value, json};
use std::time::Duration;

const TIMEOUT: Duration = Duration::from_secs(10);
/// Dev mode's `/server_info` gathers the host's environment on its first call (6 s on an
/// idle 2-core machine).
const SERVER_INFO_TIMEOUT: Duration = Duration::from_secs(30);

/// Where each figure comes from, as `sources` names it.
pub const SRC_VERSION: &str = "/version version";
pub const SRC_PAGE: &str = "/metrics vllm:cache_config_info block_size";
pub const SRC_POOL: &str = "/metrics vllm:cache_config_info kv_cache_size_tokens";
pub const SRC_POOL_BLOCKS: &str = "/metrics vllm:cache_config_info num_gpu_blocks × block_size";
pub const SRC_PREFIX: &str = "/metrics vllm:cache_config_info enable_prefix_caching";
pub const SRC_SPEC_METRICS: &str =
    "/metrics vllm:spec_decode_num_accepted_tokens_per_pos (one series per draft position)";
pub const SRC_SPEC_CONFIG: &str = "/server_info vllm_config.speculative_config";
/// The engine's config was read and holds no speculation: `speculative` stays null, and
/// says so (several tokens in one stream event are then merged deltas, not acceptance).
pub const SRC_SPEC_NONE: &str = "/server_info vllm_config.speculative_config (null: none)";
pub const SRC_MAX_SEQS: &str = "/server_info vllm_config.scheduler_config.max_num_seqs";
pub const SRC_BATCHED: &str = "/server_info vllm_config.scheduler_config.max_num_batched_tokens";
pub const SRC_CACHED: &str = "a 1-token request: usage.prompt_tokens_details.cached_tokens present";
pub const SRC_NOT_CACHED: &str = "a 1-token request: usage without prompt_tokens_details (--enable-prompt-tokens-details is off)";

/// Fill `info` (a vLLM server, its model already named) from what the server states.
pub async fn read(http: &Http, info: &mut ServerInfo) {
    if let Some(v) = get_json(http, "/version").await
        && let Some(s) = v.get("version").and_then(Value::as_str)
    {
        info.version = Some(s.to_string());
        info.source("version", SRC_VERSION);
    }
    if let Some(text) = super::prometheus::fetch(http, TIMEOUT).await {
        from_metrics(&super::prometheus::read(&text), info);
    }
    // Dev mode only (VLLM_SERVER_DEV_MODE=1); elsewhere 404 and these stay unreported.
    if let Some(v) = http
        .get_json("/server_info?config_format=json", SERVER_INFO_TIMEOUT)
        .await
        .ok()
        .flatten()
        && let Some(cfg) = v.get("vllm_config").filter(|c| c.is_object())
    {
        from_config(cfg, info);
    }
    if let Some(model) = info.model.clone() {
        match reports_cached_tokens(http, &model).await {
            Some(true) => {
                info.reports_cached_tokens = Some(true);
                info.source("reports_cached_tokens", SRC_CACHED);
            }
            Some(false) => {
                info.reports_cached_tokens = Some(false);
                info.source("reports_cached_tokens", SRC_NOT_CACHED);
            }
            None => {}
        }
    }
}

async fn get_json(http: &Http, path: &str) -> Option<Value> {
    http.get_json(path, TIMEOUT).await.ok().flatten()
}

/// The labels of the first `vllm:cache_config_info` series.
fn cache_config(m: &Exposition) -> Option<&prometheus_parse::Labels> {
    m.samples
        .iter()
        .find(|s| s.metric == "vllm:cache_config_info")
        .map(|s| &s.labels)
}

/// Page, pool and prefix caching from `vllm:cache_config_info`; speculation from the
/// `spec_decode` counters.
pub fn from_metrics(m: &Exposition, info: &mut ServerInfo) {
    if let Some(labels) = cache_config(m) {
        let num = |k: &str| labels.get(k).and_then(|v| v.parse::<u64>().ok());
        let page = num("block_size").filter(|&b| b > 0);
        if let Some(b) = page {
            info.page_size = Some(b);
            info.source("page_size", SRC_PAGE);
        }
        match (num("kv_cache_size_tokens"), num("num_gpu_blocks"), page) {
            (Some(t), _, _) if t > 0 => {
                info.kv_pool_tokens = Some(t);
                info.source("kv_pool_tokens", SRC_POOL);
            }
            (_, Some(n), Some(b)) if n > 0 => {
                info.kv_pool_tokens = Some(n * b);
                info.source("kv_pool_tokens", SRC_POOL_BLOCKS);
            }
            _ => {}
        }
        if let Some(p) = labels.get("enable_prefix_caching") {
            info.prefix_cache = Some(p.eq_ignore_ascii_case("true"));
            info.source("prefix_cache", SRC_PREFIX);
        }
    }
    let positions: std::collections::BTreeSet<&str> = m
        .samples
        .iter()
        .filter(|s| s.metric == "vllm:spec_decode_num_accepted_tokens_per_pos_total")
        .filter_map(|s| s.labels.get("position"))
        .collect();
    if !positions.is_empty() {
        info.speculative = json!({"num_speculative_tokens": positions.len()});
        info.source("speculative", SRC_SPEC_METRICS);
    }
}

/// Speculation's method and k, and the scheduler's limits, from the engine's own config.
pub fn from_config(cfg: &Value, info: &mut ServerInfo) {
    if let Some(spec) = cfg.get("speculative_config").filter(|s| s.is_object()) {
        let mut out = serde_json::Map::new();
        for k in [
            "method",
            "num_speculative_tokens",
            "prompt_lookup_min",
            "prompt_lookup_max",
        ] {
            if let Some(v) = spec.get(k).filter(|v| !v.is_null()) {
                out.insert(k.to_string(), v.clone());
            }
        }
        if !out.is_empty() {
            info.speculative = Value::Object(out);
            info.source("speculative", SRC_SPEC_CONFIG);
        }
    } else if info.speculative.is_null() {
        info.source("speculative", SRC_SPEC_NONE);
    }
    let sched = |k: &str| {
        cfg.pointer(&format!("/scheduler_config/{k}"))
            .and_then(Value::as_u64)
            .filter(|&n| n > 0)
    };
    if let Some(n) = sched("max_num_seqs") {
        info.max_running_requests = Some(n);
        info.source("max_running_requests", SRC_MAX_SEQS);
    }
    if let Some(n) = sched("max_num_batched_tokens") {
        info.chunked_prefill_tokens = Some(n);
        info.source("chunked_prefill_tokens", SRC_BATCHED);
    }
}

/// Whether a 1-token completion's usage carries `prompt_tokens_details` (vLLM adds it, with
/// `cached_tokens`, only under `--enable-prompt-tokens-details`); `None` when the request
/// fails.
async fn reports_cached_tokens(http: &Http, model: &str) -> Option<bool> {
    let body = json!({
        "model": model,
        "prompt": "ctxbench probe",
        "max_tokens": 1,
        "temperature": 0,
    });
    let (status, text) = http
        .call(
            reqwest::Method::POST,
            "/v1/completions",
            Some(&body),
            TIMEOUT,
        )
        .await
        .ok()?;
    if status != 200 {
        return None;
    }
    let v: Value = serde_json::from_str(&text).ok()?;
    let usage = v.get("usage").filter(|u| u.is_object())?;
    Some(
        usage
            .pointer("/prompt_tokens_details/cached_tokens")
            .is_some_and(Value::is_u64),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::server_info::ServerKind;

    const METRICS: &str = include_str!("../../tests/fixtures/vllm/metrics-ngram.txt");
    const SERVER_INFO: &str = include_str!("../../tests/fixtures/vllm/server-info-ngram.json");

    #[test]
    fn cache_config_and_spec_positions_from_real_metrics() {
        let mut i = ServerInfo::new(ServerKind::Vllm);
        from_metrics(&crate::backend::prometheus::read(METRICS), &mut i);
        assert_eq!(i.page_size, Some(128));
        assert_eq!(i.kv_pool_tokens, Some(262144));
        assert_eq!(i.prefix_cache, Some(true));
        assert_eq!(i.speculative, json!({"num_speculative_tokens": 4}));
        assert_eq!(i.sources["page_size"], SRC_PAGE);
        assert_eq!(i.sources["kv_pool_tokens"], SRC_POOL);
    }

    #[test]
    fn pool_from_blocks_when_the_token_count_is_missing() {
        let text = "vllm:cache_config_info{block_size=\"16\",num_gpu_blocks=\"100\",enable_prefix_caching=\"False\"} 1.0\n";
        let mut i = ServerInfo::new(ServerKind::Vllm);
        from_metrics(&crate::backend::prometheus::read(text), &mut i);
        assert_eq!((i.page_size, i.kv_pool_tokens), (Some(16), Some(1600)));
        assert_eq!(i.prefix_cache, Some(false));
        assert_eq!(i.sources["kv_pool_tokens"], SRC_POOL_BLOCKS);
        assert!(i.speculative.is_null());
    }

    #[test]
    fn method_and_scheduler_limits_from_dev_mode_server_info() {
        let v: Value = serde_json::from_str(SERVER_INFO).unwrap();
        let mut i = ServerInfo::new(ServerKind::Vllm);
        from_config(&v["vllm_config"], &mut i);
        assert_eq!(i.speculative["method"], "ngram");
        assert_eq!(i.speculative["num_speculative_tokens"], 4);
        assert_eq!(i.max_running_requests, Some(128));
        assert_eq!(i.chunked_prefill_tokens, Some(2048));
        assert_eq!(i.sources["max_running_requests"], SRC_MAX_SEQS);
    }

    #[test]
    fn a_config_without_speculation_says_so() {
        let mut v: Value = serde_json::from_str(SERVER_INFO).unwrap();
        v["vllm_config"]["speculative_config"] = Value::Null;
        let mut i = ServerInfo::new(ServerKind::Vllm);
        from_config(&v["vllm_config"], &mut i);
        assert!(i.speculative.is_null());
        assert_eq!(i.sources["speculative"], SRC_SPEC_NONE);
    }
}
