//! Reporting on load files, apart from running load: merging shards, the text and HTML
//! report, `compare` of two files and `--config` selection. Pure functions of the records
//! and `LoadResult`; nothing here is imported by the runner in `load`.

pub mod compare;
pub mod config_select;
pub mod merge;
pub mod render;
pub mod spec_compare;
pub mod trace_report;

use crate::exit;

/// `ctxbench report` on load files: merge, summarise, print.
pub fn report_files(
    args: &crate::report::args::ReportArgs,
    first: crate::resultfile::ResultFile,
) -> anyhow::Result<u8> {
    let mut files = vec![(args.file.display().to_string(), first)];
    for p in &args.more {
        let f = crate::resultfile::read(p).map_err(|e| anyhow::anyhow!("{e}"))?;
        files.push((p.display().to_string(), f));
    }
    for (name, f) in &files {
        if f.torn_tail {
            eprintln!("note: the last line of {name} was torn (a crash mid-write) and was ignored");
        }
    }
    let r = merge::merge(&files)?;
    print!("{}", render::render_result(&r, args.format));
    if let Some(h) = &args.html {
        render::write_html(h, &r)?;
    }
    Ok(r.exit_code())
}

/// `ctxbench compare` on two load files: common cells side by side.
pub fn compare_files(
    args: &crate::report::args::CompareArgs,
    a: (String, crate::resultfile::ResultFile),
    b: (String, crate::resultfile::ResultFile),
) -> anyhow::Result<u8> {
    let (la, lb) = (a.0.clone(), b.0.clone());
    let wanted = config_select::parse(&args.config).map_err(anyhow::Error::msg)?;
    let pick = |(name, mut f): (String, crate::resultfile::ResultFile)| {
        config_select::select(&mut f.load.cells, &wanted, &name).map_err(anyhow::Error::msg)?;
        merge::merge(&[(name, f)])
    };
    let ra = pick(a)?;
    let rb = pick(b)?;
    print!("{}", compare::render(&ra, &rb, (&la, &lb), args.format)?);
    if let Some(h) = &args.html {
        crate::report::write_atomic(h, &compare::html(&ra, &rb, (&la, &lb))?)?;
    }
    Ok(exit::OK)
}
