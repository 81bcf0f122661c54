//! The result-file records of `ctxbench sessions` (schema 1, additive): the plan, one record
//! per turn, one per cell, and the capacity found. Stable types, apart from internal ones.

use crate::record::Flag;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Why a session ended.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
#[serde(rename_all = "snake_case")]
pub enum SessionEnd {
    /// It ran all its `--turns`.
    Turns,
    /// Its next turn would have passed `--max-context`.
    MaxContext,
    /// Its next turn would have passed the server's context limit.
    ServerLimit,
    /// The server answered its turn with an error (recorded on that turn).
    Error,
    /// `--duration` ran out before its next turn.
    Duration,
}

impl SessionEnd {
    pub fn name(self) -> &'static str {
        match self {
            SessionEnd::Turns => "turns",
            SessionEnd::MaxContext => "max_context",
            SessionEnd::ServerLimit => "server_limit",
            SessionEnd::Error => "error",
            SessionEnd::Duration => "duration",
        }
    }
}

/// `type:"sessions_plan"`: the validated options, once after the run record; `--resume`
/// continues only a file with the same plan.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct SessionsPlanRecord {
    /// The cells: sessions held open at once, ascending.
    pub sessions: Vec<u32>,
    pub turns: u32,
    pub system_tokens: u64,
    /// How many distinct system prompts the sessions share (1: all the same).
    pub shared_system: u32,
    pub first_tokens: u64,
    /// Inclusive ranges `[min, max]`, drawn per turn from the seed.
    pub turn_tokens: [u64; 2],
    pub output_tokens: [u64; 2],
    pub think_s: [f64; 2],
    pub max_context: Option<u64>,
    pub duration_s: Option<f64>,
    /// `ttft_p95=2000ms,…` (as `--slo` takes it).
    pub slo: String,
    pub hit_floor: f64,
    pub seed: u64,
    /// The server's cache page, tokens, that possible hits are rounded down to.
    pub page_tokens: u64,
    /// The server's KV pool, tokens, where it says (probe).
    pub pool_tokens: Option<u64>,
    /// The header each turn carried its session's id in (`--session-header`), for a
    /// session-affine router; the id is `s{session}-c{sessions}-a{attempt}-{seed:x}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_header: Option<String>,
}

/// An error as data: a failed turn ends its session, the others go on.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct TurnError {
    pub kind: String,
    pub message: String,
}

/// `type:"turn"`: one request of one session.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq, Default)]
pub struct TurnRecord {
    /// The cell: sessions open at once.
    pub sessions: u32,
    /// Which run of the cell (a resumed cell that was cut short is run again, attempt + 1).
    pub attempt: u32,
    /// 1-based within the cell (with `--duration`, replacements count on).
    pub session: u32,
    /// 1-based.
    pub turn: u32,
    /// Which system prompt (0-based, of `shared_system`).
    pub system: u32,
    /// Sent, seconds from the cell's start.
    pub sent_s: f64,
    /// Waited after the previous reply ended (0 on turn 1).
    pub think_s: f64,
    /// The server's count.
    pub prompt_tokens: Option<u64>,
    /// Prompt tokens beyond the previous turn's prompt and reply: the new message and the
    /// template's markers (all of the prompt on turn 1).
    pub new_tokens: Option<u64>,
    /// The server's report.
    pub cached_tokens: Option<u64>,
    /// The longest prefix the server had already seen (this session's previous prompt and
    /// the reply it generated, or a system prompt an earlier turn carried), whole pages,
    /// at most the prompt less one token.
    pub possible_cached_tokens: u64,
    pub ttft_s: Option<f64>,
    pub e2e_s: Option<f64>,
    pub output_tokens: Option<u64>,
    pub decode_tps: Option<f64>,
    pub itl_p50_s: Option<f64>,
    pub itl_p99_s: Option<f64>,
    pub finish_reason: Option<String>,
    pub ok: bool,
    pub error: Option<TurnError>,
    pub flags: Vec<Flag>,
    /// `--tasks niah`: the needle asked on the last turn, and the reply's grade.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub needle: Option<NeedleGrade>,
    /// Set on a session's last turn: why it ended.
    pub end: Option<SessionEnd>,
}

