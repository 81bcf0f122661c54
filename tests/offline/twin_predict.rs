//! `twin predict` and `twin whatif` in virtual time (no server, no sleeping): a trace's
//! shared prefixes hit the engine's cache; the written file reads back as a load file;
//! the knee search runs on predicted cells; and the story's question — max-running 64 vs 8
//! at long context on a 218k-token pool — gets its answer.

use clap::Parser;
use ctxbench::cli::{Cli, Command, LoadArgs};
use ctxbench::sim::CostModel;
use ctxbench::sim::scheduler::EngineConfig;
use ctxbench::sim::stepcost::StepCost;
use ctxbench::twin::profile_of;
use ctxbench::twin::{Figure, leans_on_schedule, schedule_warnings};
use ctxbench::twin::{Twin, execute};

fn engine(max_running: usize, pool_tokens: u64) -> EngineConfig {
    EngineConfig {
        cost: StepCost {
            model: CostModel {
                t0: 0.025,
                p0: 40_000.0,
                q: 1.0e-10,
                d0: 0.008,
                d1: 2.0e-8,
            },
            overhead: 0.001,
            d2: 0.001,
            interference: 0.0,
            spec_draft: Default::default(),
        },
        max_batch_tokens: 2048,
        budget: ctxbench::sim::TokenBudget::Prefill,
        max_running,
        spec: 1,
        new_token_ratio: 1.0,
        page_tokens: 16,
        pool_tokens,
        cache: true,
    }
}

fn load_args(argv: &[&str]) -> LoadArgs {
    let mut full = vec!["ctxbench", "load"];
    full.extend_from_slice(argv);
    let Command::Load(a) = Cli::try_parse_from(full).expect("load flags parse").command else {
        unreachable!()
    };
    *a
}

/// A conversation's second turn resends the first turn's prompt (3 whole blocks) and
/// adds one; the engine's cache serves the shared blocks, and the file `--out` writes reads
/// back as a load file with the same cell.
#[test]
fn a_trace_hits_the_engines_cache_and_its_file_reads_as_a_load_file() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("t.jsonl");
    std::fs::write(
        &trace,
        "{\"timestamp\":0,\"input_length\":1536,\"output_length\":8,\"hash_ids\":[1,2,3]}\n\
         {\"timestamp\":2000,\"input_length\":2000,\"output_length\":8,\"hash_ids\":[1,2,3,4]}\n\
         {\"timestamp\":2500,\"input_length\":700,\"output_length\":8,\"hash_ids\":[9,10]}\n",
    )
    .unwrap();
    let out = dir.path().join("pred.jsonl");
    let twin = Twin::new(profile_of(&engine(8, 200_000), 32_768), "p.json".into());
    let args = load_args(&[
        "--trace",
        &trace.display().to_string(),
        "--out",
        &out.display().to_string(),
    ]);
    let r = execute(&twin, &args).unwrap();
    let mut reqs = r.requests.clone();
    reqs.sort_by_key(|q| q.index);
    assert_eq!(reqs.len(), 3);
    // The first turn finished long before the second arrived: all 3 blocks are cached.
    assert_eq!(reqs[0].cached_tokens, Some(0));
    assert_eq!(reqs[1].cached_tokens, Some(1536));
    assert_eq!(reqs[2].cached_tokens, Some(0));
    let info = reqs[1].trace.as_ref().unwrap();
    assert_eq!(info.possible_cached_tokens, 1536);
    assert_eq!(reqs[1].scheduled_s, 2.0);
    // It arrives at an idle engine and prefills the 464 uncached tokens only, in one step.
    let c = engine(8, 200_000).cost;
    let ttft = c.overhead + c.model.t0 + c.chunk_s(1536, 2000);
    assert!(
        (reqs[1].ttft_s.unwrap() - ttft).abs() < 1e-9,
        "{:?} vs {ttft}",
        reqs[1]
    );
    ctxbench::twin::write_prediction(&twin, &r, &out).unwrap();
    let f = ctxbench::resultfile::read(&out).unwrap();
    let back = ctxbench::load_report::merge::merge(&[("pred".into(), f)]).unwrap();
    assert_eq!(back.cells.len(), 1);
    assert_eq!(back.cells[0].ttft_s, r.cells[0].ttft_s);
    let text = std::fs::read_to_string(&out).unwrap();
    let run: serde_json::Value = serde_json::from_str(text.lines().next().unwrap()).unwrap();
    assert_eq!(run["config"]["predicted"], true);
    assert_eq!(run["config"]["profile"], "p.json");
}

