//! Effective context: RULER-style tasks generated from a seed, their answers scored, and
//! accuracy per length turned into the longest length a model keeps its accuracy to.
//! Generation and scoring are pure; the sweep and load modes send the items as ordinary
//! timed samples (see `docs/accuracy.md`).

pub mod args;
pub mod effective;
pub mod generate;
pub mod qa;
pub mod score;
pub mod tally;
pub mod task;
pub mod threshold;
pub mod wilson;
pub mod words;

pub use generate::{Item, generate};
pub use score::{answer_window, grade, score};
pub use task::{TaskKind, TaskSet};
pub use threshold::Threshold;
