//! What every mode needs before its first request: the built-in simulator when no URL is
//! given, and the API key from the environment.

use crate::sim::{SimConfig, SimCostArgs, SimServer};

/// Start the built-in simulator on a free loopback port.
pub async fn start_sim(cost: &SimCostArgs, seed: u64) -> anyhow::Result<SimServer> {
    SimServer::start(
        "127.0.0.1",
        0,
        SimConfig {
            cost: cost.clone(),
            seed,
            model_name: "ctxbench-sim".into(),
        },
    )
    .await
}

/// The API key: from the variable `--api-key-env` names, else `OPENAI_API_KEY` when set.
pub fn api_key(var: Option<&str>) -> anyhow::Result<Option<String>> {
    match var {
        Some(var) => std::env::var(var).map(Some).map_err(|_| {
            anyhow::anyhow!("--api-key-env {var}: the environment variable is not set")
        }),
        None => Ok(std::env::var("OPENAI_API_KEY").ok()),
    }
}
