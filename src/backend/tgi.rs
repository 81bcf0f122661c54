//! Hugging Face TGI's native API: `/generate_stream` (SSE, one token per event, no `[DONE]`;
//! the last event holds `generated_text` and, with `details: true`, `generated_tokens`,
//! `finish_reason` and `input_length`), `/tokenize` for exact prompt lengths, and the limits
//! of `/info` (`max_input_tokens`, `max_total_tokens`, `max_concurrent_requests`) checked
//! before a request is sent. TGI has no `ignore_eos`: a shorter answer is `early_stop`.

use super::detect::ServerInfo;
use super::http::Http;
use super::sse::ItemRef;
use super::{
    Backend, Completion, EventJson, Flush, GenRequest, Prompt, RequestError, StreamEvent,
    StreamFold,
};
use async_trait::async_trait;
use serde_json::{Value, json};
use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

const TOKENIZE_TIMEOUT: Duration = Duration::from_secs(60);
/// Prompts whose exact length is remembered from `/tokenize` (a sweep tokenizes each one
/// just before sending it; a load mode a few at a time).
const REMEMBERED: usize = 64;

pub struct Tgi {
    http: Http,
    max_input_tokens: Option<u64>,
    max_total_tokens: Option<u64>,
    max_concurrent: Option<u64>,
    in_flight: Arc<AtomicU64>,
    /// (hash of a text, its token count) from `/tokenize`, newest last.
    lengths: Mutex<VecDeque<(u64, u64)>>,
}

impl Tgi {
    pub fn new(http: Http, info: &ServerInfo) -> Self {
        Tgi {
            http,
            max_input_tokens: info.max_input_tokens,
            max_total_tokens: info.context_length,
            max_concurrent: info.max_running_requests,
            in_flight: Arc::new(AtomicU64::new(0)),
            lengths: Mutex::new(VecDeque::new()),
        }
    }

    fn lengths(&self) -> std::sync::MutexGuard<'_, VecDeque<(u64, u64)>> {
        self.lengths.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn known_length(&self, text: &str) -> Option<u64> {
        let h = hash(text);
        self.lengths()
            .iter()
            .rev()
            .find(|(k, _)| *k == h)
            .map(|(_, n)| *n)
    }

    /// The `/info` limits a request of `prompt` tokens (when known) and `max_new` would break.
    fn check_limits(&self, prompt: Option<u64>, max_new: u64) -> Result<(), RequestError> {
        if let (Some(p), Some(max)) = (prompt, self.max_input_tokens)
            && p > max
        {
            return Err(RequestError::ContextExceeded(format!(
                "not sent: the prompt has {p} tokens and the server's /info max_input_tokens is {max}"
            )));
        }
        if let Some(total) = self.max_total_tokens {
            // Any prompt has at least one token (TGI refuses empty inputs).
            let p = prompt.unwrap_or(1);
            if p + max_new > total {
                return Err(RequestError::ContextExceeded(format!(
                    "not sent: {p} prompt + {max_new} new tokens exceed the server's /info max_total_tokens of {total}"
                )));
            }
        }
        Ok(())
    }

    /// A place among `/info` `max_concurrent_requests`; TGI refuses beyond it.
    fn permit(&self) -> Result<Permit, RequestError> {
        let max = self.max_concurrent.unwrap_or(u64::MAX);
        self.in_flight
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                (n < max).then_some(n + 1)
            })
            .map_err(|n| RequestError::Http {
                status: 0,
                message: format!(
                    "not sent: {n} requests are in flight and the server's /info \
                     max_concurrent_requests is {max} (TGI would answer `Model is overloaded`)"
                ),
            })?;
        Ok(Permit(Arc::clone(&self.in_flight)))
    }
}

struct Permit(Arc<AtomicU64>);

impl Drop for Permit {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

fn hash(text: &str) -> u64 {
    use std::hash::{DefaultHasher, Hash, Hasher};
    let mut h = DefaultHasher::new();
    text.hash(&mut h);
    h.finish()
}

#[async_trait]
impl Backend for Tgi {
    fn api(&self) -> &'static str {
        "tgi"
    }

