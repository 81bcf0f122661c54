//! Shared test helpers: an in-process simulator on a free loopback port, and sweeps driven
//! through the same entry point as the command line.
#![allow(dead_code)]

pub mod bin;
pub mod dist;
pub mod k8s;
pub mod llama;
pub mod proxy;
pub mod records;
pub mod report;
pub mod sessions;
pub mod sim_http;
pub mod stash;
pub mod text_backend;
pub mod twin;
pub mod vllm;
pub mod vllm_suite;

use clap::Parser;
use ctxbench::cli::{Cli, Command, SweepArgs};
use ctxbench::sim::{SimConfig, SimServer};
use ctxbench::sweep::{SweepResult, execute};

/// A real peer's path: from `var`, or the last line `scripts/SCRIPT ARGS` prints (the
/// script builds what is missing). A peer that cannot be had fails the test loudly.
pub fn peer_path(var: &str, script: &str, args: &[&str]) -> std::path::PathBuf {
    use std::process::{Command, Stdio};
    if let Ok(p) = std::env::var(var) {
        let p = std::path::PathBuf::from(p);
        assert!(p.exists(), "{var}={} does not exist", p.display());
        return p;
    }
    let root = env!("CARGO_MANIFEST_DIR");
    let out = Command::new("bash")
        .arg(format!("{root}/scripts/{script}"))
        .args(args)
        .stderr(Stdio::inherit())
        .output()
        .unwrap_or_else(|e| panic!("cannot run scripts/{script}: {e}"));
    assert!(
        out.status.success(),
        "scripts/{script} failed: the peer is required for this test (set {var} or fix the script)"
    );
    let p = std::path::PathBuf::from(
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .last()
            .unwrap_or("")
            .trim(),
    );
    assert!(p.exists(), "scripts/{script} printed no existing path");
    p
}

/// Simulator flags as on the command line (e.g. `["--spec", "3"]`).
pub async fn sim(flags: &[&str]) -> SimServer {
    let mut argv = vec!["ctxbench", "sim", "--host", "127.0.0.1", "--port", "0"];
    argv.extend_from_slice(flags);
    let Command::Sim(a) = Cli::try_parse_from(argv).expect("sim flags parse").command else {
        unreachable!()
    };
    SimServer::start(
        &a.host,
        a.port,
        SimConfig {
            cost: a.cost,
            seed: a.seed,
            model_name: a.model_name,
        },
    )
    .await
    .expect("simulator starts")
}

/// `twin calibrate` flags against `url`, the profile written to `out`, then `extra`.
pub fn calibrate_args(
    url: &str,
    out: &std::path::Path,
    extra: &[&str],
) -> ctxbench::twin::CalibrateArgs {
    use ctxbench::cli::TwinCommand;
    let mut argv = vec!["ctxbench", "twin", "calibrate", "--url", url];
    argv.extend(["--out", out.to_str().unwrap()]);
    argv.extend_from_slice(extra);
    let Command::Twin(t) = Cli::try_parse_from(argv).expect("flags parse").command else {
        unreachable!()
    };
    let TwinCommand::Calibrate(a) = t.command else {
        unreachable!()
    };
    a
}

pub fn sweep_args(url: &str, flags: &[&str]) -> SweepArgs {
    let mut argv = vec!["ctxbench", "sweep", "--url", url];
    argv.extend_from_slice(flags);
    let Command::Sweep(a) = Cli::try_parse_from(argv)
        .expect("sweep flags parse")
        .command
    else {
        unreachable!()
    };
    *a
}

pub async fn sweep(url: &str, flags: &[&str]) -> SweepResult {
    execute(sweep_args(url, flags)).await.expect("sweep runs")
}

/// The flags most sweep tests pass, built instead of spelled out: `--lengths L --reps R
/// --output-tokens O --no-warmup` (see [`flags`]), then any others.
#[derive(Debug, Clone)]
pub struct SweepFlags {
    argv: Vec<String>,
    warm_up: bool,
}

/// `--lengths lengths --reps reps --output-tokens output_tokens --no-warmup`.
pub fn flags(lengths: &str, reps: u32, output_tokens: u64) -> SweepFlags {
    SweepFlags {
        argv: vec![
            "--lengths".into(),
            lengths.into(),
            "--reps".into(),
            reps.to_string(),
            "--output-tokens".into(),
            output_tokens.to_string(),
        ],
        warm_up: false,
    }
}

impl SweepFlags {
    /// Keep the warm-up request (drop `--no-warmup`).
    pub fn warm_up(mut self) -> Self {
        self.warm_up = true;
        self
    }

    /// More flags, as on the command line.
    pub fn with(mut self, more: &[&str]) -> Self {
        self.argv.extend(more.iter().map(|s| s.to_string()));
        self
    }

