//! Replaying production request traces (`load --trace`): arrival times and prefix sharing as
//! recorded, and a check that the server's cache hit what the trace says it could.

pub mod blocks;
pub mod expect;
pub mod format;
pub mod hits;
pub mod render;
pub mod replay;
pub mod select;
