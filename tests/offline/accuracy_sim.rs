//! Effective context against the simulator: a model configured to keep its accuracy to N
//! tokens is measured to keep it to the last length at or below N; its lost-in-the-middle
//! profile shows as a depth sag; a server that keeps only the last tokens is named as
//! truncation; bad input is refused before any request.

use crate::common;
use common::{FAST_PREFILL_COSTS, flags, sim};
use ctxbench::cli::Format;

const ALL_TASKS: &str = "niah,multikey,multivalue,vt,cwe";

fn with(extra: &[&'static str]) -> Vec<&'static str> {
    let mut v = FAST_PREFILL_COSTS.to_vec();
    v.extend_from_slice(extra);
    v
}

/// N = 3000 between the 2k and 4k steps: within N every task scores 1.0; at 4k a fact is
/// seen with probability (3000/4096)^3 ≈ 0.39 and at 8k ≈ 0.05, so the mean score falls far
/// under the 0.85 threshold (with 5 tasks × 4 samples the chance that 4k still passes is
/// below 1e-6 for a binomial of p ≤ 0.39 — and the draw is seeded, so the run repeats).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recovers_the_configured_effective_context_within_one_length_step() {
    let _timing = common::timing_lock().await;
    let server = sim(&with(&["--effective-context", "3000"])).await;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("acc.jsonl");
    let r = flags("1k,2k,4k,8k", 1, 16)
        .with(&[
            "--tasks",
            ALL_TASKS,
            "--samples",
            "4",
            "--needle-depths",
            "0.1,0.5,0.9",
            "--out",
            out.to_str().unwrap(),
        ])
        .run(&server.url())
        .await;
    assert_eq!(r.run.config.tasks.len(), 5);
    assert_eq!(r.run.config.prompt_style.as_deref(), Some("chat"));
    assert_eq!(r.samples.len(), 4 * 5 * 4, "every graded item is a sample");
    for s in &r.samples {
        let t = s.task.as_ref().expect("every sample carries its task");
        assert!(s.ttft_s.is_some() && s.decode_tps.is_some(), "{s:?}");
        assert!((0.0..=1.0).contains(&t.score));
    }
    let rate = |n: u64, task: &str| {
        let p = r
            .summary
            .points
            .iter()
            .find(|p| p.context_tokens == n)
            .unwrap();
        p.accuracy[task].clone()
    };
    for n in [1024, 2048] {
        for t in ["niah", "multikey", "multivalue", "vt", "cwe", "all"] {
            assert_eq!(rate(n, t).rate, 1.0, "{t} at {n}: {:?}", rate(n, t));
        }
    }
    assert!(
        rate(4096, "all").rate < 0.85 * 0.85,
        "{:?}",
        rate(4096, "all")
    );
    assert!(rate(8192, "all").rate < rate(4096, "all").rate);
    let [lo, hi] = rate(4096, "all").ci95;
    assert!(lo <= rate(4096, "all").rate && rate(4096, "all").rate <= hi);

    let file = ctxbench::resultfile::read(&out).unwrap();
    let all = file
        .effective_context
        .iter()
        .find(|e| e.task == "all")
        .expect("an effective_context record for all");
    // The configured 3000 lies between the steps 2048 and 4096: recovered within one step.
    assert_eq!(all.tokens, 2048, "{all:?}");
    assert_eq!(all.baseline_rate, 1.0);
    assert!((all.threshold - 0.85).abs() < 1e-9);
    assert_eq!(all.limited_by, "accuracy");
    assert_eq!(file.effective_context.len(), 6, "five tasks and all");
    for e in &file.effective_context {
        assert!(e.tokens == 2048 || e.tokens == 4096, "{e:?}");
    }
    let table = ctxbench::report::render(&r.run, &r.summary, Format::Table);
    assert!(table.contains("accuracy (95% CI)"), "{table}");
    assert!(
        table.contains("effective context all: 2048 tokens"),
        "{table}"
    );
    let md = ctxbench::report::render(&r.run, &r.summary, Format::Markdown);
    assert!(md.contains("**Accuracy by task**"), "{md}");
    let csv = ctxbench::report::render(&r.run, &r.summary, Format::Csv);
    assert!(csv.contains("accuracy,all,4096,"), "{csv}");
    let html = ctxbench::report::html::render(&r.run, &r.samples, &r.errors, &r.summary);
    assert!(html.contains("id=\"chart-accuracy\"") && html.contains("heatmap"));
}

/// Lost in the middle: beyond N the middle fades first (exponent 7 in the middle, 1 at the
/// ends). At 2k and 4k with N = 1000 an edge fact is seen with p = 0.49 and 0.24, a middle
/// one with p < 0.007: over 8 samples per depth the ends score well above the middle.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_depth_profile_sags_in_the_middle() {
    let _timing = common::timing_lock().await;
    let server = sim(&with(&["--effective-context", "1000", "--lost-in-middle"])).await;
    let r = flags("512,2k,4k", 1, 16)
        .with(&[
            "--tasks",
            "niah",
            "--samples",
            "24",
            "--needle-depths",
            "0,0.5,1",
        ])
        .run(&server.url())
        .await;
    let at = |n: u64, d: f64| {
        let p = r
            .summary
            .points
            .iter()
            .find(|p| p.context_tokens == n)
            .unwrap();
        p.accuracy_by_depth
            .iter()
            .find(|a| a.depth == d)
            .unwrap_or_else(|| panic!("depth {d} at {n}: {:?}", p.accuracy_by_depth))
            .accuracy
            .clone()
    };
    for d in [0.0, 0.5, 1.0] {
        assert_eq!(at(512, d).rate, 1.0, "within N every depth is right");
    }
    let edges = |n| (at(n, 0.0).correct + at(n, 1.0).correct) / 2.0;
    for n in [2048, 4096] {
        assert!(
            edges(n) > at(n, 0.5).correct,
            "{n}: edges {} vs middle {}",
            edges(n),
            at(n, 0.5).correct
        );
    }
    assert!(at(2048, 0.5).rate < 0.2, "{:?}", at(2048, 0.5));
    let table = ctxbench::report::render(&r.run, &r.summary, Format::Table);
    assert!(table.contains("accuracy by depth"), "{table}");
}

