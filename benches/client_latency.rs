//! Benchmark (not a test): the client's own added latency — time from a server writing an
//! SSE event to ctxbench timestamping its arrival — on loopback, in one process and clock.
//! Prints median and p99 over several rounds; compare runs as ratios, machines are noisy.

use ctxbench::backend::http::Http;
use ctxbench::backend::sse::ItemRef;
use serde_json::json;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

const EVENTS: usize = 500;
const GAP: Duration = Duration::from_micros(500);
const ROUNDS: usize = 5;

/// A minimal HTTP/1.1 server streaming `EVENTS` SSE events, noting when each was written.
async fn serve(listener: TcpListener, written: Arc<Mutex<Vec<Instant>>>) {
    loop {
        let Ok((mut sock, _)) = listener.accept().await else {
            return;
        };
        sock.set_nodelay(true).ok();
        let written = written.clone();
        tokio::spawn(async move {
            let mut buf = vec![0u8; 65536];
            let mut req = Vec::new();
            while !req.windows(4).any(|w| w == b"\r\n\r\n") {
                match sock.read(&mut buf).await {
                    Ok(0) | Err(_) => return,
                    Ok(n) => req.extend_from_slice(&buf[..n]),
                }
            }
            let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n";
            if sock.write_all(head.as_bytes()).await.is_err() {
                return;
            }
            for i in 0..EVENTS {
                let ev = format!(
                    "data: {{\"text\":\"token {i}\",\"meta_info\":{{\"completion_tokens\":{i}}}}}\n\n"
                );
                let chunk = format!("{:x}\r\n{ev}\r\n", ev.len());
                written.lock().unwrap().push(Instant::now());
                if sock.write_all(chunk.as_bytes()).await.is_err() {
                    return;
                }
                tokio::time::sleep(GAP).await;
            }
            let _ = sock.write_all(b"0\r\n\r\n").await;
        });
    }
}

fn quantile(v: &mut [f64], q: f64) -> f64 {
    v.sort_by(f64::total_cmp);
    v[((v.len() - 1) as f64 * q).round() as usize]
}

fn main() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let written = Arc::new(Mutex::new(Vec::new()));
        tokio::spawn(serve(listener, written.clone()));
        let http = Http::new(&url, None).unwrap();
        let mut medians = Vec::new();
        let mut p99s = Vec::new();
        for _ in 0..ROUNDS {
            written.lock().unwrap().clear();
            let mut seen = Vec::with_capacity(EVENTS);
            let start = Instant::now();
            http.post_sse("/generate", &json!({}), Duration::from_secs(60), |at, item| {
                if matches!(item, ItemRef::Event(_)) {
                    seen.push(start + at);
                }
                Ok(false)
            })
            .await
            .unwrap();
            let w = written.lock().unwrap().clone();
            let mut lat: Vec<f64> = seen
                .iter()
                .zip(&w)
                .map(|(s, w)| s.saturating_duration_since(*w).as_secs_f64() * 1e6)
                .collect();
            assert_eq!(lat.len(), EVENTS);
            medians.push(quantile(&mut lat, 0.5));
            p99s.push(quantile(&mut lat, 0.99));
        }
        println!(
            "client_latency: write -> timestamp, {EVENTS} events x {ROUNDS} rounds: median {:.1} us (rounds {:?}), p99 {:.1} us",
            quantile(&mut medians.clone(), 0.5),
            medians.iter().map(|m| format!("{m:.1}")).collect::<Vec<_>>(),
            quantile(&mut p99s, 0.5)
        );
    });
}
