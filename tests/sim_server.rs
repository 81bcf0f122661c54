//! The simulated server over real HTTP on 127.0.0.1: wire shapes of both APIs, timing against
//! the cost model, the prefix cache, limits, and every injected fault.

use clap::Parser;
use ctxbench::sim::{CostModel, RequestTruth, SimConfig, SimCostArgs, SimServer};
use futures::StreamExt;
use serde_json::{Value, json};
use std::time::{Duration, Instant};

#[derive(Parser)]
#[command(args_override_self = true)]
struct CostFlags {
    #[command(flatten)]
    cost: SimCostArgs,
}

/// Cheap costs unless a test says otherwise: 1 ms prefill, 1 ms per decode step.
const FAST: &[&str] = &[
    "--sim-t0", "0.001", "--sim-p0", "1e9", "--sim-q", "0", "--sim-d0", "0.001", "--sim-d1", "0",
];

async fn start(flags: &[&str]) -> SimServer {
    start_seeded(flags, 0).await
}

async fn start_seeded(flags: &[&str], seed: u64) -> SimServer {
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

fn client() -> reqwest::Client {
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::new()
}

/// One SSE block as the client received it.
#[derive(Debug, Clone)]
struct Event {
    at: Duration,
    /// The `data:` payload, or the whole block for comments.
    data: String,
}

impl Event {
    fn json(&self) -> Value {
        serde_json::from_str(&self.data).unwrap_or_else(|e| panic!("event {:?}: {e}", self.data))
    }
    fn is_comment(&self) -> bool {
        self.data.starts_with(':')
    }
}

/// What came back on a stream: its events and how it ended.
struct Streamed {
    events: Vec<Event>,
    /// `Err` when the connection broke mid-body.
    end: Result<(), String>,
}

impl Streamed {
    fn data(&self) -> Vec<&Event> {
        self.events.iter().filter(|e| !e.is_comment()).collect()
    }
    fn json_events(&self) -> Vec<Value> {
        self.data()
            .iter()
            .filter(|e| e.data != "[DONE]")
            .map(|e| e.json())
            .collect()
    }
    fn ends_with_done(&self) -> bool {
        self.data().last().is_some_and(|e| e.data == "[DONE]")
    }
}

async fn post_stream(http: &reqwest::Client, url: &str, body: Value) -> Streamed {
    let sent = Instant::now();
    let response = http
        .post(url)
        .json(&body)
        .send()
        .await
        .expect("request sent");
    assert_eq!(response.status(), 200, "streamed request refused");
    read_stream(response, sent, None).await
}

/// Read a stream; with `for_at_most`, stop reading after that long.
async fn read_stream(
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

async fn post_json(http: &reqwest::Client, url: &str, body: Value) -> (u16, Value) {
    let response = http
        .post(url)
        .json(&body)
        .send()
        .await
        .expect("request sent");
    let status = response.status().as_u16();
    let text = response.text().await.expect("body");
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

/// Truth is recorded as a stream ends; give the server a moment after a broken stream.
async fn truth_after(server: &SimServer, n: usize) -> Vec<RequestTruth> {
    for _ in 0..100 {
        let truth = server.truth();
        if truth.len() >= n {
            return truth;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    server.truth()
}

fn ids(n: usize, first: u32) -> Vec<u32> {
    (0..n as u32).map(|i| 300 + (first + i) % 400).collect()
}

fn generate_body(input_ids: &[u32], max_new_tokens: u64, stream: bool) -> Value {
    json!({
        "input_ids": input_ids,
        "sampling_params": {"max_new_tokens": max_new_tokens, "ignore_eos": true, "temperature": 0},
        "stream": stream,
    })
}

fn completion_tokens(event: &Value) -> u64 {
    event["meta_info"]["completion_tokens"]
        .as_u64()
        .expect("completion_tokens")
}

mod streaming {
    use super::*;

    #[tokio::test]
    async fn native_stream_is_cumulative_with_meta_info_then_done() {
        let http = client();
        let server = start(&[]).await;
        let url = format!("{}/generate", server.url());
        let body = json!({"text": "the secret of the sea", "sampling_params": {"max_new_tokens": 8, "ignore_eos": true}, "stream": true, "rid": "r-1"});
        let streamed = post_stream(&http, &url, body).await;
        assert!(streamed.ends_with_done(), "{:?}", streamed.events);
        let events = streamed.json_events();
        assert_eq!(events.len(), 8, "one token per event without --spec");
        for pair in events.windows(2) {
            let (a, b) = (
                pair[0]["text"].as_str().unwrap(),
                pair[1]["text"].as_str().unwrap(),
            );
            assert!(
                b.starts_with(a) && b.len() > a.len(),
                "text must be cumulative: {a:?} then {b:?}"
            );
            assert_eq!(completion_tokens(&pair[1]), completion_tokens(&pair[0]) + 1);
            assert!(pair[0]["meta_info"]["finish_reason"].is_null());
        }
        let last = &events[7]["meta_info"];
        assert_eq!(
            last["finish_reason"],
            json!({"type": "length", "length": 8})
        );
        assert_eq!(last["id"], "r-1");
        assert_eq!(last["prompt_tokens"], 6, "BOS + 5 vocabulary words");
        assert_eq!(last["cached_tokens"], 0);
        assert!(last["e2e_latency"].as_f64().unwrap() > 0.0);
        assert!(events[0]["meta_info"].get("e2e_latency").is_none());
        assert_eq!(events[7]["text"].as_str().unwrap().split(' ').count(), 8);
    }

    #[tokio::test]
    async fn native_whole_response_is_one_object() {
        let http = client();
        let server = start(&[]).await;
        let (status, body) = post_json(
            &http,
            &format!("{}/generate", server.url()),
            generate_body(&ids(20, 0), 5, false),
        )
        .await;
        assert_eq!(status, 200);
        assert_eq!(body["meta_info"]["completion_tokens"], 5);
        assert_eq!(body["meta_info"]["prompt_tokens"], 20);
        assert_eq!(body["meta_info"]["finish_reason"]["type"], "length");
        assert_eq!(body["text"].as_str().unwrap().split(' ').count(), 5);
    }

    #[tokio::test]
    async fn completions_stream_is_delta_with_usage_chunk() {
        let http = client();
        let server = start(&["--sim-page-size", "4"]).await;
        let url = format!("{}/v1/completions", server.url());
        let prompt = ids(30, 0);
        let body = json!({"model": "sim-model", "prompt": prompt, "max_tokens": 6, "ignore_eos": true, "stream": true,
            "stream_options": {"include_usage": true, "continuous_usage_stats": true}});
        let cold = post_stream(&http, &url, body.clone()).await.json_events();
        let cold_usage = &cold.last().unwrap()["usage"];
        assert!(
            cold_usage.get("prompt_tokens_details").is_none(),
            "nothing cached: {cold_usage}"
        );
        let streamed = post_stream(&http, &url, body).await;
        assert!(streamed.ends_with_done());
        let events = streamed.json_events();
        let (content, usage_chunk) = events.split_at(events.len() - 1);
        assert_eq!(content.len(), 6);
        let text: String = content
            .iter()
            .map(|e| e["choices"][0]["text"].as_str().unwrap())
            .collect();
        assert_eq!(
            text.split(' ').count(),
            6,
            "deltas concatenate to the whole text: {text:?}"
        );
        assert!(
            content[1]["choices"][0]["text"]
                .as_str()
                .unwrap()
                .starts_with(' ')
        );
        for (i, chunk) in content.iter().enumerate() {
            assert_eq!(chunk["object"], "text_completion");
            assert_eq!(
                chunk["usage"]["completion_tokens"],
                i as u64 + 1,
                "continuous usage is cumulative"
            );
            let finish = &chunk["choices"][0]["finish_reason"];
            assert_eq!(*finish, if i == 5 { json!("length") } else { Value::Null });
        }
        assert_eq!(usage_chunk[0]["choices"], json!([]));
        let usage = &usage_chunk[0]["usage"];
        assert_eq!(usage["prompt_tokens"], 30);
        assert_eq!(usage["completion_tokens"], 6);
        assert_eq!(usage["total_tokens"], 36);
        assert_eq!(
            usage["prompt_tokens_details"]["cached_tokens"], 28,
            "second identical prompt: floor(29/4)*4"
        );
    }

    #[tokio::test]
    async fn no_cache_report_omits_cached_tokens() {
        let http = client();
        let server = start(&["--no-cache-report", "--sim-page-size", "1"]).await;
        let url = format!("{}/v1/completions", server.url());
        let body = json!({"prompt": "the sea", "max_tokens": 2, "ignore_eos": true, "stream": true, "stream_options": {"include_usage": true}});
        let cold = post_stream(&http, &url, body.clone()).await.json_events();
        let warm = post_stream(&http, &url, body).await.json_events();
        for (i, events) in [&cold, &warm].into_iter().enumerate() {
            let usage = &events.last().unwrap()["usage"];
            assert_eq!(usage["prompt_tokens"], 3);
            assert!(usage.get("prompt_tokens_details").is_none(), "{usage}");
            assert_eq!(
                server.truth()[i].cached_tokens,
                [0, 2][i],
                "the cache works, it is only not reported"
            );
            assert!(
                events[0]["usage"].is_null(),
                "usage only on the last chunk without continuous stats"
            );
        }
    }

    #[tokio::test]
    async fn completions_default_to_16_tokens_and_whole_response() {
        let http = client();
        let server = start(&[]).await;
        let (status, body) = post_json(
            &http,
            &format!("{}/v1/completions", server.url()),
            json!({"prompt": "the", "ignore_eos": true}),
        )
        .await;
        assert_eq!(status, 200);
        assert_eq!(body["usage"]["completion_tokens"], 16);
        assert_eq!(body["choices"][0]["finish_reason"], "length");
        assert_eq!(body["object"], "text_completion");
    }

    #[tokio::test]
    async fn chat_role_chunk_arrives_before_prefill() {
        let http = client();
        let server = start(&["--sim-t0", "0.25"]).await;
        let url = format!("{}/v1/chat/completions", server.url());
        let body = json!({"messages": [{"role": "user", "content": "the sea"}], "max_tokens": 3, "ignore_eos": true, "stream": true});
        let streamed = post_stream(&http, &url, body).await;
        assert!(streamed.ends_with_done());
        let events = streamed.data();
        let role = events[0].json();
        assert_eq!(
            role["choices"][0]["delta"],
            json!({"role": "assistant", "content": ""})
        );
        assert_eq!(role["object"], "chat.completion.chunk");
        assert!(
            events[0].at < Duration::from_millis(150),
            "role chunk at {:?}",
            events[0].at
        );
        let first_content = events[1].json();
        assert!(
            !first_content["choices"][0]["delta"]["content"]
                .as_str()
                .unwrap()
                .is_empty()
        );
        assert!(
            events[1].at >= Duration::from_millis(250),
            "content before prefill: {:?}",
            events[1].at
        );
        // BOS + "user" + 2 words + "assistant"
        assert_eq!(server.truth()[0].prompt_tokens, 5);
        assert_eq!(server.truth()[0].route, "/v1/chat/completions");
    }

    #[tokio::test]
    async fn spec_events_carry_several_tokens_summing_to_max() {
        let http = client();
        let server = start_seeded(&["--spec", "4"], 11).await;
        let url = format!("{}/generate", server.url());
        let streamed = post_stream(&http, &url, generate_body(&ids(50, 0), 40, true)).await;
        let events = streamed.json_events();
        let mut previous = 0;
        let mut per_event = Vec::new();
        for event in &events {
            per_event.push(completion_tokens(event) - previous);
            previous = completion_tokens(event);
        }
        assert_eq!(per_event.iter().sum::<u64>(), 40);
        assert_eq!(
            per_event[0], 1,
            "the first event is the prefill's one token"
        );
        assert!(per_event.iter().any(|&n| n > 1), "{per_event:?}");
        assert!(
            per_event.iter().all(|&n| (1..=4).contains(&n)),
            "{per_event:?}"
        );
        assert!(events.len() < 40);
        let truth = &server.truth()[0];
        let step_tokens: Vec<u64> = truth.decode_steps.iter().map(|s| s.tokens).collect();
        assert_eq!(step_tokens, per_event[1..].to_vec());
        let last = &events.last().unwrap()["meta_info"];
        assert_eq!(last["spec_verify_ct"], truth.decode_steps.len());
    }
}

mod timing {
    use super::*;

    /// A loaded 2-core machine can delay any one request: the best of a few attempts must fit.
    const ATTEMPTS: u32 = 3;

    #[tokio::test]
    async fn ttft_and_decode_follow_the_cost_model() {
        let http = client();
        // Prefill 1000 tokens: 0.05 + 1000/20000 = 0.1 s; 20 decode steps at 5 ms = 0.1 s.
        let flags = ["--sim-t0", "0.05", "--sim-p0", "20000", "--sim-d0", "0.005"];
        let server = start(&flags).await;
        let model = CostModel {
            t0: 0.05,
            p0: 20000.0,
            q: 0.0,
            d0: 0.005,
            d1: 0.0,
        };
        let prefill_s = model.prefill_s(0, 1000);
        assert!((prefill_s - 0.1).abs() < 1e-9);
        let url = format!("{}/generate", server.url());
        http.get(format!("{}/health", server.url()))
            .send()
            .await
            .unwrap();
        let mut seen = Vec::new();
        for attempt in 0..ATTEMPTS {
            let prompt = ids(1000, attempt * 7);
            let streamed = post_stream(&http, &url, generate_body(&prompt, 21, true)).await;
            let events = streamed.data();
            let ttft_s = events[0].at.as_secs_f64();
            let decode_s = (events[20].at - events[0].at).as_secs_f64();
            assert!(
                ttft_s >= prefill_s,
                "first token before the prefill was paid: {ttft_s}"
            );
            seen.push((ttft_s, decode_s));
            // TTFT within 20 ms of the model; 20 steps within 15 % of 0.1 s.
            if ttft_s < prefill_s + 0.02 && (decode_s - 0.1).abs() < 0.015 {
                break;
            }
        }
        let (ttft_s, decode_s) = *seen.last().unwrap();
        assert!(
            ttft_s < prefill_s + 0.02,
            "TTFT vs {prefill_s} s, (ttft, decode) per attempt: {seen:?}"
        );
        assert!(
            (decode_s - 0.1).abs() < 0.015,
            "decode vs 0.1 s, (ttft, decode) per attempt: {seen:?}"
        );
        let truth = &server.truth()[0];
        assert!((truth.prefill_s - prefill_s).abs() < 1e-12);
        assert_eq!(truth.cached_tokens, 0);
        assert_eq!(truth.decode_steps.len(), 20);
        assert_eq!(truth.decode_steps[0].context_tokens, 1001);
        assert!((truth.decode_steps[0].cost_s - 0.005).abs() < 1e-12);
        assert_eq!(truth.first_event_tokens, 1);
        assert_eq!(truth.output_tokens, 21);
    }

    #[tokio::test]
    async fn decode_cost_grows_with_context() {
        let http = client();
        // d1 = 1e-5 s/token: a 4000-token context adds 40 ms to each 2 ms step.
        let server = start(&["--sim-d0", "0.002", "--sim-d1", "1e-5"]).await;
        let url = format!("{}/generate", server.url());
        let expected_s = 0.002 + 1e-5 * 4003.0;
        let mut steps_s = Vec::new();
        for attempt in 0..ATTEMPTS {
            let prompt = ids(4000, attempt * 7);
            let streamed = post_stream(&http, &url, generate_body(&prompt, 6, true)).await;
            let events = streamed.data();
            steps_s.push((events[5].at - events[0].at).as_secs_f64() / 5.0);
            if (steps_s[steps_s.len() - 1] - expected_s).abs() < 0.1 * expected_s {
                return;
            }
        }
        panic!("mean step vs {expected_s} s (±10 %), per attempt: {steps_s:?}");
    }

    #[tokio::test]
    async fn requests_compute_one_at_a_time() {
        let http = client();
        let server = start(&["--sim-t0", "0.1"]).await;
        let url = format!("{}/generate", server.url());
        let started = Instant::now();
        let (a, b) = tokio::join!(
            post_json(&http, &url, generate_body(&ids(10, 0), 1, false)),
            post_json(&http, &url, generate_body(&ids(10, 1), 1, false)),
        );
        assert_eq!((a.0, b.0), (200, 200));
        assert!(
            started.elapsed() >= Duration::from_millis(200),
            "two 100 ms prefills overlapped"
        );
    }
}

mod cache {
    use super::*;

    async fn cached(http: &reqwest::Client, url: &str, prompt: &[u32]) -> u64 {
        let (status, body) = post_json(http, url, generate_body(prompt, 1, false)).await;
        assert_eq!(status, 200, "{body}");
        body["meta_info"]["cached_tokens"].as_u64().unwrap()
    }

    #[tokio::test]
    async fn identical_prompt_hits_whole_pages_and_flush_empties() {
        let http = client();
        let server = start(&[]).await;
        let base = server.url();
        let url = format!("{base}/generate");
        let prompt = ids(100, 0);
        assert_eq!(cached(&http, &url, &prompt).await, 0);
        assert_eq!(cached(&http, &url, &prompt).await, 96, "floor(99/16)*16");
        let mut nonce = prompt.clone();
        nonce[0] = 7;
        assert_eq!(
            cached(&http, &url, &nonce).await,
            0,
            "a nonce at the start defeats the cache"
        );
        let response = http
            .post(format!("{base}/flush_cache"))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 200);
        assert!(response.text().await.unwrap().starts_with("Cache flushed."));
        assert_eq!(cached(&http, &url, &prompt).await, 0);
        let truth = server.truth();
        assert_eq!(truth[1].cached_tokens, 96);
        assert!(truth[1].prefill_s < truth[0].prefill_s);
    }

    #[tokio::test]
    async fn no_cache_never_hits() {
        let http = client();
        let server = start(&["--no-cache"]).await;
        let url = format!("{}/generate", server.url());
        let prompt = ids(100, 0);
        cached(&http, &url, &prompt).await;
        assert_eq!(cached(&http, &url, &prompt).await, 0);
    }

    #[tokio::test]
    async fn flush_is_refused_while_a_request_streams() {
        let http = client();
        let server = start(&["--sim-d0", "0.01"]).await;
        let base = server.url();
        let sent = Instant::now();
        let response = http
            .post(format!("{base}/generate"))
            .json(&generate_body(&ids(10, 0), 30, true))
            .send()
            .await
            .unwrap();
        let flush = http
            .get(format!("{base}/flush_cache"))
            .send()
            .await
            .unwrap();
        assert_eq!(flush.status(), 400);
        assert!(flush.text().await.unwrap().contains("not flushed"));
        let streamed = read_stream(response, sent, None).await;
        assert!(streamed.ends_with_done());
        let flush = http
            .post(format!("{base}/flush_cache"))
            .send()
            .await
            .unwrap();
        assert_eq!(flush.status(), 200, "idle again");
    }
}

mod behaviour {
    use super::*;

    #[tokio::test]
    async fn without_ignore_eos_the_model_stops_early() {
        let http = client();
        let server = start(&[]).await;
        let url = format!("{}/generate", server.url());
        let mut stops = Vec::new();
        for i in 0..3 {
            let body = json!({"input_ids": ids(10, i), "sampling_params": {"max_new_tokens": 100}});
            let (status, body) = post_json(&http, &url, body).await;
            assert_eq!(status, 200);
            assert_eq!(
                body["meta_info"]["finish_reason"],
                json!({"type": "stop", "matched": 257})
            );
            stops.push(body["meta_info"]["completion_tokens"].as_u64().unwrap());
        }
        assert!(stops.iter().all(|n| (4..=40).contains(n)), "{stops:?}");
        let body = json!({"input_ids": ids(10, 0), "sampling_params": {"max_new_tokens": 60, "min_new_tokens": 60}});
        let (_, body) = post_json(&http, &url, body).await;
        assert_eq!(
            body["meta_info"]["completion_tokens"], 60,
            "min_new_tokens >= max forces the length"
        );
        let (_, body) = post_json(
            &http,
            &format!("{}/v1/completions", server.url()),
            json!({"prompt": "the", "max_tokens": 50}),
        )
        .await;
        assert_eq!(body["choices"][0]["finish_reason"], "stop");
        let (_, body) = post_json(
            &http,
            &format!("{}/v1/completions", server.url()),
            json!({"prompt": "the", "max_tokens": 50, "min_tokens": 50}),
        )
        .await;
        assert_eq!(body["usage"]["completion_tokens"], 50);
    }

    fn needle_prompt(filler_words: usize) -> String {
        let filler = vec!["the sea"; filler_words].join(" ");
        format!("The secret animal is owl. {filler} What is the secret animal?")
    }

    #[tokio::test]
    async fn needle_is_answered_unless_truncated_away() {
        let http = client();
        let server = start(&["--context-length", "200", "--truncate"]).await;
        let url = format!("{}/generate", server.url());
        let ask = |text: String| json!({"text": text, "sampling_params": {"max_new_tokens": 3, "ignore_eos": true}});
        let (_, body) = post_json(&http, &url, ask(needle_prompt(20))).await;
        assert_eq!(
            body["text"].as_str().unwrap().split(' ').next(),
            Some("owl")
        );
        let (_, body) = post_json(&http, &url, ask(needle_prompt(200))).await;
        assert_eq!(
            body["meta_info"]["prompt_tokens"], 197,
            "truncated to 200 - 3"
        );
        assert_eq!(
            body["text"].as_str().unwrap().split(' ').next(),
            Some("unknown")
        );
        let truth = server.truth();
        assert_eq!(truth[0].needle_answer.as_deref(), Some("owl"));
        assert_eq!(truth[1].needle_answer.as_deref(), Some("unknown"));
        assert_eq!(truth[1].prompt_tokens, 197);
    }

    #[tokio::test]
    async fn too_long_prompts_get_400_in_each_dialect() {
        let http = client();
        let server = start(&["--context-length", "100"]).await;
        let base = server.url();
        let (status, body) = post_json(
            &http,
            &format!("{base}/generate"),
            generate_body(&ids(90, 0), 20, false),
        )
        .await;
        assert_eq!(status, 400);
        let message = body["error"]["message"].as_str().unwrap();
        assert!(
            message.contains("100") && message.contains("110"),
            "{message}"
        );
        let body = json!({"prompt": ids(90, 0), "max_tokens": 20});
        let (status, body) = post_json(&http, &format!("{base}/v1/completions"), body).await;
        assert_eq!(status, 400);
        assert_eq!(body["object"], "error");
        assert_eq!(body["type"], "BadRequestError");
        assert_eq!(body["code"], 400);
        assert!(body["message"].as_str().unwrap().contains("90 tokens"));
        let (status, _) = post_json(
            &http,
            &format!("{base}/generate"),
            generate_body(&ids(80, 0), 20, false),
        )
        .await;
        assert_eq!(status, 200, "exactly the context fits");
    }

    #[tokio::test]
    async fn truncate_keeps_the_tail_and_reports_it() {
        let http = client();
        let server = start(&["--context-length", "100", "--truncate"]).await;
        let body = json!({"prompt": ids(90, 0), "max_tokens": 20, "ignore_eos": true});
        let (status, body) =
            post_json(&http, &format!("{}/v1/completions", server.url()), body).await;
        assert_eq!(status, 200);
        assert_eq!(body["usage"]["prompt_tokens"], 80);
        assert_eq!(server.truth()[0].prompt_tokens, 80);
    }

    #[tokio::test]
    async fn beyond_max_running_is_503_at_once() {
        let http = client();
        let flags = [
            "--max-running",
            "1",
            "--reject-when-full",
            "--sim-d0",
            "0.01",
        ];
        let server = start(&flags).await;
        let url = format!("{}/generate", server.url());
        let sent = Instant::now();
        let first = http
            .post(&url)
            .json(&generate_body(&ids(10, 0), 30, true))
            .send()
            .await
            .unwrap();
        let refused_at = Instant::now();
        let (status, body) = post_json(&http, &url, generate_body(&ids(10, 1), 1, false)).await;
        let refused_after = refused_at.elapsed();
        assert_eq!(status, 503, "{body}");
        assert!(
            body["error"]["message"]
                .as_str()
                .unwrap()
                .contains("max-running")
        );
        assert!(
            refused_after < Duration::from_millis(100),
            "503 must not wait for the running request: {refused_after:?}"
        );
        let streamed = read_stream(first, sent, None).await;
        assert!(streamed.ends_with_done());
        let (status, _) = post_json(&http, &url, generate_body(&ids(10, 1), 1, false)).await;
        assert_eq!(status, 200, "the slot is free again");
    }

    #[tokio::test]
    async fn bad_requests_get_400_with_json_messages() {
        let http = client();
        let server = start(&[]).await;
        let base = server.url();
        let cases = [
            json!({"input_ids": [1, 70000]}),
            json!({"input_ids": [1, -1]}),
            json!({"text": "a", "input_ids": [1]}),
            json!({}),
            json!({"text": "a", "sampling_params": {"max_new_tokens": "many"}}),
            json!({"text": ["a", "b"]}),
        ];
        for case in cases {
            let (status, body) = post_json(&http, &format!("{base}/generate"), case.clone()).await;
            assert_eq!(status, 400, "{case}");
            assert!(body["error"]["message"].is_string(), "{case} → {body}");
        }
        let response = http
            .post(format!("{base}/v1/completions"))
            .body("{nope")
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 400);
        let body: Value = response.json().await.unwrap();
        assert_eq!(body["type"], "BadRequestError");
        let (status, body) = post_json(
            &http,
            &format!("{base}/generate"),
            json!({"input_ids": [65535, 0, 258], "sampling_params": {"max_new_tokens": 1}}),
        )
        .await;
        assert_eq!(status, 200, "any id below 65536 is accepted: {body}");
    }

    #[tokio::test]
    async fn sglang_info_routes_describe_the_simulation() {
        let http = client();
        let server = start(&[
            "--context-length",
            "4096",
            "--spec",
            "3",
            "--max-running",
            "4",
        ])
        .await;
        let base = server.url();
        for route in ["/server_info", "/get_server_info"] {
            let info: Value = http
                .get(format!("{base}{route}"))
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            assert_eq!(info["context_length"], 4096);
            assert_eq!(info["max_running_requests"], 4);
            assert_eq!(info["max_total_num_tokens"], 4 * 4096);
            assert_eq!(info["page_size"], 16);
            assert_eq!(info["disable_radix_cache"], false);
            assert_eq!(info["speculative_algorithm"], "EAGLE");
            assert_eq!(info["speculative_num_draft_tokens"], 3);
            assert!(info["version"].as_str().unwrap().starts_with("sim-"));
            assert!(info["internal_states"].is_array());
        }
        let models: Value = http
            .get(format!("{base}/v1/models"))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(models["data"][0]["id"], "sim-model");
        assert_eq!(models["data"][0]["max_model_len"], 4096);
        let model_info = http
            .get(format!("{base}/get_model_info"))
            .send()
            .await
            .unwrap();
        assert_eq!(model_info.status(), 200);
        let (status, tokens) = post_json(
            &http,
            &format!("{base}/tokenize"),
            json!({"prompt": "the sea xyz", "add_special_tokens": false}),
        )
        .await;
        assert_eq!(status, 200);
        assert_eq!(tokens["count"], 6, "2 words + marker + 3 bytes");
        assert_eq!(tokens["max_model_len"], 4096);
        let (_, with_bos) = post_json(
            &http,
            &format!("{base}/tokenize"),
            json!({"prompt": "the sea"}),
        )
        .await;
        assert_eq!(with_bos["tokens"][0], 256);
        for route in ["/health", "/health_generate"] {
            assert_eq!(
                http.get(format!("{base}{route}"))
                    .send()
                    .await
                    .unwrap()
                    .status(),
                200
            );
        }
    }

    #[tokio::test]
    async fn openai_persona_offers_only_v1_and_health() {
        let http = client();
        let server = start(&["--persona", "openai"]).await;
        let base = server.url();
        for route in [
            "/server_info",
            "/get_server_info",
            "/flush_cache",
            "/model_info",
        ] {
            assert_eq!(
                http.get(format!("{base}{route}"))
                    .send()
                    .await
                    .unwrap()
                    .status(),
                404,
                "{route}"
            );
        }
        for route in ["/generate", "/tokenize"] {
            assert_eq!(
                http.post(format!("{base}{route}"))
                    .json(&json!({"text": "a"}))
                    .send()
                    .await
                    .unwrap()
                    .status(),
                404
            );
        }
        assert_eq!(
            http.get(format!("{base}/health"))
                .send()
                .await
                .unwrap()
                .status(),
            200
        );
        let (status, body) = post_json(
            &http,
            &format!("{base}/v1/completions"),
            json!({"model": "sim-model", "prompt": "the", "max_tokens": 2}),
        )
        .await;
        assert_eq!(status, 200, "{body}");
        let (status, body) = post_json(
            &http,
            &format!("{base}/v1/completions"),
            json!({"model": "other", "prompt": "the"}),
        )
        .await;
        assert_eq!(status, 404);
        assert_eq!(body["type"], "NotFoundError");
    }

    #[tokio::test]
    async fn chat_whole_response_has_a_message() {
        let http = client();
        let server = start(&[]).await;
        let body = json!({"messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": [{"type": "text", "text": "the sea"}]}],
            "max_completion_tokens": 4, "ignore_eos": true});
        let (status, body) = post_json(
            &http,
            &format!("{}/v1/chat/completions", server.url()),
            body,
        )
        .await;
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["object"], "chat.completion");
        assert_eq!(body["choices"][0]["message"]["role"], "assistant");
        assert_eq!(
            body["choices"][0]["message"]["content"]
                .as_str()
                .unwrap()
                .split(' ')
                .count(),
            4
        );
        // BOS + system + "be"(1) + "brief"(marker + 5 bytes) + user + 2 words + assistant
        assert_eq!(body["usage"]["prompt_tokens"], 13);
    }

    #[tokio::test]
    async fn bad_configuration_is_refused_naming_the_flag() {
        for (flags, flag) in [
            (&["--fault-kinds", "http500,nope"][..], "--fault-kinds"),
            (&["--fault-rate", "2"][..], "--fault-rate"),
            (&["--sim-p0", "0"][..], "--sim-p0"),
            (&["--sim-page-size", "0"][..], "--sim-page-size"),
            (&["--spec", "0"][..], "--spec"),
        ] {
            let argv = std::iter::once("sim")
                .chain(FAST.iter().copied())
                .chain(flags.iter().copied());
            let cost = CostFlags::try_parse_from(argv).unwrap().cost;
            let config = SimConfig {
                cost,
                seed: 0,
                model_name: "m".to_string(),
            };
            let err = SimServer::start("127.0.0.1", 0, config)
                .await
                .err()
                .expect("refused");
            assert!(err.to_string().contains(flag), "{flag}: {err}");
        }
    }

    #[tokio::test]
    async fn shutdown_stops_serving() {
        let http = client();
        let server = start(&[]).await;
        let url = format!("{}/health", server.url());
        assert_eq!(http.get(&url).send().await.unwrap().status(), 200);
        server.shutdown().await;
        let fresh = client();
        assert!(
            fresh.get(&url).send().await.is_err(),
            "still serving after shutdown"
        );
    }
}

