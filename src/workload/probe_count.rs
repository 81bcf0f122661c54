//! Counting a text's tokens on a route with no tokenizer: the server's own
//! `usage.prompt_tokens` for a one-token request of the same text under a throwaway nonce.
//! The count includes whatever the route adds (a chat template's fixed words, BOS), which
//! is what the measured request will be counted with too; the fresh nonce keeps the probe
//! out of the prefix cache the measured request must miss (caches match from the start).

use super::prompt::{NonceSource, text_head};
use crate::backend::{Backend, GenRequest, Prompt};
use std::time::Duration;

/// A probe waits at most this long (it is one prefill of a prompt the sweep will measure).
const PROBE_DEADLINE: Duration = Duration::from_secs(600);

/// `text` with its first `head.len()` bytes (the sample's nonce head) swapped for a fresh one.
fn with_fresh_head(text: &str, head: &str, nonce: &mut NonceSource) -> String {
    let rest = text.strip_prefix(head).unwrap_or(text);
    format!("{}{rest}", text_head(Some(nonce)))
}

/// The server's prompt-token count for `text` (whose head is `head`), from a probe request.
pub async fn count(
    backend: &dyn Backend,
    text: &str,
    head: &str,
    nonce: &mut NonceSource,
) -> anyhow::Result<u64> {
    let req = GenRequest {
        prompt: Prompt::Text(with_fresh_head(text, head, nonce)),
        max_tokens: 1,
        ignore_eos: true,
        cache_prompt: false,
        deadline: PROBE_DEADLINE,
    };
    let c = backend
        .generate(&req)
        .await
        .map_err(|e| anyhow::anyhow!("counting a prompt's tokens with a probe request: {e}"))?;
    c.prompt_tokens.ok_or_else(|| {
        anyhow::anyhow!(
            "counting a prompt's tokens with a probe request: the server reports no prompt \
             token count (usage) and has no tokenize endpoint"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_probe_keeps_the_text_and_changes_only_the_head() {
        let mut nonce = NonceSource::seeded(7);
        let head = text_head(Some(&mut nonce));
        let text = format!("{head} body words here");
        let probe = with_fresh_head(&text, &head, &mut nonce);
        assert_ne!(probe, text);
        assert_eq!(probe.len(), text.len(), "heads have one shape");
        assert!(probe.ends_with(" body words here"));
        assert!(!probe.starts_with(&head));
    }
}
