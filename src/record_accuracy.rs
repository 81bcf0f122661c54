//! Accuracy records (`--tasks`, `--needle`): graded samples, accuracy per task and depth,
//! and the effective context, kept apart from the timing records they ride on.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// `--tasks`: one graded sample's task, expected strings, graded answer and score.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct TaskResult {
    /// `niah`, `multikey`, `multivalue`, `vt`, `cwe` or `qa`.
    pub name: String,
    pub expected: Vec<String>,
    /// The start of the output that was graded (see docs/accuracy.md).
    pub answer: String,
    /// Share of the expected strings in the answer, case-insensitive (qa: 1 if any is).
    pub score: f64,
    /// Where the task's (first) fact sits, as a fraction of the haystack.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub depth: Option<f64>,
}

/// Accuracy of one task over some samples: `correct` sums the scores (partial scores
/// count their share), `rate` = correct / total, `ci95` the Wilson interval.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct AccuracyCell {
    pub correct: f64,
    pub total: u64,
    pub rate: f64,
    pub ci95: [f64; 2],
}

/// Accuracy by task name (and `all`).
pub type Accuracy = std::collections::BTreeMap<String, AccuracyCell>;

/// The longest length at which a task (or `all`) and every shorter length score at least
/// the threshold.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct EffectiveContextRecord {
    pub task: String,
    /// 0 when even the shortest length misses the threshold.
    pub tokens: u64,
    /// The rate a length had to reach.
    pub threshold: f64,
    /// The rate at the shortest length.
    pub baseline_rate: f64,
    /// `relative` (a factor of the baseline) or `absolute`.
    pub threshold_kind: String,
    /// The longest length measured.
    pub longest_tokens: u64,
    /// Why accuracy stops where it does: `accuracy` (the model), `truncation` (the server
    /// cut the prompts at the first failing length), or `none` (every length passed).
    pub limited_by: String,
    /// The haystack the items were hidden in (filler, a corpus, a dataset).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub haystack: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct NeedleResult {
    pub depth: f64,
    pub expected: String,
    pub answer: String,
    pub ok: bool,
}

/// Accuracy of the samples whose (first) fact sat at one depth.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct DepthAccuracy {
    pub depth: f64,
    #[serde(flatten)]
    pub accuracy: AccuracyCell,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct NeedleCell {
    pub depth: f64,
    pub passed: usize,
    pub total: usize,
}
