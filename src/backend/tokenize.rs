//! Tokenize endpoints, which differ in request and response shape per server.

use super::RequestError;
use super::http::Http;
use reqwest::Method;
use serde_json::{Value, json};
use std::time::Duration;

const TOKENIZE_TIMEOUT: Duration = Duration::from_secs(30);

/// SGLang and vLLM: `{prompt, add_special_tokens}` -> `{tokens, count}`.
pub async fn vllm_style(http: &Http, text: &str) -> Result<Option<Vec<u32>>, RequestError> {
    let body = json!({"prompt": text, "add_special_tokens": false});
    post(http, &body).await
}

/// llama.cpp: `{content, add_special}` -> `{tokens}`.
pub async fn llamacpp_style(http: &Http, text: &str) -> Result<Option<Vec<u32>>, RequestError> {
    let body = json!({"content": text, "add_special": false});
    post(http, &body).await
}

async fn post(http: &Http, body: &Value) -> Result<Option<Vec<u32>>, RequestError> {
    let (status, text) = http
        .call(Method::POST, "/tokenize", Some(body), TOKENIZE_TIMEOUT)
        .await?;
    if status == 404 || status == 405 {
        return Ok(None);
    }
    if !(200..300).contains(&status) {
        return Err(http.status_error(status, text.as_bytes()));
    }
    Ok(parse_tokens(&text))
}

/// `{"tokens":[1,2]}` or `{"tokens":[{"id":1,…}]}`; `None` when the shape is unknown.
pub fn parse_tokens(text: &str) -> Option<Vec<u32>> {
    let v: Value = serde_json::from_str(text).ok()?;
    let tokens = v.get("tokens")?.as_array()?;
    tokens
        .iter()
        .map(|t| {
            t.as_u64()
                .or_else(|| t.get("id").and_then(Value::as_u64))
                .and_then(|id| u32::try_from(id).ok())
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::parse_tokens;

    #[test]
    fn token_shapes() {
        assert_eq!(
            parse_tokens(r#"{"tokens":[1,2,3],"count":3}"#),
            Some(vec![1, 2, 3])
        );
        assert_eq!(
            parse_tokens(r#"{"tokens":[{"id":5,"piece":"a"}]}"#),
            Some(vec![5])
        );
        assert_eq!(parse_tokens(r#"{"nope":1}"#), None);
    }
}
