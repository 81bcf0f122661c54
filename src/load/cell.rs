//! A cell's summary, a pure function of its request and scrape records (so files from
//! several client machines merge by their raw records): percentiles from HDR histograms,
//! the steady-state window, throughput and goodput.

use super::slo;
use super::telemetry;
use crate::record::load::{
    CellKey, CellRecord, GpuMetricsRecord, LoadPlan, RequestRecord, ServerMetricsRecord, Slo,
};
use crate::run::hist::LatencyHist;
use std::collections::BTreeMap;

/// Send lateness (open loop) above which the report says requests waited to be sent.
const LATE_SEND_NOTE_S: f64 = 0.010;

/// The steady-state window: where the client's in-flight count held the target (closed
/// loop), or the span of sends (open loop). Returns (start, end) from the cell's start.
pub fn window(requests: &[&RequestRecord], target_in_flight: Option<u32>) -> Option<(f64, f64)> {
    let first_send = requests.iter().map(|r| r.sent_s).reduce(f64::min)?;
    let last_end = requests.iter().map(|r| ended(r)).reduce(f64::max)?;
    let Some(target) = target_in_flight else {
        let last_send = requests.iter().map(|r| r.sent_s).reduce(f64::max)?;
        return Some(if last_send > first_send {
            (first_send, last_send)
        } else {
            (first_send, last_end)
        });
    };
    // Ends before starts at equal times: a worker's next send follows its previous end.
    let mut events: Vec<(f64, i64)> = requests
        .iter()
        .flat_map(|r| [(r.sent_s, 1), (ended(r), -1)])
        .collect();
    events.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
    let mut level = 0i64;
    let (mut start, mut end) = (None, None);
    let mut i = 0;
    while i < events.len() {
        let t = events[i].0;
        let before = level;
        while i < events.len() && events[i].0 == t {
            level += events[i].1;
            i += 1;
        }
        if level >= i64::from(target) && start.is_none() {
            start = Some(t);
        }
        if before >= i64::from(target) && level < i64::from(target) {
            end = Some(t);
        }
    }
    match (start, end) {
        (Some(a), Some(b)) if b > a => Some((a, b)),
        _ => Some((first_send, last_end)),
    }
}

/// A successful request's output tokens inside the window `[a, b]`: its first where the
/// first arrived in it, those after spread evenly over its decode span.
pub fn window_tokens(r: &RequestRecord, a: f64, b: f64) -> Option<f64> {
    let (ttft, out) = (r.ttft_s?, r.output_tokens?);
    let end = ended(r);
    let inside = |t: f64| t >= a && t <= b;
    let first = r.sent_s + ttft;
    let mut tokens = if inside(first) { 1.0 } else { 0.0 };
    let decode = out.saturating_sub(1) as f64;
    let span = end - first;
    if decode > 0.0 && span > 0.0 {
        tokens += decode * (end.min(b) - first.max(a)).max(0.0) / span;
    } else if decode > 0.0 && inside(end) {
        tokens += decode;
    }
    Some(tokens)
}

fn ended(r: &RequestRecord) -> f64 {
    r.ended_s.unwrap_or(r.sent_s)
}

/// Summarise one cell under `plan`: [`summarise`], then its price and energy per token
/// from `gpu`, its telemetry records ([`super::cost::apply`]).
pub fn summarise_plan(
    key: CellKey,
    requests: &[&RequestRecord],
    scrapes: &[&ServerMetricsRecord],
    gpu: &[&GpuMetricsRecord],
    plan: &LoadPlan,
) -> CellRecord {
    let mut c = summarise(key, requests, scrapes, &plan.slo, plan.goodput_target);
    super::cost::apply(&mut c, gpu, plan);
    c
}

