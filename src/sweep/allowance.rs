//! The prefix the API itself puts before every prompt (chat template, BOS) is the same for
//! every request, nonce or not, so a prefix cache serves it: measured per target with probes
//! whose nonces differ from the first symbol, and tolerated exactly in the cache check.

use super::session::Session;
use crate::backend::{GenRequest, RequestError};
use crate::choices::CacheBust;
use crate::workload::first_symbol;
use std::time::Duration;

/// Size of each probe prompt, tokens: small, and beyond any template.
pub const PROBE_TOKENS: u64 = 64;
/// Probes sent: the first fills the cache; each later one reports what it shares with
/// those before. The minimum over three such reports cannot include a chance match of a
/// random symbol with an older cached prompt unless all three meet one: with K older
/// prompts and 62 nonce symbols that is (K/62)³, where two reports left (K/62)² — about
/// one sweep in a few hundred against a simulator holding a handful of earlier prompts.
pub const PROBES: usize = 4;
/// Draws allowed to find a nonce whose first symbol differs from the probes' before it.
const DRAWS: usize = 200;

/// Tokens every prompt shares at its start because the API adds them, as the server's
/// cached-token counts show; `None` when the server gave no count to measure with.
pub async fn measure_api_prefix(
    s: &mut Session,
    deadline: Duration,
) -> Result<Option<u64>, RequestError> {
    let mut firsts = Vec::new();
    let mut shared: Option<u64> = None;
    for i in 0..PROBES {
        let mut built = None;
        for _ in 0..DRAWS {
            let b = s
                .prompts
                .build(s.backend.as_ref(), PROBE_TOKENS, Some(&mut s.nonce), None)
                .await
                .map_err(|e| RequestError::Prompt(format!("{e:#}")))?;
            let first = first_symbol(&b.prompt);
            if !firsts.contains(&first) {
                firsts.push(first);
                built = Some(b);
                break;
            }
        }
        let Some(built) = built else { break };
        let c = s
            .backend
            .generate(&GenRequest {
                prompt: built.prompt,
                max_tokens: 1,
                ignore_eos: true,
                cache_prompt: s.cache_bust == CacheBust::Off,
                deadline,
            })
            .await?;
        if i > 0
            && let Some(n) = c.cached_tokens
        {
            shared = Some(shared.map_or(n, |x| x.min(n)));
        }
    }
    Ok(shared)
}
