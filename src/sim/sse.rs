//! Server-sent events out of the simulator: one body frame per event, written the moment it
//! is produced, with the mid-stream faults (reset, stall, malformed, error event, no final).

use super::engine::{self, Flow, Job, Listener, Progress};
use super::fault::Fault;
use super::state::{SimState, Slot};
use axum::body::Body;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;

const KEEP_ALIVE_EVERY: Duration = Duration::from_millis(200);
const STALL_LIMIT: Duration = Duration::from_secs(120);
/// Pause before breaking the body, so hyper flushes the events already written.
const RESET_AFTER: Duration = Duration::from_millis(20);

type Frame = Result<Bytes, std::io::Error>;

enum Message {
    Frame(Bytes),
    Reset,
}

/// The sending end of a streamed body, shared by every persona's framing.
pub(super) struct BodySender {
    tx: mpsc::UnboundedSender<Message>,
}

impl BodySender {
    /// A sender and the streaming response that carries what it sends.
    pub(super) fn open(content_type: &'static str) -> (BodySender, Response) {
        let (tx, rx) = mpsc::unbounded_channel::<Message>();
        let frames = futures::stream::unfold(rx, |mut rx| async move {
            let frame = match rx.recv().await? {
                Message::Frame(bytes) => Ok(bytes),
                Message::Reset => {
                    tokio::time::sleep(RESET_AFTER).await;
                    Err(reset_error())
                }
            };
            Some((frame, rx))
        });
        let response = (
            [
                (header::CONTENT_TYPE, content_type),
                (header::CACHE_CONTROL, "no-cache"),
            ],
            Body::from_stream(frames),
        )
            .into_response();
        (BodySender { tx }, response)
    }

    /// False once the client has gone.
    pub(super) fn send(&self, frame: Bytes) -> bool {
        self.tx.send(Message::Frame(frame)).is_ok()
    }

    pub(super) fn is_closed(&self) -> bool {
        self.tx.is_closed()
    }

    /// End the body with an error: hyper drops the connection without the last chunk.
    pub(super) fn reset(&self) {
        let _ = self.tx.send(Message::Reset);
    }
}

/// The sending end of one response body.
pub struct EventStream {
    body: BodySender,
}

impl EventStream {
    /// A stream and the streaming response that carries it.
    pub fn open() -> (EventStream, Response) {
        let (body, response) = BodySender::open("text/event-stream");
        (EventStream { body }, response)
    }

    /// False once the client has gone.
    fn send(&self, frame: Bytes) -> bool {
        self.body.send(frame)
    }

    pub fn data(&self, event: &Value) -> bool {
        self.send(Bytes::from(format!("data: {event}\n\n")))
    }

    fn done(&self) -> bool {
        self.send(Bytes::from_static(b"data: [DONE]\n\n"))
    }

    fn keep_alive(&self) -> bool {
        self.send(Bytes::from_static(b": keep-alive\n\n"))
    }

    fn reset(&self) {
        self.body.reset();
    }
}

/// How one API spells its stream events.
pub trait StreamFormat: Send {
    fn event(&mut self, progress: &Progress<'_>) -> Value;
    /// Events after the finish event and before `[DONE]` (a usage chunk …).
    fn trailer(&mut self) -> Vec<Value>;
}

/// A streamed body as the mid-stream faults need it, in its own framing.
pub(super) trait FaultBody {
    /// Break the connection after what was written.
    fn reset(&self);
    /// Write one event; false once the client has gone.
    fn json(&self, event: &Value) -> bool;
    /// Write an event that is not JSON; false once the client has gone.
    fn malformed(&self) -> bool;
    /// Keep a stalled connection open; false once the client has gone.
    fn keep_alive(&self) -> bool;
}

impl FaultBody for EventStream {
    fn reset(&self) {
        EventStream::reset(self);
    }
    fn json(&self, event: &Value) -> bool {
        self.data(event)
    }
    fn malformed(&self) -> bool {
        self.send(Bytes::from_static(b"data: {not json\n\n"))
    }
    fn keep_alive(&self) -> bool {
        EventStream::keep_alive(self)
    }
}

/// Where one stream stands with its fault: every streaming persona's listener holds one.
pub(super) struct MidStream {
    fault: Option<Fault>,
    events: u64,
    /// The stream stopped at a `stall` fault: keep the connection open, silent.
    pub stalled: bool,
}

impl MidStream {
    pub fn new(fault: Option<Fault>) -> MidStream {
        MidStream {
            fault,
            events: 0,
            stalled: false,
        }
    }

