//! The result file's schema (JSONL, schema 1): stable types kept apart from internal ones,
//! so the file format changes only on purpose.

use serde::{Deserialize, Serialize};
use serde_json::Value;

pub const SCHEMA: u32 = 1;

#[path = "record_load.rs"]
pub mod load;
pub use load::Percentiles;

/// One line of a result file.
// One run record per file: boxing it would buy nothing but indirection.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum Record {
    Run(RunRecord),
    Sample(Box<Sample>),
    Error(ErrorRecord),
    Summary(Summary),
    /// `ctxbench load`: the plan, once after the run record.
    LoadPlan(crate::record::load::LoadPlan),
    /// `ctxbench load`: one request.
    Request(Box<crate::record::load::RequestRecord>),
    /// `ctxbench load`: one scrape of the server's `/metrics`.
    ServerMetrics(crate::record::load::ServerMetricsRecord),
    /// `ctxbench load`: one finished cell (length × concurrency or rate).
    Cell(Box<crate::record::load::CellRecord>),
    /// `ctxbench load --find-knee`: one length's knee.
    Knee(crate::record::load::KneeRecord),
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RunRecord {
    pub schema: u32,
    pub tool_version: String,
    pub started_at: String,
    pub target: Target,
    pub config: RunConfig,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Target {
    /// The server's base URL, credentials removed.
    pub url: String,
    pub api: String,
    pub model: Option<String>,
    /// What `probe` found, as JSON.
    #[serde(default)]
    pub server_info: Value,
}

/// Everything that shapes the measurements; `--resume` refuses a file whose config differs
/// (lengths aside).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct RunConfig {
    pub lengths: Vec<u64>,
    pub output_tokens: u64,
    pub reps: u32,
    pub method: String,
    pub cache_bust: String,
    pub needle: bool,
    #[serde(default)]
    pub needle_depths: Vec<f64>,
    pub timeout: String,
    pub seed: u64,
    /// How prompts reach the exact length: `token_ids`, `tokenized_text` or `calibrated_text`.
    pub prompt_mode: String,
    /// Round-trip time to the server before the sweep (median of a few `/health`-like calls).
    pub rtt_s: Option<f64>,
    /// The built-in simulator's settings, when it was the target (its port changes per run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub simulator: Option<String>,
}

/// One measured request (or one two-point pair).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct Sample {
    pub context_tokens: u64,
    pub prompt_tokens: Option<u64>,
    pub cached_tokens: Option<u64>,
    pub output_tokens: Option<u64>,
    /// `stream` or `two-point`.
    pub method: String,
    pub rep: u32,
    pub ttft_s: Option<f64>,
    pub e2e_s: Option<f64>,
    pub prefill_tps: Option<f64>,
    pub decode_tps: Option<f64>,
    pub itl_p50_s: Option<f64>,
    pub itl_p99_s: Option<f64>,
    pub tokens_per_event_mean: Option<f64>,
    pub valid: bool,
    pub flags: Vec<String>,
    pub needle: Option<NeedleResult>,
    pub server_timings: Option<Value>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct NeedleResult {
    pub depth: f64,
    pub expected: String,
    pub answer: String,
    pub ok: bool,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ErrorRecord {
    pub context_tokens: u64,
    pub rep: u32,
    pub kind: String,
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub method: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct Summary {
    pub points: Vec<PointSummary>,
    /// Fitted scaling laws, when enough points exist.
    #[serde(default)]
    pub fit: Value,
    /// Notes a reader must see (truncation onset, cache hits inferred from timing, …).
    #[serde(default)]
    pub notes: Vec<String>,
}

/// Median and spread of one metric over the valid samples of a point.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
pub struct Stat {
    pub median: f64,
    pub min: f64,
    pub max: f64,
    pub p10: f64,
    pub p90: f64,
    pub n: usize,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq, Default)]
pub struct PointSummary {
    pub context_tokens: u64,
    pub prompt_tokens: Option<u64>,
    pub attempts: usize,
    pub n_valid: usize,
    pub n_failed: usize,
    /// Failures by kind.
    #[serde(default)]
    pub errors: std::collections::BTreeMap<String, usize>,
    /// Flags seen on this point's samples, with counts.
    #[serde(default)]
    pub flags: std::collections::BTreeMap<String, usize>,
    pub ttft_s: Option<Stat>,
    pub prefill_tps: Option<Stat>,
    pub decode_tps: Option<Stat>,
    pub itl_p50_s: Option<Stat>,
    pub itl_p99_s: Option<Stat>,
    pub e2e_s: Option<Stat>,
    /// Two-point decode rate, when measured.
    pub two_point_decode_tps: Option<Stat>,
    /// Median client TTFT minus server-reported prefill time.
    pub ttft_minus_server_s: Option<f64>,
    /// Median client decode time minus server-reported decode time.
    pub decode_minus_server_s: Option<f64>,
    /// Samples whose TTFT is an outlier by median/MAD.
    pub outliers: usize,
    #[serde(default)]
    pub needle: Vec<NeedleCell>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct NeedleCell {
    pub depth: f64,
    pub passed: usize,
    pub total: usize,
}

/// Sample flags. Strings on disk; constants here so a typo is a compile error.
pub mod flag {
    pub const CACHE_HIT: &str = "cache_hit";
    pub const CACHE_HIT_INFERRED: &str = "cache_hit_inferred";
    pub const EARLY_STOP: &str = "early_stop";
    pub const TRUNCATED: &str = "truncated";
    pub const LENGTH_MISMATCH: &str = "length_mismatch";
    pub const TWO_POINT_INVERTED: &str = "two_point_inverted";
    pub const NEEDLE_FAILED: &str = "needle_failed";
    pub const FLUSH_FAILED: &str = "flush_failed";
    pub const OUTLIER: &str = "outlier";
    pub const SERVER_RESTARTED: &str = "server_restarted";
    pub const NO_USAGE: &str = "no_usage";

    /// Flags that corrupt a timing metric: a sample carrying one is `valid:false`.
    /// (`flush_failed` alone does not: the cached-token check still verifies the sample.)
    pub fn invalidates(flag: &str) -> bool {
        matches!(
            flag,
            CACHE_HIT
                | CACHE_HIT_INFERRED
                | EARLY_STOP
                | TRUNCATED
                | LENGTH_MISMATCH
                | TWO_POINT_INVERTED
                | SERVER_RESTARTED
        )
    }
}

impl Record {
    pub fn to_line(&self) -> String {
        // Serialising these types cannot fail: no maps with non-string keys, no NaN panics.
        let mut s = serde_json::to_string(self).expect("record serialises");
        s.push('\n');
        s
    }
}
