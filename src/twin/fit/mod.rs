//! Result files to a profile: the records gathered (`inputs`), the laws fitted, the limits
//! read off the probe, and the coefficients' uncertainty from resampling (`bootstrap`).

mod batch_steps;
pub(crate) mod bootstrap;
mod decode;
pub(crate) mod inputs;
mod interference;
mod interval;
pub(crate) mod laws;
mod limits;
mod mixed_steps;
#[cfg(test)]
mod props;
