//! What `--resume` costs the server: after a crash with 10 of 15 (length, rep) pairs
//! missing, every request the resumed sweep sends is counted by kind on the wire (a
//! counting pass-through in front of the simulator, cross-checked with the simulator's own
//! truth log), so checks kept from the file stay kept and a changed target is still
//! measured again or refused.

use crate::common;

use common::proxy::Proxy;
use common::{SweepFlags, flags, sim, truth_after};
use ctxbench::backend::fake::{CallLog, FakeBackend, Reply};
use ctxbench::sim::SimServer;
use ctxbench::sweep::{execute, execute_with};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// 3 lengths x 5 reps: the issue's 15 pairs.
const LENGTHS: &str = "1k,2k,4k";
const REPS: u32 = 5;
const PAIRS: usize = 15;
/// Samples left on disk by the simulated crash.
const KEPT: usize = 5;
const MISSING: u64 = (PAIRS - KEPT) as u64;
/// Requests a sweep sends before its samples when it measures the target's checks: the
/// API-prefix probes and the transport probes (3 rounds of fresh + reused).
const CHECK_PROBES: u64 = ctxbench::sweep::allowance::PROBES as u64 + 2 * 3;

/// Requests seen, by kind.
#[derive(Clone, Default)]
struct Counts(Arc<Mutex<BTreeMap<&'static str, u64>>>);

impl Counts {
    fn take(&self) -> BTreeMap<&'static str, u64> {
        std::mem::take(&mut *self.0.lock().unwrap())
    }
}

/// What a request is, by its route on a SGLang-style server.
fn kind(method: &axum::http::Method, path: &str) -> &'static str {
    match (method.as_str(), path) {
        ("POST", "/generate" | "/v1/completions" | "/v1/chat/completions") => "generate",
        (_, "/tokenize") => "tokenize",
        (_, "/flush_cache") => "flush",
        (_, "/health" | "/health_generate") => "health",
        (_, "/metrics") => "metrics",
        (_, "/server_info" | "/get_server_info") => "server_info",
        (_, "/model_info" | "/get_model_info" | "/v1/models") => "model_info",
        _ => "other",
    }
}

/// The common pass-through, counting every request by kind.
struct CountingProxy {
    proxy: Proxy,
    counts: Counts,
}

impl std::ops::Deref for CountingProxy {
    type Target = Proxy;
    fn deref(&self) -> &Proxy {
        &self.proxy
    }
}

impl CountingProxy {
    async fn start(upstream: &str) -> Self {
        let counts = Counts::default();
        let seen = counts.clone();
        let proxy = Proxy::watching(
            upstream,
            Arc::new(move |method, path, _| {
                *seen
                    .0
                    .lock()
                    .unwrap()
                    .entry(kind(method, path))
                    .or_default() += 1;
            }),
        )
        .await;
        CountingProxy { proxy, counts }
    }
}

fn lines(path: &Path) -> Vec<String> {
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect()
}

/// What `kill -9` after `KEPT` samples leaves: the header, those samples, and the next
/// sample's line torn mid-write (no summary), written as `name` beside `full`. Returns its
/// path and its header line.
fn crash_after_kept(full: &Path, name: &str) -> (PathBuf, String) {
    let crashed = full.with_file_name(name);
    write_crashed(full, &crashed);
    let header = lines(&crashed)[0].clone();
    (crashed, header)
}

