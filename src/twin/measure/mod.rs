//! Measuring a server into a profile: calibration's own plan sent to it, the records fitted,
//! and the profile held to its own calibration cells (`insample`).

pub(crate) mod calibrate;
pub(crate) mod insample;
mod mixed_plan;
