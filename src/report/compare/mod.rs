//! Comparing two runs point by point: per common length, each metric's medians, the ratio
//! B/A and a bootstrap interval from the repetitions, with changes inside the noise marked.

pub mod accuracy;
pub mod bootstrap;
pub mod depth;
pub mod html;
pub mod render;
pub mod row;
pub mod spec;

use crate::choices::Method;
use crate::lengths::format_count;
use crate::record::{RunRecord, SCHEMA, Sample, Stat, Summary};
use crate::report::plot::figures::Metric;
use crate::resultfile::ResultFile;
use thiserror::Error;

/// The metrics compared, in display order.
pub const METRICS: [Metric; 3] = [Metric::Ttft, Metric::PrefillTps, Metric::DecodeTps];

/// Why two files cannot be compared.
#[derive(Debug, Error, PartialEq)]
pub enum CompareError {
    #[error(
        "{file}: no run record: not a ctxbench result file (or its first line was lost); pass a file written by `ctxbench sweep --out`"
    )]
    NoRun { file: String },
    #[error(
        "{file} has schema {schema}, but this ctxbench reads schema {SCHEMA}: compare it with the ctxbench version that wrote it"
    )]
    UnsupportedSchema { file: String, schema: u32 },
    #[error(
        "{a} has schema {schema_a} but {b} has schema {schema_b}: runs of different schemas cannot be compared; re-run one with the other's ctxbench version"
    )]
    SchemaMismatch {
        a: String,
        schema_a: u32,
        b: String,
        schema_b: u32,
    },
    #[error(
        "no common context lengths: {a} has {lengths_a}, {b} has {lengths_b}; sweep both with the same --lengths"
    )]
    NoCommonLengths {
        a: String,
        lengths_a: String,
        b: String,
        lengths_b: String,
    },
}

/// One run of the comparison.
#[derive(Debug, Clone)]
pub struct Side {
    /// How the run is named in output (its file name).
    pub label: String,
    pub run: RunRecord,
    pub summary: Summary,
}

/// The verdict on one metric at one length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// The interval contains 1: the change could be repetition noise.
    WithinNoise,
    Better,
    Worse,
    /// A side has fewer than two valid repetitions, so the noise is unknown.
    NoSpread,
    /// A side has no valid value.
    Missing,
}

impl Verdict {
    pub fn name(self) -> &'static str {
        match self {
            Verdict::WithinNoise => "within_noise",
            Verdict::Better => "better",
            Verdict::Worse => "worse",
            Verdict::NoSpread => "no_spread",
            Verdict::Missing => "missing",
        }
    }

    /// Short text for tables: `~` marks a change inside the noise.
    pub fn mark(self) -> &'static str {
        match self {
            Verdict::WithinNoise => "~ within noise",
            Verdict::Better => "better",
            Verdict::Worse => "worse",
            Verdict::NoSpread => "? one rep",
            Verdict::Missing => "-",
        }
    }
}

/// One metric at one length.
#[derive(Debug, Clone, PartialEq)]
pub struct MetricChange {
    pub metric: Metric,
    pub a: Option<Stat>,
    pub b: Option<Stat>,
    /// median(B) / median(A).
    pub ratio: Option<f64>,
    /// 95 % bootstrap interval of the ratio.
    pub interval: Option<(f64, f64)>,
    pub verdict: Verdict,
}

/// Every metric at one length present in both runs.
#[derive(Debug, Clone, PartialEq)]
pub struct PointChange {
    pub context_tokens: u64,
    pub changes: Vec<MetricChange>,
}

#[derive(Debug, Clone)]
pub struct Comparison {
    pub a: Side,
    pub b: Side,
    pub points: Vec<PointChange>,
    pub only_in_a: Vec<u64>,
    pub only_in_b: Vec<u64>,
    /// `sweep --depth` turns per depth in both runs (`context_tokens` holds the depth).
    pub depth: Vec<PointChange>,
    /// Differences a reader must know (other output length, method, model, …).
    pub notes: Vec<String>,
    /// Speculative decoding: acceptance per common length where both runs have it, and
    /// whether a decode change follows it.
    pub spec: Vec<spec::SpecChange>,
}

