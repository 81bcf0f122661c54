//! A prompt serialised once per length and shared by every request of a load cell: only
//! the leading nonce is per request, so client memory does not grow with concurrency × length.

use super::{Prompt, RequestError};
use bytes::Bytes;
use serde_json::Value;

/// Stands in for the prompt inside a backend's JSON body until the body is spliced.
pub const PLACEHOLDER: &str = "\u{0}ctxbench-shared-prompt\u{0}";

/// One request's prompt: its own head (with the nonce) and the length's shared tail, each
/// already JSON text; `head` then `tail` is one JSON value (an id array or a string).
#[derive(Debug, Clone, PartialEq)]
pub struct SharedPrompt {
    pub head: Bytes,
    /// Ids in the head (0 for text).
    pub head_tokens: u64,
    pub tail: SharedTail,
}

/// The part of a length's prompts every request shares, serialised once.
#[derive(Debug, Clone, PartialEq)]
pub struct SharedTail {
    json: Bytes,
    /// Ids in the tail (token-id prompts only).
    pub tokens: Option<u64>,
    pub is_text: bool,
}

impl SharedTail {
    /// Split `whole` (a nonce-led prompt) after its first `head_len` ids, or after the nonce
    /// sentence for text, keeping the rest as the shared tail.
    pub fn from_prompt(whole: &Prompt, head_ids: usize) -> SharedTail {
        match whole {
            Prompt::Ids(ids) => {
                let rest = &ids[head_ids.min(ids.len())..];
                let mut s = String::with_capacity(rest.len() * 6 + 1);
                for (i, id) in rest.iter().enumerate() {
                    if i > 0 {
                        s.push(',');
                    }
                    s.push_str(&id.to_string());
                }
                s.push(']');
                SharedTail {
                    json: Bytes::from(s),
                    tokens: Some(rest.len() as u64),
                    is_text: false,
                }
            }
            Prompt::Text(t) => {
                // The nonce sentence ends at the first ". " (see `prompt::build_text`).
                let rest = t.split_once(". ").map(|(_, r)| r).unwrap_or("");
                let quoted = serde_json::to_string(rest).unwrap_or_else(|_| "\"\"".into());
                SharedTail {
                    json: Bytes::from(quoted[1..].to_string()),
                    tokens: None,
                    is_text: true,
                }
            }
            Prompt::Shared(p) => p.tail.clone(),
        }
    }

    /// A request's prompt: `head` (a nonce-only prompt of the same kind) before this tail.
    pub fn with_head(&self, head: &Prompt) -> SharedPrompt {
        let head_tokens = match head {
            Prompt::Ids(ids) => ids.len() as u64,
            _ => 0,
        };
        let json = match head {
            Prompt::Ids(ids) => {
                let mut s = String::from("[");
                for (i, id) in ids.iter().enumerate() {
                    if i > 0 {
                        s.push(',');
                    }
                    s.push_str(&id.to_string());
                }
                if !ids.is_empty() && self.tokens != Some(0) {
                    s.push(',');
                }
                s
            }
            Prompt::Text(t) => {
                let quoted = serde_json::to_string(t).unwrap_or_else(|_| "\"\"".into());
                quoted[..quoted.len() - 1].to_string()
            }
            Prompt::Shared(p) => return p.clone(),
        };
        SharedPrompt {
            head: Bytes::from(json),
            head_tokens,
            tail: self.clone(),
        }
    }
}

impl SharedPrompt {
    /// Tokens in the prompt, when it is made of ids.
    pub fn tokens(&self) -> Option<u64> {
        self.tail.tokens.map(|t| t + self.head_tokens)
    }

    /// The whole prompt as text (for text-only APIs that build their own bodies); `None`
    /// for id prompts.
    pub fn to_text(&self) -> Option<String> {
        if !self.tail.is_text {
            return None;
        }
        let mut json = self.head.to_vec();
        json.extend_from_slice(&self.tail.json);
        serde_json::from_slice(&json).ok()
    }

