//! The accuracy sections of the HTML report: accuracy against length per task with its
//! 95 % interval (bars, and the band's edges dashed), the length × depth needle heatmap,
//! and the effective-context lines.

use crate::accuracy::tally::ALL;
use crate::lengths::format_count;
use crate::record::{RunRecord, Summary};
use crate::report::escape::escape;
use crate::report::plot::{Chart, Curve, Point, ScaleKind, Series, Unit};

/// Nothing when no point was graded.
pub fn section(run: &RunRecord, summary: &Summary) -> String {
    if !crate::report::accuracy::any(summary) {
        return String::new();
    }
    let mut out = format!(
        "<section id=\"accuracy\">\n<h2>Accuracy at length</h2>\n<p class=\"sub\">RULER scoring \
         (share of expected strings in the answer, case-insensitive); bars and dashed edges \
         span the 95 % Wilson interval. Haystack: {}.</p>\n",
        escape(run.config.content.as_deref().unwrap_or("filler"))
    );
    out.push_str(&curves(summary).to_svg());
    out.push_str(&heatmap(summary));
    out.push_str("<ul class=\"effective\">\n");
    for e in crate::report::accuracy::effective_records(run, summary) {
        out.push_str(&format!(
            "<li data-task=\"{}\" data-tokens=\"{}\" data-limited-by=\"{}\">{}</li>\n",
            escape(&e.task),
            e.tokens,
            escape(&e.limited_by),
            escape(&crate::accuracy::effective::describe(&e))
        ));
    }
    out.push_str("</ul>\n</section>\n");
    out
}

/// Accuracy against length, one series per task (and `all`).
pub fn curves(summary: &Summary) -> Chart {
    let mut chart = Chart::versus_context(
        "accuracy",
        "Accuracy vs context length",
        "accuracy",
        ScaleKind::Linear,
        Unit::Percent,
    );
    let mut tasks: Vec<&String> = summary
        .points
        .iter()
        .flat_map(|p| p.accuracy.keys())
        .collect();
    tasks.sort_by_key(|t| (t.as_str() == ALL, t.to_string()));
    tasks.dedup();
    for (i, task) in tasks.into_iter().enumerate() {
        let cells: Vec<(f64, &crate::record::AccuracyCell)> = summary
            .points
            .iter()
            .filter_map(|p| Some((p.context_tokens as f64, p.accuracy.get(task)?)))
            .collect();
        chart.series.push(Series {
            key: task.clone(),
            label: task.clone(),
            color: i,
            points: cells
                .iter()
                .map(|(x, a)| Point {
                    x: *x,
                    y: a.rate,
                    spread: Some((a.ci95[0], a.ci95[1])),
                    tip: format!(
                        "{task} at {}: {:.2} ({} of {}; 95 % {:.2}–{:.2})",
                        format_count(*x as u64),
                        a.rate,
                        a.correct,
                        a.total,
                        a.ci95[0],
                        a.ci95[1]
                    ),
                })
                .collect(),
        });
        for (edge, k) in [("lo", 0), ("hi", 1)] {
            chart.curves.push(Curve {
                key: format!("{task}-ci95-{edge}"),
                label: format!("{task} 95 % {edge}"),
                color: i,
                points: cells.iter().map(|(x, a)| (*x, a.ci95[k])).collect(),
            });
        }
    }
    chart
}

/// Length × depth: accuracy of the samples whose (first) fact sat at each depth.
pub fn heatmap(summary: &Summary) -> String {
    let depths = crate::report::accuracy::depths(summary);
    if depths.is_empty() {
        return String::new();
    }
    let mut out = String::from(
        "<h3>Accuracy by length and depth (all tasks)</h3>\n<table class=\"needle heatmap\">\n<thead><tr><th class=\"text\">context</th>",
    );
    for d in &depths {
        out.push_str(&format!("<th>depth {d}</th>"));
    }
    out.push_str("</tr></thead>\n<tbody>\n");
    for p in summary
        .points
        .iter()
        .filter(|p| !p.accuracy_by_depth.is_empty())
    {
        out.push_str(&format!(
            "<tr><td class=\"text\">{}</td>",
            format_count(p.context_tokens)
        ));
        for d in &depths {
            match p.accuracy_by_depth.iter().find(|a| a.depth == *d) {
                Some(a) => {
                    let r = a.accuracy.rate;
                    let class = if r >= 0.85 {
                        "pass"
                    } else if r > 0.0 {
                        "partial"
                    } else {
                        "fail"
                    };
                    // Shade by rate: red (0) to green (1).
                    let hue = (r * 120.0).round();
                    out.push_str(&format!(
                        "<td class=\"needle-cell {class}\" style=\"background: hsl({hue}, 60%, 80%)\" data-context=\"{}\" data-depth=\"{d}\" data-rate=\"{r:.4}\" data-total=\"{}\">{r:.2}</td>",
                        p.context_tokens, a.accuracy.total
                    ));
                }
                None => out.push_str("<td class=\"needle-cell none\">-</td>"),
            }
        }
        out.push_str("</tr>\n");
    }
    out.push_str("</tbody>\n</table>\n");
    out
}