/// Load's knee search over predicted cells: 16 workers behind 4 running slots wait rounds
/// for a slot and miss a 1 s TTFT, one alone meets it; the knee is the last passing probe,
/// the first miss one more, each as its predicted cell says.
#[test]
fn the_knee_search_runs_on_predicted_cells() {
    let twin = Twin::new(profile_of(&engine(4, 200_000), 32_768), "p.json".into());
    let args = load_args(&[
        "--lengths",
        "4096",
        "--find-knee",
        "--knee-max",
        "16",
        "--requests",
        "32",
        "--output-tokens",
        "32",
        "--slo",
        "ttft=1s,tpot=100ms",
    ]);
    let r = execute(&twin, &args).unwrap();
    assert_eq!(r.knees.len(), 1);
    let k = &r.knees[0];
    let knee = k.knee.expect("one request alone meets a 1 s TTFT");
    assert_eq!(k.first_miss, Some(knee + 1.0), "{k:?}");
    assert_eq!(r.cells.len(), k.probes.len());
    let meets = |c: f64| {
        r.cells
            .iter()
            .find(|x| x.cell.concurrency == Some(c as u32))
            .map(|x| x.meets_target)
    };
    assert_eq!(meets(knee), Some(true));
    assert_eq!(meets(knee + 1.0), Some(false));
}

fn story(max_running: &str, pool: &str) -> Vec<ctxbench::twin::WhatifOutcome> {
    // Calibrated at up to 4 running and 16k tokens.
    let mut profile = profile_of(&engine(8, 218_000), 65_536);
    profile.envelope.max_concurrency = 4;
    profile.envelope.max_context_tokens = 16_384;
    let twin = Twin::new(profile, "p.json".into());
    let args = load_args(&[
        "--lengths",
        "32k",
        "--concurrency",
        "4,8",
        "--requests",
        "8",
        "--output-tokens",
        "16",
        "--slo",
        "ttft=30s,tpot=200ms",
    ]);
    let vary = [format!("max-running={max_running}"), format!("pool={pool}")];
    ctxbench::twin::whatif(&twin, &args, &vary).unwrap()
}

/// The story: 32k-token requests on a 218k-token pool. Six fit (218k / (32k + 16)): with
/// 8 workers, max-running 64 runs no more than max-running 8 does, so every figure is the
/// same; a pool twice as large lets all 8 run. Each configuration warns that its contexts
/// and batches leave what was calibrated.
#[test]
fn max_running_64_vs_8_at_long_context_on_a_218k_pool() {
    let o = story("8,64", "218000");
    assert_eq!(o.len(), 2);
    let (a, b) = (&o[0].result, &o[1].result);
    for (ca, cb) in a.cells.iter().zip(&b.cells) {
        assert_eq!(ca.ttft_s, cb.ttft_s, "{:?}", ca.cell);
        assert_eq!(ca.tpot_s, cb.tpot_s, "{:?}", ca.cell);
        let running = ca.server.as_ref().and_then(|s| s.running_max).unwrap();
        assert!(running <= 6.0, "the pool holds 6: {running}");
    }
    for x in &o {
        let w = x.warnings.join("\n");
        assert!(w.contains("longer than any calibrated"), "{w}");
        assert!(w.contains("more than any calibrated"), "{w}");
    }
    let text = ctxbench::twin::render_whatif(&o);
    assert!(text.contains("max-running=8 pool=218000"), "{text}");
    assert!(text.contains("best: "), "{text}");

    let big = story("64", "436000");
    let c8 = big[0]
        .result
        .cells
        .iter()
        .find(|c| c.cell.concurrency == Some(8));
    let running = c8.and_then(|c| c.server.as_ref()?.running_max).unwrap();
    assert_eq!(running, 8.0, "a pool twice as large runs all 8");
    assert!(
        big[0]
            .warnings
            .iter()
            .any(|w| w.contains("larger than the measured"))
    );
}

