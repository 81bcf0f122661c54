//! The command-line contract: clap derive, a ValueEnum for every closed choice.

use clap::{Args, Parser, Subcommand};
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

#[derive(Parser, Debug)]
#[command(
    name = "ctxbench",
    version = crate::cli_docs::VERSION_LINE,
    about = "Measure how an LLM inference server performs as the context grows",
    long_about = "ctxbench measures a running LLM server (SGLang, vLLM, llama.cpp, TGI, Ollama, \
any OpenAI-compatible endpoint) across context lengths: TTFT, prefill tok/s, decode tok/s and \
inter-token latency, defeating prefix caches and checking the server's own token counts.",
    after_help = "Examples:\n  ctxbench sweep                         # benchmark the built-in simulator\n  ctxbench sim --port 30000 --spec 3     # run the simulator for other clients\n  ctxbench sweep --url http://127.0.0.1:30000 --lengths 1k,8k,32k --out run.jsonl\n  ctxbench probe --url http://127.0.0.1:8080\n  ctxbench report run.jsonl --html report.html"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Sweep context lengths and measure TTFT, prefill and decode rates.
    Sweep(Box<SweepArgs>),
    /// Run the built-in simulated server (known cost model, for demos and tests).
    Sim(crate::sim::SimArgs),
    /// Identify a server: kind, model, limits, caches, capabilities.
    Probe(ProbeArgs),
    /// KV-cache capacity planning: how much context and concurrency fit.
    Plan(crate::capacity::PlanArgs),
    /// Print the summary of a result file (also a partial one), optionally as HTML.
    Report(ReportArgs),
    /// Compare two result files point by point.
    Compare(CompareArgs),
    /// Load cells (length x concurrency or rate): TTFT/TPOT/ITL percentiles, throughput,
    /// goodput under SLOs, server telemetry, the knee.
    Load(Box<LoadArgs>),
    /// Production traces (Mooncake format): generate one to replay with `load --trace`.
    Trace(TraceArgs),
    /// The calibrated twin: predict load plans in virtual time and check the predictions.
    Twin(TwinArgs),
    /// JSON Schema of the result file's records: all kinds (chosen by `type`), or one.
    Schema(crate::schema::SchemaArgs),
    /// Shell completion script (bash, zsh, fish) on stdout.
    Completions(crate::cli_docs::CompletionsArgs),
    /// The man page (roff) on stdout, or all pages into a folder.
    #[command(hide = true)]
    Man(crate::cli_docs::ManArgs),
}

/// `ctxbench twin ...`.
#[derive(Args, Debug)]
pub struct TwinArgs {
    #[command(subcommand)]
    pub command: TwinCommand,
}

#[derive(Subcommand, Debug)]
pub enum TwinCommand {
    /// Predict a load plan (closed, open, --trace, --find-knee) from a profile, in virtual time.
    Predict(Box<crate::twin::cmd::PredictArgs>),
    /// Hold predictions to measured load files, per cell; exit 5 when a figure is beyond its bound.
    Check(crate::twin::cmd::CheckArgs),
    /// Predict a plan under several engine configurations (--vary max-running=8,64 …).
    Whatif(Box<crate::twin::cmd::WhatifArgs>),
}

/// `ctxbench trace ...`.
#[derive(Args, Debug)]
pub struct TraceArgs {
    #[command(subcommand)]
    pub command: TraceCommand,
}

#[derive(Subcommand, Debug)]
pub enum TraceCommand {
    /// Generate a synthetic multi-turn long-context trace with shared prefixes.
    Synth(crate::trace::synth_cmd::SynthArgs),
}

// The shared choices live in a leaf module; re-exported so `crate::cli::X` still works.
pub use crate::choices::{ApiChoice, CacheBust, Endpoint, Format, Method};

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

/// What prompts are made of, for `sweep` and `load`: filler by default, or real text.
#[derive(Args, Debug, Clone, Default)]
pub struct ContentArgs {
    /// Build prompts from real text: a file, a folder (read recursively; binary files are
    /// skipped and named), or builtin:prose, builtin:code, builtin:mixed. Each prompt is a
    /// fresh span of it, nonce first, exact length. Under speculative decoding acceptance
    /// depends on the text: decode tok/s on filler is not what users get.
    /// Example: --corpus ./docs   or   --corpus builtin:code
    #[arg(long, value_name = "PATH|builtin:NAME", conflicts_with = "dataset")]
    pub corpus: Option<String>,
    /// Build prompts from a dataset's entries (an entry shorter than the length is padded
    /// with the next ones, a longer one cut at a token boundary): JSONL with `prompt` or
    /// `text`, ShareGPT (`conversations`, first human turn) or LongBench (`context` + `input`).
    /// Example: --dataset sharegpt.json --dataset-format sharegpt
    #[arg(long, value_name = "FILE")]
    pub dataset: Option<PathBuf>,
    /// The dataset's format (detected from its first record when not given).
    #[arg(long, value_enum, requires = "dataset")]
    pub dataset_format: Option<crate::workload::content::DatasetFormat>,
}

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

