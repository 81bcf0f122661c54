//! Where a prediction leaves what the profile was calibrated on: a context longer than any
//! measured, or more requests batched at once than any measured. Such figures are
//! extrapolations of the fitted laws, and the twin says so.

use super::engine::Twin;
use crate::load::LoadResult;

/// One warning per way `r` leaves the profile's envelope.
pub fn warnings(twin: &Twin, r: &LoadResult) -> Vec<String> {
    let env = &twin.profile.envelope;
    let mut out = Vec::new();
    let longest = r
        .requests
        .iter()
        .map(|q| q.prompt_tokens.unwrap_or(q.cell.context_tokens) + q.output_tokens.unwrap_or(0))
        .max()
        .unwrap_or(0);
    if longest > env.max_context_tokens {
        out.push(format!(
            "contexts up to {longest} tokens, longer than any calibrated ({} tokens): the \
             prefill and decode laws are extrapolated",
            env.max_context_tokens
        ));
    }
    let batch = r
        .cells
        .iter()
        .filter_map(|c| c.server.as_ref()?.running_max)
        .fold(0.0, f64::max) as u64;
    if batch > env.max_concurrency {
        out.push(format!(
            "up to {batch} requests running at once, more than any calibrated ({}): the \
             per-request decode cost (d2) is extrapolated",
            env.max_concurrency
        ));
    }
    out
}
