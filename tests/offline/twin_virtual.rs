//! The engine's virtual-time driver against its real-time one (the same requests give the
//! same scheduler truth), and `twin predict`'s clients against what `load` does: the
//! one-request timings of the step model, and the very open-loop schedule `load` sends.

use crate::common;

use common::{load_args, timing_lock};
use ctxbench::sim::CostModel;
use ctxbench::sim::driver::Engine;
use ctxbench::sim::scheduler::{EngineConfig, EngineRecord, NewRequest, Scheduler};
use ctxbench::sim::stepcost::StepCost;
use ctxbench::sim::virtual_time::{NoHooks, Scheduled, drive};
use std::time::{Duration, Instant};

/// Both drivers add the same step costs in the same order: they agree to float rounding
/// of sums of a few hundred terms of ~10 ms (each ulp ~2e-18 s).
const SAME_S: f64 = 1e-9;

fn config() -> EngineConfig {
    EngineConfig {
        cost: StepCost {
            model: CostModel {
                t0: 0.004,
                p0: 200_000.0,
                q: 2.0e-10,
                d0: 0.003,
                d1: 4.0e-8,
            },
            overhead: 0.001,
            d2: 2.0e-4,
            interference: 0.0,
            spec_draft: Default::default(),
        },
        // Small enough that prompts take several chunks, shared with decode.
        max_batch_tokens: 1024,
        budget: ctxbench::sim::TokenBudget::Prefill,
        max_running: 3,
        spec: 1,
        new_token_ratio: 1.0,
        page_tokens: 16,
        pool_tokens: 1 << 20,
        cache: true,
    }
}

/// Request `id`'s prompt: requests 0 and 4 share 1,600 leading tokens (a cache hit when
/// the first has been prefilled); the rest share nothing.
fn prompt(id: u64, len: u64) -> Vec<u32> {
    (0..len)
        .map(|i| {
            let owner = if id == 4 && i < 1600 { 0 } else { id };
            (owner * 100_003 + i * 7 + 1) as u32
        })
        .collect()
}

fn request(id: u64, arrival_s: f64) -> NewRequest {
    let len = 600 + 700 * (id % 4);
    NewRequest {
        id,
        prompt: prompt(id, len),
        max_tokens: 6 + 3 * id,
        target_tokens: 6 + 3 * id,
        arrival_s,
        seed: id,
    }
}

fn by_id(mut v: Vec<EngineRecord>) -> Vec<EngineRecord> {
    v.sort_by_key(|r| r.id);
    v
}

fn close(a: Option<f64>, b: Option<f64>) -> bool {
    match (a, b) {
        (Some(a), Some(b)) => (a - b).abs() < SAME_S,
        (None, None) => true,
        _ => false,
    }
}

