//! Load-file records (`ctxbench load`): per request, per scrape, per cell, per knee. Added
//! beside the sweep's records so old files read unchanged.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;

/// p50/p90/p99 (and mean, max, count) of one quantity.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct Percentiles {
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub mean: f64,
    pub max: f64,
    pub n: u64,
}

/// Latency bounds a request must meet to count toward goodput.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct Slo {
    pub ttft_s: Option<f64>,
    pub tpot_s: Option<f64>,
    pub e2e_s: Option<f64>,
}

/// The load plan, so that `report` can merge files of the same plan and `--resume` can
/// refuse a different one.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct LoadPlan {
    /// `closed`, `open` or `knee`.
    pub mode: String,
    pub lengths: Vec<u64>,
    #[serde(default)]
    pub concurrency: Vec<u32>,
    #[serde(default)]
    pub rates: Vec<f64>,
    pub arrival: Option<String>,
    pub max_concurrency: Option<u32>,
    pub requests: Option<u64>,
    pub duration_s: Option<f64>,
    pub output_tokens: u64,
    pub slo: Slo,
    pub goodput_target: f64,
    pub seed: u64,
    /// Which shard of the plan this file holds (`--shard I/N`); not part of the plan's hash.
    #[serde(default, flatten, skip_serializing_if = "Option::is_none")]
    pub shard: Option<ShardTag>,
    /// `--start-at`: when the first cell was to start and the clock offset measured for
    /// it; not part of the plan's hash.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start: Option<StartSync>,
    /// `load --trace`: how the trace was replayed (mode `trace`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<TracePlan>,
    /// `--price-per-hour`: what the server under test costs, US dollars per hour, all its
    /// accelerators included; cells turn it into dollars per million tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub price_per_hour: Option<f64>,
}

/// The hash of a load plan as run unsharded (64-bit FNV-1a of its canonical JSON), written
/// as 16 hex digits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PlanHash(pub u64);

impl std::fmt::Display for PlanHash {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:016x}", self.0)
    }
}

impl Serialize for PlanHash {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for PlanHash {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        u64::from_str_radix(&s, 16)
            .ok()
            .filter(|_| s.len() == 16)
            .map(PlanHash)
            .ok_or_else(|| serde::de::Error::custom(format!("plan_hash `{s}`: not 16 hex digits")))
    }
}

impl JsonSchema for PlanHash {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "PlanHash".into()
    }

    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "description": "The hash of a load plan as run unsharded: 16 hex digits.",
            "type": "string",
            "pattern": "^[0-9a-fA-F]{16}$"
        })
    }
}

/// What every record of a sharded run carries: which shard, of how many, of which plan.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, JsonSchema, PartialEq, Eq)]
pub struct ShardTag {
    /// 0-based, as `JOB_COMPLETION_INDEX`.
    pub shard: u32,
    pub shards: u32,
    pub plan_hash: PlanHash,
}

/// `--start-at`: the agreed start and this client's clock against the server's.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct StartSync {
    /// RFC 3339, UTC.
    pub start_at: String,
    /// Server clock − this client's clock, from the server's `Date` header; null when the
    /// server sent none (the local clock was used).
    pub clock_offset_s: Option<f64>,
    /// Half the interval the offset is known within.
    pub clock_offset_uncertainty_s: Option<f64>,
}

/// How a trace was replayed, and what the report needs to judge its hits.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq, Default)]
pub struct TracePlan {
    pub file: String,
    /// `mooncake` or `jsonl`.
    pub format: String,
    pub block_tokens: u64,
    pub time_scale: f64,
    pub limit: Option<u64>,
    pub window: Option<String>,
    /// Requests replayed (after the window and the limit).
    pub requests: u64,
    /// The server's cache page, tokens (1 when it does not say): possible hits are whole pages.
    pub page_tokens: u64,
    /// Distinct prompt tokens of the replayed requests: what a cache must hold to miss
    /// nothing the trace shares.
    pub working_set_tokens: u64,
    /// The server's KV pool, tokens, when it says.
    pub kv_pool_tokens: Option<u64>,
    /// What block contents are made of (filler, or the content's label).
    pub content: String,
}

