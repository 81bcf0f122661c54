//! Reading result files back (for `report`, `compare` and `--resume`), tolerating the one
//! damage a crash can do: a last line cut short by a kill mid-write.

use crate::record::{ErrorRecord, Record, RunRecord, SCHEMA, Sample, Summary};
use std::path::{Path, PathBuf};

/// The name used in messages for text that did not come from a file.
const NO_FILE: &str = "<input>";

/// A result file's records, sorted by kind, in file order.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ResultFile {
    /// The header; `None` only for a file with no complete record.
    pub run: Option<RunRecord>,
    pub samples: Vec<Sample>,
    pub errors: Vec<ErrorRecord>,
    /// The last summary in the file (a resumed run appends a newer one).
    pub summary: Option<Summary>,
    /// The last line was cut mid-write and has been dropped.
    pub torn_tail: bool,
    /// Length of the good prefix: truncate the file to this before appending.
    pub valid_bytes: u64,
    /// The good prefix does not end in `\n` (its last record is complete but unterminated):
    /// an appender must write one first.
    pub missing_final_newline: bool,
    /// `ctxbench load` records, in file order.
    pub load: LoadRecords,
    /// `--tasks`: the effective-context records (the last summary's, per task and `all`).
    pub effective_context: Vec<crate::record::EffectiveContextRecord>,
    /// `ctxbench sessions` records.
    pub sessions: crate::sessions::file::SessionsRecords,
}

/// The records only load files hold.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct LoadRecords {
    pub plan: Option<crate::record::load::LoadPlan>,
    pub requests: Vec<crate::record::load::RequestRecord>,
    pub server_metrics: Vec<crate::record::load::ServerMetricsRecord>,
    pub gpu_metrics: Vec<crate::record::load::GpuMetricsRecord>,
    pub cells: Vec<crate::record::load::CellRecord>,
    pub knees: Vec<crate::record::load::KneeRecord>,
}

impl LoadRecords {
    /// The requests of cell `k`, in file order.
    pub fn requests_in<'a>(
        &'a self,
        k: &'a crate::record::load::CellKey,
    ) -> impl Iterator<Item = &'a crate::record::load::RequestRecord> + 'a {
        self.requests.iter().filter(move |q| q.cell.same(k))
    }
}

/// Why a result file was refused.
#[derive(Debug, thiserror::Error)]
pub enum ResultFileError {
    #[error("cannot read {}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{file}: line {line}: {reason}")]
    BadLine {
        file: String,
        line: usize,
        reason: String,
    },
    #[error(
        "{file}: line {line}: unknown record type `{type_name}` (this ctxbench knows run, \
         sample, error, summary, load_plan, request, server_metrics, gpu_metrics, cell, knee \
         and effective_context; is the file from a newer version?)"
    )]
    UnknownType {
        file: String,
        line: usize,
        type_name: String,
    },
    #[error(
        "{file}: line {line}: the first record is `{found}`, not `run`: not a ctxbench \
         result file, or its header was lost"
    )]
    NotRunFirst {
        file: String,
        line: usize,
        found: String,
    },
    #[error(
        "{file}: schema {found} is not supported: this ctxbench reads schema {SCHEMA} \
         (use the ctxbench version that wrote the file)"
    )]
    Schema { file: String, found: String },
    #[error("{file}: line {line}: a second `run` record: one file holds one run")]
    SecondRun { file: String, line: usize },
}

/// Parses a result file's text; messages name the input `<input>`.
pub fn parse(text: &str) -> Result<ResultFile, ResultFileError> {
    parse_bytes(text.as_bytes(), NO_FILE)
}

