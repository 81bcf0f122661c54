//! Agent traces, where a request waits on its session's previous one: each format read into
//! the trace's requests with their [`SessionTurn`], in time order. Field lists and sources:
//! docs/traces.md, "Agent traces".
//!
//! - `dynamo`: Dynamo/AIPerf's multi-turn Mooncake JSONL, `{session_id, timestamp, delay,
//!   input_length, output_length, hash_ids}`.
//! - `claude-code`: kv-cache-tester's conversation objects, `{id, block_size, requests: [{t,
//!   type, in, out, hash_ids, think_time}]}`, one per line or one per file.
//! - `azure-agent`: Azure's GitHub Copilot coding-agent sessions (2026), `{session_id,
//!   turns: [{llm_calls: [{timestamp, duration_ms, tokens: {prompt, completion, cached}}]}]}`.

use super::format::{SessionTurn, TraceError, TraceRequest, fresh_ids, json_lines};
use serde::Deserialize;
use std::collections::HashMap;

fn err(line: usize, message: impl Into<String>) -> TraceError {
    TraceError {
        line,
        message: message.into(),
    }
}

/// A conversation-local id made unique across the file's conversations.
fn scoped(session: usize, id: u64) -> Result<u64, String> {
    if id >= 1 << 36 || session >= 1 << 25 {
        return Err(format!(
            "hash id {id} (or conversation {session}) is too large to scope"
        ));
    }
    Ok(((session as u64) << 36) | id)
}

/// Time order (stable: a session's turns keep theirs), then each turn numbered in its session.
fn finish(mut out: Vec<TraceRequest>) -> Result<Vec<TraceRequest>, TraceError> {
    if out.is_empty() {
        return Err(err(0, "the trace holds no request (an empty file)"));
    }
    out.sort_by(|a, b| a.timestamp_ms.total_cmp(&b.timestamp_ms));
    let mut turns: HashMap<String, u32> = HashMap::new();
    for r in &mut out {
        if let Some(s) = &mut r.session {
            let t = turns.entry(s.id.clone()).or_default();
            *t += 1;
            s.turn = *t;
        }
    }
    Ok(out)
}

/// Each request's predecessor in its session (the turn before it), with its delay.
pub fn links(requests: &[TraceRequest]) -> Vec<Option<(usize, f64)>> {
    let mut last: HashMap<&str, usize> = HashMap::new();
    requests
        .iter()
        .enumerate()
        .map(|(i, r)| {
            let s = r.session.as_ref()?;
            let before = last.insert(&s.id, i)?;
            Some((before, s.delay_ms))
        })
        .collect()
}

#[derive(Deserialize)]
struct DynamoLine {
    session_id: Option<String>,
    timestamp: Option<f64>,
    delay: Option<f64>,
    input_length: Option<u64>,
    output_length: Option<u64>,
    hash_ids: Option<Vec<u64>>,
}

/// A session's last turn as read: its cumulative ids and length, and its nominal time.
struct Open {
    ids: Vec<u64>,
    input: u64,
    at_ms: f64,
}

