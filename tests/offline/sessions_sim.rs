//! `ctxbench sessions` against the in-process simulator, whose truth is the reference: every
//! turn carries its session's whole history (the streamed reply included), the server's
//! cached counts are what the simulator served, a pool too small for the sessions thrashes
//! where the pool arithmetic says, errors end only their session, bad input is refused
//! before any request, `--resume`, `report` and `compare` read the file back, and
//! `--session-header` puts each session's id on its turns.

use crate::common;
use common::sessions::small;
use common::sim;
use ctxbench::sessions::record::SessionEnd;
use ctxbench::sessions::{SessionsOutcome, execute};

/// Cheap, fixed simulator costs (2 ms + 1M tok/s prefill, 1 ms per decode step), 16-token
/// pages, replies kept in the cache as real servers keep them.
const SIM: &[&str] = &[
    "--sim-t0",
    "0.002",
    "--sim-p0",
    "1e6",
    "--sim-q",
    "0",
    "--sim-d0",
    "0.001",
    "--sim-d1",
    "0",
    "--sim-page-size",
    "16",
    "--cache-replies",
    "--max-running",
    "64",
];
const PAGE: u64 = 16;

async fn sessions(url: &str, flags: &[&str]) -> SessionsOutcome {
    common::sessions::run(url, flags).await
}

