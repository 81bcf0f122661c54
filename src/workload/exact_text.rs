//! Text prompts brought to an exact token count with the server's own counts, for APIs
//! that take text only: size the text by a calibration, count it — with the server's
//! tokenizer where it has one (TGI's `/tokenize`), else with the `usage.prompt_tokens` of a
//! one-token probe request (a chat-only route, whose template adds tokens the client never
//! sent) — then pad with a one-token word.

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
/// With probes, a body may grow by up to 1/this of its calibrated units (text sparser than
/// the calibration's by up to 25 %) before padding takes over.
const GROWTH_ROOM_DIVISOR: usize = 4;

pub struct ExactText {
    cal: TextCalibration,
    /// A word that adds one token when appended (with its leading space).
    pad: String,
    counter: Counter,
}

/// How a text's tokens are counted.
enum Counter {
    /// The server's tokenize endpoint: each count is exact and costs no prefill, so every
    /// adjustment is verified.
    Tokenizer,
    /// A probe (see `probe_count`): each count costs a prefill, so the pad words that finish
    /// a prompt are added by arithmetic (each was checked to add one token), not re-counted.
    Probe(Box<NonceSource>),
}

impl Counter {
    /// Tokens of `text`, whose first `head.len()` bytes are the sample's nonce head.
    async fn count(
        &mut self,
        backend: &dyn Backend,
        text: &str,
        head: &str,
    ) -> anyhow::Result<u64> {
        match self {
            Counter::Tokenizer => count(backend, text).await,
            Counter::Probe(nonce) => super::probe_count::count(backend, text, head, nonce).await,
        }
    }
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

/// `text` with `n` pad words before its question `tail` (or at the end).
fn padded(text: &str, pad: &str, n: u64, tail: &str) -> String {
    let pads = pad.repeat(n as usize);
    match text.strip_suffix(tail).filter(|_| !tail.is_empty()) {
        Some(body) => format!("{body}{pads}{tail}"),
        None => format!("{text}{pads}"),
    }
}

impl ExactText {
    /// `None` when the server has no tokenizer or no word pads by one token.
    pub async fn prepare(backend: &dyn Backend, with_needle: bool) -> anyhow::Result<Option<Self>> {
        let mut nonce = NonceSource::from_entropy();
        let needle = with_needle.then(|| Needle::secret(0.5, "okapi"));
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
            let tail = if with_needle { NEEDLE_QUESTION } else { "" };
            let n = count(backend, &padded(&base, &pad, PAD_PROBE as u64, tail)).await?;
            if n == n0 + PAD_PROBE as u64 {
                return Ok(Some(ExactText {
                    cal,
                    pad,
                    counter: Counter::Tokenizer,
                }));
            }
        }
        Ok(None)
    }

    /// For a route with no tokenizer: counts from probe requests, starting from `cal` (the
    /// content's own calibration); `None` when no word pads by one token.
    pub async fn probing(
        backend: &dyn Backend,
        cal: TextCalibration,
        with_needle: bool,
    ) -> anyhow::Result<Option<Self>> {
        let mut counter = Counter::Probe(Box::new(NonceSource::from_entropy()));
        let mut nonce = NonceSource::from_entropy();
        let needle = with_needle.then(|| Needle::secret(0.5, "okapi"));
        let head = prompt::text_head(Some(&mut nonce));
        let base = prompt::filler_text(&head, CALIBRATION_WORDS.0, needle.as_ref());
        let n0 = counter.count(backend, &base, &head).await?;
        for word in PAD_CANDIDATES {
            let pad = format!(" {word}");
            let tail = if with_needle { NEEDLE_QUESTION } else { "" };
            let text = padded(&base, &pad, PAD_PROBE as u64, tail);
            if counter.count(backend, &text, &head).await? == n0 + PAD_PROBE as u64 {
                return Ok(Some(ExactText { cal, pad, counter }));
            }
        }
        Ok(None)
    }

    /// Whether counts come from probes (each a prefill; lengths then carry no exact
    /// `sent_tokens`, the measured request's own nonce may tokenize a little differently).
    pub fn probes(&self) -> bool {
        matches!(self.counter, Counter::Probe(_))
    }

