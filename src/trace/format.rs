//! Reading a request trace (`--trace FILE`): one JSON object per line, validated whole
//! before anything is sent, each problem named with its line number.

use super::agent;
use serde::Deserialize;
use std::fmt;
use std::path::Path;

/// How a trace file's lines are read (`--trace-format`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum TraceFormat {
    /// Mooncake's trace: `timestamp` (ms), `input_length`, `output_length` and `hash_ids`
    /// (one id per block of `--block-tokens`, the last block may be partial), all required.
    Mooncake,
    /// The same fields, but `hash_ids` may be left out: such a request shares nothing and
    /// gets fresh blocks of its own.
    Jsonl,
    /// Dynamo/AIPerf's multi-turn JSONL: `session_id`, and `delay` (ms after the session's
    /// previous turn ended) in place of a later turn's `timestamp`.
    Dynamo,
    /// kv-cache-tester's Claude-Code conversations: `{id, block_size, requests: [{t, in, out,
    /// hash_ids, think_time}]}`, each call waiting on the one before it.
    ClaudeCode,
    /// Azure's 2026 GitHub Copilot coding-agent sessions: `{session_id, turns: [{llm_calls:
    /// [{timestamp, duration_ms, tokens}]}]}`; block ids made from the recorded cached tokens.
    AzureAgent,
}

impl TraceFormat {
    pub fn name(self) -> &'static str {
        match self {
            TraceFormat::Mooncake => "mooncake",
            TraceFormat::Jsonl => "jsonl",
            TraceFormat::Dynamo => "dynamo",
            TraceFormat::ClaudeCode => "claude-code",
            TraceFormat::AzureAgent => "azure-agent",
        }
    }
}

/// One request of the trace, validated.
#[derive(Debug, Clone, PartialEq)]
pub struct TraceRequest {
    /// 1-based line in the file.
    pub line: usize,
    /// Milliseconds, as in the file (non-decreasing).
    pub timestamp_ms: f64,
    pub input_length: u64,
    pub output_length: u64,
    /// One id per block of the prompt; equal ids are identical blocks.
    pub hash_ids: Vec<u64>,
    /// An agent trace's turn: sent after its session's previous turn ended, not at
    /// `timestamp_ms` (then the time it would have had with no service time).
    pub session: Option<SessionTurn>,
    /// The cached tokens the trace recorded for it in production (`azure-agent`).
    pub recorded_cached_tokens: Option<u64>,
}

/// Where a request of an agent trace stands in its session.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionTurn {
    pub id: String,
    /// 1-based.
    pub turn: u32,
    /// How long after the session's previous turn ended this one is sent, ms (0 for a
    /// session's first turn).
    pub delay_ms: f64,
}

impl TraceRequest {
    /// A request as a trace line states it (for traces made in code: `trace synth`, tests).
    pub fn at(
        line: usize,
        timestamp_ms: f64,
        input_length: u64,
        output_length: u64,
        hash_ids: Vec<u64>,
    ) -> Self {
        TraceRequest {
            line,
            timestamp_ms,
            input_length,
            output_length,
            hash_ids,
            session: None,
            recorded_cached_tokens: None,
        }
    }

    /// Tokens of block `i` in this request: a whole block but for a partial last one.
    pub fn block_len(&self, i: usize, block_tokens: u64) -> u64 {
        let start = i as u64 * block_tokens;
        self.input_length.saturating_sub(start).min(block_tokens)
    }
}

/// A problem with the trace, at a line (0 for the file as a whole).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub struct TraceError {
    pub line: usize,
    pub message: String,
}

impl fmt::Display for TraceError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line == 0 {
            write!(f, "{}", self.message)
        } else {
            write!(f, "line {}: {}", self.line, self.message)
        }
    }
}

#[derive(Deserialize)]
struct Line {
    timestamp: Option<f64>,
    input_length: Option<u64>,
    output_length: Option<u64>,
    hash_ids: Option<Vec<u64>>,
}

/// A JSON-lines file's objects with their 1-based line numbers, blank lines skipped; a line
/// that is not one is an error naming it and `what` the line should hold.
pub(crate) fn json_lines<'a, T: serde::de::DeserializeOwned>(
    text: &'a str,
    what: &'a str,
) -> impl Iterator<Item = Result<(usize, T), TraceError>> + 'a {
    text.lines()
        .enumerate()
        .filter(|(_, raw)| !raw.trim().is_empty())
        .map(move |(i, raw)| {
            serde_json::from_str(raw.trim())
                .map(|l| (i + 1, l))
                .map_err(|e| TraceError {
                    line: i + 1,
                    message: format!("not {what}: {e}"),
                })
        })
}

/// Ids for blocks a trace names none for (a jsonl line without `hash_ids`, an agent call's
/// new part): at 2^62 and above, where no file's own ids go (`agent::scoped` keeps scoped
/// ones below), one range per (line, call of the line), so they never collide.
pub(crate) fn fresh_ids(line: usize, call: usize, blocks: usize) -> Vec<u64> {
    let base = (1u64 << 62) + ((line as u64) << 36) + ((call as u64) << 20);
    (0..blocks as u64).map(|i| base + i).collect()
}

