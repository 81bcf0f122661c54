//! `ctxbench trace synth`: the flags, and writing the generated trace as JSON lines.

use super::format::TraceRequest;
use super::synth::{SynthParams, TraceLine, synth};
use crate::lengths::parse_count;
use clap::Args;
use std::io::Write;
use std::ops::RangeInclusive;
use std::path::PathBuf;

/// Generate a multi-turn long-context trace in Mooncake's format.
#[derive(Args, Debug, Clone)]
#[command(after_help = "Examples:
  ctxbench trace synth --conversations 50 --out chat.jsonl
  ctxbench trace synth --conversations 200 --turns 2..12 --doc-tokens 16k..96k --rate 0.5 --out long.jsonl
  ctxbench load --url http://127.0.0.1:30000 --trace chat.jsonl --out replay.jsonl
  ctxbench trace synth --conversations 1000 --format dynamo --out agents.jsonl
  ctxbench twin predict --profile p.json --trace agents.jsonl --trace-format dynamo

Each conversation: a system prompt (one of --system-prompts, shared), a document (one of
--docs, popular ones asked about by many conversations), then turns that resend the whole
history plus a new user message. Ranges A..B are drawn uniformly; k = x1024.")]
pub struct SynthArgs {
    /// Conversations to generate.
    #[arg(long, default_value_t = 50)]
    pub conversations: u64,
    /// Turns per conversation: N or A..B.
    #[arg(long, default_value = "2..8", value_parser = turn_range)]
    pub turns: RangeInclusive<u64>,
    /// Distinct system prompts shared across conversations.
    #[arg(long, default_value_t = 4)]
    pub system_prompts: u64,
    /// Tokens in a system prompt (0: none).
    #[arg(long, default_value = "1k", value_parser = crate::lengths::parse_count_arg)]
    pub system_tokens: u64,
    /// Distinct documents; each conversation picks one, Zipf-distributed (default: one per
    /// two conversations).
    #[arg(long)]
    pub docs: Option<u64>,
    /// Tokens in a document: N or A..B.
    #[arg(long, default_value = "8k..48k", value_parser = count_range)]
    pub doc_tokens: RangeInclusive<u64>,
    /// Tokens in a user message: N or A..B.
    #[arg(long, default_value = "64..512", value_parser = count_range)]
    pub user_tokens: RangeInclusive<u64>,
    /// Tokens in an answer (the trace's output_length): N or A..B.
    #[arg(long, default_value = "64..512", value_parser = count_range)]
    pub output_tokens: RangeInclusive<u64>,
    /// Time from one turn's send to the next: D or A..B (e.g. 5s..30s).
    #[arg(long, default_value = "5s..30s", value_parser = duration_range)]
    pub think_time: RangeInclusive<f64>,
    /// New conversations per second (Poisson arrivals).
    #[arg(long, default_value_t = 0.5)]
    pub rate: f64,
    /// A conversation ends before a turn whose prompt would exceed this many tokens.
    #[arg(long, default_value = "128k", value_parser = crate::lengths::parse_count_arg)]
    pub max_input: u64,
    /// Tokens per hash block.
    #[arg(long, default_value_t = 512)]
    pub block_tokens: u64,
    /// Seed: the same flags and seed give the same trace.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    /// Write here instead of stdout.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// The lines' format: `mooncake` (every turn at its `timestamp`) or `dynamo` (an agent
    /// trace: `session_id`, and on a later turn `delay`, the think time after the previous
    /// turn ended, in place of `timestamp`; replayed with `--trace-format dynamo`).
    #[arg(long, value_enum, default_value_t = SynthFormat::Mooncake)]
    pub format: SynthFormat,
}

/// How `trace synth` writes its lines.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum SynthFormat {
    Mooncake,
    Dynamo,
}

/// A line of the `dynamo` form.
#[derive(serde::Serialize)]
struct SessionLine<'a> {
    session_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    timestamp: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    delay: Option<u64>,
    input_length: u64,
    output_length: u64,
    hash_ids: &'a [u64],
}

impl<'a> SessionLine<'a> {
    fn of(l: &'a TraceLine) -> Self {
        let first = l.turn == 0;
        SessionLine {
            session_id: format!("s{}", l.conversation),
            timestamp: first.then_some(l.timestamp),
            delay: (!first).then_some(l.think_ms),
            input_length: l.input_length,
            output_length: l.output_length,
            hash_ids: &l.hash_ids,
        }
    }
}

