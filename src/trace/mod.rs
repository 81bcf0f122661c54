//! Production request traces: replaying them (`load --trace`) with their arrival times and
//! prefix sharing as recorded, checking that the server's cache hit what the trace says it
//! could, and generating one (`trace synth`) for users without their own.

pub mod blocks;
pub mod expect;
pub mod format;
pub mod groups;
pub mod hits;
pub mod render;
pub mod replay;
pub mod select;
pub mod spec_line;
pub mod synth;
pub mod synth_cmd;