mod faults {
    use super::*;

    async fn faulty(kind: &str) -> SimServer {
        start(&[
            "--fault-rate",
            "1",
            "--fault-kinds",
            kind,
            "--sim-d0",
            "0.005",
        ])
        .await
    }

    fn stream_body() -> Value {
        generate_body(&ids(10, 0), 10, true)
    }

    #[tokio::test]
    async fn http_faults_answer_with_their_status() {
        let http = client();
        for (kind, status) in [("http500", 500), ("http503", 503), ("http400", 400)] {
            let server = faulty(kind).await;
            let (got, body) =
                post_json(&http, &format!("{}/generate", server.url()), stream_body()).await;
            assert_eq!(got, status, "{kind}");
            assert!(
                body["error"]["message"]
                    .as_str()
                    .unwrap()
                    .contains("simulated"),
                "{body}"
            );
            let (got, body) = post_json(
                &http,
                &format!("{}/v1/completions", server.url()),
                json!({"prompt": "a"}),
            )
            .await;
            assert_eq!(got, status);
            assert_eq!(body["code"], status);
            let truth = server.truth();
            assert_eq!(truth.len(), 2);
            assert_eq!(truth[0].fault.as_deref(), Some(kind));
            assert_eq!(truth[0].finish, "error");
        }
    }

