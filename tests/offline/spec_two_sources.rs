//! One definition of acceptance, two sources, the same requests: the simulator as vLLM
//! with `--per-request-spec-decode-metrics`, so each response carries the request's own
//! counts while `/metrics` counts the same verify steps. ctxbench reads both — the
//! per-request object, and the counter deltas around the lone request — and both give the
//! same verify steps, drafted and accepted tokens, and accept length.

use crate::common;
use common::sim;
use ctxbench::backend::spec::stats_of;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn per_request_counts_and_metrics_deltas_give_one_acceptance() {
    let server = sim(&[
        "--persona",
        "vllm",
        "--spec",
        "4",
        "--spec-model",
        "ngram",
        "--per-request-spec-metrics",
    ])
    .await;
    let conn = common::connect(&server.url(), ctxbench::choices::ApiChoice::Vllm).await;
    let got = common::stash::both_sources(conn, 4, std::time::Duration::from_secs(60)).await;
    for (i, g) in got.iter().enumerate() {
        let (out, per_request, from_metrics) = (g.out, g.per_request, g.from_metrics);
        // The same raw counts from both sources.
        assert_eq!(
            per_request.verify_steps, from_metrics.verify_steps,
            "request {i}"
        );
        assert_eq!(
            per_request.draft_tokens, from_metrics.draft_tokens,
            "request {i}"
        );
        assert_eq!(
            per_request.accepted_tokens, from_metrics.accepted_tokens,
            "request {i}"
        );
        // Each verify step yields its accepted drafts plus one; the first token is the
        // prefill's: the counts add up to the output.
        let (v, a) = (
            per_request.verify_steps.unwrap(),
            per_request.accepted_tokens.unwrap(),
        );
        assert_eq!(1 + v + a, out, "request {i}");
        // One accept length, and the server's own figure (1 + accepted / drafts) equal to it.
        let (x, y) = (
            stats_of(&per_request, Some(out)),
            stats_of(&from_metrics, Some(out)),
        );
        let want = (out - 1) as f64 / v as f64;
        for s in [&x, &y] {
            assert!((s.accept_length.unwrap() - want).abs() < 1e-12, "{s:?}");
            assert!(
                (s.server_accept_length.unwrap() - want).abs() < 1e-9,
                "{s:?}"
            );
        }
        println!(
            "request {i}: {out} tokens, {v} verify steps, {a} of {} drafts accepted: accept \
             length {want:.3} from both sources",
            per_request.draft_tokens.unwrap()
        );
    }
}