/// A replayed trace request: where it came from and what its sharing makes possible.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq, Default)]
pub struct TraceRequestInfo {
    /// Line in the trace file.
    pub line: usize,
    /// The trace's own time of the request, seconds since the first replayed one (unscaled).
    pub trace_s: f64,
    /// Its prefix group (`trace::groups`: 0, 1, … in order of each group's first request);
    /// a sharded replay keeps each group on one shard.
    pub group: u64,
    pub input_length: u64,
    pub output_length: u64,
    /// Leading blocks an earlier replayed request shared.
    pub shared_blocks: u32,
    pub shared_tokens: u64,
    /// Cached tokens the trace makes possible: `shared_tokens`, at most input − 1, in
    /// whole cache pages.
    pub possible_cached_tokens: u64,
    /// Fewer output tokens than `output_length` came back.
    #[serde(default)]
    pub early_stop: bool,
    /// An agent trace's session, and the request's turn in it (1-based): it was sent after
    /// the session's previous turn ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_id: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn: Option<u32>,
    /// The cached tokens the trace recorded in production (`azure-agent`), beside what this
    /// replay made possible and what the server reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub recorded_cached_tokens: Option<u64>,
}

/// Which cell a record belongs to: a length and either a concurrency or a rate.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, JsonSchema, PartialEq, Default)]
pub struct CellKey {
    pub context_tokens: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub concurrency: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rate: Option<f64>,
}

impl CellKey {
    pub fn same(&self, other: &CellKey) -> bool {
        self.context_tokens == other.context_tokens
            && self.concurrency == other.concurrency
            && self.rate.map(f64::to_bits) == other.rate.map(f64::to_bits)
    }

    /// `c=8` or `r=2/s`.
    pub fn load_label(&self) -> String {
        match (self.concurrency, self.rate) {
            (Some(c), _) => format!("c={c}"),
            (_, Some(r)) => format!("r={r}/s"),
            _ => "trace".into(),
        }
    }
}

#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct RequestFailure {
    pub kind: String,
    pub message: String,
}

/// One request of a load cell. Times are seconds; `*_s` offsets are from the cell's start.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq, Default)]
pub struct RequestRecord {
    #[serde(flatten)]
    pub cell: CellKey,
    /// Send order within the cell.
    pub index: u64,
    /// When it should have been sent (open loop); equal to `sent_s` in a closed loop.
    pub scheduled_s: f64,
    pub sent_s: f64,
    /// From the actual send.
    pub ttft_s: Option<f64>,
    /// From the scheduled send: what a user arriving on schedule waited.
    pub ttft_from_schedule_s: Option<f64>,
    /// (E2E − TTFT) / (output − 1).
    pub tpot_s: Option<f64>,
    pub e2e_s: Option<f64>,
    pub e2e_from_schedule_s: Option<f64>,
    /// When it ended (success or failure), from the cell's start.
    pub ended_s: Option<f64>,
    /// Per arrival (stream event after the first): the gap divided over its tokens.
    #[serde(default)]
    pub itl_s: Vec<f64>,
    pub prompt_tokens: Option<u64>,
    pub cached_tokens: Option<u64>,
    pub output_tokens: Option<u64>,
    /// Whether the request went over a kept-alive connection; null when the HTTP client
    /// does not say.
    pub conn_reused: Option<bool>,
    pub ok: bool,
    pub error: Option<RequestFailure>,
    pub server_timings: Option<Value>,
    /// Which parts of the corpus or dataset the prompt's body came from (none for filler).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<crate::record::SourceRecord>,
    /// Speculative decoding: the acceptance of this request (as on sweep samples).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec: Option<crate::record::SpecStats>,
    /// `load --tasks`: the graded task this request carried.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task: Option<crate::record::TaskResult>,
    /// Sharded runs: which shard sent it.
    #[serde(default, flatten, skip_serializing_if = "Option::is_none")]
    pub shard: Option<ShardTag>,
    /// `load --trace`: the trace request this was.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trace: Option<TraceRequestInfo>,
}

impl RequestRecord {
    pub fn timed_out(&self) -> bool {
        self.error.as_ref().is_some_and(|e| e.kind == "timeout")
    }
}

/// One scrape of the server's Prometheus metrics, beside the client's in-flight count.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq, Default)]
pub struct ServerMetricsRecord {
    #[serde(flatten)]
    pub cell: CellKey,
    /// Since the cell's start.
    pub t_s: f64,
    pub client_in_flight: u64,
    #[serde(flatten)]
    pub server: ServerReading,
    #[serde(default, flatten, skip_serializing_if = "Option::is_none")]
    pub shard: Option<ShardTag>,
}

