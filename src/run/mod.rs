//! One request runner for every mode: closed-loop workers under a concurrency limit or an
//! open-loop schedule of absolute send times, every finished request sent over a channel to
//! one collector that writes the result file and feeds the histograms.

pub mod arrivals;
pub mod chains;
pub mod closed;
pub mod collector;
pub mod hist;
pub mod jobs;
pub mod runner;
pub mod schedule;
pub mod shard;
pub mod slot;
pub mod target;
pub mod writer;

pub use chains::Chains;
pub use closed::run_jobs;
pub use collector::Collector;
pub use jobs::{Counted, Jobs, Released};
pub use runner::{Budget, Load, Pacing, Slot, run};
pub use schedule::Arrival;
