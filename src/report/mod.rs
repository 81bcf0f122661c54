//! Rendering results: pure functions of records (table, json, csv, markdown, html).

pub mod accuracy;
pub mod args;
pub mod compare;
pub mod csv;
pub mod depth;
pub mod escape;
pub mod html;
pub mod markdown;
pub mod numbers;
pub mod plot;
pub mod spec;
pub mod table;

use crate::choices::Format;
use crate::record::{ErrorRecord, RunRecord, Sample, Summary};
use std::path::Path;

/// The summary in the requested format.
pub fn render(run: &RunRecord, summary: &Summary, format: Format) -> String {
    match format {
        Format::Table => table::render(run, summary),
        Format::Markdown => markdown::render(run, summary),
        Format::Csv => csv::render(summary),
        Format::Json => {
            let effective = accuracy::effective_records(run, summary);
            let doc = match effective.is_empty() {
                true => serde_json::json!({"run": run, "summary": summary}),
                false => serde_json::json!({
                    "run": run,
                    "summary": summary,
                    "effective_context": effective,
                }),
            };
            let mut s = serde_json::to_string_pretty(&doc).unwrap_or_default();
            s.push('\n');
            s
        }
    }
}

/// Write the HTML report (rewritten whole each time, so a reload shows the latest; written
/// to a temporary file and renamed, so a reader never sees half a page).
pub fn write_html(
    path: &Path,
    run: &RunRecord,
    samples: &[Sample],
    errors: &[ErrorRecord],
    summary: &Summary,
) -> anyhow::Result<()> {
    write_atomic(path, &html::render(run, samples, errors, summary))
}

/// Replace `path` with `contents` atomically: a temporary file beside it, then a rename.
pub fn write_atomic(path: &Path, contents: &str) -> anyhow::Result<()> {
    let name = path.file_name().ok_or_else(|| {
        anyhow::anyhow!("{}: not a file path; name an .html file", path.display())
    })?;
    let mut tmp_name = std::ffi::OsString::from(".");
    tmp_name.push(name);
    tmp_name.push(format!(".tmp{}", std::process::id()));
    let tmp = path.with_file_name(tmp_name);
    std::fs::write(&tmp, contents).map_err(|e| {
        anyhow::anyhow!(
            "writing {}: {e}; check that the directory exists and is writable",
            tmp.display()
        )
    })?;
    std::fs::rename(&tmp, path).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        anyhow::anyhow!(
            "replacing {}: {e}; check that it is not a directory",
            path.display()
        )
    })
}

/// Shared cell formatting: milliseconds, rates, and the flags column.
pub(crate) mod cells {
    use crate::record::{PointSummary, Stat};

    pub fn ms(s: Option<Stat>) -> String {
        s.map(|s| format!("{:.1}", s.median * 1e3))
            .unwrap_or_else(|| "-".into())
    }

    /// Seconds as milliseconds, signed, two decimals (client-minus-server gaps).
    pub fn ms_delta(s: Option<f64>) -> String {
        s.map(|s| format!("{:+.2}", s * 1e3))
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

/// The needle depths any point ran, ascending, once each.
pub fn needle_depths(summary: &Summary) -> Vec<f64> {
    let mut depths: Vec<f64> = summary
        .points
        .iter()
        .flat_map(|p| p.needle.iter().map(|c| c.depth))
        .collect();
    depths.sort_by(f64::total_cmp);
    depths.dedup();
    depths
}
