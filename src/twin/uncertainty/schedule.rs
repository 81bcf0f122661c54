//! Which cells lean on the schedule: the jittered schedules moving a figure beyond its
//! bound, said as a `warning:` and marked on `twin check`'s rows.

use crate::record::load::CellKey;
use crate::twin::model::figure::Figure;
use crate::twin::uncertainty::band::ScheduleMoves;

/// The term a figure leans on when the jittered schedules move it beyond its bound: which
/// path (prompts prefilled together or staggered, decoders in lockstep or behind each
/// other's prefill) the server takes run to run.
pub const SCHEDULE: &str = "schedule";

/// How far the schedules move `f` in the cell `key`, where that is beyond its bound.
fn schedule_move(moves: &ScheduleMoves, key: &CellKey, f: Figure) -> Option<f64> {
    f.band_index()?;
    let m = moves.of(key, f);
    (m > f.bound()).then_some(m)
}

/// Whether the schedules move `f` beyond its bound in the cell `key`.
pub fn leans_on_schedule(moves: &ScheduleMoves, key: &CellKey, f: Figure) -> bool {
    schedule_move(moves, key, f).is_some()
}

/// One `warning:` line per cell whose figures the schedules move beyond their bounds.
pub fn schedule_warnings(moves: &ScheduleMoves) -> Vec<String> {
    moves
        .keys()
        .filter_map(|key| {
            let moved: Vec<String> = Figure::ALL
                .into_iter()
                .filter_map(|f| {
                    let m = schedule_move(moves, key, f)?;
                    Some(format!("{} by {:.0} %", f.name(), m * 100.0))
                })
                .collect();
            (!moved.is_empty()).then(|| {
                format!(
                    "cell {} {}: the {SCHEDULE} is not identified: requests landing elsewhere \
                     in a step move {} (prompts prefilled together or staggered); its band \
                     spans those paths, and only measuring the cell shows which this server takes",
                    key.context_tokens,
                    key.load_label(),
                    moved.join(", ")
                )
            })
        })
        .collect()
}
