//! `ctxbench probe`: what server is this, its limits and capabilities.

use crate::cli::ProbeArgs;

pub async fn run(_args: ProbeArgs) -> anyhow::Result<u8> {
    anyhow::bail!("probe: not yet implemented")
}
