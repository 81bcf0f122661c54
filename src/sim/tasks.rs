//! The simulated model's long-context skill for `--tasks` prompts: it answers every task
//! from the facts it "sees", and with `--effective-context N` it sees every fact of a
//! prompt within N tokens and, beyond, each fact with probability (N/L)^k, drawn from a
//! hash of the seed, the fact and the length (so the same prompt gets the same answer).
//! `--lost-in-middle` raises k towards the middle of the prompt: k = 1 + 6·sin(π·depth),
//! so facts near either end survive longer than those in the middle.

use super::tokenizer::detokenize;
use std::collections::{BTreeMap, HashMap};

/// How far the model's attention reaches.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Reach {
    /// Tokens within which every fact is seen (`None`: every length).
    pub effective_context: Option<u64>,
    pub lost_in_middle: bool,
    pub seed: u64,
}

/// Decay exponent without the depth profile.
const FLAT_EXPONENT: f64 = 3.0;

impl Reach {
    /// The probability of seeing a fact at `depth` (fraction of the prompt) of `tokens`.
    pub fn p_seen(&self, tokens: u64, depth: f64) -> f64 {
        let Some(n) = self.effective_context else {
            return 1.0;
        };
        if tokens <= n {
            return 1.0;
        }
        let r = n as f64 / tokens as f64;
        let k = if self.lost_in_middle {
            1.0 + 6.0 * (std::f64::consts::PI * depth.clamp(0.0, 1.0)).sin()
        } else {
            FLAT_EXPONENT
        };
        r.powf(k)
    }

    fn sees(&self, tokens: u64, depth: f64, fact: &str) -> bool {
        let p = self.p_seen(tokens, depth);
        p >= 1.0 || unit_hash(self.seed, tokens, fact) < p
    }
}

