//! The twin's fidelity tests against real peers share one procedure: measure a held-out
//! cell several times, hold the profile's prediction to it (`twin check`), re-measure a
//! calibration cell beside each for the host's drift, and summarise every cell's figures
//! together.

use ctxbench::resultfile::ResultFile;
use ctxbench::twin::Figure;
use ctxbench::twin::Twin;
use ctxbench::twin::{CellCheck, CheckReport, check};
use std::fmt::Write;
use std::path::Path;

/// Run `load` with `flags` against `url` `runs` times, each into `dir/TAG-RUN.jsonl`; the
/// files as `twin check` takes them.
pub async fn measure(
    url: &str,
    flags: &[&str],
    runs: usize,
    dir: &Path,
    tag: &str,
) -> Vec<(String, ResultFile)> {
    let mut files = Vec::new();
    for run in 0..runs {
        let path = dir.join(format!("{tag}-{run}.jsonl"));
        let path_s = path.display().to_string();
        let mut argv = flags.to_vec();
        argv.extend(["--out", &path_s]);
        ctxbench::load::execute(super::load_args(url, &argv))
            .await
            .expect("load runs");
        files.push((path_s, ctxbench::resultfile::read(&path).unwrap()));
    }
    files
}

/// Measure `flags` `runs` times and check `twin` against them: the report (one cell) and
/// its rendering.
pub async fn measure_and_check(
    twin: &Twin,
    url: &str,
    flags: &[&str],
    runs: usize,
    dir: &Path,
    tag: &str,
) -> (CheckReport, String) {
    let files = measure(url, flags, runs, dir, tag).await;
    let report = check(twin, &files, None).expect("twin check runs");
    let text = ctxbench::twin::render_check(&report);
    assert_eq!(report.cells.len(), 1, "one cell per plan:\n{text}");
    (report, text)
}

/// The figures of a c=1 cell the drift probe compares: output tok/s, TTFT p50, TPOT p50.
#[derive(Debug, Clone, Copy)]
pub struct C1 {
    pub tps: f64,
    pub ttft_p50: f64,
    pub tpot_p50: f64,
}

impl C1 {
    /// |now − then| / then of each figure.
    fn drift(&self, then: &C1) -> C1 {
        let d = |now: f64, then: f64| (now - then).abs() / then;
        C1 {
            tps: d(self.tps, then.tps),
            ttft_p50: d(self.ttft_p50, then.ttft_p50),
            tpot_p50: d(self.tpot_p50, then.tpot_p50),
        }
    }
}

/// The c=1 cell of a load file: its figures, and the `load` flags that measure it again
/// (its length, request budget and output tokens).
pub fn c1_cell(path: &Path) -> (C1, Vec<String>) {
    let r = ctxbench::load_report::merge::merge(&[(
        path.display().to_string(),
        ctxbench::resultfile::read(path).unwrap(),
    )])
    .unwrap();
    let cell = r
        .cells
        .iter()
        .find(|c| c.cell.concurrency == Some(1))
        .expect("a c=1 cell");
    let flags = vec![
        "--lengths".to_string(),
        cell.cell.context_tokens.to_string(),
        "--concurrency".into(),
        "1".into(),
        "--requests".into(),
        r.plan.requests.expect("a request budget").to_string(),
        "--output-tokens".into(),
        r.plan.output_tokens.to_string(),
    ];
    let figures = C1 {
        tps: cell.output_tps.expect("output tok/s"),
        ttft_p50: cell.ttft_s.expect("TTFT").p50,
        tpot_p50: cell.tpot_s.expect("TPOT").p50,
    };
    (figures, flags)
}

/// The host's drift since calibration, probed beside every held-out cell: calibration's
/// c=1 cell (in its load records) measured again, as |now − then| / then of its output
/// tok/s, TTFT p50 and TPOT p50. One probe after the held-out cells missed the host's moves
/// between them: in a CI run vLLM's c=1 decode was 2.6 ms in calibration, 3.1 ms in the
/// held-out c=1 cell a few seconds later, and back (2.5 % off calibration) by the probe a
/// minute after. A figure is widened by the drift of the same figure at c=1 or of tok/s,
/// whichever moved more: where TTFT is most of a request (llama-server's 1k prompts, 100 ms,
/// against 64 tokens at 0.5 ms), tok/s hides the decode step's drift. In one run its c=1
/// TPOT p50 went 0.47 → 0.7 ms while tok/s moved 8.7 %, and the Poisson cell's TPOT p50,
/// 0.6 ms against 0.5 predicted, was 19.4 % off against a bound of 18.7 %.
pub struct Drift {
    url: String,
    dir: std::path::PathBuf,
    then: C1,
    flags: Vec<String>,
    /// Each probe's drift, in order: before the first cell, between cells, after the last.
    probes: Vec<C1>,
}

