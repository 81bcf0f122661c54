//! `report` for load files: one or several files of the same plan (one per client machine,
//! or one per shard of a sharded plan), merged by their raw request and scrape records, each
//! cell summarised again: percentiles come from the merged records, never from averaging
//! the files' own percentiles.

use crate::load::LoadResult;
use crate::load::cell;
use crate::record::load::{CellKey, CellRecord, LoadPlan, RequestRecord, ShardTag};
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
    let sharded = check_shards(files)?;
    let mut out = LoadResult {
        run,
        // The plan as run unsharded: the per-shard fields belong to each file.
        plan: LoadPlan {
            shard: None,
            start: if sharded.is_some() {
                None
            } else {
                plan.start.clone()
            },
            ..plan.clone()
        },
        cells: Vec::new(),
        knees: first.load.knees.clone(),
        requests: Vec::new(),
        server_metrics: Vec::new(),
        gpu_metrics: Vec::new(),
    };
    let mut keys: Vec<CellKey> = Vec::new();
    for (name, f) in files {
        if sharded.is_none() && f.load.plan.as_ref() != Some(&plan) {
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
        out.gpu_metrics.extend(
            f.load
                .gpu_metrics
                .iter()
                .filter(|m| complete(&m.cell))
                .cloned(),
        );
    }
    for k in keys {
        // A file of cells alone (`twin whatif --out` writes no requests) is read as written.
        let written = || {
            let [(_, f)] = files else { return None };
            let none_sent = !out.requests.iter().any(|r| r.cell.same(&k));
            none_sent
                .then(|| f.load.cells.iter().find(|c| c.cell.same(&k)).cloned())
                .flatten()
        };
        if let (None, Some(c)) = (sharded, written()) {
            out.cells.push(c);
            continue;
        }
        let mut c = match sharded {
            Some(n) => summarise_shards(&out, k, n, files),
            None => summarise_key(&out, k),
        };
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

/// Files of a sharded plan: every one a shard of the same plan hash and count, each shard
/// once and none missing. Returns the shard count; `None` for files without shards.
fn check_shards(files: &[(String, ResultFile)]) -> anyhow::Result<Option<u32>> {
    let tags: Vec<(&str, Option<ShardTag>)> = files
        .iter()
        .map(|(name, f)| (name.as_str(), f.load.plan.as_ref().and_then(|p| p.shard)))
        .collect();
    let Some((name0, t0)) = tags.iter().find_map(|(n, t)| t.map(|t| (*n, t))) else {
        return Ok(None);
    };
    let mut seen: Vec<Option<&str>> = vec![None; t0.shards as usize];
    for (name, t) in &tags {
        let Some(t) = t else {
            anyhow::bail!(
                "{name}: not a shard, but {name0} is shard {}/{} of plan {}: only the shards of \
                 one plan merge",
                t0.shard,
                t0.shards,
                t0.plan_hash
            );
        };
        if t.plan_hash != t0.plan_hash || t.shards != t0.shards {
            anyhow::bail!(
                "{name}: shard {}/{} of plan {}, a different plan than {name0} (plan {}, {} \
                 shards): only the shards of one plan merge",
                t.shard,
                t.shards,
                t.plan_hash,
                t0.plan_hash,
                t0.shards
            );
        }
        let slot = seen.get_mut(t.shard as usize).ok_or_else(|| {
            anyhow::anyhow!("{name}: shard {}/{} is out of range", t.shard, t.shards)
        })?;
        if let Some(other) = slot {
            anyhow::bail!(
                "shard {}/{} given twice: {other} and {name}",
                t.shard,
                t.shards
            );
        }
        *slot = Some(name);
    }
    let missing: Vec<String> = (0..t0.shards)
        .filter(|&i| seen[i as usize].is_none())
        .map(|i| format!("shard {i}/{}", t0.shards))
        .collect();
    if !missing.is_empty() {
        anyhow::bail!(
            "{} missing: plan {} ran as {} shards and every shard's file is needed to merge it",
            missing.join(", "),
            t0.plan_hash,
            t0.shards
        );
    }
    Ok(Some(t0.shards))
}

/// A cell summarised from every merged request and scrape of it, its steady state taken as
/// `target`'s (a closed loop's concurrency): the requests, and the cell.
fn summarise_as(r: &LoadResult, k: CellKey, target: CellKey) -> (Vec<&RequestRecord>, CellRecord) {
    let reqs: Vec<_> = r.requests.iter().filter(|q| q.cell.same(&k)).collect();
    let scrapes: Vec<_> = r
        .server_metrics
        .iter()
        .filter(|m| m.cell.same(&k))
        .collect();
    let gpu: Vec<_> = r.gpu_metrics.iter().filter(|m| m.cell.same(&k)).collect();
    let mut c = cell::summarise_plan(target, &reqs, &scrapes, &gpu, &r.plan);
    c.cell = k;
    (reqs, c)
}

/// A cell of a sharded plan: its key already holds the whole plan's concurrency.
fn summarise_shards(
    r: &LoadResult,
    k: CellKey,
    shards: u32,
    files: &[(String, ResultFile)],
) -> CellRecord {
    let (_, mut c) = summarise_as(r, k, k);
    let idle = files
        .iter()
        .flat_map(|(_, f)| &f.load.cells)
        .filter(|c| c.cell.same(&k) && c.sent == 0)
        .count();
    c.notes.push(if idle == 0 {
        format!("merged from {shards} shards")
    } else {
        format!("merged from {shards} shards ({idle} had nothing to send in this cell)")
    });
    c
}

fn summarise_key(r: &LoadResult, k: CellKey) -> CellRecord {
    let (reqs, c) = summarise_as(r, k, k);
    // A closed loop's target in flight is the sum over clients.
    let clients = reqs.iter().filter(|q| q.index == 0).count().max(1) as u32;
    match k.concurrency {
        Some(conc) if clients > 1 => {
            let target = CellKey {
                concurrency: Some(conc * clients),
                ..k
            };
            let (_, mut merged) = summarise_as(r, k, target);
            merged.notes.push(format!("merged from {clients} clients"));
            merged
        }
        _ => c,
    }
}
