//! Emptying a server's prefix cache, where it offers a way, with back-off while it is busy.

use super::http::Http;
use super::{Flush, RequestError};
use reqwest::Method;
use serde_json::Value;
use std::time::Duration;

/// The flush a server offers, as found by probing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Flusher {
    None,
    /// SGLang `POST /flush_cache` (400 while requests run).
    SglangFlushCache,
    /// vLLM `POST /reset_prefix_cache` (dev mode only). Always 200; 0.32's body says
    /// `{"success": false}` when running requests hold blocks, and then nothing was reset.
    VllmResetPrefixCache,
    /// llama.cpp `POST /slots/{id}?action=erase` for each slot.
    LlamacppEraseSlots {
        slots: u32,
    },
}

/// Attempts while the server says it is busy, and the first back-off.
const FLUSH_ATTEMPTS: u32 = 6;
const FLUSH_BACKOFF: Duration = Duration::from_millis(50);
const FLUSH_TIMEOUT: Duration = Duration::from_secs(30);

impl Flusher {
    pub fn name(&self) -> &'static str {
        match self {
            Flusher::None => "none",
            Flusher::SglangFlushCache => "/flush_cache",
            Flusher::VllmResetPrefixCache => "/reset_prefix_cache",
            Flusher::LlamacppEraseSlots { .. } => "/slots/{id}?action=erase",
        }
    }

    pub async fn flush(&self, http: &Http) -> Result<Flush, RequestError> {
        match self {
            Flusher::None => Ok(Flush::NotOffered),
            Flusher::SglangFlushCache => retry_busy(http, "/flush_cache").await,
            Flusher::VllmResetPrefixCache => retry_busy(http, "/reset_prefix_cache").await,
            Flusher::LlamacppEraseSlots { slots } => {
                // Every slot must be erased for the cache to be empty: one slot that cannot
                // (501 without `--slot-save-path`) means the flush did not happen.
                for id in 0..*slots {
                    let done = retry_busy(http, &format!("/slots/{id}?action=erase")).await?;
                    if done != Flush::Done {
                        return Ok(done);
                    }
                }
                Ok(Flush::Done)
            }
        }
    }
}

/// A 2xx whose JSON body says `"success": false` (vLLM's refusal while busy).
fn refused(body: &str) -> bool {
    serde_json::from_str::<Value>(body)
        .ok()
        .and_then(|v| v.get("success")?.as_bool())
        == Some(false)
}

async fn retry_busy(http: &Http, path: &str) -> Result<Flush, RequestError> {
    let mut wait = FLUSH_BACKOFF;
    let mut last = RequestError::Http {
        status: 400,
        message: String::new(),
    };
    for attempt in 1..=FLUSH_ATTEMPTS {
        let (status, text) = http
            .call(
                Method::POST,
                path,
                Some(&Value::Object(Default::default())),
                FLUSH_TIMEOUT,
            )
            .await?;
        let busy = (200..=299).contains(&status) && refused(&text);
        match status {
            200..=299 if !busy => return Ok(Flush::Done),
            // 501: llama-server without `--slot-save-path` has no slot actions.
            404 | 405 | 501 => return Ok(Flush::NotOffered),
            _ => {
                last = if busy {
                    RequestError::Http {
                        status,
                        message: format!(
                            "the flush was refused ({}): requests still hold the cache",
                            http.redact(text.trim())
                        ),
                    }
                } else {
                    http.status_error(status, text.as_bytes())
                };
                // No wait after the last attempt: it would only delay the failure.
                if attempt < FLUSH_ATTEMPTS {
                    tokio::time::sleep(wait).await;
                    wait *= 2;
                }
            }
        }
    }
    Err(last)
}
