//! Snapshot tests of the text formats (table, Markdown, CSV, JSON) of `report` and `compare`,
//! on small fixtures with round numbers, so a change in the output is a visible diff here.

use crate::common;

use common::report::*;
use ctxbench::cli::Format;
use ctxbench::record::{ErrorRecord, Sample, flag};
use ctxbench::report::{compare, render};
use ctxbench::resultfile::ResultFile;
use ctxbench::summary::summarize;

fn small() -> (Vec<Sample>, Vec<ErrorRecord>) {
    let mut samples = vec![
        sample(1024, 0, 0.020, 0.004),
        sample(1024, 1, 0.022, 0.004),
        sample(2048, 0, 0.040, 0.005),
        sample(2048, 1, 0.044, 0.005),
    ];
    let mut hit = sample(2048, 2, 0.001, 0.005);
    hit.valid = false;
    hit.flags = vec![flag::CACHE_HIT];
    samples.push(hit);
    let errors = vec![ErrorRecord {
        context_tokens: 2048,
        rep: 3,
        kind: "timeout".into(),
        message: "no first token within 30 s".into(),
        method: None,
    }];
    (samples, errors)
}

#[test]
fn table_snapshot() {
    let (s, e) = small();
    let run = run_record("m", &[1024, 2048], 2);
    let got = render(&run, &summarize(&s, &e), Format::Table);
    let want = "\
http://127.0.0.1:30000 (sglang) · model m · 64 output tokens · 2 reps · method stream · cache-bust auto · RTT 0.20 ms
context  prompt           TTFT ms  prefill tok/s  decode tok/s  ITL p50 ms  ITL p99 ms  valid  flags
1k         1024  21.0 (20.0–22.0)          48873           250         4.0         6.0    2/2  -
2k         2048  42.0 (40.0–44.0)          48873           200         5.0         7.5    2/4  cache_hit×1 err:timeout×1
";
    assert_eq!(got, want, "\n--- got ---\n{got}");
}

#[test]
fn markdown_snapshot() {
    let (s, e) = small();
    let run = run_record("m", &[1024, 2048], 2);
    let got = render(&run, &summarize(&s, &e), Format::Markdown);
    let want = "\
**http://127.0.0.1:30000** (sglang, model `m`), 64 output tokens, 2 reps, method stream

| context | prompt | TTFT ms | prefill tok/s | decode tok/s | ITL p50 ms | ITL p99 ms | valid | flags |
|---|---|---|---|---|---|---|---|---|
| 1k | 1024 | 21.0 (20.0–22.0) | 48873 | 250 | 4.0 | 6.0 | 2/2 | - |
| 2k | 2048 | 42.0 (40.0–44.0) | 48873 | 200 | 5.0 | 7.5 | 2/4 | cache_hit×1 err:timeout×1 |
";
    assert_eq!(got, want, "\n--- got ---\n{got}");
}

#[test]
fn csv_snapshot() {
    let (s, e) = small();
    let run = run_record("m", &[1024, 2048], 2);
    let got = render(&run, &summarize(&s, &e), Format::Csv);
    let want = "\
context_tokens,prompt_tokens,attempts,n_valid,n_failed,ttft_s_median,ttft_s_p10,ttft_s_p90,prefill_tps_median,decode_tps_median,itl_p50_s_median,itl_p99_s_median,two_point_decode_tps_median,flags
1024,1024,2,2,0,0.020999999999999998,0.0202,0.0218,48872.72727272728,250,0.004,0.006,,
2048,2048,4,2,1,0.041999999999999996,0.0404,0.0436,48872.72727272728,200,0.005,0.0075,,cache_hit:1
";
    assert_eq!(got, want, "\n--- got ---\n{got}");
}

fn file(samples: Vec<Sample>) -> ResultFile {
    ResultFile {
        run: Some(run_record("m", &[1024, 2048], 3)),
        samples,
        ..ResultFile::default()
    }
}

