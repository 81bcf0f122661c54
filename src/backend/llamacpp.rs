//! llama.cpp's llama-server native API: `/completion` with token-id prompts, one token per
//! event, no `[DONE]`, and the server's own `timings` on the final event.

use super::flush::Flusher;
use super::http::Http;
use super::sse::ItemRef;
use super::typed::{Event, SeqLen, Str, TypedEvent};
use super::{Backend, Completion, Flush, GenRequest, RequestError, StreamEvent, StreamFold};
use async_trait::async_trait;
use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_json::{Value, json};
use std::time::Duration;

/// The slot pinned for requests meant to reuse a cached prefix (`id_slot`).
pub const REUSE_SLOT: u32 = 0;

pub struct LlamaCpp {
    pub http: Http,
    pub flusher: Flusher,
}

#[async_trait]
impl Backend for LlamaCpp {
    fn api(&self) -> &'static str {
        "llamacpp"
    }

    fn takes_token_ids(&self) -> bool {
        true
    }

    async fn generate(&self, req: &GenRequest) -> Result<Completion, RequestError> {
        let prompt = req.prompt.to_json();
        let mut body = json!({
            "prompt": prompt,
            "n_predict": req.max_tokens,
            "ignore_eos": req.ignore_eos,
            "cache_prompt": req.cache_prompt,
            "temperature": 0.0,
            "stream": true,
        });
        // A prompt is reused only within the slot that holds it: pin one when reuse is wanted.
        if req.cache_prompt {
            body["id_slot"] = json!(REUSE_SLOT);
        }
        super::stream_completion(
            &self.http,
            "/completion",
            &body,
            &req.prompt,
            req.deadline,
            Events::default(),
        )
        .await
    }

    async fn flush(&self) -> Result<Flush, RequestError> {
        self.flusher.flush(&self.http).await
    }

    async fn tokenize(&self, text: &str) -> Result<Option<Vec<u32>>, RequestError> {
        super::tokenize::llamacpp_style(&self.http, text).await
    }

    async fn vocabulary(&self) -> super::vocab::VocabInfo {
        super::vocab::llamacpp_info(&self.http).await
    }

    async fn detokenize(&self, ids: &[u32]) -> Result<Option<String>, RequestError> {
        super::vocab::detokenize(&self.http, ids).await
    }

    async fn instance_marker(&self) -> Option<super::instance::InstanceMarker> {
        super::instance::llamacpp(&self.http).await
    }
}

#[derive(Default)]
pub(crate) struct Events {
    out: Completion,
    tokens: u64,
}

/// An event in its usual shape: a piece, not the final summary, not an error.
#[derive(Deserialize)]
struct Typed<'a> {
    #[serde(borrow)]
    content: Option<Str<'a>>,
    stop: Option<bool>,
    tokens: Option<SeqLen>,
    error: Option<IgnoredAny>,
}

impl<'a> TypedEvent<'a> for Typed<'a> {
    fn needs_value(&self) -> bool {
        self.error.is_some() || self.stop == Some(true)
    }
}

impl StreamFold for Events {
    fn on_item(&mut self, at: Duration, item: ItemRef<'_>) -> Result<bool, RequestError> {
        // llama-server ends on `stop:true`, never `[DONE]`.
        match super::typed::event_typed::<Typed<'_>>(item)? {
            Event::Skip | Event::Done => Ok(false),
            Event::Typed(t) => {
                let content = super::typed::text(&t.content);
                self.piece(at, content, false, t.tokens.map(|n| n.0));
                Ok(false)
            }
            Event::Value(v) => Ok(self.on_value(at, &v)),
        }
    }

    fn finish(self, complete: bool, elapsed: Duration) -> Result<Completion, RequestError> {
        super::completed(self.out, complete, elapsed)
    }
}

impl Events {
    /// An event the typed parse left to `Value`: the final one, or one of another shape.
    /// `true` when it was the final one.
    fn on_value(&mut self, at: Duration, v: &Value) -> bool {
        let content = v.get("content").and_then(Value::as_str).unwrap_or("");
        let stop = v.get("stop").and_then(Value::as_bool).unwrap_or(false);
        let ids = v.get("tokens").and_then(Value::as_array).map(Vec::len);
        self.piece(at, content, stop, ids);
        if !stop {
            return false;
        }
        let timings = v.get("timings").cloned().filter(Value::is_object);
        let t = |k: &str| {
            timings
                .as_ref()
                .and_then(|t| t.get(k))
                .and_then(Value::as_u64)
        };
        self.out.cached_tokens =
            t("cache_n").or_else(|| v.get("tokens_cached").and_then(Value::as_u64));
        self.out.prompt_tokens = match (t("prompt_n"), t("cache_n")) {
            (Some(p), c) => Some(p + c.unwrap_or(0)),
            _ => v.get("tokens_evaluated").and_then(Value::as_u64),
        };
        let predicted = v
            .get("tokens_predicted")
            .and_then(Value::as_u64)
            .or(t("predicted_n"));
        self.out.completion_tokens = predicted.or(Some(self.tokens));
        self.out.counts_from_server = ids.is_some() || predicted == Some(self.tokens);
        self.out.finish_reason = Some(match v.get("stop_type").and_then(Value::as_str) {
            Some("limit") => "length".to_string(),
            Some("eos") | Some("word") => "stop".to_string(),
            Some(other) => other.to_string(),
            None => "stop".to_string(),
        });
        if v.get("truncated").and_then(Value::as_bool) == Some(true) {
            self.out.finish_reason = Some("truncated".to_string());
        }
        self.out.spec = timings
            .as_ref()
            .and_then(super::spec::from_llamacpp_timings);
        self.out.server_timings = timings;
        true
    }

