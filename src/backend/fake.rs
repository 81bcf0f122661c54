//! An in-process fake `Backend` with scripted replies: no socket, no clock. Each request is
//! answered from a script (timings, counts, faults), so the sweep's own logic — order,
//! resume, flags, timeouts, error records — is tested deterministically and fast.

use super::detect::{ServerInfo, ServerKind};
use super::{Backend, Completion, Connected, Flush, GenRequest, Prompt, RequestError, StreamEvent};
use async_trait::async_trait;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// One request the fake received, as the script sees it.
#[derive(Debug, Clone, PartialEq)]
pub struct Call {
    /// 0-based, in order of arrival (pre-sweep probes and warm-up included).
    pub index: usize,
    /// Prompt length: token ids, or words of a text prompt.
    pub prompt_tokens: u64,
    pub max_tokens: u64,
    pub deadline: Duration,
    pub cache_prompt: bool,
}

/// What the fake answers to one request. Events: the first at `ttft` with one token, then
/// one token every `step`; the stream ends with the last event.
#[derive(Debug, Clone, PartialEq)]
pub struct Reply {
    pub ttft: Duration,
    pub step: Duration,
    /// Tokens generated; default the request's `max_tokens`.
    pub completion_tokens: Option<u64>,
    /// Prompt tokens the server reports; default the prompt's length.
    pub prompt_tokens: Option<u64>,
    pub cached_tokens: Option<u64>,
    pub text: String,
}

impl Reply {
    /// A reply with these timings and the counts of a well-behaved server.
    pub fn timed(ttft: Duration, step: Duration) -> Self {
        Reply {
            ttft,
            step,
            completion_tokens: None,
            prompt_tokens: None,
            cached_tokens: Some(0),
            text: String::new(),
        }
    }
}

type Script = dyn Fn(&Call) -> Result<Reply, RequestError> + Send + Sync;

/// The fake server. Every call is recorded (see [`FakeBackend::log`]); a clone shares the
/// script and the log.
#[derive(Clone)]
pub struct FakeBackend {
    script: Arc<Script>,
    /// What `flush` answers.
    pub flush: Result<Flush, RequestError>,
    calls: CallLog,
}

/// The requests a fake received; a clone reads the same log after the fake has been handed
/// to the sweep.
#[derive(Debug, Clone, Default)]
pub struct CallLog(Arc<Mutex<Vec<Call>>>);

impl CallLog {
    /// Every request so far, in order.
    pub fn calls(&self) -> Vec<Call> {
        self.0.lock().map(|c| c.clone()).unwrap_or_default()
    }
}

impl FakeBackend {
    pub fn new(
        script: impl Fn(&Call) -> Result<Reply, RequestError> + Send + Sync + 'static,
    ) -> Self {
        FakeBackend {
            script: Arc::new(script),
            flush: Ok(Flush::Done),
            calls: CallLog::default(),
        }
    }

    /// The log of this fake's requests.
    pub fn log(&self) -> CallLog {
        self.calls.clone()
    }

    /// What the sweep sees after connecting: this backend and a server that reports its
    /// cached tokens (`reports_cached_tokens`) and nothing else. The `Http` is never used:
    /// the fake reports no instance marker, so the sweep never polls for a restart.
    pub fn connected(self, url: &str, reports_cached_tokens: bool) -> anyhow::Result<Connected> {
        let mut info = ServerInfo::new(ServerKind::Sglang);
        info.model = Some("fake".into());
        info.reports_cached_tokens = Some(reports_cached_tokens);
        Ok(Connected {
            fresh: Box::new(self.clone()),
            backend: Box::new(self),
            info,
            http: super::http::Http::new(url, None)?,
            model: "fake".into(),
        })
    }
}

