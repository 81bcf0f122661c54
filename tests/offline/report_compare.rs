//! `compare`: pairing by length, ratios with bootstrap intervals, changes inside the noise
//! marked, refusals with clear messages, and the two-run HTML overlay.

use crate::common;

use common::report::*;
use ctxbench::report::compare::{CompareError, Verdict, compare, html};
use ctxbench::report::plot::figures::Metric;
use ctxbench::resultfile::ResultFile;

fn file(samples: Vec<ctxbench::record::Sample>) -> ResultFile {
    ResultFile {
        run: Some(run_record("m", &LENGTHS, 5)),
        samples,
        ..ResultFile::default()
    }
}

fn verdicts(c: &ctxbench::report::compare::Comparison, m: Metric) -> Vec<Verdict> {
    c.points
        .iter()
        .flat_map(|p| {
            p.changes
                .iter()
                .filter(|ch| ch.metric == m)
                .map(|ch| ch.verdict)
        })
        .collect()
}

#[test]
fn two_runs_of_the_same_server_differ_only_by_noise() {
    let a = file(sim_samples(SIM_DEFAULT, &LENGTHS, 5, 0.03, 11));
    let b = file(sim_samples(SIM_DEFAULT, &LENGTHS, 5, 0.03, 12));
    let c = compare(&a, &b, ("a", "b")).unwrap();
    assert_eq!(c.points.len(), LENGTHS.len());
    let all: Vec<Verdict> = c
        .points
        .iter()
        .flat_map(|p| p.changes.iter().map(|ch| ch.verdict))
        .collect();
    let noise = all.iter().filter(|v| **v == Verdict::WithinNoise).count();
    // 21 intervals at 95 %: nearly all contain 1.
    assert!(noise >= all.len() - 3, "{all:?}");
}

#[test]
fn a_slower_prefill_is_detected_and_decode_is_not_blamed() {
    let a = file(sim_samples(SIM_DEFAULT, &LENGTHS, 5, 0.01, 1));
    let slower = Cost {
        p0: 50_000.0,
        ..SIM_DEFAULT
    };
    let b = file(sim_samples(slower, &LENGTHS, 5, 0.01, 2));
    let c = compare(&a, &b, ("a", "b")).unwrap();
    assert!(
        verdicts(&c, Metric::Ttft)
            .iter()
            .all(|v| *v == Verdict::Worse)
    );
    assert!(
        verdicts(&c, Metric::PrefillTps)
            .iter()
            .all(|v| *v == Verdict::Worse)
    );
    let decode = verdicts(&c, Metric::DecodeTps);
    assert!(
        decode
            .iter()
            .filter(|v| **v == Verdict::WithinNoise)
            .count()
            >= 5,
        "{decode:?}"
    );
    // The ratio is median(B)/median(A) and lies inside its interval.
    for p in &c.points {
        for ch in &p.changes {
            let r = ch.ratio.unwrap();
            assert_eq!(r, ch.b.unwrap().median / ch.a.unwrap().median);
            let (lo, hi) = ch.interval.unwrap();
            assert!(lo <= r && r <= hi, "{lo} {r} {hi}");
        }
    }
    // At 1k TTFT ≈ (0.01 + 1024/50k + …) / (0.01 + 1024/100k + …) ≈ 1.5.
    let r = c.points[0].changes[0].ratio.unwrap();
    assert!((r - 1.5).abs() < 0.05, "{r}");
}

#[test]
fn better_is_judged_by_direction() {
    let a = file(sim_samples(SIM_DEFAULT, &LENGTHS, 3, 0.0, 1));
    let faster = Cost {
        d0: 0.002,
        ..SIM_DEFAULT
    };
    let mut b = file(sim_samples(faster, &LENGTHS, 3, 0.0, 1));
    // Zero noise gives a zero-width interval; a tiny spread keeps it honest.
    for (i, s) in b.samples.iter_mut().enumerate() {
        s.decode_tps = s.decode_tps.map(|d| d * (1.0 + 1e-4 * (i % 3) as f64));
    }
    let c = compare(&a, &b, ("a", "b")).unwrap();
    assert!(
        verdicts(&c, Metric::DecodeTps)
            .iter()
            .all(|v| *v == Verdict::Better)
    );
}

#[test]
fn a_single_repetition_cannot_judge_noise() {
    let a = file(sim_samples(SIM_DEFAULT, &[1024], 1, 0.0, 1));
    let b = file(sim_samples(SIM_DEFAULT, &[1024], 1, 0.0, 2));
    let c = compare(&a, &b, ("a", "b")).unwrap();
    let ch = &c.points[0].changes[0];
    assert_eq!(ch.interval, None);
    assert_eq!(ch.verdict, Verdict::NoSpread);
}

