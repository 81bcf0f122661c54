//! The nonce that leads every prompt: fresh per run, its leading pair of symbols never
//! repeated within one, so no prefix cache can serve a prompt from an earlier one.

use crate::backend::Prompt;
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Number of nonce tokens at the head of a token-id prompt.
pub const NONCE_TOKENS: usize = 16;

/// A nonce source: fresh entropy per invocation (a nonce must never repeat across runs,
/// or a cache left by the earlier run serves it); needles stay seeded.
///
/// The nonce is the prompt's first content: its leading pair of symbols (characters, or
/// ids) never repeats within a run, so two prompts of one run share at most one random
/// token, whatever the tokenizer makes of them. What they share beyond that is what the API
/// itself adds (template, BOS), which the sweep measures.
pub struct NonceSource {
    rng: ChaCha8Rng,
    /// Lead pairs drawn so far, as (pool size, first, second) indices.
    used_leads: std::collections::HashSet<(usize, usize, usize)>,
    /// The first symbol of every nonce drawn (as [`first_symbol`] gives it): what a prefix
    /// cache may match a later prompt's first symbol with.
    firsts: std::collections::HashSet<u64>,
}

/// Characters of a text nonce: letters and digits, which no template or tokenizer treats
/// specially.
const NONCE_CHARS: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
/// Characters in a text nonce.
const NONCE_TEXT_CHARS: usize = 16;

impl NonceSource {
    pub fn from_entropy() -> Self {
        NonceSource {
            rng: ChaCha8Rng::from_rng(&mut rand::rng()),
            used_leads: Default::default(),
            firsts: Default::default(),
        }
    }

    pub fn seeded(seed: u64) -> Self {
        NonceSource {
            rng: ChaCha8Rng::seed_from_u64(seed),
            used_leads: Default::default(),
            firsts: Default::default(),
        }
    }

    /// Indices into a pool of `n` symbols, the first two a pair not used before in this run.
    fn draw(&mut self, n: usize, len: usize) -> Vec<usize> {
        // Past half the pairs, start over: a repeat then needs the rest of the nonce to
        // match too, and rejection sampling stays quick.
        if self.used_leads.iter().filter(|l| l.0 == n).count() >= n * n / 2 {
            self.used_leads.clear();
        }
        loop {
            let lead = (n, self.rng.random_range(0..n), self.rng.random_range(0..n));
            if n < 2 || self.used_leads.insert(lead) {
                let mut out = vec![lead.1, lead.2];
                out.extend((2..len).map(|_| self.rng.random_range(0..n)));
                out.truncate(len);
                return out;
            }
        }
    }

    pub(super) fn ids(&mut self, pool: &[u32]) -> Vec<u32> {
        let ids: Vec<u32> = self
            .draw(pool.len(), NONCE_TOKENS)
            .into_iter()
            .map(|i| pool[i])
            .collect();
        self.firsts.extend(ids.first().map(|&i| u64::from(i)));
        ids
    }

    pub(super) fn text(&mut self) -> String {
        let chars: String = self
            .draw(NONCE_CHARS.len(), NONCE_TEXT_CHARS)
            .into_iter()
            .map(|i| NONCE_CHARS[i] as char)
            .collect();
        self.firsts
            .extend(chars.chars().next().map(|c| u64::from(u32::from(c))));
        nonce_text(chars)
    }

    /// The first symbols of the nonces drawn so far (ids, or characters as `u32`).
    pub fn firsts(&self) -> &std::collections::HashSet<u64> {
        &self.firsts
    }
}

fn nonce_text(chars: String) -> String {
    format!("{chars}.")
}

/// The header a prompt without nonce carries instead: the same shape, always the same.
pub(super) fn fixed_header() -> String {
    nonce_text("0".repeat(NONCE_TEXT_CHARS))
}

/// The first symbol of a prompt (its first id, or first character), to tell two prompts'
/// starts apart.
pub fn first_symbol(prompt: &Prompt) -> Option<u64> {
    match prompt {
        Prompt::Ids(ids) => ids.first().map(|&i| u64::from(i)),
        Prompt::Text(t) => t.chars().next().map(|c| u64::from(u32::from(c))),
        Prompt::Shared(p) => {
            let head = std::str::from_utf8(&p.head).ok()?;
            if p.tail.is_text {
                let c = head.strip_prefix('"')?.chars().next()?;
                Some(u64::from(u32::from(c)))
            } else {
                head.strip_prefix('[')?.split(',').next()?.parse().ok()
            }
        }
    }
}
