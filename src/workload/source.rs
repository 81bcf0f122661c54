//! Where a sweep's prompts come from: token ids from the server's tokenizer when the API
//! takes them, else text calibrated against the server's own prompt counts.

use super::body::Body;
use super::content::{Content, ContentKind};
use super::prompt::{
    self, Built, FILLER, IdVocabulary, NEEDLE_QUESTION, Needle, NeedleIds, NonceSource, PromptMode,
    TextCalibration,
};
use crate::backend::{Backend, GenRequest, Prompt};
use std::collections::HashMap;
use std::time::Duration;

/// Word counts of the two calibration prompts.
const CALIBRATION_WORDS: (usize, usize) = (64, 768);
const CALIBRATION_DEADLINE: Duration = Duration::from_secs(300);

/// How prompts reach their exact length.
enum Mode {
    Ids {
        vocab: IdVocabulary,
        origin: IdOrigin,
        /// Tokenized needle sentences, by expected answer.
        /// Tokenized needle texts (preambles, facts, questions), by text.
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

/// Where the ids of a token-id prompt came from.
enum IdOrigin {
    /// The server's tokenizer, on the filler text.
    Tokenizer,
    /// The filler's words tokenized one at a time (the whole text failed).
    ByWord,
    /// Ordinary ids picked from the vocabulary (its tokenizer encodes no text), with the
    /// label that names them.
    Vocabulary(String),
}

/// Where a run's prompts come from: a length mode and, besides filler, the user's content.
pub struct PromptSource {
    mode: Mode,
    body: Option<Body>,
}

/// Margin kept below the server's ceiling in text mode: the linear calibration is good to a
/// few tenths of a percent, and a prompt over the limit is refused outright.
const CEILING_MARGIN: f64 = 0.005;

impl PromptSource {
    /// Filler prompts for `backend` (see `prepare_with`).
    pub async fn prepare(
        backend: &dyn Backend,
        with_needle: bool,
        ceiling: Option<u64>,
        nonce: &mut NonceSource,
    ) -> anyhow::Result<Self> {
        Self::prepare_with(backend, with_needle, ceiling, nonce, None).await
    }

    /// Choose and prepare the prompt mode for `backend`, with bodies from `content` (filler
    /// when `None` or filler). `nonce` is the run's own source: calibration prompts reach the
    /// prefix cache too, so their leading pairs must not repeat in the samples that follow.
    pub async fn prepare_with(
        backend: &dyn Backend,
        with_needle: bool,
        ceiling: Option<u64>,
        nonce: &mut NonceSource,
        content: Option<&Content>,
    ) -> anyhow::Result<Self> {
        let content = content.filter(|c| c.kind != ContentKind::Filler);
        let want = Want {
            backend,
            with_needle,
            ceiling,
            content,
        };
        let mode = Mode::prepare(want, nonce).await?;
        let body = match content {
            None => None,
            Some(c) => Some(Body::prepare(backend, c, matches!(mode, Mode::Ids { .. })).await?),
        };
        Ok(PromptSource { mode, body })
    }

    /// Refuse up front a content too small for a prompt of `tokens` (the run's longest).
    pub async fn check_room(&mut self, backend: &dyn Backend, tokens: u64) -> anyhow::Result<()> {
        let Some(body) = &mut self.body else {
            return Ok(());
        };
        let pieces = match &self.mode {
            Mode::Text { cal, .. } => cal.words_for(tokens),
            Mode::Exact(exact) => exact.units_to_take(tokens),
            Mode::Ids { .. } => 0,
        };
        body.check_room(backend, tokens as usize, pieces).await
    }

    /// Whether bodies come from the user's content (else filler).
    pub fn has_content(&self) -> bool {
        self.body.is_some()
    }

    /// The token-id vocabulary, when prompts are ids.
    pub fn id_vocabulary(&self) -> Option<&IdVocabulary> {
        match &self.mode {
            Mode::Ids { vocab, .. } => Some(vocab),
            _ => None,
        }
    }

    /// One line naming what the prompts are made of.
    pub fn content_label(&self) -> String {
        match (&self.body, &self.mode) {
            (Some(b), _) => b.label.clone(),
            (
                None,
                Mode::Ids {
                    origin: IdOrigin::Vocabulary(label),
                    ..
                },
            ) => label.clone(),
            (None, _) => FILLER_LABEL.to_string(),
        }
    }
}

/// How the header names filler content.
pub const FILLER_LABEL: &str = "filler (one paragraph repeated)";

/// What a prompt mode is chosen for: the server, whether prompts hide a needle, the longest
/// prompt the server takes, and the user's content (`None`: filler).
#[derive(Clone, Copy)]
struct Want<'a> {
    backend: &'a dyn Backend,
    with_needle: bool,
    ceiling: Option<u64>,
    content: Option<&'a Content>,
}

impl Mode {
    async fn prepare(want: Want<'_>, nonce: &mut NonceSource) -> anyhow::Result<Self> {
        let Want {
            backend,
            with_needle,
            content,
            ..
        } = want;
        let mut no_ids = None;
        if backend.takes_token_ids() {
            match ids_mode(backend, with_needle, content).await? {
                Ok(mode) => return Ok(mode),
                Err(why) => no_ids = why,
            }
        }
        Self::prepare_text(want, nonce)
            .await
            .map_err(|e| match no_ids {
                Some(why) => {
                    anyhow::anyhow!("{e:#}; and no prompt of ids could be built instead: {why}")
                }
                None if !backend.takes_token_ids() => anyhow::anyhow!(
                    "{e:#}; the {} API here has no token-id route, so there is no prompt \
                     without text to fall back on",
                    backend.api()
                ),
                None => e,
            })
    }

