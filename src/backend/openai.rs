//! OpenAI-compatible routes (`/v1/completions`, `/v1/chat/completions`): delta streaming,
//! tokens counted from `continuous_usage_stats` or the final `usage`.

use super::flush::Flusher;
use super::http::Http;
use super::sse::ItemRef;
use super::{
    Backend, Completion, EventJson, Flush, GenRequest, Prompt, RequestError, StreamEvent,
    StreamFold,
};
use crate::choices::Endpoint;
use async_trait::async_trait;
use serde_json::{Value, json};
use std::time::Duration;

pub struct OpenAi {
    pub http: Http,
    pub flusher: Flusher,
    pub model: String,
    pub endpoint: Endpoint,
    /// The API name recorded (`openai`, `vllm`, …): the wire format is the same.
    pub api: &'static str,
    /// Whether the server has a tokenize endpoint of the SGLang/vLLM shape.
    pub tokenize_route: TokenizeRoute,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenizeRoute {
    None,
    VllmStyle,
    LlamacppStyle,
}

#[async_trait]
impl Backend for OpenAi {
    fn api(&self) -> &'static str {
        self.api
    }

    fn takes_token_ids(&self) -> bool {
        self.endpoint == Endpoint::Completions && self.tokenize_route != TokenizeRoute::None
    }

    async fn generate(&self, req: &GenRequest) -> Result<Completion, RequestError> {
        let mut body = json!({
            "model": self.model,
            "max_tokens": req.max_tokens,
            "temperature": 0.0,
            "stream": true,
            "stream_options": {"include_usage": true, "continuous_usage_stats": true},
        });
        if req.ignore_eos {
            body["ignore_eos"] = json!(true);
            body["min_tokens"] = json!(req.max_tokens);
        }
        if !req.cache_prompt && self.tokenize_route == TokenizeRoute::LlamacppStyle {
            body["cache_prompt"] = json!(false);
        }
        let path = match (self.endpoint, &req.prompt) {
            (Endpoint::Completions, Prompt::Ids(ids)) => {
                body["prompt"] = json!(ids);
                "/v1/completions"
            }
            (Endpoint::Completions, Prompt::Text(t)) => {
                body["prompt"] = json!(t);
                "/v1/completions"
            }
            (Endpoint::Completions, p @ Prompt::Shared(_)) => {
                body["prompt"] = p.to_json();
                "/v1/completions"
            }
            (Endpoint::Chat, p @ Prompt::Shared(_)) if p.is_text() => {
                body["messages"] = json!([{"role": "user", "content": p.to_json()}]);
                "/v1/chat/completions"
            }
            (Endpoint::Chat, Prompt::Text(t)) => {
                body["messages"] = json!([{"role": "user", "content": t}]);
                "/v1/chat/completions"
            }
            (Endpoint::Chat, Prompt::Ids(_) | Prompt::Shared(_)) => {
                return Err(RequestError::Prompt(
                    "the chat route takes text prompts only".into(),
                ));
            }
        };
        super::stream_completion(
            &self.http,
            path,
            &body,
            &req.prompt,
            req.deadline,
            Deltas::default(),
        )
        .await
    }

    async fn flush(&self) -> Result<Flush, RequestError> {
        self.flusher.flush(&self.http).await
    }

    async fn tokenize(&self, text: &str) -> Result<Option<Vec<u32>>, RequestError> {
        match self.tokenize_route {
            TokenizeRoute::None => Ok(None),
            TokenizeRoute::VllmStyle => super::tokenize::vllm_style(&self.http, text).await,
            TokenizeRoute::LlamacppStyle => super::tokenize::llamacpp_style(&self.http, text).await,
        }
    }

    async fn vocabulary(&self) -> super::vocab::VocabInfo {
        match self.tokenize_route {
            TokenizeRoute::LlamacppStyle => super::vocab::llamacpp_info(&self.http).await,
            TokenizeRoute::None | TokenizeRoute::VllmStyle => Default::default(),
        }
    }

    async fn detokenize(&self, ids: &[u32]) -> Result<Option<String>, RequestError> {
        match self.tokenize_route {
            TokenizeRoute::None => Ok(None),
            TokenizeRoute::VllmStyle => {
                super::vocab::detokenize_for_model(&self.http, &self.model, ids).await
            }
            TokenizeRoute::LlamacppStyle => super::vocab::detokenize(&self.http, ids).await,
        }
    }

    async fn instance_marker(&self) -> Option<super::instance::InstanceMarker> {
        super::instance::openai(
            &self.http,
            self.tokenize_route == TokenizeRoute::LlamacppStyle,
        )
        .await
    }
}

/// Folds delta chunks into events with token counts.
#[derive(Default)]
pub(crate) struct Deltas {
    out: Completion,
    /// Cumulative completion tokens reported so far (continuous usage).
    reported: Option<u64>,
    /// Events that carried content.
    counted: u64,
    finish_seen: bool,
}

