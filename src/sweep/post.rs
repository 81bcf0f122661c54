//! Handling each measured job, in order, as the collector receives it: the flags that need
//! the sweep's history (restart, transport delay, inferred cache hit), the timeout policy's
//! observation, the record written, the point's line and HTML, then the next job released —
//! so the next deadline always sees this sample.

use super::jobs::{Job, Measured, Planned};
use super::session::{self, Outcome};
use super::timeout::TimeoutPolicy;
use crate::lengths::format_count;
use crate::record::{ErrorRecord, Record, RunRecord, Sample, flag};
use crate::run::Collector;
use crate::sweep::args::SweepArgs;
use crate::workload::needle_for;
use indicatif::ProgressBar;
use std::sync::atomic::{AtomicBool, Ordering};
use tokio::sync::mpsc;

/// What the handler reads and never changes.
pub struct Ctx<'a> {
    pub args: &'a SweepArgs,
    /// `--needle-depths`, parsed.
    pub depths: &'a [f64],
    /// `--tasks`, parsed; and how graded prompts are put to the model.
    pub accuracy: Option<&'a crate::accuracy::args::AccuracyPlan>,
    pub style: crate::accuracy::generate::Style,
    pub run: &'a RunRecord,
    pub transport_delayed: bool,
    pub bar: &'a ProgressBar,
    pub stop: &'a AtomicBool,
}

pub struct Post<'a> {
    ctx: Ctx<'a>,
    timeout: &'a mut TimeoutPolicy,
    jobs: Vec<Planned>,
    /// Jobs released so far (the next to release is `jobs[released]`).
    released: usize,
    /// Where released jobs go; `None` once the last was released or the sweep stopped.
    release: Option<mpsc::UnboundedSender<Job>>,
    /// A restart seen after a failed request: the next sample meets a cold server.
    restart_pending: bool,
    samples: Vec<Sample>,
    errors: Vec<ErrorRecord>,
    interrupted: bool,
}

/// What the measured jobs left: every sample and error (the resumed ones first), and
/// whether Ctrl-C stopped them.
pub struct Handled {
    pub samples: Vec<Sample>,
    pub errors: Vec<ErrorRecord>,
    pub interrupted: bool,
}

impl<'a> Post<'a> {
    /// Start with `samples` and `errors` from a resumed file, and release the first job.
    pub fn start(
        ctx: Ctx<'a>,
        timeout: &'a mut TimeoutPolicy,
        jobs: Vec<Planned>,
        resumed: (Vec<Sample>, Vec<ErrorRecord>),
        release: mpsc::UnboundedSender<Job>,
    ) -> Self {
        let mut post = Post {
            ctx,
            timeout,
            jobs,
            released: 0,
            release: Some(release),
            restart_pending: false,
            samples: resumed.0,
            errors: resumed.1,
            interrupted: false,
        };
        post.release_next();
        post
    }

    pub fn finish(self) -> Handled {
        Handled {
            samples: self.samples,
            errors: self.errors,
            interrupted: self.interrupted,
        }
    }

    /// Release the next job, made now from everything handled; or end the runner's jobs:
    /// after the last, or when Ctrl-C asked to stop.
    fn release_next(&mut self) {
        let Some(&planned) = self.jobs.get(self.released) else {
            self.release = None;
            return;
        };
        if self.ctx.stop.load(Ordering::SeqCst) {
            self.interrupted = true;
            self.release = None;
            return;
        }
        let Planned { n, rep, method } = planned;
        let args = self.ctx.args;
        self.ctx.bar.set_message(format!(
            "{} tokens, rep {}, {}",
            format_count(n),
            rep + 1,
            method.sample_name()
        ));
        let needle = match self.ctx.accuracy {
            // Checked for every length before the run: an error here is a bug, said aloud.
            Some(a) => match a.item(args.seed, n, rep, self.ctx.depths, self.ctx.style) {
                Ok(item) => Some(item.needle),
                Err(e) => {
                    self.ctx.bar.suspend(|| eprintln!("warning: {e}"));
                    None
                }
            },
            None => args.needle.then(|| {
                let depth = self.ctx.depths[rep as usize % self.ctx.depths.len()];
                needle_for(args.seed, n, rep, depth)
            }),
        };
        let job = Job {
            planned,
            needle,
            deadline: self.timeout.deadline(n, args.output_tokens),
        };
        self.released += 1;
        if let Some(tx) = &self.release {
            // The runner is gone only when the collection already failed.
            let _ = tx.send(job);
        }
    }

