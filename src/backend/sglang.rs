//! SGLang's native API: `/generate` with `input_ids`, cumulative streaming with `meta_info`.

use super::flush::Flusher;
use super::http::Http;
use super::sse::ItemRef;
use super::{
    Backend, Completion, EventJson, Flush, GenRequest, Prompt, RequestError, StreamEvent,
    StreamFold,
};
use async_trait::async_trait;
use serde_json::{Value, json};
use std::time::Duration;

pub struct Sglang {
    pub http: Http,
    pub flusher: Flusher,
}

#[async_trait]
impl Backend for Sglang {
    fn api(&self) -> &'static str {
        "sglang"
    }

    fn takes_token_ids(&self) -> bool {
        true
    }

    async fn generate(&self, req: &GenRequest) -> Result<Completion, RequestError> {
        let mut body = json!({
            "sampling_params": {
                "max_new_tokens": req.max_tokens,
                "temperature": 0.0,
                "ignore_eos": req.ignore_eos,
            },
            "stream": true,
        });
        if req.ignore_eos {
            body["sampling_params"]["min_new_tokens"] = json!(req.max_tokens);
        }
        match &req.prompt {
            Prompt::Ids(ids) => body["input_ids"] = json!(ids),
            Prompt::Text(t) => body["text"] = json!(t),
            p @ Prompt::Shared(s) if !s.tail.is_text => body["input_ids"] = p.to_json(),
            p @ Prompt::Shared(_) => body["text"] = p.to_json(),
        }
        super::stream_completion(
            &self.http,
            "/generate",
            &body,
            &req.prompt,
            req.deadline,
            Cumulative::default(),
        )
        .await
    }

    async fn flush(&self) -> Result<Flush, RequestError> {
        self.flusher.flush(&self.http).await
    }

    async fn tokenize(&self, text: &str) -> Result<Option<Vec<u32>>, RequestError> {
        super::tokenize::vllm_style(&self.http, text).await
    }

    async fn detokenize(&self, ids: &[u32]) -> Result<Option<String>, RequestError> {
        super::vocab::detokenize(&self.http, ids).await
    }

    async fn instance_marker(&self) -> Option<super::instance::InstanceMarker> {
        super::instance::sglang(&self.http).await
    }
}

/// Folds SGLang's cumulative events into per-event token counts.
#[derive(Default)]
pub(crate) struct Cumulative {
    out: Completion,
    tokens_so_far: u64,
    text_len: usize,
    finished: bool,
    /// Bytes of text copied so far (linear in the answer's length).
    copied: usize,
}

impl StreamFold for Cumulative {
    fn on_item(&mut self, at: Duration, item: ItemRef<'_>) -> Result<bool, RequestError> {
        let v = match super::event_json(item)? {
            EventJson::Skip => return Ok(false),
            EventJson::Done => return Ok(true),
            EventJson::Data(v) => v,
        };
        // Borrowed, not cloned: this runs for every event of every stream.
        static NULL: Value = Value::Null;
        let meta = v.get("meta_info").unwrap_or(&NULL);
        let text = v.get("text").and_then(Value::as_str).unwrap_or("");
        let completion = meta.get("completion_tokens").and_then(Value::as_u64);
        let tokens = match completion {
            Some(c) => c.saturating_sub(self.tokens_so_far),
            // No count: one token per event that adds text (an estimate, recorded as such).
            None => u64::from(text.len() > self.text_len),
        };
        if let Some(c) = completion {
            self.tokens_so_far = c.max(self.tokens_so_far);
            self.out.counts_from_server = true;
        } else {
            self.tokens_so_far += tokens;
        }
        if tokens > 0 || text.len() > self.text_len {
            self.out.events.push(StreamEvent { at, tokens });
        }
        // The text is cumulative: append only what is new, or a long answer costs
        // quadratic copying.
        if text.len() > self.text_len {
            match text.get(self.text_len..) {
                Some(new) => {
                    self.out.text.push_str(new);
                    self.copied += new.len();
                }
                // Not on a character boundary of the old length: take the whole, as sent.
                None => {
                    self.out.text = text.to_string();
                    self.copied += text.len();
                }
            }
            self.text_len = text.len();
        }
        let as_u64 = |k: &str| meta.get(k).and_then(Value::as_u64);
        self.out.prompt_tokens = as_u64("prompt_tokens").or(self.out.prompt_tokens);
        self.out.cached_tokens = as_u64("cached_tokens").or(self.out.cached_tokens);
        if let Some(fr) = meta.get("finish_reason").filter(|f| !f.is_null()) {
            self.finished = true;
            self.out.finish_reason = Some(
                fr.get("type")
                    .and_then(Value::as_str)
                    .map(str::to_string)
                    .unwrap_or_else(|| fr.to_string()),
            );
            let timing_keys = [
                "e2e_latency",
                "spec_verify_ct",
                "spec_accept_length",
                "spec_accept_rate",
            ];
            let timings: serde_json::Map<String, Value> = timing_keys
                .iter()
                .filter_map(|k| meta.get(*k).map(|v| ((*k).to_string(), v.clone())))
                .collect();
            if !timings.is_empty() {
                self.out.server_timings = Some(Value::Object(timings));
            }
            self.out.spec =
                super::spec::from_sglang_meta(meta, completion.or(Some(self.tokens_so_far)));
        }
        Ok(false)
    }

