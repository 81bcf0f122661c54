//! The simulated model at work: holds the compute lock, prefills against the prefix cache,
//! then decodes step by step, sleeping to absolute targets so timer granularity never adds up.

use super::fault::Fault;
use super::needle;
use super::state::{SimState, later};
use super::truth::{DecodeStep, RequestTruth};
use super::vocab::WORDS;
use rand::RngExt;
use rand_chacha::ChaCha8Rng;

/// Shortest and longest natural answer when EOS is not ignored.
const NATURAL_STOP_TOKENS: std::ops::RangeInclusive<u64> = 4..=40;

/// One generation request, validated and fitted to the context.
/// A wait for the compute lock longer than this means another request held it.
const QUEUED: std::time::Duration = std::time::Duration::from_micros(500);

pub struct Job {
    pub route: &'static str,
    pub prompt: Vec<u32>,
    pub max_tokens: u64,
    pub min_tokens: u64,
    pub ignore_eos: bool,
    pub rng: ChaCha8Rng,
    pub fault: Option<Fault>,
    pub arrived: tokio::time::Instant,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Finish {
    /// Reached `max_tokens`.
    Length,
    /// The model emitted EOS.
    Stop,
}

impl Finish {
    pub fn name(self) -> &'static str {
        match self {
            Finish::Length => "length",
            Finish::Stop => "stop",
        }
    }
}

/// The state of the output after one event.
#[derive(Debug, Clone, Copy)]
pub struct Progress<'a> {
    pub prompt_tokens: u64,
    pub cached_tokens: u64,
    pub max_tokens: u64,
    /// Everything generated so far.
    pub text: &'a str,
    /// What this event added to `text`.
    pub delta: &'a str,
    pub completion_tokens: u64,
    /// Decode steps so far (speculative verify steps).
    pub decode_steps: u64,
    /// Set on the last event.
    pub finish: Option<Finish>,
}

/// Whether an event reached the client.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flow {
    Delivered,
    /// Not delivered (client gone, or a fault ends the stream here): stop computing.
    Cut,
}

/// Receives each event as it is produced.
pub trait Listener {
    fn on_event(&mut self, progress: &Progress<'_>) -> Flow;
}

/// Run `job` to completion (or until cut) and say what happened.
pub async fn run<L: Listener>(state: &SimState, job: Job, listener: &mut L) -> RequestTruth {
    let Job {
        route,
        prompt,
        max_tokens,
        min_tokens,
        ignore_eos,
        mut rng,
        fault,
        arrived,
    } = job;
    let prompt_tokens = prompt.len() as u64;
    let needle_answer = needle::answer_ids(&prompt);
    let natural = rng.random_range(NATURAL_STOP_TOKENS).max(min_tokens);
    let (target_tokens, finish) = if ignore_eos || natural >= max_tokens {
        (max_tokens, Finish::Length)
    } else {
        (natural, Finish::Stop)
    };
    let mut truth = RequestTruth {
        route: route.to_string(),
        prompt_tokens,
        cached_tokens: 0,
        prefill_s: 0.0,
        first_event_tokens: 0,
        decode_steps: Vec::new(),
        output_tokens: 0,
        finish: "abort".to_string(),
        needle_answer: needle_answer.clone(),
        fault: fault.map(|f| f.name().to_string()),
    };
    let asked = tokio::time::Instant::now();
    let Some(_turn) = state.compute_turn().await else {
        return truth;
    };
    // Compute starts on arrival when the engine was free, else when the previous request
    // let go of it: the simulator's own parsing and bookkeeping are absorbed, not added.
    let turn = tokio::time::Instant::now();
    let start = if turn - asked < QUEUED { arrived } else { turn };
    let cached_tokens = state.cache().lookup(&prompt);
    truth.cached_tokens = cached_tokens;
    truth.prefill_s = state.cost.prefill_s(cached_tokens, prompt_tokens);
    let mut due = later(start, truth.prefill_s);
    // Bookkeeping inside the prefill budget; the lock keeps other requests from seeing it early.
    state.cache().insert(&prompt);
    if !state.sleep_until_precise(due).await {
        return truth;
    }

    let mut text = String::new();
    let first_tokens = target_tokens.min(1);
    append_words(
        &mut text,
        needle_answer.as_deref(),
        0,
        first_tokens,
        &mut rng,
    );
    let event = Progress {
        prompt_tokens,
        cached_tokens,
        max_tokens,
        text: &text,
        delta: &text,
        completion_tokens: first_tokens,
        decode_steps: 0,
        finish: (first_tokens == target_tokens).then_some(finish),
    };
    if listener.on_event(&event) == Flow::Cut {
        return truth;
    }
    truth.first_event_tokens = first_tokens;
    truth.output_tokens = first_tokens;

    let spec = u64::from(state.config.cost.spec.max(1));
    let mut produced = first_tokens;
    while produced < target_tokens {
        let context_tokens = prompt_tokens + produced;
        let cost_s = state.cost.decode_step_s(context_tokens);
        due = later(due, cost_s);
        let tokens = rng.random_range(1..=spec).min(target_tokens - produced);
        let delta_start = text.len();
        append_words(
            &mut text,
            needle_answer.as_deref(),
            produced,
            tokens,
            &mut rng,
        );
        if !state.sleep_until(due).await {
            return truth;
        }
        produced += tokens;
        let event = Progress {
            prompt_tokens,
            cached_tokens,
            max_tokens,
            text: &text,
            delta: &text[delta_start..],
            completion_tokens: produced,
            decode_steps: truth.decode_steps.len() as u64 + 1,
            finish: (produced == target_tokens).then_some(finish),
        };
        if listener.on_event(&event) == Flow::Cut {
            return truth;
        }
        truth.decode_steps.push(DecodeStep {
            tokens,
            context_tokens,
            cost_s,
        });
        truth.output_tokens = produced;
    }
    truth.finish = finish.name().to_string();
    truth
}

/// Append `count` generated words; the first output word answers the needle, if asked.
fn append_words(
    text: &mut String,
    needle_answer: Option<&str>,
    produced: u64,
    count: u64,
    rng: &mut ChaCha8Rng,
) {
    for i in 0..count {
        let word = match needle_answer {
            Some(answer) if produced + i == 0 => answer,
            _ => WORDS[rng.random_range(0..WORDS.len())],
        };
        if !text.is_empty() {
            text.push(' ');
        }
        text.push_str(word);
    }
}