    /// One measured job: flag, observe, write; at the end of a point, sync and report it.
    pub fn handle(&mut self, m: Measured, c: &mut Collector) -> anyhow::Result<()> {
        let Planned { n, rep, .. } = m.planned;
        let bar = self.ctx.bar;
        match m.outcome {
            Outcome::Sample(mut s) => {
                let after_failed = std::mem::take(&mut self.restart_pending);
                if m.restarted || after_failed {
                    s.push_flag(flag::SERVER_RESTARTED);
                }
                if self.ctx.transport_delayed && s.new_connection == Some(false) {
                    s.push_flag(flag::TRANSPORT_DELAY);
                }
                // Per sample, not per server: a sample that came back without a cached-token
                // count is checked by timing even when the server says it reports counts.
                let smaller = median_ttft(&self.samples, |p| p < n, &s.method);
                let same = median_ttft(&self.samples, |p| p == n, &s.method);
                session::infer_cache_hit(&mut s, smaller, same);
                if s.valid
                    && let Some(t) = s.ttft_s
                {
                    self.timeout.observe(n, t, s.decode_tps);
                }
                c.append(&Record::Sample(s.clone()))?;
                self.samples.push(*s);
            }
            Outcome::Error(e) => {
                self.restart_pending |= m.restarted;
                bar.suspend(|| {
                    eprintln!(
                        "  {} rep {}: {} ({})",
                        format_count(n),
                        rep + 1,
                        e.message,
                        e.kind
                    )
                });
                c.append(&Record::Error(e.clone()))?;
                self.errors.push(e);
            }
        }
        bar.inc(1);
        let point_done = self.jobs.get(self.released).is_none_or(|next| next.n != n);
        if point_done {
            c.sync()?;
            self.point_done(n);
        }
        self.release_next();
        Ok(())
    }

    /// The point's line, and the HTML report rewritten with it.
    fn point_done(&self, n: u64) {
        let mut line = point_line(n, &self.samples, &self.errors);
        line.push_str(&self.time_left());
        let bar = self.ctx.bar;
        bar.suspend(|| eprintln!("{line}"));
        if let Some(path) = &self.ctx.args.html {
            let summary = crate::summary::summarize(&self.samples, &self.errors);
            let written = crate::report::write_html(
                path,
                self.ctx.run,
                &self.samples,
                &self.errors,
                &summary,
            );
            if let Err(e) = written {
                bar.suspend(|| eprintln!("warning: writing {}: {e:#}", path.display()));
            }
        }
    }
}

impl Post<'_> {
    /// `; about X s left` from the timeout model's prediction of every job still to run.
    fn time_left(&self) -> String {
        let rest = &self.jobs[self.released.min(self.jobs.len())..];
        if rest.is_empty() {
            return String::new();
        }
        let out = self.ctx.args.output_tokens;
        let each: Option<Vec<f64>> = rest
            .iter()
            .map(|j| {
                let t = self.timeout.predicted_s(j.n, out)?;
                // A two-point sample sends a 1-token request first.
                Some(match j.method {
                    crate::choices::Method::TwoPoint => t + self.timeout.predicted_s(j.n, 1)?,
                    _ => t,
                })
            })
            .collect();
        match each {
            Some(ts) => format!(
                "; {} requests left, at most about {:.0} s by the timeout model",
                rest.len(),
                ts.iter().sum::<f64>()
            ),
            None => String::new(),
        }
    }
}

fn median_ttft(samples: &[Sample], pick: impl Fn(u64) -> bool, method: &str) -> Option<f64> {
    let best = samples
        .iter()
        .filter(|s| s.valid && s.method == method && pick(s.context_tokens))
        .map(|s| s.context_tokens)
        .max()?;
    let xs: Vec<f64> = samples
        .iter()
        .filter(|s| s.valid && s.method == method && s.context_tokens == best)
        .filter_map(|s| s.ttft_s)
        .collect();
    crate::stats::median(&xs)
}

fn point_line(n: u64, samples: &[Sample], errors: &[ErrorRecord]) -> String {
    let summary = crate::summary::summarize(
        &samples
            .iter()
            .filter(|s| s.context_tokens == n)
            .cloned()
            .collect::<Vec<_>>(),
        &errors
            .iter()
            .filter(|e| e.context_tokens == n)
            .cloned()
            .collect::<Vec<_>>(),
    );
    let Some(p) = summary.points.first() else {
        return format!("{}: nothing measured", format_count(n));
    };
    let f = |s: Option<crate::record::Stat>, scale: f64, unit: &str| {
        s.map(|s| format!("{:.1}{unit}", s.median * scale))
            .unwrap_or_else(|| "-".into())
    };
    let accuracy = match p.accuracy.get(crate::accuracy::tally::ALL) {
        Some(a) => format!(", accuracy {}", crate::report::accuracy::cell_text(a)),
        None => String::new(),
    };
    format!(
        "{:>6}: TTFT {}, prefill {}, decode {}, {}/{} valid{accuracy}",
        format_count(n),
        f(p.ttft_s, 1e3, " ms"),
        f(p.prefill_tps, 1.0, " tok/s"),
        f(p.decode_tps, 1.0, " tok/s"),
        p.n_valid,
        p.attempts
    )
}
