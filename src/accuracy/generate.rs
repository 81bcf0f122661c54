//! Task items generated from a seed: the facts hidden in the haystack at stated depths,
//! the question that ends the prompt (with RULER's answer prefix in a raw completion) and
//! the strings a correct answer holds.

use super::qa::QaItem;
use super::task::TaskKind;
use super::words;
use crate::workload::{Fact, Graded, Needle};
use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// How the prompt is put to the model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Style {
    /// Through the server's chat template: the question ends the user's message.
    Chat,
    /// A raw completion: the question, then the answer prefix the model continues.
    Raw,
}

impl Style {
    pub fn name(self) -> &'static str {
        match self {
            Style::Chat => "chat",
            Style::Raw => "raw",
        }
    }
}

/// One graded item: what the prompt hides and asks, and what the answer must hold.
#[derive(Debug, Clone, PartialEq)]
pub struct Item {
    pub task: TaskKind,
    pub needle: Needle,
    pub expected: Vec<String>,
}

/// Distractor needles beside the asked one (multikey), values of one key (multivalue).
const MULTI: usize = 4;
/// Assignments after the first in a variable-tracking chain.
const VT_HOPS: usize = 4;
/// Common-word extraction: the frequent keywords, how often each appears, and the rare ones.
const CWE_TOP: usize = 3;
const CWE_TOP_COUNT: usize = 6;
const CWE_RARE: usize = 6;
const CWE_RARE_COUNT: usize = 2;

/// Ids the nonce head takes, and room kept for at least a little haystack.
const HEAD_TOKENS: u64 = 16;
const MIN_HAYSTACK_TOKENS: u64 = 32;
/// Conservative tokens per byte of structure text: a digit is often a token of its own;
/// other text runs near 0.25 token a byte in English (0.3 allows for names and markup).
const TOKENS_PER_DIGIT: f64 = 1.0;
const TOKENS_PER_BYTE: f64 = 0.3;

/// The item for (task, length, sample) at `depth`: the same for the same seed. `qa` holds
/// the `--dataset` items (needed by `qa` only).
pub fn generate(
    task: TaskKind,
    seed: u64,
    tokens: u64,
    sample: u32,
    depth: f64,
    style: Style,
    qa: &[QaItem],
) -> Result<Item, String> {
    let mut rng = ChaCha8Rng::seed_from_u64(
        seed ^ tokens.wrapping_mul(0x9E37_79B9_7F4A_7C15)
            ^ (u64::from(sample) << 40)
            ^ ((task as u64) << 56)
            ^ (depth * 1000.0) as u64,
    );
    let parts = match task {
        TaskKind::Niah => niah(&mut rng, depth),
        TaskKind::Multikey => multikey(&mut rng, depth),
        TaskKind::Multivalue => multivalue(&mut rng, depth),
        TaskKind::Vt => vt(&mut rng, depth),
        TaskKind::Cwe => cwe(&mut rng),
        TaskKind::Qa => qa_item(qa, tokens, sample, depth)?,
    };
    let item = parts.into_item(task, depth, style);
    let need = min_tokens(&item);
    if tokens < need {
        return Err(format!(
            "{tokens} tokens is too short for task {task}: its structure (instruction, {} \
             fact(s), question) takes about {need} tokens with the nonce and a minimal \
             haystack; use lengths of at least {need}",
            item.needle.facts.len()
        ));
    }
    Ok(item)
}

/// A conservative estimate of the tokens an item needs besides its haystack.
pub fn min_tokens(item: &Item) -> u64 {
    let n = &item.needle;
    let texts = [n.preamble.as_str(), n.question.as_str()]
        .into_iter()
        .chain(n.facts.iter().map(|f| f.text.as_str()));
    let (mut digits, mut other) = (0usize, 0usize);
    for t in texts {
        let d = t.bytes().filter(u8::is_ascii_digit).count();
        digits += d;
        other += t.len() - d;
    }
    let structure = digits as f64 * TOKENS_PER_DIGIT + other as f64 * TOKENS_PER_BYTE;
    HEAD_TOKENS + MIN_HAYSTACK_TOKENS + structure.ceil() as u64
}

struct Parts {
    preamble: String,
    facts: Vec<Fact>,
    question: String,
    prefix: String,
    expected: Vec<String>,
}

impl Parts {
    fn into_item(self, task: TaskKind, depth: f64, style: Style) -> Item {
        let question = match style {
            Style::Chat => format!("\n\n{}", self.question),
            Style::Raw => format!("\n\n{} {}", self.question, self.prefix),
        };
        Item {
            task,
            needle: Needle {
                depth,
                expected: self.expected.first().cloned().unwrap_or_default(),
                facts: self.facts,
                preamble: self.preamble,
                question,
                graded: Some(Graded {
                    task: task.name().to_string(),
                    expected: self.expected.clone(),
                }),
            },
            expected: self.expected,
        }
    }
}

