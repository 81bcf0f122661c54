//! Rendering results: pure functions of records (table, json, csv, markdown, html).

use crate::cli::{CompareArgs, ReportArgs};

pub fn run_report(_args: ReportArgs) -> anyhow::Result<u8> {
    anyhow::bail!("report: not yet implemented")
}

pub fn run_compare(_args: CompareArgs) -> anyhow::Result<u8> {
    anyhow::bail!("compare: not yet implemented")
}
