//! Writing a command's output to stdout, where a reader that went away (`| head`) is not
//! an error.

use anyhow::Context;
use std::io::Write;

/// Writes to stdout; a reader that went away (`| head`) is not an error.
pub fn print_stdout(bytes: &[u8]) -> anyhow::Result<()> {
    let mut out = std::io::stdout().lock();
    match out.write_all(bytes).and_then(|_| out.flush()) {
        Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
            Err(e).context("cannot write to stdout")
        }
        _ => Ok(()),
    }
}