/// The instruction of the tasks that hide several numbers.
const MANY_NUMBERS: &str = "Some special magic numbers are hidden within the following text. \
                            Make sure to memorize them. I will quiz you about the numbers \
                            afterwards.";

fn fact(depth: f64, text: String) -> Fact {
    Fact {
        depth: depth.clamp(0.0, 1.0),
        text: format!(" {text}"),
    }
}

fn magic(key: &str, value: &str) -> String {
    format!("One of the special magic numbers for {key} is: {value}.")
}

/// Depths spread evenly around the circle from `depth` (the first is `depth` itself).
fn spread(depth: f64, k: usize) -> Vec<f64> {
    (0..k)
        .map(|i| (depth + i as f64 / k as f64).rem_euclid(1.0))
        .collect()
}

fn niah(rng: &mut ChaCha8Rng, depth: f64) -> Parts {
    let key = words::key(rng, &[]);
    let value = words::number(rng, &[]);
    Parts {
        preamble: "A special magic number is hidden within the following text. Make sure to \
                   memorize it. I will quiz you about the number afterwards."
            .into(),
        facts: vec![fact(depth, magic(&key, &value))],
        question: format!(
            "What is the special magic number for {key} mentioned in the provided text?"
        ),
        prefix: format!("The special magic number for {key} mentioned in the provided text is"),
        expected: vec![value],
    }
}

fn multikey(rng: &mut ChaCha8Rng, depth: f64) -> Parts {
    let mut keys = Vec::new();
    let mut values = Vec::new();
    for _ in 0..MULTI {
        keys.push(words::key(rng, &keys));
        values.push(words::number(rng, &values));
    }
    let facts = spread(depth, MULTI)
        .into_iter()
        .zip(keys.iter().zip(&values))
        .map(|(d, (k, v))| fact(d, magic(k, v)))
        .collect();
    let key = &keys[0];
    Parts {
        preamble: MANY_NUMBERS.into(),
        facts,
        question: format!(
            "What is the special magic number for {key} mentioned in the provided text?"
        ),
        prefix: format!("The special magic number for {key} mentioned in the provided text is"),
        expected: vec![values[0].clone()],
    }
}

fn multivalue(rng: &mut ChaCha8Rng, depth: f64) -> Parts {
    let key = words::key(rng, &[]);
    let mut values = Vec::new();
    for _ in 0..MULTI {
        values.push(words::number(rng, &values));
    }
    let facts = spread(depth, MULTI)
        .into_iter()
        .zip(&values)
        .map(|(d, v)| fact(d, magic(&key, v)))
        .collect();
    Parts {
        preamble: MANY_NUMBERS.into(),
        facts,
        question: format!(
            "What are all the special magic numbers for {key} mentioned in the provided text?"
        ),
        prefix: format!("The special magic numbers for {key} mentioned in the provided text are"),
        expected: values,
    }
}

fn vt(rng: &mut ChaCha8Rng, depth: f64) -> Parts {
    let value = rng.random_range(10_000u32..100_000).to_string();
    let mut vars: Vec<String> = Vec::new();
    for _ in 0..=VT_HOPS {
        vars.push(words::variable(rng, &vars));
    }
    // The chain starts at `depth` and runs on towards the end, in order.
    let step = (1.0 - depth) / (VT_HOPS + 1) as f64;
    let facts = vars
        .iter()
        .enumerate()
        .map(|(i, v)| {
            let rhs = match i {
                0 => value.clone(),
                _ => format!("VAR {}", vars[i - 1]),
            };
            fact(depth + step * i as f64, format!("VAR {v} = {rhs}."))
        })
        .collect();
    Parts {
        preamble: "Memorize and track the chain(s) of variable assignment hidden in the \
                   following text."
            .into(),
        facts,
        question: format!(
            "Question: Find all variables that are assigned the value {value} in the text above."
        ),
        prefix: format!(
            "Answer: According to the chain(s) of variable assignment in the text above, {} \
             variables are assigned the value {value}, they are:",
            VT_HOPS + 1
        ),
        expected: vars,
    }
}

fn cwe(rng: &mut ChaCha8Rng) -> Parts {
    let chosen = words::keywords(rng, CWE_TOP + CWE_RARE);
    let mut lines: Vec<&String> = Vec::new();
    for (i, w) in chosen.iter().enumerate() {
        let count = if i < CWE_TOP {
            CWE_TOP_COUNT
        } else {
            CWE_RARE_COUNT
        };
        lines.extend(std::iter::repeat_n(w, count));
    }
    // Shuffle, then spread evenly over the whole haystack.
    for i in (1..lines.len()).rev() {
        lines.swap(i, rng.random_range(0..=i));
    }
    let last = (lines.len() - 1).max(1) as f64;
    let facts = lines
        .iter()
        .enumerate()
        .map(|(i, w)| fact(i as f64 / last, format!("Keyword: {w}.")))
        .collect();
    Parts {
        preamble: "Keyword lines are scattered through the following text. Some keywords \
                   appear more often than others. Memorize the ones that appear most often."
            .into(),
        facts,
        question: format!(
            "Question: What are the {CWE_TOP} most common keywords in the keyword lines above?"
        ),
        prefix: format!("Answer: The top {CWE_TOP} keywords that appear most often are:"),
        expected: chosen[..CWE_TOP].to_vec(),
    }
}

