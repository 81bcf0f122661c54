//! `sweep --depth` against a real server, llama.cpp's llama-server (one slot, `cache_prompt`
//! and `id_slot` pinned by ctxbench): its own `timings` show the prefix reused
//! (`cache_n` ≈ depth) and only the turn prefilled (`prompt_n` ≈ turn tokens), and
//! ctxbench's figures agree with those timings as in tests/llamacpp/llamacpp_peer.rs.

use crate::common;
use common::llama::{LlamaServer, check_decode, check_prefill, timing};
use common::sweep;
use ctxbench::record::Sample;

/// llama.cpp reuses the common prefix token by token; within one cache page (the allowance
/// ctxbench uses for servers that report none) covers a BOS or a boundary token.
const PAGE: f64 = 16.0;
const TURN: u64 = 512;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn llama_server_reuses_the_prefix_and_prefills_only_the_turn() {
    let server = LlamaServer::start();
    let r = sweep(
        &server.url,
        &[
            "--depth",
            "0,2k,6k",
            "--turn-tokens",
            "512",
            "--reps",
            "3",
            "--output-tokens",
            "16",
        ],
    )
    .await;
    let cfg = r.run.config.depth.as_ref().expect("depth config");
    assert_eq!(cfg.reuse_hints, vec!["cache_prompt=true", "id_slot=0"]);
    assert_eq!(cfg.reuse_evidence, "server_counts");
    let turns: Vec<&Sample> = r.samples.iter().filter(|s| s.method == "turn").collect();
    assert_eq!(turns.len(), 9);
    // Every turn's figures first, so a failure shows them all.
    for s in &turns {
        println!(
            "depth {:>6}: cache_n {}, prompt_n {}; TTFT {:.1} ms vs prompt_ms {:.1}; marginal prefill {:.0} tok/s; decode {:.1} vs server {:.1}",
            s.depth_tokens.unwrap(),
            timing(s, "cache_n"),
            timing(s, "prompt_n"),
            s.ttft_s.unwrap() * 1e3,
            timing(s, "prompt_ms"),
            s.prefill_tps.unwrap(),
            s.decode_tps.unwrap(),
            timing(s, "predicted_n") / (timing(s, "predicted_ms") / 1e3)
        );
    }
    // Counts are exact per turn.
    for s in &turns {
        let d = s.depth_tokens.unwrap() as f64;
        let (cache_n, prompt_n) = (timing(s, "cache_n"), timing(s, "prompt_n"));
        assert!(s.valid, "{s:?}");
        assert!(
            (cache_n - d).abs() <= PAGE,
            "cache_n {cache_n} vs depth {d}"
        );
        assert!(
            (prompt_n - TURN as f64).abs() <= PAGE,
            "prompt_n {prompt_n}"
        );
        assert_eq!(
            s.cached_tokens,
            Some(cache_n as u64),
            "ctxbench read cache_n"
        );
    }
    // Each turn's figures against the server's own timings, by the peer test's bounds: the
    // TTFT gap (the marginal prefill rate's error is exactly that gap over TTFT) and the
    // decode window.
    for s in &turns {
        check_prefill(s);
        check_decode(s);
    }
    // The cold requests at depth + turn really were cold, and the turn is cheaper deep down.
    for s in r.samples.iter().filter(|s| s.method == "stream") {
        assert_eq!(timing(s, "cache_n"), 0.0, "{s:?}");
    }
    let deep = r.summary.depth.last().unwrap();
    assert_eq!(deep.depth_tokens, 6 * 1024);
    assert!(deep.ttft_speedup.unwrap() > 2.0, "{deep:?}");
    assert_eq!(r.exit_code(), 0);
}
