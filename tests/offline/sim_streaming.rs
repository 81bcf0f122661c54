//! The simulated server over real HTTP on 127.0.0.1: the wire shapes of both APIs' streams
//! and whole responses.

use crate::common;

use common::sim_http::*;

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
        let (status, body) = generate_at(&http, &server.url(), 20, 5).await;
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
        let (status, body) = post_at(
            &http,
            &server.url(),
            "/v1/completions",
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
        // Sent before the 250 ms prefill, the role chunk arrives well ahead of the content;
        // held back, it would arrive with it. A relation, not a wall-clock bound: a loaded
        // client that reads late delays both.
        assert!(
            events[1].at.saturating_sub(events[0].at) >= Duration::from_millis(50),
            "role chunk at {:?}, content at {:?}",
            events[0].at,
            events[1].at
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