/// A needle planted in the first message and asked on the last turn.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct NeedleGrade {
    pub expected: String,
    /// The reply's first 80 characters.
    pub answer: String,
    pub ok: bool,
}

/// How many sessions were asked for their needle, and how many remembered it.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, JsonSchema, PartialEq, Default)]
pub struct NeedleTally {
    pub asked: u64,
    pub ok: u64,
}

/// TTFT quantiles of a group of turns, seconds.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct Quantiles {
    pub n: u64,
    pub p50: f64,
    pub p95: f64,
    pub p99: f64,
}

/// One turn index's TTFT quantiles.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct TurnTtft {
    pub turn: u32,
    #[serde(flatten)]
    pub ttft_s: Quantiles,
}

/// Cached tokens the server reported against those it could have.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, JsonSchema, PartialEq, Default)]
pub struct HitCount {
    pub observed_tokens: u64,
    pub possible_tokens: u64,
    /// observed / possible; `None` with nothing possible.
    pub ratio: Option<f64>,
}

/// One turn index's hits.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct TurnHits {
    pub turn: u32,
    #[serde(flatten)]
    pub hits: HitCount,
}

/// Pooled hits, and per turn index.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq, Default)]
pub struct Hits {
    #[serde(flatten)]
    pub pooled: HitCount,
    pub by_turn: Vec<TurnHits>,
}

/// The server's own hit counter over the cell, beside the client's sum.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct ServerHits {
    /// The Prometheus counter read (`vllm:prefix_cache_hits_total`, …).
    pub counter: String,
    pub delta_tokens: f64,
    /// The sum of the turns' `cached_tokens`.
    pub client_tokens: u64,
    pub agrees: bool,
    /// Why they may differ, when they do.
    pub note: Option<String>,
}

/// Open sessions and requests in flight, at one change.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct TimelinePoint {
    pub t_s: f64,
    pub open_sessions: u32,
    pub in_flight: u32,
}

/// `type:"sessions_cell"`: one `--sessions` value, summarised from its turns.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq, Default)]
pub struct SessionsCellRecord {
    pub sessions: u32,
    pub attempt: u32,
    /// `done`, `not_offered` or `failed: …`: the flush before the cell.
    pub flush: String,
    pub window_s: f64,
    pub turns_ok: u64,
    pub turns_failed: u64,
    pub sessions_started: u64,
    /// How many sessions ended for each reason.
    pub ended: std::collections::BTreeMap<String, u64>,
    pub ttft_s_by_turn: Vec<TurnTtft>,
    /// Pooled over turns ≥ 2.
    pub ttft_s_warm: Option<Quantiles>,
    pub hits: Hits,
    pub server_hits: Option<ServerHits>,
    /// Mean over sessions of the prompt and reply tokens at their last turn.
    pub context_at_last_turn: Option<f64>,
    /// First send to last reply, per session that ran all its turns.
    pub session_s: Option<Quantiles>,
    pub turns_per_s: Option<f64>,
    pub output_tps: Option<f64>,
    /// Warm turns meeting every SLO bound, per second.
    pub goodput_turns_per_s: Option<f64>,
    /// Whether the warm TTFT (and other bounded) quantiles meet the SLO.
    pub slo_met: Option<bool>,
    /// `--tasks niah`: the sessions asked on their last turn, and those that remembered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub needle: Option<NeedleTally>,
    pub timeline: Vec<TimelinePoint>,
}

/// `type:"session_capacity"`: how many sessions of this depth the server holds.
#[derive(Debug, Clone, Serialize, Deserialize, JsonSchema, PartialEq)]
pub struct SessionCapacityRecord {
    /// The largest cell whose warm quantiles meet the SLO (and every smaller one too).
    pub holds: Option<u32>,
    /// The first cell whose hit ratio falls below `hit_floor`.
    pub thrash: Option<u32>,
    pub slo: String,
    pub hit_floor: f64,
    /// The server's KV pool, tokens, where it says.
    pub pool_tokens: Option<u64>,
    /// Mean context per session at its last turn, tokens (over the cells measured).
    pub context_at_last_turn: Option<f64>,
    /// pool ÷ context at the last turn: the sessions the arithmetic says fit.
    pub predicted_fit: Option<u64>,
    /// The line printed on stderr.
    pub line: String,
}
