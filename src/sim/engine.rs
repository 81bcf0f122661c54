//! The front ends' interface to the simulated model: a `Job` goes to the serving engine
//! (`driver.rs`), and its outputs come back as `Progress` events for a `Listener`.

use super::driver::Submit;
use super::fault::Fault;
use super::needle;
use super::scheduler::OutputKind;
use super::state::SimState;
use super::truth::{DecodeStep, RequestTruth};
use super::vocab::WORDS;
use rand::RngExt;
use rand_chacha::ChaCha8Rng;

/// Shortest and longest natural answer when EOS is not ignored.
const NATURAL_STOP_TOKENS: std::ops::RangeInclusive<u64> = 4..=40;

/// One generation request, validated and fitted to the context.
pub struct Job {
    pub route: &'static str,
    pub prompt: Vec<u32>,
    pub max_tokens: u64,
    pub min_tokens: u64,
    pub ignore_eos: bool,
    pub rng: ChaCha8Rng,
    pub fault: Option<Fault>,
    pub arrived: tokio::time::Instant,
    /// The `ngram` model's per-draft acceptance α; `None` with `uniform` or without
    /// speculative decoding.
    pub accept_prob: Option<f64>,
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
    /// Decode steps so far, recomputes after a preemption included.
    pub decode_steps: u64,
    /// Speculative verify steps so far: decode steps, recomputes not included.
    pub spec_verify_steps: u64,
    /// Draft tokens verified so far, and how many were accepted.
    pub spec_draft_tokens: u64,
    pub spec_accepted_tokens: u64,
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

/// Run `job` to completion (or until cut) and say what happened. The engine's step loop
/// computes it among every other request in flight; this hands each output to `listener`.
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
        accept_prob,
    } = job;
    let prompt_tokens = prompt.len() as u64;
    let reach = super::tasks::Reach {
        effective_context: state.config.cost.effective_context,
        lost_in_middle: state.config.cost.lost_in_middle,
        seed: state.config.seed,
    };
    let needle_answer =
        needle::answer_ids(&prompt).or_else(|| super::tasks::answer_ids(&prompt, &reach));
    let natural = rng.random_range(NATURAL_STOP_TOKENS).max(min_tokens);
    let (target_tokens, finish) = if ignore_eos || natural >= max_tokens {
        (max_tokens, Finish::Length)
    } else {
        (natural, Finish::Stop)
    };
    let engine = &state.engine;
    let mut truth = RequestTruth {
        route: route.to_string(),
        prompt_tokens,
        finish: "abort".to_string(),
        needle_answer: needle_answer.clone(),
        fault: fault.map(|f| f.name().to_string()),
        arrival_s: engine.at_s(arrived.into_std()),
        submitted_s: engine.now_s(),
        spec_accept_prob: accept_prob,
        ..RequestTruth::default()
    };
    // `--cache-replies`: the prompt and the reply stay cached once the request finishes.
    let mut kept_prompt = state.config.cost.cache_replies.then(|| prompt.clone());
    let mut ticket = engine.submit(Submit {
        prompt,
        max_tokens,
        target_tokens,
        arrived: arrived.into_std(),
        seed: rng.random(),
        accept_prob,
    });
    let mut text = String::new();
    let mut produced = 0;
    while let Some(out) = ticket.outputs.recv().await {
        // Outputs come at their step's end: write at once.
        let first = out.kind == OutputKind::First;
        let verify = out.kind == OutputKind::Decode;
        engine.note_output_lateness(engine.instant(out.at_s).elapsed().as_secs_f64());
        let delta_start = text.len();
        append_words(
            &mut text,
            needle_answer.as_deref(),
            produced,
            out.tokens,
            &mut rng,
        );
        produced += out.tokens;
        let event = Progress {
            prompt_tokens,
            cached_tokens: out.cached_tokens,
            max_tokens,
            text: &text,
            delta: &text[delta_start..],
            completion_tokens: produced,
            decode_steps: truth.decode_steps.len() as u64 + u64::from(!first),
            spec_verify_steps: truth.spec_verify_steps + u64::from(verify),
            spec_draft_tokens: truth.spec_draft_tokens + out.drafted,
            spec_accepted_tokens: truth.spec_accepted_tokens + out.accepted,
            finish: out.finished.then_some(finish),
        };
        if listener.on_event(&event) == Flow::Cut {
            return truth;
        }
        let written_s = engine.now_s();
        truth.preemptions = out.preemptions;
        if first {
            truth.cached_tokens = out.cached_tokens;
            truth.cached_pages = out.cached_pages;
            truth.pool_evicted_pages = out.evicted_before;
            truth.prefill_s = out.prefill_s;
            truth.admitted_s = Some(out.admitted_s);
            truth.first_token_s = Some(written_s);
            truth.first_event_tokens = out.tokens;
        } else {
            truth.decode_steps.push(DecodeStep {
                tokens: out.tokens,
                context_tokens: out.context_tokens,
                cost_s: out.step_s,
            });
        }
        if verify {
            truth.spec_verify_steps += 1;
            truth.spec_draft_tokens += out.drafted;
            truth.spec_accepted_tokens += out.accepted;
        }
        truth.output_tokens = produced;
        if out.finished {
            ticket.finish();
            if let Some(mut ids) = kept_prompt.take() {
                ids.extend(super::tokenizer::tokenize(&text));
                engine.with(|sched, _| sched.cache_finished(&ids));
            }
            truth.finish = finish.name().to_string();
            truth.finished_s = Some(written_s);
            break;
        }
    }
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
