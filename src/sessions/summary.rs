//! A cell's record from its turns: TTFT by turn index and warm, hits pooled and by turn,
//! the server's counter beside the client's sum, throughput and goodput. Pure.

use super::chat::CounterReading;
use super::hits;
use super::plan::{SessionsSlo, SloMetric};
use super::record::{
    Hits, NeedleTally, Quantiles, ServerHits, SessionEnd, SessionsCellRecord, TimelinePoint,
    TurnHits, TurnRecord, TurnTtft,
};
use crate::stats::quantile;
use std::collections::BTreeMap;

/// What a cell's summary is made from.
pub struct CellInput<'a> {
    pub slo: &'a SessionsSlo,
    pub sessions: u32,
    pub attempt: u32,
    pub flush: String,
    pub turns: &'a [TurnRecord],
    pub window_s: f64,
    pub timeline: Vec<TimelinePoint>,
    /// The server's hit counter before and after the cell.
    pub counter: Option<(CounterReading, CounterReading)>,
}

/// p50/p95/p99 of `xs`, `None` when empty.
pub fn quantiles(xs: &[f64]) -> Option<Quantiles> {
    Some(Quantiles {
        n: xs.len() as u64,
        p50: quantile(xs, 0.5)?,
        p95: quantile(xs, 0.95)?,
        p99: quantile(xs, 0.99)?,
    })
}

/// Time per output token after the first, seconds.
pub fn tpot_s(t: &TurnRecord) -> Option<f64> {
    let (ttft, e2e, n) = (t.ttft_s?, t.e2e_s?, t.output_tokens?);
    (n > 1).then(|| (e2e - ttft) / (n - 1) as f64)
}

fn metric(t: &TurnRecord, m: SloMetric) -> Option<f64> {
    match m {
        SloMetric::Ttft => t.ttft_s,
        SloMetric::Tpot => tpot_s(t),
        SloMetric::E2e => t.e2e_s,
    }
}

pub fn cell(input: &CellInput<'_>) -> SessionsCellRecord {
    let turns = input.turns;
    let ok: Vec<&TurnRecord> = turns.iter().filter(|t| t.ok).collect();
    let warm: Vec<&TurnRecord> = ok.iter().copied().filter(|t| t.turn >= 2).collect();
    let max_turn = turns.iter().map(|t| t.turn).max().unwrap_or(0);
    let mut by_turn = Vec::new();
    let mut hits_by_turn = Vec::new();
    for k in 1..=max_turn {
        let at: Vec<&TurnRecord> = ok.iter().copied().filter(|t| t.turn == k).collect();
        let ttfts: Vec<f64> = at.iter().filter_map(|t| t.ttft_s).collect();
        if let Some(q) = quantiles(&ttfts) {
            by_turn.push(TurnTtft { turn: k, ttft_s: q });
        }
        if !at.is_empty() {
            hits_by_turn.push(TurnHits {
                turn: k,
                hits: hits::count(
                    at.iter()
                        .map(|t| (t.cached_tokens, t.possible_cached_tokens)),
                ),
            });
        }
    }
    let warm_ttft: Vec<f64> = warm.iter().filter_map(|t| t.ttft_s).collect();
    let mut ended = BTreeMap::new();
    for t in turns.iter() {
        if let Some(e) = t.end {
            *ended.entry(e.name().to_string()).or_insert(0) += 1;
        }
    }
    let mut last: BTreeMap<u32, &TurnRecord> = BTreeMap::new();
    let mut first_sent: BTreeMap<u32, f64> = BTreeMap::new();
    for t in turns.iter() {
        first_sent.entry(t.session).or_insert(t.sent_s);
        if t.ok {
            last.insert(t.session, t);
        }
    }
    let contexts: Vec<f64> = last
        .values()
        .filter_map(|t| Some((t.prompt_tokens? + t.output_tokens.unwrap_or(0)) as f64))
        .collect();
    let session_s: Vec<f64> = turns
        .iter()
        .filter(|t| t.end == Some(SessionEnd::Turns) && t.ok)
        .filter_map(|t| Some(t.sent_s + t.e2e_s? - first_sent.get(&t.session)?))
        .collect();
    let window = input.window_s.max(f64::MIN_POSITIVE);
    let output: u64 = ok.iter().filter_map(|t| t.output_tokens).sum();
    let bounds = &input.slo.bounds;
    let good = warm
        .iter()
        .filter(|t| {
            bounds
                .iter()
                .all(|b| metric(t, b.metric).is_some_and(|v| v <= b.bound_s))
        })
        .count();
    let slo_met = (!warm.is_empty()).then(|| {
        bounds.iter().all(|b| {
            let xs: Vec<f64> = warm.iter().filter_map(|t| metric(t, b.metric)).collect();
            quantile(&xs, b.quantile).is_some_and(|v| v <= b.bound_s)
        })
    });
    let client_tokens: u64 = ok.iter().filter_map(|t| t.cached_tokens).sum();
    SessionsCellRecord {
        sessions: input.sessions,
        attempt: input.attempt,
        flush: input.flush.clone(),
        window_s: input.window_s,
        turns_ok: ok.len() as u64,
        turns_failed: (turns.len() - ok.len()) as u64,
        sessions_started: first_sent.len() as u64,
        ended,
        ttft_s_by_turn: by_turn,
        ttft_s_warm: quantiles(&warm_ttft),
        hits: Hits {
            pooled: hits::count(
                ok.iter()
                    .map(|t| (t.cached_tokens, t.possible_cached_tokens)),
            ),
            by_turn: hits_by_turn,
        },
        server_hits: input
            .counter
            .as_ref()
            .map(|(b, a)| server_hits(b, a, client_tokens)),
        context_at_last_turn: (!contexts.is_empty())
            .then(|| contexts.iter().sum::<f64>() / contexts.len() as f64),
        session_s: quantiles(&session_s),
        turns_per_s: (input.window_s > 0.0).then(|| ok.len() as f64 / window),
        output_tps: (input.window_s > 0.0).then(|| output as f64 / window),
        goodput_turns_per_s: (input.window_s > 0.0 && !bounds.is_empty())
            .then(|| good as f64 / window),
        slo_met,
        needle: ok.iter().any(|t| t.needle.is_some()).then(|| NeedleTally {
            asked: ok.iter().filter(|t| t.needle.is_some()).count() as u64,
            ok: ok
                .iter()
                .filter(|t| t.needle.as_ref().is_some_and(|n| n.ok))
                .count() as u64,
        }),
        timeline: input.timeline.clone(),
    }
}

