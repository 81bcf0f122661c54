//! `probe` against each simulator persona, context limits (`max`, refusal before any request,
//! `context_exceeded`, silent truncation), needles, and cache hits inferred from timing when
//! the server does not report cached tokens.
//!
//! Where the sweep must not know the server's limit (to reach the server's own 400 or its
//! silent truncation), the simulator sits behind [`LimitHidingProxy`]: a loopback pass-through
//! that removes the limit fields from `/server_info` and `/v1/models`, as a gateway or an
//! OpenAI-compatible server that does not publish its limit would.

mod common;
use common::{rel, sim, sweep, sweep_args};
use ctxbench::backend::detect::{ServerInfo, probe};
use ctxbench::backend::http::Http;
use ctxbench::backend::{GenRequest, Prompt, connect};
use ctxbench::cli::{ApiChoice, Endpoint, Format};
use ctxbench::record::{Sample, flag};
use serde_json::Value;
use std::time::Duration;

/// As in tests/sweep_sim.rs: TTFT also holds a loopback round trip and JSON handling.
const PREFILL_TOL: f64 = 0.10;

fn has(s: &Sample, f: &str) -> bool {
    s.flags.iter().any(|x| x == f)
}

async fn probe_url(url: &str) -> ServerInfo {
    probe(&Http::new(url, None).unwrap()).await.expect("probe")
}

