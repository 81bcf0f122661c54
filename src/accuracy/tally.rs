//! Graded samples counted up: accuracy per task (and `all`) with its Wilson interval, and
//! per fact depth for the length × depth heatmap.

use super::wilson::wilson95;
use crate::record::{Accuracy, AccuracyCell, DepthAccuracy, Sample, TaskResult};
use std::collections::BTreeMap;

/// The name of the row holding every task together.
pub const ALL: &str = "all";

/// Accuracy of these scores.
pub fn cell(scores: &[f64]) -> AccuracyCell {
    let correct: f64 = scores.iter().sum();
    let total = scores.len() as u64;
    AccuracyCell {
        correct,
        total,
        rate: if total == 0 {
            0.0
        } else {
            correct / total as f64
        },
        ci95: wilson95(correct, total),
    }
}

/// Accuracy per task over `tasks` (each graded sample once, empty answers included), plus
/// `all` when any task was graded.
pub fn by_task<'a>(tasks: impl IntoIterator<Item = &'a TaskResult>) -> Accuracy {
    let mut scores: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    let mut all = Vec::new();
    for t in tasks {
        scores.entry(t.name.clone()).or_default().push(t.score);
        all.push(t.score);
    }
    let mut out: Accuracy = scores.iter().map(|(k, v)| (k.clone(), cell(v))).collect();
    if !all.is_empty() {
        out.insert(ALL.to_string(), cell(&all));
    }
    out
}

/// Accuracy per task of the samples that carried one.
pub fn of_samples<'a>(samples: impl IntoIterator<Item = &'a Sample>) -> Accuracy {
    by_task(samples.into_iter().filter_map(|s| s.task.as_ref()))
}

/// Accuracy by the depth of each sample's (first) fact, shallowest first.
pub fn by_depth<'a>(samples: impl IntoIterator<Item = &'a Sample>) -> Vec<DepthAccuracy> {
    let mut at: BTreeMap<u64, Vec<f64>> = BTreeMap::new();
    for t in samples.into_iter().filter_map(|s| s.task.as_ref()) {
        if let Some(d) = t.depth {
            at.entry((d * 1000.0).round() as u64)
                .or_default()
                .push(t.score);
        }
    }
    at.into_iter()
        .map(|(d, v)| DepthAccuracy {
            depth: d as f64 / 1000.0,
            accuracy: cell(&v),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(name: &str, score: f64) -> TaskResult {
        TaskResult {
            name: name.into(),
            expected: vec!["x".into()],
            answer: String::new(),
            score,
            depth: Some(0.5),
        }
    }

    #[test]
    fn counts_every_graded_sample_and_sums_partial_scores() {
        let ts = [t("niah", 1.0), t("niah", 0.0), t("vt", 0.6)];
        let a = by_task(&ts);
        assert_eq!(a["niah"].total, 2);
        assert_eq!(a["niah"].rate, 0.5);
        assert_eq!(a["vt"].correct, 0.6);
        assert_eq!(a[ALL].total, 3);
        let [lo, hi] = a[ALL].ci95;
        assert!(lo < a[ALL].rate && a[ALL].rate < hi);
        assert!(by_task(&[]).is_empty());
    }
}