/// Whether a larger value of `metric` is an improvement.
pub fn higher_is_better(metric: Metric) -> bool {
    !matches!(metric, Metric::Ttft | Metric::ItlP50 | Metric::ItlP99)
}

/// One sample's value of `metric`.
pub(crate) fn metric_of(metric: Metric, s: &Sample) -> Option<f64> {
    match metric {
        Metric::Ttft => s.ttft_s,
        Metric::PrefillTps => s.prefill_tps,
        Metric::DecodeTps => s.decode_tps,
        Metric::ItlP50 => s.itl_p50_s,
        Metric::ItlP99 => s.itl_p99_s,
    }
}

/// The values a point's median of `metric` is taken over: valid samples, streamed ones
/// first (two-point ones where nothing was streamed), as in `summarize`.
pub fn metric_values(metric: Metric, samples: &[Sample], context_tokens: u64) -> Vec<f64> {
    let at: Vec<&Sample> = samples
        .iter()
        .filter(|s| s.valid && s.context_tokens == context_tokens)
        .collect();
    let of = |method: &str| -> Vec<f64> {
        at.iter()
            .filter(|s| s.method == method)
            .filter_map(|s| metric_of(metric, s))
            .collect()
    };
    let (stream, two_point) = (Method::Stream.name(), Method::TwoPoint.name());
    let has_stream = at.iter().any(|s| s.method == stream);
    if has_stream || matches!(metric, Metric::ItlP50 | Metric::ItlP99) {
        of(stream)
    } else {
        of(two_point)
    }
}

fn lengths(samples: &[Sample]) -> Vec<u64> {
    // Depth turns and primings are compared per depth, not as cold points.
    let mut v: Vec<u64> = samples
        .iter()
        .filter(|s| !crate::summary::depth::is_depth_sample(s))
        .map(|s| s.context_tokens)
        .collect();
    v.sort_unstable();
    v.dedup();
    v
}

