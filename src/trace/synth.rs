//! A synthetic multi-turn long-context trace in Mooncake's format, for users without a
//! production trace: shared system prompts, documents shared between conversations (a few
//! popular ones), and conversations whose every turn resends the whole history.
//!
//! Block ids follow the format's rule: one id per `block_tokens` block, equal ids meaning an
//! identical block *and* an identical prefix before it, so a block id is the identity of the
//! whole prefix it ends. A partial last block is its own id unless another prompt ends at
//! exactly the same place.

use crate::run::schedule::{Arrival, schedule};
use rand::{Rng, RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::Serialize;
use std::collections::HashMap;
use std::ops::RangeInclusive;

/// What to generate; ranges are drawn uniformly, per conversation or per turn.
#[derive(Debug, Clone)]
pub struct SynthParams {
    pub conversations: u64,
    pub turns: RangeInclusive<u64>,
    pub system_prompts: u64,
    pub system_tokens: u64,
    pub docs: u64,
    pub doc_tokens: RangeInclusive<u64>,
    pub user_tokens: RangeInclusive<u64>,
    pub output_tokens: RangeInclusive<u64>,
    /// Seconds between one turn's send and the next turn's (reading the answer, thinking).
    pub think_s: RangeInclusive<f64>,
    /// Conversations starting per second (Poisson).
    pub rate: f64,
    /// A conversation ends before a turn whose prompt would exceed this.
    pub max_input: u64,
    pub block_tokens: u64,
    pub seed: u64,
}

/// One line of a Mooncake trace.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct TraceLine {
    /// Milliseconds from the trace's start.
    pub timestamp: u64,
    pub input_length: u64,
    pub output_length: u64,
    pub hash_ids: Vec<u64>,
    /// Its conversation (0-based, in start order) and turn (0-based) in it.
    #[serde(skip)]
    pub conversation: u64,
    #[serde(skip)]
    pub turn: u64,
    /// The think time drawn before this turn (0 on a first turn), ms.
    #[serde(skip)]
    pub think_ms: u64,
}

/// A piece of a conversation's token stream: its identity and length.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Segment {
    System(u64),
    Doc(u64),
    User { conversation: u64, turn: u64 },
    Assistant { conversation: u64, turn: u64 },
}

/// Hands out block ids: one per distinct prefix (segments covered, and how much of each).
#[derive(Default)]
struct BlockIds {
    ids: HashMap<Vec<(Segment, u64)>, u64>,
}

impl BlockIds {
    fn ids_for(&mut self, stream: &[(Segment, u64)], input: u64, block: u64) -> Vec<u64> {
        let blocks = input.div_ceil(block);
        (1..=blocks)
            .map(|b| {
                let key = prefix_key(stream, (b * block).min(input));
                let next = self.ids.len() as u64;
                *self.ids.entry(key).or_insert(next)
            })
            .collect()
    }
}

/// The segments covering `[0, end)` and how many tokens of each.
fn prefix_key(stream: &[(Segment, u64)], end: u64) -> Vec<(Segment, u64)> {
    let mut key = Vec::new();
    let mut at = 0;
    for &(seg, len) in stream {
        if at >= end {
            break;
        }
        let take = len.min(end - at);
        key.push((seg, take));
        at += take;
    }
    key
}

impl SynthParams {
    pub fn validate(&self) -> anyhow::Result<()> {
        anyhow::ensure!(self.conversations > 0, "--conversations must be at least 1");
        anyhow::ensure!(
            *self.turns.start() >= 1 && self.turns.start() <= self.turns.end(),
            "--turns must be at least 1 (a range A..B needs A <= B)"
        );
        anyhow::ensure!(
            self.system_prompts >= 1,
            "--system-prompts must be at least 1"
        );
        anyhow::ensure!(self.docs >= 1, "--docs must be at least 1");
        for (name, r) in [
            ("--doc-tokens", &self.doc_tokens),
            ("--user-tokens", &self.user_tokens),
            ("--output-tokens", &self.output_tokens),
        ] {
            anyhow::ensure!(
                *r.start() >= 1 && r.start() <= r.end(),
                "{name} must be at least 1 (a range A..B needs A <= B)"
            );
        }
        anyhow::ensure!(
            self.think_s.start().is_finite() && self.think_s.start() <= self.think_s.end(),
            "--think-time: a range A..B needs A <= B"
        );
        anyhow::ensure!(
            self.rate.is_finite() && self.rate > 0.0,
            "--rate must be above 0 conversations/s"
        );
        anyhow::ensure!(self.block_tokens >= 1, "--block-tokens must be at least 1");
        let first = self.system_tokens + self.doc_tokens.start() + self.user_tokens.start();
        anyhow::ensure!(
            first <= self.max_input,
            "--max-input {} is below the shortest first turn ({first} tokens)",
            self.max_input
        );
        Ok(())
    }
}