    fn takes_token_ids(&self) -> bool {
        false
    }

    fn exact_text_lengths(&self) -> bool {
        true
    }

    async fn generate(&self, req: &GenRequest) -> Result<Completion, RequestError> {
        let text = req.prompt.text_only("TGI's /generate_stream")?;
        let text: &str = &text;
        self.check_limits(self.known_length(text), req.max_tokens)?;
        let _permit = self.permit()?;
        let body = json!({
            "inputs": text,
            "parameters": {
                "max_new_tokens": req.max_tokens,
                "details": true,
                "do_sample": false,
            },
        });
        super::stream_completion(
            &self.http,
            "/generate_stream",
            &body,
            &Prompt::Text(String::new()),
            req.deadline,
            Tokens::default(),
        )
        .await
    }

    async fn flush(&self) -> Result<Flush, RequestError> {
        Ok(Flush::NotOffered)
    }

    /// `POST /tokenize {inputs}` -> `[{id, text, start, stop}]`, special tokens included as
    /// in a generation, so the count is the prompt's exact length.
    async fn tokenize(&self, text: &str) -> Result<Option<Vec<u32>>, RequestError> {
        let (status, body) = self
            .http
            .call(
                reqwest::Method::POST,
                "/tokenize",
                Some(&json!({ "inputs": text })),
                TOKENIZE_TIMEOUT,
            )
            .await?;
        if status == 404 || status == 405 {
            return Ok(None);
        }
        if !(200..300).contains(&status) {
            return Err(self.http.status_error(status, body.as_bytes()));
        }
        let ids = parse_tokens(&body).ok_or_else(|| RequestError::Malformed {
            offset: 0,
            message: "/tokenize did not answer a list of {id, …} tokens".into(),
        })?;
        let mut lengths = self.lengths();
        if lengths.len() == REMEMBERED {
            lengths.pop_front();
        }
        lengths.push_back((hash(text), ids.len() as u64));
        Ok(Some(ids))
    }
}

/// TGI's tokenize answer: a bare list of `{id, text, start, stop}`.
pub fn parse_tokens(body: &str) -> Option<Vec<u32>> {
    let v: Value = serde_json::from_str(body).ok()?;
    v.as_array()?
        .iter()
        .map(|t| {
            t.get("id")
                .and_then(Value::as_u64)
                .and_then(|id| u32::try_from(id).ok())
        })
        .collect()
}

/// One token per event; the event with `generated_text` is the last.
#[derive(Default)]
struct Tokens {
    out: Completion,
    counted: u64,
    finished: bool,
}

impl StreamFold for Tokens {
    fn on_item(&mut self, at: Duration, item: ItemRef<'_>) -> Result<bool, RequestError> {
        let v = match super::event_json(item) {
            Ok(EventJson::Skip | EventJson::Done) => return Ok(false),
            Ok(EventJson::Data(v)) => v,
            // Validation errors come as an event in a 200 stream: one about the input's
            // length is the context being exceeded.
            Err(RequestError::ServerEvent(m)) if m.contains("`inputs`") => {
                return Err(RequestError::ContextExceeded(m));
            }
            Err(e) => return Err(e),
        };
        if let Some(token) = v.get("token").filter(|t| t.is_object()) {
            let special = token.get("special").and_then(Value::as_bool) == Some(true);
            let text = token.get("text").and_then(Value::as_str).unwrap_or("");
            self.out.events.push(StreamEvent { at, tokens: 1 });
            self.counted += 1;
            if !special {
                self.out.text.push_str(text);
            }
        }
        if v.get("generated_text").is_none_or(Value::is_null) {
            return Ok(false);
        }
        self.finished = true;
        let details = v.get("details").filter(|d| d.is_object());
        let get = |k: &str| details.and_then(|d| d.get(k));
        let generated = get("generated_tokens").and_then(Value::as_u64);
        self.out.completion_tokens = Some(generated.unwrap_or(self.counted));
        self.out.counts_from_server = generated == Some(self.counted);
        self.out.prompt_tokens = get("input_length").and_then(Value::as_u64);
        self.out.finish_reason = Some(
            match get("finish_reason").and_then(Value::as_str) {
                Some("length") => "length",
                Some("eos_token") | Some("stop_sequence") | None => "stop",
                Some(other) => other,
            }
            .to_string(),
        );
        Ok(true)
    }

