//! The `ctxbench sessions` flags (the contract of issue 45); validated into a plan by
//! `plan.rs` before any request is sent.

use crate::choices::{ApiChoice, Format};
use clap::Args;
use std::path::PathBuf;

#[derive(Args, Debug, Clone)]
#[command(
    after_help = "Definitions: each turn's prompt is the whole conversation so far, the \
model's streamed reply to the previous turn included, sent on the chat route. TTFT is request \
sent → first content event. possible_cached_tokens is the longest prefix the server has \
already seen (the previous turn's prompt and its reply, or a system prompt), whole pages. \
A cell (one --sessions value) holds N sessions open at once, each closed-loop.\n\n\
Examples:\n  ctxbench sessions --sessions 1,4,16 --turns 8\n  ctxbench sessions --url \
http://127.0.0.1:8000 --first-tokens 8k --turn-tokens 256..1k --think-time 1s..3s --out s.jsonl"
)]
pub struct SessionsArgs {
    /// Server base URL; without it the built-in simulator is started on a free loopback port.
    #[arg(long)]
    pub url: Option<String>,
    /// Server API (sessions always use its OpenAI chat route).
    #[arg(long, value_enum, default_value = "auto")]
    pub api: ApiChoice,
    /// Model name to send (default: the first one the server lists).
    #[arg(long)]
    pub model: Option<String>,
    /// Environment variable holding the API key (default OPENAI_API_KEY when set).
    #[arg(long)]
    pub api_key_env: Option<String>,
    /// The cells: how many sessions are open at once, e.g. 1,4,16.
    #[arg(long, default_value = "1,2,4,8,16")]
    pub sessions: String,
    /// Turns per session (requests), at least 1.
    #[arg(long, default_value_t = 8)]
    pub turns: u32,
    /// Tokens of the system prompt (`k` suffix allowed; 0: none).
    #[arg(long, default_value = "1k", value_parser = count_or_zero)]
    pub system_tokens: u64,
    /// How many distinct system prompts: 1 (all sessions share one) or N (session i uses
    /// prompt i mod N).
    #[arg(long, default_value_t = 1)]
    pub shared_system: u32,
    /// Tokens of each session's first user message (a document), nonce first.
    #[arg(long, default_value = "4k", value_parser = crate::lengths::parse_count_arg)]
    pub first_tokens: u64,
    /// Tokens of each later user message: N or a range A..B drawn per turn.
    #[arg(long, default_value = "512")]
    pub turn_tokens: String,
    /// Output tokens per reply (forced with ignore_eos): N or A..B.
    #[arg(long, default_value = "256")]
    pub output_tokens: String,
    /// Wait after a reply ends before the next turn: 0, a duration (2s) or A..B.
    #[arg(long, default_value = "0", allow_hyphen_values = true)]
    pub think_time: String,
    /// End a session before a turn whose prompt and reply would pass this many tokens.
    #[arg(long)]
    pub max_context: Option<String>,
    /// Keep each cell running this long, replacing finished sessions (default: each
    /// session runs its turns once).
    #[arg(long)]
    pub duration: Option<String>,
    /// Send each turn's session id in this HTTP header (for session-affine routers).
    #[arg(long)]
    pub session_header: Option<String>,
    /// Bounds on warm turns (turn ≥ 2): METRIC_pNN=DURATION, METRIC one of ttft, tpot, e2e.
    #[arg(long, default_value = "ttft_p95=2s")]
    pub slo: String,
    /// A cell whose hit ratio (observed ÷ possible cached tokens) is below this thrashes.
    #[arg(long, default_value_t = 0.5)]
    pub hit_floor: f64,
    /// Plant a needle in each session's first message and ask for it in the last turn.
    #[arg(long)]
    pub tasks: Option<String>,
    /// Build the first messages from real text (see `sweep --corpus`).
    #[arg(long, value_name = "PATH|builtin:NAME")]
    pub corpus: Option<String>,
    /// Seeds turn lengths, think times and the sessions' nonces.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Result file (JSONL), a line written as each turn finishes.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Continue `--out`: finished cells are kept, a cell cut short is run again.
    #[arg(long, requires = "out")]
    pub resume: bool,
    /// Also write an HTML report.
    #[arg(long)]
    pub html: Option<PathBuf>,
    /// How the summary is printed on stdout.
    #[arg(long, value_enum, default_value = "table")]
    pub format: Format,
    /// Options for the built-in simulator, when no `--url` is given.
    #[command(flatten)]
    pub sim: crate::sim::SimCostArgs,
}

/// A token count (`1k`), or 0.
fn count_or_zero(text: &str) -> Result<u64, String> {
    if text.trim() == "0" {
        return Ok(0);
    }
    crate::lengths::parse_count_arg(text)
}