/// A `--dataset` QA item that fits `tokens`, picked by the sample index: its context is
/// hidden at `depth` in the haystack, its question ends the prompt.
fn qa_item(items: &[QaItem], tokens: u64, sample: u32, depth: f64) -> Result<Parts, String> {
    if items.is_empty() {
        return Err("task qa needs --dataset FILE with question/context/answers items".into());
    }
    let fits: Vec<&QaItem> = items
        .iter()
        .filter(|q| HEAD_TOKENS + MIN_HAYSTACK_TOKENS + q.estimated_tokens() <= tokens)
        .collect();
    let Some(q) = fits.get(sample as usize % fits.len().max(1)) else {
        let need = items
            .iter()
            .map(QaItem::estimated_tokens)
            .min()
            .unwrap_or(0)
            + HEAD_TOKENS
            + MIN_HAYSTACK_TOKENS;
        return Err(format!(
            "{tokens} tokens is too short for task qa: no --dataset item's context fits \
             (the shortest needs about {need} tokens)"
        ));
    };
    Ok(Parts {
        preamble: "Answer the question based on the given passages.".into(),
        facts: vec![fact(depth, q.context.clone())],
        question: format!("Question: {}", q.question),
        prefix: "Answer:".into(),
        expected: q.answers.clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn item(task: TaskKind, sample: u32) -> Item {
        generate(task, 7, 4096, sample, 0.5, Style::Raw, &[]).unwrap()
    }

    #[test]
    fn items_are_seeded_and_differ_between_samples() {
        for t in TaskKind::SYNTHETIC {
            assert_eq!(item(t, 0), item(t, 0), "{t}");
            assert_ne!(item(t, 0), item(t, 1), "{t}");
        }
    }

    #[test]
    fn every_expected_string_is_in_the_facts() {
        for t in [
            TaskKind::Niah,
            TaskKind::Multikey,
            TaskKind::Multivalue,
            TaskKind::Vt,
        ] {
            let i = item(t, 3);
            let facts: String = i.needle.facts.iter().map(|f| f.text.clone()).collect();
            for e in &i.expected {
                assert!(facts.contains(e.as_str()), "{t}: {e} in {facts}");
            }
        }
        let m = item(TaskKind::Multikey, 0);
        assert_eq!(m.needle.facts.len(), MULTI);
        assert_eq!(
            m.needle.facts[0].depth, 0.5,
            "the asked key sits at the stated depth"
        );
        assert_eq!(item(TaskKind::Multivalue, 0).expected.len(), MULTI);
        assert_eq!(item(TaskKind::Vt, 0).expected.len(), VT_HOPS + 1);
    }

    #[test]
    fn common_words_are_the_most_frequent_keyword_lines() {
        let i = item(TaskKind::Cwe, 2);
        for w in &i.expected {
            let n = i
                .needle
                .facts
                .iter()
                .filter(|f| f.text == format!(" Keyword: {w}."))
                .count();
            assert_eq!(n, CWE_TOP_COUNT);
        }
        assert_eq!(
            i.needle.facts.len(),
            CWE_TOP * CWE_TOP_COUNT + CWE_RARE * CWE_RARE_COUNT
        );
    }

    #[test]
    fn raw_prompts_end_with_the_answer_prefix_and_chat_with_the_question() {
        let raw = item(TaskKind::Niah, 0);
        assert!(
            raw.needle
                .question
                .ends_with("mentioned in the provided text is")
        );
        let chat = generate(TaskKind::Niah, 7, 4096, 0, 0.5, Style::Chat, &[]).unwrap();
        assert!(chat.needle.question.ends_with('?'));
    }

    #[test]
    fn a_length_too_short_for_the_structure_is_refused() {
        let e = generate(TaskKind::Cwe, 1, 256, 0, 0.5, Style::Chat, &[]).unwrap_err();
        assert!(e.contains("too short for task cwe"), "{e}");
        assert!(generate(TaskKind::Niah, 1, 256, 0, 0.5, Style::Chat, &[]).is_ok());
        assert!(generate(TaskKind::Cwe, 1, 512, 0, 0.5, Style::Raw, &[]).is_ok());
        let e = generate(TaskKind::Qa, 1, 4096, 0, 0.5, Style::Chat, &[]).unwrap_err();
        assert!(e.contains("--dataset"), "{e}");
    }
}
