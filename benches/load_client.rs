//! Benchmark (not a test) of the load client against a zero-cost server on loopback:
//! output tokens/s one client core sustains, client-observed TTFT at 1,000 concurrent
//! streams, peak RSS with 1,000 concurrent 128k-token prompts, open-loop send lateness at
//! 500 requests/s. Prints medians over rounds; run with `cargo bench --bench load_client`
//! (raise `ulimit -n` above ~4,100 for the 1,000-stream cases).

use ctxbench::backend::flush::Flusher;
use ctxbench::backend::http::Http;
use ctxbench::backend::sglang::Sglang;
use ctxbench::backend::shared::SharedTail;
use ctxbench::backend::{Backend, Prompt};
use ctxbench::load::request::{Shot, Tail};
use ctxbench::record::load::{CellKey, RequestRecord};
use ctxbench::run::runner::InFlight;
use ctxbench::run::{Arrival, Budget, Load, Pacing, Slot, run};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;

/// How the fake server answers: `tokens` events, the first at once, then `gap` apart
/// (zero: all in one write).
#[derive(Clone, Copy)]
struct Answer {
    tokens: u64,
    gap: Duration,
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

async fn connection(mut sock: TcpStream, answer: Answer) {
    sock.set_nodelay(true).ok();
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
        // Read and discard the body: the server keeps nothing per request.
        let mut left = content_length(&buf[..end]).saturating_sub(buf.len() - end);
        buf.clear();
        while left > 0 {
            match sock.read(&mut chunk).await {
                Ok(0) | Err(_) => return,
                Ok(n) => left = left.saturating_sub(n),
            }
        }
        let received = now_ns();
        let mut out = String::from(
            "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n",
        );
        let mut stamp = String::new();
        for k in 1..=answer.tokens {
            if k == 1 {
                stamp = format!("{received}:{}:", now_ns());
            }
            out.push_str(&event(k, k == answer.tokens, &stamp));
            if !answer.gap.is_zero() {
                if sock.write_all(out.as_bytes()).await.is_err() {
                    return;
                }
                out.clear();
                tokio::time::sleep(answer.gap).await;
            }
        }
        let done = "data: [DONE]\n\n";
        out.push_str(&format!("{:x}\r\n{done}\r\n0\r\n\r\n", done.len()));
        if sock.write_all(out.as_bytes()).await.is_err() {
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

/// Start the fake server on its own runtime thread; returns its URL.
fn fake_server(answer: Answer) -> String {
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
                tokio::spawn(connection(s, answer));
            }
        });
    });
    format!("http://{}", rx.recv().unwrap())
}

fn backend(url: &str) -> Arc<dyn Backend> {
    Arc::new(Sglang {
        http: Http::new(url, None).unwrap(),
        flusher: Flusher::None,
    })
}

/// Run one cell and return its records and wall time.
async fn cell(
    url: &str,
    prompt_tokens: u32,
    output: u64,
    load: Load,
    budget: Budget,
) -> (Vec<(RequestRecord, Option<f64>)>, f64) {
    let ids: Vec<u32> = (0..prompt_tokens).map(|i| 1000 + i % 30_000).collect();
    let tail = SharedTail::from_prompt(&Prompt::Ids(ids), 16);
    let shot = Arc::new(Shot {
        backend: backend(url),
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
    // The peak-RSS case runs first, in a fresh process, so earlier cases do not set the peak.
    let exe = std::env::current_exe().unwrap();
    let child = std::process::Command::new(exe)
        .arg("--rss-only")
        .output()
        .unwrap();
    print!("{}", String::from_utf8_lossy(&child.stdout));
    eprint!("{}", String::from_utf8_lossy(&child.stderr));

    // 1. Output tokens/s on one client core: 64 streams of 256 tokens, all written at once.
    let url = fake_server(Answer {
        tokens: 256,
        gap: Duration::ZERO,
    });
    let mut tps = Vec::new();
    for _ in 0..ROUNDS {
        let (r, wall) = one_core.block_on(cell(
            &url,
            100,
            256,
            Load::Closed { concurrency: 64 },
            Budget::Requests(640),
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
    let url = fake_server(Answer {
        tokens: 16,
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
        let (r, _) = one_core.block_on(cell(&url, 100, 16, load, Budget::Requests(0)));
        check(&r, 3 * streams, "concurrent streams");
        // Client-added: client TTFT minus the server's own time to its first event.
        ttft.add(r.iter().filter_map(|q| Some(q.0.ttft_s? - q.1?)).collect());
    }
    let (p50, p99) = ttft.ms();
    println!(
        "client-added TTFT at {streams} concurrent streams (client TTFT - server's own): p50 median {p50:.2} ms, p99 median {p99:.2} ms"
    );

    // 3. Open-loop send lateness at 500 requests/s (the CLI's multi-thread runtime).
    let url = fake_server(Answer {
        tokens: 4,
        gap: Duration::ZERO,
    });
    let multi = tokio::runtime::Runtime::new().unwrap();
    let mut late = Tails::default();
    for round in 0..ROUNDS {
        let pacing = Pacing::Thread {
            spin: Duration::from_micros(250),
        };
        let load = open_loop(Arrival::Poisson, 500.0, round as u64, 2000, pacing);
        let (r, _) = multi.block_on(cell(&url, 100, 4, load, Budget::Requests(0)));
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
    let url = fake_server(Answer {
        tokens: 4,
        gap: Duration::from_millis(250),
    });
    let (r, wall) = one_core.block_on(cell(
        &url,
        131_072,
        4,
        Load::Closed { concurrency: 1000 },
        Budget::Requests(1000),
    ));
    check(&r, 1000, "128k prompts");
    println!(
        "peak RSS with 1,000 concurrent 128k-token prompts: {:.0} MB (before that case {:.0} MB; {:.1} s for the cell)",
        vm_hwm_mb(),
        before,
        wall
    );
}
