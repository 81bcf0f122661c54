//! Writes demonstration result files for `scripts/screenshot.sh` when `CTXBENCH_DEMO_DIR` is
//! set (otherwise does nothing): a run from the simulator's cost model with the trouble a
//! report must show, and a second, slower run to compare it with.

mod report_fixtures;

use report_fixtures::*;

#[test]
fn write_demo_result_files() {
    let Ok(dir) = std::env::var("CTXBENCH_DEMO_DIR") else {
        return;
    };
    let dir = std::path::Path::new(&dir);
    std::fs::create_dir_all(dir).expect("create CTXBENCH_DEMO_DIR");
    let fx = troubled_run();
    std::fs::write(dir.join("a.jsonl"), jsonl(&fx.run, &fx.samples, &fx.errors)).unwrap();
    // B: prefill 25 % slower per token, decode unchanged (so inside the noise).
    let slower = Cost {
        p0: 80_000.0,
        ..SIM_DEFAULT
    };
    let run = run_record("ctxbench-sim", &LENGTHS, 3);
    let samples = sim_samples(slower, &LENGTHS, 3, 0.01, 2);
    std::fs::write(dir.join("b.jsonl"), jsonl(&run, &samples, &[])).unwrap();
}
