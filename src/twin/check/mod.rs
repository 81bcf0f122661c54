//! `ctxbench twin check`: predict exactly the cells (or the trace) of measured load files
//! and hold each figure to its measurement: the twin's honesty, on the user's own server.
//! Several files of one plan are repeated measurements: their spread widens the bounds
//! (`compare.rs`) and is shown beside the error.

mod compare;
mod slack;

use crate::record::load::{CellKey, CellRecord, LoadPlan};
use crate::resultfile::ResultFile;
use crate::twin::model::figure::Figure;
use crate::twin::model::twin::Twin;
use crate::twin::predict::plan::{predict_cells, timeout_s};
use crate::twin::uncertainty::banded::predict_banded_by;
use crate::{load::LoadResult, load_report::merge};
pub use compare::Compared;
use compare::compare;
pub use slack::Slack;
use slack::{carried, decode_ratio, resolution, with_decode_scaled};
use std::path::Path;

/// One cell's figures, predicted against measured.
#[derive(Debug, Clone)]
pub struct CellCheck {
    pub key: CellKey,
    pub rows: Vec<Compared>,
    /// Mean of the rows' errors.
    pub mean_error: f64,
}

#[derive(Debug, Clone)]
pub struct CheckReport {
    pub profile: String,
    pub files: Vec<String>,
    pub cells: Vec<CellCheck>,
}

/// One figure over every cell: how the twin did on it.
#[derive(Debug, Clone, PartialEq)]
pub struct FigureSummary {
    pub figure: Figure,
    /// Measured values, and those inside their band.
    pub measured: usize,
    pub inside: usize,
    /// Mean of (predicted − measured) / measured over cells.
    pub bias: f64,
    /// Median of |error| over cells.
    pub median_error: f64,
    /// Median band half-width over the prediction, over cells with a band that lean on no
    /// unidentified term (a band stretched over a term's alternatives is wide on purpose).
    pub median_half_width: Option<f64>,
}

impl CheckReport {
    /// Share of measured figures (each file's value) inside their bands, over the figures
    /// that have one; `None` when none has.
    pub fn coverage(&self) -> Option<f64> {
        let rows = self.rows().filter(|r| r.band.is_some());
        let (n, inside) = rows.fold((0, 0), |(n, k), r| (n + r.measured.len(), k + r.inside()));
        (n > 0).then(|| inside as f64 / n as f64)
    }

    fn rows(&self) -> impl Iterator<Item = &Compared> {
        self.cells.iter().flat_map(|c| &c.rows)
    }

    /// Per figure: coverage counts, signed bias, median |error|, median band half-width.
    pub fn per_figure(&self) -> Vec<FigureSummary> {
        Figure::ALL
            .iter()
            .filter_map(|&f| {
                let rows: Vec<&Compared> = self.rows().filter(|r| r.figure == f).collect();
                if rows.is_empty() {
                    return None;
                }
                let errors: Vec<f64> = rows.iter().map(|r| r.error).collect();
                let halves: Vec<f64> = rows
                    .iter()
                    .filter(|r| r.unidentified.is_empty())
                    .filter_map(|r| {
                        let [lo, hi] = r.band?;
                        (r.predicted != 0.0).then(|| (hi - lo) / 2.0 / r.predicted.abs())
                    })
                    .collect();
                Some(FigureSummary {
                    figure: f,
                    measured: rows
                        .iter()
                        .filter(|r| r.band.is_some())
                        .map(|r| r.measured.len())
                        .sum(),
                    inside: rows.iter().map(|r| r.inside()).sum(),
                    bias: rows.iter().map(|r| r.signed_error()).sum::<f64>() / rows.len() as f64,
                    median_error: crate::stats::median(&errors).unwrap_or(f64::NAN),
                    median_half_width: crate::stats::median(&halves),
                })
            })
            .collect()
    }

    /// Figures beyond their bounds.
    pub fn flagged(&self) -> usize {
        self.cells
            .iter()
            .flat_map(|c| &c.rows)
            .filter(|r| r.flagged)
            .count()
    }
}