    /// Called before each event is written: `Some(Flow::Cut)` when the fault ends the
    /// stream here (after doing to `out` what it does), `None` to write the event.
    pub fn strike(
        &mut self,
        is_final: bool,
        out: &impl FaultBody,
        error: impl FnOnce() -> Value,
    ) -> Option<Flow> {
        // Mid-stream faults strike at the second event, or at the first if it is the last.
        let strikes_here = self.events == 1 || (self.events == 0 && is_final);
        self.events += 1;
        match self.fault {
            Some(Fault::NoFinal) if is_final => Some(Flow::Cut),
            Some(Fault::Reset) if strikes_here => {
                out.reset();
                Some(Flow::Cut)
            }
            Some(Fault::Stall) if strikes_here => {
                self.stalled = true;
                Some(Flow::Cut)
            }
            Some(Fault::ErrorEvent) if strikes_here => {
                out.json(&error());
                Some(Flow::Cut)
            }
            Some(Fault::Malformed) if strikes_here && !out.malformed() => Some(Flow::Cut),
            _ => None,
        }
    }
}

struct StreamListener<F> {
    out: EventStream,
    format: F,
    mid: MidStream,
    finished: bool,
}

impl<F: StreamFormat> Listener for StreamListener<F> {
    fn on_event(&mut self, progress: &Progress<'_>) -> Flow {
        let is_final = progress.finish.is_some();
        let error = || json!({"error": {"message": "simulated failure", "code": 500}});
        if let Some(flow) = self.mid.strike(is_final, &self.out, error) {
            return flow;
        }
        if !self.out.data(&self.format.event(progress)) {
            return Flow::Cut;
        }
        self.finished = is_final;
        Flow::Delivered
    }
}

/// Compute `job` and stream it on `out`; the slot is held until the stream is over.
pub async fn stream_job<F: StreamFormat>(
    state: Arc<SimState>,
    slot: Slot,
    job: Job,
    out: EventStream,
    format: F,
) {
    let mut listener = StreamListener {
        out,
        format,
        mid: MidStream::new(job.fault),
        finished: false,
    };
    let truth = engine::run(&state, job, &mut listener).await;
    state.truth.push(truth);
    if listener.finished {
        for event in listener.format.trailer() {
            listener.out.data(&event);
        }
        listener.out.done();
    } else if listener.mid.stalled {
        stall(&state, &listener.out).await;
    }
    drop(slot);
}

/// Keep-alive only, until the client leaves (or the limit).
pub(super) async fn stall(state: &SimState, out: &impl FaultBody) {
    let until = tokio::time::Instant::now() + STALL_LIMIT;
    while tokio::time::Instant::now() < until && out.keep_alive() {
        if !state.sleep(KEEP_ALIVE_EVERY).await {
            return;
        }
    }
}

/// A 200 response whose body breaks off (for `reset` on a non-streamed request).
pub fn broken_body_response() -> Response {
    let frames = futures::stream::iter([Frame::Err(reset_error())]);
    (
        [(header::CONTENT_TYPE, "application/json")],
        Body::from_stream(frames),
    )
        .into_response()
}

fn reset_error() -> std::io::Error {
    std::io::Error::other("simulated connection reset")
}
