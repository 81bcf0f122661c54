//! Reliability, exit codes and crash safety: exit codes tell a partial sweep from a failed
//! one; kill -9 at random moments followed by `--resume` loses nothing and duplicates
//! nothing.
//!
//! Loopback only, every test bounded in time.

use crate::common;
use common::bin::{ctxbench, run_bounded, text};
use common::{sim, sweep};
use ctxbench::record::{PointSummary, Summary};
use ctxbench::sweep::SweepResult;
use ctxbench::{exit, resultfile};
use std::path::Path;
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

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
