//! A replayed trace's section of the load report (it belongs to trace plans): the hit
//! summary and its time bins as text, and HTML charts of possible and observed hit ratio
//! and TTFT over the trace's time.

use crate::load::LoadResult;
use crate::report::escape::escape;
use crate::report::numbers::{ms, num};
use crate::report::plot::{Chart, Point, Series, Unit};
use crate::trace::hits::{self, Hits};

/// The hits of `r`, when it is a trace replay.
pub fn hits(r: &LoadResult) -> Option<Hits> {
    let plan = r.plan.trace.as_ref()?;
    Some(hits::summarise(plan, &r.requests, &r.cells))
}

fn pct(x: Option<f64>) -> String {
    num(x.map(|x| x * 100.0), 1)
}

/// The text section: totals, TTFT of hits and misses, the bins, the notes.
pub fn text(r: &LoadResult) -> String {
    let (Some(h), Some(plan)) = (hits(r), r.plan.trace.as_ref()) else {
        return String::new();
    };
    let mut s = format!(
        "\ntrace {} ({}, {}-token blocks, time x{}): {} requests, {} ok; content {}\n",
        plan.file, plan.format, plan.block_tokens, plan.time_scale, h.requests, h.ok, plan.content
    );
    s.push_str(&format!(
        "prefix hits: possible {} % ({} of {} input tokens), observed {} %{}; {} of {} requests exactly as possible\n",
        pct(Some(h.possible_ratio)),
        h.possible_cached_tokens,
        h.input_tokens,
        pct(h.observed_ratio),
        h.observed_cached_tokens
            .map(|o| format!(" ({o} tokens)"))
            .unwrap_or_default(),
        h.exact,
        h.ok
    ));
    let by = if h.split_observed {
        "server's cached count"
    } else {
        "possible hits"
    };
    s.push_str(&format!(
        "TTFT ms (split by the {by}): hit p50 {} p99 {} (n {}), miss p50 {} p99 {} (n {})\n",
        ms(h.ttft_hit, |p| p.p50),
        ms(h.ttft_hit, |p| p.p99),
        h.ttft_hit.map_or(0, |p| p.n),
        ms(h.ttft_miss, |p| p.p50),
        ms(h.ttft_miss, |p| p.p99),
        h.ttft_miss.map_or(0, |p| p.n),
    ));
    s.push_str(&format!(
        "{:>8}  {:>8}  {:>10}  {:>10}  {:>12}\n",
        "t_s", "requests", "possible%", "observed%", "ttft_p50_ms"
    ));
    for b in &h.bins {
        s.push_str(&format!(
            "{:>8.1}  {:>8}  {:>10}  {:>10}  {:>12}\n",
            b.t_s,
            b.requests,
            pct(Some(b.possible_ratio)),
            pct(b.observed_ratio),
            num(b.ttft_p50_s.map(|t| t * 1e3), 1)
        ));
    }
    s.extend(crate::trace::spec_line::line(&r.requests));
    for n in &h.notes {
        s.push_str(&format!("note: trace: {n}\n"));
    }
    s
}

/// A series over the trace's time; `y` written as `unit` writes it in the tooltips.
fn series(key: &str, color: usize, points: Vec<(f64, f64)>, unit: Unit) -> Series {
    Series {
        key: key.into(),
        label: key.into(),
        color,
        points: points
            .into_iter()
            .map(|(x, y)| Point {
                x,
                y,
                spread: None,
                tip: format!("{key} {} at {x:.1} s", unit.label(y)),
            })
            .collect(),
    }
}

fn chart(id: &str, title: &str, y_label: &str, y_unit: Unit) -> Chart {
    let x = "trace time, replayed (s)";
    Chart::linear(
        id,
        title,
        (x, y_label),
        (Unit::Seconds, y_unit),
        "no finished trace request",
    )
}

/// The HTML section: the summary text, a hit-ratio chart and a TTFT chart over time.
pub fn html(r: &LoadResult) -> String {
    let Some(h) = hits(r) else {
        return String::new();
    };
    let mut ratio = chart(
        "trace-hits",
        "Prefix-hit ratio over the trace: possible vs observed",
        "cached / input tokens",
        Unit::Percent,
    );
    ratio.series.push(series(
        "possible",
        0,
        h.bins.iter().map(|b| (b.t_s, b.possible_ratio)).collect(),
        Unit::Percent,
    ));
    ratio.series.push(series(
        "observed",
        1,
        h.bins
            .iter()
            .filter_map(|b| Some((b.t_s, b.observed_ratio?)))
            .collect(),
        Unit::Percent,
    ));
    let mut ttft = chart(
        "trace-ttft",
        "TTFT p50 over the trace",
        "TTFT",
        Unit::Seconds,
    );
    ttft.series.push(series(
        "ttft p50",
        2,
        h.bins
            .iter()
            .filter_map(|b| Some((b.t_s, b.ttft_p50_s?)))
            .collect(),
        Unit::Seconds,
    ));
    format!(
        "<h2>Trace replay</h2><pre>{}</pre>{}{}",
        escape(&text(r)),
        ratio.to_svg(),
        ttft.to_svg()
    )
}
