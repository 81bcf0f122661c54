//! The result file: every record appended and flushed as it is made, synced per point, so a
//! crash loses at most the request in flight; `--resume` continues a file after checking it
//! belongs to the same run.

use crate::record::{Record, RunRecord};
use crate::resultfile::{self, ResultFile};
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::path::{Path, PathBuf};

pub struct ResultWriter {
    file: Option<(File, PathBuf)>,
}

impl ResultWriter {
    /// No file: records are only kept in memory.
    pub fn none() -> Self {
        ResultWriter { file: None }
    }

    /// A new file (refusing to overwrite an existing non-empty one).
    pub fn create(path: &Path) -> anyhow::Result<Self> {
        if path.metadata().map(|m| m.len() > 0).unwrap_or(false) {
            anyhow::bail!(
                "--out {}: the file exists; pass --resume to continue it or choose another name",
                path.display()
            );
        }
        let file = OpenOptions::new()
            .create(true)
            .truncate(true)
            .write(true)
            .open(path)
            .map_err(|e| anyhow::anyhow!("--out {}: cannot write: {e}", path.display()))?;
        Ok(ResultWriter {
            file: Some((file, path.to_path_buf())),
        })
    }

    /// Continue an existing file: drop a torn last line, check the run matches.
    ///
    /// A file a crash left with no complete record (empty, or its header cut mid-write) is
    /// started afresh: the run record is written and nothing is resumed.
    pub fn resume(path: &Path, run: &RunRecord) -> anyhow::Result<(Self, ResultFile)> {
        let existing = resultfile::read(path).map_err(|e| anyhow::anyhow!("--resume: {e}"))?;
        let Some(old) = &existing.run else {
            if !only_a_torn_header(path)? {
                anyhow::bail!(
                    "--resume: {} has no run record; it is not a ctxbench result file",
                    path.display()
                );
            }
            let file = OpenOptions::new()
                .write(true)
                .truncate(true)
                .open(path)
                .map_err(|e| anyhow::anyhow!("--out {}: cannot write: {e}", path.display()))?;
            let mut w = ResultWriter {
                file: Some((file, path.to_path_buf())),
            };
            w.append(&Record::Run(run.clone()))?;
            w.sync()?;
            return Ok((w, existing));
        };
        check_same_run(old, run).map_err(|why| {
            anyhow::anyhow!(
                "--resume: {} was written for a different {why}; use a new --out file",
                path.display()
            )
        })?;
        let file = OpenOptions::new()
            .write(true)
            .open(path)
            .map_err(|e| anyhow::anyhow!("--out {}: cannot write: {e}", path.display()))?;
        // Cut a torn tail (a line half-written at a crash) before appending.
        file.set_len(existing.valid_bytes)?;
        let mut file = file;
        use std::io::Seek;
        file.seek(std::io::SeekFrom::End(0))?;
        // A last record complete but unterminated: end its line before appending.
        if existing.missing_final_newline {
            file.write_all(b"\n")
                .map_err(|e| anyhow::anyhow!("writing {}: {e}", path.display()))?;
        }
        Ok((
            ResultWriter {
                file: Some((file, path.to_path_buf())),
            },
            existing,
        ))
    }

    pub fn append(&mut self, record: &Record) -> anyhow::Result<()> {
        if let Some((f, path)) = &mut self.file {
            f.write_all(record.to_line().as_bytes())
                .and_then(|_| f.flush())
                .map_err(|e| anyhow::anyhow!("writing {}: {e}", path.display()))?;
        }
        Ok(())
    }

    /// Make what was written durable (once per point).
    pub fn sync(&mut self) -> anyhow::Result<()> {
        if let Some((f, path)) = &mut self.file {
            f.sync_data()
                .map_err(|e| anyhow::anyhow!("syncing {}: {e}", path.display()))?;
        }
        Ok(())
    }

    pub fn path(&self) -> Option<&Path> {
        self.file.as_ref().map(|(_, p)| p.as_path())
    }
}

/// Whether the file holds nothing but whitespace or the start of a run record cut short:
/// what a crash between creating the file and writing its header leaves. Anything else
/// without a run record may be someone's file, and is never overwritten.
fn only_a_torn_header(path: &Path) -> anyhow::Result<bool> {
    let bytes = std::fs::read(path)
        .map_err(|e| anyhow::anyhow!("--resume: cannot read {}: {e}", path.display()))?;
    let text = bytes.trim_ascii();
    let head: &[u8] = br#"{"type":"run""#;
    Ok(text.is_empty()
        || (!text.contains(&b'\n') && (text.starts_with(head) || head.starts_with(text))))
}

/// Same target and configuration, lengths aside (a resumed sweep may add lengths).
fn check_same_run(old: &RunRecord, new: &RunRecord) -> Result<(), String> {
    if old.schema != new.schema {
        return Err(format!("schema ({} vs {})", old.schema, new.schema));
    }
    // The built-in simulator listens on a fresh port each run: its settings identify it.
    let both_sim = old.config.simulator.is_some() && new.config.simulator.is_some();
    if old.target.url != new.target.url && !both_sim {
        return Err(format!("target ({} vs {})", old.target.url, new.target.url));
    }
    if old.target.api != new.target.api || old.target.model != new.target.model {
        return Err(format!(
            "API or model ({} {:?} vs {} {:?})",
            old.target.api, old.target.model, new.target.api, new.target.model
        ));
    }
    let mut a = old.config.clone();
    let mut b = new.config.clone();
    a.lengths.clear();
    b.lengths.clear();
    a.rtt_s = None;
    b.rtt_s = None;
    if a != b {
        return Err(format!(
            "configuration ({} vs {})",
            serde_json::to_string(&a).unwrap_or_default(),
            serde_json::to_string(&b).unwrap_or_default()
        ));
    }
    Ok(())
}
