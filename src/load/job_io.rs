//! `load --log FILE` and `--print-out`: a run whose stdout is its result file and nothing
//! else, without a shell around it (the Kubernetes Job's exec form in a `FROM scratch` image,
//! collected with `kubectl logs`, which mixes stdout and stderr).

use anyhow::Context;
use std::fs::File;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};

/// While alive, this process's stderr (fd 2: every `eprintln!`, from any thread) writes to a
/// file; [`StderrToFile::restore`] points fd 2 back at the original stderr.
pub struct StderrToFile {
    path: PathBuf,
    saved: OwnedFd,
}

impl StderrToFile {
    /// Creates (truncates) `path` and points stderr at it.
    pub fn open(path: &Path) -> anyhow::Result<Self> {
        let file = File::create(path).with_context(|| format!("--log {}", path.display()))?;
        let saved = rustix::io::dup(std::io::stderr()).context("--log: cannot dup stderr")?;
        rustix::stdio::dup2_stderr(&file).context("--log: cannot redirect stderr")?;
        Ok(Self {
            path: path.to_path_buf(),
            saved,
        })
    }

    /// Points stderr back where it was; with `replay`, copies the log onto it (a failed run's
    /// log is what the reader of stderr needs).
    pub fn restore(self, replay: bool) -> anyhow::Result<()> {
        rustix::stdio::dup2_stderr(&self.saved).context("--log: cannot restore stderr")?;
        if replay {
            let log = std::fs::read(&self.path)
                .with_context(|| format!("--log {}", self.path.display()))?;
            use std::io::Write;
            let mut err = std::io::stderr().lock();
            // Best effort: the run's own outcome is what matters from here.
            let _ = err.write_all(&log).and_then(|_| err.flush());
        }
        Ok(())
    }
}

/// `--print-out`: the result file, as written, on stdout.
pub fn print_out(path: &Path) -> anyhow::Result<()> {
    let bytes = std::fs::read(path).with_context(|| format!("--print-out: {}", path.display()))?;
    crate::stdout::print_stdout(&bytes)
}
