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
