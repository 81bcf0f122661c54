//! Everything between a parsed generation request and the model: fitting the context,
//! the `--max-running` cap, the request's seeded randomness and its fault draw.

use super::engine::Job;
use super::error::{ApiError, Dialect};
use super::fault::{Fault, Site};
use super::request::fit_context;
use super::spec::{SpecModel, accept_prob};
use super::state::{SimState, Slot};
use super::truth::RequestTruth;
use axum::http::StatusCode;
use rand::RngExt;
use std::sync::Arc;

/// A generation request, API-neutral.
pub struct GenRequest {
    pub route: &'static str,
    pub dialect: Dialect,
    pub prompt: Vec<u32>,
    pub max_tokens: u64,
    pub min_tokens: u64,
    pub ignore_eos: bool,
    pub stream: bool,
    /// When the request had arrived (the simulated clock starts then, so parsing and
    /// bookkeeping never add to the configured costs).
    pub arrived: tokio::time::Instant,
}

/// A request the model will run.
pub struct Admitted {
    pub slot: Slot,
    pub job: Job,
    /// 32 hex digits, seeded.
    pub request_id: String,
}

pub fn admit(state: &Arc<SimState>, req: GenRequest) -> Result<Admitted, ApiError> {
    let args = &state.config.cost;
    let prompt = fit_context(
        req.prompt,
        req.max_tokens,
        args.context_length,
        args.truncate,
    )
    .map_err(|message| ApiError::bad_request(req.dialect, message))?;
    let slot = state.admit().ok_or_else(|| {
        ApiError::new(
            req.dialect,
            StatusCode::SERVICE_UNAVAILABLE,
            format!(
                "the server is full: {} requests are in flight (--max-running {} with \
                 --reject-when-full); retry later",
                state.in_flight(),
                args.max_running
            ),
        )
    })?;
    let mut rng = state.next_request_rng();
    let request_id = format!("{:032x}", rng.random::<u128>());
    let site = if req.stream {
        Site::StreamedGeneration
    } else {
        Site::WholeGeneration
    };
    let fault = state.faults.draw(site);
    if let Some(status) = fault.and_then(http_status) {
        let truth = RequestTruth {
            route: req.route.to_string(),
            prompt_tokens: prompt.len() as u64,
            finish: "error".to_string(),
            fault: fault.map(|f| f.name().to_string()),
            arrival_s: state.engine.at_s(req.arrived.into_std()),
            ..RequestTruth::default()
        };
        state.truth.push(truth);
        let message = match status {
            StatusCode::BAD_REQUEST => "simulated bad request: the simulator refused this request",
            StatusCode::SERVICE_UNAVAILABLE => "simulated overload: the server is unavailable",
            _ => "simulated internal server error",
        };
        return Err(ApiError::new(req.dialect, status, message));
    }
    // Once per request, on the prompt as the model sees it (after any truncation).
    let accept_prob =
        (args.spec > 1 && args.spec_model == SpecModel::Ngram).then(|| accept_prob(&prompt));
    let job = Job {
        route: req.route,
        accept_prob,
        prompt,
        max_tokens: req.max_tokens,
        min_tokens: req.min_tokens,
        ignore_eos: req.ignore_eos,
        rng,
        fault,
        arrived: req.arrived,
    };
    Ok(Admitted {
        slot,
        job,
        request_id,
    })
}

fn http_status(fault: Fault) -> Option<StatusCode> {
    match fault {
        Fault::Http500 => Some(StatusCode::INTERNAL_SERVER_ERROR),
        Fault::Http503 => Some(StatusCode::SERVICE_UNAVAILABLE),
        Fault::Http400 => Some(StatusCode::BAD_REQUEST),
        _ => None,
    }
}
