//! The /metrics scraper against fake servers serving real SGLang and vLLM metric text, and
//! one without /metrics.

use ctxbench::backend::http::Http;
use ctxbench::load::telemetry::{available, scrape_cell};
use ctxbench::record::Record;
use ctxbench::record::load::CellKey;
use ctxbench::run::runner::InFlight;
use tokio::sync::{mpsc, watch};

async fn serve(metrics: Option<&'static str>) -> String {
    let mut app = axum::Router::new();
    if let Some(text) = metrics {
        app = app.route("/metrics", axum::routing::get(move || async move { text }));
    }
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", l.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(l, app).await });
    url
}

async fn scrapes(url: &str, n: usize) -> Vec<ctxbench::record::load::ServerMetricsRecord> {
    let http = Http::new(url, None).unwrap();
    let (tx, mut rx) = mpsc::unbounded_channel();
    let (stop_tx, stop_rx) = watch::channel(false);
    let task = tokio::spawn(scrape_cell(
        http,
        CellKey::default(),
        None,
        tokio::time::Instant::now(),
        InFlight::default(),
        tx,
        stop_rx,
    ));
    let mut out = Vec::new();
    while out.len() < n {
        match rx.recv().await {
            Some(Record::ServerMetrics(m)) => out.push(m),
            _ => break,
        }
    }
    stop_tx.send(true).unwrap();
    task.await.unwrap();
    out
}

#[tokio::test]
async fn sglang_and_vllm_metrics_become_records() {
    let sglang = serve(Some(include_str!("../fixtures/metrics/sglang.txt"))).await;
    assert!(available(&Http::new(&sglang, None).unwrap()).await);
    let s = scrapes(&sglang, 2).await;
    assert_eq!(s.len(), 2);
    assert_eq!(
        (
            s[0].server.running,
            s[0].server.waiting,
            s[0].server.kv_usage
        ),
        (Some(6.0), Some(3.0), Some(0.28))
    );
    assert!(s[1].t_s > s[0].t_s, "scrapes are spaced in time");
    let vllm = serve(Some(include_str!("../fixtures/metrics/vllm.txt"))).await;
    let v = scrapes(&vllm, 1).await;
    assert_eq!(
        (v[0].server.running, v[0].server.preemptions_total),
        (Some(7.0), Some(6.0))
    );
}

#[tokio::test]
async fn a_server_without_metrics_is_said_to_have_none() {
    let url = serve(None).await;
    assert!(!available(&Http::new(&url, None).unwrap()).await);
}