/// A uniform draw in [0, 1) from the seed, the length and the fact's text (FNV-1a).
fn unit_hash(seed: u64, tokens: u64, fact: &str) -> f64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325 ^ seed ^ tokens.rotate_left(32);
    for b in fact.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    // Finalise (splitmix64) so nearby inputs spread.
    h = (h ^ (h >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h = (h ^ (h >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^= h >> 31;
    (h >> 11) as f64 / (1u64 << 53) as f64
}

const MAGIC_ONE: &str = "What is the special magic number for ";
const MAGIC_ALL: &str = "What are all the special magic numbers for ";
const VT_ASK: &str = "Find all variables that are assigned the value ";
const CWE_ASK: &str = "most common keywords in the keyword lines above?";
/// Tokens at the end of a prompt searched for a task question.
const TAIL_TOKENS: usize = 256;

/// The answer to a task prompt of token ids, or `None` when it asks no task.
pub fn answer_ids(prompt: &[u32], reach: &Reach) -> Option<String> {
    let tail = detokenize(&prompt[prompt.len().saturating_sub(TAIL_TOKENS)..]);
    if ![MAGIC_ONE, MAGIC_ALL, VT_ASK, CWE_ASK]
        .iter()
        .any(|q| tail.contains(q.trim_end()))
    {
        return None;
    }
    answer(&detokenize(prompt), prompt.len() as u64, reach)
}

/// The answer to a task prompt's text of `tokens` tokens.
pub fn answer(text: &str, tokens: u64, reach: &Reach) -> Option<String> {
    let seen = |at: usize, fact: &str| reach.sees(tokens, at as f64 / text.len() as f64, fact);
    if let Some((ask, all)) = last_of(text, &[(MAGIC_ONE, false), (MAGIC_ALL, true)]) {
        let key = text[ask..].split_whitespace().next()?.to_string();
        let fact = format!("One of the special magic numbers for {key} is: ");
        let values: Vec<&str> = text[..ask]
            .match_indices(&fact)
            .filter_map(|(at, _)| Some((at, text[at + fact.len()..].split('.').next()?)))
            .filter(|(at, v)| seen(*at, v))
            .map(|(_, v)| v)
            .collect();
        return Some(match (values.first(), all) {
            (None, _) => "unknown".into(),
            (Some(v), false) => v.to_string(),
            (Some(_), true) => values.join(", "),
        });
    }
    if let Some((ask, _)) = last_of(text, &[(VT_ASK, false)]) {
        let value: String = text[ask..]
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        let mut binds: HashMap<String, String> = HashMap::new();
        for (at, _) in text[..ask].match_indices("VAR ") {
            let stmt = text[at..].split('.').next().unwrap_or("");
            let Some((lhs, rhs)) = stmt.strip_prefix("VAR ").and_then(|s| s.split_once(" = "))
            else {
                continue;
            };
            if seen(at, stmt) {
                binds.insert(lhs.trim().to_string(), rhs.trim().to_string());
            }
        }
        let mut names: Vec<String> = Vec::new();
        let mut frontier = vec![value];
        while let Some(v) = frontier.pop() {
            for (lhs, rhs) in &binds {
                let bound = rhs == &v || rhs.strip_prefix("VAR ") == Some(v.as_str());
                if bound && !names.contains(lhs) {
                    names.push(lhs.clone());
                    frontier.push(lhs.clone());
                }
            }
        }
        names.sort();
        return Some(if names.is_empty() {
            "unknown".into()
        } else {
            names.join(" ")
        });
    }
    if let Some((ask, _)) = last_of(text, &[(CWE_ASK, false)]) {
        let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
        for (at, _) in text[..ask].match_indices("Keyword: ") {
            let w = text[at + 9..].split('.').next().unwrap_or("");
            if seen(at, &format!("{at}{w}")) {
                *counts.entry(w).or_default() += 1;
            }
        }
        let mut ranked: Vec<(&str, usize)> = counts.into_iter().collect();
        ranked.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(b.0)));
        let top: Vec<&str> = ranked.iter().take(3).map(|(w, _)| *w).collect();
        return Some(if top.is_empty() {
            "unknown".into()
        } else {
            top.join(" ")
        });
    }
    None
}

/// The byte offset just after the last occurrence of any of `questions`, with its tag.
fn last_of<T: Copy>(text: &str, questions: &[(&str, T)]) -> Option<(usize, T)> {
    questions
        .iter()
        .filter_map(|(q, tag)| text.rfind(q).map(|at| (at + q.len(), *tag)))
        .max_by_key(|(at, _)| *at)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::accuracy::generate::Style;
    use crate::accuracy::{TaskKind, generate, score};
    use crate::workload::prompt::filler_text;

    fn prompt(task: TaskKind, sample: u32, depth: f64) -> (String, Vec<String>) {
        let item = generate(task, 3, 4096, sample, depth, Style::Raw, &[]).unwrap();
        (
            filler_text("NONCE.", 600, Some(&item.needle)),
            item.expected,
        )
    }

    #[test]
    fn answers_every_task_within_reach() {
        let reach = Reach::default();
        for t in TaskKind::SYNTHETIC {
            for sample in 0..4 {
                let (text, expected) = prompt(t, sample, 0.3);
                let a = answer(&text, 1000, &reach).unwrap();
                assert_eq!(score(t, &expected, &a), 1.0, "{t}: {a} vs {expected:?}");
            }
        }
        assert_eq!(answer("no task here", 10, &reach), None);
    }

    #[test]
    fn decays_beyond_the_effective_context_and_sags_in_the_middle() {
        let flat = Reach {
            effective_context: Some(1000),
            lost_in_middle: false,
            seed: 0,
        };
        assert_eq!(flat.p_seen(1000, 0.5), 1.0);
        assert!((flat.p_seen(2000, 0.5) - 0.125).abs() < 1e-12);
        let lim = Reach {
            lost_in_middle: true,
            ..flat
        };
        assert!(lim.p_seen(2000, 0.0) > lim.p_seen(2000, 0.25));
        assert!(lim.p_seen(2000, 0.25) > lim.p_seen(2000, 0.5));
        assert!((lim.p_seen(2000, 1.0) - lim.p_seen(2000, 0.0)).abs() < 1e-9);
        // The draw is uniform: about p of many facts are seen.
        let seen = (0..4000)
            .filter(|i| flat.sees(2000, 0.5, &format!("fact {i}")))
            .count();
        // Binomial(4000, 0.125): sd ≈ 21; 5 sd either side.
        assert!((seen as i64 - 500).abs() < 105, "{seen}");
    }
}
