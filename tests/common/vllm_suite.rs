//! vLLM servers that outlive the test binary that started them, for a later binary in the
//! same suite run: `scripts/test.sh` runs vLLM's peer tests and its twin as two `cargo test`
//! runs, and both use the tiny model's main server. A server is listed in the folder
//! `CTXBENCH_VLLM_SERVERS` names, one file per configuration (its process group, URL and the
//! configuration it was started with); the script kills what the folder lists when it ends.

use std::io::Write;
use std::path::{Path, PathBuf};

/// The folder that lists the suite's servers, when a suite run names one.
pub fn dir() -> Option<PathBuf> {
    std::env::var_os("CTXBENCH_VLLM_SERVERS").map(PathBuf::from)
}

/// Held while a binary looks a server up or starts one: an exclusive lock on a file in
/// `dir`, so that two binaries never start the same configuration twice.
pub fn lock(dir: &Path) -> std::fs::File {
    std::fs::create_dir_all(dir).unwrap_or_else(|e| panic!("cannot create {}: {e}", dir.display()));
    let path = dir.join(".lock");
    super::lock_file(&path).unwrap_or_else(|e| panic!("cannot lock {}: {e}", path.display()))
}

/// The file that lists the server for `key` (the configuration as the server was launched).
pub fn entry(dir: &Path, key: &str) -> PathBuf {
    // FNV-1a: stable across binaries and toolchains, unlike std's hasher.
    let hash = key.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    });
    dir.join(format!("{hash:016x}.server"))
}

/// The process group and URL `entry` lists, if it lists them for exactly `key` and that
/// process is alive.
pub fn find(entry: &Path, key: &str) -> Option<(u32, String)> {
    let text = std::fs::read_to_string(entry).ok()?;
    let mut lines = text.lines();
    let (pid, url) = lines.next()?.split_once(' ')?;
    let pid: u32 = pid.parse().ok()?;
    // SAFETY: signal 0 only checks that the process exists.
    let alive = unsafe { libc::kill(pid as libc::pid_t, 0) } == 0;
    (lines.next() == Some(key) && alive).then(|| (pid, url.to_string()))
}

/// List the server (`pid` leads its process group) for `key`, replacing any older entry.
pub fn register(entry: &Path, pid: u32, url: &str, key: &str) {
    let tmp = entry.with_extension("tmp");
    let mut f = std::fs::File::create(&tmp)
        .unwrap_or_else(|e| panic!("cannot create {}: {e}", tmp.display()));
    writeln!(f, "{pid} {url}\n{key}")
        .and_then(|()| std::fs::rename(&tmp, entry))
        .unwrap_or_else(|e| panic!("cannot write {}: {e}", entry.display()));
}
