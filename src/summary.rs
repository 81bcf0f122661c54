//! Condensing samples and errors into per-point medians and spread: pure, so a report of a
//! partial file and the sweep's own summary agree.

pub mod depth;

use crate::choices::Method;
use crate::record::{
    ErrorRecord, NeedleCell, PointSummary, Sample, SpecSource, SpecStats, Stat, Summary, flag,
};
use crate::stats::{outlier_count, quantile};
use serde_json::Value;
use std::collections::BTreeMap;

fn stat_of(samples: &[&Sample], f: impl Fn(&Sample) -> Option<f64>) -> Option<Stat> {
    let xs: Vec<f64> = samples.iter().filter_map(|s| f(s)).collect();
    Stat::of(&xs)
}

/// Client-minus-server differences, where the server reports its own timings.
fn server_deltas(samples: &[&Sample]) -> (Option<f64>, Option<f64>) {
    let ms = |s: &Sample, k: &str| {
        s.server_timings
            .as_ref()
            .and_then(|t| t.get(k))
            .and_then(Value::as_f64)
            .map(|v| v / 1000.0)
    };
    // Ollama reports nanoseconds under its own names (llama.cpp's counts, renamed).
    let ns = |s: &Sample, k: &str| {
        s.server_timings
            .as_ref()
            .and_then(|t| t.get(k))
            .and_then(Value::as_f64)
            .map(|v| v / 1e9)
    };
    let vllm = |s: &Sample| {
        s.server_timings
            .as_ref()
            .and_then(crate::backend::vllm_timings::prefill_decode_s)
    };
    let ttft: Vec<f64> = samples
        .iter()
        .filter(|s| s.method == Method::Stream.name())
        .filter_map(|s| {
            // vLLM: its prefill phase, scheduled to first token (see backend::vllm_timings).
            let server_s = ms(s, "prompt_ms")
                .or_else(|| ns(s, "prompt_eval_duration"))
                .or_else(|| vllm(s).map(|(prefill, _)| prefill))?;
            Some(s.ttft_s? - server_s)
        })
        .collect();
    let decode: Vec<f64> = samples
        .iter()
        .filter(|s| s.method == Method::Stream.name())
        .filter_map(|s| {
            // The client times the tokens after the first. llama.cpp's `predicted_ms` covers
            // exactly those (its first token is sampled at the end of the prompt batch, and
            // `t_token_generation` starts there); Ollama's `eval_duration` is taken to cover
            // all `eval_count` tokens, so its share for the tokens after the first is scaled.
            // vLLM's decode phase runs from its first token to its last, as llama.cpp's.
            let server_s = match ms(s, "predicted_ms").or_else(|| vllm(s).map(|(_, d)| d)) {
                Some(ms) => ms,
                None => {
                    let n = s.server_timings.as_ref()?.get("eval_count")?.as_f64()?;
                    ns(s, "eval_duration")? * (n - 1.0) / n
                }
            };
            let client_s = (s.output_tokens? as f64 - 1.0) / s.decode_tps?;
            Some(client_s - server_s)
        })
        .collect();
    (quantile(&ttft, 0.5), quantile(&decode, 0.5))
}

/// Acceptance figures of several requests, from the best source any of them has (server
/// counts, then metrics deltas, then the events proxy), so one figure never mixes sources:
/// the source, the accept lengths and the accept rates, one value per request.
pub fn acceptance<'a>(
    specs: impl Iterator<Item = &'a SpecStats> + Clone,
) -> Option<(SpecSource, Vec<f64>, Vec<f64>)> {
    let source = specs
        .clone()
        .filter(|s| s.accept_length.is_some())
        .map(|s| s.source)
        .min()?;
    let of = specs.filter(|s| s.source == source);
    let lengths = of.clone().filter_map(|s| s.accept_length).collect();
    let rates = of.filter_map(|s| s.accept_rate).collect();
    Some((source, lengths, rates))
}

