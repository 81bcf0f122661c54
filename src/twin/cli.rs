//! The `twin` subcommands (their flags in `args.rs`): the thin runs that read, measure
//! or predict, write the records and print what the stages return.

use crate::load::args::LoadArgs;
use crate::twin::args::{CalibrateArgs, CheckArgs, FitArgs, PredictArgs, TwinCommand, WhatifArgs};
use crate::twin::fit::{inputs, laws as fit};
use crate::twin::measure::calibrate;
use crate::twin::model::profile::Profile;
use crate::twin::model::twin::Twin;
use crate::twin::render::profile as render;
use std::path::Path;

/// Run one `twin` subcommand.
pub async fn run(command: TwinCommand) -> anyhow::Result<u8> {
    match command {
        TwinCommand::Calibrate(a) => run_calibrate(&a).await,
        TwinCommand::Fit(a) => run_fit(&a),
        TwinCommand::Predict(a) => predict(&a),
        TwinCommand::Check(a) => check(&a),
        TwinCommand::Whatif(a) => whatif(&a),
    }
}

fn write(profile: &Profile, path: &Path) -> anyhow::Result<()> {
    let text = profile
        .to_json_checked()
        .map_err(|e| anyhow::anyhow!("--out {}: not written: {e}", path.display()))?;
    std::fs::write(path, text + "\n")
        .map_err(|e| anyhow::anyhow!("--out {}: cannot write the profile: {e}", path.display()))
}

/// `twin fit`: the profile of existing records.
fn run_fit(args: &FitArgs) -> anyhow::Result<u8> {
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
        let (widened, skipped) = crate::twin::measure::insample::widen(profile, load);
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
async fn run_calibrate(args: &CalibrateArgs) -> anyhow::Result<u8> {
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

/// Predict `args` on `twin`, its warnings printed and (unless `no_band`) each cell's band
/// computed.
fn predict_with_bands(
    twin: &Twin,
    args: &LoadArgs,
    no_band: bool,
) -> anyhow::Result<crate::load::LoadResult> {
    let b = crate::twin::uncertainty::banded::predict_banded(twin, args, no_band)?;
    for u in &b.unknown {
        eprintln!("warning: {}", u.warning);
    }
    for w in b
        .moves
        .iter()
        .flat_map(crate::twin::uncertainty::schedule::schedule_warnings)
    {
        eprintln!("warning: {w}");
    }
    Ok(b.result)
}

/// `ctxbench twin predict`: predict, print as `load` prints with each figure's band,
/// write `--out`.
fn predict(args: &PredictArgs) -> anyhow::Result<u8> {
    let twin = Twin::read(&args.profile)?;
    let r = predict_with_bands(&twin, &args.load, args.no_band)?;
    print!(
        "{}",
        crate::load_report::render::render_result(&r, args.load.format)
    );
    if !args.no_band {
        print!("{}", crate::twin::render::bands::bands(&r.cells));
    }
    if let Some(path) = &args.load.out {
        crate::twin::predict::records::write(&twin, &r, path)?;
    }
    if let Some(path) = &args.load.html {
        crate::load_report::render::write_html(path, &r)?;
    }
    Ok(r.exit_code())
}

/// `ctxbench twin check`: print the comparison; non-zero when a figure is beyond its bound.
fn check(args: &CheckArgs) -> anyhow::Result<u8> {
    let twin = crate::twin::whatif::configured(Twin::read(&args.profile)?, &args.config)?;
    let files = args
        .measured
        .iter()
        .map(|p| {
            let f = crate::resultfile::read(p).map_err(|e| anyhow::anyhow!("{e}"))?;
            Ok((p.display().to_string(), f))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let report = crate::twin::check::check(&twin, &files, args.trace.as_deref())?;
    print!("{}", crate::twin::render::check::render(&report));
    if let Some(path) = &args.html {
        crate::twin::render::check_html::write(path, &report)?;
        println!("drawn to {}", path.display());
    }
    Ok(if report.flagged() > 0 {
        crate::exit::BEYOND_BOUND
    } else {
        crate::exit::OK
    })
}

/// `ctxbench twin whatif`: predict each configuration and print the comparison.
fn whatif(args: &WhatifArgs) -> anyhow::Result<u8> {
    let twin = Twin::read(&args.profile)?;
    if args.load.html.is_some() {
        anyhow::bail!(
            "--html does not apply to whatif: write the configurations with --out and draw one \
             with `twin check --config KNOB=VALUE --html`"
        );
    }
    let outcomes = crate::twin::whatif::run(&twin, &args.load, &args.vary)?;
    print!("{}", crate::twin::render::whatif::render(&outcomes));
    if let Some(path) = &args.load.out {
        crate::twin::whatif::write(&twin, &outcomes, path)?;
    }
    Ok(crate::exit::OK)
}
