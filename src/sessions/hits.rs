//! Possible against observed prefix-cache hits: pure arithmetic on the server's counts.
//!
//! A turn could reuse the longest prefix the server already computed: this session's
//! previous prompt and the reply it generated (the reply is counted whole, as the server
//! generated it; where re-tokenizing the reply's text, or the template's end marker after
//! it, differs from the generated tokens, the server can reuse less, and the shortfall
//! shows as observed below possible), or a system prompt that an earlier turn carried
//! (counted from the moment that turn was sent: a turn sent while another with the same
//! system prompt is still in prefill may be served it, so possible bounds observed).
//! Caches match whole pages and never the prompt's last token.

use super::record::HitCount;

/// Whole pages of `tokens`.
pub fn floor_page(tokens: u64, page: u64) -> u64 {
    let page = page.max(1);
    tokens / page * page
}

/// The possible cached tokens of a `prompt_tokens` prompt whose session had sent
/// `previous` (prompt, reply tokens) and whose system prompt of `system_seen` tokens an
/// earlier turn carried (0 if none had).
pub fn possible(
    previous: Option<(u64, u64)>,
    system_seen: u64,
    prompt_tokens: u64,
    page: u64,
) -> u64 {
    let seen = previous.map_or(0, |(p, o)| p + o).max(system_seen);
    floor_page(seen.min(prompt_tokens.saturating_sub(1)), page)
}

/// Sum of (observed, possible) pairs; a turn without a server count observes 0.
pub fn count(pairs: impl IntoIterator<Item = (Option<u64>, u64)>) -> HitCount {
    let (mut observed, mut possible) = (0, 0);
    for (o, p) in pairs {
        observed += o.unwrap_or(0);
        possible += p;
    }
    HitCount {
        observed_tokens: observed,
        possible_tokens: possible,
        ratio: (possible > 0).then(|| observed as f64 / possible as f64),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn possible_is_the_previous_turn_in_whole_pages() {
        // Turn 2 of a session whose turn 1 had 5000 prompt and 256 reply tokens.
        assert_eq!(possible(Some((5000, 256)), 1024, 5800, 16), 5248);
        // Turn 1: only a system prompt someone finished with.
        assert_eq!(possible(None, 1030, 5200, 16), 1024);
        assert_eq!(possible(None, 0, 5200, 16), 0);
        // Never the last token, whatever was seen.
        assert_eq!(possible(Some((100, 10)), 0, 110, 1), 109);
    }

    #[test]
    fn counts_pool_and_missing_counts_observe_nothing() {
        let h = count([(Some(96), 96), (None, 32), (Some(0), 0)]);
        assert_eq!((h.observed_tokens, h.possible_tokens), (96, 128));
        assert_eq!(h.ratio, Some(0.75));
        assert_eq!(count([]).ratio, None);
    }
}
