//! Every `twin` subcommand's flags, as clap parses them: plain data the stages take. And
//! another command's flags parsed from an argument list the twin builds itself (a
//! calibration step, a measured plan replayed), with that command's exact meaning.

use crate::choices::ApiChoice;
use crate::load::args::LoadArgs;
use clap::{Args, FromArgMatches, Subcommand};
use std::path::PathBuf;

/// `ctxbench twin ...`.
#[derive(Args, Debug)]
pub struct TwinArgs {
    #[command(subcommand)]
    pub command: TwinCommand,
}

#[derive(Subcommand, Debug)]
pub enum TwinCommand {
    /// Measure a server with a small plan of its own and write its profile.
    Calibrate(CalibrateArgs),
    /// Fit a profile from existing sweep and load records.
    Fit(FitArgs),
    /// Predict a load plan (closed, open, --trace, --find-knee) from a profile, in virtual time.
    Predict(Box<PredictArgs>),
    /// Hold predictions to measured load files, per cell; exit 5 when a figure is beyond its bound.
    Check(CheckArgs),
    /// Predict a plan under several engine configurations (--vary max-running=8,64 …).
    Whatif(Box<WhatifArgs>),
}

#[derive(Args, Debug, Clone)]
#[command(
    after_help = "Measures, in minutes: a short sweep (prefill law t0, p0, q; batch-1 decode law),\n\
closed-loop cells at concurrency 1, 2, 4, … up to the slot limit (the cost per decoding\n\
request d2; --concurrency-up-to), mixed cells (1 and slots − 1 requests decoding while a\n\
512- and a 1k-token prompt is prefilled beside them, --reps each: the interference), probe (slots or\n\
max-running, pool, page, prefix cache, context limit) and, when the server speculates, the\n\
acceptance on prose and code. The records are kept beside the profile (PROFILE.sweep.jsonl,\n\
PROFILE.load.jsonl, PROFILE.mixed.jsonl and its trace; replaced on each run) and fitted exactly as `twin fit` would.\n\n\
Example:\n  ctxbench twin calibrate --url http://127.0.0.1:8080 --out llama.json"
)]
pub struct CalibrateArgs {
    /// Server base URL.
    #[arg(long)]
    pub url: String,
    /// Server API.
    #[arg(long, value_enum, default_value = "auto")]
    pub api: ApiChoice,
    /// Model name to send (default: the first one the server lists).
    #[arg(long)]
    pub model: Option<String>,
    /// Environment variable holding the API key (default OPENAI_API_KEY when set).
    #[arg(long)]
    pub api_key_env: Option<String>,
    /// Write the profile here.
    #[arg(long, default_value = "profile.json")]
    pub out: PathBuf,
    /// Longest sweep length (`k` = x1024); the server's limit less the output caps it.
    #[arg(long, default_value = "8k", value_parser = crate::lengths::parse_count_arg)]
    pub max_length: u64,
    /// Repetitions per sweep length.
    #[arg(long, default_value_t = 3)]
    pub reps: u32,
    /// Tokens generated per request (forced with ignore_eos).
    #[arg(long, default_value_t = 64)]
    pub output_tokens: u64,
    /// Prompt length of the closed-loop cells (`k` = x1024; capped like --max-length).
    #[arg(long, default_value = "1k", value_parser = crate::lengths::parse_count_arg)]
    pub load_length: u64,
    /// Requests per closed-loop cell.
    #[arg(long, default_value_t = 16)]
    pub requests: u64,
    /// Largest closed-loop concurrency calibrated (powers of two up to it, and it); default:
    /// the server's slot limit (at most 16), 8 where the server does not state it.
    #[arg(long, value_name = "N")]
    pub concurrency_up_to: Option<u32>,
    /// Seed for nonces.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
}

/// `twin fit`'s default: cells up to this concurrency are fitted, the others held out.
pub const FIT_CONCURRENCY: u32 = 2;

#[derive(Args, Debug, Clone)]
#[command(
    after_help = "Reads sweep records (the prefill and batch-1 decode laws) and load records \
(closed-loop cells at concurrency <= --fit-concurrency: the cost per decoding request); \
higher cells are held out, for `twin check`.\n\nExample:\n  ctxbench twin fit sweep.jsonl load.jsonl --out profile.json"
)]
pub struct FitArgs {
    /// Result files written by `sweep --out` and `load --out`.
    #[arg(required = true, num_args = 1..)]
    pub files: Vec<PathBuf>,
    /// Write the profile here.
    #[arg(long, default_value = "profile.json")]
    pub out: PathBuf,
    /// Fit load cells at this concurrency or below; the others are held out.
    #[arg(long, default_value_t = FIT_CONCURRENCY)]
    pub fit_concurrency: u32,
}

