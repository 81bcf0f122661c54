//! The flags of `ctxbench report` and `ctxbench compare`.

use crate::choices::Format;
use clap::Args;
use std::path::PathBuf;

#[derive(Args, Debug, Clone)]
pub struct ReportArgs {
    /// A result file written by `sweep --out` or `load --out`.
    pub file: PathBuf,
    /// More load files of the same plan (one per client machine): merged by their records.
    pub more: Vec<PathBuf>,
    /// Write a self-contained HTML report here.
    #[arg(long)]
    pub html: Option<PathBuf>,
    #[arg(long, value_enum, default_value = "table")]
    pub format: Format,
}

#[derive(Args, Debug, Clone)]
pub struct CompareArgs {
    pub a: PathBuf,
    pub b: PathBuf,
    /// Draw both runs on the same axes in this HTML file.
    #[arg(long)]
    pub html: Option<PathBuf>,
    #[arg(long, value_enum, default_value = "table")]
    pub format: Format,
}
