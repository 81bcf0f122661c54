//! How fast `twin predict` replays a one-hour trace in virtual time, with and without its
//! 90 % bands: a Mooncake-shaped trace (about 12k requests over 59 minutes, multi-turn,
//! shared prefixes) that `trace synth` makes at that scale, predicted on a large-GPU-like
//! engine whose profile carries a calibration's uncertainty (32 bootstrap replicates, a
//! spread, a run spread; calibrated up to 32k tokens, so the hour's longer contexts add
//! the prefill and decode laws' alternatives, as a real profile's would). Prints the wall seconds of each run, the medians of point and banded, and their
//! ratio; the aims are 5 s and 30 s on 2 cores.
//!
//! Run: cargo bench --bench twin_predict
//! `TWIN_BENCH_DIR=DIR` keeps the trace and profile there (for `ctxbench twin predict`);
//! `TWIN_BENCH_WHOLE=1` also bands the hour by rerunning it whole, once, and prints both
//! bands side by side (minutes: what the sample stands in for).

use clap::Parser;
use ctxbench::sim::CostModel;
use ctxbench::sim::scheduler::EngineConfig;
use ctxbench::sim::stepcost::StepCost;
use ctxbench::trace::synth::{SynthParams, synth};
use ctxbench::twin::{Figure, bands};

use ctxbench::twin::RunSpread;
use ctxbench::twin::profile::{Coefficients, Envelope, Profile, Spread, Uncertainty};
use ctxbench::twin::profile_of;
use ctxbench::twin::{Twin, execute};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
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

