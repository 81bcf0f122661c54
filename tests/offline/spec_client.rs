//! Speculative-decoding acceptance on the client side: every sample's counts against the
//! simulator's own truth, the per-length summary and table column, and `compare` telling a
//! decode change that follows acceptance from one where the server's step rate changed.

use crate::common;
use common::{flags, sim};
use ctxbench::record::{Sample, SpecSource, SpecStats};
use ctxbench::report::compare::spec::Cause;
use ctxbench::report::compare::{Verdict, compare};
use ctxbench::resultfile::ResultFile;

/// SGLang persona, `--spec 4`: 1–4 tokens per step, `meta_info.spec_verify_ct` on the last
/// event. Each sample's verify steps are the simulator's decode steps for that request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn verify_steps_match_the_simulators_truth() {
    let server = sim(&["--spec", "4"]).await;
    let r = flags("1k,4k", 3, 48).run(&server.url()).await;
    assert_eq!(r.samples.len(), 6);
    let truth = common::measured_truth_after(&server, r.samples.len()).await;
    assert_eq!(truth.len(), r.samples.len(), "one request per sample");
    // The sweep sends one request at a time, smallest length first, in sample order.
    for (s, t) in r.samples.iter().zip(&truth) {
        assert!(s.valid, "{s:?}");
        assert_eq!(t.prompt_tokens, s.context_tokens);
        let spec = s.spec.expect("acceptance on every sample");
        assert_eq!(spec.source, SpecSource::Server);
        let steps = t.decode_steps.len() as u64;
        assert_eq!(spec.verify_steps, Some(steps), "{s:?}");
        let out = s.output_tokens.unwrap();
        assert_eq!(out, t.output_tokens);
        // Decode tokens per verify step: the prefill's first token left out.
        let want = (out - 1) as f64 / steps as f64;
        assert!((spec.accept_length.unwrap() - want).abs() < 1e-12);
        // 1–4 tokens a step (uniform, mean 2.5): 47 decoded tokens take 12–47 steps.
        assert!((12..=47).contains(&steps), "{steps} steps");
        println!(
            "{:>5} tokens rep {}: {steps} verify steps, accept {:.3}, decode {:.0} tok/s",
            s.context_tokens,
            s.rep,
            want,
            s.decode_tps.unwrap()
        );
    }
    for p in &r.summary.points {
        let a = p.accept_length.expect("per-length accept length");
        assert_eq!(a.n, 3);
        assert_eq!(p.spec_source, Some(SpecSource::Server));
        assert!(a.min >= 1.0 && a.max <= 4.0, "{a:?}");
    }
    let table = ctxbench::report::render(&r.run, &r.summary, ctxbench::cli::Format::Table);
    println!("{table}");
    assert!(table.lines().nth(1).unwrap().contains("accept"), "{table}");
    assert!(table.contains("steps/s"), "{table}");
    let csv = ctxbench::report::render(&r.run, &r.summary, ctxbench::cli::Format::Csv);
    assert!(csv.starts_with("context_tokens,") && csv.contains("accept_length_median"));
    let html = ctxbench::report::html::render(&r.run, &r.samples, &r.errors, &r.summary);
    assert!(
        html.contains("<section id=\"spec\">"),
        "no acceptance section"
    );
    let json = ctxbench::report::render(&r.run, &r.summary, ctxbench::cli::Format::Json);
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["summary"]["points"][0]["spec_source"], "server");
    assert!(
        v["summary"]["points"][0]["accept_length"]["median"]
            .as_f64()
            .unwrap()
            > 1.0
    );
}

/// Without speculative decoding the sweep records no acceptance and shows no column.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_speculation_no_column() {
    let server = sim(&[]).await;
    let r = flags("1k", 2, 16).run(&server.url()).await;
    assert!(r.samples.iter().all(|s| s.valid && s.spec.is_none()));
    let table = ctxbench::report::render(&r.run, &r.summary, ctxbench::cli::Format::Table);
    assert!(!table.contains("accept"), "{table}");
}

const N: u64 = 32768;
const REPS: u32 = 5;

