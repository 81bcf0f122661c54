//! A prediction with its bands, the one sequence `twin predict`, `twin check` and `twin
//! whatif` share: the point, what it leans on that calibration did not identify, and the
//! bands' reruns — of the whole plan, or of a long trace's sample (`sample.rs`), the trace
//! read once for the point and every rerun.

use crate::load::LoadResult;
use crate::load::args::LoadArgs;
use crate::twin::model::twin::Twin;
use crate::twin::predict::plan as predict;
use crate::twin::predict::trace::Replay;
use crate::twin::uncertainty::band::{self, ScheduleMoves};
use crate::twin::uncertainty::reruns::Reruns;
use crate::twin::uncertainty::unknowns::{self, Unknown};

/// A point prediction and what was learnt beside it.
pub struct Banded {
    pub result: LoadResult,
    /// What the point leans on that is not identified.
    pub unknown: Vec<Unknown>,
    /// How far the schedules moved each figure (`None`: no bands asked for).
    pub moves: Option<ScheduleMoves>,
    /// The trace replayed, read once (`None`: not a replay).
    replay: Option<Replay>,
}

/// Predict `args` on `twin`, with each cell's band unless `no_band`.
pub fn predict_banded(twin: &Twin, args: &LoadArgs, no_band: bool) -> anyhow::Result<Banded> {
    let mut b = point(twin, args)?;
    if !no_band {
        band(twin, args, &mut b)?;
    }
    Ok(b)
}

/// [`predict_banded`] of a plan `run` predicts on any twin (`twin check`: a measured file's
/// cells or replay): the point on `twin`, then each cell's band from `run` on the reruns'.
pub fn predict_banded_by(
    twin: &Twin,
    run: impl Fn(&Twin) -> anyhow::Result<LoadResult> + Sync,
) -> anyhow::Result<Banded> {
    let result = run(twin)?;
    let mut b = Banded {
        unknown: unknowns::unknowns(twin, &result),
        result,
        moves: None,
        replay: None,
    };
    b.moves = Some(band::bands(twin, &mut b.result, &b.unknown, run)?);
    Ok(b)
}

/// The point prediction of `args` on `twin`, without bands yet.
pub fn point(twin: &Twin, args: &LoadArgs) -> anyhow::Result<Banded> {
    let (result, replay) = if args.trace.is_none() {
        (predict::execute(twin, args)?, None)
    } else {
        predict::refuse_live_flags(args)?;
        let replay = Replay::read(args)?;
        (replay.predict(twin)?, Some(replay))
    };
    Ok(Banded {
        unknown: unknowns::unknowns(twin, &result),
        result,
        moves: None,
        replay,
    })
}

/// Each cell of `b` (the point of `args` on `twin`) given its band.
pub fn band(twin: &Twin, args: &LoadArgs, b: &mut Banded) -> anyhow::Result<()> {
    let moves = match &b.replay {
        None => band::bands(twin, &mut b.result, &b.unknown, |t| {
            predict::execute(t, args)
        })?,
        Some(replay) => {
            let sample = crate::twin::uncertainty::sample::sample(replay);
            if let Some(s) = &sample {
                eprintln!(
                    "note: {}",
                    crate::twin::uncertainty::sample::describe(replay, s)
                );
            }
            let on = sample.as_ref().unwrap_or(replay);
            let reruns = Reruns {
                predict: &|t: &Twin| on.predict(t),
                sampled: sample.is_some(),
            };
            band::bands_by(twin, &mut b.result, &b.unknown, &reruns)?
        }
    };
    b.moves = Some(moves);
    Ok(())
}