/// The server's counter delta beside the client's sum. They agree within 1 % (at least
/// one token): the server counts what it reuses as it schedules, the client what it was
/// told per request.
pub fn server_hits(
    before: &CounterReading,
    after: &CounterReading,
    client_tokens: u64,
) -> ServerHits {
    let delta = after.value - before.value;
    let tolerance = (0.01 * client_tokens as f64).max(1.0);
    let agrees = (delta - client_tokens as f64).abs() <= tolerance;
    let note = if delta < 0.0 {
        Some("the counter went down: the server restarted during the cell".to_string())
    } else if agrees {
        None
    } else if delta > client_tokens as f64 {
        Some(
            "the server counted more hits than it reported per request: other clients used \
             it during the cell, it counts recomputation after preemption, or it reports \
             cached tokens only when asked (SGLang --enable-cache-report)"
                .to_string(),
        )
    } else {
        Some(
            "the server counted fewer hits than it reported per request: its counter lags \
             the last steps, or it counts per scheduling step"
                .to_string(),
        )
    };
    ServerHits {
        counter: after.name.clone(),
        delta_tokens: delta,
        client_tokens,
        agrees,
        note,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn turn(session: u32, turn: u32, ttft: f64, cached: u64, possible: u64) -> TurnRecord {
        TurnRecord {
            sessions: 2,
            session,
            turn,
            sent_s: turn as f64,
            prompt_tokens: Some(1000 * turn as u64),
            cached_tokens: Some(cached),
            possible_cached_tokens: possible,
            ttft_s: Some(ttft),
            e2e_s: Some(ttft + 0.5),
            output_tokens: Some(11),
            ok: true,
            end: (turn == 2).then_some(SessionEnd::Turns),
            ..TurnRecord::default()
        }
    }

    #[test]
    fn a_cell_pools_warm_turns_and_hits_by_turn() {
        let slo = SessionsSlo::parse("ttft_p95=2s").unwrap();
        let turns = vec![
            turn(1, 1, 1.0, 0, 0),
            turn(2, 1, 2.0, 0, 0),
            turn(1, 2, 0.1, 960, 960),
            turn(2, 2, 0.3, 480, 960),
        ];
        let c = cell(&CellInput {
            slo: &slo,
            sessions: 2,
            attempt: 0,
            flush: "done".into(),
            turns: &turns,
            window_s: 4.0,
            timeline: Vec::new(),
            counter: Some((
                CounterReading {
                    name: "vllm:prefix_cache_hits_total".into(),
                    value: 100.0,
                },
                CounterReading {
                    name: "vllm:prefix_cache_hits_total".into(),
                    value: 1540.0,
                },
            )),
        });
        assert_eq!(c.ttft_s_by_turn.len(), 2);
        assert_eq!(c.ttft_s_warm.unwrap().n, 2);
        assert_eq!(c.hits.pooled.ratio, Some(0.75));
        assert_eq!(c.hits.by_turn[1].hits.ratio, Some(0.75));
        assert_eq!(c.ended.get("turns"), Some(&2));
        assert_eq!(c.turns_per_s, Some(1.0));
        // Context at the last turn: 2000 prompt + 11 reply tokens.
        assert_eq!(c.context_at_last_turn, Some(2011.0));
        assert_eq!(c.slo_met, Some(true));
        assert_eq!(c.goodput_turns_per_s, Some(0.5));
        let s = c.server_hits.unwrap();
        assert!(s.agrees && s.client_tokens == 1440 && s.delta_tokens == 1440.0);
    }

    #[test]
    fn a_counter_beyond_the_clients_sum_is_explained() {
        let r = |v| CounterReading {
            name: "sglang:cached_tokens_total".into(),
            value: v,
        };
        let s = server_hits(&r(0.0), &r(2000.0), 1000);
        assert!(!s.agrees && s.note.unwrap().contains("other clients"));
        assert!(server_hits(&r(0.0), &r(1005.0), 1000).agrees);
    }
}
