//! `ctxbench load` against the built-in simulator over real loopback HTTP: accounting,
//! TTFT and decode against the simulator's per-request truth, and open-loop coordinated
//! omission with a concurrency cap.

use crate::common;

use common::{load_args, rel, sim, timing_lock};
use ctxbench::load::{LoadResult, execute};
use ctxbench::record::Record;

async fn load(url: &str, flags: &[&str]) -> LoadResult {
    execute(load_args(url, flags)).await.expect("load runs")
}

/// Cheap, fixed costs: 20 ms prefill, 2 ms per decode step, no context terms.
const COSTS: &[&str] = common::FIXED_COSTS;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Client TTFT − server prefill at concurrency 1: loopback round trip, HTTP and JSON on both
/// sides, the simulator engine thread's wake-up lateness, and scheduling delay
/// on a loaded 2-core machine. 5 ms is several times what it measures idle (~1.5 ms).
const TTFT_OVER_TRUTH_MAX_S: f64 = 0.005;
/// Client TPOT against the server's own (its truth log, first token to last): the two differ
/// by the last event's delivery delay minus the first's, over 15 steps, plus event-parsing
/// jitter; medians over a cell's requests keep the relative error well under 25 % even
/// loaded.
const TPOT_REL_TOL: f64 = 0.25;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_request_is_accounted_for_in_summary_and_file() {
    let _t = timing_lock().await;
    let mut flags = COSTS.to_vec();
    flags.extend(["--fault-rate", "0.3", "--fault-kinds", "http500,reset"]);
    let s = sim(&flags).await;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("load.jsonl");
    let r = load(
        &s.url(),
        &[
            "--lengths",
            "1k",
            "--concurrency",
            "1,4",
            "--requests",
            "20",
            "--output-tokens",
            "8",
            "--out",
            out.to_str().unwrap(),
        ],
    )
    .await;
    let file = ctxbench::resultfile::read(&out).unwrap();
    assert_eq!(file.load.cells.len(), 2);
    for c in &r.cells {
        assert_eq!(c.sent, 20, "{c:?}");
        assert_eq!(c.ok + c.failed, c.sent);
        assert!(c.failed > 0, "faults were injected: {c:?}");
        let in_file: Vec<_> = file.load.requests_in(&c.cell).collect();
        assert_eq!(in_file.len() as u64, c.sent);
        assert_eq!(in_file.iter().filter(|q| q.ok).count() as u64, c.ok);
        let mut idx: Vec<u64> = in_file.iter().map(|q| q.index).collect();
        idx.sort_unstable();
        assert_eq!(
            idx,
            (0..20).collect::<Vec<u64>>(),
            "no request lost or doubled"
        );
        assert!(c.goodput_fraction.unwrap() <= c.ok as f64 / c.sent as f64);
    }
    // Connections: the closed loop's workers keep theirs alive (faults aside; a reset
    // one is replaced by a spare the cell's warm-up left in the pool, or by a new one).
    let reused = file
        .load
        .requests
        .iter()
        .filter(|q| q.conn_reused == Some(true))
        .count();
    let new = file
        .load
        .requests
        .iter()
        .filter(|q| q.conn_reused == Some(false))
        .count();
    assert!(reused > new, "reused {reused}, new {new}");
    // The per-cell summary in the file matches the returned one.
    assert_eq!(file.load.cells, r.cells);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ttft_and_tpot_match_the_simulators_truth() {
    let _t = timing_lock().await;
    let s = sim(COSTS).await;
    let r = load(
        &s.url(),
        &[
            "--lengths",
            "2k",
            "--concurrency",
            "1,4",
            "--requests",
            "16",
            "--output-tokens",
            "16",
        ],
    )
    .await;
    let truth = s.truth();
    // The server's own TPOT per request, from its truth log: with the engine batching, a
    // decode step also carries the prefill chunks of requests admitted meanwhile, so at
    // concurrency 4 TPOT is more than the 2 ms decode cost. Cells run one after the other:
    // in arrival order, the last 16 measured requests are the c=4 cell's, the 16 before
    // them the c=1 cell's.
    let mut measured: Vec<_> = truth
        .iter()
        .filter(|t| t.prompt_tokens == 2048 && t.output_tokens == 16)
        .collect();
    measured.sort_by(|a, b| a.arrival_s.total_cmp(&b.arrival_s));
    assert!(measured.len() >= 32, "{}", measured.len());
    let server_tpot = |ts: &[&ctxbench::sim::RequestTruth]| {
        median(
            ts.iter()
                .map(|t| {
                    (t.finished_s.unwrap() - t.first_token_s.unwrap())
                        / (t.output_tokens - 1) as f64
                })
                .collect(),
        )
    };
    let n = measured.len();
    let truth_tpot = [
        (1, server_tpot(&measured[n - 32..n - 16])),
        (4, server_tpot(&measured[n - 16..])),
    ];
    // The c=1 cell's own prefill: a median over every long prompt mixed in the c=4 cell's,
    // whose steps carry two to four prompts (40–80 ms against 20 alone), and flipped
    // between 20 and 40 ms with how the c=4 cell's prompts were batched.
    let prefill = median(
        measured[n - 32..n - 16]
            .iter()
            .map(|t| t.prefill_s)
            .collect(),
    );
    let c1 = r.requests.iter().filter(|q| q.cell.concurrency == Some(1));
    let ttft1 = median(c1.clone().filter_map(|q| q.ttft_s).collect());
    assert!(
        ttft1 >= prefill && ttft1 - prefill < TTFT_OVER_TRUTH_MAX_S,
        "c=1 TTFT {ttft1} vs truth prefill {prefill}"
    );
    for (c, step) in truth_tpot {
        let tpot = median(
            r.requests
                .iter()
                .filter(|q| q.cell.concurrency == Some(c))
                .filter_map(|q| q.tpot_s)
                .collect(),
        );
        assert!(
            rel(tpot, step) < TPOT_REL_TOL,
            "c={c}: TPOT {tpot} vs the server's {step}"
        );
    }
    // At concurrency 4 a request waits at least its own prefill, and the queue shows in TTFT.
    let c4: Vec<f64> = r
        .requests
        .iter()
        .filter(|q| q.cell.concurrency == Some(4))
        .filter_map(|q| q.ttft_s)
        .collect();
    assert_eq!(c4.len(), 16);
    assert!(c4.iter().all(|t| *t >= prefill * 0.99), "{c4:?}");
    let cell4 = r
        .cells
        .iter()
        .find(|c| c.cell.concurrency == Some(4))
        .unwrap();
    assert!(cell4.in_flight_mean.unwrap() > 3.0, "{cell4:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_capped_open_loop_shows_coordinated_omission_and_says_so() {
    let _t = timing_lock().await;
    // 50 ms per request, arrivals every 10 ms, at most 2 in flight: the server cannot keep up.
    let s = sim(&[
        "--sim-t0", "0.050", "--sim-p0", "1e12", "--sim-q", "0", "--sim-d0", "0.001", "--sim-d1",
        "0",
    ])
    .await;
    let r = load(
        &s.url(),
        &[
            "--lengths",
            "1k",
            "--rate",
            "100",
            "--arrival",
            "constant",
            "--max-concurrency",
            "2",
            "--requests",
            "30",
            "--output-tokens",
            "4",
        ],
    )
    .await;
    let c = &r.cells[0];
    assert_eq!((c.sent, c.ok), (30, 30), "{c:?}");
    let (from_send, from_sched) = (c.ttft_s.unwrap(), c.ttft_from_schedule_s.unwrap());
    // From the send, TTFT stays near one or two service times (the cap admits two).
    assert!(from_send.p90 < 0.2, "{from_send:?}");
    // From the schedule it grows with the backlog: the last arrival (at 0.29 s) waits for
    // about 30 × 50 ms / (the cap's share) of service.
    assert!(
        from_sched.max > 5.0 * from_send.max,
        "{from_sched:?} vs {from_send:?}"
    );
    let late: Vec<f64> = r
        .requests
        .iter()
        .map(|q| q.sent_s - q.scheduled_s)
        .collect();
    // The engine batches the two admitted requests, so slots free in pairs and a pair is
    // sent together (its second member 10 ms less late): lateness grows across the cap.
    assert!(
        late.iter()
            .zip(late.iter().skip(2))
            .filter(|(a, b)| b < a)
            .count()
            < 5,
        "lateness grows: {late:?}"
    );
    assert!(
        c.notes
            .iter()
            .any(|n| n.contains("waited to be sent") && n.contains("coordinated omission")),
        "{:?}",
        c.notes
    );
    let table = ctxbench::load_report::render::render(
        &r.plan,
        &r.cells,
        &r.knees,
        ctxbench::cli::Format::Table,
    );
    assert!(table.contains("coordinated omission"), "{table}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_file_resumes_per_cell_and_reports_merge_by_records() {
    let _t = timing_lock().await;
    let s = sim(COSTS).await;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("load.jsonl");
    let p = out.to_str().unwrap();
    let flags = [
        "--lengths",
        "1k",
        "--concurrency",
        "1,2",
        "--requests",
        "6",
        "--output-tokens",
        "4",
        "--out",
        p,
    ];
    let first = load(&s.url(), &flags).await;
    // Cut the file after the first cell plus one request of the second: a crash mid-cell.
    let text = std::fs::read_to_string(&out).unwrap();
    let lines: Vec<&str> = text.lines().collect();
    let cut = lines
        .iter()
        .position(|l| l.contains("\"type\":\"cell\""))
        .unwrap()
        + 2;
    std::fs::write(&out, lines[..cut].join("\n") + "\n").unwrap();
    let mut again = flags.to_vec();
    again.push("--resume");
    let second = load(&s.url(), &again).await;
    assert_eq!(second.cells[0], first.cells[0], "the complete cell is kept");
    let file = ctxbench::resultfile::read(&out).unwrap();
    for c in &file.load.cells {
        let n = file.load.requests_in(&c.cell).count();
        assert_eq!(
            n as u64, c.sent,
            "the half cell's requests were dropped and rerun"
        );
    }
    assert!(
        ctxbench::resultfile::parse(&text)
            .unwrap()
            .load
            .plan
            .is_some()
    );
    // Two clients' files of one plan merge by their raw records.
    let f = ctxbench::resultfile::read(&out).unwrap();
    let merged =
        ctxbench::load_report::merge::merge(&[("a".into(), f.clone()), ("b".into(), f)]).unwrap();
    for (m, c) in merged.cells.iter().zip(&file.load.cells) {
        assert_eq!(m.sent, 2 * c.sent);
        assert_eq!(m.ok + m.failed, m.sent);
    }
    let html = ctxbench::load_report::render::html(&merged);
    assert!(
        html.contains("chart-ttft") && html.contains("chart-pareto"),
        "{html}"
    );
    let mut other = ctxbench::resultfile::read(&out).unwrap();
    other.load.plan.as_mut().unwrap().seed += 1;
    let f = ctxbench::resultfile::read(&out).unwrap();
    let e = ctxbench::load_report::merge::merge(&[("a".into(), f), ("b".into(), other)]);
    assert!(e.is_err_and(|e| e.to_string().contains("different load plan")));
    let _ = Record::Knee(Default::default());
}

#[test]
fn the_cli_runs_against_the_builtin_simulator_and_report_and_compare_read_load_files() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("load.jsonl");
    let p = f.to_str().unwrap();
    let out = assert_cmd::Command::cargo_bin("ctxbench")
        .unwrap()
        .args([
            "load",
            "--lengths",
            "1k",
            "--concurrency",
            "1,2",
            "--requests",
            "4",
            "--output-tokens",
            "4",
            "--sim-t0",
            "0.002",
            "--out",
            p,
            "--format",
            "csv",
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("built-in simulator"), "{stderr}");
    let csv = String::from_utf8_lossy(&out.stdout);
    assert_eq!(csv.lines().count(), 3, "header + 2 cells: {csv}");
    let report = assert_cmd::Command::cargo_bin("ctxbench")
        .unwrap()
        .args(["report", p, "--format", "csv"])
        .output()
        .unwrap();
    assert!(report.status.success());
    assert_eq!(String::from_utf8_lossy(&report.stdout).lines().count(), 3);
    let html = dir.path().join("compare.html");
    let cmp = assert_cmd::Command::cargo_bin("ctxbench")
        .unwrap()
        .args(["compare", p, p, "--html", html.to_str().unwrap()])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&cmp.stdout);
    assert!(
        cmp.status.success(),
        "{}",
        String::from_utf8_lossy(&cmp.stderr)
    );
    assert!(
        text.contains("ttft_p50_ms") && text.contains("1.000"),
        "{text}"
    );
    // The HTML holds the same table and both files' curves: each file's 2 cells on the
    // TTFT chart and on the throughput chart.
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("<td>ttft_p50_ms</td>"), "{page}");
    for key in ["a-1024", "b-1024"] {
        let points = page
            .matches(&format!("class=\"point\" data-series=\"{key}\""))
            .count();
        assert_eq!(points, 4, "{key}: {page}");
    }
    let bad = assert_cmd::Command::cargo_bin("ctxbench")
        .unwrap()
        .args(["load", "--lengths", "1k", "--rate", "0"])
        .output()
        .unwrap();
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("--rate"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_knee_search_runs_end_to_end_and_sits_beside_the_plan() {
    let _t = timing_lock().await;
    let s = sim(COSTS).await;
    // ~36 ms per request alone; an E2E bound of 90 ms fails well before 16 in flight.
    let r = load(
        &s.url(),
        &[
            "--lengths",
            "1k",
            "--find-knee",
            "--knee-max",
            "16",
            "--requests",
            "8",
            "--output-tokens",
            "8",
            "--slo",
            "e2e=90ms",
            "--goodput-target",
            "0.9",
        ],
    )
    .await;
    let k = &r.knees[0];
    let knee = k.knee.expect("c=1 meets a 90 ms bound") as u32;
    let miss = k.first_miss.expect("16 in flight cannot") as u32;
    assert_eq!(miss, knee + 1, "{k:?}");
    let cell = |c: u32| {
        r.cells
            .iter()
            .find(|x| x.cell.concurrency == Some(c))
            .unwrap()
    };
    assert!(cell(knee).meets_target && !cell(miss).meets_target);
    assert!(k.planned.is_some() && k.planned_from.is_some(), "{k:?}");
    assert_eq!(k.probes.len(), r.cells.len());
}

/// Client TTFT − server TTFT for one request, matched: the server's TTFT runs from its body
/// being parsed to the first token's hand-over to the connection, the client's from its
/// send to that event parsed, so the difference is the request's loopback transfer and
/// HTTP parsing before the server stamps its arrival, plus the event's write, transfer and
/// parsing after, plus the wait for a core: client and server share this process's 2
/// workers and the machine's 2 cores with other builds. Measured over five runs at a load
/// average of 1.4–2.3: medians 0.16–0.21 ms (kept-alive connections 0.15–0.18 ms; the 63
/// requests that open one, 6–10 ms). Issue 12 asks 1 ms: five times the measured median,
/// room for a busier machine. An unoptimised build spends several times the CPU on each
/// event's JSON and HTTP on both sides (0.83–0.96 ms measured, three runs, load 1.5): the
/// dev profile is built at opt-level 1 (Cargo.toml), where five runs at a load average of
/// 1.6–1.8 gave medians of 0.15–0.17 ms, as in a release build.
const TTFT_MINUS_TRUTH_MEDIAN_MAX_S: f64 = 0.001;

/// At concurrency 64, every request's TTFT as the client measured it, against the
/// simulator's own record of that request, matched by first-token order. A
/// 1,024-token step budget prefills one prompt per step, so a step hands out one first token
/// and a few decode tokens: the figure is per-request delivery, not the wait behind 64
/// events written and parsed at once on two shared cores (that burst adds ~1–2 ms here,
/// see docs/simulator.md).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ttft_at_concurrency_64_is_within_a_millisecond_of_server_truth() {
    let _t = timing_lock().await;
    // Five rounds: the first 64 open their connections (several ms each at once), so the
    // median falls among requests on kept-alive connections, as a load's steady state does.
    const REQUESTS: usize = 320;
    let more = [
        "--max-running",
        "64",
        "--kv-pool-tokens",
        "1000000",
        "--max-batch-tokens",
        "1024",
    ];
    let s = sim(&[common::FAST_PREFILL_COSTS, &more].concat()).await;
    let r = load(
        &s.url(),
        &[
            "--lengths",
            "1k",
            "--concurrency",
            "64",
            "--requests",
            "320",
            "--output-tokens",
            "4",
        ],
    )
    .await;
    let truth = common::truth_after(&s, REQUESTS + 1).await;
    let mut server: Vec<_> = truth
        .iter()
        .filter(|t| t.prompt_tokens == 1024 && t.first_token_s.is_some())
        .collect();
    assert_eq!(server.len(), REQUESTS, "one truth record per request");
    let mut client: Vec<_> = r.requests.iter().filter(|q| q.ok).collect();
    assert_eq!(client.len(), REQUESTS);
    // One first token per step, steps ~4 ms apart: the k-th first token the client saw is
    // the k-th the server handed out.
    server.sort_by(|a, b| {
        a.first_token_s
            .unwrap()
            .total_cmp(&b.first_token_s.unwrap())
    });
    client
        .sort_by(|a, b| (a.sent_s + a.ttft_s.unwrap()).total_cmp(&(b.sent_s + b.ttft_s.unwrap())));
    let over: Vec<f64> = client
        .iter()
        .zip(&server)
        .map(|(c, t)| c.ttft_s.unwrap() - (t.first_token_s.unwrap() - t.arrival_s))
        .collect();
    let mid = median(over.clone());
    let mut sorted = over.clone();
    sorted.sort_by(f64::total_cmp);
    let by_conn = |reused: bool| {
        let v: Vec<f64> = client
            .iter()
            .zip(&over)
            .filter(|(c, _)| c.conn_reused == Some(reused))
            .map(|(_, d)| *d)
            .collect();
        (
            v.len(),
            if v.is_empty() {
                f64::NAN
            } else {
                median(v) * 1e3
            },
        )
    };
    eprintln!(
        "client TTFT - server TTFT at c=64, ms: p10 {:.3} median {:.3} p90 {:.3} (n {}); \
         median over new connections {:?}, reused {:?} (n, ms)",
        sorted[sorted.len() / 10] * 1e3,
        mid * 1e3,
        sorted[sorted.len() * 9 / 10] * 1e3,
        sorted.len(),
        by_conn(false),
        by_conn(true),
    );
    assert!(
        (0.0..TTFT_MINUS_TRUTH_MEDIAN_MAX_S).contains(&mid),
        "median client − server TTFT {mid} s"
    );
}

/// Engine-clock times agree to this: sums of a few float step costs.
const ENGINE_EXACT_S: f64 = 1e-9;

/// The knee against the pool's arithmetic: a pool of exactly K = 4 requests of 1024 + 16
/// tokens (65 pages of 16), prefill nearly free and 20 ms decode steps, so a request that
/// does not queue has its first token within two steps (≤ 40 ms). At K + 1 the cell's
/// first K + 1 requests arrive together and one waits for a running request's 16 tokens
/// (~320 ms): a 150 ms TTFT bound at a 0.99 goodput target is broken by queueing alone.
/// The knee is K, queueing starts at K + 1, the planner says K; and each queued request
/// leaves the queue exactly when the cost model's steps of a running one end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_knee_and_queue_times_match_the_pool_and_cost_model() {
    let _t = timing_lock().await;
    const K: u32 = 4;
    const L: u64 = 1024;
    const G: u64 = 16;
    const D0: f64 = 0.020;
    let pool = (K as u64 * (L + G)).to_string();
    let s = sim(&[
        "--sim-t0",
        "0",
        "--sim-p0",
        "1e12",
        "--sim-q",
        "0",
        "--sim-d0",
        "0.020",
        "--sim-d1",
        "0",
        "--max-running",
        "64",
        "--kv-pool-tokens",
        &pool,
        "--sim-new-token-ratio",
        "1",
        "--context-length",
        "2048",
    ])
    .await;
    let flags = "--lengths 1k --find-knee --knee-max 16 --requests 20 --output-tokens 16 --slo ttft=150ms --goodput-target 0.99";
    let r = load(&s.url(), &flags.split(' ').collect::<Vec<_>>()).await;
    let k = &r.knees[0];
    assert_eq!(k.knee, Some(f64::from(K)), "{k:?}");
    assert_eq!(k.first_miss, Some(f64::from(K + 1)), "{k:?}");
    assert_eq!(k.planned, Some(f64::from(K)), "{k:?}");
    assert_eq!(k.queue_onset, Some(f64::from(K + 1)), "{k:?}");

    // The truth log, cell by cell (cells run one after another, 20 requests each).
    let sent: usize = r.cells.iter().map(|c| c.sent as usize).sum();
    let truth = common::truth_after(&s, sent + 1).await;
    let mut measured: Vec<_> = truth.iter().filter(|t| t.prompt_tokens == L).collect();
    assert_eq!(measured.len(), sent);
    measured.sort_by(|a, b| a.arrival_s.total_cmp(&b.arrival_s));
    // The engine-clock end of a request's last step: admitted, then every step it was in.
    let finish = |t: &ctxbench::sim::RequestTruth| {
        t.admitted_s.unwrap() + t.prefill_s + t.decode_steps.iter().map(|d| d.cost_s).sum::<f64>()
    };
    let mut at = 0;
    for cell in &r.cells {
        let c = cell.cell.concurrency.unwrap();
        let reqs = &measured[at..at + cell.sent as usize];
        at += cell.sent as usize;
        let mut queued = 0;
        for t in reqs {
            assert_eq!(t.output_tokens, G);
            // Each decode step costs d0 (d1 = 0; prefill chunks riding along cost ~1e-9 s).
            assert!(
                t.decode_steps.iter().all(|d| (d.cost_s - D0).abs() < 1e-6),
                "{t:?}"
            );
            // Not queued: admitted at the first step start after the engine got it (≤ one
            // step). From the HTTP arrival instead, a request whose prompt was still being
            // parsed when a step began would look queued for one step.
            let wait = t.admitted_s.unwrap() - t.submitted_s;
            if wait <= D0 + 1e-6 {
                continue;
            }
            queued += 1;
            // Queued: admitted exactly when a running request's last step ended, the
            // first moment its pages were free.
            let freed_by = reqs
                .iter()
                .find(|o| (finish(o) - t.admitted_s.unwrap()).abs() < ENGINE_EXACT_S);
            assert!(
                freed_by.is_some(),
                "c={c}: {t:?} left the queue at no finish"
            );
        }
        if c <= K {
            assert_eq!(queued, 0, "c={c} fits the pool: nothing queues");
        } else {
            assert!(queued > 0, "c={c} > K: some request queues");
        }
        eprintln!("c={c}: {queued} of {} requests queued", reqs.len());
    }
}

/// Under speculative decoding a cell's accept length is the median of its requests' (each
/// from the server's own counts), and every summary format shows it beside the cell.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cells_accept_length_is_its_requests_median_and_is_shown() {
    let mut flags = COSTS.to_vec();
    flags.extend(["--spec", "4"]);
    let s = sim(&flags).await;
    let r = load(
        &s.url(),
        &[
            "--lengths",
            "1k",
            "--concurrency",
            "2",
            "--requests",
            "8",
            "--output-tokens",
            "32",
        ],
    )
    .await;
    let c = &r.cells[0];
    let per_request: Vec<f64> = r
        .requests
        .iter()
        .filter_map(|q| q.spec.as_ref().and_then(|s| s.accept_length))
        .collect();
    assert_eq!(per_request.len(), 8, "acceptance on every request");
    let cell = c.accept_length_median.expect("the cell's accept length");
    // Verify steps per second: each yields 1 + its accepted drafts, and every request adds
    // its first token besides, so output tok/s exceeds steps/s.
    let steps = c
        .verify_steps_per_s
        .expect("the cell's verify steps per second");
    assert!(steps > 0.0 && c.output_tps.unwrap() > steps, "{c:?}");
    let mut sorted = per_request.clone();
    sorted.sort_by(f64::total_cmp);
    assert!(
        sorted.contains(&cell) || (sorted[3]..=sorted[4]).contains(&cell),
        "{cell} is the median of {sorted:?}"
    );
    for format in [
        ctxbench::cli::Format::Table,
        ctxbench::cli::Format::Csv,
        ctxbench::cli::Format::Markdown,
    ] {
        let text = ctxbench::load_report::render::render(&r.plan, &r.cells, &r.knees, format);
        assert!(
            text.contains("accept_len") && text.contains("steps/s"),
            "{text}"
        );
        assert!(text.contains(&format!("{cell:.2}")), "{text}");
    }
    assert!(ctxbench::load_report::render::html(&r).contains("accept_len"));
}
