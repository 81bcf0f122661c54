//! Streamed bodies for the personas whose streams are not SGLang/OpenAI's SSE with `[DONE]`:
//! Ollama's NDJSON and TGI's SSE that simply ends. One frame per event, written the moment
//! it is produced, with the mid-stream faults the other personas have.

use super::engine::{self, Flow, Job, Listener, Progress};
use super::sse::{BodySender, FaultBody, MidStream, stall};
use super::state::{SimState, Slot};
use super::truth::RequestTruth;
use axum::response::Response;
use bytes::Bytes;
use serde_json::{Value, json};
use std::sync::Arc;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// `data: {json}\n\n`, no terminator (TGI, llama.cpp).
    Sse,
    /// `{json}\n` (Ollama).
    Ndjson,
}

/// The sending end of one streamed body.
pub struct FrameStream {
    body: BodySender,
    framing: Framing,
}

impl FrameStream {
    pub fn open(framing: Framing) -> (FrameStream, Response) {
        let content_type = match framing {
            Framing::Sse => "text/event-stream",
            Framing::Ndjson => "application/x-ndjson",
        };
        let (body, response) = BodySender::open(content_type);
        (FrameStream { body, framing }, response)
    }

    /// False once the client has gone.
    fn raw(&self, text: String) -> bool {
        self.body.send(Bytes::from(text))
    }

    pub fn json(&self, v: &Value) -> bool {
        self.raw(match self.framing {
            Framing::Sse => format!("data: {v}\n\n"),
            Framing::Ndjson => format!("{v}\n"),
        })
    }

    fn malformed(&self) -> bool {
        self.raw(match self.framing {
            Framing::Sse => "data: {not json\n\n".to_string(),
            Framing::Ndjson => "{not json\n".to_string(),
        })
    }

    /// Only SSE has comments; an NDJSON stall is plain silence.
    fn keep_alive(&self) -> bool {
        match self.framing {
            Framing::Sse => self.raw(": keep-alive\n\n".to_string()),
            Framing::Ndjson => !self.body.is_closed(),
        }
    }

    fn reset(&self) {
        self.body.reset();
    }
}

/// How one persona spells its stream.
pub trait Frames: Send {
    /// The frames for one engine event (TGI splits a multi-token event into one per token).
    fn event(&mut self, p: &Progress<'_>) -> Vec<Value>;
    /// Frames after the finish event, from what the request cost (Ollama's final object).
    fn after(&mut self, truth: &RequestTruth) -> Vec<Value>;
    /// An in-stream error frame in the persona's dialect.
    fn error(&self, message: &str) -> Value;
}

struct FrameListener<F> {
    out: FrameStream,
    format: F,
    mid: MidStream,
    finished: bool,
    last: Vec<Value>,
}

impl FaultBody for FrameStream {
    fn reset(&self) {
        FrameStream::reset(self);
    }
    fn json(&self, event: &Value) -> bool {
        FrameStream::json(self, event)
    }
    fn malformed(&self) -> bool {
        FrameStream::malformed(self)
    }
    fn keep_alive(&self) -> bool {
        FrameStream::keep_alive(self)
    }
}

impl<F: Frames> Listener for FrameListener<F> {
    fn on_event(&mut self, progress: &Progress<'_>) -> Flow {
        let is_final = progress.finish.is_some();
        let error = || self.format.error("simulated failure");
        if let Some(flow) = self.mid.strike(is_final, &self.out, error) {
            return flow;
        }
        let frames = self.format.event(progress);
        if is_final {
            // Held until the truth is logged, so a client that has the end can read it.
            self.last = frames;
            self.finished = true;
            return if self.out.body.is_closed() {
                Flow::Cut
            } else {
                Flow::Delivered
            };
        }
        for frame in frames {
            if !self.out.json(&frame) {
                return Flow::Cut;
            }
        }
        Flow::Delivered
    }
}

/// Compute `job` and stream it on `out`; `hold` (a model lease, a concurrency permit) and
/// the slot are kept until the stream is over.
pub async fn stream_job<F: Frames, H: Send>(
    state: Arc<SimState>,
    slot: Slot,
    hold: H,
    job: Job,
    out: FrameStream,
    format: F,
) {
    let mut listener = FrameListener {
        out,
        format,
        mid: MidStream::new(job.fault),
        finished: false,
        last: Vec::new(),
    };
    let truth = engine::run(&state, job, &mut listener).await;
    let after = if listener.finished {
        listener.format.after(&truth)
    } else {
        Vec::new()
    };
    state.truth.push(truth);
    if listener.finished {
        for frame in listener.last.iter().chain(&after) {
            listener.out.json(frame);
        }
    } else if listener.mid.stalled {
        stall(&state, &listener.out).await;
    }
    drop(hold);
    drop(slot);
}

/// What a request ended with, for a non-streamed answer: the final text, the frames of its
/// last event and those after it.
pub struct Ended {
    pub text: String,
    pub last: Vec<Value>,
    pub after: Vec<Value>,
}

/// Run `job` to the end without streaming; `None` when the server shut down first.
pub async fn run_collected<F: Frames>(
    state: &SimState,
    slot: Slot,
    job: Job,
    mut format: F,
) -> Option<Ended> {
    struct Whole<'a, F> {
        format: &'a mut F,
        text: String,
        last: Option<Vec<Value>>,
    }
    impl<F: Frames> Listener for Whole<'_, F> {
        fn on_event(&mut self, p: &Progress<'_>) -> Flow {
            // The formatter keeps its own counters (token index …) in step.
            let frames = self.format.event(p);
            if p.finish.is_some() {
                self.text = p.text.to_string();
                self.last = Some(frames);
            }
            Flow::Delivered
        }
    }
    let mut whole = Whole {
        format: &mut format,
        text: String::new(),
        last: None,
    };
    let truth = engine::run(state, job, &mut whole).await;
    let (text, last) = (whole.text, whole.last);
    let after = format.after(&truth);
    state.truth.push(truth);
    drop(slot);
    last.map(|last| Ended { text, last, after })
}

/// `{"error": message}`, Ollama's error body (TGI adds `error_type`).
pub fn error_body(message: &str) -> Value {
    json!({ "error": message })
}
