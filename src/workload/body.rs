//! The user's content (a corpus or a dataset) as prompt bodies: token ids from the server's
//! own tokenizer when prompts are ids, text pieces otherwise; each body a span no other
//! prompt of the run got, with the span recorded.

use super::content::{Content, ContentKind, DOC_SEPARATOR};
use super::stream::{Shortfall, Spans, Taken, pieces};
use crate::backend::Backend;
use crate::record::SourceRecord;

/// Text handed to the tokenizer at once: long documents go in pieces of about this size.
const TOKENIZE_CHUNK_BYTES: usize = 32 * 1024;
/// Pieces the text calibration measures with (as the filler's two calibration prompts).
const CALIBRATION_PIECES: usize = 768;

pub struct Body {
    pub label: String,
    names: Vec<String>,
    texts: Vec<String>,
    units: Units,
    kind: ContentKind,
    wrap_noted: bool,
}

enum Units {
    Tokens(Spans<u32>),
    Pieces(Spans<String>),
}

impl Body {
    pub async fn prepare(
        backend: &dyn Backend,
        content: &Content,
        ids: bool,
    ) -> anyhow::Result<Self> {
        let names: Vec<String> = content.docs.iter().map(|d| d.name.clone()).collect();
        let texts: Vec<String> = content.docs.iter().map(|d| d.text.clone()).collect();
        let align = content.kind == ContentKind::Dataset;
        let units = match ids {
            true => {
                let sep = backend
                    .tokenize(DOC_SEPARATOR)
                    .await?
                    .ok_or_else(|| anyhow::anyhow!("the server's tokenize endpoint disappeared"))?;
                Units::Tokens(Spans::new(names.clone(), sep, align))
            }
            false => {
                let mut spans = Spans::new(names.clone(), pieces(DOC_SEPARATOR), align);
                for (i, t) in texts.iter().enumerate() {
                    spans.load(i, pieces(t));
                }
                Units::Pieces(spans)
            }
        };
        Ok(Body {
            label: content.label.clone(),
            names,
            texts,
            units,
            kind: content.kind,
            wrap_noted: false,
        })
    }

    /// Refuse up front a content with fewer units than one prompt needs (`tokens` ids; or
    /// `pieces` text pieces), tokenizing only as far as that takes.
    pub async fn check_room(
        &mut self,
        backend: &dyn Backend,
        tokens: usize,
        pieces: usize,
    ) -> anyhow::Result<()> {
        loop {
            let (have, next, need, unit) = match &self.units {
                Units::Tokens(s) => {
                    let (have, next) = s.loaded();
                    (have, next, tokens, "tokens")
                }
                Units::Pieces(s) => {
                    let (have, next) = s.loaded();
                    (have, next, pieces, "words")
                }
            };
            match next {
                _ if have >= need => return Ok(()),
                None => anyhow::bail!(too_small(&self.label, have, need, unit)),
                Some(i) => self.load_tokens(backend, i).await?,
            }
        }
    }

    async fn load_tokens(&mut self, backend: &dyn Backend, i: usize) -> anyhow::Result<()> {
        let ids = tokenize_long(backend, &self.texts[i]).await.map_err(|e| {
            anyhow::anyhow!("tokenizing {} of {}: {e:#}", self.names[i], self.label)
        })?;
        if let Units::Tokens(spans) = &mut self.units {
            spans.load(i, ids);
        }
        Ok(())
    }

    /// The next `n` token ids of the content, tokenizing documents as the cursor reaches them.
    pub async fn take_tokens(
        &mut self,
        backend: &dyn Backend,
        n: usize,
    ) -> anyhow::Result<(Vec<u32>, SourceRecord)> {
        loop {
            let Units::Tokens(spans) = &mut self.units else {
                anyhow::bail!("token ids asked of a text body");
            };
            match spans.take(n) {
                Ok(t) => return Ok(self.finish(t, "tokens")),
                Err(Shortfall::Unloaded(i)) => self.load_tokens(backend, i).await?,
                Err(Shortfall::TooSmall { have, need }) => {
                    anyhow::bail!(too_small(&self.label, have, need, "tokens"))
                }
            }
        }
    }