/// Summarise one cell.
pub fn summarise(
    key: CellKey,
    requests: &[&RequestRecord],
    scrapes: &[&ServerMetricsRecord],
    slo: &Slo,
    goodput_target: f64,
) -> CellRecord {
    let mut c = CellRecord {
        cell: key,
        sent: requests.len() as u64,
        ..Default::default()
    };
    let mut errors = BTreeMap::new();
    for r in requests {
        if r.ok {
            c.ok += 1;
        } else {
            c.failed += 1;
            if r.timed_out() {
                c.timed_out += 1;
            }
            let kind = r.error.as_ref().map(|e| e.kind.clone()).unwrap_or_default();
            *errors.entry(kind).or_insert(0) += 1;
        }
    }
    c.errors = errors;
    c.accuracy = crate::accuracy::tally::by_task(requests.iter().filter_map(|r| r.task.as_ref()));
    if let Some((source, lengths, _)) = crate::summary::acceptance(
        requests
            .iter()
            .filter(|r| r.ok)
            .filter_map(|r| r.spec.as_ref()),
    ) {
        c.accept_length_median = crate::stats::median(&lengths);
        c.accept_source = Some(source);
    }
    let pct = |f: &dyn Fn(&RequestRecord) -> Option<f64>| {
        LatencyHist::of(requests.iter().filter(|r| r.ok).filter_map(|r| f(r))).percentiles()
    };
    c.ttft_s = pct(&|r| r.ttft_s);
    c.ttft_from_schedule_s = pct(&|r| r.ttft_from_schedule_s);
    c.tpot_s = pct(&|r| r.tpot_s);
    c.e2e_s = pct(&|r| r.e2e_s);
    c.e2e_from_schedule_s = pct(&|r| r.e2e_from_schedule_s);
    c.itl_s = LatencyHist::of(
        requests
            .iter()
            .filter(|r| r.ok)
            .flat_map(|r| r.itl_s.iter().copied()),
    )
    .percentiles();
    c.send_lateness_s =
        LatencyHist::of(requests.iter().map(|r| (r.sent_s - r.scheduled_s).max(0.0))).percentiles();
    let Some((a, b)) = window(requests, key.concurrency) else {
        c.meets_target = false;
        return c;
    };
    let first_send = requests
        .iter()
        .map(|r| r.sent_s)
        .fold(f64::INFINITY, f64::min);
    let last_end = requests.iter().map(|r| ended(r)).fold(0.0, f64::max);
    c.duration_s = last_end - first_send;
    c.window_start_s = a;
    c.window_s = b - a;
    c.ramp_up_s = a - first_send;
    c.drain_s = last_end - b;
    if c.window_s > 0.0 {
        let w = c.window_s;
        let inside = |t: f64| t >= a && t <= b;
        let (mut out_tokens, mut in_tokens, mut done, mut good) = (0.0, 0.0, 0.0, 0.0);
        let mut good_tokens = 0.0;
        let mut busy = 0.0;
        for r in requests {
            let end = ended(r);
            busy += (end.min(b) - r.sent_s.max(a)).max(0.0);
            let met = slo::met(slo, r);
            if inside(end) {
                done += 1.0;
                if met {
                    good += 1.0;
                }
            }
            if !r.ok {
                continue;
            }
            let Some(tokens) = window_tokens(r, a, b) else {
                continue;
            };
            if inside(r.sent_s + r.ttft_s.unwrap_or(0.0)) {
                in_tokens += r.prompt_tokens.unwrap_or(r.cell.context_tokens) as f64;
            }
            out_tokens += tokens;
            if met {
                good_tokens += tokens;
            }
        }
        c.output_tps = Some(out_tokens / w);
        c.goodput_output_tps = Some(good_tokens / w);
        c.input_tps = Some(in_tokens / w);
        c.requests_per_s = Some(done / w);
        c.goodput_rps = Some(good / w);
        c.in_flight_mean = Some(busy / w);
        c.verify_steps_per_s = super::spec_rate::verify_steps_per_s(requests, a, b);
    }
    let good_all = requests.iter().filter(|r| slo::met(slo, r)).count() as f64;
    c.goodput_fraction = (c.sent > 0).then(|| good_all / c.sent as f64);
    c.meets_target = c.goodput_fraction.is_some_and(|f| f >= goodput_target);
    c.server = telemetry::summarise(scrapes);
    c.notes = notes(&c, scrapes.is_empty());
    c
}

