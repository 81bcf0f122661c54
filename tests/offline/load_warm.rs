//! A closed-loop cell's connections are opened before its clock starts: seen from the
//! server's side (a TCP relay in front of the simulator noting when it accepted each
//! connection and when each generate request passed), every connection the cell's requests
//! use was open before its first request (none paid a connect), and the count is recorded
//! on the cell.

use crate::common;

use common::{load_args, sim, timing_lock};
use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::time::Instant;

/// What the relay saw: when it accepted each connection (by index), and each generate
/// request's arrival and connection.
#[derive(Default)]
struct Seen {
    accepted: Vec<Instant>,
    generates: Vec<(Instant, usize)>,
}

const GENERATE: &[u8] = b"POST /generate ";

/// The relay holds each server-to-client read this long, as a network between client and
/// server would. Without it the simulator answers in-process within ~55 µs, inside the time
/// a loaded client thread is off the CPU after each send: measured on 2 cores beside two busy
/// loops, a warm-up pass then sent each of its 9 GETs only after the last was answered, all
/// over the one pooled connection: 101 of 800 warm-ups fell short of 9, 94 of them with 1
/// (all four passes alike), and this test failed 1 run in 20 ("2 of 8 connections warmed"),
/// as it failed CI runs beside vLLM's tests. With 1 ms: 800 of 800 warm-ups opened all 9 in
/// their first pass, 80 of 80 runs passed. `a_pooled_connection_the_server_closed_does_not_end_the_warming` keeps the
/// in-process case and states its shortfall.
const LINK_DELAY: std::time::Duration = std::time::Duration::from_millis(1);

/// A TCP relay to `upstream` on a free loopback port; returns its URL and what it saw.
async fn relay(upstream: String) -> (String, Arc<Mutex<Seen>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let seen = Arc::new(Mutex::new(Seen::default()));
    let log = seen.clone();
    tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            let id = {
                let mut s = log.lock().unwrap();
                s.accepted.push(Instant::now());
                s.accepted.len() - 1
            };
            let (log, upstream) = (log.clone(), upstream.clone());
            tokio::spawn(async move {
                let Ok(server) = TcpStream::connect(&upstream).await else {
                    return;
                };
                client.set_nodelay(true).unwrap();
                server.set_nodelay(true).unwrap();
                let (mut cr, mut cw) = client.into_split();
                let (mut sr, mut sw) = server.into_split();
                tokio::spawn(async move {
                    let mut buf = vec![0u8; 64 << 10];
                    while let Ok(n) = sr.read(&mut buf).await {
                        if n == 0 {
                            break;
                        }
                        tokio::time::sleep(LINK_DELAY).await;
                        if cw.write_all(&buf[..n]).await.is_err() {
                            break;
                        }
                    }
                });
                // Client to server, noting each generate request line (one may straddle
                // two reads: the tail of the previous read is kept).
                let mut buf = vec![0u8; 64 << 10];
                let mut window: Vec<u8> = Vec::new();
                while let Ok(n) = cr.read(&mut buf).await {
                    if n == 0 {
                        break;
                    }
                    let at = Instant::now();
                    window.extend_from_slice(&buf[..n]);
                    let hits = window.windows(GENERATE.len()).filter(|w| *w == GENERATE);
                    let count = hits.count();
                    log.lock()
                        .unwrap()
                        .generates
                        .extend(std::iter::repeat_n((at, id), count));
                    let keep = window.len().min(GENERATE.len() - 1);
                    window.drain(..window.len() - keep);
                    if sw.write_all(&buf[..n]).await.is_err() {
                        break;
                    }
                }
            });
        }
    });
    (url, seen)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_closed_loop_cell_opens_its_connections_before_its_first_request() {
    let _t = timing_lock().await;
    // Cheap fixed costs: 20 ms prefill, 2 ms per decode step.
    let s = sim(common::FIXED_COSTS).await;
    let upstream = s.url().trim_start_matches("http://").to_string();
    let (url, seen) = relay(upstream).await;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("load.jsonl");
    const WORKERS: usize = 8;
    const REQUESTS: usize = 24;
    let r = ctxbench::load::execute(load_args(
        &url,
        &[
            "--lengths",
            "1k",
            "--concurrency",
            "8",
            "--requests",
            "24",
            "--output-tokens",
            "8",
            "--out",
            out.to_str().unwrap(),
        ],
    ))
    .await
    .expect("load runs");
    let cell = &r.cells[0];
    assert_eq!((cell.sent, cell.ok), (REQUESTS as u64, REQUESTS as u64));
    let warmed = (WORKERS + ctxbench::load::spare_connections(WORKERS)) as u64;
    assert_eq!(cell.warm_connections, Some(warmed));
    for q in &r.requests {
        assert_eq!(
            q.conn_reused,
            Some(true),
            "request {} went out on a connection opened for it",
            q.index
        );
    }
    // The cell's requests are the last generate requests through the relay (the warm-up
    // request and prompt calibration came before).
    let seen = seen.lock().unwrap();
    assert!(seen.generates.len() >= REQUESTS, "{}", seen.generates.len());
    let cell_requests = &seen.generates[seen.generates.len() - REQUESTS..];
    let first = cell_requests[0].0;
    let used: HashSet<usize> = cell_requests.iter().map(|g| g.1).collect();
    assert!(used.len() >= WORKERS, "{} connections", used.len());
    for c in &used {
        assert!(
            seen.accepted[*c] < first,
            "connection {c} was accepted {:?} after the cell's first request",
            seen.accepted[*c] - first
        );
    }
    // The count is in the file too, on the cell record.
    let f = ctxbench::resultfile::read(&out).unwrap();
    assert_eq!(f.load.cells[0].warm_connections, Some(warmed));
}

