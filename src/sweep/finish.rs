//! Finishing a sweep: the summary (with the transport notes) written last, the notes
//! printed, and how to continue an interrupted one.

use super::post::Handled;
use super::{SweepResult, transport};
use crate::record::{Record, RunRecord};
use crate::run::writer::ResultWriter;
use crate::sweep::args::SweepArgs;

pub fn finish(
    args: &SweepArgs,
    run: RunRecord,
    transport_delayed: bool,
    writer: &mut ResultWriter,
    handled: Handled,
) -> anyhow::Result<SweepResult> {
    let Handled {
        samples,
        errors,
        interrupted,
    } = handled;
    let mut summary = crate::summary::summarize_with_fit(&samples, &errors);
    if transport_delayed {
        summary
            .notes
            .push(format!("transport delay found: {}", transport::CURE));
    } else if args.fresh_connection
        && run
            .target
            .checks
            .transport
            .as_ref()
            .is_some_and(|t| t.delayed)
    {
        summary.notes.push(
            "transport delay found on reused connections (the server does not set \
             TCP_NODELAY): measured with a fresh connection per request, so no sample holds it"
                .into(),
        );
    }
    let effective = crate::report::accuracy::effective_records(&run, &summary);
    if let Some(e) = effective.iter().find(|e| e.limited_by == "truncation") {
        summary.notes.push(format!(
            "accuracy fell where the server truncated the prompts (from the length after {} \
             tokens): the early facts were cut away, which is truncation by the server, not \
             the model's effective context",
            e.tokens
        ));
    }
    writer.append(&Record::Summary(summary.clone()))?;
    for e in effective {
        writer.append(&Record::EffectiveContext(e))?;
    }
    writer.sync()?;
    for note in &summary.notes {
        eprintln!("note: {note}");
    }
    if interrupted {
        match writer.path() {
            Some(p) => eprintln!(
                "interrupted: {} measurements are in {}; continue with the same command plus --resume",
                samples.len() + errors.len(),
                p.display()
            ),
            None => eprintln!("interrupted: pass --out FILE next time to be able to --resume"),
        }
    }
    Ok(SweepResult {
        run,
        samples,
        errors,
        summary,
        interrupted,
    })
}