fn notes(c: &CellRecord, no_scrapes: bool) -> Vec<String> {
    let mut notes = Vec::new();
    if c.sent != c.ok + c.failed {
        notes.push(format!(
            "accounting error: {} sent but {} ok + {} failed",
            c.sent, c.ok, c.failed
        ));
    }
    if let (Some(late), Some(from_send), Some(from_sched)) =
        (c.send_lateness_s, c.ttft_s, c.ttft_from_schedule_s)
        && late.p50 > LATE_SEND_NOTE_S
    {
        notes.push(format!(
            "requests waited to be sent (send lateness p50 {:.0} ms, p99 {:.0} ms): TTFT from \
             the schedule p50 {:.0} ms vs from the send {:.0} ms; the first is what users \
             arriving on schedule waited (coordinated omission accounted for)",
            late.p50 * 1e3,
            late.p99 * 1e3,
            from_sched.p50 * 1e3,
            from_send.p50 * 1e3
        ));
    }
    if no_scrapes {
        notes.push("no server metrics (no usable /metrics)".into());
    }
    if let Some(s) = &c.server
        && let (Some(excess), Some(client)) = (s.client_excess_median, c.in_flight_mean)
        && telemetry::client_bottleneck(client, excess)
    {
        notes.push(format!(
            "the client (or a proxy) is the bottleneck: the client had {client:.1} requests \
             in flight on average, the server counted {excess:.1} fewer running + waiting \
             (median)"
        ));
    }
    if c.window_s <= 0.0 && c.sent > 0 {
        notes.push("no steady-state window: too few requests for the load".into());
    }
    notes
}

#[cfg(test)]
mod tests {
    use super::*;

    fn req(sent: f64, ttft: f64, e2e: f64) -> RequestRecord {
        RequestRecord {
            cell: CellKey {
                context_tokens: 1000,
                concurrency: Some(2),
                rate: None,
            },
            scheduled_s: sent,
            sent_s: sent,
            ttft_s: Some(ttft),
            ttft_from_schedule_s: Some(ttft),
            e2e_s: Some(e2e),
            e2e_from_schedule_s: Some(e2e),
            ended_s: Some(sent + e2e),
            tpot_s: Some((e2e - ttft) / 10.0),
            output_tokens: Some(11),
            prompt_tokens: Some(1000),
            ok: true,
            ..Default::default()
        }
    }

    #[test]
    fn closed_loop_window_excludes_ramp_up_and_drain() {
        // Two workers: one starts at 0, the other at 1; both busy until the first stops at 9.
        let rs = [
            req(0.0, 0.5, 3.0),
            req(3.0, 0.5, 3.0),
            req(6.0, 0.5, 3.0),
            req(1.0, 0.5, 4.0),
            req(5.0, 0.5, 5.0),
        ];
        let refs: Vec<&RequestRecord> = rs.iter().collect();
        assert_eq!(window(&refs, Some(2)), Some((1.0, 9.0)));
        let c = summarise(refs[0].cell, &refs, &[], &slo::parse("").unwrap(), 0.9);
        assert_eq!((c.ramp_up_s, c.drain_s, c.window_s), (1.0, 1.0, 8.0));
        assert_eq!((c.sent, c.ok, c.failed), (5, 5, 0));
        assert!((c.in_flight_mean.unwrap() - 2.0).abs() < 1e-9);
        // Ends inside [1, 9]: 3, 5, 6, 9 → 4 requests over 8 s.
        assert!((c.requests_per_s.unwrap() - 0.5).abs() < 1e-9);
        assert!(c.meets_target);
    }

