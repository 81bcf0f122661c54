//! `ctxbench load` against llama.cpp's llama-server with 4 slots (continuous batching on
//! CPU): every request accounted for, and each request's decode rate held against the
//! server's own `timings` for that request.

use crate::common;

use common::llama::LlamaServer;
use common::rel;
use serde_json::Value;

/// Per-request decode against llama-server's `predicted_n / predicted_ms`: the client's
/// window runs from the first token's arrival to the last event (which also carries the
/// final timings), the server's from its first sampled token to its last; with 4 slots
/// batched on 2 cores both windows hold the same interleaved work, so they differ by a few
/// event gaps over 31 steps.
const DECODE_TOL: f64 = 0.10;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn four_slots_four_concurrent_requests_at_two_lengths() {
    let server = LlamaServer::start_with_slots(4);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("load.jsonl");
    let args = common::load_args(
        &server.url,
        &[
            "--lengths",
            "1k,4k",
            "--concurrency",
            "4",
            "--requests",
            "4",
            "--output-tokens",
            "32",
            "--slo",
            "",
            "--out",
            out.to_str().unwrap(),
        ],
    );
    let r = ctxbench::load::execute(args).await.expect("load runs");
    let file = ctxbench::resultfile::read(&out).unwrap();
    assert_eq!(r.cells.len(), 2);
    // The first cell, right after the warm-up stream (whose connection llama-server closes
    // without saying so), warmed its workers' connections and a spare: the closed connection
    // is not the end of the warming (issue 37 §3).
    let warmed = 4 + ctxbench::load::spare_connections(4) as u64;
    assert_eq!(
        r.cells[0].warm_connections,
        Some(warmed),
        "{:?}",
        r.cells[0]
    );
    for c in &r.cells {
        assert_eq!((c.sent, c.ok, c.failed), (4, 4, 0), "{c:?}");
        let n = file.load.requests_in(&c.cell).count();
        assert_eq!(n, 4, "every request is in the file");
    }
    for q in &r.requests {
        let t = q.server_timings.as_ref().expect("llama-server timings");
        let get = |k: &str| {
            t.get(k)
                .and_then(Value::as_f64)
                .unwrap_or_else(|| panic!("{k}: {t}"))
        };
        assert_eq!(
            get("prompt_n") as u64 + get("cache_n") as u64,
            q.cell.context_tokens
        );
        assert_eq!(get("cache_n"), 0.0, "the nonce defeats the prompt cache");
        let server = get("predicted_n") / (get("predicted_ms") / 1e3);
        let client = 1.0 / q.tpot_s.unwrap();
        println!(
            "{:>5} tokens #{}: decode {client:.1} vs server {server:.1} tok/s, TTFT {:.1} ms",
            q.cell.context_tokens,
            q.index,
            q.ttft_s.unwrap() * 1e3
        );
        assert!(
            rel(client, server) < DECODE_TOL,
            "client {client} vs server {server}: {q:?}"
        );
    }
}
