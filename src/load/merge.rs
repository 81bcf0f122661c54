//! `report` for load files: one or several files of the same plan (one per client machine),
//! merged by their raw request and scrape records, each cell summarised again.

use super::{LoadResult, cell};
use crate::record::load::{CellKey, CellRecord};
use crate::resultfile::ResultFile;

/// Merge files of one plan. Request times are offsets from each client's cell start, so
/// the merge assumes the clients ran each cell together.
pub fn merge(files: &[(String, ResultFile)]) -> anyhow::Result<LoadResult> {
    let (name0, first) = files.first().ok_or_else(|| anyhow::anyhow!("no files"))?;
    let plan = first
        .load
        .plan
        .clone()
        .ok_or_else(|| anyhow::anyhow!("{name0}: not a load file (no load_plan record)"))?;
    let run = first
        .run
        .clone()
        .ok_or_else(|| anyhow::anyhow!("{name0}: no run record"))?;
    let mut out = LoadResult {
        run,
        plan: plan.clone(),
        cells: Vec::new(),
        knees: first.load.knees.clone(),
        requests: Vec::new(),
        server_metrics: Vec::new(),
    };
    let mut keys: Vec<CellKey> = Vec::new();
    for (name, f) in files {
        if f.load.plan.as_ref() != Some(&plan) {
            anyhow::bail!(
                "{name}: a different load plan than {name0}: only files of one plan merge"
            );
        }
        for c in &f.load.cells {
            if !keys.iter().any(|k| k.same(&c.cell)) {
                keys.push(c.cell);
            }
        }
        // Only complete cells count: a file cut mid-cell holds a partial one.
        let complete = |k: &CellKey| f.load.cells.iter().any(|c| c.cell.same(k));
        out.requests.extend(
            f.load
                .requests
                .iter()
                .filter(|r| complete(&r.cell))
                .cloned(),
        );
        out.server_metrics.extend(
            f.load
                .server_metrics
                .iter()
                .filter(|m| complete(&m.cell))
                .cloned(),
        );
    }
    for k in keys {
        let mut c = summarise_key(&out, k);
        // Connections each client warmed for the cell, summed.
        c.warm_connections = files
            .iter()
            .flat_map(|(_, f)| f.load.cells.iter().filter(|c| c.cell.same(&k)))
            .filter_map(|c| c.warm_connections)
            .reduce(|a, b| a + b);
        out.cells.push(c);
    }
    Ok(out)
}

fn summarise_key(r: &LoadResult, k: CellKey) -> CellRecord {
    let reqs: Vec<_> = r.requests.iter().filter(|q| q.cell.same(&k)).collect();
    let scrapes: Vec<_> = r
        .server_metrics
        .iter()
        .filter(|m| m.cell.same(&k))
        .collect();
    let mut c = cell::summarise(k, &reqs, &scrapes, &r.plan.slo, r.plan.goodput_target);
    // A closed loop's target in flight is the sum over clients.
    if let Some(conc) = k.concurrency {
        let clients = reqs.iter().filter(|q| q.index == 0).count().max(1) as u32;
        if clients > 1 {
            let mut kk = k;
            kk.concurrency = Some(conc * clients);
            let mut merged =
                cell::summarise(kk, &reqs, &scrapes, &r.plan.slo, r.plan.goodput_target);
            merged.cell = k;
            merged.notes.push(format!("merged from {clients} clients"));
            c = merged;
        }
    }
    c
}
