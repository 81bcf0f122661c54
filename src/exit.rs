//! Exit codes, distinct per outcome so scripts can tell a partial sweep from a failed one.

/// Every point has at least one valid sample (or a non-sweep command succeeded).
pub const OK: u8 = 0;
/// The run failed: bad input, unreachable server, an I/O error.
pub const FAILURE: u8 = 1;
/// Usage error from the argument parser (clap's own code).
pub const USAGE: u8 = 2;
/// Some points have no valid sample.
pub const PARTIAL: u8 = 3;
/// Nothing valid was measured.
pub const NOTHING_VALID: u8 = 4;
/// `twin check`: a predicted figure is beyond its bound.
pub const BEYOND_BOUND: u8 = 5;
/// Interrupted (Ctrl-C) after writing what exists.
pub const INTERRUPTED: u8 = 130;
