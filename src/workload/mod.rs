//! What a run sends: the lengths it plans and the prompts it builds for them (nonce first,
//! exact length, filler or the user's content, needles). Sweep, load and depth all draw
//! their prompts from here; nothing here knows which mode asks.

pub mod args;
pub mod body;
pub mod content;
pub mod exact_text;
pub mod nonce;
pub mod points;
pub mod probe_count;
pub mod prompt;
pub mod source;
pub mod stream;
pub mod vocab_ids;

pub use prompt::{
    Built, FILLER, Fact, Graded, IdVocabulary, NEEDLE_QUESTION, NONCE_TOKENS, Needle, NeedleIds,
    NonceSource, PromptMode, TextCalibration, first_symbol, needle_for,
};
pub use source::PromptSource;

use content::{Content, ContentSpec, DatasetFormat};
use std::path::Path;

/// The content `--corpus` or `--dataset` names, read before anything is sent; `None` for
/// filler.
pub fn load_content(
    corpus: Option<&str>,
    dataset: Option<&Path>,
    format: Option<DatasetFormat>,
) -> anyhow::Result<Option<Content>> {
    let spec = match (corpus, dataset) {
        (Some(c), _) => {
            ContentSpec::from_corpus_arg(c).map_err(|e| anyhow::anyhow!("--corpus: {e}"))?
        }
        (None, Some(d)) => ContentSpec::Dataset {
            path: d.to_path_buf(),
            format,
        },
        (None, None) => return Ok(None),
    };
    let flag = if corpus.is_some() {
        "--corpus"
    } else {
        "--dataset"
    };
    let content = content::load(&spec).map_err(|e| anyhow::anyhow!("{flag}: {e}"))?;
    if !content.skipped.is_empty() {
        eprintln!(
            "note: {flag}: skipped {} file(s) that are not UTF-8 text: {}",
            content.skipped.len(),
            content.skipped.join(", ")
        );
    }
    Ok(Some(content))
}
