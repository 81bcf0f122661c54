//! Benchmark (not a test) of the load client against a zero-cost server on loopback:
//! output tokens/s one client core sustains, client-observed TTFT at 1,000 concurrent
//! streams, peak RSS with 1,000 concurrent 128k-token prompts, open-loop send lateness at
//! 500 requests/s, and the tail at 256 closed-loop streams against an exact-timing server
//! (client-added TTFT, the concurrency the server saw, tok/s against the server's cap and
//! against the null client's, the least any client can do: `null_client`).
//! Prints medians over rounds; run with `cargo bench --bench load_client` (`-- --tail`: the
//! 256-stream cases only; raise `ulimit -n` above ~4,100 for the 1,000-stream cases).

use ctxbench::backend::flush::Flusher;
use ctxbench::backend::http::Http;
use ctxbench::backend::sglang::Sglang;
use ctxbench::backend::shared::SharedTail;
use ctxbench::backend::{Backend, Prompt};
use ctxbench::load::request::{Shot, Tail};
use ctxbench::record::Record;
use ctxbench::record::load::{CellKey, RequestRecord};
use ctxbench::run::runner::InFlight;
use ctxbench::run::writer::ResultWriter;
use ctxbench::run::{Arrival, Budget, Load, Pacing, Slot, run};
use server::{Answer, Seen};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;
use tokio::sync::mpsc;

mod null_client;
mod rx_stamp;
mod server;

/// Each round's p50 and p99, reported as their medians over rounds.
#[derive(Default)]
struct Tails {
    p50: Vec<f64>,
    p99: Vec<f64>,
}

impl Tails {
    fn add(&mut self, round: Vec<f64>) {
        self.p50.push(quantile(round.clone(), 0.5));
        self.p99.push(quantile(round, 0.99));
    }

    /// (p50, p99) medians over rounds, ms.
    fn ms(self) -> (f64, f64) {
        (median(self.p50) * 1e3, median(self.p99) * 1e3)
    }
}

/// An open loop of `n` sends at `rate` per second, uncapped.
fn open_loop(arrival: Arrival, rate: f64, seed: u64, n: u64, pacing: Pacing) -> Load {
    Load::Open {
        at: ctxbench::run::schedule::schedule(arrival, rate, seed, Some(n), None),
        max_concurrency: None,
        pacing,
        chains: None,
    }
}

/// Start the fake server; returns its URL and its counts.
fn fake_server(answer: Answer) -> (String, Arc<Seen>) {
    let (addr, seen) = server::start(answer);
    (format!("http://{addr}"), seen)
}

fn backend(http: &Http) -> Arc<dyn Backend> {
    Arc::new(Sglang {
        http: http.clone(),
        flusher: Flusher::None,
    })
}

/// Run one cell and return its records and wall time; each record is appended to `writer`
/// as it comes, as the CLI's collector does.
async fn cell(
    http: &Http,
    prompt_tokens: u32,
    output: u64,
    load: Load,
    budget: Budget,
    writer: &mut ResultWriter,
) -> (Vec<(RequestRecord, Option<f64>)>, f64) {
    let ids: Vec<u32> = (0..prompt_tokens).map(|i| 1000 + i % 30_000).collect();
    let tail = SharedTail::from_prompt(&Prompt::Ids(ids), 16);
    let shot = Arc::new(Shot {
        backend: backend(http),
        tails: vec![Tail {
            tail,
            source: None,
            graded: None,
        }]
        .into(),
        output_tokens: output,
        deadline: Duration::from_secs(120),
        cell: CellKey {
            context_tokens: u64::from(prompt_tokens),
            concurrency: None,
            rate: None,
        },
    });
    let (tx, mut rx) = mpsc::unbounded_channel();
    let start = tokio::time::Instant::now();
    let send = move |slot: Slot| {
        let shot = shot.clone();
        let head = Prompt::Ids((0..16).map(|i| 7 + (slot.index as u32 + i) % 500).collect());
        async move {
            let req = ctxbench::backend::GenRequest {
                prompt: Prompt::Shared(shot.tails[0].tail.with_head(&head)),
                max_tokens: shot.output_tokens,
                ignore_eos: true,
                cache_prompt: false,
                deadline: shot.deadline,
            };
            let result = shot.backend.generate(&req).await;
            // Server TTFT: from having the request to writing the first event.
            let server_s = result
                .as_ref()
                .ok()
                .and_then(|c| server::server_ttft_s(&c.text));
            let ended = slot.start.elapsed().as_secs_f64();
            (
                ctxbench::load::request::record(shot.cell, slot, ended, result),
                server_s,
            )
        }
    };
    let runner = tokio::spawn(run(load, budget, start, InFlight::default(), send, tx));
    let mut out = Vec::new();
    while let Some(r) = rx.recv().await {
        writer
            .append(&Record::Request(Box::new(r.0.clone())))
            .unwrap();
        out.push(r);
    }
    runner.await.unwrap();
    (out, start.elapsed().as_secs_f64())
}