    fn finish(self, complete: bool, elapsed: Duration) -> Result<Completion, RequestError> {
        super::completed(self.out, complete && self.finished, elapsed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::sse::SseParser;

    fn fold(stream: &str) -> Result<Completion, RequestError> {
        let mut t = Tokens::default();
        let mut done = false;
        let items = SseParser::new().push(stream.as_bytes()).unwrap();
        for (i, item) in items.iter().enumerate() {
            done = t.on_item(Duration::from_millis(10 * (i as u64 + 1)), item.borrowed())?;
            if done {
                break;
            }
        }
        t.finish(done, Duration::from_millis(100))
    }

    #[test]
    fn fixture_stream_with_details_on_the_last_event() {
        let c = fold(include_str!("../../tests/fixtures/tgi/generate_stream.sse")).unwrap();
        assert_eq!(c.events.len(), 4);
        assert_eq!(c.completion_tokens, Some(4));
        assert!(c.counts_from_server);
        assert_eq!(c.prompt_tokens, Some(7));
        assert_eq!(c.finish_reason.as_deref(), Some("length"));
        assert_eq!(c.text, " Deep learning is a");
        assert_eq!(c.cached_tokens, None, "TGI does not say");
    }

    #[test]
    fn eos_ends_with_a_special_token_and_stop() {
        let c = fold(include_str!(
            "../../tests/fixtures/tgi/generate_stream_eos.sse"
        ))
        .unwrap();
        assert_eq!(c.finish_reason.as_deref(), Some("stop"));
        assert_eq!(c.completion_tokens, Some(3));
        assert_eq!(c.text, " Paris.", "the EOS token's text is not content");
    }

    #[test]
    fn validation_error_events_are_context_errors_and_cut_streams_incomplete() {
        let r = fold(include_str!(
            "../../tests/fixtures/tgi/validation_error.sse"
        ));
        assert!(matches!(r, Err(RequestError::ContextExceeded(m)) if m.contains("max_new_tokens")));
        let r = fold("data: {\"error\":\"Model is overloaded\",\"error_type\":\"overloaded\"}\n\n");
        assert_eq!(
            r,
            Err(RequestError::ServerEvent("Model is overloaded".into()))
        );
        let first = include_str!("../../tests/fixtures/tgi/generate_stream.sse")
            .split("\n\n")
            .next()
            .unwrap()
            .to_string()
            + "\n\n";
        assert_eq!(fold(&first), Err(RequestError::Incomplete));
    }

    #[test]
    fn tokenize_and_info_fixtures() {
        let ids = parse_tokens(include_str!("../../tests/fixtures/tgi/tokenize.json")).unwrap();
        assert_eq!(ids, vec![1, 1724, 338, 21784, 6509, 29973]);
        assert_eq!(parse_tokens(r#"{"tokens":[1]}"#), None);
    }

    #[test]
    fn limits_and_concurrency_are_checked_before_sending() {
        let http = Http::new("http://127.0.0.1:1", None).unwrap();
        let t = Tgi {
            http,
            max_input_tokens: Some(4095),
            max_total_tokens: Some(4096),
            max_concurrent: Some(1),
            in_flight: Arc::new(AtomicU64::new(0)),
            lengths: Mutex::new(VecDeque::new()),
        };
        assert!(t.check_limits(Some(4000), 96).is_ok());
        let e = t.check_limits(Some(4000), 97).unwrap_err();
        assert!(matches!(&e, RequestError::ContextExceeded(m) if m.contains("max_total_tokens")));
        let e = t.check_limits(Some(4096), 0).unwrap_err();
        assert!(matches!(&e, RequestError::ContextExceeded(m) if m.contains("max_input_tokens")));
        let held = t.permit().unwrap();
        let e = t.permit().err().unwrap();
        assert!(e.to_string().contains("max_concurrent_requests"), "{e}");
        drop(held);
        assert!(t.permit().is_ok());
    }
}
