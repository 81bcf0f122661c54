//! The release artefacts scripts/dist.sh builds (the manylinux2014 wheel and the portable
//! binary), found through the environment variables scripts/test.sh exports, and a
//! `ctxbench sim` child process on a free loopback port.
#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The artefact named by `var`; a missing one fails the test, saying how to build it.
pub fn artefact(var: &str) -> PathBuf {
    let path = std::env::var_os(var).map(PathBuf::from).unwrap_or_else(|| {
        panic!(
            "{var} is not set: the release artefacts are built by scripts/dist.sh, which \
             `bash scripts/test.sh` runs before the tests (or by hand: \
             eval \"$(bash scripts/dist.sh)\"; export CTXBENCH_WHEEL CTXBENCH_PORTABLE)"
        )
    });
    assert!(
        path.is_file(),
        "{var}={} does not exist: run scripts/dist.sh again",
        path.display()
    );
    path
}

/// A `ctxbench sim --port 0` process, killed on drop.
pub struct SimProcess {
    child: Child,
    pub url: String,
}

impl SimProcess {
    /// Starts `bin sim --port 0 extra…` and waits for its "listening on" line.
    pub fn start(bin: &std::path::Path, extra: &[&str]) -> SimProcess {
        let mut child = Command::new(bin)
            .args(["sim", "--host", "127.0.0.1", "--port", "0"])
            .args(extra)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("{} sim: {e}", bin.display()));
        let stderr = child.stderr.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Some(rest) = line.split("listening on ").nth(1) {
                    let url = rest.split_whitespace().next().unwrap_or_default();
                    let _ = tx.send(url.to_string());
                }
            }
        });
        let deadline = Instant::now() + Duration::from_secs(20);
        let url = rx
            .recv_timeout(deadline - Instant::now())
            .unwrap_or_else(|_| {
                let _ = child.kill();
                panic!("{} sim printed no listening line in 20 s", bin.display())
            });
        assert!(url.starts_with("http://127.0.0.1:"), "sim listens on {url}");
        SimProcess { child, url }
    }
}

impl Drop for SimProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