/// Generate the trace, sorted by timestamp.
pub fn synth(p: &SynthParams) -> anyhow::Result<Vec<TraceLine>> {
    p.validate()?;
    let mut rng = ChaCha8Rng::seed_from_u64(p.seed);
    let starts = schedule(
        Arrival::Poisson,
        p.rate,
        p.seed,
        Some(p.conversations),
        None,
    );
    let doc_len: Vec<u64> = (0..p.docs)
        .map(|_| rng.random_range(p.doc_tokens.clone()))
        .collect();
    let zipf = Zipf::new(p.docs);
    let mut ids = BlockIds::default();
    // (timestamp, conversation, turn, line): sorted at the end, ties in conversation order.
    let mut lines: Vec<(u64, u64, u64, TraceLine)> = Vec::new();
    for (c, start) in starts.iter().enumerate() {
        let c = c as u64;
        let doc = zipf.draw(&mut rng);
        let mut stream = vec![
            (
                Segment::System(rng.random_range(0..p.system_prompts)),
                p.system_tokens,
            ),
            (Segment::Doc(doc), doc_len[doc as usize]),
        ];
        stream.retain(|&(_, len)| len > 0);
        let turns = rng.random_range(p.turns.clone());
        let mut t_ms = start.as_secs_f64() * 1e3;
        let mut think_ms = 0.0f64;
        for turn in 0..turns {
            let user = rng.random_range(p.user_tokens.clone());
            let output = rng.random_range(p.output_tokens.clone());
            let history: u64 = stream.iter().map(|s| s.1).sum();
            if history + user > p.max_input {
                break;
            }
            stream.push((
                Segment::User {
                    conversation: c,
                    turn,
                },
                user,
            ));
            let input = history + user;
            lines.push((
                t_ms.round() as u64,
                c,
                turn,
                TraceLine {
                    timestamp: t_ms.round() as u64,
                    input_length: input,
                    output_length: output,
                    hash_ids: ids.ids_for(&stream, input, p.block_tokens),
                    conversation: c,
                    turn,
                    think_ms: think_ms.round() as u64,
                },
            ));
            stream.push((
                Segment::Assistant {
                    conversation: c,
                    turn,
                },
                output,
            ));
            think_ms = rng.random_range(p.think_s.clone()) * 1e3;
            t_ms += think_ms;
        }
    }
    lines.sort_by_key(|(t, c, turn, _)| (*t, *c, *turn));
    Ok(lines.into_iter().map(|(.., l)| l).collect())
}

/// Zipf(1) over `n` items: a few documents are asked about by many conversations.
struct Zipf {
    cumulative: Vec<f64>,
}

impl Zipf {
    fn new(n: u64) -> Zipf {
        let mut acc = 0.0;
        let cumulative = (1..=n)
            .map(|k| {
                acc += 1.0 / k as f64;
                acc
            })
            .collect();
        Zipf { cumulative }
    }

    fn draw(&self, rng: &mut impl Rng) -> u64 {
        let total = self.cumulative.last().copied().unwrap_or(1.0);
        let x = rng.random::<f64>() * total;
        self.cumulative
            .partition_point(|&c| c <= x)
            .min(self.cumulative.len() - 1) as u64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params() -> SynthParams {
        SynthParams {
            conversations: 20,
            turns: 2..=5,
            system_prompts: 2,
            system_tokens: 1000,
            docs: 5,
            doc_tokens: 2000..=6000,
            user_tokens: 50..=300,
            output_tokens: 20..=200,
            think_s: 1.0..=5.0,
            rate: 1.0,
            max_input: 16_000,
            block_tokens: 512,
            seed: 7,
        }
    }

    #[test]
    fn blocks_match_lengths_and_time_is_sorted() {
        let t = synth(&params()).unwrap();
        assert!(t.len() >= 40, "at least 2 turns each: {}", t.len());
        for l in &t {
            assert_eq!(l.hash_ids.len() as u64, l.input_length.div_ceil(512));
            assert!(l.input_length <= 16_000);
        }
        assert!(t.windows(2).all(|w| w[0].timestamp <= w[1].timestamp));
    }

    #[test]
    fn a_later_turn_extends_the_earlier_turns_prefix() {
        let p = SynthParams {
            conversations: 1,
            turns: 3..=3,
            ..params()
        };
        let t = synth(&p).unwrap();
        assert_eq!(t.len(), 3);
        for w in t.windows(2) {
            let full = (w[0].input_length / 512) as usize;
            assert_eq!(
                w[0].hash_ids[..full],
                w[1].hash_ids[..full],
                "every whole block of turn n is a block of turn n+1"
            );
            assert!(w[1].input_length > w[0].input_length);
        }
    }

    #[test]
    fn conversations_share_system_prompt_blocks_and_differ_after() {
        let p = SynthParams {
            system_tokens: 1024,
            system_prompts: 1,
            docs: 50,
            ..params()
        };
        let t = synth(&p).unwrap();
        assert!(t.iter().all(|l| l.hash_ids[..2] == t[0].hash_ids[..2]));
        let distinct_last: std::collections::HashSet<_> =
            t.iter().map(|l| *l.hash_ids.last().unwrap()).collect();
        assert_eq!(
            distinct_last.len(),
            t.len(),
            "every prompt ends its own way"
        );
    }

    #[test]
    fn the_same_seed_gives_the_same_trace() {
        assert_eq!(synth(&params()).unwrap(), synth(&params()).unwrap());
        let other = SynthParams {
            seed: 8,
            ..params()
        };
        assert_ne!(synth(&params()).unwrap(), synth(&other).unwrap());
    }

    #[test]
    fn bad_parameters_are_refused() {
        let p = SynthParams {
            max_input: 100,
            ..params()
        };
        assert!(synth(&p).unwrap_err().to_string().contains("--max-input"));
        let p = SynthParams {
            turns: RangeInclusive::new(3, 2),
            ..params()
        };
        assert!(synth(&p).is_err());
    }
}