fn quantile(mut v: Vec<f64>, q: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    v[((v.len() - 1) as f64 * q).round() as usize]
}

fn median(v: Vec<f64>) -> f64 {
    quantile(v, 0.5)
}

fn vm_hwm_mb() -> f64 {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("VmHWM:"))
                .and_then(|l| l.split_whitespace().nth(1)?.parse::<f64>().ok())
        })
        .map(|kb| kb / 1024.0)
        .unwrap_or(f64::NAN)
}

fn check(records: &[(RequestRecord, Option<f64>)], n: usize, what: &str) {
    let records: Vec<&RequestRecord> = records.iter().map(|r| &r.0).collect();
    let ok = records.iter().filter(|r| r.ok).count();
    assert_eq!(records.len(), n, "{what}: every request accounted for");
    if ok != n {
        let e = records.iter().find(|r| !r.ok).and_then(|r| r.error.clone());
        panic!("{what}: {} of {n} failed, e.g. {e:?}", n - ok);
    }
}

fn main() {
    const ROUNDS: usize = 5;
    let one_core = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    if std::env::args().any(|a| a == "--rss-only") {
        return rss(&one_core);
    }
    let tail_only = std::env::args().any(|a| a == "--tail");
    // The tail at 256 streams: ITL 10 ms (client-added TTFT, server-seen concurrency) and
    // ITL 1 ms (tok/s against the server's cap), each round 4 / 20 requests per stream.
    tail(ROUNDS, Duration::from_millis(10), 4);
    tail(ROUNDS, Duration::from_millis(1), 20);
    if tail_only {
        return;
    }
    // The peak-RSS case runs first, in a fresh process, so earlier cases do not set the peak.
    let exe = std::env::current_exe().unwrap();
    let child = std::process::Command::new(exe)
        .arg("--rss-only")
        .output()
        .unwrap();
    print!("{}", String::from_utf8_lossy(&child.stdout));
    eprint!("{}", String::from_utf8_lossy(&child.stderr));

    // 1. Output tokens/s on one client core: 64 streams of 256 tokens, all written at once.
    let (url, _) = fake_server(Answer {
        tokens: 256,
        ttft: Duration::ZERO,
        gap: Duration::ZERO,
    });
    let mut tps = Vec::new();
    for _ in 0..ROUNDS {
        let (r, wall) = one_core.block_on(cell(
            &Http::new(&url, None).unwrap(),
            100,
            256,
            Load::Closed { concurrency: 64 },
            Budget::Requests(640),
            &mut ResultWriter::none(),
        ));
        check(&r, 640, "throughput");
        tps.push(r.iter().filter_map(|q| q.0.output_tokens).sum::<u64>() as f64 / wall);
    }
    println!(
        "output tokens/s on one client core (zero-cost server, 64 streams x 256 tokens): median {:.0}",
        median(tps)
    );

    // CTXBENCH_BENCH_STREAMS overrides the stream count (to see how the cost scales).
    let streams: usize = std::env::var("CTXBENCH_BENCH_STREAMS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000);
    // 2. Client-added TTFT with 1,000 concurrent streams (each 16 events 100 ms apart).
    let (url, _) = fake_server(Answer {
        tokens: 16,
        ttft: Duration::ZERO,
        gap: Duration::from_millis(100),
    });
    let mut ttft = Tails::default();
    for _ in 0..ROUNDS {
        // Arrivals spread evenly so that `streams` are in flight (each lives 1.6 s): a closed
        // loop would send in synchronised bursts and measure the burst, not the client.
        let rate = streams as f64 / 1.6;
        let load = open_loop(
            Arrival::Constant,
            rate,
            0,
            3 * streams as u64,
            Pacing::Timer,
        );
        let (r, _) = one_core.block_on(cell(
            &Http::new(&url, None).unwrap(),
            100,
            16,
            load,
            Budget::Requests(0),
            &mut ResultWriter::none(),
        ));
        check(&r, 3 * streams, "concurrent streams");
        // Client-added: client TTFT minus the server's own time to its first event.
        ttft.add(r.iter().filter_map(|q| Some(q.0.ttft_s? - q.1?)).collect());
    }
    let (p50, p99) = ttft.ms();
    println!(
        "client-added TTFT at {streams} concurrent streams (client TTFT - server's own): p50 median {p50:.2} ms, p99 median {p99:.2} ms"
    );

    // 3. Open-loop send lateness at 500 requests/s (the CLI's multi-thread runtime).
    let (url, _) = fake_server(Answer {
        tokens: 4,
        ttft: Duration::ZERO,
        gap: Duration::ZERO,
    });
    let multi = tokio::runtime::Runtime::new().unwrap();
    let mut late = Tails::default();
    for round in 0..ROUNDS {
        let pacing = Pacing::Thread {
            spin: Duration::from_micros(250),
        };
        let load = open_loop(Arrival::Poisson, 500.0, round as u64, 2000, pacing);
        let (r, _) = multi.block_on(cell(
            &Http::new(&url, None).unwrap(),
            100,
            4,
            load,
            Budget::Requests(0),
            &mut ResultWriter::none(),
        ));
        check(&r, 2000, "open loop");
        late.add(r.iter().map(|q| q.0.sent_s - q.0.scheduled_s).collect());
    }
    let (p50, p99) = late.ms();
    println!(
        "open-loop send lateness at 500 req/s (Poisson, 2,000 requests): p50 median {p50:.3} ms, p99 median {p99:.3} ms"
    );
}

/// Peak RSS with 1,000 concurrent 128k-token prompts (the fake server, in-process, keeps a
/// 16 KiB buffer per connection: ~16 MB of the figure).
fn rss(one_core: &tokio::runtime::Runtime) {
    let before = vm_hwm_mb();
    let (url, _) = fake_server(Answer {
        tokens: 4,
        ttft: Duration::ZERO,
        gap: Duration::from_millis(250),
    });
    let (r, wall) = one_core.block_on(cell(
        &Http::new(&url, None).unwrap(),
        131_072,
        4,
        Load::Closed { concurrency: 1000 },
        Budget::Requests(1000),
        &mut ResultWriter::none(),
    ));
    check(&r, 1000, "128k prompts");
    println!(
        "peak RSS with 1,000 concurrent 128k-token prompts: {:.0} MB (before that case {:.0} MB; {:.1} s for the cell)",
        vm_hwm_mb(),
        before,
        wall
    );
}

/// The 1-minute load average, or `?` where /proc is absent.
fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().map(str::to_string))
        .unwrap_or_else(|| "?".to_string())
}

