//! Condensing depth turns into per-depth figures beside the cold ones at the same total
//! length: pure, so the sweep, `report` and `compare` agree.

use crate::lengths::format_count;
use crate::record::{DepthPoint, ErrorRecord, Sample, Stat};
use crate::stats::quantile;
use std::collections::{BTreeMap, BTreeSet};

/// `method` of a measured turn.
pub const TURN: &str = "turn";
/// `method` of the request that primed a depth's prefix (recorded, never a result).
pub const PRIMING: &str = "priming";

/// A record of the depth phase (a turn or a priming request), kept out of the cold points.
pub fn is_depth_sample(s: &Sample) -> bool {
    s.depth_tokens.is_some()
}

pub fn is_depth_error(e: &ErrorRecord) -> bool {
    matches!(e.method.as_deref(), Some(TURN | PRIMING))
}

/// The valid cold samples at `total` tokens (stream, else two-point).
fn cold(samples: &[Sample], total: u64) -> Vec<&Sample> {
    let at: Vec<&Sample> = samples
        .iter()
        .filter(|s| !is_depth_sample(s) && s.valid && s.context_tokens == total)
        .collect();
    let stream: Vec<&Sample> = at
        .iter()
        .copied()
        .filter(|s| s.method == "stream")
        .collect();
    if stream.is_empty() { at } else { stream }
}

/// Median TTFT of the valid cold samples at `total` tokens.
pub fn cold_ttft_median(samples: &[Sample], total: u64) -> Option<f64> {
    let xs: Vec<f64> = cold(samples, total)
        .iter()
        .filter_map(|s| s.ttft_s)
        .collect();
    quantile(&xs, 0.5)
}

fn stat(samples: &[&Sample], f: impl Fn(&Sample) -> Option<f64>) -> Option<Stat> {
    Stat::of(&samples.iter().filter_map(|s| f(s)).collect::<Vec<_>>())
}

/// Per depth: the turns' figures, the cold ones at depth + turn tokens, and their ratio.
/// Also notes a reader must see (reuse judged from timing only, prefix misses).
pub fn summarize(samples: &[Sample], errors: &[ErrorRecord]) -> (Vec<DepthPoint>, Vec<String>) {
    let keys: BTreeSet<(u64, u64)> = samples
        .iter()
        .filter_map(|s| Some((s.depth_tokens?, s.turn_tokens?)))
        .collect();
    let mut points = Vec::new();
    let mut notes = Vec::new();
    let mut timing_only = Vec::new();
    for (d, t) in keys {
        let turns: Vec<&Sample> = samples
            .iter()
            .filter(|s| s.method == TURN && s.depth_tokens == Some(d) && s.turn_tokens == Some(t))
            .collect();
        let valid: Vec<&Sample> = turns.iter().copied().filter(|s| s.valid).collect();
        let failed = errors
            .iter()
            .filter(|e| e.method.as_deref() == Some(TURN) && e.context_tokens == d + t)
            .count();
        let mut flags = BTreeMap::new();
        for f in turns.iter().flat_map(|s| &s.flags) {
            *flags.entry(f.name().to_string()).or_insert(0) += 1;
        }
        let cached: Vec<f64> = turns
            .iter()
            .filter_map(|s| s.cached_tokens)
            .map(|c| c as f64)
            .collect();
        let cold = cold(samples, d + t);
        let ttft_s = stat(&valid, |s| s.ttft_s);
        let cold_ttft_s = stat(&cold, |s| s.ttft_s);
        if d > 0 && !turns.is_empty() && cached.is_empty() {
            timing_only.push(format!(
                "{}: turn {} vs cold {}",
                format_count(d),
                ms(ttft_s),
                ms(cold_ttft_s)
            ));
        }
        points.push(DepthPoint {
            depth_tokens: d,
            turn_tokens: t,
            attempts: turns.len() + failed,
            n_valid: valid.len(),
            n_failed: failed,
            flags,
            cached_tokens: quantile(&cached, 0.5).map(|c| c.round() as u64),
            ttft_s,
            prefill_tps: stat(&valid, |s| s.prefill_tps),
            decode_tps: stat(&valid, |s| s.decode_tps),
            cold_ttft_s,
            cold_prefill_tps: stat(&cold, |s| s.prefill_tps),
            cold_decode_tps: stat(&cold, |s| s.decode_tps),
            ttft_speedup: match (cold_ttft_s, ttft_s) {
                (Some(c), Some(w)) if w.median > 0.0 => Some(c.median / w.median),
                _ => None,
            },
        });
    }
    if !timing_only.is_empty() {
        notes.push(format!(
            "the server reports no cached tokens: prefix reuse at depth is inferred from timing \
             only (median TTFT {}); a turn nearer the cold figure than the reused prediction is \
             flagged prefix_miss_inferred",
            timing_only.join("; ")
        ));
    }
    let misses: usize = points
        .iter()
        .map(|p| {
            p.flags
                .get(crate::record::flag::PREFIX_MISS.name())
                .copied()
                .unwrap_or(0)
        })
        .sum();
    if misses > 0 {
        notes.push(format!(
            "{misses} depth turns found their prefix evicted or not reused (prefix_miss): \
             they are excluded; a smaller depth or fewer concurrent users of the cache may help"
        ));
    }
    (points, notes)
}

