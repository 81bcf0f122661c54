//! The client's own parsing speed: it runs on the timing path, so it must be far faster
//! than any server it measures. Plain `std::time`; prints figures, asserts nothing.
//! `-- --fold[=sglang|sglang-ascii|openai|llamacpp]`: only the whole per-event folds (SSE
//! parse plus the backend's fold), once each, for counting instructions under `valgrind
//! --tool=callgrind --toggle-collect='*fold_chunks*'` (instructions / events printed = per
//! event).

use ctxbench::backend::ndjson::NdjsonParser;
use ctxbench::backend::sse::{ItemRef, SseBatch, SseItem, SseParser};
use ctxbench::backend::{FoldApi, fold_chunks};
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

/// Events in one request's stream in the fold benches (the last one final), and requests.
const FOLD_EVENTS: usize = 128;
const FOLD_REQUESTS: usize = 800;
/// Requests per fold under `--fold` (enough for a steady count, few enough for callgrind).
const COUNT_REQUESTS: usize = 100;

/// One SGLang-native request's stream as the simulator sends it: cumulative text,
/// `meta_info` on each event, the finish reason and latency on the last, then `[DONE]`.
/// One event per chunk, as a stream with a gap between tokens arrives. Each token holds an
/// `é` unless `ascii`: UTF-8 checks cost more per byte on text that is not all ASCII.
fn sglang_request(ascii: bool) -> Vec<Vec<u8>> {
    let mut text = String::new();
    let mut out = Vec::new();
    for i in 1..=FOLD_EVENTS {
        let piece = if ascii { " tok" } else { " \u{e9}" };
        text.push_str(&format!(" tok{i:03}{piece}"));
        let (fin, tail) = if i == FOLD_EVENTS {
            (
                format!("{{\"type\":\"length\",\"length\":{i}}}"),
                ",\"e2e_latency\":0.153".to_string(),
            )
        } else {
            ("null".to_string(), String::new())
        };
        out.push(
            format!(
                "data: {{\"text\":\"{text}\",\"meta_info\":{{\"id\":\"3f2a9c0e1b7d4e8f9a6b5c4d3e2f1a0b\",\
                 \"finish_reason\":{fin},\"prompt_tokens\":32768,\"completion_tokens\":{i},\
                 \"cached_tokens\":0{tail}}}}}\n\n"
            )
            .into_bytes(),
        );
    }
    out.push(b"data: [DONE]\n\n".to_vec());
    out
}

/// One OpenAI chat request's stream as the simulator sends it with continuous usage: a
/// delta and the usage so far per chunk, the usage-only trailer, then `[DONE]`.
fn openai_request() -> Vec<Vec<u8>> {
    let chunk = |delta: &str, fin: &str, i: usize| {
        format!(
            "data: {{\"id\":\"chatcmpl-3f2a9c0e1b7d4e8f\",\"object\":\"chat.completion.chunk\",\
             \"created\":1735689600,\"model\":\"meta-llama/Llama-3.1-8B-Instruct\",\"choices\":[{delta}],\
             \"usage\":{{\"prompt_tokens\":32768,\"completion_tokens\":{i},\"total_tokens\":{}}}{fin}}}\n\n",
            32768 + i
        )
        .into_bytes()
    };
    let mut out = Vec::new();
    for i in 1..=FOLD_EVENTS {
        let fin = if i == FOLD_EVENTS {
            "\"length\""
        } else {
            "null"
        };
        let delta = format!(
            "{{\"index\":0,\"delta\":{{\"content\":\" tok{i:03} \u{e9}\"}},\"logprobs\":null,\"finish_reason\":{fin}}}"
        );
        out.push(chunk(&delta, "", i));
    }
    out.push(chunk("", "", FOLD_EVENTS));
    out.push(b"data: [DONE]\n\n".to_vec());
    out
}

