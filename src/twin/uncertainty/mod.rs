//! What a prediction does not know: the terms calibration left unidentified (`unknowns`),
//! and each figure's 90 % band from the bootstrap replicates, the server's spread and the
//! jittered schedules (`band`), rerun on every core.

pub(crate) mod band;
pub(crate) mod banded;
mod reruns;
mod sample;
pub(crate) mod schedule;
pub(crate) mod threads;
pub(crate) mod unknowns;
