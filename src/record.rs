//! The result file's schema (JSONL, schema 1): stable types kept apart from internal ones,
//! so the file format changes only on purpose.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

pub const SCHEMA: u32 = 1;

#[path = "record_load.rs"]
pub mod load;
pub use load::Percentiles;

#[path = "record_accuracy.rs"]
mod accuracy;
pub use accuracy::*;
#[path = "record_spec.rs"]
mod spec;
pub use spec::*;

/// Relative prompt-length error tolerated before `length_mismatch` / `truncated`.
pub const LENGTH_TOLERANCE: f64 = 0.01;

/// One line of a result file.
// One run record per file: boxing it would buy nothing but indirection.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
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
    /// `ctxbench load --telemetry-url`: one scrape of a GPU telemetry exporter.
    GpuMetrics(crate::record::load::GpuMetricsRecord),
    /// `ctxbench load`: one finished cell (length × concurrency or rate).
    Cell(Box<crate::record::load::CellRecord>),
    /// `ctxbench load --find-knee`: one length's knee.
    Knee(crate::record::load::KneeRecord),
    /// `--tasks`: the effective context of one task (or `all`), after the summary.
    EffectiveContext(EffectiveContextRecord),
    /// `ctxbench sessions`: the plan, once after the run record.
    SessionsPlan(crate::sessions::record::SessionsPlanRecord),
    /// `ctxbench sessions`: one turn of one session.
    Turn(Box<crate::sessions::record::TurnRecord>),
    /// `ctxbench sessions`: one finished cell (sessions open at once).
    SessionsCell(Box<crate::sessions::record::SessionsCellRecord>),
    /// `ctxbench sessions`: the capacity found, after the cells.
    SessionCapacity(crate::sessions::record::SessionCapacityRecord),
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct RunRecord {
    pub schema: u32,
    pub tool_version: String,
    pub started_at: String,
    pub target: Target,
    pub config: RunConfig,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct Target {
    /// The server's base URL, credentials removed.
    pub url: String,
    pub api: String,
    pub model: Option<String>,
    /// What `probe` found, as JSON.
    #[serde(default)]
    pub server_info: Value,
    /// What the sweep measured about the target before sampling (absent in older files).
    #[serde(default, flatten)]
    pub checks: TargetChecks,
}

/// Measured properties of the target that decide how samples are checked.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq, Default)]
pub struct TargetChecks {
    /// Tokens the API itself puts ahead of every prompt (template, BOS), measured from the
    /// cached-token counts of probes with different nonces; tolerated in the cache check.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_prefix_tokens: Option<u64>,
    /// Whether the connection adds delay of its own (Nagle on the server), and the figures.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transport: Option<TransportCheck>,
    /// What told this run of the server from the next as the checks were made, where it
    /// exposes something: `--resume` keeps the checks only for the same target, and skips
    /// its warm-up only for the same instance.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instance: Option<Instance>,
}

/// A server's instance marker as recorded (the file's copy of `backend::instance`'s).
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
#[serde(rename_all = "snake_case")]
pub enum Instance {
    /// An id that differs on every start.
    Id(String),
    /// The process start time, Unix seconds.
    StartTime(f64),
    /// A counter that only grows while the process lives.
    Counter(u64),
    /// llama-server's largest slot task id (another growing counter, kept apart).
    TaskId(u64),
}

/// Transport check: tiny requests over fresh and reused connections, HTTP vs TCP round trip.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq, Default)]
pub struct TransportCheck {
    pub tcp_connect_s: Option<f64>,
    pub http_rtt_s: Option<f64>,
    /// Median TTFT of tiny requests over fresh connections (connect time excluded).
    pub fresh_ttft_s: Option<f64>,
    /// The same over reused keep-alive connections.
    pub reused_ttft_s: Option<f64>,
    /// Reused connections are delayed by the transport, not the server.
    pub delayed: bool,
    /// What the delay is and how it is cured, when there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cure: Option<String>,
}

/// Everything that shapes the measurements; `--resume` refuses a file whose config differs
/// (lengths aside).
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
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
    /// How prompts reach the exact length: `token_ids`, `tokenized_text`, `probed_text` or
    /// `calibrated_text`.
    pub prompt_mode: String,
    /// Round-trip time to the server before the sweep (median of a few `/health`-like calls).
    pub rtt_s: Option<f64>,
    /// The built-in simulator's settings, when it was the target (its port changes per run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub simulator: Option<String>,
    /// `sweep --depth`: the depths, the turn size and the reuse hints sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub depth: Option<DepthConfig>,
    /// What the prompts are made of, in one line (filler, a corpus, a dataset).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub content: Option<String>,
    /// `--tasks`: the tasks graded, in order.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tasks: Vec<String>,
    /// `--tasks`: graded samples per length and task.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub samples: Option<u32>,
    /// `--tasks`: the effective-context threshold as given (`0.85`, `abs:0.8`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accuracy_threshold: Option<String>,
    /// Graded prompts (`--tasks`, `--needle`): `chat` (the server's chat template) or `raw`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt_style: Option<String>,
}

