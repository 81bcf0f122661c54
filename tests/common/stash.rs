//! A backend that takes each completion's own speculative counts aside and hands the
//! completion on without them, as a server that sends none: what `/metrics` deltas are
//! then taken for is the same request.

use async_trait::async_trait;
use ctxbench::backend::spec::SpecCounts;
use ctxbench::backend::{Backend, Completion, Flush, GenRequest, RequestError};
use std::sync::{Arc, Mutex};

/// Passes requests through to `.0`; each completion's own counts go to `.1`, in order.
pub struct Stash(
    pub Box<dyn Backend>,
    pub Arc<Mutex<Vec<Option<SpecCounts>>>>,
);

#[async_trait]
impl Backend for Stash {
    fn api(&self) -> &'static str {
        self.0.api()
    }
    fn takes_token_ids(&self) -> bool {
        self.0.takes_token_ids()
    }
    async fn generate(&self, req: &GenRequest) -> Result<Completion, RequestError> {
        let mut c = self.0.generate(req).await?;
        self.1.lock().unwrap().push(c.spec.take());
        Ok(c)
    }
    async fn flush(&self) -> Result<Flush, RequestError> {
        self.0.flush().await
    }
    async fn tokenize(&self, text: &str) -> Result<Option<Vec<u32>>, RequestError> {
        self.0.tokenize(text).await
    }
}

/// One request's acceptance from both sources: its output tokens, the server's own counts
/// for it, and the `/metrics` deltas around it.
pub struct BothSources {
    pub out: u64,
    pub per_request: SpecCounts,
    pub from_metrics: SpecCounts,
}

/// Sends `n` requests of 64 tokens one at a time, alternating prose (few repeated n-grams:
/// low acceptance) and a repeated sentence (high), through `/metrics` deltas with each
/// completion's own counts stashed; checks each got its 64 tokens and both sources' kinds.
pub async fn both_sources(
    conn: ctxbench::backend::Connected,
    n: usize,
    deadline: std::time::Duration,
) -> Vec<BothSources> {
    use ctxbench::backend::Prompt;
    use ctxbench::backend::metrics_delta::MetricsDelta;
    use ctxbench::record::SpecSource;
    let own = Arc::new(Mutex::new(Vec::new()));
    let b = MetricsDelta {
        inner: Box::new(Stash(conn.backend, own.clone())),
        http: conn.http.clone(),
    };
    let texts = [
        "harbour lantern quietly seven copper meadow argued under window bright kettle",
        "the mill the mill the mill the mill the mill the mill the mill the mill the mill",
    ];
    let mut got = Vec::new();
    for (i, text) in texts.iter().cycle().take(n).enumerate() {
        let req = GenRequest {
            prompt: Prompt::Text(format!("request {i}: {text}")),
            max_tokens: 64,
            ignore_eos: true,
            cache_prompt: false,
            deadline,
        };
        let c = b.generate(&req).await.unwrap();
        let out = c.completion_tokens.unwrap();
        assert_eq!(out, 64, "request {i}");
        let from_metrics = c.spec.expect("counts from /metrics deltas");
        assert_eq!(from_metrics.source, SpecSource::MetricsDelta);
        let per_request = own.lock().unwrap()[i].expect("the request's own counts");
        assert_eq!(per_request.source, SpecSource::Server);
        got.push(BothSources {
            out,
            per_request,
            from_metrics,
        });
    }
    got
}
