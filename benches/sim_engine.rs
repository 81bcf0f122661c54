//! Benchmark (not a test): how late the simulator's engine steps land when many requests
//! stream at once over loopback HTTP, client and server in one process on this machine.
//! 10 ms decode steps; each running request gets one OpenAI delta SSE event per step.
//! Prints per batch size, median and p99 in ms:
//! - `wake_late`: how late the engine thread woke after each step's scheduled end;
//! - `step_work`: the engine's work at a step's end (apply it, hand its outputs to the
//!   requests, plan the next step);
//! - `out_late`: from a step's scheduled end to its output reaching the request task that
//!   writes it to the connection (what a client sees, loopback aside);
//!
//! then the steps measured, the output events per second delivered (running × steps/s:
//! the simulator's ceiling when lateness stays small), and the 1-minute load average
//! (other processes on the machine count).

use clap::Parser;
use ctxbench::sim::driver::StepTiming;
use ctxbench::sim::{SimConfig, SimCostArgs, SimServer};
use futures::StreamExt;
use serde_json::json;
use std::time::{Duration, Instant};

const STEP_S: &str = "0.01";
const BATCHES: &[usize] = &[64, 256, 1024];
/// Steps measured per batch size, once every request is decoding.
const MEASURED: Duration = Duration::from_secs(4);

#[derive(Parser)]
struct Flags {
    #[command(flatten)]
    cost: SimCostArgs,
}

fn quantile(v: &mut [f64], q: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    v[((v.len() - 1) as f64 * q).round() as usize]
}

async fn round(running: usize) -> (Vec<StepTiming>, Vec<f64>, f64) {
    let max_running = running.to_string();
    let argv = [
        "sim",
        "--sim-t0",
        "0",
        "--sim-p0",
        "1e9",
        "--sim-q",
        "0",
        "--sim-d0",
        STEP_S,
        "--sim-d1",
        "0",
        "--max-running",
        &max_running,
        "--kv-pool-tokens",
        "10000000",
    ];
    let cost = Flags::try_parse_from(argv).unwrap().cost;
    let config = SimConfig {
        cost,
        seed: 0,
        model_name: "bench".into(),
    };
    let server = SimServer::start("127.0.0.1", 0, config).await.unwrap();
    let url = format!("{}/v1/completions", server.url());
    let http = reqwest::Client::new();
    let steps = (MEASURED.as_secs_f64() / 0.01) as u64 + 200;
    let streams: Vec<_> = (0..running)
        .map(|i| {
            let http = http.clone();
            let url = url.clone();
            tokio::spawn(async move {
                let body = json!({
                    "prompt": [i as u32 % 60000, 1, 2, 3],
                    "max_tokens": steps,
                    "ignore_eos": true,
                    "stream": true,
                });
                let resp = http.post(&url).json(&body).send().await.unwrap();
                let mut body = resp.bytes_stream();
                let mut bytes = 0;
                while let Some(chunk) = body.next().await {
                    bytes += chunk.map(|c| c.len()).unwrap_or(0);
                }
                bytes
            })
        })
        .collect();
    while server.series().last().map(|p| p.running) != Some(running) {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let before = server.stats().generation_tokens;
    server.clear_step_timings();
    let t = Instant::now();
    tokio::time::sleep(MEASURED).await;
    let events_per_s =
        (server.stats().generation_tokens - before) as f64 / t.elapsed().as_secs_f64();
    let timings = server.step_timings();
    let output_late = server.output_lateness_s();
    server.shutdown().await;
    for s in streams {
        let _ = s.await;
    }
    (timings, output_late, events_per_s)
}

fn main() {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    println!("sim engine step lateness, {STEP_S} s steps, client and server on this machine");
    println!(
        "{:>8} {:>21} {:>21} {:>21} {:>6} {:>10} {:>6}",
        "", "wake_late ms", "step_work ms", "out_late ms", "", "", "load"
    );
    println!(
        "{:>8} {:>10} {:>10} {:>10} {:>10} {:>10} {:>10} {:>6} {:>10} {:>6}",
        "running", "p50", "p99", "p50", "p99", "p50", "p99", "steps", "events/s", "1min"
    );
    for &running in BATCHES {
        let (timings, output_late, events_per_s) = rt.block_on(round(running));
        let n = timings.len();
        let mut late: Vec<f64> = timings.iter().map(|t| t.late_s * 1e3).collect();
        let mut busy: Vec<f64> = timings.iter().map(|t| t.busy_s * 1e3).collect();
        let mut out: Vec<f64> = output_late.iter().map(|s| s * 1e3).collect();
        println!(
            "{running:>8} {:>10.3} {:>10.3} {:>10.3} {:>10.3} {:>10.3} {:>10.3} {n:>6} {events_per_s:>10.0} {:>6}",
            quantile(&mut late, 0.5),
            quantile(&mut late, 0.99),
            quantile(&mut busy, 0.5),
            quantile(&mut busy, 0.99),
            quantile(&mut out, 0.5),
            quantile(&mut out, 0.99),
            load_average()
        );
    }
}

/// The 1-minute load average, or `?` where /proc is absent.
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().map(str::to_string))
        .unwrap_or_else(|| "?".to_string())
}