/// Dynamo/AIPerf's multi-turn JSONL. A later turn whose `hash_ids` do not extend the turn
/// before it is the delta form (only the turn's new input): it is sent after the session's
/// earlier inputs, which are padded to whole blocks (replies are not fed back in a token
/// replay). A later turn's own `timestamp` is not used: it waits on its predecessor.
pub fn dynamo(text: &str, block_tokens: u64) -> Result<Vec<TraceRequest>, TraceError> {
    let mut out = Vec::new();
    let mut open: HashMap<String, Open> = HashMap::new();
    for parsed in json_lines::<DynamoLine>(text, "a JSON object of the trace's fields") {
        let (line, l) = parsed?;
        let input = l
            .input_length
            .filter(|n| *n >= 1)
            .ok_or_else(|| err(line, "no `input_length` (at least 1 token)"))?;
        let output = l
            .output_length
            .filter(|n| *n >= 1)
            .ok_or_else(|| err(line, "no `output_length` (at least 1 token)"))?;
        let delay = l.delay.unwrap_or(0.0);
        if !(delay.is_finite() && delay >= 0.0) {
            return Err(err(line, "`delay` must be 0 or more milliseconds"));
        }
        let blocks = input.div_ceil(block_tokens) as usize;
        let ids = l.hash_ids.unwrap_or_else(|| fresh_ids(line, 0, blocks));
        if ids.len() != blocks {
            return Err(err(
                line,
                format!(
                    "input_length {input} is {blocks} block(s) of {block_tokens} tokens, but \
                     hash_ids has {} id(s); is --block-tokens right?",
                    ids.len()
                ),
            ));
        }
        let previous = l.session_id.as_ref().and_then(|s| open.get(s));
        let (timestamp_ms, ids, input) = match previous {
            None => {
                if l.delay.is_some() && l.session_id.is_some() {
                    return Err(err(
                        line,
                        "`delay` waits on the session's previous turn, but this session has \
                         no earlier line",
                    ));
                }
                let t = l
                    .timestamp
                    .filter(|t| t.is_finite() && *t >= 0.0)
                    .ok_or_else(|| {
                        err(
                            line,
                            "a session's first turn needs `timestamp` (ms, 0 or more)",
                        )
                    })?;
                (t, ids, input)
            }
            Some(p) if ids.starts_with(&p.ids) && input >= p.input => (p.at_ms + delay, ids, input),
            Some(p) => {
                let whole = p.ids.len() as u64 * block_tokens;
                let cumulative = [&p.ids[..], &ids[..]].concat();
                (p.at_ms + delay, cumulative, whole + input)
            }
        };
        let session = l.session_id.map(|id| {
            open.insert(
                id.clone(),
                Open {
                    ids: ids.clone(),
                    input,
                    at_ms: timestamp_ms,
                },
            );
            SessionTurn {
                id,
                turn: 0,
                delay_ms: delay,
            }
        });
        out.push(TraceRequest {
            session,
            ..TraceRequest::at(line, timestamp_ms, input, output, ids)
        });
    }
    finish(out)
}

#[derive(Deserialize)]
struct Conversation {
    id: Option<String>,
    block_size: Option<u64>,
    #[serde(default)]
    hash_id_scope: Option<String>,
    requests: Vec<Call>,
}

#[derive(Deserialize)]
struct Call {
    #[serde(default)]
    t: f64,
    #[serde(rename = "type")]
    kind: Option<String>,
    #[serde(rename = "in")]
    input: Option<u64>,
    out: Option<u64>,
    #[serde(default)]
    hash_ids: Vec<u64>,
    think_time: Option<f64>,
    /// A subagent marker's own calls; the parent resumes after them.
    #[serde(default)]
    requests: Vec<Call>,
}

/// kv-cache-tester's conversations (the "Claude-Code" traces): one JSON object per
/// conversation, each starting at 0. `hash_ids` cover the whole blocks of `in` (the tail of a
/// partial block gets a fresh id of its own); with `hash_id_scope` "local" (the default), ids
/// are the conversation's own. A call is sent its `think_time` after the one before it ended
/// (none without it); a subagent's calls run in its place, in order.
pub fn claude_code(text: &str, block_tokens: u64) -> Result<Vec<TraceRequest>, TraceError> {
    let mut out = Vec::new();
    let mut stream = serde_json::Deserializer::from_str(text).into_iter::<Conversation>();
    // The line each conversation starts on, counted on from the last one's (once through).
    let (mut counted, mut line) = (0, 1);
    for ci in 0.. {
        let rest = &text[stream.byte_offset()..];
        let start = text.len() - rest.trim_start().len();
        line += text[counted..start].matches('\n').count();
        counted = start;
        let Some(conv) = stream.next() else { break };
        let c = conv.map_err(|e| {
            err(
                e.line(),
                format!("not a conversation object {{id, block_size, requests}}: {e}"),
            )
        })?;
        conversation(c, ci, line, block_tokens, &mut out)?;
    }
    finish(out)
}