/// How a depth run (`sweep --depth`) was set up.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct DepthConfig {
    pub depths: Vec<u64>,
    pub turn_tokens: u64,
    /// Hints set so that the server reuses the prefix (e.g. llama.cpp `cache_prompt=true`).
    pub reuse_hints: Vec<String>,
    /// `server_counts` when the server reports cached tokens, else `timing`.
    pub reuse_evidence: String,
}

/// One measured request (or one two-point pair).
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq, Default)]
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
    /// Where per-event token counts came from: `server` (its own counts per event) or
    /// `derived` (the total spread evenly over the arrivals; no per-event figure is kept).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub event_counts: Option<String>,
    /// Whether the (last) request opened a new connection rather than reusing one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub new_connection: Option<bool>,
    /// That new connection's connect time, seconds (not part of TTFT).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub connect_s: Option<f64>,
    pub valid: bool,
    pub flags: Vec<Flag>,
    pub needle: Option<NeedleResult>,
    /// `--tasks`: the graded task this sample carried.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task: Option<TaskResult>,
    pub server_timings: Option<Value>,
    /// `sweep --depth`: tokens of the cached prefix this turn sits on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub depth_tokens: Option<u64>,
    /// `sweep --depth`: tokens of the fresh suffix (the turn).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn_tokens: Option<u64>,
    /// Which parts of the corpus or dataset the prompt's body came from (none for filler).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<SourceRecord>,
    /// Speculative decoding: the acceptance that produced this sample's decode rate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec: Option<SpecStats>,
}

/// Where a prompt's body came from: spans of the content's documents, in the order used.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct SourceRecord {
    /// `tokens` (ids from the server's tokenizer) or `pieces` (words with their whitespace).
    pub unit: String,
    pub spans: Vec<DocSpan>,
}

impl SourceRecord {
    /// A depth turn's source: the prefix's spans, then the suffix's.
    pub fn joined(a: Option<&SourceRecord>, b: Option<&SourceRecord>) -> Option<SourceRecord> {
        let unit = a.or(b)?.unit.clone();
        let spans = a
            .into_iter()
            .chain(b)
            .flat_map(|s| s.spans.clone())
            .collect();
        Some(SourceRecord { unit, spans })
    }
}

/// Units `[start, end)` of one document (a corpus file, or a dataset entry).
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct DocSpan {
    pub doc: String,
    pub start: u64,
    pub end: u64,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct ErrorRecord {
    pub context_tokens: u64,
    pub rep: u32,
    pub kind: String,
    pub message: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub method: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq, Default)]
pub struct Summary {
    pub points: Vec<PointSummary>,
    /// Fitted scaling laws, when enough points exist.
    #[serde(default)]
    pub fit: Value,
    /// Notes a reader must see (truncation onset, cache hits inferred from timing, …).
    #[serde(default)]
    pub notes: Vec<String>,
    /// `sweep --depth`: per depth, the warm turn beside the cold figures at the same length.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub depth: Vec<DepthPoint>,
    /// `--tasks`: accuracy per task over every length (and `all`).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub accuracy: Accuracy,
}

