//! `twin predict`, `twin check` and `twin whatif`: their flags and what each prints.

use super::predict::Twin;
use crate::load::args::LoadArgs;
use clap::Args;
use std::path::PathBuf;

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

/// Predict `args` on `twin`, its warnings printed and (unless `no_band`) each cell's band
/// computed.
pub fn predict_with_bands(
    twin: &Twin,
    args: &LoadArgs,
    no_band: bool,
) -> anyhow::Result<crate::load::LoadResult> {
    let b = super::banded::predict(twin, args, no_band)?;
    for u in &b.unknown {
        eprintln!("warning: {}", u.warning);
    }
    for w in b.moves.iter().flat_map(super::figures::schedule_warnings) {
        eprintln!("warning: {w}");
    }
    Ok(b.result)
}

/// `ctxbench twin predict`: predict, print as `load` prints with each figure's band,
/// write `--out`.
pub fn predict(args: &PredictArgs) -> anyhow::Result<u8> {
    let twin = Twin::read(&args.profile)?;
    let r = predict_with_bands(&twin, &args.load, args.no_band)?;
    print!(
        "{}",
        crate::load::render::render_result(&r, args.load.format)
    );
    if !args.no_band {
        print!("{}", super::render::bands(&r.cells));
    }
    if let Some(path) = &args.load.out {
        super::output::write(&twin, &r, path)?;
    }
    if let Some(path) = &args.load.html {
        crate::load::render::write_html(path, &r)?;
    }
    Ok(r.exit_code())
}

/// Hold a twin's predictions to measured load files.
#[derive(Args, Debug)]
#[command(
    after_help = "Predicts exactly the cells (or the trace replay) of the measured \
file(s) and prints, per cell, predicted vs measured: TTFT p50/p90/p99, TPOT p50, output \
tok/s, goodput and, for a trace, the hit ratio; each figure's absolute percentage error and \
their mean. Bounds: 10 % for p50 TTFT, p50 TPOT, tok/s and goodput; 25 % for TTFT p90/p99; \
10 points for the hit ratio; never tighter than 1.5x the spread of repeated measured files \
of one plan (shown beside the error).

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

/// `ctxbench twin check`: print the comparison; non-zero when a figure is beyond its bound.
pub fn check(args: &CheckArgs) -> anyhow::Result<u8> {
    let twin = super::whatif::configured(Twin::read(&args.profile)?, &args.config)?;
    let files = args
        .measured
        .iter()
        .map(|p| {
            let f = crate::resultfile::read(p).map_err(|e| anyhow::anyhow!("{e}"))?;
            Ok((p.display().to_string(), f))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let report = super::check::check(&twin, &files, args.trace.as_deref())?;
    print!("{}", super::check::render(&report));
    if let Some(path) = &args.html {
        super::check_html::write(path, &report)?;
        println!("drawn to {}", path.display());
    }
    Ok(if report.flagged() > 0 {
        crate::exit::BEYOND_BOUND
    } else {
        crate::exit::OK
    })
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

/// `ctxbench twin whatif`: predict each configuration and print the comparison.
pub fn whatif(args: &WhatifArgs) -> anyhow::Result<u8> {
    let twin = Twin::read(&args.profile)?;
    if args.load.html.is_some() {
        anyhow::bail!(
            "--html does not apply to whatif: write the configurations with --out and draw one \
             with `twin check --config KNOB=VALUE --html`"
        );
    }
    let outcomes = super::whatif::run(&twin, &args.load, &args.vary)?;
    print!("{}", super::whatif::render(&outcomes));
    if let Some(path) = &args.load.out {
        super::whatif::write(&twin, &outcomes, path)?;
    }
    Ok(crate::exit::OK)
}
