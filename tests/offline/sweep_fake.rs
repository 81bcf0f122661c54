//! The sweep's logic against an in-process fake backend (scripted replies, no socket, no
//! clock): order, one request per job, resume, flags, faults and deadlines. Every figure
//! here is exact, because nothing is measured.

use crate::common;

use common::{SweepFlags, flags};
use ctxbench::backend::RequestError;
use ctxbench::backend::fake::{Call, CallLog, FakeBackend, Reply};
use ctxbench::record::flag;
use ctxbench::sweep::{SweepResult, execute_with};
use std::time::Duration;

/// Never contacted: the fake answers in-process.
const URL: &str = "http://127.0.0.1:9";
const STEP: Duration = Duration::from_millis(5);

/// TTFT of the scripted server: 50 ms plus 10 µs per prompt token.
fn ttft(prompt_tokens: u64) -> Duration {
    Duration::from_micros(50_000 + 10 * prompt_tokens)
}

fn linear(c: &Call) -> Result<Reply, RequestError> {
    Ok(Reply::timed(ttft(c.prompt_tokens), STEP))
}

async fn run_fake(
    fake: FakeBackend,
    reports_cached: bool,
    flags: SweepFlags,
) -> (SweepResult, Vec<Call>) {
    let log: CallLog = fake.log();
    let conn = fake.connected(URL, reports_cached).expect("fake connects");
    let r = execute_with(flags.args(URL), URL, conn)
        .await
        .expect("sweep runs");
    // The sweep's pre-measurement probes (API prefix, transport) are 64-token prompts.
    let calls = log
        .calls()
        .into_iter()
        .filter(|c| c.prompt_tokens != ctxbench::sweep::allowance::PROBE_TOKENS)
        .collect();
    (r, calls)
}

/// The sweep against the linear script, on a server that reports cached tokens.
async fn run_linear(flags: SweepFlags) -> (SweepResult, Vec<Call>) {
    run_fake(FakeBackend::new(linear), true, flags).await
}

#[tokio::test]
async fn points_run_small_to_large_one_request_per_job() {
    let (r, calls) = run_linear(flags("4k,1k,2k", 2, 8).warm_up()).await;
    // The first call is the warm-up (at most 8 tokens, 256-token prompt), then the jobs.
    assert_eq!((calls[0].prompt_tokens, calls[0].max_tokens), (256, 8));
    let jobs: Vec<u64> = calls[1..].iter().map(|c| c.prompt_tokens).collect();
    assert_eq!(jobs, [1024, 1024, 2048, 2048, 4096, 4096]);
    assert!(calls.iter().all(|c| !c.cache_prompt));
    assert_eq!(r.samples.len(), 6, "the warm-up is not a sample");
    let order: Vec<(u64, u32)> = r
        .samples
        .iter()
        .map(|s| (s.context_tokens, s.rep))
        .collect();
    assert_eq!(
        order,
        [
            (1024, 0),
            (1024, 1),
            (2048, 0),
            (2048, 1),
            (4096, 0),
            (4096, 1)
        ]
    );
    assert_eq!(r.exit_code(), ctxbench::exit::OK);
}

#[tokio::test]
async fn metrics_are_exactly_the_scripted_ones() {
    let (r, _) = run_linear(flags("1k,2k", 1, 8)).await;
    for s in &r.samples {
        let t = ttft(s.context_tokens).as_secs_f64();
        assert!(s.valid && s.flags.is_empty(), "{s:?}");
        assert_eq!(s.ttft_s, Some(t));
        assert_eq!(s.prefill_tps, Some(s.context_tokens as f64 / t));
        // 7 tokens after the first, one every 5 ms.
        let decode = s.decode_tps.unwrap();
        assert!((decode - 200.0).abs() < 1e-9, "{decode}");
        assert_eq!(s.itl_p50_s, Some(STEP.as_secs_f64()));
    }
    let p = &r.summary.points[1];
    assert_eq!((p.context_tokens, p.n_valid, p.attempts), (2048, 1, 1));
}

#[tokio::test]
async fn resume_sends_only_the_missing_jobs() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run.jsonl");
    let out = out.to_str().unwrap();
    let first = flags("1k,2k", 2, 8).with(&["--out", out]);
    let (r1, calls1) = run_linear(first).await;
    assert_eq!((r1.samples.len(), calls1.len()), (4, 4));

    let second = flags("1k,2k,4k", 2, 8).with(&["--out", out, "--resume"]);
    let (r2, calls2) = run_linear(second).await;
    let sent: Vec<u64> = calls2.iter().map(|c| c.prompt_tokens).collect();
    assert_eq!(sent, [4096, 4096], "only the new length is measured");
    assert_eq!(r2.samples.len(), 6, "old samples are carried over");
    assert_eq!(r2.summary.points.len(), 3);
}

#[tokio::test]
async fn a_failed_request_is_an_error_record_and_is_not_retried() {
    // The 2k call (rep 0) fails; every 4k call fails.
    let fake = FakeBackend::new(|c: &Call| match c.prompt_tokens {
        2048 | 4096 => Err(RequestError::Http {
            status: 500,
            message: "boom".into(),
        }),
        _ => linear(c),
    });
    let (r, calls) = run_fake(fake, true, flags("1k,2k,4k", 1, 8)).await;
    assert_eq!(calls.len(), 3, "one request per job, no retry");
    let errs: Vec<(u64, &str)> = r
        .errors
        .iter()
        .map(|e| (e.context_tokens, e.kind.as_str()))
        .collect();
    assert_eq!(errs, [(2048, "http_5xx"), (4096, "http_5xx")]);
    assert_eq!(r.samples.len(), 1);
    assert_eq!(r.summary.points[1].n_failed, 1);
    assert_eq!(r.exit_code(), ctxbench::exit::PARTIAL);
}

