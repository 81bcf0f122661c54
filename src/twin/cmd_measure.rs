//! `twin calibrate` and `twin fit`: flags, and the thin runs that measure or read, fit,
//! write the profile and print it.

pub use super::calibrate::CalibrateArgs;
use super::calibrate::{self, FIT_CONCURRENCY};
use super::profile::Profile;
use super::{fit, inputs, render};
use clap::Args;
use std::path::{Path, PathBuf};

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

fn write(profile: &Profile, path: &Path) -> anyhow::Result<()> {
    let text = profile
        .to_json_checked()
        .map_err(|e| anyhow::anyhow!("--out {}: not written: {e}", path.display()))?;
    std::fs::write(path, text + "\n")
        .map_err(|e| anyhow::anyhow!("--out {}: cannot write the profile: {e}", path.display()))
}

/// `twin fit`: the profile of existing records.
pub fn run_fit(args: &FitArgs) -> anyhow::Result<u8> {
    if args.fit_concurrency == 0 {
        anyhow::bail!("--fit-concurrency must be at least 1");
    }
    let gathered = inputs::gather(&args.files, args.fit_concurrency)?;
    let mut profile = fit::fit(&gathered)?;
    // Held to its own calibration cells: the first file with closed-loop cells.
    let load = args.files.iter().find(|p| {
        crate::resultfile::read(p)
            .is_ok_and(|f| f.load.cells.iter().any(|c| c.cell.concurrency.is_some()))
    });
    if let Some(load) = load {
        let (widened, skipped) = super::insample::widen(profile, load);
        profile = widened;
        if let Some(why) = skipped {
            eprintln!("twin fit: {why}");
        }
    }
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
