//! The bench's fake SGLang server: exact event timing from the request's arrival, counts of
//! what it saw, and as little work per event as a server can do (the answer built once,
//! stamped in place, events that fell due together written together), so that the client's
//! cost is what the bench sees.

use super::rx_stamp;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio::time::Instant;

/// How the server answers: `tokens` events, the first `ttft` after it has the whole
/// request, then `gap` apart (zero: all in one write). Times are kept from the request's
/// arrival, so a late timer tick delays one event, never the ones after it.
#[derive(Clone, Copy)]
pub struct Answer {
    pub tokens: u64,
    pub ttft: Duration,
    pub gap: Duration,
}

/// What the server saw, counted by the server: requests it held at once (from having the
/// whole request to writing its last event), the time it held them, connections accepted.
#[derive(Default)]
pub struct Seen {
    in_flight: AtomicU64,
    pub max_in_flight: AtomicU64,
    pub served: AtomicU64,
    pub busy_ns: AtomicU64,
    pub accepted: AtomicU64,
}

impl Seen {
    pub fn reset(&self) {
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

/// The clock the server stamps its answers with, the kernel's receive stamps' own: the
/// answer's text says when the request's last bytes reached the socket and when the first
/// event was written, so a client can take the server's own time out of TTFT.
fn now_ns() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
}

/// Digits of each stamp: fixed, so the answer can be built once and stamped in place.
const STAMP_DIGITS: usize = 20;

/// The server's own time to its first event, from a stream's text (`received:first:…`).
pub fn server_ttft_s(text: &str) -> Option<f64> {
    let mut it = text.split(':');
    let received: u64 = it.next()?.parse().ok()?;
    let first: u64 = it.next()?.parse().ok()?;
    Some(first.checked_sub(received)? as f64 * 1e-9)
}

/// One answer's bytes, built once: the response head and every event, with where each
/// event ends and where each event's stamp sits.
struct Template {
    bytes: Vec<u8>,
    /// `ends[k]`: the end of event k+1's chunk (the last one's includes `[DONE]` and the
    /// body's end).
    ends: Vec<usize>,
    /// Where the first event's stamp sits. Only the first event is stamped: a cumulative
    /// stream's reader takes from each later event just the text past what it has.
    stamp_at: usize,
}

impl Template {
    fn new(tokens: u64) -> Self {
        let mut bytes = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n".to_vec();
        let (mut ends, mut stamp_at) = (Vec::new(), 0);
        let blank = format!("{}:{}:", "0".repeat(STAMP_DIGITS), "0".repeat(STAMP_DIGITS));
        for k in 1..=tokens {
            let fin = if k == tokens {
                r#"{"type":"length"}"#
            } else {
                "null"
            };
            let prefix = "data: {\"text\":\"";
            let ev = format!(
                "{prefix}{blank}{}\",\"meta_info\":{{\"prompt_tokens\":100,\"cached_tokens\":0,\"completion_tokens\":{k},\"finish_reason\":{fin}}}}}\n\n",
                "x".repeat(k as usize)
            );
            let head = format!("{:x}\r\n", ev.len());
            if k == 1 {
                stamp_at = bytes.len() + head.len() + prefix.len();
            }
            bytes.extend_from_slice(head.as_bytes());
            bytes.extend_from_slice(ev.as_bytes());
            bytes.extend_from_slice(b"\r\n");
            ends.push(bytes.len());
        }
        let done = "data: [DONE]\n\n";
        bytes.extend_from_slice(format!("{:x}\r\n{done}\r\n0\r\n\r\n", done.len()).as_bytes());
        *ends.last_mut().expect("at least one token") = bytes.len();
        Template {
            bytes,
            ends,
            stamp_at,
        }
    }

    /// This request's copy of the answer, stamped with when the request reached the socket.
    fn stamped(&self, received: u64) -> Vec<u8> {
        let mut out = self.bytes.clone();
        self.stamp(&mut out, 0, received);
        out
    }

    /// Stamp the first event's write time, the moment before it is written.
    fn stamp_first(&self, out: &mut [u8]) {
        self.stamp(out, 1, now_ns());
    }

    fn stamp(&self, out: &mut [u8], which: usize, at_ns: u64) {
        let at = self.stamp_at + which * (STAMP_DIGITS + 1);
        let digits = format!("{at_ns:0w$}", w = STAMP_DIGITS);
        out[at..at + STAMP_DIGITS].copy_from_slice(digits.as_bytes());
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

async fn connection(mut sock: TcpStream, answer: Answer, template: Arc<Template>, seen: Arc<Seen>) {
    sock.set_nodelay(true).ok();
    let stamped = rx_stamp::enable(&sock);
    seen.accepted.fetch_add(1, Ordering::Relaxed);
    let mut buf: Vec<u8> = Vec::new();
    let mut chunk = vec![0u8; 16 << 10];
    // When the bytes of the last read reached the socket (the kernel's stamp, else now).
    let mut last_rx = 0u64;
    loop {
        let end = loop {
            if let Some(e) = header_end(&buf) {
                break e;
            }
            match rx_stamp::read(&sock, &mut chunk).await {
                Ok((0, _)) | Err(_) => return,
                Ok((n, at)) => {
                    last_rx = at.filter(|_| stamped).unwrap_or_else(now_ns);
                    buf.extend_from_slice(&chunk[..n]);
                }
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
            match rx_stamp::read(&sock, &mut chunk).await {
                Ok((0, _)) | Err(_) => return,
                Ok((n, at)) => {
                    last_rx = at.filter(|_| stamped).unwrap_or_else(now_ns);
                    left = left.saturating_sub(n);
                }
            }
        }
        // The answer's clock starts when the request was whole at the socket: the server's
        // own delay in reading it is the server's time.
        let arrived = Instant::now() - Duration::from_nanos(now_ns().saturating_sub(last_rx));
        let received = last_rx;
        seen.begin();
        let ok = answer_one(&mut sock, answer, &template, received, arrived).await;
        seen.end(arrived.elapsed());
        if !ok {
            return;
        }
    }
}

/// Write one answer on time; false when the client went away.
async fn answer_one(
    sock: &mut TcpStream,
    answer: Answer,
    template: &Template,
    received: u64,
    arrived: Instant,
) -> bool {
    let due = |k: u64| arrived + answer.ttft + answer.gap * (k as u32);
    let mut out = Vec::new();
    let (mut written, mut done) = (0usize, 0u64);
    while done < answer.tokens {
        let next = due(done);
        if next > Instant::now() {
            tokio::time::sleep_until(next).await;
        }
        if done == 0 {
            out = template.stamped(received);
            template.stamp_first(&mut out);
        }
        // Every event due by now goes in this write, as a server that fell behind flushes.
        let mut upto = done + 1;
        if answer.gap.is_zero() {
            upto = answer.tokens;
        } else {
            let now = Instant::now();
            while upto < answer.tokens && due(upto) <= now {
                upto += 1;
            }
        }
        let end = template.ends[upto as usize - 1];
        if sock.write_all(&out[written..end]).await.is_err() {
            return false;
        }
        (written, done) = (end, upto);
    }
    true
}

/// Start the server on its own runtime thread; returns its address and its counts.
pub fn start(answer: Answer) -> (std::net::SocketAddr, Arc<Seen>) {
    let seen = Arc::new(Seen::default());
    let counts = seen.clone();
    let template = Arc::new(Template::new(answer.tokens));
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
                tokio::spawn(connection(s, answer, template.clone(), seen.clone()));
            }
        });
    });
    (rx.recv().unwrap(), counts)
}
