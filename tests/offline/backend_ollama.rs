//! The Ollama backend against the simulator's `ollama` persona: the default window that
//! silently truncates, the `num_ctx` that covers each request, reloads taken by warm-ups or
//! flagged, server durations as truth, early stops without `ignore_eos`.

use crate::common;
use common::text_backend::{DEADLINE, needle_early_stop, persona, post_ok, text_request};
use common::{rel, sim, sweep};
use ctxbench::backend::http::Http;
use ctxbench::backend::ollama::{NumCtx, Ollama, RELOAD_S};
use ctxbench::backend::{Backend, detect};
use ctxbench::cli::{CacheBust, Method};
use ctxbench::record::flag;
use ctxbench::sweep::session::{Outcome, Session};
use ctxbench::workload::NonceSource;
use ctxbench::workload::PromptSource;
use serde_json::{Value, json};

/// Relative tolerance on prefill tok/s: TTFT also holds a loopback round trip, the upload
/// of the prompt and JSON handling (~1-2 ms against a ≥ 300 ms simulated 8k prefill here),
/// and the calibrated prompt is within 1 % of the length the truth counts exactly.
const PREFILL_TOL: f64 = 0.10;
/// Relative tolerance on decode tok/s: as in `sweep_sim.rs`, absolute-deadline sleeps keep
/// timer error from adding up, but one late last event on a loaded 2-core machine costs a
/// few ms of a ~150 ms decode.
const DECODE_TOL: f64 = 0.10;

async fn ps(url: &str) -> Value {
    let http = Http::new(url, None).unwrap();
    http.get_json("/api/ps", DEADLINE).await.unwrap().unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probe_finds_ollama_its_model_and_the_real_limit() {
    let _timing = common::timing_lock().await;
    let (server, http) = persona("ollama", &["--context-length", "65536"]).await;
    let info = detect::probe(&http).await.unwrap();
    assert_eq!(info.kind, detect::ServerKind::Ollama);
    assert_eq!(info.model.as_deref(), Some("ctxbench-sim"));
    // The model's limit, not the 4096 default window it would serve.
    assert_eq!(info.context_length, Some(65536));
    assert_eq!(
        info.context_source.as_deref(),
        Some("/api/show model_info.llama.context_length")
    );
    assert_eq!(info.ignore_eos, Some(false));
    assert_eq!(info.reports_cached_tokens, Some(false));
    let text = ctxbench::probe::render(&server.url(), &info);
    assert!(text.contains("65536 tokens (from /api/show"), "{text}");
}

/// The trap: a client that leaves `num_ctx` to the server gets the 4096 default window, and
/// an 8k prompt is cut to it with no error. ctxbench flags the sample `length_mismatch` and
/// invalid: one text prompt counted short is not by itself evidence of truncation (a sizing
/// error looks the same); the sweep's summary names the cut once a longer prompt is counted
/// no more than a shorter one (`truncation::plateau`), or a needle is lost with it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_8k_request_without_num_ctx_is_flagged_invalid() {
    let _timing = common::timing_lock().await;
    let (server, http) = persona("ollama", &["--ollama-load-s", "0.05"]).await;
    let naive = Ollama::new(
        http,
        "ctxbench-sim".into(),
        Some(131_072),
        NumCtx::ServerDefault,
    );
    let mut nonce = NonceSource::seeded(7);
    let prompts = PromptSource::prepare(&naive, false, None, &mut nonce)
        .await
        .unwrap();
    let mut session = Session {
        backend: std::sync::Arc::new(naive),
        prompts,
        nonce,
        cache_bust: CacheBust::Auto,
        output_tokens: 16,
        cache_allowance_tokens: 16,
        reports_cached_tokens: false,
    };
    let Outcome::Sample(s) = session
        .measure(8192, 0, Method::Stream, None, DEADLINE)
        .await
    else {
        panic!("the request failed")
    };
    assert_eq!(s.prompt_tokens, Some(4096), "cut to the default window");
    assert!(s.flags.contains(&flag::LENGTH_MISMATCH), "{:?}", s.flags);
    assert!(!s.flags.contains(&flag::TRUNCATED), "{:?}", s.flags);
    assert!(!s.valid);
    let truth = server.truth();
    assert_eq!(truth.last().unwrap().prompt_tokens, 4096);
    // Below the window the same client is fine.
    let Outcome::Sample(s) = session
        .measure(2048, 0, Method::Stream, None, DEADLINE)
        .await
    else {
        panic!("the request failed")
    };
    assert!(s.valid, "{s:?}");
}

