//! Rendering results: pure functions of records (table, json, csv, markdown, html).

pub mod csv;
pub mod markdown;
pub mod table;

use crate::cli::{CompareArgs, Format, ReportArgs};
use crate::record::{ErrorRecord, RunRecord, Sample, Summary};
use std::path::Path;

/// The summary in the requested format.
pub fn render(run: &RunRecord, summary: &Summary, format: Format) -> String {
    match format {
        Format::Table => table::render(run, summary),
        Format::Markdown => markdown::render(run, summary),
        Format::Csv => csv::render(summary),
        Format::Json => {
            let doc = serde_json::json!({"run": run, "summary": summary});
            let mut s = serde_json::to_string_pretty(&doc).unwrap_or_default();
            s.push('\n');
            s
        }
    }
}

/// Write the HTML report (rewritten whole each time, so a reload shows the latest).
pub fn write_html(
    path: &Path,
    run: &RunRecord,
    samples: &[Sample],
    errors: &[ErrorRecord],
    summary: &Summary,
) -> anyhow::Result<()> {
    let _ = (run, samples, errors, summary);
    let tmp = path.with_extension("html.tmp");
    std::fs::write(
        &tmp,
        "<!doctype html><title>ctxbench</title><p>HTML report pending</p>",
    )?;
    std::fs::rename(&tmp, path)?;
    Ok(())
}

pub fn run_report(args: ReportArgs) -> anyhow::Result<u8> {
    let file = crate::resultfile::read(&args.file).map_err(|e| anyhow::anyhow!("{e}"))?;
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
    print!("{}", render(run, &summary, args.format));
    if let Some(h) = &args.html {
        write_html(h, run, &file.samples, &file.errors, &summary)?;
    }
    Ok(crate::exit::OK)
}

pub fn run_compare(_args: CompareArgs) -> anyhow::Result<u8> {
    anyhow::bail!("compare: not yet implemented")
}

/// Shared cell formatting: milliseconds, rates, and the flags column.
pub(crate) mod cells {
    use crate::record::{PointSummary, Stat};

    pub fn ms(s: Option<Stat>) -> String {
        s.map(|s| format!("{:.1}", s.median * 1e3))
            .unwrap_or_else(|| "-".into())
    }

    pub fn ms_spread(s: Option<Stat>) -> String {
        match s {
            Some(s) if s.n > 1 => format!(
                "{:.1} ({:.1}–{:.1})",
                s.median * 1e3,
                s.min * 1e3,
                s.max * 1e3
            ),
            other => ms(other),
        }
    }

    pub fn rate(s: Option<Stat>) -> String {
        s.map(|s| format!("{:.0}", s.median))
            .unwrap_or_else(|| "-".into())
    }

    pub fn flags(p: &PointSummary) -> String {
        let mut parts: Vec<String> = p.flags.iter().map(|(k, v)| format!("{k}×{v}")).collect();
        parts.extend(p.errors.iter().map(|(k, v)| format!("err:{k}×{v}")));
        if parts.is_empty() {
            "-".into()
        } else {
            parts.join(" ")
        }
    }

    pub fn prompt(p: &PointSummary) -> String {
        p.prompt_tokens
            .map(|t| t.to_string())
            .unwrap_or_else(|| "-".into())
    }
}
