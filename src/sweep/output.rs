//! Opening the result file: a new one headed by the run record, or (`--resume`) the
//! existing one continued, with the samples and errors it already holds.

use crate::record::{ErrorRecord, Record, RunRecord, Sample};
use crate::run::Collector;
use crate::run::writer::ResultWriter;
use crate::sweep::args::SweepArgs;

/// The collector writing the file, and what an earlier run of the sweep already measured.
pub struct Opened {
    pub collector: Collector,
    pub samples: Vec<Sample>,
    pub errors: Vec<ErrorRecord>,
}

pub fn open(args: &SweepArgs, run: &RunRecord) -> anyhow::Result<Opened> {
    let (writer, samples, errors) = match &args.out {
        Some(path) if args.resume && path.exists() => {
            let (w, old) = ResultWriter::resume(path, run)?;
            eprintln!(
                "resuming {}: {} samples and {} errors already there{}",
                path.display(),
                old.samples.len(),
                old.errors.len(),
                if old.torn_tail {
                    " (a torn last line was dropped)"
                } else {
                    ""
                }
            );
            (w, old.samples, old.errors)
        }
        Some(path) => {
            let mut w = ResultWriter::create(path)?;
            w.append(&Record::Run(run.clone()))?;
            w.sync()?;
            (w, Vec::new(), Vec::new())
        }
        None => (ResultWriter::none(), Vec::new(), Vec::new()),
    };
    Ok(Opened {
        collector: Collector::new(writer),
        samples,
        errors,
    })
}
