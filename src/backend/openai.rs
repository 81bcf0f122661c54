//! OpenAI-compatible routes (`/v1/completions`, `/v1/chat/completions`): delta streaming,
//! tokens counted from `continuous_usage_stats` or the final `usage`.

use super::flush::Flusher;
use super::http::Http;
use super::sse::ItemRef;
use super::typed::{Event, Field, First, Obj, Str, TypedEvent};
use super::{
    Backend, Completion, Flush, GenRequest, Prompt, RequestError, StreamEvent, StreamFold,
};
use crate::choices::Endpoint;
use async_trait::async_trait;
use serde::Deserialize;
use serde::de::IgnoredAny;
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
        let mut body = request_body(&self.model, req);
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

/// The body fields every streamed request shares: model, output length, usage on every
/// chunk.
fn request_body(model: &str, req: &GenRequest) -> Value {
    let mut body = json!({
        "model": model,
        "max_tokens": req.max_tokens,
        "temperature": 0.0,
        "stream": true,
        "stream_options": {"include_usage": true, "continuous_usage_stats": true},
    });
    if req.ignore_eos {
        body["ignore_eos"] = json!(true);
        body["min_tokens"] = json!(req.max_tokens);
    }
    body
}

/// One whole conversation (`messages`, a JSON array of `{role, content}`) on the chat
/// route, streamed and folded as any other request (`ctxbench sessions`). `req.prompt` is
/// not sent.
pub async fn stream_chat(
    http: &Http,
    model: &str,
    messages: Value,
    req: &GenRequest,
) -> Result<Completion, RequestError> {
    let mut body = request_body(model, req);
    body["messages"] = messages;
    super::stream_completion(
        http,
        "/v1/chat/completions",
        &body,
        &Prompt::Text(String::new()),
        req.deadline,
        Deltas::default(),
    )
    .await
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

/// A chunk in its usual shape: no error, no `timings` (llama-server's final chunk), no
/// `metrics` (vLLM's spec counts).
#[derive(Deserialize)]
struct Typed<'a> {
    #[serde(borrow)]
    choices: Option<First<Obj<Choice<'a>>>>,
    usage: Option<Obj<Usage>>,
    error: Option<IgnoredAny>,
    timings: Option<IgnoredAny>,
    metrics: Option<IgnoredAny>,
}

#[derive(Deserialize)]
struct Choice<'a> {
    #[serde(borrow, default)]
    text: Field<Str<'a>>,
    #[serde(borrow)]
    delta: Option<Obj<Delta<'a>>>,
    #[serde(borrow)]
    finish_reason: Option<Str<'a>>,
}

#[derive(Deserialize)]
struct Delta<'a> {
    #[serde(borrow, default)]
    content: Field<Str<'a>>,
    #[serde(borrow, default)]
    reasoning_content: Field<Str<'a>>,
}

#[derive(Deserialize)]
struct Usage {
    completion_tokens: Option<u64>,
    prompt_tokens: Option<u64>,
    prompt_tokens_details: Option<Obj<Details>>,
}

#[derive(Deserialize)]
struct Details {
    cached_tokens: Option<u64>,
}

impl<'a> TypedEvent<'a> for Typed<'a> {
    fn needs_value(&self) -> bool {
        self.error.is_some() || self.timings.is_some() || self.metrics.is_some()
    }
}

/// What every chunk says, however it was parsed.
struct Chunk<'s> {
    /// `choices` has a first element.
    choice: bool,
    text: &'s str,
    finish_reason: Option<&'s str>,
    /// `usage` is there and not null.
    usage: Option<UsageCounts>,
}

struct UsageCounts {
    completion: Option<u64>,
    prompt: Option<u64>,
    cached: Option<u64>,
}