/// The cure, by default: each request sets a window covering it, a warm-up takes the reload
/// at each new window, and the full 8k is measured, matching the simulator's truth.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_default_sweep_sets_num_ctx_warms_up_and_measures_the_full_8k() {
    let _timing = common::timing_lock().await;
    let server = sim(&["--persona", "ollama", "--sim-p0", "25000"]).await;
    let r = sweep(
        &server.url(),
        &["--lengths", "8k", "--reps", "2", "--output-tokens", "32"],
    )
    .await;
    assert_eq!(r.run.target.api, "ollama");
    assert_eq!(r.run.config.prompt_mode, "calibrated_text");
    assert_eq!(r.samples.len(), 2);
    let measured: Vec<_> = server
        .truth()
        .into_iter()
        .filter(|t| t.output_tokens == 32)
        .collect();
    assert_eq!(measured.len(), 2, "one server request per sample");
    for (s, t) in r.samples.iter().zip(&measured) {
        assert!(s.valid, "{s:?}");
        assert!(
            !s.flags
                .iter()
                .any(|f| f == flag::TRUNCATED || f == flag::MODEL_RELOAD)
        );
        let p = s.prompt_tokens.unwrap();
        assert!(
            rel(p as f64, 8192.0) <= 0.01,
            "{p} tokens: the whole prompt"
        );
        assert_eq!(
            t.prompt_tokens, p,
            "prompt_eval_count is what the model saw"
        );
        let timings = s.server_timings.as_ref().unwrap();
        let load_s = timings["load_duration"].as_f64().unwrap_or(0.0) / 1e9;
        assert!(
            load_s < RELOAD_S,
            "the reload went to the warm-up: {load_s}"
        );
        assert!(
            rel(s.prefill_tps.unwrap(), t.prefill_tps()) < PREFILL_TOL,
            "prefill {:?} vs {}",
            s.prefill_tps,
            t.prefill_tps()
        );
        assert!(
            rel(s.decode_tps.unwrap(), t.decode_tps()) < DECODE_TOL,
            "decode {:?} vs {}",
            s.decode_tps,
            t.decode_tps()
        );
    }
    let loaded = ps(&server.url()).await;
    let window = loaded["models"][0]["context_length"].as_u64().unwrap();
    assert!((8192 + 32..=2 * 8192).contains(&window), "window {window}");
    // Calibration, the sweep's warm-up and the 8k point each needed a window: every
    // reload happened on a request that is not a sample.
    assert!(loaded["sim_reloads"].as_u64().unwrap() >= 2, "{loaded}");
    let point = &r.summary.points[0];
    let delta = point.ttft_minus_server_s.expect("client − server TTFT");
    assert!((0.0..0.05).contains(&delta), "{delta}");
    assert!(point.decode_minus_server_s.is_some());
}

/// Another client changing the window between requests forces a reload the backend did not
/// expect: the measured sample carries it in `load_duration` and is flagged, not averaged.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reload_inside_a_measured_request_is_flagged() {
    let _timing = common::timing_lock().await;
    let (_server, http) = persona("ollama", &["--ollama-load-s", "0.3"]).await;
    let o = Ollama::new(
        http.clone(),
        "ctxbench-sim".into(),
        Some(131_072),
        NumCtx::Cover,
    );
    let req = text_request("the river runs past the old mill ".repeat(50), 8);
    let first = o.generate(&req).await.unwrap();
    assert!(first.flags.is_empty(), "the warm-up took the load");
    let other = json!({"model": "ctxbench-sim", "prompt": "hi", "raw": true, "stream": false,
        "options": {"num_ctx": 512, "num_predict": 1}});
    post_ok(&http, "/api/generate", &other).await;
    let second = o.generate(&req).await.unwrap();
    assert_eq!(second.flags, vec![flag::MODEL_RELOAD]);
    let load = second.server_timings.unwrap()["load_duration"]
        .as_f64()
        .unwrap()
        / 1e9;
    assert!(load >= 0.3, "{load}");
}

