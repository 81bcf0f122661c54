//! How fast `twin predict` replays a one-hour trace in virtual time: a Mooncake-shaped
//! trace (about 12k requests over 59 minutes, multi-turn, shared prefixes) that `trace
//! synth` makes at that scale, predicted on a large-GPU-like engine. Prints the wall
//! seconds of each of 3 runs and their median; the aim is under 30 s on 2 cores.
//!
//! Run: cargo bench --bench twin_predict

use clap::Parser;
use ctxbench::sim::CostModel;
use ctxbench::sim::scheduler::EngineConfig;
use ctxbench::sim::stepcost::StepCost;
use ctxbench::trace::synth::{SynthParams, synth};
use ctxbench::twin::known::profile_of;
use ctxbench::twin::predict::{Twin, execute};
use std::io::Write;
use std::time::Instant;

const RUNS: usize = 3;

/// Conversations of 2..8 turns (5 on average): 12k requests; 0.68 new conversations a
/// second spread their starts over ~59 minutes, their turns 5..30 s apart.
fn params() -> SynthParams {
    SynthParams {
        conversations: 2_400,
        turns: 2..=8,
        system_prompts: 8,
        system_tokens: 1_024,
        docs: 1_200,
        doc_tokens: 2_048..=16_384,
        user_tokens: 64..=512,
        output_tokens: 64..=640,
        think_s: 5.0..=30.0,
        rate: 0.68,
        max_input: 131_072,
        block_tokens: 512,
        seed: 29,
    }
}

/// A large accelerator's engine: 64 running, an 8k prefill budget, a 1M-token pool.
fn engine() -> EngineConfig {
    EngineConfig {
        cost: StepCost {
            model: CostModel {
                t0: 0.015,
                p0: 60_000.0,
                q: 2.0e-11,
                d0: 0.010,
                d1: 1.0e-8,
            },
            overhead: 0.001,
            d2: 2.0e-4,
            interference: 0.0,
            spec_draft: Default::default(),
        },
        max_batch_tokens: 8_192,
        budget: ctxbench::sim::TokenBudget::Prefill,
        max_running: 64,
        spec: 1,
        new_token_ratio: 1.0,
        page_tokens: 16,
        pool_tokens: 1 << 20,
        cache: true,
    }
}

fn main() -> anyhow::Result<()> {
    let lines = synth(&params())?;
    let span_min = lines.last().map_or(0, |l| l.timestamp) as f64 / 60_000.0;
    let input: u64 = lines.iter().map(|l| l.input_length).sum();
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("mooncake-shaped.jsonl");
    let mut f = std::io::BufWriter::new(std::fs::File::create(&path)?);
    for l in &lines {
        writeln!(f, "{}", serde_json::to_string(l)?)?;
    }
    f.flush()?;
    drop(f);
    println!(
        "trace: {} requests over {span_min:.1} min, mean input {:.0} tokens",
        lines.len(),
        input as f64 / lines.len() as f64
    );
    let twin = Twin::new(profile_of(&engine(), 131_072), "bench".into());
    let cli = ctxbench::cli::Cli::try_parse_from([
        "ctxbench",
        "load",
        "--trace",
        &path.display().to_string(),
        "--slo",
        "ttft=10s,tpot=100ms",
    ])?;
    let ctxbench::cli::Command::Load(args) = cli.command else {
        unreachable!("parsed as load")
    };
    let mut walls = Vec::new();
    for run in 0..RUNS {
        let t = Instant::now();
        let r = execute(&twin, &args)?;
        let wall = t.elapsed().as_secs_f64();
        let c = &r.cells[0];
        println!(
            "run {run}: {wall:.2} s wall for {} requests ({} ok), {:.0} s of virtual time; \
             TTFT p50 {:.0} ms p99 {:.0} ms, TPOT p50 {:.1} ms",
            c.sent,
            c.ok,
            c.duration_s,
            c.ttft_s.map_or(f64::NAN, |p| p.p50 * 1e3),
            c.ttft_s.map_or(f64::NAN, |p| p.p99 * 1e3),
            c.tpot_s.map_or(f64::NAN, |p| p.p50 * 1e3),
        );
        walls.push(wall);
    }
    walls.sort_by(f64::total_cmp);
    println!(
        "twin predict, one-hour Mooncake-shaped trace: median {:.2} s wall of {RUNS} (aim < 30 s)",
        walls[RUNS / 2]
    );
    Ok(())
}