/// The summary of length `n`'s samples and errors.
fn point(n: u64, samples: &[Sample], errors: &[ErrorRecord]) -> PointSummary {
    let all: Vec<&Sample> = samples.iter().filter(|s| s.context_tokens == n).collect();
    let errs: Vec<&ErrorRecord> = errors.iter().filter(|e| e.context_tokens == n).collect();
    let valid: Vec<&Sample> = all.iter().copied().filter(|s| s.valid).collect();
    let stream: Vec<&Sample> = valid
        .iter()
        .copied()
        .filter(|s| s.method == Method::Stream.name())
        .collect();
    let two_point: Vec<&Sample> = valid
        .iter()
        .copied()
        .filter(|s| s.method == Method::TwoPoint.name())
        .collect();
    let main = if stream.is_empty() {
        &two_point
    } else {
        &stream
    };
    let mut flags = BTreeMap::new();
    for f in all.iter().flat_map(|s| &s.flags) {
        *flags.entry(f.name().to_string()).or_insert(0) += 1;
    }
    let mut errors_by_kind = BTreeMap::new();
    for e in &errs {
        *errors_by_kind.entry(e.kind.clone()).or_insert(0) += 1;
    }
    let ttfts: Vec<f64> = main.iter().filter_map(|s| s.ttft_s).collect();
    let (ttft_minus_server_s, decode_minus_server_s) = server_deltas(&valid);
    let mut needle: BTreeMap<u64, (f64, usize, usize)> = BTreeMap::new();
    for r in all.iter().filter_map(|s| s.needle.as_ref()) {
        let e = needle
            .entry((r.depth * 1e6) as u64)
            .or_insert((r.depth, 0, 0));
        e.1 += usize::from(r.ok);
        e.2 += 1;
    }
    let spec = acceptance(stream.iter().filter_map(|s| s.spec.as_ref()));
    let prompt_tokens = quantile(
        &all.iter()
            .filter_map(|s| s.prompt_tokens)
            .map(|p| p as f64)
            .collect::<Vec<_>>(),
        0.5,
    )
    .map(|p| p.round() as u64);
    PointSummary {
        context_tokens: n,
        prompt_tokens,
        attempts: all.len() + errs.len(),
        n_valid: valid.len(),
        n_failed: errs.len(),
        errors: errors_by_kind,
        flags,
        ttft_s: stat_of(main, |s| s.ttft_s),
        prefill_tps: stat_of(main, |s| s.prefill_tps),
        decode_tps: stat_of(&stream, |s| s.decode_tps),
        itl_p50_s: stat_of(&stream, |s| s.itl_p50_s),
        itl_p99_s: stat_of(&stream, |s| s.itl_p99_s),
        e2e_s: stat_of(main, |s| s.e2e_s),
        two_point_decode_tps: stat_of(&two_point, |s| s.decode_tps),
        ttft_minus_server_s,
        decode_minus_server_s,
        outliers: outlier_count(&ttfts),
        needle: needle
            .into_values()
            .map(|(depth, passed, total)| NeedleCell {
                depth,
                passed,
                total,
            })
            .collect(),
        accept_length: spec.as_ref().and_then(|(_, l, _)| Stat::of(l)),
        accept_rate: spec.as_ref().and_then(|(_, _, r)| Stat::of(r)),
        server_accept_length: server_figure(&stream, spec.as_ref().map(|(s, _, _)| *s)),
        spec_source: spec.map(|(source, _, _)| source),
        // Every graded sample counts, valid or not: an empty answer scores 0.
        accuracy: crate::accuracy::tally::of_samples(all.iter().copied()),
        accuracy_by_depth: crate::accuracy::tally::by_depth(all.iter().copied()),
    }
}

/// The median of the server's own stated acceptance length over the samples of `source`.
fn server_figure(samples: &[&Sample], source: Option<SpecSource>) -> Option<f64> {
    let v: Vec<f64> = samples
        .iter()
        .filter_map(|s| s.spec.as_ref())
        .filter(|s| Some(s.source) == source)
        .filter_map(|s| s.server_accept_length)
        .collect();
    crate::stats::median(&v)
}

pub fn summarize(samples: &[Sample], errors: &[ErrorRecord]) -> Summary {
    // Depth turns and primings are summarised per depth, apart from the cold points.
    let (depth, depth_notes) = depth::summarize(samples, errors);
    let (cold_samples, cold_errors) = without_depth(samples, errors);
    let (samples, errors) = (&cold_samples[..], &cold_errors[..]);
    let mut lengths: Vec<u64> = samples
        .iter()
        .map(|s| s.context_tokens)
        .chain(errors.iter().map(|e| e.context_tokens))
        .collect();
    lengths.sort_unstable();
    lengths.dedup();
    let points: Vec<PointSummary> = lengths
        .into_iter()
        .map(|n| point(n, samples, errors))
        .collect();
    let mut notes = Vec::new();
    // Points ascend by length: the first truncated one is where truncation began.
    let truncation_onset = points
        .iter()
        .find(|p| p.flags.contains_key(flag::TRUNCATED.name()))
        .map(|p| p.context_tokens);
    let restarts: Vec<u64> = points
        .iter()
        .filter(|p| p.flags.contains_key(flag::SERVER_RESTARTED.name()))
        .map(|p| p.context_tokens)
        .collect();
    if !restarts.is_empty() {
        notes.push(format!(
            "the server restarted during the sweep (samples at {restarts:?} tokens are flagged server_restarted)"
        ));
    }
    let derived = samples
        .iter()
        .filter(|s| s.event_counts.as_deref() == Some("derived"))
        .count();
    if derived > 0 {
        notes.push(format!(
            "per-event token counts were derived for {derived} samples (the server sent none per \
             event): ITL spreads each request's total evenly over its arrivals, and no \
             tokens-per-event figure is given"
        ));
    }
    if points
        .iter()
        .any(|p| p.spec_source == Some(SpecSource::EventsProxy))
    {
        notes.push(
            "accept length marked ~ is a proxy: tokens per stream event, where the server \
             reported no speculative-decoding counts"
                .into(),
        );
    }
    if let Some(n) = truncation_onset {
        notes.push(format!(
            "the server truncated prompts silently from {n} tokens on: results at and beyond it are invalid"
        ));
    } else if let Some(p) = crate::truncation::plateau(
        &points
            .iter()
            .filter_map(|p| Some((p.context_tokens, p.prompt_tokens?)))
            .collect::<Vec<_>>(),
    ) {
        notes.push(p.note());
    }
    notes.extend(depth_notes);
    Summary {
        accuracy: crate::accuracy::tally::of_samples(samples),
        points,
        fit: Value::Null,
        notes,
        depth,
    }
}

