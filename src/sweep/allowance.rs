//! The prefix the API itself puts before every prompt (chat template, BOS) is the same for
//! every request, nonce or not, so a prefix cache serves it: measured per target with probes
//! whose nonces differ from the first symbol, from each other's and from every nonce the run
//! sent before them, and tolerated exactly in the cache check.

use super::session::Session;
use crate::backend::{GenRequest, RequestError};
use crate::choices::CacheBust;
use crate::workload::first_symbol;
use std::collections::HashSet;
use std::time::Duration;

/// Size of each probe prompt, tokens: small, and beyond any template.
pub const PROBE_TOKENS: u64 = 64;
/// Probes sent: the first fills the cache; each later one reports what it shares with
/// those before. A probe's first symbol differs from every first symbol the run's nonces
/// had before (the prompt-length calibration's, sent to this server moments earlier), so
/// no prompt of this run can lend it a token beyond the API's prefix. Prompts of earlier
/// runs still in the server's cache can, by chance: the minimum over three reports counts
/// one only if all three probes meet one, (K/62)³ with K such first symbols cached.
pub const PROBES: usize = 4;
/// Draws allowed to find a nonce whose first symbol differs from the run's before it.
const DRAWS: usize = 200;

/// Whether a probe may lead with `first`: never after another probe's first symbol, and,
/// while `strict`, never after any nonce's the run drew before the probes (`earlier`).
fn fresh(first: Option<u64>, probes: &[Option<u64>], earlier: &HashSet<u64>, strict: bool) -> bool {
    let seen_before = strict && first.is_some_and(|f| earlier.contains(&f));
    !probes.contains(&first) && !seen_before
}

/// Tokens every prompt shares at its start because the API adds them, as the server's
/// cached-token counts show; `None` when the server gave no count to measure with.
pub async fn measure_api_prefix(
    s: &mut Session,
    deadline: Duration,
) -> Result<Option<u64>, RequestError> {
    let mut firsts = Vec::new();
    let mut shared: Option<u64> = None;
    let earlier = s.nonce.firsts().clone();
    for i in 0..PROBES {
        let mut built = None;
        // Past half the draws, a first symbol only the probes' own is refused (a server
        // whose nonce pool the run's earlier nonces have nearly used up).
        for draw in 0..DRAWS {
            let b = s
                .prompts
                .build(s.backend.as_ref(), PROBE_TOKENS, Some(&mut s.nonce), None)
                .await
                .map_err(|e| RequestError::Prompt(format!("{e:#}")))?;
            let first = first_symbol(&b.prompt);
            if fresh(first, &firsts, &earlier, draw < DRAWS / 2) {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_probe_never_leads_with_a_first_symbol_the_run_sent_before() {
        let earlier: HashSet<u64> = [65, 66].into();
        let probes = [Some(67)];
        // A calibration prompt led with 65: a probe leading with it would be served one
        // token beyond the API's prefix from the cache.
        assert!(!fresh(Some(65), &probes, &earlier, true));
        assert!(!fresh(Some(67), &probes, &earlier, true));
        assert!(fresh(Some(68), &probes, &earlier, true));
        // Only once the strict draws are spent does an earlier first symbol pass.
        assert!(fresh(Some(65), &probes, &earlier, false));
        assert!(!fresh(Some(67), &probes, &earlier, false));
    }

    #[test]
    fn the_nonce_source_remembers_every_first_symbol_it_drew() {
        let mut n = crate::workload::NonceSource::seeded(7);
        let mut seen = HashSet::new();
        for _ in 0..5 {
            let p = crate::workload::prompt::build_text(10, Some(&mut n), None);
            seen.insert(first_symbol(&p).unwrap());
        }
        assert_eq!(n.firsts(), &seen);
    }
}