#[test]
fn lengths_in_one_file_only_are_named_not_compared() {
    let a = file(sim_samples(SIM_DEFAULT, &[1024, 2048, 4096], 2, 0.01, 1));
    let b = file(sim_samples(SIM_DEFAULT, &[2048, 4096, 8192], 2, 0.01, 2));
    let c = compare(&a, &b, ("a", "b")).unwrap();
    let ns: Vec<u64> = c.points.iter().map(|p| p.context_tokens).collect();
    assert_eq!(ns, vec![2048, 4096]);
    assert_eq!(
        (c.only_in_a.clone(), c.only_in_b.clone()),
        (vec![1024], vec![8192])
    );
    assert!(c.notes.iter().any(|n| n == "only in A (not compared): 1k"));
    assert!(c.notes.iter().any(|n| n == "only in B (not compared): 8k"));
}

#[test]
fn differing_configurations_are_noted() {
    let a = file(sim_samples(SIM_DEFAULT, &[1024], 2, 0.01, 1));
    let mut b = file(sim_samples(SIM_DEFAULT, &[1024], 2, 0.01, 2));
    if let Some(r) = b.run.as_mut() {
        r.config.output_tokens = 128;
    }
    let c = compare(&a, &b, ("a", "b")).unwrap();
    assert!(
        c.notes
            .iter()
            .any(|n| n.starts_with("output tokens differ (A 64, B 128)")),
        "{:?}",
        c.notes
    );
}

#[test]
fn refusals_say_what_is_wrong() {
    let good = file(sim_samples(SIM_DEFAULT, &[1024], 2, 0.01, 1));
    let no_run = ResultFile {
        run: None,
        ..file(vec![])
    };
    let e = compare(&good, &no_run, ("a.jsonl", "b.jsonl")).unwrap_err();
    assert_eq!(
        e,
        CompareError::NoRun {
            file: "b.jsonl".into()
        }
    );
    assert!(e.to_string().contains("b.jsonl: no run record"));

    let mut newer = file(sim_samples(SIM_DEFAULT, &[1024], 2, 0.01, 1));
    if let Some(r) = newer.run.as_mut() {
        r.schema = 2;
    }
    let e = compare(&good, &newer, ("a.jsonl", "b.jsonl")).unwrap_err();
    assert!(matches!(
        e,
        CompareError::SchemaMismatch {
            schema_a: 1,
            schema_b: 2,
            ..
        }
    ));
    assert!(
        e.to_string()
            .contains("different schemas cannot be compared"),
        "{e}"
    );

    let far = file(sim_samples(SIM_DEFAULT, &[65536], 2, 0.01, 1));
    let e = compare(&good, &far, ("a.jsonl", "b.jsonl")).unwrap_err();
    assert_eq!(
        e.to_string(),
        "no common context lengths: a.jsonl has 1k, b.jsonl has 64k; sweep both with the same --lengths"
    );
}

#[test]
fn html_draws_both_runs_on_the_same_axes() {
    let a = file(sim_samples(SIM_DEFAULT, &LENGTHS, 3, 0.01, 1));
    let b = file(sim_samples(SIM_DEFAULT, &LENGTHS[..5], 3, 0.01, 2));
    let c = compare(&a, &b, ("runs/a.jsonl", "runs/b.jsonl")).unwrap();
    let doc = html::render(&c);
    for id in [
        "chart-ttft",
        "chart-prefill_tps",
        "chart-decode_tps",
        "chart-itl_p50",
    ] {
        let svg = svg_by_id(&doc, id);
        let series: Vec<String> = elements(svg, "g", "series")
            .iter()
            .map(|s| s["data-series"].clone())
            .collect();
        assert_eq!(series, vec!["a", "b"], "{id}");
        let points = elements(svg, "circle", "point");
        let count = |k: &str| points.iter().filter(|p| p["data-series"] == k).count();
        assert_eq!((count("a"), count("b")), (7, 5), "{id}");
        // One x axis for both: it spans the union of the lengths.
        let axis = &elements(svg, "g", "x-axis")[0];
        assert_eq!(
            (f(axis, "data-min"), f(axis, "data-max")),
            (1024.0, 65536.0)
        );
        assert!(svg.contains("A: a.jsonl") && svg.contains("B: b.jsonl"));
    }
    assert_eq!(elements(&doc, "tr", "change").len(), 5 * 3);
    assert!(doc.contains("~ within noise"));
    assert!(!doc.contains("<script") && !doc.contains("<link"));
}
