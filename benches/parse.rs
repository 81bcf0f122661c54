//! The client's own parsing speed: it runs on the timing path, so it must be far faster
//! than any server it measures. Plain `std::time`; prints figures, asserts nothing.

use ctxbench::backend::ndjson::NdjsonParser;
use ctxbench::backend::sse::{SseItem, SseParser};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::hint::black_box;
use std::time::{Duration, Instant};

const EVENTS: usize = 100_000;
const RUNS: usize = 7;

/// An SGLang-native-like stream (incremental text, `meta_info` on each event), ~200 bytes
/// an event, with a keep-alive comment every 1000 events and the closing `[DONE]`.
fn sglang_stream() -> Vec<u8> {
    let mut s = String::new();
    for i in 0..EVENTS {
        if i % 1000 == 999 {
            s.push_str(": keep-alive\n\n");
        }
        s.push_str(&format!(
            "data: {{\"text\":\" tok{i:06} \u{e9}\",\"meta_info\":{{\"id\":\"3f2a9c0e1b7d4e8f9a6b5c4d3e2f1a0b\",\
             \"finish_reason\":null,\"prompt_tokens\":32768,\"completion_tokens\":{},\
             \"cached_tokens\":0,\"e2e_latency\":null}}}}\n\n",
            i + 1
        ));
    }
    s.push_str("data: [DONE]\n\n");
    s.into_bytes()
}

/// An Ollama `/api/generate`-like stream, ~200 bytes a line.
fn ollama_stream() -> Vec<u8> {
    let mut s = String::new();
    for i in 0..EVENTS {
        s.push_str(&format!(
            "{{\"model\":\"llama3.1:8b-instruct-q4_K_M\",\"created_at\":\"2025-01-01T00:00:00.{i:06}Z\",\
             \"response\":\" tok{i:06} \u{e9}\",\"done\":false,\"context_padding\":\"0123456789abcdef0123456789\"}}\n"
        ));
    }
    s.push_str(
        "{\"model\":\"llama3.1:8b-instruct-q4_K_M\",\"done\":true,\"total_duration\":1,\
         \"prompt_eval_count\":32768,\"prompt_eval_duration\":1,\"eval_count\":100000,\"eval_duration\":1}\n",
    );
    s.into_bytes()
}

/// Seeded chunk boundaries with sizes in `lo..=hi` bytes, as reads from a socket.
fn chunks(bytes: &[u8], lo: usize, hi: usize) -> Vec<&[u8]> {
    let mut rng = ChaCha8Rng::seed_from_u64(42);
    let mut out = Vec::new();
    let mut at = 0;
    while at < bytes.len() {
        let n = rng.random_range(lo..=hi).min(bytes.len() - at);
        out.push(&bytes[at..at + n]);
        at += n;
    }
    out
}

fn median(mut d: Vec<Duration>) -> Duration {
    d.sort();
    d[d.len() / 2]
}

fn report(name: &str, items: usize, bytes: usize, times: Vec<Duration>) {
    let min = *times.iter().min().unwrap();
    let med = median(times).as_secs_f64();
    println!(
        "{name:<44} {:>7.2} M items/s  {:>7.0} MiB/s  ({items} items, {:.1} MiB, median {:.2} ms of {RUNS}, min {:.2} ms)",
        items as f64 / med / 1e6,
        bytes as f64 / med / (1 << 20) as f64,
        bytes as f64 / (1 << 20) as f64,
        med * 1e3,
        min.as_secs_f64() * 1e3,
    );
}

fn bench_sse(name: &str, chunks: &[&[u8]], total: usize, with_json: bool) {
    let mut times = Vec::new();
    let mut n = 0;
    for _ in 0..RUNS {
        let t = Instant::now();
        let mut p = SseParser::new();
        let mut items = Vec::new();
        let mut events = 0usize;
        for c in chunks {
            items.clear();
            p.push_into(c, &mut items).expect("valid stream");
            for item in &items {
                if let SseItem::Event(e) = item {
                    events += 1;
                    if with_json && e.data != "[DONE]" {
                        let v: serde_json::Value = serde_json::from_str(&e.data).expect("json");
                        black_box(v);
                    }
                }
            }
            black_box(&items);
        }
        black_box(p.finish().expect("complete"));
        times.push(t.elapsed());
        n = events;
    }
    assert_eq!(n, EVENTS + 1);
    report(name, n, total, times);
}

fn bench_ndjson(name: &str, chunks: &[&[u8]], total: usize) {
    let mut times = Vec::new();
    let mut n = 0;
    for _ in 0..RUNS {
        let t = Instant::now();
        let mut p = NdjsonParser::new();
        let mut values = Vec::new();
        let mut count = 0usize;
        for c in chunks {
            values.clear();
            p.push_into(c, &mut values).expect("valid stream");
            count += values.len();
            black_box(&values);
        }
        black_box(p.finish().expect("complete"));
        times.push(t.elapsed());
        n = count;
    }
    assert_eq!(n, EVENTS + 1);
    report(name, n, total, times);
}

fn main() {
    let sse = sglang_stream();
    let ndjson = ollama_stream();
    println!(
        "SSE stream: {} events, {:.0} bytes/event; NDJSON stream: {} lines, {:.0} bytes/line",
        EVENTS + 1,
        sse.len() as f64 / (EVENTS + 1) as f64,
        EVENTS + 1,
        ndjson.len() as f64 / (EVENTS + 1) as f64
    );
    let big = chunks(&sse, 1024, 4096);
    let small = chunks(&sse, 17, 97);
    bench_sse("SSE, 1-4 KiB chunks", &big, sse.len(), false);
    bench_sse(
        "SSE, 17-97 B chunks (most lines split)",
        &small,
        sse.len(),
        false,
    );
    bench_sse(
        "SSE + serde_json::Value per event, 1-4 KiB",
        &big,
        sse.len(),
        true,
    );
    let big = chunks(&ndjson, 1024, 4096);
    let small = chunks(&ndjson, 17, 97);
    bench_ndjson(
        "NDJSON (incl. JSON parse), 1-4 KiB chunks",
        &big,
        ndjson.len(),
    );
    bench_ndjson(
        "NDJSON (incl. JSON parse), 17-97 B chunks",
        &small,
        ndjson.len(),
    );
}
