//! `--dataset` question-answering items for task `qa`: LongBench-style JSONL (`input` or
//! `question`, `context`, `answers` or `answer`), read before anything is sent.

use serde_json::Value;
use std::path::Path;

/// One question with the passage that answers it and the accepted answers.
#[derive(Debug, Clone, PartialEq)]
pub struct QaItem {
    pub question: String,
    pub context: String,
    pub answers: Vec<String>,
}

/// Tokens per byte of prose, a generous estimate (English runs near 0.25).
const PROSE_TOKENS_PER_BYTE: f64 = 0.35;

impl QaItem {
    /// Tokens the item takes (context and question), estimated on the high side.
    pub fn estimated_tokens(&self) -> u64 {
        ((self.context.len() + self.question.len()) as f64 * PROSE_TOKENS_PER_BYTE).ceil() as u64
    }
}

/// Every item of `path`: a JSON array or one object a line; an item lacking a question,
/// a context or an answer is an error naming its line.
pub fn load(path: &Path) -> Result<Vec<QaItem>, String> {
    let text =
        std::fs::read_to_string(path).map_err(|e| format!("--dataset {}: {e}", path.display()))?;
    let records: Vec<(usize, Value)> = match serde_json::from_str::<Value>(&text) {
        Ok(Value::Array(a)) => a.into_iter().enumerate().map(|(i, v)| (i + 1, v)).collect(),
        _ => text
            .lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty())
            .map(|(i, l)| {
                serde_json::from_str(l)
                    .map(|v| (i + 1, v))
                    .map_err(|e| format!("--dataset {} line {}: {e}", path.display(), i + 1))
            })
            .collect::<Result<_, _>>()?,
    };
    let items: Vec<QaItem> = records
        .into_iter()
        .map(|(line, v)| {
            parse(&v).ok_or_else(|| {
                format!(
                    "--dataset {} item {line}: task qa needs `input` (or `question`), \
                     `context` and `answers` (or `answer`)",
                    path.display()
                )
            })
        })
        .collect::<Result<_, _>>()?;
    if items.is_empty() {
        return Err(format!("--dataset {}: no items", path.display()));
    }
    Ok(items)
}

fn parse(v: &Value) -> Option<QaItem> {
    let s = |k: &str| v.get(k).and_then(Value::as_str).map(str::to_string);
    let question = s("input").or_else(|| s("question"))?;
    let context = s("context")?;
    let answers: Vec<String> = match v.get("answers").or_else(|| v.get("answer"))? {
        Value::String(a) => vec![a.clone()],
        Value::Array(a) => a
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_string)
            .collect(),
        _ => return None,
    };
    let answers: Vec<String> = answers
        .into_iter()
        .filter(|a| !a.trim().is_empty())
        .collect();
    (!question.trim().is_empty() && !answers.is_empty()).then_some(QaItem {
        question,
        context,
        answers,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_longbench_lines_and_refuses_items_without_answers() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("qa.jsonl");
        std::fs::write(
            &p,
            "{\"input\":\"Who?\",\"context\":\"Ada wrote it.\",\"answers\":[\"Ada\"]}\n\
             {\"question\":\"Where?\",\"context\":\"In Paris.\",\"answer\":\"Paris\"}\n",
        )
        .unwrap();
        let items = load(&p).unwrap();
        assert_eq!(items.len(), 2);
        assert_eq!(items[1].answers, vec!["Paris".to_string()]);
        std::fs::write(
            &p,
            "{\"input\":\"Who?\",\"context\":\"x\",\"answers\":[]}\n",
        )
        .unwrap();
        assert!(load(&p).unwrap_err().contains("item 1"));
    }
}
