//! Running the `ctxbench` binary from tests, bounded in time.

use std::process::{Command, Output, Stdio};
use std::time::Duration;

pub fn ctxbench() -> Command {
    Command::new(env!("CARGO_BIN_EXE_ctxbench"))
}

/// Run the binary, killing it if it outlives `limit` (a hang fails the test, not CI).
pub fn run_bounded(cmd: &mut Command, limit: Duration) -> Output {
    let child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("binary starts");
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(limit) {
        Ok(out) => out.expect("binary runs"),
        Err(_) => {
            let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
            panic!("ctxbench did not finish within {limit:?}");
        }
    }
}

pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Run the binary with `args` to completion; panics with its stderr unless it succeeds.
pub fn run_ok(args: &[&str]) -> Output {
    let out = ctxbench().args(args).output().expect("binary runs");
    assert!(out.status.success(), "{}", text(&out.stderr));
    out
}