    /// The flags as on the command line.
    pub fn argv(&self) -> Vec<&str> {
        let mut v: Vec<&str> = self.argv.iter().map(String::as_str).collect();
        if !self.warm_up {
            v.push("--no-warmup");
        }
        v
    }

    pub fn args(&self, url: &str) -> SweepArgs {
        sweep_args(url, &self.argv())
    }

    /// Run the sweep against `url` through the library entry point.
    pub async fn run(&self, url: &str) -> SweepResult {
        sweep(url, &self.argv()).await
    }
}

/// Simulator costs for load tests: cheap and fixed, 20 ms prefill, 2 ms per decode step, no
/// context terms.
pub const FIXED_COSTS: &[&str] = &[
    "--sim-t0", "0.020", "--sim-p0", "1e12", "--sim-q", "0", "--sim-d0", "0.002", "--sim-d1", "0",
];

/// Simulator costs for trace and delivery tests: 2 ms + 1M tok/s prefill (a 4k prompt ~6 ms,
/// a 6k one ~8 ms), 1 ms per decode step.
pub const FAST_PREFILL_COSTS: &[&str] = &[
    "--sim-t0", "0.002", "--sim-p0", "1e6", "--sim-q", "0", "--sim-d0", "0.001", "--sim-d1", "0",
];

/// How long a test waits for a condition it polls (a server recording its truth after a
/// broken stream): far above the milliseconds it takes, so a loaded machine does not fail it.
pub const POLL_LIMIT: std::time::Duration = std::time::Duration::from_secs(10);

/// The simulator's truth for the requests a sweep measured (and its warm-up): without the
/// sweep's pre-measurement probes (API prefix, transport), which are 64-token prompts.
pub fn measured_truth(server: &SimServer) -> Vec<ctxbench::sim::RequestTruth> {
    server
        .truth()
        .into_iter()
        .filter(|t| t.prompt_tokens > ctxbench::sweep::allowance::PROBE_TOKENS)
        .collect()
}

/// Truth is recorded as a stream ends: poll until the server has `n` records (at most
/// [`POLL_LIMIT`]), then return them all, so the caller asserts the exact count.
pub async fn truth_after(server: &SimServer, n: usize) -> Vec<ctxbench::sim::RequestTruth> {
    poll_truth(server, n, |s| s.truth()).await
}

/// [`truth_after`] for a sweep: `n` records besides the pre-measurement probes.
pub async fn measured_truth_after(
    server: &SimServer,
    n: usize,
) -> Vec<ctxbench::sim::RequestTruth> {
    poll_truth(server, n, measured_truth).await
}

