//! Production request traces as a workload with times: the format, selection, block
//! contents, the hits each request could get, prefix groups, hit analysis of a replay, and
//! `trace synth`. Replaying one is `load`'s (a trace is one of its arrival plans); nothing
//! here imports from `load/`.

pub mod agent;
pub mod blocks;
pub mod expect;
pub mod format;
pub mod groups;
pub mod hits;
pub mod select;
pub mod spec_line;
pub mod synth;
pub mod synth_cmd;
