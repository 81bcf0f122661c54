//! The simulated server over real HTTP on 127.0.0.1: every injected fault.

use crate::common;

use common::sim_http::*;

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
            let (got, body) = post_at(&http, &server.url(), "/generate", stream_body()).await;
            assert_eq!(got, status, "{kind}");
            assert!(
                body["error"]["message"]
                    .as_str()
                    .unwrap()
                    .contains("simulated"),
                "{body}"
            );
            let (got, body) = post_at(
                &http,
                &server.url(),
                "/v1/completions",
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
        let (status, _) = generate_at(&http, &server.url(), 5, 1).await;
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
                    post_at(
                        http,
                        &server.url(),
                        "/generate",
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
