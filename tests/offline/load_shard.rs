//! One load plan sharded over 3 client processes (`--shard i/3`, `--start-at`) against one
//! simulator on loopback, merged by `report`: the same requests and exactly the same
//! schedule as the plan run unsharded, percentiles within a derived tolerance, and a
//! missing or foreign shard named.

use crate::common;

use common::bin::{ctxbench, run_bounded, text};
use common::{load_args, sim, timing_lock};
use ctxbench::load_report::merge::merge;
use ctxbench::resultfile::{ResultFile, read};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// Cheap, fixed costs: 20 ms prefill, 2 ms per decode step, no context terms.
const COSTS: &[&str] = common::FIXED_COSTS;

/// A Poisson schedule of 24 arrivals at 10/s, 8 output tokens each (~36 ms of service).
const OPEN_PLAN: &[&str] = &[
    "--lengths",
    "1k",
    "--rate",
    "10",
    "--requests",
    "24",
    "--seed",
    "7",
    "--output-tokens",
    "8",
];

/// Both medians are the simulator's 20 ms prefill plus the client's and loopback's own
/// time, which a loaded 2-core machine holds under 5 ms (tests/offline/load_sim.rs), plus up to one
/// 2 ms decode step when an arrival lands mid-step of an overlapping request. Each shard
/// starts on `--start-at` by its own clock read against the same server's (±1 ms here), so
/// overlaps are the same as unsharded to within that. Two such medians differ by at most
/// 5 + 2 + 1 ms.
const TTFT_P50_TOL_S: f64 = 0.008;

/// Process start, connection, warm-up and prompt preparation of a debug build on a loaded
/// machine take a few seconds; the shards are told to start this far ahead.
const START_AHEAD: Duration = Duration::from_secs(8);

/// Run `n` shard processes of `plan` at once; returns their files.
fn run_shards(url: &str, plan: &[&str], n: u32, dir: &Path, extra: &[String]) -> Vec<PathBuf> {
    let handles: Vec<_> = (0..n)
        .map(|i| {
            let out = dir.join(format!("shard-{i}.jsonl"));
            let mut cmd = ctxbench();
            cmd.args(["load", "--url", url])
                .args(plan)
                .args(["--shard", &format!("{i}/{n}"), "--out"])
                .arg(&out)
                .args(extra)
                .env_remove("JOB_COMPLETION_INDEX")
                .env_remove("JOB_COMPLETIONS");
            std::thread::spawn(move || {
                let o = run_bounded(&mut cmd, Duration::from_secs(120));
                assert!(o.status.success(), "shard {i}: {}", text(&o.stderr));
                out
            })
        })
        .collect();
    handles.into_iter().map(|h| h.join().unwrap()).collect()
}