/// A server that keeps only the last 2048 tokens loses the early facts of longer prompts:
/// the accuracy report says truncation, not a weak model.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_truncating_server_is_named_as_truncation() {
    let _timing = common::timing_lock().await;
    let server = sim(&with(&["--truncate", "--context-length", "4096"])).await;
    let proxy = common::proxy::Proxy::hiding_limits(&server.url()).await;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("trunc.jsonl");
    let r = flags("1k,2k,8k", 1, 16)
        .with(&[
            "--tasks",
            "niah,multivalue",
            "--samples",
            "3",
            "--needle-depths",
            "0.1",
            "--raw-completion",
            "--out",
            out.to_str().unwrap(),
        ])
        .run(&proxy.url)
        .await;
    let file = ctxbench::resultfile::read(&out).unwrap();
    let all = file
        .effective_context
        .iter()
        .find(|e| e.task == "all")
        .unwrap();
    assert_eq!(all.tokens, 2048, "{all:?}");
    assert_eq!(all.limited_by, "truncation", "{all:?}");
    let table = ctxbench::report::render(&r.run, &r.summary, Format::Table);
    assert!(table.contains("limited by TRUNCATION"), "{table}");
    assert!(
        r.summary
            .notes
            .iter()
            .any(|n| n.contains("not the model's effective context")),
        "{:?}",
        r.summary.notes
    );
}

/// Bad input is refused before the simulator sees a request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_task_input_is_refused_before_any_request() {
    let server = sim(&[]).await;
    for (extra, want) in [
        (
            vec!["--lengths", "1k", "--tasks", "niah,passkey"],
            "known tasks: niah, multikey",
        ),
        (
            vec!["--lengths", "256", "--tasks", "cwe"],
            "too short for task cwe",
        ),
        (
            vec!["--lengths", "1k", "--tasks", "niah", "--samples", "0"],
            "--samples must be at least 1",
        ),
        (vec!["--lengths", "1k", "--tasks", "qa"], "--dataset"),
        (
            vec![
                "--lengths",
                "1k",
                "--tasks",
                "niah",
                "--accuracy-threshold",
                "2",
            ],
            "abs:",
        ),
    ] {
        let mut argv = vec!["--no-warmup"];
        argv.extend(extra);
        let e = ctxbench::sweep::execute(common::sweep_args(&server.url(), &argv))
            .await
            .err()
            .unwrap_or_else(|| panic!("{argv:?} was accepted"));
        assert!(format!("{e:#}").contains(want), "{argv:?}: {e:#}");
    }
    assert!(server.truth().is_empty(), "no request reached the server");
}

/// `--needle` goes the same way as the tasks: through the chat template by default, and it
/// still finds its needle at every depth.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_needle_goes_through_the_chat_template_by_default() {
    let _timing = common::timing_lock().await;
    let server = sim(&with(&[])).await;
    let r = flags("2k", 1, 16)
        .with(&["--needle", "--needle-depths", "0.1,0.9"])
        .run(&server.url())
        .await;
    assert_eq!(r.run.config.prompt_style.as_deref(), Some("chat"));
    let routes: Vec<String> = common::measured_truth(&server)
        .iter()
        .map(|t| t.route.clone())
        .collect();
    assert!(
        routes.iter().all(|r| r == "/v1/chat/completions"),
        "{routes:?}"
    );
    for s in &r.samples {
        assert!(s.needle.as_ref().unwrap().ok, "{s:?}");
    }
}