/// A at 20/21/22 ms, 250 tok/s; B twice as slow to first token at 1k, the same at 2k.
fn pair() -> (ResultFile, ResultFile) {
    let a: Vec<Sample> = [1024u64, 2048]
        .iter()
        .flat_map(|&n| {
            (0..3).map(move |r| sample(n, r, 0.020 + 0.001 * r as f64, 0.004 + 0.0001 * r as f64))
        })
        .collect();
    let b: Vec<Sample> = a
        .iter()
        .map(|s| {
            let mut s = s.clone();
            if s.context_tokens == 1024 {
                let t = s.ttft_s.unwrap() * 2.0;
                s.ttft_s = Some(t);
                s.prefill_tps = Some(1024.0 / t);
            }
            s
        })
        .collect();
    (file(a), file(b))
}

#[test]
fn compare_table_snapshot() {
    let (a, b) = pair();
    let c = compare::compare(&a, &b, ("a.jsonl", "b.jsonl")).unwrap();
    let got = compare::render::render(&c, Format::Table);
    let want = "\
A: a.jsonl — http://127.0.0.1:30000 (sglang, model m), 64 output tokens, 3 reps, method stream
B: b.jsonl — http://127.0.0.1:30000 (sglang, model m), 64 output tokens, 3 reps, method stream
context  metric             A      B     B/A  95% interval  verdict
1k       TTFT ms         21.0   42.0  2.000×   1.818–2.200  worse (+100.0%)
1k       prefill tok/s  48762  24381  0.500×   0.455–0.550  worse (-50.0%)
1k       decode tok/s     244    244  1.000×   0.952–1.050  ~ within noise
2k       TTFT ms         21.0   21.0  1.000×   0.909–1.100  ~ within noise
2k       prefill tok/s  97524  97524  1.000×   0.909–1.100  ~ within noise
2k       decode tok/s     244    244  1.000×   0.952–1.050  ~ within noise
~ = the 95% bootstrap interval of B/A contains 1 (the change is inside the repetition noise)
";
    assert_eq!(got, want, "\n--- got ---\n{got}");
}

#[test]
fn compare_csv_and_markdown_snapshots() {
    let (a, b) = pair();
    let c = compare::compare(&a, &b, ("a.jsonl", "b.jsonl")).unwrap();
    let got = compare::render::render(&c, Format::Csv);
    let want = "\
context_tokens,metric,a_median,b_median,a_n,b_n,ratio,ratio_lo,ratio_hi,verdict
1024,ttft_s,0.021,0.042,3,3,2,1.81818182,2.2,worse
1024,prefill_tps,48761.9048,24380.9524,3,3,0.5,0.454545455,0.55,worse
1024,decode_tps,243.902439,243.902439,3,3,1,0.952380952,1.05,within_noise
2048,ttft_s,0.021,0.021,3,3,1,0.909090909,1.1,within_noise
2048,prefill_tps,97523.8095,97523.8095,3,3,1,0.909090909,1.1,within_noise
2048,decode_tps,243.902439,243.902439,3,3,1,0.952380952,1.05,within_noise
";
    assert_eq!(got, want, "\n--- got ---\n{got}");
    let md = compare::render::render(&c, Format::Markdown);
    assert!(md.contains("| context | metric | A | B | B/A | 95% interval | verdict |\n|---|---|---|---|---|---|---|\n"));
    assert!(
        md.contains("| 1k | TTFT ms | 21.0 | 42.0 | 2.000× | 1.818–2.200 | worse (+100.0%) |\n")
    );
}

#[test]
fn compare_json_has_every_metric_with_its_interval() {
    let (a, b) = pair();
    let c = compare::compare(&a, &b, ("a.jsonl", "b.jsonl")).unwrap();
    let v: serde_json::Value =
        serde_json::from_str(&compare::render::render(&c, Format::Json)).unwrap();
    let p0 = &v["points"][0];
    assert_eq!(p0["context_tokens"], 1024);
    assert_eq!(p0["metrics"]["ttft_s"]["ratio"], 2.0);
    assert_eq!(p0["metrics"]["ttft_s"]["verdict"], "worse");
    assert_eq!(p0["metrics"]["decode_tps"]["verdict"], "within_noise");
    assert_eq!(p0["metrics"]["ttft_s"]["a"]["median"], 0.021);
    assert!(p0["metrics"]["ttft_s"]["ci95"].as_array().unwrap().len() == 2);
    assert_eq!(v["a"]["file"], "a.jsonl");
    assert_eq!(v["only_in_a"], serde_json::json!([]));
}
