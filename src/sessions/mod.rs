//! `ctxbench sessions`: many long conversations at once, each turn carrying the model's
//! real reply to the previous one, and the point where the prefix cache stops holding them.

pub mod args;
pub mod capacity;
pub mod cell;
pub mod chat;
pub mod conversation;
pub mod file;
pub mod hits;
pub mod html;
pub mod plan;
pub mod record;
pub mod render;
pub mod report;
mod run;
pub mod session;
pub mod summary;
pub mod texts;

pub use args::SessionsArgs;
pub use run::{SessionsOutcome, execute, run};