/// Parse and validate a whole trace.
pub fn parse(
    text: &str,
    format: TraceFormat,
    block_tokens: u64,
) -> Result<Vec<TraceRequest>, TraceError> {
    let err = |line: usize, message: String| TraceError { line, message };
    if block_tokens == 0 {
        return Err(err(0, "--block-tokens must be at least 1".into()));
    }
    match format {
        TraceFormat::Mooncake | TraceFormat::Jsonl => {}
        TraceFormat::Dynamo => return agent::dynamo(text, block_tokens),
        TraceFormat::ClaudeCode => return agent::claude_code(text, block_tokens),
        TraceFormat::AzureAgent => return agent::azure_agent(text, block_tokens),
    }
    let mut out: Vec<TraceRequest> = Vec::new();
    for parsed in json_lines::<Line>(text, "a JSON object of the trace's fields") {
        let (line, l) = parsed?;
        let timestamp_ms = l
            .timestamp
            .filter(|t| t.is_finite() && *t >= 0.0)
            .ok_or_else(|| err(line, "no `timestamp` (milliseconds, 0 or more)".into()))?;
        let input_length = l
            .input_length
            .filter(|n| *n >= 1)
            .ok_or_else(|| err(line, "no `input_length` (at least 1 token)".into()))?;
        let output_length = l
            .output_length
            .filter(|n| *n >= 1)
            .ok_or_else(|| err(line, "no `output_length` (at least 1 token)".into()))?;
        let blocks = input_length.div_ceil(block_tokens) as usize;
        let hash_ids = match (l.hash_ids, format) {
            (Some(ids), _) => ids,
            (None, TraceFormat::Jsonl) => fresh_ids(line, 0, blocks),
            (None, _) => {
                return Err(err(
                    line,
                    "no `hash_ids` (one id per block of the prompt); \
                     --trace-format jsonl replays such lines without sharing"
                        .into(),
                ));
            }
        };
        if hash_ids.len() != blocks {
            return Err(err(
                line,
                format!(
                    "input_length {input_length} is {blocks} block(s) of {block_tokens} tokens \
                     (the last may be partial), but hash_ids has {} id(s); is --block-tokens right?",
                    hash_ids.len()
                ),
            ));
        }
        if let Some(prev) = out.last()
            && timestamp_ms < prev.timestamp_ms
        {
            return Err(err(
                line,
                format!(
                    "timestamp {timestamp_ms} goes backwards (line {} has {})",
                    prev.line, prev.timestamp_ms
                ),
            ));
        }
        out.push(TraceRequest::at(
            line,
            timestamp_ms,
            input_length,
            output_length,
            hash_ids,
        ));
    }
    if out.is_empty() {
        return Err(err(0, "the trace holds no request (an empty file)".into()));
    }
    Ok(out)
}

/// Read and validate the trace at `path`; errors name the file.
pub fn read(
    path: &Path,
    format: TraceFormat,
    block_tokens: u64,
) -> anyhow::Result<Vec<TraceRequest>> {
    let bytes =
        std::fs::read(path).map_err(|e| anyhow::anyhow!("--trace {}: {e}", path.display()))?;
    if bytes.starts_with(&[0x1f, 0x8b]) {
        anyhow::bail!(
            "--trace {}: the file is gzip-compressed; gunzip it first",
            path.display()
        );
    }
    let text = String::from_utf8(bytes)
        .map_err(|e| anyhow::anyhow!("--trace {}: not UTF-8 text: {e}", path.display()))?;
    parse(&text, format, block_tokens)
        .map_err(|e| anyhow::anyhow!("--trace {}: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const OK: &str = r#"{"timestamp": 0, "input_length": 1000, "output_length": 10, "hash_ids": [1, 2]}
{"timestamp": 5, "input_length": 512, "output_length": 3, "hash_ids": [1]}
"#;

    fn line_of(text: &str, format: TraceFormat) -> TraceError {
        parse(text, format, 512).unwrap_err()
    }

    #[test]
    fn a_valid_trace_parses_with_lines() {
        let t = parse(OK, TraceFormat::Mooncake, 512).unwrap();
        assert_eq!(t.len(), 2);
        assert_eq!(t[1].line, 2);
        assert_eq!(t[0].block_len(1, 512), 488);
        assert_eq!(t[1].block_len(0, 512), 512);
    }

    #[test]
    fn bad_lines_are_refused_with_their_number() {
        let missing = r#"{"timestamp": 0, "input_length": 10, "output_length": 1, "hash_ids": [1]}
{"timestamp": 1, "input_length": 10, "output_length": 1}"#;
        let e = line_of(missing, TraceFormat::Mooncake);
        assert_eq!(e.line, 2);
        assert!(e.to_string().contains("hash_ids"), "{e}");
        // jsonl takes it, with fresh ids of its own.
        let t = parse(missing, TraceFormat::Jsonl, 512).unwrap();
        assert_ne!(t[1].hash_ids, t[0].hash_ids);

        let contradict =
            r#"{"timestamp": 0, "input_length": 1025, "output_length": 1, "hash_ids": [1, 2]}"#;
        let e = line_of(contradict, TraceFormat::Mooncake);
        assert_eq!(e.line, 1);
        assert!(e.to_string().contains("3 block(s)"), "{e}");

        let backwards = r#"{"timestamp": 9, "input_length": 10, "output_length": 1, "hash_ids": [1]}

{"timestamp": 3, "input_length": 10, "output_length": 1, "hash_ids": [1]}"#;
        let e = line_of(backwards, TraceFormat::Mooncake);
        assert_eq!(e.line, 3);
        assert!(e.to_string().contains("backwards"), "{e}");

        let e = line_of("\n  \n", TraceFormat::Mooncake);
        assert!(e.to_string().contains("empty"), "{e}");

        let e = line_of("{not json", TraceFormat::Mooncake);
        assert_eq!(e.line, 1);
        let zero = r#"{"timestamp": 0, "input_length": 10, "output_length": 0, "hash_ids": [1]}"#;
        assert!(
            line_of(zero, TraceFormat::Mooncake)
                .to_string()
                .contains("output_length")
        );
    }
}
