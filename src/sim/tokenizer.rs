//! A deterministic, reversible SentencePiece-like tokenizer: vocabulary words are one token,
//! any other word is the word-boundary marker followed by its bytes.

use super::vocab::WORDS;
use std::collections::HashMap;
use std::sync::OnceLock;

/// Ids `0..=255` are single-byte fallback tokens.
pub const BYTE_TOKENS: u32 = 256;
/// Beginning of sequence; prepended to text prompts.
pub const BOS: u32 = 256;
/// End of sequence; what a natural stop "matched".
pub const EOS: u32 = 257;
/// Word boundary `▁`: starts a word spelled in byte tokens.
pub const MARKER: u32 = 258;
/// Id of `WORDS[0]`.
pub const FIRST_WORD_ID: u32 = 300;
/// Largest id `/generate` accepts in `input_ids` (exclusive).
pub const MAX_INPUT_ID: u32 = 65_536;

/// Ids `0..vocab_size()` have a meaning; larger ids detokenize as `<unk>`.
pub fn vocab_size() -> u32 {
    FIRST_WORD_ID + WORDS.len() as u32
}

fn word_ids() -> &'static HashMap<&'static str, u32> {
    static IDS: OnceLock<HashMap<&'static str, u32>> = OnceLock::new();
    IDS.get_or_init(|| {
        WORDS
            .iter()
            .enumerate()
            .map(|(i, w)| (*w, FIRST_WORD_ID + i as u32))
            .collect()
    })
}

/// The id of a vocabulary word, if it is one.
pub fn word_id(word: &str) -> Option<u32> {
    word_ids().get(word).copied()
}

/// Token ids of `text`, without BOS; whitespace runs collapse to single word boundaries.
pub fn tokenize(text: &str) -> Vec<u32> {
    let mut ids = Vec::with_capacity(text.len() / 4 + 1);
    for word in text.split_whitespace() {
        match word_id(word) {
            Some(id) => ids.push(id),
            None => {
                ids.push(MARKER);
                ids.extend(word.bytes().map(u32::from));
            }
        }
    }
    ids
}

/// The text of `ids`: words joined by single spaces, no leading space; never fails.
pub fn detokenize(ids: &[u32]) -> String {
    let mut bytes = Vec::with_capacity(ids.len() * 5);
    for &id in ids {
        match id {
            0..BYTE_TOKENS => bytes.push(id as u8),
            BOS | EOS => {}
            MARKER => bytes.push(b' '),
            _ => {
                bytes.push(b' ');
                let word = id
                    .checked_sub(FIRST_WORD_ID)
                    .and_then(|i| WORDS.get(i as usize))
                    .copied()
                    .unwrap_or("<unk>");
                bytes.extend_from_slice(word.as_bytes());
            }
        }
    }
    let text = String::from_utf8_lossy(&bytes);
    text.strip_prefix(' ').unwrap_or(&text).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashSet;

    #[test]
    fn vocabulary_words_are_unique_lowercase_and_single() {
        let mut seen = HashSet::new();
        for w in WORDS {
            assert!(seen.insert(*w), "duplicate vocabulary word {w:?}");
            assert!(w.chars().all(|c| c.is_ascii_lowercase()), "{w:?}");
        }
        assert!(WORDS.len() >= 300);
    }

    #[test]
    fn vocabulary_word_is_one_token() {
        assert_eq!(tokenize("the"), vec![FIRST_WORD_ID]);
        assert_eq!(
            tokenize("the secret"),
            vec![FIRST_WORD_ID, word_id("secret").unwrap()]
        );
    }

    #[test]
    fn unknown_word_is_marker_then_bytes() {
        assert_eq!(tokenize("Ab."), vec![MARKER, 65, 98, 46]);
    }

    #[test]
    fn round_trip_restores_single_spaced_text() {
        let text = "The secret animal is cat. nonce-1f3a what is the secret animal? über 日本";
        assert_eq!(detokenize(&tokenize(text)), text);
    }

    #[test]
    fn whitespace_runs_collapse() {
        assert_eq!(detokenize(&tokenize("  a \n\t b  ")), "a b");
    }

    #[test]
    fn specials_vanish_and_unknown_ids_never_panic() {
        assert_eq!(detokenize(&[BOS, FIRST_WORD_ID, EOS]), "the");
        assert_eq!(
            detokenize(&[FIRST_WORD_ID, vocab_size(), 65_535]),
            "the <unk> <unk>"
        );
        assert_eq!(detokenize(&[MARKER, 0xff]), "\u{fffd}");
        assert_eq!(detokenize(&[]), "");
    }
}
