//! The paged KV pool that running requests and the radix prefix cache share: a page is free,
//! private to one request, or a cached prompt page referenced by zero or more requests.
//! Unreferenced cached pages are evicted least-recently-released first when room is needed.

use std::cmp::Reverse;
use std::collections::{HashMap, VecDeque};
use std::hash::{BuildHasherDefault, Hasher};

/// Keeps memory bounded whatever the pool size says.
const MAX_PAGES: u64 = 16_000_000;

#[derive(Debug, Clone, Copy)]
struct Cached {
    refs: u32,
    /// When it last became unreferenced (LRU order).
    tick: u64,
    /// Page index in its prompt: deeper pages of a chain are evicted first.
    depth: u32,
}

/// Hashes a page key for the map: keys are already uniform hashes (`page_keys`), so their
/// bits are used as they are (SipHashing them again was a fifth of a twin's prediction).
#[derive(Default)]
struct KeyHasher(u64);

impl Hasher for KeyHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.0 = self.0.rotate_left(8) ^ u64::from(b);
        }
    }

    fn write_u128(&mut self, key: u128) {
        self.0 = key as u64 ^ (key >> 64) as u64;
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

/// Page accounting in whole pages. `free` goes negative only after the pool was shrunk
/// below what is in use; it comes back as requests finish or are preempted.
#[derive(Debug)]
pub struct KvPool {
    page_tokens: u64,
    capacity: u64,
    free: i64,
    cache_on: bool,
    cached: HashMap<u128, Cached, BuildHasherDefault<KeyHasher>>,
    evictable: Lru,
    tick: u64,
    evicted_pages: u64,
}

impl KvPool {
    pub fn new(page_tokens: u64, capacity_tokens: u64, cache_on: bool) -> KvPool {
        let page_tokens = page_tokens.max(1);
        let capacity = (capacity_tokens / page_tokens).clamp(1, MAX_PAGES);
        KvPool {
            page_tokens,
            capacity,
            free: capacity as i64,
            cache_on,
            cached: HashMap::default(),
            evictable: Lru::default(),
            tick: 0,
            evicted_pages: 0,
        }
    }

    pub fn page_tokens(&self) -> u64 {
        self.page_tokens
    }

    /// Pages covering `tokens` tokens.
    pub fn pages_for(&self, tokens: u64) -> u64 {
        tokens.div_ceil(self.page_tokens)
    }

    pub fn capacity_pages(&self) -> u64 {
        self.capacity
    }

    pub fn capacity_tokens(&self) -> u64 {
        self.capacity * self.page_tokens
    }

    /// Pages neither free nor evictable: held by running requests.
    pub fn referenced_pages(&self) -> u64 {
        (self.capacity as i64 - self.free - self.evictable.len() as i64).max(0) as u64
    }

    /// Cached pages no request references (evictable on demand).
    pub fn evictable_pages(&self) -> u64 {
        self.evictable.len() as u64
    }

    pub fn cached_pages(&self) -> u64 {
        self.cached.len() as u64
    }

    /// Cached pages evicted so far to make room.
    pub fn evicted_pages(&self) -> u64 {
        self.evicted_pages
    }

    /// Pages an allocation could get now, evicting every unreferenced cached page.
    pub fn available(&self) -> i64 {
        self.free + self.evictable.len() as i64
    }

    /// The key of each whole page of `prompt`, each chained over everything before it.
    pub fn keys(&self, prompt: &[u32]) -> Vec<u128> {
        if !self.cache_on {
            return Vec::new();
        }
        page_keys(prompt, self.page_tokens).collect()
    }

    /// How many leading pages of a `prompt_len`-token prompt with these `keys` are cached:
    /// whole pages, at most `prompt_len - 1` tokens.
    pub fn matched(&self, keys: &[u128], prompt_len: u64) -> usize {
        let usable = (prompt_len.saturating_sub(1) / self.page_tokens) as usize;
        keys[..usable.min(keys.len())]
            .iter()
            .take_while(|key| self.cached.contains_key(key))
            .count()
    }

    /// Keys of the leading cached pages of `prompt`.
    pub fn lookup(&self, prompt: &[u32]) -> Vec<u128> {
        let mut keys = self.keys(prompt);
        keys.truncate(self.matched(&keys, prompt.len() as u64));
        keys
    }

    /// How many of `keys` nobody references (they stop being evictable once acquired).
    pub fn unreferenced_among(&self, keys: &[u128]) -> u64 {
        keys.iter()
            .filter(|k| self.cached.get(k).is_some_and(|c| c.refs == 0))
            .count() as u64
    }

    /// Reference cached pages (a request reuses them).
    pub fn acquire(&mut self, keys: &[u128]) {
        for key in keys {
            if let Some(c) = self.cached.get_mut(key) {
                if c.refs == 0 {
                    self.evictable.forget();
                }
                c.refs += 1;
            }
        }
    }

    /// Drop references; pages nobody references become evictable, newest last.
    pub fn release(&mut self, keys: &[u128]) {
        self.tick += 1;
        for key in keys {
            if let Some(c) = self.cached.get_mut(key)
                && c.refs > 0
            {
                c.refs -= 1;
                if c.refs == 0 {
                    c.tick = self.tick;
                    self.evictable.stage(self.tick, c.depth, *key);
                }
            }
        }
        self.commit();
    }

    /// Take `pages` private pages, evicting LRU cached pages as needed; false (and nothing
    /// taken) when even full eviction leaves too few.
    pub fn alloc(&mut self, pages: u64) -> bool {
        let pages = pages as i64;
        if self.available() < pages {
            return false;
        }
        while self.free < pages {
            // `available` counted these pages: a failure is broken bookkeeping, not a full pool.
            assert!(
                self.evict_one(),
                "the evictable count disagrees with the queue"
            );
        }
        self.free -= pages;
        true
    }

    /// Give private pages back.
    pub fn free(&mut self, pages: u64) {
        self.free += pages as i64;
    }

    /// Turn a prefilled prompt's whole pages `keys[held..]` (the first `held` are already
    /// referenced) into cached pages this request references. Returns how many: the request
    /// holds that many fewer private pages afterwards (a page someone else cached meanwhile
    /// is freed and theirs referenced instead).
    pub fn insert(&mut self, keys: &[u128], held: usize) -> usize {
        if !self.cache_on {
            return 0;
        }
        for (depth, &key) in keys.iter().enumerate().skip(held) {
            match self.cached.get(&key) {
                Some(_) => {
                    self.acquire(&[key]);
                    self.free += 1;
                }
                None => {
                    self.cached.insert(
                        key,
                        Cached {
                            refs: 1,
                            tick: 0,
                            depth: depth as u32,
                        },
                    );
                }
            }
        }
        keys.len().saturating_sub(held)
    }

    /// Cache the whole pages of a finished request's prompt and output (`keys`, its chain
    /// from the first page), unreferenced and newest: pages already cached are refreshed,
    /// new ones take free room or evict older pages, never this chain's own. Returns the
    /// pages added.
    pub fn cache_finished(&mut self, keys: &[u128]) -> u64 {
        if !self.cache_on {
            return 0;
        }
        self.tick += 1;
        let tick = self.tick;
        let mut added = 0;
        for (depth, &key) in keys.iter().enumerate() {
            let depth = depth as u32;
            if let Some(c) = self.cached.get_mut(&key) {
                if c.refs == 0 {
                    // Refreshed: its older entry goes stale, the new one joins this batch.
                    self.evictable.forget();
                    c.tick = tick;
                    self.evictable.stage(tick, c.depth, key);
                }
                continue;
            }
            // This call's pages are only staged, so whatever is queued is older.
            if self.free < 1 && !self.evict_one() {
                break;
            }
            self.free -= 1;
            added += 1;
            self.cached.insert(
                key,
                Cached {
                    refs: 0,
                    tick,
                    depth,
                },
            );
            self.evictable.stage(tick, depth, key);
        }
        self.commit();
        added
    }

    /// Evict every unreferenced cached page.
    pub fn flush(&mut self) {
        while self.evict_one() {}
    }

    /// Change the pool's size; in-use pages stay (free may go negative until they leave).
    pub fn resize(&mut self, capacity_tokens: u64) {
        let capacity = (capacity_tokens / self.page_tokens).clamp(1, MAX_PAGES);
        self.free += capacity as i64 - self.capacity as i64;
        self.capacity = capacity;
        while self.free < 0 && self.evict_one() {}
    }

    /// Evict the least recently released unreferenced page; false when there is none.
    fn evict_one(&mut self) -> bool {
        let cached = &self.cached;
        let Some(key) = self
            .evictable
            .pop_oldest(|tick, key| current(cached, tick, key))
        else {
            return false;
        };
        self.cached.remove(&key);
        self.free += 1;
        self.evicted_pages += 1;
        true
    }

    /// Queue the staged release, then drop stale entries if they have piled up.
    fn commit(&mut self) {
        let cached = &self.cached;
        self.evictable
            .commit(|tick, key| current(cached, tick, key));
    }
}

/// Whether a queued entry still stands for its page: unreferenced since that release.
fn current(
    cached: &HashMap<u128, Cached, BuildHasherDefault<KeyHasher>>,
    tick: u64,
    key: u128,
) -> bool {
    cached
        .get(&key)
        .is_some_and(|c| c.refs == 0 && c.tick == tick)
}

/// Unreferenced cached pages in eviction order: oldest release first, and within one release
/// the deepest page first. Releases come in tick order, so each is appended whole at the back;
/// a page referenced again is not searched for but left behind as a stale entry (its page's
/// refs or tick no longer match), skipped when it reaches the front and dropped in bulk when
/// stale entries outnumber live ones. A `BTreeSet` kept in that order was a quarter of a
/// twin's prediction, in its inserts and removals.
#[derive(Debug, Default)]
struct Lru {
    queue: VecDeque<Entry>,
    /// Entries that are current: the evictable pages' count.
    live: usize,
    /// One release's pages, queued together by `commit` (kept to reuse its room).
    staged: Vec<Entry>,
}

/// A release's tick, the page's depth (deepest first within a release) and its key.
type Entry = (u64, Reverse<u32>, u128);

impl Lru {
    fn len(&self) -> usize {
        self.live
    }

    /// A page of the release being gathered.
    fn stage(&mut self, tick: u64, depth: u32, key: u128) {
        self.staged.push((tick, Reverse(depth), key));
    }

    /// Queue the staged pages, all newer than everything queued; then, once stale entries
    /// outnumber the live ones, drop those `current` rejects, keeping the queue's order.
    fn commit(&mut self, current: impl Fn(u64, u128) -> bool) {
        self.staged.sort_unstable();
        self.live += self.staged.len();
        self.queue.extend(self.staged.drain(..));
        if self.queue.len() > 4 * self.live + 65_536 {
            self.queue.retain(|&(tick, _, key)| current(tick, key));
        }
    }

    /// One queued entry went stale (its page was referenced or refreshed).
    fn forget(&mut self) {
        self.live -= 1;
    }

    /// Remove and return the oldest entry `current` accepts, dropping stale ones on the way.
    fn pop_oldest(&mut self, current: impl Fn(u64, u128) -> bool) -> Option<u128> {
        while let Some((tick, _, key)) = self.queue.pop_front() {
            if current(tick, key) {
                self.live -= 1;
                return Some(key);
            }
        }
        None
    }
}

/// Key of each whole page, each depending on all tokens before it (a radix path): two
/// independent 64-bit lanes over the previous key and the page's tokens, each a folded
/// multiply per pair of tokens and murmur3's finaliser. Only equality of keys matters (a
/// hit), so any hash whose collisions are as rare as a random 128-bit value's will do;
/// SipHash, twice per page, was a fifth of a twin's prediction.
fn page_keys(tokens: &[u32], page_tokens: u64) -> impl Iterator<Item = u128> + '_ {
    const SEEDS: [u64; 2] = [0x243F_6A88_85A3_08D3, 0x1319_8A2E_0370_7344];
    const MULS: [u64; 2] = [0x9E37_79B9_7F4A_7C15, 0xC2B2_AE3D_27D4_EB4F];
    let mut prev: u128 = 0;
    tokens.chunks_exact(page_tokens as usize).map(move |page| {
        let lane = |l: usize| {
            let mut h = SEEDS[l] ^ (prev >> (64 * l)) as u64;
            h = fold(h, page.len() as u64, MULS[l]);
            for pair in page.chunks(2) {
                let x = u64::from(pair[0]) | pair.get(1).map_or(0, |&t| u64::from(t) << 32);
                h = fold(h, x, MULS[l]);
            }
            fmix64(h)
        };
        prev = (u128::from(lane(1)) << 64) | u128::from(lane(0));
        prev
    })
}

