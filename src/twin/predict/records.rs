//! A prediction in load's own format: the run header (marked `"predicted": true` with the
//! profile's path, fields a reader of measured files skips), the plan, each cell summarised
//! by load's own summariser, so `report` and `compare` read it as a measured file.

use crate::load::args::LoadArgs;
use crate::load::{LoadResult, cell};
use crate::record::load::{CellKey, CellRecord, LoadPlan};
use crate::record::{Record, Target};
use crate::twin::model::twin::Twin;
use crate::twin::predict::cell::Predicted;
use std::path::Path;

/// What the twin reports as the server: the profile's measured identity, api `twin`.
fn target(twin: &Twin) -> Target {
    let s = &twin.profile.server;
    let text = |k: &str| s.get(k).and_then(|v| v.as_str()).map(str::to_string);
    Target {
        url: text("url").unwrap_or_else(|| format!("twin:{}", twin.path)),
        api: "twin".into(),
        model: text("model"),
        server_info: s.get("server_info").cloned().unwrap_or_default(),
        checks: Default::default(),
    }
}

/// An empty result for `plan`, with its run record.
pub fn result(twin: &Twin, args: &LoadArgs, plan: &LoadPlan, lengths: Vec<u64>) -> LoadResult {
    let simulator = format!("twin profile {} (predicted in virtual time)", twin.path);
    let run = crate::load::setup::load_record(
        args,
        target(twin),
        lengths,
        "token_ids".into(),
        None,
        Some(simulator),
        "filler".into(),
    );
    LoadResult {
        run,
        plan: plan.clone(),
        cells: Vec::new(),
        knees: Vec::new(),
        requests: Vec::new(),
        server_metrics: Vec::new(),
        gpu_metrics: Vec::new(),
    }
}

/// Load's summary of a predicted cell, its notes saying what it is.
pub fn summarise(twin: &Twin, plan: &LoadPlan, key: CellKey, p: &Predicted) -> CellRecord {
    let requests: Vec<_> = p.requests.iter().collect();
    let scrapes: Vec<_> = p.scrapes.iter().collect();
    let mut c = cell::summarise_plan(key, &requests, &scrapes, &[], plan);
    // Exact, where a once-a-second scrape could miss the peak.
    if let Some(s) = c.server.as_mut() {
        s.running_max = Some(p.running_max as f64);
    }
    c.notes.insert(
        0,
        format!("predicted by the twin from {} (virtual time)", twin.path),
    );
    if p.stuck > 0 {
        c.notes.push(format!(
            "{} requests could never be admitted: their prompt and output do not fit the \
             {}-token pool",
            p.stuck, twin.engine.pool_tokens
        ));
    }
    c
}

/// The result file's text: header lines, then each cell's requests, scrapes and summary,
/// then the knees.
pub fn lines(twin: &Twin, r: &LoadResult) -> String {
    let mut run = serde_json::to_value(Record::Run(r.run.clone())).expect("record serialises");
    if let Some(config) = run.get_mut("config").and_then(|c| c.as_object_mut()) {
        config.insert("predicted".into(), true.into());
        config.insert("profile".into(), twin.path.clone().into());
    }
    let mut text = serde_json::to_string(&run).expect("record serialises");
    text.push('\n');
    text.push_str(&Record::LoadPlan(r.plan.clone()).to_line());
    for c in &r.cells {
        for q in r.requests.iter().filter(|q| q.cell.same(&c.cell)) {
            text.push_str(&Record::Request(Box::new(q.clone())).to_line());
        }
        for m in r.server_metrics.iter().filter(|m| m.cell.same(&c.cell)) {
            text.push_str(&Record::ServerMetrics(m.clone()).to_line());
        }
        text.push_str(&Record::Cell(Box::new(c.clone())).to_line());
    }
    for k in &r.knees {
        text.push_str(&Record::Knee(k.clone()).to_line());
    }
    text
}

/// Write the prediction to `path` (whole, atomically).
pub fn write(twin: &Twin, r: &LoadResult, path: &Path) -> anyhow::Result<()> {
    crate::report::write_atomic(path, &lines(twin, r))
        .map_err(|e| anyhow::anyhow!("--out {}: {e}", path.display()))
}

/// Summarise a predicted cell as `load` does and add it to the result.
pub fn push(
    twin: &Twin,
    plan: &LoadPlan,
    out: &mut LoadResult,
    key: CellKey,
    p: Predicted,
) -> CellRecord {
    let cell = summarise(twin, plan, key, &p);
    out.cells.push(cell.clone());
    out.requests.extend(p.requests);
    out.server_metrics.extend(p.scrapes);
    cell
}
