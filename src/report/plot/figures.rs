//! The report's charts, built from a summary and its fit: TTFT, prefill and decode rates and
//! ITL against context (log-x), fit residuals, and the two-run overlays of `compare`.

use super::format::{seconds, si};
use super::{Chart, Curve, Point, ScaleKind, Series, Unit};
use crate::fit::{DecodeStepFit, ScalingFit, TtftFit};
use crate::lengths::format_count;
use crate::record::{PointSummary, Stat};

/// Samples per fitted curve, spread evenly on the log-x axis.
const CURVE_SAMPLES: usize = 96;

/// Which per-point metric a series shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Metric {
    Ttft,
    PrefillTps,
    DecodeTps,
    ItlP50,
    ItlP99,
}

impl Metric {
    /// The `data-series` key.
    pub fn key(self) -> &'static str {
        match self {
            Metric::Ttft => "ttft",
            Metric::PrefillTps => "prefill_tps",
            Metric::DecodeTps => "decode_tps",
            Metric::ItlP50 => "itl_p50",
            Metric::ItlP99 => "itl_p99",
        }
    }

    pub fn label(self) -> &'static str {
        match self {
            Metric::Ttft => "TTFT",
            Metric::PrefillTps => "prefill tok/s",
            Metric::DecodeTps => "decode tok/s",
            Metric::ItlP50 => "ITL p50",
            Metric::ItlP99 => "ITL p99",
        }
    }

    pub fn unit(self) -> Unit {
        match self {
            Metric::Ttft | Metric::ItlP50 | Metric::ItlP99 => Unit::Seconds,
            Metric::PrefillTps | Metric::DecodeTps => Unit::TokensPerSecond,
        }
    }

    /// The point's statistic for this metric (decode falls back to the two-point rate).
    pub fn stat(self, p: &PointSummary) -> Option<Stat> {
        match self {
            Metric::Ttft => p.ttft_s,
            Metric::PrefillTps => p.prefill_tps,
            Metric::DecodeTps => p.decode_tps.or(p.two_point_decode_tps),
            Metric::ItlP50 => p.itl_p50_s,
            Metric::ItlP99 => p.itl_p99_s,
        }
    }

    fn value_label(self, v: f64) -> String {
        match self.unit() {
            Unit::Seconds => seconds(v),
            _ => format!("{} tok/s", si(v)),
        }
    }
}

/// One series of medians with p10–p90 error bars, tooltips naming length, median, spread, n.
pub fn metric_series(
    metric: Metric,
    points: &[PointSummary],
    key: &str,
    label: &str,
    color: usize,
) -> Series {
    let pts = points
        .iter()
        .filter_map(|p| {
            let s = metric.stat(p)?;
            Some(Point {
                x: p.context_tokens as f64,
                y: s.median,
                spread: (s.n > 1).then_some((s.p10, s.p90)),
                tip: format!(
                    "{label} at {}: {} (p10 {} – p90 {}, n={})",
                    format_count(p.context_tokens),
                    metric.value_label(s.median),
                    metric.value_label(s.p10),
                    metric.value_label(s.p90),
                    s.n
                ),
            })
        })
        .collect();
    Series {
        key: key.into(),
        label: label.into(),
        color,
        points: pts,
    }
}

/// Log-spaced lengths over the measured range, for drawing a fitted curve.
fn curve_lengths(points: &[PointSummary]) -> Vec<u64> {
    let lo = points
        .iter()
        .map(|p| p.context_tokens)
        .min()
        .unwrap_or(1)
        .max(1) as f64;
    let hi = points
        .iter()
        .map(|p| p.context_tokens)
        .max()
        .unwrap_or(1)
        .max(1) as f64;
    let (l0, l1) = ((lo / 2.0).log2(), (hi * 2.0).log2());
    let mut v: Vec<u64> = (0..CURVE_SAMPLES)
        .map(|i| {
            2f64.powf(l0 + (l1 - l0) * i as f64 / (CURVE_SAMPLES - 1) as f64)
                .round() as u64
        })
        .filter(|n| *n > 0)
        .collect();
    v.dedup();
    v
}

fn ttft_curve(f: &TtftFit, points: &[PointSummary]) -> Curve {
    Curve {
        key: "ttft-fit".into(),
        label: "fit a + b·n + c·n²".into(),
        color: 1,
        points: curve_lengths(points)
            .into_iter()
            .map(|n| (n as f64, f.predict_s(n)))
            .collect(),
    }
}

