//! The simulator's serving engine on a virtual clock, against analytic truth: batched
//! TTFT and decode rate from the step cost model, pool admission, preemption, Little's
//! law, and the prefix cache sharing the pool. No sleeps: every figure here is exact.

use ctxbench::sim::scheduler::{EngineConfig, NewRequest, OutputKind};
use ctxbench::sim::stepcost::{SpecDraftCost, StepCost};
use ctxbench::sim::virtual_time::{VirtualRun, run_virtual};
use ctxbench::sim::{CostModel, TokenBudget};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// Float sums of the same terms in another order differ by a few ulps per term.
const EXACT_S: f64 = 1e-9;

const COST: StepCost = StepCost {
    model: CostModel {
        t0: 0.01,
        p0: 100_000.0,
        q: 4.0e-10,
        d0: 0.004,
        d1: 5.0e-8,
    },
    overhead: 0.002,
    d2: 1.0e-4,
    interference: 0.0,
    spec_draft: SpecDraftCost::NONE,
};

fn config(pool_tokens: u64) -> EngineConfig {
    EngineConfig {
        cost: COST,
        max_batch_tokens: 8192,
        budget: TokenBudget::Prefill,
        max_running: 1000,
        spec: 1,
        new_token_ratio: 1.0,
        page_tokens: 16,
        pool_tokens,
        cache: true,
    }
}

/// A prompt no other prompt shares a page with.
fn prompt(len: u64, salt: u64) -> Vec<u32> {
    (0..len)
        .map(|i| ((i * 31 + salt * 7919 + 1) % 60_000) as u32)
        .collect()
}

fn request(id: u64, len: u64, max_tokens: u64, arrival_s: f64) -> NewRequest {
    NewRequest {
        id,
        prompt: prompt(len, id),
        max_tokens,
        target_tokens: max_tokens,
        arrival_s,
        seed: id,
    }
}

fn record(run: &VirtualRun, id: u64) -> &ctxbench::sim::scheduler::EngineRecord {
    run.records
        .iter()
        .find(|r| r.id == id)
        .expect("request finished")
}

#[test]
fn identical_requests_get_ttft_from_the_steps_before_their_last_chunk() {
    const N: u64 = 5;
    const L: u64 = 2500;
    const B: u64 = 1000;
    const G: u64 = 40;
    let cfg = EngineConfig {
        max_batch_tokens: B,
        ..config(1 << 30)
    };
    let arrivals = (0..N).map(|id| request(id, L, G, 0.0)).collect();
    let run = run_virtual(cfg, arrivals, |_, _| {});
    // Analytic schedule: the prompts form one token stream consumed B per step; request k
    // ends its prefill in step s_k = ceil((k+1)·L / B) − 1 and then decodes one token per
    // step from context L + (s − s_k).
    let last_chunk_step = |k: u64| ((k + 1) * L).div_ceil(B) - 1;
    let step_s = |s: u64| {
        let (lo, hi) = (s * B, ((s + 1) * B).min(N * L));
        let mut cost = COST.overhead;
        for k in 0..N {
            let (c0, e0) = (k * L, (k + 1) * L);
            let (c, e) = (lo.max(c0), hi.min(e0));
            if c < e {
                cost += COST.chunk_s(c - c0, e - c0);
                if c == c0 {
                    cost += COST.model.t0;
                }
            }
        }
        let decoders: Vec<u64> = (0..N)
            .filter(|&k| last_chunk_step(k) < s && s - last_chunk_step(k) < G)
            .map(|k| L + (s - last_chunk_step(k)))
            .collect();
        cost + COST.decode_s(decoders.len() as u64, decoders.iter().sum())
    };
    for k in 0..N {
        let expected: f64 = (0..=last_chunk_step(k)).map(step_s).sum();
        let ttft = record(&run, k).first_token_s.unwrap();
        assert!(
            (ttft - expected).abs() < EXACT_S,
            "request {k}: TTFT {ttft} vs {expected}"
        );
    }
    for (s, step) in run.steps.iter().enumerate() {
        assert!(
            (step.duration_s() - step_s(s as u64)).abs() < EXACT_S,
            "step {s}: {} vs {}",
            step.duration_s(),
            step_s(s as u64)
        );
    }
    // Once every request decodes, each step emits N tokens in the batched decode time.
    let all_decode: Vec<_> = run
        .steps
        .iter()
        .filter(|s| s.prefill_tokens == 0 && s.decoding == N)
        .collect();
    assert!(all_decode.len() > 10);
    for step in all_decode {
        let contexts: u64 = step.emissions.iter().map(|e| e.context_tokens).sum();
        let rate = N as f64 / step.duration_s();
        let model_rate = N as f64 / (COST.overhead + COST.decode_s(N, contexts));
        assert!((rate - model_rate).abs() < 1e-6 * model_rate);
        assert!(step.emissions.iter().all(|e| e.tokens == 1));
    }
}

