//! The sweep's requests: the (length, rep, method) list still to measure, and sending one
//! job — the sample, then a look at whether the server restarted meanwhile.

use super::session::{Outcome, Session};
use crate::backend::instance::InstanceMarker;
use crate::choices::Method;
use crate::lengths::format_count;
use crate::record::Sample;
use crate::workload::Needle;
use indicatif::ProgressBar;
use std::collections::HashSet;
use std::time::Duration;

/// One sample to measure.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Planned {
    pub n: u64,
    pub rep: u32,
    pub method: Method,
}

/// Small to large, each length's reps in turn, each rep's methods in turn; without what
/// `done` (a resumed file) already holds.
pub fn list(lengths: &[u64], reps: u32, method: Method, done: &[Sample]) -> Vec<Planned> {
    let done: HashSet<(u64, u32, &str)> = done
        .iter()
        .map(|s| (s.context_tokens, s.rep, s.method.as_str()))
        .collect();
    let methods: Vec<Method> = match method {
        Method::Both => vec![Method::Stream, Method::TwoPoint],
        m => vec![m],
    };
    let mut jobs = Vec::new();
    for &n in lengths {
        for rep in 0..reps {
            for &method in &methods {
                if !done.contains(&(n, rep, method.sample_name())) {
                    jobs.push(Planned { n, rep, method });
                }
            }
        }
    }
    jobs
}

/// A job as released to the runner: its needle, and its deadline from every sample
/// handled before it.
pub struct Job {
    pub planned: Planned,
    pub needle: Option<Needle>,
    pub deadline: Duration,
}

/// What sending one job produced.
pub struct Measured {
    pub planned: Planned,
    pub outcome: Outcome,
    /// The server restarted while the job ran.
    pub restarted: bool,
}

/// Sends the sweep's jobs, one at a time.
pub struct Sender {
    pub session: Session,
    /// The server's latest instance marker, where it exposes one.
    marker: Option<InstanceMarker>,
    bar: ProgressBar,
}

impl Sender {
    /// `marker`: the server's instance marker read before the first sample.
    pub fn new(session: Session, marker: Option<InstanceMarker>, bar: ProgressBar) -> Self {
        Sender {
            session,
            marker,
            bar,
        }
    }

    pub async fn send(&mut self, job: Job) -> Measured {
        let Planned { n, rep, method } = job.planned;
        let outcome = self
            .session
            .measure(n, rep, method, job.needle.as_ref(), job.deadline)
            .await;
        let restarted = self.restarted(n, rep).await;
        Measured {
            planned: job.planned,
            outcome,
            restarted,
        }
    }

    /// A restart empties caches and may change the configuration: samples it overlaps
    /// are flagged, and the sweep carries on against the new instance.
    async fn restarted(&mut self, n: u64, rep: u32) -> bool {
        let Some(before) = &self.marker else {
            return false;
        };
        let now = self.session.backend.instance_marker().await;
        let changed = now.as_ref().is_some_and(|m| m.restarted_since(before));
        if changed {
            self.bar.suspend(|| {
                eprintln!(
                    "warning: the server restarted during {} rep {}",
                    format_count(n),
                    rep + 1
                )
            });
        }
        // A counter grows between readings: compare the next with the latest.
        if now.is_some() {
            self.marker = now;
        }
        changed
    }
}