    #[tokio::test]
    async fn reset_drops_the_connection_mid_stream() {
        let http = client();
        let server = faulty("reset").await;
        let streamed =
            post_stream(&http, &format!("{}/generate", server.url()), stream_body()).await;
        assert!(
            streamed.end.is_err(),
            "the body must break off, got {:?}",
            streamed.events
        );
        assert_eq!(
            streamed.json_events().len(),
            1,
            "one event, then the reset: {:?} {:?}",
            streamed.events,
            streamed.end
        );
        assert!(!streamed.ends_with_done());
        let truth = truth_after(&server, 1).await;
        assert_eq!(truth[0].fault.as_deref(), Some("reset"));
        assert_eq!(truth[0].finish, "abort");
        assert_eq!(truth[0].output_tokens, 1);
        let whole = http
            .post(format!("{}/generate", server.url()))
            .json(&generate_body(&ids(10, 0), 3, false))
            .send()
            .await;
        let broken = match whole {
            Err(_) => true,
            Ok(response) => response.bytes().await.is_err(),
        };
        assert!(broken, "a whole response breaks off too");
    }

    #[tokio::test]
    async fn stall_sends_only_keep_alives_until_the_client_leaves() {
        let http = client();
        let server = faulty("stall").await;
        let sent = Instant::now();
        let response = http
            .post(format!("{}/generate", server.url()))
            .json(&stream_body())
            .send()
            .await
            .unwrap();
        let streamed = read_stream(response, sent, Some(Duration::from_millis(700))).await;
        assert_eq!(
            streamed.data().len(),
            1,
            "only the first event: {:?}",
            streamed.events
        );
        let keep_alives = streamed
            .events
            .iter()
            .filter(|e| e.data == ": keep-alive")
            .count();
        assert!(keep_alives >= 2, "{:?}", streamed.events);
        let base = server.url();
        let mut flushed = false;
        for _ in 0..20 {
            tokio::time::sleep(Duration::from_millis(100)).await;
            if http
                .get(format!("{base}/flush_cache"))
                .send()
                .await
                .unwrap()
                .status()
                == 200
            {
                flushed = true;
                break;
            }
        }
        assert!(
            flushed,
            "the stalled request must end once the client is gone"
        );
        assert_eq!(server.truth()[0].fault.as_deref(), Some("stall"));
    }