fn without_depth(samples: &[Sample], errors: &[ErrorRecord]) -> (Vec<Sample>, Vec<ErrorRecord>) {
    use depth::{is_depth_error, is_depth_sample};
    (
        samples
            .iter()
            .filter(|s| !is_depth_sample(s))
            .cloned()
            .collect(),
        errors
            .iter()
            .filter(|e| !is_depth_error(e))
            .cloned()
            .collect(),
    )
}

/// `summarize`, plus the fitted scaling laws where enough points exist.
pub fn summarize_with_fit(samples: &[Sample], errors: &[ErrorRecord]) -> Summary {
    let mut s = summarize(samples, errors);
    s.fit = crate::fit::fit_summary(&s);
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(n: u64, ttft: f64, valid: bool) -> Sample {
        Sample {
            context_tokens: n,
            method: "stream".into(),
            ttft_s: Some(ttft),
            decode_tps: Some(100.0),
            valid,
            ..Sample::default()
        }
    }

    #[test]
    fn invalid_samples_are_never_averaged() {
        let s = vec![
            sample(1024, 0.1, true),
            sample(1024, 0.3, true),
            sample(1024, 0.001, false),
        ];
        let e = vec![ErrorRecord {
            context_tokens: 1024,
            rep: 3,
            kind: "timeout".into(),
            message: "m".into(),
            method: None,
        }];
        let sum = summarize(&s, &e);
        let p = &sum.points[0];
        assert_eq!((p.attempts, p.n_valid, p.n_failed), (4, 2, 1));
        assert!((p.ttft_s.unwrap().median - 0.2).abs() < 1e-12);
        assert_eq!(p.ttft_s.unwrap().min, 0.1);
        assert_eq!(p.errors["timeout"], 1);
    }

    #[test]
    fn a_point_with_only_errors_is_still_listed() {
        let e = vec![ErrorRecord {
            context_tokens: 2048,
            rep: 0,
            kind: "http_5xx".into(),
            message: "m".into(),
            method: None,
        }];
        let sum = summarize(&[], &e);
        assert_eq!(sum.points.len(), 1);
        assert_eq!(sum.points[0].n_valid, 0);
        assert!(sum.points[0].ttft_s.is_none());
    }

    fn spec(source: SpecSource, length: f64, rate: Option<f64>) -> Option<SpecStats> {
        Some(SpecStats {
            accept_length: Some(length),
            accept_rate: rate,
            ..SpecStats::empty(source)
        })
    }

    #[test]
    fn acceptance_is_the_median_per_request_of_one_source() {
        let mut s = vec![
            sample(1024, 0.1, true),
            sample(1024, 0.1, true),
            sample(1024, 0.1, true),
            sample(1024, 0.1, true),
            sample(2048, 0.1, true),
            sample(2048, 0.1, false),
        ];
        s[0].spec = spec(SpecSource::Server, 2.0, Some(0.5));
        s[1].spec = spec(SpecSource::Server, 3.0, Some(0.7));
        s[2].spec = spec(SpecSource::Server, 5.0, None);
        // A proxy figure beside server counts is left out, not averaged in.
        s[3].spec = spec(SpecSource::EventsProxy, 9.0, None);
        s[4].spec = spec(SpecSource::EventsProxy, 1.5, None);
        // An invalid sample's acceptance is not a result either.
        s[5].spec = spec(SpecSource::EventsProxy, 7.0, None);
        let sum = summarize(&s, &[]);
        let p = &sum.points[0];
        assert_eq!(p.spec_source, Some(SpecSource::Server));
        let a = p.accept_length.unwrap();
        assert_eq!((a.median, a.min, a.max, a.n), (3.0, 2.0, 5.0, 3));
        assert!((p.accept_rate.unwrap().median - 0.6).abs() < 1e-12);
        let q = &sum.points[1];
        assert_eq!(q.spec_source, Some(SpecSource::EventsProxy));
        assert_eq!(q.accept_length.unwrap().median, 1.5);
        assert!(
            sum.notes.iter().any(|n| n.contains("proxy")),
            "{:?}",
            sum.notes
        );
        // Without acceptance data nothing is added.
        let plain = summarize(&[sample(1024, 0.1, true)], &[]);
        assert_eq!(plain.points[0].accept_length, None);
        assert!(
            serde_json::to_string(&plain.points[0])
                .unwrap()
                .find("accept")
                .is_none()
        );
    }

    #[test]
    fn outliers_by_mad() {
        assert_eq!(outlier_count(&[1.0, 1.1, 0.9, 1.0, 1.05, 9.0]), 1);
        assert_eq!(outlier_count(&[1.0, 1.0, 1.0]), 0);
    }
}