/// Requests arrive in three bursts, the later ones while steps are in flight (beyond the
/// running cap, behind chunked prefills, one hitting the cache); the engine's records from
/// the real-time driver equal those from the virtual-time one given the same arrivals.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn virtual_time_gives_the_real_time_engines_truth() {
    let _timing = timing_lock().await;
    let engine = Engine::start(config()).expect("engine starts");
    let bursts: [&[u64]; 3] = [&[0, 1, 2], &[3, 4], &[5, 6, 7]];
    let mut sent = 0;
    for (b, ids) in bursts.iter().enumerate() {
        if b > 0 {
            tokio::time::sleep(Duration::from_millis(23)).await;
        }
        for &id in ids.iter() {
            // The arrival is stamped under the engine's lock, so it is ordered with the
            // engine's own decisions exactly as the virtual driver orders it.
            engine.with(|s, _| s.submit(request(id, engine.now_s())));
            sent += 1;
        }
    }
    let until = Instant::now() + Duration::from_secs(30);
    let real = loop {
        let records = engine.with(|s, _| s.records().to_vec());
        if records.len() >= sent || Instant::now() >= until {
            break records;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    engine.stop();
    assert_eq!(real.len(), sent, "every request finished in real time");
    let arrivals = real.iter().map(|r| request(r.id, r.arrival_s)).collect();
    let mut sched = Scheduler::new(config());
    let ended = drive(&mut sched, &mut Scheduled::new(arrivals), &mut NoHooks);
    assert_eq!(ended.stuck, 0);
    let (real, virt) = (by_id(real), by_id(sched.records().to_vec()));
    assert_eq!(real.len(), virt.len());
    assert!(
        real.iter().any(|r| r.cached_tokens > 0),
        "the shared prefix was served from the cache: {real:?}"
    );
    for (r, v) in real.iter().zip(&virt) {
        assert_eq!(r.id, v.id);
        assert_eq!(
            (r.prompt_tokens, r.cached_tokens, r.output_tokens),
            (v.prompt_tokens, v.cached_tokens, v.output_tokens),
            "request {}",
            r.id
        );
        assert_eq!(r.preemptions, v.preemptions);
        for (what, a, b) in [
            ("admitted", r.admitted_s, v.admitted_s),
            ("first token", r.first_token_s, v.first_token_s),
            ("finished", r.finished_s, v.finished_s),
        ] {
            assert!(
                close(a, b),
                "request {} {what}: real {a:?} virtual {b:?}",
                r.id
            );
        }
    }
}

/// `twin predict --rate` sends the very schedule `load` sends for the same seed, per length
/// and rate (the seed is mixed with each's index).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_seeded_open_loop_predicts_the_schedule_load_sends() {
    let _timing = timing_lock().await;
    let sim = common::sim(&[]).await;
    let flags = [
        "--lengths",
        "256,512",
        "--rate",
        "20,40",
        "--requests",
        "6",
        "--output-tokens",
        "2",
        "--seed",
        "11",
        "--arrival",
        "gamma:2",
    ];
    let measured = ctxbench::load::execute(load_args(&sim.url(), &flags))
        .await
        .expect("load runs");
    let twin = twin_of(&config());
    let mut argv = vec!["ctxbench", "twin", "predict", "--profile", "unused.json"];
    argv.extend_from_slice(&flags);
    let predicted = ctxbench::twin::execute(&twin, &predict_args(&argv)).unwrap();
    assert_eq!(measured.cells.len(), 4);
    assert_eq!(predicted.cells.len(), 4);
    for c in &measured.cells {
        let sched = |r: &ctxbench::load::LoadResult| {
            let mut v: Vec<(u64, f64)> = r
                .requests
                .iter()
                .filter(|q| q.cell.same(&c.cell))
                .map(|q| (q.index, q.scheduled_s))
                .collect();
            v.sort_by_key(|x| x.0);
            v
        };
        let (m, p) = (sched(&measured), sched(&predicted));
        assert_eq!(m.len(), 6, "{:?}", c.cell);
        assert_eq!(
            m, p,
            "cell {:?}: load's schedule vs the prediction's",
            c.cell
        );
    }
}

/// One closed-loop worker: every request alone, so each TTFT is the one-request model
/// (step overhead + t0 + n/p0 + q·n²/2, one chunk) and each TPOT one decode step at the
/// growing context, averaged.
#[test]
fn one_worker_predicts_the_one_request_model() {
    let cfg = EngineConfig {
        max_batch_tokens: 8192,
        budget: ctxbench::sim::TokenBudget::Prefill,
        ..config()
    };
    let twin = twin_of(&cfg);
    let argv = [
        "ctxbench",
        "twin",
        "predict",
        "--profile",
        "p.json",
        "--lengths",
        "4000",
        "--concurrency",
        "1",
        "--requests",
        "5",
        "--output-tokens",
        "9",
    ];
    let r = ctxbench::twin::execute(&twin, &predict_args(&argv)).unwrap();
    let c = &cfg.cost;
    let n = 4000.0;
    let ttft = c.overhead + c.model.t0 + n / c.model.p0 + c.model.q * n * n / 2.0;
    let decode: f64 = (0..8)
        .map(|k| c.overhead + c.decode_s(1, 4000 + 1 + k))
        .sum::<f64>()
        / 8.0;
    assert_eq!(r.requests.len(), 5);
    for q in &r.requests {
        assert!(q.ok);
        assert!((q.ttft_s.unwrap() - ttft).abs() < SAME_S, "{q:?} vs {ttft}");
        assert!(
            (q.tpot_s.unwrap() - decode).abs() < SAME_S,
            "{q:?} vs {decode}"
        );
        assert_eq!(q.output_tokens, Some(9));
        assert_eq!(q.cached_tokens, Some(0), "load's nonces defeat the cache");
    }
    // Back to back: each request is sent as the one before ends.
    let mut reqs = r.requests.clone();
    reqs.sort_by_key(|q| q.index);
    for w in reqs.windows(2) {
        let gap = w[1].sent_s - w[0].ended_s.unwrap();
        assert!((0.0..1e-5).contains(&gap), "{gap}");
    }
}

fn predict_args(argv: &[&str]) -> ctxbench::cli::LoadArgs {
    use clap::Parser;
    let cli = ctxbench::cli::Cli::try_parse_from(argv).expect("twin predict flags parse");
    let ctxbench::cli::Command::Twin(t) = cli.command else {
        unreachable!()
    };
    let ctxbench::cli::TwinCommand::Predict(p) = t.command else {
        unreachable!()
    };
    p.load
}

fn twin_of(cfg: &EngineConfig) -> ctxbench::twin::Twin {
    let profile = ctxbench::twin::profile_of(cfg, 131_072);
    ctxbench::twin::Twin::new(profile, "test-profile.json".into())
}
