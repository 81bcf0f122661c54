//! The effective context: the longest length at which a task and every shorter length
//! score at least the threshold; and whether truncation, not the model, is what stops it.

use super::tally::ALL;
use super::threshold::Threshold;
use crate::record::{EffectiveContextRecord, PointSummary, flag};

/// One length's rate for one task, and whether the server cut its prompts.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Step {
    pub tokens: u64,
    pub rate: f64,
    pub truncated: bool,
}

/// (effective tokens, threshold rate, baseline rate, limited_by) over steps by length.
pub fn effective(steps: &[Step], threshold: Threshold) -> Option<(u64, f64, f64, &'static str)> {
    let mut steps = steps.to_vec();
    steps.sort_by_key(|s| s.tokens);
    let baseline = steps.first()?.rate;
    let need = threshold.rate(baseline);
    // A little slack for float sums (0.85 × 1.0 is not always 0.85 exactly); a length that
    // answered nothing right never passes, even when a relative threshold of a zero
    // baseline is zero.
    let passes = |s: &Step| s.rate > 0.0 && s.rate + 1e-9 >= need;
    let first_fail = steps.iter().position(|s| !passes(s));
    Some(match first_fail {
        None => (steps.last()?.tokens, need, baseline, "none"),
        Some(i) => {
            let tokens = if i == 0 { 0 } else { steps[i - 1].tokens };
            let why = if steps[i].truncated {
                "truncation"
            } else {
                "accuracy"
            };
            (tokens, need, baseline, why)
        }
    })
}

/// The effective-context records of a sweep's points: one per task, then `all`.
pub fn records(
    points: &[PointSummary],
    threshold: Threshold,
    haystack: Option<&str>,
) -> Vec<EffectiveContextRecord> {
    let mut tasks: Vec<&String> = points
        .iter()
        .flat_map(|p| p.accuracy.keys())
        .filter(|k| k.as_str() != ALL)
        .collect();
    tasks.sort();
    tasks.dedup();
    let longest = points.iter().map(|p| p.context_tokens).max().unwrap_or(0);
    let mut names: Vec<&str> = tasks.iter().map(|s| s.as_str()).collect();
    if !names.is_empty() {
        names.push(ALL);
    }
    names
        .into_iter()
        .filter_map(|task| {
            let steps: Vec<Step> = points
                .iter()
                .filter_map(|p| {
                    Some(Step {
                        tokens: p.context_tokens,
                        rate: p.accuracy.get(task)?.rate,
                        truncated: p.flags.contains_key(flag::TRUNCATED.name()),
                    })
                })
                .collect();
            let (tokens, need, baseline, why) = effective(&steps, threshold)?;
            Some(EffectiveContextRecord {
                task: task.to_string(),
                tokens,
                threshold: need,
                baseline_rate: baseline,
                threshold_kind: match threshold {
                    Threshold::Relative(_) => "relative",
                    Threshold::Absolute(_) => "absolute",
                }
                .into(),
                longest_tokens: longest,
                limited_by: why.into(),
                haystack: haystack.map(str::to_string),
            })
        })
        .collect()
}

/// The line a reader sees for one record.
pub fn describe(r: &EffectiveContextRecord) -> String {
    let at = match r.tokens {
        0 => "below the shortest length".to_string(),
        n => format!("{n} tokens"),
    };
    let why = match r.limited_by.as_str() {
        "truncation" => {
            " — limited by TRUNCATION: the server cut the prompts at the next length (their \
             early facts were lost), so this is the server's window, not the model's \
             effective context"
        }
        "none" => " (every length measured passed: the effective context may be longer)",
        _ => "",
    };
    format!(
        "effective context {}: {at} (threshold {:.2}, {} at the shortest length {:.2}){why}",
        r.task,
        r.threshold,
        if r.threshold_kind == "absolute" {
            "absolute; rate"
        } else {
            "relative; rate"
        },
        r.baseline_rate
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(tokens: u64, rate: f64) -> Step {
        Step {
            tokens,
            rate,
            truncated: false,
        }
    }

    #[test]
    fn longest_length_with_every_shorter_one_passing() {
        let steps = [s(1024, 1.0), s(2048, 0.9), s(4096, 0.5), s(8192, 0.9)];
        let (n, need, base, why) = effective(&steps, Threshold::default()).unwrap();
        assert_eq!((n, base, why), (2048, 1.0, "accuracy"));
        assert!((need - 0.85).abs() < 1e-12);
        // A later recovery does not count: every shorter length must pass.
        let (n, ..) = effective(&steps, Threshold::Absolute(0.95)).unwrap();
        assert_eq!(n, 1024);
        let (n, _, _, why) = effective(&[s(512, 0.4)], Threshold::Absolute(0.8)).unwrap();
        assert_eq!((n, why), (0, "accuracy"));
        let (n, _, _, why) = effective(&[s(512, 1.0), s(1024, 0.9)], Threshold::default()).unwrap();
        assert_eq!((n, why), (1024, "none"));
        assert!(effective(&[], Threshold::default()).is_none());
        // Nothing right anywhere: no effective context, not "every length passed".
        let (n, _, _, why) = effective(&[s(512, 0.0), s(1024, 0.0)], Threshold::default()).unwrap();
        assert_eq!((n, why), (0, "accuracy"));
    }

    #[test]
    fn a_failing_length_the_server_cut_is_named_truncation() {
        let mut cut = s(4096, 0.3);
        cut.truncated = true;
        let (n, _, _, why) =
            effective(&[s(1024, 1.0), s(2048, 1.0), cut], Threshold::default()).unwrap();
        assert_eq!((n, why), (2048, "truncation"));
    }
}