/// One depth of a `sweep --depth` run: a turn of `turn_tokens` on a cached prefix of
/// `depth_tokens`, beside a cold request of the same total length.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq, Default)]
pub struct DepthPoint {
    pub depth_tokens: u64,
    pub turn_tokens: u64,
    pub attempts: usize,
    pub n_valid: usize,
    pub n_failed: usize,
    #[serde(default)]
    pub flags: std::collections::BTreeMap<String, usize>,
    /// Median cached tokens the server reported for the turns (≈ depth when reused).
    pub cached_tokens: Option<u64>,
    /// TTFT of the turn.
    pub ttft_s: Option<Stat>,
    /// Marginal prefill rate: suffix tokens / TTFT of the turn.
    pub prefill_tps: Option<Stat>,
    /// Decode rate at depth + suffix.
    pub decode_tps: Option<Stat>,
    /// The cold request at depth + suffix tokens, measured in the same run.
    pub cold_ttft_s: Option<Stat>,
    pub cold_prefill_tps: Option<Stat>,
    pub cold_decode_tps: Option<Stat>,
    /// Median cold TTFT / median turn TTFT: what the cache saves, as one ratio.
    pub ttft_speedup: Option<f64>,
}

/// Median and spread of one metric: defined in `stats`, which computes it; a record field.
pub use crate::stats::Stat;

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq, Default)]
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
    /// `--tasks`: accuracy per task at this length (and `all`).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub accuracy: Accuracy,
    /// `--tasks`: accuracy by fact depth at this length, all tasks together.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub accuracy_by_depth: Vec<DepthAccuracy>,
    /// Speculative decoding: decode tokens per verification step ((output − 1) / verify
    /// steps), over the streamed valid samples of `spec_source` (one sample, one value:
    /// the per-request distribution).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accept_length: Option<Stat>,
    /// Accepted / drafted tokens, where the source counts drafts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accept_rate: Option<Stat>,
    /// Where `accept_length` came from (`events_proxy` is a proxy, shown as such).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec_source: Option<SpecSource>,
    /// Median of the server's own stated acceptance length over the same samples, by its
    /// own definition (see `SpecStats::server_accept_length`), shown beside ours.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_accept_length: Option<f64>,
}

/// Declares the sample flags once: variant, on-disk name, former constant, whether it
/// invalidates the sample. A new flag is one line in the table below.
macro_rules! flags {
    ($($variant:ident = $name:literal, $constant:ident, invalidates: $inv:literal;)*) => {
        /// A sample flag: what went wrong with, or is notable about, one sample. On disk each
        /// is its snake_case name (the file format predates the enum and does not change).
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema)]
        pub enum Flag {
            $(#[serde(rename = $name)] $variant,)*
        }

        impl Flag {
            pub const ALL: &[Flag] = &[$(Flag::$variant),*];

            /// The name written to result files and shown in reports.
            pub fn name(self) -> &'static str {
                match self {
                    $(Flag::$variant => $name,)*
                }
            }

            /// Whether the flag corrupts a timing metric, so a sample carrying it is
            /// `valid:false`.
            pub fn invalidates(self) -> bool {
                match self {
                    $(Flag::$variant => $inv,)*
                }
            }
        }

        /// The flags under their former constant names, kept for one release so code
        /// written against the string constants still compiles
        /// (`s.flags.push(flag::TRUNCATED)`).
        pub mod flag {
            pub use super::Flag;
            $(pub const $constant: Flag = Flag::$variant;)*

            /// See [`Flag::invalidates`].
            pub fn invalidates(flag: Flag) -> bool {
                flag.invalidates()
            }
        }
    };
}

// `flush_failed` alone does not invalidate: the cached-token check still verifies the sample.
flags! {
    CacheHit = "cache_hit", CACHE_HIT, invalidates: true;
    CacheHitInferred = "cache_hit_inferred", CACHE_HIT_INFERRED, invalidates: true;
    EarlyStop = "early_stop", EARLY_STOP, invalidates: true;
    Truncated = "truncated", TRUNCATED, invalidates: true;
    LengthMismatch = "length_mismatch", LENGTH_MISMATCH, invalidates: true;
    TwoPointInverted = "two_point_inverted", TWO_POINT_INVERTED, invalidates: true;
    NeedleFailed = "needle_failed", NEEDLE_FAILED, invalidates: false;
    FlushFailed = "flush_failed", FLUSH_FAILED, invalidates: false;
    Outlier = "outlier", OUTLIER, invalidates: false;
    ServerRestarted = "server_restarted", SERVER_RESTARTED, invalidates: true;
    NoUsage = "no_usage", NO_USAGE, invalidates: false;
    // The server (re)loaded the model during the request (Ollama's `load_duration`).
    ModelReload = "model_reload", MODEL_RELOAD, invalidates: true;
    // Measured over a reused connection to a server whose small writes wait for the
    // client's delayed ACK (Nagle on): TTFT holds ~40 ms that is not the server's.
    TransportDelay = "transport_delay", TRANSPORT_DELAY, invalidates: true;
    // A depth turn whose prefix was not served from cache (evicted or not reused).
    PrefixMiss = "prefix_miss", PREFIX_MISS, invalidates: true;
    // As `prefix_miss`, judged from timing where the server reports no cached tokens.
    PrefixMissInferred = "prefix_miss_inferred", PREFIX_MISS_INFERRED, invalidates: true;
    // The request that put a depth prefix in the cache: recorded, never a result.
    Priming = "priming", PRIMING, invalidates: true;
}

