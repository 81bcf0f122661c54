//! `LoadResult` apart from `load/mod.rs`, so the modules it imports can name it without a cycle.

use crate::exit;
use crate::record::RunRecord;
use crate::record::load::{
    CellRecord, GpuMetricsRecord, KneeRecord, LoadPlan, RequestRecord, ServerMetricsRecord,
};

/// Everything a finished load run produced.
pub struct LoadResult {
    pub run: RunRecord,
    pub plan: LoadPlan,
    pub cells: Vec<CellRecord>,
    pub knees: Vec<KneeRecord>,
    pub requests: Vec<RequestRecord>,
    pub server_metrics: Vec<ServerMetricsRecord>,
    /// `--telemetry-url` scrapes.
    pub gpu_metrics: Vec<GpuMetricsRecord>,
}

impl LoadResult {
    pub fn exit_code(&self) -> u8 {
        // A shard's share of a cell can be nothing (fewer workers or arrivals than shards).
        let ran: Vec<&CellRecord> = self
            .cells
            .iter()
            .filter(|c| !(c.sent == 0 && c.shard.is_some()))
            .collect();
        if self.cells.is_empty() {
            exit::NOTHING_VALID
        } else if ran.is_empty() {
            exit::OK
        } else if ran.iter().all(|c| c.ok == 0) {
            exit::NOTHING_VALID
        } else if ran.iter().any(|c| c.ok == 0) {
            exit::PARTIAL
        } else {
            exit::OK
        }
    }
}