/// `ctxbench probe --url URL [--format F]` as a child process; the simulator keeps serving
/// on this test's multi-threaded runtime while the child runs.
async fn probe_bin(url: &str, format: &str) -> (i32, String, String) {
    let out = tokio::process::Command::new(env!("CARGO_BIN_EXE_ctxbench"))
        .args(["probe", "--url", url, "--format", format])
        .env_remove("OPENAI_API_KEY")
        .output()
        .await
        .expect("ctxbench runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

// ---------------------------------------------------------------------------------------
// probe

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probe_sglang_persona_library() {
    let _timing = common::timing_lock().await;
    let server = sim(&["--context-length", "8192"]).await;
    let i = probe_url(&server.url()).await;
    assert_eq!(i.kind.name(), "sglang");
    assert_eq!(i.context_length, Some(8192));
    assert_eq!(
        i.context_source.as_deref(),
        Some("/server_info context_length")
    );
    assert_eq!(i.flush, "/flush_cache");
    assert!(i.tokenize, "the sglang persona serves /tokenize");
    assert_eq!(i.prefix_cache, Some(true));
    assert_eq!(i.reports_cached_tokens, Some(true));
    assert_eq!(i.page_size, Some(16));
    assert_eq!(i.model.as_deref(), Some("ctxbench-sim"));
    assert!(i.rtt_s.is_some_and(|r| r > 0.0 && r < 0.1), "{:?}", i.rtt_s);
    // Probing sends no generation.
    assert!(server.truth().is_empty());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probe_sglang_persona_without_cache_report_or_cache() {
    let _timing = common::timing_lock().await;
    let server = sim(&["--no-cache-report", "--no-cache"]).await;
    let i = probe_url(&server.url()).await;
    assert_eq!(i.kind.name(), "sglang");
    assert_eq!(i.reports_cached_tokens, Some(false));
    assert_eq!(i.prefix_cache, Some(false));
    let table = ctxbench::probe::render(&server.url(), &i);
    assert!(table.contains("--enable-cache-report"), "{table}");
}

/// The OpenAI persona serves `/v1/*` and `/health` only: its limit comes from `/v1/models`,
/// and it offers neither a flush nor a tokenize endpoint, so probe must not claim either.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probe_openai_persona_library() {
    let _timing = common::timing_lock().await;
    let server = sim(&["--persona", "openai", "--context-length", "8192"]).await;
    let url = server.url();
    let i = probe_url(&url).await;
    // The persona's /v1/models names its owner; probe's kind follows it (vLLM shapes
    // /v1/models this way, with `max_model_len`), else it is a generic OpenAI server.
    let owner = reqwest::get(format!("{url}/v1/models"))
        .await
        .unwrap()
        .json::<Value>()
        .await
        .unwrap()["data"][0]["owned_by"]
        .as_str()
        .unwrap()
        .to_string();
    assert_ne!(owner, "vllm", "the generic persona must not pose as vLLM");
    let want_kind = "openai";
    assert_eq!(i.kind.name(), want_kind, "owned_by {owner}");
    assert_eq!(i.context_length, Some(8192));
    assert_eq!(
        i.context_source.as_deref(),
        Some("/v1/models data[0].max_model_len")
    );
    assert_eq!(i.flush, "none", "the openai persona has no flush route");
    assert!(!i.tokenize, "the openai persona has no /tokenize");
    assert_eq!(i.model.as_deref(), Some("ctxbench-sim"));
    assert!(i.rtt_s.is_some());
    assert!(server.truth().is_empty());
}

/// A vLLM in dev mode does offer `/reset_prefix_cache` (POST only) and `/tokenize`: probe
/// finds both without calling the flush (a stub server counts the calls).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probe_finds_a_vllm_dev_mode_flush_without_flushing() {
    let _timing = common::timing_lock().await;
    use axum::routing::{get, post};
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    let resets = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&resets);
    let app = axum::Router::new()
        .route(
            "/v1/models",
            get(|| async {
                axum::Json(serde_json::json!({"object": "list", "data": [{
                    "id": "m", "object": "model", "owned_by": "vllm", "max_model_len": 32768
                }]}))
            }),
        )
        .route(
            "/reset_prefix_cache",
            post(move || {
                counter.fetch_add(1, Ordering::SeqCst);
                async { "" }
            }),
        )
        .route(
            "/tokenize",
            post(|| async { axum::Json(serde_json::json!({"tokens": [1, 2], "count": 2})) }),
        )
        .route("/health", get(|| async { "" }));
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let task = tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    let i = probe_url(&url).await;
    task.abort();
    assert_eq!(i.kind.name(), "vllm");
    assert_eq!(i.flush, "/reset_prefix_cache");
    assert!(i.tokenize);
    assert_eq!(i.context_length, Some(32768));
    assert_eq!(resets.load(Ordering::SeqCst), 0, "probing must not flush");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probe_binary_json_and_table_for_both_personas() {
    let _timing = common::timing_lock().await;
    for (flags, source) in [
        (
            vec!["--context-length", "8192"],
            "/server_info context_length",
        ),
        (
            vec!["--persona", "openai", "--context-length", "8192"],
            "/v1/models data[0].max_model_len",
        ),
    ] {
        let server = sim(&flags).await;
        let url = server.url();
        let lib = probe_url(&url).await;

        let (code, stdout, stderr) = probe_bin(&url, "json").await;
        assert_eq!(code, 0, "{stderr}");
        let v: Value = serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"));
        assert_eq!(v["kind"], lib.kind.name(), "{stdout}");
        assert_eq!(v["context_length"], 8192, "{stdout}");
        assert_eq!(v["context_source"], source, "{stdout}");
        assert_eq!(v["flush"], lib.flush);
        assert_eq!(v["tokenize"], lib.tokenize);
        assert!(
            v.get("flusher").is_none(),
            "internal fields stay out: {stdout}"
        );

        let (code, table, stderr) = probe_bin(&url, "table").await;
        assert_eq!(code, 0, "{stderr}");
        assert!(
            table.contains(&format!("8192 tokens (from {source})")),
            "{table}"
        );
        assert!(
            table.contains(&format!("{} at {url}", lib.kind.name())),
            "{table}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probe_binary_fails_cleanly_when_nothing_answers() {
    let _timing = common::timing_lock().await;
    // A port that was just free: nothing listens there.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let (code, stdout, stderr) = probe_bin(&format!("http://127.0.0.1:{port}"), "json").await;
    assert_ne!(code, 0);
    assert!(stdout.is_empty(), "{stdout}");
    // The refused connection itself, not a list of routes that did not answer.
    assert!(stderr.to_lowercase().contains("refused"), "{stderr}");
}

// ---------------------------------------------------------------------------------------
// limits

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lengths_max_is_limit_minus_output_tokens() {
    let _timing = common::timing_lock().await;
    let server = sim(&["--context-length", "8192"]).await;
    let r = sweep(
        &server.url(),
        &[
            "--lengths",
            "max",
            "--output-tokens",
            "16",
            "--reps",
            "1",
            "--no-warmup",
        ],
    )
    .await;
    assert_eq!(r.run.config.lengths, vec![8176]);
    assert_eq!(r.samples.len(), 1);
    let s = &r.samples[0];
    assert_eq!(s.context_tokens, 8176);
    assert_eq!(s.prompt_tokens, Some(8176));
    assert!(s.valid, "{s:?}");
    assert!(r.errors.is_empty(), "{:?}", r.errors);
    // The sweep's pre-measurement probes (API prefix, transport) are 64-token prompts.
    let truth: Vec<_> = server
        .truth()
        .into_iter()
        .filter(|t| t.prompt_tokens > ctxbench::sweep::allowance::PROBE_TOKENS)
        .collect();
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
    let r = sweep(
        &server.url(),
        &[
            "--lengths",
            "max",
            "--output-tokens",
            "16",
            "--reps",
            "2",
            "--no-warmup",
        ],
    )
    .await;
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
    for (flags, source) in [
        (
            vec!["--context-length", "8192"],
            "/server_info context_length",
        ),
        (
            vec!["--persona", "openai", "--context-length", "8192"],
            "max_model_len",
        ),
    ] {
        let server = sim(&flags).await;
        let err = ctxbench::sweep::execute(sweep_args(
            &server.url(),
            &["--lengths", "1k,8k", "--output-tokens", "16", "--reps", "1"],
        ))
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
        let conn = connect(
            &server.url(),
            ApiChoice::Auto,
            Endpoint::Completions,
            None,
            None,
        )
        .await
        .unwrap();
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
    let proxy = LimitHidingProxy::start(&server.url()).await;
    assert_eq!(probe_url(&proxy.url).await.context_length, None);
    let r = sweep(
        &proxy.url,
        &[
            "--lengths",
            "2k,8k",
            "--output-tokens",
            "16",
            "--reps",
            "2",
            "--no-warmup",
        ],
    )
    .await;
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
    let proxy = LimitHidingProxy::start(&server.url()).await;
    let r = sweep(
        &proxy.url,
        &[
            "--lengths",
            "2k,4k,8k",
            "--output-tokens",
            "16",
            "--reps",
            "1",
            "--no-warmup",
        ],
    )
    .await;
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
    let kept: Vec<u64> = server
        .truth()
        .iter()
        .map(|t| t.prompt_tokens)
        .filter(|&n| n > ctxbench::sweep::allowance::PROBE_TOKENS)
        .collect();
    assert_eq!(kept, vec![2048, 4080, 4080]);
    let note = r
        .summary
        .notes
        .iter()
        .find(|n| n.contains("truncated"))
        .unwrap_or_else(|| panic!("no truncation note: {:?}", r.summary.notes));
    assert!(note.contains("from 4096 tokens"), "{note}");
    assert_eq!(r.summary.points[1].flags[flag::TRUNCATED], 1);
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

// ---------------------------------------------------------------------------------------
// needles

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn needles_at_three_depths_all_pass_and_timings_stay_valid() {
    let _timing = common::timing_lock().await;
    let server = sim(&[]).await;
    let r = sweep(
        &server.url(),
        &[
            "--lengths",
            "4k,16k",
            "--needle",
            "--needle-depths",
            "0.1,0.5,0.9",
            "--reps",
            "1",
            "--output-tokens",
            "32",
            "--no-warmup",
        ],
    )
    .await;
    assert_eq!(r.run.config.reps, 3, "one rep per depth at least");
    assert_eq!(r.run.config.needle_depths, vec![0.1, 0.5, 0.9]);
    assert_eq!(r.samples.len(), 6);
    let truth: Vec<_> = server
        .truth()
        .into_iter()
        .filter(|t| t.output_tokens == 32)
        .collect();
    assert_eq!(truth.len(), 6);
    for (s, t) in r.samples.iter().zip(&truth) {
        let n = s.needle.as_ref().expect("needle result");
        assert!(n.ok, "{s:?}");
        assert_eq!(t.needle_answer.as_deref(), Some(n.expected.as_str()));
        assert!(s.valid, "{s:?}");
        assert!(!has(s, flag::NEEDLE_FAILED));
        assert_eq!(s.prompt_tokens, Some(s.context_tokens));
        // TTFT cannot beat the simulated prefill, and the needle costs it nothing extra.
        assert!(s.ttft_s.unwrap() >= t.prefill_s, "{s:?} vs {t:?}");
        assert!(s.decode_tps.is_some());
    }
    // Prefill agrees with the cost model; per point (median of the three depths), so one
    // scheduling hiccup on the shared 2-core machine does not decide it.
    for n in [4096u64, 16384] {
        let med = |xs: Vec<f64>| ctxbench::stats::median(&xs).unwrap();
        let measured = med(r
            .samples
            .iter()
            .filter(|s| s.context_tokens == n)
            .map(|s| s.prefill_tps.unwrap())
            .collect());
        let truth = med(truth
            .iter()
            .filter(|t| t.prompt_tokens == n)
            .map(|t| t.prefill_tps())
            .collect());
        assert!(
            rel(measured, truth) < PREFILL_TOL,
            "{n}: prefill {measured:.0} vs {truth:.0}"
        );
    }
    for p in &r.summary.points {
        let depths: Vec<f64> = p.needle.iter().map(|c| c.depth).collect();
        assert_eq!(depths, vec![0.1, 0.5, 0.9], "{:?}", p.needle);
        assert!(p.needle.iter().all(|c| (c.passed, c.total) == (1, 1)));
        assert_eq!(p.n_valid, 3);
        assert!(p.ttft_s.is_some() && p.decode_tps.is_some());
    }
    let table = ctxbench::report::table::needle_table(&r.summary);
    for row in ["4k", "16k"] {
        let line = table
            .lines()
            .find(|l| l.starts_with(row))
            .unwrap_or_else(|| panic!("{table}"));
        assert_eq!(line.matches("1/1").count(), 3, "{table}");
    }
    assert!(
        table.contains("d=0.1") && table.contains("d=0.5") && table.contains("d=0.9"),
        "{table}"
    );
}

/// Silent truncation keeps the tail: a fact early in an over-long prompt is lost, one late
/// in it survives; the pass table shows it and the summary names the truncation.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn truncation_loses_early_needles() {
    let _timing = common::timing_lock().await;
    let server = sim(&["--truncate", "--context-length", "4096"]).await;
    let proxy = LimitHidingProxy::start(&server.url()).await;
    let r = sweep(
        &proxy.url,
        &[
            "--lengths",
            "2k,8k",
            "--needle",
            "--needle-depths",
            "0.1,0.5,0.9",
            "--output-tokens",
            "16",
            "--no-warmup",
        ],
    )
    .await;
    assert_eq!(r.samples.len(), 6);
    let at = |n: u64, d: f64| {
        r.samples
            .iter()
            .find(|s| s.context_tokens == n && s.needle.as_ref().unwrap().depth == d)
            .unwrap()
    };
    for d in [0.1, 0.5, 0.9] {
        assert!(at(2048, d).needle.as_ref().unwrap().ok, "{:?}", at(2048, d));
    }
    let early = at(8192, 0.1);
    assert!(!early.needle.as_ref().unwrap().ok, "{early:?}");
    assert!(has(early, flag::NEEDLE_FAILED) && has(early, flag::TRUNCATED));
    let late = at(8192, 0.9);
    assert!(late.needle.as_ref().unwrap().ok, "{late:?}");
    assert!(has(late, flag::TRUNCATED));
    assert!(
        r.summary
            .notes
            .iter()
            .any(|n| n.contains("truncated") && n.contains("from 8192 tokens")),
        "{:?}",
        r.summary.notes
    );
    let p8 = r
        .summary
        .points
        .iter()
        .find(|p| p.context_tokens == 8192)
        .unwrap();
    let cell = |d: f64| p8.needle.iter().find(|c| c.depth == d).unwrap();
    assert_eq!((cell(0.1).passed, cell(0.1).total), (0, 1));
    assert_eq!((cell(0.9).passed, cell(0.9).total), (1, 1));
    let table = ctxbench::report::render(&r.run, &r.summary, Format::Table);
    let row = table
        .lines()
        .skip_while(|l| !l.starts_with("needle"))
        .find(|l| l.starts_with("8k"))
        .unwrap_or_else(|| panic!("{table}"));
    let cells: Vec<&str> = row.split_whitespace().skip(1).collect();
    assert_eq!(cells.first(), Some(&"0/1"), "{table}");
    assert_eq!(cells.last(), Some(&"1/1"), "{table}");
    assert!(table.contains("note: the server truncated"), "{table}");
}

// ---------------------------------------------------------------------------------------
// cache hits without cached-token reports

/// `--cache-bust off` repeats each prompt exactly; the server says nothing about cached
/// tokens, so repetitions served from its prefix cache can only be seen in their TTFT.
/// Lengths where prefill, not the fixed per-request overhead, dominates TTFT.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn unreported_cache_hits_are_inferred_from_timing() {
    let _timing = common::timing_lock().await;
    let server = sim(&["--persona", "openai", "--no-cache-report"]).await;
    let r = sweep(
        &server.url(),
        &[
            "--lengths",
            "8k,16k",
            "--reps",
            "3",
            "--output-tokens",
            "16",
            "--cache-bust",
            "off",
            "--no-warmup",
        ],
    )
    .await;
    assert!(r.errors.is_empty(), "{:?}", r.errors);
    assert_eq!(r.samples.len(), 6);
    let truth: Vec<_> = server
        .truth()
        .into_iter()
        .filter(|t| t.output_tokens == 16)
        .collect();
    assert_eq!(truth.len(), 6);
    for (s, t) in r.samples.iter().zip(&truth) {
        assert_eq!(s.cached_tokens, None, "not reported: {s:?}");
        // The simulator served repetitions from cache.
        let fully_cached = t.cached_tokens + 16 >= t.prompt_tokens;
        assert_eq!(fully_cached, s.rep > 0, "{t:?}");
        assert_eq!(
            has(s, flag::CACHE_HIT_INFERRED),
            s.rep > 0,
            "{} rep {}: ttft {:?} {:?}",
            s.context_tokens,
            s.rep,
            s.ttft_s,
            s.flags
        );
        assert_eq!(s.valid, s.rep == 0, "{s:?}");
    }
    for p in &r.summary.points {
        assert_eq!(p.n_valid, 1, "only the cold first repetition counts");
        assert_eq!(p.flags[flag::CACHE_HIT_INFERRED], 2);
    }
    assert_eq!(r.exit_code(), 0);
}

/// Calibration prompts lead with a nonce; with `--cache-bust off` the measured text prompts
/// must still come out at the calibrated length, or every small point reads as "truncated"
/// (it did: 999 tokens for 1k, a false truncation note).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cache_bust_off_text_prompts_keep_their_length() {
    let _timing = common::timing_lock().await;
    let server = sim(&["--persona", "openai", "--no-cache-report"]).await;
    let r = sweep(
        &server.url(),
        &[
            "--lengths",
            "1k,2k",
            "--reps",
            "2",
            "--output-tokens",
            "16",
            "--cache-bust",
            "off",
            "--no-warmup",
        ],
    )
    .await;
    assert_eq!(r.run.config.prompt_mode, "calibrated_text");
    assert_eq!(r.samples.len(), 4);
    for s in &r.samples {
        let p = s.prompt_tokens.unwrap() as f64;
        assert!(
            rel(p, s.context_tokens as f64) <= 0.01,
            "{p} vs {}",
            s.context_tokens
        );
        assert!(
            !has(s, flag::TRUNCATED) && !has(s, flag::LENGTH_MISMATCH),
            "{s:?}"
        );
    }
    assert!(
        r.summary.notes.iter().all(|n| !n.contains("truncated")),
        "{:?}",
        r.summary.notes
    );
}

/// The same sweep with the default cache defeat: fresh nonces keep every request cold, so
/// nothing is inferred and every sample counts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn no_inferred_hits_when_prompts_are_cold() {
    let _timing = common::timing_lock().await;
    let server = sim(&["--persona", "openai", "--no-cache-report"]).await;
    let r = sweep(
        &server.url(),
        &[
            "--lengths",
            "8k,16k",
            "--reps",
            "3",
            "--output-tokens",
            "16",
            "--no-warmup",
        ],
    )
    .await;
    assert_eq!(r.samples.len(), 6);
    for s in &r.samples {
        assert!(!has(s, flag::CACHE_HIT_INFERRED), "{s:?}");
        assert!(s.valid, "{s:?}");
    }
    assert!(
        server
            .truth()
            .iter()
            .filter(|t| t.output_tokens == 16)
            .all(|t| t.cached_tokens <= 16)
    );
}

// ---------------------------------------------------------------------------------------
// a loopback proxy that hides the server's context limit

struct LimitHidingProxy {
    url: String,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for LimitHidingProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

#[derive(Clone)]
struct Upstream {
    base: String,
    client: reqwest::Client,
}

impl LimitHidingProxy {
    async fn start(upstream: &str) -> Self {
        use axum::Router;
        // Installs the TLS crypto provider reqwest needs before building a client.
        let _ = Http::new(upstream, None).unwrap();
        let up = Upstream {
            base: upstream.trim_end_matches('/').to_string(),
            client: reqwest::Client::builder()
                .tcp_nodelay(true)
                .build()
                .unwrap(),
        };
        let app = Router::new()
            .fallback(forward)
            .layer(axum::extract::DefaultBodyLimit::max(512 << 20))
            .with_state(up);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        // Servers written for the tests set TCP_NODELAY: with Nagle on, the sweep rightly
        // finds (and flags) the delayed-ACK transport delay.
        let listener = axum::serve::ListenerExt::tap_io(listener, |tcp| {
            let _ = tcp.set_nodelay(true);
        });
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        LimitHidingProxy { url, task }
    }
}

/// Remove the fields that publish a context limit.
fn hide_limit(v: &mut Value) {
    if let Some(o) = v.as_object_mut() {
        o.remove("context_length");
        o.remove("max_req_input_len");
    }
    if let Some(models) = v.get_mut("data").and_then(Value::as_array_mut) {
        for m in models {
            if let Some(o) = m.as_object_mut() {
                o.remove("max_model_len");
            }
        }
    }
}

async fn forward(
    axum::extract::State(up): axum::extract::State<Upstream>,
    method: axum::http::Method,
    uri: axum::http::Uri,
    headers: axum::http::HeaderMap,
    body: bytes::Bytes,
) -> axum::response::Response {
    use axum::response::IntoResponse;
    let path = uri.path_and_query().map(|p| p.as_str()).unwrap_or("/");
    let mut rb = up
        .client
        .request(
            reqwest::Method::from_bytes(method.as_str().as_bytes()).unwrap(),
            format!("{}{path}", up.base),
        )
        .body(body);
    if let Some(ct) = headers.get("content-type").and_then(|v| v.to_str().ok()) {
        rb = rb.header("content-type", ct);
    }
    let resp = match rb.send().await {
        Ok(r) => r,
        Err(e) => return (axum::http::StatusCode::BAD_GATEWAY, e.to_string()).into_response(),
    };
    let status = resp.status().as_u16();
    let ct = resp
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    if matches!(
        uri.path(),
        "/server_info" | "/get_server_info" | "/v1/models"
    ) && (200..300).contains(&status)
    {
        let mut v: Value = resp.json().await.unwrap();
        hide_limit(&mut v);
        return axum::Json(v).into_response();
    }
    let mut out = axum::http::Response::builder().status(status);
    if let Some(ct) = ct {
        out = out.header("content-type", ct);
    }
    out.body(axum::body::Body::from_stream(resp.bytes_stream()))
        .unwrap()
}
