//! Non-streamed answers: run the job, keep only its final state, and apply the faults
//! that can strike a whole response (a dropped connection, a malformed body).

use super::engine::{self, Finish, Flow, Job, Listener, Progress};
use super::fault::Fault;
use super::sse::broken_body_response;
use super::state::{SimState, Slot};
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};

/// The final state of a finished generation.
#[derive(Debug, Default, Clone)]
pub struct Outcome {
    pub text: String,
    pub prompt_tokens: u64,
    pub cached_tokens: u64,
    pub completion_tokens: u64,
    pub decode_steps: u64,
    pub spec_verify_steps: u64,
    pub spec_draft_tokens: u64,
    pub spec_accepted_tokens: u64,
    /// `None` when the server shut down mid-generation.
    pub finish: Option<Finish>,
}

impl Listener for Outcome {
    fn on_event(&mut self, progress: &Progress<'_>) -> Flow {
        self.prompt_tokens = progress.prompt_tokens;
        self.cached_tokens = progress.cached_tokens;
        self.completion_tokens = progress.completion_tokens;
        self.decode_steps = progress.decode_steps;
        self.spec_verify_steps = progress.spec_verify_steps;
        self.spec_draft_tokens = progress.spec_draft_tokens;
        self.spec_accepted_tokens = progress.spec_accepted_tokens;
        if progress.finish.is_some() {
            self.text = progress.text.to_string();
            self.finish = progress.finish;
        }
        Flow::Delivered
    }
}

/// Run `job` to the end; `Err` holds the response a fault gives instead of the answer.
pub async fn run_whole(state: &SimState, slot: Slot, job: Job) -> Result<Outcome, Response> {
    let fault = job.fault;
    let mut outcome = Outcome::default();
    let mut truth = engine::run(state, job, &mut outcome).await;
    if matches!(fault, Some(Fault::Reset | Fault::Malformed)) {
        truth.finish = "abort".to_string();
        truth.output_tokens = 0;
    }
    state.truth.push(truth);
    drop(slot);
    match fault {
        Some(Fault::Reset) => Err(broken_body_response()),
        Some(Fault::Malformed) => {
            Err(([(header::CONTENT_TYPE, "application/json")], "{not json").into_response())
        }
        _ if outcome.finish.is_none() => Err((
            StatusCode::SERVICE_UNAVAILABLE,
            "the simulator is shutting down",
        )
            .into_response()),
        _ => Ok(outcome),
    }
}