/// The state `h` with `x` folded in: the 128-bit product's halves xored.
fn fold(h: u64, x: u64, k: u64) -> u64 {
    let m = u128::from(h ^ x) * u128::from(k ^ x.rotate_left(29));
    (m as u64) ^ (m >> 64) as u64 ^ h.rotate_left(23)
}

/// Murmur3's 64-bit finaliser: every input bit moves every output bit.
fn fmix64(mut h: u64) -> u64 {
    h ^= h >> 33;
    h = h.wrapping_mul(0xFF51_AFD7_ED55_8CCD);
    h ^= h >> 33;
    h = h.wrapping_mul(0xC4CE_B9FE_1A85_EC53);
    h ^ (h >> 33)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn prompt(n: u32, salt: u32) -> Vec<u32> {
        (0..n).map(|i| 300 + (i * 7 + salt) % 997).collect()
    }

    #[test]
    fn cached_pages_are_shared_and_evicted_only_when_unreferenced() {
        let mut pool = KvPool::new(16, 160, true); // 10 pages
        let a = prompt(64, 0);
        assert!(pool.alloc(4));
        let keys = pool.keys(&a);
        assert_eq!(pool.insert(&keys, 0), 4);
        assert_eq!(pool.referenced_pages(), 4);
        assert_eq!(pool.lookup(&a).len(), 3, "n-1 rule");
        // Referenced pages cannot be evicted: 6 free only.
        assert!(!pool.alloc(7));
        pool.release(&keys);
        assert_eq!(pool.evictable_pages(), 4);
        assert_eq!(pool.referenced_pages(), 0);
        assert!(pool.alloc(7), "evicts LRU cached pages for room");
        assert_eq!(pool.evicted_pages(), 1);
        assert_eq!(
            pool.lookup(&a).len(),
            3,
            "the deepest page went first, the prefix survives"
        );
        assert!(pool.alloc(3));
        assert_eq!(pool.lookup(&a).len(), 0);
        assert_eq!(pool.available(), 0);
    }

    /// Cache `p` as a finished request would leave it.
    fn cache(pool: &mut KvPool, p: &[u32]) {
        let keys = pool.keys(p);
        assert!(pool.alloc(keys.len() as u64));
        pool.insert(&keys, 0);
        pool.release(&keys);
    }

    #[test]
    fn identical_prompt_hits_whole_pages_but_not_the_last_token() {
        let mut pool = KvPool::new(16, 1 << 20, true);
        let p = prompt(100, 0);
        assert!(pool.lookup(&p).is_empty());
        cache(&mut pool, &p);
        assert_eq!(pool.lookup(&p).len() * 16, 96); // floor(99/16)*16
        let exact = prompt(64, 0);
        let mut pool = KvPool::new(16, 1 << 20, true);
        cache(&mut pool, &exact);
        assert_eq!(
            pool.lookup(&exact).len() * 16,
            48,
            "the 4th page ends on the last token"
        );
        let mut pool = KvPool::new(1, 1 << 20, true);
        cache(&mut pool, &p);
        assert_eq!(pool.lookup(&p).len(), 99, "page size 1 hits n-1");
    }

    #[test]
    fn shared_prefix_hits_only_the_shared_whole_pages() {
        let mut pool = KvPool::new(16, 1 << 20, true);
        let a = prompt(100, 0);
        cache(&mut pool, &a);
        let mut b = a.clone();
        b[40] = 1; // differs inside the third page
        assert_eq!(pool.lookup(&b).len(), 2);
        let mut c = a.clone();
        c[0] = 1; // a nonce at the start defeats the cache
        assert!(pool.lookup(&c).is_empty());
        assert_eq!(
            pool.lookup(&prompt(200, 0)).len(),
            6,
            "a longer prompt reuses them"
        );
    }

    #[test]
    fn flush_and_disabled_cache_never_hit() {
        let mut pool = KvPool::new(16, 1 << 20, true);
        let p = prompt(100, 0);
        cache(&mut pool, &p);
        pool.flush();
        assert!(pool.lookup(&p).is_empty());
        assert_eq!(pool.cached_pages(), 0);
        let mut off = KvPool::new(16, 1 << 20, false);
        cache(&mut off, &p);
        assert!(off.lookup(&p).is_empty());
    }

    #[test]
    fn a_finished_chain_is_cached_whole_and_evicts_older_chains_only() {
        let mut pool = KvPool::new(4, 16, true);
        let a: Vec<u32> = (0..12).collect();
        let b: Vec<u32> = (100..112).collect();
        let ka = pool.keys(&a);
        assert_eq!(pool.cache_finished(&ka), 3);
        assert_eq!(pool.lookup(&[a.clone(), vec![99]].concat()).len(), 3);
        // b needs 3 pages with 1 free: a's deepest pages go first, b stays whole.
        let kb = pool.keys(&b);
        assert_eq!(pool.cache_finished(&kb), 3);
        assert_eq!(pool.lookup(&[b.clone(), vec![99]].concat()).len(), 3);
        assert_eq!(pool.lookup(&[a.clone(), vec![99]].concat()).len(), 1);
        // A chain longer than the pool keeps what fits, never evicting itself.
        let long: Vec<u32> = (200..240).collect();
        let kl = pool.keys(&long);
        assert_eq!(pool.cache_finished(&kl), 4);
        assert_eq!(pool.lookup(&long).len(), 4);
    }

    #[test]
    fn eviction_order_and_counts_hold_across_many_stale_queue_entries() {
        // Each acquire of an evictable page leaves a stale entry behind; 20k reuses of a
        // 4-page chain leave 80k, past the compaction threshold (4 × live + 65,536), so the
        // queue is compacted at least once on the way.
        let mut pool = KvPool::new(4, 40, true); // 10 pages
        let a: Vec<u32> = (0..17).collect();
        let b: Vec<u32> = (100..117).collect();
        let (ka, kb) = (pool.keys(&a), pool.keys(&b));
        pool.cache_finished(&ka);
        pool.cache_finished(&kb);
        for _ in 0..20_000 {
            pool.acquire(&ka);
            assert_eq!(pool.evictable_pages(), 4);
            pool.release(&ka);
        }
        assert!(pool.evictable.queue.len() < 80_000, "compacted");
        assert_eq!(pool.evictable_pages(), 8);
        assert_eq!(pool.referenced_pages(), 0);
        assert_eq!(pool.available(), 10);
        // b was released longest ago: its pages go first, the deepest first.
        assert!(pool.alloc(5));
        assert_eq!(pool.evicted_pages(), 3);
        assert_eq!(pool.lookup(&b).len(), 1);
        assert_eq!(pool.lookup(&a).len(), 4);
        assert!(pool.alloc(2));
        assert_eq!(pool.lookup(&b).len(), 0);
        assert_eq!(pool.lookup(&a).len(), 3);
        pool.flush();
        assert_eq!((pool.cached_pages(), pool.evictable_pages()), (0, 0));
        assert_eq!(pool.available(), 3);
    }

    #[test]
    fn insert_of_a_page_cached_meanwhile_frees_the_private_copy() {
        let mut pool = KvPool::new(16, 320, true);
        let a = prompt(32, 1);
        assert!(pool.alloc(2));
        assert!(pool.alloc(2));
        let keys = pool.keys(&a);
        pool.insert(&keys, 0);
        pool.insert(&keys, 0);
        assert_eq!(pool.cached_pages(), 2);
        assert_eq!(pool.referenced_pages(), 2);
    }

    #[test]
    fn shrinking_below_use_makes_free_negative_until_released() {
        let mut pool = KvPool::new(1, 10, false);
        assert!(pool.alloc(8));
        pool.resize(5);
        assert_eq!(pool.available(), -3);
        assert!(!pool.alloc(1));
        pool.free(8);
        assert_eq!(pool.available(), 5);
    }

    #[test]
    fn page_keys_differ_for_every_page_and_every_prefix() {
        // 20k pages of near-identical tokens (one token differs, or one is swapped), each
        // after two prefixes: 40k keys, all distinct; the same page after the same prefix
        // keys alike.
        let mut keys = std::collections::HashSet::new();
        for prefix in [0u32, 1] {
            for i in 0..20_000u32 {
                let mut p = vec![prefix; 16];
                p.extend((0..16).map(|j| if j == i % 16 { i } else { 7 }));
                let k: Vec<u128> = page_keys(&p, 16).collect();
                assert_eq!(k, page_keys(&p, 16).collect::<Vec<_>>());
                assert!(keys.insert(k[1]), "page {i} after prefix {prefix}");
            }
        }
    }
}
