//! Setup shared by the tests of the text-only backends (TGI, Ollama) against their
//! simulator personas.

use ctxbench::backend::http::Http;
use ctxbench::backend::{GenRequest, Prompt};
use ctxbench::record::{Sample, flag};
use ctxbench::sim::SimServer;
use serde_json::Value;
use std::time::Duration;

pub const DEADLINE: Duration = Duration::from_secs(60);

/// A request for `text` that forces `max_tokens` out.
pub fn text_request(text: impl Into<String>, max_tokens: u64) -> GenRequest {
    GenRequest {
        prompt: Prompt::Text(text.into()),
        max_tokens,
        ignore_eos: true,
        cache_prompt: false,
        deadline: DEADLINE,
    }
}

/// POST `body` to `path`, as a client without ctxbench would: the response text of a 200.
pub async fn post_ok(http: &Http, path: &str, body: &Value) -> String {
    let (status, text) = http
        .call(reqwest::Method::POST, path, Some(body), DEADLINE)
        .await
        .unwrap();
    assert_eq!(status, 200, "{path}: {text}");
    text
}

/// One 1k needle sample asking more than the simulated model's longest natural answer
/// (40 tokens) without `ignore_eos`: it is flagged an early stop, its answer still checked.
pub async fn needle_early_stop(url: &str) -> Sample {
    let r = super::flags("1k", 1, 64).with(&["--needle"]).run(url).await;
    let s = r.samples[0].clone();
    assert!(s.flags.contains(&flag::EARLY_STOP), "{:?}", s.flags);
    assert!(s.needle.as_ref().unwrap().ok, "{:?}", s.needle);
    s
}

/// The simulator as `name` (a persona) with `flags`, and a client for it.
pub async fn persona(name: &str, flags: &[&str]) -> (SimServer, Http) {
    let server = super::sim(&[&["--persona", name], flags].concat()).await;
    let http = Http::new(&server.url(), None).unwrap();
    (server, http)
}
