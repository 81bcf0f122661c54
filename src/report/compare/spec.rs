//! Whether a decode-rate change between two runs comes from speculative-decoding
//! acceptance: decode tok/s = accept length × verification steps/s, so when the step rate
//! stays inside the repetition noise while decode does not, the change is acceptance (the
//! text, the draft model), not the server getting slower or faster.

use super::{Verdict, bootstrap};
use crate::choices::Method;
use crate::lengths::format_count;
use crate::record::{PointSummary, Sample, SpecSource, Summary};
use serde_json::{Value, json};

/// What a decode change at one length follows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cause {
    /// Decode changed and the step rate did not: the change is acceptance.
    Acceptance,
    /// The step rate changed beyond the noise: not acceptance alone.
    StepRate,
    /// Decode did not change beyond the noise (or a side lacks it).
    NoDecodeChange,
    /// Too few repetitions to tell whether the step rate changed.
    Unknown,
}

impl Cause {
    pub fn name(self) -> &'static str {
        match self {
            Cause::Acceptance => "acceptance",
            Cause::StepRate => "step_rate",
            Cause::NoDecodeChange => "no_decode_change",
            Cause::Unknown => "unknown",
        }
    }
}

/// Acceptance and step rate at one length present in both runs with acceptance data.
#[derive(Debug, Clone, PartialEq)]
pub struct SpecChange {
    pub context_tokens: u64,
    pub accept_a: f64,
    pub accept_b: f64,
    pub source_a: Option<SpecSource>,
    pub source_b: Option<SpecSource>,
    /// Decode tok/s B/A and its verdict (from the decode row of the comparison).
    pub decode_ratio: Option<f64>,
    pub decode_verdict: Verdict,
    /// Median verify steps/s B/A (per request: decode tok/s / accept length).
    pub step_ratio: Option<f64>,
    pub step_interval: Option<(f64, f64)>,
    pub cause: Cause,
}

impl SpecChange {
    pub fn accept_ratio(&self) -> f64 {
        self.accept_b / self.accept_a
    }

    fn proxy(&self) -> bool {
        [self.source_a, self.source_b].contains(&Some(SpecSource::EventsProxy))
    }

    /// The sentence `compare` prints for a decode change, if there is one.
    pub fn explanation(&self) -> Option<String> {
        let d = self.decode_ratio?;
        let at = format_count(self.context_tokens);
        let unit = if self.proxy() {
            "tokens/event, a proxy"
        } else {
            "tokens/step"
        };
        let accept = format!("{:.1} → {:.1} {unit}", self.accept_a, self.accept_b);
        let step = self
            .step_ratio
            .map(|r| format!("×{r:.2}"))
            .unwrap_or_else(|| "?".into());
        match self.cause {
            Cause::NoDecodeChange => None,
            Cause::Acceptance => Some(format!(
                "decode ×{d:.2} at {at} follows acceptance ({accept}); step rate unchanged ({step})"
            )),
            Cause::StepRate => Some(format!(
                "decode ×{d:.2} at {at} is not acceptance alone: the step rate changed ({step}, outside the noise); acceptance {accept}"
            )),
            Cause::Unknown => Some(format!(
                "decode ×{d:.2} at {at}: acceptance {accept}, step rate {step}; too few repetitions to tell whether the step rate changed"
            )),
        }
    }
}

fn point(s: &Summary, n: u64) -> Option<&PointSummary> {
    s.points.iter().find(|p| p.context_tokens == n)
}

/// Per request verify steps/s (decode tok/s / accept length) of the streamed valid samples
/// at `n` whose acceptance comes from `source` (the source of the point's median).
pub fn step_rates(samples: &[Sample], n: u64, source: Option<SpecSource>) -> Vec<f64> {
    samples
        .iter()
        .filter(|s| s.valid && s.context_tokens == n && s.method == Method::Stream.name())
        .filter_map(|s| {
            let spec = s.spec.as_ref().filter(|x| Some(x.source) == source)?;
            let a = spec.accept_length.filter(|a| *a > 0.0)?;
            Some(s.decode_tps? / a)
        })
        .collect()
}