/// No `ignore_eos`: a prompt ending in a question is answered in a word or two, and the
/// sweep flags it `early_stop` rather than measuring a short decode.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_shorter_than_asked_are_early_stops() {
    let _timing = common::timing_lock().await;
    let server = sim(&["--persona", "ollama", "--ollama-load-s", "0.05"]).await;
    let s = needle_early_stop(&server.url()).await;
    assert!(!s.valid);
}

/// The persona's wire format, as a client without ctxbench sees it: NDJSON objects, the
/// last `done:true` with nanosecond durations, and a default window that cuts silently.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_persona_speaks_ndjson_and_truncates_by_default() {
    let _timing = common::timing_lock().await;
    let (server, http) = persona("ollama", &["--ollama-load-s", "0.05"]).await;
    let long = "the ".repeat(5000);
    let body = json!({"model": "ctxbench-sim", "prompt": long, "raw": true,
        "options": {"num_predict": 3}});
    let text = post_ok(&http, "/api/generate", &body).await;
    let lines: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), 4, "three pieces and the final object: {text}");
    assert!(lines[..3].iter().all(|l| l["done"] == false));
    let last = &lines[3];
    assert_eq!(last["done"], true);
    assert_eq!(last["done_reason"], "length");
    assert_eq!(last["eval_count"], 3);
    // 5001 tokens (BOS included) cut to the 4096 default window, no error.
    assert_eq!(last["prompt_eval_count"], 4096);
    for k in [
        "total_duration",
        "load_duration",
        "prompt_eval_duration",
        "eval_duration",
    ] {
        assert!(last[k].as_u64().is_some(), "{k}: {last}");
    }
    assert!(
        last["load_duration"].as_u64().unwrap() >= 50_000_000,
        "the first load"
    );
    let loaded = ps(&server.url()).await;
    assert_eq!(loaded["models"][0]["context_length"], 4096);
    // `stream: false`: one object, the whole response in it.
    let whole = json!({"model": "ctxbench-sim", "prompt": "the river", "raw": true,
        "stream": false, "options": {"num_predict": 3}});
    let text = post_ok(&http, "/api/generate", &whole).await;
    let v: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(v["done"], true);
    assert_eq!(v["eval_count"], 3);
    assert_eq!(v["response"].as_str().unwrap().split(' ').count(), 3, "{v}");
}

/// Mid-stream faults reach the NDJSON persona too, and end the request as errors.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn faults_in_the_ndjson_stream_are_errors() {
    let _timing = common::timing_lock().await;
    for (kind, want) in [
        ("error_event", "server_error_event"),
        ("no_final", "incomplete"),
    ] {
        let (_server, http) = persona(
            "ollama",
            &[
                "--ollama-load-s",
                "0",
                "--fault-rate",
                "1",
                "--fault-kinds",
                kind,
            ],
        )
        .await;
        let o = Ollama::new(
            http,
            "ctxbench-sim".into(),
            Some(131_072),
            NumCtx::ServerDefault,
        );
        let err = o.generate(&text_request("the river", 4)).await.unwrap_err();
        assert_eq!(err.kind(), want, "{kind}: {err}");
    }
}

/// `--api` must match what the server is.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mismatched_api_is_refused() {
    let _timing = common::timing_lock().await;
    let server = sim(&["--persona", "ollama"]).await;
    let args = common::sweep_args(&server.url(), &["--api", "tgi", "--lengths", "1k"]);
    let err = ctxbench::sweep::execute(args).await.err().unwrap();
    let msg = format!("{err:#}");
    assert!(msg.contains("--api tgi") && msg.contains("ollama"), "{msg}");
}