/// Predict a load plan against a twin profile in virtual time.
#[derive(Args, Debug)]
#[command(
    after_help = "Takes load's flags with load's meaning (closed loop --concurrency, \
open loop --rate with --arrival and --seed: the very schedule `load` sends, --trace with \
--time-scale and --trace-window, --find-knee, --slo, --requests/--duration, --lengths, \
--output-tokens) and runs them against the profile's engine on its own clock: no server, \
no sleeping. Writes load's records (--out) marked \"predicted\": `ctxbench report` and \
`ctxbench compare measured.jsonl predicted.jsonl` read them as measured files.

Examples:
  ctxbench twin predict --profile p.json --lengths 8k --concurrency 1,4,16 --out pred.jsonl
  ctxbench twin predict --profile p.json --trace chat.jsonl --time-scale 0.5"
)]
pub struct PredictArgs {
    /// The twin profile (written by `twin calibrate` or `twin fit`).
    #[arg(long, value_name = "FILE")]
    pub profile: PathBuf,
    /// Skip the 90 % bands (each costs one prediction per bootstrap replicate, alternative
    /// and jittered schedule, on every core; a trace of over 2000 requests reruns a sample
    /// of it: seconds on an hour of trace).
    #[arg(long)]
    pub no_band: bool,
    #[command(flatten)]
    pub load: LoadArgs,
}

/// Hold a twin's predictions to measured load files.
#[derive(Args, Debug)]
#[command(
    after_help = "Predicts exactly the cells (or the trace replay) of the measured \
file(s) and prints, per cell, predicted vs measured: TTFT p50/p90/p99, TPOT p50, output \
tok/s, goodput and, for a trace, the hit ratio; each figure's absolute percentage error and \
their mean. Bounds: 10 % for p50 TTFT, p50 TPOT, tok/s and goodput; 25 % for TTFT p90/p99; \
10 points for the hit ratio. Each bound adds, where they apply (shown after it): one \
request's share of goodput's count (a request ending on the other side of the window's edge \
moves it a whole step), and what the decode step carries in: the plan predicted again with \
the decode step the measured TPOT p50 implies (within TPOT's own bound), and how far each \
other figure moves (a queued request's TTFT waits on others' decoding). Never tighter than \
1.5x the spread of repeated measured files of one plan (shown beside the error).

Exit status: 0 when every figure is within its bound, 5 when any is beyond it (flagged \
BEYOND BOUND), 1 on bad input.

Example:
  ctxbench twin check --profile p.json run1.jsonl run2.jsonl"
)]
pub struct CheckArgs {
    /// The twin profile (written by `twin calibrate` or `twin fit`).
    #[arg(long, value_name = "FILE")]
    pub profile: PathBuf,
    /// Measured load files; several: repeated runs of one plan.
    #[arg(required = true, value_name = "MEASURED.jsonl")]
    pub measured: Vec<PathBuf>,
    /// The trace a measured replay used, when it is no longer at the path its file records.
    #[arg(long, value_name = "FILE")]
    pub trace: Option<PathBuf>,
    /// Predict the server as relaunched with this knob changed (as `twin whatif --vary`
    /// names it, one value: max-running=2, pool=64k, chunk=512); repeatable.
    #[arg(long, value_name = "KNOB=VALUE")]
    pub config: Vec<String>,
    /// Draw the measured figures over the predicted bands, per figure against load.
    #[arg(long, value_name = "FILE")]
    pub html: Option<PathBuf>,
}

/// Predict the same plan under several engine configurations.
#[derive(Args, Debug)]
#[command(
    after_help = "Knobs: max-running (requests running at once), pool (KV pool, \
tokens), chunk (prefill tokens per step), and the load dimension: concurrency, rate (cells \
of each configuration, as load's flags) or time-scale (a trace). Engine knobs combine: \
every combination is one configuration. Prints per configuration and cell the SLO verdict \
and goodput, the knee per configuration (the largest load meeting --slo at \
--goodput-target), the best configuration, and a warning wherever a configuration leaves \
what the profile was calibrated on (longer contexts, larger batches, a larger pool).

Example (the story: 64 vs 8 running requests at long context on a 218k-token pool):
  ctxbench twin whatif --profile p.json --vary max-running=8,64 --vary pool=218k \\
    --lengths 32k --concurrency 1,2,4,8 --slo ttft=60s,tpot=100ms"
)]
pub struct WhatifArgs {
    /// The twin profile (written by `twin calibrate` or `twin fit`).
    #[arg(long, value_name = "FILE")]
    pub profile: PathBuf,
    /// A knob and its values, e.g. max-running=8,16,64 or pool=128k,256k (repeatable).
    #[arg(long, value_name = "KNOB=A,B,…", required = true)]
    pub vary: Vec<String>,
    #[command(flatten)]
    pub load: LoadArgs,
}

/// Parse `argv` (flags only, no program or subcommand name) as the flags of `name`.
pub fn parse<T: Args + FromArgMatches>(name: &str, argv: Vec<String>) -> anyhow::Result<T> {
    let command =
        T::augment_args(clap::Command::new("ctxbench").bin_name(format!("ctxbench {name}")));
    let matches = command.try_get_matches_from(std::iter::once(name.to_string()).chain(argv))?;
    Ok(T::from_arg_matches(&matches)?)
}
