//! ctxbench against a real third-party server, llama.cpp's llama-server, on CPU: its own
//! `timings` are the ground truth the client-side numbers are held against.

mod common;
use common::llama::LlamaServer;
use common::{flags, rel};
use ctxbench::record::{Sample, flag};
use serde_json::Value;

/// Tolerance on prefill and decode rates against llama-server's own timings: TTFT also
/// holds the HTTP round trip, JSON of the id list and sampling of the first token; the
/// decode window starts at the first token, the server's at the end of the prompt batch.
const RATE_TOL: f64 = 0.10;

fn timing(s: &Sample, key: &str) -> f64 {
    s.server_timings
        .as_ref()
        .and_then(|t| t.get(key))
        .and_then(Value::as_f64)
        .unwrap_or_else(|| panic!("timings.{key} missing: {s:?}"))
}

/// One llama-server for all checks: a sweep spanning 1k…16k, then the cache demonstration,
/// then the OpenAI route (sequential: the server has one slot and two cores).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn llama_server_is_measured_against_its_own_timings() {
    let server = LlamaServer::start();

    // 1. Native /completion with token ids, cache defeated.
    let r = flags("1k,4k,16k", 2, 32)
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
        let server_prefill = timing(s, "prompt_n") / (timing(s, "prompt_ms") / 1e3);
        let server_decode = timing(s, "predicted_n") / (timing(s, "predicted_ms") / 1e3);
        let (p, d) = (s.prefill_tps.unwrap(), s.decode_tps.unwrap());
        println!(
            "{:>6} tokens: prefill {p:.0} vs server {server_prefill:.0} tok/s; decode {d:.1} vs server {server_decode:.1} tok/s; TTFT {:.1} ms vs prompt_ms {:.1}",
            s.context_tokens,
            s.ttft_s.unwrap() * 1e3,
            timing(s, "prompt_ms")
        );
        assert!(
            rel(p, server_prefill) < RATE_TOL,
            "prefill {p} vs {server_prefill}"
        );
        assert!(
            rel(d, server_decode) < RATE_TOL,
            "decode {d} vs {server_decode}"
        );
    }
    // Client TTFT exceeds prompt_ms by what lies outside the server's prefill timer: the
    // round trip, parsing the id list, slot set-up and first-token sampling. On loopback
    // that is milliseconds, growing with the id list; bound it by 20 ms + 1 % of the TTFT.
    for p in &r.summary.points {
        let dt = p.ttft_minus_server_s.expect("client - server TTFT");
        let ttft = p.ttft_s.unwrap().median;
        assert!(
            dt >= 0.0 && dt < 0.020 + 0.01 * ttft,
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
        let server_prefill = timing(s, "prompt_n") / (timing(s, "prompt_ms") / 1e3);
        assert!(rel(s.prefill_tps.unwrap(), server_prefill) < RATE_TOL);
    }
}
