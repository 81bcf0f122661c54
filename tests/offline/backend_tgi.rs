//! The TGI backend against the simulator's `tgi` persona: exact prompt lengths from
//! `/tokenize`, rates against the simulator's truth, and `/info` limits enforced before
//! anything is sent.

use crate::common;
use common::text_backend::{needle_early_stop, persona, post_ok, text_request};
use common::{flags, rel, sim, sweep, sweep_args};
use ctxbench::backend::tgi::Tgi;
use ctxbench::backend::{Backend, RequestError, detect};

/// Relative tolerance on prefill tok/s: TTFT also holds a loopback round trip, the upload of
/// a text prompt and its tokenization by the server (a few ms on a loaded 2-core machine,
/// against a ≥ 170 ms simulated prefill at 4k here).
const PREFILL_TOL: f64 = 0.10;
/// Relative tolerance on decode tok/s: absolute-deadline sleeps keep timer error from
/// adding up; one late last event on a loaded 2-core machine costs a few ms of ~150 ms.
const DECODE_TOL: f64 = 0.10;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probe_reads_info() {
    let _timing = common::timing_lock().await;
    let flags = [
        "--context-length",
        "8192",
        "--tgi-max-input-tokens",
        "6000",
        "--max-running",
        "4",
    ];
    let (_server, http) = persona("tgi", &flags).await;
    let info = detect::probe(&http).await.unwrap();
    assert_eq!(info.kind, detect::ServerKind::Tgi);
    assert_eq!(info.model.as_deref(), Some("ctxbench-sim"));
    assert_eq!(info.context_length, Some(8192));
    assert_eq!(info.max_input_tokens, Some(6000));
    assert_eq!(info.max_running_requests, Some(4));
    assert_eq!(info.ignore_eos, Some(false));
    assert!(info.tokenize);
}

/// Text prompts cut to the exact length with `/tokenize`: TGI's own `input_length` equals
/// the length asked, and the rates match the simulator's truth.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn exact_lengths_and_rates_match_the_truth() {
    let _timing = common::timing_lock().await;
    let server = sim(&["--persona", "tgi", "--sim-p0", "25000"]).await;
    let r = flags("4k,8k,16k", 2, 32).warm_up().run(&server.url()).await;
    assert_eq!(r.run.target.api, "tgi");
    assert_eq!(r.run.config.prompt_mode, "tokenized_text");
    let measured: Vec<_> = server
        .truth()
        .into_iter()
        .filter(|t| t.output_tokens == 32)
        .collect();
    assert_eq!(measured.len(), r.samples.len());
    assert_eq!(r.samples.len(), 6);
    for (s, t) in r.samples.iter().zip(&measured) {
        assert!(s.valid, "{s:?}");
        assert_eq!(s.prompt_tokens, Some(s.context_tokens), "exact length");
        assert_eq!(t.prompt_tokens, s.context_tokens);
        assert_eq!(s.output_tokens, Some(32));
        assert!(
            rel(s.prefill_tps.unwrap(), t.prefill_tps()) < PREFILL_TOL,
            "{}: prefill {:?} vs {}",
            s.context_tokens,
            s.prefill_tps,
            t.prefill_tps()
        );
        assert!(
            rel(s.decode_tps.unwrap(), t.decode_tps()) < DECODE_TOL,
            "{}: decode {:?} vs {}",
            s.context_tokens,
            s.decode_tps,
            t.decode_tps()
        );
        // One token per event, even with speculative decoding on the server.
        assert_eq!(s.tokens_per_event_mean, Some(1.0));
    }
}

/// `max_input_tokens` below the total: a longer prompt is refused before any request, `max`
/// comes down to it, and prompts at the limit are accepted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn info_limits_are_enforced_before_sending() {
    let _timing = common::timing_lock().await;
    let server = sim(&[
        "--persona",
        "tgi",
        "--context-length",
        "8192",
        "--tgi-max-input-tokens",
        "4000",
    ])
    .await;
    let args = sweep_args(
        &server.url(),
        &["--lengths", "6k", "--output-tokens", "16", "--no-warmup"],
    );
    let err = ctxbench::sweep::execute(args).await.err().unwrap();
    let msg = format!("{err:#}");
    assert!(
        msg.contains("/info max_input_tokens") && msg.contains("4000"),
        "{msg}"
    );
    assert!(server.truth().is_empty(), "nothing was generated");

    let r = sweep(
        &server.url(),
        &[
            "--lengths",
            "1k,max",
            "--reps",
            "1",
            "--output-tokens",
            "16",
            "--no-warmup",
        ],
    )
    .await;
    let lengths: Vec<u64> = r.summary.points.iter().map(|p| p.context_tokens).collect();
    assert_eq!(lengths, vec![1024, 4000]);
    assert!(r.samples.iter().all(|s| s.valid), "{:?}", r.samples);
}

