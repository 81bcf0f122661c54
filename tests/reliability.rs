//! Reliability: every simulator fault becomes a classified error record and the sweep goes
//! on; exit codes tell a partial sweep from a failed one; kill -9 at random moments followed
//! by `--resume` loses nothing and duplicates nothing; bad input is refused before anything
//! is written; an API key never reaches output or files, even when a server echoes it.
//!
//! Loopback only, every test bounded in time.

mod common;
use common::{sim, sweep};
use ctxbench::record::{ErrorRecord, PointSummary, Sample, Summary, flag};
use ctxbench::sweep::SweepResult;
use ctxbench::{exit, resultfile};
use std::collections::{BTreeMap, HashSet};
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

fn ctxbench() -> Command {
    Command::new(env!("CARGO_BIN_EXE_ctxbench"))
}

/// Run the binary, killing it if it outlives `limit` (a hang fails the test, not CI).
fn run_bounded(cmd: &mut Command, limit: Duration) -> Output {
    let child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("binary starts");
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(limit) {
        Ok(out) => out.expect("binary runs"),
        Err(_) => {
            let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
            panic!("ctxbench did not finish within {limit:?}");
        }
    }
}

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// splitmix64: seeded, dependency-free randomness for kill delays.
struct SplitMix(u64);
impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.next() % (hi - lo)
    }
}

/// The same measurement, floats equal to 1e-12 relative (serde_json without its
/// `float_roundtrip` feature may read a float back one ulp off).
fn same_sample(a: &Sample, b: &Sample) -> bool {
    let close = |x: Option<f64>, y: Option<f64>| match (x, y) {
        (Some(x), Some(y)) => (x - y).abs() <= 1e-12 * x.abs().max(y.abs()),
        (x, y) => x == y,
    };
    let key = |s: &Sample| {
        (
            s.context_tokens,
            s.rep,
            s.method.clone(),
            s.valid,
            s.flags.clone(),
            s.prompt_tokens,
            s.output_tokens,
        )
    };
    key(a) == key(b)
        && close(a.ttft_s, b.ttft_s)
        && close(a.decode_tps, b.decode_tps)
        && close(a.prefill_tps, b.prefill_tps)
}

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
        sweep(
            &server.url(),
            &[
                "--api",
                api,
                "--lengths",
                "1k",
                "--reps",
                "2",
                "--output-tokens",
                "8",
                "--no-warmup",
                "--timeout",
                "2",
            ],
        ),
    )
    .await
    .unwrap_or_else(|_| panic!("{fault} ({api}): the sweep hung"));
    let elapsed = t.elapsed();
    tokio::time::sleep(Duration::from_millis(100)).await;
    // The sweep's pre-measurement probes (API prefix, transport) are 64-token prompts.
    let truth: Vec<_> = server
        .truth()
        .into_iter()
        .filter(|t| t.prompt_tokens > ctxbench::sweep::allowance::PROBE_TOKENS)
        .collect();
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
        sweep(
            &server.url(),
            &[
                "--lengths",
                "1k,2k",
                "--reps",
                &reps.to_string(),
                "--output-tokens",
                "8",
                "--no-warmup",
                "--timeout",
                "2",
                "--out",
                out.to_str().unwrap(),
            ],
        ),
    )
    .await
    .expect("the sweep finishes");
    tokio::time::sleep(Duration::from_millis(100)).await;
    // The sweep's pre-measurement probes (API prefix, transport) are 64-token prompts.
    let truth: Vec<_> = server
        .truth()
        .into_iter()
        .filter(|t| t.prompt_tokens > ctxbench::sweep::allowance::PROBE_TOKENS)
        .collect();

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
    let r = sweep(
        &server.url(),
        &[
            "--lengths",
            "1k",
            "--reps",
            &reps.to_string(),
            "--output-tokens",
            "8",
            "--no-warmup",
            "--method",
            "both",
            "--timeout",
            "5",
        ],
    )
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
    let r = sweep(
        &server.url(),
        &[
            "--lengths",
            "1k",
            "--reps",
            "2",
            "--output-tokens",
            "8",
            "--no-warmup",
        ],
    )
    .await;
    let elapsed = t.elapsed();
    assert!(r.errors.is_empty(), "{:?}", r.errors);
    assert_eq!(r.samples.len(), 2);
    for s in &r.samples {
        assert!(s.flags.iter().any(|f| f == flag::FLUSH_FAILED), "{s:?}");
        assert!(s.valid, "{s:?}");
        assert!(s.cached_tokens.unwrap_or(0) <= 16, "{s:?}");
    }
    assert_eq!(r.summary.points[0].flags.get(flag::FLUSH_FAILED), Some(&2));
    assert_eq!(r.exit_code(), exit::OK);
    // Back-off between attempts (50+100+200+400+800 ms per flush), not a hammering loop.
    assert!(elapsed >= Duration::from_millis(2 * 1550), "{elapsed:?}");
}

