//! `load --print-out` and `--log FILE`, the pair that lets a Kubernetes Job run ctxbench
//! without a shell: a finished run's stdout is its result file and nothing else, its
//! progress in the log; a failed run prints nothing on stdout and the log, then the error,
//! on stderr.

use crate::common;

use common::bin::{ctxbench, run_bounded, text};
use std::process::Output;
use std::time::Duration;

/// A 3-request cell of 4 output tokens on the simulator's fixed costs: well under a second.
const LIMIT: Duration = Duration::from_secs(60);

async fn run(args: Vec<String>) -> Output {
    tokio::task::spawn_blocking(move || run_bounded(ctxbench().args(&args), LIMIT))
        .await
        .unwrap()
}

fn argv(url: &str, dir: &std::path::Path, more: &[&str]) -> Vec<String> {
    let mut a: Vec<String> = [
        "load",
        "--url",
        url,
        "--lengths",
        "1k",
        "--concurrency",
        "1",
        "--requests",
        "3",
        "--output-tokens",
        "4",
        "--out",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    a.push(dir.join("r.jsonl").display().to_string());
    a.push("--log".into());
    a.push(dir.join("log.txt").display().to_string());
    a.extend(more.iter().map(|s| s.to_string()));
    a
}

#[tokio::test(flavor = "multi_thread")]
async fn stdout_is_the_result_file_and_the_log_holds_the_progress() {
    let server = common::sim(common::FIXED_COSTS).await;
    let dir = tempfile::tempdir().unwrap();
    let o = run(argv(&server.url(), dir.path(), &["--print-out"])).await;
    assert!(o.status.success(), "{}", text(&o.stderr));
    let file = std::fs::read(dir.path().join("r.jsonl")).unwrap();
    assert_eq!(text(&o.stdout), text(&file));
    assert!(o.stderr.is_empty(), "stderr: {}", text(&o.stderr));
    let log = std::fs::read_to_string(dir.path().join("log.txt")).unwrap();
    assert!(log.contains("content: "), "{log}");
    let f = ctxbench::resultfile::read(dir.path().join("r.jsonl")).unwrap();
    assert_eq!(f.load.requests.iter().filter(|r| r.ok).count(), 3);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_failed_run_prints_its_log_then_the_error_on_stderr() {
    let server = common::sim(common::FIXED_COSTS).await;
    let dir = tempfile::tempdir().unwrap();
    // A shard announces itself in the log, then a start time already past is refused.
    let late = [
        "--print-out",
        "--shard",
        "0/2",
        "--start-at",
        "2000-01-01T00:00:00Z",
    ];
    let o = run(argv(&server.url(), dir.path(), &late)).await;
    assert_eq!(o.status.code(), Some(1), "{}", text(&o.stderr));
    assert!(o.stdout.is_empty(), "stdout: {}", text(&o.stdout));
    let log = std::fs::read_to_string(dir.path().join("log.txt")).unwrap();
    assert!(log.starts_with("shard 0/2 of plan "), "{log}");
    let err = text(&o.stderr);
    let rest = err
        .strip_prefix(&log)
        .unwrap_or_else(|| panic!("stderr starts with the log:\n{err}"));
    assert!(
        rest.starts_with("error: ") && rest.contains("--start-at"),
        "{rest}"
    );
}

#[test]
fn print_out_needs_out() {
    let o = ctxbench()
        .args(["load", "--lengths", "1k", "--print-out"])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    assert!(text(&o.stderr).contains("--out"), "{}", text(&o.stderr));
}
