//! What reaches the user of a failed request: the server's error message, the client's
//! error without its URL, and URLs without their credentials.

use serde_json::Value;

/// Longest error body kept, in bytes.
const ERROR_BODY_MAX: usize = 2048;

/// The message inside a server's error body: `{"error":{"message"}}`, `{"message"}`,
/// `{"detail"}`, `{"error":"…"}`, or the text itself.
pub fn error_message(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(body);
    let from_json = serde_json::from_str::<Value>(&text).ok().and_then(|v| {
        let pick = |v: &Value| v.as_str().map(str::to_string);
        v.pointer("/error/message")
            .and_then(pick)
            .or_else(|| v.get("message").and_then(pick))
            .or_else(|| v.get("detail").and_then(pick))
            .or_else(|| v.get("error").and_then(pick))
    });
    let mut msg = from_json.unwrap_or_else(|| text.trim().to_string());
    if msg.len() > ERROR_BODY_MAX {
        let cut = (0..=ERROR_BODY_MAX)
            .rev()
            .find(|i| msg.is_char_boundary(*i))
            .unwrap_or(0);
        msg.truncate(cut);
        msg.push('…');
    }
    msg
}

/// Whether a 400's message is about the prompt being too long.
pub fn mentions_context_limit(message: &str) -> bool {
    let m = message.to_ascii_lowercase();
    [
        "context length",
        "context_length",
        "maximum context",
        "too long",
        "exceed",
        "n_ctx",
        "max_model_len",
    ]
    .iter()
    .any(|k| m.contains(k))
}

/// A response to a streamed request that is one whole document (`application/json`), not
/// a stream: its content type, for the message.
pub(super) fn whole_body_kind(headers: &reqwest::header::HeaderMap) -> Option<String> {
    let ct = headers
        .get(reqwest::header::CONTENT_TYPE)?
        .to_str()
        .ok()?
        .to_ascii_lowercase();
    let essence = ct.split(';').next().unwrap_or("").trim().to_string();
    (essence == "application/json").then(|| "JSON".to_string())
}

pub(super) fn is_stale_connection(e: &reqwest::Error) -> bool {
    let mut source: Option<&dyn std::error::Error> = std::error::Error::source(e);
    while let Some(s) = source {
        if s.to_string().contains("closed before message completed") {
            return true;
        }
        source = s.source();
    }
    false
}

/// reqwest errors include the URL, which may carry credentials: keep only the cause chain.
pub(super) fn without_url(e: &reqwest::Error) -> String {
    let mut parts = Vec::new();
    let mut source: Option<&dyn std::error::Error> = std::error::Error::source(e);
    while let Some(s) = source {
        // Layers often repeat their cause in their own text: keep each cause once.
        let text = s.to_string();
        if !parts.iter().any(|p: &String| p.contains(&text)) {
            parts.push(text);
        }
        source = s.source();
    }
    let kind = if e.is_timeout() {
        "timed out"
    } else if e.is_connect() {
        "connection failed"
    } else if e.is_body() || e.is_decode() {
        "response body failed"
    } else {
        "request failed"
    };
    if parts.is_empty() {
        kind.to_string()
    } else {
        format!("{kind}: {}", parts.join(": "))
    }
}

/// Credentials in a URL (`http://user:pass@host`) never reach output or files.
pub fn strip_credentials(url: &str) -> String {
    match reqwest::Url::parse(url) {
        Ok(mut u) if u.has_host() => {
            let _ = u.set_username("");
            let _ = u.set_password(None);
            u.to_string().trim_end_matches('/').to_string()
        }
        // Unparsable, or parsed as something like `user:pass@host` (scheme `user`).
        _ => strip_userinfo_text(url),
    }
}

/// For text that does not parse as a URL: drop anything before an `@` in the authority.
fn strip_userinfo_text(url: &str) -> String {
    let (scheme, rest) = match url.find("://") {
        Some(i) => url.split_at(i + 3),
        None => ("", url),
    };
    let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    match rest[..end].rfind('@') {
        Some(at) => format!("{scheme}{}", &rest[at + 1..]),
        None => url.to_string(),
    }
}