/// Without the nonce a failed flush leaves the cache warm: the repeat is caught by the
/// cached-token check and never counted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn busy_flush_without_nonce_is_caught_by_the_cache_check() {
    let server = sim(&["--fault-rate", "1", "--fault-kinds", "flush_busy"]).await;
    let r = sweep(
        &server.url(),
        &[
            "--lengths",
            "1k",
            "--reps",
            "2",
            "--output-tokens",
            "8",
            "--no-warmup",
            "--cache-bust",
            "flush",
        ],
    )
    .await;
    assert_eq!(r.samples.len(), 2);
    let second = &r.samples[1];
    assert!(
        second.flags.iter().any(|f| f == flag::FLUSH_FAILED),
        "{second:?}"
    );
    assert!(
        second.flags.iter().any(|f| f == flag::CACHE_HIT),
        "{second:?}"
    );
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

// ---------------------------------------------------------------------------------------
// 2. Exit codes
// ---------------------------------------------------------------------------------------

fn result_with(points: &[(u64, usize)], interrupted: bool, template: &SweepResult) -> SweepResult {
    SweepResult {
        run: template.run.clone(),
        samples: Vec::new(),
        errors: Vec::new(),
        summary: Summary {
            points: points
                .iter()
                .map(|&(n, valid)| PointSummary {
                    context_tokens: n,
                    attempts: 2,
                    n_valid: valid,
                    n_failed: 2 - valid,
                    ..PointSummary::default()
                })
                .collect(),
            ..Summary::default()
        },
        interrupted,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exit_codes_from_real_sweeps_and_the_rule_itself() {
    let server = sim(&[]).await;
    let base = ["--reps", "1", "--output-tokens", "8", "--no-warmup"];
    // Every point valid.
    let ok = sweep(
        &server.url(),
        &[&base[..], &["--lengths", "1k,2k"]].concat(),
    )
    .await;
    assert_eq!(ok.exit_code(), exit::OK);
    // 64k takes ~1.5 s to prefill: with a 0.5 s deadline that point alone fails.
    let partial = sweep(
        &server.url(),
        &[&base[..], &["--lengths", "1k,64k", "--timeout", "0.5"]].concat(),
    )
    .await;
    assert_eq!(partial.summary.points.len(), 2);
    assert_eq!(partial.summary.points[0].n_valid, 1, "{:?}", partial.errors);
    assert_eq!(partial.summary.points[1].n_valid, 0);
    assert_eq!(partial.errors[0].kind, "timeout");
    assert_eq!(partial.exit_code(), exit::PARTIAL);
    // Nothing valid.
    let faulty = sim(&["--fault-rate", "1", "--fault-kinds", "http500"]).await;
    let none = sweep(
        &faulty.url(),
        &[&base[..], &["--lengths", "1k,2k"]].concat(),
    )
    .await;
    assert_eq!(none.exit_code(), exit::NOTHING_VALID);

    // The rule, point by point.
    let t = &ok;
    assert_eq!(
        result_with(&[(1, 1), (2, 2)], false, t).exit_code(),
        exit::OK
    );
    assert_eq!(
        result_with(&[(1, 1), (2, 0)], false, t).exit_code(),
        exit::PARTIAL
    );
    assert_eq!(
        result_with(&[(1, 0), (2, 0)], false, t).exit_code(),
        exit::NOTHING_VALID
    );
    assert_eq!(result_with(&[], false, t).exit_code(), exit::NOTHING_VALID);
    assert_eq!(
        result_with(&[(1, 2)], true, t).exit_code(),
        exit::INTERRUPTED
    );
}

#[test]
fn exit_codes_from_the_binary() {
    let common = ["sweep", "--output-tokens", "8", "--no-warmup"];
    let limit = Duration::from_secs(60);
    let code = |extra: &[&str]| {
        let reps: &[&str] = if extra.contains(&"--reps") {
            &[]
        } else {
            &["--reps", "1"]
        };
        let out = run_bounded(ctxbench().args(common).args(reps).args(extra), limit);
        (out.status.code(), text(&out.stderr))
    };
    let (c, err) = code(&["--lengths", "1k"]);
    assert_eq!(c, Some(i32::from(exit::OK)), "{err}");
    let (c, err) = code(&["--lengths", "1k,64k", "--timeout", "0.5"]);
    assert_eq!(c, Some(i32::from(exit::PARTIAL)), "{err}");
    let (c, err) = code(&[
        "--lengths",
        "1k",
        "--fault-rate",
        "1",
        "--fault-kinds",
        "http500",
    ]);
    assert_eq!(c, Some(i32::from(exit::NOTHING_VALID)), "{err}");
    assert!(err.contains("http_5xx"), "{err}");
    let (c, err) = code(&["--lengths", "1k", "--reps", "0"]);
    assert_eq!(c, Some(i32::from(exit::FAILURE)), "{err}");
}

// ---------------------------------------------------------------------------------------
// 3. Crash safety
// ---------------------------------------------------------------------------------------

const CRASH_ARGS: [&str; 11] = [
    "sweep",
    "--lengths",
    "1k,2k,4k,8k",
    "--reps",
    "2",
    "--output-tokens",
    "64",
    "--seed",
    "7",
    "--format",
    "json",
];

fn assert_complete(path: &Path, lengths: &[u64], reps: u32) {
    let file = resultfile::read(path).unwrap_or_else(|e| panic!("{e}"));
    assert!(file.run.is_some(), "one run record");
    assert!(!file.torn_tail && !file.missing_final_newline);
    let mut pairs: Vec<(u64, u32)> = file
        .samples
        .iter()
        .map(|s| (s.context_tokens, s.rep))
        .collect();
    pairs.sort_unstable();
    let want: Vec<(u64, u32)> = lengths
        .iter()
        .flat_map(|n| (0..reps).map(move |r| (*n, r)))
        .collect();
    assert_eq!(pairs, want, "each (length, rep) exactly once");
    let summary = file.summary.expect("a summary");
    assert!(
        summary.points.iter().all(|p| p.n_valid == reps as usize),
        "{summary:?}"
    );
    // Exactly one run line, checked on the raw text too.
    let raw = std::fs::read_to_string(path).unwrap();
    assert_eq!(
        raw.lines()
            .filter(|l| l.contains("\"type\":\"run\""))
            .count(),
        1
    );
}

/// kill -9 at seeded random moments, then `--resume` until done.
#[test]
fn kill_9_at_random_moments_then_resume_loses_and_duplicates_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("crash.jsonl");
    let mut rng = SplitMix(0xC7B0);
    let started = Instant::now();
    let mut killed_mid_run = 0;
    for round in 0..8 {
        let delay = Duration::from_millis(rng.range(50, 1500));
        let mut child = ctxbench()
            .args(CRASH_ARGS)
            .arg("--out")
            .arg(&out)
            .arg("--resume")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        std::thread::sleep(delay);
        match child.try_wait().unwrap() {
            Some(status) => {
                let mut err = String::new();
                use std::io::Read;
                child
                    .stderr
                    .take()
                    .unwrap()
                    .read_to_string(&mut err)
                    .unwrap();
                assert!(status.success(), "round {round}: {err}");
            }
            None => {
                child.kill().unwrap(); // SIGKILL
                child.wait().unwrap();
                killed_mid_run += 1;
            }
        }
        if out.exists() {
            // Whatever a kill left must still read (a torn last line is tolerated).
            resultfile::read(&out).unwrap_or_else(|e| panic!("round {round} ({delay:?}): {e}"));
        }
    }
    assert!(
        killed_mid_run >= 4,
        "only {killed_mid_run} kills landed mid-run"
    );
    let mut done = false;
    for _ in 0..3 {
        let o = run_bounded(
            ctxbench()
                .args(CRASH_ARGS)
                .arg("--out")
                .arg(&out)
                .arg("--resume"),
            Duration::from_secs(60),
        );
        assert!(o.status.success(), "{}", text(&o.stderr));
        let doc: serde_json::Value = serde_json::from_slice(&o.stdout).expect("JSON summary");
        if doc["summary"]["points"]
            .as_array()
            .is_some_and(|p| p.len() == 4 && p.iter().all(|p| p["n_valid"] == 2))
        {
            done = true;
            break;
        }
    }
    assert!(done, "resume did not complete the sweep");
    assert_complete(&out, &[1024, 2048, 4096, 8192], 2);
    assert!(
        started.elapsed() < Duration::from_secs(90),
        "{:?}",
        started.elapsed()
    );
}

fn small_run(out: &Path, extra: &[&str]) -> Output {
    // Defaults that `extra` may override (clap refuses a flag given twice).
    let mut args = vec!["sweep", "--lengths", "1k,2k"];
    for (flag, value) in [("--reps", "1"), ("--output-tokens", "8")] {
        if !extra.contains(&flag) {
            args.extend([flag, value]);
        }
    }
    run_bounded(
        ctxbench().args(args).args(extra).arg("--out").arg(out),
        Duration::from_secs(60),
    )
}

#[test]
fn a_torn_last_line_is_dropped_on_resume() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("torn.jsonl");
    let o = small_run(&out, &[]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let good = std::fs::read_to_string(&out).unwrap();
    let sample_line = good
        .lines()
        .find(|l| l.contains("\"type\":\"sample\""))
        .unwrap()
        .to_string();
    // Half a JSON line, as a kill mid-write leaves it.
    let torn = format!("{good}{}", &sample_line[..sample_line.len() / 2]);
    std::fs::write(&out, &torn).unwrap();
    assert!(resultfile::read(&out).unwrap().torn_tail);

    let o = small_run(&out, &["--resume"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    assert!(
        text(&o.stderr).contains("torn last line was dropped"),
        "{}",
        text(&o.stderr)
    );
    let after = std::fs::read_to_string(&out).unwrap();
    assert!(
        after.starts_with(&good),
        "the good records are kept as they were"
    );
    let file = resultfile::read(&out).unwrap();
    assert!(!file.torn_tail && !file.missing_final_newline);
    assert_eq!(file.samples.len(), 2, "nothing remeasured, nothing lost");
    assert!(
        after
            .lines()
            .all(|l| serde_json::from_str::<serde_json::Value>(l).is_ok())
    );
}

/// The last record complete but its newline lost: the next record must not be glued to it.
#[test]
fn a_last_line_without_its_newline_is_terminated_on_resume() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("nonl.jsonl");
    let o = small_run(&out, &[]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let good = std::fs::read_to_string(&out).unwrap();
    std::fs::write(&out, good.trim_end_matches('\n')).unwrap();
    assert!(resultfile::read(&out).unwrap().missing_final_newline);

    let o = small_run(&out, &["--resume"]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let file = resultfile::read(&out).unwrap_or_else(|e| panic!("{e}"));
    assert!(!file.missing_final_newline);
    assert_eq!(file.samples.len(), 2);
    assert!(file.summary.is_some());
}

/// A kill between creating the file and writing its first line leaves it empty (or with a
/// torn header): `--resume` must start it afresh, not refuse it forever.
#[test]
fn an_empty_or_headless_torn_file_is_started_afresh_on_resume() {
    let dir = tempfile::tempdir().unwrap();
    for (name, content) in [
        ("empty.jsonl", String::new()),
        ("torn-head.jsonl", "{\"type\":\"run\",\"sche".to_string()),
    ] {
        let out = dir.path().join(name);
        std::fs::write(&out, &content).unwrap();
        let o = small_run(&out, &["--resume"]);
        assert!(o.status.success(), "{name}: {}", text(&o.stderr));
        let file = resultfile::read(&out).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert!(file.run.is_some(), "{name}");
        assert_eq!(file.samples.len(), 2, "{name}");
    }
    // Anything else without a run record may be someone's file: refused, never overwritten.
    let notes = dir.path().join("notes.txt");
    std::fs::write(&notes, "my notes, not JSON").unwrap();
    let o = small_run(&notes, &["--resume"]);
    assert_eq!(o.status.code(), Some(i32::from(exit::FAILURE)));
    assert!(
        text(&o.stderr).contains("no run record"),
        "{}",
        text(&o.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(&notes).unwrap(),
        "my notes, not JSON"
    );
}

#[test]
fn resume_with_another_configuration_is_refused_and_the_file_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("cfg.jsonl");
    let o = small_run(&out, &[]);
    assert!(o.status.success(), "{}", text(&o.stderr));
    let before = std::fs::read(&out).unwrap();
    for other in [
        &["--resume", "--output-tokens", "16"][..],
        &["--resume", "--reps", "2"][..],
        &["--resume", "--method", "two-point"][..],
    ] {
        let o = small_run(&out, other);
        let err = text(&o.stderr);
        assert_eq!(
            o.status.code(),
            Some(i32::from(exit::FAILURE)),
            "{other:?}: {err}"
        );
        assert!(err.contains("--resume"), "{other:?}: {err}");
        assert!(err.contains("different configuration"), "{other:?}: {err}");
        assert!(err.contains("new --out file"), "{other:?}: {err}");
        assert!(o.stdout.is_empty(), "{other:?}");
        assert_eq!(
            std::fs::read(&out).unwrap(),
            before,
            "{other:?}: the file was changed"
        );
    }
    // Without --resume an existing file is never overwritten.
    let o = small_run(&out, &[]);
    assert_eq!(o.status.code(), Some(i32::from(exit::FAILURE)));
    assert!(text(&o.stderr).contains("--resume"), "{}", text(&o.stderr));
    assert_eq!(std::fs::read(&out).unwrap(), before);
}

// ---------------------------------------------------------------------------------------
// 4. Bad input
// ---------------------------------------------------------------------------------------

/// Each case fails before measuring, names what is wrong, panics nowhere, and leaves no
/// `--out` file behind.
#[test]
fn bad_input_is_refused_before_anything_is_written() {
    let dir = tempfile::tempdir().unwrap();
    let cases: &[(&[&str], &str)] = &[
        (&["--lengths="], "--lengths"),
        (&["--lengths", ","], "--lengths"),
        (&["--lengths", "1k,,abc"], "--lengths"),
        (&["--lengths", "0"], "--lengths"),
        (&["--lengths=-1k"], "--lengths"),
        (&["--lengths", "1.3"], "--lengths"),
        (&["--lengths", "1kk"], "--lengths"),
        (&["--lengths", "k"], "--lengths"),
        (&["--lengths", "1m"], "--lengths"),
        (&["--lengths", "1k;2k"], "--lengths"),
        (&["--lengths", "99999999999999999"], "--lengths"),
        (&["--output-tokens", "0"], "--output-tokens"),
        (&["--output-tokens", "1"], "--output-tokens"),
        (&["--needle", "--needle-depths", "2"], "--needle-depths"),
        (&["--needle-depths", "0.5,x"], "--needle-depths"),
        (&["--needle-depths=-0.1"], "--needle-depths"),
        (&["--timeout", "0"], "--timeout"),
        (&["--lengths", "200k"], "limit"),
        (&["--api", "llamacpp"], "--api llamacpp"),
        (&["--persona", "openai", "--api", "sglang"], "--api sglang"),
        (&["--fault-kinds", "bogus"], "--fault-kinds"),
        (&["--url", "http://127.0.0.1:1"], "cannot probe"),
        (
            &["--api-key-env", "CTXBENCH_SURELY_UNSET_VAR"],
            "--api-key-env",
        ),
    ];
    for (i, (args, needle)) in cases.iter().enumerate() {
        let out = dir.path().join(format!("case{i}.jsonl"));
        let o = run_bounded(
            ctxbench()
                .arg("sweep")
                .args(*args)
                .arg("--out")
                .arg(&out)
                .env_remove("CTXBENCH_SURELY_UNSET_VAR"),
            Duration::from_secs(30),
        );
        let err = text(&o.stderr);
        assert!(!o.status.success(), "{args:?} succeeded");
        assert!(
            matches!(o.status.code(), Some(1 | 2)),
            "{args:?}: {:?}",
            o.status
        );
        assert!(err.contains(needle), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{args:?}: {err}");
        assert!(o.stdout.is_empty(), "{args:?}: {}", text(&o.stdout));
        assert!(!out.exists(), "{args:?}: left {} behind", out.display());
    }
}

/// The wrong `--api` for the server is one clear line, not a cascade of failed requests.
#[test]
fn wrong_api_is_a_one_line_error() {
    let o = run_bounded(
        ctxbench().args(["sweep", "--api", "llamacpp", "--lengths", "1k"]),
        Duration::from_secs(30),
    );
    assert_eq!(o.status.code(), Some(i32::from(exit::FAILURE)));
    let err = text(&o.stderr);
    let errors: Vec<&str> = err.lines().filter(|l| l.starts_with("error")).collect();
    assert_eq!(errors.len(), 1, "{err}");
    let line = errors[0];
    assert!(
        line.contains("--api llamacpp") && line.contains("sglang"),
        "{line}"
    );
    // Only the simulator notice precedes it: no per-request failures.
    assert!(err.lines().count() <= 2, "{err}");
}

#[test]
fn credentials_in_an_unreachable_url_are_never_printed() {
    for url in [
        "http://alice:hunter2-pw@127.0.0.1:1",
        "http://alice:hunter2-pw@127.0.0.1:1/v1",
        "https://alice:hunter2-pw@127.0.0.1:1",
        "http://alice:hunter2-pw@bad host:1",
        "http://alice:hunter2-pw@[::1",
        "ftp://alice:hunter2-pw@127.0.0.1:1",
        "alice:hunter2-pw@127.0.0.1:1",
    ] {
        let o = run_bounded(
            ctxbench().args(["sweep", "--lengths", "1k", "--url", url]),
            Duration::from_secs(30),
        );
        let all = format!("{}{}", text(&o.stdout), text(&o.stderr));
        assert!(!o.status.success(), "{url}");
        assert!(
            all.contains("--url") || all.contains("cannot probe"),
            "{url}: {all}"
        );
        assert!(
            !all.contains("hunter2-pw"),
            "{url}: the password leaked: {all}"
        );
        assert!(!all.contains("panicked"), "{url}: {all}");
    }
}

// ---------------------------------------------------------------------------------------
// 5. Secrets
// ---------------------------------------------------------------------------------------

const CANARY: &str = "sk-canary-7f3a9c1e5b2d4680";

/// An SGLang-shaped server that answers every generation with an error carrying the
/// Authorization header it received: a 500, a 400, a 400 that reads like a context-limit
/// refusal, and an in-stream error event. It records every Authorization header.
async fn echoing_server() -> (String, std::sync::Arc<std::sync::Mutex<Vec<String>>>) {
    use axum::http::{HeaderMap, StatusCode, header};
    use axum::response::{IntoResponse, Response};
    use axum::routing::{get, post};
    use serde_json::json;
    use std::sync::atomic::{AtomicUsize, Ordering};

    let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::<String>::new()));
    let n = std::sync::Arc::new(AtomicUsize::new(0));
    let auth = |h: &HeaderMap| {
        h.get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("")
            .to_string()
    };
    let s1 = seen.clone();
    let s2 = seen.clone();
    let app = axum::Router::new()
        .route(
            "/server_info",
            get(|| async {
                axum::Json(json!({
                    "max_total_num_tokens": 200000,
                    "context_length": 32768,
                    "page_size": 16,
                    "served_model_name": "echo",
                    "enable_cache_report": true
                }))
            }),
        )
        .route("/health", get(|| async { "ok" }))
        .route("/flush_cache", post(|| async { "Cache flushed." }))
        .route(
            "/tokenize",
            post(move |h: HeaderMap, body: axum::Json<serde_json::Value>| {
                let s = s1.clone();
                async move {
                    s.lock().unwrap().push(auth(&h));
                    let words = body["prompt"].as_str().unwrap_or("").split_whitespace().count();
                    let tokens: Vec<u32> = (0..words.max(1) as u32).map(|i| 100 + i % 37).collect();
                    axum::Json(json!({"tokens": tokens, "count": tokens.len()}))
                }
            }),
        )
        .route(
            "/generate",
            post(move |h: HeaderMap| {
                let s = s2.clone();
                let n = n.clone();
                async move {
                    let a = auth(&h);
                    s.lock().unwrap().push(a.clone());
                    let echoed = format!("request headers: Authorization: {a}");
                    let r: Response = match n.fetch_add(1, Ordering::SeqCst) % 4 {
                        0 => (
                            StatusCode::INTERNAL_SERVER_ERROR,
                            axum::Json(json!({"error": {"message": format!("internal error; {echoed}")}})),
                        )
                            .into_response(),
                        1 => (StatusCode::BAD_REQUEST, format!("bad request; {echoed}")).into_response(),
                        2 => (
                            StatusCode::BAD_REQUEST,
                            axum::Json(json!({"detail": format!("prompt too long, exceeds context; {echoed}")})),
                        )
                            .into_response(),
                        _ => (
                            [(header::CONTENT_TYPE, "text/event-stream")],
                            format!(
                                "data: {}\n\n",
                                json!({"error": {"message": format!("invalid key; {echoed}")}})
                            ),
                        )
                            .into_response(),
                    };
                    r
                }
            }),
        );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    (url, seen)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_echoed_api_key_never_reaches_output_or_files() {
    let (url, seen) = echoing_server().await;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("secret.jsonl");
    let html = dir.path().join("secret.html");
    for format in ["table", "json"] {
        let _ = std::fs::remove_file(&out);
        let mut cmd = tokio::process::Command::new(env!("CARGO_BIN_EXE_ctxbench"));
        cmd.args([
            "sweep",
            "--url",
            &url,
            "--api-key-env",
            "CANARY_KEY",
            "--lengths",
            "1k,2k",
            "--reps",
            "4",
            "--output-tokens",
            "8",
            "--timeout",
            "5",
            "--format",
            format,
            "--out",
        ])
        .arg(&out)
        .arg("--html")
        .arg(&html)
        .env("CANARY_KEY", CANARY)
        .env_remove("OPENAI_API_KEY")
        .kill_on_drop(true);
        let o = tokio::time::timeout(Duration::from_secs(60), cmd.output())
            .await
            .expect("the sweep finishes")
            .unwrap();
        let stdout = text(&o.stdout);
        let stderr = text(&o.stderr);
        let file = std::fs::read_to_string(&out).unwrap_or_default();
        let page = std::fs::read_to_string(&html).unwrap_or_default();
        assert_eq!(
            o.status.code(),
            Some(i32::from(exit::NOTHING_VALID)),
            "{stderr}"
        );
        for (what, body) in [
            ("stdout", &stdout),
            ("stderr", &stderr),
            ("--out", &file),
            ("--html", &page),
        ] {
            assert!(
                !body.contains(CANARY),
                "{format}: the key leaked into {what}:\n{body}"
            );
            assert!(
                !body.contains("canary"),
                "{format}: part of the key leaked into {what}"
            );
        }
        // The failures were recorded, with the server's message minus the key.
        let rf = resultfile::read(&out).unwrap();
        let kinds: HashSet<&str> = rf.errors.iter().map(|e| e.kind.as_str()).collect();
        for k in [
            "http_5xx",
            "http_4xx",
            "context_exceeded",
            "server_error_event",
        ] {
            assert!(kinds.contains(k), "{format}: {kinds:?}");
        }
        assert!(
            rf.errors.iter().any(|e| e.message.contains("[redacted]")),
            "{:?}",
            rf.errors
        );
    }
    let seen = seen.lock().unwrap();
    assert!(!seen.is_empty());
    assert!(
        seen.iter().all(|a| a == &format!("Bearer {CANARY}")),
        "the key was sent on every request: {seen:?}"
    );
}

#[test]
fn url_credentials_and_keys_are_redacted_from_messages() {
    use ctxbench::backend::RequestError;
    use ctxbench::backend::http::{Http, strip_credentials};
    assert_eq!(
        strip_credentials("http://u:p@127.0.0.1:8/x"),
        "http://127.0.0.1:8/x"
    );
    // Text that does not parse as a URL loses its credentials too.
    assert_eq!(
        strip_credentials("http://u:secret@bad host:8/x"),
        "http://bad host:8/x"
    );
    assert_eq!(strip_credentials("u:secret@[::1"), "[::1");
    assert_eq!(strip_credentials("not a url"), "not a url");

    let h = Http::new("http://alice:hunter2@127.0.0.1:1/", Some("sk-k1".into())).unwrap();
    assert_eq!(h.base(), "http://127.0.0.1:1");
    assert_eq!(
        h.redact("GET http://alice:hunter2@127.0.0.1:1/x, pw hunter2, key sk-k1"),
        "GET http://127.0.0.1:1/x, pw [redacted], key [redacted]"
    );
    assert_eq!(
        h.redact_error(RequestError::ServerEvent("echo sk-k1".into())),
        RequestError::ServerEvent("echo [redacted]".into())
    );
    assert_eq!(
        h.redact_error(RequestError::Incomplete),
        RequestError::Incomplete
    );
}
