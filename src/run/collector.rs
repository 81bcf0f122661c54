//! The one place records go: appended and flushed to the result file as each request ends
//! (crash-safe), synced per cell, kept for the cell's summary, and live histograms of TTFT
//! and E2E for progress lines.

use super::hist::LatencyHist;
use crate::record::Record;
use crate::run::writer::ResultWriter;
use tokio::sync::mpsc;

pub struct Collector {
    pub writer: ResultWriter,
}

/// What one cell's collector gathered.
#[derive(Default)]
pub struct Gathered {
    pub records: Vec<Record>,
    pub ttft: LatencyHist,
    pub e2e: LatencyHist,
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
        self.collect(rx, |c, r| {
            c.writer.append(&r)?;
            if let Record::Request(q) = &r {
                if let Some(t) = q.ttft_s {
                    out.ttft.record(t);
                }
                if let Some(t) = q.e2e_s {
                    out.e2e.record(t);
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
