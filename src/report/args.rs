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
    /// Load files: compare only the cells of this configuration, KNOB=VALUE (repeatable;
    /// max-running, pool, chunk, time-scale). `twin whatif --out` writes every
    /// configuration into one file; a measured file is one configuration and is read
    /// whole. E.g. `compare measured-np2.jsonl whatif.jsonl --config max-running=2`.
    #[arg(long, value_name = "KNOB=VALUE")]
    pub config: Vec<String>,
}