/// Predict the measured files' plan and compare, cell by cell. `trace`: the trace file when
/// it is not where the measured file says.
pub fn check(
    twin: &Twin,
    files: &[(String, ResultFile)],
    trace: Option<&Path>,
) -> anyhow::Result<CheckReport> {
    let measured = files
        .iter()
        .map(|f| merge::merge(std::slice::from_ref(f)))
        .collect::<anyhow::Result<Vec<LoadResult>>>()?;
    let (name0, first) = (&files[0].0, &measured[0]);
    let unstarted = |p: &LoadPlan| LoadPlan {
        start: None,
        ..p.clone()
    };
    for ((name, _), m) in files.iter().zip(&measured).skip(1) {
        if unstarted(&m.plan) != unstarted(&first.plan) {
            anyhow::bail!(
                "{name}: a different load plan than {name0}: twin check takes repeated runs of \
                 one plan"
            );
        }
    }
    let timeout_s = timeout_s(first);
    let run = |t: &Twin| match &first.plan.trace {
        Some(plan) => predict_replay(t, first, plan, trace, timeout_s),
        None => predict_cells(t, first, timeout_s),
    };
    let banded = predict_banded_by(twin, run)?;
    let (predicted, moves) = (banded.result, banded.moves.unwrap_or_default());
    let hits = |r: &LoadResult| {
        let plan = r.plan.trace.as_ref()?;
        crate::trace::hits::summarise(plan, &r.requests, &r.cells).observed_ratio
    };
    let mut cells = Vec::new();
    for p in &predicted.cells {
        let of_measured: Vec<&CellRecord> = measured
            .iter()
            .filter_map(|m| m.cells.iter().find(|c| c.cell.same(&p.cell)))
            .collect();
        let mut rows = Vec::new();
        let cell_unknowns = unknowns_of(twin, &predicted, p);
        let decoded = match decode_ratio(p, &of_measured) {
            Some(r) => Some(run(&with_decode_scaled(twin, r))?),
            None => None,
        };
        for figure in Figure::ALL {
            let values: Vec<f64> = of_measured
                .iter()
                .zip(&measured)
                .filter_map(|(c, m)| figure.of(c, hits(m)))
                .collect();
            if values.len() != of_measured.len() || values.is_empty() {
                continue;
            }
            let predicted_value = figure.of(p, hits(&predicted)).unwrap_or(f64::NAN);
            let slack = Slack {
                resolution: resolution(figure, &of_measured),
                carried: decoded
                    .as_ref()
                    .filter(|_| figure != Figure::TpotP50)
                    .map_or(0.0, |d| {
                        carried(figure, p, d, &values, hits(&predicted), hits(d))
                    }),
            };
            let mut row = compare(figure, values, predicted_value, slack);
            row.band = p.band.as_ref().and_then(|b| figure.within(b));
            row.unidentified = cell_unknowns.clone();
            if crate::twin::uncertainty::schedule::leans_on_schedule(&moves, &p.cell, figure) {
                row.unidentified
                    .push(crate::twin::uncertainty::schedule::SCHEDULE);
            }
            rows.push(row);
        }
        let mean_error = rows.iter().map(|r| r.error).sum::<f64>() / rows.len().max(1) as f64;
        cells.push(CellCheck {
            key: p.cell,
            rows,
            mean_error,
        });
    }
    Ok(CheckReport {
        profile: twin.path.clone(),
        files: files.iter().map(|f| f.0.clone()).collect(),
        cells,
    })
}

/// The unidentified terms one predicted cell leans on.
fn unknowns_of(twin: &Twin, r: &LoadResult, c: &CellRecord) -> Vec<&'static str> {
    let one = LoadResult {
        cells: vec![c.clone()],
        knees: Vec::new(),
        requests: r
            .requests
            .iter()
            .filter(|q| q.cell.same(&c.cell))
            .cloned()
            .collect(),
        server_metrics: Vec::new(),
        gpu_metrics: Vec::new(),
        run: r.run.clone(),
        plan: r.plan.clone(),
    };
    let mut terms: Vec<&'static str> = crate::twin::uncertainty::unknowns::unknowns(twin, &one)
        .into_iter()
        .map(|u| u.term)
        .collect();
    terms.dedup();
    terms
}

/// The measured replay, predicted: the trace it names (or `trace`), selected and timed as
/// it was, summarised under the measured plan's SLOs.
fn predict_replay(
    twin: &Twin,
    m: &LoadResult,
    t: &crate::record::load::TracePlan,
    trace: Option<&Path>,
    timeout_s: f64,
) -> anyhow::Result<LoadResult> {
    let file = trace.map_or_else(|| t.file.clone(), |p| p.display().to_string());
    if !Path::new(&file).exists() {
        anyhow::bail!("the measured replay's trace {file} is not there; give it with --trace FILE");
    }
    // Load's defaults for the rest, then the measured plan's values as they are.
    let plan_error = |e: &dyn std::fmt::Display| anyhow::anyhow!("the measured replay's plan: {e}");
    let mut args: crate::load::args::LoadArgs =
        crate::twin::args::parse("load", vec!["--trace".into(), file])
            .map_err(|e| plan_error(&e))?;
    args.trace_format = clap::ValueEnum::from_str(&t.format, false)
        .map_err(|e| plan_error(&format!("--trace-format {}: {e}", t.format)))?;
    args.block_tokens = t.block_tokens;
    args.time_scale = t.time_scale;
    args.seed = m.plan.seed;
    args.timeout = timeout_s;
    args.trace_limit = t.limit;
    args.trace_window = t.window.clone();
    args.max_concurrency = m.plan.max_concurrency;
    let mut r = crate::twin::predict::trace::execute(twin, &args)?;
    // Goodput under the SLOs the measurement was held to.
    r.plan.slo = m.plan.slo;
    r.plan.goodput_target = m.plan.goodput_target;
    for c in &mut r.cells {
        let reqs: Vec<_> = r.requests.iter().filter(|q| q.cell.same(&c.cell)).collect();
        let scrapes: Vec<_> = r
            .server_metrics
            .iter()
            .filter(|s| s.cell.same(&c.cell))
            .collect();
        let notes = std::mem::take(&mut c.notes);
        *c = crate::load::cell::summarise(
            c.cell,
            &reqs,
            &scrapes,
            &r.plan.slo,
            r.plan.goodput_target,
        );
        c.notes = notes;
    }
    Ok(r)
}