/// Stands in for a tokenizer: each distinct word gets its own id, in order of appearance.
fn word_ids(text: &str) -> Vec<u32> {
    let mut seen: Vec<&str> = Vec::new();
    text.split_whitespace()
        .map(|w| match seen.iter().position(|s| *s == w) {
            Some(i) => i as u32 + 1,
            None => {
                seen.push(w);
                seen.len() as u32
            }
        })
        .collect()
}

/// The completion a reply describes, or a timeout when it would outlast the deadline (as
/// the HTTP layer reports one).
fn complete(r: Reply, call: &Call) -> Result<Completion, RequestError> {
    let n = r.completion_tokens.unwrap_or(call.max_tokens);
    let events: Vec<StreamEvent> = (0..n)
        .map(|k| StreamEvent {
            at: r.ttft + r.step * k as u32,
            tokens: 1,
        })
        .collect();
    let e2e = events.last().map_or(r.ttft, |e| e.at);
    if e2e > call.deadline {
        return Err(RequestError::Timeout(call.deadline.as_secs_f64()));
    }
    Ok(Completion {
        events,
        e2e,
        prompt_tokens: Some(r.prompt_tokens.unwrap_or(call.prompt_tokens)),
        cached_tokens: r.cached_tokens,
        completion_tokens: Some(n),
        finish_reason: Some("length".into()),
        server_timings: None,
        text: r.text,
        counts_from_server: true,
        flags: Vec::new(),
        new_connection: None,
        connect_s: None,
        spec: None,
    })
}

#[async_trait]
impl Backend for FakeBackend {
    fn api(&self) -> &'static str {
        "fake"
    }

    fn takes_token_ids(&self) -> bool {
        true
    }

    async fn generate(&self, req: &GenRequest) -> Result<Completion, RequestError> {
        let prompt_tokens = match &req.prompt {
            Prompt::Ids(ids) => ids.len() as u64,
            Prompt::Text(t) => t.split_whitespace().count() as u64,
            Prompt::Shared(p) => p.tokens().unwrap_or(0),
        };
        let call = {
            let mut calls = self.calls.0.lock().map_err(|_| RequestError::Incomplete)?;
            let call = Call {
                index: calls.len(),
                prompt_tokens,
                max_tokens: req.max_tokens,
                deadline: req.deadline,
                cache_prompt: req.cache_prompt,
            };
            calls.push(call.clone());
            call
        };
        complete((self.script)(&call)?, &call)
    }

    async fn flush(&self) -> Result<Flush, RequestError> {
        self.flush.clone()
    }

    async fn tokenize(&self, text: &str) -> Result<Option<Vec<u32>>, RequestError> {
        Ok(Some(word_ids(text)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(max_tokens: u64, deadline_s: u64) -> Call {
        Call {
            index: 0,
            prompt_tokens: 100,
            max_tokens,
            deadline: Duration::from_secs(deadline_s),
            cache_prompt: false,
        }
    }

    #[test]
    fn a_reply_becomes_evenly_spaced_events() {
        let r = Reply::timed(Duration::from_millis(100), Duration::from_millis(10));
        let c = complete(r, &call(4, 10)).unwrap();
        let at: Vec<u64> = c.events.iter().map(|e| e.at.as_millis() as u64).collect();
        assert_eq!(at, [100, 110, 120, 130]);
        assert_eq!(c.e2e, Duration::from_millis(130));
        assert_eq!(
            (c.prompt_tokens, c.completion_tokens, c.cached_tokens),
            (Some(100), Some(4), Some(0))
        );
    }

    #[test]
    fn a_reply_past_the_deadline_is_a_timeout() {
        let r = Reply::timed(Duration::from_secs(2), Duration::from_secs(1));
        assert_eq!(
            complete(r, &call(2, 2)),
            Err(RequestError::Timeout(2.0)),
            "e2e 3 s against a 2 s deadline"
        );
    }

    #[test]
    fn words_get_stable_ids() {
        assert_eq!(word_ids("a b a c b"), [1, 2, 1, 3, 2]);
    }
}
