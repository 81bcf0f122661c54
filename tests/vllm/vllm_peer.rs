//! ctxbench against a real vLLM 0.32 CPU server (the tiny random-weight Llama): one server
//! for the whole binary (vLLM takes about a minute to start), its own `/metrics` and
//! `/server_info` the ground truth the client's figures are held against. Each test takes
//! the server to itself (`exclusive`), since they read its counters.

use crate::common;
use common::vllm::{Config, VllmServer, metric_in};
use common::{SCHED_WAIT_S, TRANSPORT_S};
use ctxbench::record::Sample;
use serde_json::Value;
use std::io::Write;

/// The twin's configuration (`max_num_seqs` 4, tests/vllm/twin_vllm.rs): one server for
/// both, started once. Four slots are as many as any test here keeps in flight.
fn server() -> std::sync::Arc<VllmServer> {
    VllmServer::shared(Config {
        max_num_seqs: Some(common::vllm::TINY_SLOTS),
        ..Config::default()
    })
}

/// A label's value in the server's `vllm:cache_config_info` series.
fn cache_config_label(metrics: &str, label: &str) -> String {
    let line = metrics
        .lines()
        .find(|l| l.starts_with("vllm:cache_config_info{"))
        .expect("/metrics has vllm:cache_config_info");
    let key = format!("{label}=\"");
    let at = line
        .find(&key)
        .unwrap_or_else(|| panic!("no {label} in {line}"))
        + key.len();
    line[at..].split('"').next().unwrap().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn probe_reads_what_vllm_states() {
    let server = server();
    let _alone = server.exclusive().await;
    let out = common::bin::run_ok(&["probe", "--url", &server.url, "--format", "json"]);
    let text = common::bin::text(&out.stdout);
    println!("ctxbench probe --format json:\n{text}");
    let p: Value = serde_json::from_str(&text).expect("probe prints JSON");
    let (_, version) = server.get("/version");
    let version: Value = serde_json::from_str(&version).unwrap();
    let metrics = server.metrics();
    let (status, info) = server.get("/server_info?config_format=json");
    assert_eq!(status, 200, "dev mode serves /server_info");
    let cfg: Value = serde_json::from_str::<Value>(&info).unwrap()["vllm_config"].clone();

    assert_eq!(p["kind"], "vllm");
    assert_eq!(p["version"], version["version"]);
    assert_eq!(p["version"], "0.32.0");
    assert_eq!(p["model"], "tiny-llama");
    assert_eq!(p["context_length"], 8192);
    let block: u64 = cache_config_label(&metrics, "block_size").parse().unwrap();
    let pool: u64 = cache_config_label(&metrics, "kv_cache_size_tokens")
        .parse()
        .unwrap();
    let blocks: u64 = cache_config_label(&metrics, "num_gpu_blocks")
        .parse()
        .unwrap();
    assert_eq!(p["page_size"], block);
    assert_eq!(p["kv_pool_tokens"], pool);
    assert_eq!(pool, blocks * block, "the pool is whole pages");
    assert_eq!(p["prefix_cache"], true);
    assert_eq!(
        cache_config_label(&metrics, "enable_prefix_caching"),
        "True"
    );
    assert_eq!(
        p["max_running_requests"],
        cfg["scheduler_config"]["max_num_seqs"]
    );
    assert_eq!(
        p["chunked_prefill_tokens"],
        cfg["scheduler_config"]["max_num_batched_tokens"]
    );
    assert_eq!(
        p["reports_cached_tokens"], true,
        "started with --enable-prompt-tokens-details"
    );
    assert!(p["speculative"].is_null(), "no speculation on this server");
    assert_eq!(p["tokenize"], true);
    assert_eq!(p["flush"], "/reset_prefix_cache");
    for (field, src) in [
        ("version", "/version"),
        ("page_size", "vllm:cache_config_info block_size"),
        (
            "kv_pool_tokens",
            "vllm:cache_config_info kv_cache_size_tokens",
        ),
        ("prefix_cache", "enable_prefix_caching"),
        ("max_running_requests", "max_num_seqs"),
        ("chunked_prefill_tokens", "max_num_batched_tokens"),
        ("reports_cached_tokens", "a 1-token request"),
    ] {
        let s = p["sources"][field].as_str().unwrap_or_default();
        assert!(s.contains(src), "{field} from {s:?}");
    }
    // The table names the sources too.
    let out = common::bin::run_ok(&["probe", "--url", &server.url]);
    let table = common::bin::text(&out.stdout);
    println!("{table}");
    assert!(
        table.contains(&format!(
            "{block} tokens (from /metrics vllm:cache_config_info block_size)"
        )),
        "{table}"
    );
}

/// Bounds on ctxbench's figures against vLLM's own phase times for the same request
/// (`server_timings`, from its `/metrics` histograms), derived in `docs/validity.md`.
mod bounds {
    use super::*;

    /// One of the phase times.
    pub fn phase(s: &Sample, key: &str) -> f64 {
        s.server_timings
            .as_ref()
            .and_then(|t| t.get(key))
            .and_then(Value::as_f64)
            .unwrap_or_else(|| panic!("server_timings.{key} missing: {s:?}"))
    }

    /// vLLM's decode step, from its own decode phase over the `output − 1` tokens after
    /// the first.
    pub fn step_s(s: &Sample) -> f64 {
        phase(s, "decode_s") / (s.output_tokens.unwrap() as f64 - 1.0)
    }

    /// What the API server does with the prompt before vLLM's TTFT clock starts at the
    /// request's arrival in the engine client (reading the body and validating the id list
    /// in Python), per prompt token.
    pub const PER_PROMPT_TOKEN_S: f64 = 2.0e-6;

    /// Bound on client TTFT − vLLM's TTFT (arrival to first token, both clocks in the API
    /// server process): the transport both ways, the request's body read and validated
    /// before arrival, and the first token's way out (detokenised, put on the request's
    /// queue, written as SSE) while the engine core's process already runs the next step:
    /// waits for a core of up to a step each, as for llama-server.
    pub fn ttft_gap(s: &Sample) -> f64 {
        TRANSPORT_S + SCHED_WAIT_S + PER_PROMPT_TOKEN_S * s.context_tokens as f64 + 2.0 * step_s(s)
    }

    /// Bound on |client decode window − vLLM's decode phase|: both run from the first
    /// token to the last (the server's at its engine core, the client's as the events
    /// arrive), so they differ by the last event's delay minus the first's.
    pub fn decode_gap(s: &Sample) -> f64 {
        TRANSPORT_S + SCHED_WAIT_S + step_s(s)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sweep_records_vllms_own_phase_times_per_sample() {
    let server = server();
    let _alone = server.exclusive().await;
    let before = metric_in(&server.metrics(), "vllm:e2e_request_latency_seconds_count").unwrap();
    let r = common::flags("1k,2k,4k,7k", 3, 32)
        .warm_up()
        .with(&["--timeout", "600"])
        .run(&server.url)
        .await;
    println!(
        "{}",
        ctxbench::report::render(&r.run, &r.summary, ctxbench::cli::Format::Table)
    );
    assert_eq!(r.run.target.api, "vllm");
    assert_eq!(r.run.target.server_info["page_size"], 128);
    assert_eq!(r.samples.len(), 12);
    for s in &r.samples {
        let ttft = s.ttft_s.unwrap();
        let server_ttft = bounds::phase(s, "ttft_s");
        let window = (s.output_tokens.unwrap() as f64 - 1.0) / s.decode_tps.unwrap();
        let server_decode = bounds::phase(s, "decode_s");
        println!(
            "{:>5} tokens: TTFT {:.1} ms − server {:.1} = {:+.2} ms (bound {:.1}; prefill {:.1}, queue {:.2}); decode window {:.1} − server {:.1} = {:+.2} ms (bound {:.1})",
            s.context_tokens,
            ttft * 1e3,
            server_ttft * 1e3,
            (ttft - server_ttft) * 1e3,
            bounds::ttft_gap(s) * 1e3,
            bounds::phase(s, "prefill_s") * 1e3,
            bounds::phase(s, "queue_s") * 1e3,
            window * 1e3,
            server_decode * 1e3,
            (window - server_decode) * 1e3,
            bounds::decode_gap(s) * 1e3,
        );
    }
    for s in &r.samples {
        assert!(s.valid, "{s:?}");
        assert_eq!(
            s.prompt_tokens,
            Some(s.context_tokens),
            "exact prompt length"
        );
        assert_eq!(s.cached_tokens, Some(0), "the cache was defeated: {s:?}");
        let t = s.server_timings.as_ref().unwrap();
        assert_eq!(t["source"], "vllm_metrics_delta");
        let ttft = s.ttft_s.unwrap();
        let gap = ttft - bounds::phase(s, "ttft_s");
        assert!(
            gap >= 0.0 && gap < bounds::ttft_gap(s),
            "TTFT − vLLM's TTFT = {gap} s at {}",
            s.context_tokens
        );
        // vLLM's own phases nest: queue + prefill ≤ its TTFT ≤ e2e.
        let (queue, prefill) = (bounds::phase(s, "queue_s"), bounds::phase(s, "prefill_s"));
        assert!(queue + prefill <= bounds::phase(s, "ttft_s") + 1e-6, "{t}");
        assert!(
            bounds::phase(s, "ttft_s") <= bounds::phase(s, "e2e_s"),
            "{t}"
        );
        let window = (s.output_tokens.unwrap() as f64 - 1.0) / s.decode_tps.unwrap();
        let d = window - bounds::phase(s, "decode_s");
        assert!(
            d.abs() < bounds::decode_gap(s),
            "decode window − vLLM's decode = {d} s at {}",
            s.context_tokens
        );
    }
    // Every request the sweep sent was counted once: samples, warm-up, and its checks.
    let after = metric_in(&server.metrics(), "vllm:e2e_request_latency_seconds_count").unwrap();
    assert!(after - before >= r.samples.len() as f64);
    for p in &r.summary.points {
        let dt = p
            .ttft_minus_server_s
            .expect("client − server TTFT in the summary");
        assert!(dt > 0.0, "client TTFT exceeds vLLM's prefill phase: {dt}");
        assert!(p.decode_minus_server_s.is_some());
    }
}

/// A trace of three conversations (each turn the last plus a block) and two strangers,
/// in 200-token blocks: a page of 128 splits blocks, so the hits possible are the shared
/// prefix rounded down to whole pages (200 → 128, 400 → 384, 600 → 512).
fn write_trace(path: &std::path::Path) {
    let mut f = std::fs::File::create(path).unwrap();
    let mut t = 0;
    for conv in 0..3u64 {
        for k in 0..4u64 {
            let ids: Vec<u64> = (0..=k).map(|b| conv * 100 + b).collect();
            writeln!(
                f,
                r#"{{"timestamp": {t}, "input_length": {}, "output_length": 4, "hash_ids": {ids:?}}}"#,
                (k + 1) * 200
            )
            .unwrap();
            t += 400;
        }
    }
    for s in 0..2u64 {
        writeln!(
            f,
            r#"{{"timestamp": {t}, "input_length": 300, "output_length": 4, "hash_ids": [{}, {}]}}"#,
            900 + s,
            950 + s
        )
        .unwrap();
        t += 400;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_trace_replays_hits_equal_to_vllms_counter() {
    let server = server();
    let _alone = server.exclusive().await;
    server.reset_prefix_cache();
    let dir = tempfile::tempdir().unwrap();
    let (trace, out) = (dir.path().join("t.jsonl"), dir.path().join("out.jsonl"));
    write_trace(&trace);
    let hits_before = server.metric("vllm:prefix_cache_hits_total");
    let args = common::load_args(
        &server.url,
        &[
            "--trace",
            trace.to_str().unwrap(),
            "--block-tokens",
            "200",
            "--time-scale",
            "1",
            "--output-tokens",
            "4",
            "--slo",
            "",
            "--out",
            out.to_str().unwrap(),
        ],
    );
    let r = ctxbench::load::execute(args)
        .await
        .expect("the trace replays");
    let hits_after = server.metric("vllm:prefix_cache_hits_total");
    print!("{}", ctxbench::load_report::trace_report::text(&r));
    assert_eq!(r.requests.len(), 14);
    let page = 128;
    for q in &r.requests {
        assert!(q.ok, "{q:?}");
        let info = q.trace.as_ref().unwrap();
        assert_eq!(
            info.possible_cached_tokens % page,
            0,
            "possible hits are whole pages of the server's"
        );
        assert_eq!(
            info.possible_cached_tokens,
            info.shared_tokens / page * page,
            "line {}",
            info.line
        );
        assert_eq!(
            q.cached_tokens,
            Some(info.possible_cached_tokens),
            "line {}: observed = possible",
            info.line
        );
    }
    let h = ctxbench::load_report::trace_report::hits(&r).unwrap();
    assert_eq!(h.exact, 14, "every request exactly as possible");
    assert_eq!(
        h.observed_cached_tokens,
        Some((hits_after - hits_before) as u64),
        "observed hits sum to the delta of vllm:prefix_cache_hits_total"
    );
    assert!(h.possible_cached_tokens > 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sweep_depth_turns_reuse_the_prefix_in_whole_pages() {
    let server = server();
    let _alone = server.exclusive().await;
    let r = common::sweep(
        &server.url,
        &[
            "--depth",
            "0,2k,5k",
            "--turn-tokens",
            "512",
            "--reps",
            "2",
            "--output-tokens",
            "16",
        ],
    )
    .await;
    println!(
        "{}",
        ctxbench::report::render(&r.run, &r.summary, ctxbench::cli::Format::Table)
    );
    let cfg = r.run.config.depth.as_ref().expect("depth config");
    assert_eq!(cfg.reuse_evidence, "server_counts");
    let turns: Vec<&Sample> = r.samples.iter().filter(|s| s.method == "turn").collect();
    assert_eq!(turns.len(), 6);
    for s in &turns {
        let depth = s.depth_tokens.unwrap();
        let cached = s.cached_tokens.expect("vLLM reports cached tokens");
        println!(
            "depth {depth:>5}: cached {cached}, TTFT {:.1} ms",
            s.ttft_s.unwrap() * 1e3
        );
        assert!(s.valid, "{s:?}");
        // The API adds nothing in front (measured by the sweep), so the prefix is reused
        // up to its last whole page of vLLM's.
        assert_eq!(
            cached,
            depth / 128 * 128,
            "cached {cached} at depth {depth}"
        );
    }
    for s in r.samples.iter().filter(|s| s.method == "stream") {
        assert_eq!(s.cached_tokens, Some(0), "cold points stay cold: {s:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_load_cells_running_count_agrees_with_the_clients_in_flight() {
    let server = server();
    let _alone = server.exclusive().await;
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("load.jsonl");
    // vLLM writes its running/waiting gauges after each engine step, so they lag the
    // client by up to one step. A step that prefills several prompts is the long one: on
    // an AVX2-only CI host (stop 44) four 1k prompts took 1.3 s in one step, against 1.8 s
    // of decoding after it (128 tokens at 13.8 ms), and the median disagreement was 2.
    // Short prompts and long answers keep that step a small share of each request's life
    // (256 tokens beside 256 decode steps), on fast hosts and slow ones alike.
    let args = common::load_args(
        &server.url,
        &[
            "--lengths",
            "256",
            "--concurrency",
            "4",
            "--requests",
            "16",
            "--output-tokens",
            "256",
            "--slo",
            "",
            "--out",
            out.to_str().unwrap(),
        ],
    );
    let r = ctxbench::load::execute(args).await.expect("load runs");
    assert_eq!(r.cells.len(), 1);
    let c = &r.cells[0];
    assert_eq!((c.sent, c.ok, c.failed), (16, 16, 0), "{c:?}");
    let scrapes: Vec<_> = r.server_metrics.iter().collect();
    let diffs: Vec<i64> = scrapes
        .iter()
        .map(|m| {
            m.client_in_flight as i64
                - (m.server.running.unwrap() + m.server.waiting.unwrap()) as i64
        })
        .collect();
    for m in &scrapes {
        println!(
            "t {:.2} s: client in flight {}, vLLM running {} waiting {}",
            m.t_s,
            m.client_in_flight,
            m.server.running.unwrap(),
            m.server.waiting.unwrap()
        );
    }
    // The client counts a request from its send to the last event; vLLM from the engine
    // taking it (after the API server read and validated it) to its last token. So the
    // server never counts more than the client, and the two differ only at a request's
    // two ends: mostly they agree (median), and at the cell's busiest vLLM runs exactly
    // the client's 4.
    assert!(scrapes.len() >= 4, "{} scrapes", scrapes.len());
    assert!(
        diffs.iter().all(|&d| d >= 0),
        "vLLM counted more: {diffs:?}"
    );
    let server_cell = c.server.as_ref().expect("the cell's server view");
    assert_eq!(server_cell.client_excess_median, Some(0.0), "{diffs:?}");
    assert_eq!(server_cell.running_max, Some(4.0));
}