/// The backend itself refuses what `/info` forbids, with no request sent: a prompt it has
/// tokenized that is too long, and a request beyond `max_concurrent_requests`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_backend_refuses_what_info_forbids() {
    let _timing = common::timing_lock().await;
    let (server, http) = persona("tgi", &["--context-length", "4096", "--max-running", "1"]).await;
    let info = detect::probe(&http).await.unwrap();
    let tgi = Tgi::new(http, &info);
    let long = "the ".repeat(4200);
    let ids = tgi.tokenize(&long).await.unwrap().unwrap();
    assert_eq!(ids.len(), 4201, "BOS and one token per vocabulary word");
    let err = tgi
        .generate(&text_request(long.as_str(), 16))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, RequestError::ContextExceeded(m) if m.contains("max_input_tokens")),
        "{err}"
    );
    let err = tgi
        .generate(&text_request("the river", 4096))
        .await
        .unwrap_err();
    assert!(matches!(&err, RequestError::ContextExceeded(m) if m.contains("max_total_tokens")));
    assert!(server.truth().is_empty(), "refused before sending");

    // Two at once against max_concurrent_requests 1: one is refused without being sent.
    let text = "the river runs ".repeat(300);
    let both = text_request(text, 64);
    let (a, b) = tokio::join!(tgi.generate(&both), tgi.generate(&both));
    let failed: Vec<_> = [&a, &b]
        .into_iter()
        .filter_map(|r| r.as_ref().err())
        .collect();
    assert_eq!(failed.len(), 1, "{a:?} {b:?}");
    assert!(failed[0].to_string().contains("max_concurrent_requests"));
    assert_eq!(server.truth().len(), 1);
}

/// TGI streams validation errors inside a 200: a prompt the client could not measure
/// (no tokenize call) and the server refuses is a context error, not a malformed stream.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_validation_errors_are_context_errors() {
    let _timing = common::timing_lock().await;
    let (_server, http) = persona("tgi", &["--context-length", "2048"]).await;
    let mut info = detect::probe(&http).await.unwrap();
    // As if /info had not said: the server's own check must still be understood.
    info.context_length = None;
    info.max_input_tokens = None;
    let tgi = Tgi::new(http, &info);
    let err = tgi
        .generate(&text_request("the ".repeat(3000), 16))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, RequestError::ContextExceeded(m) if m.contains("`inputs`")),
        "{err}"
    );
    assert_eq!(err.kind(), "context_exceeded");
}

/// No `ignore_eos`: the needle question is answered in a word and the sample is an early
/// stop, its answer still checked.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_shorter_than_asked_are_early_stops() {
    let _timing = common::timing_lock().await;
    let server = sim(&["--persona", "tgi"]).await;
    let s = needle_early_stop(&server.url()).await;
    assert_eq!(s.prompt_tokens, Some(1024), "exact with a needle too");
}

/// The persona's wire format: one token per SSE event, `details` on the last, no `[DONE]`;
/// a request over the limit is a 200 whose only event is the validation error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_persona_streams_like_tgi() {
    let _timing = common::timing_lock().await;
    let (server, http) = persona("tgi", &["--context-length", "1024", "--spec", "3"]).await;
    let body = serde_json::json!({"inputs": "the river", "parameters": {"max_new_tokens": 5, "details": true}});
    let text = post_ok(&http, "/generate_stream", &body).await;
    assert!(!text.contains("[DONE]"), "{text}");
    let events: Vec<serde_json::Value> = text
        .split("\n\n")
        .filter_map(|e| e.strip_prefix("data: "))
        .map(|d| serde_json::from_str(d).unwrap())
        .collect();
    assert_eq!(
        events.len(),
        5,
        "one event per token despite --spec 3: {text}"
    );
    let last = &events[4];
    assert_eq!(last["details"]["generated_tokens"], 5);
    assert_eq!(last["details"]["input_length"], 3);
    assert_eq!(last["details"]["finish_reason"], "length");
    assert!(last["generated_text"].is_string());
    assert!(events[..4].iter().all(|e| e["generated_text"].is_null()));

    let whole = post_ok(&http, "/generate", &body).await;
    let whole: serde_json::Value = serde_json::from_str(&whole).unwrap();
    assert_eq!(whole["details"]["generated_tokens"], 5, "{whole}");
    assert_eq!(
        whole["generated_text"].as_str().unwrap().split(' ').count(),
        5
    );

    let over =
        serde_json::json!({"inputs": "the ".repeat(1100), "parameters": {"max_new_tokens": 5}});
    let text = post_ok(&http, "/generate_stream", &over).await;
    assert!(text.contains("\"error_type\":\"validation\""), "{text}");
    assert!(server.truth().iter().all(|t| t.prompt_tokens <= 1024));
}
