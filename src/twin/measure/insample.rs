//! The profile held to its own calibration: its closed-loop cells predicted and compared
//! (`twin check` on the calibration's load file). What the fitted model cannot reproduce
//! there — the host slowing between the sweep and the cells, a batch law that is not
//! linear — will be in every prediction too, so each figure's in-sample error joins the
//! server's spread that the bands rest on, and the profile says how large it was. The same
//! prediction, request by request against the measured cells, gives one run's own spread
//! over a block of requests (`model/runspread.rs`), which the bands scale to each predicted
//! cell's size.

use crate::load::LoadResult;
use crate::record::load::CellRecord;
use crate::resultfile::ResultFile;
use crate::twin::check::check;
use crate::twin::model::figure::Figure;
use crate::twin::model::profile::Profile;
use crate::twin::model::runspread::{self, RunSpread};
use crate::twin::model::twin::Twin;
use crate::twin::predict::plan::{predict_cells, timeout_s};
use std::path::Path;

/// `profile` with its spread widened by its in-sample error per figure (the root mean
/// square over the calibration's cells of load file `load`); unchanged when the file
/// cannot be checked (the reason is returned).
pub fn widen(mut profile: Profile, load: &Path) -> (Profile, Option<String>) {
    let shown = load.display().to_string();
    let file = match crate::resultfile::read(load) {
        Ok(f) => f,
        Err(e) => return (profile, Some(format!("in-sample check skipped: {e}"))),
    };
    let checked = check(
        &Twin::new(profile.clone(), shown.clone()),
        &[(shown.clone(), file.clone())],
        None,
    );
    let report = match checked {
        Ok(r) => r,
        Err(e) => return (profile, Some(format!("in-sample check skipped: {e:#}"))),
    };
    let rms = |f: Figure| {
        let e: Vec<f64> = report
            .cells
            .iter()
            .flat_map(|c| &c.rows)
            .filter(|r| r.figure == f)
            .map(|r| (r.predicted / r.measured_mean()).ln())
            .filter(|e| e.is_finite())
            .collect();
        if e.is_empty() {
            0.0
        } else {
            (e.iter().map(|x| x * x).sum::<f64>() / e.len() as f64).sqrt()
        }
    };
    let run = run_spread(&profile, shown, file);
    let Some(u) = profile.uncertainty.as_mut() else {
        return (profile, None);
    };
    u.run = run;
    let s = &mut u.spread;
    let (p50, p99, tpot, tps, good) = (
        rms(Figure::TtftP50),
        rms(Figure::TtftP99),
        rms(Figure::TpotP50),
        rms(Figure::OutputTps),
        rms(Figure::Goodput),
    );
    s.ttft_p50 = s.ttft_p50.hypot(p50);
    s.ttft_p99 = s.ttft_p99.hypot(p99);
    s.tpot_p50 = s.tpot_p50.hypot(tpot);
    s.output_tps = s.output_tps.hypot(tps);
    s.goodput_rps = s.goodput_rps.hypot(good);
    s.source.push_str(&format!(
        "; with the profile's in-sample error on its {} calibration cells (rms of log \
         predicted / measured: TTFT p50 {:.1} %, p99 {:.1} %, TPOT p50 {:.1} %, tok/s \
         {:.1} %, goodput {:.1} %)",
        report.cells.len(),
        p50 * 100.0,
        p99 * 100.0,
        tpot * 100.0,
        tps * 100.0,
        good * 100.0
    ));
    if let Some(r) = &u.run {
        s.source.push_str(&format!(
            "; one run's own spread over blocks of {} requests against the twin's ({} \
             degrees of freedom; scaled to each cell's size): TTFT p50 {:.1} %, p99 {:.1} %, \
             TPOT p50 {:.1} %, mean e2e {:.1} %",
            r.block_requests,
            r.dof,
            r.ttft_p50 * 100.0,
            r.ttft_p99 * 100.0,
            r.tpot_p50 * 100.0,
            r.e2e_mean * 100.0
        ));
    }
    (profile, None)
}

/// One run's spread over a block of requests: calibration's cells in load file `file`
/// against the twin's prediction of each (`None` when they cannot be predicted or hold
/// too few requests).
fn run_spread(profile: &Profile, shown: String, file: ResultFile) -> Option<RunSpread> {
    let measured = crate::load_report::merge::merge(&[(shown.clone(), file)]).ok()?;
    let twin = Twin::new(profile.clone(), shown);
    let predicted = predict_cells(&twin, &measured, timeout_s(&measured)).ok()?;
    let of = |r: &LoadResult, c: &CellRecord| {
        runspread::requests(r.requests.iter().filter(|q| q.cell.same(&c.cell)))
    };
    let cells: Vec<_> = measured
        .cells
        .iter()
        .map(|c| (of(&measured, c), of(&predicted, c)))
        .collect();
    runspread::estimate(&cells)
}