fn named(paths: &[PathBuf]) -> Vec<(String, ResultFile)> {
    paths
        .iter()
        .map(|p| (p.display().to_string(), read(p).unwrap()))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_shard_processes_merge_to_the_unsharded_plan() {
    let _t = timing_lock().await;
    let s = sim(COSTS).await;
    let url = s.url();
    let dir = tempfile::tempdir().unwrap();
    let whole_path = dir.path().join("whole.jsonl");
    let mut flags = OPEN_PLAN.to_vec();
    flags.extend(["--out", whole_path.to_str().unwrap()]);
    ctxbench::load::execute(load_args(&url, &flags))
        .await
        .expect("the unsharded plan runs");
    let whole = read(&whole_path).unwrap();

    let start_at = humantime::format_rfc3339_millis(SystemTime::now() + START_AHEAD).to_string();
    let extra = vec!["--start-at".to_string(), start_at.clone()];
    let (u, d) = (url.clone(), dir.path().to_path_buf());
    let paths = tokio::task::spawn_blocking(move || run_shards(&u, OPEN_PLAN, 3, &d, &extra))
        .await
        .unwrap();
    let files = named(&paths);

    // Every record of every shard says which shard of which plan it is.
    let hash = files[0]
        .1
        .load
        .plan
        .as_ref()
        .unwrap()
        .shard
        .unwrap()
        .plan_hash;
    for (i, (name, f)) in files.iter().enumerate() {
        let plan = f.load.plan.as_ref().unwrap();
        let tag = plan.shard.unwrap();
        assert_eq!((tag.shard, tag.shards, tag.plan_hash), (i as u32, 3, hash));
        let start = plan.start.as_ref().expect("--start-at is recorded");
        assert!(start.clock_offset_s.is_some(), "{name}: {start:?}");
        // Same machine, same clock: the offset is within its own uncertainty plus the
        // Date header's rounding (whole seconds, none here).
        let (o, e) = (
            start.clock_offset_s.unwrap(),
            start.clock_offset_uncertainty_s.unwrap(),
        );
        assert!(o.abs() <= e + 1e-3 && e < 0.05, "{name}: offset {o} ± {e}");
        assert!(f.load.requests.iter().all(|r| r.shard == Some(tag)));
        assert!(f.load.cells.iter().all(|c| c.shard == Some(tag)));
        assert!(f.load.server_metrics.iter().all(|m| m.shard == Some(tag)));
    }

    // The union of the shards' scheduled sends is the unsharded schedule, exactly.
    let schedule = |reqs: &mut dyn Iterator<Item = &ctxbench::record::load::RequestRecord>| {
        let mut v: Vec<(u64, u64)> = reqs.map(|r| (r.index, r.scheduled_s.to_bits())).collect();
        v.sort_unstable();
        v
    };
    let union = schedule(&mut files.iter().flat_map(|f| &f.1.load.requests));
    assert_eq!(union.len(), 24);
    assert_eq!(union, schedule(&mut whole.load.requests.iter()));
    // Every third arrival each.
    for (i, (_, f)) in files.iter().enumerate() {
        assert!(f.load.requests.iter().all(|r| r.index % 3 == i as u64));
    }

    let merged = merge(&files).expect("the three shards merge");
    assert_eq!(merged.plan, *whole.load.plan.as_ref().unwrap());
    let (m, w) = (&merged.cells[0], &whole.load.cells[0]);
    assert_eq!((m.sent, m.ok), (w.sent, w.ok));
    assert_eq!(m.sent, 24);
    assert!(m.notes.iter().any(|n| n == "merged from 3 shards"), "{m:?}");
    // The merged percentiles are those of the merged records, not of the shards' cells.
    let ttfts: Vec<f64> = files
        .iter()
        .flat_map(|f| &f.1.load.requests)
        .filter_map(|r| r.ttft_s)
        .collect();
    let direct = ctxbench::run::hist::LatencyHist::of(ttfts)
        .percentiles()
        .unwrap();
    assert_eq!(m.ttft_s.unwrap(), direct);
    let (mp, wp) = (m.ttft_s.unwrap().p50, w.ttft_s.unwrap().p50);
    assert!(
        (mp - wp).abs() <= TTFT_P50_TOL_S,
        "TTFT p50 merged {mp} vs unsharded {wp}"
    );

    // `report` merges on the command line and names a missing shard.
    let report = |paths: &[&PathBuf]| {
        let mut c = ctxbench();
        c.arg("report").args(paths);
        run_bounded(&mut c, Duration::from_secs(30))
    };
    let all = report(&[&paths[0], &paths[1], &paths[2]]);
    assert!(all.status.success(), "{}", text(&all.stderr));
    assert!(text(&all.stdout).contains("merged from 3 shards"));
    let two = report(&[&paths[0], &paths[1]]);
    assert!(!two.status.success());
    assert!(
        text(&two.stderr).contains("shard 2/3 missing"),
        "{}",
        text(&two.stderr)
    );
    let twice = report(&[&paths[0], &paths[0], &paths[2]]);
    assert!(text(&twice.stderr).contains("shard 0/3 given twice"));
    let mixed = report(&[&paths[0], &whole_path]);
    assert!(!mixed.status.success());
    assert!(text(&mixed.stderr).contains("not a shard"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closed_loop_shards_split_workers_and_requests_and_foreign_plans_are_refused() {
    let _t = timing_lock().await;
    let s = sim(COSTS).await;
    let dir = tempfile::tempdir().unwrap();
    let plan = |seed: &'static str| {
        vec![
            "--lengths",
            "1k",
            "--concurrency",
            "1,4",
            "--requests",
            "10",
            "--output-tokens",
            "4",
            "--seed",
            seed,
        ]
    };
    let mut paths = Vec::new();
    let mut results = Vec::new();
    for i in 0..3 {
        let p = dir.path().join(format!("closed-{i}.jsonl"));
        let shard = format!("{i}/3");
        let mut flags = plan("0");
        flags.extend(["--shard", &shard, "--out", p.to_str().unwrap()]);
        results.push(
            ctxbench::load::execute(load_args(&s.url(), &flags))
                .await
                .unwrap(),
        );
        paths.push(p);
    }
    // c=1: one worker, on shard 0; c=4: workers 2, 1, 1 with 3+3, 2 and 2 requests.
    let per = |r: &ctxbench::load::LoadResult| {
        r.cells
            .iter()
            .map(|c| (c.workers, c.sent))
            .collect::<Vec<_>>()
    };
    assert_eq!(per(&results[0]), vec![(Some(1), 10), (Some(2), 6)]);
    assert_eq!(per(&results[1]), vec![(Some(0), 0), (Some(1), 2)]);
    assert_eq!(per(&results[2]), vec![(Some(0), 0), (Some(1), 2)]);
    assert!(results[1].cells[0].notes[0].contains("shard 1/3 runs none"));
    assert_eq!(results[1].exit_code(), ctxbench::exit::OK);
    let merged = merge(&named(&paths)).unwrap();
    let sent: Vec<(Option<u32>, u64, u64)> = merged
        .cells
        .iter()
        .map(|c| (c.cell.concurrency, c.sent, c.ok))
        .collect();
    assert_eq!(sent, vec![(Some(1), 10, 10), (Some(4), 10, 10)]);
    assert!(
        merged.cells[0]
            .notes
            .iter()
            .any(|n| n.contains("2 had nothing"))
    );

    // A shard of another plan (another seed) is refused, by its hash.
    let other = dir.path().join("other.jsonl");
    let mut flags = plan("1");
    flags.extend(["--shard", "2/3", "--out", other.to_str().unwrap()]);
    ctxbench::load::execute(load_args(&s.url(), &flags))
        .await
        .unwrap();
    let e = merge(&named(&[paths[0].clone(), paths[1].clone(), other]))
        .err()
        .expect("a foreign shard is refused")
        .to_string();
    assert!(e.contains("a different plan"), "{e}");

    // Sharding a knee search is refused before anything runs.
    let knee = load_args(&s.url(), &["--find-knee", "--shard", "0/2"]);
    let e = ctxbench::load::execute(knee)
        .await
        .err()
        .unwrap()
        .to_string();
    assert!(e.contains("cannot be sharded"), "{e}");
}

/// With the trace costs (`common::FAST_PREFILL_COSTS`: 2 ms + 1M tok/s prefill, 1 ms per
/// decode step), a pool far larger than the trace: every shared block is still cached when
/// it is asked again.
const TRACE_POOL: &[&str] = &["--kv-pool-tokens", "1000000"];

/// 12 conversations 60 ms apart, 3 turns each 400 ms apart; every prompt opens with the
/// same 2-block system prompt, then 3 blocks of its conversation's own, one more per turn.
/// A conversation shares 2 of its first turn's 5 blocks with the others: each is a prefix
/// group of its own (12 groups, 4 per shard), and every first turn but the very first can
/// hit the system prompt that another shard's conversation sent before it. Input lengths are
/// distinct (the last block holds 100 + conversation × 3 + turn tokens).
fn write_shared_trace(path: &Path) -> usize {
    let mut lines = Vec::new();
    for c in 0..12u64 {
        for turn in 0..3u64 {
            let own = 3 + turn;
            let mut ids = vec![0u64, 1];
            ids.extend((0..own).map(|b| 1000 * (c + 1) + b));
            let input = (ids.len() as u64 - 1) * 512 + 100 + c * 3 + turn;
            lines.push((c * 60 + turn * 400, input, ids));
        }
    }
    lines.sort_by_key(|l| l.0);
    let text: String = lines
        .iter()
        .map(|(t, input, ids)| {
            format!(
                "{{\"timestamp\": {t}, \"input_length\": {input}, \"output_length\": 4, \"hash_ids\": {ids:?}}}\n"
            )
        })
        .collect();
    std::fs::write(path, text).unwrap();
    lines.len()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sharded_trace_keeps_groups_together_and_shares_blocks_across_shards() {
    let _t = timing_lock().await;
    let s = sim(&[common::FAST_PREFILL_COSTS, TRACE_POOL].concat()).await;
    let url = s.url();
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("trace.jsonl");
    let n = write_shared_trace(&trace);
    let start_at = humantime::format_rfc3339_millis(SystemTime::now() + START_AHEAD).to_string();
    let plan = [
        "--trace".to_string(),
        trace.display().to_string(),
        "--slo".into(),
        String::new(),
        "--start-at".into(),
        start_at,
    ];
    let (u, d) = (url.clone(), dir.path().to_path_buf());
    let paths = tokio::task::spawn_blocking(move || {
        let plan: Vec<&str> = plan.iter().map(String::as_str).collect();
        run_shards(&u, &plan, 3, &d, &[])
    })
    .await
    .unwrap();
    let files = named(&paths);
    for (i, (name, f)) in files.iter().enumerate() {
        assert_eq!(
            f.load.requests.len(),
            12,
            "{name}: 4 conversations of 3 turns"
        );
        for q in &f.load.requests {
            let group = q.trace.as_ref().unwrap().group;
            assert_eq!(
                group % 3,
                i as u64,
                "{name}: group {group} is shard {}'s",
                group % 3
            );
        }
    }
    let merged = merge(&files).expect("the three shards merge");
    let mut indices: Vec<u64> = merged.requests.iter().map(|q| q.index).collect();
    indices.sort_unstable();
    assert_eq!(
        indices,
        (0..n as u64).collect::<Vec<_>>(),
        "each request once"
    );
    let mut cross_shard = 0;
    for q in &merged.requests {
        let info = q.trace.as_ref().unwrap();
        assert!(q.ok, "line {}: {:?}", info.line, q.error);
        assert_eq!(q.prompt_tokens, Some(info.input_length), "token-exact");
        // Blocks equal across shards (one salt per run), each shared block still cached
        // and finished long before it is asked again: what was possible is what hit.
        assert_eq!(
            q.cached_tokens,
            Some(info.possible_cached_tokens),
            "line {}",
            info.line
        );
        if info.line > 1 && info.shared_blocks == 2 {
            assert_eq!(q.cached_tokens, Some(1024), "line {}", info.line);
            cross_shard += 1;
        }
    }
    assert_eq!(
        cross_shard, 11,
        "every first turn but the first hit the system prompt"
    );
    let h = ctxbench::load_report::trace_report::hits(&merged).unwrap();
    assert_eq!(h.exact as usize, n);
}