    #[tokio::test]
    async fn malformed_event_appears_in_the_stream() {
        let http = client();
        let server = faulty("malformed").await;
        let streamed =
            post_stream(&http, &format!("{}/generate", server.url()), stream_body()).await;
        let data = streamed.data();
        assert_eq!(data[1].data, "{not json", "{data:?}");
        assert!(serde_json::from_str::<Value>(&data[1].data).is_err());
        assert_eq!(
            truth_after(&server, 1).await[0].fault.as_deref(),
            Some("malformed")
        );
    }

    #[tokio::test]
    async fn error_event_ends_the_stream() {
        let http = client();
        let server = faulty("error_event").await;
        let streamed = post_stream(
            &http,
            &format!("{}/v1/completions", server.url()),
            json!({"prompt": "the", "max_tokens": 10, "stream": true}),
        )
        .await;
        assert!(streamed.end.is_ok());
        let events = streamed.json_events();
        assert_eq!(events.len(), 2);
        assert_eq!(
            events[1],
            json!({"error": {"message": "simulated failure", "code": 500}})
        );
        assert!(!streamed.ends_with_done());
    }

    #[tokio::test]
    async fn no_final_ends_cleanly_without_finish_or_done() {
        let http = client();
        let server = faulty("no_final").await;
        let streamed =
            post_stream(&http, &format!("{}/generate", server.url()), stream_body()).await;
        assert!(streamed.end.is_ok());
        let events = streamed.json_events();
        assert_eq!(events.len(), 9, "all but the finish event");
        assert!(
            events
                .iter()
                .all(|e| e["meta_info"]["finish_reason"].is_null())
        );
        assert!(!streamed.ends_with_done());
        let truth = truth_after(&server, 1).await;
        assert_eq!(truth[0].output_tokens, 9);
        assert_eq!(truth[0].fault.as_deref(), Some("no_final"));
    }

