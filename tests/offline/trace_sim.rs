//! `ctxbench load --trace` against the built-in simulator: a Mooncake-format trace the test
//! writes itself, every request's cached tokens against the simulator's truth, the possible
//! and observed hit ratios over time, eviction named when the pool is too small, and bad
//! traces refused by line with nothing sent.

use crate::common;

use common::{load_args, sim};
use ctxbench::load::LoadResult;
use ctxbench::sim::SimServer;
use std::io::Write;
use std::path::{Path, PathBuf};

/// Fast, fixed costs (2 ms + 1M tok/s prefill, 1 ms per decode step): a 6k-token request
/// takes ~12 ms, far under the 500 ms between two turns of one conversation.
const COSTS: &[&str] = common::FAST_PREFILL_COSTS;

/// The simulator at `COSTS` and `more`, and a fresh folder's trace and result paths.
async fn sim_and_paths(more: &[&str]) -> (SimServer, tempfile::TempDir, PathBuf, PathBuf) {
    let s = sim(&[COSTS, more].concat()).await;
    let dir = tempfile::tempdir().unwrap();
    let (trace, out) = (dir.path().join("t.jsonl"), dir.path().join("out.jsonl"));
    (s, dir, trace, out)
}

/// 200 requests 25 ms apart: 20 conversations in turn, each turn the previous prompt plus a
/// new block (its last block partial, so the next turn shares part of a block), every fifth
/// request a stranger sharing nothing. Input lengths are all distinct, which pairs each
/// request with its truth record.
fn write_trace(path: &Path) {
    let mut f = std::fs::File::create(path).unwrap();
    let mut turns = [0u64; 20];
    for i in 0..200u64 {
        let (ids, blocks): (Vec<u64>, u64) = if i % 5 == 4 {
            let n = 2 + i % 3;
            ((0..n).map(|b| 1_000_000 + i * 10 + b).collect(), n)
        } else {
            let g = i % 20;
            turns[g as usize] += 1;
            let n = 1 + turns[g as usize];
            ((0..n).map(|b| g * 1000 + b).collect(), n)
        };
        // Distinct per request: the last block holds 1 + i tokens.
        let input = (blocks - 1) * 512 + 1 + i;
        writeln!(
            f,
            r#"{{"timestamp": {}, "input_length": {input}, "output_length": 4, "hash_ids": {ids:?}}}"#,
            i * 25
        )
        .unwrap();
    }
}