/// One length's acceptance change, where both runs have acceptance there.
pub fn change(
    n: u64,
    a: (&Summary, &[Sample]),
    b: (&Summary, &[Sample]),
    decode: Option<&super::MetricChange>,
    seed: u64,
) -> Option<SpecChange> {
    let (pa, pb) = (point(a.0, n)?, point(b.0, n)?);
    let (accept_a, accept_b) = (pa.accept_length?.median, pb.accept_length?.median);
    if accept_a <= 0.0 {
        return None;
    }
    let (ra, rb) = (
        step_rates(a.1, n, pa.spec_source),
        step_rates(b.1, n, pb.spec_source),
    );
    let med = |xs: &[f64]| crate::stats::median(xs);
    let step_ratio = match (med(&ra), med(&rb)) {
        (Some(x), Some(y)) if x > 0.0 => Some(y / x),
        _ => None,
    };
    let step_interval = step_ratio.and(bootstrap::median_ratio_interval(&ra, &rb, seed));
    let decode_verdict = decode.map(|d| d.verdict).unwrap_or(Verdict::Missing);
    let decode_ratio = decode.and_then(|d| d.ratio);
    let cause = if !matches!(decode_verdict, Verdict::Better | Verdict::Worse) {
        Cause::NoDecodeChange
    } else {
        match step_interval {
            None => Cause::Unknown,
            Some((lo, hi)) if lo <= 1.0 && hi >= 1.0 => Cause::Acceptance,
            Some(_) => Cause::StepRate,
        }
    };
    Some(SpecChange {
        context_tokens: n,
        accept_a,
        accept_b,
        source_a: pa.spec_source,
        source_b: pb.spec_source,
        decode_ratio,
        decode_verdict,
        step_ratio,
        step_interval,
        cause,
    })
}

/// The text block after the comparison table.
pub fn text(changes: &[SpecChange], bullet: &str) -> String {
    if changes.is_empty() {
        return String::new();
    }
    let mut out = String::from(
        "\nacceptance (speculative decoding), B/A per length; steps/s = decode tok/s / accept length:\n",
    );
    for c in changes {
        let step = match (c.step_ratio, c.step_interval) {
            (Some(r), Some((lo, hi))) => format!("steps/s ×{r:.3} ({lo:.3}–{hi:.3})"),
            (Some(r), None) => format!("steps/s ×{r:.3} (one rep)"),
            _ => "steps/s -".into(),
        };
        out.push_str(&format!(
            "{bullet}{}: accept {}{:.2} → {:.2} (×{:.3}){} · decode {} · {step}\n",
            format_count(c.context_tokens),
            if c.proxy() { "~" } else { "" },
            c.accept_a,
            c.accept_b,
            c.accept_ratio(),
            if c.proxy() {
                " [proxy: tokens per event]"
            } else {
                ""
            },
            c.decode_ratio
                .map(|r| format!("×{r:.3}"))
                .unwrap_or_else(|| "-".into()),
        ));
    }
    for line in changes.iter().filter_map(SpecChange::explanation) {
        out.push_str(&format!("{bullet}{line}\n"));
    }
    out
}

pub fn json(changes: &[SpecChange]) -> Value {
    changes
        .iter()
        .map(|c| {
            json!({
                "context_tokens": c.context_tokens,
                "accept_length": {"a": c.accept_a, "b": c.accept_b, "ratio": c.accept_ratio()},
                "source": {"a": c.source_a, "b": c.source_b},
                "decode_ratio": c.decode_ratio,
                "step_rate_ratio": c.step_ratio,
                "step_rate_ci95": c.step_interval.map(|(lo, hi)| [lo, hi]),
                "cause": c.cause.name(),
                "explanation": c.explanation(),
            })
        })
        .collect()
}
