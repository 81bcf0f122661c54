//! The simulated server over real HTTP on 127.0.0.1: stopping, needles, context limits,
//! admission, bad requests, info routes and personas.

use crate::common;

use common::sim_http::*;

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
        let (_, body) = post_at(
            &http,
            &server.url(),
            "/v1/completions",
            json!({"prompt": "the", "max_tokens": 50}),
        )
        .await;
        assert_eq!(body["choices"][0]["finish_reason"], "stop");
        let (_, body) = post_at(
            &http,
            &server.url(),
            "/v1/completions",
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
        let (status, body) = generate_at(&http, &base, 90, 20).await;
        assert_eq!(status, 400);
        let message = body["error"]["message"].as_str().unwrap();
        assert!(
            message.contains("100") && message.contains("110"),
            "{message}"
        );
        let body = json!({"prompt": ids(90, 0), "max_tokens": 20});
        let (status, body) = post_at(&http, &base, "/v1/completions", body).await;
        assert_eq!(status, 400);
        assert_eq!(body["object"], "error");
        assert_eq!(body["type"], "BadRequestError");
        assert_eq!(body["code"], 400);
        assert!(body["message"].as_str().unwrap().contains("90 tokens"));
        let (status, _) = generate_at(&http, &base, 80, 20).await;
        assert_eq!(status, 200, "exactly the context fits");
    }

    #[tokio::test]
    async fn truncate_keeps_the_tail_and_reports_it() {
        let http = client();
        let server = start(&["--context-length", "100", "--truncate"]).await;
        let body = json!({"prompt": ids(90, 0), "max_tokens": 20, "ignore_eos": true});
        let (status, body) = post_at(&http, &server.url(), "/v1/completions", body).await;
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
        let streamed = read_stream(first, sent, None).await;
        assert!(streamed.ends_with_done());
        // The 503 came back while the running request was still streaming (30 steps of
        // 10 ms): an order of events, not a wall-clock bound.
        let refused_by = refused_at.duration_since(sent) + refused_after;
        let first_ended = streamed.data().last().expect("events").at;
        assert!(
            refused_by < first_ended,
            "503 must not wait for the running request: refused at {refused_by:?}, the running one ended at {first_ended:?}"
        );
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
            let (status, body) = post_at(&http, &base, "/generate", case.clone()).await;
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
        let (status, body) = post_at(
            &http,
            &base,
            "/generate",
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
            let info: Value = get_json(&http, &format!("{base}{route}")).await;
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
        let models: Value = get_json(&http, &format!("{base}/v1/models")).await;
        assert_eq!(models["data"][0]["id"], "sim-model");
        assert_eq!(models["data"][0]["max_model_len"], 4096);
        let model_info = http
            .get(format!("{base}/get_model_info"))
            .send()
            .await
            .unwrap();
        assert_eq!(model_info.status(), 200);
        let (status, tokens) = post_at(
            &http,
            &base,
            "/tokenize",
            json!({"prompt": "the sea xyz", "add_special_tokens": false}),
        )
        .await;
        assert_eq!(status, 200);
        assert_eq!(tokens["count"], 6, "2 words + marker + 3 bytes");
        assert_eq!(tokens["max_model_len"], 4096);
        let (_, with_bos) = post_at(&http, &base, "/tokenize", json!({"prompt": "the sea"})).await;
        assert_eq!(with_bos["tokens"][0], 256);
        for route in ["/health", "/health_generate"] {
            assert_eq!(get_status(&http, &format!("{base}{route}")).await, 200);
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
                get_status(&http, &format!("{base}{route}")).await,
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
        assert_eq!(get_status(&http, &format!("{base}/health")).await, 200);
        let (status, body) = post_at(
            &http,
            &base,
            "/v1/completions",
            json!({"model": "sim-model", "prompt": "the", "max_tokens": 2}),
        )
        .await;
        assert_eq!(status, 200, "{body}");
        let (status, body) = post_at(
            &http,
            &base,
            "/v1/completions",
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
        let (status, body) = post_at(&http, &server.url(), "/v1/chat/completions", body).await;
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