    /// Units to take from a body for `tokens`: with probes, room to grow into where the
    /// content is sparser than the calibration said (else the gap would be padding).
    pub fn units_to_take(&self, tokens: u64) -> usize {
        let units = self.units_for(tokens);
        match self.counter {
            Counter::Tokenizer => units,
            Counter::Probe(_) => units + units / GROWTH_ROOM_DIVISOR + 1,
        }
    }

    /// Body units (filler words or content pieces) to start from for `tokens`: aimed under
    /// the target, so that padding, never cutting, usually finishes it.
    pub fn units_for(&self, tokens: u64) -> usize {
        self.cal
            .words_for(tokens.saturating_sub(undershoot(tokens)).max(1))
    }

    /// A prompt of exactly `tokens` tokens as the server counts them (or the closest found,
    /// with its count: `sent_tokens` is the tokenizer's count of what is sent; `None` with
    /// probes). `compose(k)` is the whole prompt text with `k` body units (at most
    /// `available`), starting with `head` (the nonce); the nonce and needle are fixed. With
    /// the tokenizer it starts at `units_for(tokens)` units and only ever gets fewer; with
    /// probes it may also grow, up to `available`. Pads go before `tail`, the question that
    /// ends the text (empty when none does).
    pub async fn build(
        &mut self,
        backend: &dyn Backend,
        tokens: u64,
        head: &str,
        tail: &str,
        available: usize,
        compose: &(dyn Fn(usize) -> String + Send + Sync),
    ) -> anyhow::Result<Built> {
        let mut units = self.units_for(tokens).min(available).max(1);
        let mut base = compose(units);
        let mut pads = 0u64;
        let mut current = base.clone();
        let mut n = self.counter.count(backend, &current, head).await?;
        let probes = self.probes();
        let under = undershoot(tokens);
        for _ in 0..ROUNDS {
            if n == tokens {
                break;
            }
            let rate = match probes {
                true => self.local_rate(n - pads.min(n), units),
                false => self.cal.tokens_per_word,
            };
            if probes {
                // Text that is denser or sparser here than where it was calibrated: what this
                // count says is the better guess for the next prompt too.
                self.cal.tokens_per_word = rate;
            }
            if n < tokens {
                let more = ((tokens - n).saturating_sub(under) as f64 / rate).floor() as usize;
                if probes && more > 0 && units < available {
                    units = (units + more).min(available);
                    base = compose(units);
                    pads = 0;
                } else {
                    pads += tokens - n;
                    if probes {
                        // Each pad word adds one token (checked when preparing): no recount.
                        current = padded(&base, &self.pad, pads, tail);
                        n = tokens;
                        break;
                    }
                }
            } else if pads >= n - tokens {
                pads -= n - tokens;
            } else {
                // Too long even without padding: drop units from the end of the body.
                let over = n - tokens - pads;
                let fewer = (over as f64 / rate).ceil() as usize + 1;
                units = units.saturating_sub(fewer).max(1);
                base = compose(units);
                pads = 0;
            }
            current = padded(&base, &self.pad, pads, tail);
            n = self.counter.count(backend, &current, head).await?;
        }
        if probes && n < tokens {
            // Out of rounds, short: the pad arithmetic finishes it without another probe.
            pads += tokens - n;
            current = padded(&base, &self.pad, pads, tail);
        }
        Ok(Built {
            prompt: Prompt::Text(current),
            sent_tokens: (!probes).then_some(n),
            source: None,
        })
    }

    /// Tokens per body unit in a text of `units` units counted `n` tokens without its pads.
    fn local_rate(&self, n: u64, units: usize) -> f64 {
        let r = (n as f64 - self.cal.overhead_tokens) / units.max(1) as f64;
        if r.is_finite() && r > 0.0 {
            r
        } else {
            self.cal.tokens_per_word
        }
    }
}

/// How far under the target a body is aimed, so padding (never cutting) finishes it.
fn undershoot(tokens: u64) -> u64 {
    ((tokens as f64 * UNDERSHOOT).ceil() as u64).max(UNDERSHOOT_MIN_TOKENS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn padding_goes_before_the_question() {
        let q = format!("a b{NEEDLE_QUESTION}");
        assert_eq!(
            padded(&q, " the", 2, NEEDLE_QUESTION),
            format!("a b the the{NEEDLE_QUESTION}")
        );
        assert_eq!(padded("a b", " the", 1, ""), "a b the");
        assert_eq!(padded("a b?", " the", 1, "?"), "a b the?");
    }
}
