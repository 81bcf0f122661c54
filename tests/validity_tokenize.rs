//! Issue 10 item 7: a tokenizer that fails on the filler text (simulator
//! `--tokenize-strict`, like llama-server's `HTTP 500: unordered_map::at`) does not end the
//! sweep: token ids come from the words it does tokenize, lengths stay exact; needles, which
//! need text tokenized, are refused with the reason.

mod common;
use common::{sim, sweep, sweep_args};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_tokenizer_falls_back_to_ordinary_ids() {
    let _timing = common::timing_lock().await;
    let server = sim(&["--tokenize-strict"]).await;
    let r = sweep(
        &server.url(),
        &[
            "--lengths",
            "1k,2k",
            "--reps",
            "2",
            "--output-tokens",
            "8",
            "--no-warmup",
        ],
    )
    .await;
    assert_eq!(r.run.config.prompt_mode, "token_ids_by_word");
    assert_eq!(r.samples.len(), 4, "{:?}", r.errors);
    for s in &r.samples {
        assert!(s.valid, "{s:?}");
        assert_eq!(s.prompt_tokens, Some(s.context_tokens), "exact length");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn needles_are_refused_with_the_reason() {
    let server = sim(&["--tokenize-strict"]).await;
    let args = sweep_args(
        &server.url(),
        &["--needle", "--lengths", "1k", "--reps", "1", "--no-warmup"],
    );
    let e = match ctxbench::sweep::execute(args).await {
        Ok(_) => panic!("a needle sweep cannot run without a working tokenizer"),
        Err(e) => format!("{e:#}"),
    };
    assert!(
        e.contains("--needle") && e.contains("unordered_map::at"),
        "{e}"
    );
    assert!(e.contains("without --needle"), "{e}");
}
