//! Prompts of ids alone, for a server whose tokenizer can encode no text at all (a
//! vocabulary without the pieces the filler needs and without byte fallback): ordinary ids
//! are picked from its vocabulary and checked one by one with its own detokenizer, so the
//! exact length and the nonce need no text.

use super::prompt::IdVocabulary;
use crate::backend::Backend;
use crate::backend::vocab::VocabInfo;

/// Ordinary ids wanted for the body; the nonce draws from the same ids.
pub const WANTED: usize = 64;
/// Candidates tried at most, one detokenize call each.
const MAX_CANDIDATES: usize = 256;
/// Fewest ordinary ids worth building prompts from (nonces need distinct ids).
const MIN_IDS: usize = 8;
/// Where candidates start when the server gives no vocabulary size: every vocabulary of a
/// real model has more ids than this, and the detokenizer refuses any it does not have.
const UNSIZED_FIRST: u32 = 1000;

/// Ids picked from the server's vocabulary, and how they were found.
#[derive(Debug, Clone)]
pub struct VocabIds {
    pub vocab: IdVocabulary,
    /// Distinct ids in the body.
    pub distinct: usize,
    pub size: Option<u32>,
    /// Whether each id was checked with the server's detokenizer.
    pub checked: bool,
}

impl VocabIds {
    /// How the run header and record name the content.
    pub fn label(&self) -> String {
        let size = self
            .size
            .map_or_else(|| "of unknown size".into(), |n| format!("of {n}"));
        let how = if self.checked {
            "each checked with the server's /detokenize"
        } else {
            "not checked: the server has no /detokenize"
        };
        format!(
            "vocabulary ids ({} ordinary ids from the vocabulary {size}, {how}; the server's \
             tokenizer encodes no text)",
            self.distinct
        )
    }
}

/// Candidate ids: `n` spread evenly over the middle three quarters of a vocabulary of `size`
/// ids, where no vocabulary we know keeps special or byte pieces (Llama 2 has them first,
/// Llama 3 and Qwen last); without a size, a run of ids from `UNSIZED_FIRST`.
pub fn candidates(size: Option<u32>, n: usize) -> Vec<u32> {
    let Some(size) = size else {
        return (UNSIZED_FIRST..).take(n).collect();
    };
    let (lo, hi) = (size / 8, size - size / 8);
    let span = (hi - lo) as usize;
    if span <= n {
        return (lo..hi).collect();
    }
    (0..n).map(|i| lo + (i * span / n) as u32).collect()
}

/// Whether `piece` (one id, detokenized) is ordinary content: some visible text, valid
/// UTF-8, no control characters, and not a special token's marker (`<s>`, `<|eot_id|>`,
/// `[CLS]`, or a piece the server names special).
pub fn ordinary(piece: &str, special: &[String]) -> bool {
    let p = piece.trim();
    !p.is_empty()
        && !piece.contains('\u{FFFD}')
        && !piece.chars().any(char::is_control)
        && !special.iter().any(|s| s.trim() == p)
        && !looks_like_marker(p)
}

fn looks_like_marker(p: &str) -> bool {
    let enclosed = |open, close| p.len() >= 3 && p.starts_with(open) && p.ends_with(close);
    enclosed('<', '>')
        || (enclosed('[', ']')
            && p[1..p.len() - 1]
                .chars()
                .all(|c| c.is_ascii_uppercase() || c == '_'))
}

