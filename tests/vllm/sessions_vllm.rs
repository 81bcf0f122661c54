//! `ctxbench sessions` on vLLM's CPU build, whose own counters are the truth.
//!
//! The tiny model with its pool cut to 64 blocks of 128 tokens (`--num-gpu-blocks-override
//! 64`: 8,192 tokens; `--max-model-len 4096` still fits one request): one session of ~2k
//! tokens fits and reuses its history within a page; eight need twice the pool and evict
//! each other, and the capacity record names that cell. The client's summed `cached_tokens`
//! equal vLLM's `prefix_cache_hits` delta over each cell.
//!
//! SmolLM2-135M-Instruct (the accuracy test's server) then talks for real: its replies go
//! back as the next turn's prefix, and the server's counts show each turn adds the new
//! message plus the template's fixed markers.

use crate::common;
use common::sessions::run as sessions;
use common::vllm::{Config, VllmServer};
use ctxbench::sessions::record::{SessionEnd, TurnRecord};

/// Sessions of four turns: 128-token shared system prompt, a 1k document, 256-token turns
/// and 32-token replies, about 2.1k tokens at the last turn.
const SMALL: &[&str] = &[
    "--system-tokens",
    "128",
    "--first-tokens",
    "1k",
    "--turn-tokens",
    "256",
    "--output-tokens",
    "32",
    "--turns",
    "4",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sixty_four_blocks_hold_one_session_and_eight_thrash() {
    let server = VllmServer::shared(Config {
        max_model_len: 4096,
        extra: vec!["--num-gpu-blocks-override".into(), "64".into()],
        ..Config::default()
    });
    let _alone = server.exclusive().await;
    let flags: Vec<&str> = SMALL.iter().copied().chain(["--sessions", "1,8"]).collect();
    let out = sessions(&server.url, &flags).await;
    let page = out.plan.page_tokens;
    let pool = out.plan.pool_tokens.expect("vLLM states its pool");
    println!("page {page}, pool {pool}, capacity: {}", out.capacity.line);
    assert_eq!(pool, 64 * page, "64 blocks");
    assert_eq!(out.turns.iter().filter(|t| t.ok).count(), 4 + 8 * 4);

    let ctx = out.capacity.context_at_last_turn.unwrap();
    for c in &out.cells {
        let hits = &c.hits.pooled;
        println!(
            "{} sessions: hits {:?} (observed {} of possible {}), server {:?}",
            c.sessions, hits.ratio, hits.observed_tokens, hits.possible_tokens, c.server_hits
        );
        // The client's sum is vLLM's own count.
        let server_hits = c.server_hits.as_ref().expect("vLLM counts its hits");
        assert!(server_hits.agrees, "{server_hits:?}");
        assert_eq!(server_hits.delta_tokens, server_hits.client_tokens as f64);
        assert!(hits.observed_tokens <= hits.possible_tokens, "{hits:?}");
    }
    // One session (~2k tokens, a quarter of the pool) reuses its history: each later turn
    // is served what it could be within one page (a reply re-tokenized differently from
    // what was generated ends the match early; 32-token replies are shorter than a page).
    let one: Vec<&TurnRecord> = out.turns.iter().filter(|t| t.sessions == 1).collect();
    for t in one.iter().filter(|t| t.turn >= 2) {
        let cached = t.cached_tokens.unwrap_or(0);
        assert!(
            cached + page >= t.possible_cached_tokens && cached <= t.possible_cached_tokens,
            "{t:?}"
        );
    }
    assert_eq!(one.last().unwrap().end, Some(SessionEnd::Turns));
    // Eight of them need twice the pool: least recently used out, each history is gone
    // before its next turn.
    assert!(8.0 * ctx > 1.9 * pool as f64, "{ctx}");
    let eight = out.cells.iter().find(|c| c.sessions == 8).unwrap();
    let ratio = eight.hits.pooled.ratio.unwrap();
    assert!(ratio < out.plan.hit_floor, "{ratio}");
    assert_eq!(out.capacity.thrash, Some(8), "{}", out.capacity.line);
    assert_eq!(out.capacity.pool_tokens, Some(pool));
}

/// Real replies fed back. `--turn-tokens` is fixed, so each turn's prompt grows by the
/// previous reply, the new message and the template's markers around them: the same
/// number every turn, give or take the end-of-turn token (counted in the reply when the
/// model stopped by itself, added by the template when it did not).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_replies_of_smollm2_are_the_next_turns_prefix() {
    let server = VllmServer::shared(Config::smollm2());
    let _alone = server.exclusive().await;
    let out = sessions(
        &server.url,
        &[
            "--sessions",
            "2",
            "--turns",
            "4",
            "--system-tokens",
            "64",
            "--first-tokens",
            "512",
            "--turn-tokens",
            "96",
            "--output-tokens",
            "48",
        ],
    )
    .await;
    assert_eq!(out.turns.len(), 8, "{:?}", out.turns);
    let mut steps = Vec::new();
    for s in 1..=2 {
        let mut t: Vec<&TurnRecord> = out.turns.iter().filter(|t| t.session == s).collect();
        t.sort_by_key(|t| t.turn);
        for w in t.windows(2) {
            let (a, b) = (w[0], w[1]);
            assert!(a.ok && b.ok, "{a:?} {b:?}");
            let step = b.prompt_tokens.unwrap() as i64
                - a.prompt_tokens.unwrap() as i64
                - a.output_tokens.unwrap() as i64;
            println!(
                "session {s} turn {} → {}: reply {} tokens ({:?}), step {step}",
                a.turn,
                b.turn,
                a.output_tokens.unwrap(),
                a.finish_reason
            );
            steps.push((step, a.clone(), b.clone()));
        }
    }
    for (step, a, b) in &steps {
        assert_eq!(b.new_tokens, Some(*step as u64), "{a:?} {b:?}");
    }
    let only: Vec<i64> = steps.iter().map(|s| s.0).collect();
    let (lo, hi) = (only.iter().min().unwrap(), only.iter().max().unwrap());
    assert!(
        hi - lo <= 2,
        "steps {only:?}: the new message and the markers are fixed"
    );
}
