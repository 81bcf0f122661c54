//! Which predictions a band reruns, and when a sampled band stops. A whole plan's band
//! reruns every bootstrap replicate, every unidentified term's alternative and every
//! jittered schedule at once. A long trace's sampled band (`sample.rs`) spares the
//! reruns that would not move it: the schedules after the first [`FIRST_SCHEDULES`]
//! only where the first moved a figure by half its `twin check` bound, and the replicates
//! in rounds of [`ROUND`] after the first [`FIRST_REPLICATES`], until a round moves no band
//! edge by more than [`STABLE`]. Rounds are fixed, so the band is the same on any number of
//! cores.

use crate::load::LoadResult;
use crate::record::load::{CellKey, CellRecord};
use crate::twin::model::figure::Figure;
use crate::twin::model::profile::Coefficients;
use crate::twin::model::twin::Twin;
use crate::twin::uncertainty::threads::{progress, run};

/// Replicates a sampled band always reruns.
pub const FIRST_REPLICATES: usize = 8;
/// Replicates added per round after those.
pub const ROUND: usize = 8;
/// A round that moves no band edge by more than this (relative) is the last: finer than the
/// band knows itself (32 replicates pin a standard deviation to ±13 %).
pub const STABLE: f64 = 0.02;
/// Schedules a sampled band always reruns.
pub const FIRST_SCHEDULES: u64 = 4;

/// How a band's reruns are predicted.
pub struct Reruns<'a> {
    /// The plan predicted on another twin: the whole plan, or a sample of it.
    pub predict: &'a (dyn Fn(&Twin) -> anyhow::Result<LoadResult> + Sync),
    /// `predict` predicts a sample of the plan (`sample.rs`): the sample is also
    /// predicted on the twin itself, and each rerun's figure is taken relative to that and
    /// applied to the point.
    pub sampled: bool,
}

/// A cell's banded figures, in [`Figure::BANDED`]'s order.
pub(crate) type Figures = [Option<f64>; 5];

pub(crate) fn figures(c: &CellRecord) -> Figures {
    Figure::BANDED.map(|f| f.of(c, None))
}

/// One prediction's cells, each its key and banded figures: all a band needs of a rerun.
pub(crate) type Cells = Vec<(CellKey, Figures)>;

pub(crate) fn cells(r: &LoadResult) -> Cells {
    r.cells.iter().map(|c| (c.cell, figures(c))).collect()
}

/// What the reruns gave: each a prediction's cells.
#[derive(Default)]
pub struct Reran {
    /// The sample predicted on the twin itself (a sampled band's only).
    pub reference: Option<Cells>,
    pub replicates: Vec<Cells>,
    pub alternatives: Vec<Cells>,
    pub schedules: Vec<Cells>,
}

enum Job<'a> {
    Itself,
    Replicate(&'a Coefficients),
    Alternative(&'a Coefficients),
    Schedule(u64),
}

/// A sampled band's judgements on what it has so far: every band edge, and whether the
/// schedules moved a figure by half its bound.
pub struct Judge<'a> {
    pub edges: &'a dyn Fn(&Reran) -> Vec<f64>,
    pub schedules_move: &'a dyn Fn(&Reran) -> bool,
}

/// Rerun `reruns.predict` on `twin` with each of `coefs`, each of `alternatives` and each
/// of `schedules` jittered schedules (and, sampled, the twin itself), judged by `judge`
/// where sampled.
pub fn rerun(
    twin: &Twin,
    coefs: &[Coefficients],
    alternatives: &[&Coefficients],
    schedules: u64,
    reruns: &Reruns,
    judge: &Judge,
) -> anyhow::Result<Reran> {
    let twin_of = |job: &Job| match job {
        Job::Itself => twin.clone(),
        Job::Replicate(c) | Job::Alternative(c) => {
            let mut t = twin.clone();
            c.apply_to(&mut t.engine.cost);
            t
        }
        Job::Schedule(seed) => Twin {
            schedule: Some(*seed),
            ..twin.clone()
        },
    };
    let total = usize::from(reruns.sampled)
        + coefs.len()
        + alternatives.len()
        + usize::try_from(schedules).unwrap_or(0);
    let bar = progress(total, &twin.path);
    let go = |jobs: Vec<Job>| -> anyhow::Result<Vec<Cells>> {
        run(
            &jobs,
            |j| (reruns.predict)(&twin_of(j)).map(|r| cells(&r)),
            &bar,
        )
        .into_iter()
        .collect()
    };
    let replicates = |range: std::ops::Range<usize>| coefs[range].iter().map(Job::Replicate);
    let first = if reruns.sampled {
        FIRST_REPLICATES.min(coefs.len())
    } else {
        coefs.len()
    };
    let first_schedules = if reruns.sampled {
        FIRST_SCHEDULES.min(schedules)
    } else {
        schedules
    };
    let mut jobs: Vec<Job> = Vec::new();
    if reruns.sampled {
        jobs.push(Job::Itself);
    }
    jobs.extend(replicates(0..first));
    jobs.extend(alternatives.iter().map(|c| Job::Alternative(c)));
    jobs.extend((1..=first_schedules).map(Job::Schedule));
    let mut done = go(jobs)?.into_iter();
    let mut reran = Reran {
        reference: reruns.sampled.then(|| done.next()).flatten(),
        replicates: done.by_ref().take(first).collect(),
        alternatives: done.by_ref().take(alternatives.len()).collect(),
        schedules: done.collect(),
    };
    if first_schedules < schedules && (judge.schedules_move)(&reran) {
        let more = go((first_schedules + 1..=schedules)
            .map(Job::Schedule)
            .collect())?;
        reran.schedules.extend(more);
    }
    let mut k = first;
    let mut last = (k < coefs.len()).then(|| (judge.edges)(&reran));
    while let Some(before) = last.take() {
        let next = (k + ROUND).min(coefs.len());
        reran.replicates.extend(go(replicates(k..next).collect())?);
        k = next;
        let now = (judge.edges)(&reran);
        let moved = now
            .iter()
            .zip(&before)
            .any(|(a, b)| (a - b).abs() > STABLE * a.abs().max(b.abs()));
        if moved && k < coefs.len() {
            last = Some(now);
        }
    }
    bar.finish_and_clear();
    if reruns.sampled {
        eprintln!(
            "note: bands rerun {} of {} bootstrap replicates (in rounds of {ROUND} until one \
             moved no edge by over {:.0} %) and {} of {schedules} jittered schedules",
            reran.replicates.len(),
            coefs.len(),
            STABLE * 100.0,
            reran.schedules.len()
        );
    }
    Ok(reran)
}