fn prefill_curve(f: &TtftFit, points: &[PointSummary]) -> Curve {
    Curve {
        key: "prefill_tps-fit".into(),
        label: "fit n / TTFT(n)".into(),
        color: 1,
        points: curve_lengths(points)
            .into_iter()
            .filter_map(|n| {
                let t = f.predict_s(n);
                (t > 0.0).then(|| (n as f64, n as f64 / t))
            })
            .collect(),
    }
}

fn decode_curve(f: &DecodeStepFit, points: &[PointSummary]) -> Curve {
    Curve {
        key: "decode_tps-fit".into(),
        label: "fit 1 / (d + e·n)".into(),
        color: 1,
        points: curve_lengths(points)
            .into_iter()
            .filter_map(|n| Some((n as f64, f.tps(n)?)))
            .collect(),
    }
}

/// TTFT against context, log-log, with the fitted quadratic.
pub fn ttft_chart(points: &[PointSummary], fit: &ScalingFit) -> Chart {
    let mut c = Chart::versus_context(
        "ttft",
        "TTFT vs context",
        "TTFT",
        ScaleKind::Log10,
        Unit::Seconds,
    );
    c.series.push(metric_series(
        Metric::Ttft,
        points,
        "ttft",
        "TTFT median",
        0,
    ));
    c.curves
        .extend(fit.ttft.as_ref().map(|f| ttft_curve(f, points)));
    c
}

/// Prefill tok/s against context, with the rate the TTFT fit implies.
pub fn prefill_chart(points: &[PointSummary], fit: &ScalingFit) -> Chart {
    let mut c = Chart::versus_context(
        "prefill_tps",
        "Prefill tok/s vs context",
        "prefill tok/s",
        ScaleKind::Linear,
        Unit::TokensPerSecond,
    );
    c.series.push(metric_series(
        Metric::PrefillTps,
        points,
        "prefill_tps",
        "prefill tok/s median",
        0,
    ));
    c.curves
        .extend(fit.ttft.as_ref().map(|f| prefill_curve(f, points)));
    c
}

/// Decode tok/s against context, with the rate the step-time fit implies.
pub fn decode_chart(points: &[PointSummary], fit: &ScalingFit) -> Chart {
    let mut c = Chart::versus_context(
        "decode_tps",
        "Decode tok/s vs context",
        "decode tok/s",
        ScaleKind::Linear,
        Unit::TokensPerSecond,
    );
    c.series.push(metric_series(
        Metric::DecodeTps,
        points,
        "decode_tps",
        "decode tok/s median",
        0,
    ));
    c.curves
        .extend(fit.decode_step.as_ref().map(|f| decode_curve(f, points)));
    c
}

/// Inter-token latency p50 and p99 against context, each with its p10–p90 over repetitions.
pub fn itl_chart(points: &[PointSummary]) -> Chart {
    let mut c = Chart::versus_context(
        "itl",
        "Inter-token latency vs context",
        "ITL",
        ScaleKind::Linear,
        Unit::Seconds,
    );
    c.series.push(metric_series(
        Metric::ItlP50,
        points,
        "itl_p50",
        "ITL p50",
        0,
    ));
    c.series.push(metric_series(
        Metric::ItlP99,
        points,
        "itl_p99",
        "ITL p99",
        1,
    ));
    c
}

/// Measured minus fitted, per length, for one law.
pub fn residual_chart(id: &str, title: &str, lengths: &[u64], residuals_s: &[f64]) -> Chart {
    let mut c = Chart::versus_context(
        id,
        title,
        "measured − fitted",
        ScaleKind::Linear,
        Unit::Seconds,
    );
    c.series.push(Series {
        key: id.into(),
        label: "residual".into(),
        color: 1,
        points: lengths
            .iter()
            .zip(residuals_s)
            .map(|(n, r)| Point {
                x: *n as f64,
                y: *r,
                spread: None,
                tip: format!("{}: residual {}", format_count(*n), seconds(*r)),
            })
            .collect(),
    });
    c.empty_text = "no fit yet".into();
    c
}

/// One metric of two runs on the same axes (`compare --html`).
pub fn overlay_chart(
    metric: Metric,
    a: (&str, &[PointSummary]),
    b: (&str, &[PointSummary]),
) -> Chart {
    let y_scale = if metric == Metric::Ttft {
        ScaleKind::Log10
    } else {
        ScaleKind::Linear
    };
    let mut c = Chart::versus_context(
        metric.key(),
        &format!("{} vs context", metric.label()),
        metric.label(),
        y_scale,
        metric.unit(),
    );
    c.series
        .push(metric_series(metric, a.1, "a", &format!("A: {}", a.0), 0));
    c.series
        .push(metric_series(metric, b.1, "b", &format!("B: {}", b.0), 1));
    c
}
