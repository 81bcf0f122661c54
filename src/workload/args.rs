//! The content flags `sweep` and `load` share: what prompts are made of.

use clap::Args;
use std::path::PathBuf;

/// What prompts are made of, for `sweep` and `load`: filler by default, or real text.
#[derive(Args, Debug, Clone, Default)]
pub struct ContentArgs {
    /// Build prompts from real text: a file, a folder (read recursively; binary files are
    /// skipped and named), or builtin:prose, builtin:code, builtin:mixed. Each prompt is a
    /// fresh span of it, nonce first, exact length. Under speculative decoding acceptance
    /// depends on the text: decode tok/s on filler is not what users get.
    /// Example: --corpus ./docs   or   --corpus builtin:code
    #[arg(long, value_name = "PATH|builtin:NAME", conflicts_with = "dataset")]
    pub corpus: Option<String>,
    /// Build prompts from a dataset's entries (an entry shorter than the length is padded
    /// with the next ones, a longer one cut at a token boundary): JSONL with `prompt` or
    /// `text`, ShareGPT (`conversations`, first human turn) or LongBench (`context` + `input`).
    /// Example: --dataset sharegpt.json --dataset-format sharegpt
    #[arg(long, value_name = "FILE")]
    pub dataset: Option<PathBuf>,
    /// The dataset's format (detected from its first record when not given).
    #[arg(long, value_enum, requires = "dataset")]
    pub dataset_format: Option<crate::workload::content::DatasetFormat>,
}
