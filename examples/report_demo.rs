//! Writes demonstration result files for `scripts/screenshot.sh`: a run from the
//! simulator's cost model with the trouble a report must show (`a.jsonl`), and a second,
//! slower run to compare it with (`b.jsonl`).
//!
//! `cargo run --example report_demo -- DIR`

#[path = "../tests/common/records.rs"]
mod records;
#[allow(dead_code)]
#[path = "../tests/common/report.rs"]
mod report_fixtures;

use report_fixtures::*;

fn main() -> std::io::Result<()> {
    let Some(dir) = std::env::args_os().nth(1) else {
        eprintln!("usage: cargo run --example report_demo -- DIR");
        std::process::exit(2);
    };
    let dir = std::path::Path::new(&dir);
    std::fs::create_dir_all(dir)?;
    let fx = troubled_run();
    std::fs::write(dir.join("a.jsonl"), jsonl(&fx.run, &fx.samples, &fx.errors))?;
    // B: prefill 25 % slower per token, decode unchanged (so inside the noise).
    let slower = Cost {
        p0: 80_000.0,
        ..SIM_DEFAULT
    };
    let run = run_record("ctxbench-sim", &LENGTHS, 3);
    let samples = sim_samples(slower, &LENGTHS, 3, 0.01, 2);
    std::fs::write(dir.join("b.jsonl"), jsonl(&run, &samples, &[]))?;
    println!("wrote {0}/a.jsonl and {0}/b.jsonl", dir.display());
    Ok(())
}
