//! A replayed trace's prefix hits, from its request records alone (so `report` rebuilds it
//! from a file): possible vs observed hit ratio over the trace's time, TTFT of hits and
//! misses, and what a large gap between the two ratios points to.

use crate::record::load::{CellRecord, Percentiles, RequestRecord, TracePlan, TraceRequestInfo};
use crate::run::hist::LatencyHist;

/// Time bins of the hit-ratio series.
const BINS: usize = 20;
/// The observed ratio counts as far below the possible one under this fraction of it.
const FAR_BELOW: f64 = 0.8;

/// One time bin: requests scheduled in [t_s, t_s + width).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Bin {
    pub t_s: f64,
    pub requests: u64,
    /// Possible cached tokens / input tokens of the bin's requests.
    pub possible_ratio: f64,
    /// Reported cached tokens / input tokens; `None` when the server reported none.
    pub observed_ratio: Option<f64>,
    pub ttft_p50_s: Option<f64>,
}

/// What the replay's hits came to.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Hits {
    pub requests: u64,
    pub ok: u64,
    pub input_tokens: u64,
    pub possible_cached_tokens: u64,
    /// Summed over requests that reported a count.
    pub observed_cached_tokens: Option<u64>,
    pub possible_ratio: f64,
    pub observed_ratio: Option<f64>,
    /// Requests whose reported cached tokens equal the possible ones.
    pub exact: u64,
    /// TTFT of requests served partly from cache (by the server's count; by the possible
    /// hits when it reports none) and of the others.
    pub ttft_hit: Option<Percentiles>,
    pub ttft_miss: Option<Percentiles>,
    /// Whether the split is by the server's count (else by possible hits).
    pub split_observed: bool,
    pub early_stops: u64,
    pub bins: Vec<Bin>,
    pub notes: Vec<String>,
}

fn ratio(num: u64, den: u64) -> f64 {
    if den == 0 {
        0.0
    } else {
        num as f64 / den as f64
    }
}

/// Summarise the trace requests of a run (`requests` without trace info are ignored).
pub fn summarise(plan: &TracePlan, requests: &[RequestRecord], cells: &[CellRecord]) -> Hits {
    // Each trace request with its trace info (records without it are not the replay's).
    let reqs: Vec<(&RequestRecord, &TraceRequestInfo)> = requests
        .iter()
        .filter_map(|r| Some((r, r.trace.as_ref()?)))
        .collect();
    let ok: Vec<_> = reqs.iter().copied().filter(|(r, _)| r.ok).collect();
    let input: u64 = ok.iter().map(|(_, t)| t.input_length).sum();
    let possible: u64 = ok.iter().map(|(_, t)| t.possible_cached_tokens).sum();
    let reported = ok.iter().any(|(r, _)| r.cached_tokens.is_some());
    let observed = reported.then(|| ok.iter().filter_map(|(r, _)| r.cached_tokens).sum::<u64>());
    let is_hit = |(r, t): &(&RequestRecord, &TraceRequestInfo)| match reported {
        true => r.cached_tokens.unwrap_or(0) > 0,
        false => t.possible_cached_tokens > 0,
    };
    let ttft = |hit: bool| {
        LatencyHist::of(
            ok.iter()
                .filter(|q| is_hit(q) == hit)
                .filter_map(|(r, _)| r.ttft_s),
        )
        .percentiles()
    };
    let end = reqs.iter().map(|(r, _)| r.scheduled_s).fold(0.0, f64::max);
    let width = if end > 0.0 { end / BINS as f64 } else { 1.0 };
    let mut binned: Vec<Vec<(&RequestRecord, &TraceRequestInfo)>> = vec![Vec::new(); BINS];
    for q in &ok {
        binned[((q.0.scheduled_s / width) as usize).min(BINS - 1)].push(*q);
    }
    let bins = binned
        .iter()
        .enumerate()
        .filter(|(_, inside)| !inside.is_empty())
        .map(|(b, inside)| {
            let den: u64 = inside.iter().map(|(_, t)| t.input_length).sum();
            let ttfts: Vec<f64> = inside.iter().filter_map(|(r, _)| r.ttft_s).collect();
            Bin {
                t_s: b as f64 * width,
                requests: inside.len() as u64,
                possible_ratio: ratio(
                    inside.iter().map(|(_, t)| t.possible_cached_tokens).sum(),
                    den,
                ),
                observed_ratio: reported.then(|| {
                    ratio(
                        inside.iter().filter_map(|(r, _)| r.cached_tokens).sum(),
                        den,
                    )
                }),
                ttft_p50_s: crate::stats::median(&ttfts),
            }
        })
        .collect();
    let mut h = Hits {
        requests: reqs.len() as u64,
        ok: ok.len() as u64,
        input_tokens: input,
        possible_cached_tokens: possible,
        observed_cached_tokens: observed,
        possible_ratio: ratio(possible, input),
        observed_ratio: observed.map(|o| ratio(o, input)),
        exact: ok
            .iter()
            .filter(|(r, t)| r.cached_tokens == Some(t.possible_cached_tokens))
            .count() as u64,
        ttft_hit: ttft(true),
        ttft_miss: ttft(false),
        split_observed: reported,
        early_stops: reqs.iter().filter(|(_, t)| t.early_stop).count() as u64,
        bins,
        notes: Vec::new(),
    };
    h.notes = notes(plan, &h, cells);
    h
}

/// What the numbers say: a gap between observed and possible hits and its likely cause.
fn notes(plan: &TracePlan, h: &Hits, cells: &[CellRecord]) -> Vec<String> {
    let mut out = Vec::new();
    if h.early_stops > 0 {
        out.push(format!(
            "{} request(s) stopped before their output_length (early_stop): the server did not \
             honour ignore_eos",
            h.early_stops
        ));
    }
    let Some(obs) = h.observed_ratio else {
        out.push(
            "the server reports no cached-token counts: observed hits are unknown, and TTFT is \
             split by the hits the trace makes possible"
                .into(),
        );
        return out;
    };
    if h.possible_ratio <= 0.0 || obs >= FAR_BELOW * h.possible_ratio {
        return out;
    }
    let pct = |x: f64| format!("{:.1} %", x * 100.0);
    let mut why = format!(
        "observed prefix-hit ratio {} is far below the {} the trace makes possible: ",
        pct(obs),
        pct(h.possible_ratio)
    );
    let server = cells.iter().filter_map(|c| c.server.as_ref());
    let kv_max = server
        .clone()
        .filter_map(|s| s.kv_usage_max)
        .fold(None, |a: Option<f64>, x| Some(a.map_or(x, |a| a.max(x))));
    let preempted: f64 = server.filter_map(|s| s.preemptions).sum();
    match plan.kv_pool_tokens {
        Some(pool) if plan.working_set_tokens > pool => why.push_str(&format!(
            "eviction: the trace's working set ({} distinct prompt tokens) exceeds the server's KV \
             pool ({pool} tokens), so shared prefixes were evicted before they were reused",
            plan.working_set_tokens
        )),
        _ if kv_max.is_some_and(|k| k >= 0.9) || preempted > 0.0 => why.push_str(&format!(
            "eviction: the KV pool ran full (usage peaked at {}, {preempted} preemption(s)), so \
             cached prefixes made room for running requests",
            pct(kv_max.unwrap_or(0.0))
        )),
        _ => why.push_str(&format!(
            "no sign of a full pool; the cache may keep less than whole {}-token blocks (page \
             size {}), be off or unreported, or requests were routed across replicas that do \
             not share a cache",
            plan.block_tokens, plan.page_tokens
        )),
    }
    out.push(why);
    out
}