impl Drift {
    pub fn new(url: &str, load_records: &Path, dir: &Path) -> Drift {
        let (then, flags) = c1_cell(load_records);
        Drift {
            url: url.to_string(),
            dir: dir.to_path_buf(),
            then,
            flags,
            probes: Vec::new(),
        }
    }

    /// Measure the c=1 cell again now.
    pub async fn probe(&mut self) {
        let again = self
            .dir
            .join(format!("c1-again-{}.jsonl", self.probes.len()));
        let mut flags = self.flags.clone();
        flags.extend(["--out".to_string(), again.display().to_string()]);
        let flags: Vec<&str> = flags.iter().map(String::as_str).collect();
        ctxbench::load::execute(super::load_args(&self.url, &flags))
            .await
            .expect("load runs");
        let (now, _) = c1_cell(&again);
        let d = now.drift(&self.then);
        println!(
            "host drift since calibration: c=1 tok/s {:.1} then {:.1} ({:.1} %), TTFT p50 {:.1} \
             then {:.1} ms ({:.1} %), TPOT p50 {:.2} then {:.2} ms ({:.1} %)",
            self.then.tps,
            now.tps,
            d.tps * 100.0,
            self.then.ttft_p50 * 1e3,
            now.ttft_p50 * 1e3,
            d.ttft_p50 * 100.0,
            self.then.tpot_p50 * 1e3,
            now.tpot_p50 * 1e3,
            d.tpot_p50 * 100.0
        );
        self.probes.push(d);
    }

    /// The drift of `figure` around held-out cell `i`: the larger of the probes before and
    /// after it, in the same figure at c=1 (TTFT's for every TTFT percentile) or in tok/s,
    /// whichever moved more.
    pub fn around(&self, i: usize, figure: Figure) -> f64 {
        self.probes.iter().skip(i).take(2).fold(0.0, |a, p| {
            let own = match figure {
                Figure::TtftP50 | Figure::TtftP90 | Figure::TtftP99 => p.ttft_p50,
                Figure::TpotP50 => p.tpot_p50,
                Figure::OutputTps | Figure::Goodput | Figure::HitRatio => p.tps,
            };
            a.max(own.max(p.tps))
        })
    }
}

/// Coverage of the held-out cells' 90 % bands, each band widened by the host's drift around
/// its cell in that figure (`Drift::around`): (measured values inside, measured values).
/// The bands are fitted at calibration; a host that has since moved by d moves the measured
/// values by about d, and the twin is not asked to follow it. In one CI run the host slowed
/// through llama-server's test (c=1 tok/s 5 → 24 % below calibration, TPOT p50 0.55 → 0.97
/// ms) and the Poisson cell's TPOT p50, 1.0 ms, fell outside its band [0.4, 0.8] ms: 59 of
/// 75 inside. The tests hold this coverage and print the plain one against the 90 %.
pub fn coverage_with_drift(reports: &[(CheckReport, String)], drift: &Drift) -> (usize, usize) {
    let (mut inside, mut measured) = (0, 0);
    for (i, (report, _)) in reports.iter().enumerate() {
        for r in report.cells.iter().flat_map(|c| &c.rows) {
            let Some([lo, hi]) = r.band else { continue };
            let d = drift.around(i, r.figure);
            measured += r.measured.len();
            inside += r.inside_of([lo * (1.0 - d), hi * (1.0 + d)]);
        }
    }
    (inside, measured)
}

/// Several reports' cells as one report, so that its per-figure summary runs over all.
pub fn combined(reports: &[&CheckReport]) -> CheckReport {
    CheckReport {
        profile: reports.first().map_or(String::new(), |r| r.profile.clone()),
        files: reports.iter().flat_map(|r| r.files.clone()).collect(),
        cells: reports
            .iter()
            .flat_map(|r| r.cells.iter().cloned())
            .collect::<Vec<CellCheck>>(),
    }
}

