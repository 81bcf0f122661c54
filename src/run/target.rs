//! What every mode needs before its first request: the built-in simulator when no URL is
//! given, and the API key from the environment; and the target flags sweep and load share.

use crate::choices::{ApiChoice, Endpoint};
use crate::sim::{SimConfig, SimCostArgs, SimServer};
use clap::Args;

/// The target flags `sweep` and `load` share.
#[derive(Args, Debug, Clone)]
pub struct TargetArgs {
    /// Server base URL; without it the built-in simulator is started on a free loopback port.
    #[arg(long)]
    pub url: Option<String>,
    /// Server API.
    #[arg(long, value_enum, default_value = "auto")]
    pub api: ApiChoice,
    /// For `--api openai`: which route to use.
    #[arg(long, value_enum, default_value = "completions")]
    pub endpoint: Endpoint,
    /// Model name to send (default: the first one the server lists).
    #[arg(long)]
    pub model: Option<String>,
    /// Environment variable holding the API key (default OPENAI_API_KEY when set).
    #[arg(long)]
    pub api_key_env: Option<String>,
}

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

/// For graded prompts (`--tasks`, `--needle`) without `--raw-completion`: the chat route,
/// so the model reads them through its own chat template. A server detected as SGLang or
/// llama.cpp (native routes, raw text) is reached through its OpenAI chat route instead,
/// unless `--api` named it. Returns the connection and whether prompts go through a chat
/// template (TGI and Ollama keep their native routes: raw).
pub async fn graded_route(
    target: &TargetArgs,
    url: &str,
    conn: crate::backend::Connected,
) -> anyhow::Result<(crate::backend::Connected, bool)> {
    let api = conn.backend.api();
    let openai = matches!(api, "openai" | "vllm");
    if target.endpoint != Endpoint::Chat {
        return Ok((conn, false));
    }
    if openai {
        return Ok((conn, true));
    }
    if target.api == ApiChoice::Auto && matches!(api, "sglang" | "llamacpp") {
        let key = api_key(target.api_key_env.as_deref())?;
        let chat = crate::backend::connect(
            url,
            ApiChoice::Openai,
            Endpoint::Chat,
            Some(conn.model.clone()),
            key,
        )
        .await?;
        eprintln!(
            "graded prompts go through the server's chat template (its OpenAI chat route); \
             --raw-completion sends them as raw completions on its native route"
        );
        return Ok((chat, true));
    }
    Ok((conn, false))
}