impl<'a> Typed<'a> {
    fn chunk(&self) -> Chunk<'_> {
        let choice = self
            .choices
            .as_ref()
            .and_then(|c| c.0.as_ref())
            .map(|c| &c.0);
        let text = choice.and_then(|c| {
            // The first of these keys present wins, null or not, as `Value::get` picks it.
            let delta = c.delta.as_ref().map(|d| &d.0);
            [
                Some(&c.text),
                delta.map(|d| &d.content),
                delta.map(|d| &d.reasoning_content),
            ]
            .into_iter()
            .flatten()
            .find(|f| !f.is_absent())
            .and_then(Field::value)
        });
        Chunk {
            choice: choice.is_some(),
            text: text.map_or("", |s| &s.0),
            finish_reason: choice.and_then(|c| c.finish_reason.as_ref()).map(|s| &*s.0),
            usage: self.usage.as_ref().map(|u| UsageCounts {
                completion: u.0.completion_tokens,
                prompt: u.0.prompt_tokens,
                cached: u
                    .0
                    .prompt_tokens_details
                    .as_ref()
                    .and_then(|d| d.0.cached_tokens),
            }),
        }
    }
}

impl StreamFold for Deltas {
    fn on_item(&mut self, at: Duration, item: ItemRef<'_>) -> Result<bool, RequestError> {
        match super::typed::event_typed::<Typed<'_>>(item)? {
            Event::Skip => Ok(false),
            Event::Done => Ok(true),
            Event::Typed(t) => {
                self.fold_chunk(at, t.chunk());
                Ok(false)
            }
            Event::Value(v) => {
                self.on_value(at, &v);
                Ok(false)
            }
        }
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

impl Deltas {
    /// A chunk the typed parse left to `Value`: one with timings or spec metrics, or of
    /// another shape.
    fn on_value(&mut self, at: Duration, v: &Value) {
        let choice = v.pointer("/choices/0");
        let text = choice
            .and_then(|c| {
                c.get("text")
                    .or_else(|| c.pointer("/delta/content"))
                    .or_else(|| c.pointer("/delta/reasoning_content"))
            })
            .and_then(Value::as_str)
            .unwrap_or("");
        let usage = v.get("usage").filter(|u| !u.is_null()).map(|u| {
            let get = |p: &str| u.pointer(p).and_then(Value::as_u64);
            UsageCounts {
                completion: u.get("completion_tokens").and_then(Value::as_u64),
                prompt: get("/prompt_tokens"),
                cached: get("/prompt_tokens_details/cached_tokens"),
            }
        });
        self.fold_chunk(
            at,
            Chunk {
                choice: choice.is_some(),
                text,
                finish_reason: choice
                    .and_then(|c| c.get("finish_reason"))
                    .and_then(Value::as_str),
                usage,
            },
        );
        if let Some(t) = v.get("timings").filter(|t| t.is_object()) {
            self.out.server_timings = Some(t.clone());
            // llama-server's final chunk carries its draft counts in `timings`.
            if let Some(k) = super::spec::from_llamacpp_timings(t) {
                self.out.spec = Some(k);
            }
        }
        if let Some(k) = super::spec::from_vllm_metrics(v) {
            self.out.spec = Some(k);
        }
    }