    /// The body's JSON with the placeholder replaced by this prompt, as byte chunks that
    /// share the tail rather than copying it.
    pub fn splice(&self, body: &Value) -> Result<Vec<Bytes>, RequestError> {
        let text = serde_json::to_string(body).map_err(|e| RequestError::Http {
            status: 0,
            message: format!("serialising the request: {e}"),
        })?;
        let marker = serde_json::to_string(PLACEHOLDER).unwrap_or_default();
        let Some(at) = text.find(&marker) else {
            return Err(RequestError::Http {
                status: 0,
                message: "internal: the request body has no place for the shared prompt".into(),
            });
        };
        let (before, after) = (&text[..at], &text[at + marker.len()..]);
        Ok(vec![
            Bytes::from(before.to_string()),
            self.head.clone(),
            self.tail.json.clone(),
            Bytes::from(after.to_string()),
        ])
    }
}

impl Prompt {
    /// The prompt as a JSON value for a backend's body (a placeholder for a shared prompt).
    pub fn to_json(&self) -> Value {
        match self {
            Prompt::Ids(ids) => serde_json::json!(ids),
            Prompt::Text(t) => Value::String(t.clone()),
            Prompt::Shared(_) => Value::String(PLACEHOLDER.to_string()),
        }
    }

    pub fn shared(&self) -> Option<&SharedPrompt> {
        match self {
            Prompt::Shared(p) => Some(p),
            _ => None,
        }
    }

    /// Whether the prompt is text (a chat route takes only text).
    pub fn is_text(&self) -> bool {
        match self {
            Prompt::Ids(_) => false,
            Prompt::Text(_) => true,
            Prompt::Shared(p) => p.tail.is_text,
        }
    }

    /// The prompt as text, for a `route` (named in the error) that takes nothing else.
    pub fn text_only(&self, route: &str) -> Result<std::borrow::Cow<'_, str>, RequestError> {
        let text = match self {
            Prompt::Text(t) => Some(std::borrow::Cow::Borrowed(t.as_str())),
            Prompt::Shared(p) => p.to_text().map(std::borrow::Cow::Owned),
            Prompt::Ids(_) => None,
        };
        text.ok_or_else(|| RequestError::Http {
            status: 0,
            message: format!("{route} takes text prompts only"),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn join(parts: &[Bytes]) -> String {
        parts
            .iter()
            .map(|b| std::str::from_utf8(b).unwrap())
            .collect()
    }

    #[test]
    fn id_prompts_splice_into_valid_json_equal_to_the_plain_body() {
        let whole = Prompt::Ids(vec![1, 2, 3, 10, 11, 12, 13]);
        let tail = SharedTail::from_prompt(&whole, 3);
        let p = tail.with_head(&Prompt::Ids(vec![7, 8, 9]));
        assert_eq!(p.tokens(), Some(7));
        let body = json!({"input_ids": Prompt::Shared(p.clone()).to_json(), "stream": true});
        let v: Value = serde_json::from_str(&join(&p.splice(&body).unwrap())).unwrap();
        assert_eq!(
            v,
            json!({"input_ids": [7, 8, 9, 10, 11, 12, 13], "stream": true})
        );
    }

    #[test]
    fn text_prompts_are_escaped_and_keep_the_nonce_first() {
        let whole = Prompt::Text("Session 00ff. a \"quoted\" word".into());
        let tail = SharedTail::from_prompt(&whole, 0);
        let p = tail.with_head(&Prompt::Text("Session abcd. ".into()));
        let body = json!({"prompt": Prompt::Shared(p.clone()).to_json()});
        let v: Value = serde_json::from_str(&join(&p.splice(&body).unwrap())).unwrap();
        assert_eq!(v["prompt"], "Session abcd. a \"quoted\" word");
        assert_eq!(p.tokens(), None);
    }

    #[test]
    fn the_tail_is_shared_not_copied() {
        let tail = SharedTail::from_prompt(&Prompt::Ids((0..1000).collect()), 16);
        let a = tail.with_head(&Prompt::Ids(vec![1; 16]));
        let b = tail.with_head(&Prompt::Ids(vec![2; 16]));
        assert_eq!(a.tail.json.as_ptr(), b.tail.json.as_ptr());
    }
}
