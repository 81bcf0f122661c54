//! Speculative decoding on a real peer: llama-server with a draft model (the tiny model
//! drafting for itself, `--spec-type draft-simple`). Its own `timings.draft_n` and
//! `draft_n_accepted` are the truth each sample's acceptance is held to.

mod common;
use common::flags;
use common::llama::{LlamaServer, timing};
use ctxbench::record::{Sample, SpecSource};

/// Up to 4 drafted tokens a step, at least 1: with greedy sampling and the same weights
/// the draft always matches, so every step drafts.
const DRAFT_ARGS: [&str; 8] = [
    "-md",
    "draft",
    "--spec-type",
    "draft-simple",
    "--spec-draft-n-max",
    "4",
    "--spec-draft-n-min",
    "1",
];

fn check(s: &Sample) {
    assert!(s.valid, "{s:?}");
    let spec = s.spec.unwrap_or_else(|| panic!("no acceptance: {s:?}"));
    assert_eq!(spec.source, SpecSource::Server);
    let (drafted, accepted) = (timing(s, "draft_n"), timing(s, "draft_n_accepted"));
    assert!(drafted > 0.0, "the draft model drafted nothing: {s:?}");
    assert_eq!(spec.draft_tokens, Some(drafted as u64));
    assert_eq!(spec.accepted_tokens, Some(accepted as u64));
    let predicted = timing(s, "predicted_n") as u64;
    assert_eq!(spec.verify_steps, Some(predicted - accepted as u64));
    let want = predicted as f64 / (predicted - accepted as u64) as f64;
    assert!((spec.accept_length.unwrap() - want).abs() < 1e-12);
    println!(
        "{:>6} tokens: draft_n {drafted}, accepted {accepted}, {} steps for {predicted} tokens: accept {want:.2} tokens/step, rate {:.2}; decode {:.0} tok/s",
        s.context_tokens,
        predicted - accepted as u64,
        spec.accept_rate.unwrap(),
        s.decode_tps.unwrap()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn draft_counts_are_the_servers_own() {
    let server = LlamaServer::start_with_args(1, &DRAFT_ARGS);

    // Native /completion: timings on the final event.
    let r = flags("1k,2k", 2, 32)
        .warm_up()
        .with(&["--timeout", "600"])
        .run(&server.url)
        .await;
    assert_eq!(r.run.target.api, "llamacpp");
    assert_eq!(r.samples.len(), 4);
    r.samples.iter().for_each(check);
    for p in &r.summary.points {
        assert_eq!(p.spec_source, Some(SpecSource::Server));
        assert!(p.accept_length.unwrap().median > 1.0, "{p:?}");
    }
    println!(
        "{}",
        ctxbench::report::render(&r.run, &r.summary, ctxbench::cli::Format::Table)
    );

    // The OpenAI route: the same counts in the final chunk's `timings`.
    let r = flags("1k", 2, 32)
        .warm_up()
        .with(&["--api", "openai", "--timeout", "600"])
        .run(&server.url)
        .await;
    assert_eq!(r.run.target.api, "openai");
    assert_eq!(r.samples.len(), 2);
    r.samples.iter().for_each(check);
}