async fn poll_truth(
    server: &SimServer,
    n: usize,
    read: impl Fn(&SimServer) -> Vec<ctxbench::sim::RequestTruth>,
) -> Vec<ctxbench::sim::RequestTruth> {
    let until = tokio::time::Instant::now() + POLL_LIMIT;
    loop {
        let truth = read(server);
        if truth.len() >= n || tokio::time::Instant::now() >= until {
            return truth;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
}

/// The same measurement, floats equal to 1e-12 relative (serde_json without its
/// `float_roundtrip` feature may read a float back one ulp off).
pub fn same_sample(a: &ctxbench::record::Sample, b: &ctxbench::record::Sample) -> bool {
    let close = |x: Option<f64>, y: Option<f64>| match (x, y) {
        (Some(x), Some(y)) => (x - y).abs() <= 1e-12 * x.abs().max(y.abs()),
        (x, y) => x == y,
    };
    let key = |s: &ctxbench::record::Sample| {
        (
            s.context_tokens,
            s.rep,
            s.method.clone(),
            s.valid,
            s.flags.clone(),
            s.prompt_tokens,
            s.output_tokens,
        )
    };
    key(a) == key(b)
        && close(a.ttft_s, b.ttft_s)
        && close(a.decode_tps, b.decode_tps)
        && close(a.prefill_tps, b.prefill_tps)
}

/// Both simulator personas with an 8192-token limit, and where `probe` finds that limit.
pub const PERSONAS_8192: [(&[&str], &str); 2] = [
    (&["--context-length", "8192"], "/server_info context_length"),
    (
        &["--persona", "openai", "--context-length", "8192"],
        "/v1/models data[0].max_model_len",
    ),
];

/// Whether the sample carries flag `f`.
pub fn has(s: &ctxbench::record::Sample, f: ctxbench::record::Flag) -> bool {
    s.flags.contains(&f)
}

/// What `probe` finds at `url`.
pub async fn probe_url(url: &str) -> ctxbench::backend::detect::ServerInfo {
    let http = ctxbench::backend::http::Http::new(url, None).unwrap();
    ctxbench::backend::detect::probe(&http)
        .await
        .expect("probe")
}

/// What separates a client timestamp from the server's own, when nothing waits for a core:
/// loopback send and receive, task queueing and slot launch in llama-server (measured
/// 0.7 ms at 1k, 3.5 ms at 16k with the host prompt cache off, see `llama::LlamaServer::start`).
pub const TRANSPORT_S: f64 = 0.010;
/// A wait for a core that the other load takes, regardless of the server's step: measured
/// under compile load, a wake-up lagged 14 ms beyond two 1.5 ms steps (1k gap 16.7 ms) and
/// a last chunk 10.5 ms beyond a 4.5 ms step (16k decode window −15 ms); doubled.
pub const SCHED_WAIT_S: f64 = 0.030;
/// Relative difference |a − b| / b.
pub fn rel(a: f64, b: f64) -> f64 {
    (a - b).abs() / b.abs()
}

/// Held while a timing test runs; dropping it lets the next one start.
pub struct TimingGuard {
    _in_process: tokio::sync::MutexGuard<'static, ()>,
    _across_processes: std::fs::File,
}

/// Tests that assert timings take this first: the harness runs tests of one file in
/// parallel, and several simulated sweeps on two cores would measure the contention. The
/// mutex orders the tests of one binary; an exclusive lock on a file in the temp directory
/// orders test binaries run at the same time (released by the OS even if a test crashes).
pub async fn timing_lock() -> TimingGuard {
    static LOCK: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    let in_process = LOCK.lock().await;
    let path = std::env::temp_dir().join("ctxbench-timing-tests.lock");
    let file = tokio::task::spawn_blocking(move || lock_file(&path))
        .await
        .expect("the lock task runs")
        .expect("the timing lock file can be opened and locked");
    TimingGuard {
        _in_process: in_process,
        _across_processes: file,
    }
}

/// An exclusive lock on the file at `path` (created if missing), held until the file is
/// dropped; the OS releases it even if the process dies. Blocks until it is free.
pub fn lock_file(path: &std::path::Path) -> std::io::Result<std::fs::File> {
    let file = std::fs::File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(path)?;
    file.lock()?;
    Ok(file)
}

/// The backend for `api` on the server at `url`, as the command line connects (completions
/// endpoint, model and key left to the probe).
pub async fn connect(url: &str, api: ctxbench::choices::ApiChoice) -> ctxbench::backend::Connected {
    ctxbench::backend::connect(
        url,
        api,
        ctxbench::choices::Endpoint::Completions,
        None,
        None,
    )
    .await
    .unwrap()
}

/// No two samples' content spans overlap within a document (`--corpus`, `--dataset`).
pub fn assert_disjoint(samples: &[&ctxbench::record::Sample]) {
    let mut by_doc: std::collections::HashMap<&str, Vec<&ctxbench::record::DocSpan>> =
        std::collections::HashMap::new();
    for s in samples {
        let src = s
            .source
            .as_ref()
            .expect("a corpus sample records its source");
        assert!(!src.spans.is_empty());
        for span in &src.spans {
            assert!(span.start < span.end, "empty span {span:?}");
            by_doc.entry(&span.doc).or_default().push(span);
        }
    }
    for (doc, mut spans) in by_doc {
        spans.sort_by_key(|s| s.start);
        for w in spans.windows(2) {
            assert!(
                w[0].end <= w[1].start,
                "{doc}: spans {:?} and {:?} overlap",
                w[0],
                w[1]
            );
        }
    }
}

/// `ctxbench load --url URL` with `flags`, parsed as the command line would be.
pub fn load_args(url: &str, flags: &[&str]) -> ctxbench::cli::LoadArgs {
    let mut argv = vec!["ctxbench", "load", "--url", url];
    argv.extend_from_slice(flags);
    let Command::Load(a) = Cli::try_parse_from(argv).expect("load flags parse").command else {
        unreachable!()
    };
    *a
}

/// A result file's sample records hold every (length, rep) pair of `lengths` × `0..reps`
/// exactly once.
pub fn assert_each_pair_once(records: &[serde_json::Value], lengths: &[u64], reps: u64) {
    let mut pairs: Vec<(u64, u64)> = records
        .iter()
        .filter(|v| v["type"] == "sample")
        .map(|v| {
            (
                v["context_tokens"].as_u64().unwrap(),
                v["rep"].as_u64().unwrap(),
            )
        })
        .collect();
    pairs.sort();
    let want: Vec<(u64, u64)> = lengths
        .iter()
        .flat_map(|n| (0..reps).map(move |r| (*n, r)))
        .collect();
    assert_eq!(pairs, want, "each pair measured exactly once");
}

/// The summary's note on truncation (the server kept fewer prompt tokens than sent).
pub fn truncation_note(notes: &[String]) -> &str {
    notes
        .iter()
        .find(|n| n.contains("truncated"))
        .unwrap_or_else(|| panic!("no truncation note: {notes:?}"))
}