/// A server that, like llama-server after a stream, closes a kept-alive connection without
/// saying so: its first connection answers one request, then closes on the next one
/// unanswered (the worst case of the race between its close and the client's reuse).
async fn closes_after_first_answer() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        let mut first = true;
        while let Ok((mut conn, _)) = listener.accept().await {
            conn.set_nodelay(true).unwrap();
            let answers = if std::mem::take(&mut first) {
                1
            } else {
                usize::MAX
            };
            tokio::spawn(async move {
                let mut buf = vec![0u8; 8192];
                let mut answered = 0;
                // One read per request: the client sends each GET whole and waits.
                while let Ok(n) = conn.read(&mut buf).await {
                    if n == 0 || answered == answers {
                        break;
                    }
                    let ok = b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok";
                    if conn.write_all(ok).await.is_err() {
                        break;
                    }
                    answered += 1;
                }
            });
        }
    });
    url
}

/// Issue 37 §3: "warming the cell's connections failed … it runs cold" on the first cell
/// against a fresh llama-server was its warm-up stream's connection, closed by the server
/// but still pooled: a GET sent on it failed and the failure ended the warming. Now that GET
/// is sent again on a new connection and every connection is warmed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pooled_connection_the_server_closed_does_not_end_the_warming() {
    let url = closes_after_first_answer().await;
    let http = ctxbench::backend::http::Http::new(&url, None).unwrap();
    let timeout = std::time::Duration::from_secs(10);
    let (status, _) = http
        .call(reqwest::Method::GET, "/health", None, timeout)
        .await
        .unwrap();
    assert_eq!(status, 200);
    // The first connection is pooled; the server will close it on its next request.
    let warmed = http.warm(4, timeout).await.expect("warming goes on");
    // Past the failed GET: more than the one connection the server closed. Not always all
    // four, and why was measured (a timeline of every GET, 4 copies × 200 runs, 25–40 % short
    // on 2 loaded cores): a `/health` answer takes 40–100 µs on loopback, and under load
    // the thread sending a pass's GETs loses the CPU between them, so each GET was answered
    // before the next was sent, in the same task or spawned apart. Every GET then found
    // the one live connection idle and no pass opened another. HTTP/1 gives no way to keep
    // a connection busy without a slow answer; the cell states the shortfall as
    // `warm_connections`, and its first requests open the rest inside their TTFT.
    assert!((2..=4).contains(&warmed), "{warmed}");
}