/// Reads and parses the result file at `path`.
pub fn read(path: impl AsRef<Path>) -> Result<ResultFile, ResultFileError> {
    let path = path.as_ref();
    let bytes = std::fs::read(path).map_err(|source| ResultFileError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    parse_bytes(&bytes, &path.display().to_string())
}

/// Parses a result file's bytes; `file` names it in messages.
///
/// Bytes rather than text, because a write cut mid-character leaves invalid UTF-8 in the
/// last line only. Blank lines are skipped.
pub fn parse_bytes(bytes: &[u8], file: &str) -> Result<ResultFile, ResultFileError> {
    let mut out = ResultFile::default();
    let mut start = 0usize;
    let mut line_no = 0usize;
    while start < bytes.len() {
        line_no += 1;
        let (line, end, terminated) = match bytes[start..].iter().position(|&b| b == b'\n') {
            Some(i) => (&bytes[start..start + i], start + i + 1, true),
            None => (&bytes[start..], bytes.len(), false),
        };
        let bad = |reason: String| ResultFileError::BadLine {
            file: file.to_string(),
            line: line_no,
            reason,
        };
        let text = match std::str::from_utf8(line) {
            Ok(t) => t,
            Err(_) if !terminated => {
                out.torn_tail = true;
                break;
            }
            Err(e) => {
                return Err(bad(format!(
                    "invalid UTF-8 at byte {} of the line",
                    e.valid_up_to()
                )));
            }
        };
        if text.trim().is_empty() {
            // Unterminated whitespace is left outside the good prefix, to be truncated.
            if terminated {
                out.valid_bytes = end as u64;
            }
            start = end;
            continue;
        }
        let record = match serde_json::from_str::<Record>(text) {
            Ok(r) => r,
            Err(e) => {
                let value = serde_json::from_str::<serde_json::Value>(text);
                if value.is_err() && !terminated {
                    // A JSON object cut anywhere is not JSON: this is a torn write.
                    out.torn_tail = true;
                    break;
                }
                return Err(diagnose(value.ok(), e, file, line_no, out.run.is_none()));
            }
        };
        match record {
            Record::Run(run) => {
                if out.run.is_some() {
                    return Err(ResultFileError::SecondRun {
                        file: file.to_string(),
                        line: line_no,
                    });
                }
                if run.schema != SCHEMA {
                    return Err(ResultFileError::Schema {
                        file: file.to_string(),
                        found: run.schema.to_string(),
                    });
                }
                out.run = Some(run);
            }
            other if out.run.is_none() => {
                return Err(ResultFileError::NotRunFirst {
                    file: file.to_string(),
                    line: line_no,
                    found: type_name(&other).to_string(),
                });
            }
            Record::Sample(s) => out.samples.push(*s),
            Record::Error(e) => out.errors.push(e),
            Record::Summary(s) => out.summary = Some(s),
            Record::LoadPlan(p) => out.load.plan = Some(p),
            Record::Request(r) => out.load.requests.push(*r),
            Record::ServerMetrics(m) => out.load.server_metrics.push(m),
            Record::GpuMetrics(m) => out.load.gpu_metrics.push(m),
            Record::Cell(c) => out.load.cells.push(*c),
            Record::Knee(k) => out.load.knees.push(k),
            Record::EffectiveContext(e) => out.effective_context.push(e),
            Record::SessionsPlan(p) => out.sessions.plan = Some(p),
            Record::Turn(t) => out.sessions.turns.push(*t),
            Record::SessionsCell(c) => out.sessions.cells.push(*c),
            Record::SessionCapacity(c) => out.sessions.capacity = Some(c),
        }
        out.valid_bytes = end as u64;
        out.missing_final_newline = !terminated;
        start = end;
    }
    Ok(out)
}

fn type_name(r: &Record) -> &'static str {
    match r {
        Record::Run(_) => "run",
        Record::Sample(_) => "sample",
        Record::Error(_) => "error",
        Record::Summary(_) => "summary",
        Record::LoadPlan(_) => "load_plan",
        Record::Request(_) => "request",
        Record::ServerMetrics(_) => "server_metrics",
        Record::GpuMetrics(_) => "gpu_metrics",
        Record::Cell(_) => "cell",
        Record::Knee(_) => "knee",
        Record::EffectiveContext(_) => "effective_context",
        Record::SessionsPlan(_) => "sessions_plan",
        Record::Turn(_) => "turn",
        Record::SessionsCell(_) => "sessions_cell",
        Record::SessionCapacity(_) => "session_capacity",
    }
}

/// The clearest reason a line is not a record: not JSON, no type, an unknown type, a
/// header of another schema, or a field serde refused.
fn diagnose(
    value: Option<serde_json::Value>,
    err: serde_json::Error,
    file: &str,
    line: usize,
    first: bool,
) -> ResultFileError {
    let bad = |reason: String| ResultFileError::BadLine {
        file: file.to_string(),
        line,
        reason,
    };
    let Some(value) = value else {
        return bad(format!("not JSON: {err}"));
    };
    let Some(obj) = value.as_object() else {
        return bad("not a JSON object".to_string());
    };
    let Some(type_name) = obj.get("type").and_then(|t| t.as_str()) else {
        return bad("no string `type` field".to_string());
    };
    if !matches!(type_name, "run" | "sample" | "error" | "summary") {
        return ResultFileError::UnknownType {
            file: file.to_string(),
            line,
            type_name: type_name.to_string(),
        };
    }
    if first && type_name != "run" {
        return ResultFileError::NotRunFirst {
            file: file.to_string(),
            line,
            found: type_name.to_string(),
        };
    }
    if type_name == "run" {
        // A header of another schema may not fit this one's types: say so, not which field.
        match obj.get("schema") {
            Some(s) if s.as_u64() != Some(SCHEMA as u64) => {
                return ResultFileError::Schema {
                    file: file.to_string(),
                    found: s.to_string(),
                };
            }
            None => return bad("`run` record without `schema`".to_string()),
            _ => {}
        }
    }
    bad(format!("bad `{type_name}` record: {err}"))
}
