//! The flags of `ctxbench sweep`.

use crate::choices::{CacheBust, Format, Method};
use crate::run::target::TargetArgs;
use crate::workload::args::ContentArgs;
use clap::Args;
use std::path::PathBuf;

const METRICS_HELP: &str = "\
Metric definitions:
  TTFT         request sent -> first stream event with non-empty content or tokens
               (a chat role-only chunk is not a token)
  prefill_tps  uncached prompt tokens / TTFT
  decode_tps   (output tokens - tokens in the first event) / (t_last_event - t_first_event)
  ITL          gap between arrivals (events read together are one) divided over the
               tokens they carry (p50, p99); without per-event counts from the server the
               total is spread evenly and the sample says event_counts: derived
  two-point    decode_tps = (N_b - N_a) / (t_b - t_a), both requests cold (fresh nonce
               and cache flush); t_b <= t_a is flagged two_point_inverted
Tokens are counted from the server's cumulative counts, never from the number of events.";

#[derive(Args, Debug, Clone)]
#[command(after_help = METRICS_HELP)]
pub struct SweepArgs {
    /// The server (or the built-in simulator) and how to talk to it.
    #[command(flatten)]
    pub target: TargetArgs,
    /// Context lengths, comma-separated; `k` = x1024, `max` = the server's limit minus output tokens.
    #[arg(long, default_value = "1k,2k,4k,8k,16k,32k")]
    pub lengths: String,
    /// Tokens to generate per request (forced with ignore_eos).
    #[arg(long, default_value_t = 64)]
    pub output_tokens: u64,
    /// Repetitions per length.
    #[arg(long, default_value_t = 3)]
    pub reps: u32,
    /// `stream`: one streamed request per sample; `two-point`: max_tokens 1 vs N, both cold.
    #[arg(long, value_enum, default_value = "stream")]
    pub method: Method,
    /// How prefix caches are defeated.
    #[arg(long, value_enum, default_value = "auto")]
    pub cache_bust: CacheBust,
    /// Hide a fact in each prompt and check the answer.
    #[arg(long)]
    pub needle: bool,
    /// Needle depths as fractions of the prompt.
    #[arg(long, default_value = "0.5")]
    pub needle_depths: String,
    /// Accuracy tasks graded on the timed samples (`--tasks`).
    #[command(flatten)]
    pub accuracy: crate::accuracy::args::AccuracyArgs,
    /// Append records to this JSONL file as they are measured.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Skip (length, rep) pairs already in `--out`.
    #[arg(long)]
    pub resume: bool,
    /// Per-request deadline: `auto` (predicted from measured points x safety, with a floor) or seconds.
    #[arg(long, default_value = "auto")]
    pub timeout: String,
    /// Summary format on stdout.
    #[arg(long, value_enum, default_value = "table")]
    pub format: Format,
    /// Seed for nonces, needles and the simulator.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Skip the warm-up request.
    #[arg(long)]
    pub no_warmup: bool,
    /// Open a new connection for every request instead of reusing keep-alive connections:
    /// measures a server whose small writes wait for the client's delayed ACK (Nagle on,
    /// no TCP_NODELAY) without that ~40 ms; the connect time is recorded, not counted in
    /// TTFT. Example: ctxbench sweep --url http://127.0.0.1:8000 --fresh-connection
    #[arg(long)]
    pub fresh_connection: bool,
    /// Write an HTML report at the end (and after each point).
    #[arg(long)]
    pub html: Option<PathBuf>,
    /// Depth mode: a new turn on a cached prefix of each of these depths (tokens, `k` = x1024,
    /// 0 allowed), beside a cold request of the same total length. Each prefix is primed once
    /// (excluded), then each repetition sends it plus a fresh --turn-tokens suffix; a turn
    /// whose prefix the server did not serve from cache is flagged prefix_miss. Replaces --lengths:
    /// the cold points are depth + turn tokens.
    /// Example: --depth 0,8k,32k --turn-tokens 512
    #[arg(long, value_name = "DEPTHS")]
    pub depth: Option<String>,
    /// Depth mode: tokens of the new turn (the uncached suffix; `k` = x1024).
    #[arg(long, default_value = "512", value_parser = crate::lengths::parse_count_arg)]
    pub turn_tokens: u64,
    /// What the prompts are made of.
    #[command(flatten)]
    pub content: ContentArgs,
    /// Options for the built-in simulator, when no `--url` is given.
    #[command(flatten)]
    pub sim: crate::sim::SimCostArgs,
}