/// One conversation's calls, each waiting on the one before it.
fn conversation(
    c: Conversation,
    ci: usize,
    line: usize,
    block_tokens: u64,
    out: &mut Vec<TraceRequest>,
) -> Result<(), TraceError> {
    let block = c.block_size.unwrap_or(block_tokens);
    if block != block_tokens {
        return Err(err(
            line,
            format!("the file's block_size is {block}: give --block-tokens {block}"),
        ));
    }
    let global = match c.hash_id_scope.as_deref() {
        None | Some("local") => false,
        Some("global") => true,
        Some(other) => {
            return Err(err(
                line,
                format!("hash_id_scope `{other}`: expected local or global"),
            ));
        }
    };
    let id = c.id.unwrap_or_else(|| format!("conversation-{}", ci + 1));
    let mut calls = Vec::new();
    flatten(&c.requests, &mut calls);
    let mut at_ms = 0.0f64;
    for (k, call) in calls.into_iter().enumerate() {
        let what = format!("conversation `{id}` call {}", k + 1);
        let input = call
            .input
            .filter(|n| *n >= 1)
            .ok_or_else(|| err(line, format!("{what}: no `in` (at least 1 token)")))?;
        let output = call
            .out
            .filter(|n| *n >= 1)
            .ok_or_else(|| err(line, format!("{what}: no `out` (at least 1 token)")))?;
        let think = call.think_time.unwrap_or(0.0);
        if !(think.is_finite() && think >= 0.0 && call.t.is_finite()) {
            return Err(err(
                line,
                format!("{what}: `t` must be a number and `think_time` 0 or more"),
            ));
        }
        let (whole, all) = (input / block_tokens, input.div_ceil(block_tokens));
        let n = call.hash_ids.len() as u64;
        if n != whole && n != all {
            return Err(err(
                line,
                format!(
                    "{what}: in {input} is {whole} whole block(s) of {block_tokens}, but \
                     hash_ids has {n} id(s)"
                ),
            ));
        }
        let mut ids = call
            .hash_ids
            .iter()
            .map(|&h| if global { Ok(h) } else { scoped(ci, h) })
            .collect::<Result<Vec<u64>, String>>()
            .map_err(|m| err(line, format!("{what}: {m}")))?;
        if n < all {
            ids.extend(fresh_ids(line, k, 1));
        }
        at_ms = at_ms.max(call.t * 1e3);
        out.push(TraceRequest {
            session: Some(SessionTurn {
                id: id.clone(),
                turn: 0,
                delay_ms: if k == 0 { 0.0 } else { think * 1e3 },
            }),
            ..TraceRequest::at(line, at_ms, input, output, ids)
        });
    }
    Ok(())
}

/// A conversation's calls in the order they run: a subagent marker's calls in its place.
fn flatten<'a>(calls: &'a [Call], out: &mut Vec<&'a Call>) {
    for c in calls {
        if c.kind.as_deref() == Some("subagent") {
            flatten(&c.requests, out);
        } else {
            out.push(c);
        }
    }
}

#[derive(Deserialize)]
struct AzureSession {
    session_id: String,
    #[serde(default)]
    turns: Vec<AzureTurn>,
}

#[derive(Deserialize)]
struct AzureTurn {
    #[serde(default)]
    llm_calls: Vec<AzureCall>,
}

#[derive(Deserialize)]
struct AzureCall {
    timestamp: String,
    #[serde(default)]
    duration_ms: f64,
    tokens: AzureTokens,
}

#[derive(Deserialize)]
struct AzureTokens {
    prompt: u64,
    completion: u64,
    #[serde(default)]
    cached: u64,
}