/// What one scrape of the server's metrics says; a field is `None` when the server does
/// not export it.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq, Default)]
pub struct ServerReading {
    pub running: Option<f64>,
    pub waiting: Option<f64>,
    /// KV-cache usage, 0..1.
    pub kv_usage: Option<f64>,
    /// Cumulative since server start.
    pub preemptions_total: Option<f64>,
    pub prefix_cache_hits_total: Option<f64>,
    pub prefix_cache_queries_total: Option<f64>,
}

impl ServerReading {
    pub fn is_empty(&self) -> bool {
        *self == ServerReading::default()
    }
}

/// One scrape of a GPU telemetry exporter (`--telemetry-url`, DCGM's Prometheus text),
/// or why it gave nothing.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq, Default)]
pub struct GpuMetricsRecord {
    #[serde(flatten)]
    pub cell: CellKey,
    /// The middle of the scrape (between sending it and the answer), since the cell's start.
    pub t_s: f64,
    /// The exporter's URL, credentials removed.
    pub source: String,
    /// One reading per GPU the exporter listed; empty when `error` says why.
    #[serde(default)]
    pub gpus: Vec<GpuReading>,
    /// Why this scrape gave no reading: the exporter unreachable, an HTTP error, text
    /// without any of the DCGM metrics read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    #[serde(default, flatten, skip_serializing_if = "Option::is_none")]
    pub shard: Option<ShardTag>,
}

/// One GPU in one telemetry scrape; a field is `None` when the exporter does not export it.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq, Default)]
pub struct GpuReading {
    /// The GPU's `gpu` label (its index), else its `UUID`, else its order in the text.
    pub gpu: String,
    /// `DCGM_FI_DEV_POWER_USAGE`, watts.
    pub power_w: Option<f64>,
    /// `DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION`, millijoules since the driver loaded.
    pub energy_mj: Option<f64>,
    /// `DCGM_FI_DEV_GPU_UTIL`, percent.
    pub util_pct: Option<f64>,
    /// `DCGM_FI_DEV_FB_USED`, MiB.
    pub fb_used_mib: Option<f64>,
}

/// How a cell's GPU energy was found.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, JsonSchema, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum EnergySource {
    /// The exporters' energy counters, their change over the steady window.
    Counter,
    /// Power integrated over the window (trapezoids between scrapes): the exporter exports
    /// no energy counter, or its counter went backwards.
    PowerIntegral,
}

/// What the GPU telemetry said over a cell's steady window (every exporter's GPUs together).
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq, Default)]
pub struct GpuCell {
    /// Telemetry scrapes in the cell (all exporters), and those that failed.
    pub scrapes: u64,
    pub failed_scrapes: u64,
    /// GPUs seen.
    pub gpus: u64,
    /// Energy used by all GPUs over the steady window, joules.
    pub energy_j: Option<f64>,
    pub energy_source: Option<EnergySource>,
    /// Largest framebuffer in use on any GPU, MiB.
    pub fb_used_max_mib: Option<f64>,
}

/// What the server's metrics said over a cell.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq, Default)]
pub struct ServerCell {
    pub scrapes: u64,
    pub running_max: Option<f64>,
    pub waiting_max: Option<f64>,
    pub kv_usage_max: Option<f64>,
    /// Preemptions during the cell (counter delta).
    pub preemptions: Option<f64>,
    /// First scrape with waiting > 0, since the cell's start.
    pub queue_onset_s: Option<f64>,
    /// Median of client in-flight − (running + waiting) over scrapes.
    pub client_excess_median: Option<f64>,
}

