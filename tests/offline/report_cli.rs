//! The `report` and `compare` commands end to end, on files written here: a crashed run's
//! partial file, HTML output, and the refusals with their messages and exit codes.

use crate::common;
use common::bin::run_ok;

use assert_cmd::Command;
use common::report::*;

fn ctxbench() -> Command {
    Command::cargo_bin("ctxbench").expect("binary")
}

#[test]
fn report_of_a_crashed_run_prints_the_table_and_writes_html() {
    let dir = tempfile::tempdir().unwrap();
    let fx = troubled_run();
    let mut text = jsonl(&fx.run, &fx.samples, &fx.errors);
    text.push_str("{\"type\":\"sample\",\"context_tok"); // torn by the crash
    let file = dir.path().join("run.jsonl");
    std::fs::write(&file, text).unwrap();
    let html = dir.path().join("report.html");
    let out = run_ok(&[
        "report",
        file.to_str().unwrap(),
        "--html",
        html.to_str().unwrap(),
    ]);
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(stdout.contains("context  prompt"), "{stdout}");
    assert!(stdout.lines().any(|l| l.starts_with("64k ")), "{stdout}");
    assert!(String::from_utf8_lossy(&out.stderr).contains("torn"));
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("id=\"chart-ttft\""));
    assert!(page.contains("class=\"curve\" data-series=\"ttft-fit\""));
}

#[test]
fn report_json_carries_the_fit() {
    let dir = tempfile::tempdir().unwrap();
    let fx = troubled_run();
    let file = dir.path().join("run.jsonl");
    std::fs::write(&file, jsonl(&fx.run, &fx.samples, &fx.errors)).unwrap();
    let out = ctxbench()
        .args(["report", file.to_str().unwrap(), "--format", "json"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let fit = &v["summary"]["fit"];
    assert!(
        fit["ttft"]["c_s_per_token2"].as_f64().unwrap() > 0.0,
        "{fit}"
    );
    assert!(fit["decode_step"]["e_s_per_token"].as_f64().unwrap() > 0.0);
}

#[test]
fn compare_prints_ratios_and_writes_the_overlay() {
    let dir = tempfile::tempdir().unwrap();
    let run = run_record("m", &LENGTHS, 3);
    let a = dir.path().join("a.jsonl");
    let b = dir.path().join("b.jsonl");
    std::fs::write(
        &a,
        jsonl(&run, &sim_samples(SIM_DEFAULT, &LENGTHS, 3, 0.01, 1), &[]),
    )
    .unwrap();
    std::fs::write(
        &b,
        jsonl(&run, &sim_samples(SIM_DEFAULT, &LENGTHS, 3, 0.01, 2), &[]),
    )
    .unwrap();
    let html = dir.path().join("cmp.html");
    let out = run_ok(&[
        "compare",
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        "--html",
        html.to_str().unwrap(),
    ]);
    let stdout = String::from_utf8(out.stdout).unwrap();
    assert!(stdout.contains("B/A"), "{stdout}");
    assert!(stdout.contains("~ within noise"), "{stdout}");
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("data-series=\"a\"") && page.contains("data-series=\"b\""));
    let csv = ctxbench()
        .args([
            "compare",
            a.to_str().unwrap(),
            b.to_str().unwrap(),
            "--format",
            "csv",
        ])
        .output()
        .unwrap();
    let csv = String::from_utf8(csv.stdout).unwrap();
    assert_eq!(csv.lines().count(), 1 + LENGTHS.len() * 3);
}

#[test]
fn compare_refuses_what_it_cannot_compare() {
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a.jsonl");
    let b = dir.path().join("b.jsonl");
    let c = dir.path().join("c.jsonl");
    std::fs::write(
        &a,
        jsonl(
            &run_record("m", &[1024], 2),
            &sim_samples(SIM_DEFAULT, &[1024], 2, 0.01, 1),
            &[],
        ),
    )
    .unwrap();
    std::fs::write(
        &b,
        jsonl(
            &run_record("m", &[8192], 2),
            &sim_samples(SIM_DEFAULT, &[8192], 2, 0.01, 1),
            &[],
        ),
    )
    .unwrap();
    // Samples without the run line.
    let no_run: String = jsonl(
        &run_record("m", &[1024], 2),
        &sim_samples(SIM_DEFAULT, &[1024], 2, 0.01, 1),
        &[],
    )
    .lines()
    .skip(1)
    .map(|l| format!("{l}\n"))
    .collect();
    std::fs::write(&c, no_run).unwrap();
    let run = |x: &std::path::Path, y: &std::path::Path| {
        let out = ctxbench()
            .args(["compare", x.to_str().unwrap(), y.to_str().unwrap()])
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    };
    let (code, err) = run(&a, &b);
    assert_eq!(code, Some(1));
    assert!(
        err.contains("no common context lengths")
            && err.contains("has 1k")
            && err.contains("has 8k"),
        "{err}"
    );
    let (code, err) = run(&a, &c);
    assert_eq!(code, Some(1));
    // The reader refuses a file whose header is missing, naming it.
    assert!(
        err.contains("c.jsonl") && err.contains("not `run`"),
        "{err}"
    );
}
