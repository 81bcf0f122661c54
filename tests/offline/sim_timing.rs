//! The simulated server over real HTTP on 127.0.0.1: timing against the cost model, and the
//! prefix cache.

use crate::common;

use common::sim_http::*;

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
