//! `ctxbench probe`: what server is this, its limits and capabilities.

use crate::backend::detect::{self, ServerInfo};
use crate::backend::http::{Http, strip_credentials};
use crate::choices::Format;
use clap::Args;

#[derive(Args, Debug, Clone)]
#[command(
    after_help = "Examples:\n  ctxbench probe --url http://127.0.0.1:30000\n  ctxbench probe --url http://127.0.0.1:8080 --cache-capacity --prefix-tokens 8k"
)]
pub struct ProbeArgs {
    /// Server base URL.
    #[arg(long)]
    pub url: String,
    /// Also measure how many distinct prefixes the prefix cache keeps: prime prefixes of
    /// --prefix-tokens until the first is evicted (sends requests; flushes where offered).
    #[arg(long)]
    pub cache_capacity: bool,
    /// With --cache-capacity: tokens per primed prefix (`k` = x1024).
    #[arg(long, default_value = "4k", value_parser = crate::lengths::parse_count_arg)]
    pub prefix_tokens: u64,
    /// With --cache-capacity: stop after this many prefixes kept.
    #[arg(long, default_value_t = 64)]
    pub max_prefixes: u32,
    #[arg(long, value_enum, default_value = "table")]
    pub format: Format,
    /// Environment variable holding the API key (default OPENAI_API_KEY when set).
    #[arg(long)]
    pub api_key_env: Option<String>,
}

pub async fn run(args: ProbeArgs) -> anyhow::Result<u8> {
    let key = match &args.api_key_env {
        Some(var) => Some(std::env::var(var).map_err(|_| {
            anyhow::anyhow!("--api-key-env {var}: the environment variable is not set")
        })?),
        None => std::env::var("OPENAI_API_KEY").ok(),
    };
    reqwest::Url::parse(&args.url).map_err(|e| {
        anyhow::anyhow!(
            "--url `{}` is not a URL ({e})",
            strip_credentials(&args.url)
        )
    })?;
    let http = Http::new(&args.url, key.clone())?;
    let info = detect::probe(&http)
        .await
        .map_err(|e| anyhow::anyhow!("{}", http.redact(&format!("{e:#}"))))?;
    let capacity = if args.cache_capacity {
        Some(cache_capacity(&args, key, &info).await?)
    } else {
        None
    };
    let text = match (args.format, &capacity) {
        (Format::Json, None) => serde_json::to_string_pretty(&info)? + "\n",
        (Format::Json, Some(c)) => {
            serde_json::to_string_pretty(&serde_json::json!({"server": info, "cache_capacity": c}))?
                + "\n"
        }
        (_, c) => {
            render(&strip_credentials(&args.url), &info)
                + &c.as_ref()
                    .map(crate::cache_capacity::render)
                    .unwrap_or_default()
        }
    };
    print!("{text}");
    Ok(crate::exit::OK)
}

/// `--cache-capacity`: connect a backend as `sweep` would and search.
async fn cache_capacity(
    args: &ProbeArgs,
    key: Option<String>,
    info: &ServerInfo,
) -> anyhow::Result<crate::cache_capacity::CacheCapacity> {
    let conn = crate::backend::connect(
        &args.url,
        crate::choices::ApiChoice::Auto,
        crate::choices::Endpoint::Completions,
        None,
        key,
    )
    .await?;
    let backend = conn.backend.as_ref();
    let ceiling = info.context_length.map(|c| c.saturating_sub(1));
    if ceiling.is_some_and(|c| args.prefix_tokens > c) {
        anyhow::bail!(
            "--prefix-tokens {} exceeds the server's context limit of {} tokens",
            args.prefix_tokens,
            info.context_length.unwrap_or(0)
        );
    }
    let mut nonce = crate::workload::NonceSource::from_entropy();
    let mut prompts =
        crate::workload::PromptSource::prepare(backend, false, ceiling, &mut nonce).await?;
    eprintln!(
        "probing the prefix cache: priming distinct {}-token prefixes until the first is evicted",
        args.prefix_tokens
    );
    crate::cache_capacity::measure(
        backend,
        &mut prompts,
        args.prefix_tokens,
        args.max_prefixes,
        info.page_size.unwrap_or(16),
        info.kv_pool_tokens,
    )
    .await
}

