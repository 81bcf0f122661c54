//! Markdown: the table as a GitHub-flavoured pipe table, for READMEs and reports.

use super::table;
use crate::record::{RunRecord, Summary};

pub fn render(run: &RunRecord, summary: &Summary) -> String {
    let mut out = format!(
        "**{}** ({}, model `{}`), {} output tokens, {} reps, method {}\n\n",
        run.target.url,
        run.target.api,
        run.target.model.as_deref().unwrap_or("?"),
        run.config.output_tokens,
        run.config.reps,
        run.config.method
    );
    let header = table::header(summary);
    out.push_str(&format!("| {} |\n", header.join(" | ")));
    out.push_str(&format!("|{}\n", "---|".repeat(header.len())));
    for r in table::rows(summary) {
        out.push_str(&format!("| {} |\n", r.join(" | ")));
    }
    out.push_str(&super::spec::markdown(summary));
    out.push_str(&super::accuracy::markdown(run, summary));
    out.push_str(&super::depth::markdown(summary));
    for n in &summary.notes {
        out.push_str(&format!("\n> note: {n}\n"));
    }
    out
}