/// `twin whatif --out`: every configuration's predicted cells in one file, each tagged
/// with its configuration and carrying its band; the file reads back as a load file.
#[test]
fn whatif_writes_every_configuration_tagged_into_one_file() {
    let o = story("2,8", "218000");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("whatif.jsonl");
    let twin = Twin::new(profile_of(&engine(8, 218_000), 65_536), "p.json".into());
    ctxbench::twin::write_whatif(&twin, &o, &path).unwrap();
    let file = ctxbench::resultfile::read(&path).expect("reads as a result file");
    let cells = &file.load.cells;
    assert_eq!(cells.len(), 4, "two configurations × two cells");
    let tag = |c: &ctxbench::record::load::CellRecord, k: &str| {
        c.config.as_ref().and_then(|m| m.get(k)).copied()
    };
    assert_eq!(
        cells
            .iter()
            .filter(|c| tag(c, "max_running") == Some(2.0))
            .count(),
        2
    );
    assert_eq!(
        cells
            .iter()
            .filter(|c| tag(c, "max_running") == Some(8.0))
            .count(),
        2
    );
    assert!(cells.iter().all(|c| tag(c, "pool") == Some(218_000.0)));
    assert!(cells.iter().all(|c| c.band.is_some()), "{cells:?}");
    // The tags say which is which: max-running 2 never runs more than two at once.
    let running = |m: f64| {
        cells
            .iter()
            .filter(|c| tag(c, "max_running") == Some(m))
            .filter_map(|c| c.server.as_ref()?.running_max)
            .fold(0.0, f64::max)
    };
    assert_eq!(running(2.0), 2.0);
    assert!(running(8.0) > 2.0, "{}", running(8.0));

    // `compare` sets one configuration against a file: it refuses the mixed file whole,
    // and with `--config` reads that configuration's cells alone.
    let compare = |extra: &[&str]| {
        std::process::Command::new(env!("CARGO_BIN_EXE_ctxbench"))
            .arg("compare")
            .args([&path, &path])
            .args(extra)
            .output()
            .unwrap()
    };
    let mixed = compare(&[]);
    let err = String::from_utf8_lossy(&mixed.stderr);
    assert!(!mixed.status.success());
    assert!(
        err.contains("several configurations") && err.contains("max-running=2"),
        "{err}"
    );
    let two = compare(&["--config", "max-running=2"]);
    let out = String::from_utf8_lossy(&two.stdout);
    assert!(
        two.status.success(),
        "{}",
        String::from_utf8_lossy(&two.stderr)
    );
    // Its figures, as predicted: B/A of a file against itself is 1.00 throughout.
    assert!(out.contains("32k") && out.contains("1.00"), "{out}");
    assert!(!out.contains(" - "), "every figure present: {out}");
    let none = compare(&["--config", "max-running=3"]);
    let err = String::from_utf8_lossy(&none.stderr);
    assert!(err.contains("no cells of --config max-running=3"), "{err}");
}

/// A twin of llama-server `-np 2` on one CPU thread (1k prompt ≈ 150 ms, 0.7 ms decode
/// step), whose profile states an uncertainty (none of its own: no replicates, no spread),
/// so the bands look over the jittered schedules alone.
fn two_slots() -> Twin {
    let cfg = EngineConfig {
        cost: StepCost {
            model: CostModel {
                t0: 0.005,
                p0: 7_000.0,
                q: 0.0,
                d0: 0.0003,
                d1: 4.0e-7,
            },
            overhead: 0.0,
            d2: 0.00035,
            interference: 0.05,
            spec_draft: Default::default(),
        },
        max_batch_tokens: 2048,
        budget: ctxbench::sim::TokenBudget::All,
        max_running: 2,
        spec: 1,
        new_token_ratio: 1.0,
        page_tokens: 1,
        pool_tokens: 16_384,
        cache: false,
    };
    let mut p = profile_of(&cfg, 8192);
    let spread = ctxbench::twin::profile::Spread {
        ttft_p50: 0.0,
        ttft_p99: 0.0,
        tpot_p50: 0.0,
        output_tps: 0.0,
        goodput_rps: 0.0,
        source: "none".into(),
    };
    p.uncertainty = Some(ctxbench::twin::profile::Uncertainty {
        replicates: Vec::new(),
        spread,
        run: None,
    });
    Twin::new(p, "two-slots".into())
}