/// Azure's GitHub Copilot coding-agent sessions (2026), one session per line (gunzipped).
/// The file has no block ids: each call's prompt shares the whole blocks of its recorded
/// `cached` tokens with its session's previous call, and the rest is new, so what the
/// production cache served becomes what the replay makes possible. A call is sent the gap
/// its trace shows after the previous call ended (start + `duration_ms`), 0 if they overlap.
pub fn azure_agent(text: &str, block_tokens: u64) -> Result<Vec<TraceRequest>, TraceError> {
    let mut out = Vec::new();
    let what = "a session object {session_id, turns: [{llm_calls}]}";
    for parsed in json_lines::<AzureSession>(text, what) {
        let (line, s) = parsed?;
        let mut previous: Option<(Vec<u64>, f64, f64)> = None; // ids, start ms, end ms
        let calls = s.turns.iter().flat_map(|t| &t.llm_calls);
        for (k, c) in calls.enumerate() {
            let what = format!("session `{}` call {}", s.session_id, k + 1);
            let start = humantime::parse_rfc3339_weak(c.timestamp.trim_end_matches('Z'))
                .map_err(|e| err(line, format!("{what}: timestamp `{}`: {e}", c.timestamp)))?
                .duration_since(std::time::UNIX_EPOCH)
                .map_err(|_| err(line, format!("{what}: timestamp before 1970")))?
                .as_secs_f64()
                * 1e3;
            if c.tokens.prompt == 0 || c.tokens.completion == 0 {
                return Err(err(
                    line,
                    format!("{what}: tokens.prompt and tokens.completion must be at least 1"),
                ));
            }
            if !(c.duration_ms.is_finite() && c.duration_ms >= 0.0) {
                return Err(err(line, format!("{what}: duration_ms must be 0 or more")));
            }
            let blocks = c.tokens.prompt.div_ceil(block_tokens) as usize;
            let (ids, delay) = match &previous {
                None => (fresh_ids(line, k, blocks), 0.0),
                Some((before, _, end)) => {
                    let shared = ((c.tokens.cached.min(c.tokens.prompt - 1) / block_tokens)
                        as usize)
                        .min(before.len());
                    let mut ids = before[..shared].to_vec();
                    ids.extend(fresh_ids(line, k, blocks - shared));
                    (ids, (start - end).max(0.0))
                }
            };
            // Time order within the session, whatever the clocks say.
            let start = previous.as_ref().map_or(start, |p| start.max(p.1));
            previous = Some((ids.clone(), start, start + c.duration_ms));
            out.push(TraceRequest {
                session: Some(SessionTurn {
                    id: s.session_id.clone(),
                    turn: 0,
                    delay_ms: delay,
                }),
                recorded_cached_tokens: Some(c.tokens.cached),
                ..TraceRequest::at(line, start, c.tokens.prompt, c.tokens.completion, ids)
            });
        }
    }
    // Times from the earliest call, so the first session starts at 0.
    let first = out
        .iter()
        .map(|r| r.timestamp_ms)
        .fold(f64::INFINITY, f64::min);
    for r in &mut out {
        r.timestamp_ms -= first;
    }
    finish(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    const DYNAMO: &str = include_str!("../../tests/fixtures/traces/dynamo.jsonl");
    const CLAUDE: &str = include_str!("../../tests/fixtures/traces/claude-code.jsonl");
    const AZURE: &str = include_str!("../../tests/fixtures/traces/azure-agent.jsonl");

    fn turns(t: &[TraceRequest]) -> Vec<(String, u32)> {
        t.iter()
            .map(|r| {
                let s = r.session.as_ref().unwrap();
                (s.id.clone(), s.turn)
            })
            .collect()
    }

    fn names(v: &[(&str, u32)]) -> Vec<(String, u32)> {
        v.iter().map(|(s, t)| (s.to_string(), *t)).collect()
    }

    #[test]
    fn dynamo_turns_wait_on_their_session_and_deltas_become_whole_prompts() {
        let t = dynamo(DYNAMO, 512).unwrap();
        assert_eq!(
            turns(&t),
            names(&[
                ("a", 1),
                ("b", 1),
                ("c", 1),
                ("a", 2),
                ("b", 2),
                ("c", 2),
                ("a", 3)
            ])
        );
        let times: Vec<f64> = t.iter().map(|r| r.timestamp_ms).collect();
        assert_eq!(times, [0.0, 20.0, 40.0, 50.0, 70.0, 70.0, 130.0]);
        // a's turn 2 is the delta form: turn 1's blocks, padded whole, then its own.
        assert_eq!(t[3].hash_ids, [1, 2, 3, 4]);
        assert_eq!(t[3].input_length, 3 * 512 + 300);
        assert_eq!(t[6].hash_ids, [1, 2, 3, 4, 5]);
        assert_eq!(t[6].input_length, 4 * 512 + 200);
        let l = links(&t);
        assert_eq!(l[3], Some((0, 50.0)));
        assert_eq!(l[6], Some((3, 80.0)));
        assert_eq!(l[5], Some((2, 30.0)));
        assert!(l[..3].iter().all(Option::is_none));
        // The cumulative form is taken as it is.
        let cumulative = r#"{"session_id": "x", "timestamp": 5, "input_length": 600, "output_length": 1, "hash_ids": [1, 2]}
{"session_id": "x", "delay": 10, "input_length": 1100, "output_length": 1, "hash_ids": [1, 2, 3]}"#;
        let c = dynamo(cumulative, 512).unwrap();
        assert_eq!((c[1].input_length, c[1].timestamp_ms), (1100, 15.0));
    }

    #[test]
    fn dynamo_lines_that_cannot_be_placed_are_refused_by_number() {
        let orphan = r#"{"session_id": "a", "timestamp": 0, "input_length": 10, "output_length": 1, "hash_ids": [1]}
{"session_id": "b", "delay": 10, "input_length": 10, "output_length": 1, "hash_ids": [2]}"#;
        let e = dynamo(orphan, 512).unwrap_err();
        assert_eq!(e.line, 2);
        assert!(e.message.contains("no earlier line"), "{e}");
        let untimed = r#"{"session_id": "a", "input_length": 10, "output_length": 1}"#;
        assert!(
            dynamo(untimed, 512)
                .unwrap_err()
                .message
                .contains("timestamp")
        );
        let bad = "{\"session_id\": \"a\", \"timestamp\": 0, \"input_length\": 10, \"output_length\": 1}\n{oops";
        assert_eq!(dynamo(bad, 512).unwrap_err().line, 2);
        let blocks = r#"{"session_id": "a", "timestamp": 0, "input_length": 600, "output_length": 1, "hash_ids": [1]}"#;
        assert!(
            dynamo(blocks, 512)
                .unwrap_err()
                .message
                .contains("block(s)")
        );
    }

    #[test]
    fn claude_code_calls_chain_through_subagents_with_conversation_scoped_ids() {
        let t = claude_code(CLAUDE, 64).unwrap();
        assert_eq!(
            turns(&t),
            names(&[
                ("conv-1", 1),
                ("conv-2", 1),
                ("conv-2", 2),
                ("conv-1", 2),
                ("conv-1", 3),
                ("conv-1", 4)
            ])
        );
        // in 200 is 3 whole blocks of 64 and a tail with a fresh id of its own.
        assert_eq!(t[0].hash_ids.len(), 4);
        assert_eq!(t[3].hash_ids[..3], t[0].hash_ids[..3]);
        assert_ne!(
            t[3].hash_ids[3], t[0].hash_ids[3],
            "the tail is not block 4"
        );
        assert_ne!(t[0].hash_ids[0], t[1].hash_ids[0], "local ids are scoped");
        let l = links(&t);
        assert_eq!(l[3], Some((0, 50.0)));
        assert_eq!(l[4], Some((3, 20.0)), "the subagent waits on its parent");
        assert_eq!(l[5], Some((4, 30.0)), "the parent resumes after it");
        let e = claude_code(CLAUDE, 512).unwrap_err();
        assert!(e.message.contains("--block-tokens 64"), "{e}");
        let second = format!(
            "{}\n\n{{\"id\": \"x\", \"block_size\": 16, \"requests\": []}}",
            CLAUDE.trim()
        );
        assert_eq!(
            claude_code(&second, 64).unwrap_err().line,
            4,
            "after two conversations and a blank line"
        );
        let e = claude_code("{\"id\": \"x\", \"requests\": [{\"t\": 0}]}", 64).unwrap_err();
        assert!(e.message.contains("call 1: no `in`"), "{e}");
    }

    #[test]
    fn azure_agent_calls_share_their_recorded_cache_in_whole_blocks() {
        let t = azure_agent(AZURE, 512).unwrap();
        assert_eq!(
            turns(&t),
            names(&[("s-1", 1), ("s-2", 1), ("s-1", 2), ("s-2", 2), ("s-1", 3)])
        );
        let times: Vec<f64> = t.iter().map(|r| r.timestamp_ms.round()).collect();
        assert_eq!(times, [0.0, 30.0, 90.0, 100.0, 200.0]);
        // 1,150 cached of 1,600: two whole blocks of the previous call's prompt.
        assert_eq!(t[2].hash_ids[..2], t[0].hash_ids[..2]);
        assert_ne!(t[2].hash_ids[2], t[0].hash_ids[2]);
        assert_eq!(t[2].recorded_cached_tokens, Some(1150));
        assert_eq!(t[4].hash_ids[..3], t[2].hash_ids[..3]);
        let l = links(&t);
        let delays: Vec<f64> = l.iter().flatten().map(|(_, d)| d.round()).collect();
        assert_eq!(
            delays,
            [50.0, 30.0, 70.0],
            "gap after the previous call ended"
        );
        let e = azure_agent("{\"session_id\": \"s\", \"turns\": [{\"llm_calls\": [{\"timestamp\": \"yesterday\", \"tokens\": {\"prompt\": 5, \"completion\": 1}}]}]}", 512).unwrap_err();
        assert!(e.message.contains("timestamp `yesterday`"), "{e}");
    }
}
