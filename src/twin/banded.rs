//! A prediction with its bands, as `twin predict` and `twin whatif` make them: the point,
//! what it leans on that calibration did not identify, and the bands' reruns — of the
//! whole plan, or of a long trace's sample (`band_sample.rs`), the trace read once for the
//! point and every rerun.

use super::band::{self, Reruns, ScheduleMoves};
use super::engine::Twin;
use super::envelope::{self, Unknown};
use super::predict;
use super::predict_trace::Replay;
use crate::load::LoadResult;
use crate::load::args::LoadArgs;

/// A point prediction and what was learnt beside it.
pub struct Banded {
    pub result: LoadResult,
    /// What the point leans on that is not identified.
    pub unknown: Vec<Unknown>,
    /// How far the schedules moved each figure (`None`: no bands asked for).
    pub moves: Option<ScheduleMoves>,
}

/// Predict `args` on `twin`, with each cell's band unless `no_band`.
pub fn predict(twin: &Twin, args: &LoadArgs, no_band: bool) -> anyhow::Result<Banded> {
    if args.trace.is_none() {
        let mut result = predict::execute(twin, args)?;
        let unknown = envelope::unknowns(twin, &result);
        let moves = (!no_band)
            .then(|| band::bands(twin, &mut result, &unknown, |t| predict::execute(t, args)))
            .transpose()?;
        return Ok(Banded {
            result,
            unknown,
            moves,
        });
    }
    predict::refuse_live_flags(args)?;
    let replay = Replay::read(args)?;
    let mut result = replay.predict(twin)?;
    let unknown = envelope::unknowns(twin, &result);
    let moves = if no_band {
        None
    } else {
        let sample = super::band_sample::sample(&replay, &result);
        let (on, sampled) = match &sample {
            Some(s) => (s, true),
            None => (&replay, false),
        };
        let reruns = Reruns {
            predict: &|t: &Twin| on.predict(t),
            sampled,
        };
        Some(band::bands_by(twin, &mut result, &unknown, &reruns)?)
    };
    Ok(Banded {
        result,
        unknown,
        moves,
    })
}
