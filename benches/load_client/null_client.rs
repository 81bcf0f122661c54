//! The least a client can do against the bench server: raw sockets, one prebuilt request,
//! the answer read to its end and not parsed beyond the server's stamp. What it reaches on
//! the same cores is the ceiling the real client is held to.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::time::Instant;

/// One request as the null client saw it.
pub struct Sample {
    /// Its place in the run: the first `streams` are the first wave.
    pub index: u64,
    /// From writing the request to reading the answer's first bytes.
    pub ttft_s: f64,
    /// The server's own time to its first event, from its stamp.
    pub server_s: f64,
}

/// An SGLang `/generate` request with `prompt_tokens` ids, as bytes on the wire.
fn request(addr: SocketAddr, prompt_tokens: u32, output: u64) -> Vec<u8> {
    let ids: Vec<u32> = (0..prompt_tokens).map(|i| 1000 + i % 30_000).collect();
    let body = serde_json::json!({
        "input_ids": ids,
        "sampling_params": {"max_new_tokens": output, "temperature": 0.0, "ignore_eos": true},
        "stream": true,
    })
    .to_string();
    format!(
        "POST /generate HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

/// The stamp in the first event's text.
fn server_s(answer: &[u8]) -> Option<f64> {
    let key = b"\"text\":\"";
    let at = answer.windows(key.len()).position(|w| w == key)? + key.len();
    let text = std::str::from_utf8(&answer[at..(at + 64).min(answer.len())]).ok()?;
    super::server::server_ttft_s(text)
}

/// `streams` connections in a closed loop, `n` requests in all; returns every request's
/// sample and the output tokens/s.
pub async fn run(
    addr: SocketAddr,
    streams: usize,
    n: u64,
    prompt_tokens: u32,
    output: u64,
) -> (Vec<Sample>, f64) {
    let req = Arc::new(request(addr, prompt_tokens, output));
    let mut socks = Vec::new();
    for _ in 0..streams {
        let s = TcpStream::connect(addr).await.expect("connect");
        s.set_nodelay(true).ok();
        socks.push(s);
    }
    let next = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let tasks: Vec<_> = socks
        .into_iter()
        .map(|mut sock| {
            let (req, next) = (req.clone(), next.clone());
            tokio::spawn(async move {
                let mut out = Vec::new();
                let mut answer = Vec::with_capacity(32 << 10);
                let mut chunk = vec![0u8; 32 << 10];
                loop {
                    let index = next.fetch_add(1, Ordering::Relaxed);
                    if index >= n {
                        return out;
                    }
                    answer.clear();
                    let sent = Instant::now();
                    sock.write_all(&req).await.expect("write");
                    let mut first = None;
                    while !answer.ends_with(b"\r\n0\r\n\r\n") {
                        let got = sock.read(&mut chunk).await.expect("read");
                        assert!(got > 0, "the server closed the connection");
                        first.get_or_insert_with(|| sent.elapsed());
                        answer.extend_from_slice(&chunk[..got]);
                    }
                    out.push(Sample {
                        index,
                        ttft_s: first.expect("read").as_secs_f64(),
                        server_s: server_s(&answer).expect("stamp"),
                    });
                }
            })
        })
        .collect();
    let mut samples = Vec::new();
    for t in tasks {
        samples.extend(t.await.expect("stream"));
    }
    let wall = start.elapsed().as_secs_f64();
    (samples, n as f64 * output as f64 / wall)
}