    /// `ids`: how many token ids the event lists, when it lists them.
    fn piece(&mut self, at: Duration, content: &str, stop: bool, ids: Option<usize>) {
        // Each event lists the token ids it carries; the final summary event carries none
        // of its own unless it also holds the last piece of content.
        let n = match ids {
            Some(n) => n as u64,
            None => u64::from(!content.is_empty() && !stop),
        };
        if n > 0 || (!content.is_empty() && !stop) {
            self.out.events.push(StreamEvent { at, tokens: n });
            self.tokens += n;
        }
        self.out.text.push_str(content);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::test_event as ev;

    #[test]
    fn typed_and_value_paths_agree_on_every_shape() {
        let piece = r#"{"index":0,"content":"a","tokens":[5],"stop":false,"id_slot":0,"tokens_predicted":1}"#;
        let escaped = r#"{"content":"é😀 \"q\"\n\u00e9","tokens":[6,7],"stop":false}"#;
        let no_ids = r#"{"content":"b","stop":false}"#;
        let nulls = r#"{"content":null,"tokens":null,"stop":null,"error":null}"#;
        let empty_ids = r#"{"content":"c","tokens":[]}"#;
        let number_ids = r#"{"content":"d","tokens":7,"stop":false}"#;
        let string_stop = r#"{"content":"e","tokens":[8],"stop":"no"}"#;
        let content_array = r#"{"content":["f"],"tokens":[9],"stop":false}"#;
        let last = r#"{"content":"","tokens":[],"stop":true,"stop_type":"limit","tokens_predicted":7,"tokens_evaluated":100,"truncated":false,"timings":{"cache_n":4,"prompt_n":96,"predicted_n":7,"draft_n":4,"draft_n_accepted":2}}"#;
        let streams: [&[&str]; 4] = [
            &[piece, last],
            &[
                piece,
                escaped,
                no_ids,
                nulls,
                empty_ids,
                number_ids,
                string_stop,
                content_array,
                last,
            ],
            &[piece, r#"{"error":{"code":500,"message":"boom"}}"#, last],
            &[piece, escaped],
        ];
        let folded = crate::backend::check_typed_against_value::<Typed<'static>, Events>(
            |f, at, v| f.on_value(at, v),
            &[piece, escaped, no_ids, nulls, empty_ids],
            &[number_ids, string_stop, content_array, last],
            &streams,
        );
        let out = folded[1].clone().unwrap();
        assert_eq!(out.text, "aé😀 \"q\"\nébcde");
        assert_eq!(out.prompt_tokens, Some(100));
        // 7 tokens: the prefill's first, then 7 − 1 − 2 accepted = 4 verify steps.
        assert_eq!(out.spec.unwrap().verify_steps, Some(4));
        assert_eq!(folded[2], Err(RequestError::ServerEvent("boom".into())));
        assert_eq!(folded[3], Err(RequestError::Incomplete));
    }

    #[test]
    fn events_and_final_timings() {
        let mut e = Events::default();
        let ms = Duration::from_millis;
        assert!(
            !e.on_item(ms(5), ev(r#"{"content":"a","tokens":[5],"stop":false}"#))
                .unwrap()
        );
        assert!(
            !e.on_item(ms(6), ev(r#"{"content":"b","tokens":[6],"stop":false}"#))
                .unwrap()
        );
        let last = r#"{"content":"","tokens":[],"stop":true,"stop_type":"limit","tokens_predicted":2,"tokens_evaluated":100,"truncated":false,"timings":{"cache_n":0,"prompt_n":100,"prompt_ms":12.5,"predicted_n":2,"predicted_ms":3.0}}"#;
        assert!(e.on_item(ms(7), ev(last)).unwrap());
        let out = e.finish(true, ms(7)).unwrap();
        assert_eq!(out.events.len(), 2);
        assert_eq!(out.prompt_tokens, Some(100));
        assert_eq!(out.cached_tokens, Some(0));
        assert_eq!(out.completion_tokens, Some(2));
        assert_eq!(out.finish_reason.as_deref(), Some("length"));
        assert_eq!(out.server_timings.unwrap()["prompt_ms"], 12.5);
    }

    #[test]
    fn mid_stream_error_event_fails_the_request() {
        let mut e = Events::default();
        let r = e.on_item(
            Duration::ZERO,
            ev(r#"{"error":{"code":500,"message":"invalid utf-8","type":"server_error"}}"#),
        );
        assert_eq!(r, Err(RequestError::ServerEvent("invalid utf-8".into())));
    }
}