fn list(lengths: &[u64]) -> String {
    if lengths.is_empty() {
        "no samples".into()
    } else {
        lengths
            .iter()
            .map(|n| format_count(*n))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// A seed per (length, metric), so every interval is reproducible on its own.
fn seed(context_tokens: u64, metric: usize) -> u64 {
    0x00c7_b3e4_c4a2_0001 ^ context_tokens.wrapping_mul(0x9e37_79b9_7f4a_7c15) ^ metric as u64
}

fn change(
    metric: Metric,
    a: Option<Stat>,
    b: Option<Stat>,
    xa: &[f64],
    xb: &[f64],
    seed: u64,
) -> MetricChange {
    let ratio = match (a, b) {
        (Some(a), Some(b)) if a.median > 0.0 => Some(b.median / a.median),
        _ => None,
    };
    let interval = ratio.and(bootstrap::median_ratio_interval(xa, xb, seed));
    let verdict = match (ratio, interval) {
        (None, _) => Verdict::Missing,
        (Some(_), None) => Verdict::NoSpread,
        (Some(_), Some((lo, hi))) if lo <= 1.0 && hi >= 1.0 => Verdict::WithinNoise,
        (Some(r), Some(_)) if (r > 1.0) == higher_is_better(metric) => Verdict::Better,
        _ => Verdict::Worse,
    };
    MetricChange {
        metric,
        a,
        b,
        ratio,
        interval,
        verdict,
    }
}

fn check(label: &str, file: &ResultFile) -> Result<RunRecord, CompareError> {
    let run = file
        .run
        .clone()
        .ok_or_else(|| CompareError::NoRun { file: label.into() })?;
    Ok(run)
}

/// A configuration both runs should share: what it is, how to read it, why it matters.
type SharedConfig = (&'static str, fn(&RunRecord) -> String, &'static str);

const SHARED_CONFIG: [SharedConfig; 4] = [
    (
        "output tokens",
        |r| r.config.output_tokens.to_string(),
        ": decode rates are not like for like",
    ),
    ("methods", |r| r.config.method.clone(), ""),
    (
        "models",
        |r| r.target.model.clone().unwrap_or_else(|| "?".into()),
        "",
    ),
    (
        "cache-bust settings",
        |r| r.config.cache_bust.clone(),
        ": a run without cache busting may measure the cache",
    ),
];

fn config_notes(a: &Side, b: &Side) -> Vec<String> {
    SHARED_CONFIG
        .iter()
        .filter_map(|(what, read, why)| {
            let (x, y) = (read(&a.run), read(&b.run));
            (x != y).then(|| format!("{what} differ (A {x}, B {y}){why}"))
        })
        .collect()
}

/// Compare two result files; `labels` name them in output and errors.
pub fn compare(
    a: &ResultFile,
    b: &ResultFile,
    labels: (&str, &str),
) -> Result<Comparison, CompareError> {
    let (run_a, run_b) = (check(labels.0, a)?, check(labels.1, b)?);
    if run_a.schema != run_b.schema {
        return Err(CompareError::SchemaMismatch {
            a: labels.0.into(),
            schema_a: run_a.schema,
            b: labels.1.into(),
            schema_b: run_b.schema,
        });
    }
    for (label, run) in [(labels.0, &run_a), (labels.1, &run_b)] {
        if run.schema != SCHEMA {
            return Err(CompareError::UnsupportedSchema {
                file: label.into(),
                schema: run.schema,
            });
        }
    }
    let (la, lb) = (lengths(&a.samples), lengths(&b.samples));
    let common: Vec<u64> = la.iter().copied().filter(|n| lb.contains(n)).collect();
    if common.is_empty() {
        return Err(CompareError::NoCommonLengths {
            a: labels.0.into(),
            lengths_a: list(&la),
            b: labels.1.into(),
            lengths_b: list(&lb),
        });
    }
    let side = |label: &str, run: RunRecord, f: &ResultFile| Side {
        label: label.into(),
        run,
        summary: crate::summary::summarize(&f.samples, &f.errors),
    };
    let (sa, sb) = (side(labels.0, run_a, a), side(labels.1, run_b, b));
    let stat = |s: &Side, n: u64, m: Metric| {
        s.summary
            .points
            .iter()
            .find(|p| p.context_tokens == n)
            .and_then(|p| m.stat(p))
    };
    let points: Vec<PointChange> = common
        .iter()
        .map(|&n| PointChange {
            context_tokens: n,
            changes: METRICS
                .iter()
                .enumerate()
                .map(|(i, &m)| {
                    change(
                        m,
                        stat(&sa, n, m),
                        stat(&sb, n, m),
                        &metric_values(m, &a.samples, n),
                        &metric_values(m, &b.samples, n),
                        seed(n, i),
                    )
                })
                .collect(),
        })
        .collect();
    let spec: Vec<spec::SpecChange> = points
        .iter()
        .filter_map(|p: &PointChange| {
            let decode = p.changes.iter().find(|c| c.metric == Metric::DecodeTps);
            spec::change(
                p.context_tokens,
                (&sa.summary, &a.samples),
                (&sb.summary, &b.samples),
                decode,
                seed(p.context_tokens, METRICS.len()),
            )
        })
        .collect();
    let only_in_a: Vec<u64> = la.iter().copied().filter(|n| !lb.contains(n)).collect();
    let only_in_b: Vec<u64> = lb.iter().copied().filter(|n| !la.contains(n)).collect();
    let mut notes = config_notes(&sa, &sb);
    if !only_in_a.is_empty() {
        notes.push(format!("only in A (not compared): {}", list(&only_in_a)));
    }
    if !only_in_b.is_empty() {
        notes.push(format!("only in B (not compared): {}", list(&only_in_b)));
    }
    Ok(Comparison {
        a: sa,
        b: sb,
        points,
        only_in_a,
        only_in_b,
        depth: depth::changes(a, b),
        notes,
        spec,
    })
}
