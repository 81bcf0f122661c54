//! From wire prompts to the token ids the model sees: text, id lists and chat messages,
//! then fitted to the context (refused with a message, or truncated from the front).

use super::tokenizer::{BOS, MAX_INPUT_ID, tokenize};
use serde::Deserialize;
use serde_json::Value;

/// A text prompt as the model sees it: BOS, then its tokens.
pub fn text_prompt(text: &str) -> Vec<u32> {
    let mut ids = vec![BOS];
    ids.extend(tokenize(text));
    ids
}

/// A token-id prompt; every id must be an integer in `0..65536`.
pub fn id_prompt(ids: &[Value]) -> Result<Vec<u32>, String> {
    ids.iter()
        .enumerate()
        .map(|(i, v)| {
            v.as_u64()
                .filter(|&id| id < u64::from(MAX_INPUT_ID))
                .map(|id| id as u32)
                .ok_or_else(|| {
                    format!(
                        "token id #{i} is {v}: ids must be integers from 0 to {}",
                        MAX_INPUT_ID - 1
                    )
                })
        })
        .collect()
}

/// A string, or a token-id list; a one-element list of either is taken as that element.
pub fn any_prompt(value: &Value, field: &str) -> Result<Vec<u32>, String> {
    match value {
        Value::String(text) => Ok(text_prompt(text)),
        Value::Array(items)
            if items.len() == 1 && (items[0].is_string() || items[0].is_array()) =>
        {
            any_prompt(&items[0], field)
        }
        Value::Array(items) if items.iter().all(|v| !v.is_string() && !v.is_array()) => {
            id_prompt(items)
        }
        Value::Array(_) => Err(format!(
            "`{field}` holds several prompts: batched requests are not supported by the simulator; send one prompt per request"
        )),
        other => Err(format!(
            "`{field}` must be a string or a list of token ids, got {other}"
        )),
    }
}

#[derive(Debug, Deserialize)]
pub struct ChatMessage {
    pub role: String,
    #[serde(default)]
    pub content: Value,
}

/// Chat messages rendered by the simulator's template: BOS, each role word and content, `assistant`.
pub fn chat_prompt(messages: &[ChatMessage]) -> Result<Vec<u32>, String> {
    if messages.is_empty() {
        return Err("`messages` is empty: send at least one message".to_string());
    }
    let mut ids = vec![BOS];
    for (i, message) in messages.iter().enumerate() {
        ids.extend(tokenize(&message.role));
        ids.extend(tokenize(&message_text(&message.content, i)?));
    }
    ids.extend(tokenize("assistant"));
    Ok(ids)
}

fn message_text(content: &Value, index: usize) -> Result<String, String> {
    match content {
        Value::Null => Ok(String::new()),
        Value::String(text) => Ok(text.clone()),
        Value::Array(parts) => Ok(parts
            .iter()
            .filter_map(|part| part.get("text").and_then(Value::as_str))
            .collect::<Vec<_>>()
            .join(" ")),
        other => Err(format!(
            "messages[{index}].content must be a string or a list of text parts, got {other}"
        )),
    }
}

/// The prompt that fits `context_length` with room for `max_tokens`, or why none does.
pub fn fit_context(
    mut prompt: Vec<u32>,
    max_tokens: u64,
    context_length: u64,
    truncate: bool,
) -> Result<Vec<u32>, String> {
    let prompt_tokens = prompt.len() as u64;
    if prompt_tokens == 0 {
        return Err("the prompt is empty: send at least one token".to_string());
    }
    let total = prompt_tokens.saturating_add(max_tokens);
    if total <= context_length {
        return Ok(prompt);
    }
    if truncate && max_tokens < context_length {
        let keep = (context_length - max_tokens) as usize;
        prompt.drain(..prompt.len() - keep);
        return Ok(prompt);
    }
    Err(format!(
        "Requested token count exceeds the model's maximum context length of {context_length} tokens. \
         You requested a total of {total} tokens: {prompt_tokens} tokens from the input and \
         {max_tokens} tokens for the completion. Please reduce the length of the input or the \
         number of tokens to generate."
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn text_prompts_start_with_bos() {
        assert_eq!(text_prompt("the"), vec![BOS, 300]);
    }

    #[test]
    fn ids_out_of_range_are_refused() {
        assert_eq!(
            id_prompt(&[json!(1), json!(65535)]).unwrap(),
            vec![1, 65535]
        );
        assert!(id_prompt(&[json!(65536)]).unwrap_err().contains("#0"));
        assert!(id_prompt(&[json!(-1)]).is_err());
        assert!(id_prompt(&[json!("7")]).is_err());
    }

    #[test]
    fn batches_are_refused_but_single_lists_accepted() {
        assert_eq!(
            any_prompt(&json!(["the"]), "prompt").unwrap(),
            vec![BOS, 300]
        );
        assert_eq!(any_prompt(&json!([[5, 6]]), "prompt").unwrap(), vec![5, 6]);
        assert!(
            any_prompt(&json!(["a", "b"]), "prompt")
                .unwrap_err()
                .contains("batched")
        );
        assert!(any_prompt(&json!(3), "prompt").is_err());
    }

    #[test]
    fn chat_template_adds_fixed_overhead() {
        let messages = vec![ChatMessage {
            role: "user".into(),
            content: json!("the the"),
        }];
        // BOS + user + 2 words + assistant
        assert_eq!(chat_prompt(&messages).unwrap().len(), 5);
    }

    #[test]
    fn too_long_is_refused_naming_both_numbers() {
        let err = fit_context(vec![1; 90], 20, 100, false).unwrap_err();
        assert!(
            err.contains("100 tokens") && err.contains("90 tokens") && err.contains("20 tokens"),
            "{err}"
        );
    }

    #[test]
    fn truncation_keeps_the_tail() {
        let prompt: Vec<u32> = (0..90).collect();
        let kept = fit_context(prompt, 20, 100, true).unwrap();
        assert_eq!(kept, (10..90).collect::<Vec<u32>>());
        assert!(
            fit_context(vec![1; 10], 100, 100, true).is_err(),
            "no room left for the prompt"
        );
        assert!(fit_context(vec![], 1, 100, false).is_err());
    }
}