/// One llama-server `/completion` stream: a piece and its token id per event, the final
/// summary event with `timings`.
fn llamacpp_request() -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    for i in 1..=FOLD_EVENTS {
        out.push(
            format!(
                "data: {{\"index\":0,\"content\":\" tok{i:03} \u{e9}\",\"tokens\":[{}],\"stop\":false,\
                 \"id_slot\":0,\"tokens_predicted\":{i},\"tokens_evaluated\":32768}}\n\n",
                1000 + i
            )
            .into_bytes(),
        );
    }
    out.push(
        format!(
            "data: {{\"index\":0,\"content\":\"\",\"tokens\":[],\"id_slot\":0,\"stop\":true,\
             \"model\":\"m\",\"tokens_predicted\":{FOLD_EVENTS},\"tokens_evaluated\":32768,\
             \"stop_type\":\"limit\",\"truncated\":false,\"tokens_cached\":0,\"timings\":{{\
             \"cache_n\":0,\"prompt_n\":32768,\"prompt_ms\":1200.5,\"predicted_n\":{FOLD_EVENTS},\
             \"predicted_ms\":900.25}}}}\n\n"
        )
        .into_bytes(),
    );
    out
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

/// `bench_sse` without JSON, into one batch reused for every chunk.
fn bench_sse_batch(name: &str, chunks: &[&[u8]], total: usize) {
    let mut times = Vec::new();
    let mut n = 0;
    for _ in 0..RUNS {
        let t = Instant::now();
        let mut p = SseParser::new();
        let mut items = SseBatch::default();
        let mut events = 0usize;
        for c in chunks {
            items.clear();
            p.push_batch(c, &mut items).expect("valid stream");
            for item in items.iter() {
                if let ItemRef::Event(e) = item {
                    events += 1;
                    black_box(e.data);
                }
            }
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

/// Requests folded one after another, each with a new parser and fold; rate in events.
fn bench_fold(name: &str, api: FoldApi, stream: &[Vec<u8>], runs: usize, requests: usize) {
    let bytes: usize = stream.iter().map(Vec::len).sum();
    let mut times = Vec::new();
    let mut events = 0;
    for _ in 0..runs {
        let t = Instant::now();
        let mut n = 0;
        for _ in 0..requests {
            let c = fold_chunks(api, stream.iter().map(Vec::as_slice)).expect("complete");
            n += c.events.len();
            black_box(c);
        }
        times.push(t.elapsed());
        events = n;
    }
    assert_eq!(events, FOLD_EVENTS * requests);
    report(name, events, bytes * requests, times);
}

fn folds(runs: usize, requests: usize, only: Option<&str>) {
    for (key, name, api, stream) in [
        (
            "sglang",
            "SGLang fold (SSE + fold), 1 event/chunk",
            FoldApi::Sglang,
            sglang_request(false),
        ),
        (
            "sglang-ascii",
            "SGLang fold, ASCII text",
            FoldApi::Sglang,
            sglang_request(true),
        ),
        (
            "openai",
            "OpenAI chat fold (SSE + fold), 1 event/chunk",
            FoldApi::Openai,
            openai_request(),
        ),
        (
            "llamacpp",
            "llama.cpp fold (SSE + fold), 1 event/chunk",
            FoldApi::Llamacpp,
            llamacpp_request(),
        ),
    ] {
        if only.is_none_or(|o| o == key) {
            bench_fold(name, api, &stream, runs, requests);
        }
    }
}

fn main() {
    let fold_only = std::env::args().find_map(|a| {
        a.strip_prefix("--fold")
            .map(|rest| rest.strip_prefix('=').map(str::to_string))
    });
    if let Some(only) = fold_only {
        println!("fold only: {COUNT_REQUESTS} requests of {FOLD_EVENTS} events, once each");
        folds(1, COUNT_REQUESTS, only.as_deref());
        return;
    }
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
    bench_sse_batch("SSE into a reused batch, 1-4 KiB chunks", &big, sse.len());
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
    folds(RUNS, FOLD_REQUESTS, None);
}
