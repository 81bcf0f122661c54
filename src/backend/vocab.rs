//! What a server tells of its vocabulary (size, special pieces) and its detokenize routes:
//! prompts made of ids alone need them when its tokenizer can encode no text at all.

use super::RequestError;
use super::http::Http;
use reqwest::Method;
use serde_json::{Value, json};
use std::time::Duration;

const VOCAB_TIMEOUT: Duration = Duration::from_secs(30);

/// The server's vocabulary as far as it says.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VocabInfo {
    /// Number of ids (`n_vocab`), where reported.
    pub size: Option<u32>,
    /// Pieces of special tokens it names (BOS, EOS), never to be sent as content.
    pub special: Vec<String>,
}

/// llama-server: `n_vocab` from `/props` (some builds) or `/v1/models` `data[0].meta`, and
/// the BOS/EOS pieces from `/props`.
pub async fn llamacpp_info(http: &Http) -> VocabInfo {
    let get = |path: &'static str| async move {
        http.get_json(path, VOCAB_TIMEOUT)
            .await
            .ok()
            .flatten()
            .filter(Value::is_object)
    };
    let props = get("/props").await;
    let models = get("/v1/models").await;
    parse_llamacpp(props.as_ref(), models.as_ref())
}

fn parse_llamacpp(props: Option<&Value>, models: Option<&Value>) -> VocabInfo {
    let n = |v: Option<&Value>, pointer: &str| {
        v.and_then(|v| v.pointer(pointer))
            .and_then(Value::as_u64)
            .and_then(|n| u32::try_from(n).ok())
            .filter(|&n| n > 0)
    };
    let special = ["bos_token", "eos_token"]
        .iter()
        .filter_map(|k| props?.get(*k)?.as_str())
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect();
    VocabInfo {
        size: n(props, "/n_vocab").or_else(|| n(models, "/data/0/meta/n_vocab")),
        special,
    }
}

/// `/detokenize {tokens}` → llama-server's `{content}` (SGLang's `{text}`); `None` where
/// the route is missing.
pub async fn detokenize(http: &Http, ids: &[u32]) -> Result<Option<String>, RequestError> {
    post(http, &json!({"tokens": ids})).await
}

/// vLLM: `/detokenize {model, tokens}` → `{prompt}`; `None` where the route is missing.
pub async fn detokenize_for_model(
    http: &Http,
    model: &str,
    ids: &[u32],
) -> Result<Option<String>, RequestError> {
    post(http, &json!({"model": model, "tokens": ids})).await
}

async fn post(http: &Http, body: &Value) -> Result<Option<String>, RequestError> {
    let (status, text) = http
        .call(Method::POST, "/detokenize", Some(body), VOCAB_TIMEOUT)
        .await?;
    if status == 404 || status == 405 {
        return Ok(None);
    }
    if !(200..300).contains(&status) {
        return Err(http.status_error(status, text.as_bytes()));
    }
    parse_detokenized(&text)
        .map(Some)
        .ok_or_else(|| RequestError::Http {
            status,
            message: format!(
                "/detokenize answered neither `content`, `prompt` nor `text`: {}",
                text.chars().take(200).collect::<String>()
            ),
        })
}

/// The text of a detokenize answer, whichever server's field holds it.
fn parse_detokenized(text: &str) -> Option<String> {
    let v: Value = serde_json::from_str(text).ok()?;
    ["content", "prompt", "text"]
        .iter()
        .find_map(|k| v.get(*k)?.as_str())
        .map(str::to_string)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn llamacpp_size_and_specials() {
        let props = json!({"bos_token": "<s>", "eos_token": "</s>", "total_slots": 1});
        let models = json!({"data": [{"id": "m", "meta": {"n_vocab": 249, "n_ctx": 32768}}]});
        let v = parse_llamacpp(Some(&props), Some(&models));
        assert_eq!(v.size, Some(249));
        assert_eq!(v.special, vec!["<s>".to_string(), "</s>".to_string()]);
        // `/props` wins where it has the size; nothing known gives nothing.
        let props = json!({"n_vocab": 32000, "bos_token": ""});
        let v = parse_llamacpp(Some(&props), Some(&models));
        assert_eq!((v.size, v.special.len()), (Some(32000), 0));
        assert_eq!(parse_llamacpp(None, None), VocabInfo::default());
    }

    #[test]
    fn detokenize_shapes() {
        assert_eq!(
            parse_detokenized(r#"{"content":"the"}"#).as_deref(),
            Some("the")
        );
        assert_eq!(
            parse_detokenized(r#"{"prompt":" of"}"#).as_deref(),
            Some(" of")
        );
        assert_eq!(parse_detokenized(r#"{"text":"x"}"#).as_deref(), Some("x"));
        assert_eq!(parse_detokenized(r#"{"tokens":[1]}"#), None);
    }
}
