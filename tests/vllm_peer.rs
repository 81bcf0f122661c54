//! ctxbench against a real vLLM 0.32 CPU server (the tiny random-weight Llama): one server
//! for the whole binary (vLLM takes about a minute to start), its own `/metrics` the ground
//! truth the client's figures are held against.

mod common;
use common::vllm::{Config, VllmServer};

/// The peer itself: vLLM answers as the issue found it, and a sweep measures it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vllm_serves_the_tiny_model() {
    let server = VllmServer::shared(Config::default());
    let _alone = server.exclusive().await;
    let (status, body) = server.get("/version");
    assert_eq!(status, 200);
    assert_eq!(
        serde_json::from_str::<serde_json::Value>(&body).unwrap()["version"],
        "0.32.0"
    );
    let info = common::probe_url(&server.url).await;
    assert_eq!(info.kind, ctxbench::backend::detect::ServerKind::Vllm);
    assert_eq!(info.model.as_deref(), Some("tiny-llama"));
    assert_eq!(info.context_length, Some(8192));
    assert!(info.tokenize, "vLLM serves /tokenize");

    let generated = server.metric("vllm:generation_tokens_total");
    let r = common::flags("1k", 1, 16).run(&server.url).await;
    assert_eq!(r.samples.len(), 1);
    let s = &r.samples[0];
    assert!(s.valid, "{s:?}");
    assert_eq!(s.output_tokens, Some(16));
    assert!(
        server.metric("vllm:generation_tokens_total") >= generated + 16.0,
        "the server counted the sweep's tokens"
    );
}
