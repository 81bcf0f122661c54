//! The `report` and `compare` command entry points: they take the parsed arguments, read
//! the files and hand records to the pure renderers in `report`.

use crate::report;
use crate::report::args::{CompareArgs, ReportArgs};
use std::path::Path;

/// `ctxbench report FILE`: print the summary of a result file, optionally as HTML.
pub fn run_report(args: ReportArgs) -> anyhow::Result<u8> {
    let file = crate::resultfile::read(&args.file).map_err(|e| anyhow::anyhow!("{e}"))?;
    if file.sessions.plan.is_some() && args.more.is_empty() {
        return crate::sessions::report::report_file(&args, file);
    }
    if file.load.plan.is_some() || !args.more.is_empty() {
        return crate::load_report::report_files(&args, file);
    }
    let Some(run) = &file.run else {
        anyhow::bail!(
            "{}: no run record: not a ctxbench result file",
            args.file.display()
        );
    };
    let summary = crate::summary::summarize_with_fit(&file.samples, &file.errors);
    if file.torn_tail {
        eprintln!(
            "note: the last line of {} was torn (a crash mid-write) and was ignored",
            args.file.display()
        );
    }
    print!("{}", report::render(run, &summary, args.format));
    if let Some(h) = &args.html {
        report::write_html(h, run, &file.samples, &file.errors, &summary)?;
    }
    Ok(crate::exit::OK)
}

/// `ctxbench compare A B`: compare two result files point by point.
pub fn run_compare(args: CompareArgs) -> anyhow::Result<u8> {
    let read = |p: &Path| {
        let f = crate::resultfile::read(p).map_err(|e| anyhow::anyhow!("{e}"))?;
        if f.torn_tail {
            eprintln!(
                "note: the last line of {} was torn (a crash mid-write) and was ignored",
                p.display()
            );
        }
        anyhow::Ok(f)
    };
    let (a, b) = (read(&args.a)?, read(&args.b)?);
    let (la, lb) = (args.a.display().to_string(), args.b.display().to_string());
    if a.sessions.plan.is_some() || b.sessions.plan.is_some() {
        return crate::sessions::report::compare_files(&args, (la, a), (lb, b));
    }
    if a.load.plan.is_some() || b.load.plan.is_some() {
        return crate::load_report::compare_files(&args, (la, a), (lb, b));
    }
    if !args.config.is_empty() {
        anyhow::bail!(
            "--config picks one configuration's cells of load files; {la} and {lb} are sweeps"
        );
    }
    let comparison = report::compare::compare(&a, &b, (&la, &lb))?;
    print!(
        "{}",
        report::compare::render::render(&comparison, args.format)
    );
    if let Some(h) = &args.html {
        report::write_atomic(h, &report::compare::html::render(&comparison))?;
    }
    Ok(crate::exit::OK)
}
