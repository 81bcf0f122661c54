//! The flags of `ctxbench load`.

use crate::choices::Format;
use crate::run::target::TargetArgs;
use crate::workload::args::ContentArgs;
use clap::Args;
use std::path::PathBuf;

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
  usd_per_mtok_output  --price-per-hour x window / 3600 / output tokens in the window x 1e6
                (input: over the window's prompt tokens; goodput: over the output tokens
                of requests that met every SLO)
  energy_j_per_output_token  GPU energy over the window (the exporters' energy counters'
                change, or power integrated where no counter is exported) / output
                tokens in the window; gpu_power_w: mean power of all GPUs together
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
    /// How the trace is read: mooncake (every field required), jsonl (`hash_ids` optional),
    /// or an agent trace whose turns wait on their session's previous turn: dynamo,
    /// claude-code, azure-agent (docs/traces.md, "Agent traces").
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
    /// Price of the server under test, US dollars per hour, all its GPUs included: cells
    /// gain dollars per million output, input and goodput tokens (see the definitions below).
    /// Example: --price-per-hour 2.5
    #[arg(long, value_name = "USD")]
    pub price_per_hour: Option<f64>,
    /// A GPU telemetry exporter to scrape during each cell beside the server's /metrics
    /// (DCGM exporter's Prometheus text: power, energy counter, utilisation, memory); cells
    /// gain joules per output token. Repeat for several nodes.
    /// Example: --telemetry-url http://gpu-node:9400/metrics
    #[arg(long, value_name = "URL")]
    pub telemetry_url: Vec<String>,
    /// Per-request deadline, seconds.
    #[arg(long, default_value_t = 600.0)]
    pub timeout: f64,
    /// Append records to this JSONL file as they are measured.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// When the run ends with records (exit 0, 3 or 4), print the `--out` file on stdout
    /// instead of the summary: a Kubernetes Job's log is then the result file.
    #[arg(long, requires = "out")]
    pub print_out: bool,
    /// Write progress, notes and warnings to this file instead of stderr; when the run fails
    /// (exit 1) the file is copied to stderr at the end.
    #[arg(long, value_name = "FILE")]
    pub log: Option<PathBuf>,
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
    /// Accuracy tasks graded on the load's requests (`--tasks`).
    #[command(flatten)]
    pub accuracy: crate::accuracy::args::AccuracyArgs,
    /// Options for the built-in simulator, when no `--url` is given.
    #[command(flatten)]
    pub sim: crate::sim::SimCostArgs,
}
