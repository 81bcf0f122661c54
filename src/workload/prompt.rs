//! Exact-length, nonce-prefixed, needle-bearing prompts.
//!
//! Caches match from the first token, so the nonce leads every prompt. With token ids the
//! length is exact by construction; with text it is calibrated against the server's count.

use crate::backend::Prompt;
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::nonce::fixed_header;
pub use super::nonce::{NONCE_TOKENS, NonceSource, first_symbol};

/// A prompt ready to send, and what is known of its length.
pub struct Built {
    pub prompt: Prompt,
    pub sent_tokens: Option<u64>,
    /// Which parts of the user's content the body holds (none for filler).
    pub source: Option<crate::record::SourceRecord>,
}

/// Plain prose, repeated to fill a prompt.
pub const FILLER: &str = "The river runs past the old mill and under the stone bridge. \
People in the town walk along the water in the morning and talk about the weather, the \
market and the news of the day. In the evening the light turns gold over the fields, the \
birds return to the trees and the children come home from school. Nothing much happens \
here, and that is how the people like it. The baker opens his shop before dawn, the \
farmer brings milk and eggs, and the teacher rings the bell at eight.";

const ANIMALS: &[&str] = &[
    "platypus",
    "axolotl",
    "narwhal",
    "pangolin",
    "okapi",
    "quokka",
    "wombat",
    "capybara",
    "armadillo",
    "chinchilla",
    "flamingo",
    "hedgehog",
    "jaguar",
    "koala",
    "lemur",
    "meerkat",
    "ocelot",
    "penguin",
    "raccoon",
    "salamander",
    "tapir",
    "walrus",
    "yak",
    "zebra",
];

pub const NEEDLE_QUESTION: &str = " What is the secret animal? Answer with one word.";

/// How prompts reach their length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PromptMode {
    /// Token ids from the server's tokenizer: exact length.
    TokenIds,
    /// Text, sized by a linear calibration against the server's own prompt count.
    CalibratedText,
    /// Text cut to an exact length with the server's tokenizer.
    TokenizedText,
    /// Text brought to length by the server's counts of probe requests (a route with no
    /// tokenizer, real text whose density varies).
    ProbedText,
    /// Token ids of the filler's words tokenized one at a time, because the server's
    /// tokenizer failed on the whole text: still exact length, ordinary ids.
    TokenIdsByWord,
    /// Ordinary ids picked from the server's vocabulary, because its tokenizer encodes no
    /// text at all: exact length; recorded as `token_ids` (the run's `content` names them).
    VocabularyIds,
}

impl PromptMode {
    pub fn name(self) -> &'static str {
        match self {
            PromptMode::TokenIds | PromptMode::VocabularyIds => "token_ids",
            PromptMode::CalibratedText => "calibrated_text",
            PromptMode::TokenizedText => "tokenized_text",
            PromptMode::ProbedText => "probed_text",
            PromptMode::TokenIdsByWord => "token_ids_by_word",
        }
    }
}

/// A fact hidden in a prompt.
#[derive(Debug, Clone, PartialEq)]
pub struct Fact {
    /// Where it sits, as a fraction of the haystack.
    pub depth: f64,
    /// The sentence, with its leading space.
    pub text: String,
}

/// What a prompt hides and asks: facts at depths in the haystack, an optional preamble
/// after the nonce (a task's instruction), and the question that ends the prompt. The
/// `--needle` check is one fact and [`NEEDLE_QUESTION`]; `--tasks` items are built by
/// `crate::accuracy`.
#[derive(Debug, Clone, PartialEq)]
pub struct Needle {
    pub depth: f64,
    /// The first expected answer (the one `--needle` checks).
    pub expected: String,
    pub facts: Vec<Fact>,
    /// Text between the nonce head and the haystack (empty for `--needle`).
    pub preamble: String,
    /// Text that ends the prompt, leading space included.
    pub question: String,
    /// `--tasks`: the task graded on the answer (`None`: the `--needle` check).
    pub graded: Option<Graded>,
}

/// A task item's name and the strings its answer must hold.
#[derive(Debug, Clone, PartialEq)]
pub struct Graded {
    pub task: String,
    pub expected: Vec<String>,
}

impl Needle {
    /// The `--needle` fact: "The secret animal is X." at `depth`.
    pub fn secret(depth: f64, expected: &str) -> Needle {
        Needle {
            depth,
            expected: expected.to_string(),
            facts: vec![Fact {
                depth,
                text: format!(" The secret animal is {expected}."),
            }],
            preamble: String::new(),
            question: NEEDLE_QUESTION.to_string(),
            graded: None,
        }
    }