impl SynthArgs {
    fn params(&self) -> SynthParams {
        SynthParams {
            conversations: self.conversations,
            turns: self.turns.clone(),
            system_prompts: self.system_prompts,
            system_tokens: self.system_tokens,
            docs: self.docs.unwrap_or(self.conversations.div_ceil(2)),
            doc_tokens: self.doc_tokens.clone(),
            user_tokens: self.user_tokens.clone(),
            output_tokens: self.output_tokens.clone(),
            think_s: self.think_time.clone(),
            rate: self.rate,
            max_input: self.max_input,
            block_tokens: self.block_tokens,
            seed: self.seed,
        }
    }
}

/// Generate and write; a summary goes to stderr.
pub fn run(args: &SynthArgs) -> anyhow::Result<u8> {
    let lines = synth(&args.params())?;
    let mut text = String::new();
    for l in &lines {
        let line = match args.format {
            SynthFormat::Mooncake => serde_json::to_string(l)?,
            SynthFormat::Dynamo => serde_json::to_string(&SessionLine::of(l))?,
        };
        text.push_str(&line);
        text.push('\n');
    }
    match &args.out {
        Some(path) => std::fs::write(path, &text)
            .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))?,
        None => std::io::stdout().lock().write_all(text.as_bytes())?,
    }
    eprintln!("{}", summary(&lines, args.block_tokens));
    Ok(crate::exit::OK)
}

/// Requests, span, and how much of the input an unbounded prefix cache could serve.
fn summary(lines: &[TraceLine], block: u64) -> String {
    let requests: Vec<TraceRequest> = lines
        .iter()
        .enumerate()
        .map(|(i, l)| {
            let t = l.timestamp as f64;
            TraceRequest::at(
                i + 1,
                t,
                l.input_length,
                l.output_length,
                l.hash_ids.clone(),
            )
        })
        .collect();
    let (expected, _) = super::expect::expected(&requests, block, 1);
    let shareable: u64 = expected.iter().map(|e| e.possible_cached_tokens).sum();
    let input: u64 = lines.iter().map(|l| l.input_length).sum();
    let span_s = lines.last().map_or(0, |l| l.timestamp) as f64 / 1e3;
    format!(
        "{} requests over {span_s:.0} s, {input} input tokens; an unbounded prefix cache \
         could serve {:.1} % of them",
        lines.len(),
        100.0 * shareable as f64 / input.max(1) as f64
    )
}

pub(crate) fn count_range(text: &str) -> Result<RangeInclusive<u64>, String> {
    range(text, |s| parse_count(s).map_err(|e| e.to_string()))
}

fn turn_range(text: &str) -> Result<RangeInclusive<u64>, String> {
    range(text, |s| {
        s.parse::<u64>()
            .ok()
            .filter(|&n| n >= 1)
            .ok_or_else(|| format!("`{s}` is not a number of turns (1 or more)"))
    })
}

pub(crate) fn duration_range(text: &str) -> Result<RangeInclusive<f64>, String> {
    range(text, |s| {
        humantime::parse_duration(s)
            .map(|d| d.as_secs_f64())
            .map_err(|e| format!("`{s}` is not a duration (e.g. 5s, 2m): {e}"))
    })
}

/// `A..B` or a single `A` (meaning A..A).
fn range<T: PartialOrd + Copy>(
    text: &str,
    one: impl Fn(&str) -> Result<T, String>,
) -> Result<RangeInclusive<T>, String> {
    let (a, b) = match text.split_once("..") {
        Some((a, b)) => (one(a.trim())?, one(b.trim())?),
        None => {
            let v = one(text.trim())?;
            (v, v)
        }
    };
    if a > b {
        return Err(format!("`{text}`: a range A..B needs A <= B"));
    }
    Ok(a..=b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_parse_counts_and_durations() {
        assert_eq!(count_range("8k..48k").unwrap(), 8192..=49152);
        assert_eq!(count_range("3").unwrap(), 3..=3);
        assert!(count_range("9..3").unwrap_err().contains("A <= B"));
        assert!(count_range("x..3").is_err());
        assert!(turn_range("0..3").unwrap_err().contains("turns"));
        assert_eq!(turn_range("2..8").unwrap(), 2..=8);
        assert_eq!(duration_range("5s..1m").unwrap(), 5.0..=60.0);
    }
}
