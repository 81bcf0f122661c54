//! Benchmark (not a test) of the load client against a zero-cost server on loopback:
//! output tokens/s one client core sustains, client-observed TTFT at 1,000 concurrent
//! streams, peak RSS with 1,000 concurrent 128k-token prompts, open-loop send lateness at
//! 500 requests/s, and the tail at 256 closed-loop streams against an exact-timing server
//! (client-added TTFT, the concurrency the server saw, tok/s against the server's cap).
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
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

/// How the fake server answers: `tokens` events, the first `ttft` after it has the whole
/// request, then `gap` apart (zero: all in one write). Times are kept from the request's
/// arrival, so a late timer tick delays one event, never the ones after it.
#[derive(Clone, Copy)]
struct Answer {
    tokens: u64,
    ttft: Duration,
    gap: Duration,
}

/// What the server saw, counted by the server: requests it held at once (from having the
/// whole request to writing its last event), the time it held them, connections accepted.
#[derive(Default)]
struct Seen {
    in_flight: AtomicU64,
    max_in_flight: AtomicU64,
    served: AtomicU64,
    busy_ns: AtomicU64,
    accepted: AtomicU64,
}

impl Seen {
    fn reset(&self) {
        for a in [
            &self.max_in_flight,
            &self.served,
            &self.busy_ns,
            &self.accepted,
        ] {
            a.store(0, Ordering::Relaxed);
        }
    }

    fn begin(&self) {
        let now = self.in_flight.fetch_add(1, Ordering::Relaxed) + 1;
        self.max_in_flight.fetch_max(now, Ordering::Relaxed);
    }

    fn end(&self, held: Duration) {
        self.in_flight.fetch_sub(1, Ordering::Relaxed);
        self.served.fetch_add(1, Ordering::Relaxed);
        self.busy_ns
            .fetch_add(held.as_nanos() as u64, Ordering::Relaxed);
    }
}

fn header_end(buf: &[u8]) -> Option<usize> {
    buf.windows(4).position(|w| w == b"\r\n\r\n").map(|i| i + 4)
}

fn content_length(head: &[u8]) -> usize {
    let text = String::from_utf8_lossy(head).to_ascii_lowercase();
    text.lines()
        .find_map(|l| {
            l.strip_prefix("content-length:")
                .map(|v| v.trim().parse().unwrap_or(0))
        })
        .unwrap_or(0)
}

/// The clock server and client share (one process): the server writes, in the answer's
/// text, when it had the whole request and when it wrote the first event, so the client
/// can take the server's own time out of TTFT.
static EPOCH: std::sync::OnceLock<std::time::Instant> = std::sync::OnceLock::new();

fn now_ns() -> u128 {
    EPOCH
        .get_or_init(std::time::Instant::now)
        .elapsed()
        .as_nanos()
}

fn event(k: u64, last: bool, stamp: &str) -> String {
    let fin = if last { r#"{"type":"length"}"# } else { "null" };
    let text = format!("{stamp}{}", "x".repeat(k as usize));
    let ev = format!(
        "data: {{\"text\":\"{text}\",\"meta_info\":{{\"prompt_tokens\":100,\"cached_tokens\":0,\"completion_tokens\":{k},\"finish_reason\":{fin}}}}}\n\n"
    );
    format!("{:x}\r\n{ev}\r\n", ev.len())
}

async fn connection(mut sock: TcpStream, answer: Answer, seen: Arc<Seen>) {
    sock.set_nodelay(true).ok();
    seen.accepted.fetch_add(1, Ordering::Relaxed);
    let mut buf: Vec<u8> = Vec::new();
    let mut chunk = vec![0u8; 16 << 10];
    loop {
        let end = loop {
            if let Some(e) = header_end(&buf) {
                break e;
            }
            match sock.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => buf.extend_from_slice(&chunk[..n]),
            }
        };
        // A GET (the client warming its connections): an empty answer at once.
        if buf.starts_with(b"GET ") {
            buf.drain(..end);
            let empty = "HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n";
            if sock.write_all(empty.as_bytes()).await.is_err() {
                return;
            }
            continue;
        }
        // Read and discard the body: the server keeps nothing per request.
        let mut left = content_length(&buf[..end]).saturating_sub(buf.len() - end);
        buf.clear();
        while left > 0 {
            match sock.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => left = left.saturating_sub(n),
            }
        }
        let (received, arrived) = (now_ns(), tokio::time::Instant::now());
        seen.begin();
        let mut out = String::from(
            "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n",
        );
        let mut stamp = String::new();
        let mut ok = true;
        for k in 1..=answer.tokens {
            let due = arrived + answer.ttft + answer.gap * (k as u32 - 1);
            if due > tokio::time::Instant::now() {
                tokio::time::sleep_until(due).await;
            }
            if k == 1 {
                stamp = format!("{received}:{}:", now_ns());
            }
            out.push_str(&event(k, k == answer.tokens, &stamp));
            if !answer.gap.is_zero() && k < answer.tokens {
                ok = sock.write_all(out.as_bytes()).await.is_ok();
                out.clear();
                if !ok {
                    break;
                }
            }
        }
        if ok {
            let done = "data: [DONE]\n\n";
            out.push_str(&format!("{:x}\r\n{done}\r\n0\r\n\r\n", done.len()));
            ok = sock.write_all(out.as_bytes()).await.is_ok();
        }
        seen.end(arrived.elapsed());
        if !ok {
            return;
        }
    }
}

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
    }
}

