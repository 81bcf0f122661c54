//! Identifying a server from its endpoints, with GETs (no side effects), and reading its
//! limits and capabilities; on vLLM also one 1-token completion, which shows whether it
//! reports cached tokens (`vllm_info`).

use super::RequestError;
use super::flush::Flusher;
use super::http::Http;
pub use super::server_info::{ServerInfo, ServerKind};
use serde_json::Value;
use std::time::{Duration, Instant};

const PROBE_TIMEOUT: Duration = Duration::from_secs(10);
const RTT_SAMPLES: usize = 5;

impl ServerInfo {
    fn set_flusher(&mut self, f: Flusher) {
        self.flush = f.name();
        self.flusher = f;
    }

    fn set_context(&mut self, n: Option<u64>, source: &str) {
        if self.context_length.is_none() && n.is_some() {
            self.context_length = n;
            self.context_source = Some(source.to_string());
            self.source("context_length", source);
        }
    }
}

async fn get(http: &Http, path: &str) -> Option<Value> {
    http.get_json(path, PROBE_TIMEOUT)
        .await
        .ok()
        .flatten()
        .filter(Value::is_object)
}

fn u64_at(v: &Value, pointer: &str) -> Option<u64> {
    v.pointer(pointer).and_then(Value::as_u64)
}

/// Probe the server; fails only when nothing answers at all.
pub async fn probe(http: &Http) -> anyhow::Result<ServerInfo> {
    let models = match http.get_json("/v1/models", PROBE_TIMEOUT).await {
        Ok(v) => v.filter(Value::is_object),
        Err(e) => {
            if let Some(why) = unreachable_or_refused(&e) {
                anyhow::bail!(why);
            }
            None
        }
    };
    let mut info = if let Some(si) = match get(http, "/server_info").await {
        Some(v) => Some(v),
        None => get(http, "/get_server_info").await,
    }
    .filter(looks_like_sglang)
    {
        sglang_info(&si)
    } else if let Some(props) = get(http, "/props").await.filter(|p| {
        p.get("default_generation_settings").is_some() || p.get("total_slots").is_some()
    }) {
        llamacpp_info(&props)
    } else if let Some(tgi) = get(http, "/info")
        .await
        .filter(|i| i.get("max_total_tokens").is_some())
    {
        tgi_info(&tgi)
    } else if let Some(v) = get(http, "/api/version")
        .await
        .filter(|v| v.get("version").is_some())
    {
        let mut i = ServerInfo::new(ServerKind::Ollama);
        i.version = v.get("version").and_then(Value::as_str).map(str::to_string);
        i.prefix_cache = Some(true);
        i.reports_cached_tokens = Some(false);
        i.ignore_eos = Some(false);
        i.model = super::ollama::default_model(http).await;
        if let Some(m) = &i.model
            && let Some((n, source)) = super::ollama::model_limit(http, m).await
        {
            i.set_context(Some(n), &source);
        }
        i
    } else if let Some(m) = &models {
        let owner = m
            .pointer("/data/0/owned_by")
            .and_then(Value::as_str)
            .unwrap_or("");
        let mut i = ServerInfo::new(if owner == "vllm" {
            ServerKind::Vllm
        } else {
            ServerKind::Openai
        });
        if i.kind == ServerKind::Vllm {
            // vLLM serves `/reset_prefix_cache` only in dev mode, and `/tokenize` may be
            // missing behind a gateway: both are checked below, not assumed. Prefix caching
            // is on by default since its V1 engine; `/metrics` says for sure (below).
            i.prefix_cache = Some(true);
            i.source("prefix_cache", "default: on in vLLM's V1 engine");
        }
        i
    } else {
        anyhow::bail!(
            "it answers none of /v1/models, /server_info, /props, /info, /api/version: \
             is this an LLM server? (check --url)"
        );
    };
    if let Some(m) = &models {
        if info.model.is_none() {
            info.model = m
                .pointer("/data/0/id")
                .and_then(Value::as_str)
                .map(str::to_string);
        }
        info.set_context(
            u64_at(m, "/data/0/max_model_len"),
            "/v1/models data[0].max_model_len",
        );
    }
    if info.kind == ServerKind::Vllm {
        super::vllm_info::read(http, &mut info).await;
    }
    if matches!(
        info.kind,
        ServerKind::Sglang | ServerKind::Vllm | ServerKind::Openai
    ) && !info.tokenize
    {
        info.tokenize = has_tokenize(http).await;
    }
    if info.kind == ServerKind::Vllm && has_post_route(http, "/reset_prefix_cache").await {
        info.set_flusher(Flusher::VllmResetPrefixCache);
    }
    info.rtt_s = rtt(http).await;
    Ok(info)
}