    /// Normalised match: the expected word appears among the answer's words.
    pub fn check(&self, answer: &str) -> bool {
        let want = normalise(&self.expected);
        answer
            .split(|c: char| !c.is_alphanumeric())
            .any(|w| normalise(w) == want)
    }

    /// The facts in body order (shallowest first; a stable sort keeps ties as given).
    pub fn ordered_facts(&self) -> Vec<&Fact> {
        let mut facts: Vec<&Fact> = self.facts.iter().collect();
        facts.sort_by(|a, b| a.depth.total_cmp(&b.depth));
        facts
    }
}

fn normalise(s: &str) -> String {
    s.chars()
        .filter(|c| c.is_alphanumeric())
        .flat_map(char::to_lowercase)
        .collect()
}

/// Pick the needle for a (length, rep, depth): deterministic from the seed.
pub fn needle_for(seed: u64, context_tokens: u64, rep: u32, depth: f64) -> Needle {
    let mut rng = ChaCha8Rng::seed_from_u64(
        seed ^ context_tokens.wrapping_mul(0x9E37_79B9_7F4A_7C15)
            ^ u64::from(rep) << 48
            ^ (depth * 1000.0) as u64,
    );
    Needle::secret(depth, ANIMALS[rng.random_range(0..ANIMALS.len())])
}

/// Token ids of the pieces a token-id prompt is assembled from.
#[derive(Debug, Clone)]
pub struct IdVocabulary {
    pub filler: Vec<u32>,
    /// Distinct ids from the filler, to draw nonces from.
    pub nonce_pool: Vec<u32>,
    pub question: Vec<u32>,
}

impl IdVocabulary {
    pub fn new(filler: Vec<u32>, question: Vec<u32>) -> Option<Self> {
        let mut pool = filler.clone();
        pool.sort_unstable();
        pool.dedup();
        (pool.len() >= 8).then_some(IdVocabulary {
            filler,
            nonce_pool: pool,
            question,
        })
    }
}

/// Linear text calibration: tokens ≈ overhead + per_word · words.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TextCalibration {
    pub overhead_tokens: f64,
    pub tokens_per_word: f64,
}

impl TextCalibration {
    /// From two (words, server-counted tokens) measurements.
    pub fn from_two(a: (usize, u64), b: (usize, u64)) -> Option<Self> {
        let dw = b.0 as f64 - a.0 as f64;
        let per_word = (b.1 as f64 - a.1 as f64) / dw;
        (dw > 0.0 && per_word > 0.0 && per_word.is_finite()).then_some(TextCalibration {
            overhead_tokens: a.1 as f64 - per_word * a.0 as f64,
            tokens_per_word: per_word,
        })
    }

    pub fn words_for(&self, tokens: u64) -> usize {
        ((tokens as f64 - self.overhead_tokens) / self.tokens_per_word)
            .round()
            .max(1.0) as usize
    }
}

/// A needle's parts as token ids: the preamble, each fact at its depth, the question.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct NeedleIds {
    pub preamble: Vec<u32>,
    pub facts: Vec<(f64, Vec<u32>)>,
    pub question: Vec<u32>,
}

impl NeedleIds {
    /// Ids the structure takes besides the haystack.
    pub fn len(&self) -> usize {
        self.preamble.len()
            + self.question.len()
            + self.facts.iter().map(|(_, f)| f.len()).sum::<usize>()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Build a token-id prompt of exactly `tokens` ids (when `tokens` leaves room for the parts).
pub fn build_ids(
    vocab: &IdVocabulary,
    tokens: u64,
    nonce: Option<&mut NonceSource>,
    needle: Option<&NeedleIds>,
) -> Prompt {
    let parts = IdParts::new(vocab, tokens, nonce, needle);
    let body = vocab
        .filler
        .iter()
        .copied()
        .cycle()
        .take(parts.body_len)
        .collect();
    parts.assemble(body)
}

/// A token-id prompt but its body: the nonce head, the needle's facts and question, and
/// how many body ids make the length exact.
pub struct IdParts<'a> {
    total: usize,
    head: Vec<u32>,
    needle: Option<&'a NeedleIds>,
    pub body_len: usize,
}

impl<'a> IdParts<'a> {
    pub fn new(
        vocab: &'a IdVocabulary,
        tokens: u64,
        nonce: Option<&mut NonceSource>,
        needle: Option<&'a NeedleIds>,
    ) -> Self {
        let total = tokens as usize;
        let mut head = match nonce {
            Some(n) => n.ids(&vocab.nonce_pool),
            None => Vec::new(),
        };
        head.truncate(total);
        let structure = needle.map_or(0, NeedleIds::len);
        IdParts {
            total,
            body_len: total.saturating_sub(head.len() + structure),
            head,
            needle,
        }
    }

