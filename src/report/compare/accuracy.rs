//! Comparing two runs' accuracy: per common length and task, A's and B's rate with their
//! 95 % Wilson intervals and the change; a change counts only when the intervals do not
//! overlap (a conservative test: overlapping intervals may still differ).

use super::Comparison;
use crate::choices::Format;
use crate::lengths::format_count;
use crate::record::AccuracyCell;
use serde_json::{Value, json};

/// One task at one length in both runs.
#[derive(Debug, Clone, PartialEq)]
pub struct AccuracyChange {
    pub context_tokens: u64,
    pub task: String,
    pub a: AccuracyCell,
    pub b: AccuracyCell,
}

impl AccuracyChange {
    pub fn delta(&self) -> f64 {
        self.b.rate - self.a.rate
    }

    /// `worse`, `better` or `within_noise`.
    pub fn verdict(&self) -> &'static str {
        if self.b.ci95[1] < self.a.ci95[0] {
            "worse"
        } else if self.b.ci95[0] > self.a.ci95[1] {
            "better"
        } else {
            "within_noise"
        }
    }
}

/// Every (length, task) graded in both runs, by length then task.
pub fn changes(c: &Comparison) -> Vec<AccuracyChange> {
    let mut out = Vec::new();
    for pa in &c.a.summary.points {
        let Some(pb) =
            c.b.summary
                .points
                .iter()
                .find(|p| p.context_tokens == pa.context_tokens)
        else {
            continue;
        };
        for (task, a) in &pa.accuracy {
            if let Some(b) = pb.accuracy.get(task) {
                out.push(AccuracyChange {
                    context_tokens: pa.context_tokens,
                    task: task.clone(),
                    a: a.clone(),
                    b: b.clone(),
                });
            }
        }
    }
    out
}

fn cell(a: &AccuracyCell) -> String {
    crate::report::accuracy::cell_text(a)
}

/// The accuracy rows after the timing table, or nothing when neither run was graded.
pub fn text(c: &Comparison, format: Format) -> String {
    let ch = changes(c);
    if ch.is_empty() {
        return String::new();
    }
    let rows: Vec<[String; 6]> = ch
        .iter()
        .map(|x| {
            [
                format_count(x.context_tokens),
                x.task.clone(),
                cell(&x.a),
                cell(&x.b),
                format!("{:+.2}", x.delta()),
                x.verdict().to_string(),
            ]
        })
        .collect();
    let header = [
        "context",
        "task",
        "A accuracy",
        "B accuracy",
        "B−A",
        "verdict",
    ];
    match format {
        Format::Csv => {
            let mut out = String::from(
                "\ncontext_tokens,task,a_rate,a_lo,a_hi,b_rate,b_lo,b_hi,delta,verdict\n",
            );
            for x in &ch {
                out.push_str(&format!(
                    "{},{},{},{},{},{},{},{},{},{}\n",
                    x.context_tokens,
                    x.task,
                    x.a.rate,
                    x.a.ci95[0],
                    x.a.ci95[1],
                    x.b.rate,
                    x.b.ci95[0],
                    x.b.ci95[1],
                    x.delta(),
                    x.verdict()
                ));
            }
            out
        }
        Format::Markdown => {
            let mut out = format!(
                "\n**Accuracy**, B vs A (95% Wilson intervals)\n\n| {} |\n|{}\n",
                header.join(" | "),
                "---|".repeat(header.len())
            );
            for r in rows {
                out.push_str(&format!("| {} |\n", r.join(" | ")));
            }
            out
        }
        _ => {
            let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
            for r in &rows {
                for (w, c) in widths.iter_mut().zip(r) {
                    *w = (*w).max(c.chars().count());
                }
            }
            let line = |cells: Vec<&str>| {
                let mut s = String::new();
                for (c, w) in cells.iter().zip(&widths) {
                    s.push_str(&format!("{c:<w$}  "));
                }
                s.trim_end().to_string() + "\n"
            };
            let mut out = String::from("\naccuracy, B vs A (95% Wilson intervals):\n");
            out.push_str(&line(header.to_vec()));
            for r in &rows {
                out.push_str(&line(r.iter().map(String::as_str).collect()));
            }
            out
        }
    }
}

pub fn json(c: &Comparison) -> Value {
    Value::Array(
        changes(c)
            .iter()
            .map(|x| {
                json!({
                    "context_tokens": x.context_tokens,
                    "task": x.task,
                    "a": x.a,
                    "b": x.b,
                    "delta": x.delta(),
                    "verdict": x.verdict(),
                })
            })
            .collect(),
    )
}