fn or_unknown<T: ToString>(v: Option<T>) -> String {
    v.map(|x| x.to_string())
        .unwrap_or_else(|| "not reported".into())
}

fn yes_no(v: Option<bool>) -> String {
    match v {
        Some(true) => "yes".into(),
        Some(false) => "no".into(),
        None => "unknown".into(),
    }
}

/// `value`, with where it came from when probe recorded a source for `field`.
fn sourced(i: &ServerInfo, field: &str, value: String) -> String {
    match i.sources.get(field) {
        Some(src) if value != "not reported" && value != "unknown" => {
            format!("{value} (from {src})")
        }
        _ => value,
    }
}

/// Human-readable probe result: one `key: value` line each.
pub fn render(url: &str, i: &ServerInfo) -> String {
    let cached_hint = match (i.kind.name(), i.reports_cached_tokens) {
        ("sglang", Some(false)) => " (start SGLang with --enable-cache-report)",
        ("vllm", None) => " (vLLM reports them with --enable-prompt-tokens-details)",
        _ => "",
    };
    let rows = [
        ("server", format!("{} at {url}", i.kind.name())),
        (
            "version",
            sourced(i, "version", or_unknown(i.version.as_ref())),
        ),
        ("model", or_unknown(i.model.as_ref())),
        (
            "context limit",
            match (&i.context_length, &i.context_source) {
                (Some(n), Some(src)) => format!("{n} tokens (from {src})"),
                (Some(n), None) => format!("{n} tokens"),
                _ => "not reported".into(),
            },
        ),
        (
            "max running requests",
            sourced(
                i,
                "max_running_requests",
                or_unknown(i.max_running_requests),
            ),
        ),
        (
            "max input tokens",
            or_unknown(i.max_input_tokens.map(|t| format!("{t} tokens"))),
        ),
        (
            "forces output length",
            match i.ignore_eos {
                Some(false) => "no (no ignore_eos: early stops are flagged)".into(),
                v => yes_no(v),
            },
        ),
        ("slots", sourced(i, "slots", or_unknown(i.slots))),
        (
            "KV pool",
            sourced(
                i,
                "kv_pool_tokens",
                or_unknown(i.kv_pool_tokens.map(|t| format!("{t} tokens"))),
            ),
        ),
        (
            "cache page size",
            sourced(
                i,
                "page_size",
                or_unknown(i.page_size.map(|t| format!("{t} tokens"))),
            ),
        ),
        (
            "tokens per step",
            sourced(
                i,
                "chunked_prefill_tokens",
                or_unknown(i.chunked_prefill_tokens),
            ),
        ),
        (
            "prefix cache",
            sourced(i, "prefix_cache", yes_no(i.prefix_cache)),
        ),
        (
            "reports cached tokens",
            format!(
                "{}{cached_hint}",
                sourced(i, "reports_cached_tokens", yes_no(i.reports_cached_tokens))
            ),
        ),
        ("cache flush", i.flush.to_string()),
        ("tokenize endpoint", yes_no(Some(i.tokenize))),
        (
            "speculative decoding",
            if i.speculative.is_null() {
                "off or not reported".into()
            } else {
                sourced(i, "speculative", i.speculative.to_string())
            },
        ),
        (
            "round trip",
            or_unknown(i.rtt_s.map(|r| format!("{:.2} ms", r * 1e3))),
        ),
    ];
    let width = rows.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
    rows.iter()
        .map(|(k, v)| format!("{k:<width$}  {v}\n"))
        .collect()
}