/// `REPS` samples at 32k whose decode rate is `accept` tokens/step × `steps` steps/s, each
/// with ±2 % jitter (deterministic per `seed`, independent for the two factors).
fn run(accept: f64, steps: f64, seed: u64) -> ResultFile {
    let jitter = |i: u64, k: u64| {
        // A small LCG: uniform in [−1, 1), reproducible without a crate.
        let x = (seed * 7919 + i * 104_729 + k * 1_299_709).wrapping_mul(6_364_136_223_846_793_005);
        1.0 + 0.02 * ((x >> 11) as f64 / (1u64 << 53) as f64 * 2.0 - 1.0)
    };
    let samples: Vec<Sample> = (0..REPS)
        .map(|rep| {
            let a = accept * jitter(rep as u64, 1);
            let s = steps * jitter(rep as u64, 2);
            Sample {
                context_tokens: N,
                prompt_tokens: Some(N),
                cached_tokens: Some(0),
                output_tokens: Some(64),
                method: "stream".into(),
                rep,
                ttft_s: Some(1.0),
                e2e_s: Some(1.0 + 63.0 / (a * s)),
                prefill_tps: Some(N as f64),
                decode_tps: Some(a * s),
                valid: true,
                spec: Some(SpecStats {
                    accept_length: Some(a),
                    ..SpecStats::empty(SpecSource::Server)
                }),
                ..Sample::default()
            }
        })
        .collect();
    ResultFile {
        run: Some(record()),
        samples,
        ..ResultFile::default()
    }
}

fn record() -> ctxbench::record::RunRecord {
    serde_json::from_value(serde_json::json!({
        "schema": 1, "tool_version": "0", "started_at": "2026-01-01T00:00:00Z",
        "target": {"url": "http://127.0.0.1:1", "api": "sglang", "model": "m", "server_info": {}},
        "config": {"lengths": [N], "output_tokens": 64, "reps": REPS, "method": "stream",
            "cache_bust": "nonce+flush", "needle": false, "timeout": "auto", "seed": 0,
            "prompt_mode": "token_ids", "rtt_s": null}
    }))
    .unwrap()
}

#[test]
fn a_decode_drop_with_the_same_step_rate_follows_acceptance() {
    // Same step rate (and the same jitter of it): only acceptance differs, 3.4 → 2.1.
    let a = run(3.4, 30.0, 1);
    let b = run(2.1, 30.0, 1);
    let c = compare(&a, &b, ("a.jsonl", "b.jsonl")).unwrap();
    assert_eq!(c.spec.len(), 1);
    let s = &c.spec[0];
    assert!(matches!(s.decode_verdict, Verdict::Worse), "{s:?}");
    assert_eq!(s.cause, Cause::Acceptance, "{s:?}");
    let line = s.explanation().unwrap();
    println!("{line}");
    assert!(
        line.starts_with("decode ×0.62 at 32k follows acceptance (3.4 → 2.1 tokens/step); step rate unchanged (×1.00)"),
        "{line}"
    );
    let text = ctxbench::report::compare::render::render(&c, ctxbench::cli::Format::Table);
    assert!(text.contains(&line), "{text}");
    let json = ctxbench::report::compare::render::to_json(&c);
    assert_eq!(json["spec"][0]["cause"], "acceptance");
}

#[test]
fn a_slower_step_rate_is_not_blamed_on_acceptance() {
    // Same acceptance, step rate 30 → 20 steps/s: decode ×0.67 is the server's.
    let a = run(3.4, 30.0, 1);
    let b = run(3.4, 20.0, 2);
    let c = compare(&a, &b, ("a.jsonl", "b.jsonl")).unwrap();
    let s = &c.spec[0];
    assert!(matches!(s.decode_verdict, Verdict::Worse), "{s:?}");
    assert_eq!(s.cause, Cause::StepRate, "{s:?}");
    let line = s.explanation().unwrap();
    println!("{line}");
    assert!(line.contains("is not acceptance alone"), "{line}");
    // And with no decode change there is nothing to explain.
    let c = compare(&a, &run(3.4, 30.0, 1), ("a", "b")).unwrap();
    assert_eq!(c.spec[0].cause, Cause::NoDecodeChange, "{:?}", c.spec[0]);
    assert_eq!(c.spec[0].explanation(), None);
}
