//! The one place records go: appended and flushed to the result file as each request ends
//! (crash-safe), synced per cell, kept for the cell's summary, and live histograms of TTFT
//! and E2E for progress lines: one every [`PROGRESS_EVERY`] while a long cell runs.

use super::hist::LatencyHist;
use crate::record::Record;
use crate::run::writer::ResultWriter;
use std::time::{Duration, Instant};
use tokio::sync::mpsc;

/// How often a running cell reports on stderr (a replayed hour would otherwise be silent).
pub const PROGRESS_EVERY: Duration = Duration::from_secs(15);

pub struct Collector {
    pub writer: ResultWriter,
}

/// What one cell's collector gathered.
#[derive(Default)]
pub struct Gathered {
    pub records: Vec<Record>,
    pub ttft: LatencyHist,
    pub e2e: LatencyHist,
    /// Request records among them.
    pub requests: u64,
}

impl Collector {
    pub fn new(writer: ResultWriter) -> Self {
        Collector { writer }
    }

    /// Take records until every sender is gone; write each as it comes.
    pub async fn gather(
        &mut self,
        rx: mpsc::UnboundedReceiver<Record>,
    ) -> anyhow::Result<Gathered> {
        let mut out = Gathered::default();
        let (start, mut told) = (Instant::now(), Instant::now());
        self.collect(rx, |c, r| {
            c.writer.append(&r)?;
            if let Record::Request(q) = &r {
                if let Some(t) = q.ttft_s {
                    out.ttft.record(t);
                }
                if let Some(t) = q.e2e_s {
                    out.e2e.record(t);
                }
                out.requests += 1;
                if told.elapsed() >= PROGRESS_EVERY {
                    told = Instant::now();
                    eprintln!("{}", progress(&out, start.elapsed()));
                }
            }
            out.records.push(r);
            Ok(())
        })
        .await?;
        Ok(out)
    }

    /// Take what the runner sends until every sender is gone, handing each, in arrival
    /// order, to `each`, which makes and writes its records (the sweep's flags and
    /// inferences need the samples before it). An error stops the collection.
    pub async fn collect<T>(
        &mut self,
        mut rx: mpsc::UnboundedReceiver<T>,
        mut each: impl FnMut(&mut Self, T) -> anyhow::Result<()>,
    ) -> anyhow::Result<()> {
        while let Some(x) = rx.recv().await {
            each(self, x)?;
        }
        Ok(())
    }

    pub fn append(&mut self, r: &Record) -> anyhow::Result<()> {
        self.writer.append(r)
    }

    /// fsync: once per cell.
    pub fn sync(&mut self) -> anyhow::Result<()> {
        self.writer.sync()
    }
}

/// "  … 1200 requests done in 45 s, TTFT p50 180 ms, p99 2100 ms"
fn progress(g: &Gathered, running: Duration) -> String {
    let ttft = g.ttft.percentiles().map_or(String::new(), |p| {
        format!(
            ", TTFT p50 {:.0} ms, p99 {:.0} ms",
            p.p50 * 1e3,
            p.p99 * 1e3
        )
    });
    format!(
        "  … {} requests done in {:.0} s{ttft}",
        g.requests,
        running.as_secs_f64()
    )
}
