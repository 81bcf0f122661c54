//! Shared test helpers: an in-process simulator on a free loopback port, and sweeps driven
//! through the same entry point as the command line.
#![allow(dead_code)]

pub mod llama;

use clap::Parser;
use ctxbench::cli::{Cli, Command, SweepArgs};
use ctxbench::sim::{SimConfig, SimServer};
use ctxbench::sweep::{SweepResult, execute};

/// Simulator flags as on the command line (e.g. `["--spec", "3"]`).
pub async fn sim(flags: &[&str]) -> SimServer {
    let mut argv = vec!["ctxbench", "sim", "--host", "127.0.0.1", "--port", "0"];
    argv.extend_from_slice(flags);
    let Command::Sim(a) = Cli::try_parse_from(argv).expect("sim flags parse").command else {
        unreachable!()
    };
    SimServer::start(
        &a.host,
        a.port,
        SimConfig {
            cost: a.cost,
            seed: a.seed,
            model_name: a.model_name,
        },
    )
    .await
    .expect("simulator starts")
}

pub fn sweep_args(url: &str, flags: &[&str]) -> SweepArgs {
    let mut argv = vec!["ctxbench", "sweep", "--url", url];
    argv.extend_from_slice(flags);
    let Command::Sweep(a) = Cli::try_parse_from(argv)
        .expect("sweep flags parse")
        .command
    else {
        unreachable!()
    };
    *a
}

pub async fn sweep(url: &str, flags: &[&str]) -> SweepResult {
    execute(sweep_args(url, flags)).await.expect("sweep runs")
}

/// Relative difference |a − b| / b.
pub fn rel(a: f64, b: f64) -> f64 {
    (a - b).abs() / b.abs()
}

/// Tests that assert timings take this first: the harness runs tests of one file in
/// parallel, and several simulated sweeps on two cores would measure the contention.
pub async fn timing_lock() -> tokio::sync::MutexGuard<'static, ()> {
    static LOCK: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    LOCK.lock().await
}