/// Start the fake server on its own runtime thread; returns its URL and its counts.
fn fake_server(answer: Answer) -> (String, Arc<Seen>) {
    let seen = Arc::new(Seen::default());
    let counts = seen.clone();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
            tx.send(l.local_addr().unwrap()).unwrap();
            loop {
                let Ok((s, _)) = l.accept().await else { return };
                tokio::spawn(connection(s, answer, seen.clone()));
            }
        });
    });
    (format!("http://{}", rx.recv().unwrap()), counts)
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
        tails: vec![Tail { tail, source: None }].into(),
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
            let server_s = result.as_ref().ok().and_then(|c| {
                let mut it = c.text.split(':');
                let r: u128 = it.next()?.parse().ok()?;
                let w: u128 = it.next()?.parse().ok()?;
                Some((w - r) as f64 * 1e-9)
            });
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
/// (a first cell's connections). Client and server share the machine's cores.
fn tail(rounds: usize, gap: Duration, per_stream: u64) {
    const STREAMS: usize = 256;
    const TOKENS: u64 = 64;
    const TTFT: Duration = Duration::from_millis(50);
    let n = STREAMS as u64 * per_stream;
    let (url, seen) = fake_server(Answer {
        tokens: TOKENS,
        ttft: TTFT,
        gap,
    });
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
    let mut server_late = Tails::default();
    let (mut max_seen, mut tps, mut of_cap) = (Vec::new(), Vec::new(), Vec::new());
    let (mut accepted, mut reconnects, mut warmed) = (Vec::new(), Vec::new(), Vec::new());
    let nominal = Duration::from_secs_f64((TTFT + gap * (TOKENS as u32 - 1)).as_secs_f64());
    let slo = ctxbench::load::slo::parse("").unwrap();
    for round in 0..rounds {
        seen.reset();
        let mut writer = ResultWriter::create(&dir.path().join(format!("{round}.jsonl"))).unwrap();
        let load = Load::Closed {
            concurrency: STREAMS,
        };
        let http = Http::new(&url, None).unwrap();
        let (r, _) = runtime.block_on(async {
            // As the CLI does: the cell's connections opened before its clock starts.
            if !cold {
                warmed.push(http.warm(STREAMS, Duration::from_secs(10)).await.unwrap());
            }
            cell(&http, 1000, TOKENS, load, Budget::Requests(n), &mut writer).await
        });
        check(&r, n as usize, "256 streams");
        let client_added = |q: &(RequestRecord, Option<f64>)| Some(q.0.ttft_s? - q.1?);
        added.add(r.iter().filter_map(client_added).collect());
        let (first, later): (Vec<_>, Vec<_>) = r.iter().partition(|q| q.0.index < STREAMS as u64);
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
        let key = reqs[0].cell;
        let mut key = key;
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
    }
    let (a50, a99) = added.ms();
    let (_, l99) = server_late.ms();
    let ((f50, f99), (r50, r99)) = (first_wave.ms(), after_it.ms());
    let ideal = STREAMS as f64 * TOKENS as f64 / nominal.as_secs_f64();
    println!(
        "256 closed-loop streams, exact-timing server (TTFT 50 ms, ITL {} ms, 64 tokens, 1,000-token prompts), {n} requests x {rounds} rounds, load average {}:\n  \
         client-added TTFT p50 median {a50:.2} ms, p99 median {a99:.2} ms (server's own first-event lateness p99 {l99:.2} ms)\n  \
         first wave (the first 256 requests) p50 {f50:.2} ms, p99 {f99:.2} ms; later requests p50 {r50:.2} ms, p99 {r99:.2} ms\n  \
         server-seen concurrency max median {:.0}/256 (rounds {:?}); connections the server accepted per round {accepted:?}, requests on a new connection {reconnects:?}, connections warmed {warmed:?}\n  \
         output tok/s median {:.0} = {:.1} % of the server's cap (nominal cap {ideal:.0})",
        gap.as_millis(),
        load_average(),
        median(max_seen.clone()),
        max_seen,
        median(tps),
        median(of_cap) * 100.0,
    );
}
