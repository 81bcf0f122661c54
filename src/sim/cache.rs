//! A radix-style prefix cache at page granularity, like SGLang's: a prompt reuses the
//! longest cached run of whole pages from its start, never its last token.

use std::collections::HashSet;
use std::hash::{DefaultHasher, Hash, Hasher};

/// Keeps memory bounded whatever the pool size says.
const MAX_PAGES: usize = 4_000_000;

/// Cached prefixes, one 128-bit key per page chained over everything before it.
#[derive(Debug)]
pub struct PrefixCache {
    page_tokens: u64,
    capacity_pages: usize,
    enabled: bool,
    pages: HashSet<u128>,
}

impl PrefixCache {
    /// `capacity_tokens` plays the KV pool: inserting beyond it evicts everything first.
    pub fn new(page_tokens: u64, capacity_tokens: u64, enabled: bool) -> PrefixCache {
        let page_tokens = page_tokens.max(1);
        let capacity_pages = (capacity_tokens / page_tokens).clamp(1, MAX_PAGES as u64) as usize;
        PrefixCache {
            page_tokens,
            capacity_pages,
            enabled,
            pages: HashSet::new(),
        }
    }

    /// Tokens of `prompt` already cached: whole pages, at most `prompt.len() - 1` tokens.
    pub fn lookup(&self, prompt: &[u32]) -> u64 {
        if !self.enabled || prompt.is_empty() {
            return 0;
        }
        let reusable = &prompt[..prompt.len() - 1];
        let hit_pages = page_keys(reusable, self.page_tokens)
            .take_while(|key| self.pages.contains(key))
            .count() as u64;
        hit_pages * self.page_tokens
    }

    /// Remember every whole page of `prompt` (done once it has been prefilled).
    pub fn insert(&mut self, prompt: &[u32]) {
        if !self.enabled {
            return;
        }
        let keys: Vec<u128> = page_keys(prompt, self.page_tokens).collect();
        let new_pages = keys.iter().filter(|k| !self.pages.contains(k)).count();
        if self.pages.len() + new_pages > self.capacity_pages {
            self.pages.clear();
        }
        self.pages
            .extend(keys.into_iter().take(self.capacity_pages));
    }

    pub fn flush(&mut self) {
        self.pages.clear();
    }

    pub fn cached_pages(&self) -> usize {
        self.pages.len()
    }
}

/// Key of each whole page, each depending on all tokens before it.
pub(super) fn page_keys(tokens: &[u32], page_tokens: u64) -> impl Iterator<Item = u128> + '_ {
    let mut prev: u128 = 0;
    tokens.chunks_exact(page_tokens as usize).map(move |page| {
        let half = |salt: u8| {
            let mut h = DefaultHasher::new();
            (prev, salt, page).hash(&mut h);
            h.finish() as u128
        };
        prev = (half(0) << 64) | half(1);
        prev
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prompt(n: u32) -> Vec<u32> {
        (0..n).map(|i| 300 + i % 97).collect()
    }

    #[test]
    fn identical_prompt_hits_whole_pages_but_not_the_last_token() {
        let mut cache = PrefixCache::new(16, 1 << 20, true);
        let p = prompt(100);
        assert_eq!(cache.lookup(&p), 0);
        cache.insert(&p);
        assert_eq!(cache.lookup(&p), 96); // floor(99/16)*16
        let exact = prompt(64);
        let mut cache = PrefixCache::new(16, 1 << 20, true);
        cache.insert(&exact);
        assert_eq!(
            cache.lookup(&exact),
            48,
            "n-1 rule: the 4th page ends on the last token"
        );
    }

    #[test]
    fn page_size_one_hits_n_minus_one() {
        let mut cache = PrefixCache::new(1, 1 << 20, true);
        let p = prompt(50);
        cache.insert(&p);
        assert_eq!(cache.lookup(&p), 49);
    }

    #[test]
    fn shared_prefix_hits_only_the_shared_whole_pages() {
        let mut cache = PrefixCache::new(16, 1 << 20, true);
        let a = prompt(100);
        cache.insert(&a);
        let mut b = a.clone();
        b[40] = 1; // differs inside the third page
        assert_eq!(cache.lookup(&b), 32);
        let mut c = a.clone();
        c[0] = 1; // a nonce at the start defeats the cache
        assert_eq!(cache.lookup(&c), 0);
    }

    #[test]
    fn longer_prompt_extending_a_cached_one_hits_its_pages() {
        let mut cache = PrefixCache::new(16, 1 << 20, true);
        let short = prompt(40);
        cache.insert(&short);
        assert_eq!(cache.lookup(&prompt(200)), 32);
    }

    #[test]
    fn flush_empties() {
        let mut cache = PrefixCache::new(16, 1 << 20, true);
        let p = prompt(100);
        cache.insert(&p);
        cache.flush();
        assert_eq!(cache.lookup(&p), 0);
        assert_eq!(cache.cached_pages(), 0);
    }

    #[test]
    fn disabled_cache_never_hits() {
        let mut cache = PrefixCache::new(16, 1 << 20, false);
        let p = prompt(100);
        cache.insert(&p);
        assert_eq!(cache.lookup(&p), 0);
    }

    #[test]
    fn full_pool_evicts_before_inserting() {
        let mut cache = PrefixCache::new(16, 160, true); // 10 pages
        let a = prompt(128); // 8 pages
        cache.insert(&a);
        let mut b = prompt(128);
        b[0] = 1;
        cache.insert(&b);
        assert_eq!(cache.cached_pages(), 8);
        assert_eq!(cache.lookup(&a), 0);
        assert_eq!(cache.lookup(&b), 112);
    }
}