#[derive(Args, Debug, Clone)]
#[command(
    after_help = "Examples:\n  ctxbench probe --url http://127.0.0.1:30000\n  ctxbench probe --url http://127.0.0.1:8080 --cache-capacity --prefix-tokens 8k"
)]
pub struct ProbeArgs {
    /// Server base URL.
    #[arg(long)]
    pub url: String,
    /// Also measure how many distinct prefixes the prefix cache keeps: prime prefixes of
    /// --prefix-tokens until the first is evicted (sends requests; flushes where offered).
    #[arg(long)]
    pub cache_capacity: bool,
    /// With --cache-capacity: tokens per primed prefix (`k` = x1024).
    #[arg(long, default_value = "4k", value_parser = crate::lengths::parse_count_arg)]
    pub prefix_tokens: u64,
    /// With --cache-capacity: stop after this many prefixes kept.
    #[arg(long, default_value_t = 64)]
    pub max_prefixes: u32,
    #[arg(long, value_enum, default_value = "table")]
    pub format: Format,
    /// Environment variable holding the API key (default OPENAI_API_KEY when set).
    #[arg(long)]
    pub api_key_env: Option<String>,
}

#[derive(Args, Debug, Clone)]
pub struct ReportArgs {
    /// A result file written by `sweep --out` or `load --out`.
    pub file: PathBuf,
    /// More load files of the same plan (one per client machine): merged by their records.
    pub more: Vec<PathBuf>,
    /// Write a self-contained HTML report here.
    #[arg(long)]
    pub html: Option<PathBuf>,
    #[arg(long, value_enum, default_value = "table")]
    pub format: Format,
}

#[derive(Args, Debug, Clone)]
pub struct CompareArgs {
    pub a: PathBuf,
    pub b: PathBuf,
    /// Draw both runs on the same axes in this HTML file.
    #[arg(long)]
    pub html: Option<PathBuf>,
    #[arg(long, value_enum, default_value = "table")]
    pub format: Format,
}

const LOAD_HELP: &str = "\
Definitions (ctxbench load):
  TTFT          request sent -> first content event; also from the scheduled send
                (ttft_from_schedule, open loop: what a user arriving on time waited)
  TPOT          (E2E - TTFT) / (output tokens - 1), per request
  ITL           per arrival: gap between stream events / tokens the later one carries
  E2E           request sent -> last event (also from the schedule)
  send lateness actual send - scheduled send (open loop; a --max-concurrency wait shows here)
  window        steady state: client in flight = target (closed loop) or the span of
                sends (open loop); ramp-up and drain are excluded and reported
  output_tps, input_tps, requests/s   over the window
  goodput       requests/s in the window meeting every --slo bound; failures and
                timeouts count as misses; a cell meets the target when the fraction of
                its requests meeting the SLOs is >= --goodput-target
  percentiles   p50/p90/p99 from HDR histograms (3 significant digits)
Names elsewhere: vLLM bench serve TPOT = our TPOT, its ITL = our ITL; AIPerf and
GuideLLM \"inter token latency\" = our TPOT; GuideLLM \"time per output token\" divides
(last - first token) by all output tokens, not output - 1.

Examples:
  ctxbench load --lengths 8k,32k --concurrency 1,2,4,8      # against the built-in simulator
  ctxbench load --url http://127.0.0.1:30000 --lengths 32k --rate 0.5,1,2 \\
      --arrival gamma:2 --duration 60s --out load.jsonl --html load.html
  ctxbench load --lengths 8k,32k --find-knee --slo ttft=5s,tpot=50ms --goodput-target 0.95
  ctxbench report load.jsonl other-client.jsonl --format markdown
  # one plan over 3 clients (each its own machine, or a Kubernetes Indexed Job's pods):
  ctxbench load --url http://srv:30000 --lengths 32k --rate 6 --shard 0/3 \\
      --start-at 2025-06-01T12:00:00Z --out shard-0.jsonl     # and 1/3, 2/3 elsewhere
  ctxbench report shard-0.jsonl shard-1.jsonl shard-2.jsonl   # merged; names a missing shard

  ctxbench load --url http://127.0.0.1:30000 --trace mooncake.jsonl --time-scale 0.5 \\
      --trace-window 10m..20m --max-concurrency 64 --out trace.jsonl --html trace.html";

