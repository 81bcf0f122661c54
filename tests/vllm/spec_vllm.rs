//! ctxbench against real vLLM 0.32 CPU under ngram speculation (k = 4) on the tiny model,
//! with `--per-request-spec-decode-metrics summary`: each response carries vLLM's own counts
//! for the request while `/metrics` counts the same steps. probe names the method and k, and
//! a sweep's acceptance per sample matches vLLM's counters for that sample.

use crate::common;
use common::vllm::{Config, VllmServer};
use ctxbench::backend::spec::stats_of;
use ctxbench::record::SpecSource;
use std::sync::Arc;

fn server() -> Arc<VllmServer> {
    VllmServer::shared(Config {
        ngram_spec: true,
        extra: vec!["--per-request-spec-decode-metrics".into(), "summary".into()],
        ..Config::default()
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probe_names_the_method_and_k() {
    let server = server();
    let _alone = server.exclusive().await;
    let out = common::bin::run_ok(&["probe", "--url", &server.url, "--format", "json"]);
    let p: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    println!(
        "{}",
        serde_json::to_string_pretty(&p["speculative"]).unwrap()
    );
    assert_eq!(p["speculative"]["method"], "ngram");
    assert_eq!(p["speculative"]["num_speculative_tokens"], 4);
    assert_eq!(p["speculative"]["prompt_lookup_min"], 2);
    assert!(
        p["sources"]["speculative"]
            .as_str()
            .unwrap()
            .contains("speculative_config")
    );
    // /metrics alone says k too: one accepted-per-position series per draft position.
    let positions = server
        .metrics()
        .lines()
        .filter(|l| l.starts_with("vllm:spec_decode_num_accepted_tokens_per_pos_total{"))
        .count();
    assert_eq!(positions, 4);
}

/// Each request's own counts (vLLM's per-request summary) against the `/metrics` deltas
/// around it, which ctxbench reads for servers that send none: the same verify steps,
/// drafted and accepted tokens, and one accept length.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acceptance_per_request_matches_vllms_own_counters() {
    let server = server();
    let _alone = server.exclusive().await;
    let conn = common::connect(&server.url, ctxbench::choices::ApiChoice::Auto).await;
    let mut accepted_any = false;
    let got = common::stash::both_sources(conn, 6, std::time::Duration::from_secs(120)).await;
    for (i, g) in got.iter().enumerate() {
        let (out, per_request, from_metrics) = (g.out, g.per_request, g.from_metrics);
        assert_eq!(
            1 + per_request.verify_steps.unwrap() + per_request.accepted_tokens.unwrap(),
            out,
            "each verify step yields its accepted drafts plus one: request {i}"
        );
        let (x, y) = (
            stats_of(&per_request, Some(out)),
            stats_of(&from_metrics, Some(out)),
        );
        println!(
            "request {i}: {out} tokens, {:?} verify steps, {:?} of {:?} drafted accepted; accept length {:.3} (per request) {:.3} (/metrics), vLLM's own {:?} / {:?}",
            per_request.verify_steps,
            per_request.accepted_tokens,
            per_request.draft_tokens,
            x.accept_length.unwrap(),
            y.accept_length.unwrap(),
            per_request.server_accept_length,
            from_metrics.server_accept_length,
        );
        assert_eq!(
            per_request.accepted_tokens, from_metrics.accepted_tokens,
            "request {i}"
        );
        assert_eq!(
            per_request.draft_tokens, from_metrics.draft_tokens,
            "request {i}"
        );
        assert_eq!(
            per_request.server_accept_length, from_metrics.server_accept_length,
            "vLLM's own figure, 1 + accepted / drafting steps, from both: request {i}"
        );
        assert_eq!(
            per_request.verify_steps, from_metrics.verify_steps,
            "request {i}"
        );
        assert!((x.accept_length.unwrap() - y.accept_length.unwrap()).abs() < 1e-12);
        accepted_any |= per_request.accepted_tokens.unwrap() > 0;
    }
    assert!(accepted_any, "ngram speculation accepted some drafts");
}

/// A sweep on the speculating server: every sample carries vLLM's own per-request counts,
/// and they add up to the output (1 + verify steps + accepted).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sweep_records_acceptance_from_vllms_counts() {
    let server = server();
    let _alone = server.exclusive().await;
    let r = common::flags("1k,2k", 2, 64).run(&server.url).await;
    println!(
        "{}",
        ctxbench::report::render(&r.run, &r.summary, ctxbench::cli::Format::Table)
    );
    assert_eq!(r.samples.len(), 4);
    for s in &r.samples {
        assert!(s.valid, "{s:?}");
        let k = s.spec.as_ref().expect("acceptance per sample");
        assert_eq!(k.source, SpecSource::Server, "{k:?}");
        assert_eq!(
            1 + k.verify_steps.unwrap() + k.accepted_tokens.unwrap(),
            s.output_tokens.unwrap(),
            "{k:?}"
        );
    }
    assert!(r.summary.points.iter().all(|p| p.accept_length.is_some()));
}