    /// The next `n` text pieces of the content.
    pub fn take_pieces(&mut self, n: usize) -> anyhow::Result<(Vec<String>, SourceRecord)> {
        let Units::Pieces(spans) = &mut self.units else {
            anyhow::bail!("text asked of a token-id body");
        };
        match spans.take(n) {
            Ok(t) => Ok(self.finish(t, "pieces")),
            Err(Shortfall::TooSmall { have, need }) => {
                anyhow::bail!(too_small(&self.label, have, need, "words"))
            }
            Err(Shortfall::Unloaded(_)) => anyhow::bail!("the content's pieces were not loaded"),
        }
    }

    fn finish<T>(&mut self, t: Taken<T>, unit: &str) -> (Vec<T>, SourceRecord) {
        if t.wrapped && !self.wrap_noted {
            self.wrap_noted = true;
            let what = match self.kind {
                ContentKind::Dataset => "entries",
                _ => "text",
            };
            eprintln!(
                "note: {} has run out of fresh {what} for this run; prompts now reuse it from \
                 the start (each still leads with its own nonce, so no prefix cache serves it)",
                self.label
            );
        }
        let source = SourceRecord {
            unit: unit.to_string(),
            spans: t.spans,
        };
        (t.units, source)
    }
}

/// The content's first pieces, to calibrate text lengths with (not a sample's body).
pub fn calibration_pieces(content: &Content) -> anyhow::Result<Vec<String>> {
    let mut got = Vec::with_capacity(CALIBRATION_PIECES);
    for d in &content.docs {
        got.extend(
            pieces(&d.text)
                .into_iter()
                .take(CALIBRATION_PIECES - got.len()),
        );
        if got.len() == CALIBRATION_PIECES {
            return Ok(got);
        }
    }
    anyhow::bail!(
        "{}: only {} words of text, too few to size prompts by (at least {CALIBRATION_PIECES})",
        content.label,
        got.len()
    )
}

fn too_small(label: &str, have: usize, need: usize, unit: &str) -> String {
    format!(
        "{label} holds {have} {unit} in all, fewer than one prompt of this run needs ({need}); \
         give more text or shorter --lengths"
    )
}

/// A document's ids, tokenized in chunks cut at whitespace so that no word is split. A chunk
/// the server's tokenizer fails on (llama-server answers `unordered_map::at` for text its
/// vocabulary cannot encode) is tokenized word by word, leaving out the words it fails on:
/// the ids are still the server's own for the text it could read, and the note says how
/// much was left out.
async fn tokenize_long(backend: &dyn Backend, text: &str) -> anyhow::Result<Vec<u32>> {
    let mut ids = Vec::new();
    let mut skipped = 0usize;
    let mut chunks = Vec::new();
    let mut chunk = String::new();
    for p in pieces(text) {
        if chunk.len() + p.len() > TOKENIZE_CHUNK_BYTES && !chunk.is_empty() {
            chunks.push(std::mem::take(&mut chunk));
        }
        chunk.push_str(&p);
    }
    if !chunk.is_empty() {
        chunks.push(chunk);
    }
    for chunk in chunks {
        match tokenize(backend, &chunk).await {
            Ok(got) => ids.extend(got),
            Err(first) => {
                let words = pieces(&chunk);
                let before = skipped;
                for w in &words {
                    match tokenize(backend, w).await {
                        Ok(got) => ids.extend(got),
                        Err(_) => skipped += 1,
                    }
                }
                if skipped - before == words.len() {
                    return Err(first);
                }
            }
        }
    }
    if skipped > 0 {
        eprintln!(
            "note: the server's tokenizer failed on {skipped} word(s) of this document; they \
             are left out of its ids (the rest are the server's own)"
        );
    }
    Ok(ids)
}

async fn tokenize(backend: &dyn Backend, text: &str) -> anyhow::Result<Vec<u32>> {
    backend
        .tokenize(text)
        .await?
        .ok_or_else(|| anyhow::anyhow!("the server's tokenize endpoint disappeared"))
}