#[derive(Args, Debug, Clone)]
#[command(after_help = LOAD_HELP)]
pub struct LoadArgs {
    /// The server (or the built-in simulator) and how to talk to it.
    #[command(flatten)]
    pub target: TargetArgs,
    /// Context lengths, comma-separated (`k` = x1024, `max`).
    #[arg(long, default_value = "8k,32k")]
    pub lengths: String,
    /// Closed loop: workers per cell, comma-separated (e.g. 1,2,4,8).
    #[arg(long, conflicts_with_all = ["rate", "find_knee"])]
    pub concurrency: Option<String>,
    /// Open loop: arrival rates in requests/s, comma-separated (e.g. 0.5,1,2).
    #[arg(long, conflicts_with = "find_knee")]
    pub rate: Option<String>,
    /// Open loop: gaps between arrivals: poisson, constant or gamma:CV.
    #[arg(long, default_value = "poisson", requires = "rate")]
    pub arrival: String,
    /// Open loop (--rate or --trace): at most this many in flight; later arrivals wait
    /// (and are late).
    #[arg(long)]
    pub max_concurrency: Option<u32>,
    /// Replay a request trace (one JSON line per request: `timestamp` ms, `input_length`,
    /// `output_length`, `hash_ids`) at its recorded times, with its prefix sharing: equal
    /// block ids become equal tokens. Compares the server's cached tokens with what the
    /// trace makes possible. Example: --trace mooncake_trace.jsonl --time-scale 0.5
    #[arg(long, value_name = "FILE", conflicts_with_all = ["concurrency", "rate", "find_knee", "resume"])]
    pub trace: Option<PathBuf>,
    /// How the trace's lines are read: mooncake (every field required) or jsonl
    /// (`hash_ids` optional: a line without shares nothing).
    #[arg(long, value_enum, default_value = "mooncake", requires = "trace")]
    pub trace_format: crate::trace::format::TraceFormat,
    /// Tokens per `hash_ids` block (Mooncake's traces use 512; the last block may be partial).
    #[arg(long, default_value_t = 512, requires = "trace")]
    pub block_tokens: u64,
    /// Multiply the trace's gaps by this: 0.5 replays twice as fast. Example: --time-scale 0.5
    #[arg(long, default_value_t = 1.0, requires = "trace")]
    pub time_scale: f64,
    /// Replay at most this many requests (after --trace-window).
    #[arg(long, value_name = "N", requires = "trace")]
    pub trace_limit: Option<u64>,
    /// Replay the requests in START..END of the trace's time (from its first request;
    /// either end may be left out). Example: --trace-window 10m..20m
    #[arg(long, value_name = "START..END", requires = "trace")]
    pub trace_window: Option<String>,
    /// Per length, the largest concurrency meeting --slo at --goodput-target.
    #[arg(long)]
    pub find_knee: bool,
    /// Largest concurrency --find-knee tries.
    #[arg(long, default_value_t = 256)]
    pub knee_max: u32,
    /// Requests per cell (default: 4 per worker, at least 16; open loop: 10 s of arrivals, at least 16).
    #[arg(long, conflicts_with = "duration")]
    pub requests: Option<u64>,
    /// Cell length instead of a request count (e.g. 60s): no request starts after it.
    #[arg(long)]
    pub duration: Option<String>,
    /// Tokens to generate per request (forced with ignore_eos).
    #[arg(long, default_value_t = 64)]
    pub output_tokens: u64,
    /// Seed for the arrival schedule and the simulator.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Run shard I of N (0-based) of the plan, with N-1 other clients running the rest:
    /// closed loop splits each cell's concurrency (remainders to the first shards), open
    /// loop takes every Nth arrival of the one seeded schedule. Default: from a Kubernetes
    /// Indexed Job's JOB_COMPLETION_INDEX with JOB_COMPLETIONS or --shards.
    /// Example: --shard 0/3 --out shard-0.jsonl   (then: ctxbench report shard-*.jsonl)
    #[arg(long, value_name = "I/N")]
    pub shard: Option<crate::run::shard::Shard>,
    /// The shard count N, when the index comes from JOB_COMPLETION_INDEX.
    /// Example: --shards 3
    #[arg(long, value_name = "N")]
    pub shards: Option<u32>,
    /// Start the first cell at this time on the server's clock (read from its Date header;
    /// the offset is recorded), so that every shard starts together.
    /// Example: --start-at 2025-06-01T12:00:00Z
    #[arg(long, value_name = "RFC3339", value_parser = crate::load::clock::parse_start_at)]
    pub start_at: Option<std::time::SystemTime>,
    /// Latency bounds for goodput: ttft=, tpot=, e2e= durations.
    #[arg(long, default_value = "ttft=5s,tpot=50ms,e2e=60s")]
    pub slo: String,
    /// Fraction of a cell's requests that must meet --slo for the cell to pass.
    #[arg(long, default_value_t = 0.95)]
    pub goodput_target: f64,
    /// Per-request deadline, seconds.
    #[arg(long, default_value_t = 600.0)]
    pub timeout: f64,
    /// Append records to this JSONL file as they are measured.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Skip cells already complete in `--out`.
    #[arg(long)]
    pub resume: bool,
    /// Write an HTML report (after each cell and at the end).
    #[arg(long)]
    pub html: Option<PathBuf>,
    /// Summary format on stdout.
    #[arg(long, value_enum, default_value = "table")]
    pub format: Format,
    /// What the prompts are made of.
    #[command(flatten)]
    pub content: ContentArgs,
    /// Options for the built-in simulator, when no `--url` is given.
    #[command(flatten)]
    pub sim: crate::sim::SimCostArgs,
}
