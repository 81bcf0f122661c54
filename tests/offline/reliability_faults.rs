//! Reliability, faults: every simulator fault becomes a classified error record and the
//! sweep goes on; a busy flush is retried with back-off, then flagged.
//!
//! Loopback only, every test bounded in time.

use crate::common;
use common::same_sample;
use common::{flags, sim};
use ctxbench::record::{ErrorRecord, Sample, Summary, flag};
use ctxbench::sweep::SweepResult;
use ctxbench::{exit, resultfile};
use std::collections::{BTreeMap, HashSet};
use std::time::{Duration, Instant};

// ---------------------------------------------------------------------------------------
// 1. Faults become classified error records
// ---------------------------------------------------------------------------------------

/// The simulator's fault name and the error kind the client must record for it.
const FAULT_KINDS: [(&str, &str); 8] = [
    ("http500", "http_5xx"),
    ("http503", "http_5xx"),
    ("http400", "http_4xx"),
    ("reset", "reset"),
    ("stall", "timeout"),
    ("malformed", "malformed"),
    ("error_event", "server_error_event"),
    ("no_final", "incomplete"),
];

/// One point, two reps, every request meeting `fault`; `--timeout 2` is the only thing that
/// can end a stall (the simulator keeps it alive with comments for 120 s).
async fn all_faulted(fault: &str, api: &str) -> (SweepResult, Duration) {
    let server = sim(&["--fault-rate", "1", "--fault-kinds", fault, "--seed", "3"]).await;
    let t = Instant::now();
    let r = tokio::time::timeout(
        Duration::from_secs(30),
        flags("1k", 2, 8)
            .with(&["--api", api, "--timeout", "2"])
            .run(&server.url()),
    )
    .await
    .unwrap_or_else(|_| panic!("{fault} ({api}): the sweep hung"));
    let elapsed = t.elapsed();
    let truth = common::measured_truth_after(&server, 2).await;
    assert_eq!(
        truth.len(),
        2,
        "{fault} ({api}): one server request per rep"
    );
    assert!(
        truth.iter().all(|t| t.fault.as_deref() == Some(fault)),
        "{fault}: {truth:?}"
    );
    (r, elapsed)
}