/// Issue 35 §1, bands that cover: llama-server relaunched with 2 slots for 4 clients
/// decoded its pairs in lockstep in two runs (TPOT p50 1.9 and 2.1 ms) and staggered behind
/// each other's prefill in the third (6.2 ms), and the twin's one schedule predicted 6.4 ms
/// inside a band of [4.9, 8.4] ms. Its schedule starts an idle engine on the first arrival
/// alone; a real engine woken by one request takes those that reached it meanwhile. The
/// band now looks over jittered schedules too, and spans both paths.
#[test]
fn a_band_spans_the_schedules_a_cell_can_take() {
    let flags = "--lengths 1k --concurrency 4 --requests 8 --output-tokens 32";
    let args = load_args(&flags.split(' ').collect::<Vec<_>>());
    let twin = two_slots();
    let tpot = |schedule: Option<u64>| {
        let mut t = twin.clone();
        t.schedule = schedule;
        let r = execute(&t, &args).unwrap();
        r.cells[0].tpot_s.as_ref().unwrap().p50
    };
    // The twin's own schedule staggers the pairs: each decode waits out the other's
    // prefill once (≈ 150 ms over 31 gaps); jittered, most pairs run in lockstep.
    let own = tpot(None);
    let lockstep = (1..=8).map(|s| tpot(Some(s))).fold(f64::INFINITY, f64::min);
    assert!(own > 0.006 && lockstep < 0.0025, "{own} {lockstep}");
    let mut r = execute(&twin, &args).unwrap();
    let moves = ctxbench::twin::bands(&twin, &mut r, &[], |t| execute(t, &args)).unwrap();
    let band = r.cells[0].band.as_ref().unwrap();
    let [lo, hi] = band.tpot_s.as_ref().unwrap().p50;
    assert!(
        lo <= lockstep && own <= hi,
        "[{lo}, {hi}] against {lockstep} and {own}"
    );
    // The point cannot say which path a run takes: the TPOT leans on the schedule, and
    // the prediction warns so (`twin check` then holds it to its band, not its bound).
    let key = r.cells[0].cell;
    let moved = moves.of(&key, ctxbench::twin::Figure::TpotP50);
    assert!(
        moved >= 1.0 - lockstep / own - 1e-9 && moved > 0.5,
        "{moved} against {lockstep} / {own}"
    );
    assert!(leans_on_schedule(&moves, &key, Figure::TpotP50));
    let warnings = schedule_warnings(&moves);
    assert!(
        warnings.len() == 1 && warnings[0].contains("TPOT p50 by") && warnings[0].contains("c=4"),
        "{warnings:?}"
    );
    // A profile that states the engine exactly looks over no other schedule: its band (the
    // predicted requests' own luck alone) misses the lockstep path.
    let mut exact = twin.clone();
    exact.profile.uncertainty = None;
    let mut r = execute(&exact, &args).unwrap();
    let moves = ctxbench::twin::bands(&exact, &mut r, &[], |t| execute(t, &args)).unwrap();
    assert!(schedule_warnings(&moves).is_empty());
    let [lo, _] = r.cells[0]
        .band
        .as_ref()
        .unwrap()
        .tpot_s
        .as_ref()
        .unwrap()
        .p50;
    assert!(lo > 2.0 * lockstep, "{lo} against {lockstep}");
}

/// A 1,000-session agent trace (Dynamo's form, 3 turns each) predicted in virtual time:
/// each later turn arrives its delay after its predecessor's last token, never at a clock
/// time, and, the pool holding everything, the engine's cache serves exactly the prefix the
/// trace made possible.
#[test]
fn a_thousand_session_agent_trace_waits_turn_on_turn_in_virtual_time() {
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("agents.jsonl");
    let mut text = String::new();
    for s in 0..1000u64 {
        // Block 0 is a system prompt every session shares; then the session's own blocks.
        let ids = |n: u64| {
            let mut v = vec![0];
            v.extend((1..n).map(|b| 10 + s * 10 + b));
            format!("{v:?}")
        };
        text += &format!(
            "{{\"session_id\":\"s{s}\",\"timestamp\":{},\"input_length\":1536,\"output_length\":16,\"hash_ids\":{}}}\n",
            s * 100,
            ids(3)
        );
        for (turn, delay) in [(4, 500), (5, 250)] {
            text += &format!(
                "{{\"session_id\":\"s{s}\",\"delay\":{delay},\"input_length\":{},\"output_length\":16,\"hash_ids\":{}}}\n",
                turn * 512,
                ids(turn)
            );
        }
    }
    std::fs::write(&trace, text).unwrap();
    let twin = Twin::new(profile_of(&engine(64, 5_000_000), 32_768), "p.json".into());
    let args = load_args(&[
        "--trace",
        &trace.display().to_string(),
        "--trace-format",
        "dynamo",
    ]);
    let r = execute(&twin, &args).unwrap();
    assert_eq!(r.requests.len(), 3000);
    let mut by_turn: std::collections::HashMap<
        (String, u32),
        &ctxbench::record::load::RequestRecord,
    > = Default::default();
    for q in &r.requests {
        assert!(q.ok, "{q:?}");
        let t = q.trace.as_ref().unwrap();
        by_turn.insert((t.session_id.clone().unwrap(), t.turn.unwrap()), q);
    }
    assert_eq!(by_turn.len(), 3000, "every (session, turn) once");
    for ((session, turn), q) in &by_turn {
        if *turn == 1 {
            continue;
        }
        let before = by_turn[&(session.clone(), turn - 1)];
        let delay = if *turn == 2 { 0.5 } else { 0.25 };
        // Virtual time: exactly the delay (and the client's µs gap) after its last token,
        // to the records' µs rounding.
        let due = before.ended_s.unwrap() + delay;
        assert!(
            (q.sent_s - due).abs() < 1e-5,
            "{session} turn {turn}: sent {} s, due {due} s",
            q.sent_s
        );
        let t = q.trace.as_ref().unwrap();
        assert_eq!(
            q.cached_tokens,
            Some(t.possible_cached_tokens),
            "{session} turn {turn}"
        );
        assert_eq!(
            t.possible_cached_tokens,
            (*turn as u64 + 1) * 512,
            "the whole turn before"
        );
    }
}