    fn fold_chunk(&mut self, at: Duration, c: Chunk<'_>) {
        let cumulative = c.usage.as_ref().and_then(|u| u.completion);
        let tokens = match (cumulative, self.reported) {
            (Some(n), prev) if c.choice => n.saturating_sub(prev.unwrap_or(0)),
            _ => u64::from(!c.text.is_empty()),
        };
        if c.choice && (tokens > 0 || !c.text.is_empty()) {
            self.out.events.push(StreamEvent { at, tokens });
            self.counted += tokens;
            self.out.text.push_str(c.text);
        }
        if let Some(n) = cumulative {
            self.reported = Some(n.max(self.reported.unwrap_or(0)));
        }
        if let Some(u) = c.usage {
            self.out.prompt_tokens = u.prompt.or(self.out.prompt_tokens);
            if let Some(n) = u.cached {
                self.out.cached_tokens = Some(n);
            }
        }
        if let Some(fr) = c.finish_reason {
            self.finish_seen = true;
            self.out.finish_reason = Some(fr.to_string());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::test_event as ev;

    #[test]
    fn typed_and_value_paths_agree_on_every_shape() {
        let role = r#"{"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"role":"assistant","content":""},"logprobs":null,"finish_reason":null}],"usage":{"prompt_tokens":50,"completion_tokens":0,"total_tokens":50}}"#;
        let chat = r#"{"choices":[{"index":0,"delta":{"content":"é😀 \"q\"\n\u00e9"},"finish_reason":null}],"usage":{"prompt_tokens":50,"completion_tokens":1}}"#;
        let reasoning = r#"{"choices":[{"index":0,"delta":{"reasoning_content":"think"},"finish_reason":null}],"usage":{"prompt_tokens":50,"completion_tokens":2}}"#;
        // A key present as null wins over the keys after it, as `Value::get` picks it.
        let null_content = r#"{"choices":[{"index":0,"delta":{"content":null,"reasoning_content":"hidden"},"finish_reason":null}],"usage":{"completion_tokens":3}}"#;
        let text = r#"{"choices":[{"index":0,"text":"t","delta":{"content":"no"},"logprobs":null,"finish_reason":null},{"index":1}],"usage":null}"#;
        let null_text = r#"{"choices":[{"index":0,"text":null,"delta":{"content":"no"}}],"usage":{"completion_tokens":4,"prompt_tokens_details":null}}"#;
        let no_delta = r#"{"choices":[{"index":0,"delta":null,"finish_reason":null}],"usage":{}}"#;
        let empty = r#"{"choices":[],"usage":{"prompt_tokens":50,"completion_tokens":5,"prompt_tokens_details":{"cached_tokens":16}}}"#;
        let null_choices = r#"{"choices":null,"usage":{"completion_tokens":5},"error":null,"timings":null,"metrics":null}"#;
        let float = r#"{"choices":[{"index":0,"text":"f"}],"usage":{"completion_tokens":6.0}}"#;
        let null_choice = r#"{"choices":[null],"usage":{"completion_tokens":7}}"#;
        let object_choices = r#"{"choices":{"0":{"text":"o"}},"usage":{"completion_tokens":8}}"#;
        let number_reason =
            r#"{"choices":[{"text":"n","finish_reason":3}],"usage":{"completion_tokens":9}}"#;
        let duplicate = r#"{"choices":[{"text":"d","text":"e"}],"usage":{"completion_tokens":10,"completion_tokens":11}}"#;
        let last = r#"{"choices":[{"index":0,"delta":{"content":"!"},"finish_reason":"length"}],"usage":{"prompt_tokens":50,"completion_tokens":12}}"#;
        let timings = r#"{"choices":[],"usage":{"completion_tokens":12},"timings":{"prompt_n":50,"predicted_n":12,"draft_n":8,"draft_n_accepted":6}}"#;
        let metrics = r#"{"choices":[],"metrics":{"speculative_decoding":{"num_accepted_draft_tokens":5,"num_draft_tokens":9,"num_spec_steps":4}}}"#;
        // Shapes the typed parse takes, then odd ones it leaves to the `Value` path.
        let shapes = [
            role,
            chat,
            reasoning,
            null_content,
            text,
            null_text,
            no_delta,
            empty,
            null_choices,
        ];
        let odd = [float, null_choice, object_choices, number_reason, duplicate];
        let every = [&shapes[..], &odd, &[last, timings, metrics, "[DONE]"]].concat();
        let streams: [&[&str]; 5] = [
            &[role, chat, last, empty, "[DONE]"],
            &every,
            &[
                chat,
                r#"{"error":{"message":"boom","code":500}}"#,
                last,
                "[DONE]",
            ],
            &[chat, r#"{"choices":[{"text":"a"}"#, "[DONE]"],
            &[chat, last],
        ];
        let folded = crate::backend::check_typed_against_value::<Typed<'static>, Deltas>(
            |f, at, v| {
                f.on_value(at, v);
                false
            },
            &[&shapes[..], &[last]].concat(),
            &[&odd[..], &[timings, metrics]].concat(),
            &streams,
        );
        let out = folded[1].clone().unwrap();
        assert_eq!(out.text, "é😀 \"q\"\néthinktfone!");
        assert_eq!(out.cached_tokens, Some(16));
        assert!(out.server_timings.is_some());
        assert_eq!(out.spec.unwrap().verify_steps, Some(4));
        assert_eq!(folded[2], Err(RequestError::ServerEvent("boom".into())));
        assert!(matches!(
            folded[3],
            Err(RequestError::Malformed { offset: 0, .. })
        ));
        assert_eq!(folded[4], Err(RequestError::Incomplete));
    }

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
