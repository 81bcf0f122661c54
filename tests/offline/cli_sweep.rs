//! The binary as a user runs it: the main job against the built-in simulator, machine
//! output on stdout, a crash mid-sweep followed by `--resume`, and refused bad input.

use crate::common;
use common::bin::run_ok;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn ctxbench() -> Command {
    Command::new(env!("CARGO_BIN_EXE_ctxbench"))
}

#[test]
fn sweep_without_url_benchmarks_the_simulator_and_says_so() {
    let out = run_ok(&[
        "sweep",
        "--lengths",
        "1k,2k",
        "--reps",
        "1",
        "--output-tokens",
        "8",
        "--format",
        "json",
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr
            .lines()
            .next()
            .unwrap()
            .contains("built-in simulator"),
        "{stderr}"
    );
    let doc: serde_json::Value =
        serde_json::from_slice(&out.stdout).expect("stdout is one JSON document");
    let points = doc["summary"]["points"].as_array().unwrap();
    assert_eq!(points.len(), 2);
    assert_eq!(points[0]["context_tokens"], 1024);
    assert_eq!(points[0]["n_valid"], 1);
}

#[test]
fn table_has_the_promised_columns() {
    let out = ctxbench()
        .args([
            "sweep",
            "--lengths",
            "1k",
            "--reps",
            "2",
            "--output-tokens",
            "8",
        ])
        .output()
        .unwrap();
    assert!(out.status.success());
    let table = String::from_utf8_lossy(&out.stdout);
    for col in [
        "context",
        "prompt",
        "TTFT ms",
        "prefill tok/s",
        "decode tok/s",
        "ITL p50 ms",
        "ITL p99 ms",
        "valid",
        "flags",
    ] {
        assert!(table.contains(col), "missing {col}:\n{table}");
    }
    assert!(table.contains("2/2"), "{table}");
}

fn lines_of(path: &std::path::Path) -> Vec<serde_json::Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .collect()
}

/// Kill -9 after the first point is on disk, then `--resume`: every (length, rep) exactly once.
#[test]
fn killed_sweep_resumes_only_what_is_missing() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run.jsonl");
    let args = [
        "sweep",
        "--lengths",
        "1k,2k,4k",
        "--reps",
        "2",
        "--output-tokens",
        "40",
        "--seed",
        "7",
        "--out",
    ];
    let mut child = ctxbench()
        .args(args)
        .arg(&out)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let start = Instant::now();
    loop {
        let samples = lines_of(&out)
            .iter()
            .filter(|v| v["type"] == "sample")
            .count();
        if samples >= 2 || start.elapsed() > Duration::from_secs(60) {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    let before = lines_of(&out)
        .iter()
        .filter(|v| v["type"] == "sample")
        .count();
    assert!(
        (2..6).contains(&before),
        "killed with {before} samples on disk"
    );

    let status = ctxbench()
        .args(args)
        .arg(&out)
        .arg("--resume")
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
    let records = lines_of(&out);
    common::assert_each_pair_once(&records, &[1024, 2048, 4096], 2);
    assert_eq!(records.iter().filter(|v| v["type"] == "run").count(), 1);
    assert_eq!(records.last().unwrap()["type"], "summary");
}

#[test]
fn bad_input_is_refused_with_the_flag_named() {
    let cases: &[(&[&str], &str)] = &[
        (&["sweep", "--lengths", "1k,abc"], "--lengths"),
        (&["sweep", "--reps", "0"], "--reps"),
        (&["sweep", "--timeout", "soon"], "--timeout"),
        (&["sweep", "--url", "not a url"], "--url"),
        (&["sweep", "--url", "http://127.0.0.1:1"], "cannot probe"),
        (&["sweep", "--lengths", "200k"], "limit"),
        (
            &[
                "sweep",
                "--out",
                "/nonexistent-dir/x.jsonl",
                "--lengths",
                "1k",
            ],
            "--out",
        ),
        (&["sweep", "--resume"], "--resume"),
    ];
    for (args, needle) in cases {
        let out = ctxbench().args(*args).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} succeeded");
        assert!(stderr.contains(needle), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    }
}
