//! One load request: its prompt (a fresh nonce head before the length's shared tail), the
//! call, and its record.

use crate::backend::shared::SharedTail;
use crate::backend::{Backend, Completion, GenRequest, Prompt, RequestError};
use crate::record::SourceRecord;
use crate::record::load::{CellKey, RequestFailure, RequestRecord};
use crate::run::Slot;
use std::time::Duration;

/// A length's prompt after the nonce, serialised once, and where its content came from.
#[derive(Clone)]
pub struct Tail {
    pub tail: SharedTail,
    pub source: Option<SourceRecord>,
    /// `--tasks`: the item this tail hides, graded on each request's answer.
    pub graded: Option<crate::workload::Needle>,
}

/// Everything a cell's requests share.
pub struct Shot {
    pub backend: std::sync::Arc<dyn Backend>,
    /// Requests take these in turn (one for filler; several distinct spans of real content).
    pub tails: std::sync::Arc<[Tail]>,
    pub output_tokens: u64,
    pub deadline: Duration,
    pub cell: CellKey,
}

impl Shot {
    /// Send one request with `head` (this request's nonce) and make its record.
    pub async fn fire(&self, slot: Slot, head: Prompt) -> RequestRecord {
        let tail = &self.tails[(slot.index % self.tails.len() as u64) as usize];
        let req = GenRequest {
            prompt: Prompt::Shared(tail.tail.with_head(&head)),
            max_tokens: self.output_tokens,
            ignore_eos: true,
            cache_prompt: false,
            deadline: self.deadline,
        };
        let result = self.backend.generate(&req).await;
        let ended = slot.start.elapsed().as_secs_f64();
        // A failed request has no answer: it is counted among the cell's failures, not
        // graded (an empty answer is graded, and scores 0).
        let task = match (&result, &tail.graded) {
            (Ok(c), Some(n)) => crate::accuracy::grade(n, &c.text),
            _ => None,
        };
        let mut r = record(self.cell, slot, ended, result);
        r.source = tail.source.clone();
        r.task = task;
        r
    }
}

/// The record of a finished request (pure, for tests).
pub fn record(
    cell: CellKey,
    slot: Slot,
    ended_s: f64,
    result: Result<Completion, RequestError>,
) -> RequestRecord {
    let sent = slot.sent.as_secs_f64();
    let scheduled = slot.scheduled.as_secs_f64();
    let late = (sent - scheduled).max(0.0);
    let mut r = RequestRecord {
        cell,
        index: slot.index,
        scheduled_s: scheduled,
        sent_s: sent,
        ended_s: Some(ended_s),
        ..Default::default()
    };
    match result {
        Err(e) => {
            r.ok = false;
            r.error = Some(RequestFailure {
                kind: e.kind().to_string(),
                message: e.to_string(),
            });
        }
        Ok(c) => {
            let first = c.events.first().map(|e| e.at.as_secs_f64());
            let e2e = c.e2e.as_secs_f64();
            let out = c.completion_tokens;
            r.ok = first.is_some();
            if !r.ok {
                r.error = Some(RequestFailure {
                    kind: "no_tokens".into(),
                    message: "the stream carried no content".into(),
                });
            }
            r.ttft_s = first;
            r.ttft_from_schedule_s = first.map(|t| t + late);
            r.e2e_s = Some(e2e);
            r.e2e_from_schedule_s = Some(e2e + late);
            r.tpot_s = match (first, out) {
                (Some(t), Some(n)) if n >= 2 => Some((e2e - t) / (n - 1) as f64),
                _ => None,
            };
            r.itl_s = c
                .events
                .windows(2)
                .filter(|w| w[1].tokens > 0)
                .map(|w| round_us((w[1].at - w[0].at).as_secs_f64() / w[1].tokens as f64))
                .collect();
            r.prompt_tokens = c.prompt_tokens;
            r.cached_tokens = c.cached_tokens;
            r.output_tokens = out;
            r.spec = crate::backend::spec::stats(&c);
            r.server_timings = c.server_timings;
            r.conn_reused = c.new_connection.map(|new| !new);
        }
    }
    r
}

/// ITLs are kept to the microsecond: the file stays small and HDR histograms resolve no finer.
fn round_us(s: f64) -> f64 {
    (s * 1e6).round() / 1e6
}