/// Pick ordinary ids from the server's vocabulary. Fails, saying why, where the server
/// offers neither a vocabulary size nor a detokenizer, or too few ids pass.
pub async fn prepare(backend: &dyn Backend) -> anyhow::Result<VocabIds> {
    let VocabInfo { size, special } = backend.vocabulary().await;
    let mut picked = Vec::new();
    let mut checked = true;
    for id in candidates(size, MAX_CANDIDATES) {
        match backend.detokenize(&[id]).await {
            Ok(Some(piece)) if ordinary(&piece, &special) => picked.push(id),
            // Not ordinary, or an id the server refuses (beyond its vocabulary).
            Ok(Some(_)) | Err(_) => {}
            Ok(None) => {
                checked = false;
                break;
            }
        }
        if picked.len() >= WANTED {
            break;
        }
    }
    if !checked {
        if size.is_none() {
            anyhow::bail!(
                "the server reports neither its vocabulary size nor a /detokenize route, so no \
                 id can be known to be in its vocabulary"
            );
        }
        picked = candidates(size, WANTED);
    }
    let distinct = picked.len();
    if distinct < MIN_IDS {
        anyhow::bail!(
            "only {distinct} of the vocabulary's ids it detokenizes are ordinary text \
             (at least {MIN_IDS} are needed)"
        );
    }
    let vocab = IdVocabulary::new(picked, Vec::new())
        .ok_or_else(|| anyhow::anyhow!("fewer than {MIN_IDS} distinct ids"))?;
    Ok(VocabIds {
        vocab,
        distinct,
        size,
        checked,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn candidates_keep_off_both_ends_of_the_vocabulary() {
        let c = candidates(Some(128_256), 256);
        assert_eq!(c.len(), 256);
        assert!(c.iter().all(|&i| (16_032..112_224).contains(&i)), "{c:?}");
        let mut d = c.clone();
        d.dedup();
        assert_eq!(d.len(), 256, "distinct");
        // A small vocabulary gives every id of its middle.
        let c = candidates(Some(249), 256);
        assert_eq!((c[0], *c.last().unwrap(), c.len()), (31, 217, 187));
        assert_eq!(candidates(None, 3), vec![1000, 1001, 1002]);
    }

    #[test]
    fn special_and_empty_pieces_are_not_ordinary() {
        let special = vec!["<s>".to_string(), "</s>".to_string(), "<eos>".to_string()];
        for p in ["the", " of", "~", "andtoin", "é"] {
            assert!(ordinary(p, &special), "{p:?}");
        }
        for p in [
            "",
            " ",
            "<s>",
            "</s>",
            "<eos>",
            "<unk>",
            "<|eot_id|>",
            "[CLS]",
            "\n",
            "\u{FFFD}",
            "a\u{0}",
        ] {
            assert!(!ordinary(p, &special), "{p:?}");
        }
        // Brackets around ordinary text are text.
        assert!(ordinary("[x]", &special));
    }

    /// A server whose vocabulary is `pieces` (id = index), with or without a detokenizer.
    struct Vocab {
        pieces: Vec<&'static str>,
        size: Option<u32>,
        detokenizes: bool,
    }

    #[async_trait::async_trait]
    impl Backend for Vocab {
        fn api(&self) -> &'static str {
            "llamacpp"
        }
        fn takes_token_ids(&self) -> bool {
            true
        }
        async fn generate(
            &self,
            _: &crate::backend::GenRequest,
        ) -> Result<crate::backend::Completion, RequestError> {
            unreachable!("picking ids sends no prompt")
        }
        async fn flush(&self) -> Result<crate::backend::Flush, RequestError> {
            Ok(crate::backend::Flush::NotOffered)
        }
        async fn tokenize(&self, _: &str) -> Result<Option<Vec<u32>>, RequestError> {
            Err(RequestError::Http {
                status: 500,
                message: "unordered_map::at".into(),
            })
        }
        async fn vocabulary(&self) -> VocabInfo {
            VocabInfo {
                size: self.size,
                special: vec!["<s>".into(), "</s>".into()],
            }
        }
        async fn detokenize(&self, ids: &[u32]) -> Result<Option<String>, RequestError> {
            if !self.detokenizes {
                return Ok(None);
            }
            ids.iter()
                .map(|&i| self.pieces.get(i as usize).copied())
                .collect::<Option<String>>()
                .map(Some)
                .ok_or_else(|| RequestError::Http {
                    status: 500,
                    message: "vector::_M_range_check".into(),
                })
        }
    }

    use crate::backend::RequestError;

    /// 80 ids: specials, empty and control pieces at the ends and scattered in the middle.
    fn pieces() -> Vec<&'static str> {
        let words = [
            "the", "of", "and", "to", "in", "<s>", "", "\n", "</s>", "<|x|>",
        ];
        (0..80).map(|i| words[i % words.len()]).collect()
    }

    #[tokio::test]
    async fn only_ordinary_ids_the_server_has_are_picked() {
        let b = Vocab {
            pieces: pieces(),
            // Claims more ids than it has: the ones beyond are refused by its detokenizer.
            size: Some(120),
            detokenizes: true,
        };
        let v = prepare(&b).await.unwrap();
        assert!(v.checked);
        assert!(v.distinct >= MIN_IDS);
        for &id in &v.vocab.filler {
            assert!(
                id < 80 && id % 10 < 5,
                "id {id} is {:?}",
                pieces().get(id as usize)
            );
        }
        assert!(v.label().contains("each checked"), "{}", v.label());
    }

    #[tokio::test]
    async fn without_a_detokenizer_the_middle_of_a_known_size_is_used_unchecked() {
        let b = Vocab {
            pieces: pieces(),
            size: Some(32_000),
            detokenizes: false,
        };
        let v = prepare(&b).await.unwrap();
        assert!(!v.checked);
        assert_eq!(v.distinct, WANTED);
        assert!(v.vocab.filler.iter().all(|&i| (4000..28_000).contains(&i)));
        assert!(v.label().contains("not checked"), "{}", v.label());
    }

    #[tokio::test]
    async fn neither_size_nor_detokenizer_is_refused_with_why() {
        let b = Vocab {
            pieces: pieces(),
            size: None,
            detokenizes: false,
        };
        let e = format!("{:#}", prepare(&b).await.unwrap_err());
        assert!(
            e.contains("vocabulary size") && e.contains("/detokenize"),
            "{e}"
        );
        // A detokenizer alone vouches for ids from 1000 on: none exist in 80 pieces.
        let b = Vocab {
            detokenizes: true,
            ..b
        };
        let e = format!("{:#}", prepare(&b).await.unwrap_err());
        assert!(e.contains("only 0"), "{e}");
    }
}
