//! ctxbench against a real third-party server, llama.cpp's llama-server, on CPU: its own
//! `timings` are the ground truth the client-side numbers are held against.

use crate::common;
use common::flags;
use common::llama::{LlamaServer, check_decode, check_prefill, gap_bound, timing};
use ctxbench::record::{Sample, flag};

/// One llama-server for all checks: a sweep spanning 1k…8k, then the cache demonstration,
/// then the OpenAI route (sequential: the server has one slot and two cores).
///
/// Size: the client's error against `timings` is a near-constant gap (transport, a wait for
/// a core) over a prefill that grows with length, so the short end is where the check can
/// fail. 16k added two 6 s prefills (tiny model, CPU) that held the same checks with the
/// most room: this test took 14.3 s with it and 6.0 s without (15.7 and 6.3 s with the
/// x86-64-v3 build).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn llama_server_is_measured_against_its_own_timings() {
    let server = LlamaServer::start();

    // 1. Native /completion with token ids, cache defeated.
    let r = flags("1k,4k,8k", 2, 32)
        .warm_up()
        .with(&["--timeout", "600"])
        .run(&server.url)
        .await;
    assert_eq!(r.run.target.api, "llamacpp", "auto-detected from /props");
    assert_eq!(r.run.target.server_info["context_length"], 32768);
    assert_eq!(r.run.config.prompt_mode, "token_ids");
    println!(
        "{}",
        ctxbench::report::render(&r.run, &r.summary, ctxbench::cli::Format::Table)
    );
    assert_eq!(r.samples.len(), 6);
    for s in &r.samples {
        assert!(s.valid, "{s:?}");
        assert_eq!(
            s.cached_tokens,
            Some(0),
            "served from the prompt cache: {s:?}"
        );
        assert_eq!(timing(s, "cache_n"), 0.0);
        assert_eq!(
            s.prompt_tokens,
            Some(s.context_tokens),
            "exact prompt length"
        );
        assert_eq!(timing(s, "prompt_n") as u64, s.context_tokens);
        check_prefill(s);
        assert_eq!(timing(s, "predicted_n") as u64, s.output_tokens.unwrap());
        check_decode(s);
    }
    // The summary's median of the same gap lies under the larger bound of its samples.
    for p in &r.summary.points {
        let dt = p.ttft_minus_server_s.expect("client - server TTFT");
        let bound = r
            .samples
            .iter()
            .filter(|s| s.context_tokens == p.context_tokens)
            .map(gap_bound)
            .fold(0.0, f64::max);
        assert!(
            dt >= 0.0 && dt < bound,
            "TTFT - prompt_ms = {dt} s at {}",
            p.context_tokens
        );
    }

    // 2. Without cache defeat llama-server reuses the previous prompt and ctxbench flags it.
    let r = flags("2k", 3, 8)
        .warm_up()
        .with(&["--cache-bust", "off"])
        .run(&server.url)
        .await;
    let repeats: Vec<&Sample> = r.samples.iter().filter(|s| s.rep > 0).collect();
    assert_eq!(repeats.len(), 2);
    for s in repeats {
        assert!(timing(s, "cache_n") > 0.0, "{s:?}");
        assert!(s.flags.contains(&flag::CACHE_HIT), "{:?}", s.flags);
        assert!(!s.valid);
    }

    // 3. The OpenAI route of the same server measures right too.
    let r = flags("1k,4k", 1, 32)
        .warm_up()
        .with(&["--api", "openai"])
        .run(&server.url)
        .await;
    assert_eq!(r.run.target.api, "openai");
    for s in &r.samples {
        assert!(s.valid, "{s:?}");
        assert_eq!(s.prompt_tokens, Some(s.context_tokens));
        assert_eq!(s.cached_tokens, Some(0));
        check_prefill(s);
    }
}
