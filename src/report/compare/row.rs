//! One metric's change at one length as the text formats' cells and the JSON key: shared
//! by the point table (`render`) and the depth table (`depth`), below both.

use super::{MetricChange, Verdict};
use crate::lengths::format_count;
use crate::report::plot::figures::Metric;

fn metric_name(m: Metric) -> &'static str {
    match m {
        Metric::Ttft => "TTFT ms",
        Metric::PrefillTps => "prefill tok/s",
        Metric::DecodeTps => "decode tok/s",
        Metric::ItlP50 => "ITL p50 ms",
        Metric::ItlP99 => "ITL p99 ms",
    }
}

fn value(m: Metric, v: f64) -> String {
    match m {
        Metric::Ttft | Metric::ItlP50 | Metric::ItlP99 => format!("{:.1}", v * 1e3),
        Metric::PrefillTps | Metric::DecodeTps => format!("{v:.0}"),
    }
}

fn ratio(r: f64) -> String {
    format!("{r:.3}×")
}

/// The cells of one row, as every text format shows them.
pub fn cells(n: u64, ch: &MetricChange) -> [String; 7] {
    let stat = |s: Option<crate::record::Stat>| {
        s.map(|s| value(ch.metric, s.median))
            .unwrap_or_else(|| "-".into())
    };
    let verdict = match ch.ratio {
        Some(r) if ch.verdict != Verdict::WithinNoise => {
            format!("{} ({:+.1}%)", ch.verdict.mark(), (r - 1.0) * 100.0)
        }
        _ => ch.verdict.mark().to_string(),
    };
    [
        format_count(n),
        metric_name(ch.metric).into(),
        stat(ch.a),
        stat(ch.b),
        ch.ratio.map(ratio).unwrap_or_else(|| "-".into()),
        ch.interval
            .map(|(lo, hi)| format!("{lo:.3}–{hi:.3}"))
            .unwrap_or_else(|| "-".into()),
        verdict,
    ]
}

/// Metric names with their units, as in the result file.
pub(crate) fn key(m: Metric) -> &'static str {
    match m {
        Metric::Ttft => "ttft_s",
        Metric::PrefillTps => "prefill_tps",
        Metric::DecodeTps => "decode_tps",
        Metric::ItlP50 => "itl_p50_s",
        Metric::ItlP99 => "itl_p99_s",
    }
}