/// The tail at 256 closed-loop streams against an exact-timing server (TTFT 50 ms, 64
/// tokens `gap` apart, 1,000-token prompts) on the CLI's runtime (multi-thread, one worker
/// per core), each record written to a result file as it comes, a fresh client per round
/// (a first cell's connections). Client and server share the machine's cores. Each round
/// also runs the null client (raw sockets, nothing parsed) on the same runtime: what it
/// reaches is the ceiling for any client here.
fn tail(rounds: usize, gap: Duration, per_stream: u64) {
    const STREAMS: usize = 256;
    const TOKENS: u64 = 64;
    const PROMPT: u32 = 1000;
    const TTFT: Duration = Duration::from_millis(50);
    let n = STREAMS as u64 * per_stream;
    let (addr, seen) = server::start(Answer {
        tokens: TOKENS,
        ttft: TTFT,
        gap,
    });
    let url = format!("http://{addr}");
    // CTXBENCH_BENCH_COLD=1: no warm connections (what the first wave cost before).
    let cold = std::env::var("CTXBENCH_BENCH_COLD").is_ok_and(|v| v == "1");
    // CTXBENCH_BENCH_WORKERS=N: the client on N runtime workers (0: one thread).
    let runtime = match std::env::var("CTXBENCH_BENCH_WORKERS")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        Some(0) => tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap(),
        Some(n) => tokio::runtime::Builder::new_multi_thread()
            .worker_threads(n)
            .enable_all()
            .build()
            .unwrap(),
        None => tokio::runtime::Runtime::new().unwrap(),
    };
    let dir = tempfile::tempdir().unwrap();
    let (mut added, mut first_wave, mut after_it) =
        (Tails::default(), Tails::default(), Tails::default());
    let (mut null_added, mut null_first, mut null_later) =
        (Tails::default(), Tails::default(), Tails::default());
    let mut server_late = Tails::default();
    let (mut max_seen, mut tps, mut of_cap) = (Vec::new(), Vec::new(), Vec::new());
    let (mut null_tps, mut of_null) = (Vec::new(), Vec::new());
    let (mut accepted, mut reconnects, mut warmed) = (Vec::new(), Vec::new(), Vec::new());
    let nominal = Duration::from_secs_f64((TTFT + gap * (TOKENS as u32 - 1)).as_secs_f64());
    let slo = ctxbench::load::slo::parse("").unwrap();
    let wave = |index: u64| index < STREAMS as u64;
    for round in 0..rounds {
        // The null client first, then ctxbench, each on a fresh set of connections.
        let (samples, null) = runtime.block_on(null_client::run(addr, STREAMS, n, PROMPT, TOKENS));
        let null_added_of = |s: &null_client::Sample| s.ttft_s - s.server_s;
        null_added.add(samples.iter().map(null_added_of).collect());
        let (first, later): (Vec<_>, Vec<_>) = samples.iter().partition(|s| wave(s.index));
        null_first.add(first.into_iter().map(null_added_of).collect());
        null_later.add(later.into_iter().map(null_added_of).collect());
        null_tps.push(null);

        seen.reset();
        let mut writer = ResultWriter::create(&dir.path().join(format!("{round}.jsonl"))).unwrap();
        let load = Load::Closed {
            concurrency: STREAMS,
        };
        let http = Http::new(&url, None).unwrap();
        let (r, _) = runtime.block_on(async {
            // As the CLI does: the cell's connections opened before its clock starts.
            if !cold {
                let want = STREAMS + ctxbench::load::spare_connections(STREAMS);
                warmed.push(http.warm(want, Duration::from_secs(10)).await.unwrap());
            }
            cell(
                &http,
                PROMPT,
                TOKENS,
                load,
                Budget::Requests(n),
                &mut writer,
            )
            .await
        });
        check(&r, n as usize, "256 streams");
        let client_added = |q: &(RequestRecord, Option<f64>)| Some(q.0.ttft_s? - q.1?);
        added.add(r.iter().filter_map(client_added).collect());
        let (first, later): (Vec<_>, Vec<_>) = r.iter().partition(|q| wave(q.0.index));
        first_wave.add(first.into_iter().filter_map(client_added).collect());
        after_it.add(later.into_iter().filter_map(client_added).collect());
        server_late.add(
            r.iter()
                .filter_map(|q| Some(q.1? - TTFT.as_secs_f64()))
                .collect(),
        );
        max_seen.push(seen.max_in_flight.load(Ordering::Relaxed) as f64);
        accepted.push(seen.accepted.load(Ordering::Relaxed));
        reconnects.push(r.iter().filter(|q| q.0.conn_reused == Some(false)).count());
        let reqs: Vec<&RequestRecord> = r.iter().map(|q| &q.0).collect();
        let mut key = reqs[0].cell;
        key.concurrency = Some(STREAMS as u32);
        let c = ctxbench::load::cell::summarise(key, &reqs, &[], &slo, 0.9);
        let got = c.output_tps.unwrap_or(0.0);
        // The server's cap: what it delivers to a client that answers instantly, from its
        // own mean time holding a request.
        let held = seen.busy_ns.load(Ordering::Relaxed) as f64
            / seen.served.load(Ordering::Relaxed).max(1) as f64
            * 1e-9;
        let cap = STREAMS as f64 * TOKENS as f64 / held;
        tps.push(got);
        of_cap.push(got / cap);
        of_null.push(got / null);
    }
    let (a50, a99) = added.ms();
    let (_, l99) = server_late.ms();
    let ((f50, f99), (r50, r99)) = (first_wave.ms(), after_it.ms());
    let ((n50, n99), (nf50, nf99), (nr50, nr99)) =
        (null_added.ms(), null_first.ms(), null_later.ms());
    let ideal = STREAMS as f64 * TOKENS as f64 / nominal.as_secs_f64();
    println!(
        "256 closed-loop streams, exact-timing server (TTFT 50 ms, ITL {} ms, 64 tokens, 1,000-token prompts), {n} requests x {rounds} rounds, load average {}:\n  \
         client-added TTFT p50 median {a50:.2} ms, p99 median {a99:.2} ms (server's own first-event lateness p99 {l99:.2} ms)\n  \
         first wave (the first 256 requests) p50 {f50:.2} ms, p99 {f99:.2} ms; later requests p50 {r50:.2} ms, p99 {r99:.2} ms\n  \
         null client (raw sockets, nothing parsed): client-added p50 {n50:.2} ms, p99 {n99:.2} ms; first wave p50 {nf50:.2}, p99 {nf99:.2}; later p50 {nr50:.2}, p99 {nr99:.2}\n  \
         server-seen concurrency max median {:.0}/256 (rounds {:?}); connections the server accepted per round {accepted:?}, requests on a new connection {reconnects:?}, connections warmed {warmed:?}\n  \
         output tok/s median {:.0} = {:.1} % of the server's cap, {:.1} % of the null client's {:.0} (nominal cap {ideal:.0})",
        gap.as_millis(),
        load_average(),
        median(max_seen.clone()),
        max_seen,
        median(tps),
        median(of_cap) * 100.0,
        median(of_null) * 100.0,
        median(null_tps),
    );
}