    /// The prompt with `body` (`body_len` ids) and the facts spliced in at their depths.
    pub fn assemble(self, body: Vec<u32>) -> Prompt {
        let mut ids = self.head;
        match self.needle {
            None => ids.extend(body),
            Some(n) => {
                ids.extend_from_slice(&n.preamble);
                let facts: Vec<(f64, &[u32])> =
                    n.facts.iter().map(|(d, f)| (*d, f.as_slice())).collect();
                ids.extend(splice_facts(body, &facts));
                ids.extend_from_slice(&n.question);
            }
        }
        ids.truncate(self.total);
        Prompt::Ids(ids)
    }
}

/// `body` with each fact inserted at its depth (a fraction of the body), in depth order.
fn splice_facts<T: Clone>(body: Vec<T>, facts: &[(f64, &[T])]) -> Vec<T> {
    let mut order: Vec<&(f64, &[T])> = facts.iter().collect();
    order.sort_by(|a, b| a.0.total_cmp(&b.0));
    let n = body.len();
    let mut out = Vec::with_capacity(n + facts.iter().map(|f| f.1.len()).sum::<usize>());
    let mut from = 0;
    for (depth, fact) in order {
        let at = ((n as f64) * depth.clamp(0.0, 1.0)).round() as usize;
        let at = at.clamp(from, n);
        out.extend_from_slice(&body[from..at]);
        out.extend_from_slice(fact);
        from = at;
    }
    out.extend_from_slice(&body[from..]);
    out
}

/// Build a text prompt of about `words` filler words.
pub fn build_text(
    words: usize,
    nonce: Option<&mut NonceSource>,
    needle: Option<&Needle>,
) -> Prompt {
    Prompt::Text(filler_text(&text_head(nonce), words, needle))
}

/// The head, `words` filler words with the needle's facts at their depths, and the
/// question last.
pub fn filler_text(head: &str, words: usize, needle: Option<&Needle>) -> String {
    let filler = FILLER.split_whitespace().cycle().take(words);
    match needle {
        None => format!("{head} {}", filler.collect::<Vec<_>>().join(" ")),
        Some(_) => {
            let pieces: Vec<String> = filler.map(|w| format!(" {w}")).collect();
            text_from_pieces(head, &pieces, needle)
        }
    }
}

/// The head of a text prompt: the nonce, or without one (`--cache-bust off`) a fixed header
/// of the same shape, so the prompt repeats exactly yet keeps the length the calibration
/// (made with nonces) gives.
pub fn text_head(nonce: Option<&mut NonceSource>) -> String {
    match nonce {
        Some(n) => n.text(),
        None => fixed_header(),
    }
}

/// A text prompt from the user's content: the head, the pieces as they are (whitespace and
/// lines kept), the needle's preamble first and its facts at their depths, the question
/// last.
pub fn text_from_pieces(head: &str, pieces: &[String], needle: Option<&Needle>) -> String {
    let Some(n) = needle else {
        return format!("{head} {}", pieces.concat());
    };
    let facts: Vec<(f64, String)> = n
        .facts
        .iter()
        .map(|f| (f.depth, format!(" {} ", f.text.trim())))
        .collect();
    let refs: Vec<(f64, &[String])> = facts
        .iter()
        .map(|(d, t)| (*d, std::slice::from_ref(t)))
        .collect();
    let body = splice_facts(pieces.to_vec(), &refs).concat();
    let mut text = head.to_string();
    if !n.preamble.is_empty() {
        text.push(' ');
        text.push_str(n.preamble.trim());
    }
    if !body.starts_with(char::is_whitespace) {
        text.push(' ');
    }
    text.push_str(body.trim_end());
    text.push_str(&n.question);
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vocab() -> IdVocabulary {
        IdVocabulary::new((100..160).collect(), vec![7, 8, 9]).unwrap()
    }

    #[test]
    fn id_prompts_have_exact_length_and_lead_with_the_nonce() {
        let v = vocab();
        let mut n = NonceSource::seeded(1);
        for len in [1u64, 17, 1000, 32768] {
            let Prompt::Ids(ids) = build_ids(&v, len, Some(&mut n), None) else {
                panic!()
            };
            assert_eq!(ids.len() as u64, len);
        }
        let Prompt::Ids(a) = build_ids(&v, 100, Some(&mut n), None) else {
            panic!()
        };
        let Prompt::Ids(b) = build_ids(&v, 100, Some(&mut n), None) else {
            panic!()
        };
        assert_ne!(a[..NONCE_TOKENS], b[..NONCE_TOKENS], "nonces must differ");
        assert_eq!(a[NONCE_TOKENS..], b[NONCE_TOKENS..], "the filler is shared");
    }

    #[test]
    fn nonces_lead_with_a_pair_never_repeated_in_a_run() {
        let mut n = NonceSource::seeded(4);
        let mut leads = std::collections::HashSet::new();
        for _ in 0..1000 {
            let Prompt::Text(t) = build_text(10, Some(&mut n), None) else {
                panic!()
            };
            assert!(
                leads.insert(t[..2].to_string()),
                "lead {} repeated",
                &t[..2]
            );
        }
        let v = vocab();
        let mut leads = std::collections::HashSet::new();
        for _ in 0..1000 {
            let Prompt::Ids(ids) = build_ids(&v, 100, Some(&mut n), None) else {
                panic!()
            };
            assert!(
                leads.insert((ids[0], ids[1])),
                "lead {:?} repeated",
                &ids[..2]
            );
        }
    }

    #[test]
    fn without_nonce_prompts_repeat() {
        let v = vocab();
        assert_eq!(
            build_ids(&v, 500, None, None),
            build_ids(&v, 500, None, None)
        );
    }

    #[test]
    fn needle_sits_at_its_depth_and_question_ends_the_prompt() {
        let v = vocab();
        let fact = [1u32, 2, 3];
        let needle = NeedleIds {
            preamble: Vec::new(),
            facts: vec![(0.25, fact.to_vec())],
            question: vec![7, 8, 9],
        };
        let Prompt::Ids(ids) = build_ids(&v, 1000, None, Some(&needle)) else {
            panic!()
        };
        assert_eq!(ids.len(), 1000);
        let pos = ids.windows(3).position(|w| w == fact).unwrap();
        assert!((pos as f64 - 0.25 * 994.0).abs() <= 1.0, "fact at {pos}");
        assert_eq!(&ids[997..], &[7, 8, 9]);
    }

    #[test]
    fn needle_check_is_normalised() {
        let n = Needle::secret(0.5, "Okapi");
        assert!(n.check(" okapi."));
        assert!(n.check("The answer is OKAPI"));
        assert!(!n.check("okapis"));
        assert!(!n.check("unknown"));
    }

    #[test]
    fn needles_are_seeded() {
        assert_eq!(needle_for(3, 1024, 0, 0.5), needle_for(3, 1024, 0, 0.5));
    }

    #[test]
    fn calibration_inverts_a_linear_count() {
        let c = TextCalibration::from_two((100, 135), (1000, 1215)).unwrap();
        assert!((c.tokens_per_word - 1.2).abs() < 1e-9);
        assert!((c.overhead_tokens - 15.0).abs() < 1e-9);
        assert_eq!(c.words_for(12015), 10000);
        assert!(TextCalibration::from_two((100, 135), (100, 135)).is_none());
    }

    #[test]
    fn text_prompts_carry_nonce_needle_and_question() {
        let mut n = NonceSource::seeded(2);
        let needle = Needle::secret(0.5, "yak");
        let Prompt::Text(t) = build_text(200, Some(&mut n), Some(&needle)) else {
            panic!()
        };
        assert!(t.chars().next().unwrap().is_ascii_alphanumeric());
        assert!(!t.starts_with("0000"), "a nonce, not the fixed header");
        assert!(t.contains("The secret animal is yak."));
        assert!(t.ends_with(NEEDLE_QUESTION));
    }

    #[test]
    fn text_prompts_without_nonce_repeat_at_the_same_length() {
        let Prompt::Text(a) = build_text(200, None, None) else {
            panic!()
        };
        let Prompt::Text(b) = build_text(200, None, None) else {
            panic!()
        };
        let Prompt::Text(c) = build_text(200, Some(&mut NonceSource::seeded(3)), None) else {
            panic!()
        };
        assert_eq!(a, b);
        assert_eq!(a.len(), c.len(), "same shape as a nonce-led prompt");
        assert_eq!(a.split_whitespace().count(), c.split_whitespace().count());
    }
}
