//! The sweep against the in-process simulator: accuracy against the configured cost model
//! and each measurement rule, with a test that would catch its violation.

use crate::common;
use common::{flags, rel, sim};
use ctxbench::record::flag;

/// Relative tolerance on prefill tok/s: TTFT also holds one loopback round trip, the
/// request upload and JSON handling (~1 ms), and on a loaded 2-core machine a wait for a
/// core. Beside vLLM's accuracy test (both cores busy), 258 samples at each of 1k and 8k
/// came in at most 3.9 and 5.3 ms late, and one CI run's 1k sample (a 51 ms prefill) at
/// least 5.6 ms late, beyond 10 %. So the shortest prefill held to it here is 4k at 25k
/// tok/s (~170 ms, as in `backend_tgi.rs`), where such waits are under 4 %.
const PREFILL_TOL: f64 = 0.10;
/// Relative tolerance on decode tok/s: the simulator sleeps to absolute deadlines, so timer
/// granularity does not accumulate, but on a shared 2-core machine the last event of a
/// ~100 ms decode can be delayed by a few ms of scheduling.
const DECODE_TOL: f64 = 0.10;

/// Prefill and decode agree with the simulator's own per-request truth.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rates_match_the_cost_model_up_to_32k() {
    let _timing = common::timing_lock().await;
    // A prefill rate like a mid-size GPU's (25k tok/s), from 4k (`PREFILL_TOL`).
    let server = sim(&["--sim-p0", "25000"]).await;
    let r = flags("4k,8k,16k,32k", 2, 32).run(&server.url()).await;
    let truth = server.truth();
    let measured: Vec<_> = truth.iter().filter(|t| t.output_tokens == 32).collect();
    assert_eq!(
        measured.len(),
        r.samples.len(),
        "one server request per sample"
    );
    for (s, t) in r.samples.iter().zip(&measured) {
        assert!(s.valid, "{s:?}");
        assert_eq!(
            s.prompt_tokens,
            Some(s.context_tokens),
            "exact prompt length"
        );
        assert_eq!(t.prompt_tokens, s.context_tokens);
        let (true_prefill, true_decode) = (t.prefill_tps(), t.decode_tps());
        let (p, d) = (s.prefill_tps.unwrap(), s.decode_tps.unwrap());
        assert!(
            rel(p, true_prefill) < PREFILL_TOL,
            "{} tokens: prefill {p:.0} vs {true_prefill:.0}",
            s.context_tokens
        );
        assert!(
            rel(d, true_decode) < DECODE_TOL,
            "{} tokens: decode {d:.1} vs {true_decode:.1}",
            s.context_tokens
        );
    }
    let lengths: Vec<u64> = r.summary.points.iter().map(|p| p.context_tokens).collect();
    assert_eq!(lengths, vec![4096, 8192, 16384, 32768]);
    assert_eq!(r.exit_code(), 0);
}

/// With speculative decoding several tokens arrive per event; counting events would report
/// about half the true rate with --spec 3 (mean 2 tokens per event).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn speculative_events_are_counted_as_tokens() {
    let _timing = common::timing_lock().await;
    let server = sim(&["--spec", "3"]).await;
    let r = flags("2k", 2, 48).run(&server.url()).await;
    for (s, t) in r
        .samples
        .iter()
        .zip(server.truth().iter().filter(|t| t.output_tokens == 48))
    {
        let truth = t.decode_tps();
        assert!(
            rel(s.decode_tps.unwrap(), truth) < DECODE_TOL,
            "{} vs {truth}",
            s.decode_tps.unwrap()
        );
        assert!(
            s.tokens_per_event_mean.unwrap() > 1.5,
            "{:?}",
            s.tokens_per_event_mean
        );
        assert_eq!(s.output_tokens, Some(48));
    }
}

/// The story's failure: two-point with no cache defeat gets its second call from the
/// prefix cache; ctxbench flags it and reports nothing from it as valid.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_point_without_cache_bust_is_flagged_never_valid() {
    let _timing = common::timing_lock().await;
    let server = sim(&[]).await;
    let r = flags("1k,4k", 2, 17)
        .with(&["--method", "two-point", "--cache-bust", "off"])
        .run(&server.url())
        .await;
    assert_eq!(r.samples.len(), 4);
    for s in &r.samples {
        assert!(!s.valid, "{s:?}");
        assert!(s.flags.contains(&flag::CACHE_HIT), "{:?}", s.flags);
    }
    assert!(
        r.summary
            .points
            .iter()
            .all(|p| p.n_valid == 0 && p.two_point_decode_tps.is_none())
    );
    assert_eq!(r.exit_code(), ctxbench::exit::NOTHING_VALID);
}

