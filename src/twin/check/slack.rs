//! What a `twin check` bound adds to the issue's, figure by figure: one request of a count,
//! and the share of the error the decode step carries in (`compare.rs` says why).

use super::compare::mean;
use crate::load::LoadResult;
use crate::record::load::CellRecord;
use crate::twin::model::figure::Figure;
use crate::twin::model::twin::Twin;

/// What a figure's bound adds to the issue's, as fractions of the measured mean.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Slack {
    /// The smallest step the figure takes: one request of a count; 0 for a continuous
    /// figure.
    pub resolution: f64,
    /// How far the prediction moves when the decode step is set to the one measured
    /// (within TPOT's bound): the share of the error the decode step carries in.
    pub carried: f64,
}

impl Slack {
    pub fn total(&self) -> f64 {
        self.resolution + self.carried
    }
}

/// Measured over predicted TPOT p50 of a cell, held within TPOT's own bound: the decode
/// step the measurement implies, as far as the check allows the twin to miss it. `None`
/// when the cell has no TPOT or the twin has it exactly.
pub fn decode_ratio(p: &CellRecord, measured: &[&CellRecord]) -> Option<f64> {
    let predicted = Figure::TpotP50.of(p, None)?;
    let values: Vec<f64> = measured
        .iter()
        .filter_map(|c| Figure::TpotP50.of(c, None))
        .collect();
    if values.is_empty() || predicted <= 0.0 {
        return None;
    }
    let b = Figure::TpotP50.bound();
    let r = (mean(&values) / predicted).clamp(1.0 - b, 1.0 + b);
    ((r - 1.0).abs() > 1e-9).then_some(r)
}

/// The twin with its decode step (d0, d1, d2) scaled by `r`.
pub fn with_decode_scaled(twin: &Twin, r: f64) -> Twin {
    let mut t = twin.clone();
    let cost = &mut t.engine.cost;
    cost.model.d0 *= r;
    cost.model.d1 *= r;
    cost.d2 *= r;
    t
}

/// How far `figure` of cell `p` moves in `decoded` (the plan predicted again with the
/// measured decode step), as a fraction of its measured mean (points for the hit ratio).
pub fn carried(
    figure: Figure,
    p: &CellRecord,
    decoded: &LoadResult,
    measured: &[f64],
    hits: Option<f64>,
    decoded_hits: Option<f64>,
) -> f64 {
    let mean = mean(measured);
    let again = decoded.cells.iter().find(|c| c.cell.same(&p.cell));
    match (
        figure.of(p, hits),
        again.and_then(|c| figure.of(c, decoded_hits)),
    ) {
        (Some(a), Some(b)) if figure == Figure::HitRatio && (a - b).is_finite() => (a - b).abs(),
        (Some(a), Some(b)) if mean != 0.0 && (a - b).is_finite() => (a - b).abs() / mean.abs(),
        _ => 0.0,
    }
}

/// The smallest step `figure` takes in the measured cells, as a fraction of it: one
/// request of goodput's count (requests that met the SLOs and ended in the window, its
/// mean over the files); 0 for the continuous figures.
pub fn resolution(figure: Figure, measured: &[&CellRecord]) -> f64 {
    if figure != Figure::Goodput || measured.is_empty() {
        return 0.0;
    }
    let count = measured
        .iter()
        .map(|c| c.goodput_rps.unwrap_or(0.0) * c.window_s)
        .sum::<f64>()
        / measured.len() as f64;
    if count >= 1.0 {
        1.0 / count.round()
    } else {
        0.0
    }
}