fn ms(s: Option<Stat>) -> String {
    s.map(|s| format!("{:.1} ms", s.median * 1e3))
        .unwrap_or_else(|| "-".into())
}

/// The progress line printed when a depth is done.
pub fn depth_line(samples: &[Sample], depth: u64, turn: u64) -> String {
    let (points, _) = summarize(samples, &[]);
    let Some(p) = points
        .iter()
        .find(|p| p.depth_tokens == depth && p.turn_tokens == turn)
    else {
        return format!("depth {}: nothing measured", format_count(depth));
    };
    format!(
        "depth {:>6} + {turn}: turn TTFT {} (cold {}, x{}), marginal prefill {} tok/s, decode {} tok/s, {}/{} valid",
        format_count(depth),
        ms(p.ttft_s),
        ms(p.cold_ttft_s),
        p.ttft_speedup
            .map(|r| format!("{r:.1}"))
            .unwrap_or_else(|| "-".into()),
        p.prefill_tps
            .map(|s| format!("{:.0}", s.median))
            .unwrap_or_else(|| "-".into()),
        p.decode_tps
            .map(|s| format!("{:.0}", s.median))
            .unwrap_or_else(|| "-".into()),
        p.n_valid,
        p.attempts
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::record::flag;

    fn sample(method: &str, n: u64, depth: Option<u64>, ttft: f64, valid: bool) -> Sample {
        Sample {
            context_tokens: n,
            method: method.into(),
            ttft_s: Some(ttft),
            decode_tps: Some(100.0),
            prefill_tps: Some(512.0 / ttft),
            cached_tokens: depth,
            depth_tokens: depth,
            turn_tokens: depth.map(|_| 512),
            valid,
            flags: if valid {
                vec![]
            } else {
                vec![flag::PREFIX_MISS]
            },
            ..Sample::default()
        }
    }

    #[test]
    fn turns_sit_beside_the_cold_point_and_misses_are_not_averaged() {
        let s = vec![
            sample("stream", 8704, None, 1.0, true),
            sample("stream", 8704, None, 1.2, true),
            sample("priming", 8192, Some(8192), 0.9, false),
            sample("turn", 8704, Some(8192), 0.1, true),
            sample("turn", 8704, Some(8192), 0.12, true),
            sample("turn", 8704, Some(8192), 1.1, false),
        ];
        let e = vec![ErrorRecord {
            context_tokens: 8704,
            rep: 3,
            kind: "timeout".into(),
            message: "m".into(),
            method: Some(TURN.into()),
        }];
        let (points, notes) = summarize(&s, &e);
        assert_eq!(points.len(), 1);
        let p = &points[0];
        assert_eq!((p.depth_tokens, p.turn_tokens), (8192, 512));
        assert_eq!((p.attempts, p.n_valid, p.n_failed), (4, 2, 1));
        assert!((p.ttft_s.unwrap().median - 0.11).abs() < 1e-12);
        assert!((p.cold_ttft_s.unwrap().median - 1.1).abs() < 1e-12);
        assert!((p.ttft_speedup.unwrap() - 10.0).abs() < 1e-9);
        assert_eq!(p.flags[flag::PREFIX_MISS.name()], 1);
        assert!(notes.iter().any(|n| n.contains("prefix_miss")), "{notes:?}");
    }

    #[test]
    fn missing_counts_say_reuse_is_inferred_from_timing() {
        let mut t = sample("turn", 8704, Some(8192), 0.1, true);
        t.cached_tokens = None;
        let (_, notes) = summarize(&[t], &[]);
        assert!(notes.iter().any(|n| n.contains("timing only")), "{notes:?}");
    }
}
