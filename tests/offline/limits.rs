//! Context limits: `max`, refusal before any request, `context_exceeded`, and silent
//! truncation flagged with its onset named.

use crate::common;
use common::proxy::Proxy;
use common::{flags, has, probe_url, rel, sim};
use ctxbench::backend::{GenRequest, Prompt};
use ctxbench::cli::{ApiChoice, Format};
use ctxbench::record::flag;
use std::time::Duration;

// ---------------------------------------------------------------------------------------
// limits

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lengths_max_is_limit_minus_output_tokens() {
    let _timing = common::timing_lock().await;
    let server = sim(&["--context-length", "8192"]).await;
    let r = flags("max", 1, 16).run(&server.url()).await;
    assert_eq!(r.run.config.lengths, vec![8176]);
    assert_eq!(r.samples.len(), 1);
    let s = &r.samples[0];
    assert_eq!(s.context_tokens, 8176);
    assert_eq!(s.prompt_tokens, Some(8176));
    assert!(s.valid, "{s:?}");
    assert!(r.errors.is_empty(), "{:?}", r.errors);
    let truth = common::measured_truth(&server);
    assert_eq!(truth.len(), 1);
    assert_eq!(truth[0].prompt_tokens, 8176);
    assert_eq!(truth[0].output_tokens, 16);
    assert_eq!(r.exit_code(), 0);
}

/// With text prompts calibrated against the server's count (no tokenizer), `max` must still
/// fit: an overshoot of a few tokens would be answered 400.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lengths_max_fits_with_calibrated_text() {
    let _timing = common::timing_lock().await;
    let server = sim(&["--persona", "openai", "--context-length", "8192"]).await;
    let r = flags("max", 2, 16).run(&server.url()).await;
    assert_eq!(r.run.config.lengths, vec![8176]);
    assert_eq!(r.run.config.prompt_mode, "calibrated_text");
    assert!(r.errors.is_empty(), "{:?}", r.errors);
    assert_eq!(r.samples.len(), 2);
    for s in &r.samples {
        let p = s.prompt_tokens.unwrap();
        assert!(p + 16 <= 8192, "{p}");
        assert!(rel(p as f64, 8176.0) <= 0.01, "{p}");
        assert!(s.valid, "{s:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn beyond_the_limit_is_refused_before_any_request() {
    let _timing = common::timing_lock().await;
    for (sim_flags, source) in common::PERSONAS_8192 {
        let server = sim(sim_flags).await;
        let err = ctxbench::sweep::execute(flags("1k,8k", 1, 16).warm_up().args(&server.url()))
            .await
            .err()
            .expect("8k + 16 output tokens exceed an 8192 limit");
        let msg = format!("{err:#}");
        assert!(msg.contains("8192 tokens"), "{msg}");
        assert!(msg.contains(source), "{msg}");
        assert!(
            msg.contains("8176"),
            "names the longest possible prompt: {msg}"
        );
        assert!(
            server.truth().is_empty(),
            "nothing generated: {:?}",
            server.truth()
        );
    }
}

/// The binary says the same on stderr, exits non-zero and writes no result file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn beyond_the_limit_binary_exits_non_zero_without_a_result_file() {
    let _timing = common::timing_lock().await;
    let server = sim(&["--context-length", "4096"]).await;
    let dir = tempfile::tempdir().unwrap();
    let out_file = dir.path().join("r.jsonl");
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_ctxbench"))
        .args(["sweep", "--url", &server.url(), "--lengths", "8k", "--out"])
        .arg(&out_file)
        .env_remove("OPENAI_API_KEY")
        .output()
        .await
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_ne!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("4096 tokens") && stderr.contains("/server_info context_length"),
        "{stderr}"
    );
    assert!(!out_file.exists(), "nothing written before the check");
    assert!(server.truth().is_empty());
}

/// A prompt over the limit sent anyway is answered 400, and the error kind says why, with
/// the server's own message — through both the OpenAI and the SGLang native backends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn over_long_prompt_is_context_exceeded_with_the_servers_message() {
    let _timing = common::timing_lock().await;
    for flags in [
        vec!["--persona", "openai", "--context-length", "2048"],
        vec!["--context-length", "2048"],
    ] {
        let server = sim(&flags).await;
        let conn = common::connect(&server.url(), ApiChoice::Auto).await;
        let req = GenRequest {
            prompt: Prompt::Text("the river runs past the mill ".repeat(600)),
            max_tokens: 16,
            ignore_eos: true,
            cache_prompt: false,
            deadline: Duration::from_secs(30),
        };
        let err = conn
            .backend
            .generate(&req)
            .await
            .expect_err("3600 words exceed 2048 tokens");
        assert_eq!(err.kind(), "context_exceeded", "{flags:?}: {err:?}");
        let msg = err.to_string();
        assert!(
            msg.contains("maximum context length of 2048 tokens"),
            "{flags:?}: {msg}"
        );
    }
}

