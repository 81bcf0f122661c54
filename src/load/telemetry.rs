//! The server's own view during a cell: its Prometheus `/metrics` (SGLang and vLLM names)
//! scraped every ~250 ms, each scrape stored beside the client's in-flight count.

use crate::backend::http::Http;
use crate::record::Record;
use crate::record::load::{CellKey, ServerCell, ServerMetricsRecord, ServerReading, ShardTag};
use crate::run::runner::InFlight;
use std::time::Duration;
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

/// Scrape period.
pub const SCRAPE_EVERY: Duration = Duration::from_millis(250);
/// A scrape slower than this is skipped (the server is busy; the next one will come).
const SCRAPE_TIMEOUT: Duration = Duration::from_secs(2);

/// Names per quantity, first found wins. Series of one name (engines, ranks) are summed,
/// except usage fractions, which are averaged.
const RUNNING: &[&str] = &["sglang:num_running_reqs", "vllm:num_requests_running"];
const WAITING: &[&str] = &["sglang:num_queue_reqs", "vllm:num_requests_waiting"];
const KV_USAGE: &[&str] = &[
    "sglang:token_usage",
    "vllm:kv_cache_usage_perc",
    "vllm:gpu_cache_usage_perc",
];
const PREEMPTIONS: &[&str] = &[
    "vllm:num_preemptions_total",
    "sglang:num_retracted_requests_total",
];
/// vLLM counts prefix-cache queries and hits in tokens; SGLang's cached and prompt token
/// counters are the same quantities.
const CACHE_HITS: &[&str] = &["vllm:prefix_cache_hits_total", "sglang:cached_tokens_total"];
const CACHE_QUERIES: &[&str] = &[
    "vllm:prefix_cache_queries_total",
    "sglang:prompt_tokens_total",
];

/// Parse Prometheus text exposition.
pub fn parse(text: &str) -> Result<ServerReading, String> {
    let exposition = crate::backend::prometheus::read(text);
    let values = |names: &[&str]| -> Option<Vec<f64>> {
        names.iter().find_map(|name| {
            let v: Vec<f64> = exposition.scalars(name).filter(|x| x.is_finite()).collect();
            (!v.is_empty()).then_some(v)
        })
    };
    let sum = |names: &[&str]| values(names).map(|v| v.iter().sum());
    let mean = |names: &[&str]| values(names).map(|v| v.iter().sum::<f64>() / v.len() as f64);
    Ok(ServerReading {
        running: sum(RUNNING),
        waiting: sum(WAITING),
        kv_usage: mean(KV_USAGE),
        preemptions_total: sum(PREEMPTIONS),
        prefix_cache_hits_total: sum(CACHE_HITS),
        prefix_cache_queries_total: sum(CACHE_QUERIES),
    })
}

/// Whether the server has usable metrics: `Ok(false)` for a 404 or text without the
/// names above.
pub async fn available(http: &Http) -> bool {
    matches!(fetch(http).await, Some(s) if !s.is_empty())
}

async fn fetch(http: &Http) -> Option<ServerReading> {
    let text = crate::backend::prometheus::fetch(http, SCRAPE_TIMEOUT).await?;
    parse(&text).ok()
}

/// Scrape until `stop` turns true, sending a record per successful scrape.
pub async fn scrape_cell(
    http: Http,
    cell: CellKey,
    shard: Option<ShardTag>,
    start: Instant,
    in_flight: InFlight,
    tx: mpsc::UnboundedSender<Record>,
    mut stop: watch::Receiver<bool>,
) {
    let mut tick = tokio::time::interval(SCRAPE_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = stop.changed() => break,
        }
        if *stop.borrow() {
            break;
        }
        let client = in_flight.get();
        let t = start.elapsed().as_secs_f64();
        if let Some(s) = fetch(&http).await {
            let r = ServerMetricsRecord {
                cell,
                t_s: t,
                client_in_flight: client,
                server: s,
                shard,
            };
            if tx.send(Record::ServerMetrics(r)).is_err() {
                break;
            }
        }
    }
}

/// The client counts this many more in flight than the server's running + waiting
/// (median over scrapes), beyond which the client or a proxy is holding requests back.
/// Two requests of slack cover a request between the client's count and the server's
/// admission at the scrape instant; a quarter covers scrapes racing with bursts.
pub fn client_bottleneck(client_in_flight: f64, excess_median: f64) -> bool {
    excess_median > 2.0_f64.max(0.25 * client_in_flight)
}

