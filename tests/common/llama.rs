//! The real peer: llama.cpp's llama-server on a free loopback port, built and cached by
//! `scripts/llama-server.sh`, with the tiny random-weight model from `scripts/tiny-model.sh`.
//! When the peer cannot be had the test fails loudly, naming the script to run.

use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long llama-server may take to load the tiny model.
const START_TIMEOUT: Duration = Duration::from_secs(120);

fn from_env_or_script(var: &str, script: &str) -> PathBuf {
    if let Ok(p) = std::env::var(var) {
        let p = PathBuf::from(p);
        assert!(p.exists(), "{var}={} does not exist", p.display());
        return p;
    }
    let root = env!("CARGO_MANIFEST_DIR");
    let out = Command::new("bash")
        .arg(format!("{root}/scripts/{script}"))
        .stderr(Stdio::inherit())
        .output()
        .unwrap_or_else(|e| panic!("cannot run scripts/{script}: {e}"));
    assert!(
        out.status.success(),
        "scripts/{script} failed: the llama-server peer is required for this test (set {var} or fix the script)"
    );
    let path = String::from_utf8_lossy(&out.stdout)
        .lines()
        .last()
        .unwrap_or("")
        .trim()
        .to_string();
    let p = PathBuf::from(path);
    assert!(p.exists(), "scripts/{script} printed no existing path");
    p
}

/// One of llama-server's own `timings` recorded on a sample (e.g. `prompt_ms`, `cache_n`).
pub fn timing(s: &ctxbench::record::Sample, key: &str) -> f64 {
    s.server_timings
        .as_ref()
        .and_then(|t| t.get(key))
        .and_then(serde_json::Value::as_f64)
        .unwrap_or_else(|| panic!("timings.{key} missing: {s:?}"))
}

pub struct LlamaServer {
    child: Child,
    pub url: String,
}

impl LlamaServer {
    /// Start llama-server: one slot of 32k context, 2 threads, no prompt cache, loopback only.
    pub fn start() -> LlamaServer {
        Self::start_with_slots(1)
    }

    /// Start llama-server with `slots` parallel slots (`-np`, continuous batching), which
    /// share the 32k context: 32k / `slots` tokens each.
    pub fn start_with_slots(slots: u32) -> LlamaServer {
        let bin = from_env_or_script("CTXBENCH_LLAMA_SERVER", "llama-server.sh");
        let model = from_env_or_script("CTXBENCH_TINY_MODEL", "tiny-model.sh");
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .expect("a free port")
            .port();
        let child = Command::new(&bin)
            .args(["-m"])
            .arg(&model)
            .args(["--host", "127.0.0.1", "--port", &port.to_string()])
            .args([
                "-c",
                "32768",
                "-np",
                &slots.to_string(),
                "-t",
                "2",
                "-tb",
                "2",
                "-b",
                "2048",
                "-ub",
                "512",
                "--no-webui",
                // No host-RAM prompt cache (default 8 GiB): on picking the slot for a new
                // task llama-server first copies the previous prompt's KV state into it,
                // before its prompt timer starts. Measured: 2.6 ms after a 1k prompt,
                // 130 ms after a 16k one (64 MiB), which made TTFT − prompt_ms 57 and
                // 203 ms at 16k in CI. ctxbench defeats caching anyway; without this the
                // gap check would measure that copy, not the client.
                "--cache-ram",
                "0",
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", bin.display()));
        let server = LlamaServer {
            child,
            url: format!("http://127.0.0.1:{port}"),
        };
        server.wait_healthy();
        server
    }

    fn wait_healthy(&self) {
        let start = Instant::now();
        let addr = self.url.trim_start_matches("http://").to_string();
        loop {
            if let Ok(mut s) = std::net::TcpStream::connect(&addr) {
                use std::io::{Read, Write};
                let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
                let _ =
                    s.write_all(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
                let mut buf = String::new();
                let _ = s.read_to_string(&mut buf);
                if buf.starts_with("HTTP/1.1 200") {
                    return;
                }
            }
            assert!(
                start.elapsed() < START_TIMEOUT,
                "llama-server did not become healthy at {}",
                self.url
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

impl Drop for LlamaServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