/// The engine's profile with a calibration's uncertainty: each coefficient's replicates
/// log-normal around it (relative sd: t0 3 %, p0 2 %, q 10 %, d0 2 %, d1 5 %, d2 10 %,
/// seeded), its 95 % interval from the same sd, host spread 3–4 %, run spread 4–8 % per
/// block of 4, calibrated up to 32k tokens and at the 64 running the hour reaches.
fn profile() -> Profile {
    let e = engine();
    let mut p = profile_of(&e, 131_072);
    let mut rng = ChaCha8Rng::seed_from_u64(48);
    let mut normal = move || {
        // Box–Muller: two uniforms, one standard normal.
        let (u, v): (f64, f64) = (rng.random_range(f64::EPSILON..1.0), rng.random());
        (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
    };
    let m = &e.cost.model;
    let sds = [0.03, 0.02, 0.10, 0.02, 0.05, 0.10];
    let values = [m.t0, m.p0, m.q, m.d0, m.d1, e.cost.d2];
    let replicates = (0..32)
        .map(|_| {
            let c: [f64; 6] = std::array::from_fn(|i| values[i] * (sds[i] * normal()).exp());
            Coefficients {
                t0_s: c[0],
                p0_tps: c[1],
                q_s_per_token2: c[2],
                d0_s: c[3],
                d1_s_per_token: c[4],
                d2_s_per_request: c[5],
                interference: None,
            }
        })
        .collect();
    let s = &mut p.step;
    for (i, est) in [
        &mut s.t0_s,
        &mut s.p0_tps,
        &mut s.q_s_per_token2,
        &mut s.d0_s,
        &mut s.d1_s_per_token,
        &mut s.d2_s_per_request,
    ]
    .into_iter()
    .enumerate()
    {
        let k = (1.96 * sds[i]).exp();
        est.ci95 = Some([values[i] / k, values[i] * k]);
    }
    p.envelope = Envelope {
        max_context_tokens: 32_768,
        max_concurrency: 64,
    };
    p.uncertainty = Some(Uncertainty {
        replicates,
        spread: Spread {
            ttft_p50: 0.04,
            ttft_p99: 0.04,
            tpot_p50: 0.03,
            output_tps: 0.03,
            goodput_rps: 0.03,
            source: "bench: a calibration's host spread".into(),
        },
        run: Some(RunSpread {
            block_requests: 4,
            ttft_p50: 0.05,
            ttft_p99: 0.08,
            tpot_p50: 0.04,
            e2e_mean: 0.04,
            dof: 9,
        }),
    });
    p
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Each banded figure's band, as `lo hi` per figure.
fn edges(r: &ctxbench::load::LoadResult) -> Vec<(Figure, f64, [f64; 2])> {
    let c = &r.cells[0];
    let b = c.band.as_ref().expect("a banded cell");
    Figure::BANDED
        .into_iter()
        .filter_map(|f| Some((f, f.of(c, None)?, f.within(b)?)))
        .collect()
}

fn main() -> anyhow::Result<()> {
    let lines = synth(&params())?;
    let span_min = lines.last().map_or(0, |l| l.timestamp) as f64 / 60_000.0;
    let input: u64 = lines.iter().map(|l| l.input_length).sum();
    let tmp = tempfile::tempdir()?;
    let dir = std::env::var_os("TWIN_BENCH_DIR").map_or(tmp.path().to_path_buf(), Into::into);
    std::fs::create_dir_all(&dir)?;
    let path = dir.join("mooncake-shaped.jsonl");
    let mut f = std::io::BufWriter::new(std::fs::File::create(&path)?);
    for l in &lines {
        writeln!(f, "{}", serde_json::to_string(l)?)?;
    }
    f.flush()?;
    drop(f);
    let profile = profile();
    std::fs::write(dir.join("profile.json"), profile.to_json_pretty())?;
    println!(
        "trace: {} requests over {span_min:.1} min, mean input {:.0} tokens ({})",
        lines.len(),
        input as f64 / lines.len() as f64,
        dir.display()
    );
    let twin = Twin::new(profile, "bench".into());
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
    let mut walls = [Vec::new(), Vec::new()];
    let mut last = None;
    for run in 0..RUNS {
        for (k, no_band) in [(0, true), (1, false)] {
            let t = Instant::now();
            let r = ctxbench::twin::predict_banded(&twin, &args, no_band)?.result;
            let wall = t.elapsed().as_secs_f64();
            let c = &r.cells[0];
            println!(
                "run {run} {}: {wall:.2} s wall for {} requests ({} ok), {:.0} s of virtual \
                 time; TTFT p50 {:.0} ms p99 {:.0} ms, TPOT p50 {:.1} ms",
                if no_band { "point " } else { "banded" },
                c.sent,
                c.ok,
                c.duration_s,
                c.ttft_s.map_or(f64::NAN, |p| p.p50 * 1e3),
                c.ttft_s.map_or(f64::NAN, |p| p.p99 * 1e3),
                c.tpot_s.map_or(f64::NAN, |p| p.p50 * 1e3),
            );
            walls[k].push(wall);
            if !no_band {
                last = Some(r);
            }
        }
    }
    let (point, banded) = (median(walls[0].clone()), median(walls[1].clone()));
    println!(
        "twin predict, one-hour Mooncake-shaped trace, median of {RUNS}: point {point:.2} s \
         (aim ≤ 5 s), banded {banded:.2} s (aim ≤ 30 s), banded / point {:.2}",
        banded / point
    );
    let Some(sampled) = last else { return Ok(()) };
    if std::env::var_os("TWIN_BENCH_WHOLE").is_none() {
        return Ok(());
    }
    let t = Instant::now();
    let mut whole = execute(&twin, &args)?;
    let unknown = ctxbench::twin::unknowns(&twin, &whole);
    bands(&twin, &mut whole, &unknown, |t| execute(t, &args))?;
    println!(
        "whole reruns: {:.1} s wall; band edges, sampled against whole (ratio):",
        t.elapsed().as_secs_f64()
    );
    for ((f, p, [lo, hi]), (_, _, [wlo, whi])) in edges(&sampled).into_iter().zip(edges(&whole)) {
        println!(
            "  {f:?}: point {p:.4}  sampled [{lo:.4}, {hi:.4}]  whole [{wlo:.4}, {whi:.4}]  \
             lo {:.3} hi {:.3}",
            lo / wlo,
            hi / whi
        );
    }
    Ok(())
}