    #[tokio::test]
    async fn flush_busy_refuses_an_idle_flush() {
        let http = client();
        let server = faulty("flush_busy").await;
        let response = http
            .post(format!("{}/flush_cache", server.url()))
            .send()
            .await
            .unwrap();
        assert_eq!(response.status(), 400);
        let (status, _) = post_json(
            &http,
            &format!("{}/generate", server.url()),
            generate_body(&ids(5, 0), 1, false),
        )
        .await;
        assert_eq!(status, 200, "flush_busy never hits generation");
    }

    #[tokio::test]
    async fn fault_draws_follow_the_seed() {
        let http = client();
        let http = &http;
        let pattern = |seed| async move {
            let server = start_seeded(
                &["--fault-rate", "0.5", "--fault-kinds", "http500,http503"],
                seed,
            )
            .await;
            let mut statuses = Vec::new();
            for i in 0..12 {
                statuses.push(
                    post_json(
                        http,
                        &format!("{}/generate", server.url()),
                        generate_body(&ids(5, i), 1, false),
                    )
                    .await
                    .0,
                );
            }
            statuses
        };
        let a = pattern(5).await;
        assert_eq!(a, pattern(5).await);
        assert!(a.contains(&200) && a.iter().any(|s| *s >= 500), "{a:?}");
    }
}