#[test]
fn one_request_in_flight_keeps_the_one_request_timings() {
    let cfg = EngineConfig {
        cost: StepCost {
            overhead: 0.0,
            d2: 0.0,
            interference: 0.0,
            ..COST
        },
        max_batch_tokens: 1000,
        ..config(1 << 30)
    };
    let run = run_virtual(cfg, vec![request(0, 4321, 5, 0.0)], |_, _| {});
    let ttft = record(&run, 0).first_token_s.unwrap();
    let model = COST.model;
    assert!(
        (ttft - model.prefill_s(0, 4321)).abs() < EXACT_S,
        "chunks telescope"
    );
    let decode: Vec<_> = run
        .steps
        .iter()
        .flat_map(|s| &s.emissions)
        .filter(|e| e.kind == OutputKind::Decode)
        .collect();
    assert_eq!(decode.len(), 4);
    for e in decode {
        assert!((e.step_s - model.decode_step_s(e.context_tokens)).abs() < EXACT_S);
    }
}

/// Pool P, requests of L + G tokens: exactly floor(P / (L+G)) at once, page-rounded.
#[test]
fn the_pool_admits_exactly_what_fits_and_the_rest_wait() {
    const P: u64 = 10_000;
    const L: u64 = 1000;
    const G: u64 = 200;
    let cfg = config(P);
    let arrivals = (0..20).map(|id| request(id, L, G, 0.0)).collect();
    let run = run_virtual(cfg, arrivals, |_, _| {});
    let fit = (P / 16) / (L + G).div_ceil(16);
    assert_eq!(fit, 8);
    let most = run.series.iter().map(|p| p.running).max().unwrap();
    assert_eq!(most as u64, fit);
    let first = &run.series.iter().find(|p| p.running > 0).unwrap();
    assert_eq!((first.running, first.waiting), (8, 12));
    assert_eq!(run.stats.preemptions, 0);
    assert_eq!(run.records.len(), 20);
    assert!(run.records.iter().all(|r| r.output_tokens == G));
    // The ninth waits for the first to finish.
    let ninth = record(&run, 8).admitted_s.unwrap();
    let first_done = run
        .records
        .iter()
        .filter_map(|r| r.finished_s)
        .fold(f64::INFINITY, f64::min);
    assert!((ninth - first_done).abs() < EXACT_S);
}

fn assert_preemptions_counted(run: &VirtualRun, n: usize, g: u64) {
    let per_request: u64 = run.records.iter().map(|r| u64::from(r.preemptions)).sum();
    assert!(run.stats.preemptions > 0, "expected preemptions");
    assert_eq!(per_request, run.stats.preemptions);
    assert_eq!(run.stuck, 0);
    assert_eq!(run.records.len(), n);
    assert!(
        run.records.iter().all(|r| r.output_tokens == g),
        "preempted requests are recomputed and finish"
    );
    let generated: u64 = run.records.iter().map(|r| r.output_tokens).sum();
    assert_eq!(run.stats.generation_tokens, generated);
}

#[test]
fn shrinking_the_pool_mid_decode_preempts_the_newest() {
    let cfg = config(10_000);
    let arrivals = (0..8).map(|id| request(id, 1000, 200, 0.0)).collect();
    // After step 20 every request decodes; then the pool holds only the prompts and a bit.
    let run = run_virtual(cfg, arrivals, |i, sched| {
        if i == 20 {
            sched.resize_pool(8 * 66 * 16, 0.0);
        }
    });
    assert_preemptions_counted(&run, 8, 200);
    let oldest = record(&run, 0).preemptions;
    let newest = record(&run, 7).preemptions;
    assert_eq!(oldest, 0, "the oldest request is never the victim");
    assert!(newest > 0, "the newest request is");
}

#[test]
fn a_pool_too_small_for_decode_growth_preempts_without_reservation() {
    let cfg = EngineConfig {
        new_token_ratio: 0.0,
        ..config(4000)
    };
    let arrivals = (0..6).map(|id| request(id, 500, 300, 0.0)).collect();
    let run = run_virtual(cfg, arrivals, |_, _| {});
    assert_preemptions_counted(&run, 6, 300);
}