fn assert_all_failed_as(r: &SweepResult, fault: &str, kind: &str, api: &str) {
    let ctx = format!("{fault} via --api {api}");
    assert!(
        r.samples.is_empty(),
        "{ctx}: a failed attempt became a sample: {:?}",
        r.samples
    );
    assert_eq!(r.errors.len(), 2, "{ctx}: {:?}", r.errors);
    for (rep, e) in r.errors.iter().enumerate() {
        assert_eq!(e.kind, kind, "{ctx}: {e:?}");
        assert_eq!(e.context_tokens, 1024, "{ctx}");
        assert_eq!(e.rep, rep as u32, "{ctx}");
        assert!(!e.message.is_empty(), "{ctx}");
    }
    let p = &r.summary.points[..];
    assert_eq!(p.len(), 1, "{ctx}");
    assert_eq!(
        (p[0].attempts, p[0].n_valid, p[0].n_failed),
        (2, 0, 2),
        "{ctx}"
    );
    assert_eq!(
        p[0].errors,
        BTreeMap::from([(kind.to_string(), 2)]),
        "{ctx}"
    );
    assert_eq!(r.exit_code(), exit::NOTHING_VALID, "{ctx}");
    // What the user sees: 0 of 2 valid and the failures by kind.
    let table = ctxbench::report::render(&r.run, &r.summary, ctxbench::cli::Format::Table);
    assert!(table.contains("0/2"), "{ctx}:\n{table}");
    assert!(table.contains(&format!("err:{kind}×2")), "{ctx}:\n{table}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_fault_kind_is_a_classified_error_on_the_native_api() {
    for (fault, kind) in FAULT_KINDS {
        let (r, elapsed) = all_faulted(fault, "sglang").await;
        assert_all_failed_as(&r, fault, kind, "sglang");
        if fault == "stall" {
            // Two stalls, each ended by the 2 s deadline despite keep-alive comments.
            assert!(elapsed >= Duration::from_secs(4), "{elapsed:?}");
            assert!(elapsed < Duration::from_secs(12), "{elapsed:?}");
            assert!(r.errors[0].message.contains("2.0 s"), "{:?}", r.errors[0]);
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_fault_kind_is_a_classified_error_on_the_openai_api() {
    for (fault, kind) in FAULT_KINDS {
        let (r, _) = all_faulted(fault, "openai").await;
        assert_all_failed_as(&r, fault, kind, "openai");
    }
}

/// Faults at random among good requests: the sweep goes on, every attempt is either one
/// valid sample or one error record, never both, and the summary and the file agree.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mixed_faults_never_become_samples_and_the_sweep_goes_on() {
    let server = sim(&[
        "--fault-rate",
        "0.4",
        "--fault-kinds",
        "http500,http503,http400,reset,stall,malformed,error_event,no_final",
        "--seed",
        "11",
    ])
    .await;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("mixed.jsonl");
    let reps = 6u32;
    let r = tokio::time::timeout(
        Duration::from_secs(60),
        flags("1k,2k", reps, 8)
            .with(&["--timeout", "2", "--out", out.to_str().unwrap()])
            .run(&server.url()),
    )
    .await
    .expect("the sweep finishes");
    let truth = common::measured_truth_after(&server, 2 * reps as usize).await;

    assert_eq!(r.samples.len() + r.errors.len(), 2 * reps as usize);
    assert!(
        !r.errors.is_empty() && !r.samples.is_empty(),
        "{:?}",
        r.errors
    );
    let faulted = truth.iter().filter(|t| t.fault.is_some()).count();
    assert_eq!(
        faulted,
        r.errors.len(),
        "one error record per faulted request"
    );
    assert_eq!(
        truth.len(),
        2 * reps as usize,
        "no retries behind the user's back"
    );
    let known: HashSet<&str> = FAULT_KINDS.iter().map(|(_, k)| *k).collect();
    for e in &r.errors {
        assert!(known.contains(e.kind.as_str()), "{e:?}");
    }
    let failed: HashSet<(u64, u32)> = r.errors.iter().map(|e| (e.context_tokens, e.rep)).collect();
    for s in &r.samples {
        assert!(
            !failed.contains(&(s.context_tokens, s.rep)),
            "a failed attempt also has a sample: {s:?}"
        );
        assert!(s.valid, "an unfaulted request is a valid sample: {s:?}");
        assert_eq!(s.output_tokens, Some(8));
    }
    for p in &r.summary.points {
        let errs: Vec<&ErrorRecord> = r
            .errors
            .iter()
            .filter(|e| e.context_tokens == p.context_tokens)
            .collect();
        let samples: Vec<&Sample> = r
            .samples
            .iter()
            .filter(|s| s.context_tokens == p.context_tokens)
            .collect();
        assert_eq!(p.attempts, reps as usize);
        assert_eq!(p.n_failed, errs.len());
        assert_eq!(p.n_valid, samples.len());
        assert_eq!(p.errors.values().sum::<usize>(), p.n_failed);
        for e in errs {
            assert!(p.errors.contains_key(&e.kind));
        }
    }
    // The file holds exactly what the sweep returned, and its summary.
    let file = resultfile::read(&out).unwrap();
    assert!(!file.torn_tail);
    // (Compared by identity: floats come back within an ulp, see `same_sample`.)
    assert_eq!(file.samples.len(), r.samples.len());
    for (a, b) in file.samples.iter().zip(&r.samples) {
        assert!(same_sample(a, b), "{a:?} vs {b:?}");
    }
    assert_eq!(file.errors, r.errors);
    let counts = |s: &Summary| {
        s.points
            .iter()
            .map(|p| {
                (
                    p.context_tokens,
                    p.attempts,
                    p.n_valid,
                    p.n_failed,
                    p.errors.clone(),
                )
            })
            .collect::<Vec<_>>()
    };
    assert_eq!(file.summary.as_ref().map(counts), Some(counts(&r.summary)));
    let expected = if r.summary.points.iter().all(|p| p.n_valid > 0) {
        exit::OK
    } else {
        exit::PARTIAL
    };
    assert_eq!(r.exit_code(), expected);
}

/// With `--method both` a fault in either request of a two-point pair fails that sample
/// alone, recorded with its method; the stream sample of the same rep is unaffected.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_point_faults_fail_their_own_sample_only() {
    let server = sim(&[
        "--fault-rate",
        "0.3",
        "--fault-kinds",
        "http500,reset,no_final",
        "--seed",
        "5",
    ])
    .await;
    let reps = 4u32;
    // 64 tokens: the N-token request of a pair outlasts the 1-token one by ~250 ms of
    // decode, so a loaded machine cannot invert the pair (with 8 tokens the margin was
    // ~30 ms, and a delayed 1-token request flagged a sample `two_point_inverted`).
    let r = flags("1k", reps, 64)
        .with(&["--method", "both", "--timeout", "5"])
        .run(&server.url())
        .await;
    assert_eq!(r.samples.len() + r.errors.len(), 2 * reps as usize);
    assert!(!r.errors.is_empty(), "seed 5 meets faults");
    let failed: HashSet<(u32, String)> = r
        .errors
        .iter()
        .map(|e| (e.rep, e.method.clone().expect("errors name their method")))
        .collect();
    assert_eq!(failed.len(), r.errors.len());
    for s in &r.samples {
        assert!(!failed.contains(&(s.rep, s.method.clone())), "{s:?}");
        assert!(s.valid, "{s:?}");
    }
    let p = &r.summary.points[0];
    assert_eq!(p.attempts, 2 * reps as usize);
    assert_eq!(p.n_failed, r.errors.len());
}

/// `/flush_cache` always busy: each flush is retried with back-off, then the sample is
/// flagged `flush_failed`. With the nonce (`--cache-bust auto`) the cached-token check
/// still verifies the sample, so it stays valid (documented at `flag::invalidates`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn busy_flush_is_flagged_and_the_nonce_keeps_the_sample_valid() {
    assert!(!flag::invalidates(flag::FLUSH_FAILED));
    let server = sim(&["--fault-rate", "1", "--fault-kinds", "flush_busy"]).await;
    let t = Instant::now();
    let r = flags("1k", 2, 8).run(&server.url()).await;
    let elapsed = t.elapsed();
    assert!(r.errors.is_empty(), "{:?}", r.errors);
    assert_eq!(r.samples.len(), 2);
    for s in &r.samples {
        assert!(s.flags.contains(&flag::FLUSH_FAILED), "{s:?}");
        assert!(s.valid, "{s:?}");
        assert!(s.cached_tokens.unwrap_or(0) <= 16, "{s:?}");
    }
    assert_eq!(
        r.summary.points[0].flags.get(flag::FLUSH_FAILED.name()),
        Some(&2)
    );
    assert_eq!(r.exit_code(), exit::OK);
    // Back-off between attempts (50+100+200+400+800 ms per flush), not a hammering loop.
    assert!(elapsed >= Duration::from_millis(2 * 1550), "{elapsed:?}");
}

/// Without the nonce a failed flush leaves the cache warm: the repeat is caught by the
/// cached-token check and never counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn busy_flush_without_nonce_is_caught_by_the_cache_check() {
    let server = sim(&["--fault-rate", "1", "--fault-kinds", "flush_busy"]).await;
    let r = flags("1k", 2, 8)
        .with(&["--cache-bust", "flush"])
        .run(&server.url())
        .await;
    assert_eq!(r.samples.len(), 2);
    let second = &r.samples[1];
    assert!(second.flags.contains(&flag::FLUSH_FAILED), "{second:?}");
    assert!(second.flags.contains(&flag::CACHE_HIT), "{second:?}");
    assert!(!second.valid, "{second:?}");
    assert_eq!(r.summary.points[0].n_valid, 1);
}

