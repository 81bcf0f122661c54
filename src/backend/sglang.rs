//! SGLang's native API: `/generate` with `input_ids`, cumulative streaming with `meta_info`.

use super::flush::Flusher;
use super::http::Http;
use super::sse::ItemRef;
use super::typed::{Event, Obj, Str, TypedEvent};
use super::{
    Backend, Completion, Flush, GenRequest, Prompt, RequestError, StreamEvent, StreamFold,
};
use async_trait::async_trait;
use serde::Deserialize;
use serde::de::IgnoredAny;
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

/// An event in its usual shape (no finish reason, no error).
#[derive(Deserialize)]
struct Typed<'a> {
    #[serde(borrow)]
    text: Option<Str<'a>>,
    meta_info: Option<Obj<Meta>>,
    error: Option<IgnoredAny>,
}

#[derive(Deserialize, Default)]
struct Meta {
    completion_tokens: Option<u64>,
    prompt_tokens: Option<u64>,
    cached_tokens: Option<u64>,
    finish_reason: Option<IgnoredAny>,
}

impl<'a> TypedEvent<'a> for Typed<'a> {
    fn needs_value(&self) -> bool {
        self.error.is_some()
            || self
                .meta_info
                .as_ref()
                .is_some_and(|m| m.0.finish_reason.is_some())
    }
}

/// What every event says, however it was parsed.
struct Counts<'s> {
    text: &'s str,
    completion: Option<u64>,
    prompt: Option<u64>,
    cached: Option<u64>,
}

impl StreamFold for Cumulative {
    fn on_item(&mut self, at: Duration, item: ItemRef<'_>) -> Result<bool, RequestError> {
        match super::typed::event_typed::<Typed<'_>>(item)? {
            Event::Skip => Ok(false),
            Event::Done => Ok(true),
            Event::Typed(e) => {
                let meta = e.meta_info.map(|m| m.0).unwrap_or_default();
                self.count(
                    at,
                    Counts {
                        text: super::typed::text(&e.text),
                        completion: meta.completion_tokens,
                        prompt: meta.prompt_tokens,
                        cached: meta.cached_tokens,
                    },
                );
                Ok(false)
            }
            Event::Value(v) => {
                self.on_value(at, &v);
                Ok(false)
            }
        }
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

impl Cumulative {
    /// An event the typed parse left to `Value`: a final one, or one of another shape.
    fn on_value(&mut self, at: Duration, v: &Value) {
        // Borrowed, not cloned.
        static NULL: Value = Value::Null;
        let meta = v.get("meta_info").unwrap_or(&NULL);
        let as_u64 = |k: &str| meta.get(k).and_then(Value::as_u64);
        let completion = as_u64("completion_tokens");
        self.count(
            at,
            Counts {
                text: v.get("text").and_then(Value::as_str).unwrap_or(""),
                completion,
                prompt: as_u64("prompt_tokens"),
                cached: as_u64("cached_tokens"),
            },
        );
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
    }

    fn count(&mut self, at: Duration, c: Counts<'_>) {
        let Counts {
            text,
            completion,
            prompt,
            cached,
        } = c;
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
        self.out.prompt_tokens = prompt.or(self.out.prompt_tokens);
        self.out.cached_tokens = cached.or(self.out.cached_tokens);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::test_event as ev;
    use crate::backend::typed::event_typed;
    use std::borrow::Cow;

    #[test]
    fn typed_and_value_paths_agree_on_every_shape() {
        let normal = r#"{"text":"a","meta_info":{"id":"x","prompt_tokens":10,"cached_tokens":2,"completion_tokens":1,"finish_reason":null}}"#;
        let nulls = r#"{"text":null,"meta_info":{"prompt_tokens":null,"cached_tokens":null,"completion_tokens":null,"finish_reason":null}}"#;
        let no_meta = r#"{"text":"a b"}"#;
        let null_meta = r#"{"text":"a b c","meta_info":null}"#;
        let non_ascii = r#"{"text":"a b c é😀","meta_info":{"completion_tokens":5}}"#;
        let escaped = r#"{"text":"a b c é😀 \u00e9\ud83d\ude00 \"q\"\n","meta_info":{"completion_tokens":7,"error":null},"error":null}"#;
        let float = r#"{"text":"a b c é😀 \u00e9\ud83d\ude00 \"q\"\n+","meta_info":{"completion_tokens":8.0}}"#;
        let meta_array = r#"{"text":"a b c é😀 \u00e9\ud83d\ude00 \"q\"\n+-","meta_info":[1,2]}"#;
        let text_number = r#"{"text":5,"meta_info":{"completion_tokens":9}}"#;
        let duplicate = r#"{"text":"x","text":"a b c é😀 \u00e9\ud83d\ude00 \"q\"\n+-!","meta_info":{"completion_tokens":10}}"#;
        let mid_char = r#"{"text":"a b c é😀 \u00e9\ud83d\ude00 \"q\"\n+-!\u00e9","meta_info":{"completion_tokens":11}}"#;
        let last = r#"{"text":"a b c é😀 \u00e9\ud83d\ude00 \"q\"\n+-!\u00e9z","meta_info":{"completion_tokens":12,"prompt_tokens":10,"finish_reason":{"type":"length","length":12},"e2e_latency":0.25,"spec_verify_ct":6}}"#;
        let streams: [&[&str]; 6] = [
            &[normal, last, "[DONE]"],
            &[
                normal,
                nulls,
                no_meta,
                null_meta,
                non_ascii,
                escaped,
                float,
                meta_array,
                text_number,
                duplicate,
                mid_char,
                last,
                "[DONE]",
            ],
            &[no_meta, non_ascii, escaped, "[DONE]"],
            &[normal, r#"{"error":{"message":"boom"}}"#, last],
            &[normal, r#"{"text":"a","meta_info":{"#, last],
            &[normal, no_meta, r#"{"text":"a b c","error":"late"}"#],
        ];
        let folded = crate::backend::check_typed_against_value::<Typed<'static>, Cumulative>(
            |f, at, v| {
                f.on_value(at, v);
                false
            },
            &[
                normal, nulls, no_meta, null_meta, non_ascii, escaped, mid_char,
            ],
            &[float, meta_array, text_number, duplicate, last],
            &streams,
        );
        let out = folded[1].clone().unwrap();
        assert_eq!(out.text, "a b c é😀 é😀 \"q\"\n+-!éz");
        assert_eq!(out.completion_tokens, Some(12));
        assert_eq!(out.spec.unwrap().verify_steps, Some(6));
        assert_eq!(folded[3], Err(RequestError::ServerEvent("boom".into())));
        assert!(matches!(
            &folded[4],
            Err(RequestError::Malformed { offset: 0, message }) if message.starts_with("not JSON")
        ));
        assert_eq!(folded[5], Err(RequestError::ServerEvent("late".into())));
    }

    #[test]
    fn escaped_text_is_owned_and_plain_text_borrowed() {
        let Ok(Event::Typed(t)) = event_typed::<Typed<'_>>(ev(r#"{"text":"héllo"}"#)) else {
            panic!("typed");
        };
        assert!(matches!(t.text, Some(Str(Cow::Borrowed("héllo")))));
        let Ok(Event::Typed(t)) = event_typed::<Typed<'_>>(ev(r#"{"text":"h\u00e9llo"}"#)) else {
            panic!("typed");
        };
        assert!(matches!(t.text, Some(Str(Cow::Owned(ref s))) if s == "héllo"));
    }

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