async fn replay(url: &str, trace: &Path, out: &Path) -> LoadResult {
    ctxbench::load::execute(load_args(
        url,
        &[
            "--trace",
            trace.to_str().unwrap(),
            "--slo",
            "",
            "--out",
            out.to_str().unwrap(),
        ],
    ))
    .await
    .expect("the trace replays")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cached_tokens_match_the_simulators_truth_and_the_possible_hits() {
    let _t = common::timing_lock().await;
    let (s, _dir, trace, out) = sim_and_paths(&["--kv-pool-tokens", "1000000"]).await;
    write_trace(&trace);
    let r = replay(&s.url(), &trace, &out).await;
    assert_eq!(r.requests.len(), 200);
    assert!(r.requests.iter().all(|q| q.ok), "every request succeeded");
    // The warm-up (16 tokens) and 200 trace requests.
    let truth = common::truth_after(&s, 201).await;
    let trace_truth: Vec<_> = truth.iter().filter(|t| t.prompt_tokens > 16).collect();
    assert_eq!(trace_truth.len(), 200);
    let mut hits = 0;
    for q in &r.requests {
        let info = q.trace.as_ref().expect("trace info on every request");
        let t = trace_truth
            .iter()
            .find(|t| t.prompt_tokens == info.input_length)
            .unwrap_or_else(|| panic!("no truth for line {}", info.line));
        assert_eq!(
            q.prompt_tokens,
            Some(info.input_length),
            "token-exact prompt"
        );
        assert_eq!(q.cached_tokens, Some(t.cached_tokens), "line {}", info.line);
        assert_eq!(t.cached_pages * 16, t.cached_tokens, "whole pages");
        // Each turn follows its predecessor by 500 ms, far after its prefill: the cache
        // holds what the trace shares, so truth equals the possible hits exactly.
        assert_eq!(
            t.cached_tokens, info.possible_cached_tokens,
            "line {}: the simulator held what the trace shares",
            info.line
        );
        hits += u64::from(t.cached_tokens > 0);
    }
    // 200 requests less 40 strangers and the 16 conversations' first turns.
    assert_eq!(hits, 144, "every later turn hit");
    let h = ctxbench::load_report::trace_report::hits(&r).unwrap();
    // The issue's bound; the equality above makes every bin's gap 0.
    for b in &h.bins {
        let obs = b
            .observed_ratio
            .expect("the simulator reports cached tokens");
        assert!((obs - b.possible_ratio).abs() <= 0.01, "{b:?}");
    }
    assert!(h.possible_ratio > 0.5, "{h:?}");
    assert_eq!(h.exact, 200);
    assert!(h.notes.is_empty(), "{:?}", h.notes);
    // The report rebuilds the same from the file.
    let file = ctxbench::resultfile::read(&out).unwrap();
    assert_eq!(file.load.requests.len(), 200);
    let merged = ctxbench::load_report::merge::merge(&[("out".into(), file)]).unwrap();
    assert_eq!(
        ctxbench::load_report::trace_report::hits(&merged).unwrap(),
        h
    );
    let text = ctxbench::load_report::trace_report::text(&merged);
    assert!(text.contains("prefix hits: possible"), "{text}");
    let html = ctxbench::load_report::render::html(&merged);
    assert!(html.contains("chart-trace-hits") && html.contains("chart-trace-ttft"));
    let json: serde_json::Value = serde_json::from_str(
        &ctxbench::load_report::render::render_result(&merged, ctxbench::cli::Format::Json),
    )
    .unwrap();
    assert_eq!(json["trace"]["exact"], 200);
    assert_eq!(json["plan"]["trace"]["requests"], 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn corpus_blocks_share_exactly_and_text_only_servers_are_refused() {
    let _t = common::timing_lock().await;
    let (s, _dir, trace, out) = sim_and_paths(&["--kv-pool-tokens", "1000000"]).await;
    write_trace(&trace);
    let r = ctxbench::load::execute(load_args(
        &s.url(),
        &[
            "--trace",
            trace.to_str().unwrap(),
            "--trace-limit",
            "60",
            "--corpus",
            "builtin:prose",
            "--slo",
            "",
            "--out",
            out.to_str().unwrap(),
        ],
    ))
    .await
    .expect("the trace replays on corpus blocks");
    assert_eq!(r.requests.len(), 60);
    assert!(
        r.plan
            .trace
            .as_ref()
            .unwrap()
            .content
            .contains("builtin:prose")
    );
    for q in &r.requests {
        let info = q.trace.as_ref().unwrap();
        assert_eq!(q.prompt_tokens, Some(info.input_length));
        assert_eq!(
            q.cached_tokens,
            Some(info.possible_cached_tokens),
            "line {}",
            info.line
        );
    }
    // 60 requests: 12 strangers, 16 first turns, 32 later turns that hit.
    let hits = r
        .requests
        .iter()
        .filter(|q| q.cached_tokens > Some(0))
        .count();
    assert_eq!(hits, 32);

    let text_only = sim(&["--persona", "tgi"]).await;
    let e = ctxbench::load::execute(load_args(
        &text_only.url(),
        &["--trace", trace.to_str().unwrap()],
    ))
    .await
    .err()
    .expect("a text-only API is refused");
    assert!(e.to_string().contains("token ids"), "{e}");
    assert!(text_only.truth().is_empty(), "nothing was generated");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pool_smaller_than_the_working_set_is_named_as_eviction() {
    let _t = common::timing_lock().await;
    // 16 blocks of 512: the conversations' working set is ~10 times that.
    let (s, _dir, trace, out) =
        sim_and_paths(&["--kv-pool-tokens", "8192", "--context-length", "8192"]).await;
    write_trace(&trace);
    let r = replay(&s.url(), &trace, &out).await;
    let truth = common::truth_after(&s, 201).await;
    assert!(
        truth.iter().any(|t| t.pool_evicted_pages > 0),
        "the simulator evicted cached pages"
    );
    let h = ctxbench::load_report::trace_report::hits(&r).unwrap();
    let obs = h.observed_ratio.unwrap();
    assert!(
        obs < 0.8 * h.possible_ratio,
        "{obs} vs {}",
        h.possible_ratio
    );
    let text = ctxbench::load_report::trace_report::text(&r);
    assert!(text.contains("eviction"), "{text}");
    assert!(
        text.contains("exceeds the server's KV pool (8192 tokens)"),
        "{text}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_traces_are_refused_by_line_with_nothing_sent() {
    let s = sim(COSTS).await;
    let dir = tempfile::tempdir().unwrap();
    let good = r#"{"timestamp": 0, "input_length": 600, "output_length": 2, "hash_ids": [1, 2]}"#;
    let cases = [
        (
            format!("{good}\n{}", r#"{"timestamp": 1, "input_length": 600, "output_length": 2}"#),
            "line 2: no `hash_ids`",
        ),
        (
            format!("{good}\n{}", r#"{"timestamp": 1, "input_length": 1100, "output_length": 2, "hash_ids": [1, 2]}"#),
            "line 2: input_length 1100 is 3 block(s)",
        ),
        (
            format!("{good}\n\n{}", r#"{"timestamp": 0.5, "input_length": 600, "output_length": 2, "hash_ids": [1, 2]}"#.replace("0.5", "-1")),
            "line 3: no `timestamp`",
        ),
        (
            r#"{"timestamp": 5, "input_length": 600, "output_length": 2, "hash_ids": [1, 2]}
{"timestamp": 4, "input_length": 600, "output_length": 2, "hash_ids": [1, 2]}"#
                .to_string(),
            "line 2: timestamp 4 goes backwards",
        ),
        (String::new(), "no request (an empty file)"),
    ];
    for (i, (text, want)) in cases.iter().enumerate() {
        let path = dir.path().join(format!("bad{i}.jsonl"));
        std::fs::write(&path, text).unwrap();
        let out = dir.path().join(format!("out{i}.jsonl"));
        let e = ctxbench::load::execute(load_args(
            &s.url(),
            &[
                "--trace",
                path.to_str().unwrap(),
                "--out",
                out.to_str().unwrap(),
            ],
        ))
        .await
        .err()
        .unwrap_or_else(|| panic!("case {i} was accepted"));
        assert!(e.to_string().contains(want), "case {i}: {e}");
        assert!(!out.exists(), "case {i}: nothing written");
    }
    // Flags that cannot work are refused before anything is sent too.
    let path = dir.path().join("ok.jsonl");
    std::fs::write(&path, good).unwrap();
    let p = path.to_str().unwrap();
    for (flags, want) in [
        (vec!["--time-scale", "0"], "--time-scale"),
        (vec!["--trace-window", "1m.."], "no request is left"),
        (vec!["--trace-window", "5s"], "--trace-window"),
        (vec!["--trace-limit", "0"], "--trace-limit"),
        (vec!["--block-tokens", "0"], "--block-tokens"),
    ] {
        let mut argv = vec!["--trace", p];
        argv.extend(flags);
        let e = ctxbench::load::execute(load_args(&s.url(), &argv))
            .await
            .err()
            .unwrap_or_else(|| panic!("{argv:?} was accepted"));
        assert!(e.to_string().contains(want), "{argv:?}: {e}");
    }
    assert!(
        <ctxbench::cli::Cli as clap::Parser>::try_parse_from([
            "ctxbench", "load", "--trace", p, "--rate", "1"
        ])
        .is_err(),
        "--trace replaces --rate"
    );
    assert!(s.truth().is_empty(), "nothing was sent");
}

/// `ctxbench trace synth` makes a trace that replays as it says: every line a request of
/// exactly its input length, and the later turns of each conversation hit their history.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_synthesised_trace_replays_token_exact_with_its_turns_hitting() {
    let _t = common::timing_lock().await;
    let (s, _dir, trace, out) = sim_and_paths(&["--kv-pool-tokens", "1000000"]).await;
    let synth = common::bin::run_ok(&[
        "trace",
        "synth",
        "--conversations",
        "6",
        "--turns",
        "2..3",
        "--system-tokens",
        "512",
        "--doc-tokens",
        "1k..2k",
        "--user-tokens",
        "32..64",
        "--output-tokens",
        "4",
        "--think-time",
        "300ms",
        "--rate",
        "5",
        "--out",
        trace.to_str().unwrap(),
    ]);
    let summary = common::bin::text(&synth.stderr);
    assert!(
        summary.contains("an unbounded prefix cache could serve"),
        "{summary}"
    );
    let lines = std::fs::read_to_string(&trace).unwrap().lines().count();
    assert!(
        (12..=18).contains(&lines),
        "6 conversations of 2-3 turns: {lines}"
    );
    let r = replay(&s.url(), &trace, &out).await;
    assert_eq!(r.requests.len(), lines);
    let mut later_turn_hits = 0;
    for q in &r.requests {
        let info = q.trace.as_ref().unwrap();
        assert!(q.ok, "line {}: {:?}", info.line, q.error);
        assert_eq!(
            q.prompt_tokens,
            Some(info.input_length),
            "line {}",
            info.line
        );
        // A later turn resends its whole history, sent 300 ms before.
        if info.shared_tokens >= 512 + 1024 {
            assert!(q.cached_tokens.unwrap() >= 512 + 1024, "line {}", info.line);
            later_turn_hits += 1;
        }
    }
    assert!(later_turn_hits >= lines - 6, "{later_turn_hits} of {lines}");
}

/// The three agent-trace samples (tests/fixtures/traces, written from each format's published
/// field list; docs/traces.md names the lists): every later turn is sent no sooner than its
/// session's previous turn ended plus its delay, and, its predecessor finished, the
/// simulator serves exactly the prefix the trace says it could.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_traces_send_each_turn_after_its_predecessor_and_hit_its_prefix() {
    use ctxbench::trace::format::{self, TraceFormat};
    let _t = common::timing_lock().await;
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/traces");
    for (file, fmt, format_flag, block) in [
        ("dynamo.jsonl", TraceFormat::Dynamo, "dynamo", 512),
        (
            "claude-code.jsonl",
            TraceFormat::ClaudeCode,
            "claude-code",
            64,
        ),
        (
            "azure-agent.jsonl",
            TraceFormat::AzureAgent,
            "azure-agent",
            512,
        ),
    ] {
        let (s, dir, _, out) = sim_and_paths(&["--kv-pool-tokens", "1000000"]).await;
        let trace = fixtures.join(file);
        let requests = format::read(&trace, fmt, block).unwrap();
        let links = ctxbench::trace::agent::links(&requests);
        let block = block.to_string();
        let r = ctxbench::load::execute(load_args(
            &s.url(),
            &[
                "--trace",
                trace.to_str().unwrap(),
                "--trace-format",
                format_flag,
                "--block-tokens",
                &block,
                "--slo",
                "",
                "--out",
                out.to_str().unwrap(),
            ],
        ))
        .await
        .unwrap_or_else(|e| panic!("{file} replays: {e:#}"));
        assert_eq!(r.requests.len(), requests.len(), "{file}");
        assert!(
            r.requests.iter().all(|q| q.ok),
            "{file}: every request succeeded"
        );
        let by_index = |i: usize| r.requests.iter().find(|q| q.index == i as u64).unwrap();
        let mut later = 0;
        for (i, link) in links.iter().enumerate() {
            let q = by_index(i);
            let info = q.trace.as_ref().unwrap();
            let session = requests[i].session.as_ref().unwrap();
            assert_eq!(
                info.session_id.as_deref(),
                Some(session.id.as_str()),
                "{file}"
            );
            assert_eq!(info.turn, Some(session.turn), "{file}");
            let Some((j, delay_ms)) = *link else { continue };
            let ended = by_index(j).ended_s.unwrap();
            // Both times come from one clock, the wait is a sleep of at least the delay;
            // 1e-6 s is the records' rounding.
            assert!(
                q.sent_s + 1e-6 >= ended + delay_ms / 1e3,
                "{file} line {}: sent {:.4} s, its predecessor ended {ended:.4} s, delay {delay_ms} ms",
                info.line,
                q.sent_s
            );
            assert_eq!(
                q.cached_tokens,
                Some(info.possible_cached_tokens),
                "{file} line {} turn {:?}: the predecessor's prompt was cached",
                info.line,
                info.turn
            );
            // A subagent's first call shares nothing with the call it follows.
            later += u64::from(info.possible_cached_tokens > 0);
        }
        assert!(
            later >= 3,
            "{file}: {later} later turns shared their prefix"
        );
        drop(dir);
    }
}