/// Summarise one cell's scrapes.
pub fn summarise(scrapes: &[&ServerMetricsRecord]) -> Option<ServerCell> {
    if scrapes.is_empty() {
        return None;
    }
    let max = |f: fn(&ServerMetricsRecord) -> Option<f64>| {
        scrapes.iter().filter_map(|s| f(s)).reduce(f64::max)
    };
    let first_last = |f: fn(&ServerMetricsRecord) -> Option<f64>| {
        let v: Vec<f64> = scrapes.iter().filter_map(|s| f(s)).collect();
        match (v.first(), v.last()) {
            // A counter that fell means the server restarted: count from the restart.
            (Some(a), Some(b)) if b >= a => Some(b - a),
            (Some(_), Some(b)) => Some(*b),
            _ => None,
        }
    };
    let excess: Vec<f64> = scrapes
        .iter()
        .filter_map(|s| {
            let server = s.server.running? + s.server.waiting.unwrap_or(0.0);
            Some(s.client_in_flight as f64 - server)
        })
        .collect();
    Some(ServerCell {
        scrapes: scrapes.len() as u64,
        running_max: max(|s| s.server.running),
        waiting_max: max(|s| s.server.waiting),
        kv_usage_max: max(|s| s.server.kv_usage),
        preemptions: first_last(|s| s.server.preemptions_total),
        queue_onset_s: scrapes
            .iter()
            .find(|s| s.server.waiting.is_some_and(|w| w > 0.0))
            .map(|s| s.t_s),
        client_excess_median: crate::stats::median(&excess),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> String {
        let path = format!(
            "{}/tests/fixtures/metrics/{name}",
            env!("CARGO_MANIFEST_DIR")
        );
        std::fs::read_to_string(path).unwrap()
    }

    #[test]
    fn sglang_metrics_are_read() {
        let s = parse(&fixture("sglang.txt")).unwrap();
        assert_eq!(s.running, Some(6.0));
        assert_eq!(s.waiting, Some(3.0));
        assert_eq!(s.kv_usage, Some(0.28));
        assert_eq!(s.preemptions_total, Some(2.0));
        assert_eq!(s.prefix_cache_hits_total, Some(1.2e5));
    }

    #[test]
    fn vllm_series_are_summed_across_engines_and_usage_averaged() {
        let s = parse(&fixture("vllm.txt")).unwrap();
        assert_eq!(s.running, Some(7.0));
        assert_eq!(s.waiting, Some(1.0));
        assert!((s.kv_usage.unwrap() - 0.6).abs() < 1e-12);
        assert_eq!(s.preemptions_total, Some(6.0));
        assert_eq!(s.prefix_cache_queries_total, Some(16000.0));
        let old = parse(&fixture("vllm_old.txt")).unwrap();
        assert_eq!(old.kv_usage, Some(0.25));
        assert_eq!(old.preemptions_total, None);
    }

    #[test]
    fn text_without_known_names_is_empty() {
        assert!(parse("# nothing\nother_metric 1\n").unwrap().is_empty());
    }

    #[test]
    fn cell_summary_finds_queue_onset_and_counter_deltas() {
        let rec = |t: f64, client: u64, run: f64, wait: f64, pre: f64| ServerMetricsRecord {
            t_s: t,
            client_in_flight: client,
            server: ServerReading {
                running: Some(run),
                waiting: Some(wait),
                preemptions_total: Some(pre),
                ..Default::default()
            },
            ..Default::default()
        };
        let v = [
            rec(0.25, 4, 4.0, 0.0, 10.0),
            rec(0.5, 12, 8.0, 4.0, 11.0),
            rec(0.75, 12, 8.0, 4.0, 13.0),
        ];
        let refs: Vec<&ServerMetricsRecord> = v.iter().collect();
        let c = summarise(&refs).unwrap();
        assert_eq!(c.queue_onset_s, Some(0.5));
        assert_eq!(c.preemptions, Some(3.0));
        assert_eq!(c.waiting_max, Some(4.0));
        assert_eq!(c.client_excess_median, Some(0.0));
        assert!(!client_bottleneck(12.0, 0.0));
        assert!(client_bottleneck(64.0, 40.0));
    }
}
