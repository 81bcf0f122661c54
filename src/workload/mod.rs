//! What a run sends: the lengths it plans and the prompts it builds for them (nonce first,
//! exact length, filler or the user's content, needles). Sweep, load and depth all draw
//! their prompts from here; nothing here knows which mode asks.

pub mod content;
pub mod exact_text;
pub mod points;
pub mod prompt;
pub mod source;

pub use prompt::{
    Built, FILLER, IdVocabulary, NEEDLE_QUESTION, NONCE_TOKENS, Needle, NonceSource, PromptMode,
    TextCalibration, first_symbol, needle_for,
};
pub use source::PromptSource;
