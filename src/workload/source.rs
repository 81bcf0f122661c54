//! Where a sweep's prompts come from: token ids from the server's tokenizer when the API
//! takes them, else text calibrated against the server's own prompt counts.

use super::prompt::{
    self, Built, FILLER, IdVocabulary, NEEDLE_QUESTION, Needle, NonceSource, PromptMode,
    TextCalibration,
};
use crate::backend::{Backend, GenRequest, Prompt};
use std::collections::HashMap;
use std::time::Duration;

/// Word counts of the two calibration prompts.
const CALIBRATION_WORDS: (usize, usize) = (64, 768);
const CALIBRATION_DEADLINE: Duration = Duration::from_secs(300);

pub enum PromptSource {
    Ids {
        vocab: IdVocabulary,
        /// The ids came from tokenizing the filler word by word (the whole text failed).
        by_word: bool,
        /// Tokenized needle sentences, by expected answer.
        needles: HashMap<String, Vec<u32>>,
    },
    Text {
        cal: TextCalibration,
        /// Prompt tokens the server accepts (limit − output), when known.
        ceiling: Option<u64>,
    },
    /// Text cut to length with the server's tokenizer (APIs taking text only).
    Exact(super::exact_text::ExactText),
}

/// Margin kept below the server's ceiling in text mode: the linear calibration is good to a
/// few tenths of a percent, and a prompt over the limit is refused outright.
const CEILING_MARGIN: f64 = 0.005;

impl PromptSource {
    /// Choose and prepare the prompt mode for `backend`.
    /// `nonce` is the run's own source: calibration prompts reach the prefix cache too, so
    /// their leading pairs must not repeat in the samples that follow.
    pub async fn prepare(
        backend: &dyn Backend,
        with_needle: bool,
        ceiling: Option<u64>,
        nonce: &mut NonceSource,
    ) -> anyhow::Result<Self> {
        if backend.takes_token_ids() {
            let (filler, by_word) = match backend.tokenize(FILLER).await {
                Ok(f) => (f, false),
                Err(e) => {
                    let ids = ids_word_by_word(backend).await;
                    eprintln!(
                        "note: the server's tokenizer failed on the filler text ({e}); {}",
                        if ids.is_some() {
                            "using the ids of the filler words it tokenized one at a time \
                             (ordinary ids its own tokenizer produced): lengths stay exact"
                        } else {
                            "no word tokenized alone either: sizing text prompts by calibration"
                        }
                    );
                    (ids, true)
                }
            };
            let question = match backend.tokenize(NEEDLE_QUESTION).await {
                Ok(q) => q,
                Err(e) if with_needle => anyhow::bail!(
                    "--needle: needles are text the server must tokenize, and its tokenizer \
                     failed ({e}); run without --needle to measure speed with ordinary ids"
                ),
                Err(_) => Some(Vec::new()),
            };
            if with_needle {
                let probe = Needle {
                    depth: 0.5,
                    expected: "okapi".into(),
                };
                if let Err(e) = backend.tokenize(&probe.sentence()).await {
                    anyhow::bail!(
                        "--needle: needles are text the server must tokenize, and its tokenizer \
                         failed on a needle sentence ({e}); run without --needle to measure \
                         speed with ordinary ids"
                    );
                }
            }
            if let (Some(f), Some(q)) = (filler, question)
                && let Some(vocab) = IdVocabulary::new(f, q)
            {
                return Ok(PromptSource::Ids {
                    vocab,
                    by_word,
                    needles: HashMap::new(),
                });
            }
        }
        if backend.exact_text_lengths()
            && let Some(exact) = super::exact_text::ExactText::prepare(backend, with_needle).await?
        {
            return Ok(PromptSource::Exact(exact));
        }
        Ok(PromptSource::Text {
            cal: calibrate(backend, with_needle, nonce).await?,
            ceiling,
        })
    }

    pub fn mode(&self) -> PromptMode {
        match self {
            PromptSource::Ids { by_word: false, .. } => PromptMode::TokenIds,
            PromptSource::Ids { by_word: true, .. } => PromptMode::TokenIdsByWord,
            PromptSource::Text { .. } => PromptMode::CalibratedText,
            PromptSource::Exact(_) => PromptMode::TokenizedText,
        }
    }