    /// Text prompts: cut with the server's tokenizer where it counts exactly, else sized by
    /// a calibration against its own prompt counts.
    async fn prepare_text(want: Want<'_>, nonce: &mut NonceSource) -> anyhow::Result<Self> {
        let Want {
            backend,
            with_needle,
            ceiling,
            content,
        } = want;
        if backend.exact_text_lengths()
            && let Some(exact) = super::exact_text::ExactText::prepare(backend, with_needle).await?
        {
            return Ok(Mode::Exact(exact));
        }
        let cal = match content {
            None => {
                calibrate(backend, with_needle, nonce, &|w, n, needle| {
                    prompt::build_text(w, Some(n), needle)
                })
                .await?
            }
            // Text sized by the content's own pieces, not the filler's words; then, since
            // real text is denser in some places than others (code, names, numbers), each
            // prompt counted by a probe and corrected.
            Some(c) => {
                let sample = super::body::calibration_pieces(c)?;
                let cal = calibrate(backend, with_needle, nonce, &|w, n, needle| {
                    Prompt::Text(prompt::text_from_pieces(
                        &prompt::text_head(Some(n)),
                        &sample[..w],
                        needle,
                    ))
                })
                .await?;
                match super::exact_text::ExactText::probing(backend, cal, with_needle).await? {
                    Some(exact) => return Ok(Mode::Exact(exact)),
                    None => cal,
                }
            }
        };
        Ok(Mode::Text { cal, ceiling })
    }
}

impl PromptSource {
    pub fn mode(&self) -> PromptMode {
        match &self.mode {
            Mode::Ids { origin, .. } => match origin {
                IdOrigin::Tokenizer => PromptMode::TokenIds,
                IdOrigin::ByWord => PromptMode::TokenIdsByWord,
                IdOrigin::Vocabulary(_) => PromptMode::VocabularyIds,
            },
            Mode::Text { .. } => PromptMode::CalibratedText,
            Mode::Exact(e) if e.probes() => PromptMode::ProbedText,
            Mode::Exact(_) => PromptMode::TokenizedText,
        }
    }

