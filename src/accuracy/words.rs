//! The words tasks are made of: keys for magic numbers, keywords for common-word
//! extraction, and variable names; drawn by a seeded generator.

use rand::RngExt;
use rand_chacha::ChaCha8Rng;

const ADJECTIVES: &[&str] = &[
    "amber", "brisk", "calm", "dusty", "eager", "faint", "gentle", "hollow", "icy", "jolly",
    "keen", "lively", "mellow", "nimble", "odd", "proud", "quiet", "rapid", "silent", "tidy",
    "vivid", "wary", "young", "zesty",
];

const NOUNS: &[&str] = &[
    "anchor", "barrel", "candle", "desert", "engine", "falcon", "garden", "harbor", "island",
    "jacket", "kettle", "ladder", "magnet", "needle", "orchard", "pepper", "quarry", "ribbon",
    "saddle", "tunnel", "umbrella", "violin", "wagon", "yarrow",
];

/// Keywords for common-word extraction: none is a filler word.
pub const KEYWORDS: &[&str] = &[
    "apricot", "basalt", "cobalt", "dolphin", "emerald", "fennel", "granite", "hazel", "indigo",
    "juniper", "kiwi", "lantern", "mango", "nutmeg", "obsidian", "papaya", "quartz", "radish",
    "saffron", "thistle", "walnut", "zircon",
];

/// A key such as `quiet-harbor`, not in `taken`.
pub fn key(rng: &mut ChaCha8Rng, taken: &[String]) -> String {
    loop {
        let k = format!(
            "{}-{}",
            ADJECTIVES[rng.random_range(0..ADJECTIVES.len())],
            NOUNS[rng.random_range(0..NOUNS.len())]
        );
        if !taken.contains(&k) {
            return k;
        }
    }
}

/// A seven-digit number not in `taken`.
pub fn number(rng: &mut ChaCha8Rng, taken: &[String]) -> String {
    loop {
        let n = rng.random_range(1_000_000u32..10_000_000).to_string();
        if !taken.contains(&n) {
            return n;
        }
    }
}

/// A five-letter upper-case variable name not in `taken`.
pub fn variable(rng: &mut ChaCha8Rng, taken: &[String]) -> String {
    loop {
        let v: String = (0..5)
            .map(|_| char::from(b'A' + rng.random_range(0..26u8)))
            .collect();
        if !taken.contains(&v) {
            return v;
        }
    }
}

/// `k` distinct keywords.
pub fn keywords(rng: &mut ChaCha8Rng, k: usize) -> Vec<String> {
    let mut pool: Vec<&str> = KEYWORDS.to_vec();
    let mut out = Vec::with_capacity(k);
    while out.len() < k && !pool.is_empty() {
        out.push(
            pool.swap_remove(rng.random_range(0..pool.len()))
                .to_string(),
        );
    }
    out
}
