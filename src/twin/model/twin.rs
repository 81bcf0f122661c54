//! A twin: a profile read and the engine configuration it describes, with the path the
//! records name.

use crate::sim::scheduler::EngineConfig;
use crate::twin::model::profile::Profile;
use crate::workload::points::Limit;

/// A profile and the engine it configures (whatif changes the engine, not the profile).
#[derive(Debug, Clone)]
pub struct Twin {
    pub profile: Profile,
    /// As given on the command line, for the records.
    pub path: String,
    pub engine: EngineConfig,
    /// `None`: requests reach the engine as their clients send them. `Some(seed)`: each
    /// up to one batch-1 decode step later, drawn from `seed` (`CellClients::jittered`):
    /// one of the schedules the bands look over (`uncertainty/band.rs`).
    pub schedule: Option<u64>,
}

impl Twin {
    pub fn read(path: &std::path::Path) -> anyhow::Result<Twin> {
        let profile = Profile::read(path).map_err(|e| anyhow::anyhow!("--profile: {e}"))?;
        Ok(Twin::new(profile, path.display().to_string()))
    }

    pub fn new(profile: Profile, path: String) -> Twin {
        let engine = profile.engine_config();
        Twin {
            profile,
            path,
            engine,
            schedule: None,
        }
    }

    /// The server's context limit as the profile has it.
    pub fn context_limit(&self) -> Limit {
        Limit {
            tokens: self.profile.limits.context_tokens.value.round() as u64,
            source: format!("twin profile {}", self.path),
        }
    }
}