/// The cure: by default every prompt leads with a fresh nonce (and the cache is flushed),
/// so no sample is served from cache and two-point decode agrees with streamed decode.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn default_cache_bust_gives_cold_samples() {
    let _timing = common::timing_lock().await;
    let server = sim(&[]).await;
    let r = flags("1k,4k", 2, 33)
        .warm_up()
        .with(&["--method", "both"])
        .run(&server.url())
        .await;
    assert_eq!(r.samples.len(), 8);
    for s in &r.samples {
        assert!(s.valid, "{s:?}");
        assert!(s.cached_tokens.unwrap_or(0) <= 16, "{s:?}");
    }
    for p in &r.summary.points {
        let (tp, st) = (
            p.two_point_decode_tps.unwrap().median,
            p.decode_tps.unwrap().median,
        );
        assert!(rel(tp, st) < 0.10, "two-point {tp} vs stream {st}");
    }
    // Every server request was cold.
    assert!(server.truth().iter().all(|t| t.cached_tokens <= 16));
}

/// `ignore_eos` is always sent: the simulated model stops early without it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn output_length_is_forced() {
    let _timing = common::timing_lock().await;
    let server = sim(&[]).await;
    let r = flags("1k", 3, 64).run(&server.url()).await;
    for s in &r.samples {
        assert_eq!(s.output_tokens, Some(64));
        assert!(!s.flags.contains(&flag::EARLY_STOP));
    }
}

/// Warm-up is sent once and excluded; the round trip is measured and recorded.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn warm_up_is_excluded_and_rtt_recorded() {
    let _timing = common::timing_lock().await;
    let server = sim(&[]).await;
    let r = flags("1k,2k", 1, 16).warm_up().run(&server.url()).await;
    assert_eq!(r.samples.len(), 2);
    // The sweep's pre-measurement probes (API prefix, transport) are 64-token prompts.
    let generations = server
        .truth()
        .iter()
        .filter(|t| t.prompt_tokens > ctxbench::sweep::allowance::PROBE_TOKENS)
        .count();
    assert_eq!(generations, 3, "one warm-up plus two samples");
    let rtt = r.run.config.rtt_s.expect("rtt measured");
    assert!(rtt > 0.0 && rtt < 0.1, "{rtt}");
}

/// The OpenAI completions route measures the same as the native one.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn openai_route_measures_right() {
    let _timing = common::timing_lock().await;
    let server = sim(&["--spec", "2", "--sim-p0", "25000"]).await;
    let r = flags("4k,8k", 2, 32)
        .with(&["--api", "openai"])
        .run(&server.url())
        .await;
    assert_eq!(r.run.target.api, "openai");
    for (s, t) in r
        .samples
        .iter()
        .zip(server.truth().iter().filter(|t| t.output_tokens == 32))
    {
        assert!(s.valid, "{s:?}");
        let truth = t.decode_tps();
        assert!(
            rel(s.decode_tps.unwrap(), truth) < DECODE_TOL,
            "{:?} vs {truth}",
            s.decode_tps
        );
        let (p, true_prefill) = (s.prefill_tps.unwrap(), t.prefill_tps());
        assert!(
            rel(p, true_prefill) < PREFILL_TOL,
            "{} tokens: prefill {p:.0} vs {true_prefill:.0}",
            s.context_tokens
        );
    }
}

/// The chat route with text prompts: lengths calibrated against the server's count.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chat_route_with_calibrated_text() {
    let _timing = common::timing_lock().await;
    let server = sim(&["--persona", "openai"]).await;
    let r = flags("1k,4k", 1, 16)
        .with(&["--api", "openai", "--endpoint", "chat"])
        .run(&server.url())
        .await;
    assert_eq!(r.run.config.prompt_mode, "calibrated_text");
    for s in &r.samples {
        assert!(s.valid, "{s:?}");
        let p = s.prompt_tokens.unwrap() as f64;
        assert!(
            rel(p, s.context_tokens as f64) <= 0.01,
            "{p} vs {}",
            s.context_tokens
        );
    }
}
