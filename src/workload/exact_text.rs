//! Text prompts brought to an exact token count with the server's own tokenizer, for APIs
//! that take text only but count it exactly (TGI's `/tokenize`): size the text by a
//! calibration made with the tokenizer, then pad with a one-token word and verify.

use super::prompt::{self, Built, NEEDLE_QUESTION, Needle, NonceSource, TextCalibration};
use crate::backend::{Backend, Prompt};

/// Word counts of the two calibration texts.
const CALIBRATION_WORDS: (usize, usize) = (64, 768);
/// Words tried as padding: each must add exactly one token where it is appended.
const PAD_CANDIDATES: [&str; 4] = ["the", "and", "of", "a"];
const PAD_PROBE: usize = 8;
/// Rounds of count-and-adjust before settling for the closest count.
const ROUNDS: usize = 4;
/// The text is aimed this far under the target, so padding (never cutting) finishes it.
const UNDERSHOOT: f64 = 0.01;
const UNDERSHOOT_MIN_TOKENS: u64 = 8;

pub struct ExactText {
    cal: TextCalibration,
    /// A word that adds one token when appended (with its leading space).
    pad: String,
}

async fn count(backend: &dyn Backend, text: &str) -> anyhow::Result<u64> {
    let ids = backend
        .tokenize(text)
        .await?
        .ok_or_else(|| anyhow::anyhow!("the server's tokenize endpoint disappeared"))?;
    Ok(ids.len() as u64)
}

fn text(p: Prompt) -> String {
    match p {
        Prompt::Text(t) => t,
        Prompt::Ids(_) | Prompt::Shared(_) => unreachable!("build_text makes text"),
    }
}

/// `text` with `n` pad words before the needle question (or at the end).
fn padded(text: &str, pad: &str, n: u64) -> String {
    let pads = pad.repeat(n as usize);
    match text.strip_suffix(NEEDLE_QUESTION) {
        Some(body) => format!("{body}{pads}{NEEDLE_QUESTION}"),
        None => format!("{text}{pads}"),
    }
}

impl ExactText {
    /// `None` when the server has no tokenizer or no word pads by one token.
    pub async fn prepare(backend: &dyn Backend, with_needle: bool) -> anyhow::Result<Option<Self>> {
        let mut nonce = NonceSource::from_entropy();
        let needle = with_needle.then(|| Needle {
            depth: 0.5,
            expected: "okapi".into(),
        });
        let mut counts = Vec::new();
        for words in [CALIBRATION_WORDS.0, CALIBRATION_WORDS.1] {
            let t = text(prompt::build_text(words, Some(&mut nonce), needle.as_ref()));
            match backend.tokenize(&t).await? {
                Some(ids) => counts.push((words, ids.len() as u64)),
                None => return Ok(None),
            }
        }
        let Some(cal) = TextCalibration::from_two(counts[0], counts[1]) else {
            return Ok(None);
        };
        let base = text(prompt::build_text(
            CALIBRATION_WORDS.0,
            Some(&mut nonce),
            needle.as_ref(),
        ));
        let n0 = count(backend, &base).await?;
        for word in PAD_CANDIDATES {
            let pad = format!(" {word}");
            let n = count(backend, &padded(&base, &pad, PAD_PROBE as u64)).await?;
            if n == n0 + PAD_PROBE as u64 {
                return Ok(Some(ExactText { cal, pad }));
            }
        }
        Ok(None)
    }

    /// Body units (filler words or content pieces) to start from for `tokens`: aimed under
    /// the target, so that padding, never cutting, usually finishes it.
    pub fn units_for(&self, tokens: u64) -> usize {
        let under = ((tokens as f64 * UNDERSHOOT).ceil() as u64).max(UNDERSHOOT_MIN_TOKENS);
        self.cal.words_for(tokens.saturating_sub(under).max(1))
    }

    /// A prompt of exactly `tokens` tokens as the server counts them (or the closest found,
    /// with its count: `sent_tokens` is always the server's count of what is sent).
    /// `compose(k)` is the whole prompt text with `k` body units, the nonce and needle fixed;
    /// it starts at `units_for(tokens)` units and only ever gets fewer.
    pub async fn build(
        &self,
        backend: &dyn Backend,
        tokens: u64,
        compose: &(dyn Fn(usize) -> String + Send + Sync),
    ) -> anyhow::Result<Built> {
        let mut units = self.units_for(tokens);
        let mut base = compose(units);
        let mut pads = 0u64;
        let mut current = base.clone();
        let mut n = count(backend, &current).await?;
        for _ in 0..ROUNDS {
            if n == tokens {
                break;
            }
            if n < tokens {
                pads += tokens - n;
            } else if pads >= n - tokens {
                pads -= n - tokens;
            } else {
                // Too long even without padding: drop units from the end of the body.
                let over = n - tokens - pads;
                let fewer = (over as f64 / self.cal.tokens_per_word).ceil() as usize + 1;
                units = units.saturating_sub(fewer).max(1);
                base = compose(units);
                pads = 0;
            }
            current = padded(&base, &self.pad, pads);
            n = count(backend, &current).await?;
        }
        Ok(Built {
            prompt: Prompt::Text(current),
            sent_tokens: Some(n),
            source: None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn padding_goes_before_the_question() {
        let q = format!("a b{NEEDLE_QUESTION}");
        assert_eq!(
            padded(&q, " the", 2),
            format!("a b the the{NEEDLE_QUESTION}")
        );
        assert_eq!(padded("a b", " the", 1), "a b the");
    }
}