    fn finish(mut self, saw_done: bool, elapsed: Duration) -> Result<Completion, RequestError> {
        // `[DONE]` without a finish reason is still an incomplete response.
        let _ = saw_done;
        if !self.finished {
            return Err(RequestError::Incomplete);
        }
        self.out.e2e = elapsed;
        self.out.completion_tokens = Some(self.tokens_so_far);
        Ok(self.out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::test_event as ev;

    #[test]
    fn cumulative_counts_become_per_event_tokens() {
        let mut c = Cumulative::default();
        let ms = Duration::from_millis;
        let e1 = r#"{"text":"a","meta_info":{"prompt_tokens":100,"cached_tokens":0,"completion_tokens":1,"finish_reason":null}}"#;
        let e2 = r#"{"text":"a b c","meta_info":{"prompt_tokens":100,"cached_tokens":0,"completion_tokens":3,"finish_reason":null}}"#;
        let e3 = r#"{"text":"a b c d","meta_info":{"prompt_tokens":100,"cached_tokens":0,"completion_tokens":4,"finish_reason":{"type":"length","length":4},"e2e_latency":0.5}}"#;
        assert!(!c.on_item(ms(10), ev(e1)).unwrap());
        assert!(!c.on_item(ms(20), ev(e2)).unwrap());
        assert!(!c.on_item(ms(30), ev(e3)).unwrap());
        assert!(c.on_item(ms(31), ev("[DONE]")).unwrap());
        let out = c.finish(true, ms(31)).unwrap();
        let tokens: Vec<u64> = out.events.iter().map(|e| e.tokens).collect();
        assert_eq!(tokens, vec![1, 2, 1]);
        assert_eq!(out.completion_tokens, Some(4));
        assert_eq!(out.prompt_tokens, Some(100));
        assert_eq!(out.finish_reason.as_deref(), Some("length"));
        assert_eq!(out.server_timings.unwrap()["e2e_latency"], 0.5);
    }

    #[test]
    fn cumulative_text_is_appended_not_copied_whole() {
        let mut c = Cumulative::default();
        let mut text = String::new();
        for i in 0..2000u64 {
            text.push_str(" word");
            let fin = if i == 1999 {
                r#"{"type":"length"}"#
            } else {
                "null"
            };
            let e = format!(
                r#"{{"text":"{text}","meta_info":{{"prompt_tokens":5,"completion_tokens":{},"finish_reason":{fin}}}}}"#,
                i + 1
            );
            c.on_item(Duration::from_millis(i), ev(&e)).unwrap();
        }
        assert_eq!(c.copied, text.len(), "each byte copied once");
        let out = c.finish(true, Duration::from_secs(3)).unwrap();
        assert_eq!(out.text, text);
    }

    #[test]
    fn error_events_and_cut_streams_fail() {
        let mut c = Cumulative::default();
        let err = c.on_item(Duration::ZERO, ev(r#"{"error":{"message":"boom"}}"#));
        assert_eq!(err, Err(RequestError::ServerEvent("boom".into())));
        let c = Cumulative::default();
        assert_eq!(
            c.finish(false, Duration::ZERO),
            Err(RequestError::Incomplete)
        );
    }
}
