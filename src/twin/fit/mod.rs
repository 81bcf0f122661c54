//! Result files to a profile: the records gathered (`inputs`), the laws fitted, the limits
//! read off the probe, and the coefficients' uncertainty from resampling (`bootstrap`).

pub(crate) mod batch_steps;
pub(crate) mod bootstrap;
pub(crate) mod decode;
pub(crate) mod inputs;
pub(crate) mod interference;
pub(crate) mod interval;
pub(crate) mod laws;
pub(crate) mod limits;
pub(crate) mod mixed_steps;
#[cfg(test)]
mod props;
