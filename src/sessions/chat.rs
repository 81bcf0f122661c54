//! The server as a sessions run sees it: the chat route for whole conversations, the flush
//! before each cell, and the server's own prefix-cache hit counter.

use super::conversation::Conversation;
use crate::backend::flush::Flusher;
use crate::backend::http::Http;
use crate::backend::{Completion, Flush, GenRequest, Prompt, RequestError};
use std::time::Duration;

/// The server's hit counters, tokens: vLLM's, then SGLang's.
const HIT_COUNTERS: [&str; 2] = ["vllm:prefix_cache_hits_total", "sglang:cached_tokens_total"];
const SCRAPE_TIMEOUT: Duration = Duration::from_secs(2);

/// A connected chat target.
#[derive(Clone)]
pub struct ChatTarget {
    pub http: Http,
    pub model: String,
    pub flusher: Flusher,
}

/// A server counter's reading.
#[derive(Debug, Clone, PartialEq)]
pub struct CounterReading {
    pub name: String,
    pub value: f64,
}

impl ChatTarget {
    /// Send the whole conversation; the reply is forced to `max_tokens` (`ignore_eos`).
    pub async fn send(
        &self,
        conversation: &Conversation,
        max_tokens: u64,
        deadline: Duration,
    ) -> Result<Completion, RequestError> {
        let req = GenRequest {
            prompt: Prompt::Text(String::new()),
            max_tokens,
            ignore_eos: true,
            cache_prompt: true,
            deadline,
        };
        crate::backend::openai::stream_chat(&self.http, &self.model, conversation.to_json(), &req)
            .await
    }

    /// This target for one session: with `header`, every turn carries the session's `id`
    /// in it (for a session-affine router), over the same connection pool.
    pub fn for_session(&self, header: Option<&str>, id: &str) -> ChatTarget {
        let Some(h) = header else { return self.clone() };
        match self.http.with_header(h, id) {
            Ok(http) => ChatTarget {
                http,
                ..self.clone()
            },
            // The name is checked with the plan, and ids are letters, digits and dashes.
            Err(e) => unreachable!("--session-header: {e}"),
        }
    }

    /// Empty the prefix cache where the server offers a way: `done`, `not_offered`, or
    /// `failed: …`.
    pub async fn flush(&self) -> String {
        match self.flusher.flush(&self.http).await {
            Ok(Flush::Done) => "done".into(),
            Ok(Flush::NotOffered) => "not_offered".into(),
            Err(e) => format!("failed: {e}"),
        }
    }

    /// The server's cumulative prefix-cache hit counter, where `/metrics` has one.
    pub async fn hit_counter(&self) -> Option<CounterReading> {
        let text = crate::backend::prometheus::fetch(&self.http, SCRAPE_TIMEOUT).await?;
        counter_in(&text)
    }
}

/// The first hit counter `text` holds, summed over its series (label sets).
pub fn counter_in(text: &str) -> Option<CounterReading> {
    let m = crate::backend::prometheus::read(text);
    HIT_COUNTERS.iter().find_map(|name| {
        let bare = name.trim_end_matches("_total");
        let values: Vec<f64> = m.scalars(name).chain(m.scalars(bare)).collect();
        (!values.is_empty()).then(|| CounterReading {
            name: name.to_string(),
            value: values.iter().sum(),
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hit_counters_are_read_and_summed_over_series() {
        let text = "# TYPE vllm:prefix_cache_hits_total counter\n\
            vllm:prefix_cache_hits_total{model_name=\"m\",engine=\"0\"} 96.0\n\
            vllm:prefix_cache_hits_total{model_name=\"m\",engine=\"1\"} 4.0\n";
        let r = counter_in(text).unwrap();
        assert_eq!(
            (r.name.as_str(), r.value),
            ("vllm:prefix_cache_hits_total", 100.0)
        );
        let text = "sglang:cached_tokens_total 7\n";
        assert_eq!(counter_in(text).unwrap().value, 7.0);
        assert!(counter_in("other 1\n").is_none());
    }
}
