//! `probe --cache-capacity` against the simulator, whose cache size is known: it keeps whole
//! pages up to its KV pool (4 × the context length) and empties itself when a prompt would
//! overflow it, so exactly ⌊pool / prefix⌋ distinct prefixes fit.

use crate::common;
use ctxbench::cli::ApiChoice;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_search_finds_how_many_prefixes_the_pool_keeps() {
    let server = common::sim(&["--context-length", "8192"]).await;
    let conn = common::connect(&server.url(), ApiChoice::Auto).await;
    let backend = conn.backend.as_ref();
    let mut prompts = ctxbench::workload::PromptSource::prepare(
        backend,
        false,
        None,
        &mut ctxbench::workload::NonceSource::from_entropy(),
    )
    .await
    .unwrap();
    let pool = conn.info.kv_pool_tokens;
    assert_eq!(pool, Some(32768));
    let c = ctxbench::cache_capacity::measure(backend, &mut prompts, 3072, 64, 16, pool)
        .await
        .unwrap();
    assert_eq!(c.kept_prefixes, 32768 / 3072, "{c:?}");
    assert_eq!(c.kept_tokens, 10 * 3072);
    assert!(!c.at_least && c.flushed_between_trials);
    assert_eq!(c.evidence, "server_counts");
    // The search saw both sides of the boundary.
    assert!(c.trials.iter().any(|t| t.primed == 10 && t.kept));
    assert!(c.trials.iter().any(|t| t.primed == 11 && !t.kept));
    let text = ctxbench::cache_capacity::render(&c);
    assert!(
        text.contains("10 prefixes of 3072 tokens") && text.contains("32768"),
        "{text}"
    );

    // A cap below the capacity is reported as a lower bound.
    let c = ctxbench::cache_capacity::measure(backend, &mut prompts, 3072, 4, 16, pool)
        .await
        .unwrap();
    assert_eq!((c.kept_prefixes, c.at_least), (4, true));
    assert!(ctxbench::cache_capacity::render(&c).contains(">= 4 prefixes"));
}
