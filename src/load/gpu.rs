//! GPU telemetry during a cell (`--telemetry-url`): a DCGM exporter's Prometheus text
//! scraped beside the server's `/metrics`, one record per scrape and exporter, a failed
//! scrape recorded with its reason so that bad telemetry is named and nothing else is lost.

use crate::backend::http::Http;
use crate::record::Record;
use crate::record::load::{CellKey, GpuMetricsRecord, GpuReading, ShardTag};
use std::collections::BTreeMap;
use std::time::Duration;
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

/// Watts, per GPU.
pub const POWER: &str = "DCGM_FI_DEV_POWER_USAGE";
/// Millijoules since the driver loaded, per GPU (a counter).
pub const ENERGY: &str = "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION";
/// Percent.
pub const UTIL: &str = "DCGM_FI_DEV_GPU_UTIL";
/// MiB.
pub const FB_USED: &str = "DCGM_FI_DEV_FB_USED";

/// A scrape slower than this is recorded as failed (the next one will come).
const SCRAPE_TIMEOUT: Duration = Duration::from_secs(2);

/// The GPUs in DCGM exporter text, in order of first appearance; `Err` names what is
/// missing when the text holds none of the four metrics.
pub fn parse(text: &str) -> Result<Vec<GpuReading>, String> {
    let exposition = crate::backend::prometheus::read(text);
    let mut order: Vec<String> = Vec::new();
    let mut gpus: BTreeMap<String, GpuReading> = BTreeMap::new();
    for s in &exposition.samples {
        let field: fn(&mut GpuReading) -> &mut Option<f64> = match s.metric.as_str() {
            POWER => |g| &mut g.power_w,
            ENERGY => |g| &mut g.energy_mj,
            UTIL => |g| &mut g.util_pct,
            FB_USED => |g| &mut g.fb_used_mib,
            _ => continue,
        };
        let value = match s.value {
            prometheus_parse::Value::Counter(x)
            | prometheus_parse::Value::Gauge(x)
            | prometheus_parse::Value::Untyped(x) => x,
            _ => continue,
        };
        if !value.is_finite() {
            continue;
        }
        let id = s
            .labels
            .get("gpu")
            .or_else(|| s.labels.get("UUID"))
            .map(str::to_string)
            .unwrap_or_else(|| "0".into());
        if !gpus.contains_key(&id) {
            order.push(id.clone());
        }
        let g = gpus.entry(id.clone()).or_insert_with(|| GpuReading {
            gpu: id,
            ..Default::default()
        });
        *field(g) = Some(value);
    }
    if order.is_empty() {
        return Err(format!(
            "no DCGM metrics in the text (looked for {POWER}, {ENERGY}, {UTIL}, {FB_USED})"
        ));
    }
    Ok(order
        .into_iter()
        .filter_map(|id| gpus.remove(&id))
        .collect())
}

/// The `--telemetry-url` exporters, each URL checked to be http(s).
pub fn exporters(urls: &[String]) -> anyhow::Result<Vec<Http>> {
    urls.iter()
        .map(|u| {
            let ok = reqwest::Url::parse(u)
                .is_ok_and(|p| matches!(p.scheme(), "http" | "https") && p.has_host());
            if !ok {
                anyhow::bail!(
                    "--telemetry-url `{u}`: not an http(s) URL; give the exporter's metrics \
                     URL, e.g. http://gpu-node:9400/metrics"
                );
            }
            Http::new(u, None)
        })
        .collect()
}

/// Scrape each exporter once before the first cell and say what it exports; a bad one is
/// a warning (its cells will name it too), never the end of the run.
pub async fn announce(exporters: &[Http]) {
    for http in exporters {
        match fetch(http).await {
            Ok(gpus) => {
                let has = |f: fn(&GpuReading) -> Option<f64>| gpus.iter().any(|g| f(g).is_some());
                let energy = if has(|g| g.energy_mj) {
                    "energy counter"
                } else if has(|g| g.power_w) {
                    "power only (energy will be integrated from power)"
                } else {
                    "neither energy nor power (no joules per token)"
                };
                eprintln!("telemetry {}: {} GPU(s), {energy}", http.base(), gpus.len());
            }
            Err(e) => eprintln!(
                "warning: telemetry {}: {e}; the run goes on and each cell names it",
                http.base()
            ),
        }
    }
}