    pub async fn build(
        &mut self,
        backend: &dyn Backend,
        tokens: u64,
        nonce: Option<&mut NonceSource>,
        needle: Option<&Needle>,
    ) -> anyhow::Result<Built> {
        match &mut self.mode {
            Mode::Ids { vocab, needles, .. } => {
                let ids = match needle {
                    Some(n) => Some(needle_ids(backend, needles, n).await?),
                    None => None,
                };
                let fact = ids.as_ref();
                let (prompt, source) = match &mut self.body {
                    None => (prompt::build_ids(vocab, tokens, nonce, fact), None),
                    Some(body) => {
                        let parts = prompt::IdParts::new(vocab, tokens, nonce, fact);
                        let (ids, source) = body.take_tokens(backend, parts.body_len).await?;
                        (parts.assemble(ids), Some(source))
                    }
                };
                let sent = match &prompt {
                    Prompt::Ids(ids) => Some(ids.len() as u64),
                    Prompt::Text(_) => None,
                    Prompt::Shared(p) => p.tokens(),
                };
                Ok(Built {
                    prompt,
                    sent_tokens: sent,
                    source,
                })
            }
            Mode::Text { cal, ceiling } => {
                // The needle's structure takes tokens the filler words would: fewer words.
                let structure = match needle {
                    Some(n) => structure_tokens(backend, n, cal).await,
                    None => 0,
                };
                let target = text_target(tokens, *ceiling).saturating_sub(structure);
                let words = cal.words_for(target.max(1));
                Ok(match &mut self.body {
                    None => Built {
                        prompt: prompt::build_text(words, nonce, needle),
                        sent_tokens: None,
                        source: None,
                    },
                    Some(body) => {
                        let (pieces, source) = body.take_pieces(words)?;
                        let head = prompt::text_head(nonce);
                        Built {
                            prompt: Prompt::Text(prompt::text_from_pieces(&head, &pieces, needle)),
                            sent_tokens: None,
                            source: Some(source),
                        }
                    }
                })
            }
            Mode::Exact(exact) => {
                let head = prompt::text_head(nonce);
                let tail = needle.map_or("", |n| n.question.as_str());
                match &mut self.body {
                    None => {
                        let compose = |k| prompt::filler_text(&head, k, needle);
                        let units = exact.units_for(tokens);
                        exact
                            .build(backend, tokens, &head, tail, units, &compose)
                            .await
                    }
                    Some(body) => {
                        let (pieces, source) = body.take_pieces(exact.units_to_take(tokens))?;
                        let compose =
                            |k: usize| prompt::text_from_pieces(&head, &pieces[..k], needle);
                        let mut built = exact
                            .build(backend, tokens, &head, tail, pieces.len(), &compose)
                            .await?;
                        built.source = Some(source);
                        Ok(built)
                    }
                }
            }
        }
    }
}

/// A needle's parts as ids from the server's tokenizer, each text tokenized once a run.
async fn needle_ids(
    backend: &dyn Backend,
    cache: &mut HashMap<String, Vec<u32>>,
    n: &Needle,
) -> anyhow::Result<NeedleIds> {
    let mut texts: Vec<&str> = vec![&n.preamble, &n.question];
    texts.extend(n.facts.iter().map(|f| f.text.as_str()));
    for t in texts {
        if !t.is_empty() && !cache.contains_key(t) {
            let ids = backend
                .tokenize(t)
                .await?
                .ok_or_else(|| anyhow::anyhow!("the server's tokenize endpoint disappeared"))?;
            cache.insert(t.to_string(), ids);
        }
    }
    let ids = |t: &str| cache.get(t).cloned().unwrap_or_default();
    Ok(NeedleIds {
        preamble: ids(&n.preamble),
        facts: n.facts.iter().map(|f| (f.depth, ids(&f.text))).collect(),
        question: ids(&n.question),
    })
}

/// Tokens a calibrated text spends on a needle's structure (preamble, facts, question):
/// counted by the server's tokenizer where it has one (no prefill), else estimated from the
/// calibration's tokens per word, a digit a token. The "secret animal" probe the
/// calibration itself carried is already counted.
async fn structure_tokens(backend: &dyn Backend, n: &Needle, cal: &TextCalibration) -> u64 {
    if n.graded.is_none() {
        return 0;
    }
    let probe = Needle::secret(0.5, CALIBRATION_ANSWER);
    let mine = count_structure(backend, n, cal).await;
    mine.saturating_sub(count_structure(backend, &probe, cal).await)
}

async fn count_structure(backend: &dyn Backend, n: &Needle, cal: &TextCalibration) -> u64 {
    let text: String = [n.preamble.as_str(), n.question.as_str()]
        .into_iter()
        .chain(n.facts.iter().map(|f| f.text.as_str()))
        .collect::<Vec<_>>()
        .join(" ");
    if let Ok(Some(ids)) = backend.tokenize(&text).await {
        return ids.len() as u64;
    }
    let digits = text.bytes().filter(u8::is_ascii_digit).count() as f64;
    let words = text
        .split_whitespace()
        .filter(|w| {
            !w.bytes()
                .all(|b| b.is_ascii_digit() || b.is_ascii_punctuation())
        })
        .count() as f64;
    (digits + words * cal.tokens_per_word).round() as u64
}

/// The answer of the needle the text calibration carries.
const CALIBRATION_ANSWER: &str = "okapi";

/// Token-id prompts for an API that takes them: the filler's ids from the server's
/// tokenizer, else from its words one at a time, else ordinary ids from its vocabulary.
/// `Ok(Err(why))` when none of these gives ids (`why` says, where there is more to say than
/// that the server has no tokenizer); `Err` when the run cannot go on at all.
async fn ids_mode(
    backend: &dyn Backend,
    with_needle: bool,
    content: Option<&Content>,
) -> anyhow::Result<Result<Mode, Option<String>>> {
    let (filler, origin) = match backend.tokenize(FILLER).await {
        Ok(f) => (f, IdOrigin::Tokenizer),
        Err(e) => match ids_word_by_word(backend).await {
            Some(ids) => {
                eprintln!(
                    "note: the server's tokenizer failed on the filler text ({e}); using the \
                     ids of the filler words it tokenized one at a time (ordinary ids its own \
                     tokenizer produced): lengths stay exact"
                );
                (Some(ids), IdOrigin::ByWord)
            }
            None => return from_vocabulary(backend, with_needle, content, &e).await,
        },
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
        let probe = Needle::secret(0.5, CALIBRATION_ANSWER);
        if let Err(e) = backend.tokenize(&probe.facts[0].text).await {
            anyhow::bail!(
                "--needle: needles are text the server must tokenize, and its tokenizer \
                 failed on a needle sentence ({e}); run without --needle to measure \
                 speed with ordinary ids"
            );
        }
    }
    Ok(match (filler, question) {
        (Some(f), Some(q)) => match IdVocabulary::new(f, q) {
            Some(vocab) => Ok(Mode::Ids {
                vocab,
                origin,
                needles: HashMap::new(),
            }),
            None => Err(None),
        },
        _ => Err(None),
    })
}

/// Ids picked from the vocabulary, for a tokenizer that encoded no word of the filler
/// (`failed` is its error). Needles and the user's content are text: refused here, with why.
async fn from_vocabulary(
    backend: &dyn Backend,
    with_needle: bool,
    content: Option<&Content>,
    failed: &crate::backend::RequestError,
) -> anyhow::Result<Result<Mode, Option<String>>> {
    if with_needle {
        anyhow::bail!(
            "--needle: needles are text the server must tokenize, and its tokenizer encodes \
             none of the filler ({failed}); run without --needle to measure speed with ids \
             from its vocabulary"
        );
    }
    if content.is_some() {
        anyhow::bail!(
            "--corpus/--dataset: the content is text the server must tokenize, and its \
             tokenizer encodes none of the filler ({failed}); run without it to measure speed \
             with ids from its vocabulary"
        );
    }
    match super::vocab_ids::prepare(backend).await {
        Ok(v) => {
            eprintln!(
                "note: the server's tokenizer encodes none of the filler ({failed}); prompts \
                 are ordinary ids from its vocabulary instead: lengths stay exact"
            );
            Ok(Ok(Mode::Ids {
                origin: IdOrigin::Vocabulary(v.label()),
                vocab: v.vocab,
                needles: HashMap::new(),
            }))
        }
        Err(why) => {
            let why =
                format!("the server's tokenizer encodes none of the filler ({failed}) and {why:#}");
            eprintln!("note: {why}: trying text prompts sized by calibration");
            Ok(Err(Some(why)))
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
    make: &(dyn Fn(usize, &mut NonceSource, Option<&Needle>) -> Prompt + Send + Sync),
) -> anyhow::Result<TextCalibration> {
    let needle = with_needle.then(|| Needle::secret(0.5, CALIBRATION_ANSWER));
    let mut counts = Vec::new();
    for words in [CALIBRATION_WORDS.0, CALIBRATION_WORDS.1] {
        let req = GenRequest {
            prompt: make(words, nonce, needle.as_ref()),
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