impl StreamFold for Deltas {
    fn on_item(&mut self, at: Duration, item: ItemRef<'_>) -> Result<bool, RequestError> {
        let v = match super::event_json(item)? {
            EventJson::Skip => return Ok(false),
            EventJson::Done => return Ok(true),
            EventJson::Data(v) => v,
        };
        let choice = v.pointer("/choices/0");
        let text = choice
            .and_then(|c| {
                c.get("text")
                    .or_else(|| c.pointer("/delta/content"))
                    .or_else(|| c.pointer("/delta/reasoning_content"))
            })
            .and_then(Value::as_str)
            .unwrap_or("");
        let usage = v.get("usage").filter(|u| !u.is_null());
        let cumulative = usage
            .and_then(|u| u.get("completion_tokens"))
            .and_then(Value::as_u64);
        let tokens = match (cumulative, self.reported) {
            (Some(c), prev) if choice.is_some() => c.saturating_sub(prev.unwrap_or(0)),
            _ => u64::from(!text.is_empty()),
        };
        if choice.is_some() && (tokens > 0 || !text.is_empty()) {
            self.out.events.push(StreamEvent { at, tokens });
            self.counted += tokens;
            self.out.text.push_str(text);
        }
        if let Some(c) = cumulative {
            self.reported = Some(c.max(self.reported.unwrap_or(0)));
        }
        if let Some(u) = usage {
            let get = |p: &str| u.pointer(p).and_then(Value::as_u64);
            self.out.prompt_tokens = get("/prompt_tokens").or(self.out.prompt_tokens);
            if let Some(c) = get("/prompt_tokens_details/cached_tokens") {
                self.out.cached_tokens = Some(c);
            }
        }
        if let Some(fr) = choice
            .and_then(|c| c.get("finish_reason"))
            .and_then(Value::as_str)
        {
            self.finish_seen = true;
            self.out.finish_reason = Some(fr.to_string());
        }
        if let Some(t) = v.get("timings").filter(|t| t.is_object()) {
            self.out.server_timings = Some(t.clone());
            // llama-server's final chunk carries its draft counts in `timings`.
            if let Some(k) = super::spec::from_llamacpp_timings(t) {
                self.out.spec = Some(k);
            }
        }
        if let Some(k) = super::spec::from_vllm_metrics(&v) {
            self.out.spec = Some(k);
        }
        Ok(false)
    }

    fn finish(mut self, saw_done: bool, elapsed: Duration) -> Result<Completion, RequestError> {
        if !saw_done || !self.finish_seen {
            return Err(RequestError::Incomplete);
        }
        self.out.e2e = elapsed;
        // Per-event counts are the server's only when continuous usage matched the events.
        self.out.counts_from_server = self.reported.is_some_and(|r| r == self.counted);
        self.out.completion_tokens = self.reported.or(Some(self.counted));
        Ok(self.out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::test_event as ev;

    fn run(events: &[&str]) -> Result<Completion, RequestError> {
        let mut d = Deltas::default();
        let mut done = false;
        for (i, e) in events.iter().enumerate() {
            done = d.on_item(Duration::from_millis(i as u64), ev(e))?;
        }
        d.finish(done, Duration::from_millis(events.len() as u64))
    }

    #[test]
    fn chat_role_chunk_is_not_a_token_and_usage_counts_tokens() {
        let out = run(&[
            r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}],"usage":{"prompt_tokens":50,"completion_tokens":0}}"#,
            r#"{"choices":[{"index":0,"delta":{"content":"a"},"finish_reason":null}],"usage":{"prompt_tokens":50,"completion_tokens":1}}"#,
            r#"{"choices":[{"index":0,"delta":{"content":" b c"},"finish_reason":"length"}],"usage":{"prompt_tokens":50,"completion_tokens":3}}"#,
            r#"{"choices":[],"usage":{"prompt_tokens":50,"completion_tokens":3,"prompt_tokens_details":{"cached_tokens":16}}}"#,
            "[DONE]",
        ])
        .unwrap();
        let tokens: Vec<u64> = out.events.iter().map(|e| e.tokens).collect();
        assert_eq!(tokens, vec![1, 2]);
        assert_eq!(out.events[0].at, Duration::from_millis(1));
        assert_eq!(out.cached_tokens, Some(16));
        assert_eq!(out.completion_tokens, Some(3));
        assert!(out.counts_from_server);
        assert_eq!(out.text, "a b c");
    }

    #[test]
    fn without_continuous_usage_counts_are_estimates() {
        let out = run(&[
            r#"{"choices":[{"index":0,"text":"a","finish_reason":null}],"usage":null}"#,
            r#"{"choices":[{"index":0,"text":"bc","finish_reason":"length"}],"usage":null}"#,
            r#"{"choices":[],"usage":{"prompt_tokens":9,"completion_tokens":5}}"#,
            "[DONE]",
        ])
        .unwrap();
        assert_eq!(out.completion_tokens, Some(5));
        assert!(!out.counts_from_server);
        assert_eq!(out.prompt_tokens, Some(9));
    }

    #[test]
    fn a_stream_without_done_is_incomplete() {
        let r = run(&[r#"{"choices":[{"index":0,"text":"a","finish_reason":null}]}"#]);
        assert_eq!(r, Err(RequestError::Incomplete));
    }
}