/// One scrape: the GPUs' readings, or why there are none.
async fn fetch(http: &Http) -> Result<Vec<GpuReading>, String> {
    let (status, text) = http
        .call(reqwest::Method::GET, "", None, SCRAPE_TIMEOUT)
        .await
        .map_err(|e| format!("unreachable: {e}"))?;
    if status != 200 {
        return Err(format!("HTTP {status}"));
    }
    parse(&text)
}

/// Scrape `http` (a telemetry exporter's full URL) until `stop` turns true, then once
/// more, so that the scrapes span the whole cell; a record per scrape, failed or not.
pub async fn scrape_cell(
    http: Http,
    cell: CellKey,
    shard: Option<ShardTag>,
    start: Instant,
    tx: mpsc::UnboundedSender<Record>,
    mut stop: watch::Receiver<bool>,
) {
    let mut tick = tokio::time::interval(super::telemetry::SCRAPE_EVERY);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        let last = tokio::select! {
            _ = tick.tick() => *stop.borrow(),
            _ = stop.changed() => true,
        };
        let sent = start.elapsed().as_secs_f64();
        let got = fetch(&http).await;
        let t_s = (sent + start.elapsed().as_secs_f64()) / 2.0;
        let (gpus, error) = match got {
            Ok(g) => (g, None),
            Err(e) => (Vec::new(), Some(e)),
        };
        let r = GpuMetricsRecord {
            cell,
            t_s,
            source: http.base().to_string(),
            gpus,
            error,
            shard,
        };
        if tx.send(Record::GpuMetrics(r)).is_err() || last {
            break;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dcgm_text_is_read_per_gpu() {
        let text = "# HELP DCGM_FI_DEV_POWER_USAGE Power draw (in W).\n\
            # TYPE DCGM_FI_DEV_POWER_USAGE gauge\n\
            DCGM_FI_DEV_POWER_USAGE{gpu=\"0\",UUID=\"GPU-a\",modelName=\"H100\"} 301.5\n\
            DCGM_FI_DEV_POWER_USAGE{gpu=\"1\",UUID=\"GPU-b\",modelName=\"H100\"} 280\n\
            # TYPE DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION counter\n\
            DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{gpu=\"1\",UUID=\"GPU-b\"} 2000\n\
            DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{gpu=\"0\",UUID=\"GPU-a\"} 1000\n\
            DCGM_FI_DEV_GPU_UTIL{gpu=\"0\",UUID=\"GPU-a\"} 97\n\
            DCGM_FI_DEV_FB_USED{gpu=\"0\",UUID=\"GPU-a\"} 70000\n\
            DCGM_FI_DEV_SM_CLOCK{gpu=\"0\",UUID=\"GPU-a\"} 1980\n";
        let g = parse(text).unwrap();
        assert_eq!(g.len(), 2);
        assert_eq!(g[0].gpu, "0");
        assert_eq!(g[0].power_w, Some(301.5));
        assert_eq!(g[0].energy_mj, Some(1000.0));
        assert_eq!(g[0].util_pct, Some(97.0));
        assert_eq!(g[0].fb_used_mib, Some(70000.0));
        assert_eq!((g[1].power_w, g[1].energy_mj), (Some(280.0), Some(2000.0)));
        assert_eq!(g[1].util_pct, None);
    }

    #[test]
    fn text_without_dcgm_metrics_is_named() {
        let e = parse("# a server's own metrics\nvllm:num_requests_running 3\n").unwrap_err();
        assert!(e.contains("no DCGM metrics") && e.contains(POWER), "{e}");
    }
}