/// When the server does not publish its limit the sweep cannot refuse in advance: the
/// over-long point fails alone as `context_exceeded`, the rest of the sweep is measured.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unpublished_limit_gives_context_exceeded_error_records() {
    let _timing = common::timing_lock().await;
    let server = sim(&["--context-length", "4096"]).await;
    let proxy = Proxy::hiding_limits(&server.url()).await;
    assert_eq!(probe_url(&proxy.url).await.context_length, None);
    let r = flags("2k,8k", 2, 16).run(&proxy.url).await;
    assert_eq!(r.samples.len(), 2);
    assert!(
        r.samples
            .iter()
            .all(|s| s.context_tokens == 2048 && s.valid)
    );
    assert_eq!(r.errors.len(), 2, "{:?}", r.errors);
    for e in &r.errors {
        assert_eq!(e.context_tokens, 8192);
        assert_eq!(e.kind, "context_exceeded", "{e:?}");
        assert!(e.message.contains("4096 tokens"), "{}", e.message);
    }
    let p8 = &r.summary.points[1];
    assert_eq!((p8.context_tokens, p8.n_valid, p8.n_failed), (8192, 0, 2));
    assert_eq!(p8.errors["context_exceeded"], 2);
    assert_eq!(r.exit_code(), ctxbench::exit::PARTIAL);
}

// ---------------------------------------------------------------------------------------
// silent truncation

/// The server keeps the last 4096 − 16 tokens of longer prompts without saying so. The
/// 4k point loses only its first 16 tokens (within the 1 % length tolerance, but that is the
/// nonce): with token-id prompts the sent length is exact, so any shortfall is truncation.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn silent_truncation_is_flagged_and_its_onset_named() {
    let _timing = common::timing_lock().await;
    let server = sim(&["--truncate", "--context-length", "4096"]).await;
    let proxy = Proxy::hiding_limits(&server.url()).await;
    let r = flags("2k,4k,8k", 1, 16).run(&proxy.url).await;
    assert_eq!(r.run.config.prompt_mode, "token_ids");
    assert!(r.errors.is_empty(), "{:?}", r.errors);
    let by_len = |n: u64| r.samples.iter().find(|s| s.context_tokens == n).unwrap();
    let (s2, s4, s8) = (by_len(2048), by_len(4096), by_len(8192));
    assert!(s2.valid && !has(s2, flag::TRUNCATED), "{s2:?}");
    assert_eq!(s4.prompt_tokens, Some(4080), "{s4:?}");
    assert_eq!(s8.prompt_tokens, Some(4080), "{s8:?}");
    for s in [s4, s8] {
        assert!(has(s, flag::TRUNCATED), "{s:?}");
        assert!(!s.valid);
    }
    // The simulator's truth agrees on what it kept.
    let kept: Vec<u64> = common::measured_truth(&server)
        .iter()
        .map(|t| t.prompt_tokens)
        .collect();
    assert_eq!(kept, vec![2048, 4080, 4080]);
    let note = common::truncation_note(&r.summary.notes);
    assert!(note.contains("from 4096 tokens"), "{note}");
    assert_eq!(r.summary.points[1].flags[flag::TRUNCATED.name()], 1);
    let table = ctxbench::report::render(&r.run, &r.summary, Format::Table);
    assert!(table.contains("from 4096 tokens"), "{table}");
}

/// The summary logic alone: the onset is the smallest length with a truncated sample, even
/// when samples arrive out of order.
#[test]
fn truncation_onset_note_from_samples() {
    let mk = |n: u64, p: u64| {
        let c = ctxbench::backend::Completion {
            events: vec![
                ctxbench::backend::StreamEvent {
                    at: Duration::from_millis(10),
                    tokens: 1,
                },
                ctxbench::backend::StreamEvent {
                    at: Duration::from_millis(20),
                    tokens: 1,
                },
            ],
            e2e: Duration::from_millis(20),
            prompt_tokens: Some(p),
            cached_tokens: Some(0),
            completion_tokens: Some(2),
            finish_reason: Some("length".into()),
            counts_from_server: true,
            ..Default::default()
        };
        ctxbench::sweep::measure::stream_sample(
            &c,
            &ctxbench::sweep::measure::Expectation {
                context_tokens: n,
                sent_tokens: Some(n),
                output_tokens: 2,
                cache_allowance_tokens: 16,
                needle: None,
                rep: 0,
            },
        )
    };
    let samples = vec![mk(16384, 8190), mk(1024, 1024), mk(8192, 8190)];
    assert!(samples[1].valid);
    assert!(has(&samples[0], flag::TRUNCATED) && has(&samples[2], flag::TRUNCATED));
    let sum = ctxbench::summary::summarize(&samples, &[]);
    assert_eq!(sum.notes.len(), 1, "{:?}", sum.notes);
    assert!(sum.notes[0].contains("from 8192 tokens"), "{:?}", sum.notes);
    // Nothing truncated: no note.
    assert!(
        ctxbench::summary::summarize(&samples[1..2], &[])
            .notes
            .is_empty()
    );
}