#[tokio::test]
async fn the_servers_counts_raise_flags_and_clear_valid() {
    let fake = FakeBackend::new(|c: &Call| {
        let mut r = Reply::timed(ttft(c.prompt_tokens), STEP);
        match c.prompt_tokens {
            1024 => r.completion_tokens = Some(3),
            2048 => r.cached_tokens = Some(2000),
            4096 => r.prompt_tokens = Some(3000),
            _ => {}
        }
        Ok(r)
    });
    let (r, _) = run_fake(fake, true, flags("1k,2k,4k", 1, 8)).await;
    let by_len = |n: u64| r.samples.iter().find(|s| s.context_tokens == n).unwrap();
    assert_eq!(by_len(1024).flags, [flag::EARLY_STOP]);
    assert_eq!(by_len(2048).flags, [flag::CACHE_HIT]);
    assert_eq!(by_len(4096).flags, [flag::TRUNCATED, flag::LENGTH_MISMATCH]);
    assert!(r.samples.iter().all(|s| !s.valid));
    assert_eq!(r.exit_code(), ctxbench::exit::NOTHING_VALID);
}

#[tokio::test]
async fn a_failed_flush_is_flagged_and_the_sample_stays_valid() {
    let mut fake = FakeBackend::new(linear);
    fake.flush = Err(RequestError::Http {
        status: 503,
        message: "busy".into(),
    });
    let (r, _) = run_fake(fake, true, flags("1k", 2, 8)).await;
    assert!(
        r.samples
            .iter()
            .all(|s| s.valid && s.flags == [flag::FLUSH_FAILED])
    );
    // With the nonce only, the flush is never asked for.
    let mut fake = FakeBackend::new(linear);
    fake.flush = Err(RequestError::Incomplete);
    let (r, _) = run_fake(
        fake,
        true,
        flags("1k", 1, 8).with(&["--cache-bust", "nonce"]),
    )
    .await;
    assert!(r.samples[0].flags.is_empty());
}

#[tokio::test]
async fn a_reply_past_a_fixed_deadline_is_a_timeout_error() {
    // At 4k the stream would end at 1.0 s + 7 × 0.1 s = 1.7 s, past the 1.5 s deadline.
    let fake = FakeBackend::new(|c: &Call| match c.prompt_tokens {
        4096 => Ok(Reply::timed(
            Duration::from_secs(1),
            Duration::from_millis(100),
        )),
        _ => linear(c),
    });
    let (r, calls) = run_fake(fake, true, flags("1k,4k", 1, 8).with(&["--timeout", "1.5"])).await;
    assert!(
        calls
            .iter()
            .all(|c| c.deadline == Duration::from_millis(1500))
    );
    assert_eq!(r.errors.len(), 1);
    assert_eq!(
        (r.errors[0].context_tokens, r.errors[0].kind.as_str()),
        (4096, "timeout")
    );
}

#[tokio::test]
async fn auto_deadlines_start_generous_and_follow_the_measurements() {
    let (_, calls) = run_linear(flags("1k,2k,4k", 1, 8).warm_up()).await;
    // Before anything is measured the deadline is 600 s (warm-up and first job); after,
    // the prediction × 4 is far below the 30 s floor, so the floor applies.
    let deadlines: Vec<u64> = calls.iter().map(|c| c.deadline.as_secs()).collect();
    assert_eq!(deadlines, [600, 600, 30, 30]);
}

#[tokio::test]
async fn without_cached_counts_a_fast_repeat_is_an_inferred_hit() {
    // 2k rep 1 (the second 2k call) answers in a tenth of the usual time and reports no
    // cached tokens.
    let seen_2k = std::sync::atomic::AtomicUsize::new(0);
    let fake = FakeBackend::new(move |c: &Call| {
        let mut r = Reply::timed(ttft(c.prompt_tokens), STEP);
        r.cached_tokens = None;
        if c.prompt_tokens == 2048 && seen_2k.fetch_add(1, std::sync::atomic::Ordering::SeqCst) == 1
        {
            r.ttft /= 10;
        }
        Ok(r)
    });
    let (r, _) = run_fake(fake, false, flags("1k,2k", 2, 8)).await;
    let flagged: Vec<(u64, u32)> = r
        .samples
        .iter()
        .filter(|s| s.flags.contains(&flag::CACHE_HIT_INFERRED))
        .map(|s| (s.context_tokens, s.rep))
        .collect();
    assert_eq!(flagged, [(2048, 1)]);
    assert!(r.samples.iter().all(|s| s.valid == s.flags.is_empty()));
}

#[tokio::test]
async fn two_point_pairs_a_one_token_request_with_a_full_one() {
    let (r, calls) = run_linear(flags("1k", 1, 8).with(&["--method", "two-point"])).await;
    let max: Vec<u64> = calls.iter().map(|c| c.max_tokens).collect();
    assert_eq!(max, [1, 8]);
    let s = &r.samples[0];
    assert_eq!(s.method, "two-point");
    // (8 − 1) tokens over the 7 extra steps of 5 ms.
    assert!((s.decode_tps.unwrap() - 200.0).abs() < 1e-9, "{s:?}");
}