fn with<'a>(base: &[&'a str], more: &[&'a str]) -> Vec<&'a str> {
    base.iter().chain(more).copied().collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_turn_carries_the_whole_conversation_and_hits_are_the_servers() {
    let server = sim(SIM).await;
    let out = sessions(&server.url(), &with(&small("4"), &["--sessions", "2"])).await;
    assert_eq!(out.turns.len(), 8, "2 sessions × 4 turns");
    for s in 1..=2 {
        let t: Vec<_> = out.turns.iter().filter(|t| t.session == s).collect();
        assert_eq!(t.len(), 4);
        assert_eq!(t[3].end, Some(SessionEnd::Turns));
        for w in t.windows(2) {
            let (a, b) = (w[0], w[1]);
            let (pa, pb) = (a.prompt_tokens.unwrap(), b.prompt_tokens.unwrap());
            // The next prompt holds the previous prompt, its reply and the 64-token message.
            assert!(pb >= pa + a.output_tokens.unwrap() + 64, "{a:?} {b:?}");
            assert_eq!(b.new_tokens, Some(pb - pa - a.output_tokens.unwrap()));
            // Sessions fit: the server reused everything possible, whole pages.
            assert_eq!(b.cached_tokens, Some(b.possible_cached_tokens), "{b:?}");
            assert_eq!(b.possible_cached_tokens % PAGE, 0);
            assert!(b.possible_cached_tokens + PAGE > pa + a.output_tokens.unwrap());
        }
    }
    // The simulator's truth: the same (prompt, cached) pairs, on the chat route.
    // (The prompt-length calibration before the cell asked for one output token.)
    let truth = server.truth();
    let mut served: Vec<(u64, u64)> = truth
        .iter()
        .filter(|t| t.route == "/v1/chat/completions" && t.output_tokens == 16)
        .map(|t| (t.prompt_tokens, t.cached_tokens))
        .collect();
    let mut seen: Vec<(u64, u64)> = out
        .turns
        .iter()
        // SGLang (the default persona) reports cached tokens only when there are some.
        .map(|t| (t.prompt_tokens.unwrap(), t.cached_tokens.unwrap_or(0)))
        .collect();
    served.sort_unstable();
    seen.sort_unstable();
    assert_eq!(served, seen);
    let cell = &out.cells[0];
    // Warm turns reuse exactly what was possible. On turn 1 the system prompt counts as
    // possible once a turn carrying it was sent: the second session, sent beside the first,
    // may find it still in prefill, so turn 1 may observe less than possible, never more.
    for t in &cell.hits.by_turn {
        if t.turn >= 2 {
            assert_eq!(t.hits.ratio, Some(1.0), "{t:?}");
        } else {
            assert!(t.hits.observed_tokens <= t.hits.possible_tokens, "{t:?}");
        }
    }
    assert!(
        cell.hits.pooled.ratio.unwrap() <= 1.0,
        "{:?}",
        cell.hits.pooled
    );
    let server_hits = cell
        .server_hits
        .as_ref()
        .expect("the simulator counts hits");
    assert!(server_hits.agrees, "{server_hits:?}");
    assert_eq!(cell.ttft_s_by_turn.len(), 4);
    assert_eq!(cell.ttft_s_warm.unwrap().n, 6);
    // Open sessions and requests in flight were followed over time.
    assert!(
        cell.timeline
            .iter()
            .any(|p| p.open_sessions == 2 && p.in_flight == 2)
    );
    assert_eq!(cell.timeline.last().unwrap().open_sessions, 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pool_smaller_than_the_sessions_thrashes_where_the_arithmetic_says() {
    // 4096-token pool. Sessions end near 830 tokens (checked below): 1 or 2 of them take at
    // most 0.45 of the pool, 12 of them 2.4 pools, so LRU eviction must take each session's
    // history before its next turn. The cells sit far from the boundary (pool ÷ context ≈ 5),
    // where a scheduler's reserve for running requests cannot move the verdict.
    let server = sim(&with(
        SIM,
        &["--kv-pool-tokens", "4096", "--context-length", "4096"],
    ))
    .await;
    let out = sessions(&server.url(), &with(&small("4"), &["--sessions", "1,2,12"])).await;
    let cap = &out.capacity;
    let ctx = cap.context_at_last_turn.unwrap();
    assert!((700.0..=1000.0).contains(&ctx), "{ctx}");
    assert_eq!(cap.pool_tokens, Some(4096));
    for c in &out.cells {
        let need = c.sessions as f64 * ctx;
        let r = c.hits.pooled.ratio.unwrap();
        if need <= 0.5 * 4096.0 {
            // Every warm turn is served all it could be. Turn 1 may not be: a session sent
            // beside another counts the shared system prompt as possible before the other's
            // prefill has computed it (seen: 4000 of 4064, 0.984, pooled).
            for t in c.hits.by_turn.iter().filter(|t| t.turn >= 2) {
                assert_eq!(
                    t.hits.ratio,
                    Some(1.0),
                    "{} sessions fit: {t:?}",
                    c.sessions
                );
            }
            assert!(r > 0.9, "{} sessions fit: {r}", c.sessions);
        } else {
            assert!(need > 2.0 * 4096.0);
            assert!(r < 0.5, "{} sessions thrash: {r}", c.sessions);
        }
    }
    assert_eq!(cap.thrash, Some(12), "{}", cap.line);
    assert_eq!(cap.predicted_fit, Some((4096.0 / ctx) as u64));
    assert!(
        cap.line.contains("12 thrash") && cap.line.contains("> pool 4k"),
        "{}",
        cap.line
    );
    // The simulator's own account: the thrash cell's turns found their history evicted.
    let evicted = server
        .truth()
        .iter()
        .filter(|t| t.pool_evicted_pages > 0)
        .count();
    assert!(evicted > 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn max_context_ends_a_session_and_says_why() {
    let server = sim(SIM).await;
    // Turn 1 ends near 600 tokens; a second turn needs 64 + markers + 16 more.
    let out = sessions(
        &server.url(),
        &with(&small("4"), &["--sessions", "1", "--max-context", "650"]),
    )
    .await;
    assert_eq!(out.turns.len(), 1, "{:?}", out.turns);
    assert_eq!(out.turns[0].end, Some(SessionEnd::MaxContext));
    assert_eq!(out.cells[0].ended.get("max_context"), Some(&1));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_error_ends_its_session_and_the_others_go_on() {
    // Faults are drawn from the simulator's seed in arrival order: with this seed the
    // prompt-length calibration (the first requests, sent one at a time) meets none.
    let faults = [
        "--fault-rate",
        "0.15",
        "--fault-kinds",
        "http500",
        "--seed",
        "1",
    ];
    let server = sim(&with(SIM, &faults)).await;
    let out = sessions(&server.url(), &with(&small("4"), &["--sessions", "6"])).await;
    let failed: Vec<_> = out.turns.iter().filter(|t| !t.ok).collect();
    assert!(
        !failed.is_empty(),
        "seeded faults at 15 % over 24 turns hit some"
    );
    for f in &failed {
        assert_eq!(f.end, Some(SessionEnd::Error));
        assert_eq!(f.error.as_ref().unwrap().kind, "http_5xx");
        // Nothing follows a failed turn in its session.
        assert!(
            !out.turns
                .iter()
                .any(|t| t.session == f.session && t.turn > f.turn)
        );
    }
    assert!(
        out.turns.iter().any(|t| t.ok && t.turn >= 2),
        "other sessions went on"
    );
    let c = &out.cells[0];
    assert_eq!(c.turns_failed as usize, failed.len());
    assert_eq!(c.ended.values().sum::<u64>(), 6, "{:?}", c.ended);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_input_is_refused_before_any_request() {
    let server = sim(SIM).await;
    for (flags, says) in [
        (&["--sessions", "0"][..], "--sessions"),
        (&["--turns", "0"][..], "--turns"),
        (&["--think-time", "-2s"][..], "negative"),
        (&["--max-context", "4k"][..], "--max-context"),
        (&["--first-tokens", "200k"][..], "context limit"),
        (
            &["--session-header", "bad header"][..],
            "not an HTTP header name",
        ),
    ] {
        let e = execute(common::sessions::args(&server.url(), flags))
            .await
            .unwrap_err();
        assert!(format!("{e:#}").contains(says), "{flags:?}: {e:#}");
    }
    assert!(server.truth().is_empty(), "nothing was generated");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resume_keeps_finished_cells_and_reruns_a_cut_one_and_report_reads_it() {
    let server = sim(SIM).await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("s.jsonl");
    let p = path.to_str().unwrap();
    let first = sessions(
        &server.url(),
        &with(&small("4"), &["--sessions", "1,2", "--out", p]),
    )
    .await;
    assert_eq!(first.turns.len(), 12);
    // Cut the file inside cell 2, as a crash would: its cell record and last turns gone.
    let text = std::fs::read_to_string(&path).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let cut = lines
        .iter()
        .position(|l| l.contains("\"sessions\":2,"))
        .unwrap()
        + 3;
    std::fs::write(&path, lines[..cut].join("\n") + "\n").unwrap();
    let second = sessions(
        &server.url(),
        &with(&small("4"), &["--sessions", "1,2", "--out", p, "--resume"]),
    )
    .await;
    assert_eq!(second.turns.len(), 8, "only cell 2 ran again");
    assert!(
        second
            .turns
            .iter()
            .all(|t| t.sessions == 2 && t.attempt == 1)
    );
    assert_eq!(second.cells.len(), 2);
    assert_eq!(second.cells[0], first.cells[0], "cell 1 kept as it was");
    let file = ctxbench::resultfile::read(&path).unwrap();
    assert_eq!(file.sessions.latest_cells().len(), 2);
    assert!(file.sessions.capacity.is_some());
    // report and compare read it back.
    let json = ctxbench::sessions::render::render(
        &ctxbench::sessions::render::View {
            plan: file.sessions.plan.as_ref(),
            cells: &file.sessions.latest_cells(),
            capacity: file.sessions.capacity.as_ref(),
        },
        ctxbench::choices::Format::Json,
    );
    let v: serde_json::Value = serde_json::from_str(&json).unwrap();
    assert_eq!(v["cells"][1]["attempt"], 1);
    let cmp = ctxbench::sessions::report::compare(
        &file.sessions,
        &file.sessions,
        ("a", "b"),
        ctxbench::choices::Format::Csv,
    );
    assert!(
        cmp.lines()
            .any(|l| l.starts_with("2,") && l.ends_with("1.00x")),
        "{cmp}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_needle_planted_in_the_first_message_is_asked_on_the_last_turn() {
    let server = sim(SIM).await;
    let out = sessions(
        &server.url(),
        &with(&small("4"), &["--sessions", "2", "--tasks", "niah"]),
    )
    .await;
    for t in &out.turns {
        // Asked (and graded) on the last turn only; the simulator answers from the prompt.
        assert_eq!(t.needle.is_some(), t.turn == 4, "{t:?}");
        if let Some(n) = &t.needle {
            assert!(n.ok, "{n:?}");
        }
    }
    let n = out.cells[0].needle.unwrap();
    assert_eq!((n.asked, n.ok), (2, 2));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_a_duration_finished_sessions_are_replaced_until_the_time_is_up() {
    let server = sim(SIM).await;
    // 2-turn sessions take a few ms each: 400 ms hold many, each ended by its turns or by
    // the time running out before its next turn.
    let out = sessions(
        &server.url(),
        &with(&small("2"), &["--sessions", "2", "--duration", "400ms"]),
    )
    .await;
    let c = &out.cells[0];
    assert!(c.sessions_started > 2, "{c:?}");
    assert_eq!(c.ended.values().sum::<u64>(), c.sessions_started);
    assert!(c.timeline.iter().all(|p| p.open_sessions <= 2));
}

/// `--session-header`: every chat request carries its session's id in the named header, one
/// id per session on all its turns, and the plan record names the header.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_turn_carries_its_sessions_id_in_the_header() {
    use std::collections::HashMap;
    use std::sync::{Arc, Mutex};
    let server = sim(SIM).await;
    let ids: Arc<Mutex<HashMap<String, u32>>> = Default::default();
    let seen = ids.clone();
    let proxy = common::proxy::Proxy::watching(
        &server.url(),
        Arc::new(move |_, path, headers| {
            if path == "/v1/chat/completions" {
                let id = headers
                    .get("x-session-id")
                    .map_or("(none)", |v| v.to_str().unwrap_or("(not text)"));
                *seen.lock().unwrap().entry(id.to_string()).or_default() += 1;
            }
        }),
    )
    .await;
    let out = sessions(
        &proxy.url,
        &with(
            &small("3"),
            &["--sessions", "3", "--session-header", "x-session-id"],
        ),
    )
    .await;
    assert_eq!(out.plan.session_header.as_deref(), Some("x-session-id"));
    assert!(out.turns.iter().all(|t| t.ok));
    let mut ids = ids.lock().unwrap().clone();
    // Requests before the sessions (the prompt-length calibration) are no session's.
    ids.remove("(none)");
    // Three sessions, three turns each: every turn carried its session's id.
    assert_eq!(ids.len(), 3, "{ids:?}");
    assert!(ids.values().all(|n| *n == 3), "{ids:?}");
    assert!(
        ids.keys().all(|k| k.starts_with('s') && k.contains("-c3-")),
        "{ids:?}"
    );
}
