//! `twin calibrate` and `twin fit`: flags, and the thin runs that measure or read, fit,
//! write the profile and print it.

use super::calibrate::{self, CALIBRATION_CONCURRENCY};
use super::profile::Profile;
use super::{fit, inputs, render};
use crate::cli::ApiChoice;
use clap::Args;
use std::path::{Path, PathBuf};

#[derive(Args, Debug, Clone)]
#[command(
    after_help = "Measures, in minutes: a short sweep (prefill law t0, p0, q; batch-1 decode law),\n\
closed-loop cells at concurrency 1 and 2 (the cost per decoding request d2), probe (slots or\n\
max-running, pool, page, prefix cache, context limit) and, when the server speculates, the\n\
acceptance on prose and code. The records are kept beside the profile (PROFILE.sweep.jsonl,\n\
PROFILE.load.jsonl; replaced on each run) and fitted exactly as `twin fit` would.\n\n\
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
    /// Seed for nonces.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
}

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
    #[arg(long, default_value_t = CALIBRATION_CONCURRENCY)]
    pub fit_concurrency: u32,
}

fn write(profile: &Profile, path: &Path) -> anyhow::Result<()> {
    std::fs::write(path, profile.to_json_pretty() + "\n")
        .map_err(|e| anyhow::anyhow!("--out {}: cannot write the profile: {e}", path.display()))
}

/// `twin fit`: the profile of existing records.
pub fn run_fit(args: &FitArgs) -> anyhow::Result<u8> {
    if args.fit_concurrency == 0 {
        anyhow::bail!("--fit-concurrency must be at least 1");
    }
    let gathered = inputs::gather(&args.files, args.fit_concurrency)?;
    let profile = fit::fit(&gathered)?;
    write(&profile, &args.out)?;
    print!("{}", render::render(&profile));
    println!("profile written to {}", args.out.display());
    Ok(crate::exit::OK)
}

/// `twin calibrate`: measure, fit, write, print.
pub async fn run_calibrate(args: &CalibrateArgs) -> anyhow::Result<u8> {
    let c = calibrate::calibrate(args).await?;
    write(&c.profile, &args.out)?;
    println!(
        "measured: sweep at {:?} tokens, closed loop c={:?} at {} tokens{}; {:.0} s",
        c.plan.lengths,
        c.plan.concurrency,
        c.plan.load_length,
        if c.plan.spec_contents.is_empty() {
            String::new()
        } else {
            format!(", acceptance on {}", c.plan.spec_contents.join(", "))
        },
        c.elapsed_s
    );
    print!("{}", render::render(&c.profile));
    let records: Vec<String> = c.records.iter().map(|p| p.display().to_string()).collect();
    println!("records: {}", records.join(", "));
    println!("profile written to {}", args.out.display());
    Ok(crate::exit::OK)
}