/// The figures the goals name.
pub const GOAL_FIGURES: [Figure; 4] = [
    Figure::TtftP50,
    Figure::TtftP99,
    Figure::TpotP50,
    Figure::OutputTps,
];

/// A markdown table of the goal figures over every cell of `r`: median |error|, signed
/// bias, coverage of the bands, median band half-width.
pub fn goal_table(r: &CheckReport) -> String {
    let mut s = String::from(
        "| figure | median |error| | signed bias | inside band | median half-band |\n\
         |---|---|---|---|---|\n",
    );
    for f in r.per_figure() {
        if !GOAL_FIGURES.contains(&f.figure) {
            continue;
        }
        let _ = writeln!(
            s,
            "| {} | {:.1} % | {:+.1} % | {}/{} | {} |",
            f.figure.name(),
            f.median_error * 100.0,
            f.bias * 100.0,
            f.inside,
            f.measured,
            f.median_half_width
                .map_or("-".into(), |h| format!("{:.1} %", h * 100.0))
        );
    }
    match r.coverage() {
        Some(c) => {
            let _ = writeln!(s, "coverage (every banded figure): {:.1} %", c * 100.0);
        }
        None => s.push_str("coverage: no figure has a band\n"),
    }
    s
}

/// Every figure of each report's one cell whose error is beyond what it is held to: its
/// `twin check` bound widened by the host's `drift`, or the guard `loose(cell, figure)`
/// gives where a figure is known not to meet its bound. One message per figure beyond.
///
/// A banded figure whose prediction leans on a term the profile marks unidentified (issue
/// 35 §2) is not held to its bound: the twin has said it does not know it, and widened its
/// band to cover instead. Such figures are printed and count in the coverage the tests
/// hold. (In CI a Poisson cell's TPOT p50 on bimodal, unidentified d2 was predicted 3.3 ms
/// against 0.8 measured, 317 % off, inside its band [0.5, 10.4] ms.) A figure with no band
/// (TTFT p90, which no goal of the issue names) on such a term is printed and not held:
/// there is nothing the twin has stated for it to be held to (vLLM's c=8 cell on an
/// unidentified interference: TTFT p90 37.5 % off where the banded p50 and p99 were held
/// to their bands).
pub fn beyond_bounds(
    reports: &[(CheckReport, String)],
    drift: &Drift,
    loose: impl Fn(usize, Figure) -> Option<f64>,
) -> Vec<String> {
    let mut beyond = Vec::new();
    for (i, (report, text)) in reports.iter().enumerate() {
        for r in &report.cells[0].rows {
            if !r.unidentified.is_empty() {
                println!(
                    "cell {i} {:?}: error {:.1} %, {} (unidentified: {})",
                    r.figure,
                    r.error * 100.0,
                    if r.band.is_some() {
                        "held to its band"
                    } else {
                        "printed, not held: it has no band"
                    },
                    r.unidentified.join(", ")
                );
                continue;
            }
            let drift = drift.around(i, r.figure);
            let held = loose(i, r.figure).unwrap_or(r.bound + drift);
            if r.error.is_nan() || r.error > held {
                beyond.push(format!(
                    "{:?}: error {:.1} % > {:.1} % (bound {:.1} % + drift {:.1} %, or the guard)\n{text}",
                    r.figure,
                    r.error * 100.0,
                    held * 100.0,
                    r.bound * 100.0,
                    drift * 100.0
                ));
            }
        }
    }
    beyond
}

/// Each of `cells` (as `load` flags) measured `runs` times and checked against `twin`,
/// printed as it is done, with `drift` probed before each cell and after the last: the
/// reports, in order.
pub async fn measure_cells<'a>(
    twin: &Twin,
    url: &str,
    cells: impl IntoIterator<Item = &'a [&'a str]>,
    runs: usize,
    dir: &Path,
    drift: &mut Drift,
) -> Vec<(CheckReport, String)> {
    let mut reports = Vec::new();
    for (i, cell) in cells.into_iter().enumerate() {
        drift.probe().await;
        let (report, text) =
            measure_and_check(twin, url, cell, runs, dir, &format!("held-out-{i}")).await;
        println!("{text}");
        reports.push((report, text));
    }
    drift.probe().await;
    reports
}
