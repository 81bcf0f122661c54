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
    Event(Bytes),
    Reset,
}

/// The sending end of one response body.
pub struct EventStream {
    tx: mpsc::UnboundedSender<Message>,
}

impl EventStream {
    /// A stream and the streaming response that carries it.
    pub fn open() -> (EventStream, Response) {
        let (tx, rx) = mpsc::unbounded_channel::<Message>();
        let frames = futures::stream::unfold(rx, |mut rx| async move {
            let frame = match rx.recv().await? {
                Message::Event(bytes) => Ok(bytes),
                Message::Reset => {
                    tokio::time::sleep(RESET_AFTER).await;
                    Err(reset_error())
                }
            };
            Some((frame, rx))
        });
        let response = (
            [
                (header::CONTENT_TYPE, "text/event-stream"),
                (header::CACHE_CONTROL, "no-cache"),
            ],
            Body::from_stream(frames),
        )
            .into_response();
        (EventStream { tx }, response)
    }

    /// False once the client has gone.
    fn send(&self, frame: Bytes) -> bool {
        self.tx.send(Message::Event(frame)).is_ok()
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

    /// End the body with an error: hyper drops the connection without the last chunk.
    fn reset(&self) {
        let _ = self.tx.send(Message::Reset);
    }
}

/// How one API spells its stream events.
pub trait StreamFormat: Send {
    fn event(&mut self, progress: &Progress<'_>) -> Value;
    /// Events after the finish event and before `[DONE]` (a usage chunk …).
    fn trailer(&mut self) -> Vec<Value>;
}

struct StreamListener<F> {
    out: EventStream,
    format: F,
    fault: Option<Fault>,
    events: u64,
    finished: bool,
    stalled: bool,
}

impl<F: StreamFormat> Listener for StreamListener<F> {
    fn on_event(&mut self, progress: &Progress<'_>) -> Flow {
        let is_final = progress.finish.is_some();
        // Mid-stream faults strike at the second event, or at the first if it is the last.
        let strikes_here = self.events == 1 || (self.events == 0 && is_final);
        self.events += 1;
        match self.fault {
            Some(Fault::NoFinal) if is_final => return Flow::Cut,
            Some(Fault::Reset) if strikes_here => {
                self.out.reset();
                return Flow::Cut;
            }
            Some(Fault::Stall) if strikes_here => {
                self.stalled = true;
                return Flow::Cut;
            }
            Some(Fault::ErrorEvent) if strikes_here => {
                self.out
                    .data(&json!({"error": {"message": "simulated failure", "code": 500}}));
                return Flow::Cut;
            }
            Some(Fault::Malformed) if strikes_here => {
                let sent = self.out.send(Bytes::from_static(b"data: {not json\n\n"));
                if !sent {
                    return Flow::Cut;
                }
            }
            _ => {}
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
    let fault = job.fault;
    let mut listener = StreamListener {
        out,
        format,
        fault,
        events: 0,
        finished: false,
        stalled: false,
    };
    let truth = engine::run(&state, job, &mut listener).await;
    state.truth.push(truth);
    if listener.finished {
        for event in listener.format.trailer() {
            listener.out.data(&event);
        }
        listener.out.done();
    } else if listener.stalled {
        stall(&state, &listener.out).await;
    }
    drop(slot);
}

/// Keep-alive comments only, until the client leaves (or the limit).
async fn stall(state: &SimState, out: &EventStream) {
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