/// A first call that says why nothing else will work: no server at the address, or one that
/// refuses our credentials. Each carries the underlying error once and one hint.
fn unreachable_or_refused(e: &RequestError) -> Option<String> {
    match e {
        RequestError::Connect(m) => Some(format!(
            "nothing answers: {m} (is the server running at that address? check --url)"
        )),
        RequestError::Timeout(s) => Some(format!(
            "no answer within {s:.0} s (is the server running at that address? check --url)"
        )),
        RequestError::Http {
            status: status @ (401 | 403),
            message,
        } => Some(format!(
            "the server refused the request with HTTP {status}: {message} (it wants an API key: \
             pass the name of the environment variable holding it with --api-key-env, or set \
             OPENAI_API_KEY)"
        )),
        _ => None,
    }
}

fn looks_like_sglang(v: &Value) -> bool {
    [
        "max_total_num_tokens",
        "mem_fraction_static",
        "disable_radix_cache",
    ]
    .iter()
    .any(|k| v.get(*k).is_some())
}

fn sglang_info(si: &Value) -> ServerInfo {
    let mut i = ServerInfo::new(ServerKind::Sglang);
    i.set_context(u64_at(si, "/context_length"), "/server_info context_length");
    i.max_running_requests = u64_at(si, "/max_running_requests");
    i.kv_pool_tokens = u64_at(si, "/max_total_num_tokens");
    i.page_size = u64_at(si, "/page_size");
    // -1 (chunking off) is not a u64: left unreported.
    i.chunked_prefill_tokens = u64_at(si, "/chunked_prefill_size").filter(|&c| c > 0);
    for (field, key, set) in [
        (
            "max_running_requests",
            "max_running_requests",
            i.max_running_requests,
        ),
        ("kv_pool_tokens", "max_total_num_tokens", i.kv_pool_tokens),
        ("page_size", "page_size", i.page_size),
        (
            "chunked_prefill_tokens",
            "chunked_prefill_size",
            i.chunked_prefill_tokens,
        ),
    ] {
        if set.is_some() {
            i.source(field, format!("/server_info {key}"));
        }
    }
    i.prefix_cache = si
        .get("disable_radix_cache")
        .and_then(Value::as_bool)
        .map(|d| !d);
    i.reports_cached_tokens = si.get("enable_cache_report").and_then(Value::as_bool);
    i.version = si
        .get("version")
        .and_then(Value::as_str)
        .map(str::to_string);
    i.model = si
        .get("served_model_name")
        .and_then(Value::as_str)
        .map(str::to_string);
    let spec: serde_json::Map<String, Value> = si
        .as_object()
        .into_iter()
        .flatten()
        .filter(|(k, v)| k.starts_with("speculative_") && !v.is_null())
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    if !spec.is_empty() {
        i.speculative = Value::Object(spec);
    }
    i.set_flusher(Flusher::SglangFlushCache);
    i.ignore_eos = Some(true);
    i.instance_marker = si
        .get("sim_instance_id")
        .and_then(Value::as_str)
        .map(str::to_string);
    i
}