    #[test]
    fn acceptance_is_the_median_over_successful_requests() {
        use crate::backend::spec::{SpecCounts, SpecSource};
        use crate::backend::{Completion, StreamEvent};
        use std::time::Duration;
        let slot = |i: u64| crate::run::Slot {
            index: i,
            scheduled: Duration::ZERO,
            sent: Duration::ZERO,
            start: tokio::time::Instant::now(),
        };
        let done = |steps: u64| {
            let c = Completion {
                events: vec![StreamEvent {
                    at: Duration::from_millis(5),
                    tokens: 1,
                }],
                completion_tokens: Some(12),
                spec: Some(SpecCounts {
                    verify_steps: Some(steps),
                    draft_tokens: None,
                    accepted_tokens: None,
                    server_accept_length: None,
                    source: SpecSource::Server,
                }),
                ..Completion::default()
            };
            crate::load::request::record(CellKey::default(), slot(0), 1.0, Ok(c))
        };
        // 12 tokens, 11 after the prefill's first, in 1, 2 and 11 verify steps:
        // accept 11, 5.5 and 1; a failed request is not counted.
        let mut rs = vec![done(1), done(2), done(11)];
        assert_eq!(rs[0].spec.unwrap().accept_length, Some(11.0));
        let mut failed = done(1);
        failed.ok = false;
        rs.push(failed);
        let refs: Vec<&RequestRecord> = rs.iter().collect();
        let c = summarise(
            CellKey::default(),
            &refs,
            &[],
            &slo::parse("").unwrap(),
            0.9,
        );
        assert_eq!(c.accept_length_median, Some(5.5));
        assert_eq!(c.accept_source, Some(SpecSource::Server));
    }

    #[test]
    fn goodput_counts_failures_and_slow_requests_as_misses() {
        let mut rs = [req(0.0, 0.5, 3.0), req(0.0, 2.0, 4.0), req(3.0, 0.5, 3.0)];
        rs[2].ok = false;
        rs[2].error = Some(crate::record::load::RequestFailure {
            kind: "timeout".into(),
            message: "late".into(),
        });
        let refs: Vec<&RequestRecord> = rs.iter().collect();
        let c = summarise(
            refs[0].cell,
            &refs,
            &[],
            &slo::parse("ttft=1s").unwrap(),
            0.5,
        );
        assert_eq!((c.ok, c.failed, c.timed_out), (2, 1, 1));
        assert!((c.goodput_fraction.unwrap() - 1.0 / 3.0).abs() < 1e-9);
        assert!(!c.meets_target);
        assert!(c.notes.iter().any(|n| n.contains("no server metrics")));
    }

    #[test]
    fn a_client_counting_far_more_in_flight_than_the_server_is_named() {
        let scrape = |client: u64, running: f64| ServerMetricsRecord {
            t_s: 1.0,
            client_in_flight: client,
            server: crate::record::load::ServerReading {
                running: Some(running),
                waiting: Some(0.0),
                ..Default::default()
            },
            ..Default::default()
        };
        let slo = slo::parse("").unwrap();
        // 64 in flight by the client's count; the server sees 10-12 running and none waiting.
        let starved = [scrape(64, 10.0), scrape(64, 12.0)];
        let mut key = req(0.0, 0.5, 3.0).cell;
        key.concurrency = Some(64);
        let many: Vec<RequestRecord> = (0..64).map(|_| req(0.0, 0.5, 3.0)).collect();
        let refs: Vec<&RequestRecord> = many.iter().collect();
        let c = summarise(key, &refs, &starved.iter().collect::<Vec<_>>(), &slo, 0.9);
        assert!(
            c.notes
                .iter()
                .any(|n| n.contains("the client (or a proxy) is the bottleneck")),
            "{:?}",
            c.notes
        );
        let fine = [scrape(64, 60.0)];
        let c = summarise(key, &refs, &fine.iter().collect::<Vec<_>>(), &slo, 0.9);
        assert!(
            !c.notes.iter().any(|n| n.contains("bottleneck")),
            "{:?}",
            c.notes
        );
    }
}