/// One finished cell.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq, Default)]
pub struct CellRecord {
    #[serde(flatten)]
    pub cell: CellKey,
    /// `load --tasks`: accuracy per task over the cell's graded requests (and `all`).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub accuracy: crate::record::Accuracy,
    pub sent: u64,
    pub ok: u64,
    pub failed: u64,
    /// Failures that were timeouts (also counted in `failed`).
    pub timed_out: u64,
    #[serde(default)]
    pub errors: BTreeMap<String, u64>,
    /// First send to last end.
    pub duration_s: f64,
    /// Steady state: in flight at the target (closed loop) or the arrival span (open).
    pub window_start_s: f64,
    pub window_s: f64,
    pub ramp_up_s: f64,
    pub drain_s: f64,
    pub ttft_s: Option<Percentiles>,
    pub ttft_from_schedule_s: Option<Percentiles>,
    pub tpot_s: Option<Percentiles>,
    pub itl_s: Option<Percentiles>,
    pub e2e_s: Option<Percentiles>,
    pub e2e_from_schedule_s: Option<Percentiles>,
    /// sent − scheduled.
    pub send_lateness_s: Option<Percentiles>,
    pub output_tps: Option<f64>,
    pub input_tps: Option<f64>,
    pub requests_per_s: Option<f64>,
    pub goodput_rps: Option<f64>,
    /// Requests meeting every SLO / requests finished (failures count as misses).
    pub goodput_fraction: Option<f64>,
    pub meets_target: bool,
    pub in_flight_mean: Option<f64>,
    /// Output tokens per second of the window from requests that met every SLO (counted
    /// as `output_tps` counts them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub goodput_output_tps: Option<f64>,
    /// `--price-per-hour` over the window's output tokens: US dollars per million.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usd_per_mtok_output: Option<f64>,
    /// `--price-per-hour` over the window's input (prompt) tokens: US dollars per million.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usd_per_mtok_input: Option<f64>,
    /// `--price-per-hour` over the window's output tokens of requests that met every SLO:
    /// US dollars per million good tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub usd_per_mtok_goodput: Option<f64>,
    /// GPU energy over the window ÷ output tokens in it, joules (`--telemetry-url`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub energy_j_per_output_token: Option<f64>,
    /// Mean over the window of the power of all GPUs together, watts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_power_w: Option<f64>,
    /// Mean over the window and the GPUs of their utilisation, percent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu_util_pct: Option<f64>,
    /// The GPU telemetry behind the three fields above.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu: Option<GpuCell>,
    pub server: Option<ServerCell>,
    #[serde(default)]
    pub notes: Vec<String>,
    /// Speculative decoding: median accept length over the cell's successful requests
    /// (one value per request) and where it came from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accept_length_median: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accept_source: Option<crate::record::SpecSource>,
    /// Speculative decoding: the verify steps of the cell's requests per second of its
    /// window, summed over requests (output tok/s ≈ accept length × this).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verify_steps_per_s: Option<f64>,
    #[serde(default, flatten, skip_serializing_if = "Option::is_none")]
    pub shard: Option<ShardTag>,
    /// Sharded closed loop: the workers this shard ran of the cell's concurrency (0: it
    /// ran nothing in this cell).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workers: Option<u32>,
    /// Closed loop: connections opened and warmed before the cell's clock started (so its
    /// first requests paid no connect); absent in files written before.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warm_connections: Option<u64>,
    /// Predicted cells only (`twin predict`): each figure's 90 % prediction interval.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub band: Option<CellBand>,
    /// `twin whatif --out`: the configuration this predicted cell ran under, e.g.
    /// `{"max_running": 2}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub config: Option<BTreeMap<String, f64>>,
}

/// A 90 % prediction interval `[lo, hi]`.
pub type Interval = [f64; 2];

/// TTFT's bands.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq, Default)]
pub struct TtftBand {
    pub p50: Interval,
    pub p99: Interval,
}

/// TPOT's band.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq, Default)]
pub struct TpotBand {
    pub p50: Interval,
}

/// A predicted cell's 90 % prediction intervals: the coefficients' uncertainty (the fit
/// over resampled calibration repetitions) with the server's run-to-run spread, widened
/// over the interval of any term the calibration did not identify.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq, Default)]
pub struct CellBand {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttft_s: Option<TtftBand>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tpot_s: Option<TpotBand>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_tps: Option<Interval>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub goodput_rps: Option<Interval>,
}

/// One length's knee: the largest load meeting the SLOs at the goodput target.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq, Default)]
pub struct KneeRecord {
    pub context_tokens: u64,
    /// `concurrency` or `rate`.
    pub axis: String,
    /// None when even the smallest load missed.
    pub knee: Option<f64>,
    /// The smallest load tried that missed.
    pub first_miss: Option<f64>,
    /// Concurrent requests of this length the server's pool holds (capacity planner).
    pub planned: Option<f64>,
    pub planned_from: Option<String>,
    /// Smallest load at which the server reported waiting requests.
    pub queue_onset: Option<f64>,
    /// (load, goodput fraction) per probe, in probe order.
    pub probes: Vec<(f64, f64)>,
    #[serde(default, flatten, skip_serializing_if = "Option::is_none")]
    pub shard: Option<ShardTag>,
}
