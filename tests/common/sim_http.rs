//! The simulator's HTTP tests share these: a simulator with cheap costs unless a test says
//! otherwise, a client, and readers that time each stream event as it arrives.

// Each simulator test file uses a different part of what is re-exported here.
#![allow(unused_imports)]

pub use super::truth_after;
pub use clap::Parser;
pub use ctxbench::backend::prometheus::{Exposition, read};
pub use ctxbench::sim::{CostModel, SimConfig, SimCostArgs, SimServer};
pub use futures::StreamExt;
pub use serde_json::{Value, json};
pub use std::time::{Duration, Instant};

#[derive(Parser)]
#[command(args_override_self = true)]
pub struct CostFlags {
    #[command(flatten)]
    pub cost: SimCostArgs,
}

/// Cheap costs unless a test says otherwise: 1 ms prefill, 1 ms per decode step.
pub const FAST: &[&str] = &[
    "--sim-t0", "0.001", "--sim-p0", "1e9", "--sim-q", "0", "--sim-d0", "0.001", "--sim-d1", "0",
];

pub async fn start(flags: &[&str]) -> SimServer {
    start_seeded(flags, 0).await
}

pub async fn start_seeded(flags: &[&str], seed: u64) -> SimServer {
    let argv = std::iter::once("sim")
        .chain(FAST.iter().copied())
        .chain(flags.iter().copied());
    let cost = CostFlags::try_parse_from(argv)
        .expect("test flags parse")
        .cost;
    let config = SimConfig {
        cost,
        seed,
        model_name: "sim-model".to_string(),
    };
    SimServer::start("127.0.0.1", 0, config)
        .await
        .expect("sim starts")
}

pub fn client() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::new()
}

/// One SSE block as the client received it.
#[derive(Debug, Clone)]
pub struct Event {
    pub at: Duration,
    /// The `data:` payload, or the whole block for comments.
    pub data: String,
}

impl Event {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.data).unwrap_or_else(|e| panic!("event {:?}: {e}", self.data))
    }
    pub fn is_comment(&self) -> bool {
        self.data.starts_with(':')
    }
}

/// What came back on a stream: its events and how it ended.
pub struct Streamed {
    pub events: Vec<Event>,
    /// `Err` when the connection broke mid-body.
    pub end: Result<(), String>,
}

impl Streamed {
    pub fn data(&self) -> Vec<&Event> {
        self.events.iter().filter(|e| !e.is_comment()).collect()
    }
    pub fn json_events(&self) -> Vec<Value> {
        self.data()
            .iter()
            .filter(|e| e.data != "[DONE]")
            .map(|e| e.json())
            .collect()
    }
    pub fn ends_with_done(&self) -> bool {
        self.data().last().is_some_and(|e| e.data == "[DONE]")
    }
}

/// POST `body` as JSON; the response once its headers are in.
pub async fn send_json(http: &reqwest::Client, url: &str, body: &Value) -> reqwest::Response {
    http.post(url)
        .json(body)
        .send()
        .await
        .expect("request sent")
}

pub async fn post_stream(http: &reqwest::Client, url: &str, body: Value) -> Streamed {
    let sent = Instant::now();
    let response = send_json(http, url, &body).await;
    assert_eq!(response.status(), 200, "streamed request refused");
    read_stream(response, sent, None).await
}

/// Read a stream; with `for_at_most`, stop reading after that long.
pub async fn read_stream(
    response: reqwest::Response,
    sent: Instant,
    for_at_most: Option<Duration>,
) -> Streamed {
    let mut body = response.bytes_stream();
    let mut buffer = String::new();
    let mut events = Vec::new();
    let deadline = tokio::time::Instant::now() + for_at_most.unwrap_or(Duration::from_secs(30));
    let end = loop {
        let chunk = match tokio::time::timeout_at(deadline, body.next()).await {
            Err(_) => break Ok(()),
            Ok(None) => break Ok(()),
            Ok(Some(Err(e))) => break Err(e.to_string()),
            Ok(Some(Ok(chunk))) => chunk,
        };
        let at = sent.elapsed();
        buffer.push_str(&String::from_utf8_lossy(&chunk));
        while let Some(end) = buffer.find("\n\n") {
            let block: String = buffer.drain(..end + 2).collect();
            let block = block.trim_end();
            let data = block.strip_prefix("data: ").unwrap_or(block).to_string();
            events.push(Event { at, data });
        }
    };
    Streamed { events, end }
}

pub async fn post_json(http: &reqwest::Client, url: &str, body: Value) -> (u16, Value) {
    let response = send_json(http, url, &body).await;
    let status = response.status().as_u16();
    let text = response.text().await.expect("body");
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

pub fn ids(n: usize, first: u32) -> Vec<u32> {
    (0..n as u32).map(|i| 300 + (first + i) % 400).collect()
}

pub fn generate_body(input_ids: &[u32], max_new_tokens: u64, stream: bool) -> Value {
    json!({
        "input_ids": input_ids,
        "sampling_params": {"max_new_tokens": max_new_tokens, "ignore_eos": true, "temperature": 0},
        "stream": stream,
    })
}

pub fn completion_tokens(event: &Value) -> u64 {
    event["meta_info"]["completion_tokens"]
        .as_u64()
        .expect("completion_tokens")
}

/// POST `body` to `path` on the server at `base`: status and JSON (or the text as a string).
pub async fn post_at(http: &reqwest::Client, base: &str, path: &str, body: Value) -> (u16, Value) {
    post_json(http, &format!("{base}{path}"), body).await
}

/// GET `url` and read its JSON body.
pub async fn get_json(http: &reqwest::Client, url: &str) -> Value {
    http.get(url)
        .send()
        .await
        .expect("request sent")
        .json()
        .await
        .expect("a JSON body")
}

/// A whole (not streamed) native `/generate` of `prompt_tokens` ids and `max_new_tokens`
/// forced tokens on the server at `base`.
pub async fn generate_at(
    http: &reqwest::Client,
    base: &str,
    prompt_tokens: usize,
    max_new_tokens: u64,
) -> (u16, Value) {
    let body = generate_body(&ids(prompt_tokens, 0), max_new_tokens, false);
    post_at(http, base, "/generate", body).await
}

/// GET `url`: the status only.
pub async fn get_status(http: &reqwest::Client, url: &str) -> reqwest::StatusCode {
    http.get(url).send().await.expect("request sent").status()
}

/// `/metrics`, parsed; every line must be a sample the parser reads.
pub async fn scrape(http: &reqwest::Client, url: &str) -> Exposition {
    let response = http.get(format!("{url}/metrics")).send().await.unwrap();
    let text = response.text().await.unwrap();
    let m = read(&text);
    assert!(
        m.unreadable.is_empty(),
        "/metrics does not parse: {:?}\n{text}",
        m.unreadable
    );
    m
}

/// The one sample of a counter or gauge.
pub fn scalar(m: &Exposition, name: &str) -> f64 {
    let values = m.scalars(name).collect::<Vec<_>>();
    assert_eq!(
        values.len(),
        1,
        "{name} missing or not one scalar: {values:?}"
    );
    values[0]
}