/// A flush server that answers 400 ("busy") to its first `busy` calls, recording when.
async fn flush_server(busy: usize) -> (String, std::sync::Arc<std::sync::Mutex<Vec<Instant>>>) {
    use axum::http::StatusCode;
    use axum::routing::post;
    let calls = std::sync::Arc::new(std::sync::Mutex::new(Vec::<Instant>::new()));
    let c = calls.clone();
    let app = axum::Router::new().route(
        "/flush_cache",
        post(move || {
            let c = c.clone();
            async move {
                let mut v = c.lock().unwrap();
                v.push(Instant::now());
                if v.len() <= busy {
                    (
                        StatusCode::BAD_REQUEST,
                        "Cache not flushed: 1 request(s) are running",
                    )
                } else {
                    (StatusCode::OK, "Cache flushed.")
                }
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    (url, calls)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn flush_retries_with_growing_back_off_then_gives_up_promptly() {
    use ctxbench::backend::Flush;
    use ctxbench::backend::flush::Flusher;
    use ctxbench::backend::http::Http;

    let (url, calls) = flush_server(3).await;
    let http = Http::new(&url, None).unwrap();
    let got = Flusher::SglangFlushCache.flush(&http).await;
    assert_eq!(got, Ok(Flush::Done));
    let times = calls.lock().unwrap().clone();
    assert_eq!(times.len(), 4, "three busy answers, then success");
    let gaps: Vec<Duration> = times.windows(2).map(|w| w[1] - w[0]).collect();
    for (gap, min_ms) in gaps.iter().zip([50u64, 100, 200]) {
        assert!(*gap >= Duration::from_millis(min_ms - 5), "{gaps:?}");
    }

    let (url, calls) = flush_server(usize::MAX).await;
    let http = Http::new(&url, None).unwrap();
    let t = Instant::now();
    let got = Flusher::SglangFlushCache.flush(&http).await;
    let elapsed = t.elapsed();
    let err = got.expect_err("always busy");
    assert_eq!(err.kind(), "http_4xx", "{err}");
    assert!(err.to_string().contains("Cache not flushed"), "{err}");
    assert_eq!(
        calls.lock().unwrap().len(),
        6,
        "a bounded number of attempts"
    );
    // 50+100+200+400+800 ms between six attempts; no pointless wait after the last one.
    assert!(elapsed >= Duration::from_millis(1500), "{elapsed:?}");
    assert!(elapsed < Duration::from_millis(2800), "{elapsed:?}");
}
