//! KV-cache capacity planning: how much context and concurrency fit on given GPUs.

use clap::Args;

#[derive(Args, Debug, Clone)]
pub struct PlanArgs {}

pub async fn run(_args: PlanArgs) -> anyhow::Result<u8> {
    anyhow::bail!("plan: not yet implemented")
}