/// Poisson arrivals: time-average in system (from the engine's series) equals
/// rate × mean time in system (from the per-request log).
#[test]
fn littles_law_holds_over_the_truth_log() {
    const N: usize = 3000;
    const RATE: f64 = 40.0;
    let mut rng = ChaCha8Rng::seed_from_u64(7);
    let mut t = 0.0;
    let arrivals: Vec<_> = (0..N as u64)
        .map(|id| {
            t += -(1.0 - rng.random::<f64>()).ln() / RATE;
            let len = rng.random_range(100..2000);
            let out = rng.random_range(10..80);
            request(id, len, out, t)
        })
        .collect();
    let last_arrival = t;
    let cfg = EngineConfig {
        max_running: 16,
        ..config(200_000)
    };
    let run = run_virtual(cfg, arrivals, |_, _| {});
    assert_eq!(run.records.len(), N);
    let in_system: f64 = run
        .records
        .iter()
        .map(|r| r.finished_s.unwrap() - r.arrival_s)
        .sum();
    // The series integrates to the same area as the log, exactly.
    let area: f64 = run
        .series
        .windows(2)
        .map(|w| (w[1].t_s - w[0].t_s) * (w[0].running + w[0].waiting) as f64)
        .sum();
    assert!(
        (area - in_system).abs() < 1e-6 * in_system,
        "series {area} vs log {in_system}"
    );
    let end = run.series.last().unwrap().t_s;
    let mean_in_system = area / end;
    let predicted = RATE * in_system / N as f64;
    // The sampling error of the arrival count over the window is 1/sqrt(N) relative (4σ),
    // and the window runs past the last arrival by the drain time.
    let tolerance = 4.0 / (N as f64).sqrt() + (end - last_arrival) / end;
    let relative = (mean_in_system - predicted).abs() / predicted;
    assert!(
        relative < tolerance,
        "L {mean_in_system} vs λW {predicted} ({relative} > {tolerance})"
    );
    assert!(
        run.series.iter().any(|p| p.waiting > 0),
        "the load queued at times"
    );
}

#[test]
fn live_requests_evict_cached_prefixes_from_the_shared_pool() {
    // A pool of 250 pages of 16 tokens. A 1000-token prompt runs twice (the second hits
    // floor(999/16)·16 = 992 tokens), live fillers run, then the prompt comes back.
    let shared = |id, arrival_s| NewRequest {
        prompt: prompt(1000, 999),
        ..request(id, 1000, 10, arrival_s)
    };
    let cached_after = |filler_len: u64| {
        let mut arrivals = vec![shared(0, 0.0), shared(1, 10.0)];
        arrivals.extend((20..22).map(|id| request(id, filler_len, 100, 20.0)));
        arrivals.push(shared(99, 40.0));
        let run = run_virtual(config(4000), arrivals, |_, _| {});
        assert_eq!(record(&run, 1).cached_tokens, 992);
        let most = run.series.iter().map(|p| p.running).max().unwrap();
        assert_eq!(most, 2, "both fillers ran at once");
        record(&run, 99).cached_tokens
    };
    // Fillers of 2 × 38 pages leave room: the cached prompt survives.
    assert_eq!(cached_after(500), 992);
    // Fillers of 2 × 125 pages need the whole pool: the cached prefix is evicted, a miss.
    assert_eq!(cached_after(1900), 0);
}

/// llama.cpp's n_batch and vLLM's token budget count the running decodes' tokens, so a
/// prompt beside B decoding requests gets B fewer tokens that step; SGLang's chunk budget
/// (`Prefill`) counts prefill tokens only.
#[test]
fn a_budget_counting_decodes_leaves_a_prompt_fewer_tokens_per_step() {
    const B: u64 = 1000;
    for (budget, first_in_step) in [(TokenBudget::Prefill, 2), (TokenBudget::All, 3)] {
        let cfg = EngineConfig {
            max_batch_tokens: B,
            budget,
            ..config(1 << 30)
        };
        // Request 0 runs alone (an idle engine starts on it) and then decodes; request 1
        // arrives during that first step and needs the whole budget: beside one decode it
        // gets B − 1 tokens under `All`, and its last token a step later.
        let arrivals = vec![request(0, 500, 50, 0.0), request(1, B, 50, 1e-9)];
        let run = run_virtual(cfg, arrivals, |_, _| {});
        let first = record(&run, 1).first_token_s.unwrap();
        let end = run.steps[first_in_step - 1].end_s;
        assert!(
            (first - end).abs() < EXACT_S,
            "{budget:?}: first token at {first}, step {first_in_step} ends at {end}"
        );
        let step2: u64 = run.steps[1].prefill_tokens;
        assert_eq!(step2, if budget == TokenBudget::All { B - 1 } else { B });
    }
}
