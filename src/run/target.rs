//! What every mode needs before its first request: the built-in simulator when no URL is
//! given, and the API key from the environment. Its arrow up to `cli::TargetArgs` is
//! defended: the target flags are one struct sweep and load share, and this is what they mean.

use crate::cli::TargetArgs;
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

/// A connected target, with the simulator it runs on (kept alive for the run) when no
/// `--url` was given.
pub struct Connection {
    pub sim: Option<SimServer>,
    pub url: String,
    pub conn: crate::backend::Connected,
}

/// Connect to `--url`, or start the built-in simulator, say so (`announce`'s line), and
/// connect to it.
pub async fn connect(
    target: &TargetArgs,
    sim: &SimCostArgs,
    seed: u64,
    announce: impl FnOnce(&SimServer) -> String,
) -> anyhow::Result<Connection> {
    let key = api_key(target.api_key_env.as_deref())?;
    let (sim, url) = match &target.url {
        Some(u) => (None, u.clone()),
        None => {
            let sim = start_sim(sim, seed).await?;
            eprintln!("{}", announce(&sim));
            let url = sim.url();
            (Some(sim), url)
        }
    };
    let conn =
        crate::backend::connect(&url, target.api, target.endpoint, target.model.clone(), key)
            .await?;
    Ok(Connection { sim, url, conn })
}