impl std::fmt::Display for Flag {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// So `flags.iter().any(|f| f == flag::X)` reads as it did when flags were strings.
impl PartialEq<Flag> for &Flag {
    fn eq(&self, other: &Flag) -> bool {
        **self == *other
    }
}

impl Sample {
    /// Add a flag (once); an invalidating flag clears `valid`. The only way flags are
    /// added after a sample is built, so `valid` never disagrees with them.
    pub fn push_flag(&mut self, f: Flag) {
        if !self.flags.contains(&f) {
            self.flags.push(f);
        }
        if f.invalidates() {
            self.valid = false;
        }
    }

    /// Whether the sample is valid: every timing metric it needs is present and no flag
    /// corrupts one. Set once when a sample is built; `push_flag` keeps it in step.
    pub fn derive_valid(&self) -> bool {
        !self.flags.iter().any(|f| f.invalidates())
            && self.ttft_s.is_some()
            && (self.decode_tps.is_some() || self.output_tokens.unwrap_or(0) <= 1)
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A sample line as written before flags were an enum (every flag name of schema 1).
    const OLD_SAMPLE_LINE: &str = r#"{"type":"sample","context_tokens":1024,"prompt_tokens":1030,"cached_tokens":0,"output_tokens":64,"method":"stream","rep":0,"ttft_s":0.1,"e2e_s":0.5,"prefill_tps":10300.0,"decode_tps":160.0,"itl_p50_s":0.006,"itl_p99_s":0.01,"tokens_per_event_mean":1.0,"valid":false,"flags":["cache_hit","cache_hit_inferred","early_stop","truncated","length_mismatch","two_point_inverted","needle_failed","flush_failed","outlier","server_restarted","no_usage"],"needle":null,"server_timings":null}"#;

    #[test]
    fn old_files_read_and_write_identically() {
        let r: Record = serde_json::from_str(OLD_SAMPLE_LINE).unwrap();
        let Record::Sample(s) = &r else {
            panic!("{r:?}")
        };
        // The first flags of the table are those of the first release; newer ones follow.
        assert_eq!(s.flags, Flag::ALL[..11]);
        assert_eq!(r.to_line(), format!("{OLD_SAMPLE_LINE}\n"));
    }

    #[test]
    fn each_flag_is_its_name_on_disk() {
        for &f in Flag::ALL {
            let json = serde_json::to_string(&f).unwrap();
            assert_eq!(json, format!("\"{}\"", f.name()));
            assert_eq!(serde_json::from_str::<Flag>(&json).unwrap(), f);
            assert_eq!(f.to_string(), f.name());
        }
        assert!(serde_json::from_str::<Flag>("\"no_such_flag\"").is_err());
    }

    #[test]
    fn push_flag_keeps_valid_in_step_with_the_flags() {
        let mut s = Sample {
            ttft_s: Some(0.1),
            decode_tps: Some(100.0),
            ..Sample::default()
        };
        s.valid = s.derive_valid();
        assert!(s.valid);
        s.push_flag(Flag::FlushFailed);
        assert!(s.valid, "flush_failed alone does not invalidate");
        s.push_flag(Flag::CacheHitInferred);
        s.push_flag(Flag::CacheHitInferred);
        assert!(!s.valid);
        assert_eq!(s.flags, [Flag::FlushFailed, Flag::CacheHitInferred]);
        assert_eq!(s.valid, s.derive_valid());
    }
}
