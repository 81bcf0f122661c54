//! `twin check` against the simulator with known parameters: the profile stating them
//! passes against a measured load file (twice measured, the spread beside the error); one
//! with the prefill rate halved is flagged, and the command exits non-zero; one with the
//! decode step a little fast has the error that carries into other figures added to their
//! bounds.

use crate::common;

use common::bin::{ctxbench, run_bounded};
use common::{load_args, timing_lock};
use ctxbench::sim::CostModel;
use ctxbench::sim::scheduler::EngineConfig;
use ctxbench::sim::stepcost::StepCost;
use ctxbench::twin::Figure;
use ctxbench::twin::Twin;
use ctxbench::twin::check;
use ctxbench::twin::profile_of;
use std::time::Duration;

const CONTEXT: u64 = 32_768;

/// The simulator's flags and the engine they configure (its default pool: 4 contexts).
/// Steps of tens of ms: a millisecond of client or scheduling noise on these 2 cores is a
/// few percent of a figure, well inside the 10 % bound.
const SIM: [&str; 20] = [
    "--sim-t0",
    "0.02",
    "--sim-p0",
    "10000",
    "--sim-q",
    "0",
    "--sim-d0",
    "0.02",
    "--sim-d1",
    "0",
    "--sim-d2",
    "0.002",
    "--sim-step-overhead",
    "0.001",
    "--max-running",
    "4",
    "--max-batch-tokens",
    "2048",
    "--context-length",
    "32768",
];

fn engine(p0: f64) -> EngineConfig {
    EngineConfig {
        cost: StepCost {
            model: CostModel {
                t0: 0.02,
                p0,
                q: 0.0,
                d0: 0.02,
                d1: 0.0,
            },
            overhead: 0.001,
            d2: 0.002,
            interference: 0.0,
            spec_draft: Default::default(),
        },
        max_batch_tokens: 2048,
        budget: ctxbench::sim::TokenBudget::Prefill,
        max_running: 4,
        spec: 1,
        new_token_ratio: 1.0,
        page_tokens: 16,
        pool_tokens: 4 * CONTEXT,
        cache: true,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_right_profile_passes_and_a_wrong_one_is_flagged() {
    let _timing = timing_lock().await;
    let dir = tempfile::tempdir().unwrap();
    let sim = common::sim(&SIM).await;
    let mut files = Vec::new();
    for run in 0..2 {
        let out = dir.path().join(format!("measured-{run}.jsonl"));
        let out_s = out.display().to_string();
        let flags = [
            "--lengths",
            "2048",
            "--concurrency",
            "1,3",
            "--requests",
            "6",
            "--output-tokens",
            "12",
            "--out",
            &out_s,
        ];
        ctxbench::load::execute(load_args(&sim.url(), &flags))
            .await
            .expect("load runs");
        files.push((out_s, ctxbench::resultfile::read(&out).unwrap()));
    }
    let right = Twin::new(profile_of(&engine(10_000.0), CONTEXT), "right.json".into());
    let report = check(&right, &files, None).unwrap();
    let text = ctxbench::twin::render_check(&report);
    assert_eq!(report.cells.len(), 2, "{text}");
    for c in &report.cells {
        assert!(c.rows.len() >= 5, "{text}");
        assert!(c.rows.iter().all(|r| r.spread.is_some()), "{text}");
    }
    assert_eq!(report.flagged(), 0, "{text}");

    let wrong = Twin::new(profile_of(&engine(5_000.0), CONTEXT), "wrong.json".into());
    let report = check(&wrong, &files, None).unwrap();
    let text = ctxbench::twin::render_check(&report);
    for c in &report.cells {
        let p50 = c.rows.iter().find(|r| r.figure == Figure::TtftP50).unwrap();
        assert!(p50.flagged, "{text}");
        // Prefill (2048 / p0) is most of TTFT: halving p0 nearly doubles it.
        assert!(p50.error > 0.5, "{text}");
    }
    assert!(text.contains("BEYOND BOUND"), "{text}");

    // A decode step 5 % fast, inside TPOT's 10 %: predicted again with the step the
    // measured TPOT implies, output tok/s moves (2.5 % at c=1, where decode is half of
    // each request's e2e; 0.9 % at c=3, where prefills stall it), and its bound carries
    // that move; TPOT's own carries nothing.
    let mut fast = engine(10_000.0);
    fast.cost.model.d0 *= 0.95;
    fast.cost.d2 *= 0.95;
    let fast = Twin::new(profile_of(&fast, CONTEXT), "fast.json".into());
    let report = check(&fast, &files, None).unwrap();
    let text = ctxbench::twin::render_check(&report);
    for c in &report.cells {
        let row = |f: Figure| c.rows.iter().find(|r| r.figure == f).unwrap();
        assert_eq!(row(Figure::TpotP50).slack.carried, 0.0, "{text}");
        let tps = row(Figure::OutputTps);
        assert!(tps.slack.carried > 0.005, "{text}");
        assert!(tps.bound >= 0.10 + tps.slack.carried, "{text}");
    }
    assert!(text.contains("decode step)"), "{text}");

    // The command says so by its exit status.
    for (profile, twin, code) in [("right.json", &right, 0), ("wrong.json", &wrong, 5)] {
        let path = dir.path().join(profile);
        std::fs::write(&path, twin.profile.to_json_pretty()).unwrap();
        let out = run_bounded(
            ctxbench()
                .args(["twin", "check", "--profile"])
                .arg(&path)
                .arg(&files[0].0),
            Duration::from_secs(60),
        );
        assert_eq!(
            out.status.code(),
            Some(code),
            "{profile}: {}",
            String::from_utf8_lossy(&out.stdout)
        );
    }
}