fn llamacpp_info(props: &Value) -> ServerInfo {
    let mut i = ServerInfo::new(ServerKind::Llamacpp);
    i.set_context(
        u64_at(props, "/default_generation_settings/n_ctx"),
        "/props default_generation_settings.n_ctx",
    );
    i.slots = u64_at(props, "/total_slots");
    i.max_running_requests = i.slots;
    if i.slots.is_some() {
        i.source("slots", "/props total_slots");
        i.source("max_running_requests", "/props total_slots");
    }
    i.model = props
        .get("model_path")
        .and_then(Value::as_str)
        .map(|p| p.rsplit('/').next().unwrap_or(p).to_string());
    i.version = props
        .get("build_info")
        .and_then(Value::as_str)
        .map(str::to_string);
    i.prefix_cache = Some(true);
    i.reports_cached_tokens = Some(true);
    i.tokenize = true;
    let slots = i.slots.unwrap_or(1).min(u64::from(u32::MAX)) as u32;
    i.set_flusher(Flusher::LlamacppEraseSlots { slots });
    i.ignore_eos = Some(true);
    i
}

fn tgi_info(v: &Value) -> ServerInfo {
    let mut i = ServerInfo::new(ServerKind::Tgi);
    i.set_context(u64_at(v, "/max_total_tokens"), "/info max_total_tokens");
    i.max_running_requests = u64_at(v, "/max_concurrent_requests");
    i.model = v
        .get("model_id")
        .and_then(Value::as_str)
        .map(str::to_string);
    i.version = v.get("version").and_then(Value::as_str).map(str::to_string);
    i.tokenize = true;
    i.max_input_tokens = u64_at(v, "/max_input_tokens");
    i.reports_cached_tokens = Some(false);
    i.ignore_eos = Some(false);
    i
}

/// Whether a POST-only route exists, asked with a GET (no side effects): FastAPI and axum
/// answer 405 for a route that takes another method, 404 for none.
async fn has_post_route(http: &Http, path: &str) -> bool {
    matches!(
        http.call(reqwest::Method::GET, path, None, PROBE_TIMEOUT)
            .await,
        Ok((405 | 200..=299, _))
    )
}

async fn has_tokenize(http: &Http) -> bool {
    matches!(super::tokenize::vllm_style(http, "hello").await, Ok(Some(t)) if !t.is_empty())
}

/// The server's current instance marker (what changes on restart), where it exposes one.
pub async fn instance_marker(http: &Http) -> Option<String> {
    let si = get(http, "/server_info").await?;
    si.get("sim_instance_id")
        .and_then(Value::as_str)
        .map(str::to_string)
}

/// Median round trip of a cheap GET (`/health`, else `/v1/models`).
async fn rtt(http: &Http) -> Option<f64> {
    let mut path = "/health";
    if http
        .call(reqwest::Method::GET, path, None, PROBE_TIMEOUT)
        .await
        .map(|r| r.0)
        .ok()?
        == 404
    {
        path = "/v1/models";
    }
    let mut times = Vec::with_capacity(RTT_SAMPLES);
    for _ in 0..RTT_SAMPLES {
        let t = Instant::now();
        if http
            .call(reqwest::Method::GET, path, None, PROBE_TIMEOUT)
            .await
            .is_ok()
        {
            times.push(t.elapsed().as_secs_f64());
        }
    }
    crate::stats::median(&times)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tgi_info_fixture() {
        let v: Value = serde_json::from_str(include_str!("../../tests/fixtures/tgi/info.json"))
            .expect("fixture parses");
        let i = tgi_info(&v);
        assert_eq!(i.kind, ServerKind::Tgi);
        assert_eq!(i.context_length, Some(4096));
        assert_eq!(i.context_source.as_deref(), Some("/info max_total_tokens"));
        assert_eq!(i.max_input_tokens, Some(4095));
        assert_eq!(i.max_running_requests, Some(128));
        assert_eq!(i.model.as_deref(), Some("meta-llama/Llama-2-7b-chat-hf"));
        assert_eq!(i.version.as_deref(), Some("3.3.6"));
        assert_eq!(i.ignore_eos, Some(false));
    }
}
