//! Comparing the depth turns of two runs (`sweep --depth`): per depth in both, the turn's
//! TTFT, marginal prefill and decode rate, B against A, with the same noise test as points.
//! Its arrows into `sweep::depth` are defended: depths are re-summarised with the sweep's own
//! summariser, so a comparison reads them exactly as the sweep's report did.

use super::{METRICS, Metric, PointChange, change, seed};
use crate::choices::Format;
use crate::record::{DepthPoint, Sample, Stat};
use crate::resultfile::ResultFile;
use crate::sweep::depth::TURN;
use serde_json::{Value, json};

/// Marks depth rows apart from the cold points' seeds.
const DEPTH_SEED: u64 = 0xd3_9750;

fn turn_values(metric: Metric, samples: &[Sample], p: &DepthPoint) -> Vec<f64> {
    samples
        .iter()
        .filter(|s| {
            s.valid
                && s.method == TURN
                && s.depth_tokens == Some(p.depth_tokens)
                && s.turn_tokens == Some(p.turn_tokens)
        })
        .filter_map(|s| super::metric_of(metric, s))
        .collect()
}

fn stat(p: &DepthPoint, m: Metric) -> Option<Stat> {
    match m {
        Metric::Ttft => p.ttft_s,
        Metric::PrefillTps => p.prefill_tps,
        Metric::DecodeTps => p.decode_tps,
        Metric::ItlP50 | Metric::ItlP99 => None,
    }
}

/// One `PointChange` per depth (and turn size) in both files; `context_tokens` holds the depth.
pub fn changes(a: &ResultFile, b: &ResultFile) -> Vec<PointChange> {
    let (da, _) = crate::sweep::depth::summary::summarize(&a.samples, &a.errors);
    let (db, _) = crate::sweep::depth::summary::summarize(&b.samples, &b.errors);
    da.iter()
        .filter_map(|pa| {
            let pb = db
                .iter()
                .find(|p| p.depth_tokens == pa.depth_tokens && p.turn_tokens == pa.turn_tokens)?;
            Some(PointChange {
                context_tokens: pa.depth_tokens,
                changes: METRICS
                    .iter()
                    .enumerate()
                    .map(|(i, &m)| {
                        change(
                            m,
                            stat(pa, m),
                            stat(pb, m),
                            &turn_values(m, &a.samples, pa),
                            &turn_values(m, &b.samples, pb),
                            seed(pa.depth_tokens ^ DEPTH_SEED, i),
                        )
                    })
                    .collect(),
            })
        })
        .collect()
}

/// The depth rows after the points' table (text formats), or nothing.
pub fn text(depth: &[PointChange], format: Format) -> String {
    if depth.is_empty() {
        return String::new();
    }
    let rows: Vec<Vec<String>> = depth
        .iter()
        .flat_map(|p| {
            p.changes.iter().map(|ch| {
                let mut r = super::row::cells(p.context_tokens, ch).to_vec();
                r[0] = format!("depth {}", r[0]);
                r
            })
        })
        .collect();
    let mut out = String::new();
    match format {
        Format::Csv => {
            for r in rows {
                out.push_str(&r.join(","));
                out.push('\n');
            }
        }
        Format::Markdown => {
            out.push_str("\n**Depth turns** (a new turn on a cached prefix), B vs A\n\n");
            for r in rows {
                out.push_str(&format!("| {} |\n", r.join(" | ")));
            }
        }
        _ => {
            out.push_str("\ndepth turns (a new turn on a cached prefix), B vs A:\n");
            for r in rows {
                out.push_str(&r.join("  "));
                out.push('\n');
            }
        }
    }
    out
}

pub fn json(depth: &[PointChange]) -> Value {
    Value::Array(
        depth
            .iter()
            .map(|p| {
                json!({
                    "depth_tokens": p.context_tokens,
                    "metrics": p.changes.iter().map(|ch| json!({
                        "metric": super::row::key(ch.metric),
                        "a": ch.a, "b": ch.b, "ratio": ch.ratio,
                        "ci95": ch.interval.map(|(lo, hi)| [lo, hi]),
                        "verdict": ch.verdict.name(),
                    })).collect::<Vec<_>>(),
                })
            })
            .collect(),
    )
}
