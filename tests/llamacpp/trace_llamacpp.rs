//! `ctxbench load --trace` against llama.cpp's llama-server (one slot; ctxbench sends
//! `cache_prompt` with the slot pinned): the prefix a turn shares with the one before shows
//! as cached tokens (`timings.cache_n`) and as the drop in `timings.prompt_n`, equal to what
//! the trace makes possible.

use crate::common;

use common::llama::LlamaServer;
use serde_json::Value;
use std::io::Write;

/// llama.cpp reuses the common prefix token by token; one cache page (16) covers a BOS or
/// a re-evaluated boundary token, as in tests/llamacpp/depth_llamacpp.rs.
const PAGE: u64 = 16;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shared_prefixes_show_as_cached_tokens_and_a_smaller_prompt_n() {
    let server = LlamaServer::start();
    let dir = tempfile::tempdir().unwrap();
    let (trace, out) = (dir.path().join("t.jsonl"), dir.path().join("out.jsonl"));
    {
        let mut f = std::fs::File::create(&trace).unwrap();
        // Four turns of one conversation (each the last plus a block), then a stranger.
        for k in 0..4u64 {
            let ids: Vec<u64> = (1..=k + 1).collect();
            let line = format!(
                r#"{{"timestamp": {}, "input_length": {}, "output_length": 4, "hash_ids": {ids:?}}}"#,
                k * 3000,
                (k + 1) * 512
            );
            writeln!(f, "{line}").unwrap();
        }
        writeln!(
            f,
            r#"{{"timestamp": 12000, "input_length": 512, "output_length": 4, "hash_ids": [99]}}"#
        )
        .unwrap();
    }
    let args = common::load_args(
        &server.url,
        &[
            "--trace",
            trace.to_str().unwrap(),
            "--time-scale",
            "0.5",
            "--slo",
            "",
            "--out",
            out.to_str().unwrap(),
        ],
    );
    let r = ctxbench::load::execute(args)
        .await
        .expect("the trace replays");
    assert_eq!(r.requests.len(), 5);
    let mut shown = 0;
    for q in &r.requests {
        assert!(q.ok, "{q:?}");
        let info = q.trace.as_ref().unwrap();
        let t = q.server_timings.as_ref().expect("llama-server timings");
        let get = |k: &str| {
            t.get(k)
                .and_then(Value::as_u64)
                .unwrap_or_else(|| panic!("{k}: {t}"))
        };
        let (cache_n, prompt_n) = (get("cache_n"), get("prompt_n"));
        let possible = info.possible_cached_tokens;
        eprintln!(
            "line {}: input {}, possible {possible}, cache_n {cache_n}, prompt_n {prompt_n}, TTFT {:.1} ms",
            info.line,
            info.input_length,
            q.ttft_s.unwrap() * 1e3
        );
        assert_eq!(q.cached_tokens, Some(cache_n), "ctxbench read cache_n");
        assert!(cache_n.abs_diff(possible) <= PAGE, "line {}", info.line);
        assert!(
            prompt_n.abs_diff(info.input_length - possible) <= PAGE,
            "line {}: only the new block is prefilled",
            info.line
        );
        shown += u64::from(possible > 0 && cache_n > 0);
    }
    assert_eq!(shown, 3, "turns 2-4 each reuse the turn before");
    let h = ctxbench::load_report::trace_report::hits(&r).unwrap();
    // Each request's count is within a page of the possible one.
    let tol = (PAGE * h.ok) as f64 / h.input_tokens as f64;
    let obs = h.observed_ratio.unwrap();
    assert!(
        (obs - h.possible_ratio).abs() <= tol,
        "{obs} vs {}",
        h.possible_ratio
    );
}