fn write_crashed(full: &Path, crashed: &Path) {
    let all = lines(full);
    let samples: Vec<&String> = all
        .iter()
        .filter(|l| l.contains(r#""type":"sample""#))
        .collect();
    assert_eq!(samples.len(), PAIRS, "the full run has every pair");
    let mut text = format!("{}\n", all[0]);
    for s in &samples[..KEPT] {
        text.push_str(s);
        text.push('\n');
    }
    let torn = samples[KEPT];
    text.push_str(&torn[..torn.len() / 2]);
    std::fs::write(crashed, text).unwrap();
}

/// Every (length, rep) pair exactly once, and the header left as it was.
fn assert_complete(path: &Path, header: &str) {
    let all = lines(path);
    assert_eq!(all[0], header, "the resumed file's run record is unchanged");
    let records: Vec<serde_json::Value> = all
        .iter()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    common::assert_each_pair_once(&records, &[1024, 2048, 4096], u64::from(REPS));
    assert_eq!(
        all.iter().filter(|l| l.contains(r#""type":"run""#)).count(),
        1
    );
}

/// The sweep's flags, warm-up on (as by default), writing `out`.
fn sweep_flags(out: &Path, resume: bool) -> SweepFlags {
    let f =
        flags(LENGTHS, REPS, 8)
            .warm_up()
            .with(&["--out", out.to_str().unwrap(), "--seed", "3"]);
    if resume { f.with(&["--resume"]) } else { f }
}

/// A simulator with `flags` behind a counting proxy, a fresh folder, and the path there of
/// the full run's file.
async fn behind_proxy(flags: &[&str]) -> (SimServer, CountingProxy, tempfile::TempDir, PathBuf) {
    let server = sim(flags).await;
    let proxy = CountingProxy::start(&server.url()).await;
    let dir = tempfile::tempdir().unwrap();
    let full = dir.path().join("full.jsonl");
    (server, proxy, dir, full)
}

async fn run_sweep(url: &str, f: SweepFlags) -> anyhow::Result<ctxbench::sweep::SweepResult> {
    execute(f.args(url)).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resume_against_the_same_server_sends_only_the_missing_samples() {
    let (server, proxy, _dir, full) = behind_proxy(&[]).await;

    let r = run_sweep(&proxy.url, sweep_flags(&full, false))
        .await
        .unwrap();
    assert_eq!(r.samples.len(), PAIRS);
    let fresh = proxy.counts.take();
    eprintln!("new sweep, {PAIRS} samples: {fresh:?}");
    // Probes, warm-up, samples: what a new sweep spends, and what a resume used to repeat.
    assert_eq!(
        fresh["generate"],
        CHECK_PROBES + 1 + PAIRS as u64,
        "{fresh:?}"
    );

    let (crashed, header) = crash_after_kept(&full, "crashed.jsonl");
    server.clear_truth();
    let r = run_sweep(&proxy.url, sweep_flags(&crashed, true))
        .await
        .unwrap();
    let resumed = proxy.counts.take();
    eprintln!("resume, {MISSING} of {PAIRS} missing, same server: {resumed:?}");
    assert_eq!(r.samples.len(), PAIRS);
    assert_complete(&crashed, &header);
    // The issue's bound; here exactly the missing samples: the simulator exposes its
    // instance id, so the file's checks are kept and the server is known to be warm.
    assert!(resumed["generate"] <= MISSING + 2, "{resumed:?}");
    assert_eq!(resumed["generate"], MISSING, "{resumed:?}");
    assert_eq!(
        truth_after(&server, MISSING as usize).await.len() as u64,
        MISSING,
        "the simulator served as many generate requests as the proxy counted"
    );
    // The rest scales with the samples only: one flush before each, one instance-marker
    // read (`/server_info`) after each; connecting (detection, round trip, tokenizer) costs
    // what it cost the new sweep.
    assert_eq!(resumed["flush"], MISSING, "{resumed:?}");
    assert_eq!(
        resumed["server_info"],
        fresh["server_info"] - (PAIRS as u64 - MISSING)
    );
    for (k, n) in &resumed {
        if !matches!(*k, "generate" | "flush" | "server_info") {
            assert_eq!(fresh.get(k), Some(n), "{k}: {resumed:?} vs {fresh:?}");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_server_is_measured_again_and_another_url_is_refused_before_any_request() {
    let (_first, proxy, _dir, full) = behind_proxy(&[]).await;
    run_sweep(&proxy.url, sweep_flags(&full, false))
        .await
        .unwrap();
    proxy.counts.take();

    // The same URL, a new process: its instance id differs, so the checks made against
    // the old one are made again, and the (possibly cold) process gets its warm-up.
    let second = sim(&[]).await;
    proxy.point_at(&second.url());
    let (crashed, header) = crash_after_kept(&full, "crashed.jsonl");
    run_sweep(&proxy.url, sweep_flags(&crashed, true))
        .await
        .unwrap();
    let resumed = proxy.counts.take();
    eprintln!("resume, {MISSING} of {PAIRS} missing, restarted server: {resumed:?}");
    assert_eq!(
        resumed["generate"],
        MISSING + CHECK_PROBES + 1,
        "{resumed:?}"
    );
    assert_complete(&crashed, &header);

    // Another URL: refused as before, now before a single generate request.
    let other = CountingProxy::start(&second.url()).await;
    let (crashed, _) = crash_after_kept(&full, "crashed2.jsonl");
    let before = std::fs::read(&crashed).unwrap();
    let e = run_sweep(&other.url, sweep_flags(&crashed, true))
        .await
        .err()
        .expect("a file from another target is refused");
    assert!(e.to_string().contains("different target"), "{e:#}");
    let refused = other.counts.take();
    eprintln!("resume against another URL (refused): {refused:?}");
    assert_eq!(
        refused.get("generate").copied().unwrap_or(0),
        0,
        "{refused:?}"
    );
    assert_eq!(
        std::fs::read(&crashed).unwrap(),
        before,
        "the file is untouched"
    );
}

/// A server that tells no instance (the in-process fake): the checks are kept, but it may
/// have restarted cold since the file was written, so the warm-up stays: missing + 1.
#[tokio::test]
async fn without_an_instance_marker_the_checks_are_kept_and_the_warm_up_sent() {
    const URL: &str = "http://127.0.0.1:9";
    let dir = tempfile::tempdir().unwrap();
    let full = dir.path().join("full.jsonl");
    let fake = || {
        FakeBackend::new(|_| {
            Ok(Reply::timed(
                Duration::from_millis(5),
                Duration::from_millis(1),
            ))
        })
    };
    let run = |f: FakeBackend, flags: SweepFlags| async move {
        let log: CallLog = f.log();
        let conn = f.connected(URL, true).unwrap();
        execute_with(flags.args(URL), URL, conn).await.unwrap();
        log.calls()
    };
    let calls = run(fake(), sweep_flags(&full, false)).await;
    assert_eq!(calls.len() as u64, CHECK_PROBES + 1 + PAIRS as u64);

    let (crashed, header) = crash_after_kept(&full, "crashed.jsonl");
    let calls = run(fake(), sweep_flags(&crashed, true)).await;
    let probes = calls
        .iter()
        .filter(|c| c.prompt_tokens == ctxbench::sweep::allowance::PROBE_TOKENS)
        .count();
    eprintln!(
        "resume, {MISSING} of {PAIRS} missing, no instance marker: {} generate ({probes} probes)",
        calls.len()
    );
    assert_eq!(probes, 0, "the checks are kept from the file");
    assert_eq!(
        calls.len() as u64,
        MISSING + 1,
        "the samples and one warm-up"
    );
    assert_eq!((calls[0].prompt_tokens, calls[0].max_tokens), (256, 8));
    assert_complete(&crashed, &header);
}

/// A text-prompt server without an instance marker (the simulator's OpenAI persona: no
/// tokenizer, no `/server_info`): the two calibration requests that size text prompts are
/// sent again (the calibration is not in the file), and they run the model on whatever
/// process serves now, so no warm-up follows: missing + 2, the issue's bound.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_text_prompt_server_pays_its_calibration_and_no_warm_up() {
    let (_server, proxy, _dir, full) = behind_proxy(&["--persona", "openai"]).await;
    let r = run_sweep(&proxy.url, sweep_flags(&full, false))
        .await
        .unwrap();
    assert_eq!(r.run.config.prompt_mode, "calibrated_text");
    let fresh = proxy.counts.take();
    eprintln!("new sweep, text prompts, {PAIRS} samples: {fresh:?}");
    // Calibration (2), probes, warm-up, samples.
    assert_eq!(
        fresh["generate"],
        2 + CHECK_PROBES + 1 + PAIRS as u64,
        "{fresh:?}"
    );

    let (crashed, header) = crash_after_kept(&full, "crashed.jsonl");
    run_sweep(&proxy.url, sweep_flags(&crashed, true))
        .await
        .unwrap();
    let resumed = proxy.counts.take();
    eprintln!("resume, text prompts, {MISSING} of {PAIRS} missing, no marker: {resumed:?}");
    assert_eq!(resumed["generate"], MISSING + 2, "{resumed:?}");
    assert_complete(&crashed, &header);
}