    pub async fn build(
        &mut self,
        backend: &dyn Backend,
        tokens: u64,
        nonce: Option<&mut NonceSource>,
        needle: Option<&Needle>,
    ) -> anyhow::Result<Built> {
        match self {
            PromptSource::Ids { vocab, needles, .. } => {
                let fact = match needle {
                    Some(n) => {
                        if !needles.contains_key(&n.expected) {
                            let ids = backend.tokenize(&n.sentence()).await?.ok_or_else(|| {
                                anyhow::anyhow!("the server's tokenize endpoint disappeared")
                            })?;
                            needles.insert(n.expected.clone(), ids);
                        }
                        needles.get(&n.expected).map(|ids| (n, ids.as_slice()))
                    }
                    None => None,
                };
                let prompt = prompt::build_ids(vocab, tokens, nonce, fact);
                let sent = match &prompt {
                    Prompt::Ids(ids) => Some(ids.len() as u64),
                    Prompt::Text(_) => None,
                    Prompt::Shared(p) => p.tokens(),
                };
                Ok(Built {
                    prompt,
                    sent_tokens: sent,
                })
            }
            PromptSource::Text { cal, ceiling } => Ok(Built {
                prompt: prompt::build_text(
                    cal.words_for(text_target(tokens, *ceiling)),
                    nonce,
                    needle,
                ),
                sent_tokens: None,
            }),
            PromptSource::Exact(exact) => exact.build(backend, tokens, nonce, needle).await,
        }
    }
}

/// The filler's ids from its words tokenized one at a time, skipping words the tokenizer
/// fails on; `None` when too few distinct ids come back to build prompts from.
async fn ids_word_by_word(backend: &dyn Backend) -> Option<Vec<u32>> {
    let mut cache: HashMap<&str, Option<Vec<u32>>> = HashMap::new();
    let mut ids = Vec::new();
    for word in FILLER.split_whitespace() {
        if !cache.contains_key(word) {
            // A leading space, as the word sits inside the text.
            let got = backend.tokenize(&format!(" {word}")).await.ok().flatten();
            cache.insert(word, got);
        }
        if let Some(Some(w)) = cache.get(word) {
            ids.extend_from_slice(w);
        }
    }
    let mut distinct = ids.clone();
    distinct.sort_unstable();
    distinct.dedup();
    (distinct.len() >= MIN_DISTINCT_IDS).then_some(ids)
}

/// Distinct ids needed to draw nonces from (as `IdVocabulary::new` asks).
const MIN_DISTINCT_IDS: usize = 8;

/// Two 1-token requests of different sizes give tokens ≈ overhead + per_word · words.
async fn calibrate(
    backend: &dyn Backend,
    with_needle: bool,
    nonce: &mut NonceSource,
) -> anyhow::Result<TextCalibration> {
    let needle = with_needle.then(|| Needle {
        depth: 0.5,
        expected: "okapi".into(),
    });
    let mut counts = Vec::new();
    for words in [CALIBRATION_WORDS.0, CALIBRATION_WORDS.1] {
        let req = GenRequest {
            prompt: prompt::build_text(words, Some(nonce), needle.as_ref()),
            max_tokens: 1,
            ignore_eos: true,
            cache_prompt: false,
            deadline: CALIBRATION_DEADLINE,
        };
        let c = backend
            .generate(&req)
            .await
            .map_err(|e| anyhow::anyhow!("calibrating prompt length: {e}"))?;
        let n = c.prompt_tokens.ok_or_else(|| {
            anyhow::anyhow!(
                "calibrating prompt length: the server reports no prompt token count (usage) \
                 and has no tokenize endpoint, so prompt lengths cannot be made exact"
            )
        })?;
        counts.push((words, n));
    }
    TextCalibration::from_two(counts[0], counts[1]).ok_or_else(|| {
        anyhow::anyhow!(
            "calibrating prompt length: the server's counts {counts:?} do not grow with the text"
        )
    })
}

/// Tokens to aim at in text mode: the request, kept a margin under the server's ceiling.
fn text_target(tokens: u64, ceiling: Option<u64>) -> u64 {
    match ceiling {
        Some(c) => tokens.min(c - (c as f64 * CEILING_MARGIN).ceil() as u64),
        None => tokens,
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn text_targets_keep_under_the_ceiling() {
        assert_eq!(super::text_target(8176, Some(8176)), 8135);
        assert_eq!(super::text_target(4096, Some(8176)), 4096);
        assert_eq!(super::text_target(4096, None), 4096);
    }
}
