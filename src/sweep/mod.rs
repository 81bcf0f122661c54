//! The sweep: planning the points, running them small to large, timeouts, resume.

use crate::cli::SweepArgs;

pub async fn run(_args: SweepArgs) -> anyhow::Result<u8> {
    anyhow::bail!("sweep: not yet implemented")
}
