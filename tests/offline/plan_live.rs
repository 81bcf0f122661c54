//! `--url`: the live check against a canned SGLang `/server_info` served on 127.0.0.1:0.

use axum::Router;
use axum::routing::get;
use clap::Parser;
use ctxbench::capacity::live::parse_server_info;
use ctxbench::capacity::{PlanArgs, build_report};
use ctxbench::cli::{Cli, Command};
use serde_json::{Value, json};

/// Serve `routes` (path → JSON body) on a free loopback port; returns the base URL.
async fn serve(routes: Vec<(&'static str, Value)>) -> String {
    let mut app = Router::new();
    for (path, body) in routes {
        app = app.route(path, get(move || async move { axum::Json(body) }));
    }
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    format!("http://{addr}")
}

/// The planned setup of every test here: Llama 3 8B on one 80 GiB GPU.
const LLAMA_8B_ONE_GPU: &str = "--preset llama-3-8b --gpu-mem-gib 80 --gpus 1";

fn args(extra: &[&str]) -> PlanArgs {
    let mut argv = vec!["ctxbench", "plan"];
    argv.extend(LLAMA_8B_ONE_GPU.split(' '));
    argv.extend_from_slice(extra);
    match Cli::parse_from(argv).command {
        Command::Plan(args) => args,
        _ => unreachable!("parsed a plan command"),
    }
}

/// `ctxbench plan` on `LLAMA_8B_ONE_GPU` plus `extra`, through the binary.
async fn plan_binary(extra: &[&str]) -> std::process::Output {
    tokio::process::Command::new(env!("CARGO_BIN_EXE_ctxbench"))
        .arg("plan")
        .args(LLAMA_8B_ONE_GPU.split(' '))
        .args(extra)
        .output()
        .await
        .unwrap()
}

// Llama 3 8B on one 80 GiB GPU at the server's fraction 0.85: usable 68 GiB = 73,014,444,032 B
// − weights 8,030,261,248 × 2 B = 16,060,522,496 B → 56,953,921,536 B / 131,072 B per token
// = 434,523.9 → 434,523 tokens.
const PREDICTED_AT_085: u64 = 434_523;

fn sglang_info(max_total_num_tokens: u64) -> Value {
    json!({
        "model_path": "meta-llama/Meta-Llama-3-8B",
        "mem_fraction_static": 0.85,
        "page_size": 1,
        "tp_size": 1,
        "dp_size": 1,
        "kv_cache_dtype": "auto",
        "context_length": null,
        "max_total_tokens": null,
        "status": "ready",
        "max_total_num_tokens": max_total_num_tokens,
        "max_req_input_len": max_total_num_tokens - 6,
        "internal_states": [{"mem_fraction_static": 0.85}]
    })
}

#[tokio::test]
async fn compares_predicted_with_reported_and_adopts_the_server_fraction() {
    // The server holds 5% fewer tokens than predicted.
    let reported = PREDICTED_AT_085 * 95 / 100;
    let url = serve(vec![("/server_info", sglang_info(reported))]).await;
    let report = build_report(&args(&["--url", &url])).await.unwrap();
    assert_eq!(report.resolved.inputs.mem_fraction, 0.85);
    assert_eq!(report.plan.pool_tokens, PREDICTED_AT_085);
    let live = report.live.as_ref().unwrap();
    assert_eq!(live.report.max_total_num_tokens, Some(reported));
    assert_eq!(live.predicted_pool_tokens, PREDICTED_AT_085);
    assert!((live.ratio.unwrap() - 412_796.0 / 434_523.0).abs() < 1e-12);
    // 434,523 × 95 / 100 = 412,796 reported: 21,727 tokens × 131,072 B = 2.652 GiB less KV.
    assert!((live.gap_gib.unwrap() - 21_727.0 * 131_072.0 / (1u64 << 30) as f64).abs() < 1e-9);
    assert!(
        live.hints.iter().any(|h| h.contains("--reserve-gib 2.65")),
        "{:?}",
        live.hints
    );
    assert!(live.report.source_url.ends_with("/server_info"));
}

#[tokio::test]
async fn falls_back_to_get_server_info_and_flags_a_differing_fraction() {
    let url = serve(vec![("/get_server_info", sglang_info(PREDICTED_AT_085))]).await;
    let report = build_report(&args(&["--url", &url, "--mem-fraction", "0.9"]))
        .await
        .unwrap();
    let live = report.live.as_ref().unwrap();
    assert!(live.report.source_url.ends_with("/get_server_info"));
    assert_eq!(report.resolved.inputs.mem_fraction, 0.9);
    assert!(
        live.hints
            .iter()
            .any(|h| h.contains("mem_fraction_static 0.85")),
        "{:?}",
        live.hints
    );
}

#[tokio::test]
async fn a_server_without_the_pool_is_said_so() {
    let url = serve(vec![("/server_info", json!({"version": "x"}))]).await;
    let report = build_report(&args(&["--url", &url])).await.unwrap();
    let live = report.live.as_ref().unwrap();
    assert_eq!(live.report.max_total_num_tokens, None);
    assert_eq!(live.ratio, None);
    assert!(
        report
            .notes()
            .iter()
            .any(|n| n.contains("does not report max_total_num_tokens"))
    );
    // The prediction still uses the default fraction.
    assert_eq!(report.resolved.inputs.mem_fraction, 0.9);
}

#[tokio::test]
async fn not_sglang_and_unreachable_are_errors_naming_the_url() {
    let url = serve(vec![("/health", json!({}))]).await;
    let err = build_report(&args(&["--url", &url]))
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("--url") && err.contains("HTTP 404"), "{err}");

    // A port that was free a moment ago: nothing listens there now.
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let dead = format!("http://127.0.0.1:{port}");
    let err = build_report(&args(&["--url", &dead]))
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("cannot reach"), "{err}");

    let err = build_report(&args(&["--url", "127.0.0.1:1"]))
        .await
        .unwrap_err()
        .to_string();
    assert!(err.contains("http://"), "{err}");
}

#[tokio::test]
async fn bad_flags_fail_before_the_network() {
    // No server at all: the fraction error comes first.
    let err = build_report(&args(&[
        "--url",
        "http://127.0.0.1:9",
        "--mem-fraction",
        "2",
    ]))
    .await
    .unwrap_err()
    .to_string();
    assert!(err.contains("--mem-fraction 2"), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_binary_prints_predicted_against_reported() {
    let url = serve(vec![("/server_info", sglang_info(PREDICTED_AT_085))]).await;
    let out = plan_binary(&["--url", &url, "--format", "json"]).await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["live"]["reported_pool_tokens"], PREDICTED_AT_085);
    assert_eq!(v["live"]["predicted_pool_tokens"], PREDICTED_AT_085);
    assert_eq!(v["live"]["ratio"], 1.0);
    assert_eq!(v["mem_fraction_source"], "server");

    let out = plan_binary(&["--url", &url]).await;
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("reported pool") && text.contains("predicted pool"),
        "{text}"
    );
    assert!(text.contains("1.000"), "{text}");
}

#[test]
fn parses_internal_states_when_the_top_level_lacks_the_pool() {
    let body = json!({
        "tp_size": 8,
        "internal_states": [{"max_total_num_tokens": 123_456, "page_size": 64}]
    });
    let r = parse_server_info("http://x/server_info", &body);
    assert_eq!(r.max_total_num_tokens, Some(123_456));
    assert_eq!(r.page_size, Some(64));
    assert_eq!(r.tp_size, Some(8));
    assert_eq!(r.mem_fraction_static, None);
}
